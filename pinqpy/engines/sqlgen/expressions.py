"""Expressions translated into SQL that follows :mod:`pinqpy.expr.pandas_eval`, for every SQL
engine: one translator, and per engine a :class:`Dialect` that declares what its SQL spells
differently (quoting, literals, NULL on a fault, the text of numbers and times, a few
functions).

The translated SQL keeps pinqpy's semantics whatever the engine: NULL propagates; a fault that
depends on the data (division by zero, integer overflow, a bad CAST, the logarithm of a
negative, a non-finite float) gives NULL, never an error; ``/`` is float division; FLOOR, CEIL
and ROUND(x) give integers (NULL beyond the int64 range); LOG is base 10; LEAST/GREATEST skip
NULLs.

The SQL is written as text, not as sqlglot trees rendered per dialect. sqlglot carries syntax
(quoting, CAST spellings, ``strftime`` to ``date_format``), but not these semantics: it has no
cross-dialect form for the fault guards the engines differ in (DuckDB's ``TRY(a + b)`` renders
for Spark as a bare ``a + b`` that fails under ANSI, Spark's ``try_add`` becomes a ``SAFE_ADD``
DuckDB lacks), it passes engine functions through unchanged where the other engine has none
(``isfinite``, ``regexp_full_match``, ``xxhash64``, DuckDB's ``hash``, which is another hash
than Spark's), and a plain number literal is a DECIMAL in Spark, not a double. Each of those
would still be spelled per engine by hand, so sqlglot would add a dependency and a second
layer without carrying the parts that must be exact; the differences are declared here instead.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

from pinqpy.engines.sqlgen.dialect import I64_MAX, I64_MIN, NUMERIC, Dialect, S
from pinqpy.engines.sqlgen.lets import Lets
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
from pinqpy.expr.types import CAST_TYPES
from pinqpy.plan.nodes import PyFunc

# NUMERIC, Lets and S are imported from here by the DuckDB executor.
__all__ = [
    "NUMERIC",
    "ExprSql",
    "Lets",
    "S",
    "aggregate",
    "no_callable",
    "numeric_value",
    "typed",
]


class ExprSql(KindRules[S]):
    """Translates one expression over a relation with known column kinds.

    ``nan``: stored float columns whose NaN reads as NULL (an engine that normalizes its
    sources has none); ``reads`` may give another reading of a stored column (SQL with ``{}``
    for the column).
    """

    def __init__(
        self,
        dialect: Dialect,
        kinds: dict[str, str],
        lets: Lets,
        nan: frozenset[str] = frozenset(),
        reads: dict[str, str] | None = None,
    ) -> None:
        self.d = dialect
        self.kinds = kinds
        self.lets = lets
        self.nan = nan
        self.reads = reads or {}
        self.unchecked = False  # whether only the engine can tell if the SQL is valid
        # Sub-expressions written more than once (k-means' distances) are translated once
        # and computed once, as lets (where the dialect shares repeats).
        self._uses: Counter[Expr] = Counter()
        self._done: dict[Expr, S] = {}
        self._depth = 0

    def null(self, kind: str) -> S:
        return S(self.d.null(kind), kind)

    def bind(self, v: S) -> S:
        return self.lets.bind(v)

    def finite(self, sql: str) -> S:
        """A DOUBLE with every non-finite value (overflow, 0/0, ...) made NULL."""
        x = self.bind(S(sql, "float")).sql
        return S(f"(CASE WHEN {self.d.finite_test(x)} THEN {x} END)", "float", raw=sql)

    # -- leaves ---------------------------------------------------------------------------
    def tr(self, e: Expr) -> S:
        if isinstance(e, Literal):
            return self.literal(e.value)
        if isinstance(e, Column):
            return self.column(e)
        if not self.d.share_repeats:
            return self.node(e)
        if self._depth == 0:
            self._uses.update(n for n in e.walk() if not isinstance(n, Literal | Column))
        hit = self._done.get(e)
        if hit is not None:
            return hit
        self._depth += 1
        try:
            v = self.node(e)
        finally:
            self._depth -= 1
        if self._uses[e] > 1 and not self.d.simple.fullmatch(v.sql):
            v = S(self.bind(v).sql, v.kind, v.raw)
        self._done[e] = v
        return v

    def node(self, e: Expr) -> S:
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
            x = self.bind(self.tr(e.operand))
            v = self.logic(
                "AND", self.compare(">=", x, self.tr(e.low)), self.compare("<=", x, self.tr(e.high))
            )
            return self.logic_not(v) if e.negated else v
        if isinstance(e, Like):
            return self.like(e)
        if isinstance(e, IsNull):
            x = self.tr(e.operand)
            return S(f"(({x.sql}) IS {'NOT ' if e.negated else ''}NULL)", "bool")
        raise PinqError(f"the {self.d.name} engine cannot translate a {type(e).__name__} node")

    def literal(self, v: object) -> S:
        if v is None:
            return S("NULL", "null")
        if isinstance(v, bool):
            return S("TRUE" if v else "FALSE", "bool")
        if isinstance(v, int):
            if I64_MIN <= v <= I64_MAX:
                return S(self.d.int_lit(v), "int")
            return S(self.d.float_lit(float(v)), "float")
        if isinstance(v, float):
            return self.null("float") if math.isnan(v) else S(self.d.float_lit(v), "float")
        if isinstance(v, str):
            return S(self.d.str_lit(v), "str")
        raise PinqError(f"unsupported literal of type {type(v).__name__}")

    def column(self, e: Column) -> S:
        if self.d.qualified_columns:
            key = resolve_column(e, self.kinds)
        else:
            key = e.name if e.name in self.kinds else None
        if key is None:
            raise PinqSyntaxError(f"unknown column '{e.name}'")
        q = self.d.ident(key)
        if key in self.nan:
            read = self.reads.get(key, "(CASE WHEN isnan({}) THEN NULL ELSE {} END)")
            return S(read.replace("{}", q), self.kinds[key])
        return S(q, self.kinds[key])

    # -- coercions ------------------------------------------------------------------------
    def as_double(self, v: S) -> str:
        if v.kind in NUMERIC:
            return self.d.to_double(v.sql, v.kind)
        if v.kind == "str":
            return self.cast(v, "DOUBLE").sql
        return self.d.null("float")

    def to_str(self, v: S) -> S:
        if v.kind == "str":
            return v
        if v.kind in ("null", "other"):
            return self.null("str")
        if v.kind == "datetime":
            return S(self.d.datetime_text(v.sql), "str")
        if v.kind == "float":
            return self.d.float_text(self, v.sql)
        return S(f"CAST({v.sql} AS {self.d.string_type})", "str")  # 'true'/'false' for bools

    def to_kind(self, v: S, kind: str) -> S:
        if v.kind == kind == "datetime" and self.d.unify_datetime is not None:
            return S(self.d.unify_datetime.format(v.sql), "datetime")
        if v.kind == kind:
            return v
        if v.kind == "null":
            return self.null(kind)
        if kind == "float":
            return S(self.as_double(v), "float")
        if kind == "int" and v.kind == "bool":
            return S(self.d.to_bigint(v.sql, "bool"), "int")
        if kind == "str":
            return self.to_str(v)
        if kind == "null":
            return self.null("null")
        return self.cast(v, {"int": "BIGINT", "bool": "BOOLEAN", "datetime": "TIMESTAMP"}[kind])

    def result_kind(self, vs: Sequence[S]) -> str:
        kinds = {v.kind for v in vs if v.kind != "null"}
        if not kinds:
            return "null"
        if kinds <= NUMERIC:
            return "float" if "float" in kinds else "int" if "int" in kinds else "bool"
        if len(kinds) == 1:
            kind = next(iter(kinds))
            # Values of types pinqpy does not model (lists, maps, structs) may not combine:
            # only the engine can tell.
            self.unchecked |= kind == "other"
            return kind
        return "str"

    # -- arithmetic -----------------------------------------------------------------------
    def bool_to_int(self, v: S) -> S:
        return S(self.d.to_bigint(v.sql, "bool"), "int")

    def concat(self, a: S, b: S) -> S:
        return S(self.d.concat2(a.sql, b.sql), "str")

    def arith(self, op: str, a: S, b: S) -> S:
        a, b = self.numeric(a), self.numeric(b)
        if a.kind == "null" or b.kind == "null":
            ints = {a.kind, b.kind} - {"null"} == {"int"} and op != "/"
            return self.null("int" if ints else "float")
        if a.kind == "int" and b.kind == "int" and op != "/":
            return S(self.d.int_op(op, a.sql, b.sql), "int")
        if op in ("+", "-", "*"):
            # A non-finite operand gives a non-finite result: the result's check covers it.
            x = a.raw if a.raw is not None else self.as_double(a)
            y = b.raw if b.raw is not None else self.as_double(b)
        else:
            x, y = self.as_double(a), self.as_double(b)
        if self.d.guarded_floats:  # the guards repeat the operands: compute them once
            x, y = self.bind(S(x, "float")).sql, self.bind(S(y, "float")).sql
        return self.finite(self.d.float_op(op, x, y))

    def negate(self, v: S) -> S:
        if v.kind == "int":
            return S(self.d.int_neg(v.sql), "int")
        return S(f"(-({v.sql}))", v.kind)

    # -- comparison and logic -------------------------------------------------------------
    def compare(self, op: str, a: S, b: S) -> S:
        if "null" in (a.kind, b.kind):
            return self.null("bool")
        if a.kind in NUMERIC and b.kind in NUMERIC:
            if a.kind != b.kind and "bool" in (a.kind, b.kind):
                a, b = S(self.as_double(a), "float"), S(self.as_double(b), "float")
        elif a.kind == b.kind == "str":
            if op not in ("=", "<>"):
                return S(self.d.compare_strs(op, a.sql, b.sql), "bool")
        elif a.kind == b.kind == "datetime":
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
        if a.kind == "datetime":
            return self.d.compare_datetimes(self, op, a, b)
        return S(f"({a.sql} {op} {b.sql})", "bool")

    def logic(self, op: str, a: S, b: S) -> S:
        a, b = self.boolean(a), self.boolean(b)
        return S(f"({a.sql} {op} {b.sql})", "bool")

    def logic_not(self, v: S) -> S:
        return S(f"(NOT {self.boolean(v).sql})", "bool")

    def in_list(self, e: InList) -> S:
        if not e.items:
            return S("TRUE" if e.negated else "FALSE", "bool")
        x = self.tr(e.operand)
        if len(e.items) > 1:
            x = self.bind(x)
        parts = [self.compare("=", x, self.tr(i)).sql for i in e.items]
        v = S("(" + " OR ".join(parts) + ")", "bool")
        return self.logic_not(v) if e.negated else v

    def like_match(self, x: S, pattern: str) -> S:
        return self.d.like(self, x, pattern)

    # -- CASE and functions ---------------------------------------------------------------
    def case(self, e: Case) -> S:
        conds = [self.boolean(self.tr(c)).sql for c, _ in e.whens]
        results = [self.tr(r) for _, r in e.whens]
        results.append(self.tr(e.else_) if e.else_ is not None else S("NULL", "null"))
        kind = self.result_kind(results)
        rs = [self.to_kind(r, kind) for r in results]
        body = " ".join(f"WHEN {c} THEN {r.sql}" for c, r in zip(conds, rs[:-1], strict=True))
        return S(f"(CASE {body} ELSE {rs[-1].sql} END)", kind)

    def call(self, e: Call) -> S:
        name = e.name.upper()
        if name in AGGREGATE_FUNCTIONS:
            raise PinqError(
                f"the aggregate {name} cannot be evaluated row by row; "
                "aggregates belong in an aggregation"
            )
        if name in ("SUBSTR", "SUBSTRING"):
            return self.substr(e)
        if (
            self.d.power_skips_base_check
            and name in ("POWER", "POW")
            and len(e.args) == 2
            and _positive_number(e.args[1])
        ):
            # A non-finite base to a positive power is non-finite: the result's check covers
            # the base's (so sums of squares need no lets per term).
            base = self.numeric(self.tr(e.args[0]))
            x = base.raw if base.raw is not None else self.as_double(base)
            y = self.as_double(self.numeric(self.tr(e.args[1])))
            return self.finite(self.d.power(self, x, y))
        fn = _FUNCTIONS.get(name)
        if fn is None:
            raise PinqSyntaxError(f"unknown function '{e.name}'")
        return fn(self, [self.tr(a) for a in e.args])

    def math1(self, v: S, fn: str) -> S:
        return self.finite(self.d.math1(self, fn, self.as_double(self.numeric(v))))

    def to_int_fn(self, v: S, how: str) -> S:
        """FLOOR/CEIL/ROUND to an integer; NULL outside the int64 range."""
        v = self.numeric(v)
        if v.kind in ("int", "null"):
            return v if v.kind == "int" else self.null("int")
        return self.d.to_int(self, v, how)

    def str_fn(self, v: S, template: str) -> S:
        return S(template.format(self.to_str(v).sql), "str")

    def extreme(self, vs: list[S], least: bool) -> S:
        kind = self.result_kind(vs)
        args = [self.to_kind(v, kind).sql for v in vs]
        if len(args) == 1:
            return S(args[0], kind)
        return S(self.d.extreme(least, args, kind), kind)

    def substr(self, e: Call) -> S:
        consts: list[int | None] = []
        for a in e.args[1:]:
            if isinstance(a, Literal) and (a.value is None or isinstance(a.value, int)):
                consts.append(None if a.value is None else int(a.value))
            else:
                raise PinqError(
                    f"the {self.d.name} engine needs the start and length of SUBSTR to be "
                    "literal integers"
                )
        if any(c is None for c in consts):
            return self.null("str")
        x = self.to_str(self.tr(e.args[0]))
        most = self.d.max_string
        begin = max(int(consts[0]) - 1, 0)  # type: ignore[arg-type]
        if len(consts) == 2:
            length = int(consts[1])  # type: ignore[arg-type]
            if length < 0:
                return self.null("str")
            end = max(int(consts[0]) - 1 + length, 0)  # type: ignore[arg-type]
            count = min(max(end - begin, 0), most)
            return S(f"substring({x.sql}, {min(begin + 1, most)}, {count})", "str")
        return S(f"substring({x.sql}, {min(begin + 1, most)})", "str")

    # -- CAST -----------------------------------------------------------------------------
    def cast(self, v: S, type_name: str) -> S:
        upper = type_name.upper()
        target = CAST_TYPES.get(upper)
        if target is None:
            raise PinqSyntaxError(f"unknown type '{type_name}' in CAST")
        if v.kind in ("null", "other"):
            return self.null(target)
        s = v.sql
        if target == "int":
            if v.kind == "int":
                return v
            if v.kind == "bool":
                return S(self.d.to_bigint(s, "bool"), "int")
            if v.kind == "float":
                return self.to_int_fn(v, "round")
            if v.kind == "str":
                return S(self.d.text_to_int(self, s), "int")
            return self.null("int")
        if target == "float":
            if v.kind == "str":
                return self.finite(self.d.text_to_float(s))
            if v.kind == "datetime":
                return self.null("float")
            return S(self.d.to_double(s, v.kind), "float")
        if target == "str":
            return self.to_str(v)
        if target == "bool":
            if v.kind == "bool":
                return v
            if v.kind in ("int", "float"):
                return S(f"({s} <> 0)", "bool")
            if v.kind == "str":
                return S(self.d.text_to_bool(self, s), "bool")
            return self.null("bool")
        # datetime
        if v.kind not in ("datetime", "str"):
            return self.null("datetime")
        if v.kind == "str":  # read twice: matched against the timestamp text, then cast
            s = self.bind(v).sql
        out = self.d.to_timestamp(s, v.kind)
        if upper == "DATE":
            out = self.d.to_date(out)
        return S(out, "datetime")


def _positive_number(e: Expr) -> bool:
    v = e.value if isinstance(e, Literal) else None
    return type(v) in (int, float) and math.isfinite(v) and v > 0  # type: ignore[arg-type]


def _round_fn(t: ExprSql, a: list[S]) -> S:
    if len(a) == 1:
        return t.to_int_fn(a[0], "round")
    x = t.as_double(t.numeric(a[0]))
    d = t.as_double(t.numeric(a[1]))
    return t.d.round_to(t, x, d)


def _abs_fn(t: ExprSql, a: list[S]) -> S:
    v = t.numeric(a[0])
    if v.kind == "int":
        return S(t.d.int_abs(v.sql), "int")
    if v.kind == "null":
        return t.null("float")
    return S(f"abs({v.sql})", "float")


def _sign_fn(t: ExprSql, a: list[S]) -> S:
    v = t.numeric(a[0])
    if v.kind == "null":
        return t.null("float")
    kind = "int" if v.kind == "int" else "float"
    sql_type = "BIGINT" if kind == "int" else t.d.double_type
    return S(f"CAST({t.d.sign_fn}({v.sql}) AS {sql_type})", kind)


def _power_fn(t: ExprSql, a: list[S]) -> S:
    x, y = t.as_double(t.numeric(a[0])), t.as_double(t.numeric(a[1]))
    return t.finite(t.d.power(t, x, y))


def _coalesce_fn(t: ExprSql, a: list[S]) -> S:
    kind = t.result_kind(a)
    return S("coalesce(" + ", ".join(t.to_kind(v, kind).sql for v in a) + ")", kind)


def _nullif_fn(t: ExprSql, a: list[S]) -> S:
    # Written as a CASE: DuckDB expands NULLIF into one that repeats its argument.
    x = t.bind(a[0])
    same = t.compare("=", x, a[1]).sql
    return S(f"(CASE WHEN {same} THEN {t.d.null(x.kind)} ELSE {x.sql} END)", x.kind)


def _if_fn(t: ExprSql, a: list[S]) -> S:
    cond = t.boolean(a[0]).sql
    kind = t.result_kind(a[1:])
    x, y = t.to_kind(a[1], kind), t.to_kind(a[2], kind)
    return S(f"(CASE WHEN {cond} THEN {x.sql} ELSE {y.sql} END)", kind)


def _length_fn(t: ExprSql, a: list[S]) -> S:
    return S(f"CAST({t.d.length_fn}({t.to_str(a[0]).sql}) AS BIGINT)", "int")


def _concat_fn(t: ExprSql, a: list[S]) -> S:
    return S(t.d.concat_all.format(", ".join(t.to_str(v).sql for v in a)), "str")


_FUNCTIONS: dict[str, Callable[[ExprSql, list[S]], S]] = {
    "ABS": _abs_fn,
    "SIGN": _sign_fn,
    "FLOOR": lambda t, a: t.to_int_fn(a[0], "floor"),
    "CEIL": lambda t, a: t.to_int_fn(a[0], "ceil"),
    "CEILING": lambda t, a: t.to_int_fn(a[0], "ceil"),
    "ROUND": _round_fn,
    "SQRT": lambda t, a: t.math1(a[0], "sqrt"),
    "LN": lambda t, a: t.math1(a[0], "ln"),
    "LOG": lambda t, a: t.math1(a[0], "log10"),
    "LOG10": lambda t, a: t.math1(a[0], "log10"),
    "EXP": lambda t, a: t.math1(a[0], "exp"),
    "POWER": _power_fn,
    "POW": _power_fn,
    "LEAST": lambda t, a: t.extreme(a, True),
    "GREATEST": lambda t, a: t.extreme(a, False),
    "COALESCE": _coalesce_fn,
    "NULLIF": _nullif_fn,
    "IF": _if_fn,
    "IIF": _if_fn,
    "LOWER": lambda t, a: t.str_fn(a[0], "lower({})"),
    "UPPER": lambda t, a: t.str_fn(a[0], "upper({})"),
    "TRIM": lambda t, a: t.str_fn(a[0], t.d.trim),
    "LTRIM": lambda t, a: t.str_fn(a[0], t.d.ltrim),
    "RTRIM": lambda t, a: t.str_fn(a[0], t.d.rtrim),
    "LENGTH": _length_fn,
    "CONCAT": _concat_fn,
}


# -- values of aggregations -------------------------------------------------------------------
def no_callable(value: object, what: str, engine: str) -> None:
    if isinstance(value, PyFunc):
        raise PinqError(
            f"the {engine} engine cannot run the Python callable {value.name} in {what}; use an "
            "expression string, or the pandas engine"
        )


def typed(d: Dialect, v: S) -> str:
    """An untyped NULL gets a type (DOUBLE, as pandas stores an all-NULL column)."""
    return d.null("float") if v.kind == "null" else v.sql


def numeric_value(d: Dialect, v: S) -> str:
    """Values as DOUBLE with NULL for anything that is not a number (as pandas' _numeric)."""
    if v.kind in NUMERIC:
        return d.to_double(v.sql, v.kind)
    if v.kind == "str":
        return d.text_to_number(v.sql)
    return d.null("float")


_AGGREGATES = {
    "SUM": "sum",
    "AVG": "avg",
    "MIN": "min",
    "MAX": "max",
    "MEDIAN": "median",
    "VARIANCE": "var_samp",
    "STDDEV": "stddev_samp",
}


def aggregate(t: ExprSql, call: Call) -> str:
    """An aggregate of ``groupby().agg()``: COUNT as BIGINT, the others as DOUBLE."""
    func = call.name.upper()
    if call.star:
        return "COUNT(*)"
    arg = t.tr(call.args[0])
    if func == "COUNT":
        return f"COUNT({'DISTINCT ' if call.distinct else ''}{typed(t.d, arg)})"
    x = numeric_value(t.d, arg)
    sql_fn = _AGGREGATES.get(func)
    if sql_fn is None:
        raise PinqError(f"{func} cannot be used inside groupby().agg()")
    if func == "SUM":  # pandas: the sum of no values is 0
        return f"coalesce({t.d.float_aggregate('sum', x)}, {t.d.float_lit(0.0)})"
    return f"CAST({t.d.float_aggregate(sql_fn, x)} AS {t.d.double_type})"
