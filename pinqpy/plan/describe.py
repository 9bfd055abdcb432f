"""Plans in words: one line per operator (EXPLAIN's), a one-line label for the audit trail, and
the steps whose stability multiplies a query's charge.

Everything here is built from the plan alone: operator parameters, the analyst's expressions,
public key lists and the names of tables. No row is read and no value of the data appears, so
the text may go to the budget's history, a ledger file or a note printed after a query.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from pinqpy.expr.ast import Expr
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
    TableRef,
    Where,
)
from pinqpy.plan.stability import INF, lineage_of

__all__ = [
    "Multiplier",
    "StepDescriber",
    "multipliers",
    "plan_label",
    "stability_text",
    "table_name",
]

#: A table's shown name by its id (a Session shows each frame by the name it was registered
#: as; without one a table shows the name it was made with).
Names = Mapping[str, str]


def _e(x: Expr | PyFunc) -> str:
    return f"<callable {x.name}>" if isinstance(x, PyFunc) else x.to_sql()


def table_name(table: TableRef, names: Names | None = None) -> str:
    """The name ``table`` is shown by: the one it was registered as, else its own."""
    return (names or {}).get(table.id) or table.name


def stability_text(k: Fraction | float) -> str:
    """A stability as text: ``2``, ``3/2`` or ``inf``."""
    if k == INF:
        return "inf"
    f = Fraction(k)
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


class StepDescriber(PlanVisitor[str]):
    """One line per operator: what it does (EXPLAIN adds each line's stability)."""

    def __init__(self, names: Names | None = None):
        self.names = names

    def visit_source(self, node: Source) -> str:
        unit = (
            f", one person = all rows of {node.table.privacy_unit!r}"
            if node.table.privacy_unit
            else ""
        )
        shown = table_name(node.table, self.names)
        # A frame named for its file (or by name=) keeps that name beside the registered one.
        own = f" ({node.table.name})" if node.table.name not in (shown, "table") else ""
        return f"Scan {shown}{own}{unit}"

    def visit_part_source(self, node: PartSource) -> str:
        return f"Part {node.key!r} of partition by {', '.join(node.partition.key_columns)}"

    def visit_where(self, node: Where) -> str:
        return f"Filter {_e(node.predicate)}"

    def visit_select(self, node: Select) -> str:
        items = ", ".join(
            n if (not isinstance(e, PyFunc) and e.to_sql() == n) else f"{_e(e)} AS {n}"
            for n, e in node.outputs
        )
        return ("Assign " if node.keep_all else "Project ") + items

    def visit_distinct(self, node: Distinct) -> str:
        unit = on_unit(node.child, node.columns)
        how = " (by privacy unit; rows with a NULL unit dropped)" if unit else ""
        return f"Distinct {', '.join(node.columns)}{how}"

    def visit_explode(self, node: Explode) -> str:
        return f"Explode {node.column} (at most {node.max_items} items a row)"

    def visit_group_by(self, node: GroupBy) -> str:
        aggs = ", ".join(f"{c.to_sql()} AS {n}" for n, c in node.aggs)
        how = " (by privacy unit; rows with a NULL unit dropped)" if node.by_unit else ""
        return f"GroupBy {', '.join(node.keys)}{how}: {aggs}"

    def visit_join(self, node: Join) -> str:
        bounds = (
            f", at most {node.bounds[0]}/{node.bounds[1]} rows per key"
            if node.bounds
            else ", unique keys"
        )
        return f"Join on {', '.join(node.on)}{bounds}"

    def visit_public_join(self, node: PublicJoin) -> str:
        return (
            f"{node.how.capitalize()} join public {node.public.name} on {', '.join(node.on)} "
            f"(at most {max(node.multiplicity, 1)} public rows per key)"
        )

    def visit_set_op(self, node: SetOp) -> str:
        return {
            "concat": "Union all",
            "union": "Union",
            "intersect": "Intersect",
            "difference": "Except",
        }[node.kind]

    def visit_bound_contributions(self, node: BoundContributions) -> str:
        return (
            f"Bound contributions: at most {node.max_rows} rows per {node.unit!r} "
            "(rows with a NULL unit dropped)"
        )

    def visit_bound_groups(self, node: BoundGroups) -> str:
        per_group = (
            f", at most {node.max_rows_per_group} rows each"
            if node.max_rows_per_group is not None
            else ""
        )
        return (
            f"Bound groups: at most {node.max_groups} groups of {', '.join(node.by)} per "
            f"{node.unit!r}{per_group} (rows with a NULL unit dropped)"
        )

    def visit_bound_degree(self, node: BoundDegree) -> str:
        how = " (rows with a NULL unit dropped)" if on_unit(node.child, node.columns) else ""
        return f"Bound degree: at most {node.max_rows} rows per {', '.join(node.columns)}{how}"


class _Label(PlanVisitor[str]):
    """A plan on one line, outermost step first: ``Where(age >= 65) <- people``."""

    def __init__(self, names: Names | None):
        self.names = names

    def _on(self, step: str, node: PlanNode) -> str:
        kids = [self.visit(c) for c in node.children]
        inner = kids[0] if len(kids) == 1 else "(" + ", ".join(kids) + ")"
        return f"{step} <- {inner}"

    def visit_source(self, node: Source) -> str:
        return table_name(node.table, self.names)

    def visit_part_source(self, node: PartSource) -> str:
        cols = ", ".join(node.partition.key_columns)
        return f"Part({cols} = {node.key!r}) <- {self.visit(node.partition.parent)}"

    def visit_where(self, node: Where) -> str:
        return self._on(f"Where({_e(node.predicate)})", node)

    def visit_select(self, node: Select) -> str:
        items = ", ".join(
            n if (not isinstance(e, PyFunc) and e.to_sql() == n) else f"{n} = {_e(e)}"
            for n, e in node.outputs
        )
        return self._on(("Assign(" if node.keep_all else "Select(") + items + ")", node)

    def visit_distinct(self, node: Distinct) -> str:
        return self._on(f"Distinct({', '.join(node.columns)})", node)

    def visit_explode(self, node: Explode) -> str:
        return self._on(f"Explode({node.column}, max_items={node.max_items})", node)

    def visit_group_by(self, node: GroupBy) -> str:
        aggs = ", ".join(f"{n} = {c.to_sql()}" for n, c in node.aggs)
        return self._on(f"GroupBy({', '.join(node.keys)}: {aggs})", node)

    def visit_join(self, node: Join) -> str:
        per_key = f", max_rows_per_key={node.bounds}" if node.bounds else ""
        return self._on(f"Join(on {', '.join(node.on)}{per_key})", node)

    def visit_public_join(self, node: PublicJoin) -> str:
        how = "" if node.how == "inner" else f", {node.how}"
        return self._on(f"Join(public {node.public.name} on {', '.join(node.on)}{how})", node)

    def visit_set_op(self, node: SetOp) -> str:
        return self._on(node.kind.capitalize(), node)

    def visit_bound_contributions(self, node: BoundContributions) -> str:
        return self._on(f"BoundContributions({node.max_rows} per {node.unit})", node)

    def visit_bound_groups(self, node: BoundGroups) -> str:
        per = f", {node.max_rows_per_group} rows each" if node.max_rows_per_group else ""
        text = f"BoundGroups({node.max_groups} of {', '.join(node.by)} per {node.unit}{per})"
        return self._on(text, node)

    def visit_bound_degree(self, node: BoundDegree) -> str:
        return self._on(f"BoundDegree({node.max_rows} per {', '.join(node.columns)})", node)


def plan_label(plan: PlanNode, names: Names | None = None) -> str:
    """``plan`` on one line, outermost step first, as the audit trail shows it.

    >>> import pinqpy as pq, pandas as pd
    >>> f = pq.PrivateFrame(pd.DataFrame({"age": [1]}), pq.Budget(1), name="people")
    >>> plan_label(f.where("age >= 65").select("age")._plan)
    'Select(age) <- Where(age >= 65) <- people'
    """
    return _Label(names).visit(plan)


class Multiplier:
    """A step whose stability is larger than its input's: ``before`` -> ``after`` for one
    agent (by name), and what the step is."""

    __slots__ = ("after", "agent", "before", "node", "text")

    def __init__(
        self,
        node: PlanNode,
        agent: str,
        before: Fraction | float,
        after: Fraction | float,
        text: str,
    ) -> None:
        self.node = node
        self.agent = agent
        self.before = before
        self.after = after
        self.text = text

    @property
    def reason(self) -> str:
        """Why the step multiplies, in a few words: ``join labels: a key repeats up to 2
        times (stability 1 -> 2)``."""
        n = self.node
        if isinstance(n, PublicJoin):
            why = f"join {n.public.name}: a key repeats up to {max(n.multiplicity, 1)} times"
        elif isinstance(n, Join):
            per = f"keeping {n.bounds[0]}/{n.bounds[1]} rows per key" if n.bounds else ""
            why = f"join on {', '.join(n.on)} {per}".rstrip()
        elif isinstance(n, GroupBy):
            why = f"groupby {', '.join(n.keys)}: a changed row alters two groups"
        elif isinstance(n, Explode):
            why = f"explode {n.column}: up to {n.max_items} items a row"
        elif isinstance(n, BoundDegree):
            why = f"bound_degree {', '.join(n.columns)}: a new row can evict a kept one"
        elif isinstance(n, SetOp):
            why = f"{n.kind}: both inputs draw on the same table"
        elif isinstance(n, BoundContributions):
            why = f"bound_contributions: up to {n.max_rows} rows per {n.unit!r}"
        elif isinstance(n, BoundGroups):
            per = f" of up to {n.max_rows_per_group} rows" if n.max_rows_per_group else ""
            why = f"bound_contributions: up to {n.max_groups} groups{per} per {n.unit!r}"
        else:
            why = self.text
        return f"{why} (stability {stability_text(self.before)} -> {stability_text(self.after)})"

    @property
    def factor(self) -> Fraction | float:
        """How much the step multiplies the stability (inf when it unbounds it)."""
        if self.after == INF or self.before == INF:
            return INF
        return Fraction(self.after) / Fraction(self.before) if self.before else INF


def multipliers(plan: PlanNode, names: Names | None = None) -> list[Multiplier]:
    """The steps of ``plan`` (innermost first) that raise the stability of some agent above
    the largest of their inputs': a join whose keys repeat, a groupby, an explode... Each is
    why a query on ``plan`` costs more than its epsilon. A bound that brings an unbounded
    (user-level) stability down to ``k > 1`` rows per person is listed too: it sets the
    multiplier."""
    out: list[Multiplier] = []
    describe = StepDescriber(names)

    def walk(node: PlanNode) -> None:
        for child in node.children:
            walk(child)
        # A part draws on its partition's own agent, never on its parent's: no overlap.
        inputs = [lineage_of(c) for c in node.children]
        mine = lineage_of(node)
        for agent, k in mine.items():
            before = [lin[agent] for lin in inputs if agent in lin]
            if not before:
                continue
            base = max(before)
            raised = k > base and base != INF
            # A bound on an unbounded (user-level) input sets the stability: name it too
            # when it leaves more than one row per person.
            bounded = base == INF and k != INF and k > 1
            if raised or bounded:
                out.append(Multiplier(node, agent, base, k, describe.visit(node)))

    walk(plan)
    return out
