"""The evaluator: one pass over an expression tree, column at a time, with SQL NULL semantics
(operators, comparisons, three-valued logic, CASE, IN, LIKE, CAST). Functions are looked up
in a table it is given (:mod:`.functions`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
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
from pinqpy.expr.pandas_eval.like import _like_match, _like_regex
from pinqpy.expr.pandas_eval.numeric import (
    _I64_MAX,
    _I64_MIN,
    _abs_max,
    _as_datetime64,
    _compare_datetimes,
    _mul_overflow,
    _round_half_away,
)
from pinqpy.expr.pandas_eval.values import (
    _DATETIME_TEXT,
    _NAT,
    _NUMERIC,
    _V,
    _any_text,
    _AnyParts,
    _arr_mask,
    _as_objects,
    _float_result,
    _float_to_int,
    _from_series,
    _lazy_union,
    _null_flags,
    _nullable_data,
    _objects,
    _or_masks,
    _scalar_text,
    _scalarize,
    _str_series,
)
from pinqpy.expr.types import CAST_TYPES, TIMESTAMP_TEXT, valid_text

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

# A SQL function: given the evaluator and its evaluated arguments.
_Function = Callable[["_Evaluator", list[_V]], _V]


class _Evaluator:
    """Evaluates expressions over ``df`` (``n`` rows); ``functions`` maps each SQL function's
    name (upper case) to its implementation (:data:`.functions._FUNCTIONS`), so that the
    function table can use the evaluator without the evaluator importing the table."""

    def __init__(self, df: pd.DataFrame | None, n: int, functions: Mapping[str, _Function]) -> None:
        self.df = df
        self.n = n
        self.functions = functions
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
        sub = _Evaluator(None, 1, self.functions)
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
            return _V("str", valid_text(value))  # as tables are read (pinqpy.engines.wrapping)
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
        elif v.kind == "datetime":
            # One format for every value, as the SQL engines write it (pandas alone would
            # choose it from the whole column: no time when every value is at midnight).
            text = pd.Series(v.data).dt.strftime(_DATETIME_TEXT)
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
        fn = self.functions.get(name)
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
            sub = _Evaluator(None, 1, self.functions)
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
            # pinqpy's timestamp text alone (no time zone): what every engine reads, alike.
            text = _timestamp_text(v.data)
            data = pd.to_datetime(text, errors="coerce", format="ISO8601").to_numpy()
        else:
            return self.null_of("datetime")
        if date_only:
            # In microseconds: numpy's nanoseconds-to-days conversion wraps near the start of
            # the nanosecond range (1677-09-22 became 2262-04-11), and a day's start before
            # it is not a nanosecond timestamp at all.
            data = data.astype("datetime64[us]").astype("datetime64[D]").astype("datetime64[us]")
        return _V("datetime", data)


def _timestamp_text(data: pd.Series) -> pd.Series:
    """Text with every value that is not pinqpy's timestamp text
    (:data:`~pinqpy.expr.types.TIMESTAMP_TEXT`) made NULL, so that pandas reads only what
    every engine reads, alike (never ``'now'``, a time zone, or another spelling)."""
    return data.where(data.str.fullmatch(TIMESTAMP_TEXT).fillna(False).astype(bool))
