"""The values of pandas evaluation: one kind per value, NULL kept in a mask or in the data, and
the conversions between DataFrame columns, values and Python objects."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.expr.pandas_eval.numeric import _I64_MAX, _TWO_63
from pinqpy.expr.types import any_class, valid_text

_NAT = np.datetime64("NaT", "ns")
# A timestamp as text on every engine: to the second (DuckDB's strftime, Spark's date_format).
_DATETIME_TEXT = "%Y-%m-%d %H:%M:%S"
_UNSET: Any = object()

# Kinds of values: "int" (int64 + mask), "float" (float64, NaN is NULL), "bool" (bool + mask,
# data always False where NULL), "str" (pandas Series, NaN is NULL), "datetime"
# (datetime64, NaT is NULL), "any" (a numpy object array, each value read on its own; None
# and NaN are NULL) and "null" (an untyped NULL).
_NUMERIC = frozenset({"int", "float", "bool"})


class _V:
    """One evaluated value: an array of length n (or a scalar) of one kind.

    ``mask`` marks NULLs for int and bool arrays; it may be a zero-argument callable that
    computes it only when needed (a predicate rarely needs it). For the other kinds NULL is
    stored in the data (NaN, NaT, missing string) and the mask is derived on demand.
    """

    __slots__ = ("_mask", "_parts", "data", "kind")

    def __init__(self, kind: str, data: Any, mask: Any = _UNSET) -> None:
        self.kind = kind
        self.data = data
        self._mask = mask if mask is not _UNSET else (_UNSET if kind in _DERIVED else None)
        self._parts: _AnyParts | None = None

    @property
    def scalar(self) -> bool:
        return not isinstance(self.data, np.ndarray | pd.Series)

    def nulls(self) -> np.ndarray | None:
        """Boolean array of NULL positions, or None when there are none (arrays only)."""
        m = self._mask
        if m is _UNSET:
            if self.kind == "float":
                m = np.isnan(self.data)
            elif self.kind == "datetime":
                m = np.isnat(self.data)
            elif self.kind == "str":
                m = self.data.isna().to_numpy()
            elif self.kind == "any":
                m = np.asarray(pd.isna(self.data), dtype=bool)
            else:  # "null"
                m = np.ones(len(self.data), dtype=bool)
            self._mask = m
        elif callable(m):
            m = m()
            self._mask = m
        return m


_DERIVED = frozenset({"float", "datetime", "str", "null", "any"})


class _AnyParts:
    """An ``any`` array split by how each value is read: numbers (as float64, NaN elsewhere)
    and strings (a str Series, missing elsewhere). Other values are in neither part."""

    __slots__ = ("is_num", "is_str", "num", "text")

    def __init__(self, objs: np.ndarray) -> None:
        n = len(objs)
        classes = [any_class(x) for x in objs]
        self.is_num = np.fromiter((c == "number" for c in classes), dtype=bool, count=n)
        self.is_str = np.fromiter((c == "str" for c in classes), dtype=bool, count=n)
        num = np.full(n, np.nan)
        if self.is_num.any():
            num[self.is_num] = [_as_float_value(x) for x in objs[self.is_num]]
        text = np.full(n, None, dtype=object)
        text[self.is_str] = objs[self.is_str]
        self.num = _float_result(num)
        self.text = _V("str", pd.Series(text, dtype="str"))


def _as_float_value(x: object) -> float:
    try:
        return float(x)  # type: ignore[arg-type]
    except (OverflowError, ValueError, TypeError, ArithmeticError):
        return np.nan


def _any_text(x: object) -> object:
    """One value of an ``any`` column as text (None for NULL), as its own type would give."""
    if isinstance(x, str):
        return x
    if x is None:
        return None
    if isinstance(x, bool | np.bool_):
        return "true" if x else "false"
    try:
        if pd.isna(x):  # type: ignore[arg-type]
            return None
    except (TypeError, ValueError):
        pass
    if isinstance(x, np.generic):
        x = x.item()
    try:
        return valid_text(str(x))
    except Exception:  # an object whose text fails (or a list nested too deeply): NULL
        return None


def _or_masks(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def _lazy_union(*vs: _V) -> Callable[[], np.ndarray | None]:
    def compute() -> np.ndarray | None:
        out = None
        for v in vs:
            if not v.scalar:
                out = _or_masks(out, v.nulls())
        return out

    return compute


def _float_result(arr: Any) -> _V:
    """A float result, with every non-finite value (overflow, 0/0, ...) made NULL."""
    arr = np.asarray(arr, dtype=np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        arr = np.where(bad, np.nan, arr)
    return _V("float", arr)


def _float_to_int(arr: np.ndarray) -> _V:
    """Whole-valued floats to int64; NaN and values beyond int64 become NULL."""
    ok = np.isfinite(arr) & (arr >= -_TWO_63) & (arr < _TWO_63)
    data = np.where(ok, arr, 0.0).astype(np.int64)
    return _V("int", data, None if ok.all() else ~ok)


def _arr_mask(v: _V) -> np.ndarray | None:
    return None if v.scalar else v.nulls()


def _null_flags(v: _V) -> Any:
    """NULL flags usable in np.where: an array, or a Python bool for a scalar."""
    if v.scalar:
        return v.data is None
    m = v.nulls()
    return False if m is None else m


def _nullable_data(v: _V) -> Any:
    if v.scalar and v.data is None:
        return _NAT if v.kind == "datetime" else np.nan
    return v.data


def _objects(v: _V) -> Any:
    if v.scalar:
        return v.data
    return v.data.to_numpy(dtype=object, na_value=None)


def _as_objects(v: _V) -> np.ndarray:
    """An array's values as Python objects, None for NULL (for an ``any`` result)."""
    if v.kind == "any":
        return np.asarray(v.data, dtype=object)
    n = len(v.data)
    if v.kind == "null":
        return np.full(n, None, dtype=object)
    if v.kind == "str":
        return v.data.to_numpy(dtype=object, na_value=None)
    if v.kind == "datetime":
        out = pd.Series(v.data).astype(object).to_numpy()
    else:
        out = np.asarray(v.data).astype(object)
    m = v.nulls()
    if m is not None and m.any():
        out[m] = None
    return out


def _str_series(s: Any) -> pd.Series:
    if isinstance(s, pd.Series) and s.dtype != "str":
        return s.astype("str")
    return s


def _scalar_text(kind: str, value: Any) -> str:
    if kind == "bool":
        return "true" if value else "false"
    if kind == "datetime":
        t = pd.Timestamp(value)
        return f"{t.year:04d}-{t.month:02d}-{t.day:02d} {t.hour:02d}:{t.minute:02d}:{t.second:02d}"
    return str(value.item() if hasattr(value, "item") else value)


def _scalarize(v: _V) -> _V:
    """A length-1 value as a scalar (None for NULL)."""
    if v.scalar:
        return v
    if v.kind == "null":
        return _V("null", None)
    m = v.nulls()
    if m is not None and bool(m[0]):
        return _V(v.kind, None)
    if v.kind == "str":
        return _V("str", str(v.data.iloc[0]))
    if v.kind == "any":
        return _V("any", v.data[0])
    return _V(v.kind, v.data[0])


def _from_series(s: pd.Series) -> _V:
    """A DataFrame column as an evaluated value (no copy for int64/float64/bool columns)."""
    dtype = s.dtype
    if isinstance(dtype, np.dtype):
        k = dtype.kind
        if k == "i":
            data = s.to_numpy()
            return _V("int", data if dtype == np.int64 else data.astype(np.int64), None)
        if k == "u":
            raw = s.to_numpy()
            if dtype.itemsize < 8:
                return _V("int", raw.astype(np.int64), None)
            big = raw > np.uint64(_I64_MAX)
            return _V("int", np.where(big, 0, raw).astype(np.int64), big if big.any() else None)
        if k == "f":
            data = s.to_numpy()
            return _V("float", data if dtype == np.float64 else data.astype(np.float64))
        if k == "b":
            return _V("bool", s.to_numpy(), None)
        if k == "M":
            return _V("datetime", s.to_numpy())
        if k == "m":
            return _V("float", s.dt.total_seconds().to_numpy(dtype=np.float64, na_value=np.nan))
        if k in "US":
            return _V("str", pd.Series(s.to_numpy(), dtype="str"))
        return _V("any", s.to_numpy(dtype=object))
    if isinstance(dtype, pd.CategoricalDtype):
        return _from_categorical(s)
    if isinstance(dtype, pd.DatetimeTZDtype):
        return _V("datetime", s.dt.tz_convert(None).to_numpy())
    if pd.api.types.is_bool_dtype(dtype):
        m = s.isna().to_numpy()
        return _V("bool", s.to_numpy(dtype=bool, na_value=False), m if m.any() else None)
    if pd.api.types.is_integer_dtype(dtype):
        m = s.isna().to_numpy()
        try:
            data = s.to_numpy(dtype=np.int64, na_value=0)
        except (OverflowError, ValueError, TypeError):
            return _V("float", s.to_numpy(dtype=np.float64, na_value=np.nan))
        return _V("int", data, m if m.any() else None)
    if pd.api.types.is_float_dtype(dtype):
        return _V("float", s.to_numpy(dtype=np.float64, na_value=np.nan))
    if pd.api.types.is_string_dtype(dtype):
        return _V("str", pd.Series(s.array, copy=False).astype("str"))
    return _V("any", s.to_numpy(dtype=object))


def _from_categorical(s: pd.Series) -> _V:
    """A categorical column, read as its categories' dtype (object categories: ``any``)."""
    from pinqpy.expr.types import series_type

    kind = series_type(s)
    plain = s.reset_index(drop=True)
    if kind == "int":
        return _from_series(plain.astype("Int64"))
    if kind == "bool":
        return _from_series(plain.astype("boolean"))
    if kind == "str":
        return _V("str", plain.astype(object).astype("str"))
    if kind in ("float", "datetime"):
        return _from_series(plain.astype(s.dtype.categories.dtype))
    return _V("any", plain.to_numpy(dtype=object))


def _to_series(v: _V, index: pd.Index) -> pd.Series:
    """An array value as a Series on ``index`` (of the same length)."""
    if v.kind in ("int", "bool"):
        m = v.nulls()
        dtype = np.int64 if v.kind == "int" else bool
        data = np.asarray(v.data, dtype=dtype)
        if m is not None and m.any():
            arr: Any = (
                pd.arrays.IntegerArray(data, m.copy())
                if v.kind == "int"
                else pd.arrays.BooleanArray(data, m.copy())
            )
            return pd.Series(arr, index=index)
        return pd.Series(data, index=index)
    if v.kind == "str":
        return pd.Series(_str_series(v.data).array, index=index, dtype="str")
    if v.kind == "any":
        return pd.Series(v.data, index=index, dtype=object)
    if v.kind == "null":
        return pd.Series(np.full(len(index), np.nan), index=index)
    return pd.Series(v.data, index=index)
