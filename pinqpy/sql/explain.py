"""EXPLAIN: the plan, each operator's stability, each aggregate's epsilon, noise and expected
error, and the total charge, as printable text. Nothing is charged and no data is read.

Errors are in the answer's own units where the public facts allow it. A mean's and a
quantile's depend on how many rows they cover, which EXPLAIN cannot read: given ``n`` (a
guessed or public row count: ``Session.explain(query, n=...)``, ``session.sql("EXPLAIN ...",
n=...)`` or ``OPTIONS (n = ...)``) they are stated in values, with the assumption behind
them (:func:`pinqpy.results.accuracy.mean_figure`,
:func:`~pinqpy.results.accuracy.quantile_figure`); a mean over a public row count uses that
count. Without ``n`` the line says what the figure needs rather than print the bounds' width
as if it were the error.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from pinqpy.accounting.agents import flatten
from pinqpy.accounting.budget import Budget
from pinqpy.accounting.charges import CompositeCharge
from pinqpy.accounting.cost import Cost
from pinqpy.core.exact import Exact
from pinqpy.noise.mechanisms import (
    MeanMechanism,
    PublicCountMechanism,
    PublicSizeMeanMechanism,
    QuantileMechanism,
)
from pinqpy.pipeline.neighbours import changed_row_note, changed_row_reasons
from pinqpy.plan.catalog import Catalog
from pinqpy.plan.describe import Names, StepDescriber, multipliers, stability_text
from pinqpy.plan.nodes import PartSource, PlanNode
from pinqpy.plan.stability import INF
from pinqpy.results.accuracy import mean_figure, quantile_figure
from pinqpy.results.format import sig
from pinqpy.sql.compiler import CompiledRelease

__all__ = ["Explanation", "cost_note", "explain"]


class Explanation(str):
    """EXPLAIN's text (a ``str``), with the total charge per budget as ``.charges``."""

    charges: dict[str, object]

    def _repr_html_(self) -> str:
        from pinqpy.results.html import result_html

        return result_html(self)


def _fmt_stability(node: PlanNode, catalog: Catalog) -> str:
    values = flatten(catalog.lineage(node)).values()
    parts = sorted({"inf" if v == INF else str(Exact.of(Fraction(v))) for v in values})
    return ", ".join(parts)


def _form(mech: object) -> str:
    """Which variance a variance mechanism releases: the sample form (VARIANCE, VAR, VAR_SAMP,
    STDDEV, STD, STDDEV_SAMP) divides the squared deviations by n - 1, the population form
    (VAR_POP, STDDEV_POP) by n; both come from the same noisy count, sum and sum of squares."""
    ddof = getattr(mech, "ddof", None)
    if ddof is None:
        return ""
    what = "standard deviation" if getattr(mech, "stddev", False) else "variance"
    return f" (sample {what}: divides by n - 1)" if ddof else f" (population {what}: divides by n)"


def _column_of(label: str) -> str | None:
    """``age`` of ``AVG(age)`` (the measured expression, for "in age's units")."""
    start, end = label.find("("), label.rfind(")")
    inner = label[start + 1 : end].strip() if 0 <= start < end else ""
    return inner or None


def _error_text(mech: object, label: str, n: float | None, grouped: bool) -> str:
    """The error part of a measurement's line: expected error (and the 95% half-width) in the
    value's units when the public facts allow it, with what the figure assumes."""
    column = _column_of(label)
    rows = "rows a group" if grouped else "rows"
    if isinstance(mech, MeanMechanism | PublicSizeMeanMechanism):
        fig = mean_figure(mech, level=0.95, n=n, column=column)
        if isinstance(mech, PublicSizeMeanMechanism):
            return (
                f"expected error {sig(fig.expected)} (± {sig(fig.error)} at 95%), the row count "
                f"public (n = {mech.n})"
            )
        if fig.n is None:
            return (
                f"expected error {sig(fig.expected_times_n)}/n (± {sig(fig.error_times_n)}/n at "
                f"95%) for n {rows}, first order; OPTIONS (n = ...) gives a figure in "
                f"{column or 'the column'}'s units"
            )
        if fig.n - mech.count_noise.half_width(0.95) < 1.0:
            return (
                f"error up to the bounds' width {sig(fig.error)}: n = {_count(fig.n)} is too "
                "few rows for this epsilon (the noisy count can be near 0)"
            )
        return (
            f"expected error {sig(fig.expected)} (± {sig(fig.error)} at 95%) for n = "
            f"{_count(fig.n)} {rows}, first order, any mean within the bounds"
        )
    if isinstance(mech, QuantileMechanism):
        fig = quantile_figure(mech, level=0.95, n=n, column=column)
        if fig.n is None:
            return (
                f"expected error {sig(fig.expected)} ranks; OPTIONS (n = ...) gives a figure in "
                f"{column or 'the column'}'s units"
            )
        return (
            f"expected error {sig(fig.expected)} (± {sig(fig.error)} at 95%) for n = "
            f"{_count(fig.n)} {rows} spread evenly over the bounds "
            f"({sig(mech.expected_error())} ranks)"
        )
    return f"expected error {sig(mech.expected_error())}"  # type: ignore[attr-defined]


def _count(n: float) -> str:
    return str(int(n)) if float(n).is_integer() else f"{n:g}"


def _tree(
    node: PlanNode, depth: int, lines: list[str], describe: StepDescriber, catalog: Catalog
) -> None:
    text = "  " * depth + describe.visit(node)
    lines.append(f"{text:<64} stability {_fmt_stability(node, catalog)}")
    for child in node.children:
        if isinstance(node, PartSource):
            break
        _tree(child, depth + 1, lines, describe, catalog)


def explain(
    rel: CompiledRelease,
    budget_names: dict[object, str] | None = None,
    table_names: Names | None = None,
    n: float | None = None,
) -> Explanation:
    """EXPLAIN's text for a compiled release. ``table_names`` (a table's id -> the name a
    Session registered it as) names each scan as the query does; ``n`` (a guessed or public
    row count, per group for a grouped query) states means and quantiles in the value's
    units."""
    lines = ["EXPLAIN (charges nothing, reads no data)", ""]
    head = (
        rel.group_desc + ": parallel composition, one charge for all groups"
        if rel.group_desc
        else "Release: one row"
    )
    lines.append(head)
    _tree(rel.frame.plan, 1, lines, StepDescriber(table_names), rel.frame.catalog)
    neighbours = changed_row_note(rel.frame, table_names)
    if neighbours is not None:
        lines += ["", neighbours]
    lines += _measurement_lines(rel, n)
    if rel.notes:
        lines += ["", "Differences from BigQuery:"]
        lines += [f"  {note}" for note in rel.notes]
    lines.append("")
    charges = _charge_lines(rel, budget_names, lines)
    out = Explanation("\n".join(lines))
    out.charges = charges
    return out


def _measurement_lines(rel: CompiledRelease, n: float | None) -> list[str]:
    """The noisy measurements, one line each, with the epsilon split between them."""
    lines: list[str] = []
    sel_index = rel.selection_index
    extra = 1 if rel.key_selection is not None and sel_index is None else 0
    # A public row count is no noisy measurement: it takes no share of epsilon.
    public = sum(
        isinstance(meas.prepared.mechanism, PublicCountMechanism) for meas in rel.measurements
    )
    m = max(len(rel.measurements) - public, 1) + extra
    if public == len(rel.measurements) and extra == 0:
        lines += ["", "Noisy measurements: none (public row counts only, charged nothing)"]
    else:
        lines += [
            "",
            f"Noisy measurements: epsilon {Exact.of(rel.epsilon)} = {m} measurement(s) x "
            f"{Exact.of(rel.per_measurement_epsilon)} x stability {Exact.of(rel.stability)}",
        ]
    for i, meas in enumerate(rel.measurements):
        if i == sel_index and rel.key_selection is not None:
            sel = rel.key_selection[2]
            released = (
                "only the selected keys released (the query asks for no aggregate)"
                if rel.keys_only
                else "its noisy counts released"
            )
            lines.append(
                f"  {meas.label:<28} epsilon {Exact.of(sel.epsilon)!s:<10} "
                f"{sel.describe()}, delta {float(sel.delta):.3g}: the GROUP BY key selection, "
                f"{released}; expected error {sig(sel.expected_error())}"
            )
            continue
        mech = meas.prepared.mechanism
        err = _error_text(mech, meas.label, n, bool(rel.group_desc))
        lines.append(
            f"  {meas.label:<28} epsilon {Exact.of(Fraction(mech.epsilon))!s:<10} "
            f"{mech.describe():<44} {err}{_form(mech)}"
        )
    if rel.key_selection is not None and sel_index is None:
        sel = rel.key_selection[2]
        lines.append(
            f"  {'(GROUP BY key selection)':<28} epsilon {Exact.of(sel.epsilon)!s:<10} "
            f"{sel.describe()}, delta {float(sel.delta):.3g}"
        )
    return lines


def _charge_lines(
    rel: CompiledRelease, budget_names: dict[object, str] | None, lines: list[str]
) -> dict[str, object]:
    """Append the total charge to each budget the release draws on; return them by name."""
    sel_index = rel.selection_index
    measured = [m for i, m in enumerate(rel.measurements) if i != sel_index]
    total = CompositeCharge([meas.prepared.mechanism.charge for meas in measured])
    grouped = rel.target_lineage is not None
    charges: dict[str, object] = {}
    for budget, k in rel.frame.stabilities().items():
        base = total.at(Fraction(1))
        cost = base.at(Fraction(k)) if grouped else total.at(Fraction(k))
        if rel.key_selection is not None:
            cost = cost + rel.key_selection[2].charge.at(Fraction(k))
        name = (budget_names or {}).get(budget) or budget.name or "budget"
        charges[name] = cost
        lines.append(f"Total charge to {name} (stability {Exact.of(Fraction(k))}): {cost!r}")
    return charges


def _cost_text(cost: Cost) -> str:
    text = f"epsilon {float(cost.epsilon):.6g}"
    if cost.delta:
        text += f", delta {float(cost.delta):.3g}"
    return text


def cost_note(
    rel: CompiledRelease,
    charged: Mapping[object, Cost],
    budget_names: Mapping[object, str] | None = None,
    table_names: Names | None = None,
) -> str:
    """One line saying what a query charged each budget and why: the measurements, the
    epsilon of each, the stability of the FROM clause, and each step that multiplies it (a
    join whose keys repeat, a groupby...), e.g. ``charged epsilon 0.2 on people: 2
    measurements x 0.05 x stability 2 (join labels: a key repeats up to 2 times (stability 1
    -> 2)); 0.8 left``. ``charged`` is what the run actually committed per budget (an answer given
    before charges nothing again). Public parameters and the plan only; no data."""
    public = sum(isinstance(m.prepared.mechanism, PublicCountMechanism) for m in rel.measurements)
    spent = {b: c for b, c in charged.items() if c.epsilon or c.delta}
    if not spent:
        if public == len(rel.measurements) and rel.key_selection is None:
            return "charged nothing: public row counts only"
        return "charged nothing: the same query was answered before, so that answer was returned"
    extra = 1 if rel.key_selection is not None and rel.selection_index is None else 0
    m = max(len(rel.measurements) - public, 1) + extra
    stabilities = rel.frame.stabilities()
    steps = multipliers(rel.frame.plan, table_names)
    doubled = changed_row_reasons(rel.frame, table_names)
    parts = []
    for budget, cost in spent.items():
        name = (budget_names or {}).get(budget) or getattr(budget, "name", None) or "budget"
        k = stabilities.get(budget, rel.stability)  # type: ignore[call-overload]
        why = (
            f"{m} measurement{'s' if m != 1 else ''} x {Exact.of(rel.per_measurement_epsilon)} "
            f"x stability {stability_text(k)}"
        )
        if rel.target_lineage is not None:
            why += ", once for all groups"
        reasons = []
        for step in steps:
            # A step of another budget's table does not raise this one's charge; a step over
            # a partition's part (its own agent) is named for every budget.
            agent = rel.frame.catalog.root_agent(step.agent)
            if agent is budget or not isinstance(agent, Budget):
                reasons.append(step.reason)
        reasons += doubled
        if reasons:
            why += " (" + "; ".join(reasons) + ")"
        if isinstance(budget, Budget):  # what is left is a public fact of the budget
            why += f"; {float(budget.remaining.epsilon):.6g} left"
        parts.append(f"charged {_cost_text(cost)} on {name}: {why}")
    return "; ".join(parts)
