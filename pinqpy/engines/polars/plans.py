"""Plans as Polars lazy queries: each plan node becomes one step of a LazyFrame (:class:`Rel`),
with pinqpy's semantics where Polars' own differ.

- NULL keys: a NULL key is one key (grouping, joins with ``nulls_equal``, set operations), and
  grouping by exactly the privacy unit drops rows whose unit is NULL, as on every engine.
- Values are in the engine's value model (:mod:`.types`): NaN never reaches a node, and
  ``-0.0`` groups, joins and hashes with ``0.0``.
- Columns of one name but different types on the two sides of a join or set operation are
  brought to one type first (numbers as Float64, timestamps in microseconds).
- Truncations keep the rows of lowest salted priority (:mod:`.priorities`).

Nothing here reads data: a translation builds the query, and its schema (``collect_schema``)
shows before anything is charged whatever Polars would refuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import polars as pl

from pinqpy.engines.base import NO_MATCH, column_key
from pinqpy.engines.polars.expressions import (
    CATEGORICAL,
    Cols,
    PolarsExpr,
    V,
    no_callable,
    numeric_value,
    typed,
)
from pinqpy.engines.polars.priorities import group_rank, row_priority
from pinqpy.engines.polars.source import from_pandas
from pinqpy.engines.polars.types import is_categorical, kind_of_dtype, normalize
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Call, Expr
from pinqpy.plan import salts
from pinqpy.plan.facts import on_unit
from pinqpy.plan.nodes import (
    BoundContributions,
    BoundDegree,
    BoundGroups,
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

__all__ = ["PlanPolars", "Rel", "key_literal", "normalized"]


@dataclass
class Rel:
    """A translated plan node: its LazyFrame, and the schema Polars resolves for it (read
    once, reading no data)."""

    lf: pl.LazyFrame
    _schema: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def schema(self) -> dict[str, Any]:
        if self._schema is None:
            try:
                self._schema = dict(self.lf.collect_schema())
            except PinqError:
                raise
            except Exception as exc:  # a type Polars refuses; its message may quote a literal
                raise PinqError(
                    f"the Polars engine cannot run this query ({type(exc).__name__}): the "
                    "columns' types do not combine"
                ) from None
        return self._schema

    def resolve(self) -> None:
        """Resolve the schema now: a query Polars would refuse is refused here."""
        _ = self.schema

    @property
    def columns(self) -> list[str]:
        return list(self.schema)

    def cols(self) -> Cols:
        return {c: _col_kind(t) for c, t in self.schema.items()}


def _col_kind(dtype: Any) -> tuple[str, str | None]:
    kind = kind_of_dtype(dtype)
    if is_categorical(dtype):
        return kind, CATEGORICAL
    return kind, (dtype.time_unit if isinstance(dtype, pl.Datetime) else None)


def _text(rel: Rel) -> set[str]:
    """The categorical columns of ``rel``."""
    return {c for c, t in rel.schema.items() if is_categorical(t)}


def normalized(lf: pl.LazyFrame, columns: Sequence[tuple[str, Any]]) -> pl.LazyFrame:
    """``lf``, whose columns have these types, in the engine's value model."""
    casts = []
    for c, dtype in columns:
        x = normalize(pl.col(c), dtype)
        if x is not None:
            casts.append(x.alias(c))
    return lf.with_columns(casts) if casts else lf


def key_literal(v: object, kind: str, unit: str | None) -> V | None:
    """A canonical public key (:func:`~pinqpy.engines.base.column_key`) as a value of a
    column of ``kind``, None for a key no value of the column can equal."""
    if kind == "datetime":
        ts = pd.Timestamp(v)  # type: ignore[arg-type]
        if ts.tzinfo is not None:  # columns hold naive UTC times
            ts = ts.tz_convert("UTC").tz_localize(None)
        if not ts.nanosecond:
            return V(pl.lit(ts.to_pydatetime(), dtype=pl.Datetime("us")), kind, "us")
        if unit == "us":
            return None  # finer than the column: it equals no value
        return V(pl.lit(ts.value, dtype=pl.Int64).cast(pl.Datetime("ns")), kind, "ns")
    t = PolarsExpr({})
    lit = t.literal(v)
    return t.to_kind(lit, kind) if kind in ("int", "float", "bool", "str") else lit


def key_match(t: PolarsExpr, col: V, key: object) -> pl.Expr:
    """True exactly where the column equals a public key under the column's type (a
    NULL-like key matches NULL)."""
    v = column_key(key, col.kind)
    if v is None:
        return col.expr.is_null()
    lit = None if v is NO_MATCH else key_literal(v, col.kind, col.unit)
    if lit is None:
        return pl.lit(False)
    return t.compare("=", col, lit).expr.fill_null(False)


# -- group aggregates of groupby().agg() --------------------------------------------------------
def _aggregate(t: PolarsExpr, call: Call) -> pl.Expr:
    """An aggregate of ``groupby().agg()`` as pandas computes it: COUNT as Int64, the others
    as Float64 over the numeric view of the values (a SUM of no values is 0; NaN, from
    infinities, is NULL)."""
    func = call.name.upper()
    if call.star:
        return pl.len().cast(pl.Int64)
    arg = t.tr(call.args[0])
    if func == "COUNT":
        x = typed(arg)
        return (x.drop_nulls().n_unique() if call.distinct else x.count()).cast(pl.Int64)
    x = numeric_value(arg)
    if func == "SUM":
        out = x.sum()
    elif func == "AVG":
        out = x.mean()
    elif func == "MIN":
        out = x.min()
    elif func == "MAX":
        out = x.max()
    elif func == "MEDIAN":
        out = x.median()
    elif func == "VARIANCE":
        out = x.var(ddof=1)
    elif func == "STDDEV":
        out = x.std(ddof=1)
    else:
        raise PinqError(f"{func} cannot be used inside groupby().agg()")
    return out.cast(pl.Float64).fill_nan(None)


# -- columns of two relations, made one type ---------------------------------------------------
def _common(a: Any, b: Any) -> Any | None:
    """The type both sides' columns become, or None to leave them (equal types, or types
    Polars combines or refuses itself)."""
    if a == b:
        return None
    if is_categorical(a) or is_categorical(b):
        return pl.String()  # categories of two columns compare by their text
    ka, kb = kind_of_dtype(a), kind_of_dtype(b)
    if ka in ("int", "float", "bool") and kb in ("int", "float", "bool"):
        return pl.Float64()
    if ka == kb == "datetime":
        return pl.Datetime("us")
    if ka == "null":
        return b
    if kb == "null":
        return a
    return None


def _aligned(left: Rel, right: Rel, columns: Sequence[str]) -> tuple[Rel, Rel]:
    """Both relations with ``columns`` of one type each."""
    lcasts, rcasts = [], []
    for c in columns:
        target = _common(left.schema[c], right.schema[c])
        if target is None:
            continue
        if left.schema[c] != target:
            lcasts.append(pl.col(c).cast(target).alias(c))
        if right.schema[c] != target:
            rcasts.append(pl.col(c).cast(target).alias(c))
    if lcasts:
        left = Rel(left.lf.with_columns(lcasts))
    if rcasts:
        right = Rel(right.lf.with_columns(rcasts))
    return left, right


def _kept(lf: pl.LazyFrame, child: Rel, keys: Sequence[str], limit: int) -> pl.LazyFrame:
    """The ``limit`` rows of lowest :func:`~.priorities.row_priority` per key of ``keys``
    (``lf``: rows of ``child``). The priority is a working column of its own, computed row
    by row (streaming) before the rank: the rank's window then holds only the keys, the
    priority and the columns read later, not every column the priority hashes."""
    lf = lf.with_columns(row_priority(child.columns, _text(child)).alias("__pinq_p"))
    rank = pl.col("__pinq_p").rank("ordinal").over(list(keys))
    return lf.filter(rank <= int(limit)).drop("__pinq_p")


def _filtered(child: Rel, t: PolarsExpr, pred: pl.Expr) -> Rel:
    """The rows of ``child`` where ``pred`` (translated by ``t``) is true."""
    if not t.lets:
        return Rel(child.lf.filter(pred), child.schema)
    return Rel(t.apply(child.lf).filter(pred).select(child.columns), child.schema)


class PlanPolars(PlanVisitor[Rel]):
    """Turns a plan into LazyFrames; a node shared by several parents (``f.concat(f)``) is
    translated once per salt scope, so both read the same truncation. Tables come from
    ``catalog``.

    A truncation's salts are drawn when it is translated, inside
    :func:`pinqpy.plan.salts.drawing`: fresh outside a partition, the partition's own keyed
    stream for the node under one, so every read through a partition's parts keeps the same
    rows (a priority is a function of the row and the salt: :mod:`.priorities`). A node
    translated in two scopes is two queries."""

    def __init__(self, catalog: Any) -> None:
        self.catalog = catalog
        self._memo: dict[tuple[str | None, int], tuple[PlanNode, Rel]] = {}
        self._public: dict[int, tuple[Any, pl.LazyFrame]] = {}

    def visit(self, node: PlanNode) -> Rel:
        slot = (salts.scope_token(), id(node))
        hit = self._memo.get(slot)
        if hit is not None and hit[0] is node:
            return hit[1]
        with salts.drawing(node, self.catalog):
            rel = node.accept(self)
        self._memo[slot] = (node, rel)
        return rel

    def translator(self, rel: Rel) -> PolarsExpr:
        return PolarsExpr(rel.cols())

    def value(self, rel: Rel, e: Expr | PyFunc, what: str) -> tuple[V, Rel]:
        """``e`` over ``rel``, and ``rel`` with the working columns it reads."""
        no_callable(e, what)
        assert isinstance(e, Expr)
        t = self.translator(rel)
        v = t.tr(e)
        return v, (Rel(t.apply(rel.lf)) if t.lets else rel)

    # -- nodes ----------------------------------------------------------------------------
    def visit_source(self, node: Source) -> Rel:
        data = self.catalog.data(node.table)
        frame = getattr(data, "frame", None)
        if not isinstance(frame, pl.LazyFrame):
            raise PinqError(f"the Polars engine reads Polars frames, not {type(data).__name__}")
        return Rel(normalized(frame, data.columns))

    def visit_part_source(self, node: PartSource) -> Rel:
        parent = self.visit(node.partition.parent)
        t = self.translator(parent)
        key = node.key if len(node.partition.key_columns) > 1 else (node.key,)
        conds = [
            key_match(t, t.column_for(c), k)
            for c, k in zip(node.partition.key_columns, key, strict=True)  # type: ignore[arg-type]
        ]
        return _filtered(parent, t, pl.all_horizontal(conds))

    def visit_where(self, node: Where) -> Rel:
        child = self.visit(node.child)
        t = self.translator(child)
        no_callable(node.predicate, "where")
        pred = t.boolean(t.tr(node.predicate)).expr  # type: ignore[arg-type]
        return _filtered(child, t, pred)

    def visit_select(self, node: Select) -> Rel:
        child = self.visit(node.child)
        t = self.translator(child)
        exprs = []
        for n, e in node.outputs:
            no_callable(e, "select")
            exprs.append(typed(t.tr(e)).alias(n))  # type: ignore[arg-type]
        lf = t.apply(child.lf)
        if node.keep_all:
            # pandas assign replaces an existing column in place and appends new ones.
            names = child.columns + [n for n, _ in node.outputs if n not in child.schema]
        else:
            if not exprs:  # no columns, but still one row per row
                exprs = [pl.lit(1, dtype=pl.Int64).alias("__pinq_empty")]
            names = [e.meta.output_name() for e in exprs]
        # with_columns, not select: a constant output still has one value per row.
        return Rel(lf.with_columns(exprs).select(names))

    def visit_distinct(self, node: Distinct) -> Rel:
        child = self.visit(node.child)
        lf = child.lf.select(list(node.columns))
        if on_unit(node.child, node.columns):  # the unit's ids: a NULL id is no one's
            lf = lf.filter(pl.col(node.columns[0]).is_not_null())
        return Rel(lf.unique())

    def visit_explode(self, node: Explode) -> Rel:
        child = self.visit(node.child)
        c = node.column
        dtype = child.schema[c]
        if isinstance(dtype, pl.Array):
            dtype = pl.List(dtype.inner)
            child = Rel(child.lf.with_columns(pl.col(c).arr.to_list()))
        if not isinstance(dtype, pl.List):
            # A scalar explodes to itself; NULL carries nothing.
            return Rel(child.lf.filter(pl.col(c).is_not_null()), child.schema)
        item = pl.element().is_not_null()
        if isinstance(dtype.inner, pl.Float16 | pl.Float32 | pl.Float64):
            item = item & pl.element().is_not_nan()  # NaN is NULL
        # The first max_items non-NULL items of each list, one row each (an empty list
        # explodes to a NULL row, which carries nothing either).
        items = pl.col(c).list.eval(pl.element().filter(item)).list.head(node.max_items)
        lf = child.lf.with_columns(items).explode(c).filter(pl.col(c).is_not_null())
        return Rel(normalized(lf, [(c, dtype.inner)]))

    def visit_group_by(self, node: GroupBy) -> Rel:
        child = self.visit(node.child)
        keys = list(node.keys)
        lf = child.lf
        if node.by_unit:  # a row whose unit is NULL belongs to no known person
            lf = lf.filter(pl.all_horizontal([pl.col(k).is_not_null() for k in keys]))
        t = self.translator(child)
        aggs = [_aggregate(t, call).alias(name) for name, call in node.aggs]
        return Rel(t.apply(lf).group_by(keys).agg(aggs))

    def truncate(self, child: Rel, keys: Sequence[str], limit: int, drop_null: bool) -> Rel:
        """The ``limit`` rows of lowest salted priority per key of ``keys`` (with
        ``drop_null``, rows whose key is NULL are dropped first)."""
        lf = child.lf
        if drop_null:
            lf = lf.filter(pl.all_horizontal([pl.col(k).is_not_null() for k in keys]))
        return Rel(_kept(lf, child, keys, limit), child.schema)

    def merge(
        self, left: Rel, right: Rel, on: Sequence[str], how: str, suffix: str
    ) -> Rel:
        """Join on ``on``, NULL matching NULL as in pandas."""
        left, right = _aligned(left, right, on)
        lf = left.lf.join(right.lf, on=list(on), how=how, nulls_equal=True, suffix=suffix)  # type: ignore[arg-type]
        return Rel(lf)

    def visit_join(self, node: Join) -> Rel:
        left = self.visit(node.left)
        right = self.visit(node.right)
        if node.bounds is not None:
            left = self.truncate(left, node.on, node.bounds[0], drop_null=False)
            right = self.truncate(right, node.on, node.bounds[1], drop_null=False)
        return self.merge(left, right, node.on, "inner", "_right")

    def public(self, data: pd.DataFrame) -> Rel:
        """A public table (pinqpy's snapshot) as Polars, converted once per translation."""
        hit = self._public.get(id(data))
        if hit is None or hit[0] is not data:
            df = from_pandas(data)
            hit = (data, normalized(df.lazy(), list(df.schema.items())))
            self._public[id(data)] = hit
        return Rel(hit[1])

    def visit_public_join(self, node: PublicJoin) -> Rel:
        child = self.visit(node.child)
        public = self.public(self.catalog.public_data(node.public))
        return self.merge(child, public, node.on, node.how, "_public")

    def visit_set_op(self, node: SetOp) -> Rel:
        left = self.visit(node.left)
        right = self.visit(node.right)
        cols = left.columns
        left, right = _aligned(left, right, cols)
        # The frames have the same columns in the same order: line them up by name anyway.
        rlf = right.lf.select(cols)
        if node.kind in ("concat", "union"):
            both = pl.concat([left.lf, rlf], how="vertical_relaxed")
            return Rel(both if node.kind == "concat" else both.unique())
        how = "semi" if node.kind == "intersect" else "anti"
        return Rel(left.lf.unique().join(rlf, on=cols, how=how, nulls_equal=True))

    def visit_bound_contributions(self, node: BoundContributions) -> Rel:
        # A row whose unit is NULL belongs to no known person: it is dropped.
        return self.truncate(self.visit(node.child), (node.unit,), node.max_rows, drop_null=True)

    def visit_bound_groups(self, node: BoundGroups) -> Rel:
        """Per unit, the ``max_groups`` groups of lowest salted hash of ``(unit, by)``, then
        the ``max_rows_per_group`` rows of lowest row priority of each (:mod:`.priorities`).
        Rows whose unit is NULL are dropped; a NULL ``by`` value is one group."""
        child = self.visit(node.child)
        lf = child.lf.filter(pl.col(node.unit).is_not_null())
        keep = group_rank(node.unit, node.by, _text(child)) <= int(node.max_groups)
        lf = lf.filter(keep)
        if node.max_rows_per_group is not None:
            lf = _kept(lf, child, (node.unit, *node.by), node.max_rows_per_group)
        return Rel(lf, child.schema)

    def visit_bound_degree(self, node: BoundDegree) -> Rel:
        # A NULL key is one key, as in a bounded join's truncation; but a cap on exactly the
        # unit drops the rows of no known person, as bound_contributions does.
        drop = on_unit(node.child, node.columns)
        return self.truncate(self.visit(node.child), node.columns, node.max_rows, drop_null=drop)
