"""Stability rules: how many output rows one privacy unit of each source can change.

The neighbouring relation is PINQ's: add or remove one privacy unit (a row of a row-level
table, or every row of one user of a user-level table). For a plan ``P`` and a source agent
``a``, ``lineage(P)[a] = k`` means: for inputs that differ by one unit of ``a``, the outputs of
``P`` differ by at most ``k`` rows (size of the multiset symmetric difference). A ``k``-stable
transformation followed by an ``epsilon``-DP aggregation is ``k·epsilon``-DP (McSherry 2009,
Theorem 1), which is why a charge is multiplied by ``k`` on its way to the budget.

Each rule below states its derivation in one line; tests/unit/test_stability_properties.py
checks every rule on random neighbouring datasets. The rules of the random truncations
(bounded joins, the bound_* steps) hold for every fixed salt of their row priorities, which is
what lets a partition fix its salts across reads (:mod:`pinqpy.plan.salts`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from pinqpy.plan.facts import facts_of
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
    Select,
    SetOp,
    Source,
    Where,
)

__all__ = [
    "INF",
    "Lineage",
    "Spread",
    "StabilityVisitor",
    "lineage_of",
    "unit_spread",
]

INF = math.inf
Stability = Fraction | float  # float only for math.inf
Lineage = dict[str, Stability]  # by agent name (see pinqpy.plan.catalog)


def _scale(lineage: Lineage, k: Stability) -> Lineage:
    return {agent: _mul(s, k) for agent, s in lineage.items()}


def _mul(a: Stability, b: Stability) -> Stability:
    if a == INF or b == INF:
        return INF
    return Fraction(a) * Fraction(b)


def _merge(*lineages: Lineage) -> Lineage:
    out: Lineage = {}
    for lin in lineages:
        for agent, s in lin.items():
            prev = out.get(agent, Fraction(0))
            out[agent] = INF if (prev == INF or s == INF) else Fraction(prev) + Fraction(s)
    return out


class StabilityVisitor(PlanVisitor[Lineage]):
    """Computes a plan's lineage: ``{agent name: stability}`` (the names a catalog resolves)."""

    def visit_source(self, node: Source) -> Lineage:
        # A row-level table: one unit is one row. A user-level table: one unit may own any
        # number of rows until bound_contributions or groupby(unit) bounds it.
        k: Stability = Fraction(1) if node.table.privacy_unit is None else INF
        return {node.table.agent: k}

    def visit_part_source(self, node: PartSource) -> Lineage:
        # Relative to its part agent, a part is a fresh table of the partitioned rows; the
        # partition agent carries the parent's stability.
        return {node.agent: Fraction(1)}

    def visit_where(self, node: Where) -> Lineage:
        # A row is kept or dropped on its own values: a changed input row changes <= 1 output.
        return self.visit(node.child)

    def visit_select(self, node: Select) -> Lineage:
        # Row-wise map: one output row per input row.
        return self.visit(node.child)

    def visit_distinct(self, node: Distinct) -> Lineage:
        # Adding/removing one row adds/removes at most one distinct value.
        child = self.visit(node.child)
        owner = _unit_agent(node.child, node.columns)
        if owner is not None:
            # The distinct values of exactly the privacy unit column: a unit's rows all carry
            # its id and no other unit's row does (what the facts keep the unit for, as for a
            # groupby by the unit), so its arrival or departure adds or removes one row, its
            # id. Rows whose id is NULL-like belong to no one and are dropped (on every
            # engine: pinqpy.plan.facts.on_unit), so no unit changes them.
            return _by_unit(child, owner, Fraction(1), Fraction(1))
        return child

    def visit_explode(self, node: Explode) -> Lineage:
        # Each input row yields at most max_items rows.
        return _scale(self.visit(node.child), Fraction(node.max_items))

    def visit_group_by(self, node: GroupBy) -> Lineage:
        child = self.visit(node.child)
        owner = _unit_agent(node.child, node.keys)
        if node.by_unit and owner is not None:
            # Every row of a unit lands in the unit's own group: one group row appears or
            # disappears with the unit. Rows of any other agent move like any grouped row.
            return _by_unit(child, owner, Fraction(1))
        # A changed input row changes one group's aggregates: its old row goes, a new comes.
        return _scale(child, Fraction(2))

    def visit_join(self, node: Join) -> Lineage:
        left, right = self.visit(node.left), self.visit(node.right)
        if node.bounds is None:
            if not (
                facts_of(node.left).unique_on(node.on) and facts_of(node.right).unique_on(node.on)
            ):
                # Nothing bounds the matches per key (the API refuses this plan; this rule
                # makes sure no other route can charge for it).
                return _scale(_merge(left, right), INF)
            # Both sides unique on the key: a left row meets at most one right row.
            return _merge(left, right)
        b_left, b_right = node.bounds
        # After truncation a key keeps <= b rows per side. A new left row can displace one
        # kept left row (2 left rows change), each matching <= b_right right rows.
        return _merge(_scale(left, Fraction(2 * b_right)), _scale(right, Fraction(2 * b_left)))

    def visit_public_join(self, node: PublicJoin) -> Lineage:
        # A private row meets at most `multiplicity` public rows (a left join keeps >= 1 row).
        return _scale(self.visit(node.child), Fraction(max(node.multiplicity, 1)))

    def visit_set_op(self, node: SetOp) -> Lineage:
        # concat: rows pass through. union/intersect/difference on sets: one changed row of
        # either input changes whether one distinct value is in the output.
        return _merge(self.visit(node.left), self.visit(node.right))

    def visit_bound_contributions(self, node: BoundContributions) -> Lineage:
        # Each unit keeps at most max_rows rows, chosen by per-row random priorities that do
        # not depend on other units, so a unit's arrival or departure changes only its rows.
        # That holds only while the column really carries one budget's units (the facts say
        # so, whatever it is called); then rows of other agents in the child (if any) each
        # move at most two kept rows of their group: themselves and one they displace.
        # When the child's rows are unit-local (see _unit_local) the unit changes only its own
        # child rows, at most child[owner] of them, so it changes at most
        # min(max_rows, child[owner]) kept rows.
        child = self.visit(node.child)
        owner = _unit_agent(node.child, (node.unit,))
        if owner is None:
            return _scale(child, INF)
        k: Stability = Fraction(node.max_rows)
        if _unit_local(node.child) and child.get(owner, INF) != INF:
            k = min(k, child[owner])
        return _by_unit(child, owner, k)

    def visit_bound_groups(self, node: BoundGroups) -> Lineage:
        # Per unit, groups are chosen by a salted hash of (unit, group value) and rows by a
        # salted hash of the row, neither depending on other units' rows: a unit's arrival
        # or departure changes only its own kept rows, at most max_groups·max_rows_per_group
        # of them (INF without a per-group cap). Rows of other agents in the child (if any)
        # move at most 2·max_rows_per_group + 2 kept rows each: a row with a new group value
        # can evict a whole kept group (<= max_rows_per_group rows) and add itself; one in a
        # kept group displaces at most one row (2). Refused unless the column still carries
        # one budget's units, as for bound_contributions.
        child = self.visit(node.child)
        owner = _unit_agent(node.child, (node.unit,))
        if owner is None:
            return _scale(child, INF)
        k = node.max_rows_per_group
        if k is None:
            return _by_unit(child, owner, INF, INF)
        own: Stability = Fraction(node.max_groups * k)
        if _unit_local(node.child) and child.get(owner, INF) != INF:
            own = min(own, child[owner])  # it changes only its own child rows
        return _by_unit(child, owner, own, Fraction(2 * k + 2))

    def visit_bound_degree(self, node: BoundDegree) -> Lineage:
        # Each key keeps its max_rows rows of lowest salted-hash priority, a priority that
        # depends on the row alone. Adding a row changes only its key's kept rows: it joins
        # them, and if the key already had max_rows kept rows it evicts the one of highest
        # priority: at most 2 changed rows (removing a row is the reverse). So 2 per changed
        # input row, for every agent.
        return _scale(self.visit(node.child), Fraction(2))


def _unit_agent(child: PlanNode, columns: tuple[str, ...]) -> str | None:
    """The agent whose units ``columns`` carry in ``child``, or None if they are not exactly
    the privacy unit column there."""
    facts = facts_of(child)
    if facts.unit is None or len(columns) != 1 or facts.privacy_unit != columns[0]:
        return None
    return facts.unit[1].agent


def _by_unit(child: Lineage, owner: str, k: Stability, others: Stability = Fraction(2)) -> Lineage:
    out: Lineage = {}
    for agent, s in child.items():
        out[agent] = k if agent == owner else _mul(s, others)
    return out


def _unit_local(node: PlanNode) -> bool:
    """Whether every row of ``node`` belongs to the unit its unit column names and each unit's
    rows are a function of that unit's input rows alone: true of a per-unit truncation
    (bound_contributions, bound_groups) under row-wise where and select (the facts keep the
    unit only while its column passes through unchanged)."""
    while isinstance(node, Where | Select):
        node = node.child
    return isinstance(node, BoundContributions | BoundGroups)


_VISITOR = StabilityVisitor()


def lineage_of(plan: PlanNode) -> Lineage:
    """The stability of ``plan`` with respect to each agent it draws on directly, by the
    agent's name (:meth:`pinqpy.plan.catalog.Catalog.lineage` resolves them)."""
    return _VISITOR.visit(plan)


@dataclass(frozen=True)
class Spread:
    """How one agent's units spread over the parts of a split on a group-bounded frame.

    One unit of ``agent`` has rows in at most ``max_parts`` parts, at most ``per_part`` rows
    in each and at most ``total`` rows in all (``total <= max_parts·per_part``).
    """

    agent: str
    max_parts: int
    per_part: Fraction
    total: Fraction


def unit_spread(plan: PlanNode, columns: tuple[str, ...]) -> Spread | None:
    """The :class:`Spread` of a split of ``plan`` by exactly the ``by`` columns of a
    ``bound_groups`` under it, or None.

    The ``bound_groups`` node must be reached from ``plan`` through row-wise where and select
    and per-unit ``bound_contributions`` only, and ``columns`` must be exactly its ``by``
    columns by identity (:mod:`pinqpy.plan.facts`: a rename keeps it, a recomputed column
    does not). Derivation: after ``bound_groups(by, G, k)`` a unit's rows carry at most ``G``
    distinct ``by`` values, at most ``k`` rows each; where drops rows, select maps them one to
    one without changing the identity of the ``by`` columns, and ``bound_contributions(m)``
    keeps a subset of at most ``m`` per unit. So a unit lands in at most ``G`` parts of the
    split, at most ``min(k, m)`` rows in each, ``min(G·k, m)`` in all; the latter is also the
    plan's stability for the unit's agent (:class:`StabilityVisitor`).
    """
    facts = facts_of(plan)
    if any(c not in facts.ids for c in columns) or len(set(columns)) != len(columns):
        return None
    node = plan
    cap: Stability = INF
    while True:
        if isinstance(node, Where | Select):
            node = node.child
        elif isinstance(node, BoundContributions):
            cap = min(cap, Fraction(node.max_rows))
            node = node.child
        elif isinstance(node, BoundGroups):
            break
        else:
            return None
    if node.max_rows_per_group is None and cap == INF:
        return None
    below = facts_of(node)
    if {facts.ids[c] for c in columns} != {below.ids[c] for c in node.by}:
        return None
    if len(columns) != len(node.by):
        return None
    owner = _unit_agent(node.child, (node.unit,))
    if owner is None:
        return None
    total = lineage_of(plan).get(owner, INF)
    if total == INF:
        return None
    per_part = min(
        Fraction(node.max_rows_per_group) if node.max_rows_per_group is not None else INF,
        cap,
        total,
    )
    return Spread(owner, node.max_groups, Fraction(per_part), Fraction(total))
