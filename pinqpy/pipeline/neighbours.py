"""The neighbour relation a frame's charges protect, in words, for EXPLAIN and ``accuracy()``.

Each private table of a frame has one (:mod:`pinqpy.plan.stability`, and
:class:`~pinqpy.accounting.agents.ChangedRowView` for a public row count):

* a row-level table: **one row added or removed**;
* a user-level table: **one person added or removed** (every row of one unit);
* a table whose row count its curator declared public: **one row changed, n public** (on a
  user-level one, one person's rows changed), which every stability over it counts as two
  rows: one removed and one added.

Built from public facts only: the plan, the catalog's agents, and the public row count
(read once, as a ``COUNT(*)`` of a public-size table's own rows is).
"""

from __future__ import annotations

from dataclasses import dataclass

from pinqpy.accounting.agents import ChangedRowView, Scaled
from pinqpy.pipeline.prepare import public_row_count
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.describe import Names, table_name
from pinqpy.plan.facts import public_size_of
from pinqpy.plan.nodes import Source, TableRef

__all__ = [
    "Neighbours",
    "changed_row_note",
    "changed_row_reasons",
    "neighbours_of",
    "neighbours_text",
]


@dataclass(frozen=True)
class Neighbours:
    """One table's neighbour relation: its shown ``name``, the relation in words, and
    whether it is the change-one-row relation of a public row count."""

    name: str
    text: str
    changed_row: bool


def _public_n(table: TableRef, rel: Relation) -> int | None:
    if public_size_of(table) is None:
        return None  # a remote client's copy: the count is the server's
    return public_row_count(Relation(Source(table), rel.catalog))


def _relation(table: TableRef, rel: Relation) -> tuple[str, bool]:
    unit = table.privacy_unit
    agent = rel.catalog.agent(table.agent)
    if isinstance(agent, Scaled) and not isinstance(agent, ChangedRowView):
        # A query's per-unit view of a row-level table (SQL's privacy_unit_column): the
        # table's own relation is what its budget protects.
        unit = None
        while isinstance(agent, Scaled) and not isinstance(agent, ChangedRowView):
            agent = agent.agent
    if not isinstance(agent, ChangedRowView):
        if unit is None:
            return "one row added or removed", False
        return f"one person added or removed (every row of {unit!r})", False
    n = _public_n(table, rel)
    public = "the row count public" if n is None else f"n public (n = {n})"
    if unit is None:
        return f"one row changed, {public}", True
    return f"one person's rows changed (every row of {unit!r}), {public}", True


def neighbours_of(rel: Relation, names: Names | None = None) -> list[Neighbours]:
    """The neighbour relation of each private table ``rel`` reads, in plan order."""
    seen: dict[str, Neighbours] = {}
    stack = [rel.plan]
    while stack:  # depth first, left input first
        node = stack.pop()
        if isinstance(node, Source) and node.table.id not in seen:
            text, changed = _relation(node.table, rel)
            seen[node.table.id] = Neighbours(table_name(node.table, names), text, changed)
        stack.extend(reversed(node.children))
    return list(seen.values())


def neighbours_text(rel: Relation, names: Names | None = None) -> str:
    """The neighbour relations of ``rel``'s tables on one line: the relation alone for one
    table (``one row changed, n public (n = 1000)``), else each after its table's name."""
    found = neighbours_of(rel, names)
    if len(found) == 1:
        return found[0].text
    return "; ".join(f"{n.name}: {n.text}" for n in found)


def changed_row_note(rel: Relation, names: Names | None = None) -> str | None:
    """EXPLAIN's line for a frame over a table whose row count is public (None otherwise):
    the relation, and why its stabilities count a changed row twice."""
    found = neighbours_of(rel, names)
    if not any(n.changed_row for n in found):
        return None
    return (
        f"Neighbours: {neighbours_text(rel, names)}; a changed row is one row removed and "
        "one added, so each stability counts it twice"
    )


def changed_row_reasons(rel: Relation, names: Names | None = None) -> list[str]:
    """Why a frame over a public-size table costs twice its plan's stability, one reason per
    such table (for "multiplies the charge" lists)."""
    return [
        f"{n.name}: its row count is public, so a changed row is one row removed and one "
        "added (x2)"
        for n in neighbours_of(rel, names)
        if n.changed_row
    ]
