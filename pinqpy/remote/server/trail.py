"""A group member's view of the ledger: every charge to the group's budgets, only their own
questions.

The members of a group share one budget per table, so each may see its total and every
charge made to it, with its time. What another member *asked* is theirs: a
:class:`MemberLedger` is the server's ledger file as one member uses it, and

* notes who asked each query it charges (table :data:`ASKED`, ``query_id -> analyst``, in the
  ledger file, so it survives a restart);
* shows, in its audit trail (:meth:`MemberLedger.charges`, which ``/v1/audit`` and SQL's
  ``SHOW LEDGER`` both read), the description and plan of this member's own queries only:
  another member's row keeps its query id, budget, epsilon, delta and time, and says
  :data:`OTHERS` instead of the question (no plan, and ``has_answer`` is not shown);
* keeps this member's answers apart from the other members' (:meth:`cached` and
  :meth:`store_answer` key them by the member too). A question answered free because another
  member asked it first would tell the asker that the other member asked exactly that, so the
  same question from two members is charged to the group twice (each member's own repeats
  are free, as ever).

The note is written just after the charge's transaction commits, without a sync of its own:
a crash or power loss between the two can only leave a charge without its asker, which then
shows as another member's query to everyone, its asker included (never a question to the
wrong member).
"""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from pinqpy.accounting.ledger import ChargeRecord, Ledger

__all__ = ["ASKED", "OTHERS", "MemberLedger", "prepare"]

#: The table in the ledger file that names each group query's asker.
ASKED = "server_asked"
#: What a member's audit trail says in place of another member's question.
OTHERS = "(another member's query)"


def prepare(ledger: Ledger) -> None:
    """Create the :data:`ASKED` table in ``ledger``'s file (once, before members use it)."""
    with ledger._write(durable=False) as conn:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {ASKED} ("
            "query_id INTEGER PRIMARY KEY REFERENCES queries(id), analyst TEXT NOT NULL)"
        )


class MemberLedger(Ledger):
    """The ledger file at ``path`` as group member ``analyst`` uses it (see the module
    docstring); :func:`prepare` must have made the :data:`ASKED` table."""

    def __init__(self, path: str | os.PathLike[str], analyst: str):
        super().__init__(path)
        self.analyst = analyst

    def charge(
        self,
        entries: list[tuple[str, Any]],
        record: ChargeRecord,
        limits: dict[str, Any],
        fits: Any = None,
    ) -> int | None:
        query_id = super().charge(entries, record, limits, fits)
        if query_id is not None:
            with self._write(durable=False) as conn:
                conn.execute(
                    f"INSERT OR IGNORE INTO {ASKED} (query_id, analyst) VALUES (?, ?)",
                    (query_id, self.analyst),
                )
        return query_id

    def _mine(self, cache_key: str) -> str:
        return f"member:{self.analyst}|{cache_key}"

    def cached(self, cache_key: str) -> str | None:
        return super().cached(self._mine(cache_key))

    def store_answer(self, query_id: int, cache_key: str, answer: str) -> None:
        super().store_answer(query_id, self._mine(cache_key), answer)

    def asked(self) -> set[int]:
        """The ids of the queries this member asked."""
        with self._use() as conn:
            rows = conn.execute(
                f"SELECT query_id FROM {ASKED} WHERE analyst = ?", (self.analyst,)
            ).fetchall()
        return {int(r[0]) for r in rows}

    def charges(self, name: str | None = None) -> pd.DataFrame:
        """The audit trail of the ledger (of budget ``name``), other members' questions left
        out (see the module docstring)."""
        trail = super().charges(name)
        others = ~trail["query_id"].isin(self.asked())
        trail["description"] = trail["description"].where(~others, OTHERS)
        trail["plan"] = trail["plan"].where(~others, "")
        trail["has_answer"] = trail["has_answer"].astype(object).where(~others, None)
        return trail
