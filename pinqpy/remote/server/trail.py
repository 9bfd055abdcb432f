"""An analyst's view of the ledger: their budgets' charges, numbered for them, and in a
group only their own questions.

**Query numbers.** The ledger numbers every query of the file in one sequence, whoever asked
it, so the gaps between the ids of one analyst's queries would count the queries of
everybody else. An :class:`AnalystLedger` is the server's ledger file as one analyst uses
it: its audit trail (:meth:`AnalystLedger.charges`, which ``/v1/audit`` and SQL's ``SHOW
LEDGER`` both read) numbers the queries charged to the budgets this analyst draws on
``1, 2, 3, ...`` in the order they were charged, and shows no other id. The numbers are a
function of those budgets' charges alone: of this analyst's own queries, and in a group of
the members' queries, which every member sees anyway. A query charged to two of the
analyst's budgets (a join of two tables) has one number in both rows. A query keeps its
number (charges are only ever added, with larger ids). The curator's view, the ledger file,
keeps the global ids (:meth:`~pinqpy.accounting.ledger.Ledger.charges`).

**Group members.** The members of a group share one budget per table, so each may see its
total and every charge made to it, with its time. What another member *asked* is theirs: a
:class:`MemberLedger`

* notes who asked each query it charges (table :data:`ASKED`, ``query_id -> analyst``, in the
  ledger file, so it survives a restart), in the charge's own transaction;
* shows, in its audit trail, the description and plan of this member's own queries only:
  another member's row keeps its number, budget, epsilon, delta and time, and says
  :data:`OTHERS` instead of the question (no plan, and ``has_answer`` is not shown);
* keeps this member's answers apart from the other members' (:meth:`cached` and
  :meth:`store_answer` key them by the member too). A question answered free because another
  member asked it first would tell the asker that the other member asked exactly that, so the
  same question from two members is charged to the group twice (each member's own repeats
  are free, as ever).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable

import numpy as np
import pandas as pd

from pinqpy.accounting.ledger import Ledger

__all__ = ["ASKED", "OTHERS", "AnalystLedger", "MemberLedger", "prepare"]

#: The table in the ledger file that names each group query's asker.
ASKED = "server_asked"
#: What a member's audit trail says in place of another member's question.
OTHERS = "(another member's query)"


def prepare(ledger: Ledger) -> None:
    """Create the :data:`ASKED` table in ``ledger``'s file (once, before members use it)."""
    ledger._transact(
        lambda conn: conn.execute(
            f"CREATE TABLE IF NOT EXISTS {ASKED} ("
            "query_id INTEGER PRIMARY KEY REFERENCES queries(id), analyst TEXT NOT NULL)"
        ),
        durable=False,
    )


class AnalystLedger(Ledger):
    """The ledger file at ``path`` as ``analyst`` uses it, drawing on the ledger budgets
    named ``budgets`` (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str], analyst: str, budgets: Iterable[str]):
        super().__init__(path)
        self.analyst = analyst
        self.budget_names = tuple(sorted(set(budgets)))

    def charges(self, name: str | None = None) -> pd.DataFrame:
        """The audit trail of this analyst's budget ``name`` (of all their budgets when
        None), each query numbered among this analyst's budgets' queries (see the module
        docstring)."""
        names = [n for n in self.budget_names if name is None or n == name]
        if not names:  # not a budget of this analyst's: no row (the columns of one)
            return self._trail(self.budget_names[0]).iloc[:0]
        trail = pd.concat([self._trail(n) for n in names], ignore_index=True)
        trail = trail.sort_values(["query_id", "budget"], kind="stable", ignore_index=True)
        return self._numbered(trail)

    def _trail(self, name: str) -> pd.DataFrame:
        """The file's trail of budget ``name`` (global query ids)."""
        return super().charges(name)

    def _numbered(self, trail: pd.DataFrame) -> pd.DataFrame:
        """``trail`` with each global query id replaced by its rank among the ids of the
        queries charged to this analyst's budgets. Read after the trail: any query charged
        since has a larger id, so it cannot move a rank of the trail's."""
        marks = ",".join("?" * len(self.budget_names))
        with self._use() as conn:
            rows = conn.execute(
                f"SELECT DISTINCT query_id FROM charges WHERE budget IN ({marks}) "
                "ORDER BY query_id",
                self.budget_names,
            ).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        out = trail.copy()
        out["query_id"] = np.searchsorted(ids, trail["query_id"].to_numpy(np.int64)) + 1
        return out


class MemberLedger(AnalystLedger):
    """The ledger file at ``path`` as group member ``analyst`` uses it (see the module
    docstring); :func:`prepare` must have made the :data:`ASKED` table."""

    def _charged(self, conn: sqlite3.Connection, query_id: int) -> None:
        conn.execute(
            f"INSERT OR IGNORE INTO {ASKED} (query_id, analyst) VALUES (?, ?)",
            (query_id, self.analyst),
        )

    def _mine(self, cache_key: str) -> str:
        return f"member:{self.analyst}|{cache_key}"

    def cached(self, cache_key: str) -> str | None:
        return super().cached(self._mine(cache_key))

    def store_answer(self, query_id: int, cache_key: str, answer: str) -> None:
        super().store_answer(query_id, self._mine(cache_key), answer)

    def asked(self) -> set[int]:
        """The (global) ids of the queries this member asked."""
        with self._use() as conn:
            rows = conn.execute(
                f"SELECT query_id FROM {ASKED} WHERE analyst = ?", (self.analyst,)
            ).fetchall()
        return {int(r[0]) for r in rows}

    def _trail(self, name: str) -> pd.DataFrame:
        """The trail of budget ``name``, other members' questions left out (see the module
        docstring)."""
        trail = super()._trail(name)
        others = ~trail["query_id"].isin(self.asked())
        trail["description"] = trail["description"].where(~others, OTHERS)
        trail["plan"] = trail["plan"].where(~others, "")
        trail["has_answer"] = trail["has_answer"].astype(object).where(~others, None)
        return trail
