"""SQL's ``SELECT MARGINALS``: several noisy marginals over a public domain, in one statement.

``SELECT MARGINALS (age, sex), (sex, employed) FROM people OPTIONS (epsilon = 1)`` measures each
listed marginal as the Python ``frame.marginals(...)`` does (:mod:`pinqpy.pipeline.marginals`)
and returns a :class:`~pinqpy.Marginals`; ``EXPLAIN SELECT MARGINALS ...`` says what it would
measure and charge, and charges nothing.

* A column's cells are the table's declared keys, an inline list ``sex IN (1, 2)`` (``NULL``
  among them for a cell of NULLs), or cut points ``CUT(age, 20, 40, 60)`` (intervals closed on
  the left; a ``NULL`` among the points adds a cell of NULLs). Given once, a column's domain
  holds for every marginal it is in.
* ``WHERE`` filters the rows first (a stable transformation, stability 1).
* As for every SQL query, ``epsilon`` (the argument or ``OPTIONS``) is the **total** the
  statement charges: split equally over the marginals and divided by the table's stability,
  so ``m`` marginals at stability ``s`` each get ``epsilon/(m·s)``. With ``delta`` each marginal
  is a Gaussian count at ``(epsilon/(m·s), delta/m)`` (stability 1 only, as GROUP BY's Gaussian
  noise). ``OPTIONS (rho = 0.1)`` instead is a zCDP total: each marginal gets the discrete
  Gaussian of ``rho/(m·s²)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pinqpy.accounting.agents import flatten
from pinqpy.accounting.cost import Cost, check_delta, check_epsilon
from pinqpy.core.exact import to_fraction
from pinqpy.errors import PinqError, PinqSyntaxError, PrivacyError
from pinqpy.noise.mechanisms.marginal import check_rho
from pinqpy.pipeline import marginals as _marginals
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.stability import INF
from pinqpy.results.marginals import Marginals
from pinqpy.sql import ast as q
from pinqpy.sql.compiler import resolve_table
from pinqpy.sql.explain import Explanation

__all__ = ["CompiledMarginals", "compile_marginals", "run_marginals"]

#: The options SELECT MARGINALS reads.
OPTIONS = ("epsilon", "delta", "rho")


@dataclass
class CompiledMarginals:
    """A checked SELECT MARGINALS: what it measures and charges (nothing charged yet)."""

    plan: _marginals.MarginalsPlan
    explain: bool
    table: str


def _table(frames: Mapping[str, Relation], statement: q.MarginalsQuery, text: str) -> str:
    found = resolve_table(list(frames), statement.table.path)
    if len(found) != 1:
        written = ".".join(p for p, _ in statement.table.path)
        why = "is ambiguous" if found else "is not a private table"
        raise PinqSyntaxError(f"table {written!r} {why}", text=text)
    return found[0]


def _domain(statement: q.MarginalsQuery) -> tuple[list[tuple[str, ...]], dict, dict]:
    """The marginals' columns, and each column's inline keys or cuts (given once)."""
    keys: dict[str, tuple] = {}
    cuts: dict[str, tuple] = {}
    cliques = []
    for marginal in statement.marginals:
        cliques.append(tuple(c.name for c in marginal))
        for c in marginal:
            for given, into in ((c.keys, keys), (c.cuts, cuts)):
                if given is None:
                    continue
                if into.get(c.name, given) != given or (c.name in keys and c.name in cuts):
                    raise PinqError(f"the domain of {c.name!r} is given twice, differently")
                into[c.name] = given
    return cliques, keys, cuts


def _total(name: str, arg: object, options: Mapping[str, object]) -> object:
    opt = options.get(name)
    if arg is not None and opt is not None and to_fraction(arg) != to_fraction(opt):
        raise PrivacyError(f"{name} is given twice, as an argument and in OPTIONS, differently")
    return arg if arg is not None else opt


def _split(rel: Relation, m: int, epsilon: object, delta: object, rho: object) -> dict[str, Any]:
    """Each marginal's parameters from the statement's totals (see the module docstring)."""
    ks = flatten(rel.lineage()).values()
    if any(k == INF for k in ks):
        raise PrivacyError(
            "SELECT MARGINALS on a table of unbounded contributions: register it with "
            "max_rows (or bound_contributions) first"
        )
    s = max((Fraction(k) for k in ks), default=Fraction(1))
    dlt = None if delta in (None, 0) else check_delta(delta, "delta") / m
    if rho is not None:
        if epsilon is not None:
            raise PrivacyError("give epsilon or rho, not both")
        return {"rho": check_rho(rho) / (m * s * s), "delta": dlt}
    if epsilon is None:
        raise PrivacyError("SELECT MARGINALS needs an epsilon: OPTIONS (epsilon = 1), or rho")
    if dlt is not None and s != 1:
        raise PrivacyError("Gaussian marginals (a delta) need a table of stability 1")
    return {"epsilon": check_epsilon(epsilon, "epsilon") / (m * s), "delta": dlt}


def compile_marginals(
    frames: Mapping[str, Relation],
    statement: q.MarginalsQuery,
    text: str,
    epsilon: object,
    delta: object,
) -> CompiledMarginals:
    """Every refusal that needs no data; nothing is charged or read."""
    options = dict(statement.options)
    for name in options:
        if name not in OPTIONS:
            raise PinqSyntaxError(
                f"unknown option {name!r} for SELECT MARGINALS; known: {', '.join(OPTIONS)}",
                text=text,
            )
    table = _table(frames, statement, text)
    rel = frames[table]
    if statement.where is not None:
        rel = rel.where(statement.where)
    cliques, keys, cuts = _domain(statement)
    params = _split(
        rel,
        len(cliques),
        _total("epsilon", epsilon, options),
        _total("delta", delta, options),
        options.get("rho"),
    )
    plan = _marginals.plan_marginals(rel, cliques, keys=keys, cuts=cuts, **params)
    return CompiledMarginals(plan, statement.explain, table)


def run_marginals(
    compiled: CompiledMarginals, names: Mapping[Any, str], label: str
) -> Marginals | Explanation:
    """Measure (one transaction), or EXPLAIN without charging."""
    if compiled.explain:
        out = Explanation("\n".join(_marginals.explain_lines(compiled.plan, names)))
        out.charges = {
            names.get(b, "budget"): Cost(u.epsilon, u.delta)
            for b, u in _marginals.charges(compiled.plan).items()
        }
        return out
    return _marginals.measure(compiled.plan, label)
