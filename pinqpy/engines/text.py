"""Text no engine can encode, made valid when a pandas table is wrapped, in vectorised passes.

A Python string may hold a lone surrogate (``"\\ud800"``), which has no UTF-8 spelling:
pandas' text arrays, DuckDB and Spark all refuse it, and only when a query reaches that row.
So every pandas table is cleaned when it is wrapped, before any query: each such string
(also inside a list that explode may read) is replaced by its UTF-16 reading, a surrogate
pair joined into its character and each lone surrogate replaced by U+FFFD. The mapping looks
at one value only (:func:`pinqpy.expr.types.valid_text`, which literals are read through
too), and strings that are valid text are untouched (the very objects are kept).

**Linear, with a small constant.** The check runs before any query and never charges, but a
table must not take minutes to wrap: no Python code runs per value. The values of an object
array are classified at C speed (pandas' type inference, then each value's type, factorised),
strings are checked by joining them (:func:`_valid_strings`), and the items of every list,
tuple, set or frozenset are gathered into one flat array (``itertools.chain``), checked the
same way one level down, 20 levels deep (each explode reads one level). Python code runs per
value only for the values that change, and per container only for object ``ndarray`` values
(and for the containers holding a value that changes). A column of one 10-million-item list
is checked in one flat pass over its items.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.expr.types import valid_text

__all__ = ["clean_text", "clean_value"]

# Values per join in :func:`_valid_strings`: about a megabyte of text at a time, so the check
# never holds a copy of a large column's text.
_TEXT_CHUNK = 100_000
# Containers are cleaned this many levels deep (each explode reads one level).
_DEPTH = 20
# What pandas' type inference (NULLs skipped) calls an array holding no string and no
# container: nothing in it can need cleaning.
_NO_TEXT = frozenset(
    {"integer", "floating", "mixed-integer-float", "boolean", "datetime64", "datetime", "date"}
    | {"timedelta64", "timedelta", "time", "period", "empty", "bytes", "decimal", "complex"}
    | {"interval"}
)
_SETS = (list, tuple, set, frozenset)
_OTHER, _TEXT, _ITEMS, _ARRAY = 0, 1, 2, 3
_TYPE_OF = np.frompyfunc(type, 1, 1)
_IS_NOT = np.frompyfunc(operator.is_not, 2, 1)
_VALID = np.frompyfunc(valid_text, 1, 1)


def clean_value(x: object, depth: int = 0) -> object:
    """``x`` with every string in it valid text (the object itself when it already is).
    Containers are cleaned 20 levels deep (each explode reads one level). The reference
    for one value; :func:`clean_text` does the same to whole columns at once."""
    if isinstance(x, str):
        return valid_text(x)
    if depth > _DEPTH:
        return x
    if isinstance(x, _SETS) or (isinstance(x, np.ndarray) and x.dtype == object):
        items = np.fromiter(x.ravel() if isinstance(x, np.ndarray) else x, dtype=object)
        fixed = _clean_objects(items, depth + 1)
        return x if fixed is None else _rebuilt(x, fixed)
    return x


def _rebuilt(x: Any, items: np.ndarray) -> object:
    """The container ``x`` holding ``items`` instead (a list as a list, an array in its
    shape, other containers through their type)."""
    if isinstance(x, np.ndarray):
        out = np.empty(x.shape, dtype=object)
        out.ravel()[:] = items
        return out
    values = items.tolist()
    if isinstance(x, list):
        return values
    try:
        return type(x)(values)
    except Exception:  # a tuple subclass that cannot be rebuilt from its items
        return tuple(values)


def _valid_strings(objs: np.ndarray) -> bool:
    """Whether every value is a ``str`` (or NULL-like) that is valid text, so cleaning would
    change nothing: an exact check at C speed instead of a Python call per value.

    Joined text is ASCII exactly when every piece is; otherwise its UTF-8 encoding fails
    exactly when some piece holds a surrogate, the only text :func:`valid_text` changes
    (Python never merges a surrogate at the end of one piece with one at the start of the
    next: each stays a separate code point). A join refuses non-strings (TypeError), so a
    chunk with NULL-like values is joined again without them; anything else (numbers,
    containers) answers False.
    """
    for start in range(0, len(objs), _TEXT_CHUNK):
        part = objs[start : start + _TEXT_CHUNK]
        try:
            text = "".join(part)
        except TypeError:
            try:
                text = "".join(part[~pd.isna(part)])
            except TypeError:
                return False
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return False
    return True


def _classes(objs: np.ndarray, depth: int) -> np.ndarray:
    """Each value's class: text, a container to look into (not beyond the depth), an object
    array, or other; from each distinct type once."""
    codes, types = pd.factorize(_TYPE_OF(objs))
    table = np.zeros(len(types) + 1, dtype=np.int8)
    for j, t in enumerate(types):
        if issubclass(t, str):
            table[j] = _TEXT
        elif depth <= _DEPTH and issubclass(t, _SETS):
            table[j] = _ITEMS
        elif depth <= _DEPTH and issubclass(t, np.ndarray):
            table[j] = _ARRAY
    return table[codes]


def _clean_objects(objs: np.ndarray, depth: int) -> np.ndarray | None:
    """The object array ``objs`` (values at ``depth``) cleaned, as a new array, or None when
    no value changes."""
    if len(objs) == 0:
        return None
    if _valid_strings(objs):  # the common case, text with nothing to clean (fails fast else)
        return None
    if pd.api.types.infer_dtype(objs, skipna=True) in _NO_TEXT:
        return None
    cls = _classes(objs, depth)
    out: np.ndarray | None = None
    for which, fix in ((_TEXT, _clean_strings), (_ITEMS, _clean_items), (_ARRAY, _clean_arrays)):
        at = np.flatnonzero(cls == which)
        if len(at) == 0:
            continue
        got = fix(objs[at], depth)
        if got is not None:
            out = objs.copy() if out is None else out
            out[at] = got
    return out


def _clean_strings(strs: np.ndarray, depth: int) -> np.ndarray | None:
    if _valid_strings(strs):
        return None
    return np.asarray(_VALID(strs), dtype=object)


def _clean_items(conts: np.ndarray, depth: int) -> np.ndarray | None:
    """Lists, tuples, sets and frozensets, their items checked in one flat array."""
    sizes = np.fromiter(map(len, conts), dtype=np.int64, count=len(conts))
    flat = np.fromiter(itertools.chain.from_iterable(conts), dtype=object)
    if len(flat) != int(sizes.sum()):  # a container whose len() is not what it holds
        return _one_by_one(conts, depth)
    fixed = _clean_objects(flat, depth + 1)
    if fixed is None:
        return None
    ends = np.cumsum(sizes)
    owner = np.searchsorted(ends, np.flatnonzero(_IS_NOT(fixed, flat).astype(bool)), "right")
    out = conts.copy()
    for j in np.unique(owner).tolist():
        out[j] = _rebuilt(conts[j], fixed[ends[j] - sizes[j] : ends[j]])
    return out


def _clean_arrays(arrays: np.ndarray, depth: int) -> np.ndarray | None:
    """Numpy arrays as values: those of dtype object are looked into one by one."""
    held = [a for a in arrays if a.dtype == object]
    return _one_by_one(arrays, depth) if held else None


def _one_by_one(values: np.ndarray, depth: int) -> np.ndarray | None:
    fixed = [clean_value(v, depth) for v in values]
    if all(a is b for a, b in zip(fixed, values, strict=True)):
        return None
    out = np.empty(len(fixed), dtype=object)
    out[:] = fixed
    return out


def _needs_cleaning(dtype: Any) -> bool:
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        return True
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "python":
        return True
    return isinstance(dtype, pd.CategoricalDtype) and _needs_cleaning(dtype.categories.dtype)


def clean_text(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every string an engine cannot encode made valid (a new frame; ``df``
    itself when nothing needed it)."""
    fixed: dict[int, pd.Series] = {}
    for i, dtype in enumerate(df.dtypes):
        if not _needs_cleaning(dtype):  # typed columns (Arrow text too) hold valid text
            continue
        s = df.iloc[:, i]
        if isinstance(s.dtype, pd.CategoricalDtype):
            # Categories to clean: the column as plain objects, its values cleaned.
            if _clean_objects(np.asarray(s.dtype.categories, dtype=object), 0) is not None:
                objs = s.to_numpy(dtype=object)
                got = _clean_objects(objs, 0)
                fixed[i] = pd.Series(objs if got is None else got, index=s.index, dtype=object)
            continue
        got = _clean_objects(s.to_numpy(dtype=object), 0)
        if got is not None:
            fixed[i] = pd.Series(got, index=s.index, dtype=s.dtype if s.dtype != object else object)
    if not fixed:
        return df
    out = df.copy()
    for i, col in fixed.items():
        out.isetitem(i, col)
    return out
