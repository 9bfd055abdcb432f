"""The public facts of a plan, derived from the plan alone: the one place they are decided.

Every frame's facts (:class:`~pinqpy.plan.meta.FrameMeta`: schema, column identities, bounds,
keys, privacy unit, uniqueness) are computed by :class:`FactsVisitor` from its plan node;
no API method or SQL clause assembles them by hand. Since the visitor is a
:class:`~pinqpy.plan.nodes.PlanVisitor`, a plan node without a facts rule cannot exist, and the
stability rules read the same facts (:func:`facts_of`) instead of trusting what a node says.

The rules, each keeping a fact only where the transformation provably preserves it:

- a column that passes through unchanged (any name) keeps its identity and so its bounds,
  keys, unit and uniqueness; a computed, exploded or aggregated column gets a new identity;
- the privacy unit survives only while every row's unit column still names the unit of
  one budget that owns the row: through where, select/assign of the unchanged column,
  distinct, grouping by it, a public join, a private join *on* it with a side of the same
  unit domain, and set operations whose two sides carry the same unit domain in the same
  column;
- bound_groups keeps the unit (its choice is per unit); bound_degree keeps it only when the
  unit column is one of its key columns;
- a public row count (``public_size``) holds only for the declaring table's own rows: it
  survives select/assign/rename of columns (one output row per input row) and nothing else
  (where, distinct, explode, groupby, joins, set operations, partition parts and the
  bound_* steps all change or may change the number of rows);
- uniqueness comes only from distinct, groupby keys, set semantics and a join of two unique
  sides, and is dropped as soon as one of its columns is gone.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Mapping

from pinqpy.errors import PinqError
from pinqpy.expr.ast import Column
from pinqpy.expr.bounds import derive_bounds
from pinqpy.expr.check import check_expression
from pinqpy.expr.types import ColumnType
from pinqpy.plan.meta import ColumnId, FrameMeta, PublicSize, UnitDomain, check_column_name
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
    TableRef,
    Where,
)

__all__ = ["FactsVisitor", "declare_public_size", "facts_of", "public_size_of"]

# The tables whose curator declared their row count public, with that count once read.
_PUBLIC_SIZES: weakref.WeakKeyDictionary[TableRef, PublicSize] = weakref.WeakKeyDictionary()


def declare_public_size(table: TableRef) -> None:
    """Record the curator's declaration that ``table``'s row count is public. Called only
    where a table is wrapped (a curator-side argument), before any plan over it exists."""
    _PUBLIC_SIZES.setdefault(table, PublicSize(table))


def public_size_of(table: TableRef) -> PublicSize | None:
    """The public row count ``table``'s curator declared, if any (read or not yet)."""
    return _PUBLIC_SIZES.get(table)


# GroupBy aggregates whose result lies within their argument's bounds.
_BOUNDED_AGGS = frozenset({"AVG", "MIN", "MAX", "MEDIAN"})


class FactsVisitor(PlanVisitor[FrameMeta]):
    """Computes a plan's :class:`FrameMeta`, memoised per node (nodes are immutable)."""

    def __init__(self) -> None:
        self._memo: weakref.WeakKeyDictionary[PlanNode, FrameMeta] = weakref.WeakKeyDictionary()

    def visit(self, node: PlanNode) -> FrameMeta:
        hit = self._memo.get(node)
        if hit is None:
            hit = node.accept(self)
            self._memo[node] = hit
        return hit

    def visit_source(self, node: Source) -> FrameMeta:
        t = node.table
        schema: dict[str, ColumnType] = dict(t.schema or {c: "any" for c in t.columns})
        for c in schema:
            check_column_name(c)
        ids = {c: ColumnId(t, c) for c in schema}
        unit = None
        if t.privacy_unit is not None:
            unit = (ids[t.privacy_unit], UnitDomain(t.agent, t.privacy_unit))
        return FrameMeta(
            schema=schema,
            ids=ids,
            col_bounds={ids[c]: b for c, b in t.bounds.items()},
            col_keys={ids[c]: k for c, k in t.keys.items()},
            unit=unit,
            allow_callables=t.allow_callables,
            size=_PUBLIC_SIZES.get(t),
        )

    def visit_part_source(self, node: PartSource) -> FrameMeta:
        parent = self.visit(node.partition.parent)
        cols = node.partition.key_columns
        values = (node.key,) if len(cols) == 1 else tuple(node.key)  # type: ignore[arg-type]
        keys = dict(parent.col_keys)
        for c, v in zip(cols, values, strict=True):
            keys[parent.ids[c]] = (v,)
        # Relative to its part agent a part is a fresh table of rows: its unit column no
        # longer names units of that agent.
        return _meta(parent, col_keys=keys, unit=None)

    def visit_where(self, node: Where) -> FrameMeta:
        # The rows are a subset: the public row count no longer holds (_meta drops it).
        return _meta(self.visit(node.child))

    def visit_select(self, node: Select) -> FrameMeta:
        child = self.visit(node.child)
        schema = dict(child.schema) if node.keep_all else {}
        ids = dict(child.ids) if node.keep_all else {}
        bounds = dict(child.col_bounds)
        by_name = child.bounds
        for name, e in node.outputs:
            check_column_name(name, internal_ok=True)
            if isinstance(e, Column):
                schema[name] = child.schema[e.name]
                ids[name] = child.ids[e.name]
                continue
            cid = ColumnId(node, name)
            ids[name] = cid
            if isinstance(e, PyFunc):
                schema[name] = "any"
                continue
            schema[name] = check_expression(e, child.schema)
            b = derive_bounds(e, by_name)
            if b is not None:
                bounds[cid] = b
        # One output row per input row: a public row count still holds.
        return _meta(child, schema=schema, ids=ids, col_bounds=bounds, size=child.size)

    def visit_distinct(self, node: Distinct) -> FrameMeta:
        child = self.visit(node.child)
        ids = {c: child.ids[c] for c in node.columns}
        return _meta(
            child,
            schema={c: child.schema[c] for c in node.columns},
            ids=ids,
            unique=child.unique | {frozenset(ids.values())},
        )

    def visit_explode(self, node: Explode) -> FrameMeta:
        child = self.visit(node.child)
        schema = dict(child.schema)
        schema[node.column] = "any"
        ids = dict(child.ids)
        ids[node.column] = ColumnId(node, node.column)
        # One input row becomes several: nothing stays unique.
        return _meta(child, schema=schema, ids=ids, unique=frozenset())

    def visit_group_by(self, node: GroupBy) -> FrameMeta:
        child = self.visit(node.child)
        schema: dict[str, ColumnType] = {k: child.schema[k] for k in node.keys}
        ids = {k: child.ids[k] for k in node.keys}
        bounds = {ids[k]: child.col_bounds[ids[k]] for k in node.keys if ids[k] in child.col_bounds}
        by_name = child.bounds
        for name, call in node.aggs:
            check_column_name(name, internal_ok=True)
            cid = ColumnId(node, name)
            ids[name] = cid
            schema[name] = "int" if call.name == "COUNT" else "float"
            if call.name in _BOUNDED_AGGS and call.args:
                b = derive_bounds(call.args[0], by_name)
                if b is not None:
                    bounds[cid] = b
        return _meta(
            child,
            schema=schema,
            ids=ids,
            col_bounds=bounds,
            unique=frozenset({frozenset(ids[k] for k in node.keys)}),
        )

    def visit_join(self, node: Join) -> FrameMeta:
        left, right = self.visit(node.left), self.visit(node.right)
        schema, ids = _joined(left, right.schema, right.ids, node.on, "_right")
        unit = None
        if (
            left.unit is not None
            and right.unit is not None
            and left.unit[1] == right.unit[1]
            and left.privacy_unit in node.on
            and right.privacy_unit == left.privacy_unit
        ):
            # Joined on the unit itself: both halves of a row belong to the same person.
            unit = left.unit
        unique: frozenset[frozenset[ColumnId]] = frozenset()
        if node.bounds is None and left.unique_on(node.on) and right.unique_on(node.on):
            unique = frozenset({frozenset(left.ids[c] for c in node.on)})
        return FrameMeta(
            schema=schema,
            ids=ids,
            col_bounds={**right.col_bounds, **left.col_bounds},
            col_keys={**right.col_keys, **left.col_keys},
            unit=unit,
            unique=unique,
            allow_callables=left.allow_callables and right.allow_callables,
        )

    def visit_public_join(self, node: PublicJoin) -> FrameMeta:
        left = self.visit(node.child)
        pub = node.public
        pub_schema: Mapping[str, ColumnType] = pub.schema or {c: "any" for c in pub.columns}
        for c in pub_schema:
            check_column_name(c)
        pub_ids = {c: ColumnId(pub, c) for c in pub_schema}
        schema, ids = _joined(left, pub_schema, pub_ids, node.on, "_public")
        # Each output row extends one private row, whose owner it keeps.
        return _meta(left, schema=schema, ids=ids, unique=frozenset())

    def visit_set_op(self, node: SetOp) -> FrameMeta:
        left, right = self.visit(node.left), self.visit(node.right)
        schema: dict[str, ColumnType] = {}
        ids: dict[str, ColumnId] = {}
        bounds: dict[ColumnId, tuple[float, float]] = {}
        keys: dict[ColumnId, tuple[Hashable, ...]] = {}
        for c, t in left.schema.items():
            lid, rid = left.ids[c], right.ids[c]
            cid = lid if lid == rid else ColumnId(node, c)
            ids[c] = cid
            schema[c] = t if t == right.schema[c] else "any"
            if lid in left.col_bounds and rid in right.col_bounds:
                (lo, hi), (olo, ohi) = left.col_bounds[lid], right.col_bounds[rid]
                bounds[cid] = (min(lo, olo), max(hi, ohi))
            if lid in left.col_keys and rid in right.col_keys:
                ks = left.col_keys[lid]
                keys[cid] = ks + tuple(k for k in right.col_keys[rid] if k not in set(ks))
        unit = None
        name = left.privacy_unit
        if (
            left.unit is not None
            and right.unit is not None
            and left.unit[1] == right.unit[1]
            and name is not None
            and right.privacy_unit == name
        ):
            unit = (ids[name], left.unit[1])
        unique: frozenset[frozenset[ColumnId]] = frozenset()
        if node.kind != "concat":
            unique = frozenset({frozenset(ids.values())})
        return FrameMeta(
            schema=schema,
            ids=ids,
            col_bounds=bounds,
            col_keys=keys,
            unit=unit,
            unique=unique,
            allow_callables=left.allow_callables and right.allow_callables,
        )

    def visit_bound_contributions(self, node: BoundContributions) -> FrameMeta:
        # A subset of the rows: every fact still holds but the public row count.
        return _meta(self.visit(node.child))

    def visit_bound_groups(self, node: BoundGroups) -> FrameMeta:
        # A subset of the rows, chosen per unit from that unit's rows alone: every fact
        # (bounds, keys, uniqueness, the unit) still holds, but the public row count.
        return _meta(self.visit(node.child))

    def visit_bound_degree(self, node: BoundDegree) -> FrameMeta:
        # A subset of the rows: bounds, keys and uniqueness hold. The unit survives only when
        # its column is among the capped key columns: then every key's rows are one unit's
        # and a unit's kept rows depend on its own rows alone. Otherwise one unit's rows can
        # evict another unit's, which the unit-level rules (bound_contributions) must not
        # be told is impossible.
        # The public row count never holds for a subset.
        child = self.visit(node.child)
        if child.privacy_unit is not None and child.privacy_unit in node.columns:
            return _meta(child)
        return _meta(child, unit=None)


def _meta(base: FrameMeta, **changes: object) -> FrameMeta:
    """``base`` with ``changes``. The public row count is not carried over unless a change
    passes it (``size=...``): only a rule that keeps every row may keep it."""
    fields = {
        "schema": base.schema,
        "ids": base.ids,
        "col_bounds": base.col_bounds,
        "col_keys": base.col_keys,
        "unit": base.unit,
        "unique": base.unique,
        "allow_callables": base.allow_callables,
    }
    fields.update(changes)
    return FrameMeta(**fields)  # type: ignore[arg-type]


def _joined(
    left: FrameMeta,
    right_schema: Mapping[str, ColumnType],
    right_ids: Mapping[str, ColumnId],
    on: tuple[str, ...],
    suffix: str,
) -> tuple[dict[str, ColumnType], dict[str, ColumnId]]:
    """The joined columns: the left's, then the right's non-key columns (suffixed on a clash)."""
    schema = dict(left.schema)
    ids = dict(left.ids)
    for c, t in right_schema.items():
        if c in on:
            continue
        name = c + suffix if c in schema else c
        if name in schema:
            raise PinqError(
                f"the join would produce two columns named {name!r}; rename one side's column "
                "with .select(...) first"
            )
        schema[name] = t
        ids[name] = right_ids[c]
    return schema, ids


_VISITOR = FactsVisitor()


def facts_of(plan: PlanNode) -> FrameMeta:
    """The public facts of ``plan`` (computed once per node)."""
    return _VISITOR.visit(plan)


def on_unit(child: PlanNode, columns: tuple[str, ...]) -> bool:
    """Whether ``columns`` are exactly ``child``'s privacy unit column. A row whose id there
    is NULL-like (None, NaN, ``pd.NA``, ``NaT``) belongs to no known person, so every step
    that deduplicates, groups or caps rows by exactly the unit drops it, on every engine:
    ``bound_contributions``, ``bound_groups``, ``bound_degree`` and ``distinct`` on the
    unit, and a groupby by it (whose node says so itself, ``GroupBy.by_unit``)."""
    facts = facts_of(child)
    return facts.unit is not None and len(columns) == 1 and facts.privacy_unit == columns[0]
