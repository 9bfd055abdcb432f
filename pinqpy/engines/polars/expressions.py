"""Expressions translated into Polars expressions that follow :mod:`pinqpy.expr.pandas_eval`.

The translation keeps pinqpy's semantics, not Polars' own: NULL propagates; a fault that depends
on the data (division by zero, integer overflow, a bad CAST, the logarithm of a negative, a
non-finite float) gives NULL, never an error (Polars' integers wrap around, so integer
arithmetic runs in Int128 and comes back as NULL beyond int64); ``/`` is float division;
``%`` takes the dividend's sign (Polars' takes the divisor's); FLOOR, CEIL and ROUND(x) give
integers (NULL beyond int64), ROUND halves away from zero; LOG is base 10; LEAST and GREATEST
skip NULLs; text converts to numbers, booleans and timestamps per value, never by a format
inferred from other rows; LIKE is a Rust regex, linear in the text whatever the pattern.

A translated value is a :class:`V`: a Polars expression and the pinqpy kind it yields
("int", "float", "bool", "str", "datetime", "null" or "other"). Source columns are already in
the engine's value model (:mod:`.types`): Int64, Float64 without NaN, String, naive UTC
Datetime.

Polars has no ``let``: a value a translation reads twice (a result checked for being finite,
``x`` in ``x BETWEEN a AND b``) would be written, and computed, twice, which nested
expressions make exponential (k-means' distances). Such a value, unless it is small, is
computed once as a working column (:meth:`PolarsExpr.bind`), which the node using the
expression adds first (:meth:`PolarsExpr.apply`) and drops after. Every translated expression
is free of faults, so computing one on every row is safe.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from pinqpy.engines.polars.values import (
    datetime_text,
    finite,
    float_text,
    null_of,
    text_timestamp,
    text_to_bool,
    text_to_float,
    text_to_int,
    text_to_number,
)
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
from pinqpy.expr.check import resolve_column
from pinqpy.expr.kinds import KindRules
from pinqpy.expr.types import CAST_TYPES, valid_text
from pinqpy.plan.nodes import PyFunc

__all__ = ["Cols", "PolarsExpr", "V", "divide", "no_callable", "numeric_value", "typed"]

NUMERIC = frozenset({"int", "float", "bool"})
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1
_TWO_63 = 2.0**63
_MAX_POSITION = 2**62  # beyond the length of any string
# A value whose Polars rendering is longer than this is bound to a working column when it is
# read twice; a shorter one (a column, a literal, one operation) is cheaper to repeat.
_SMALL = 120
_LETS = itertools.count()

#: Column name -> (kind, the Datetime unit of a datetime column, "categorical" for a
#: Categorical or Enum column (read as its text), else None).
Cols = Mapping[str, tuple[str, str | None]]
CATEGORICAL = "categorical"


@dataclass(frozen=True)
class V:
    """A translated value: its Polars expression, its kind, and a timestamp's unit."""

    expr: pl.Expr
    kind: str
    unit: str | None = None


def no_callable(value: object, what: str) -> None:
    if isinstance(value, PyFunc):
        raise PinqError(
            f"the Polars engine cannot run the Python callable {value.name} in {what}; use an "
            "expression string, or the pandas engine"
        )


def typed(v: V) -> pl.Expr:
    """An untyped NULL gets a type (Float64, as pandas stores an all-NULL column)."""
    return null_of("float") if v.kind == "null" else v.expr


def numeric_value(v: V) -> pl.Expr:
    """Values as Float64 with NULL for anything that is not a number (as pandas' _numeric)."""
    if v.kind in NUMERIC:
        return v.expr.cast(pl.Float64)
    if v.kind == "str":
        return text_to_number(v.expr)
    return null_of("float")


def _int(x: pl.Expr) -> pl.Expr:
    """An Int128 result back in Int64: NULL beyond its range."""
    return x.cast(pl.Int64, strict=False)


def _wide(x: pl.Expr) -> pl.Expr:
    return x.cast(pl.Int128)


def _neg(x: pl.Expr) -> pl.Expr:
    """``-x`` of an Int128 (Polars has no negation of Int128: a subtraction)."""
    return pl.lit(0, dtype=pl.Int128) - x


def _fmod(x: pl.Expr, y: pl.Expr) -> pl.Expr:
    """``fmod`` of Float64s, exactly (numpy's, run per batch: Polars' ``%`` computes
    ``x - y·floor(x/y)`` in floating point, which is not the remainder)."""

    def run(s: list[pl.Series]) -> pl.Series:
        a = s[0].cast(pl.Float64).to_numpy()
        b = s[1].cast(pl.Float64).to_numpy()
        with np.errstate(all="ignore"):
            return pl.Series(np.fmod(a, b), dtype=pl.Float64)

    if not x.meta.root_names() and not y.meta.root_names():  # constants: one value
        return pl.lit(run([pl.select(x).to_series(), pl.select(y).to_series()])).first()
    return pl.map_batches([x, y], run, return_dtype=pl.Float64, is_elementwise=True)


def _numpy_divide(s: list[pl.Series]) -> pl.Series:
    a = s[0].cast(pl.Float64).to_numpy()
    b = s[1].cast(pl.Float64).to_numpy()
    with np.errstate(all="ignore"):
        return pl.Series(np.divide(a, b), dtype=pl.Float64)


def divide(x: pl.Expr, y: pl.Expr) -> pl.Expr:
    """``x / y`` of Float64s, correctly rounded (NULL as NaN: the caller makes it NULL).
    Polars divides by a constant, or by a column it holds as one value, as a multiplication
    by the reciprocal, which is not the quotient (a third of ``a / 3.0`` are off by an ulp),
    so every division runs numpy's IEEE division, per batch; two constants are divided by
    Polars when the query is planned, exactly."""
    if not x.meta.root_names() and not y.meta.root_names():
        return x / y
    return pl.map_batches([x, y], _numpy_divide, return_dtype=pl.Float64, is_elementwise=True)


def _round_half_away(x: pl.Expr) -> pl.Expr:
    """As pandas evaluates it: ``copysign(floor(|x| + 0.5), x)`` (Polars' sign keeps the
    sign of a zero, so the product is the copysign, -0.0 included)."""
    return (x.abs() + 0.5).floor() * x.sign()


def _float_to_int(x: pl.Expr) -> pl.Expr:
    """Whole-valued Float64 as Int64; NULL for a value beyond the int64 range."""
    ok = x.is_finite() & (x >= -_TWO_63) & (x < _TWO_63)
    return pl.when(ok).then(x.cast(pl.Int64, strict=False))


class PolarsExpr(KindRules[V]):
    """Translates expressions over a relation whose columns are ``cols``."""

    def __init__(self, cols: Cols) -> None:
        self.cols = cols
        #: Working columns (name -> expression, each may read the ones before it).
        self.lets: dict[str, pl.Expr] = {}

    def bind(self, x: pl.Expr) -> pl.Expr:
        """``x``, computed once: itself when small, else a working column."""
        if len(str(x)) <= _SMALL:
            return x
        name = f"__pinq_l{next(_LETS)}"
        self.lets[name] = x
        return pl.col(name)

    def finite(self, x: pl.Expr) -> pl.Expr:
        return finite(self.bind(x))

    def apply(self, lf: pl.LazyFrame) -> pl.LazyFrame:
        """``lf`` with the working columns the translated expressions read."""
        for name, x in self.lets.items():
            lf = lf.with_columns(x.alias(name))
        return lf

    def null(self, kind: str) -> V:
        return V(null_of(kind), kind, "us" if kind == "datetime" else None)

    # -- leaves ---------------------------------------------------------------------------
    def tr(self, e: Expr) -> V:
        if isinstance(e, Literal):
            return self.literal(e.value)
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
            return self.cast(self.tr(e.operand), e.type_name)
        if isinstance(e, InList):
            return self.in_list(e)
        if isinstance(e, Between):
            x = self.tr(e.operand)
            x = V(self.bind(x.expr), x.kind, x.unit)
            v = self.logic(
                "AND", self.compare(">=", x, self.tr(e.low)), self.compare("<=", x, self.tr(e.high))
            )
            return self.logic_not(v) if e.negated else v
        if isinstance(e, Like):
            return self.like(e)
        if isinstance(e, IsNull):
            x = self.tr(e.operand)
            if x.kind == "null":
                return V(pl.lit(not e.negated), "bool")
            return V(x.expr.is_not_null() if e.negated else x.expr.is_null(), "bool")
        raise PinqError(f"the Polars engine cannot translate a {type(e).__name__} node")

    def literal(self, v: object) -> V:
        if v is None:
            return V(pl.lit(None), "null")
        if isinstance(v, bool):
            return V(pl.lit(v, dtype=pl.Boolean), "bool")
        if isinstance(v, int):
            if _I64_MIN <= v <= _I64_MAX:
                return V(pl.lit(v, dtype=pl.Int64), "int")
            return V(pl.lit(float(v), dtype=pl.Float64), "float")
        if isinstance(v, float):
            return self.null("float") if math.isnan(v) else V(pl.lit(v, dtype=pl.Float64), "float")
        if isinstance(v, str):
            return V(pl.lit(valid_text(v), dtype=pl.String), "str")
        raise PinqError(f"unsupported literal of type {type(v).__name__}")

    def column_for(self, name: str) -> V:
        """The column ``name`` (exactly), as a value (a category as its text)."""
        kind, unit = self.cols[name]
        if unit == CATEGORICAL:
            return V(pl.col(name).cast(pl.String), kind)
        return V(pl.col(name), kind, unit)

    def column(self, e: Column) -> V:
        key = resolve_column(e, self.cols)
        if key is None:
            raise PinqSyntaxError(f"unknown column '{e.name}'")
        return self.column_for(key)

    # -- coercions ------------------------------------------------------------------------
    def as_double(self, v: V) -> pl.Expr:
        if v.kind in NUMERIC:
            return v.expr.cast(pl.Float64)
        if v.kind == "str":
            return self.cast(v, "DOUBLE").expr
        return null_of("float")

    def to_str(self, v: V) -> V:
        if v.kind == "str":
            return v
        if v.kind in ("null", "other"):
            return self.null("str")
        if v.kind == "datetime":
            return V(datetime_text(v.expr), "str")
        if v.kind == "float":
            return V(float_text(v.expr), "str")
        return V(v.expr.cast(pl.String), "str")  # 'true'/'false' for booleans

    def to_kind(self, v: V, kind: str) -> V:
        if v.kind == kind == "datetime":
            # Results are in microseconds (as on pandas, DuckDB and Spark).
            return v if v.unit == "us" else V(v.expr.cast(pl.Datetime("us")), kind, "us")
        if v.kind == kind:
            return v
        if v.kind == "null" or kind == "null":
            return self.null(kind)
        if kind == "float":
            return V(self.as_double(v), "float")
        if kind == "int" and v.kind == "bool":
            return V(v.expr.cast(pl.Int64), "int")
        if kind == "str":
            return self.to_str(v)
        return self.cast(v, {"int": "BIGINT", "bool": "BOOLEAN", "datetime": "TIMESTAMP"}[kind])

    def result_kind(self, vs: Sequence[V]) -> str:
        kinds = {v.kind for v in vs if v.kind != "null"}
        if not kinds:
            return "null"
        if kinds <= NUMERIC:
            return "float" if "float" in kinds else "int" if "int" in kinds else "bool"
        if len(kinds) == 1:
            return next(iter(kinds))
        return "str"

    # -- arithmetic -----------------------------------------------------------------------
    def bool_to_int(self, v: V) -> V:
        return V(v.expr.cast(pl.Int64), "int")

    def concat(self, a: V, b: V) -> V:
        return V(pl.concat_str([a.expr, b.expr]), "str")

    def arith(self, op: str, a: V, b: V) -> V:
        a, b = self.numeric(a), self.numeric(b)
        if a.kind == "null" or b.kind == "null":
            ints = {a.kind, b.kind} - {"null"} == {"int"} and op != "/"
            return self.null("int" if ints else "float")
        if a.kind == "int" and b.kind == "int" and op != "/":
            return V(self.int_op(op, a.expr, b.expr), "int")
        x, y = self.as_double(a), self.as_double(b)
        if op == "+":
            r = x + y
        elif op == "-":
            r = x - y
        elif op == "*":
            r = x * y
        elif op == "/":
            r = divide(x, y)
        else:
            r = _fmod(x, y)
        return V(self.finite(r), "float")

    @staticmethod
    def int_op(op: str, a: pl.Expr, b: pl.Expr) -> pl.Expr:
        """``a op b`` of Int64s in Int128 (no wrap-around), NULL beyond int64 and on ``% 0``;
        ``%`` has the dividend's sign, as SQL's and numpy's ``fmod``."""
        x, y = _wide(a), _wide(b)
        if op == "+":
            return _int(x + y)
        if op == "-":
            return _int(x - y)
        if op == "*":
            return _int(x * y)
        r = x.abs() % y.abs()
        return pl.when(y != 0).then(_int(pl.when(x < 0).then(_neg(r)).otherwise(r)))

    def negate(self, v: V) -> V:
        if v.kind == "int":
            return V(_int(_neg(_wide(v.expr))), "int")
        return V(-v.expr, v.kind)

    # -- comparison and logic -------------------------------------------------------------
    def compare(self, op: str, a: V, b: V) -> V:
        if "null" in (a.kind, b.kind):
            return self.null("bool")
        if a.kind in NUMERIC and b.kind in NUMERIC:
            if a.kind != b.kind and "bool" in (a.kind, b.kind):
                a, b = V(self.as_double(a), "float"), V(self.as_double(b), "float")
        elif a.kind == b.kind and a.kind in ("str", "datetime"):
            pass
        elif {a.kind, b.kind} == {"datetime", "str"}:
            a = self.cast(a, "TIMESTAMP") if a.kind == "str" else a
            b = self.cast(b, "TIMESTAMP") if b.kind == "str" else b
        elif a.kind in NUMERIC and b.kind == "str":
            b = self.numeric(b)
        elif b.kind in NUMERIC and a.kind == "str":
            a = self.numeric(a)
        else:
            return self.null("bool")
        if a.kind == "datetime" and a.unit != b.unit:
            return V(_compare_units(op, self.bind(a.expr), self.bind(b.expr)), "bool")
        return V(_CMP[op](a.expr, b.expr), "bool")

    def logic(self, op: str, a: V, b: V) -> V:
        # Polars' & and | on booleans are SQL's three-valued AND and OR.
        a, b = self.boolean(a), self.boolean(b)
        return V(a.expr & b.expr if op == "AND" else a.expr | b.expr, "bool")

    def logic_not(self, v: V) -> V:
        return V(~self.boolean(v).expr, "bool")

    def in_list(self, e: InList) -> V:
        if not e.items:
            return V(pl.lit(e.negated), "bool")
        x = self.tr(e.operand)
        if len(e.items) > 1:
            x = V(self.bind(x.expr), x.kind, x.unit)
        items = [self.tr(i) for i in e.items]
        fast = _in_literals(x, e.items)
        if fast is not None:
            v = V(fast, "bool")
        else:
            parts = [self.compare("=", x, i) for i in items]
            v = parts[0]
            for p in parts[1:]:
                v = self.logic("OR", v, p)
        return self.logic_not(v) if e.negated else v

    def like_match(self, x: V, pattern: str) -> V:
        return V(_like(x.expr, pattern), "bool")

    # -- CASE and functions ---------------------------------------------------------------
    def case(self, e: Case) -> V:
        conds = [self.boolean(self.tr(c)).expr for c, _ in e.whens]
        results = [self.tr(r) for _, r in e.whens]
        results.append(self.tr(e.else_) if e.else_ is not None else V(pl.lit(None), "null"))
        kind = self.result_kind(results)
        rs = [self.to_kind(r, kind) for r in results]
        chain = pl.when(conds[0]).then(rs[0].expr)
        for c, r in zip(conds[1:], rs[1:-1], strict=True):
            chain = chain.when(c).then(r.expr)
        return V(chain.otherwise(rs[-1].expr), kind, rs[-1].unit)

    def call(self, e: Call) -> V:
        name = e.name.upper()
        if name in AGGREGATE_FUNCTIONS:
            raise PinqError(
                f"the aggregate {name} cannot be evaluated row by row; "
                "aggregates belong in an aggregation"
            )
        if name in ("SUBSTR", "SUBSTRING"):
            return self.substr(e)
        fn = _FUNCTIONS.get(name)
        if fn is None:
            raise PinqSyntaxError(f"unknown function '{e.name}'")
        return fn(self, [self.tr(a) for a in e.args])

    def math1(self, v: V, fn: Callable[[pl.Expr], pl.Expr]) -> V:
        return V(self.finite(fn(self.as_double(self.numeric(v)))), "float")

    def to_int_fn(self, v: V, how: str) -> V:
        """FLOOR/CEIL/ROUND to an integer; NULL outside the int64 range."""
        v = self.numeric(v)
        if v.kind in ("int", "null"):
            return v if v.kind == "int" else self.null("int")
        x = self.bind(v.expr)
        r = x.floor() if how == "floor" else x.ceil() if how == "ceil" else _round_half_away(x)
        return V(_float_to_int(self.bind(r)), "int")

    def str_fn(self, v: V, fn: Callable[[pl.Expr], pl.Expr]) -> V:
        return V(fn(self.to_str(v).expr), "str")

    def extreme(self, vs: list[V], least: bool) -> V:
        kind = self.result_kind(vs)
        args = [self.to_kind(v, kind) for v in vs]
        if len(args) == 1:
            return args[0]
        exprs = [a.expr for a in args]
        out = pl.min_horizontal(exprs) if least else pl.max_horizontal(exprs)
        return V(out, kind, args[0].unit)

    def substr(self, e: Call) -> V:
        consts: list[int | None] = []
        for a in e.args[1:]:
            if isinstance(a, Literal) and (a.value is None or type(a.value) is int):
                consts.append(None if a.value is None else int(a.value))
            else:
                raise PinqError(
                    "the Polars engine needs the start and length of SUBSTR to be literal "
                    "integers"
                )
        if any(c is None for c in consts):
            return self.null("str")
        x = self.to_str(self.tr(e.args[0]))
        begin = max(int(consts[0]) - 1, 0)  # type: ignore[arg-type]
        first = min(begin, _MAX_POSITION)
        if len(consts) == 2:
            length = int(consts[1])  # type: ignore[arg-type]
            if length < 0:
                return self.null("str")
            end = min(max(int(consts[0]) - 1 + length, 0), _MAX_POSITION)  # type: ignore[arg-type]
            return V(x.expr.str.slice(first, max(end - first, 0)), "str")
        return V(x.expr.str.slice(first), "str")

    # -- CAST -----------------------------------------------------------------------------
    def cast(self, v: V, type_name: str) -> V:
        upper = type_name.upper()
        target = CAST_TYPES.get(upper)
        if target is None:
            raise PinqSyntaxError(f"unknown type '{type_name}' in CAST")
        if v.kind in ("null", "other"):
            return self.null(target)
        x = v.expr
        if target == "int":
            if v.kind in ("int", "bool"):
                return V(x.cast(pl.Int64), "int")
            if v.kind == "float":
                return self.to_int_fn(v, "round")
            if v.kind == "str":
                return V(text_to_int(self.bind(x)), "int")
            return self.null("int")
        if target == "float":
            if v.kind == "str":
                return V(finite(self.bind(text_to_float(x))), "float")
            if v.kind == "datetime":
                return self.null("float")
            return V(x.cast(pl.Float64), "float")
        if target == "str":
            return self.to_str(v)
        if target == "bool":
            if v.kind == "bool":
                return v
            if v.kind in ("int", "float"):
                return V(x != 0, "bool")
            if v.kind == "str":
                return V(text_to_bool(x), "bool")
            return self.null("bool")
        if v.kind not in ("datetime", "str"):
            return self.null("datetime")
        if v.kind == "datetime":
            stamp = self.to_kind(v, "datetime").expr
        else:
            stamp = text_timestamp(self.bind(x))
        return V(stamp.dt.truncate("1d") if upper == "DATE" else stamp, "datetime", "us")


_CMP: dict[str, Callable[[pl.Expr, pl.Expr], pl.Expr]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _compare_units(op: str, a: pl.Expr, b: pl.Expr) -> pl.Expr:
    """Compare timestamps of different units exactly, never by a cast that overflows (a
    microsecond value outside 1677-2262 has no nanosecond one): in microseconds, and in
    nanoseconds where the microseconds tie (then both lie within a microsecond of each other,
    inside the nanosecond range)."""
    au, bu = a.cast(pl.Datetime("us")), b.cast(pl.Datetime("us"))
    an, bn = a.cast(pl.Datetime("ns"), strict=False), b.cast(pl.Datetime("ns"), strict=False)
    return pl.when(au != bu).then(_CMP[op](au, bu)).otherwise(_CMP[op](an, bn))


def _in_literals(x: V, items: Sequence[Expr]) -> pl.Expr | None:
    """``x IN (literals)`` as one hash lookup per row, for text or integers among literals
    of their own kind, none NULL (a NULL item would make every non-match unknown)."""
    values = [i.value for i in items if isinstance(i, Literal)]
    if len(values) != len(items) or len(values) < 2:
        return None
    if x.kind == "str" and all(isinstance(v, str) for v in values):
        return x.expr.is_in(pl.Series([valid_text(v) for v in values], dtype=pl.String).implode())
    ints = all(type(v) is int and _I64_MIN <= v <= _I64_MAX for v in values)
    if x.kind == "int" and ints:
        return x.expr.is_in(pl.Series(values, dtype=pl.Int64).implode())
    return None


def _like_pieces(pattern: str) -> list[tuple[str, str]]:
    """A LIKE pattern as ("lit", character) | ("any", "%") | ("one", "_"); ``\\x`` is a
    literal ``x``."""
    pieces: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            pieces.append(("lit", pattern[i + 1]))
            i += 2
            continue
        pieces.append(("any" if ch == "%" else "one" if ch == "_" else "lit", ch))
        i += 1
    return pieces


def _like(x: pl.Expr, pattern: str) -> pl.Expr:
    """``x LIKE pattern``: a plain comparison, prefix, suffix or substring test where the
    pattern is one, else a Rust regex (which never backtracks: linear in the text)."""
    pieces = _like_pieces(pattern)
    kinds = [k for k, _ in pieces]
    text = "".join(t for k, t in pieces if k == "lit")
    if "one" not in kinds:
        wild = [i for i, k in enumerate(kinds) if k == "any"]
        n = len(pieces)
        if not wild:
            return x == pl.lit(text, dtype=pl.String)
        if wild == [n - 1]:
            return x.str.starts_with(text)
        if wild == [0] and n > 1:
            return x.str.ends_with(text)
        if wild == [0, n - 1] and n >= 2:
            return x.str.contains(text, literal=True)
    body = "".join(
        ".*" if k == "any" else "." if k == "one" else pl.escape_regex(t) for k, t in pieces
    )
    regex = f"(?s)^{body}$"
    try:  # a pattern too large to compile is refused now, before anything is charged
        pl.select(pl.lit("").str.contains(regex))
    except Exception:
        raise PinqError("the LIKE pattern is too long for the Polars engine") from None
    return x.str.contains(regex)


def _round_fn(t: PolarsExpr, a: list[V]) -> V:
    if len(a) == 1:
        return t.to_int_fn(a[0], "round")
    x = t.as_double(t.numeric(a[0]))
    d = t.bind(t.as_double(t.numeric(a[1])))
    whole = pl.when(d < 0).then(d.ceil()).otherwise(d.floor())
    scale = t.bind(pl.lit(10.0, dtype=pl.Float64).pow(whole))
    x = t.bind(x * scale)
    return V(t.finite(divide(_round_half_away(x), scale)), "float")


def _abs_fn(t: PolarsExpr, a: list[V]) -> V:
    v = t.numeric(a[0])
    if v.kind == "int":
        return V(_int(_wide(v.expr).abs()), "int")
    if v.kind == "null":
        return t.null("float")
    return V(v.expr.abs(), "float")


def _sign_fn(t: PolarsExpr, a: list[V]) -> V:
    v = t.numeric(a[0])
    if v.kind == "null":
        return t.null("float")
    if v.kind == "int":
        return V(v.expr.sign().cast(pl.Int64), "int")
    # numpy's sign of -0.0 is 0.0, Polars' -0.0.
    x = t.bind(v.expr)
    return V(pl.when(x == 0.0).then(pl.lit(0.0)).otherwise(x.sign().cast(pl.Float64)), "float")


def _power_fn(t: PolarsExpr, a: list[V]) -> V:
    x, y = t.as_double(t.numeric(a[0])), t.as_double(t.numeric(a[1]))
    return V(t.finite(x.pow(y)), "float")


def _coalesce_fn(t: PolarsExpr, a: list[V]) -> V:
    kind = t.result_kind(a)
    vs = [t.to_kind(v, kind) for v in a]
    return V(pl.coalesce([v.expr for v in vs]), kind, vs[0].unit)


def _nullif_fn(t: PolarsExpr, a: list[V]) -> V:
    x = V(t.bind(a[0].expr), a[0].kind, a[0].unit)
    same = t.compare("=", x, a[1]).expr
    return V(pl.when(same).then(t.null(x.kind).expr).otherwise(x.expr), x.kind, x.unit)


def _if_fn(t: PolarsExpr, a: list[V]) -> V:
    cond = t.boolean(a[0]).expr
    kind = t.result_kind(a[1:])
    x, y = t.to_kind(a[1], kind), t.to_kind(a[2], kind)
    return V(pl.when(cond).then(x.expr).otherwise(y.expr), kind, x.unit)


def _length_fn(t: PolarsExpr, a: list[V]) -> V:
    return V(t.to_str(a[0]).expr.str.len_chars().cast(pl.Int64), "int")


def _concat_fn(t: PolarsExpr, a: list[V]) -> V:
    # CONCAT skips NULLs (PostgreSQL); || does not.
    parts = [t.to_str(v).expr.fill_null("") for v in a]
    return V(pl.concat_str(parts), "str")


_FUNCTIONS: dict[str, Callable[[PolarsExpr, list[V]], V]] = {
    "ABS": _abs_fn,
    "SIGN": _sign_fn,
    "FLOOR": lambda t, a: t.to_int_fn(a[0], "floor"),
    "CEIL": lambda t, a: t.to_int_fn(a[0], "ceil"),
    "CEILING": lambda t, a: t.to_int_fn(a[0], "ceil"),
    "ROUND": _round_fn,
    "SQRT": lambda t, a: t.math1(a[0], lambda x: x.sqrt()),
    "LN": lambda t, a: t.math1(a[0], lambda x: x.log()),
    "LOG": lambda t, a: t.math1(a[0], lambda x: x.log10()),
    "LOG10": lambda t, a: t.math1(a[0], lambda x: x.log10()),
    "EXP": lambda t, a: t.math1(a[0], lambda x: x.exp()),
    "POWER": _power_fn,
    "POW": _power_fn,
    "LEAST": lambda t, a: t.extreme(a, True),
    "GREATEST": lambda t, a: t.extreme(a, False),
    "COALESCE": _coalesce_fn,
    "NULLIF": _nullif_fn,
    "IF": _if_fn,
    "IIF": _if_fn,
    "LOWER": lambda t, a: t.str_fn(a[0], lambda s: s.str.to_lowercase()),
    "UPPER": lambda t, a: t.str_fn(a[0], lambda s: s.str.to_uppercase()),
    "TRIM": lambda t, a: t.str_fn(a[0], lambda s: s.str.strip_chars(" ")),
    "LTRIM": lambda t, a: t.str_fn(a[0], lambda s: s.str.strip_chars_start(" ")),
    "RTRIM": lambda t, a: t.str_fn(a[0], lambda s: s.str.strip_chars_end(" ")),
    "LENGTH": _length_fn,
    "CONCAT": _concat_fn,
}
