"""Who spent what: a read-only summary of a ledger file, per budget and per charge.

:func:`summarize_ledger` reads a :class:`~pinqpy.accounting.ledger.Ledger` (an open one, or a
file by its path, opened read-only: nothing is created, upgraded or locked for writing) and
returns a :class:`LedgerSummary`:

* one :class:`BudgetRow` per budget: its name, who draws on it and for which table (read off
  the name: ``analyst:NAME/TABLE`` and ``group:NAME/TABLE`` for a server's budgets,
  ``TABLE@PATH`` for the command line's), the total, spent and remaining (epsilon, delta),
  the number of charged queries and the time of the last one;
* one :class:`ChargeRow` per charge, oldest first, with its time.

Under zCDP accounting the file keeps each budget's spent as rho; the summary converts it to
(epsilon, delta) as the budget does (:mod:`pinqpy.accounting.models`) and keeps the rho too.

**Query texts stay out unless asked for.** A charge's label is what was asked (SQL with its
literals, or a method's name): for the curator reading their own file, not for analysts, who
must not see one another's questions. ``with_labels=True`` adds them; the default leaves every
label None. Nothing else in the file is derived from the data (no cache keys, no answers).

>>> import os, tempfile
>>> from pinqpy.accounting.ledger import ChargeRecord, Ledger
>>> path = os.path.join(tempfile.mkdtemp(), "ledger.db")
>>> with Ledger(path) as ledger:
...     ledger.open_budget("analyst:ada/adult", Cost(epsilon=1))
...     _ = ledger.charge([("analyst:ada/adult", Cost(epsilon=0.25))], ChargeRecord("count"), {})
>>> row = summarize_ledger(path).budgets[0]
>>> row.owner, row.table, row.spent.epsilon, row.remaining.epsilon, row.queries
('analyst ada', 'adult', 0.25, 0.75, 1)
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from pinqpy.accounting.cost import Cost
from pinqpy.accounting.ledger import Ledger
from pinqpy.accounting.ledger_file import FORMAT, decode, spent_problems
from pinqpy.accounting.models import Usage, accountant_for
from pinqpy.errors import PinqError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BudgetRow", "ChargeRow", "LedgerSummary", "budget_owner", "summarize_ledger"]


def budget_owner(name: str) -> tuple[str, str]:
    """``(who, table)`` of a ledger budget name: ``analyst:ada/adult`` is ``("analyst ada",
    "adult")``, ``group:team/adult`` is ``("group team", "adult")``, the command line's
    ``adult@/data/adult.csv`` is ``("", "adult")``; any other name is its own table.

    >>> budget_owner("group:team/adult"), budget_owner("adult@/data/adult.csv")
    (('group team', 'adult'), ('', 'adult'))
    """
    for kind in ("analyst", "group"):
        prefix = f"{kind}:"
        if name.startswith(prefix) and "/" in name:
            who, _, table = name[len(prefix) :].partition("/")
            return f"{kind} {who}", table
    if "@" in name:
        return "", name.split("@", 1)[0]
    return "", name


@dataclass(frozen=True)
class BudgetRow:
    """One budget: ``spent`` and ``remaining`` in (epsilon, delta) whatever the accounting
    (``rho_spent`` is the zCDP figure the file keeps, None in the other models); ``queries``
    counts the charges made to it and ``last_query`` is the latest one's time (UTC, ISO
    8601), None before any."""

    name: str
    owner: str
    table: str
    accounting: str
    total: Cost
    spent: Cost
    remaining: Cost
    rho_spent: Fraction | None
    queries: int
    last_query: str | None


@dataclass(frozen=True)
class ChargeRow:
    """One charge: the query's number in the file, the budget, its cost (for a zCDP budget
    the file keeps rho, in ``rho``, and ``cost`` is None), its time and, only when asked for,
    the query's label."""

    query_id: int
    budget: str
    owner: str
    table: str
    cost: Cost | None
    rho: Fraction | None
    time: str
    label: str | None = None


@dataclass(frozen=True)
class LedgerSummary:
    """What :func:`summarize_ledger` read: the budgets, the charges, and the problems the
    integrity check found (empty when the file is consistent)."""

    path: str
    budgets: tuple[BudgetRow, ...]
    charges: tuple[ChargeRow, ...]
    problems: tuple[str, ...] = ()

    def budgets_frame(self) -> pd.DataFrame:
        """The budgets as a DataFrame: ``analyst``, ``table``, ``budget``, ``accounting``,
        ``epsilon``, ``spent``, ``remaining`` (and the deltas when any budget has one),
        ``queries``, ``last_query``; numbers as floats."""
        import pandas as pd

        deltas = any(b.total.delta for b in self.budgets)
        rows = []
        for b in self.budgets:
            row: dict[str, object] = {
                "analyst": b.owner, "table": b.table, "budget": b.name,
                "accounting": b.accounting, "epsilon": float(b.total.epsilon),
                "spent": float(b.spent.epsilon), "remaining": float(b.remaining.epsilon),
            }  # fmt: skip
            if deltas:
                row |= {
                    "delta": float(b.total.delta),
                    "delta_spent": float(b.spent.delta),
                    "delta_remaining": float(b.remaining.delta),
                }
            rows.append(row | {"queries": b.queries, "last_query": b.last_query})
        columns = ["analyst", "table", "budget", "accounting", "epsilon", "spent", "remaining"]
        if deltas:
            columns += ["delta", "delta_spent", "delta_remaining"]
        return pd.DataFrame(rows, columns=[*columns, "queries", "last_query"])

    def charges_frame(self) -> pd.DataFrame:
        """The charges as a DataFrame, oldest first: ``query``, ``time``, ``analyst``,
        ``table``, ``budget``, ``epsilon``, ``delta``, ``rho`` and ``label`` (None unless
        labels were asked for)."""
        import pandas as pd

        rows = [_charge_record(c) for c in self.charges]
        columns = ["query", "time", "analyst", "table", "budget", "epsilon", "delta", "rho"]
        return pd.DataFrame(rows, columns=[*columns, "label"])


def _charge_record(c: ChargeRow) -> dict[str, object]:
    cost = c.cost
    return {
        "query": c.query_id, "time": c.time, "analyst": c.owner, "table": c.table,
        "budget": c.budget,
        "epsilon": None if cost is None else float(cost.epsilon),
        "delta": None if cost is None else float(cost.delta),
        "rho": None if c.rho is None else float(c.rho),
        "label": c.label,
    }  # fmt: skip


@contextmanager
def _connection(source: Ledger | str | os.PathLike[str]) -> Iterator[sqlite3.Connection]:
    """A connection to read ``source``: an open ledger's own, or the file read-only."""
    if isinstance(source, Ledger):
        with source._use() as conn:
            yield conn
        return
    path = Path(source)
    if not path.is_file():
        raise PinqError(f"no ledger file at {str(path)!r}")
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as exc:
        raise PinqError(f"cannot open the ledger {str(path)!r}: {exc}") from None
    try:
        yield conn
    finally:
        conn.close()


def _check_format(conn: sqlite3.Connection, path: str) -> None:
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.DatabaseError:
        meta = {}
    if meta.get("format") != FORMAT:
        raise PinqError(f"{path!r} is not a pinqpy ledger")


def summarize_ledger(
    source: Ledger | str | os.PathLike[str], *, with_labels: bool = False
) -> LedgerSummary:
    """Read ``source`` (a :class:`Ledger`, or a ledger file's path, opened read-only) into a
    :class:`LedgerSummary`; ``with_labels`` adds each charge's query label (the curator's
    eyes only: see the module documentation). Writes nothing."""
    path = source.path if isinstance(source, Ledger) else os.fspath(source)
    with _connection(source) as conn:
        try:
            if conn.in_transaction:  # pragma: no cover - a ledger never leaves one open
                raise PinqError("the ledger is in the middle of a write")
            conn.execute("BEGIN")  # one snapshot for every read below
            try:
                _check_format(conn, path)
                budgets = conn.execute(
                    "SELECT name, accounting, total_epsilon, total_delta, spent_epsilon, "
                    "spent_delta FROM budgets ORDER BY name"
                ).fetchall()
                charges = conn.execute(
                    "SELECT c.query_id, c.budget, c.epsilon, c.delta, q.created, q.description "
                    "FROM charges c JOIN queries q ON q.id = c.query_id "
                    "ORDER BY c.query_id, c.budget"
                ).fetchall()
                problems = tuple(spent_problems(conn))
            finally:
                conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            raise PinqError(f"{path!r} is not a readable pinqpy ledger: {exc}") from None
    models = {name: acc for name, acc, *_ in budgets}
    charge_rows = tuple(_charge_row(r, models.get(r[1], "approx"), with_labels) for r in charges)
    rows = tuple(_budget_row(r, charge_rows) for r in budgets)
    return LedgerSummary(path, rows, charge_rows, problems)


def _budget_row(row: tuple[str, ...], charges: tuple[ChargeRow, ...]) -> BudgetRow:
    name, accounting, te, td, se, sd = row
    total = Cost(decode(te), decode(td))
    mine = [c for c in charges if c.budget == name]
    model = accountant_for(accounting)
    if accounting == "zcdp":
        usage = Usage(rho=decode(se))
        rho: Fraction | None = decode(se)
    else:
        usage = Usage(decode(se), decode(sd), None)
        rho = None
    owner, table = budget_owner(name)
    return BudgetRow(
        name, owner, table, accounting, total, model.as_cost(usage, total),
        model.remaining(usage, total), rho, len(mine), mine[-1].time if mine else None,
    )  # fmt: skip


def _charge_row(row: tuple[object, ...], accounting: str, with_labels: bool) -> ChargeRow:
    qid, budget, eps, dlt, created, description = row
    owner, table = budget_owner(str(budget))
    e, d = decode(str(eps)), decode(str(dlt))
    cost, rho = (None, e) if accounting == "zcdp" else (Cost(e, d), None)
    label = str(description) if with_labels else None
    return ChargeRow(int(qid), str(budget), owner, table, cost, rho, str(created), label)  # type: ignore[call-overload]
