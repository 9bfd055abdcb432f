"""The few value types the expression checker reasons about.

A schema maps column names to one of ``"int"``, ``"float"``, ``"str"``, ``"bool"``,
``"datetime"`` or ``"any"`` (unknown: every check passes). pandas is imported only inside the
functions that need it, so plans and checks work without it.

Types come from the schema, never from the values: a pandas column's type is read from its
dtype alone, and an ``object`` column (Python objects of any kind) is ``"any"`` unless the
curator declares its type (``schema={"code": "str"}``). A value in an ``any`` column is
compared and computed with by :data:`ANY_RULE`, which looks only at that value and the other
operand, so one row can never change how another row is read.

>>> type_of_value(True), type_of_value(3), type_of_value(2.5), type_of_value("x")
('bool', 'int', 'float', 'str')
>>> CAST_TYPES["BIGINT"], CAST_TYPES["TEXT"]
('int', 'str')
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ANY_RULE",
    "CAST_TYPES",
    "COLUMN_TYPES",
    "NUMERIC_TYPES",
    "TIMESTAMP_TEXT",
    "ColumnType",
    "any_class",
    "check_declared",
    "schema_from_pandas",
    "series_type",
    "type_of_value",
    "valid_text",
]

ColumnType = Literal["int", "float", "str", "bool", "datetime", "any"]

COLUMN_TYPES: tuple[ColumnType, ...] = ("int", "float", "str", "bool", "datetime", "any")

#: The text every engine reads as a timestamp (CAST to TIMESTAMP or DATE, a comparison of a
#: timestamp with text): ``YYYY-MM-DD``, optionally with ``HH:MM``, ``HH:MM:SS`` or
#: ``HH:MM:SS.ffffff`` (at most microseconds) after a space or ``T``; no spaces around it, no
#: time zone. Any other text is NULL. Each engine's own parser accepts more, and differently
#: (DuckDB reads ``'inf'`` as the end of time, pandas ``'now'`` as the current time and an
#: offset as a time zone, Spark a lone year), so answers would differ from engine to engine.
#: A valid form that names no day (``2000-02-30``) is NULL on every engine too.
TIMESTAMP_TEXT = (
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}"
    "([ T]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9]([.][0-9]{1,6})?)?)?$"
)

ANY_RULE = """\
A value in an `any` column (a pandas object column with no declared type) is read on its own,
as it would be in a column of its own type: a number (int, float, bool as 0/1, Decimal; NaN is
NULL) as a number, a string as a string, anything else (dates, lists, other objects) as NULL.
So `12 > '9'` compares numerically (the literal read as 9, as for an int column) and
`'12' > '9'` compares strings (false); a string compared with a number is parsed as a number
(NULL if it does not parse); two `any` values compare by their own two types. Arithmetic
reads numbers as 64-bit floats and parses strings; string functions, LIKE and || read each
value's text (bools as 'true'/'false'); CAST converts each value by its own kind. A fault is
NULL, never an error, and no row's result depends on another row's value."""

# bool counts as a number (TRUE is 1), as pandas users expect of SUM(flag).
NUMERIC_TYPES: frozenset[str] = frozenset({"int", "float", "bool"})

# Type names accepted by CAST, and the type each gives.
CAST_TYPES: dict[str, ColumnType] = {
    "INT": "int",
    "INTEGER": "int",
    "BIGINT": "int",
    "SMALLINT": "int",
    "INT64": "int",
    "FLOAT": "float",
    "FLOAT64": "float",
    "DOUBLE": "float",
    "REAL": "float",
    "NUMERIC": "float",
    "DECIMAL": "float",
    "VARCHAR": "str",
    "CHAR": "str",
    "TEXT": "str",
    "STRING": "str",
    "BOOLEAN": "bool",
    "BOOL": "bool",
    "DATE": "datetime",
    "TIMESTAMP": "datetime",
    "DATETIME": "datetime",
}


def type_of_value(v: object) -> ColumnType:
    """The type of one Python (or numpy) value; ``None`` and unknown kinds are ``"any"``.

    >>> import numpy as np
    >>> type_of_value(np.int32(4)), type_of_value(None)
    ('int', 'any')
    """
    import numbers

    if v is None:
        return "any"
    if isinstance(v, bool) or type(v).__name__ in ("bool_", "bool"):  # numpy 1 and 2
        return "bool"
    if isinstance(v, numbers.Integral):
        return "int"
    if isinstance(v, numbers.Real):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, _dt.date) or type(v).__name__ == "datetime64":
        return "datetime"
    return "any"


def series_type(s: pd.Series) -> ColumnType:
    """The type of a pandas column, from its dtype alone (object columns are ``"any"``).

    >>> import pandas as pd
    >>> series_type(pd.Series([1, 2], dtype=object)), series_type(pd.Series(["a"]))
    ('any', 'str')
    """
    return _dtype_type(s.dtype)


# numpy dtype kinds pinqpy reads by kind alone; everything else (object included) is "any".
_NUMPY_KINDS: dict[str, ColumnType] = {
    "b": "bool",
    "i": "int",
    "u": "int",
    "f": "float",
    "M": "datetime",
    "U": "str",
    "S": "str",
}


def _dtype_type(dtype: object) -> ColumnType:
    """The type a dtype decides; object columns (and categoricals of objects) are "any"."""
    import numpy as np
    import pandas as pd

    if isinstance(dtype, np.dtype):  # the common case, decided by its kind alone
        return _NUMPY_KINDS.get(dtype.kind, "any")
    if isinstance(dtype, pd.CategoricalDtype):
        # The categories are part of the dtype; an object-valued category list is "any".
        return _dtype_type(dtype.categories.dtype) if dtype.categories is not None else "any"
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "int"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "datetime"
    if pd.api.types.is_string_dtype(dtype):
        return "str"
    return "any"


def any_class(v: object) -> str | None:
    """How the rule for ``any`` columns reads one value: ``"number"``, ``"str"`` or None.

    >>> any_class(3), any_class(True), any_class("9"), any_class(None), any_class([1])
    ('number', 'number', 'str', None, None)
    """
    import decimal
    import numbers

    import numpy as np

    if isinstance(v, str):
        return "str"
    if isinstance(v, bool | np.bool_ | numbers.Real | decimal.Decimal):
        return None if v != v else "number"  # NaN is NULL
    return None


def check_declared(declared: object, columns: list[str] | tuple[str, ...]) -> dict[str, ColumnType]:
    """A declared schema checked against the table's columns: ``{column: type}``.

    >>> check_declared({"code": "STR"}, ["code", "n"])
    {'code': 'str'}
    """
    from pinqpy.errors import PinqError

    if declared is None:
        return {}
    if not isinstance(declared, dict):
        try:
            declared = dict(declared)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise PinqError(
                "schema= maps column names to types, e.g. schema={'code': 'str'}"
            ) from None
    out: dict[str, ColumnType] = {}
    for col, t in declared.items():  # type: ignore[union-attr]
        if not isinstance(col, str) or col not in columns:
            raise PinqError(f"schema= names unknown column {col!r}")
        name = t.strip().lower() if isinstance(t, str) else t
        if name not in COLUMN_TYPES:
            raise PinqError(
                f"schema= gives column {col!r} the unknown type {t!r}; the types are "
                + ", ".join(COLUMN_TYPES)
            )
        out[col] = name  # type: ignore[assignment]
    return out


def schema_from_pandas(df: pd.DataFrame) -> dict[str, ColumnType]:
    """Column name -> type for every column of ``df``.

    >>> import pandas as pd
    >>> schema_from_pandas(pd.DataFrame({"a": [1], "b": [0.5], "c": ["x"], "d": [True]}))
    {'a': 'int', 'b': 'float', 'c': 'str', 'd': 'bool'}
    >>> schema_from_pandas(pd.DataFrame({"o": pd.Series([1, 2], dtype=object)}))
    {'o': 'any'}
    """
    return {str(name): _dtype_type(dtype) for name, dtype in df.dtypes.items()}


def valid_text(text: str) -> str:
    """``text`` with a UTF-8 spelling: a lone surrogate (``"\\ud800"``), which no engine can
    encode, becomes U+FFFD and a surrogate pair the character it spells; valid text is
    returned as it is. Tables (every value) and literals are read through this one mapping,
    so a literal matches the data it was written for.

    >>> valid_text("a\\ud800"), valid_text("\\ud83d\\ude00") == "\\U0001f600"
    ('a\ufffd', True)
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
