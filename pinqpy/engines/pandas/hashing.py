"""Keys and rows as pandas hashes them: values that cannot be keys, dense codes per distinct key,
NULL keys dropped."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.engines.base import is_hashable

__all__ = [
    "all_hashable",
    "dense_codes",
    "drop_null_keys",
    "drop_unhashable",
    "first_rows",
    "hash_counts",
    "hashable_frame",
    "hashable_series",
    "rows_per_key",
    "unhashable_mask",
    "unhashable_rows",
]


# -- values that cannot be keys -----------------------------------------------------------
# An ``object`` column may hold unhashable values (lists, dicts, sets, arrays). pandas' hash
# tables refuse them, so every hashing step reads such a column through these helpers: a
# value that cannot be a key matches no key, forms no group and joins nothing, and rows are
# compared (distinct, set operations) through a hashable stand-in equal only to stand-ins of
# equal content. Which rows hold such values never decides whether the read succeeds.
# What pandas' type inference calls an object array of only these values (NULLs skipped):
# each kind is a hashable scalar type, so no value needs to be tried one by one.
_SCALAR_KINDS = frozenset(
    {"string", "bytes", "integer", "floating", "mixed-integer-float", "boolean", "datetime64"}
    | {"datetime", "date", "timedelta64", "timedelta", "time", "period", "empty"}
)


def unhashable_mask(s: pd.Series) -> np.ndarray | None:
    """Where an object column holds a value that cannot be hashed, or None (typed columns and
    columns of hashable values)."""
    if s.dtype != object or len(s) == 0:
        return None
    if pd.api.types.infer_dtype(s.to_numpy(dtype=object), skipna=True) in _SCALAR_KINDS:
        return None  # one typed pass at C speed: strings, numbers and the like all hash
    bad = np.fromiter((not is_hashable(x) for x in s.to_numpy(dtype=object)), bool, len(s))
    return bad if bad.any() else None


def all_hashable(uniques: Any) -> bool:
    """Whether every distinct value pandas found in a column can be hashed. pandas' hash
    tables accept some values Python cannot hash (equal lists form one entry), but such a
    value only ever shares an entry with values equal to it, so its entry's representative
    cannot be hashed either: checking the few distinct values finds them all."""
    if not isinstance(uniques, np.ndarray) or uniques.dtype != object:
        return True
    return all(is_hashable(u) for u in uniques)


def hash_counts(col: pd.Series, dropna: bool) -> pd.Series | None:
    """``col.value_counts`` (unsorted), or None when the column holds a value that cannot be
    hashed (the caller then takes a path that drops such values)."""
    try:
        sizes = col.value_counts(sort=False, dropna=dropna)
    except (TypeError, ValueError):
        return None
    return sizes if all_hashable(sizes.index.to_numpy()) else None


def unhashable_rows(df: pd.DataFrame, columns: Any) -> np.ndarray | None:
    out: np.ndarray | None = None
    for c in columns:
        bad = unhashable_mask(df[c])
        if bad is not None:
            out = bad if out is None else out | bad
    return out


def drop_unhashable(df: pd.DataFrame, columns: Any) -> pd.DataFrame:
    """The rows none of whose ``columns`` holds a value that cannot be a key."""
    bad = unhashable_rows(df, columns)
    return df if bad is None else df.loc[~bad].reset_index(drop=True)


class _Frozen:
    """A hashable stand-in for an unhashable value, equal to stand-ins of equal content."""

    __slots__ = ("key",)

    def __init__(self, x: object) -> None:
        self.key = _freeze(x)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Frozen) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


def _freeze(x: object, depth: int = 0) -> Hashable:
    if is_hashable(x):
        return (0, x)
    if depth > _FREEZE_DEPTH:  # nested too deeply to compare by content: equal to itself
        return (4, type(x).__name__, id(x))
    d = depth + 1
    if isinstance(x, list | tuple):
        return (1, type(x).__name__, tuple(_freeze(v, d) for v in x))
    if isinstance(x, np.ndarray):
        return (1, "ndarray", tuple(_freeze(v, d) for v in x.tolist()))
    if isinstance(x, set):
        return (2, frozenset(_freeze(v, d) for v in x))
    if isinstance(x, dict):
        return (3, frozenset((_freeze(k, d), _freeze(v, d)) for k, v in x.items()))
    return (4, type(x).__name__, id(x))  # no content to compare: equal only to itself


_FREEZE_DEPTH = 20


def hashable_series(s: pd.Series) -> pd.Series:
    """``s`` with every unhashable value replaced by its :class:`_Frozen` stand-in and, in a
    column of objects, every NULL-like value (None, NaN, ``pd.NA``, ``NaT``) by None: whole
    values are compared as the SQL engines compare them, where NULL is one value."""
    bad = unhashable_mask(s)
    na = s.isna().to_numpy() if s.dtype == object else None
    if bad is None and (na is None or not na.any()):
        return s
    objs = s.to_numpy(dtype=object).copy()
    if bad is not None:
        objs[bad] = [_Frozen(x) for x in objs[bad]]
    if na is not None:
        objs[na] = None
    return pd.Series(objs, index=s.index, dtype=object)


def hashable_frame(df: pd.DataFrame, columns: Any = None) -> pd.DataFrame:
    """``df[columns]`` with every unhashable value replaced by its :class:`_Frozen` stand-in
    (the frame itself when there is none)."""
    cols = list(df.columns if columns is None else columns)
    out = df[cols]
    fixed = {}
    for i in range(len(cols)):
        s = out.iloc[:, i]
        h = hashable_series(s)
        if h is not s:
            fixed[i] = h
    if not fixed:
        return out
    out = out.copy()
    for i, h in fixed.items():
        out.isetitem(i, h)
    return out


def first_rows(df: pd.DataFrame) -> np.ndarray:
    """Whether each row is the first of its equal rows (unhashable values compared by
    content)."""
    return ~hashable_frame(df).duplicated().to_numpy()


def dense_codes(df: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """Dense integer codes per distinct key (NULL keys form their own group)."""
    col = df[columns[0]]
    if (
        len(columns) == 1
        and len(col)
        and isinstance(col.dtype, np.dtype)
        and col.dtype.kind in "iu"
    ):
        # Integer ids (the usual privacy unit) in a range not much wider than the rows: each
        # id's rank among the ids present, with no hash table at all.
        v = col.to_numpy()
        lo, hi = int(v.min()), int(v.max())
        if hi - lo <= 4 * len(v) + 1024:
            offset = (v - lo).astype(np.intp, copy=False)
            present = np.zeros(hi - lo + 1, dtype=bool)
            present[offset] = True
            return (np.cumsum(present) - 1)[offset]
    codes, _ = pd.factorize(df[columns[0]], use_na_sentinel=False)
    # Several columns: pair the codes column by column (each pairing < n², so int64 holds it)
    # and re-factorize; a MultiIndex of tuples takes about ten times as long.
    for col in columns[1:]:
        nxt, uniques = pd.factorize(df[col], use_na_sentinel=False)
        codes, _ = pd.factorize(codes.astype(np.int64) * len(uniques) + nxt)
    return codes


def rows_per_key(df: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """How many rows each distinct key of ``columns`` has (in no particular order), grouped
    as :func:`dense_codes` groups them."""
    return np.bincount(dense_codes(df, columns))


def drop_null_keys(df: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """The rows none of whose ``columns`` is NULL-like (None, NaN, NA, NaT)."""
    keep = df[list(columns)].notna().all(axis=1).to_numpy()
    bad = unhashable_rows(df, columns)
    if bad is not None:  # a value that cannot be a key identifies no one either
        keep = keep & ~bad
    return df if keep.all() else df.loc[keep].reset_index(drop=True)
