"""``frame.marginals(...)`` and ``frame.synthesize(...)``: the Python spelling of measuring
noisy marginals over a public domain (:mod:`pinqpy.pipeline.marginals`) and of choosing them
with MST (:mod:`pinqpy.pipeline.synthesize`). Both return a :class:`~pinqpy.Marginals`, or with
``explain=True`` what they would measure and charge, without charging or reading anything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pinqpy.accounting.cost import Cost
from pinqpy.pipeline import marginals as _marginals
from pinqpy.pipeline import synthesize as _synthesize
from pinqpy.pipeline.relation import Relation
from pinqpy.results.marginals import Marginals
from pinqpy.sql.explain import Explanation

__all__ = ["measure_marginals", "synthesize"]


def _explanation(lines: list[str], charges: Mapping[Any, Any]) -> Explanation:
    out = Explanation("\n".join(lines))
    out.charges = {
        getattr(b, "name", None) or "budget": Cost(u.epsilon, u.delta) for b, u in charges.items()
    }
    return out


def measure_marginals(
    rel: Relation,
    cliques: Iterable[Any],
    *,
    epsilon: object,
    delta: object,
    rho: object,
    keys: Mapping[str, Any] | None,
    cuts: Mapping[str, Any] | None,
    explain: bool,
    names: Mapping[Any, str] | None = None,
) -> Marginals | Explanation:
    plan = _marginals.plan_marginals(
        rel, cliques, epsilon=epsilon, delta=delta, rho=rho, keys=keys, cuts=cuts
    )
    if explain:
        return _explanation(_marginals.explain_lines(plan, names or {}), _marginals.charges(plan))
    return _marginals.measure(plan)


def synthesize(
    rel: Relation,
    columns: Iterable[str],
    *,
    epsilon: object,
    rho: object,
    delta: object,
    keys: Mapping[str, Any] | None,
    cuts: Mapping[str, Any] | None,
    max_degree: int,
    explain: bool,
) -> Marginals | Explanation:
    plan = _synthesize.plan_synthesis(
        rel, columns, epsilon=epsilon, rho=rho, delta=delta, keys=keys, cuts=cuts,
        max_degree=max_degree,
    )
    if explain:
        lines = _synthesize.explain_lines(plan, {})
        return _explanation(lines, _synthesize.total_charges(plan))
    return _synthesize.synthesize(plan)
