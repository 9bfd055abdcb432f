"""Synthesize: choose which 2-way marginals to measure, privately, and measure them (MST).

``frame.synthesize(epsilon=..., columns=[...])`` follows MST (McKenna, Miklau & Sheldon 2021,
"Winning the NIST Contest: A scalable and general approach to differentially private
synthetic data"): measure every 1-way marginal, choose ``d - 1`` pairs of columns forming a
spanning tree by private selection (each step adds the pair worst explained so far among those
joining two parts of the tree), measure those pairs, and return the :class:`~pinqpy.Marginals`
of all of them, from which Private-PGM fits a tree-shaped model. Every measurement is a
partition count (:mod:`pinqpy.pipeline.marginals`), over the same public domain (keys, cuts).

**Budget split** (for ``d`` columns, ``r = d - 1`` tree edges), a third to each phase:

* zCDP (``rho=``, a total): each 1-way marginal gets ``rho/(3d)`` (discrete Gaussian of
  variance ``3d/(2·rho)``); each of the ``r`` selections is an ``eps_s``-DP choice with
  ``eps_s = sqrt(2·rho/(3r))`` rounded down, which is ``eps_s²/2 = rho/(3r)``-zCDP (Bun &
  Steinke 2016, Proposition 1.4); each chosen 2-way marginal gets ``rho/(3r)``. Total: rho.
* Laplace (``epsilon=``, a total): each 1-way marginal ``epsilon/(3d)``, each selection
  ``epsilon/(3r)``, each 2-way marginal ``epsilon/(3r)``. Total: epsilon (basic composition).

All of it is charged at once, in one transaction, before any data is read: ``epsilon ×
stability`` (or ``stability²·rho``) to the frame's budgets, like any measurement of it.

**Selection scores and their sensitivity.** For a candidate pair ``(i, j)`` the score is the
L1 distance ``Σ_cells |c_ij(cell) - e_ij(cell)|`` between the pair's exact counts ``c_ij``
(data, read by the engine) and the public estimate ``e_ij`` made from the noisy 1-way
marginals only: the product of the two noisy 1-way marginals, clipped at 0, normalised and
scaled to the mean of their totals, rounded to integers (post-processing of released values).
Adding or removing one row changes exactly one cell of ``c_ij`` by one (or none, when the row
falls outside the domain), so each score moves by at most 1: sensitivity 1 per row, and ``s``
rows for a frame of stability ``s`` (group privacy, charged as ``s·eps_s``). The scores are
read once, kept in this function, and passed only to the selection mechanism
(:class:`~pinqpy.noise.mechanisms.marginal.ScoreSelectionMechanism`: permute-and-flip with
coins ``exp(-eps_s·gap/2)``, epsilon-DP for sensitivity 1); only the chosen pairs are
released. ``max_degree`` is 2: higher-order marginals (AIM's) are not chosen here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from pinqpy.accounting.agents import charge_all, flatten
from pinqpy.accounting.charges import PureCharge, _sqrt_down, usage_of
from pinqpy.accounting.cost import check_epsilon
from pinqpy.accounting.models import Usage
from pinqpy.engines.registry import executor_for
from pinqpy.errors import PinqError
from pinqpy.noise.mechanisms.marginal import ScoreSelectionMechanism, check_rho
from pinqpy.pipeline import run
from pinqpy.pipeline.marginals import MarginalsPlan, charges, cost_text, plan_marginals
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.batch import batch
from pinqpy.results.marginals import Marginals
from pinqpy.results.tables import NoisySeries

__all__ = ["SynthesisPlan", "explain_lines", "plan_synthesis", "synthesize"]


@dataclass
class SynthesisPlan:
    """The three phases of a synthesis, built from public facts only."""

    relation: Relation
    columns: list[str]
    one_way: MarginalsPlan
    candidates: MarginalsPlan  # every pair of columns: read for the scores, two measured
    selection: ScoreSelectionMechanism
    pairs: list[tuple[str, str]]
    rounds: int
    keys: Mapping[str, Any]
    cuts: Mapping[str, Any]
    measure: dict[str, object]  # each 2-way marginal's epsilon/rho (and delta)


def _columns(columns: object) -> list[str]:
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise PinqError("synthesize needs columns=[...], a list of two or more column names")
    cols = list(columns)
    if len(cols) < 2 or len(set(cols)) != len(cols) or not all(isinstance(c, str) for c in cols):
        raise PinqError("synthesize needs columns=[...], two or more distinct column names")
    return cols


def _split(epsilon: object, rho: object, d: int, r: int) -> tuple[dict, dict, Fraction]:
    """Each 1-way measurement's, each 2-way measurement's parameters, and each selection's
    epsilon (see the module docstring)."""
    if (epsilon is None) == (rho is None):
        raise PinqError("synthesize needs epsilon= (a total, Laplace) or rho= (a total, zCDP)")
    if rho is not None:
        total = check_rho(rho)
        # sqrt is irrational: rounded down to 12 decimals (a smaller epsilon adds privacy)
        sel = Fraction(math.floor(_sqrt_down(2 * total / (3 * r)) * 10**12), 10**12)
        return {"rho": total / (3 * d)}, {"rho": total / (3 * r)}, sel
    eps = check_epsilon(epsilon, "epsilon")
    return {"epsilon": eps / (3 * d)}, {"epsilon": eps / (3 * r)}, eps / (3 * r)


def plan_synthesis(
    rel: Relation,
    columns: object,
    *,
    epsilon: object = None,
    rho: object = None,
    delta: object = None,
    keys: Mapping[str, Any] | None = None,
    cuts: Mapping[str, Any] | None = None,
    max_degree: int = 2,
) -> SynthesisPlan:
    """Every refusal that needs no data, and what each phase will measure and charge."""
    if max_degree != 2:
        raise PinqError(
            "synthesize chooses 2-way marginals (MST): max_degree must be 2; measure "
            "higher-order marginals with marginals([...]) instead"
        )
    cols = _columns(columns)
    d, r = len(cols), len(cols) - 1
    one, two, sel = _split(epsilon, rho, d, r)
    kw = {"keys": keys or {}, "cuts": cuts or {}, "delta": delta}
    one_way = plan_marginals(rel, [(c,) for c in cols], **one, **kw)
    pairs = list(itertools.combinations(cols, 2))
    candidates = plan_marginals(rel, pairs, **two, **kw)
    selection = ScoreSelectionMechanism(sel, len(pairs))
    return SynthesisPlan(
        rel, cols, one_way, candidates, selection, pairs, r, kw["keys"], kw["cuts"],
        {**two, "delta": delta},
    )


def _charge(plan: SynthesisPlan, label: str) -> None:
    """One transaction for the three phases: the 1-way counts through their partitions, the
    selections and the 2-way counts at the frame's own stability (what a partition count of
    a not group-bounded frame costs; never less)."""
    base = plan.candidates.refs[0][0].lineage()
    requests = [(lin, p.mechanism.charge) for p, (_g, lin) in plan.one_way.items]
    requests += [(base, PureCharge(plan.selection.epsilon))] * plan.rounds
    requests += [(base, plan.candidates.items[0][0].mechanism.charge)] * plan.rounds
    for p, _t in plan.one_way.items + plan.candidates.items[:1]:
        if p.check is not None:
            p.check()
    charge_all(requests, label=label)


def _estimate(one_way: list[NoisySeries]) -> np.ndarray:
    """The independent estimate of a pair from its noisy 1-way counts (public values)."""
    p = [np.clip(np.asarray(s.values, dtype=np.float64), 0, None) for s in one_way]
    total = float(np.mean([np.asarray(s.values, dtype=np.float64).sum() for s in one_way]))
    q = [x / x.sum() if x.sum() > 0 else np.full(len(x), 1 / len(x)) for x in p]
    return np.rint(np.outer(q[0], q[1]).reshape(-1) * max(total, 0.0)).astype(np.int64)


def _scores(plan: SynthesisPlan, one_way: dict[str, NoisySeries]) -> np.ndarray:
    """Each candidate pair's integer L1 score (reads data: called only inside the charge)."""
    out = []
    items, refs = plan.candidates.items, plan.candidates.refs
    for (_p, (grouping, _lin)), (rel, _ref), (a, b) in zip(items, refs, plan.pairs, strict=True):
        ex = executor_for(rel.plan, rel.catalog)
        counts = np.asarray(ex.count(rel.plan, grouping), dtype=np.int64).reshape(-1)
        est = _estimate([one_way[a], one_way[b]])
        out.append(int(np.abs(counts - est).sum()))
    return np.asarray(out, dtype=np.int64)


def _tree(plan: SynthesisPlan, scores: np.ndarray) -> list[tuple[str, str]]:
    """Kruskal's spanning tree with each edge chosen privately among those that join two
    components (only the choices leave this function)."""
    component = {c: i for i, c in enumerate(plan.columns)}
    chosen: list[tuple[str, str]] = []
    for _ in range(plan.rounds):
        open_ = [i for i, (a, b) in enumerate(plan.pairs) if component[a] != component[b]]
        pick = ScoreSelectionMechanism(plan.selection.epsilon, len(open_))
        idx, _acc = pick.release(scores[open_])
        a, b = plan.pairs[open_[int(idx[0])]]
        old, new = component[b], component[a]
        component = {c: new if k == old else k for c, k in component.items()}
        chosen.append((a, b))
    return chosen


def synthesize(plan: SynthesisPlan, label: str = "synthesize") -> Marginals:
    """Charge everything, measure the 1-way marginals, choose the tree, measure its pairs."""
    _charge(plan, label)
    with batch():
        released = [run.run([p], t, charged=True)[0] for p, t in plan.one_way.items]
        one_way = {}
        for (c,), (_prel, ref), (_v, acc) in zip(
            plan.one_way.cliques, plan.one_way.refs, released, strict=True
        ):
            one_way[c] = NoisySeries.from_release(acc, index=list(ref.keys))
        with run.reading("synthesize's selection"):
            scores = _scores(plan, one_way)
            tree = _tree(plan, scores)
        del scores
        measured = [((c,), one_way[c]) for c in plan.columns]
        for a, b in tree:
            i = plan.pairs.index((a, b))
            p, t = plan.candidates.items[i]
            _v, acc = run.run([p], t, charged=True)[0]
            ref = plan.candidates.refs[i][1]
            measured.append(((a, b), NoisySeries.from_release(acc, index=_pair_index(ref))))
    return Marginals(plan.one_way.attributes, measured)


def _pair_index(ref: Any) -> Any:
    import pandas as pd

    return pd.MultiIndex.from_tuples(list(ref.keys), names=list(ref.key_columns))


def total_charges(plan: SynthesisPlan) -> dict[Any, Usage]:
    """What the synthesis charges each budget: the 1-way partitions' rule, plus the
    selections and the 2-way counts at the frame's stability to each budget."""
    total = charges(plan.one_way)
    two = plan.candidates.items[0][0].mechanism.charge
    for root, k in flatten(plan.candidates.refs[0][0].lineage()).items():
        for _ in range(plan.rounds):
            total[root] = total.get(root, Usage()) + usage_of(PureCharge(plan.selection.epsilon), k)
            total[root] = total[root] + usage_of(two, k)
    return total


def explain_lines(plan: SynthesisPlan, names: Mapping[Any, str]) -> list[str]:
    """EXPLAIN's text of a synthesis: the split, each phase's mechanism, the total charge."""
    one = plan.one_way.items[0][0].mechanism
    two = plan.candidates.items[0][0].mechanism
    d, r = len(plan.columns), plan.rounds
    lines = [
        f"Synthesize (MST) over {d} columns: {', '.join(plan.columns)}",
        f"  1/3: {d} one-way marginals, {one.describe()} per cell",
        f"  1/3: {r} private choice(s) of a pair among {len(plan.pairs)} candidates, "
        f"{plan.selection.describe()} each (L1 score, sensitivity 1 per row)",
        f"  1/3: {r} chosen two-way marginal(s), {two.describe()} per cell",
    ]
    for budget, usage in total_charges(plan).items():
        name = names.get(budget) or getattr(budget, "name", None) or "budget"
        lines.append(f"Charges {cost_text(budget, usage)} to {name}, all before any data is read")
    return lines
