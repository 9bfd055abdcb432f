"""Vectorized evaluation of expressions over a pandas DataFrame, with SQL NULL semantics.

NULL propagates through arithmetic and comparisons; AND, OR and NOT use three-valued logic.
A fault that depends on the data (division by zero, overflow, the square root of a negative,
a value that does not CAST) gives NULL for that row: evaluation never raises because of a
value and never warns. Work is done column-at-a-time with numpy; the only per-row loop reads
the Python objects of an ``object`` column once.

Types come from dtypes, never from values. An ``object`` column is of kind ``"any"``: each of
its values is read on its own, as it would be in a column of its own type (a number as a
number, a string as a string; anything else, such as a date or a list, as NULL), so one row
never changes how another is compared (see :data:`pinqpy.expr.types.ANY_RULE`).

>>> import pandas as pd
>>> from pinqpy.expr.parser import parse_expression as p
>>> df = pd.DataFrame({"a": [1, 2, 3], "b": [0, 1, None]})
>>> evaluate(p("a / b"), df).tolist()
[nan, 2.0, nan]
>>> predicate_mask(p("b IS NULL OR a > 2"), df).tolist()
[False, False, True]
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import (
    AGGREGATE_FUNCTIONS,
    Between,
    Binary,
    Call,
    Case,
    Cast,
    Column,
    Expr,
    InList,
    IsNull,
    Like,
    Literal,
    Unary,
)
from pinqpy.expr.check import _suggest, resolve_column
from pinqpy.expr.types import CAST_TYPES, any_class, valid_text

__all__ = ["evaluate", "predicate_mask"]

_I64_MIN = np.iinfo(np.int64).min
_I64_MAX = np.iinfo(np.int64).max
_TWO_63 = 2.0**63
_NAT = np.datetime64("NaT", "ns")
_MAX_POSITION = 2**62  # beyond the length of any string

_UNSET: Any = object()

# Kinds of values: "int" (int64 + mask), "float" (float64, NaN is NULL), "bool" (bool + mask,
# data always False where NULL), "str" (pandas Series, NaN is NULL), "datetime"
# (datetime64, NaT is NULL), "any" (a numpy object array, each value read on its own; None
# and NaN are NULL) and "null" (an untyped NULL).
_NUMERIC = frozenset({"int", "float", "bool"})

_CMP_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}

_TRUE_WORDS = ["true", "t", "yes", "y", "1", "on"]
_FALSE_WORDS = ["false", "f", "no", "n", "0", "off"]


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


def _as_datetime64(x: Any) -> Any:
    if isinstance(x, pd.Timestamp):
        return x.to_datetime64()
    return x if isinstance(x, np.ndarray | np.datetime64) else np.asarray(x)


_NS_LO = np.datetime64(pd.Timestamp.min.value, "ns").astype("datetime64[us]")
_NS_HI = np.datetime64(pd.Timestamp.max.value, "ns").astype("datetime64[us]")


def _compare_datetimes(op: Callable[[Any, Any], Any], x: Any, y: Any) -> Any:
    """Compare timestamps of different units exactly: numpy would convert both to the finer
    unit, which silently wraps a value outside its range (1500-01-01 in nanoseconds). Values
    that fit in nanoseconds compare in nanoseconds, the others in microseconds (a value outside
    the nanosecond range lies beyond every value inside it, so the order is the same)."""
    x, y = _as_datetime64(x), _as_datetime64(y)
    if np.datetime_data(x.dtype)[0] == np.datetime_data(y.dtype)[0]:
        return op(x, y)
    xu, yu = x.astype("datetime64[us]"), y.astype("datetime64[us]")
    coarse = op(xu, yu)
    fits = (xu >= _NS_LO) & (xu <= _NS_HI) & (yu >= _NS_LO) & (yu <= _NS_HI)
    if not np.any(fits):
        return coarse
    fine = op(x.astype("datetime64[ns]"), y.astype("datetime64[ns]"))
    return np.where(fits, fine, coarse)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    # SQL rounds halves away from zero (numpy rounds them to even).
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _like_regex(pattern: str) -> tuple[str, str | None]:
    """Classify a LIKE pattern: ("eq"|"prefix"|"suffix"|"contains", text) or ("regex", re)."""
    pieces: list[tuple[str, str]] = []  # ("lit", text) | ("any", "%") | ("one", "_")
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            pieces.append(("lit", pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            pieces.append(("any", ch))
        elif ch == "_":
            pieces.append(("one", ch))
        else:
            pieces.append(("lit", ch))
        i += 1
    kinds = [k for k, _ in pieces]
    literal = "".join(t for k, t in pieces if k == "lit")
    if "one" not in kinds:
        wild = [i for i, k in enumerate(kinds) if k == "any"]
        n = len(pieces)
        if not wild:
            return "eq", literal
        if wild == [n - 1]:
            return "prefix", literal
        if wild == [0]:
            return "suffix", literal
        if wild == [0, n - 1] and n >= 2:
            return "contains", literal
    regex = "".join(".*" if k == "any" else "." if k == "one" else re.escape(t) for k, t in pieces)
    return "regex", "(?s)" + regex


def _like_pieces(pattern: str) -> list[tuple[re.Pattern[str], int]]:
    """A LIKE pattern split at each ``%``: each piece (literal characters and ``_``) as a
    regex without repetition, and its length in characters."""
    pieces: list[list[str]] = [[]]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            pieces[-1].append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            pieces.append([])
        else:
            pieces[-1].append("." if ch == "_" else re.escape(ch))
        i += 1
    return [(re.compile("(?s)" + "".join(p)), len(p)) for p in pieces]


def _like_one(text: str, pieces: list[tuple[re.Pattern[str], int]]) -> bool:
    """Whether ``text`` matches a LIKE pattern, in time linear in ``len(text)`` (times the
    pattern's length): the first piece must match at the start, the last at the end, and
    each middle piece is found leftmost after the previous one (taking the leftmost match
    never loses one). No piece has a quantifier, so no search backtracks."""
    (first, n0), (last, nk) = pieces[0], pieces[-1]
    if len(pieces) == 1:
        return len(text) == n0 and first.match(text) is not None
    if len(text) < sum(n for _, n in pieces):
        return False
    if n0 and first.match(text) is None:
        return False
    pos, end = n0, len(text) - nk
    if nk and last.match(text, end) is None:
        return False
    for piece, n in pieces[1:-1]:
        if n == 0:
            continue
        m = piece.search(text, pos, end)
        if m is None:
            return False
        pos = m.end()
    return True


def _like_match(s: pd.Series, pattern: str) -> pd.Series:
    """LIKE over a text Series that is not Arrow-backed (so would run Python's ``re``)."""
    pieces = _like_pieces(pattern)
    objs = s.to_numpy(dtype=object, na_value=None)
    hit = np.fromiter(
        (isinstance(x, str) and _like_one(x, pieces) for x in objs), dtype=bool, count=len(objs)
    )
    return pd.Series(hit, index=s.index)


class _Evaluator:
    def __init__(self, df: pd.DataFrame | None, n: int) -> None:
        self.df = df
        self.n = n
        self.folding = df is None  # a constant sub-expression evaluated on one row
        self._has_cols: dict[int, bool] = {}

    # -- entry points ---------------------------------------------------------------------
    def mark(self, root: Expr) -> None:
        """Record, for each node, whether it reads a column (one pass, no recursion)."""
        order = list(root.walk())
        for node in reversed(order):
            self._has_cols[id(node)] = isinstance(node, Column) or any(
                self._has_cols.get(id(c), False) for c in node.children()
            )

    def eval(self, e: Expr) -> _V:
        if isinstance(e, Literal):
            v = self.literal(e.value)
            return self.full(v) if self.folding else v
        if not self.folding and not self._has_cols.get(id(e), True):
            return self.fold(e)
        if isinstance(e, Column):
            return self.column(e)
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Unary):
            return self.unary(e)
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Case):
            return self.case(e)
        if isinstance(e, Cast):
            return self.cast(self.eval(e.operand), e.type_name)
        if isinstance(e, InList):
            return self.in_list(e)
        if isinstance(e, Between):
            x = self.eval(e.operand)
            v = self.logic_and(
                self.compare(">=", x, self.eval(e.low)), self.compare("<=", x, self.eval(e.high))
            )
            return self.logic_not(v) if e.negated else v
        if isinstance(e, Like):
            return self.like(e)
        if isinstance(e, IsNull):
            v = self.eval(e.operand)
            if v.scalar:
                return _V("bool", np.bool_((v.data is None) != e.negated))
            m = v.nulls()
            if m is None:
                m = np.zeros(self.n, dtype=bool)
            return _V("bool", ~m if e.negated else m, None)
        raise PinqError(f"cannot evaluate a {type(e).__name__} node")

    def fold(self, e: Expr) -> _V:
        """Evaluate a column-free sub-expression once, as a scalar."""
        sub = _Evaluator(None, 1)
        v = sub.eval(e)
        return _scalarize(v)

    # -- leaves ---------------------------------------------------------------------------
    def literal(self, value: object) -> _V:
        if value is None:
            return _V("null", None)
        if isinstance(value, bool):
            return _V("bool", np.bool_(value))
        if isinstance(value, int):
            if _I64_MIN <= value <= _I64_MAX:
                return _V("int", np.int64(value))
            return _V("float", np.float64(value))
        if isinstance(value, float):
            return _V("float", np.float64(value))
        if isinstance(value, str):
            return _V("str", valid_text(value))  # as tables are read (pinqpy.engines.registry)
        raise PinqError(f"unsupported literal of type {type(value).__name__}")

    def column(self, e: Column) -> _V:
        assert self.df is not None
        key = resolve_column(e, self.df.columns)
        if key is None:
            hint = _suggest(e.name, [str(c) for c in self.df.columns])
            raise PinqSyntaxError(
                f"unknown column '{e.name}'" + (f"; did you mean '{hint}'?" if hint else "")
            )
        column = self.df[key]
        if isinstance(column, pd.DataFrame):
            raise PinqError(f"the column name '{e.name}' appears more than once")
        return _from_series(column)

    def full(self, v: _V) -> _V:
        """Broadcast a scalar to an array of length n."""
        if not v.scalar:
            return v
        n, d = self.n, v.data
        if v.kind == "null":
            return _V("null", np.full(n, np.nan))
        if v.kind == "int":
            return _V(
                "int",
                np.full(n, 0 if d is None else d, np.int64),
                None if d is not None else np.ones(n, bool),
            )
        if v.kind == "bool":
            return _V(
                "bool",
                np.full(n, bool(d) if d is not None else False),
                None if d is not None else np.ones(n, bool),
            )
        if v.kind == "float":
            return _V("float", np.full(n, np.nan if d is None else d, np.float64))
        if v.kind == "datetime":
            return _V("datetime", np.full(n, _NAT if d is None else d))
        if v.kind == "any":
            out = np.empty(n, dtype=object)
            out[:] = [d] * n
            return _V("any", out)
        return _V("str", pd.Series(np.full(n, d, dtype=object), dtype="str"))

    def const(self, v: _V) -> _V:
        """While folding constants everything is a one-row array: read it back as a scalar."""
        return _scalarize(v) if self.folding else v

    def null_of(self, kind: str) -> _V:
        return self.full(_V(kind, None))

    # -- the any kind ---------------------------------------------------------------------
    def parts(self, v: _V) -> _AnyParts:
        """How each value of an ``any`` array is read (worked out once per value)."""
        v = self.full(v) if v.scalar else v
        if v._parts is None:
            v._parts = _AnyParts(np.asarray(v.data, dtype=object))
        return v._parts

    def sides(self, v: _V) -> list[tuple[np.ndarray | None, _V]]:
        """``v`` as (rows, typed value) pairs: itself, or an ``any`` array's two parts."""
        if v.kind != "any":
            return [(None, v)]
        p = self.parts(v)
        return [(p.is_num, p.num), (p.is_str, p.text)]

    def compare_any(self, op: str, a: _V, b: _V) -> _V:
        """A comparison with an ``any`` side: each row compared by its own values' types."""
        data = np.zeros(self.n, dtype=bool)
        null = np.ones(self.n, dtype=bool)
        for ma, va in self.sides(a):
            for mb, vb in self.sides(b):
                rows = ma if mb is None else mb if ma is None else ma & mb
                if rows is not None and not rows.any():
                    continue
                r = self.full(self.compare(op, va, vb))
                rn = r.nulls()
                known = ~rn if rn is not None else np.ones(self.n, dtype=bool)
                if rows is not None:
                    known = known & rows
                data |= r.data & known
                null &= ~known
        return _V("bool", data, null if null.any() else None)

    def any_numeric(self, v: _V) -> _V:
        """An ``any`` array as float: numbers as themselves, strings parsed, others NULL."""
        p = self.parts(v)
        if not p.is_str.any():
            return p.num
        parsed = self.as_float(p.text)
        return _V("float", np.where(p.is_num, p.num.data, parsed))

    def any_text(self, v: _V) -> _V:
        objs = np.asarray(self.full(v).data, dtype=object)
        text = np.empty(len(objs), dtype=object)
        text[:] = [_any_text(x) for x in objs]
        return _V("str", pd.Series(text, dtype="str"))

    def any_cast(self, v: _V, type_name: str) -> _V:
        """CAST of an ``any`` array: each value converted by its own kind."""
        p = self.parts(v)
        return self.select(p.is_num, self.cast(p.num, type_name), self.cast(p.text, type_name))

    # -- coercions ------------------------------------------------------------------------
    def as_float(self, v: _V) -> Any:
        """Float data (scalar or array) with NULL as NaN."""
        if v.scalar and (v.data is None or v.kind in _NUMERIC):
            return np.nan if v.data is None else np.float64(v.data)
        if v.kind == "float":
            return v.data
        if v.kind in ("int", "bool"):
            out = v.data.astype(np.float64)
            m = v.nulls()
            if m is not None:
                out[m] = np.nan
            return out
        if v.kind == "str":
            return self.as_float(self.cast(v, "DOUBLE"))
        if v.kind == "any":
            return self.any_numeric(v).data
        return np.nan if v.scalar else np.full(self.n, np.nan)

    def to_kind(self, v: _V, kind: str) -> _V:
        """Convert for mixing in one result (CASE, COALESCE, ...); bad values become NULL."""
        if v.kind == kind == "datetime" and v.data is not None:
            # Branches may be in nanoseconds and microseconds; numpy would mix them in
            # nanoseconds, silently wrapping a date outside 1677-2262. Results are in
            # microseconds (as on DuckDB and Spark).
            data = _as_datetime64(v.data)
            if np.datetime_data(data.dtype)[0] != "us":
                data = data.astype("datetime64[us]")
            return _V("datetime", data)
        if v.kind == kind:
            return v
        if v.kind == "null" or (v.scalar and v.data is None):
            return self.null_of(kind)
        if kind == "any":
            return _V("any", _as_objects(self.full(v)))
        if kind == "float":
            return _V("float", self.as_float(v))
        if kind == "int" and v.kind == "bool":
            if v.scalar:
                return _V("int", np.int64(v.data))
            return _V("int", v.data.astype(np.int64), v._mask)
        if kind == "str":
            return self.to_str(v)
        return self.cast(v, {"int": "BIGINT", "bool": "BOOLEAN", "datetime": "TIMESTAMP"}[kind])

    def to_str(self, v: _V) -> _V:
        if v.kind == "str":
            return v
        if v.kind == "any":
            return self.any_text(v)
        if v.scalar:
            if v.data is None:
                return _V("str", None)
            return _V("str", _scalar_text(v.kind, v.data))
        if v.kind == "null":
            return self.null_of("str")
        if v.kind == "bool":
            text = pd.Series(np.where(v.data, "true", "false"), dtype="str")
        else:
            text = pd.Series(v.data).astype("str")
        m = v.nulls()
        if m is not None:
            text = text.mask(m)
        return _V("str", text)

    # -- arithmetic -----------------------------------------------------------------------
    def binary(self, e: Binary) -> _V:
        op = e.op
        if op == "AND":
            return self.logic_and(self.eval(e.left), self.eval(e.right))
        if op == "OR":
            return self.logic_or(self.eval(e.left), self.eval(e.right))
        a, b = self.eval(e.left), self.eval(e.right)
        if op in _CMP_OPS:
            return self.compare(op, a, b)
        if op == "||":
            return self.concat(a, b)
        return self.arith(op, a, b)

    def numeric(self, v: _V) -> _V:
        """Make ``v`` int or float (bool as 0/1, strings parsed, datetimes NULL)."""
        if v.kind in ("int", "float"):
            return v
        if v.kind == "bool":
            return self.to_kind(v, "int")
        if v.kind == "str":
            return self.cast(v, "DOUBLE")
        if v.kind == "any":
            return self.any_numeric(v)
        return self.null_of("float")

    def arith(self, op: str, a: _V, b: _V) -> _V:
        if a.kind not in ("null", "float", "int"):
            a = self.numeric(a)
        if b.kind not in ("null", "float", "int"):
            b = self.numeric(b)
        if (
            a.kind == "null"
            or b.kind == "null"
            or (a.scalar and a.data is None)
            or (b.scalar and b.data is None)
        ):
            ints = {a.kind, b.kind} - {"null"} == {"int"} and op != "/"
            return self.null_of("int" if ints else "float")
        if a.kind == "int" and b.kind == "int" and op != "/":
            return self.int_arith(op, a, b)
        x, y = self.as_float(a), self.as_float(b)
        if op == "+":
            r = x + y
        elif op == "-":
            r = x - y
        elif op == "*":
            r = x * y
        elif op == "/":
            r = x / y
        else:
            r = np.fmod(x, y)  # the sign follows the dividend, as in SQL
        return _float_result(r)

    def int_arith(self, op: str, a: _V, b: _V) -> _V:
        x, y = a.data, b.data
        # When the operands' magnitudes cannot overflow, skip the per-element checks.
        mx, my = _abs_max(x), _abs_max(y)
        bad: Any = False
        if op == "+":
            r = x + y
            if mx + my > _I64_MAX:
                bad = ((x ^ r) & (y ^ r)) < 0
        elif op == "-":
            r = x - y
            if mx + my > _I64_MAX:
                bad = ((x ^ y) & (x ^ r)) < 0
        elif op == "*":
            r = x * y
            if mx * my > _I64_MAX:
                bad = _mul_overflow(x, y, r)
        else:  # "%"
            zero = y == 0
            r = np.fmod(x, np.where(zero, 1, y))
            bad = zero
        mask = _or_masks(_arr_mask(a), _arr_mask(b))
        bad_arr = np.asarray(bad)
        if bad_arr.ndim == 0:
            if bool(bad_arr):
                return self.null_of("int")
        elif bad_arr.any():
            mask = _or_masks(mask, bad_arr)
        return _V("int", np.asarray(r, dtype=np.int64), mask)

    def concat(self, a: _V, b: _V) -> _V:
        a, b = self.to_str(a), self.to_str(b)
        if (a.scalar and a.data is None) or (b.scalar and b.data is None):
            return self.null_of("str")
        return _V("str", _str_series(a.data + b.data))

    def unary(self, e: Unary) -> _V:
        v = self.eval(e.operand)
        if e.op == "NOT":
            return self.logic_not(v)
        if v.kind == "null" or (v.scalar and v.data is None):
            return self.null_of("float" if v.kind == "null" else v.kind)
        v = self.numeric(v)
        if v.kind == "float":
            return _V("float", -v.data)
        bad = v.data == _I64_MIN
        return _V("int", -v.data, _or_masks(_arr_mask(v), bad if bad.any() else None))

    # -- comparison and logic -------------------------------------------------------------
    def comparable(self, a: _V, b: _V) -> tuple[_V, _V] | None:
        """Bring both sides into one family for comparing; None if never comparable."""
        if "any" in (a.kind, b.kind):
            return a, b  # compared row by row (compare_any)
        if a.kind == b.kind or (a.kind in _NUMERIC and b.kind in _NUMERIC):
            return a, b
        if "datetime" in (a.kind, b.kind) and "str" in (a.kind, b.kind):
            return (
                self.cast(a, "TIMESTAMP") if a.kind == "str" else a,
                self.cast(b, "TIMESTAMP") if b.kind == "str" else b,
            )
        if a.kind in _NUMERIC and b.kind == "str":
            return a, self.numeric(b)
        if b.kind in _NUMERIC and a.kind == "str":
            return self.numeric(a), b
        return None

    def compare(self, op: str, a: _V, b: _V) -> _V:
        pair = None
        if not (
            a.kind == "null"
            or b.kind == "null"
            or (a.scalar and a.data is None)
            or (b.scalar and b.data is None)
        ):
            pair = self.comparable(a, b)
        if pair is None:
            return self.null_of("bool")
        if "any" in (a.kind, b.kind):
            return self.compare_any(op, a, b)
        a, b = pair
        if (a.scalar and a.data is None) or (b.scalar and b.data is None):
            return self.null_of("bool")
        if a.kind == "datetime" and b.kind == "datetime":
            res = _compare_datetimes(_CMP_OPS[op], a.data, b.data)
        else:
            res = _CMP_OPS[op](a.data, b.data)
        if isinstance(res, pd.Series):
            res = res.to_numpy(dtype=bool, na_value=False)
        res = np.asarray(res, dtype=bool)
        if a.kind in ("int", "bool") or b.kind in ("int", "bool") or op == "<>":
            # Explicit masks leave arbitrary data under NULLs, and NaN <> x is true:
            # clear NULL rows so that the data is false wherever the result is NULL.
            m = _lazy_union(a, b)()
            if m is not None:
                res = res & ~m
            return _V("bool", res, m)
        # NaN, NaT and missing strings already compare false: work out the mask only if asked.
        return _V("bool", res, _lazy_union(a, b))

    def boolean(self, v: _V) -> _V:
        """``v`` as a bool array (data false at NULL)."""
        if v.kind != "bool":
            v = self.null_of("bool") if v.kind == "null" else self.cast(v, "BOOLEAN")
        return self.full(v)

    def logic_and(self, a: _V, b: _V) -> _V:
        a, b = self.boolean(a), self.boolean(b)
        data = a.data & b.data
        if a._mask is None and b._mask is None:
            return _V("bool", data, None)

        def mask() -> np.ndarray | None:
            an, bn = a.nulls(), b.nulls()
            if an is None and bn is None:
                return None
            known_false = (~a.data & ~an if an is not None else ~a.data) | (
                ~b.data & ~bn if bn is not None else ~b.data
            )
            return ~(known_false | data)

        return _V("bool", data, mask)

    def logic_or(self, a: _V, b: _V) -> _V:
        a, b = self.boolean(a), self.boolean(b)
        data = a.data | b.data
        if a._mask is None and b._mask is None:
            return _V("bool", data, None)

        def mask() -> np.ndarray | None:
            an, bn = a.nulls(), b.nulls()
            if an is None and bn is None:
                return None
            either_null = _or_masks(an, bn)
            return either_null & ~data

        return _V("bool", data, mask)

    def logic_not(self, v: _V) -> _V:
        v = self.boolean(v)
        m = v.nulls()
        if m is None:
            return _V("bool", ~v.data, None)
        return _V("bool", ~v.data & ~m, m)

    # -- IN and LIKE ----------------------------------------------------------------------
    def in_list(self, e: InList) -> _V:
        x = self.eval(e.operand)
        items = [self.eval(i) for i in e.items]
        if not items:
            return self.full(_V("bool", np.bool_(e.negated)))
        fast = self.in_literals(x, items)
        if fast is not None:
            v = fast
        else:
            v = self.compare("=", x, items[0])
            for item in items[1:]:
                v = self.logic_or(v, self.compare("=", x, item))
        return self.logic_not(v) if e.negated else v

    def in_literals(self, x: _V, items: list[_V]) -> _V | None:
        """``x IN (constants)`` by one hash lookup per row instead of one compare per item."""
        if x.scalar or not all(i.scalar for i in items):
            return None
        values = [i for i in items if i.data is not None and i.kind != "null"]
        has_null = len(values) < len(items)
        if x.kind == "str" and all(i.kind == "str" for i in values):
            hit = x.data.isin([i.data for i in values]).to_numpy(dtype=bool, na_value=False)
        elif x.kind in _NUMERIC and all(i.kind in _NUMERIC for i in values):
            if not values:
                hit = np.zeros(self.n, dtype=bool)
            else:
                hit = np.isin(x.data, np.array([i.data for i in values]))
        else:
            return None
        xn = x.nulls()
        if xn is not None:
            hit = hit & ~xn
        if not has_null:
            return _V("bool", hit, xn)
        # A NULL item makes every non-match unknown.
        return _V("bool", hit, ~hit)

    def like(self, e: Like) -> _V:
        x = self.to_str(self.eval(e.operand))
        pattern = self.const(self.eval(e.pattern))
        if not pattern.scalar:
            raise PinqError("the LIKE pattern must be a constant string")
        if pattern.data is None or (x.scalar and x.data is None):
            return self.null_of("bool")
        x = self.full(x)
        kind, text = _like_regex(str(pattern.data))
        s = x.data
        if kind == "eq":
            hit = s == text
        elif kind == "prefix":
            hit = s.str.startswith(text)
        elif kind == "suffix":
            hit = s.str.endswith(text)
        elif kind == "contains":
            hit = s.str.contains(text, regex=False)
        elif isinstance(s.array, pd.arrays.ArrowStringArray):
            hit = s.str.fullmatch(text)  # Arrow's RE2: linear time whatever the pattern
        else:
            hit = _like_match(s, str(pattern.data))  # Python's re could backtrack
        res = hit.to_numpy(dtype=bool, na_value=False)
        v = _V("bool", res, lambda: x.nulls())
        return self.logic_not(v) if e.negated else v

    # -- CASE and friends -----------------------------------------------------------------
    def result_kind(self, vs: list[_V]) -> str:
        kinds = {v.kind for v in vs if v.kind != "null"}
        if not kinds:
            return "null"
        if len(kinds) > 1:
            kinds.discard("any")  # as the checker does: the typed results decide
        if kinds == {"any"}:
            return "any"
        if kinds <= _NUMERIC:
            return "float" if "float" in kinds else "int" if "int" in kinds else "bool"
        if len(kinds) == 1:
            return next(iter(kinds))
        return "str"

    def select(self, cond: np.ndarray, x: _V, y: _V) -> _V:
        """Row-wise ``x if cond else y`` for two values of one kind."""
        kind = x.kind
        if kind == "str":
            xo = _objects(x)
            yo = _objects(y)
            return _V("str", pd.Series(np.where(cond, xo, yo), dtype="str"))
        if kind == "any":
            out = np.empty(self.n, dtype=object)
            out[:] = np.where(cond, _as_objects(self.full(x)), _as_objects(self.full(y)))
            return _V("any", out)
        if kind in ("float", "datetime", "null"):
            return _V(kind, np.where(cond, _nullable_data(x), _nullable_data(y)))
        xd, yd = x.data, y.data
        if x.scalar and xd is None:
            xd = False if kind == "bool" else 0
        if y.scalar and yd is None:
            yd = False if kind == "bool" else 0
        data = np.where(cond, xd, yd)
        xn = _null_flags(x)
        yn = _null_flags(y)
        mask = None if (xn is False and yn is False) else np.where(cond, xn, yn)
        if kind == "bool" and mask is not None:
            data = data & ~mask
        return _V(kind, data.astype(np.int64 if kind == "int" else bool), mask)

    def case(self, e: Case) -> _V:
        conds = [self.boolean(self.eval(c)).data for c, _ in e.whens]
        results = [self.eval(r) for _, r in e.whens]
        results.append(self.eval(e.else_) if e.else_ is not None else _V("null", None))
        kind = self.result_kind(results)
        results = [self.to_kind(r, kind) for r in results]
        out = results[-1]
        for cond, r in zip(reversed(conds), reversed(results[:-1]), strict=True):
            out = self.select(cond, r, out)
        return self.full(out)

    def coalesce(self, vs: list[_V]) -> _V:
        kind = self.result_kind(vs)
        vs = [self.to_kind(v, kind) for v in vs]
        out = vs[-1]
        for v in reversed(vs[:-1]):
            if v.scalar:
                out = v if v.data is not None else out
                continue
            m = v.nulls()
            out = v if m is None else self.select(~m, v, out)
        return self.full(out)

    def extreme(self, vs: list[_V], least: bool) -> _V:
        """LEAST / GREATEST, skipping NULLs (NULL only when every argument is NULL)."""
        kind = self.result_kind(vs)
        vs = [self.full(self.to_kind(v, kind)) for v in vs]
        if kind == "float":
            f = np.fmin if least else np.fmax
            out = vs[0].data
            for v in vs[1:]:
                out = f(out, v.data)
            return _V("float", out)
        out = vs[0]
        for v in vs[1:]:
            better = self.compare("<" if least else ">", v, out).data
            out_null = out.nulls()
            if out_null is not None:
                v_null = v.nulls()
                better = better | (out_null if v_null is None else out_null & ~v_null)
            out = self.select(better, v, out)
        return out

    # -- functions ------------------------------------------------------------------------
    def call(self, e: Call) -> _V:
        name = e.name.upper()
        if name in AGGREGATE_FUNCTIONS:
            raise PinqError(
                f"the aggregate {name} cannot be evaluated row by row; "
                "aggregates belong in an aggregation"
            )
        args = [self.eval(a) for a in e.args]
        fn = _FUNCTIONS.get(name)
        if fn is None:
            raise PinqSyntaxError(f"unknown function '{e.name}'")
        return fn(self, args)

    def math1(self, v: _V, f: Callable[[Any], Any]) -> _V:
        return _float_result(f(self.as_float(self.numeric(v))))

    def to_int_fn(self, v: _V, f: Callable[[Any], Any]) -> _V:
        v = self.numeric(v)
        if v.kind == "int":
            return v
        return _float_to_int(np.asarray(f(v.data), dtype=np.float64))

    def str_fn(self, v: _V, f: Callable[[pd.Series], pd.Series]) -> _V:
        v = self.full(self.to_str(v))
        return _V("str", _str_series(f(v.data)))

    # -- CAST -----------------------------------------------------------------------------
    def cast(self, v: _V, type_name: str) -> _V:
        target = CAST_TYPES.get(type_name.upper())
        if target is None:
            raise PinqSyntaxError(f"unknown type '{type_name}' in CAST")
        if v.kind == "null" or (v.scalar and v.data is None):
            return self.null_of(target)
        if v.scalar:
            # Cast a scalar through a one-element array so that every rule is shared.
            sub = _Evaluator(None, 1)
            return _scalarize(sub.cast(sub.full(v), type_name))
        upper = type_name.upper()
        if v.kind == "any":
            return self.to_str(v) if target == "str" else self.any_cast(v, type_name)
        if target == "int":
            return self.cast_int(v)
        if target == "float":
            if v.kind == "str":
                num = pd.to_numeric(v.data.str.strip(), errors="coerce")
                return _float_result(np.asarray(num, dtype=np.float64))
            if v.kind == "datetime":
                return self.null_of("float")
            return _V("float", self.as_float(v))
        if target == "str":
            return self.to_str(v)
        if target == "bool":
            return self.cast_bool(v)
        return self.cast_datetime(v, date_only=upper == "DATE")

    def cast_int(self, v: _V) -> _V:
        if v.kind == "int":
            return v
        if v.kind == "bool":
            return self.to_kind(v, "int")
        if v.kind == "float":
            return _float_to_int(_round_half_away(v.data))
        if v.kind == "str":
            s = v.data.str.strip()
            valid = s.str.fullmatch(r"[+-]?\d+").to_numpy(dtype=bool, na_value=False)
            num = pd.to_numeric(s.where(valid, "0"), errors="coerce")
            if num.dtype == np.int64:
                data = num.to_numpy()
                return _V("int", data, None if valid.all() else ~valid)
            out = _float_to_int(np.asarray(num, dtype=np.float64))
            return _V("int", out.data, _or_masks(out.nulls(), None if valid.all() else ~valid))
        return self.null_of("int")

    def cast_bool(self, v: _V) -> _V:
        if v.kind == "bool":
            return v
        if v.kind in ("int", "float"):
            m = v.nulls()
            data = v.data != 0
            if m is not None:
                data = data & ~m
            return _V("bool", data, m)
        if v.kind == "str":
            s = v.data.str.strip().str.lower()
            yes = s.isin(_TRUE_WORDS).to_numpy(dtype=bool, na_value=False)
            no = s.isin(_FALSE_WORDS).to_numpy(dtype=bool, na_value=False)
            unknown = ~(yes | no)
            return _V("bool", yes, unknown if unknown.any() else None)
        return self.null_of("bool")

    def cast_datetime(self, v: _V, *, date_only: bool) -> _V:
        if v.kind == "datetime":
            data = v.data
        elif v.kind == "str":
            parsed = pd.to_datetime(v.data, errors="coerce", format="ISO8601")
            if getattr(parsed.dt, "tz", None) is not None:
                parsed = parsed.dt.tz_convert(None)
            data = parsed.to_numpy()
        else:
            return self.null_of("datetime")
        if date_only:
            data = data.astype("datetime64[D]").astype(data.dtype)
        return _V("datetime", data)


# -- function table ---------------------------------------------------------------------------
def _abs(ev: _Evaluator, a: list[_V]) -> _V:
    v = ev.numeric(a[0])
    if v.kind == "float":
        return _V("float", np.abs(v.data))
    bad = v.data == _I64_MIN
    return _V("int", np.abs(v.data), _or_masks(_arr_mask(v), bad if bad.any() else None))


def _sign(ev: _Evaluator, a: list[_V]) -> _V:
    v = ev.numeric(a[0])
    return _V(v.kind, np.sign(v.data), v._mask if v.kind == "int" else _UNSET)


def _round(ev: _Evaluator, a: list[_V]) -> _V:
    if len(a) == 1:
        return ev.to_int_fn(a[0], _round_half_away)
    x = ev.as_float(ev.numeric(a[0]))
    digits = ev.as_float(ev.numeric(a[1]))
    scale = np.power(10.0, np.trunc(digits))
    return _float_result(_round_half_away(x * scale) / scale)


def _power(ev: _Evaluator, a: list[_V]) -> _V:
    x = ev.as_float(ev.numeric(a[0]))
    y = ev.as_float(ev.numeric(a[1]))
    return _float_result(np.power(x, y))


def _substr(ev: _Evaluator, a: list[_V]) -> _V:
    a = [a[0], *(ev.const(v) for v in a[1:])]
    if not all(v.scalar for v in a[1:]):
        raise PinqError("the start and length of SUBSTR must be constant integers")
    if any(v.data is None for v in a[1:]):
        return ev.null_of("str")
    start = int(a[1].data)
    begin = start - 1  # SQL counts from 1; positions before the first one are skipped
    # Positions are clamped to what a string can hold (no result changes), so that a huge
    # start or length never overflows.
    first = min(max(begin, 0), _MAX_POSITION)
    if len(a) == 3:
        length = int(a[2].data)
        if length < 0:
            return ev.null_of("str")
        end = min(max(begin + length, 0), _MAX_POSITION)
        return ev.str_fn(a[0], lambda s: s.str.slice(first, end))
    return ev.str_fn(a[0], lambda s: s.str.slice(first))


def _length(ev: _Evaluator, a: list[_V]) -> _V:
    v = ev.full(ev.to_str(a[0]))
    lengths = v.data.str.len().to_numpy(dtype=np.float64, na_value=np.nan)
    return _float_to_int(lengths)


def _concat_fn(ev: _Evaluator, a: list[_V]) -> _V:
    # CONCAT skips NULLs (PostgreSQL); || does not.
    out: Any = ""
    for v in a:
        s = ev.to_str(v)
        piece = s.data.fillna("") if not s.scalar else "" if s.data is None else s.data
        out = out + piece
    return ev.full(_V("str", out if isinstance(out, pd.Series) else str(out)))


def _nullif(ev: _Evaluator, a: list[_V]) -> _V:
    x = ev.full(a[0])
    same = ev.compare("=", x, a[1]).data
    if not same.any():
        return x
    return ev.select(~same, x, ev.null_of(x.kind))


def _if(ev: _Evaluator, a: list[_V]) -> _V:
    cond = ev.boolean(a[0]).data
    kind = ev.result_kind(a[1:])
    x, y = ev.to_kind(a[1], kind), ev.to_kind(a[2], kind)
    return ev.full(ev.select(cond, x, y))


_FUNCTIONS: dict[str, Callable[[_Evaluator, list[_V]], _V]] = {
    "ABS": _abs,
    "SIGN": _sign,
    "FLOOR": lambda ev, a: ev.to_int_fn(a[0], np.floor),
    "CEIL": lambda ev, a: ev.to_int_fn(a[0], np.ceil),
    "CEILING": lambda ev, a: ev.to_int_fn(a[0], np.ceil),
    "ROUND": _round,
    "SQRT": lambda ev, a: ev.math1(a[0], np.sqrt),
    "LN": lambda ev, a: ev.math1(a[0], np.log),
    "LOG": lambda ev, a: ev.math1(a[0], np.log10),  # PostgreSQL: LOG(x) is base 10
    "LOG10": lambda ev, a: ev.math1(a[0], np.log10),
    "EXP": lambda ev, a: ev.math1(a[0], np.exp),
    "POWER": _power,
    "POW": _power,
    "LEAST": lambda ev, a: ev.extreme(a, True),
    "GREATEST": lambda ev, a: ev.extreme(a, False),
    "COALESCE": lambda ev, a: ev.coalesce(a),
    "NULLIF": _nullif,
    "IF": _if,
    "IIF": _if,
    "LOWER": lambda ev, a: ev.str_fn(a[0], lambda s: s.str.lower()),
    "UPPER": lambda ev, a: ev.str_fn(a[0], lambda s: s.str.upper()),
    "TRIM": lambda ev, a: ev.str_fn(a[0], lambda s: s.str.strip(" ")),
    "LTRIM": lambda ev, a: ev.str_fn(a[0], lambda s: s.str.lstrip(" ")),
    "RTRIM": lambda ev, a: ev.str_fn(a[0], lambda s: s.str.rstrip(" ")),
    "LENGTH": _length,
    "SUBSTR": _substr,
    "SUBSTRING": _substr,
    "CONCAT": _concat_fn,
}


# -- helpers ----------------------------------------------------------------------------------
def _abs_max(x: Any) -> int:
    """The largest magnitude in ``x`` as a Python int (no overflow)."""
    if isinstance(x, np.ndarray):
        if x.size == 0:
            return 0
        return max(abs(int(x.min())), abs(int(x.max())))
    return abs(int(x))


def _mul_overflow(x: Any, y: Any, r: Any) -> Any:
    """Where the int64 product ``r = x * y`` wrapped around.

    Only rows whose float product is near the int64 range can have wrapped; those are
    checked exactly by dividing back.
    """
    near = np.abs(np.asarray(x, dtype=np.float64) * np.asarray(y, dtype=np.float64)) >= 2.0**62
    if not near.any():
        return near
    xb, yb, rb = (np.broadcast_to(v, near.shape)[near] for v in (x, y, r))
    safe_x = np.where(xb == 0, 1, xb)
    wrong = (xb != 0) & ((rb // safe_x) != yb)
    wrong |= ((xb == -1) & (yb == _I64_MIN)) | ((yb == -1) & (xb == _I64_MIN))
    out = np.zeros(near.shape, dtype=bool)
    out[near] = wrong
    return out


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
        return str(pd.Timestamp(value))
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


def _guarded(expr: Expr, run: Callable[[], Any]) -> Any:
    """Run an evaluation step; library errors become PinqErrors that quote no data."""
    try:
        with np.errstate(all="ignore"):
            return run()
    except PinqError:
        raise
    except RecursionError:
        raise PinqError("the expression is nested too deeply to evaluate") from None
    except (ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        # A library error message may quote a value from the data: report only its kind.
        raise PinqError(
            f"could not evaluate {_short(expr)} ({type(exc).__name__}); details are hidden "
            "because they may contain private values"
        ) from None


def _evaluate(expr: Expr, df: pd.DataFrame) -> tuple[_Evaluator, _V]:
    ev = _Evaluator(df, len(df))
    ev.mark(expr)
    return ev, _guarded(expr, lambda: ev.full(ev.eval(expr)))


def _short(expr: Expr) -> str:
    try:
        text = expr.to_sql()
    except RecursionError:
        return "the expression"
    return repr(text if len(text) <= 60 else text[:57] + "...")


def evaluate(expr: Expr, df: pd.DataFrame) -> pd.Series:
    """The value of ``expr`` on every row of ``df``, as a Series aligned with ``df.index``.

    NULL is NaN for floats, NA in nullable integer and boolean results, NaN in strings.

    >>> import pandas as pd
    >>> from pinqpy.expr.parser import parse_expression as p
    >>> df = pd.DataFrame({"s": ["Ann", None]})
    >>> evaluate(p("LOWER(s) || '!'"), df).tolist()
    ['ann!', nan]
    """
    ev, v = _evaluate(expr, df)
    return _guarded(expr, lambda: _to_series(ev, v, df.index))


def _to_series(ev: _Evaluator, v: _V, index: pd.Index) -> pd.Series:
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
        return pd.Series(np.full(ev.n, np.nan), index=index)
    return pd.Series(v.data, index=index)


def predicate_mask(expr: Expr, df: pd.DataFrame) -> np.ndarray:
    """A numpy bool array: True exactly where ``expr`` is TRUE (NULL and FALSE give False).

    >>> import pandas as pd
    >>> from pinqpy.expr.parser import parse_expression as p
    >>> predicate_mask(p("age >= 18"), pd.DataFrame({"age": [12, 30]})).tolist()
    [False, True]
    """
    ev, v = _evaluate(expr, df)
    v = _guarded(expr, lambda: ev.full(ev.boolean(v)))
    # Bool data is false wherever the value is NULL, so it is the mask as it stands.
    out = np.asarray(v.data, dtype=bool)
    if not out.flags.owndata:
        out = out.copy()  # a bare bool column: never hand out a view of the frame's data
    return out
