"""Declared column types (``schema=``): a pandas column converted to its type, and the
refusals of what an SQL engine cannot hold (a column of Python objects, ``any``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pinqpy.errors import PinqError
from pinqpy.expr.types import ColumnType

__all__ = [
    "SQL_TYPES",
    "declare_error",
    "declare_pandas",
    "refuse_declared_any",
    "refuse_objects",
]

SQL_TYPES = {
    "int": "BIGINT",
    "float": "DOUBLE",
    "str": "VARCHAR",
    "bool": "BOOLEAN",
    "datetime": "TIMESTAMP",
}


def declare_error(col: str, ctype: str, how: str = "") -> PinqError:
    # The message names the column and type only, never a value (values are private).
    return PinqError(
        f"column {col!r} does not convert to the declared type {ctype}{how}; fix the "
        "declaration (schema=) or the data (nothing was charged)"
    )


def _to_declared(s: pd.Series, ctype: str) -> pd.Series:
    from pinqpy.expr.pandas_eval.values import _any_text

    if ctype == "any":
        return s.astype(object)
    if ctype == "str":
        if pd.api.types.is_string_dtype(s.dtype) and s.dtype != object:
            return s
        text = [_any_text(x) for x in s.to_numpy(dtype=object)]
        return pd.Series(text, index=s.index, dtype="str")
    if ctype == "datetime":
        if pd.api.types.is_datetime64_any_dtype(s.dtype):
            return s
        if s.dtype != object and not pd.api.types.is_string_dtype(s.dtype):
            raise TypeError
        return pd.to_datetime(s, errors="raise", format="ISO8601")
    if pd.api.types.is_datetime64_any_dtype(s.dtype):
        raise TypeError
    if ctype == "bool":
        if pd.api.types.is_bool_dtype(s.dtype):
            return s
        return pd.Series(pd.array(s.to_numpy(dtype=object), dtype="boolean"), index=s.index)
    if s.dtype == object or pd.api.types.is_string_dtype(s.dtype):
        objs = s.to_numpy(dtype=object)
        strs = [x.strip() if isinstance(x, str) else x for x in objs]  # bools are 0 and 1
        num = pd.to_numeric(pd.Series(strs, index=s.index, dtype=object), errors="raise")
    else:
        num = s
    if ctype == "float":
        return num.astype("float64")
    if pd.api.types.is_integer_dtype(num.dtype):
        return num
    return pd.Series(pd.array(num.to_numpy(), dtype="Int64"), index=s.index)


def declare_pandas(df: pd.DataFrame, declared: dict[str, ColumnType]) -> pd.DataFrame:
    """``df`` with each declared column converted to its type (a new frame; ``df`` is left
    as it is); a column that does not convert is refused, naming no value."""
    if not declared:
        return df
    out = {}
    for col, ctype in declared.items():
        try:
            out[col] = _to_declared(df[col], ctype)
        except Exception:
            raise declare_error(col, ctype) from None
    return df.assign(**out)


def _holds_scalars(s: pd.Series) -> bool:
    """Whether an object column holds a value that is neither missing nor a list (a column
    of lists is one type on every engine: explode reads it). Each distinct type is looked
    at once; the values that are not containers are tested for NULL in one pass."""
    objs = s.to_numpy(dtype=object)
    codes, types = pd.factorize(np.frompyfunc(type, 1, 1)(objs))
    sets = list | tuple | set | frozenset
    lists = [issubclass(t, sets) or t.__name__ == "ndarray" for t in types]
    others = objs[~np.array([*lists, True], dtype=bool)[codes]]
    return len(others) > 0 and not bool(pd.isna(others).all())


def refuse_objects(df: pd.DataFrame, engine: str) -> None:
    """DuckDB and Spark columns have one type each, so a column of Python objects (type
    ``any``) cannot go there, except a column of lists (explode reads it)."""
    for i, col in enumerate(df.columns):
        s = df.iloc[:, i]
        if s.dtype == object and _holds_scalars(s):
            raise PinqError(
                f"column {col!r} holds Python objects (dtype object), which pinqpy reads as "
                f"type any; the {engine} engine needs one type per column: declare it "
                f"(schema={{{col!r}: 'str'}}, or 'int', 'float', 'bool', 'datetime') or convert "
                "the column first"
            )


def refuse_declared_any(declared: dict[str, ColumnType], engine: str) -> None:
    """An SQL engine holds one type per column, so ``any`` cannot be declared there."""
    for col, ctype in declared.items():
        if ctype == "any":
            raise PinqError(
                f"column {col!r} cannot be declared any on the {engine} engine; declare a type"
            )
