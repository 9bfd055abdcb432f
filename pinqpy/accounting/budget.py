"""The root privacy agent: a :class:`Budget` that charges are drawn from, and :class:`Cost`.

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

import math
import threading
from dataclasses import dataclass
from fractions import Fraction

from pinqpy.core.exact import Exact, ceil_fraction, to_fraction
from pinqpy.errors import BudgetExceededError, PinqError
from pinqpy.results.html import budget_html

__all__ = ["Budget", "Cost"]

_ZERO = Fraction(0)


@dataclass(frozen=True, init=False)
class Cost:
    """An (epsilon, delta) pair held exactly.

    ``Cost(epsilon=0.1)`` reads ``0.1`` as exactly one tenth. Costs add componentwise.
    """

    epsilon: Exact
    delta: Exact

    def __init__(self, epsilon: object = 0, delta: object = 0):
        eps = to_fraction(epsilon, "epsilon")
        dlt = to_fraction(delta, "delta")
        if eps < 0 or dlt < 0:
            raise PinqError("a cost cannot be negative")
        object.__setattr__(self, "epsilon", Exact(eps))
        object.__setattr__(self, "delta", Exact(dlt))

    @classmethod
    def _of(cls, epsilon: Fraction, delta: Fraction) -> Cost:
        """A cost from values already known to be exact and non-negative (no re-validation)."""
        obj = object.__new__(cls)
        object.__setattr__(obj, "epsilon", Exact.of(epsilon))
        object.__setattr__(obj, "delta", Exact.of(delta))
        return obj

    def __add__(self, other: Cost) -> Cost:
        return Cost._of(self.epsilon + other.epsilon, self.delta + other.delta)

    def __sub__(self, other: Cost) -> Cost:
        # Only ever used for monotone increments, which are never negative.
        return Cost._of(
            max(self.epsilon - other.epsilon, _ZERO), max(self.delta - other.delta, _ZERO)
        )

    def max(self, other: Cost) -> Cost:
        """Componentwise maximum (parallel composition)."""
        return Cost._of(max(self.epsilon, other.epsilon), max(self.delta, other.delta))

    def fits_in(self, other: Cost) -> bool:
        return self.epsilon <= other.epsilon and self.delta <= other.delta

    @property
    def is_zero(self) -> bool:
        return self.epsilon == 0 and self.delta == 0

    def at(self, k: object) -> Cost:
        """This cost as seen by a source whose one privacy unit changes up to ``k`` rows here.

        Group privacy for an (epsilon, delta)-DP mechanism and groups of size k:
        ``(k·epsilon, k·e^((k-1)·epsilon)·delta)`` (Dwork & Roth, Theorem 2.2 extended to
        delta). Epsilon scales exactly; a non-zero delta for k > 1 involves an exponential and
        is rounded *up* into exact arithmetic. For k = 1 the cost is returned unchanged.
        """
        kk = to_fraction(k, "stability") if not isinstance(k, Fraction) else k
        if kk == 1:
            return self
        if kk < 0:
            raise PinqError("a stability cannot be negative")
        if kk == 0:
            return Cost()
        eps = self.epsilon * kk
        if self.delta == 0:
            return Cost._of(eps, _ZERO)
        # In logs, so a large (k-1)·epsilon cannot overflow. A delta of 1 holds for every
        # mechanism, so a group delta at or above 1 is charged as 1 (no budget can pay it).
        # (An exponent above 1e6 is charged 1 without converting it: it may exceed doubles.)
        exponent = (kk - 1) * self.epsilon
        log_delta = (
            math.log(kk.numerator)
            - math.log(kk.denominator)
            + (float(exponent) if exponent <= 10**6 else math.inf)
            + math.log(self.delta.numerator)
            - math.log(self.delta.denominator)
        )
        if log_delta >= 0:
            return Cost(eps, max(Fraction(1), self.delta * kk))
        delta = ceil_fraction(math.exp(log_delta))
        delta = max(delta, self.delta * kk)
        return Cost(eps, delta)

    def __repr__(self) -> str:
        if self.delta == 0:
            return f"Cost(epsilon={self.epsilon!r})"
        return f"Cost(epsilon={self.epsilon!r}, delta={_short(self.delta)})"


def _short(x: Fraction) -> str:
    """A readable spelling of a small delta (``1e-06``) that stays exact where it is short."""
    r = repr(Exact(x))
    return r if len(r) <= 12 else f"{float(x):.6g}"


class Budget:
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

    ``spent`` and ``remaining`` are :class:`Cost` values, in (epsilon, delta) whatever the
    model. A charge that does not fit raises :class:`~pinqpy.BudgetExceededError` and
    leaves the budget unchanged.

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
        from pinqpy.accounting.models import Usage, accountant_for

        eps = _check_epsilon(epsilon, "Budget epsilon")
        dlt = to_fraction(delta, "Budget delta")
        if not 0 <= dlt < 1:
            raise PinqError("Budget delta must be at least 0 and below 1")
        self._total = Cost(eps, dlt)
        self._accountant = accountant_for(accounting)
        self._accountant.validate_total(self._total)
        self._spent = Usage()
        self._lock = threading.RLock()
        self._history: list[tuple[Cost, str]] = []
        # Released answers by question (see pinqpy.pipeline.answers): asking again is free.
        self._answers: dict[str, tuple[object, object]] = {}
        self.name = name
        self._ledger = None
        self._ledger_name = name or "default"
        if ledger is not None:
            from pinqpy.accounting.ledger import Ledger

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
        from pinqpy.accounting.models import Usage

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

    @property
    def charges(self) -> list[tuple[Cost, str]]:
        """The charges made so far, oldest first, each with a short description of the query."""
        return list(self._history)

    # -- agent protocol (see pinqpy.accounting.agents) -------------------------------------------------
    def _prepare(self, usage: object, txn: object) -> None:
        txn.demand(self, usage)  # type: ignore[attr-defined]

    def _fits(self, usage: object) -> bool:
        return self._accountant.check(self._current(), usage, self._total)  # type: ignore[arg-type]

    def _commit(self, usage: object, label: str) -> None:
        self._spent = self._spent + usage  # type: ignore[operator]
        if not usage.is_zero:  # type: ignore[attr-defined]
            self._history.append((usage.cost, label))  # type: ignore[attr-defined]

    def _charge_exact(self, cost: Cost, label: str = "charge") -> None:
        """Charge ``cost`` directly (used by tests and by the agents)."""
        from pinqpy.accounting.agents import charge

        charge({self: Fraction(1)}, cost, label=label)

    def _repr_html_(self) -> str:
        return budget_html(self)

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


def _check_epsilon(value: object, what: str) -> Fraction:
    """A positive, finite epsilon, or a clear error."""
    if isinstance(value, float) and math.isnan(value):
        raise PinqError(f"{what} must be a positive finite number, not NaN")
    if isinstance(value, float) and math.isinf(value):
        raise PinqError(f"{what} must be a positive finite number, not infinity")
    eps = to_fraction(value, what)
    if eps <= 0:
        raise PinqError(f"{what} must be positive (got {float(eps):g})")
    return eps


#: The largest epsilon one measurement may ask for: ``10**100``. Far beyond any meaningful
#: guarantee (``e**epsilon`` bounds the privacy loss), it is refused before any charge
#: because the noise calibrations work in doubles: below it every derived quantity (``1/ε``,
#: ``ε²``, a Gaussian's sigma) stays finite and every release is total. A budget's total may be
#: larger.
MAX_EPSILON = Fraction(10**100)


def check_epsilon(value: object, what: str = "epsilon") -> Fraction:
    """Validate a query's epsilon: positive, finite and at most :data:`MAX_EPSILON`, else
    :class:`PinqError`.

    >>> check_epsilon(1e101)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pinqpy.errors.PinqError: epsilon is too large (1e+101): one measurement may ask ...1e+100
    """
    eps = _check_epsilon(value, what)
    if eps > MAX_EPSILON:
        raise PinqError(
            f"{what} is too large ({_big(eps)}): one measurement may ask for at most "
            f"{float(MAX_EPSILON):g}"
        )
    return eps


def _big(x: Fraction) -> str:
    """``x`` spelt like a float, also beyond the range of doubles."""
    try:
        return f"{float(x):g}"
    except OverflowError:
        return f"about 1e{len(str(x.numerator // x.denominator)) - 1}"


#: The smallest delta a query may ask for. Below it the noise cannot be calibrated in
#: bounded time with float-checked bounds (subnormal floats), and no release needs it.
MIN_DELTA = Fraction(1, 10**300)


def check_delta(value: object, what: str = "delta", *, minimum: Fraction = MIN_DELTA) -> Fraction:
    """Validate a query's delta: in ``[minimum, 1)`` when given (``minimum`` is
    :data:`MIN_DELTA` for a query; the parts a mechanism splits it into may go lower).

    >>> check_delta(5e-324)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pinqpy.errors.PinqError: delta is too small to calibrate noise for (4.94066e-324); ...
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise PinqError(f"{what} must be a number in (0, 1)")
    d = to_fraction(value, what)
    if not 0 < d < 1:
        raise PinqError(f"{what} must be above 0 and below 1 (got {float(d):g})")
    if d < minimum:
        raise PinqError(
            f"{what} is too small to calibrate noise for ({float(d):g}); the smallest delta "
            f"pinqpy accepts is {float(minimum):g}"
        )
    return d


def _raise_exceeded(budget: Budget, requested: Cost) -> None:
    rem = budget.remaining
    if requested.delta > 0 and budget.total.delta == 0:
        raise BudgetExceededError(
            "this query needs delta, but its budget was created with delta=0; create the "
            "Budget with a delta, or leave out delta= to use the Laplace mechanism",
            requested=requested,
            remaining=rem,
        )
    raise BudgetExceededError(
        f"privacy budget exceeded: the query needs {requested!r} but only {rem!r} remains "
        "(nothing was charged); ask with a smaller epsilon or use a fresh budget",
        requested=requested,
        remaining=rem,
    )
