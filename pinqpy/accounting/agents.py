"""PINQ's privacy agents: how a query's charge flows to the budgets it draws on.

A frame's *lineage* maps each agent it draws on directly (a root :class:`Budget`, or one part
of a partition) to a stability ``k``: how many of the frame's rows one privacy unit of that
agent can change. An aggregation with charge ``c`` asks every agent in its lineage for its
:class:`~pinqpy.accounting.models.Usage` at ``k`` (``k·epsilon`` for pure DP, ``k²·rho`` in zCDP,
group privacy for delta), and each budget's accounting model decides whether it fits.

Charging is a transaction. Every agent records what it would do in a :class:`Transaction`;
only when every root budget accepts its total does anything change. So a query over two
sources that fits one and not the other charges neither, and a refused query changes no state
anywhere. The check runs before the executor is called, so a refused query reads no data.

Partition (parallel composition) follows PINQ's partition agent: each part keeps its own
running total, and the parent is charged only when the largest part total grows, by exactly
that growth (times the partitioned frame's stability). Parts that a query charges all at once
(``parts.count(...)``) add to a shared base, which keeps the bookkeeping O(1) however many keys
there are.

A frame bounded with ``bound_groups(by, G, k)`` and split on exactly its ``by`` columns tells
the partition agent more: one unit touches at most ``G`` parts, at most ``k`` rows each, and
its parent is charged the composition of ``G`` parts at stability ``k`` rather than one part
at ``G·k`` (:meth:`PartitionAgent.parent_usage`): the same under pure DP, ``G`` times less in
zCDP.

A table whose row count is public draws on its budget through a :class:`ChangedRowView`: its
neighbours differ in one changed row, two rows of stability.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

from pinqpy.accounting.charges import usage_of
from pinqpy.accounting.cost import Cost
from pinqpy.accounting.models import Usage
from pinqpy.errors import BudgetExceededError

__all__ = [
    "AllParts",
    "ChangedRowView",
    "Charge",
    "PartAgent",
    "PartitionAgent",
    "RootAgent",
    "Scaled",
    "Transaction",
    "charge",
    "charge_all",
]

# One lock for all accounting: charges are microseconds, so contention is not a concern, and a
# single lock cannot deadlock across budgets.
_LOCK = threading.RLock()


class Charge(Protocol):
    """What an aggregation asks for (a mechanism's charge; see ``usage_of``)."""

    def at(self, k: Fraction) -> object: ...


class Agent(Protocol):
    def _prepare(self, usage: Usage, txn: Transaction) -> None: ...


class RootAgent(ABC):
    """An agent that charges end at: :class:`~pinqpy.accounting.budget.Budget`.

    What the charging walk below needs of a root: whether a usage still fits, how to commit
    it, and how it is kept in a ledger (``_ledger`` is None when it is not).
    """

    _ledger: object
    _ledger_name: str

    def _prepare(self, usage: Usage, txn: Transaction) -> None:
        txn.demand(self, usage)

    @property
    @abstractmethod
    def total(self) -> Cost: ...

    @property
    @abstractmethod
    def remaining(self) -> Cost: ...

    @abstractmethod
    def _fits(self, usage: Usage) -> bool: ...

    @abstractmethod
    def _commit(self, usage: Usage, label: str) -> None: ...

    @abstractmethod
    def _ledger_cost(self, usage: Usage) -> Cost: ...

    @abstractmethod
    def _ledger_limit(self) -> Cost: ...


@dataclass
class _PartitionState:
    base: Usage
    extra: dict[Hashable, Usage]
    maximum: Usage


@dataclass
class Transaction:
    """Pending effects of one charge; applied all together or not at all."""

    roots: dict[RootAgent, Usage] = field(default_factory=dict)
    partitions: dict[PartitionAgent, _PartitionState] = field(default_factory=dict)

    def demand(self, budget: RootAgent, usage: Usage) -> None:
        prev = self.roots.get(budget)
        self.roots[budget] = usage if prev is None else prev + usage

    def state_of(self, partition: PartitionAgent) -> _PartitionState:
        st = self.partitions.get(partition)
        if st is None:
            st = _PartitionState(partition._base, dict(), partition._max)
            self.partitions[partition] = st
        return st


class PartitionAgent:
    """The shared state behind one ``partition(...)`` call.

    ``parent_lineage`` is the lineage of the frame that was partitioned. A part's total is
    ``base + extra[key]``; the parent has been charged ``maximum.at(K)`` for each parent agent
    of stability ``K``, where ``maximum`` is the componentwise largest part total so far.

    The rule needs every read through the parts to see parts of one dataset. A partitioned
    frame that keeps rows chosen at random (a bounded join, ``bound_contributions``) sees
    one, because every read through one partition draws that partition's fixed salts, for
    which the frame is a deterministic function of the data of the same stability
    (derivation: :mod:`pinqpy.plan.salts`).
    """

    def __init__(
        self,
        parent_lineage: Mapping[object, Fraction],
        *,
        max_parts_per_unit: Mapping[object, tuple[int, Fraction]] | None = None,
    ):
        self.parent_lineage = dict(parent_lineage)
        self.max_parts_per_unit: dict[object, tuple[int, Fraction]] = {}
        for agent, (g, k) in (max_parts_per_unit or {}).items():
            if agent not in self.parent_lineage:
                raise ValueError("max_parts_per_unit names an agent the parent does not draw on")
            if not (isinstance(g, int) and g >= 1 and Fraction(k) > 0):
                raise ValueError("max_parts_per_unit needs G >= 1 and a positive per-part k")
            self.max_parts_per_unit[agent] = (g, Fraction(k))
        self._base = Usage()
        self._extra: dict[Hashable, Usage] = {}
        self._max = Usage()

    def parent_usage(self, agent: object, part_max: Usage) -> Usage:
        """What ``agent`` of the parent pays when the largest part total is ``part_max``.

        By default PINQ's rule, ``part_max.at(K)`` for the parent's stability ``K``: one unit
        changes at most ``K`` rows of all the parts together, and each part's total at a
        group of ``j`` rows is at most ``part_max.at(j)``, which is largest when all ``K`` rows
        are in one part.

        With ``max_parts_per_unit[agent] = (G, k)`` (the frame is group-bounded and split on
        exactly its group columns; :func:`pinqpy.plan.stability.unit_spread`) one unit has
        rows in at most ``G`` parts, at most ``k`` in each, ``K`` in all. The parts are
        disjoint pieces of the data, so the unit's loss is the sequential composition of the
        parts it touches, ``sum_i part_max.at(k_i)`` over ``k_i <= k``, at most ``G`` of them,
        ``sum k_i <= K``. Each component of ``Usage.at(j)`` is convex in ``j`` (``j·epsilon``,
        ``j²·rho``, ``j·e^{(j-1)epsilon}·delta``), so the sum is largest with the rows packed:
        ``q = min(G, floor(K/k))`` parts at ``k`` and one at the rest ``r = K - q·k`` when
        ``q < G``. For ``K = G·k`` that is ``G·part_max.at(k)``: ``G·k·epsilon`` (as PINQ's
        rule) and ``G·k²·rho``, the zCDP cost of the L2 sensitivity ``sqrt(G)·k``, instead of
        ``(G·k)²·rho``.
        """
        big_k = self.parent_lineage[agent]
        spread = self.max_parts_per_unit.get(agent)
        if spread is None:
            return part_max.at(big_k)
        g, k = spread
        q = min(g, int(Fraction(big_k) // k))
        total = Usage()
        for _ in range(q):
            total = total + part_max.at(k)
        rest = Fraction(big_k) - q * k
        if q < g and rest > 0:
            total = total + part_max.at(rest)
        return total

    def part_total(self, key: Hashable) -> Usage:
        return self._base + self._extra.get(key, Usage())

    def _raise_max(self, st: _PartitionState, candidate: Usage, txn: Transaction) -> None:
        new_max = st.maximum.max(candidate)
        if new_max == st.maximum:
            return
        old_max, st.maximum = st.maximum, new_max
        for agent in self.parent_lineage:
            increment = self.parent_usage(agent, new_max) - self.parent_usage(agent, old_max)
            if not increment.is_zero:
                agent._prepare(increment, txn)

    def _prepare_part(self, key: Hashable, cost: Usage, txn: Transaction) -> None:
        st = txn.state_of(self)
        total = st.extra.get(key, self._extra.get(key, Usage())) + cost
        st.extra[key] = total
        self._raise_max(st, st.base + total, txn)

    def _prepare_all(self, cost: Usage, txn: Transaction) -> None:
        st = txn.state_of(self)
        st.base = st.base + cost
        # Every part grows by the same cost, so the largest grows by exactly that cost.
        self._raise_max(st, st.maximum + cost, txn)

    def _apply(self, st: _PartitionState) -> None:
        self._base = st.base
        self._extra.update(st.extra)
        self._max = st.maximum


@dataclass(frozen=True, eq=False)
class PartAgent:
    """The agent of one part: forwards its charges to the partition's max rule."""

    partition: PartitionAgent
    key: Hashable

    def _prepare(self, usage: Usage, txn: Transaction) -> None:
        self.partition._prepare_part(self.key, usage, txn)


@dataclass(frozen=True, eq=False)
class Scaled:
    """``agent`` read at ``factor`` times the stability.

    It stands for a view whose privacy units are each worth ``factor`` units of ``agent``:
    a row-level table read per unit for one query is such a view with factor 2, since a
    changed row is its unit leaving and coming back. A lineage resolves through it
    (:meth:`pinqpy.plan.catalog.Catalog.resolve`): a frame of stability ``k`` over the view
    is a frame of stability ``factor·k`` over ``agent``, so its charge is the mechanism's
    own ``charge.at(factor·k)``, exactly as for any frame of that stability (a key
    selection keeps its threshold's delta there, where the generic group rule would not).
    Charged as an agent (a partition over the view forwards its parent's usage here), the
    usage is taken at ``factor`` by the generic rule of :meth:`Usage.at`, which is sound
    for every mechanism."""

    agent: RootAgent | PartAgent | AllParts | Scaled
    factor: Fraction

    def _prepare(self, usage: Usage, txn: Transaction) -> None:
        self.agent._prepare(usage.at(self.factor), txn)


@dataclass(frozen=True, eq=False)
class ChangedRowView(Scaled):
    """A table whose row count its curator declared public, as its budget sees it.

    Declaring the count public changes the table's neighbour relation to bounded DP's:
    neighbouring tables have the same number of rows and differ in **one row changed** (on a
    user-level table, one person's rows replaced by one person's rows, the row count
    kept), never in one row added or removed. Every stability rule
    (:mod:`pinqpy.plan.stability`) counts rows added or removed, and a changed row is one
    row removed and one added: two such steps. So the view is its budget at factor 2: a
    frame of stability ``s`` over the table is charged as stability ``2·s`` (each
    mechanism's own ``charge.at(2·s)``: ``2·s·epsilon``, ``(2·s)²·rho``, group privacy for
    delta). A partition of it charges its parent PINQ's largest part at ``K = 2·s``
    (:meth:`PartitionAgent.parent_usage`): the removal changes at most ``s`` rows of the
    parts and the addition at most ``s``, anywhere. When they fall in two parts (a row moved
    from part A to part B, ``s = 1``) the loss is ``2·part_max.at(1)``; when they fall in one
    part it is ``part_max.at(2)``, which is at least that (each component of ``Usage.at`` is
    convex and 0 at 0), so the largest-part rule at 2 bounds both: exact under pure DP
    (``2·epsilon``, a histogram's L1 of 2), and in zCDP the ``4·rho`` of one part moved by two
    rows (a histogram alone, whose L2 is ``√2``, would need ``2·rho``). Spreading the rule as
    ``max_parts_per_unit`` ``(G=2, k=s)`` would miss the one-part case. Mechanisms that read
    exactly the table's rows calibrate their noise to their own change-one-row sensitivity
    (:func:`pinqpy.pipeline.prepare.changed_row_frame`), which the factor 2 then charges
    exactly."""

    def __post_init__(self) -> None:
        if self.factor != 2:
            raise ValueError("a changed row is two rows of stability: the factor is 2")


@dataclass(frozen=True, eq=False)
class AllParts:
    """The agent for an aggregation over every part at once (``parts.count(...)``)."""

    partition: PartitionAgent

    def _prepare(self, usage: Usage, txn: Transaction) -> None:
        self.partition._prepare_all(usage, txn)


def charge(lineage: Mapping[Agent, Fraction], request: Charge, *, label: str = "query") -> Usage:
    """Charge ``request`` to every agent of ``lineage`` atomically; return the root total.

    Raises :class:`~pinqpy.BudgetExceededError` with every budget untouched when any root
    budget would be overspent.
    """
    return charge_all([(lineage, request)], label=label).usage


@dataclass
class Receipt:
    """What a charge did: its total usage, and its query id in each ledger it was kept in."""

    usage: Usage
    queries: dict[object, int] = field(default_factory=dict)


def charge_all(
    requests: list[tuple[Mapping[Agent, Fraction], Charge]],
    *,
    label: str = "query",
    plan: str = "",
    cache_key: str | None = None,
) -> Receipt:
    """Charge several requests (one per aggregate of a query) as one transaction.

    Budgets kept in a ledger are charged in the ledger's own transaction (which re-checks
    what every process has spent under the file's write lock) before anything changes in
    memory and before any data is read. Budgets in different ledger files are each charged
    atomically; if a later file refuses, the earlier ones keep their charge (an over-count,
    never an overspend).
    """
    with _LOCK:
        txn = Transaction()
        for lineage, request in requests:
            for agent, k in lineage.items():
                agent._prepare(usage_of(request, k), txn)
        for budget, usage in txn.roots.items():
            if not budget._fits(usage):
                _raise_exceeded(budget, usage.cost)
        receipt = Receipt(Usage())
        by_ledger: dict[object, list[tuple[RootAgent, Usage]]] = {}
        for budget, usage in txn.roots.items():
            if budget._ledger is not None:
                by_ledger.setdefault(budget._ledger, []).append((budget, usage))
        if by_ledger:
            from pinqpy.accounting.ledger import ChargeRecord

            record = ChargeRecord(label, plan, cache_key)
            for ledger, items in by_ledger.items():
                entries = [(b._ledger_name, b._ledger_cost(u)) for b, u in items]
                limits = {b._ledger_name: b._ledger_limit() for b, _ in items}
                query_id = ledger.charge(entries, record, limits)  # type: ignore[attr-defined]
                if query_id is None:  # another process spent it first
                    budget, usage = items[0]
                    _raise_exceeded(budget, usage.cost)
                receipt.queries[ledger] = query_id
        for partition, st in txn.partitions.items():
            partition._apply(st)
        for budget, usage in txn.roots.items():
            budget._commit(usage, label)
            receipt.usage = receipt.usage + usage
        return receipt


def flatten(lineage: Mapping[object, Fraction]) -> dict[RootAgent, Fraction]:
    """The stability of a frame with respect to each root budget.

    A part is as stable as the frame it was cut from; paths through several agents to the
    same budget add up. This is the figure ``PrivateFrame.stabilities`` reports, and an upper
    bound on what one query costs each budget per unit of epsilon.
    """
    out: dict[RootAgent, Fraction] = {}
    for agent, k in lineage.items():
        if isinstance(agent, RootAgent):
            out[agent] = out.get(agent, Fraction(0)) + k
        elif isinstance(agent, PartAgent | AllParts):
            for b, kk in flatten(agent.partition.parent_lineage).items():
                out[b] = out.get(b, Fraction(0)) + k * kk
        else:  # pragma: no cover - defensive
            raise TypeError(f"unknown agent {type(agent).__name__}")
    return out


def _raise_exceeded(budget: RootAgent, requested: Cost) -> None:
    rem = budget.remaining
    name = getattr(budget, "name", None)  # which budget refused (the server logs it)
    if requested.delta > 0 and budget.total.delta == 0:
        fix = "create the Budget with a delta, or leave out delta= to use the Laplace mechanism"
        raise BudgetExceededError(
            f"this query needs delta, but its budget has a delta of 0; {fix}",
            requested=requested,
            remaining=rem,
            budget=name,
            hints={
                "python": fix,
                "magic": fix.replace("delta=", "-d"),
                "shell": "start the shell with a delta budget (--delta D), or leave out the "
                "delta (.delta 0, no OPTIONS (delta = ...)) to use the Laplace mechanism",
                "cli": "give the table a delta budget (--delta D), or leave out the delta "
                "(--delta-per-query, OPTIONS (delta = ...)) to use the Laplace mechanism",
            },
        )
    python = (
        f"the query needs {requested!r} but only {rem!r} remains (nothing was charged); ask "
        "with a smaller epsilon or use a fresh budget"
    )
    # The other interfaces speak of numbers and their own flags, not of Cost objects.
    plain = (
        f"the query needs {_cost_words(requested)} but only {_cost_words(rem)} remains "
        "(nothing was charged); "
    )
    raise BudgetExceededError(
        f"privacy budget exceeded: {python}",
        requested=requested,
        remaining=rem,
        budget=name,
        hints={
            "python": python,
            "magic": plain + "ask with a smaller -e E or use a fresh budget",
            "shell": plain + "set a smaller .epsilon E (or OPTIONS (epsilon = ...)), or keep a "
            "fresh budget in another ledger (--ledger PATH)",
            "cli": plain + "pass a smaller --epsilon-per-query E (or OPTIONS (epsilon = "
            "...)), or keep a fresh budget in another ledger (--ledger PATH)",
        },
    )


def _cost_words(cost: Cost) -> str:
    """``epsilon 0.1`` (and ``, delta 1e-06`` when there is one)."""
    text = f"epsilon {cost.epsilon}"
    return text + (f", delta {float(cost.delta):g}" if cost.delta else "")
