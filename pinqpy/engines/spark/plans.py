"""Plans as Spark SQL: one common table expression per plan node over a temporary view per
source, each node's columns and their kinds worked out in Python (as Spark would), so that a
query costs Spark one analysis, when it runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pinqpy.engines.base import Executor
from pinqpy.engines.sources import SparkFile
from pinqpy.engines.spark.call import Call
from pinqpy.engines.spark.dialect import SPARK
from pinqpy.engines.spark.keys import spark_key_literal
from pinqpy.engines.spark.types import kind_of, normalized, normalized_type, session_tz
from pinqpy.engines.spark.views import SourceViews
from pinqpy.engines.sqlgen.expressions import numeric_value, typed
from pinqpy.engines.sqlgen.plans import Col, CtePlanSql
from pinqpy.expr.ast import Expr
from pinqpy.plan.nodes import PyFunc, Source

__all__ = ["PlanSql", "Rel"]


@dataclass(frozen=True)
class Rel:
    """A translated plan node: the name to read it by (a common table expression or a source
    view) and its columns. ``sure`` is false when only Spark can tell whether its SQL is
    valid (values of types pinqpy does not model, such as maps in a DISTINCT)."""

    name: str
    cols: tuple[Col, ...]
    sure: bool = True

    @property
    def kinds(self) -> dict[str, str]:
        return {c.name: c.kind for c in self.cols}


class PlanSql(CtePlanSql[Rel]):
    """Turns plans into SQL: one common table expression per node, whose columns and their
    kinds are worked out here (as Spark would), so that a query costs Spark one analysis,
    when it runs, instead of one per node. A node shared by several parents (``f.concat(f)``)
    is one expression.

    One translator serves all the calls of one query (:func:`~pinqpy.plan.batch.batch_memo`):
    the check before the charge and every aggregate share the translation, and so the
    truncation salts.
    """

    d = SPARK

    def __init__(self, ex: Executor, views: SourceViews) -> None:
        super().__init__()
        self.ex = ex  # its catalog holds the data the plan names
        self.views = views
        self.call = Call(views.spark, "translating a query", views.new_name)
        self._values: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}
        self._typed: dict[str, Rel] = {}

    # -- bookkeeping ----------------------------------------------------------------------
    def add(
        self, sql: str, cols: Sequence[Col | None], reads: Sequence[Rel], sure: bool = True
    ) -> Rel:
        if any(c is None for c in cols):
            # Spark finds the common type (of a set operation's columns).
            rel = self.add(sql, (), reads, sure=False)
            found = tuple(Col(f.name, kind_of(f.dataType), f.dataType) for f in self.analysed(rel))
            return Rel(rel.name, found, False)
        name = self.cte(sql, reads)
        sure = sure and all(r.sure for r in reads) and all(c.kind != "other" for c in cols)  # type: ignore[union-attr]
        return Rel(name, tuple(cols), sure)  # type: ignore[arg-type]

    def analysed(self, rel: Rel) -> list[Any]:
        """Spark's own fields of ``rel`` (one analysis), for what pinqpy does not model."""
        df = self.call.sql(self.query(f"SELECT * FROM {rel.name}", rel))
        return list(self.call.run(lambda: df.schema).fields)

    def typed(self, rel: Rel) -> Rel:
        """``rel`` with the Spark type of every column known."""
        if all(c.kind != "other" or c.dtype is not None for c in rel.cols):
            return rel
        hit = self._typed.get(rel.name)
        if hit is None:
            fields = self.analysed(rel)
            cols = tuple(Col(f.name, kind_of(f.dataType), f.dataType) for f in fields)
            hit = self._typed[rel.name] = Rel(rel.name, cols, rel.sure)
        return hit

    def values(
        self, rel: Rel, values: Sequence[Expr | PyFunc], numeric: bool, ints: bool = False
    ) -> tuple[str, list[str], list[str], bool]:
        """Aggregated values over ``rel``: (FROM item with their lets, their SQL, their kinds,
        whether only Spark can vouch for them). Translated once per query. With ``numeric``,
        values are DOUBLEs, except, with ``ints``, values of kind int, which stay BIGINT."""
        key = (rel.name, tuple(id(v) for v in values), numeric, ints)
        hit = self._values.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], values, strict=True)):
            return hit[1]
        t, lets = self.translator(rel)
        vs = [self.expr(v, t, "an aggregation") for v in values]
        sqls = [
            typed(SPARK, v)
            if not numeric or (ints and v.kind == "int")
            else numeric_value(SPARK, v)
            for v in vs
        ]
        kinds = [v.kind for v in vs]
        out = (lets.source(rel.name, sqls), sqls, kinds, t.unchecked or "other" in kinds)
        self._values[key] = (tuple(values), out)
        return out

    def source(self, data: Any) -> Rel:
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
        df, clean = self.views.frame(data)
        view = self.views.view(df, self.call)
        fields = self.call.run(lambda: df.schema).fields
        items = [
            f"{normalized(SPARK.ident(f.name), f.dataType)} AS {SPARK.ident(f.name)}"
            for f in fields
        ]
        if clean or all(normalized("", f.dataType) == "" for f in fields):
            # Already in the value model (bigint, double without NaN, ...): read the view.
            return Rel(view, tuple(Col(f.name, kind_of(f.dataType), f.dataType) for f in fields))
        cols = []
        for f in fields:
            dt = normalized_type(f.dataType)
            cols.append(Col(f.name, kind_of(dt), dt))
        rel = Rel(view, ())
        return self.add(f"SELECT {', '.join(items) or '*'} FROM {view}", cols, [rel])

    def name(self, rel: Rel) -> str:
        return rel.name

    def columns(self, rel: Rel) -> list[Col]:
        return list(rel.cols)

    def key_literal(self, v: object, kind: str) -> str:
        return spark_key_literal(v, kind, session_tz(self.views.spark))

    def public(self, data: Any) -> Rel:
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
    def visit_source(self, node: Source) -> Rel:
        return self.source(self.ex.catalog.data(node.table))
