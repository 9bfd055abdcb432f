"""The root privacy agent: a :class:`Budget` that charges are drawn from.

All arithmetic is exact (:class:`fractions.Fraction`). A charge is checked against every
budget it touches before any of them changes and before any data is read; see
:mod:`pinqpy.accounting.agents` for how charges flow from a query to its budgets.

>>> import pinqpy as pq
>>> b = pq.Budget(epsilon=1.0)
>>> for _ in range(10):
...     b._charge_exact(pq.Cost(epsilon=0.1))
>>> b.remaining.epsilon == 0
True
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from fractions import Fraction

from pinqpy.accounting.agents import RootAgent, charge
from pinqpy.accounting.cost import Cost, _check_epsilon, _short
from pinqpy.accounting.models import Usage, accountant_for
from pinqpy.core.exact import Exact, to_fraction
from pinqpy.core.lru import LRU
from pinqpy.errors import PinqError
from pinqpy.results.html import budget_html
from pinqpy.results.panels import Amount, BudgetPanel
from pinqpy.results.plots import spending_plot

__all__ = ["Budget", "budget_panel", "observe_charges"]

#: Who is told of the charges committed in the current context (see observe_charges).
_OBSERVERS: ContextVar[tuple[Callable[[Budget, Usage], None], ...]] = ContextVar(
    "pinqpy_charge_observers", default=()
)


@contextlib.contextmanager
def observe_charges(observer: Callable[[Budget, Usage], None]) -> Iterator[None]:
    """Call ``observer(budget, usage)`` for every charge committed to a :class:`Budget` in
    this context (this thread, or this asyncio task) while the block runs.

    It is called once per budget a charge touches, after the charge is committed (in the
    ledger too, when the budget keeps one) and before any data is read; ``usage`` is what
    the budget was charged, in every model at once (:class:`~pinqpy.accounting.models.Usage`).
    It only watches: an error in it is ignored, so it can never interrupt or undo a charge.
    The server's request log uses it to say what each request charged.

    >>> seen = []
    >>> b = Budget(epsilon=1)
    >>> with observe_charges(lambda budget, usage: seen.append(usage.epsilon)):
    ...     b._charge_exact(Cost(epsilon=0.25))
    >>> seen
    [Fraction(1, 4)]
    """
    token = _OBSERVERS.set((*_OBSERVERS.get(), observer))
    try:
        yield
    finally:
        _OBSERVERS.reset(token)


class Budget(RootAgent):
    """The root privacy agent: a total (epsilon, delta) that charges are drawn from.

    Parameters
    ----------
    epsilon:
        Total epsilon, a positive finite number. Floats are read by their decimal spelling.
    delta:
        Total delta, in ``[0, 1)``. Zero (the default) allows only pure-DP mechanisms.
    accounting:
        How charges compose: ``"approx"`` (the default; epsilons add, deltas add),
        ``"pure"`` (epsilon-DP only) or ``"zcdp"`` (Gaussian and pure charges compose as
        rho, converted to (epsilon, delta) at the budget's delta when checked; see
        :mod:`pinqpy.accounting.models`). Partition pays the largest part in every model.

    Notes
    -----
    ``spent`` and ``remaining`` are :class:`Cost` values, in (epsilon, delta) whatever the
    model. A charge that does not fit raises :class:`~pinqpy.BudgetExceededError` and
    leaves the budget unchanged.

    Examples
    --------
    >>> import pinqpy as pq
    >>> b = pq.Budget(epsilon=1.0, delta=1e-6)
    >>> b.remaining
    Cost(epsilon=1, delta=0.000001)
    """

    def __init__(
        self,
        epsilon: object,
        delta: object = 0,
        *,
        accounting: str = "approx",
        ledger: object = None,
        name: str | None = None,
    ):
        eps = _check_epsilon(epsilon, "Budget epsilon")
        dlt = to_fraction(delta, "Budget delta")
        if not 0 <= dlt < 1:
            raise PinqError("Budget delta must be at least 0 and below 1")
        self._total = Cost(eps, dlt)
        self._accountant = accountant_for(accounting)
        self._accountant.validate_total(self._total)
        self._spent = Usage()
        self._lock = threading.RLock()
        self._history: list[tuple[Cost, str]] | deque[tuple[Cost, str]] = []
        # Each charge as composed (rho under zCDP), for plot(); bounded with _history.
        self._usages: list[Usage] | deque[Usage] = []
        # Released answers by question (see pinqpy.pipeline.answers): asking again is free.
        # Unbounded unless the holder bounds it (_keep_in_memory).
        self._answers: LRU = LRU()
        self.name = name
        self._ledger = None
        self._ledger_name = name or "default"
        if ledger is not None:
            from pinqpy.accounting.ledger import Ledger  # sqlite3 only when a ledger is kept

            self._ledger = ledger if isinstance(ledger, Ledger) else Ledger(ledger)  # type: ignore[arg-type]
            self._ledger.open_budget(self._ledger_name, self._total, self.accounting)

    @property
    def accounting(self) -> str:
        """The accounting model: ``"pure"``, ``"approx"`` or ``"zcdp"``."""
        return self._accountant.name

    @property
    def total(self) -> Cost:
        """The budget's total (epsilon, delta)."""
        return self._total

    @property
    def epsilon(self) -> Exact:
        return self._total.epsilon

    @property
    def delta(self) -> Exact:
        return self._total.delta

    @property
    def spent(self) -> Cost:
        """What has been charged so far, as (epsilon, delta) in every accounting model.

        With a ledger this is read from the file, so it includes other processes' charges.
        """
        return self._accountant.as_cost(self._current(), self._total)

    @property
    def remaining(self) -> Cost:
        """What is left, as (epsilon, delta)."""
        return self._accountant.remaining(self._current(), self._total)

    @property
    def ledger(self) -> object:
        """The :class:`~pinqpy.accounting.ledger.Ledger` this budget is kept in, or None."""
        return self._ledger

    def audit(self) -> object:
        """The ledger's audit trail of this budget as a DataFrame (what was asked, by which
        plan, when, epsilon, delta), or this process's charges when there is no ledger."""
        if self._ledger is not None:
            return self._ledger.charges(self._ledger_name)
        import pandas as pd

        return pd.DataFrame(
            [
                {"epsilon": float(c.epsilon), "delta": float(c.delta), "description": label}
                for c, label in self._history
            ],
            columns=["epsilon", "delta", "description"],
        )

    # -- the ledger's view of usage: rho for zCDP budgets, (epsilon, delta) otherwise ------
    def _current(self) -> object:
        if self._ledger is None:
            return self._spent
        stored = self._ledger.spent(self._ledger_name)
        if self.accounting == "zcdp":
            return Usage(rho=Fraction(stored.epsilon))
        return Usage(Fraction(stored.epsilon), Fraction(stored.delta), None)

    def _ledger_cost(self, usage: object) -> Cost:
        if self.accounting == "zcdp":
            return Cost(usage.rho, 0)  # type: ignore[attr-defined]
        return usage.cost  # type: ignore[attr-defined]

    def _ledger_limit(self) -> Cost:
        if self.accounting == "zcdp":
            return Cost(self._accountant.rho_budget(self._total), 0)  # type: ignore[attr-defined]
        return self._total

    def _ledger_answer(self, cache_key: str) -> str | None:
        return None if self._ledger is None else self._ledger.cached(cache_key)

    def _keep_in_memory(self, answers: LRU, history: int) -> None:
        """Bound what this budget keeps in memory: its released answers in ``answers`` (a
        bounded cache, which several budgets may share) and only its latest ``history``
        charges in :attr:`charges`. For a budget kept in a ledger (a server's), which keeps
        every charge and every answer it can store."""
        self._answers = answers
        self._history = deque(self._history, maxlen=history)
        self._usages = deque(self._usages, maxlen=history)

    @property
    def charges(self) -> list[tuple[Cost, str]]:
        """The charges made so far, oldest first, each with a short description of the query
        (a server's budget keeps only its latest ones here; its ledger has them all)."""
        return list(self._history)

    # -- agent protocol (see pinqpy.accounting.agents) ----------------------------------------
    def _fits(self, usage: object) -> bool:
        return self._accountant.check(self._current(), usage, self._total)  # type: ignore[arg-type]

    def _commit(self, usage: object, label: str) -> None:
        self._spent = self._spent + usage  # type: ignore[operator]
        if not usage.is_zero:  # type: ignore[attr-defined]
            self._history.append((usage.cost, label))  # type: ignore[attr-defined]
            self._usages.append(usage)  # type: ignore[arg-type]
            for observer in _OBSERVERS.get():
                with contextlib.suppress(Exception):  # watching never stops a charge
                    observer(self, usage)  # type: ignore[arg-type]

    def _charge_exact(self, cost: Cost, label: str = "charge") -> None:
        """Charge ``cost`` directly (used by tests and by the agents)."""
        charge({self: Fraction(1)}, cost, label=label)

    def plot(self, ax: object = None) -> object:
        """A plot (a matplotlib Axes) of what each query spent, in the order charged, with the
        running total spent and the budget's total as a dashed line, in epsilon.

        A budget kept in a ledger shows every charge the file holds (other processes' and
        earlier runs' too); else this process's charges. Under zCDP the running total is the
        (epsilon, delta) reading of the rho spent so far, as :attr:`spent` reports it, and each
        bar is what that query added to it. Needs matplotlib (the ``notebook`` extra); ``ax``
        draws on axes of your own. Reads only the budget's own record, never data.
        """
        charges, spent, labels = self._spending()
        name = f"budget {self.name!r}" if self.name else "budget"
        return spending_plot(
            charges, spent, float(self.total.epsilon), labels=labels,
            title=f"{name}: {float(self.spent.epsilon):g} of {float(self.total.epsilon):g} spent",
            ax=ax,
        )  # fmt: skip

    def _spending(self) -> tuple[list[float], list[float], list[str]]:
        """Per charge, in order: what it added to the spent epsilon, the spent epsilon after
        it, and its label."""
        if self._ledger is not None:
            from pinqpy.accounting.ledger_file import decode

            rows = self._ledger.charges(self._ledger_name)
            exact = [decode(str(e)) for e in rows["epsilon_exact"]]
            labels = [str(d) for d in rows["description"]]
            if self.accounting == "zcdp":  # the file keeps rho
                usages = [Usage(rho=r) for r in exact]
            else:
                deltas = [decode(str(d)) for d in rows["delta_exact"]]
                usages = [Usage(e, d, None) for e, d in zip(exact, deltas, strict=True)]
        else:
            usages, labels = list(self._usages), [label for _, label in self._history]
        after, total = [], Usage()
        for usage in usages:
            total = total + usage
            after.append(float(self._accountant.as_cost(total, self._total).epsilon))
        before = [0.0, *after[:-1]] if after else []
        added = [b - a for a, b in zip(before, after, strict=True)]
        return added, after, labels

    def _repr_html_(self) -> str:
        return budget_html(budget_panel(self))

    def __repr__(self) -> str:
        name = f"{self.name!r}, " if self.name else ""
        total = self._total
        model = "" if self.accounting == "approx" else f", accounting={self.accounting!r}"
        if total.delta == 0:
            return (
                f"Budget({name}epsilon={total.epsilon!r}{model}, spent={self.spent.epsilon!r}, "
                f"remaining={self.remaining.epsilon!r})"
            )
        return (
            f"Budget({name}epsilon={total.epsilon!r}, delta={_short(total.delta)}{model}, "
            f"spent={self.spent!r}, remaining={self.remaining!r})"
        )


def budget_panel(budget: Budget) -> BudgetPanel:
    """What ``budget``'s HTML shows (:mod:`pinqpy.results.panels`): its totals and charges,
    which are its holder's own."""
    return BudgetPanel(
        name=budget.name,
        accounting=budget.accounting,
        in_ledger=budget.ledger is not None,
        total=_amount(budget.total),
        spent=_amount(budget.spent),
        remaining=_amount(budget.remaining),
        charges=tuple((_amount(cost), label) for cost, label in budget.charges),
    )


def _amount(cost: Cost) -> Amount:
    return Amount(cost.epsilon, cost.delta)
