"""The curator's view of the ledger: who spent what, per analyst and table, and when.

:func:`summary` is what ``GET /v1/curator/summary`` answers and the dashboard page shows
(:mod:`pinqpy.remote.server.dashboard`): one row per analyst and granted table, with the
budget they draw on (its total, what it has spent, what remains), what this analyst spent
of it, how many charged queries they made (and the budget had, all its users together) and when
their last one was; and every charge with
its time, analyst and table, for the plot of spending over time. The curator is trusted:
this is their own ledger. Still, nothing here shows a question: no query text, no plan, no
answer, nothing about the data. A charge is fixed before any data is read, and its time is
the time it was committed.

Amounts are exact text (``"1/10"``), in the budget's own terms: epsilon and delta for
``approx`` and ``pure`` budgets, rho for ``zcdp`` ones (the ledger keeps a zCDP budget's
spending as rho; its total is the largest rho that fits the configured epsilon and delta).
A *share* is the fraction of the budget used: the larger of epsilon's and delta's (a delta
total of 0 leaves epsilon's), or rho's.

A group's members share one budget per table. Each member's row shows the group's budget
and, apart, what this member spent of it: the charges of the queries they asked (the server
notes each group query's asker, :mod:`pinqpy.remote.server.trail`). A charge whose asker was
not noted (a crash between the charge and the note) counts in the group's spent only.
Budgets the ledger holds that the config no longer grants (an analyst or table removed)
are rows too, marked ``configured: false``.

:func:`read_ledger` is the one place that reads the ledger file, through
:class:`~pinqpy.accounting.ledger.Ledger`'s read API; everything else works on what it returns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from pinqpy.accounting.cost import Cost
from pinqpy.accounting.ledger import Ledger
from pinqpy.accounting.models import accountant_for
from pinqpy.core.version import __version__
from pinqpy.remote.server.state import ServerState

__all__ = ["BudgetRecord", "ChargeEntry", "read_ledger", "summary"]


@dataclass(frozen=True)
class BudgetRecord:
    """One budget of the ledger: its total as opened, and what it spent in the ledger's own
    units (``spent_epsilon`` holds rho for a ``zcdp`` budget, ``spent_delta`` is then 0)."""

    name: str
    accounting: str
    total_epsilon: Fraction
    total_delta: Fraction
    spent_epsilon: Fraction
    spent_delta: Fraction


@dataclass(frozen=True)
class ChargeEntry:
    """One charge to one budget, in the ledger's units, with its query id and time (UTC,
    ISO 8601). No description or plan: the curator's view shows no question."""

    query_id: int
    budget: str
    epsilon: Fraction
    delta: Fraction
    time: str


def read_ledger(ledger: Ledger) -> tuple[list[BudgetRecord], list[ChargeEntry]]:
    """Every budget of ``ledger`` and every charge to one, oldest first, exact.

    The one reader of the file here (:meth:`Ledger.budgets`, :meth:`Ledger.charges`); the
    queries' descriptions and plans are dropped as they are read."""
    budgets = [
        BudgetRecord(
            str(r.budget),
            str(r.accounting),
            *(_exact(x) for x in (r.total_epsilon_exact, r.total_delta_exact)),
            *(_exact(x) for x in (r.spent_epsilon_exact, r.spent_delta_exact)),
        )
        for r in ledger.budgets().itertuples(index=False)
    ]
    trail = ledger.charges()[["query_id", "budget", "epsilon_exact", "delta_exact", "created"]]
    charges = [
        ChargeEntry(int(qid), str(budget), _exact(eps), _exact(dlt), str(created))
        for qid, budget, eps, dlt, created in trail.itertuples(index=False)
        if isinstance(budget, str)  # a query charged to no budget has none
    ]
    return budgets, charges


def _exact(text: str) -> Fraction:
    """A ledger's exact ``num/den`` text (hexadecimal parts for very long numbers)."""
    num, _, den = text.partition("/")
    return Fraction(_int(num), _int(den or "1"))


def _int(s: str) -> int:
    s = s.strip()
    return int(s, 16) if s.startswith(("0x", "-0x")) else int(s)


# -- the summary -----------------------------------------------------------------------------
@dataclass(frozen=True)
class _Limit:
    """A budget's total in the ledger's units, and how its amounts are shown."""

    accounting: str
    epsilon: Fraction
    delta: Fraction

    @classmethod
    def of(cls, b: BudgetRecord) -> _Limit:
        if b.accounting == "zcdp":
            zcdp: Any = accountant_for("zcdp")
            rho = zcdp.rho_budget(Cost(b.total_epsilon, b.total_delta))
            return cls("zcdp", Fraction(rho), Fraction(0))
        return cls(b.accounting, b.total_epsilon, b.total_delta)

    def share(self, epsilon: Fraction, delta: Fraction) -> Fraction:
        """The fraction of this budget that ``(epsilon, delta)`` (ledger units) uses."""
        share = epsilon / self.epsilon if self.epsilon > 0 else Fraction(0)
        if self.delta > 0:
            share = max(share, delta / self.delta)
        return share

    def amount(self, epsilon: Fraction, delta: Fraction) -> dict[str, str]:
        if self.accounting == "zcdp":
            return {"rho": str(epsilon)}
        return {"epsilon": str(epsilon), "delta": str(delta)}


def summary(state: ServerState, now: datetime | None = None) -> dict[str, Any]:
    """Who spent what on ``state``'s server (see the module docstring), as JSON data:
    ``{"generated", "version", "rows": [...], "charges": [...]}``."""
    budgets, charges = read_ledger(state.ledger)
    by_budget: dict[str, list[ChargeEntry]] = {}
    for c in charges:
        by_budget.setdefault(c.budget, []).append(c)
    records = {b.name: b for b in budgets}
    rows, entries = [], []
    for analyst, table, group in _grants(state):
        name = state.config.analysts[analyst].ledger_name(table)
        record = records.get(name)
        if record is None:  # opened at start, so only a ledger replaced under the server
            continue
        mine = by_budget.get(name, [])
        if group is not None:
            asked = state.ledgers[analyst].asked()
            mine = [c for c in mine if c.query_id in asked]
        row, timeline = _row(record, mine, analyst=analyst, table=table, group=group)
        row["budget_queries"] = len(by_budget.get(name, []))
        rows.append(row)
        entries.extend(timeline)
    claimed = {r["budget"] for r in rows}
    for record in budgets:
        if record.name not in claimed:
            row, timeline = _unclaimed(record, by_budget.get(record.name, []))
            row["budget_queries"] = len(by_budget.get(record.name, []))
            rows.append(row)
            entries.extend(timeline)
    entries.sort(key=lambda e: (e["time"], e["budget"]))
    when = now if now is not None else datetime.now(UTC)
    return {
        "generated": when.isoformat(timespec="seconds"),
        "version": __version__,
        "rows": rows,
        "charges": entries,
    }


def _grants(state: ServerState) -> Iterable[tuple[str, str, str | None]]:
    for name, spec in state.config.analysts.items():
        for table in spec.tables:
            yield name, table, spec.group


def _unclaimed(
    record: BudgetRecord, charges: list[ChargeEntry]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A ledger budget the config grants nobody now, named as the server names budgets."""
    kind, _, rest = record.name.partition(":")
    owner, _, table = rest.rpartition("/")  # a table name has no "/"
    analyst = owner if kind == "analyst" and table else None
    group = owner if kind == "group" and table else None
    row, timeline = _row(
        record, charges if analyst else [], analyst=analyst, table=table or None, group=group
    )
    row["configured"] = False
    return row, timeline


def _row(
    record: BudgetRecord,
    mine: list[ChargeEntry],
    *,
    analyst: str | None,
    table: str | None,
    group: str | None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One row of the summary, and this analyst's charges on it with the share of the
    budget they had used after each one."""
    limit = _Limit.of(record)
    eps, dlt = Fraction(0), Fraction(0)
    timeline = []
    for c in mine:
        eps, dlt = eps + c.epsilon, dlt + c.delta
        timeline.append(
            {
                "analyst": analyst, "table": table, "budget": record.name, "time": c.time,
                **limit.amount(c.epsilon, c.delta),
                "share_after": float(limit.share(eps, dlt)),
            }
        )  # fmt: skip
    spent = (record.spent_epsilon, record.spent_delta)
    total = limit.amount(limit.epsilon, limit.delta)
    if limit.accounting == "zcdp":  # the configured total the rho budget comes from
        total |= {"epsilon": str(record.total_epsilon), "delta": str(record.total_delta)}
    row = {
        "analyst": analyst,
        "table": table,
        "budget": record.name,
        "group": group,
        "accounting": record.accounting,
        "configured": True,
        "total": total,
        "spent": limit.amount(*spent),
        "remaining": limit.amount(limit.epsilon - spent[0], limit.delta - spent[1]),
        "share": float(limit.share(*spent)),
        "analyst_spent": limit.amount(eps, dlt),
        "analyst_share": float(limit.share(eps, dlt)),
        "queries": len(mine),
        "last_query": mine[-1].time if mine else None,
    }
    return row, timeline
