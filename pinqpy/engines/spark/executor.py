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
    numeric_value,
    typed,
)
from pinqpy.engines.sqlgen.plans import (
    Col,
    CtePlanSql,
    check_case_distinct,
    compatible,
    key_literal,
    value_kind,
)
from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import Column, Expr
from pinqpy.plan.batch import batch_memo
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import (
    PlanNode,
    PyFunc,
    Source,
)
from pinqpy.plan.truncation import truncated_count

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
# A clamped sum's grid units are summed in two BIGINT parts split at this bit (see
# _request_sql).
_SUM_SPLIT = 20

_REQUESTS = {"count": "count", "sum": "clamped_sum", "mean": "lattice", "moments": "lattice2"}


@dataclass(frozen=True)
class _Rel:
    """A translated plan node: the name to read it by (a common table expression or a source
    view) and its columns. ``sure`` is false when only Spark can tell whether its SQL is
    valid (values of types pinqpy does not model, such as maps in a DISTINCT)."""

    name: str
    cols: tuple[Col, ...]
    sure: bool = True

    @property
    def kinds(self) -> dict[str, str]:
        return {c.name: c.kind for c in self.cols}


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

    d = SPARK

    def __init__(self, ex: SparkExecutor) -> None:
        super().__init__()
        self.ex = ex
        self.call = _Call(ex, "translating a query")
        self._values: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}
        self._typed: dict[str, _Rel] = {}

    # -- bookkeeping ----------------------------------------------------------------------
    def add(
        self, sql: str, cols: Sequence[Col | None], reads: Sequence[_Rel], sure: bool = True
    ) -> _Rel:
        if any(c is None for c in cols):
            # Spark finds the common type (of a set operation's columns).
            rel = self.add(sql, (), reads, sure=False)
            found = tuple(Col(f.name, kind_of(f.dataType), f.dataType) for f in self.analysed(rel))
            return _Rel(rel.name, found, False)
        name = self.cte(sql, reads)
        sure = sure and all(r.sure for r in reads) and all(c.kind != "other" for c in cols)  # type: ignore[union-attr]
        return _Rel(name, tuple(cols), sure)  # type: ignore[arg-type]

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
            cols = tuple(Col(f.name, kind_of(f.dataType), f.dataType) for f in fields)
            hit = self._typed[rel.name] = _Rel(rel.name, cols, rel.sure)
        return hit

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
                Col(f.name, kind_of(normalized_type(f.dataType)), normalized_type(f.dataType))
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
            return _Rel(view, tuple(Col(f.name, kind_of(f.dataType), f.dataType) for f in fields))
        cols = []
        for f in fields:
            dt = normalized_type(f.dataType)
            cols.append(Col(f.name, kind_of(dt), dt))
        rel = _Rel(view, ())
        return self.add(f"SELECT {', '.join(items) or '*'} FROM {view}", cols, [rel])

    def name(self, rel: _Rel) -> str:
        return rel.name

    def columns(self, rel: _Rel) -> list[Col]:
        return list(rel.cols)

    def key_literal(self, v: object, kind: str) -> str:
        return _key_literal(v, kind, session_tz(self.ex.spark))

    def public(self, data: Any) -> _Rel:
        return self.source(data)

    def explode_items(self, col: Col, max_items: int) -> tuple[str, Col | None] | None:
        if col.kind != "other" or type(col.dtype).__name__ != "ArrayType":
            return None
        # Items in the engine's value model (so NaN is NULL), NULL items dropped, then cut.
        q = SPARK.ident(col.name)
        elem = col.dtype.elementType
        item = normalized("__pinq_x", elem)
        items = (
            f"slice(filter(transform({q}, __pinq_x -> {item}), __pinq_x -> __pinq_x IS NOT NULL)"
            f", 1, {max(int(max_items), 0)})"
        )
        out_type = normalized_type(elem)
        return f"explode({items})", Col(col.name, kind_of(out_type), out_type)

    def set_column(self, a: Col, b: Col) -> Col | None:
        if a.kind == b.kind and a.kind != "other":
            return a
        if {a.kind, b.kind} == {"int", "float"}:
            return Col(a.name, "float")
        return None  # Spark finds the common type

    # -- nodes ----------------------------------------------------------------------------
    def visit_source(self, node: Source) -> _Rel:
        return self.source(self.ex.catalog.data(node.table))


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
        check_case_distinct(plan, "Spark")
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
                    what = f"column {value.name!r}" if isinstance(value, Column) else value.to_sql()
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
        tc = truncated_count(plan) if grouping is None else None
        if tc is not None:
            # Without choosing rows: the same released distribution (see
            # pinqpy.plan.truncation and CtePlanSql.truncated_count).
            with self._call("counting rows") as (call, p):
                n = call.collect(p.truncated_count(tc))[0][0]
            return np.array([int(n)], dtype=np.int64)
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
        # Per request: the SQL of its grid units (none for a count), then its aggregates.
        units: list[str] = [f"__pinq_v{i}" for i in range(len(values))]
        aggs: list[str] = []
        for j, r in enumerate(requests):
            i = -1 if r[0] == "count" else next(n for n, v in enumerate(values) if v is r[1])
            unit, more = _request_sql(r, f"__pinq_v{i}", f"__pinq_u{j}")
            units += [unit] if unit else []
            aggs += more
        with self._call(what) as (call, p):
            base = self._base(call, p, plan, grouping, values)
            if base is not None:
                rows_sql = f"SELECT {', '.join([*base.carry, *units])} FROM ({base.sql}) AS b"
                rows = self._per_group(call, p, base, rows_sql, ", ".join(aggs))
            else:
                rows = []
        return _request_results(requests, rows, k)

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


# -- the exact sums of one Spark job ---------------------------------------------------------
# The grid units of pinqpy.core.lattice, computed in doubles exactly as numpy computes them
# (rint is Java's Math.rint, half to even on doubles as np.rint is, without bround's decimal
# arithmetic) and summed as BIGINT in parts no sum can overflow below 2**42 rows: never a
# float sum, never a DECIMAL one (several times slower). Each unit is one CAST of one
# expression of the value: no CASE, no second clamp. A NULL value is clamped to ``lo`` (Spark's
# greatest and least skip NULLs), whose lattice unit is 0, so it adds nothing and only the
# count (``COUNT(v)``, the non-NULL values) leaves it out; its SUM unit ``k(lo)`` is taken back
# out in Python, ``(COUNT(*) - COUNT(v))·k(lo)``.
_SQUARE_SPLIT = 21  # d² < 2**43 is summed as d² >> 21 (< 2**22) and d² & (2**21 - 1)


def _request_sql(r: tuple[Any, ...], v: str, unit: str) -> tuple[str, list[str]]:
    """The projection of request ``r``'s grid unit (``""`` for a count) of the value column
    ``v``, named ``unit``, and its aggregates."""
    if r[0] == "count":
        return "", ["COUNT(*)"]
    lo, hi = float(r[2]), float(r[3])
    clamped = f"least(greatest({v}, {SPARK.float_lit(lo)}), {SPARK.float_lit(hi)})"
    if r[0] == "clamped_sum":
        # SumGrid: truncated toward zero to multiples of q (CAST to BIGINT truncates; never
        # larger in magnitude, so the sensitivity stays max(|lo|, |hi|)), |k| < 2**41, split
        # as k = hi·2**20 + lo (an arithmetic shift and a mask, exact in two's complement),
        # |hi| < 2**21 and 0 <= lo < 2**20.
        k = f"CAST({SumGrid.of(lo, hi).sql(clamped, SPARK.float_lit)} AS BIGINT) AS {unit}"
        mask = (1 << _SUM_SPLIT) - 1
        sums = [f"sum(shiftright({unit}, {_SUM_SPLIT}))", f"sum({unit} & {mask})"]
        return k, [*sums, f"COUNT({v})", "COUNT(*)"]
    # The lattice: d = R(x·2**-shift) - B, in [0, K] for x in [lo, hi] (K <= 2**21; the
    # lattice's last clamp into [0, K] is the identity there, see pinqpy.core.grid_sums).
    lat = Lattice.of(lo, hi)
    t = clamped
    for f in lat.factors:
        t = f"({t}) * {SPARK.float_lit(f)}"
    d = f"CAST(rint({t}) - {SPARK.float_lit(lat.base)} AS BIGINT) AS {unit}"
    if r[0] == "lattice":
        return d, [f"sum({unit})", f"COUNT({v})"]
    sq = f"({unit} * {unit})"
    mask = (1 << _SQUARE_SPLIT) - 1
    squares = [f"sum(shiftright({sq}, {_SQUARE_SPLIT}))", f"sum({sq} & {mask})"]
    return d, [f"sum({unit})", *squares, f"COUNT({v})"]


def _request_results(
    requests: Sequence[tuple[Any, ...]], rows: Sequence[tuple[Any, ...]], k: int
) -> list[Any]:
    """Each request's result (as its read method returns it) from the rows of
    :func:`_request_sql`'s aggregates: a group's position, then each request's columns."""
    counts = [np.zeros(k, dtype=np.int64) for _ in requests]
    sums = [np.zeros(k) for _ in requests]
    isums: list[list[int]] = [[0] * k for _ in requests]
    isumsq: list[list[int]] = [[0] * k for _ in requests]
    width = {"count": 1, "clamped_sum": 4, "lattice": 2, "lattice2": 4}
    for row in rows:
        gi, at = int(row[0]), 1
        for j, r in enumerate(requests):
            got = row[at : at + width[r[0]]]
            at += width[r[0]]
            if r[0] == "count":
                counts[j][gi] = int(got[0])
                continue
            n = got[-2] if r[0] == "clamped_sum" else got[-1]
            if not n:  # no value in this group: nothing to add (a single group's sum is NULL)
                continue
            counts[j][gi] = int(n)
            if r[0] == "clamped_sum":
                grid = SumGrid.of(float(r[2]), float(r[3]))
                nulls = int(got[3]) - int(n)  # each summed as k(lo): taken back out
                at_lo = int(grid.indices(np.array([float(r[2])]))[0])
                total = (int(got[0]) << _SUM_SPLIT) + int(got[1]) - nulls * at_lo
                sums[j][gi] = grid.total(total)
            elif r[0] == "lattice":
                isums[j][gi] = int(got[0])
            else:
                isums[j][gi] = int(got[0])
                isumsq[j][gi] = (int(got[1]) << _SQUARE_SPLIT) + int(got[2])
    out: list[Any] = []
    for j, r in enumerate(requests):
        if r[0] == "count":
            out.append(counts[j])
        elif r[0] == "clamped_sum":
            out.append((sums[j], counts[j]))
        else:
            out.append((isums[j], isumsq[j], counts[j]))
    return out
