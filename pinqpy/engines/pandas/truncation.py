"""Contribution bounds on pandas: which rows a truncation per key keeps, and the bounded
groups of each privacy unit."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pinqpy.engines.pandas.hashing import dense_codes, drop_unhashable, unhashable_rows
from pinqpy.engines.pandas.priorities import RowPriorities, keep_lowest, row_hashes

__all__ = ["bound_groups", "truncate_per_key", "truncation_mask"]


def truncation_mask(
    df: pd.DataFrame, columns: tuple[str, ...], limit: int, drop_null: bool
) -> np.ndarray:
    """Which rows a truncation to ``limit`` rows per key of ``columns`` keeps: per key, the
    rows of lowest priority (:mod:`.priorities`). Rows whose key cannot be hashed are no key's, and
    with ``drop_null`` rows whose key is NULL belong to no one: neither is kept.

    A mask instead of a copy: the kept rows are read later only in the columns a query
    uses. The priorities are those of the eligible rows alone (a row's priority depends on
    its own values and the salt only), so the rows kept are the same either way."""
    ok = np.ones(len(df), dtype=bool)
    if drop_null:
        ok &= df[list(columns)].notna().all(axis=1).to_numpy()
    bad = unhashable_rows(df, columns)
    if bad is not None:
        ok &= ~bad
    mask = np.zeros(len(df), dtype=bool)
    if not ok.any():
        return mask
    if ok.all():
        keep = keep_lowest(dense_codes(df, columns), RowPriorities(df), limit)
    else:
        rows = np.flatnonzero(ok)
        keep = rows[
            keep_lowest(dense_codes(df.take(rows), columns), RowPriorities(df.take(rows)), limit)
        ]
    mask[keep] = True
    return mask


def truncate_per_key(df: pd.DataFrame, columns: tuple[str, ...], limit: int) -> pd.DataFrame:
    """The rows of :func:`truncation_mask` (a NULL key is one key), as a frame."""
    mask = truncation_mask(df, columns, limit, drop_null=False)
    return df.loc[mask].reset_index(drop=True)


def bound_groups(
    df: pd.DataFrame, unit: str, by: tuple[str, ...], max_groups: int, per_group: int | None
) -> pd.DataFrame:
    """Per ``unit``: the ``max_groups`` values of ``by`` of lowest salted-hash priority, then
    the ``per_group`` rows of lowest priority of each (all when None).

    A group's priority is the smallest salted hash of its rows' ``(unit, by)`` values (all
    equal but for the spelling of NULL), so it depends on the unit's own rows and the salt
    alone, as the truncation of :func:`truncate_per_key` does for rows.
    """
    pairs = (unit, *by)
    df = drop_unhashable(df, pairs)
    if len(df) == 0:
        return df
    codes = dense_codes(df, pairs)
    n_groups = int(codes.max()) + 1
    group_prio = np.full(n_groups, np.iinfo(np.uint64).max, dtype=np.uint64)
    # Every row of a group has the same (unit, by) values, so the same hash of them.
    np.minimum.at(group_prio, codes, row_hashes(df[list(pairs)]))
    group_unit = np.empty(n_groups, dtype=np.int64)
    group_unit[codes] = dense_codes(df, (unit,))
    kept = np.zeros(n_groups, dtype=bool)
    kept[keep_lowest(group_unit, group_prio, max_groups)] = True
    rows = kept[codes]
    if not rows.all():
        df, codes = df.loc[rows].reset_index(drop=True), codes[rows]
    if per_group is None or len(df) == 0:
        return df
    keep = keep_lowest(codes, RowPriorities(df), per_group)
    return df.take(keep).reset_index(drop=True)
