"""SQL aggregates: one aggregate call becomes one prepared measurement.

Takes an aggregate call as the release computes it (after :mod:`.contributions` has decided
how it reads the rows), the relation it reads, the GROUP BY key columns and the
measurement's share of the budget; returns the :class:`~pinqpy.pipeline.prepare.Prepared`
measurement of :mod:`pinqpy.pipeline.prepare`, the same one ``PrivateFrame``'s method of
that name builds. Nothing is charged or read here.

This is where SQL's aggregate names meet pinqpy's mechanisms: ``COUNT`` (also DISTINCT),
``SUM``, ``AVG``, the variances and standard deviations, and the quantiles (``MEDIAN``,
``PERCENTILE``, ``MIN`` and ``MAX`` as quantiles near 0 and 1). Bounds come inline
(``SUM(x, lo, hi)``) or from the table's declared bounds, never from the data.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pinqpy.errors import PrivacyError
from pinqpy.expr.ast import Call, Column, Expr, IsNull, canonical_aggregate
from pinqpy.expr.bounds import derive_bounds
from pinqpy.pipeline.prepare import (
    Prepared,
    prepare_count,
    prepare_mean,
    prepare_quantile,
    prepare_sum,
    prepare_variance,
)
from pinqpy.pipeline.relation import Relation
from pinqpy.sql.compiler.clauses import constant_argument
from pinqpy.sql.compiler.context import Context, Scratch

__all__ = ["MAX_Q", "MIN_Q", "Share", "prepare"]

# MIN and MAX are released as private quantiles this close to 0 and 1 (SQL.md): exactly 0 or
# 1 would make every candidate beyond the extreme value score equally well.
MIN_Q, MAX_Q = 0.01, 0.99

_VARIANCES = ("VARIANCE", "STDDEV", "VAR_POP", "STDDEV_POP")
_QUANTILES = ("MEDIAN", "PERCENTILE", "QUANTILE", "MIN", "MAX")


@dataclass(frozen=True)
class Share:
    """One measurement's share of the query's budget: its epsilon, its delta (Gaussian
    noise; None for Laplace) and whether quantiles spend part of it on an interval
    (``OPTIONS (quantile_ci = true)``)."""

    epsilon: Fraction
    delta: Fraction | None
    quantile_ci: bool = False


def prepare(
    ctx: Context,
    call: Call,
    frame: Relation,
    key_cols: tuple[str, ...],
    share: Share,
    scratch: Scratch,
) -> tuple[Prepared, Scratch]:
    """The measurement of ``call`` over ``frame`` (per group of ``key_cols``), and the
    scratch after the name a COUNT(DISTINCT expression) takes."""
    name = canonical_aggregate(call.name)
    eps, delta = share.epsilon, share.delta
    whole = not key_cols  # a public row count is the whole table's, never a group's
    if name == "COUNT":
        return _count(call, frame, key_cols, share, scratch)
    value = call.args[0]
    extra = [constant_argument(ctx, a, call) for a in call.args[1:]]
    level = None
    if name in ("PERCENTILE", "QUANTILE"):
        level, extra = extra[0], extra[1:]
    cands = _key_candidates(name, value, frame, extra)
    bounds = None if cands is not None else _bounds(ctx, call, value, frame, extra)
    if name == "SUM":
        return prepare_sum(frame, value, eps, bounds, delta, whole=whole), scratch
    if name == "AVG":
        return prepare_mean(frame, value, eps, bounds, delta, whole=whole), scratch
    if name in _VARIANCES:
        # VARIANCE/STDDEV (and VAR, VAR_SAMP, STD, STDDEV_SAMP) are the sample forms, as
        # in SQL; the _POP forms divide by n. The same noisy count, sum and sum of squares
        # serve both (post-processing), so the charge is the same.
        stddev = name in ("STDDEV", "STDDEV_POP")
        ddof = 0 if name.endswith("_POP") else 1
        prepared = prepare_variance(
            frame, value, eps, bounds, delta, stddev=stddev, ddof=ddof, whole=whole
        )
        return prepared, scratch
    _no_delta(call, delta)
    if name == "MEDIAN":
        level = 0.5
    elif name in ("PERCENTILE", "QUANTILE"):
        if not isinstance(level, int | float) or not 0 <= level <= 1:
            raise ctx.syntax(f"{name}'s level must be a number between 0 and 1", call.pos)
    elif name in ("MIN", "MAX"):
        level = MIN_Q if name == "MIN" else MAX_Q
    else:
        raise ctx.syntax(f"{name} is not a noisy aggregate pinqpy can release", call.pos)
    ci = share.quantile_ci
    return prepare_quantile(frame, value, level, eps, bounds, cands, ci, whole=whole), scratch


def _count(
    call: Call, frame: Relation, key_cols: tuple[str, ...], share: Share, scratch: Scratch
) -> tuple[Prepared, Scratch]:
    eps, delta = share.epsilon, share.delta
    if call.star:
        return prepare_count(frame, eps, delta, whole=not key_cols), scratch
    arg = call.args[0]
    if call.distinct:
        if isinstance(arg, Column):
            col, base = arg.name, frame
        else:
            col, scratch = scratch.take("d")
            base = frame.assign({col: arg})
        base = base.select(dict.fromkeys([*key_cols, col]), {}).distinct()
        return prepare_count(base.where(IsNull(Column(col), negated=True)), eps, delta), scratch
    return prepare_count(frame.where(IsNull(arg, negated=True)), eps, delta), scratch


def _no_delta(call: Call, delta: Fraction | None) -> None:
    if delta is not None:
        raise PrivacyError(
            f"{call.name} uses the exponential mechanism and cannot take Gaussian noise; "
            "drop OPTIONS (noise = 'gaussian')"
        )


def _key_candidates(
    name: str, value: Expr, frame: Relation, extra: list[Any]
) -> list[float] | None:
    """A quantile's candidates from the column's declared public keys, when it has no
    bounds (inline or declared) and its keys are at least two numbers.

    Declared keys are public (the table's registration, not its rows), so they may serve
    as the exponential mechanism's candidate grid; their least and greatest values bound
    the answer (:func:`pinqpy.pipeline.prepare.prepare_quantile`). Bounds, when known,
    keep their meaning and their grid.
    """
    if name not in _QUANTILES or extra:
        return None
    if not isinstance(value, Column) or derive_bounds(value, frame.bounds) is not None:
        return None
    keys = frame.keys.get(value.name)
    if not keys:
        return None
    nums = [
        float(k)
        for k in keys
        if isinstance(k, numbers.Real) and not isinstance(k, bool) and math.isfinite(k)
    ]
    if len(nums) != len(keys) or len(set(nums)) < 2:
        return None
    return nums


def _bounds(
    ctx: Context, call: Call, value: Expr, frame: Relation, extra: list[Any]
) -> tuple[float, float]:
    """An aggregate's bounds: inline (``SUM(x, lo, hi)``) or declared for the table."""
    if len(extra) == 2:
        lo, hi = extra
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (lo, hi)):
            raise ctx.syntax(f"{call.name}'s bounds must be numbers", call.pos)
        if lo > hi:
            raise ctx.syntax(f"{call.name}'s bounds have lo > hi; write them as lo, hi", call.pos)
        return (float(lo), float(hi))
    if extra:
        raise ctx.syntax(f"{call.name} takes both bounds or neither", call.pos)
    found = derive_bounds(value, frame.bounds)
    if found is None:
        fix = "declare them for the column when registering the table"
        if isinstance(value, Column):
            flag = f"--bounds {value.name}=LO:HI"
            python = f"bounds={{{value.name!r}: (lo, hi)}}"
        else:
            flag = "--bounds COLUMN=LO:HI for the columns it is computed from"
            python = "bounds={'COLUMN': (lo, hi)}"
        raise PrivacyError(
            f"{call.name}({value.to_sql()}) needs bounds: {fix}, or write them inline: "
            f"{call.name}({value.to_sql()}, lo, hi). Bounds are never read off the data",
            hints={
                "python": fix,
                "magic": f"declare them when registering the table ({python})",
                "shell": f"start the shell with {flag}",
                "cli": f"pass {flag}",
            },
        )
    return found
