"""Run plans inside DuckDB and return only the small exact aggregates mechanisms need.

Each plan node becomes one common table expression (CTE); expressions are translated from the
AST into DuckDB SQL that follows :mod:`pinqpy.expr.pandas_eval`: NULL propagates, a fault that
depends on the data (division by zero, overflow, a bad CAST, the logarithm of a negative) gives
NULL and never an error, ``/`` is float division, FLOOR/CEIL/ROUND(x) give integers, LOG is
base 10, LEAST/GREATEST skip NULLs.

Only aggregates leave the engine: per-group counts, clamped sums, bucket counts and candidate
counts. Noise is added afterwards in Python, as for every engine.

Not supported (a :class:`~pinqpy.errors.PinqError` says so): Python callables
(:class:`~pinqpy.plan.nodes.PyFunc`), which cannot run inside the engine, and SUBSTR with start or
length that are not literal integers.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
import sys
import weakref
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from pinqpy.core.lattice import Lattice, SumGrid
from pinqpy.engines.base import (
    NO_MATCH,
    Executor,
    Grouping,
    LatticeSums,
    Read,
    batch_memo,
    canonical_key_counts,
    column_key,
    column_key_rows,
    prefetched,
)
from pinqpy.engines.buckets import Grid, bucket_query, uniform_grid
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
from pinqpy.expr.types import CAST_TYPES, ColumnType, valid_text
from pinqpy.noise import source as _noise
from pinqpy.plan.nodes import (
    BoundContributions,
    Distinct,
    Explode,
    GroupBy,
    Join,
    PartSource,
    PlanNode,
    PlanVisitor,
    PublicJoin,
    PyFunc,
    Select,
    SetOp,
    Source,
    Where,
)

__all__ = ["DuckDBExecutor", "duckdb_schema"]

_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1
_NUMERIC = frozenset({"int", "float", "bool"})
_TRUE_WORDS = ("true", "t", "yes", "y", "1", "on")
_FALSE_WORDS = ("false", "f", "no", "n", "0", "off")
_GI = "__pinq_g"


def _ident(name: str) -> str:
    """A column or table name as a DuckDB identifier (always quoted)."""
    return '"' + name.replace('"', '""') + '"'


def _str_lit(text: str) -> str:
    return "'" + valid_text(text).replace("'", "''") + "'"


def _kind_of_type(type_name: str) -> str:
    """The pandas_eval kind of a DuckDB column type ("other" for lists and the like)."""
    t = type_name.upper()
    if t.endswith("]") or t.startswith(("STRUCT", "MAP", "UNION")):
        return "other"
    if t in ("BIGINT", "INTEGER", "SMALLINT", "TINYINT", "UINTEGER", "USMALLINT", "UTINYINT"):
        return "int"
    if t in ("UBIGINT", "HUGEINT", "UHUGEINT"):
        return "int"
    if t in ("DOUBLE", "FLOAT", "REAL") or t.startswith("DECIMAL"):
        return "float"
    if t == "BOOLEAN":
        return "bool"
    if t in ("VARCHAR", "UUID") or t.startswith("ENUM"):
        return "str"
    if t.startswith(("TIMESTAMP", "DATE")):
        return "datetime"
    return "other"


def duckdb_schema(columns: Sequence[str], types: Sequence[str]) -> dict[str, ColumnType]:
    """pinqpy column types of a DuckDB relation's columns (lists, structs and maps: "any")."""
    out: dict[str, ColumnType] = {}
    for c, t in zip(columns, types, strict=True):
        kind = _kind_of_type(t)
        out[c] = "any" if kind == "other" else kind  # type: ignore[assignment]
    return out


# DuckDB strings hold at most 2**32 - 1 bytes, and substring refuses a start or length
# beyond that (for every row): both are clamped to it, which changes no result.
_MAX_STRING = 2**32 - 1


@dataclass(frozen=True)
class _S:
    """Translated SQL text and the kind of value it yields (as in pandas_eval).

    ``raw``, for some floats, is the same value before non-finite results were made NULL;
    ``+``, ``-`` and ``*`` may use it, since a non-finite operand makes their result
    non-finite too, and the single check on the result then stands for every skipped one.
    """

    sql: str
    kind: str
    raw: str | None = None


_NULL = {
    "int": "CAST(NULL AS BIGINT)",
    "float": "CAST(NULL AS DOUBLE)",
    "bool": "CAST(NULL AS BOOLEAN)",
    "str": "CAST(NULL AS VARCHAR)",
    "datetime": "CAST(NULL AS TIMESTAMP)",
    "null": "NULL",
}


def _null(kind: str) -> _S:
    return _S(_NULL.get(kind, "NULL"), kind)


def _is_null_literal(e: Expr) -> bool:
    return isinstance(e, Literal) and e.value is None


# SQL cheap enough to repeat: a column, a literal.
_SIMPLE = re.compile(
    r'"(?:[^"]|"")*"|TRUE|FALSE|NULL|CAST\(NULL AS \w+\)|CAST\(-?\d+ AS BIGINT\)'
    r"|CAST\('[^']*' AS DOUBLE\)|'(?:[^']|'')*'"
)
_LET_REF = re.compile(r'"__pinq_l(\d+)"')
_CTE_REF = re.compile(r"__pinq_n(\d+)")
# The DuckDB type of a translated value of each kind ("other": DuckDB decides).
_KIND_TYPES = {
    "int": "BIGINT",
    "float": "DOUBLE",
    "bool": "BOOLEAN",
    "str": "VARCHAR",
    "datetime": "TIMESTAMP",
    "null": "DOUBLE",
}


class _Lets:
    """Sub-expressions computed once, as columns of projections below the query using them.

    SQL has no ``let``: a value needed twice (``x`` in ``x BETWEEN a AND b``, a result checked
    for being finite) would otherwise be written twice, exponentially often when nested, and
    DuckDB expands NULLIF into a CASE that repeats its argument as well. Every translated
    expression is free of errors (faults give NULL), so computing one on every row, not just
    where a CASE would reach it, is safe.
    """

    def __init__(self) -> None:
        self.items: list[tuple[str, str, int]] = []  # name, SQL, projection level

    def bind(self, v: _S) -> _S:
        if _SIMPLE.fullmatch(v.sql):
            return v
        level = 1 + max((self.items[int(i)][2] for i in self._refs(v.sql)), default=0)
        name = f"__pinq_l{len(self.items)}"
        self.items.append((name, v.sql, level))
        return _S(_ident(name), v.kind)

    def _refs(self, sql: str) -> list[str]:
        return [i for i in _LET_REF.findall(sql) if int(i) < len(self.items)]

    def names(self, uses: Sequence[str]) -> list[str]:
        """The bound values that ``uses`` need, directly or through other bound values."""
        need: set[int] = set()
        stack = [int(i) for sql in uses for i in self._refs(sql)]
        while stack:
            i = stack.pop()
            if i not in need:
                need.add(i)
                stack.extend(int(j) for j in self._refs(self.items[i][1]))
        return [self.items[i][0] for i in sorted(need)]

    def source(self, child: str, uses: Sequence[str]) -> str:
        """``child`` with the bound values ``uses`` needs added as columns, as a FROM item."""
        wanted = set(self.names(uses))
        out = child
        top = max((lv for n, _, lv in self.items if n in wanted), default=0)
        for lv in range(1, top + 1):
            cols = ", ".join(
                f"{sql} AS {_ident(n)}"
                for n, sql, level in self.items
                if level == lv and n in wanted
            )
            if cols:
                out = f"(SELECT *, {cols} FROM {out}) AS __pinq_s{lv}"
        return out

    def hide(self, uses: Sequence[str]) -> str:
        """A star that leaves out the bound columns, for ``SELECT {hide} FROM {source}``."""
        names = self.names(uses)
        return f"* EXCLUDE ({', '.join(map(_ident, names))})" if names else "*"


class _ExprSql:
    """Translates one expression over a relation with known column kinds."""

    def __init__(
        self, kinds: dict[str, str], lets: _Lets, nan: frozenset[str] = frozenset()
    ) -> None:
        self.kinds = kinds
        self.lets = lets
        self.nan = nan  # stored float columns whose NaN reads as NULL
        self.unchecked = False  # whether the SQL may be invalid for the engine to decide

    def bind(self, v: _S) -> _S:
        return self.lets.bind(v)

    def finite(self, sql: str) -> _S:
        """A DOUBLE with every non-finite value (overflow, 0/0, ...) made NULL."""
        x = self.bind(_S(sql, "float")).sql
        return _S(f"(CASE WHEN isfinite({x}) THEN {x} END)", "float", raw=sql)

    # -- leaves ---------------------------------------------------------------------------
    def tr(self, e: Expr) -> _S:
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
            x = self.bind(self.tr(e.operand))
            v = self.logic(
                "AND", self.compare(">=", x, self.tr(e.low)), self.compare("<=", x, self.tr(e.high))
            )
            return self.logic_not(v) if e.negated else v
        if isinstance(e, Like):
            return self.like(e)
        if isinstance(e, IsNull):
            x = self.tr(e.operand)
            return _S(f"(({x.sql}) IS {'NOT ' if e.negated else ''}NULL)", "bool")
        raise PinqError(f"the DuckDB engine cannot translate a {type(e).__name__} node")

    def literal(self, v: object) -> _S:
        if v is None:
            return _S("NULL", "null")
        if isinstance(v, bool):
            return _S("TRUE" if v else "FALSE", "bool")
        if isinstance(v, int):
            if _I64_MIN <= v <= _I64_MAX:
                return _S(f"CAST({v} AS BIGINT)", "int")
            return _S(f"CAST('{float(v)!r}' AS DOUBLE)", "float")
        if isinstance(v, float):
            if math.isnan(v):
                return _null("float")
            return _S(f"CAST('{v!r}' AS DOUBLE)", "float")
        if isinstance(v, str):
            return _S(_str_lit(v), "str")
        raise PinqError(f"unsupported literal of type {type(v).__name__}")

    def column(self, e: Column) -> _S:
        kind = self.kinds.get(e.name)
        if kind is None:
            raise PinqSyntaxError(f"unknown column '{e.name}'")
        q = _ident(e.name)
        if e.name in self.nan:
            return _S(f"(CASE WHEN isnan({q}) THEN NULL ELSE {q} END)", kind)
        return _S(q, kind)

    # -- coercions ------------------------------------------------------------------------
    def as_double(self, v: _S) -> str:
        if v.kind in _NUMERIC:
            return f"CAST({v.sql} AS DOUBLE)"
        if v.kind == "str":
            return self.cast(v, "DOUBLE").sql
        return _NULL["float"]

    def numeric(self, v: _S) -> _S:
        if v.kind in ("int", "float", "null"):
            return v
        if v.kind == "bool":
            return _S(f"CAST({v.sql} AS BIGINT)", "int")
        if v.kind == "str":
            return self.cast(v, "DOUBLE")
        return _null("float")

    def to_str(self, v: _S) -> _S:
        if v.kind == "str":
            return v
        if v.kind in ("null", "other"):
            return _null("str")
        if v.kind == "datetime":
            return _S(f"strftime({v.sql}, '%Y-%m-%d %H:%M:%S')", "str")
        return _S(f"CAST({v.sql} AS VARCHAR)", "str")

    def to_kind(self, v: _S, kind: str) -> _S:
        if v.kind == kind == "datetime":
            # Branches of one result may be TIMESTAMP_NS and TIMESTAMP: DuckDB would cast
            # both to nanoseconds, which fails (for every row) on a value outside 1677-2262.
            return _S(f"TRY_CAST({v.sql} AS TIMESTAMP)", "datetime")
        if v.kind == kind:
            return v
        if v.kind == "null":
            return _null(kind)
        if kind == "float":
            return _S(self.as_double(v), "float")
        if kind == "int" and v.kind == "bool":
            return _S(f"CAST({v.sql} AS BIGINT)", "int")
        if kind == "str":
            return self.to_str(v)
        if kind == "null":
            return _null("null")
        return self.cast(v, {"int": "BIGINT", "bool": "BOOLEAN", "datetime": "TIMESTAMP"}[kind])

    def boolean(self, v: _S) -> _S:
        if v.kind == "bool":
            return v
        if v.kind == "null":
            return _null("bool")
        return self.cast(v, "BOOLEAN")

    def result_kind(self, vs: Sequence[_S]) -> str:
        kinds = {v.kind for v in vs if v.kind != "null"}
        if not kinds:
            return "null"
        if kinds <= _NUMERIC:
            return "float" if "float" in kinds else "int" if "int" in kinds else "bool"
        if len(kinds) == 1:
            kind = next(iter(kinds))
            # Values of types pinqpy does not model (lists, structs) may not combine: only
            # DuckDB can tell, by binding.
            self.unchecked |= kind == "other"
            return kind
        return "str"

    # -- arithmetic -----------------------------------------------------------------------
    def binary(self, e: Binary) -> _S:
        op = e.op
        if op in ("AND", "OR"):
            return self.logic(op, self.tr(e.left), self.tr(e.right))
        a, b = self.tr(e.left), self.tr(e.right)
        if op in ("=", "<>", "<", "<=", ">", ">="):
            return self.compare(op, a, b)
        if op == "||":
            a, b = self.to_str(a), self.to_str(b)
            return _S(f"({a.sql} || {b.sql})", "str")
        return self.arith(op, a, b)

    def arith(self, op: str, a: _S, b: _S) -> _S:
        a, b = self.numeric(a), self.numeric(b)
        if a.kind == "null" or b.kind == "null":
            ints = {a.kind, b.kind} - {"null"} == {"int"} and op != "/"
            return _null("int" if ints else "float")
        if a.kind == "int" and b.kind == "int" and op != "/":
            # DuckDB raises on overflow and on % 0; TRY makes both NULL.
            return _S(f"TRY({a.sql} {op} {b.sql})", "int")
        if op in ("+", "-", "*"):
            # A non-finite operand gives a non-finite result: the result's check covers it.
            x = a.raw if a.raw is not None else self.as_double(a)
            y = b.raw if b.raw is not None else self.as_double(b)
        else:
            x, y = self.as_double(a), self.as_double(b)
        if op == "%":
            return self.finite(f"TRY({x} % {y})")
        return self.finite(f"({x} {op} {y})")

    def unary(self, e: Unary) -> _S:
        v = self.tr(e.operand)
        if e.op == "NOT":
            return self.logic_not(v)
        if v.kind == "null":
            return _null("float")
        v = self.numeric(v)
        if v.kind == "int":
            return _S(f"TRY(-({v.sql}))", "int")
        return _S(f"(-({v.sql}))", v.kind)

    # -- comparison and logic -------------------------------------------------------------
    def compare(self, op: str, a: _S, b: _S) -> _S:
        if "null" in (a.kind, b.kind):
            return _null("bool")
        if a.kind in _NUMERIC and b.kind in _NUMERIC:
            if a.kind != b.kind and "bool" in (a.kind, b.kind):
                a, b = _S(self.as_double(a), "float"), _S(self.as_double(b), "float")
        elif a.kind == b.kind and a.kind in ("str", "datetime"):
            pass
        elif {a.kind, b.kind} == {"datetime", "str"}:
            a = self.cast(a, "TIMESTAMP") if a.kind == "str" else a
            b = self.cast(b, "TIMESTAMP") if b.kind == "str" else b
        elif a.kind in _NUMERIC and b.kind == "str":
            b = self.numeric(b)
        elif b.kind in _NUMERIC and a.kind == "str":
            a = self.numeric(a)
        else:
            return _null("bool")
        if a.kind == "datetime":
            return self.compare_datetimes(op, a, b)
        return _S(f"({a.sql} {op} {b.sql})", "bool")

    def compare_datetimes(self, op: str, a: _S, b: _S) -> _S:
        """Compare timestamps of any precision without a fault: DuckDB casts a TIMESTAMP to
        TIMESTAMP_NS to compare it with one, which fails outside 1677-2262. Both are read in
        nanoseconds when they fit and in microseconds otherwise; a value outside the
        nanosecond range lies beyond every one inside it, so the order is the same."""
        a, b = self.bind(a), self.bind(b)
        na, nb = f"TRY_CAST({a.sql} AS TIMESTAMP_NS)", f"TRY_CAST({b.sql} AS TIMESTAMP_NS)"
        ua, ub = f"TRY_CAST({a.sql} AS TIMESTAMP)", f"TRY_CAST({b.sql} AS TIMESTAMP)"
        return _S(
            f"(CASE WHEN {na} IS NOT NULL AND {nb} IS NOT NULL THEN {na} {op} {nb} "
            f"ELSE {ua} {op} {ub} END)",
            "bool",
        )

    def logic(self, op: str, a: _S, b: _S) -> _S:
        a, b = self.boolean(a), self.boolean(b)
        return _S(f"({a.sql} {op} {b.sql})", "bool")

    def logic_not(self, v: _S) -> _S:
        return _S(f"(NOT {self.boolean(v).sql})", "bool")

    def in_list(self, e: InList) -> _S:
        if not e.items:
            return _S("TRUE" if e.negated else "FALSE", "bool")
        x = self.tr(e.operand)
        if len(e.items) > 1:
            x = self.bind(x)
        parts = [self.compare("=", x, self.tr(i)).sql for i in e.items]
        v = _S("(" + " OR ".join(parts) + ")", "bool")
        return self.logic_not(v) if e.negated else v

    def like(self, e: Like) -> _S:
        if not isinstance(e.pattern, Literal):
            raise PinqError("the LIKE pattern must be a constant string")
        if e.pattern.value is None:
            return _null("bool")
        x = self.to_str(self.tr(e.operand))
        pattern = _str_lit(str(e.pattern.value))
        v = _S(f"({x.sql} LIKE {pattern} ESCAPE '\\')", "bool")
        return self.logic_not(v) if e.negated else v

    # -- CASE and functions ---------------------------------------------------------------
    def case(self, e: Case) -> _S:
        conds = [self.boolean(self.tr(c)).sql for c, _ in e.whens]
        results = [self.tr(r) for _, r in e.whens]
        results.append(self.tr(e.else_) if e.else_ is not None else _S("NULL", "null"))
        kind = self.result_kind(results)
        rs = [self.to_kind(r, kind) for r in results]
        body = " ".join(f"WHEN {c} THEN {r.sql}" for c, r in zip(conds, rs[:-1], strict=True))
        return _S(f"(CASE {body} ELSE {rs[-1].sql} END)", kind)

    def call(self, e: Call) -> _S:
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

    def math1(self, v: _S, fn: str) -> _S:
        return self.finite(f"{fn}({self.as_double(self.numeric(v))})")

    def to_int_fn(self, v: _S, fn: str) -> _S:
        v = self.numeric(v)
        if v.kind in ("int", "null"):
            return v if v.kind == "int" else _null("int")
        return _S(f"TRY_CAST({fn}({v.sql}) AS BIGINT)", "int")

    def str_fn(self, v: _S, template: str) -> _S:
        return _S(template.format(self.to_str(v).sql), "str")

    def extreme(self, vs: list[_S], least: bool) -> _S:
        kind = self.result_kind(vs)
        args = ", ".join(self.to_kind(v, kind).sql for v in vs)
        return _S(f"{'LEAST' if least else 'GREATEST'}({args})", kind)

    def substr(self, e: Call) -> _S:
        consts: list[int | None] = []
        for a in e.args[1:]:
            if isinstance(a, Literal) and (a.value is None or isinstance(a.value, int)):
                consts.append(None if a.value is None else int(a.value))
            else:
                raise PinqError(
                    "the DuckDB engine needs the start and length of SUBSTR to be literal integers"
                )
        if any(c is None for c in consts):
            return _null("str")
        x = self.to_str(self.tr(e.args[0]))
        begin = max(int(consts[0]) - 1, 0)  # type: ignore[arg-type]
        if len(consts) == 2:
            length = int(consts[1])  # type: ignore[arg-type]
            if length < 0:
                return _null("str")
            end = max(int(consts[0]) - 1 + length, 0)  # type: ignore[arg-type]
            count = min(max(end - begin, 0), _MAX_STRING)
            return _S(f"substring({x.sql}, {min(begin + 1, _MAX_STRING)}, {count})", "str")
        return _S(f"substring({x.sql}, {min(begin + 1, _MAX_STRING)})", "str")

    # -- CAST -----------------------------------------------------------------------------
    def cast(self, v: _S, type_name: str) -> _S:
        upper = type_name.upper()
        target = CAST_TYPES.get(upper)
        if target is None:
            raise PinqSyntaxError(f"unknown type '{type_name}' in CAST")
        if v.kind in ("null", "other"):
            return _null(target)
        s = v.sql
        if target == "int":
            if v.kind == "int":
                return v
            if v.kind == "bool":
                return _S(f"CAST({s} AS BIGINT)", "int")
            if v.kind == "float":
                return _S(f"TRY_CAST(round({s}) AS BIGINT)", "int")
            if v.kind == "str":
                t = self.bind(_S(f"trim({s})", "str")).sql
                return _S(
                    f"(CASE WHEN regexp_full_match({t}, '[+-]?[0-9]+') "
                    f"THEN TRY_CAST({t} AS BIGINT) END)",
                    "int",
                )
            return _null("int")
        if target == "float":
            if v.kind == "str":
                return self.finite(f"TRY_CAST(trim({s}) AS DOUBLE)")
            if v.kind == "datetime":
                return _null("float")
            return _S(f"CAST({s} AS DOUBLE)", "float")
        if target == "str":
            return self.to_str(v)
        if target == "bool":
            if v.kind == "bool":
                return v
            if v.kind in ("int", "float"):
                return _S(f"({s} <> 0)", "bool")
            if v.kind == "str":
                t = self.bind(_S(f"lower(trim({s}))", "str")).sql
                yes = ", ".join(_str_lit(w) for w in _TRUE_WORDS)
                no = ", ".join(_str_lit(w) for w in _FALSE_WORDS)
                return _S(
                    f"(CASE WHEN {t} IN ({yes}) THEN TRUE WHEN {t} IN ({no}) THEN FALSE END)",
                    "bool",
                )
            return _null("bool")
        # datetime
        if v.kind in ("datetime", "str"):  # a date beyond the TIMESTAMP range is NULL
            out = f"TRY_CAST({s} AS TIMESTAMP)"
        else:
            return _null("datetime")
        if upper == "DATE":
            out = f"CAST(CAST({out} AS DATE) AS TIMESTAMP)"
        return _S(out, "datetime")


def _round_fn(t: _ExprSql, a: list[_S]) -> _S:
    if len(a) == 1:
        return t.to_int_fn(a[0], "round")
    x = t.as_double(t.numeric(a[0]))
    scale = t.bind(_S(f"pow(10.0, trunc({t.as_double(t.numeric(a[1]))}))", "float")).sql
    return t.finite(f"(round({x} * {scale}) / {scale})")


def _abs_fn(t: _ExprSql, a: list[_S]) -> _S:
    v = t.numeric(a[0])
    if v.kind == "int":
        return _S(f"TRY(abs({v.sql}))", "int")
    if v.kind == "null":
        return _null("float")
    return _S(f"abs({v.sql})", "float")


def _sign_fn(t: _ExprSql, a: list[_S]) -> _S:
    v = t.numeric(a[0])
    if v.kind == "null":
        return _null("float")
    kind = "int" if v.kind == "int" else "float"
    return _S(f"CAST(sign({v.sql}) AS {'BIGINT' if kind == 'int' else 'DOUBLE'})", kind)


def _power_fn(t: _ExprSql, a: list[_S]) -> _S:
    x, y = t.as_double(t.numeric(a[0])), t.as_double(t.numeric(a[1]))
    return t.finite(f"pow({x}, {y})")


def _coalesce_fn(t: _ExprSql, a: list[_S]) -> _S:
    kind = t.result_kind(a)
    return _S("COALESCE(" + ", ".join(t.to_kind(v, kind).sql for v in a) + ")", kind)


def _nullif_fn(t: _ExprSql, a: list[_S]) -> _S:
    a = [t.bind(a[0]), a[1]]
    same = t.compare("=", a[0], a[1]).sql
    return _S(f"(CASE WHEN {same} THEN {_null(a[0].kind).sql} ELSE {a[0].sql} END)", a[0].kind)


def _if_fn(t: _ExprSql, a: list[_S]) -> _S:
    cond = t.boolean(a[0]).sql
    kind = t.result_kind(a[1:])
    x, y = t.to_kind(a[1], kind), t.to_kind(a[2], kind)
    return _S(f"(CASE WHEN {cond} THEN {x.sql} ELSE {y.sql} END)", kind)


def _length_fn(t: _ExprSql, a: list[_S]) -> _S:
    return _S(f"CAST(length({t.to_str(a[0]).sql}) AS BIGINT)", "int")


def _concat_fn(t: _ExprSql, a: list[_S]) -> _S:
    # CONCAT skips NULLs; with no non-NULL argument the result is ''.
    return _S("concat('', " + ", ".join(t.to_str(v).sql for v in a) + ")", "str")


_FUNCTIONS: dict[str, Callable[[_ExprSql, list[_S]], _S]] = {
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
    "TRIM": lambda t, a: t.str_fn(a[0], "trim({}, ' ')"),
    "LTRIM": lambda t, a: t.str_fn(a[0], "ltrim({}, ' ')"),
    "RTRIM": lambda t, a: t.str_fn(a[0], "rtrim({}, ' ')"),
    "LENGTH": _length_fn,
    "CONCAT": _concat_fn,
}


def _no_callable(value: object, what: str) -> None:
    if isinstance(value, PyFunc):
        raise PinqError(
            f"the DuckDB engine cannot run the Python callable {value.name} in {what}; use an "
            "expression string, or the pandas engine"
        )


# -- plans ------------------------------------------------------------------------------------
class _PlanSql(PlanVisitor[str]):
    """Turns a plan into CTEs over one connection; each visit returns the node's CTE name.

    A node shared by several parents (``f.concat(f)``) becomes one CTE. Each CTE's schema
    is derived here where it follows from the translation, so binding a query is needed only
    for sources and the few nodes whose types DuckDB decides (set operations, lists).

    Floating-point columns are read as they are stored: a NaN in them means NULL, and a CTE
    lists such columns in ``nan``. Expressions read them as NULL; nodes that compare or
    group whole values normalize them; plain filters and projections pass them through, so
    an aggregate of a stored column pays for no normalization (it skips NaN instead).
    """

    def __init__(self, ex: DuckDBExecutor) -> None:
        self.ex = ex
        self.ctes: list[tuple[str, str]] = []
        self._memo: dict[int, tuple[PlanNode, str]] = {}
        self._schemas: dict[str, list[tuple[str, str]]] = {}
        self._nan: dict[str, frozenset[str]] = {}
        self._translators: list[_ExprSql] = []

    # -- bookkeeping ----------------------------------------------------------------------
    def query(self, sql: str) -> str:
        """``sql`` with the CTEs it reads (and only those) in front."""
        need: set[int] = set()
        stack = [int(i) for i in _CTE_REF.findall(sql)]
        while stack:
            i = stack.pop()
            if i not in need and i < len(self.ctes):
                need.add(i)
                stack.extend(int(j) for j in _CTE_REF.findall(self.ctes[i][1]))
        if not need:
            return sql
        return (
            "WITH "
            + ", ".join(f"{n} AS ({q})" for n, q in self.ctes if int(n[8:]) in need)
            + (" " + sql)
        )

    def add(
        self,
        sql: str,
        schema: list[tuple[str, str]] | None = None,
        nan: frozenset[str] = frozenset(),
    ) -> str:
        name = f"__pinq_n{len(self.ctes)}"
        self.ctes.append((name, sql))
        if schema is not None:
            self._schemas[name] = schema
        if nan:
            self._nan[name] = nan
        return name

    def schema(self, name: str) -> list[tuple[str, str]]:
        """(column, DuckDB type) of a CTE; where not derived, found by binding (reads no data)."""
        hit = self._schemas.get(name)
        if hit is None:
            hit = self.ex._bind(self.query(f"SELECT * FROM {name}"))
            self._schemas[name] = hit
        return hit

    def kinds(self, name: str) -> dict[str, str]:
        return {c: _kind_of_type(t) for c, t in self.schema(name)}

    def nan(self, name: str) -> frozenset[str]:
        return self._nan.get(name, frozenset())

    def value(self, name: str, col: str, qual: str = "") -> str:
        """A column of CTE ``name`` as pinqpy reads it (NaN as NULL)."""
        q = qual + _ident(col)
        return f"(CASE WHEN isnan({q}) THEN NULL ELSE {q} END)" if col in self.nan(name) else q

    def normalized(self, name: str, columns: Sequence[str] | None = None) -> str:
        """CTE ``name`` with NaN made NULL in ``columns`` (default: all)."""
        todo = [
            c for c in (columns if columns is not None else self.nan(name)) if c in self.nan(name)
        ]
        if not todo:
            return name
        items = ", ".join(f"{self.value(name, c)} AS {_ident(c)}" for c in todo)
        return self.add(
            f"SELECT * REPLACE ({items}) FROM {name}",
            self.schema(name),
            self.nan(name) - frozenset(todo),
        )

    def visit(self, node: PlanNode) -> str:
        hit = self._memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        name = node.accept(self)
        self._memo[id(node)] = (node, name)
        return name

    def translator(self, child: str, lets: _Lets) -> _ExprSql:
        t = _ExprSql(self.kinds(child), lets, self.nan(child))
        self._translators.append(t)
        return t

    @property
    def unchecked(self) -> bool:
        """Whether some SQL here is valid only if DuckDB says so (validate then binds it)."""
        return any(t.unchecked for t in self._translators)

    def expr(self, e: Expr | PyFunc, child: str, lets: _Lets, what: str) -> _S:
        _no_callable(e, what)
        assert isinstance(e, Expr)
        return self.translator(child, lets).tr(e)

    # -- nodes ----------------------------------------------------------------------------
    def visit_source(self, node: Source) -> str:
        raw = self.ex._table(self.ex.catalog.data(node.table))
        # Only the columns that change are listed: a shorter query binds faster, and a
        # filtered count over a file takes a few milliseconds in all.
        casts, schema, nan = [], [], set()
        for c, t in self.ex._table_schema(self.ex.catalog.data(node.table)):
            q = _ident(c)
            u = t.upper()
            if u in ("INTEGER", "SMALLINT", "TINYINT", "UINTEGER", "USMALLINT", "UTINYINT"):
                casts.append(f"CAST({q} AS BIGINT) AS {q}")
                t = "BIGINT"
            elif u in ("UBIGINT", "HUGEINT", "UHUGEINT"):
                casts.append(f"TRY_CAST({q} AS BIGINT) AS {q}")
                t = "BIGINT"
            elif u in ("FLOAT", "REAL", "DOUBLE") or u.startswith("DECIMAL"):
                if u != "DOUBLE":
                    casts.append(f"CAST({q} AS DOUBLE) AS {q}")
                t = "DOUBLE"
                if not u.startswith("DECIMAL"):
                    nan.add(c)
            elif u.startswith("ENUM"):
                casts.append(f"CAST({q} AS VARCHAR) AS {q}")
                t = "VARCHAR"
            schema.append((c, t))
        star = f"* REPLACE ({', '.join(casts)})" if casts else "*"
        return self.add(f"SELECT {star} FROM {raw}", schema, frozenset(nan))

    def visit_part_source(self, node: PartSource) -> str:
        parent = self.visit(node.partition.parent)
        kinds = self.kinds(parent)
        key = node.key if len(node.partition.key_columns) > 1 else (node.key,)
        conds = [
            _key_match(self.value(parent, c), kinds[c], k)
            for c, k in zip(node.partition.key_columns, key, strict=True)  # type: ignore[arg-type]
        ]
        return self.add(
            f"SELECT * FROM {parent} WHERE {' AND '.join(conds)}",
            self.schema(parent),
            self.nan(parent),
        )

    def visit_where(self, node: Where) -> str:
        child = self.visit(node.child)
        lets = _Lets()
        _no_callable(node.predicate, "where")
        t = self.translator(child, lets)
        pred = t.boolean(t.tr(node.predicate)).sql  # type: ignore[arg-type]
        return self.add(
            f"SELECT {lets.hide([pred])} FROM {lets.source(child, [pred])} WHERE {pred}",
            self.schema(child),
            self.nan(child),
        )

    def visit_select(self, node: Select) -> str:
        child = self.visit(node.child)
        types = dict(self.schema(child))
        nan = self.nan(child)
        lets = _Lets()
        items: dict[str, str] = {}
        out_types: dict[str, str | None] = {}
        out_nan: set[str] = set()
        for n, e in node.outputs:
            if isinstance(e, Column) and e.name in nan:
                # A stored column passes through as stored; its readers skip NaN.
                items[n], out_types[n] = f"{_ident(e.name)} AS {_ident(n)}", types[e.name]
                out_nan.add(n)
                continue
            v = self.expr(e, child, lets, "select")
            items[n] = f"{_typed(v)} AS {_ident(n)}"
            if isinstance(e, Column):
                out_types[n] = types[e.name]
            else:
                out_types[n] = _KIND_TYPES.get(v.kind)  # None: DuckDB decides
        src = lets.source(child, list(items.values()))
        if node.keep_all:
            # pandas assign replaces an existing column in place, appends new ones.
            order = [c for c, _ in self.schema(child)]
            cols = [items.get(c, _ident(c)) for c in order]
            cols += [items[n] for n in items if n not in order]
            names = order + [n for n in items if n not in order]
            full = {**types, **out_types}
            kept_nan = {c for c in nan if c not in items}
            sql = f"SELECT {', '.join(cols)} FROM {src}"
        else:
            names, full, kept_nan = list(items), out_types, set()
            sql = f"SELECT {', '.join(items.values()) or '1 AS __pinq_empty'} FROM {src}"
        schema: list[tuple[str, str]] | None = [(c, full[c]) for c in names]  # type: ignore[misc]
        if not names or any(t is None for _, t in schema):  # type: ignore[union-attr]
            schema = None
        return self.add(sql, schema, frozenset(kept_nan | out_nan))

    def visit_distinct(self, node: Distinct) -> str:
        child = self.visit(node.child)
        types = dict(self.schema(child))
        cols = ", ".join(f"{self.value(child, c)} AS {_ident(c)}" for c in node.columns)
        return self.add(
            f"SELECT DISTINCT {cols} FROM {child}", [(c, types[c]) for c in node.columns]
        )

    def visit_explode(self, node: Explode) -> str:
        child = self.visit(node.child)
        q = _ident(node.column)
        kind = dict(self.schema(child))[node.column]
        if not kind.endswith("[]"):
            # A scalar explodes to itself; NULL carries nothing.
            return self.add(
                f"SELECT * FROM {child} WHERE {self.value(child, node.column)} IS NOT NULL",
                self.schema(child),
                self.nan(child),
            )
        items = f"list_slice(list_filter({q}, lambda x: x IS NOT NULL), 1, {int(node.max_items)})"
        return self.add(
            f"SELECT * REPLACE (unnest({items}) AS {q}) FROM {child}", None, self.nan(child)
        )

    def visit_group_by(self, node: GroupBy) -> str:
        child = self.normalized(self.visit(node.child), node.keys)
        types = dict(self.schema(child))
        lets = _Lets()
        t = self.translator(child, lets)
        keys = [_ident(k) for k in node.keys]
        items = list(keys)
        schema = [(k, types[k]) for k in node.keys]
        for name, call in node.aggs:
            items.append(f"{_aggregate(t, call)} AS {_ident(name)}")
            counts = call.name.upper() == "COUNT"
            schema.append((name, "BIGINT" if counts else "DOUBLE"))
        # Grouped by exactly the unit, a row whose unit is NULL belongs to no known person.
        keep = ""
        if node.by_unit:
            keep = " WHERE " + " AND ".join(f"{k} IS NOT NULL" for k in keys)
        return self.add(
            f"SELECT {', '.join(items)} FROM {lets.source(child, items)}{keep} GROUP BY ALL",
            schema,
        )

    def truncate(
        self, child: str, columns: Sequence[str], limit: int, drop_null: bool = False
    ) -> str:
        """The ``limit`` rows of lowest salted-hash priority per key of ``columns`` (with
        ``drop_null``, rows whose key is NULL are dropped first).

        DuckDB's ``hash`` of several values combines them linearly, so a salt hashed along
        with the row would only XOR every row's hash with one constant, which keeps most of
        the rows' order. The row's hash is keyed instead as the pandas engine keys it: two
        rounds of XOR with a fresh 64-bit salt, each followed by DuckDB's (nonlinear)
        64-bit integer hash, so the priority depends on the row and the salt alone.
        """
        child = self.normalized(child, columns)
        salt = _noise.current_source().bytes(24)
        s1 = int.from_bytes(salt[8:16], "little")
        s2 = int.from_bytes(salt[16:24], "little")
        all_cols = [_ident(c) for c, _ in self.schema(child)]
        row = f"hash({', '.join([_str_lit(salt[:8].hex()), *all_cols])})"
        prio = f"hash(xor(hash(xor({row}, CAST({s1} AS UBIGINT))), CAST({s2} AS UBIGINT)))"
        part = ", ".join(_ident(c) for c in columns)
        keep = ""
        if drop_null:
            keep = " WHERE " + " AND ".join(f"{_ident(c)} IS NOT NULL" for c in columns)
        # The priority is computed below the window, so the window sorts one column, and
        # columns unused above are pruned before it. The rank is compared as rank - 1 < limit:
        # DuckDB turns "rank <= limit" into a top-n aggregate per key, which is several times
        # slower than this sort with a million keys and runs out of memory with ten million.
        prioritized = f"SELECT *, {prio} AS __pinq_prio FROM {child}{keep}"
        inner = (
            f"SELECT *, row_number() OVER (PARTITION BY {part} ORDER BY __pinq_prio) - 1 "
            f"AS __pinq_rank FROM ({prioritized})"
        )
        return self.add(
            f"SELECT * EXCLUDE (__pinq_rank, __pinq_prio) FROM ({inner}) "
            f"WHERE __pinq_rank < {int(limit)}",
            self.schema(child),
            self.nan(child),
        )

    def merge(self, left: str, right: str, on: Sequence[str], how: str, suffix: str) -> str:
        left, right = self.normalized(left, on), self.normalized(right, on)
        lschema, rschema = self.schema(left), self.schema(right)
        lcols = [c for c, _ in lschema]
        items = [f"l.{_ident(c)}" for c in lcols]
        schema = list(lschema)
        nan = set(self.nan(left))
        for c, t in rschema:
            if c in on:
                continue
            out = c + suffix if c in lcols else c
            items.append(f"r.{_ident(c)} AS {_ident(out)}")
            schema.append((out, t))
            if c in self.nan(right):
                nan.add(out)
        cond = " AND ".join(f"l.{_ident(c)} IS NOT DISTINCT FROM r.{_ident(c)}" for c in on)
        join = "JOIN" if how == "inner" else "LEFT JOIN"
        return self.add(
            f"SELECT {', '.join(items)} FROM {left} AS l {join} {right} AS r ON {cond}",
            schema,
            frozenset(nan),
        )

    def visit_join(self, node: Join) -> str:
        left = self.visit(node.left)
        right = self.visit(node.right)
        if node.bounds is not None:
            left = self.truncate(left, node.on, node.bounds[0])
            right = self.truncate(right, node.on, node.bounds[1])
        return self.merge(left, right, node.on, "inner", "_right")

    def visit_public_join(self, node: PublicJoin) -> str:
        child = self.visit(node.child)
        data = self.ex.catalog.public_data(node.public)
        pub = self.add(f"SELECT * FROM {self.ex._table(data)}", self.ex._table_schema(data))
        return self.merge(child, pub, node.on, node.how, "_public")

    def visit_set_op(self, node: SetOp) -> str:
        left = self.visit(node.left)
        right = self.visit(node.right)
        # Columns of the same names and types keep them; otherwise DuckDB decides.
        same = dict(self.schema(left)) == dict(self.schema(right))
        schema = self.schema(left) if same else None
        if node.kind == "concat":
            # Rows are kept as they are, so NaN may stay (it is read as NULL later).
            return self.add(
                f"SELECT * FROM {left} UNION ALL BY NAME SELECT * FROM {right}",
                schema,
                self.nan(left) | self.nan(right),
            )
        # The others compare whole rows: NaN must be NULL first.
        left, right = self.normalized(left), self.normalized(right)
        if node.kind == "union":
            return self.add(f"SELECT * FROM {left} UNION BY NAME SELECT * FROM {right}", schema)
        cols = ", ".join(_ident(c) for c, _ in self.schema(left))
        op = "INTERSECT" if node.kind == "intersect" else "EXCEPT"
        return self.add(f"SELECT {cols} FROM {left} {op} SELECT {cols} FROM {right}", schema)

    def visit_bound_contributions(self, node: BoundContributions) -> str:
        # A row whose unit is NULL belongs to no known person: it is dropped.
        return self.truncate(self.visit(node.child), (node.unit,), node.max_rows, drop_null=True)


def _typed(v: _S) -> str:
    """An untyped NULL gets a type (DOUBLE, as pandas stores an all-NULL column)."""
    return _NULL["float"] if v.kind == "null" else v.sql


def _aggregate(t: _ExprSql, call: Call) -> str:
    func = call.name.upper()
    if call.star:
        return "COUNT(*)"
    arg = t.tr(call.args[0])
    if func == "COUNT":
        return f"COUNT({'DISTINCT ' if call.distinct else ''}{arg.sql})"
    x = _numeric_value(arg)
    sql_fn = {
        "SUM": "SUM",
        "AVG": "AVG",
        "MIN": "MIN",
        "MAX": "MAX",
        "MEDIAN": "MEDIAN",
        "VARIANCE": "VAR_SAMP",
        "STDDEV": "STDDEV_SAMP",
    }.get(func)
    if sql_fn is None:
        raise PinqError(f"{func} cannot be used inside groupby().agg()")
    if func == "SUM":
        return f"COALESCE(SUM({x}), 0.0)"  # pandas: the sum of no values is 0
    return f"CAST({sql_fn}({x}) AS DOUBLE)"


def _numeric_value(v: _S) -> str:
    """Values as DOUBLE with NULL for anything that is not a number (as pandas' _numeric)."""
    if v.kind in _NUMERIC:
        return f"CAST({v.sql} AS DOUBLE)"
    if v.kind == "str":
        return f"TRY_CAST({v.sql} AS DOUBLE)"
    return _NULL["float"]


def _value_kind(v: object) -> str | None:
    """The kind of a public key or candidate value (None for NULL / NaN)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, bool | np.bool_):
        return "bool"
    if isinstance(v, int | np.integer):
        return "int"
    if isinstance(v, float | np.floating):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, pd.Timestamp | np.datetime64):
        return "datetime"
    try:
        if v != v:  # pd.NA, NaT
            return None
    except (TypeError, ValueError):
        return None
    return "other"


def _compatible(col_kind: str, key_kind: str) -> bool:
    if col_kind in ("int", "float") and key_kind in ("int", "float"):
        return True
    return col_kind == key_kind


def _key_literal(v: object, kind: str) -> str:
    if kind == "bool":
        return "TRUE" if v else "FALSE"
    if kind == "int":
        return f"CAST({int(v)} AS BIGINT)"  # type: ignore[call-overload]
    if kind == "float":
        return f"CAST('{float(v)!r}' AS DOUBLE)"  # type: ignore[arg-type]
    if kind == "str":
        return _str_lit(str(v))
    return f"CAST({_str_lit(str(pd.Timestamp(v)))} AS TIMESTAMP)"  # type: ignore[arg-type]


def _key_match(col_sql: str, col_kind: str, key: object) -> str:
    """SQL true exactly where the column equals a public key under the column's type (a
    NULL-like key matches NULL)."""
    v = column_key(key, col_kind)
    if v is None:
        return f"({col_sql} IS NULL)"
    if v is NO_MATCH:
        return "FALSE"
    return f"({col_sql} = {_key_literal(v, col_kind)})"


def _key_rows(
    kinds: Sequence[str], keys: Sequence[Hashable], single: bool
) -> list[tuple[Any, ...]]:
    """The listed keys as rows (position in the list, values...); keys that can never match
    a column's values are left out (they count 0)."""
    rows: list[tuple[Any, ...]] = []
    for i, key in enumerate(keys):
        parts = (key,) if single else tuple(key)  # type: ignore[arg-type]
        ok = True
        vals: list[Any] = []
        for kind, v in zip(kinds, parts, strict=True):
            vk = _value_kind(v)
            if vk is None:
                vals.append(None)
            elif _compatible(kind, vk):
                vals.append(v)
            else:
                ok = False
                break
        if ok:
            rows.append((i, *vals))
    return rows


def _table_type(kind: str, vals: Sequence[Any]) -> str:
    """The DuckDB type of a key table's column of a plan column's kind, given its values."""
    if kind in ("int", "float"):
        ints = kind == "int" and all(v is None or _value_kind(v) == "int" for v in vals)
        return "BIGINT" if ints else "DOUBLE"
    return {"bool": "BOOLEAN", "datetime": "TIMESTAMP", "str": "VARCHAR"}.get(kind, "")


def _rows_frame(
    columns: Sequence[str], kinds: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> pd.DataFrame:
    """Rows of public values as a DataFrame typed like the plan's columns, to register."""
    data: dict[str, Any] = {}
    for j, (c, kind) in enumerate(zip(columns, kinds, strict=True)):
        vals = [r[j] for r in rows]
        sql_type = _table_type(kind, vals)
        if sql_type == "BIGINT":
            data[c] = pd.array(vals, dtype="Int64")
        elif sql_type == "DOUBLE":
            data[c] = np.array([np.nan if v is None else float(v) for v in vals])
        elif sql_type == "BOOLEAN":
            data[c] = pd.array(vals, dtype="boolean")
        elif sql_type == "TIMESTAMP":
            data[c] = pd.to_datetime(pd.Series(vals, dtype=object))
        else:
            data[c] = pd.Series(vals, dtype=object)
    return pd.DataFrame(data)


_INLINE_ROWS = 5000


def _rows_sql(
    columns: Sequence[str], kinds: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> str | None:
    """Rows of public values as a FROM item written into the query (typed lists unnested
    side by side), or None when too many or of a type not written here (then register
    :func:`_rows_frame`). Typed as :func:`_rows_frame` types them."""
    if len(rows) > _INLINE_ROWS:
        return None
    cols = []
    for j, (c, kind) in enumerate(zip(columns, kinds, strict=True)):
        vals = [r[j] for r in rows]
        sql_type = _table_type(kind, vals)
        if sql_type == "BIGINT":
            items = ["NULL" if v is None else str(int(v)) for v in vals]
        elif sql_type == "DOUBLE":
            # As text, which DuckDB reads exactly (as every float literal here).
            items = ["NULL" if v is None else _str_lit(repr(float(v))) for v in vals]
        elif sql_type == "BOOLEAN":
            items = ["NULL" if v is None else ("TRUE" if v else "FALSE") for v in vals]
        elif sql_type == "VARCHAR" and kind == "str":
            items = ["NULL" if v is None else _str_lit(str(v)) for v in vals]
        else:
            return None
        cols.append(f"unnest(CAST([{', '.join(items)}] AS {sql_type}[])) AS {_ident(c)}")
    return f"(SELECT {', '.join(cols)})"


def _int_bucket_query(rows: str, grid: Grid) -> str:
    """:func:`~pinqpy.engines.buckets.bucket_query` for integer values (``__pinq_v``) on a grid of
    integers, where integer arithmetic is exact and needs no correction step. The grid's
    points are exact doubles (below 2**53), so a value's bucket is the one pandas finds."""
    start, step, stop = (_key_literal(int(x), "int") for x in (grid.start, grid.step, grid.stop))
    d = f"LEAST(GREATEST(__pinq_v, {start}), {stop}) - {start}"
    return (
        f"SELECT __pinq_gi, 2 * (__d // {step}) + CAST(__d % {step} <> 0 AS BIGINT) AS __pinq_b "
        f"FROM (SELECT __pinq_gi, {d} AS __d FROM ({rows}) s0) s1"
    )


def _sum_aggs(v: str, kind: str, lo: float, hi: float, when: str = "") -> list[str]:
    """The clamped sum of ``v`` and its count of non-NULL values (over the rows ``when``
    admits: a FILTER clause or ""), exact before its conversion to a double.

    Integers clamped to integer bounds are summed exactly as integers: the float sum pandas
    computes is the same number while it is exact (below 2**53) and its rounding otherwise;
    DuckDB sums integers faster than doubles."""
    if kind == "int":
        lo_s, hi_s = _key_literal(int(lo), "int"), _key_literal(int(hi), "int")
        return [f"SUM(LEAST(GREATEST({v}, {lo_s}), {hi_s})){when}", f"COUNT({v}){when}"]
    # Other values are summed exactly on the SUM's fixed-point grid (SumGrid): truncated
    # toward zero to multiples of q (never larger in magnitude, so the sensitivity stays
    # max(|lo|, |hi|)), summed as BIGINT into HUGEINT, then scaled by q as a double. A float
    # SUM of 10**8 doubles can err by the sensitivity itself.
    grid = SumGrid.of(lo, hi)
    c = f"LEAST(GREATEST({v}, {_float_literal(lo)}), {_float_literal(hi)})"
    k = f"CAST(TRUNC({grid.sql(c, _float_literal)}) AS BIGINT)"
    total = f"CAST(SUM({k}){when} AS DOUBLE) * {_float_literal(grid.step_float)}"
    top = _float_literal(sys.float_info.max)
    bottom = _float_literal(-sys.float_info.max)
    # (DuckDB's LEAST and GREATEST skip NULLs: COALESCE first.)
    return [f"LEAST(GREATEST(COALESCE({total}, 0.0), {bottom}), {top})", f"COUNT({v}){when}"]


def _float_literal(x: float) -> str:
    return _key_literal(float(x), "float")


def _lattice_aggs(
    v: str, kind: str, lo: float, hi: float, when: str = "", squares: bool = False
) -> list[str]:
    """Exact ``Σd`` (and ``Σd²`` with ``squares``, else 0) of the lattice indices of ``v``
    clamped into [lo, hi] (:class:`~pinqpy.core.lattice.Lattice`), and its count of non-NULL
    values. ``d`` is computed in doubles exactly as numpy computes it (``ROUND_EVEN`` is
    half-to-even, as ``np.rint``), cast to BIGINT (it lies in ``[0, 2**21]``) and summed:
    DuckDB sums BIGINT into HUGEINT, 128 bits, so ``Σd < n·2**21`` and ``Σd² < n·2**42``
    are exact and cannot overflow."""
    lat = Lattice.of(lo, hi)
    if (
        kind == "int"
        and not squares
        and lat.shift <= 0
        and float(lo).is_integer()
        and float(hi).is_integer()
    ):
        # Integers on a lattice of step 2**shift <= 1: x·2**-shift is an integer, rounding
        # is the identity, and d = (x - lo)·2**-shift; so Σd is that multiple of the exact
        # integer (HUGEINT) sum of the clamped values, as on pandas.
        lo_s, hi_s = _key_literal(int(lo), "int"), _key_literal(int(hi), "int")
        total = f"CAST(COALESCE(SUM(LEAST(GREATEST({v}, {lo_s}), {hi_s})){when}, 0) AS HUGEINT)"
        n = f"COUNT({v}){when}"
        scale = 1 << -lat.shift
        return [f"({total} - CAST({lo_s} AS HUGEINT) * {n}) * CAST({scale} AS HUGEINT)", "0", n]
    c = f"LEAST(GREATEST({v}, {_float_literal(lo)}), {_float_literal(hi)})"
    if max(abs(Fraction(lo)), abs(Fraction(hi))) / lat.step < 2**62:
        # DuckDB casts a double to BIGINT rounding half to even, as np.rint does, so while
        # every scaled value fits the cast is the rounding (about twice as fast as
        # ROUND_EVEN); the clamp into [0, K] is then in integers.
        t = c
        for f in lat.factors:
            t = f"({t}) * {_float_literal(f)}"
        d = f"LEAST(GREATEST(CAST({t} AS BIGINT) - {int(lat.base)}, 0), {lat.levels})"
    else:
        d = f"CAST({lat.sql(c, _float_literal, 'ROUND_EVEN')} AS BIGINT)"
    sq = f"COALESCE(SUM({d} * {d}){when}, 0)" if squares else "0"
    return [f"COALESCE(SUM({d}){when}, 0)", sq, f"COUNT({v}){when}"]


def _count_rows(rows: Sequence[tuple[Any, ...]], k: int) -> np.ndarray:
    out = np.zeros(k, dtype=np.int64)
    for gi, n in rows:
        out[int(gi)] = int(n)
    return out


def _sum_rows(rows: Sequence[tuple[Any, ...]], k: int) -> tuple[np.ndarray, np.ndarray]:
    sums, counts = np.zeros(k), np.zeros(k, dtype=np.int64)
    for gi, total, n in rows:
        sums[int(gi)], counts[int(gi)] = float(total or 0), int(n)
    return sums, counts


def _lattice_rows(rows: Sequence[tuple[Any, ...]], k: int) -> LatticeSums:
    """Exact integer sums per group (HUGEINT arrives as a Python int)."""
    sums, sumsq, counts = [0] * k, [0] * k, np.zeros(k, dtype=np.int64)
    for gi, total, total2, n in rows:
        sums[int(gi)], sumsq[int(gi)], counts[int(gi)] = int(total), int(total2), int(n)
    return sums, sumsq, counts


class _Value(NamedTuple):
    """An aggregated value's SQL and kind. ``nan_col``: a stored float column, whose NaN is
    skipped as NULL is (the value is the column, not rewritten). ``stored``: a stored numeric
    column whose NULLs are the value's, so DuckDB can test them from the file's statistics
    (a computed value must be tested on every row)."""

    sql: str
    kind: str
    nan_col: str | None = None
    stored: str | None = None


def _value(
    p: _PlanSql,
    rel: str,
    value: Expr | PyFunc,
    lets: _Lets,
    *,
    ints: bool = False,
    as_stored: bool = False,
) -> _Value:
    """``value`` as pandas' numeric view: a DOUBLE of kind "float" (with ``ints``, an integer
    value stays BIGINT of kind "int"); with ``as_stored``, the value as translated."""
    if isinstance(value, Column) and not as_stored and value.name in p.nan(rel):
        col = _ident(value.name)
        return _Value(col, "float", nan_col=col)
    v = p.expr(value, rel, lets, "an aggregation")
    if as_stored:
        return _Value("NULL" if v.kind == "null" else v.sql, v.kind)
    stored = _ident(value.name) if isinstance(value, Column) and v.kind in _NUMERIC else None
    if ints and v.kind in ("int", "bool"):
        return _Value(v.sql if v.kind == "int" else f"CAST({v.sql} AS BIGINT)", "int", None, stored)
    return _Value(_numeric_value(v), "float", None, stored)


def _integral(x: float) -> bool:
    """An integer that a double holds exactly."""
    return float(x).is_integer() and abs(x) <= 2**53


class DuckDBExecutor(Executor):
    """Plans run inside DuckDB; only aggregates come back.

    Sources are pandas DataFrames (registered with the connection) or DuckDB relations of
    the same connection. ``connection`` defaults to a new in-memory database.

    Within one :func:`~pinqpy.engines.base.batch` (one query's checks and reads) a plan is
    translated once: the check before the charge translates it, and the reads run the same
    SQL, with the same truncation salt, so a query's aggregates all see the same rows.
    """

    def __init__(self, connection: Any = None) -> None:
        import duckdb

        self._duckdb = duckdb
        self.con = connection if connection is not None else duckdb.connect()
        self._registered: dict[int, tuple[Any, str]] = {}
        self._schemas: dict[int, tuple[Any, list[tuple[str, str]]]] = {}
        self._view_schemas: weakref.WeakKeyDictionary[Any, list[tuple[str, str]]] = (
            weakref.WeakKeyDictionary()
        )
        self._names = itertools.count()

    # -- engine plumbing ------------------------------------------------------------------
    def _run(self, fn: Callable[[Any], Any]) -> Any:
        """Run a DuckDB call; its errors become PinqErrors that quote no data."""
        from pinqpy.engines.registry import drop_pending_views

        drop_pending_views()
        try:
            return fn(self.con)
        except PinqError:
            raise
        except self._duckdb.Error as exc:
            raise PinqError(
                f"the DuckDB engine failed ({type(exc).__name__}); details are hidden because "
                "they may contain private values"
            ) from None

    def _table(self, data: Any) -> str:
        """The name under which ``data`` (a DataFrame or relation) is registered."""
        from pinqpy.engines.registry import DuckDBTable

        if isinstance(data, DuckDBTable):
            return data.source
        hit = self._registered.get(id(data))
        if hit is not None and hit[0] is data:
            return hit[1]
        name = f"__pinq_t{next(self._names)}"
        if isinstance(data, pd.DataFrame):
            self._run(lambda c: c.register(name, data))
        elif isinstance(data, self._duckdb.DuckDBPyRelation):
            self._run(lambda c: data.create_view(name, replace=True))
        else:
            raise PinqError(
                f"the DuckDB engine reads pandas DataFrames and DuckDB relations, not "
                f"{type(data).__name__}"
            )
        self._registered[id(data)] = (data, _ident(name))
        return _ident(name)

    def _table_schema(self, data: Any) -> list[tuple[str, str]]:
        """(column, DuckDB type) of a source or public table, bound once per table (tables
        must not change while frames over them are in use)."""
        from pinqpy.engines.registry import DuckDBTable

        if isinstance(data, DuckDBTable):
            if data.columns:
                return list(data.columns)
            schema = self._view_schemas.get(data)
            if schema is None:
                schema = self._bind(f"SELECT * FROM {data.source}")
                self._view_schemas[data] = schema
            return schema
        hit = self._schemas.get(id(data))
        if hit is None or hit[0] is not data:
            hit = (data, self._bind(f"SELECT * FROM {self._table(data)}"))
            self._schemas[id(data)] = hit
        return hit[1]

    def _bind(self, sql: str) -> list[tuple[str, str]]:
        """The (column, DuckDB type) of a query, from binding it (no data is read)."""
        rel = self._run(lambda c: c.sql(sql))
        return [(str(c), str(t)) for c, t in zip(rel.columns, rel.types, strict=True)]

    def _fetch(self, sql: str) -> list[tuple[Any, ...]]:
        """Run a query and read its rows."""

        # execute binds once, where a relation (con.sql) binds on its own first. Views of
        # dropped frames are dropped between reads (drop_pending_views), never during one.
        return self._run(lambda c: c.execute(sql).fetchall())  # type: ignore[no-any-return]

    def _translation(self) -> _PlanSql:
        """The current batch's translator (so a check's translation serves the reads)."""
        memo = batch_memo()
        if memo is None:
            return _PlanSql(self)
        slot = ("duckdb-plans", id(self))
        hit = memo.get(slot)
        if hit is None or hit[0] is not self:
            hit = memo[slot] = (self, _PlanSql(self))
        return hit[1]  # type: ignore[no-any-return]

    @contextlib.contextmanager
    def _rows(
        self, columns: Sequence[str], kinds: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> Iterator[str]:
        """A table of public values (keys, candidates) as a FROM item: written into the query
        when small, else registered for the duration."""
        inline = _rows_sql(columns, kinds, rows)
        if inline is not None:
            yield inline
            return
        frame = _rows_frame(columns, kinds, rows)
        name = self._table(frame)
        try:
            yield name
        finally:
            self._unregister(frame)

    def _grouped(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc | None,
        aggs: Callable[[str, str], list[str]],
        extra: Callable[[str, str], tuple[str, str, str]] | None = None,
        as_stored: bool = False,
        ints: bool = False,
        staged: Callable[[str, str], str] | None = None,
    ) -> tuple[list[tuple[Any, ...]], int]:
        """Run ``aggs(v, kind)`` per listed group; rows are (group position, [extra key,]
        aggs...).

        ``v`` is the SQL of ``value`` as pandas' numeric view, a DOUBLE of kind "float"
        whose NULLs are left out; with ``ints``, an integer value stays BIGINT (kind "int").
        With ``as_stored`` it is the value as translated, NULLs included. ``extra`` may add a
        join (FROM suffix, select item, group item) given ``v`` and its kind.
        """
        p = self._translation()
        rel = p.visit(plan)
        k = 1 if grouping is None else len(grouping.keys)
        lets = _Lets()
        kind, keep = "null", ""
        if value is None:
            src = f"{rel} AS r"
        else:
            v = _value(p, rel, value, lets, ints=ints, as_stored=as_stored)
            kind = v.kind
            if v.nan_col is not None:
                keep = f" WHERE NOT isnan(r.{v.nan_col})"
            elif not as_stored:
                keep = f" WHERE r.{v.stored or '__pinq_v'} IS NOT NULL"
            src = f"(SELECT *, {v.sql} AS __pinq_v FROM {lets.source(rel, [v.sql])}) AS r"
        with contextlib.ExitStack() as stack:
            gi = "0"
            if grouping is not None:
                join = self._group_join(p, rel, grouping, stack)
                if join is None:
                    return [], k
                src += join
                gi = f"g.{_GI}"
            if staged is not None:
                inner = f"SELECT {gi} AS __pinq_gi, r.__pinq_v AS __pinq_v FROM {src}{keep}"
                # One group: grouped by the bucket alone (a constant key costs a hash).
                head, by = ("0", "__pinq_b") if grouping is None else ("__pinq_gi", "ALL")
                sql = (
                    f"SELECT {head}, __pinq_b, COUNT(*) FROM ({staged(inner, kind)}) GROUP BY {by}"
                )
                return self._fetch(p.query(sql)), k
            items = [f"{gi} AS __pinq_gi"]
            groups = ["__pinq_gi"]
            if extra is not None:
                join, item, group = extra("r.__pinq_v", kind)
                src += join
                items.append(item)
                groups.append(group)
            items += aggs("r.__pinq_v", kind)
            # One group: a plain aggregate (a GROUP BY on a constant keeps DuckDB from using
            # its fast paths, ten times slower for a filtered count).
            group_by = (
                "" if len(groups) == 1 and grouping is None else f" GROUP BY {', '.join(groups)}"
            )
            return self._fetch(p.query(f"SELECT {', '.join(items)} FROM {src}{keep}{group_by}")), k

    def _group_join(
        self, p: _PlanSql, rel: str, grouping: Grouping, stack: contextlib.ExitStack
    ) -> str | None:
        """A JOIN of the rows ``r`` against the listed keys ``g`` (so each row gets its key's
        position ``g.__pinq_g``), or None when no key can match the columns' types."""
        kinds = p.kinds(rel)
        cols = list(grouping.columns)
        ckinds = [kinds[c] for c in cols]
        rows = [(i, *vals) for i, vals in column_key_rows(ckinds, grouping.keys, len(cols) == 1)]
        if not rows:
            return None
        keys = stack.enter_context(self._rows([_GI, *cols], ["int", *ckinds], rows))
        cond = " AND ".join(
            f"{p.value(rel, c, 'r.')} IS NOT DISTINCT FROM g.{_ident(c)}" for c in cols
        )
        return f" JOIN {keys} AS g ON {cond}"

    def read_together(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read]
    ) -> list[Any]:
        """One query for ``reads`` (counts, clamped sums and moments of ``plan``).

        NaN in a stored float column is skipped as NULL is. A FILTER on every value's
        aggregates would cost a third of the scan, so the query first counts the NaN instead
        (cheap), and runs again with the FILTERs only if there are any."""
        rows, k, nans = self._fused_query(plan, grouping, reads, filtered=False)
        if nans:
            rows, k, _ = self._fused_query(plan, grouping, reads, filtered=True)
        out: list[Any] = []
        at = 1
        for r in reads:
            w = 1 if r.kind == "count" else 2 if r.kind == "sum" else 3
            part = [(row[0], *row[at : at + w]) for row in rows]
            at += w
            decode = {
                "count": _count_rows,
                "sum": _sum_rows,
                "mean": _lattice_rows,
                "moments": _lattice_rows,
            }[r.kind]
            out.append(decode(part, k))
        return out

    def _fused_query(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read], filtered: bool
    ) -> tuple[list[tuple[Any, ...]], int, bool]:
        """Rows (group position, each read's aggregates...) and whether a value skipped as
        NaN occurred (then unfiltered results are wrong and are not used)."""
        p = self._translation()
        rel = p.visit(plan)
        k = 1 if grouping is None else len(grouping.keys)
        lets = _Lets()
        items: list[str] = []
        nan_items: list[str] = []
        sqls: list[tuple[int, str]] = []
        for i, r in enumerate(reads):
            if r.kind == "count":
                items.append("COUNT(*)")
                continue
            ints = r.kind == "sum" and _integral(r.lo) and _integral(r.hi)
            v = _value(p, rel, r.value, lets, ints=ints)  # type: ignore[arg-type]
            sqls.append((i, v.sql))
            when = ""
            if v.nan_col is not None:
                if filtered:
                    when = f" FILTER (WHERE NOT isnan(r.{v.nan_col}))"
                else:
                    nan_items.append(f"COUNT_IF(isnan(r.{v.nan_col}))")
            if r.kind == "sum":
                items += _sum_aggs(f"r.__pinq_v{i}", v.kind, r.lo, r.hi, when)
            else:
                squares = r.kind == "moments"
                items += _lattice_aggs(f"r.__pinq_v{i}", v.kind, r.lo, r.hi, when, squares)
        src = f"{rel} AS r"
        if sqls:
            cols = ", ".join(f"{v} AS __pinq_v{i}" for i, v in sqls)
            src = f"(SELECT *, {cols} FROM {lets.source(rel, [v for _, v in sqls])}) AS r"
        with contextlib.ExitStack() as stack:
            gi, join, group_by = "0", "", ""
            if grouping is not None:
                join = self._group_join(p, rel, grouping, stack)  # type: ignore[assignment]
                gi, group_by = f"g.{_GI}", " GROUP BY __pinq_gi"
            if join is None:
                return [], k, False
            listed = ", ".join([*items, *nan_items])
            sql = f"SELECT {gi} AS __pinq_gi, {listed} FROM {src}{join}{group_by}"
            rows = self._fetch(p.query(sql))
        n = 1 + len(items)
        nans = any(any(row[n:]) for row in rows)
        return [row[:n] for row in rows], k, nans

    def _unregister(self, data: pd.DataFrame) -> None:
        hit = self._registered.pop(id(data), None)
        self._schemas.pop(id(data), None)
        if hit is not None:
            name = hit[1][1:-1]
            self._run(lambda c: c.unregister(name))

    def rows(self, plan: PlanNode) -> pd.DataFrame:
        """The plan's rows. For tests of stability only; never reachable from the public API."""
        p = self._translation()
        rel = p.normalized(p.visit(plan))
        return self._run(lambda c: c.sql(p.query(f"SELECT * FROM {rel}")).df())

    # -- the Executor interface -----------------------------------------------------------
    def validate(
        self, plan: PlanNode, value: Expr | PyFunc | None = None, numeric: bool = False
    ) -> None:
        # Translating finds callables, unknown columns and unaggregatable types, before the
        # charge. It derives each node's types, except where DuckDB decides them (set
        # operations, lists) or alone can tell whether values combine (lists, structs):
        # there DuckDB binds the SQL now (resolving types, reading no rows), so whatever it
        # would refuse is refused before the charge too.
        p = self._translation()
        rel = p.visit(plan)
        lets = _Lets()
        vsql = "NULL"
        if value is not None:
            v = p.expr(value, rel, lets, "an aggregation")
            if numeric and v.kind == "other":
                what = f"column {value.name!r}" if isinstance(value, Column) else "this expression"
                types = dict(p.schema(rel))
                shown = types.get(value.name, "") if isinstance(value, Column) else ""
                raise PinqError(
                    f"the DuckDB engine cannot aggregate {what}"
                    + (f" of type {shown}" if shown else "")
                    + " as a number; select or CAST a numeric value instead"
                )
            vsql = _typed(v)
        p.schema(rel)
        if p.unchecked:
            self._bind(p.query(f"SELECT {vsql} FROM {lets.source(rel, [vsql])}"))

    def count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        hit = prefetched("count", plan, grouping)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        rows, k = self._grouped(plan, grouping, None, lambda v, kind: ["COUNT(*)"])
        return _count_rows(rows, k)

    def clamped_sum(
        self, plan: PlanNode, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
    ) -> tuple[np.ndarray, np.ndarray]:
        hit = prefetched("sum", plan, grouping, value, lo, hi)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        rows, k = self._grouped(
            plan,
            grouping,
            value,
            lambda v, kind: _sum_aggs(v, kind, lo, hi),
            ints=_integral(lo) and _integral(hi),
        )
        return _sum_rows(rows, k)

    def lattice_sums(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        lo: float,
        hi: float,
        squares: bool = False,
    ) -> LatticeSums:
        hit = prefetched("moments" if squares else "mean", plan, grouping, value, lo, hi)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        rows, k = self._grouped(
            plan, grouping, value, lambda v, kind: _lattice_aggs(v, kind, lo, hi, "", squares)
        )
        return _lattice_rows(rows, k)

    def buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        cand = np.asarray(candidates, dtype="float64")
        m = len(cand)
        grid = uniform_grid(cand)
        if grid is not None:
            return self._grid_buckets(plan, grouping, value, grid)
        # One interval [c, next distinct c) per distinct candidate, at its first position j:
        # x == c goes to eq[j]; c < x < next goes to gap[j2 - 1], j2 the next one's first
        # position (as numpy's searchsorted(side="left") assigns them).
        firsts = [j for j in range(m) if j == 0 or cand[j] != cand[j - 1]]
        rows = []
        for i, j in enumerate(firsts):
            j2 = firsts[i + 1] if i + 1 < len(firsts) else None
            hi = float(cand[j2]) if j2 is not None else None
            rows.append((float(cand[j]), hi, 2 * j, (2 * j2 - 1) if j2 is not None else -1))
        lo_s = _key_literal(float(cand[0]), "float")
        hi_s = _key_literal(float(cand[-1]), "float")
        names = ["__pinq_lo", "__pinq_hi", "__pinq_eq", "__pinq_gap"]
        with self._rows(names, ["float", "float", "int", "int"], rows) as table:

            def extra(v: str, kind: str) -> tuple[str, str, str]:
                c = f"LEAST(GREATEST({v}, {lo_s}), {hi_s})"
                join = (
                    f" JOIN {table} AS b ON {c} >= b.__pinq_lo AND "
                    f"(b.__pinq_hi IS NULL OR {c} < b.__pinq_hi)"
                )
                item = (
                    f"CASE WHEN {c} = b.__pinq_lo THEN b.__pinq_eq ELSE b.__pinq_gap END "
                    "AS __pinq_b"
                )
                return join, item, "__pinq_b"

            rows_out, k = self._grouped(
                plan, grouping, value, lambda v, kind: [f"COUNT({v})"], extra=extra
            )
        width = 2 * m - 1
        flat = np.zeros((k, width), dtype=np.int64)
        for gi, b, n in rows_out:
            flat[int(gi), int(b)] += int(n)
        return flat[:, 0::2].astype(np.int64), flat[:, 1::2].astype(np.int64)

    def _grid_buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        grid: Grid,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Buckets on an exact arithmetic grid, without a join (see :mod:`pinqpy.engines.buckets`)."""

        def staged(inner: str, kind: str) -> str:
            if kind == "int":
                return _int_bucket_query(inner, grid)
            lit = lambda x: _key_literal(x, "float")  # noqa: E731
            return bucket_query(inner, "__pinq_gi", "__pinq_v", "__pinq_b", grid, lit)

        ints = _integral(grid.start) and _integral(grid.step) and _integral(grid.stop)
        rows, k = self._grouped(plan, grouping, value, lambda v, kind: [], ints=ints, staged=staged)
        flat = np.zeros((k, 2 * grid.size - 1), dtype=np.int64)
        for gi, b, n in rows:
            flat[int(gi), int(b)] += int(n)
        return flat[:, 0::2], flat[:, 1::2]

    def key_counts(
        self, plan: PlanNode, columns: tuple[str, ...]
    ) -> tuple[list[Hashable], np.ndarray]:
        p = self._translation()
        rel = p.visit(plan)
        cols = ", ".join(f"{p.value(rel, c)} AS {_ident(c)}" for c in columns)
        order = ", ".join(f"{_ident(c)} ASC NULLS LAST" for c in columns)
        rows = self._fetch(
            p.query(f"SELECT {cols}, COUNT(*) FROM {rel} GROUP BY ALL ORDER BY {order}")
        )
        if len(columns) == 1:
            keys: list[Hashable] = [r[0] for r in rows]
        else:
            keys = [tuple(r[:-1]) for r in rows]
        # Released as canonical spellings (-0.0 groups with 0.0 and comes back as either).
        kinds = p.kinds(rel)
        counts = np.array([int(r[-1]) for r in rows], dtype=np.int64)
        return canonical_key_counts(keys, counts, [kinds[c] for c in columns])

    def candidate_counts(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: tuple[Hashable, ...],
    ) -> np.ndarray:
        n = len(candidates)
        with contextlib.ExitStack() as stack:

            def extra(v: str, kind: str) -> tuple[str, str, str]:
                # First position of each candidate value, as Index.get_indexer finds it.
                seen: set[Any] = set()
                uniq: list[tuple[int, Any]] = []
                for j, c in enumerate(candidates):
                    ck = _value_kind(c)
                    marker = (ck, c) if ck is not None else (None, None)
                    if ck is not None and not _compatible(kind, ck):
                        continue
                    try:
                        if marker in seen:
                            continue
                        seen.add(marker)
                    except TypeError:
                        pass
                    uniq.append((j, c))
                rows: list[tuple[Any, ...]] = []
                ckind = kind
                if kind in ("null", "other"):
                    ckind = "float"  # no candidate matches; an empty table of some type
                else:
                    found = _key_rows([kind], [c for _, c in uniq], single=True)
                    rows = [(uniq[i][0], c) for i, c in found]
                cols = [_GI, "__pinq_c"]
                table = stack.enter_context(self._rows(cols, ["int", ckind], rows))
                join = f" JOIN {table} AS cnd ON {v} IS NOT DISTINCT FROM cnd.__pinq_c"
                return join, f"cnd.{_GI} AS __pinq_j", "__pinq_j"

            rows, k = self._grouped(
                plan, grouping, value, lambda v, kind: ["COUNT(*)"], extra=extra, as_stored=True
            )
        out = np.zeros((k, n), dtype=np.int64)
        for gi, j, c in rows:
            out[int(gi), int(j)] = int(c)
        return out
