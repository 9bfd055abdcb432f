"""What a statement charged, read from ``SHOW BUDGET`` before and after it.

Any session with the session protocol (see :mod:`pinqpy.interfaces.shell`) answers
``SHOW BUDGET``, so this works for a local Session and a server's session alike. A budget
shared with other processes (one ledger file, a server's group budget) can be spent by them
meanwhile: the charge reported is what each budget's spent grew by, as the shell's footer says.
"""

from __future__ import annotations

from typing import Any

from pinqpy.errors import PinqError
from pinqpy.interfaces.shell import BudgetLine, charged

__all__ = ["charged", "read_budgets"]

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
