"""Each row's position among a grouping's public keys, and hash counts of listed keys, as
the column's type matches them (kept per batch, so a query's aggregates look keys up once)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.engines.base import NO_MATCH, canonical_key
from pinqpy.engines.pandas.frames import MaskedFrame
from pinqpy.engines.pandas.hashing import all_hashable, hash_counts, unhashable_mask
from pinqpy.expr.types import series_type
from pinqpy.plan.batch import batch_memo
from pinqpy.plan.grouping import Grouping

__all__ = [
    "counts_per_group",
    "group_count",
    "group_index",
    "has_group_index",
    "key_positions",
    "listed_key_counts",
]


def has_group_index(rel: MaskedFrame, grouping: Grouping) -> bool:
    memo = batch_memo()
    return memo is not None and ("pandas-codes", id(rel), grouping) in memo


def group_index(rel: MaskedFrame, grouping: Grouping | None) -> np.ndarray:
    """Per row: the position of its key in ``grouping.keys``, or -1 (not counted).

    Kept in the current batch, so a query's aggregates over one grouping look keys up once.
    """
    memo = batch_memo()
    slot = ("pandas-codes", id(rel), grouping)
    if memo is not None and slot in memo:
        return memo[slot][1]  # type: ignore[no-any-return]
    n = len(rel.df)
    if grouping is None:
        codes = np.zeros(n, dtype=np.int64)
    elif len(grouping.columns) == 1:
        codes = key_positions(rel.df[grouping.columns[0]], grouping.keys)
    else:
        codes = _multi_key_positions(rel.df, grouping)
    if rel.mask is not None:
        codes = np.where(rel.mask, codes, -1)
    if memo is not None:
        memo[slot] = (rel, codes)  # holding rel keeps its id from being reused
    return codes


def _canonical_keys(keys: tuple[Hashable, ...], kind: str) -> tuple[dict[Any, int], int]:
    """The listed keys in their canonical spelling for a column of ``kind``: the non-NULL ones
    mapped to their first position in ``keys``, and the position of the NULL key (-1 if
    none). Keys no value of the column can equal are left out."""
    plain: dict[Any, int] = {}
    null_at = -1
    for i, key in enumerate(keys):
        c = canonical_key(key, kind)
        if c is None:
            null_at = i if null_at < 0 else null_at
        elif c is not NO_MATCH:
            plain.setdefault(c, i)
    return plain, null_at


# Column kinds whose values pandas looks up in an index of the canonical keys exactly as the
# canonical keys compare (-0.0 finds 0.0); other columns look each distinct value up.
_INDEXED_KINDS = frozenset({"int", "float", "bool", "str", "datetime"})


def _unique_positions(uniques: Any, kind: str, plain: dict[Any, int], obj: bool) -> np.ndarray:
    """Per distinct value of a column (NULL excluded): its key's position, or -1."""
    if obj or kind not in _INDEXED_KINDS:
        # Untyped (object) values compare as Python does (1 == 1.0 == True): canonical
        # spellings are looked up one distinct value at a time.
        return np.array([plain.get(canonical_key(u, kind), -1) for u in uniques], dtype=np.int64)
    if not plain:
        return np.full(len(uniques), -1, dtype=np.int64)
    where = np.array([*plain.values(), -1], dtype=np.int64)
    return where[pd.Index(list(plain)).get_indexer(uniques)]


def key_positions(col: pd.Series, keys: tuple[Hashable, ...]) -> np.ndarray:
    """Per value of ``col``: its position in ``keys``, or -1. A key matches the values equal
    to it under the column's type (``True`` and ``1.0`` find 1 in an integer column); a NULL
    key (None, NaN, NA, NaT) matches every NULL value, whatever its spelling."""
    kind = series_type(col)
    plain, null_at = _canonical_keys(keys, kind)
    if isinstance(col.dtype, pd.CategoricalDtype):
        # The codes are the factorization already: look each category up once. Code -1
        # (NULL) picks the appended NULL key's position.
        cats = col.dtype.categories
        table = _unique_positions(cats, kind, plain, cats.dtype == object)
        return np.append(table, null_at)[col.cat.codes.to_numpy()]
    if kind == "str" and _is_arrow_text(col.dtype):
        return _arrow_key_positions(col, plain, null_at)
    # Look up each distinct value once: much faster than a lookup per row (string columns
    # above all), with the same matching, since every row shares its distinct value's answer.
    try:
        row_codes, uniques = pd.factorize(col)  # every NULL-like value is code -1
    except (TypeError, ValueError):
        uniques = None
    if uniques is None or not all_hashable(uniques):
        bad = unhashable_mask(col)
        if bad is not None:  # a value that cannot be hashed matches no key, not even NULL
            return np.where(bad, -1, key_positions(col.where(~bad, None), keys))
        row_codes, uniques = pd.factorize(col)
    table = _unique_positions(uniques, kind, plain, col.dtype == object)
    return np.append(table, null_at)[row_codes]


def _is_arrow_text(dtype: Any) -> bool:
    """Text stored as Arrow strings: pandas 3's default ``str`` or ``string[pyarrow]``."""
    return isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow"


def _arrow_key_positions(col: pd.Series, plain: dict[Any, int], null_at: int) -> np.ndarray:
    """:func:`key_positions` for Arrow text: Arrow looks every row up among the listed
    (canonical, exact) strings, which is faster than factorizing the column first."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = np.full(len(col), -1, dtype=np.int64)
    if plain:
        text = col.array.__arrow_array__()
        found = pc.index_in(text, value_set=pa.array(list(plain), type=text.type))
        # Unlisted and NULL values find nothing (NULL); they take the slot past the keys.
        where = np.array([*plain.values(), -1], dtype=np.int64)
        out = where[pc.fill_null(found, len(plain)).to_numpy()]
    if null_at >= 0:
        out[col.isna().to_numpy()] = null_at
    return out


def _multi_key_positions(df: pd.DataFrame, grouping: Grouping) -> np.ndarray:
    """:func:`key_positions` for keys of several columns: each column's values are matched
    against that column's key values, then the rows' tuples of matches against the keys'."""
    n_keys = len(grouping.keys)
    key_codes = np.zeros((n_keys, len(grouping.columns)), dtype=np.int64)
    usable = np.ones(n_keys, dtype=bool)
    row_codes = []
    for j, c in enumerate(grouping.columns):
        col = df[c]
        kind = series_type(col)
        level: dict[Any, int] = {}
        for i, key in enumerate(grouping.keys):
            v = canonical_key(key[j], kind)  # type: ignore[index]
            if v is NO_MATCH:
                usable[i] = False
                continue
            key_codes[i, j] = level.setdefault(v, len(level))
        row_codes.append(key_positions(col, tuple(level)))
    first: dict[tuple[int, ...], int] = {}
    for i in np.flatnonzero(usable):
        first.setdefault(tuple(key_codes[i].tolist()), int(i))
    if not first:
        return np.full(len(df), -1, dtype=np.int64)
    index = pd.MultiIndex.from_tuples(list(first))
    rows = pd.MultiIndex.from_arrays(row_codes)
    where = np.array([*first.values(), -1], dtype=np.int64)
    out = where[index.get_indexer(rows)]
    unmatched = np.zeros(len(df), dtype=bool)
    for codes in row_codes:
        unmatched |= codes < 0
    out[unmatched] = -1
    return out


def listed_key_counts(col: pd.Series, keys: tuple[Hashable, ...]) -> np.ndarray | None:
    """How many values of ``col`` equal each key (a NULL key counts NULL values), from one
    hash count of the column and a lookup of its few distinct values among the keys: the
    work of ``value_counts``, with no per-row key positions. Matching is that of
    :func:`key_positions` (each distinct value answers for all its rows). None when the
    column holds a value that cannot be hashed (the caller then takes the positions path)."""
    kind = series_type(col)
    plain, null_at = _canonical_keys(keys, kind)
    out = np.zeros(len(keys), dtype=np.int64)
    if plain:
        sizes = hash_counts(col, dropna=True)  # NULL excluded
        if sizes is None:
            return None
        pos = _unique_positions(sizes.index, kind, plain, col.dtype == object)
        hit = pos >= 0
        # Several distinct values can find one key (1 and 1.0 in an untyped column).
        np.add.at(out, pos[hit], sizes.to_numpy(dtype=np.int64)[hit])
    if null_at >= 0:
        out[null_at] = int(col.isna().sum())
    return out


def group_count(grouping: Grouping | None) -> int:
    return 1 if grouping is None else len(grouping.keys)


def counts_per_group(codes: np.ndarray, k: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Row counts (or sums of ``weights``) per group position; position ``k`` is dropped."""
    out = np.bincount(codes, weights=weights, minlength=k + 1)[:k]
    return out if weights is not None else out.astype(np.int64)
