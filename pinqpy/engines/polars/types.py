"""Polars column types as pinqpy reads them, and a source's columns in the engine's value model.

Types are read from a frame's schema when it is wrapped (``collect_schema``, which reads no
rows: a scan reads a parquet footer or a CSV file's first rows), never from the values a query
reads:

====================================  ========  ==============================================
Polars type                           pinqpy    read as
====================================  ========  ==============================================
Int8 ... Int64, UInt8 ... UInt32      int       Int64, exactly
UInt64, Int128, UInt128               int       Int64; a value beyond the int64 range is NULL
Float16, Float32, Float64, Decimal    float     Float64; NaN is NULL
Boolean                               bool      Boolean
String                                str       String
Categorical, Enum                     str       as stored (grouped and matched by its codes),
                                                read as its text wherever a value is read
Datetime (any unit, any time zone)    datetime  naive UTC time; ms read as us, us and ns kept
Date                                  datetime  its midnight, in microseconds
Duration                              float     seconds, as pandas reads a timedelta
Null                                  any       NULL
List, Array, Struct, Binary, Time     any       as stored: rows are compared, grouped, joined
                                                and hashed by them (a list is exploded);
                                                expressions read them as NULL
Object                                refused   Python objects: declare the column's type
====================================  ========  ==============================================

``schema=`` declares types: each declared column is cast once when the frame is wrapped,
checked by one scan (a value that does not convert is refused before anything is charged).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from pinqpy.engines.polars.values import (
    KIND_DTYPES,
    datetime_text,
    float_text,
    parse_timestamp,
    text_to_bool,
)
from pinqpy.errors import PinqError
from pinqpy.expr.types import ColumnType

__all__ = [
    "NUMPY_INTS",
    "declared_casts",
    "is_categorical",
    "kind_of_dtype",
    "normalize",
    "polars_schema",
    "refuse_objects",
]

_INTS = (pl.Int8, pl.Int16, pl.Int32, pl.Int64, pl.UInt8, pl.UInt16, pl.UInt32)
_WIDE_INTS = (pl.UInt64, pl.Int128, pl.UInt128)
#: The integer types a numpy array holds as they are (not the 128-bit ones).
NUMPY_INTS = (*_INTS, pl.UInt64)
_FLOATS = (pl.Float16, pl.Float32, pl.Float64, pl.Decimal)
_TEXT = (pl.String, pl.Categorical, pl.Enum)
# Duration units per second, as pandas divides a timedelta's count to get its seconds.
_PER_SECOND = {"ns": 1e9, "us": 1e6, "ms": 1e3}


def is_categorical(dtype: Any) -> bool:
    """A Categorical or Enum column: kept as stored, read as its text."""
    return isinstance(dtype, pl.Categorical | pl.Enum)


def kind_of_dtype(dtype: Any) -> str:
    """The kind a Polars type reads as: "int", "float", "bool", "str", "datetime", "null",
    "object" (refused) or "other" (lists, structs and the like, read as NULL)."""
    if isinstance(dtype, _INTS + _WIDE_INTS):
        return "int"
    if isinstance(dtype, (*_FLOATS, pl.Duration)):
        return "float"
    if isinstance(dtype, pl.Boolean):
        return "bool"
    if isinstance(dtype, _TEXT):
        return "str"
    if isinstance(dtype, pl.Datetime | pl.Date):
        return "datetime"
    if isinstance(dtype, pl.Null):
        return "null"
    if isinstance(dtype, pl.Object):
        return "object"
    return "other"


def polars_schema(columns: Sequence[tuple[str, Any]]) -> dict[str, ColumnType]:
    """pinqpy column types of (column, Polars type) pairs (lists, structs, NULL: "any")."""
    out: dict[str, ColumnType] = {}
    for name, dtype in columns:
        kind = kind_of_dtype(dtype)
        out[name] = kind if kind not in ("other", "null", "object") else "any"  # type: ignore[assignment]
    return out


def refuse_objects(columns: Sequence[tuple[str, Any]], declared: Mapping[str, str]) -> None:
    """A column of Python objects has no type a query can read: it must be declared."""
    for name, dtype in columns:
        if isinstance(dtype, pl.Object) and name not in declared:
            raise PinqError(
                f"column {name!r} holds Python objects (Polars type Object), which the polars "
                f"engine cannot read: declare its type (schema={{{name!r}: 'str'}}, or 'int', "
                "'float', 'bool', 'datetime') or convert the column first"
            )


def normalize(x: pl.Expr, dtype: Any) -> pl.Expr | None:
    """``x``, a value of ``dtype``, in the engine's value model (see the module docstring),
    or None when it is already."""
    if isinstance(dtype, pl.Int64):
        return None
    if isinstance(dtype, _INTS):
        return x.cast(pl.Int64)
    if isinstance(dtype, _WIDE_INTS):
        return x.cast(pl.Int64, strict=False)
    if isinstance(dtype, pl.Float64):
        return x.fill_nan(None)
    if isinstance(dtype, _FLOATS):
        return x.cast(pl.Float64).fill_nan(None)
    if isinstance(dtype, pl.Duration):
        # True division, as pandas divides: a multiplication by the reciprocal is not.
        per_second = pl.lit(_PER_SECOND[dtype.time_unit], dtype=pl.Float64)
        return pl.map_batches(
            [x.cast(pl.Int64).cast(pl.Float64), per_second],
            lambda s: pl.Series(s[0].to_numpy() / s[1].to_numpy(), dtype=pl.Float64),
            return_dtype=pl.Float64,
            is_elementwise=True,
        ).fill_nan(None)
    if isinstance(dtype, pl.Date):
        return x.cast(pl.Datetime("us"))
    if isinstance(dtype, pl.Datetime):
        if dtype.time_zone is not None:
            x = x.dt.convert_time_zone("UTC").dt.replace_time_zone(None)
        if dtype.time_unit == "ms":
            return x.cast(pl.Datetime("us"))
        return x if dtype.time_zone is not None else None
    return None


# -- declared types ---------------------------------------------------------------------------
def _to_int(x: pl.Expr, kind: str) -> pl.Expr | None:
    if kind in ("int", "bool"):
        return x.cast(pl.Int64)
    if kind == "float":
        ok = x.is_finite() & (x == x.floor()) & (x >= -(2.0**63)) & (x < 2.0**63)
        return pl.when(ok).then(x.cast(pl.Int64, strict=False))
    if kind == "str":
        t = x.str.strip_chars()
        whole = t.cast(pl.Int64, strict=False)
        return pl.coalesce(whole, _to_int(t.cast(pl.Float64, strict=False), "float"))
    return None


def _to_float(x: pl.Expr, kind: str) -> pl.Expr | None:
    if kind in ("int", "bool", "float"):
        return x.cast(pl.Float64)
    if kind == "str":
        return x.str.strip_chars().cast(pl.Float64, strict=False)
    return None


def _to_bool(x: pl.Expr, kind: str) -> pl.Expr | None:
    if kind == "bool":
        return x
    if kind in ("int", "float"):
        return pl.when(x == 1).then(pl.lit(True)).when(x == 0).then(pl.lit(False))
    if kind == "str":
        return text_to_bool(x)
    return None


def _to_str(x: pl.Expr, kind: str) -> pl.Expr | None:
    if kind == "str":
        return x
    if kind == "float":
        return float_text(x)
    if kind in ("int", "bool"):
        return x.cast(pl.String)
    return datetime_text(x) if kind == "datetime" else None


_CONVERT = {"int": _to_int, "float": _to_float, "bool": _to_bool, "str": _to_str}


def declared_casts(
    columns: Sequence[tuple[str, Any]], declared: Mapping[str, str]
) -> dict[str, pl.Expr]:
    """Each declared column as its declared type, read from the column in the engine's
    value model: NULL where a value does not convert (the caller refuses those); a column
    whose type cannot convert at all (a timestamp as a number, a list) is refused here."""
    dtypes = dict(columns)
    out: dict[str, pl.Expr] = {}
    for name, ctype in declared.items():
        if ctype == "any":
            raise PinqError(
                f"column {name!r} cannot be declared any on the polars engine; declare a type"
            )
        dtype = dtypes[name]
        kind = kind_of_dtype(dtype)
        x = normalize(pl.col(name), dtype)
        x = pl.col(name) if x is None else x
        if is_categorical(dtype):
            x = x.cast(pl.String)
        cast: pl.Expr | None
        if kind == "null":  # no value at all (an empty or all-NULL column): NULLs of any type
            cast = x.cast(KIND_DTYPES[ctype])
        elif ctype == "datetime":
            cast = x if kind == "datetime" else parse_timestamp(x) if kind == "str" else None
        elif kind == "datetime":
            cast = _to_str(x, kind) if ctype == "str" else None
        else:
            cast = _CONVERT[ctype](x, kind)
        if cast is None:
            raise PinqError(
                f"column {name!r} of Polars type {dtype} does not convert to the declared type "
                f"{ctype}; fix the declaration (schema=) or the data (nothing was charged)"
            )
        out[name] = cast.alias(name)
    return out
