"""Marginals: several noisy partition counts over one public domain, measured in one charge.

``frame.marginals([("age", "sex"), ("sex", "employed")], epsilon=..., cuts={"age": [20, 40,
60]})`` measures each listed marginal exactly as ``frame.partition(columns, keys).count(...)``
would: a partition over every cell of the marginal's public domain, one noisy count per cell,
with the same mechanisms, stabilities, truncation, engines and charges. All of them are
checked and charged in one transaction (:func:`pinqpy.pipeline.run.run_each`) before any data
is read, and the result is a :class:`~pinqpy.Marginals`.

**The domain is public.** Each column's cells come from

* ``keys={"sex": [1, 2]}`` or the frame's declared keys (a boolean column, or an integer
  column with declared bounds, has derived keys, as ``partition`` takes them);
* ``cuts={"age": [20, 40, 60]}`` for a numeric column: the cells are the intervals
  ``(-inf, 20)``, ``[20, 40)``, ``[40, 60)``, ``[60, inf)``, each closed on the left (a value
  at a cut point lands in the interval that starts there; ``-0.0`` is ``0``; ``±inf`` land in
  the end intervals). The labels are those texts.

**NULLs and values outside the domain.** A row lands in a cell of a marginal only when its
value in every column of that marginal is one of the column's cells: a value that is not a
declared key (NULL included, unless ``None`` is declared among the keys) is dropped from that
marginal, as ``partition`` drops it; a NULL or NaN of a cut column is dropped too, unless the
cut list holds ``None`` (``cuts={"age": [20, 40, 60, None]}``), which adds a cell ``None`` for
them. Engines read NaN as NULL, so this is the same on pandas, DuckDB and Spark. Nothing of the
domain is read off the data; a column with neither keys nor cuts is refused before any charge.

**Privacy.** Marginal ``i`` is a partition count: adding or removing one row of a frame of
stability ``s`` moves at most ``s`` of the marginal's counts, by one each (the cells are
disjoint), which is what the partition's charge covers: ``epsilon × s`` under Laplace noise
(scale ``1/epsilon`` per cell), the Gaussian charge at ``s`` with ``delta=``, ``s²·rho`` with
``rho=`` (discrete Gaussian of variance ``1/(2·rho)``,
:class:`~pinqpy.noise.mechanisms.marginal.ZcdpCountMechanism`); and with a frame bounded by
``bound_contributions(max_groups=G, max_rows_per_group=k, by=...)`` on exactly a marginal's
columns, the partition's group-bounded rule. The marginals are measured on the same rows, so
they compose sequentially: ``m`` marginals cost ``m`` such charges. ``epsilon`` (or ``rho``)
is per marginal, as a partition count's is per key.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pandas as pd

from pinqpy.accounting.agents import AllParts, RootAgent, flatten
from pinqpy.accounting.charges import usage_of
from pinqpy.accounting.cost import Cost, check_delta
from pinqpy.accounting.models import Usage
from pinqpy.errors import PinqError, PrivacyError
from pinqpy.expr.ast import Column
from pinqpy.noise.mechanisms.marginal import ZcdpCountMechanism, check_rho
from pinqpy.pipeline import prepare, run
from pinqpy.pipeline.relation import MAX_PARTITION_KEYS, Relation
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.meta import check_keys
from pinqpy.plan.nodes import PartitionRef
from pinqpy.results.format import _fmt
from pinqpy.results.marginals import Attribute, Marginals
from pinqpy.results.tables import NoisySeries

__all__ = [
    "MarginalsPlan", "charges", "cliques_of", "cost_text", "explain_lines", "measure",
    "plan_marginals",
]


@dataclass
class MarginalsPlan:
    """What a marginals call measures and charges, built from public facts only."""

    attributes: list[Attribute]
    cliques: list[tuple[str, ...]]
    items: list[tuple[prepare.Prepared, run.Target]]
    refs: list[tuple[Relation, PartitionRef]]


def cliques_of(cliques: object) -> list[tuple[str, ...]]:
    """The marginals' column tuples: a list of column names or tuples of names."""
    if isinstance(cliques, str) or not isinstance(cliques, Iterable):
        raise PinqError("marginals takes a list of marginals, each a tuple of column names")
    out: list[tuple[str, ...]] = []
    for c in cliques:
        cols = (c,) if isinstance(c, str) else tuple(c) if isinstance(c, Iterable) else ()
        if not cols or not all(isinstance(x, str) for x in cols) or len(set(cols)) != len(cols):
            raise PinqError(
                f"each marginal is a column name or a tuple of distinct column names, not {c!r}"
            )
        if any(set(cols) == set(o) for o in out):
            raise PinqError(f"the marginal {cols} is listed twice")
        out.append(cols)
    if not out:
        raise PinqError("marginals needs at least one marginal")
    return out


def _num(p: float) -> str:
    """A cut point as its label spells it: ``20`` for 20.0, else the shortest repr."""
    return str(int(p)) if p.is_integer() and abs(p) < 1e15 else repr(p)


def _cut_labels(points: tuple[float, ...]) -> list[str]:
    edges = [f"(-inf, {_num(points[0])})"]
    edges += [f"[{_num(a)}, {_num(b)})" for a, b in itertools.pairwise(points)]
    return [*edges, f"[{_num(points[-1])}, inf)"]


def _cut_points(name: str, points: object) -> tuple[tuple[float, ...], bool]:
    if isinstance(points, str) or not isinstance(points, Iterable):
        raise PinqError(f"cuts for {name!r} must be a list of numbers")
    values = list(points)
    null_cell = any(p is None for p in values)
    try:
        nums = tuple(float(p) for p in values if p is not None)
    except (TypeError, ValueError):
        raise PinqError(f"cuts for {name!r} must be numbers (and None for a NULL cell)") from None
    if isinstance(points, bool) or any(isinstance(p, bool) for p in values):
        raise PinqError(f"cuts for {name!r} must be numbers, not booleans")
    if not nums or not all(math.isfinite(p) for p in nums):
        raise PinqError(f"cuts for {name!r} must be one or more finite numbers")
    if any(b <= a for a, b in itertools.pairwise(nums)):
        raise PinqError(f"cuts for {name!r} must be strictly increasing")
    return tuple(p + 0.0 for p in nums), null_cell


def _case_sql(name: str, points: tuple[float, ...], labels: list[str]) -> str:
    col = Column(name).to_sql()
    whens = [f"WHEN {col} < {p!r} THEN '{lab}'" for p, lab in zip(points, labels, strict=False)]
    whens.append(f"WHEN {col} >= {points[-1]!r} THEN '{labels[-1]}'")
    return "CASE " + " ".join(whens) + " END"


def _attribute(rel: Relation, name: str, keys: Mapping[str, Any], cuts: Mapping[str, Any]):
    """The column's cells (canonical keys, or cut labels) and, for a cut, its CASE text."""
    if name in cuts:
        if name in keys:
            raise PinqError(f"{name!r} has both keys and cuts; give one")
        if rel.schema[name] not in ("int", "float"):
            raise PinqError(f"cuts need a numeric column; {name!r} is {rel.schema[name]}")
        points, null_cell = _cut_points(name, cuts[name])
        labels = _cut_labels(points)
        cells: tuple[Hashable, ...] = (*labels, None) if null_cell else tuple(labels)
        return Attribute(name, cells, points), _case_sql(name, points, labels)
    given = keys.get(name)
    found = list(given) if given is not None else rel.public_keys(name)
    if found is None:
        raise PrivacyError(
            f"marginals need a public domain for {name!r}: pass keys={{{name!r}: [...]}} or "
            f"cuts={{{name!r}: [...]}}, or declare its keys on the table; a domain is never "
            "read off the data (nothing was charged)"
        )
    canonical = check_keys(found, (name,), rel.schema)
    if not canonical:
        raise PinqError(f"the keys of {name!r} are empty")
    return Attribute(name, tuple(canonical), None), None


def _domain(
    rel: Relation, cliques: list[tuple[str, ...]], keys: Mapping[str, Any], cuts: Mapping[str, Any]
) -> tuple[Relation, list[Attribute]]:
    for what, m in (("keys", keys), ("cuts", cuts)):
        if not isinstance(m, Mapping):
            raise PinqError(f"{what} must be a mapping of column name to a list")
    names = list(dict.fromkeys(c for cl in cliques for c in cl))
    rel.check_columns(names)
    for extra in set(keys) | set(cuts):
        if extra not in names:
            raise PinqError(f"{extra!r} has keys or cuts but is in no marginal")
    attributes, cased = [], {}
    for name in names:
        attr, case = _attribute(rel, name, keys, cuts)
        attributes.append(attr)
        if case is not None:
            cased[name] = case
    return (rel.assign(cased) if cased else rel), attributes


def _mechanism(rel: Relation, epsilon: object, delta: object, rho: object) -> Any:
    """The count mechanism of each marginal (public parameters only), or None for
    :func:`prepare.prepare_count`'s own (epsilon, optional delta)."""
    if rho is None:
        if epsilon is None:
            raise PinqError("marginals need epsilon= (Laplace, or Gaussian with delta=) or rho=")
        return None
    if epsilon is not None:
        raise PinqError("give epsilon= or rho=, not both")
    r = check_rho(rho)
    if delta is not None:
        return ZcdpCountMechanism(r, check_delta(delta, "delta"))
    budgets = list(flatten(rel.lineage()))
    if any(getattr(b, "accounting", None) != "zcdp" for b in budgets):
        raise PrivacyError(
            "rho= is a zCDP charge: on a budget without accounting='zcdp' it needs delta= as "
            "well, for its (epsilon, delta) reading (nothing was charged)"
        )
    return ZcdpCountMechanism(r, min(Fraction(b.total.delta) for b in budgets))


def plan_marginals(
    rel: Relation,
    cliques: object,
    *,
    epsilon: object = None,
    delta: object = None,
    rho: object = None,
    keys: Mapping[str, Any] | None = None,
    cuts: Mapping[str, Any] | None = None,
) -> MarginalsPlan:
    """Every refusal that needs no data, and the prepared counts: nothing charged or read."""
    cl = cliques_of(cliques)
    binned, attributes = _domain(rel, cl, keys or {}, cuts or {})
    cells = {a.name: a.labels for a in attributes}
    mech = _mechanism(rel, epsilon, delta, rho)
    items, refs = [], []
    for clique in cl:
        size = math.prod(len(cells[c]) for c in clique)
        if size > MAX_PARTITION_KEYS:
            raise PrivacyError(
                f"the marginal {clique} has {size:,} cells; at most {MAX_PARTITION_KEYS:,}"
            )
        combos = list(itertools.product(*(cells[c] for c in clique)))
        ref, prel = binned.partition(clique, [k[0] for k in combos] if len(clique) == 1 else combos)
        if mech is None:
            p = prepare.prepare_count(prel, epsilon, delta)
        else:  # the same count, with rho's noise
            p = prepare.prepare_count(prel, 1, None)
            p.mechanism = mech
        agent = AllParts(prel.catalog.agent(ref.agent))
        items.append((p, (Grouping(ref.key_columns, ref.keys), {agent: Fraction(1)})))
        refs.append((prel, ref))
    return MarginalsPlan(attributes, cl, items, refs)


def _index(ref: PartitionRef) -> pd.Index:
    if len(ref.key_columns) == 1:
        return pd.Index(list(ref.keys), name=ref.key_columns[0], dtype=object)
    return pd.MultiIndex.from_tuples(list(ref.keys), names=list(ref.key_columns))


def measure(plan: MarginalsPlan, label: str | None = None) -> Marginals:
    """Charge every marginal in one transaction, then read and release them."""
    released = run.run_each(plan.items, label)
    measured = []
    for clique, (_prel, ref), (_values, acc) in zip(plan.cliques, plan.refs, released, strict=True):
        measured.append((clique, NoisySeries.from_release(acc, index=_index(ref))))
    return Marginals(plan.attributes, measured)


def charges(plan: MarginalsPlan) -> dict[Any, Usage]:
    """What the call charges each budget: each marginal's partition rule, summed."""
    total: dict[Any, Usage] = {}
    for p, (_g, lineage) in plan.items:
        for agent, k in lineage.items():
            part = agent.partition  # AllParts: the partition's parent pays its rule
            for parent, kk in part.parent_lineage.items():
                if isinstance(parent, RootAgent):
                    found = {parent: part.parent_usage(parent, usage_of(p.mechanism.charge, k))}
                else:  # a part of a partition: at most the group reading at its stability
                    found = {
                        root: usage_of(p.mechanism.charge, k * s)
                        for root, s in flatten({parent: kk}).items()
                    }
                for root, usage in found.items():
                    total[root] = total.get(root, Usage()) + usage
    return total


def cost_text(budget: Any, usage: Usage) -> str:
    """A charge as its budget counts it: rho on a zCDP budget, (epsilon, delta) otherwise."""
    if getattr(budget, "accounting", "") == "zcdp" and usage.rho is not None:
        return f"rho {float(usage.rho):.6g} (zCDP)"
    return repr(Cost(usage.epsilon, usage.delta))


def explain_lines(plan: MarginalsPlan, names: Mapping[Any, str]) -> list[str]:
    """EXPLAIN's text of a marginals call: each marginal's cells, noise and accuracy, and the
    charge to each budget (read from the partition rule, so it is what the call charges)."""
    lines = []
    for clique, (p, _t) in zip(plan.cliques, plan.items, strict=True):
        m = p.mechanism
        cells = math.prod(len(a.labels) for a in plan.attributes if a.name in clique)
        lines.append(
            f"Marginal ({', '.join(clique)}): {cells} cells, {m.describe()} per cell, "
            f"95% error ±{_fmt(m.accuracy(0.95))}"
        )
    for a in plan.attributes:
        domain = f"cuts at {', '.join(map(_num, a.cuts))}" if a.cuts else "public keys"
        lines.append(f"  {a.name}: {len(a.labels)} cells ({domain})")
    for budget, usage in charges(plan).items():
        name = names.get(budget) or getattr(budget, "name", None) or "budget"
        lines.append(f"{len(plan.cliques)} marginal(s) charge {cost_text(budget, usage)} to {name}")
    return lines
