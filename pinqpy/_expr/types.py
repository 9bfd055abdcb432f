"""The few value types the expression checker reasons about.

A schema maps column names to one of ``"int"``, ``"float"``, ``"str"``, ``"bool"``,
``"datetime"`` or ``"any"`` (unknown: every check passes). pandas is imported only inside the
functions that need it, so plans and checks work without it.

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
    "CAST_TYPES",
    "NUMERIC_TYPES",
    "ColumnType",
    "schema_from_pandas",
    "series_type",
    "type_of_value",
]

ColumnType = Literal["int", "float", "str", "bool", "datetime", "any"]

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
    """The type of a pandas column, from its dtype (object columns by their values)."""
    import pandas as pd

    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return series_type(pd.Series(dtype.categories)) if len(dtype.categories) else "any"
    known = _dtype_type(dtype)
    if known is not None:
        return known
    return _object_type(pd.api.types.infer_dtype(s, skipna=True))


# numpy dtype kinds pinqpy reads by kind alone; "O" (object) needs the values, others are "any".
_NUMPY_KINDS = {
    "b": "bool",
    "i": "int",
    "u": "int",
    "f": "float",
    "M": "datetime",
    "U": "str",
    "S": "str",
    "O": "object",
}


def _dtype_type(dtype: object) -> ColumnType | None:
    """The type a dtype alone decides, or None when the values must be looked at (object
    and categorical columns)."""
    import numpy as np
    import pandas as pd

    if isinstance(dtype, np.dtype):  # the common case, decided by its kind alone
        found = _NUMPY_KINDS.get(dtype.kind, "any")
        return None if found == "object" else found  # type: ignore[return-value]
    if isinstance(dtype, pd.CategoricalDtype):
        return None
    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "int"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "datetime"
    is_object = isinstance(dtype, np.dtype) and dtype.kind == "O"
    if is_object:
        return None
    if pd.api.types.is_string_dtype(dtype):
        return "str"
    return "any"


def _object_type(inferred: str) -> ColumnType:
    if inferred == "string":
        return "str"
    if inferred == "boolean":
        return "bool"
    if inferred == "integer":
        return "int"
    if inferred in ("floating", "mixed-integer-float", "decimal"):
        return "float"
    if inferred in ("datetime", "datetime64", "date"):
        return "datetime"
    return "any"


def schema_from_pandas(df: pd.DataFrame) -> dict[str, ColumnType]:
    """Column name -> type for every column of ``df``.

    >>> import pandas as pd
    >>> schema_from_pandas(pd.DataFrame({"a": [1], "b": [0.5], "c": ["x"], "d": [True]}))
    {'a': 'int', 'b': 'float', 'c': 'str', 'd': 'bool'}
    """
    # From the dtypes where they decide (taking each column out as a Series costs more).
    out: dict[str, ColumnType] = {}
    for i, (name, dtype) in enumerate(df.dtypes.items()):
        known = _dtype_type(dtype)
        out[str(name)] = known if known is not None else series_type(df.iloc[:, i])
    return out
