"""Run plans inside Apache Spark and return only the small exact aggregates mechanisms need.

A plan becomes one Spark SQL query: a common table expression per plan node over a temporary
view per source (made once, dropped when the source DataFrame is gone), with each node's
column kinds worked out in Python, so Spark analyses a query once, when it runs, and only the
final aggregate is collected: one Spark action per executor call. The calls of one query (the
check before the charge, then each aggregate) share one translation
(:func:`~pinqpy.plan.batch.batch_memo`). Expressions are translated from the AST into Spark SQL
that follows :mod:`pinqpy.expr.pandas_eval`, whatever the session's ANSI setting:

* NULL propagates; a fault that depends on the data (division by zero, integer overflow, a
  bad CAST, the logarithm of a negative, a non-finite float) gives NULL, never an error.
* ``/`` is float division; FLOOR, CEIL and ROUND(x) give integers (NULL beyond the int64
  range); ROUND halves go away from zero; LOG is base 10; LEAST/GREATEST skip NULLs.
* Floats are doubles with NaN read as NULL; integers are 64-bit; keys match NULL to NULL.
* Truncation (``bound_contributions`` and bounded joins) keeps, per key, the rows of lowest
  salted 64-bit hash of the whole row, as the pandas engine does with its own hash.

pandas DataFrames (sources and public tables) are converted with :func:`to_spark`, once per
DataFrame object and executor.

Differences from the pandas engine, all at the edges:

* Floats as text follow Python's ``repr`` (``1e+20``, ``0.0001``, shortest digits); beyond
  2^53, or below the normal range, the last digit can differ (Java rounds twice).
* Datetimes as text are always ``yyyy-MM-dd HH:mm:ss`` (pandas drops the time of a column of
  whole dates and adds fractions when a row has them). Timestamps have microsecond precision.
  Text parsed as a timestamp follows Spark's ISO-8601 reader.
* A datetime is not a number: aggregating one gives NULL (pandas reads nanoseconds).
* Object columns of mixed types are read as their text, so they match text keys only.
* Spark resolves column names regardless of case, so names that differ only in case cannot
  be told apart.

Not supported (a :class:`~pinqpy.errors.PinqError` says so): Python callables
(:class:`~pinqpy.plan.nodes.PyFunc`), which cannot run inside the engine, SUBSTR with a start or
length that is not a literal integer, and map-typed columns in truncation keys.

Errors raised by Spark are reported by kind only: their text may quote private values.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import uuid
import weakref
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pinqpy.core.lattice import Lattice, SumGrid
from pinqpy.engines.base import (
    Executor,
    LatticeSums,
    Read,
    canonical_key_counts,
    column_key_rows,
    prefetched,
)
from pinqpy.engines.buckets import bucket_query, uniform_grid
from pinqpy.engines.sources import SparkFile
from pinqpy.engines.spark.dialect import SPARK
from pinqpy.engines.spark.session import (
    guard,
    is_spark_dataframe,
    local_session,
    pyspark_sql,
    spark_types,
)
from pinqpy.engines.spark.types import (
    arrow_values,
    kind_of,
    micros,
    naive,
    normalized,
    normalized_type,
    session_tz,
    to_spark,
)
from pinqpy.engines.sqlgen.expressions import (
    ExprSql,
    Lets,
    S,
    aggregate,
    no_callable,
    numeric_value,
    typed,
)
from pinqpy.engines.sqlgen.plans import (
    CtePlanSql,
    compatible,
    key_literal,
    key_match,
    value_kind,
)
from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import Column, Expr
from pinqpy.noise import source as _noise
from pinqpy.plan.batch import batch_memo
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import (
    Distinct,
    Explode,
    GroupBy,
    PartSource,
    PlanNode,
    PublicJoin,
    PyFunc,
    Select,
    SetOp,
    Source,
    Where,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkExecutor"]

_GI = "__pinq_g"


# -- public keys and candidates -----------------------------------------------------------------
def _key_literal(v: object, kind: str, tz: str) -> str:
    def stamp(t: object) -> str:
        return f"timestamp_micros({SPARK.int_lit(micros([t], tz)[0])})"  # type: ignore[arg-type]

    return key_literal(SPARK, v, kind, stamp)


def _key_column(values: Sequence[Any], kind: str, tz: str) -> list[str]:
    """One key column as SQL literals typed like the plan's column it is matched against
    (``None`` is NULL): the values and types :func:`_key_arrow` gives."""
    if kind in ("int", "float"):
        if kind == "int" and all(v is None or value_kind(v) == "int" for v in values):
            return [SPARK.null("int") if v is None else SPARK.int_lit(int(v)) for v in values]
        return [SPARK.null("float") if v is None else SPARK.float_lit(float(v)) for v in values]
    if kind == "bool":
        return [SPARK.null("bool") if v is None else "TRUE" if v else "FALSE" for v in values]
    if kind == "datetime":
        return [
            SPARK.null("datetime") if m is None else f"timestamp_micros({SPARK.int_lit(m)})"
            for m in micros(values, tz)
        ]
    return [
        SPARK.null("str") if v is None else SPARK.str_lit(v if isinstance(v, str) else str(v))
        for v in values
    ]


def _key_type(values: Sequence[Any], kind: str) -> str:
    """The SQL type of a key column made by :func:`_key_column`."""
    if kind in ("int", "float"):
        ints = all(v is None or value_kind(v) == "int" for v in values)
        return "BIGINT" if kind == "int" and ints else "DOUBLE"
    return {"bool": "BOOLEAN", "datetime": "TIMESTAMP"}.get(kind, "STRING")


def _key_value(v: Any, sql_type: str) -> Any:
    """A key as Spark returns a value of ``sql_type`` equal to it (None for NULL)."""
    if v is None:
        return None
    if sql_type == "BIGINT":
        return int(v)
    if sql_type == "DOUBLE":
        return float(v)
    if sql_type == "BOOLEAN":
        return bool(v)
    return v if isinstance(v, str) else str(v)


def _key_arrow(values: Sequence[Any], kind: str, tz: str) -> tuple[Any, Any]:
    """One key column typed like the plan's column it is matched against."""
    if kind in ("int", "float"):
        ints = all(v is None or value_kind(v) == "int" for v in values)
        if kind == "int" and ints:
            return arrow_values(pd.Series(pd.array(values, dtype="Int64")), "int", tz)
        floats = [np.nan if v is None else float(v) for v in values]
        return arrow_values(pd.Series(floats, dtype="float64"), "float", tz)
    if kind == "bool":
        return arrow_values(pd.Series(pd.array(values, dtype="boolean")), "bool", tz)
    if kind == "datetime":
        stamps = [pd.NaT if v is None else naive(v) for v in values]
        return arrow_values(pd.Series(pd.to_datetime(stamps)), "datetime", tz)
    return arrow_values(pd.Series(values, dtype=object), "text", tz)


# -- plans -------------------------------------------------------------------------------------
# Key and candidate tables up to this many rows are written into the query (VALUES), which
# costs Spark nothing extra; larger ones are sent as a DataFrame.
_INLINE_ROWS = 1000
# The reads one Spark job can compute together, by the name of their request.
_REQUESTS = {"count": "count", "sum": "clamped_sum", "mean": "lattice", "moments": "lattice2"}


@dataclass(frozen=True)
class _Col:
    """A column of a translated relation; ``dtype`` is its Spark type where pinqpy needs it
    (arrays, maps, structs: kind "other"), None when not known."""

    name: str
    kind: str
    dtype: Any = None


@dataclass(frozen=True)
class _Rel:
    """A translated plan node: the name to read it by (a common table expression or a source
    view) and its columns. ``sure`` is false when only Spark can tell whether its SQL is
    valid (values of types pinqpy does not model, such as maps in a DISTINCT)."""

    name: str
    cols: tuple[_Col, ...]
    sure: bool = True

    @property
    def kinds(self) -> dict[str, str]:
        return {c.name: c.kind for c in self.cols}

    def names(self) -> list[str]:
        return [c.name for c in self.cols]

    def col_list(self) -> str:
        return ", ".join(SPARK.ident(c.name) for c in self.cols)


def _col_of(v: S, name: str, child: _Rel) -> _Col:
    """The column an expression makes (an untyped NULL is stored as DOUBLE, see _typed)."""
    if v.kind == "other":
        # Only a column reference keeps a type pinqpy does not model (see ExprSql.column).
        src = next((c for c in child.cols if SPARK.ident(c.name) == v.sql), None)
        return _Col(name, "other", src.dtype if src is not None else None)
    return _Col(name, "float" if v.kind == "null" else v.kind)


def _public_nulls(data: Any, on: Sequence[str]) -> list[bool] | None:
    """Which key columns of a public table hold a NULL (None: not known). Public rows may
    be read freely."""
    if not isinstance(data, pd.DataFrame):
        return None
    try:
        return [bool(data[c].isna().any()) for c in on]
    except (KeyError, TypeError, ValueError):
        return None


def _values_table(names: Sequence[str], columns: Sequence[Sequence[str]]) -> str:
    """A small table written as a VALUES list, as a FROM item."""
    rows = ", ".join("(" + ", ".join(r) + ")" for r in zip(*columns, strict=True))
    cols = ", ".join(SPARK.ident(n) for n in names)
    return f"(SELECT * FROM VALUES {rows} AS __pinq_t({cols}))"


class _Call:
    """One executor call: what it is doing (for error messages) and the temporary views it
    makes for large key tables, dropped when it ends."""

    def __init__(self, ex: SparkExecutor, what: str) -> None:
        self.ex = ex
        self.what = what
        self.views: list[str] = []

    def run(self, fn: Callable[[], Any]) -> Any:
        return guard(self.what, fn)

    def sql(self, text: str) -> DataFrame:
        """Spark's analysis of a query (reads no rows)."""
        return self.run(lambda: self.ex.spark.sql(text))  # type: ignore[no-any-return]

    def collect(self, text: str) -> list[tuple[Any, ...]]:
        rows = self.run(lambda: self.ex.spark.sql(text).collect())
        return [tuple(r) for r in rows]

    def table(self, columns: Sequence[str], arrays: Sequence[tuple[Any, Any]]) -> str:
        """A typed table (keys, candidates) as a view."""
        import pyarrow as pa

        T = spark_types()
        fields = [T.StructField(c, t, True) for c, (_, t) in zip(columns, arrays, strict=True)]
        table = pa.Table.from_arrays([a for a, _ in arrays], names=list(columns))
        df = self.run(lambda: self.ex.spark.createDataFrame(table, schema=T.StructType(fields)))
        name = f"{self.ex._prefix}t{next(self.ex._names)}"
        self.run(lambda: df.createOrReplaceTempView(name))
        self.views.append(name)
        return SPARK.ident(name)

    def close(self) -> None:
        for name in self.views:
            with contextlib.suppress(Exception):
                guard(self.what, lambda n=name: self.ex.spark.catalog.dropTempView(n))
        self.views.clear()


class _PlanSql(CtePlanSql[_Rel]):
    """Turns plans into SQL: one common table expression per node, whose columns and their
    kinds are worked out here (as Spark would), so that a query costs Spark one analysis,
    when it runs, instead of one per node. A node shared by several parents (``f.concat(f)``)
    is one expression.

    One translator serves all the calls of one query (:func:`~pinqpy.plan.batch.batch_memo`):
    the check before the charge and every aggregate share the translation, and so the
    truncation salts.
    """

    def __init__(self, ex: SparkExecutor) -> None:
        super().__init__()
        self.ex = ex
        self.call = _Call(ex, "translating a query")
        # CTE name -> (its query, the CTE names it reads), in the order of definition.
        self.ctes: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._values: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}
        self._typed: dict[str, _Rel] = {}

    # -- bookkeeping ----------------------------------------------------------------------
    def add(self, sql: str, cols: Sequence[_Col], reads: Sequence[_Rel], sure: bool = True) -> _Rel:
        name = SPARK.ident(f"__pinq_n{len(self.ctes)}")
        self.ctes[name] = (sql, tuple(r.name for r in reads if r.name in self.ctes))
        sure = sure and all(r.sure for r in reads) and all(c.kind != "other" for c in cols)
        return _Rel(name, tuple(cols), sure)

    def query(self, text: str, *reads: _Rel) -> str:
        """``text`` (a SELECT over ``reads``) with the definitions it needs."""
        need: set[str] = set()
        stack = [r.name for r in reads if r.name in self.ctes]
        while stack:
            n = stack.pop()
            if n not in need:
                need.add(n)
                stack.extend(self.ctes[n][1])
        defs = [f"{n} AS ({sql})" for n, (sql, _) in self.ctes.items() if n in need]
        return f"WITH {', '.join(defs)} {text}" if defs else text

    def analysed(self, rel: _Rel) -> list[Any]:
        """Spark's own fields of ``rel`` (one analysis), for what pinqpy does not model."""
        df = self.call.sql(self.query(f"SELECT * FROM {rel.name}", rel))
        return list(self.call.run(lambda: df.schema).fields)

    def typed(self, rel: _Rel) -> _Rel:
        """``rel`` with the Spark type of every column known."""
        if all(c.kind != "other" or c.dtype is not None for c in rel.cols):
            return rel
        hit = self._typed.get(rel.name)
        if hit is None:
            fields = self.analysed(rel)
            cols = tuple(_Col(f.name, kind_of(f.dataType), f.dataType) for f in fields)
            hit = self._typed[rel.name] = _Rel(rel.name, cols, rel.sure)
        return hit

    def translator(self, rel: _Rel) -> tuple[ExprSql, Lets]:
        lets = Lets(SPARK)
        return ExprSql(SPARK, rel.kinds, lets), lets

    def expr(self, e: Expr | PyFunc, t: ExprSql, what: str) -> S:
        no_callable(e, what, "Spark")
        assert isinstance(e, Expr)
        return t.tr(e)

    def values(
        self, rel: _Rel, values: Sequence[Expr | PyFunc], numeric: bool
    ) -> tuple[str, list[str], list[str], bool]:
        """Aggregated values over ``rel``: (FROM item with their lets, their SQL, their kinds,
        whether only Spark can vouch for them). Translated once per query."""
        key = (rel.name, tuple(id(v) for v in values), numeric)
        hit = self._values.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], values, strict=True)):
            return hit[1]
        t, lets = self.translator(rel)
        vs = [self.expr(v, t, "an aggregation") for v in values]
        sqls = [numeric_value(SPARK, v) if numeric else typed(SPARK, v) for v in vs]
        kinds = [v.kind for v in vs]
        out = (lets.source(rel.name, sqls), sqls, kinds, t.unchecked or "other" in kinds)
        self._values[key] = (tuple(values), out)
        return out

    def source(self, data: Any) -> _Rel:
        """A source in the engine's value model (bigint, double without NaN, ...)."""
        if isinstance(data, SparkFile):
            # A file read by name: always one CTE over it, whose name is an identifier.
            fields = data.schema.fields
            cols = [
                _Col(f.name, kind_of(normalized_type(f.dataType)), normalized_type(f.dataType))
                for f in fields
            ]
            # A shorter query is parsed and analysed faster: no list when no column changes
            # (Spark has no SELECT * REPLACE, so one change lists them all).
            items = [
                f"{normalized(SPARK.ident(f.name), f.dataType)} AS {SPARK.ident(f.name)}"
                for f in fields
            ]
            plain = all(normalized("", f.dataType) == "" for f in fields)
            listed = "*" if plain or not items else ", ".join(items)
            return self.add(f"SELECT {listed} FROM {data.source}", cols, [])
        df, clean = self.ex._frame(data)
        view = self.ex._view(df, self.call)
        fields = self.call.run(lambda: df.schema).fields
        items = [
            f"{normalized(SPARK.ident(f.name), f.dataType)} AS {SPARK.ident(f.name)}"
            for f in fields
        ]
        if clean or all(normalized("", f.dataType) == "" for f in fields):
            # Already in the value model (bigint, double without NaN, ...): read the view.
            return _Rel(view, tuple(_Col(f.name, kind_of(f.dataType), f.dataType) for f in fields))
        cols = []
        for f in fields:
            dt = normalized_type(f.dataType)
            cols.append(_Col(f.name, kind_of(dt), dt))
        rel = _Rel(view, ())
        return self.add(f"SELECT {', '.join(items) or '*'} FROM {view}", cols, [rel])

    # -- nodes ----------------------------------------------------------------------------
    def visit_source(self, node: Source) -> _Rel:
        return self.source(self.ex.catalog.data(node.table))

    def visit_part_source(self, node: PartSource) -> _Rel:
        parent = self.visit(node.partition.parent)
        kinds = parent.kinds
        key = node.key if len(node.partition.key_columns) > 1 else (node.key,)
        tz = session_tz(self.ex.spark)
        conds = [
            key_match(SPARK.ident(c), kinds[c], k, lambda v, kind: _key_literal(v, kind, tz))
            for c, k in zip(node.partition.key_columns, key, strict=True)  # type: ignore[arg-type]
        ]
        sql = f"SELECT {parent.col_list()} FROM {parent.name} WHERE {' AND '.join(conds)}"
        return self.add(sql, parent.cols, [parent])

    def visit_where(self, node: Where) -> _Rel:
        child = self.visit(node.child)
        no_callable(node.predicate, "where", "Spark")
        t, lets = self.translator(child)
        pred = t.boolean(t.tr(node.predicate)).sql  # type: ignore[arg-type]
        src = lets.source(child.name, [pred])
        sql = f"SELECT {child.col_list()} FROM {src} WHERE {pred}"
        return self.add(sql, child.cols, [child], not t.unchecked)

    def visit_select(self, node: Select) -> _Rel:
        child = self.visit(node.child)
        t, lets = self.translator(child)
        outs = [(n, self.expr(e, t, "select")) for n, e in node.outputs]
        items = {n: f"{typed(SPARK, v)} AS {SPARK.ident(n)}" for n, v in outs}
        made = {n: _col_of(v, n, child) for n, v in outs}
        if node.keep_all:
            # pandas assign replaces an existing column in place, appends new ones.
            names = child.names() + [n for n in items if n not in child.kinds]
            sqls = [items.get(n, SPARK.ident(n)) for n in names]
            old = {c.name: c for c in child.cols}
            cols = [made[n] if n in made else old[n] for n in names]
        else:
            sqls, cols = list(items.values()), list(made.values())
        src = lets.source(child.name, sqls)
        if not sqls:
            sqls, cols = ["1 AS __pinq_empty"], [_Col("__pinq_empty", "int")]
        sql = f"SELECT {', '.join(sqls)} FROM {src}"
        return self.add(sql, cols, [child], not t.unchecked)

    def visit_distinct(self, node: Distinct) -> _Rel:
        child = self.visit(node.child)
        kinds = {c.name: c for c in child.cols}
        cols = [kinds[c] for c in node.columns]
        sql = f"SELECT DISTINCT {', '.join(SPARK.ident(c) for c in node.columns)} FROM {child.name}"
        return self.add(sql, cols, [child])

    def visit_explode(self, node: Explode) -> _Rel:
        child = self.visit(node.child)
        col = next(c for c in child.cols if c.name == node.column)
        if col.kind == "other" and col.dtype is None:
            child = self.typed(child)
            col = next(c for c in child.cols if c.name == node.column)
        q = SPARK.ident(node.column)
        if col.kind != "other" or type(col.dtype).__name__ != "ArrayType":
            # A scalar explodes to itself; NULL carries nothing.
            sql = f"SELECT {child.col_list()} FROM {child.name} WHERE {q} IS NOT NULL"
            return self.add(sql, child.cols, [child])
        # Items in the engine's value model (so NaN is NULL), NULL items dropped, then cut.
        elem = col.dtype.elementType
        item = normalized("__pinq_x", elem)
        items = (
            f"slice(filter(transform({q}, __pinq_x -> {item}), __pinq_x -> __pinq_x IS NOT NULL)"
            f", 1, {max(int(node.max_items), 0)})"
        )
        sqls = [
            f"explode({items}) AS {q}" if c.name == node.column else SPARK.ident(c.name)
            for c in child.cols
        ]
        out_type = normalized_type(elem)
        cols = [
            _Col(c.name, kind_of(out_type), out_type) if c.name == node.column else c
            for c in child.cols
        ]
        return self.add(f"SELECT {', '.join(sqls)} FROM {child.name}", cols, [child])

    def visit_group_by(self, node: GroupBy) -> _Rel:
        child = self.visit(node.child)
        t, lets = self.translator(child)
        by_name = {c.name: c for c in child.cols}
        keys = [SPARK.ident(k) for k in node.keys]
        items = list(keys)
        cols = [by_name[k] for k in node.keys]
        for name, call in node.aggs:
            items.append(f"{aggregate(t, call)} AS {SPARK.ident(name)}")
            counts = call.star or call.name.upper() == "COUNT"
            cols.append(_Col(name, "int" if counts else "float"))
        src = lets.source(child.name, items)
        # Grouped by exactly the unit, a row whose unit is NULL belongs to no known person.
        keep = ""
        if node.by_unit:
            keep = " WHERE " + " AND ".join(f"{k} IS NOT NULL" for k in keys)
        sql = f"SELECT {', '.join(items)} FROM {src}{keep} GROUP BY {', '.join(keys)}"
        return self.add(sql, cols, [child], not t.unchecked)

    def truncate(
        self, child: _Rel, columns: Sequence[str], limit: int, drop_null: bool = False
    ) -> _Rel:
        """The ``limit`` rows of lowest salted-hash priority per key of ``columns`` (with
        ``drop_null``, rows whose key is NULL are dropped first).

        Spark's ``xxhash64`` hashes each value with the hash so far as its seed, so the salt
        hashed first keys every later value nonlinearly, numbers included: which rows are kept
        changes with every salt."""
        salt = SPARK.str_lit(_noise.current_source().bytes(8).hex())
        child = self.typed(child)
        # A row's priority depends only on its own values and the salt (maps cannot be hashed).
        hashed = [SPARK.ident(c.name) for c in child.cols if type(c.dtype).__name__ != "MapType"]
        prio = f"xxhash64({', '.join([salt, *hashed])})"
        part = ", ".join(SPARK.ident(c) for c in columns)
        keep = ""
        if drop_null:
            keep = " WHERE " + " AND ".join(f"{SPARK.ident(c)} IS NOT NULL" for c in columns)
        inner = (
            f"SELECT *, row_number() OVER (PARTITION BY {part} ORDER BY {prio}) AS __pinq_rank "
            f"FROM {child.name}{keep}"
        )
        sql = f"SELECT {child.col_list()} FROM ({inner}) AS t WHERE __pinq_rank <= {int(limit)}"
        return self.add(sql, child.cols, [child])

    def merge(
        self,
        left: _Rel,
        right: _Rel,
        on: Sequence[str],
        how: str,
        suffix: str,
        nulls: Sequence[bool] | None = None,
    ) -> _Rel:
        """Join on ``on``, NULL matching NULL as in pandas. ``nulls`` says which key columns of
        ``right`` may hold NULL (None: any): a plain equality joins the others, which Spark
        does with a much faster hash join than a NULL-safe one."""
        lnames = set(left.names())
        items = [f"l.{SPARK.ident(c)}" for c in left.names()]
        cols = list(left.cols)
        for c in right.cols:
            if c.name in on:
                continue
            out = c.name + suffix if c.name in lnames else c.name
            items.append(f"r.{SPARK.ident(c.name)} AS {SPARK.ident(out)}")
            cols.append(_Col(out, c.kind, c.dtype))
        safe = nulls if nulls is not None else [True] * len(on)
        cond = " AND ".join(
            f"l.{SPARK.ident(c)} {'<=>' if n else '='} r.{SPARK.ident(c)}"
            for c, n in zip(on, safe, strict=True)
        )
        join = "JOIN" if how == "inner" else "LEFT JOIN"
        sql = f"SELECT {', '.join(items)} FROM {left.name} AS l {join} {right.name} AS r ON {cond}"
        return self.add(sql, cols, [left, right])

    def visit_public_join(self, node: PublicJoin) -> _Rel:
        child = self.visit(node.child)
        data = self.ex.catalog.public_data(node.public)
        pub = self.source(data)
        nulls = _public_nulls(data, node.on)
        return self.merge(child, pub, node.on, node.how, "_public", nulls)

    def visit_set_op(self, node: SetOp) -> _Rel:
        left = self.visit(node.left)
        right = self.visit(node.right)
        # The frames have the same columns in the same order: line them up by name anyway.
        cols = left.col_list()
        op = {
            "concat": "UNION ALL",
            "union": "UNION",
            "intersect": "INTERSECT",
            "difference": "EXCEPT",
        }[node.kind]
        sql = f"SELECT {cols} FROM {left.name} {op} SELECT {cols} FROM {right.name}"
        rkinds = right.kinds
        out: list[_Col] = []
        for c in left.cols:
            k = rkinds.get(c.name)
            if k == c.kind and c.kind != "other":
                out.append(c)
            elif {k, c.kind} == {"int", "float"}:
                out.append(_Col(c.name, "float"))
            else:  # Spark finds the common type
                rel = self.add(sql, left.cols, [left, right], sure=False)
                fields = self.analysed(rel)
                cols_ = tuple(_Col(f.name, kind_of(f.dataType), f.dataType) for f in fields)
                return _Rel(rel.name, cols_, False)
        return self.add(sql, out, [left, right])


# -- the executor ------------------------------------------------------------------------------
@dataclass
class _Base:
    """Rows of a plan in listed groups, over ``rel``: a query with the columns ``group`` that
    tell a row's group, then one ``__pinq_v<i>`` per value, of kinds ``kinds``.

    ``group`` is ``__pinq_gi``, the group's position, or the key columns themselves, whose
    values ``positions`` maps to positions; no columns for a single group (the query then
    has a column ``__pinq_gi`` of 0s).
    """

    sql: str
    kinds: list[str]
    rel: _Rel
    group: list[str] = field(default_factory=list)
    positions: dict[tuple[Any, ...], list[int]] | None = None

    @property
    def carry(self) -> list[str]:
        """The columns a query over this one keeps to be grouped the same way."""
        return self.group or ["__pinq_gi"]


def _forget_view(views: dict[int, tuple[Any, str]], dead: list[str], key: int, name: str) -> None:
    hit = views.get(key)
    if hit is not None and hit[1] == SPARK.ident(name):
        del views[key]
    dead.append(name)


class SparkExecutor(Executor):
    """Plans run inside Spark; only aggregates come back.

    Sources are Spark DataFrames of ``spark`` or pandas DataFrames (converted once per
    DataFrame object). ``spark`` defaults to :func:`local_session`.
    """

    def __init__(self, spark: SparkSession | None = None) -> None:
        pyspark_sql()
        self.spark = spark if spark is not None else local_session()
        self._prefix = f"__pinq_{uuid.uuid4().hex[:12]}_"
        self._names = itertools.count()
        self._converted: dict[int, tuple[weakref.ref[Any], DataFrame]] = {}
        self._views: dict[int, tuple[weakref.ref[Any], str]] = {}
        self._dead_views: list[str] = []

    # -- engine plumbing ------------------------------------------------------------------
    def _frame(self, data: Any) -> tuple[DataFrame, bool]:
        """A source's Spark DataFrame, and whether it is already in the engine's value model
        (a pandas DataFrame is converted once, by :func:`to_spark`, which makes it so)."""
        if is_spark_dataframe(data):
            return data, False
        if not isinstance(data, pd.DataFrame):
            raise PinqError(
                f"the Spark engine reads Spark and pandas DataFrames, not {type(data).__name__}"
            )
        key = id(data)
        hit = self._converted.get(key)
        if hit is not None and hit[0]() is data:
            return hit[1], True
        df = to_spark(self.spark, data)
        self._converted[key] = (weakref.ref(data), df)
        weakref.finalize(data, self._converted.pop, key, None)
        return df, True

    def _view(self, df: DataFrame, call: _Call) -> str:
        """A temporary view of a source, made once and kept while the DataFrame lives (making
        one costs Spark an analysis)."""
        key = id(df)
        hit = self._views.get(key)
        if hit is not None and hit[0]() is df:
            return hit[1]
        name = f"{self._prefix}{next(self._names)}"
        call.run(lambda: df.createOrReplaceTempView(name))
        self._views[key] = (weakref.ref(df), SPARK.ident(name))
        # Dropped by the next call: a finalizer may run in the middle of a py4j exchange. It
        # holds the shared containers, not this executor (a bound one holds its catalog).
        fin = weakref.finalize(df, _forget_view, self._views, self._dead_views, key, name)
        fin.atexit = False
        return SPARK.ident(name)

    def _drop_dead_views(self) -> None:
        while self._dead_views:
            name = self._dead_views.pop()
            with contextlib.suppress(Exception):
                guard("dropping a view", lambda n=name: self.spark.catalog.dropTempView(n))

    @contextlib.contextmanager
    def _call(self, what: str) -> Iterator[tuple[_Call, _PlanSql]]:
        """One executor call and the query's translator (shared within a batch)."""
        self._drop_dead_views()
        call = _Call(self, what)
        memo = batch_memo()
        p: _PlanSql | None = None
        if memo is not None:
            hit = memo.get(("spark", id(self)))
            if hit is not None and hit[0] is self:
                p = hit[1]
        if p is None:
            p = _PlanSql(self)
            if memo is not None:
                memo[("spark", id(self))] = (self, p)
        p.call = call
        try:
            yield call, p
        finally:
            call.close()

    def _base(
        self,
        call: _Call,
        p: _PlanSql,
        plan: PlanNode,
        grouping: Grouping | None,
        values: Sequence[Expr | PyFunc],
        numeric: bool = True,
    ) -> _Base | None:
        """The plan's rows in listed groups with their values (DOUBLEs when ``numeric``);
        None when no listed key can match."""
        rel = p.visit(plan)
        src, sqls, kinds = rel.name, [], []
        if values:
            src, sqls, kinds, _ = p.values(rel, values, numeric)
        vs = [f"{v} AS __pinq_v{i}" for i, v in enumerate(sqls)]
        vcols = [f"__pinq_v{i}" for i in range(len(vs))]
        if grouping is None:
            return _Base(f"SELECT {', '.join(['0L AS __pinq_gi', *vs])} FROM {src}", kinds, rel)
        cols = list(grouping.columns)
        missing = [c for c in cols if c not in rel.kinds]
        if missing:
            raise PinqSyntaxError(f"unknown column '{missing[0]}'")
        col_kinds = [rel.kinds[c] for c in cols]
        rows = [(i, list(v)) for i, v in column_key_rows(col_kinds, grouping.keys, len(cols) == 1)]
        if not rows:
            return None
        tz = session_tz(self.spark)
        nulls = [any(vals[j] is None for _, vals in rows) for j in range(len(cols))]
        columns = [[vals[j] for _, vals in rows] for j in range(len(cols))]
        if (
            len(rows) <= _INLINE_ROWS
            and all(k in ("int", "float", "str", "bool") for k in col_kinds)
            and (len(cols) == 1 or not any(nulls))
        ):
            # Few keys of plain types: keep the rows whose key is listed (a hash lookup in
            # Spark, and no join) and group by the key itself; each key's position is found
            # here, by the value Spark compared.
            types = [_key_type(col, kind) for col, kind in zip(columns, col_kinds, strict=True)]
            keys = [f"__pinq_k{j}" for j in range(len(cols))]
            items = [
                f"CAST({SPARK.ident(c)} AS {t}) AS {k}"
                for c, t, k in zip(cols, types, keys, strict=True)
            ]
            lits = [
                _key_column(col, kind, tz) for col, kind in zip(columns, col_kinds, strict=True)
            ]
            listed = [i for i, (_, vals) in enumerate(rows) if not any(v is None for v in vals)]
            conds = []
            if listed:
                lhs = keys[0] if len(keys) == 1 else f"({', '.join(keys)})"
                tuples = [
                    lits[0][i] if len(keys) == 1 else f"({', '.join(col[i] for col in lits)})"
                    for i in listed
                ]
                conds.append(f"{lhs} IN ({', '.join(tuples)})")
            if nulls[0] and len(keys) == 1:
                conds.append(f"{keys[0]} IS NULL")
            positions: dict[tuple[Any, ...], list[int]] = {}
            for pos, vals in rows:
                key = tuple(_key_value(v, t) for v, t in zip(vals, types, strict=True))
                positions.setdefault(key, []).append(pos)
            inner = f"SELECT {', '.join(items + vs)} FROM {src}"
            return _Base(
                f"SELECT {', '.join(keys + vcols)} FROM ({inner}) AS r WHERE {' OR '.join(conds)}",
                kinds,
                rel,
                keys,
                positions,
            )
        if len(rows) <= _INLINE_ROWS:
            lits = [[SPARK.int_lit(i) for i, _ in rows]]
            lits += [
                _key_column(col, kind, tz) for col, kind in zip(columns, col_kinds, strict=True)
            ]
            table = _values_table([_GI, *cols], lits)
        else:
            arrays = [arrow_values(pd.Series([i for i, _ in rows], dtype="int64"), "int", tz)]
            for col, kind in zip(columns, col_kinds, strict=True):
                arrays.append(_key_arrow(col, kind, tz))
            table = call.table([_GI, *cols], arrays)
        idents = [SPARK.ident(c) for c in cols]
        inner = f"SELECT {', '.join(idents + vs)} FROM {src}"
        cond = " AND ".join(
            f"r.{c} {'<=>' if n else '='} g.{c}" for c, n in zip(idents, nulls, strict=True)
        )
        items = ", ".join([f"g.{_GI} AS __pinq_gi", *(f"r.{v}" for v in vcols)])
        return _Base(
            f"SELECT /*+ BROADCAST(g) */ {items} FROM ({inner}) AS r JOIN {table} AS g ON {cond}",
            kinds,
            rel,
            ["__pinq_gi"],
        )

    def _per_group(
        self, call: _Call, p: _PlanSql, base: _Base, rows: str, aggs: str, by: str = ""
    ) -> list[tuple[Any, ...]]:
        """``aggs`` per group (and per value of the columns ``by``) over ``rows``, a query over
        ``base``'s columns: one Spark action. Each result row starts with the group's
        position; a single group is not grouped at all (its position is 0)."""
        if not base.group:
            if by:
                text = f"SELECT 0L, {by}, {aggs} FROM ({rows}) AS x GROUP BY {by}"
            else:
                text = f"SELECT 0L, {aggs} FROM ({rows}) AS x"
            return call.collect(p.query(text, base.rel))
        keys = ", ".join([*base.group, by] if by else base.group)
        text = f"SELECT {keys}, {aggs} FROM ({rows}) AS x GROUP BY {keys}"
        found = call.collect(p.query(text, base.rel))
        if base.positions is None:
            return found
        n = len(base.group)
        return [(gi, *r[n:]) for r in found for gi in base.positions.get(tuple(r[:n]), ())]

    def rows(self, plan: PlanNode) -> pd.DataFrame:
        """The plan's rows. For tests of stability only; never reachable from the public API."""
        with self._call("reading rows") as (call, p):
            rel = p.visit(plan)
            kinds = rel.kinds
            columns = list(kinds)
            items = [
                f"CAST({SPARK.ident(c)} AS TIMESTAMP_NTZ) AS {SPARK.ident(c)}"
                if kinds[c] == "datetime"
                else SPARK.ident(c)
                for c in columns
            ]
            rows = call.collect(p.query(f"SELECT {', '.join(items)} FROM {rel.name}", rel))
        return pd.DataFrame(rows, columns=columns)

    # -- the Executor interface -----------------------------------------------------------
    def validate(
        self, plan: PlanNode, value: Expr | PyFunc | None = None, numeric: bool = False
    ) -> None:
        # Callables, unknown columns and types that cannot be aggregated are found by the
        # translation itself, before anything is charged. Where the SQL's validity depends on
        # types pinqpy does not model, Spark analyses the query (it reads no rows).
        with self._call("checking a query") as (call, p):
            rel = p.visit(plan)
            src, vsql, sure = rel.name, SPARK.null("float"), rel.sure
            if value is not None:
                src, sqls, kinds, unsure = p.values(rel, [value], numeric)
                vsql, kind, sure = sqls[0], kinds[0], sure and not unsure
                if numeric and kind == "other":
                    what = (
                        f"column {value.name!r}" if isinstance(value, Column) else "this expression"
                    )
                    raise PinqError(
                        f"the Spark engine cannot aggregate {what} as a number; select or CAST "
                        "a numeric value instead"
                    )
            if not sure:
                call.sql(p.query(f"SELECT {vsql} AS __pinq_v FROM {src}", rel))

    def count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        hit = prefetched("count", plan, grouping)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        counts: np.ndarray = self._aggregates("counting rows", plan, grouping, [("count",)])[0]
        return counts

    def clamped_sum(
        self, plan: PlanNode, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
    ) -> tuple[np.ndarray, np.ndarray]:
        hit = prefetched("sum", plan, grouping, value, lo, hi)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        request = ("clamped_sum", value, lo, hi)
        out: tuple[np.ndarray, np.ndarray] = self._aggregates(
            "summing values", plan, grouping, [request]
        )[0]
        return out

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
        request = ("lattice2" if squares else "lattice", value, lo, hi)
        out: LatticeSums = self._aggregates("summing values", plan, grouping, [request])[0]
        return out

    def read_together(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read]
    ) -> list[Any]:
        """Several counts and clamped sums or moments of one plan in the same groups, by one
        Spark job (a SQL query's ``COUNT(*)`` and ``AVG(x)`` would otherwise scan and join
        twice)."""
        requests = [
            (_REQUESTS[r.kind],) if r.kind == "count" else (_REQUESTS[r.kind], r.value, r.lo, r.hi)
            for r in reads
        ]
        return self._aggregates("computing aggregates", plan, grouping, requests)

    def _aggregates(
        self,
        what: str,
        plan: PlanNode,
        grouping: Grouping | None,
        requests: Sequence[tuple[Any, ...]],
    ) -> list[Any]:
        if not requests:
            return []
        k = 1 if grouping is None else len(grouping.keys)
        values: list[Expr | PyFunc] = []
        for r in requests:
            if r[0] not in ("count", "clamped_sum", "lattice", "lattice2"):
                raise PinqError(f"unknown aggregate {r[0]!r}")
            if r[0] != "count" and not any(r[1] is v for v in values):
                values.append(r[1])
        # Per request: the SQL of its clamped values (None for a count), then its aggregates.
        clamps: list[str] = []
        aggs: list[str] = []
        for r in requests:
            if r[0] == "count":
                aggs.append("COUNT(*)")
                continue
            i = next(j for j, v in enumerate(values) if v is r[1])
            lo_s, hi_s = SPARK.float_lit(float(r[2])), SPARK.float_lit(float(r[3]))
            # NULL values are not counted (and least/greatest would turn them into a bound).
            c = f"__pinq_c{len(clamps)}"
            clamps.append(
                f"CASE WHEN __pinq_v{i} IS NOT NULL THEN "
                f"least(greatest(__pinq_v{i}, {lo_s}), {hi_s}) END AS {c}"
            )
            if r[0] == "clamped_sum":
                # Exactly on the SUM's fixed-point grid (SumGrid): truncated toward zero to
                # multiples of q (CAST to BIGINT truncates; never larger in magnitude, so the
                # sensitivity stays max(|lo|, |hi|)), summed as DECIMAL(38, 0), scaled by q as
                # a double. A float sum of 10**8 doubles can err by the sensitivity itself.
                grid = SumGrid.of(float(r[2]), float(r[3]))
                units = f"CAST(CAST({grid.sql(c, SPARK.float_lit)} AS BIGINT) AS DECIMAL(38, 0))"
                total = f"CAST(sum({units}) AS DOUBLE) * {SPARK.float_lit(grid.step_float)}"
                top = SPARK.float_lit(sys.float_info.max)
                total = f"least(greatest({total}, -{top}), {top})"
                aggs.extend([total, "0.0D", f"COUNT({c})"])
                continue
            # Exact lattice-index sums (pinqpy.core.lattice): d in [0, 2**21] computed in doubles
            # as numpy does (bround is half-to-even), summed as BIGINT (exact below 2**42
            # rows) and d² as DECIMAL(38, 0) (exact below 10**38 / 2**42 rows); never a float.
            lat = Lattice.of(float(r[2]), float(r[3]))
            d = f"CAST({lat.sql(c, SPARK.float_lit, 'bround')} AS BIGINT)"
            squares = f"sum(CAST({d} * {d} AS DECIMAL(38, 0)))" if r[0] == "lattice2" else "0"
            aggs.extend([f"sum({d})", squares, f"COUNT({c})"])
        counts = [np.zeros(k, dtype=np.int64) for _ in requests]
        sums = [np.zeros(k) for _ in requests]
        isums: list[list[int]] = [[0] * k for _ in requests]
        isumsq: list[list[int]] = [[0] * k for _ in requests]
        with self._call(what) as (call, p):
            base = self._base(call, p, plan, grouping, values)
            if base is not None:
                rows_sql = f"SELECT {', '.join([*base.carry, *clamps])} FROM ({base.sql}) AS b"
                rows = self._per_group(call, p, base, rows_sql, ", ".join(aggs))
            else:
                rows = []
        for row in rows:
            gi, at = int(row[0]), 1
            for j, r in enumerate(requests):
                if r[0] == "count":
                    counts[j][gi] = int(row[at])
                    at += 1
                    continue
                s_, s2, n = row[at : at + 3]
                at += 3
                if not n:  # a single group with no values sums to NULL
                    continue
                counts[j][gi] = int(n)
                if r[0] == "clamped_sum":
                    sums[j][gi] = float(s_)
                else:  # Python ints from BIGINT and Decimal: exact
                    isums[j][gi], isumsq[j][gi] = int(s_), int(s2)
        out: list[Any] = []
        for j, r in enumerate(requests):
            if r[0] == "count":
                out.append(counts[j])
            elif r[0] == "clamped_sum":
                out.append((sums[j], counts[j]))
            else:
                out.append((isums[j], isumsq[j], counts[j]))
        return out

    def buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        # +0.0 makes -0.0 equal to 0.0 for the searches below, as numpy's comparisons do.
        cand = np.asarray(candidates, dtype="float64") + 0.0
        m = len(cand)
        k = 1 if grouping is None else len(grouping.keys)
        flat = np.zeros((k, 2 * m - 1), dtype=np.int64)
        with self._call("counting values between quantile candidates") as (call, p):
            base = self._base(call, p, plan, grouping, [value])
            if base is None:
                return flat[:, 0::2], flat[:, 1::2]
            group = ", ".join(base.carry)
            values = f"SELECT {group}, __pinq_v0 + 0.0D AS __pinq_v FROM ({base.sql}) AS b "
            values += "WHERE __pinq_v0 IS NOT NULL"
            grid = uniform_grid(cand)
            if grid is not None:
                # pinqpy's default grids: each value's bucket by arithmetic (see _buckets).
                bucketed = bucket_query(values, group, "__pinq_v", "bk", grid, SPARK.float_lit)
            else:
                bucketed = self._searched(call, values, group, cand)
            rows = self._per_group(call, p, base, bucketed, "COUNT(*)", by="bk")
        for gi, b, n in rows:
            flat[int(gi), int(b)] += int(n)
        return flat[:, 0::2].astype(np.int64), flat[:, 1::2].astype(np.int64)

    def _searched(self, call: _Call, values: str, group: str, cand: np.ndarray) -> str:
        """Buckets of ``values`` by binary search over any sorted candidates: columns
        ``group`` and ``bk``."""
        m = len(cand)
        steps = max(m.bit_length(), 1)
        lo_s, hi_s = SPARK.float_lit(float(cand[0])), SPARK.float_lit(float(cand[-1]))
        if m <= _INLINE_ROWS:
            grid = (
                f"(SELECT array({', '.join(SPARK.float_lit(float(c)) for c in cand)}) AS __pinq_a)"
            )
        else:
            T = spark_types()
            import pyarrow as pa

            grid = call.table(
                ["__pinq_a"],
                [(pa.array([cand.tolist()], pa.list_(pa.float64())), T.ArrayType(T.DoubleType()))],
            )
        # n = #{candidates < c} by binary search over the sorted candidates (numpy's
        # searchsorted(side="left")); c == a[n] goes to eq[n] (bucket 2n), otherwise it
        # lies between a[n-1] and a[n] (bucket 2n - 1).
        step = f"shiftleft(1, {steps - 1} - i)"
        search = (
            f"aggregate(sequence(0, {steps - 1}), 0, (acc, i) -> "
            f"IF(try_element_at(a, acc + {step}) < c, acc + {step}, acc))"
        )
        clamped = (
            f"SELECT {group}, least(greatest(__pinq_v, {lo_s}), {hi_s}) AS c FROM ({values}) AS v"
        )
        searched = (
            f"SELECT /*+ BROADCAST(cb) */ {group}, c, cb.__pinq_a AS a, {search} AS n "
            f"FROM ({clamped}) AS x CROSS JOIN {grid} AS cb"
        )
        return (
            f"SELECT {group}, IF(try_element_at(a, n + 1) = c, 2 * n, 2 * n - 1) AS bk "
            f"FROM ({searched}) AS s"
        )

    def key_counts(
        self, plan: PlanNode, columns: tuple[str, ...]
    ) -> tuple[list[Hashable], np.ndarray]:
        with self._call("counting keys") as (call, p):
            rel = p.visit(plan)
            kinds = rel.kinds
            # Timestamps come back as wall times (collect would use Python's local zone).
            items = [
                f"CAST({SPARK.ident(c)} AS TIMESTAMP_NTZ)"
                if kinds.get(c) == "datetime"
                else SPARK.ident(c)
                for c in columns
            ]
            group = ", ".join(SPARK.ident(c) for c in columns)
            text = f"SELECT {', '.join(items)}, COUNT(*) FROM {rel.name} GROUP BY {group}"
            rows = call.collect(p.query(text, rel))

        def restore(v: Any, c: str) -> Any:
            if v is not None and kinds.get(c) == "datetime":
                return pd.Timestamp(v)
            return v

        keyed = [
            (tuple(restore(v, c) for v, c in zip(r[:-1], columns, strict=True)), r[-1])
            for r in rows
        ]
        keys: list[Hashable] = [kv[0][0] if len(columns) == 1 else kv[0] for kv in keyed]
        # Released as canonical spellings, in an order of the keys alone (NULL last).
        counts = np.array([int(kv[1]) for kv in keyed], dtype=np.int64)
        return canonical_key_counts(keys, counts, [kinds[c] for c in columns])

    def candidate_counts(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: tuple[Hashable, ...],
    ) -> np.ndarray:
        n = len(candidates)
        k = 1 if grouping is None else len(grouping.keys)
        out = np.zeros((k, n), dtype=np.int64)
        with self._call("counting candidates") as (call, p):
            base = self._base(call, p, plan, grouping, [value], numeric=False)
            if base is None or base.kinds[0] in ("null", "other"):
                return out
            kind = base.kinds[0]
            # First position of each candidate value, as Index.get_indexer finds it.
            seen: set[Any] = set()
            uniq: list[tuple[int, Any]] = []
            for j, c in enumerate(candidates):
                ck = value_kind(c)
                if ck is not None and not compatible(kind, ck):
                    continue
                # Equal numbers are one candidate (1 and 1.0), as in a pandas Index.
                family = "num" if ck in ("int", "float") else ck
                marker = (family, c) if ck is not None else (None, None)
                try:
                    if marker in seen:
                        continue
                    seen.add(marker)
                except TypeError:
                    pass
                uniq.append((j, None if ck is None else c))
            if not uniq:
                return out
            tz = session_tz(self.spark)
            if len(uniq) <= _INLINE_ROWS:
                table = _values_table(
                    [_GI, "__pinq_c"],
                    [
                        [SPARK.int_lit(j) for j, _ in uniq],
                        _key_column([c for _, c in uniq], kind, tz),
                    ],
                )
            else:
                table = call.table(
                    [_GI, "__pinq_c"],
                    [
                        arrow_values(pd.Series([j for j, _ in uniq], dtype="int64"), "int", tz),
                        _key_arrow([c for _, c in uniq], kind, tz),
                    ],
                )
            eq = "<=>" if any(c is None for _, c in uniq) else "="
            carry = ", ".join(f"b.{c}" for c in base.carry)
            joined = (
                f"SELECT /*+ BROADCAST(cnd) */ {carry}, cnd.{_GI} AS __pinq_j "
                f"FROM ({base.sql}) AS b JOIN {table} AS cnd ON b.__pinq_v0 {eq} cnd.__pinq_c"
            )
            rows = self._per_group(call, p, base, joined, "COUNT(*)", by="__pinq_j")
        for gi, j, c in rows:
            out[int(gi), int(j)] = int(c)
        return out
