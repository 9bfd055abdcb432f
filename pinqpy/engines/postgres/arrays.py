"""PostgreSQL arrays as pinqpy's lists: which array types are read, how ``explode`` reads
their items, and how a pandas column of lists is written into one.

An array of a type :mod:`~pinqpy.engines.postgres.types` reads (``integer[]``, ``text[]``,
``double precision[]``, ``timestamp[]``, ...) is a column of pinqpy's list kind, as DuckDB's
lists and Spark's arrays are (schema type ``any``): it passes through every step, reaches
truncation priorities through the row's text, and is no key (a list cannot be one).

``explode(column, max_items=k)`` reads each array as the other engines read a list: its
items in order, each read as its kind's type (NaN, and a timestamp's ±infinity, are NULL),
the NULL items dropped, and the first ``k`` of the rest kept. In SQL, per row::

    flatten (a multidimensional array: its items in storage order)
    -> convert (CAST to bigint[], double precision[], text[], timestamp[], ...)
    -> array_remove NULL (and NaN, ±infinity)
    -> the first k by position (from the array's own lower bound)
    -> unnest

``array_remove`` and a slice are single passes over the array in C: a long array costs a
scan of its items, never a row per item before the cut. Nothing here can raise on data:
``array_remove`` is only given one-dimensional arrays, the slice's upper bound is computed
in BIGINT and clamped to the array's own, and ``numeric`` items (whose cast to a double
raises beyond its range) are converted one by one through the guarded read of
:func:`~pinqpy.engines.postgres.types.column_read`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from pinqpy.engines.postgres.types import column_read
from pinqpy.errors import PinqError

__all__ = ["ARRAY_TYPES", "array_text", "explode_sql", "list_column_type", "list_items"]

_F8 = "double precision"
#: The array type a pandas column of lists is loaded as, by the kind of its items.
ARRAY_TYPES = {
    "int": "bigint[]",
    "float": f"{_F8}[]",
    "bool": "boolean[]",
    "str": "text[]",
}

# What each item type is converted to (an array cast that cannot fail), and the values of
# that type pinqpy reads as NULL besides NULL itself.
_CAST = {
    "smallint": "bigint",
    "integer": "bigint",
    "real": _F8,
    "character": "text",
    "character varying": "text",
    "name": "text",
    "uuid": "text",
    "enum": "text",
    "date": "timestamp",
    "timestamp with time zone": "timestamp",  # in the session's zone: UTC in every read
}
_NULL_LIKE = {
    _F8: ("CAST('NaN' AS DOUBLE PRECISION)",),
    "timestamp": ("CAST('infinity' AS TIMESTAMP)", "CAST('-infinity' AS TIMESTAMP)"),
}
_MAX_ITEMS = 2**31 - 1  # more items than any PostgreSQL array holds


def explode_sql(q: str, item: str, max_items: int) -> tuple[str, str]:
    """The select item that unnests the array column ``q`` of items of type ``item`` as
    explode reads it (module docstring), and the SQL type of the items it gives."""
    k = min(max(int(max_items), 0), _MAX_ITEMS)
    flat = (
        f"(CASE WHEN array_ndims({q}) > 1 THEN ARRAY(SELECT __pinq_x FROM unnest({q}) "
        f"WITH ORDINALITY AS __pinq_u(__pinq_x, __pinq_o) ORDER BY __pinq_o) ELSE {q} END)"
    )
    if item == "numeric":
        read, _ = column_read("__pinq_x", "numeric")
        arr, out = (
            f"ARRAY(SELECT {read} FROM unnest({q}) WITH ORDINALITY AS "
            f"__pinq_u(__pinq_x, __pinq_o) ORDER BY __pinq_o)",
            _F8,
        )
    else:
        out = _CAST.get(item, item)
        arr = flat if out == item else f"CAST({flat} AS {out}[])"
    kept = f"array_remove({arr}, NULL)"
    for v in _NULL_LIKE.get(out, ()):
        kept = f"array_remove({kept}, {v})"
    first = (
        "__pinq_a[array_lower(__pinq_a, 1):CAST(LEAST(array_upper(__pinq_a, 1), "
        f"CAST(array_lower(__pinq_a, 1) AS BIGINT) + {k - 1}) AS INTEGER)]"
    )
    # OFFSET 0: the kept items are computed once per row, not once per use in the slice.
    return f"unnest((SELECT {first} FROM (SELECT {kept} AS __pinq_a OFFSET 0) AS __pinq_s))", out


# -- pandas columns of lists -------------------------------------------------------------------
def _listlike(v: object) -> bool:
    return isinstance(v, list | tuple | set | frozenset | np.ndarray)


def _missing(v: object) -> bool:
    if v is None:
        return True
    try:
        return bool(pd.isna(v))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def list_items(values: pd.Series) -> list[list[object] | None] | None:
    """A column's values as lists (None for a missing one), or None when the column is not
    a column of lists (an object column of lists and missing values only, with a list)."""
    if values.dtype != object:
        return None
    out: list[list[object] | None] = []
    seen = False
    for v in values.to_numpy(dtype=object):
        if _listlike(v):
            seen = True
            out.append(list(np.asarray(v, dtype=object).ravel()) if isinstance(v, np.ndarray)
                       else list(v))  # fmt: skip
        elif _missing(v):
            out.append(None)
        else:
            return None
    return out if seen else None


def _item_kind(items: Sequence[object]) -> str:
    """The kind the items of a column of lists are read as, from their types, as the Spark
    engine reads them: one kind of numbers, text, or booleans; anything else (times, mixed
    kinds, nested lists) as text. No items at all: text."""
    inferred = pd.api.types.infer_dtype(pd.Series(list(items), dtype=object), skipna=True)
    if inferred == "boolean":
        return "bool"
    if inferred == "integer":
        big = any(
            not _missing(v) and not (-(2**63) <= int(v) < 2**63)  # type: ignore[call-overload]
            for v in items
        )
        return "float" if big else "int"
    if inferred in ("floating", "mixed-integer-float", "decimal"):
        return "float"
    return "str"


def list_column_type(values: pd.Series) -> str | None:
    """The array type a pandas column of lists is loaded as (None: not a column of lists)."""
    lists = list_items(values)
    if lists is None:
        return None
    flat = [x for r in lists if r is not None for x in r]
    return ARRAY_TYPES[_item_kind(flat)]


def _item_text(v: object, kind: str) -> str:
    from pinqpy.expr.pandas_eval.values import _any_text

    if _missing(v):
        return "NULL"
    if kind == "bool":
        return "t" if v else "f"
    if kind == "int":
        return str(int(v))  # type: ignore[call-overload]
    if kind == "float":
        x = float(v)  # type: ignore[arg-type]
        return "Infinity" if x == math.inf else "-Infinity" if x == -math.inf else repr(x)
    text = _any_text(v)
    if text is None:
        return "NULL"
    if "\x00" in str(text):
        raise PinqError(
            "a list holds text with the character U+0000, which PostgreSQL text cannot hold; "
            "remove it first (nothing was charged)"
        )
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def array_text(values: pd.Series, array_type: str) -> np.ndarray:
    """A column of lists as PostgreSQL array literals (``\\N`` for a missing list), with
    items written as ``array_type``'s items read them back exactly."""
    kind = next(k for k, t in ARRAY_TYPES.items() if t == array_type)
    lists = list_items(values) or []
    out = np.empty(len(lists), dtype=object)
    out[:] = [
        "\\N" if r is None else "{" + ",".join(_item_text(x, kind) for x in r) + "}"
        for r in lists
    ]
    return out
