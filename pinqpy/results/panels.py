"""What the notebook HTML of a budget, a private frame and a session shows: plain data.

The renderers (:func:`pinqpy.results.html.budget_html`, :func:`~pinqpy.results.html.frame_html`,
:func:`~pinqpy.results.html.session_html`) take these descriptions rather than the classes, so
this layer knows nothing of the layers above it. Each class builds its own description from
what it may show: :func:`pinqpy.accounting.budget.budget_panel` for a budget (its totals and
charges, the holder's own), :mod:`pinqpy.api.panels` for a frame and a session (the schema,
the declared public facts and the stabilities). None of them holds a row, a value or a row
count.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

__all__ = ["Amount", "BudgetPanel", "ColumnFacts", "FramePanel", "SessionPanel"]


class Amount(NamedTuple):
    """An (epsilon, delta) pair of a budget, exact."""

    epsilon: Fraction
    delta: Fraction


@dataclass(frozen=True)
class BudgetPanel:
    """A budget: its name (or None), accounting model, whether a ledger keeps it, its total,
    spent and remaining amounts, and each charge so far with the query's label, oldest first."""

    name: str | None
    accounting: str
    in_ledger: bool
    total: Amount
    spent: Amount
    remaining: Amount
    charges: tuple[tuple[Amount, str], ...]


@dataclass(frozen=True)
class ColumnFacts:
    """One column of a frame's schema with its declared public facts: its bounds, and how many
    public keys it has (None where none are declared)."""

    name: str
    type: str
    bounds: tuple[float, float] | None
    keys: int | None


@dataclass(frozen=True)
class FramePanel:
    """A private frame: its columns, its privacy unit, and each budget it draws on with the
    frame's stability to it (a number, ``math.inf`` when unbounded)."""

    columns: tuple[ColumnFacts, ...]
    privacy_unit: str | None
    stabilities: tuple[tuple[object, BudgetPanel], ...]


@dataclass(frozen=True)
class SessionPanel:
    """A session: its private tables by name, its public tables with their column names, and
    each budget with the names of the private tables that draw on it."""

    private: tuple[tuple[str, FramePanel], ...]
    public: tuple[tuple[str, tuple[str, ...]], ...]
    budgets: tuple[tuple[BudgetPanel, tuple[str, ...]], ...]
