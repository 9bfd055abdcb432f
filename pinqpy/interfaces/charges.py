"""What a statement charged, read from ``SHOW BUDGET`` before and after it.

Any session with the session protocol (see :mod:`pinqpy.interfaces.shell`) answers
``SHOW BUDGET``, so this works for a local Session and a server's session alike. A budget
shared with other processes (one ledger file, a server's group budget) can be spent by them
meanwhile: the charge reported is what each budget's spent grew by, as the shell's footer says.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pinqpy.errors import PinqError
from pinqpy.interfaces.shell import BudgetLine, _fmt, charged

__all__ = ["charge_footer", "charged", "read_budgets"]

_NUMBERS = (
    "epsilon",
    "delta",
    "spent_epsilon",
    "spent_delta",
    "remaining_epsilon",
    "remaining_delta",
)


def read_budgets(session: Any) -> list[BudgetLine]:
    """Every budget as ``SHOW BUDGET`` reports it now (empty if it cannot be read)."""
    try:
        records = session.sql("SHOW BUDGET").to_dict("records")
        return [
            BudgetLine(
                str(r["budget"]).removeprefix("budget of "), *(float(r[k]) for k in _NUMBERS)
            )
            for r in records
        ]
    except (PinqError, KeyError, TypeError, ValueError, AttributeError):
        return []


def _left(budget: BudgetLine) -> str:
    return f"{_fmt(budget.remaining_epsilon)} of {_fmt(budget.epsilon)} left"


def charge_footer(before: Sequence[BudgetLine], after: Sequence[BudgetLine]) -> str:
    """The line ``pinqpy query`` prints on standard error after an answer: what it charged
    each budget and what that budget has left, e.g. ``charged epsilon 0.1 to adult; 0.9 of 1
    left``; a repeated query says it was answered before and charged nothing.

    >>> was = BudgetLine("adult", 1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
    >>> now = BudgetLine("adult", 1.0, 0.0, 0.1, 0.0, 0.9, 0.0)
    >>> charge_footer([was], [now])
    'charged epsilon 0.1 to adult; 0.9 of 1 left'
    >>> charge_footer([now], [now])
    'charged nothing: the same query was answered before (adult: 0.9 of 1 left)'
    """
    earlier = {b.name: b for b in before}
    parts = []
    for budget in after:
        was = earlier.get(budget.name)
        if was is None:
            continue
        eps = budget.spent_epsilon - was.spent_epsilon
        dlt = budget.spent_delta - was.spent_delta
        if eps or dlt:
            cost = f"epsilon {_fmt(eps)}" + (f", delta {_fmt(dlt)}" if dlt else "")
            parts.append(f"{cost} to {budget.name}; {_left(budget)}")
    if parts:
        return "charged " + "; ".join(parts)
    left = ", ".join(f"{b.name}: {_left(b)}" for b in after)
    return "charged nothing: the same query was answered before" + (f" ({left})" if left else "")
