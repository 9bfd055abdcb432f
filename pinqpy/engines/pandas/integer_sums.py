"""Exact clamped sums of stored int64 columns with integer bounds, without the fixed-point grid."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pinqpy.engines.pandas.frames import MaskedFrame, clip_into
from pinqpy.engines.pandas.key_positions import counts_per_group, group_count, group_index
from pinqpy.expr.ast import Column, Expr
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import PyFunc

__all__ = ["integer_group_sums", "integer_sum", "integer_total"]


def _stored_int64(rel: MaskedFrame, value: Expr | PyFunc, lo: float, hi: float) -> pd.Series | None:
    """The stored int64 column ``value`` names, when the bounds are integers too (the exact
    integer sums below apply); otherwise None."""
    if not isinstance(value, Column) or value.name not in rel.df.columns:
        return None
    if not (float(lo).is_integer() and float(hi).is_integer()):
        return None
    series = rel.df[value.name]
    return series if series.dtype == np.dtype("int64") else None


def integer_total(
    rel: MaskedFrame, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
) -> tuple[int, int] | None:
    """One group's clamped sum of a stored int64 column with integer bounds, as an exact
    Python int, and the row count; None when it does not apply.

    While ``n * max(|lo|, |hi|) < 2**63`` no partial sum overflows ``int64``, so the sum,
    taken without a float copy of the column, is exact."""
    series = _stored_int64(rel, value, lo, hi)
    if grouping is not None or series is None:
        return None
    vals = series.to_numpy()
    if rel.mask is not None:
        vals = vals[rel.mask]
    if max(len(vals), 1) * max(abs(lo), abs(hi)) >= 2**63:
        return None
    return int(clip_into(vals, int(lo), int(hi)).sum()), len(vals)


def integer_sum(
    rel: MaskedFrame, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`integer_total` as a SUM's (sums, counts), the total correctly rounded."""
    got = integer_total(rel, grouping, value, lo, hi)
    if got is None:
        return None
    return np.array([float(got[0])]), np.array([got[1]], dtype=np.int64)


def integer_group_sums(
    rel: MaskedFrame, grouping: Grouping, value: Expr | PyFunc, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per group: the clamped sum of a stored int64 column with integer bounds, and the row
    count; None when it does not apply.

    Every partial sum of ``n`` clamped values is an integer of magnitude at most
    ``n * max(|lo|, |hi|)``; below ``2**53`` the float64 accumulator of ``np.bincount``
    holds each one exactly, so the sums are exact with no fixed-point grid."""
    series = _stored_int64(rel, value, lo, hi)
    if series is None or max(len(series), 1) * max(abs(lo), abs(hi)) >= 2**53:
        return None
    k = group_count(grouping)
    codes = group_index(rel, grouping)
    codes = np.where(codes < 0, k, codes)
    clipped = clip_into(series.to_numpy(), int(lo), int(hi))
    sums = np.bincount(codes, weights=clipped, minlength=k + 1)[:k]
    return sums, counts_per_group(codes, k)
