"""A worker's ledger writes, made by the server: one write group for every worker's charges.

A pandas analyst's requests run in a worker process of their own
(:mod:`pinqpy.remote.server.workers`), one at a time, so the charges of one worker never
come together; the charges of *different* workers do. So a worker does not write the ledger
file itself: its analyst's ledger relays each write (:meth:`Ledger.relay_writes
<pinqpy.accounting.ledger.Ledger.relay_writes>`) over the worker's socket to the server's
thread that waits for the request's reply, and that thread makes it on the server's own
ledger of that analyst, whose write group (:mod:`pinqpy.accounting.group_commit`) commits the
charges of every worker waiting at that moment in one synced transaction.

* **A charge** (:class:`WorkerRelay.charge`) waits for the server's answer: the query id once
  the transaction holding it has committed and synced, or None if it did not fit. The worker
  reads no data before that answer, as before. The server checks the charge against its own
  budgets' limits (not the worker's) and only charges budgets of that analyst. A worker
  killed while it waits (its deadline passed) loses nothing: the charge stands if it was
  committed, and no answer exists.
* **An answer** to store is sent without waiting; the server stores it (no sync of its own,
  as :meth:`~pinqpy.accounting.ledger.Ledger.store_answer`) before it forwards the reply that
  follows it, and only for a query charged during the same request.

While a charge waits for its sync, the request gives its run slot to another
(:meth:`~pinqpy.remote.server.stopping.Gate.aside`): waiting for the disk takes no CPU, and
the requests that take the slot meanwhile are the ones whose charges join the next batch.

Messages from the worker start with a tag: :data:`REPLY` (the request's reply, which ends it),
:data:`CHARGE` or :data:`STORE`; exact amounts travel as hexadecimal ``num/den`` text (no
length limit, unlike decimal).
"""

from __future__ import annotations

import contextlib
import json
from fractions import Fraction
from multiprocessing.connection import Connection
from typing import Any

from pinqpy.accounting.cost import Cost
from pinqpy.accounting.ledger import ChargeRecord
from pinqpy.errors import PinqError
from pinqpy.remote.server.state import AnalystState

__all__ = ["CHARGE", "REPLY", "STORE", "RelayedWrites", "WorkerRelay"]

REPLY, CHARGE, STORE = b"R", b"C", b"S"


def _hex(x: Fraction) -> str:
    return f"{x.numerator:x}/{x.denominator:x}"


def _unhex(text: str) -> Fraction:
    num, _, den = text.partition("/")
    value = Fraction(int(num, 16), int(den, 16))
    if value < 0:
        raise ValueError("a negative amount")
    return value


class WorkerRelay:
    """The worker's side: sends its ledger's writes over ``conn`` (see the module docstring)."""

    def __init__(self, conn: Connection):
        self.conn = conn

    def charge(self, entries: list[tuple[str, Cost]], record: ChargeRecord) -> int | None:
        amounts = [[n, _hex(Fraction(c.epsilon)), _hex(Fraction(c.delta))] for n, c in entries]
        doc = {
            "entries": amounts,
            "description": record.description,
            "plan": record.plan,
        }
        self.conn.send_bytes(CHARGE + json.dumps(doc).encode())
        answer = json.loads(self.conn.recv_bytes())
        if "error" in answer:
            raise PinqError(answer["error"])
        if "fault" in answer:
            raise RuntimeError("the server could not make this worker's charge")
        qid = answer["query_id"]
        return None if qid is None else int(qid)

    def store_answer(self, query_id: int, answer_key: str, answer: str) -> None:
        self.conn.send_bytes(STORE + json.dumps([query_id, answer_key, answer]).encode())


class RelayedWrites:
    """The server's side, for one request of ``analyst``'s worker: makes its writes on the
    analyst's ledger in the server's process (see the module docstring)."""

    def __init__(self, analyst: AnalystState):
        self.ledger = analyst.ledger
        self.limits = {b._ledger_name: b._ledger_limit() for b in analyst.budgets.values()}
        self.charged: set[int] = set()

    def charge(self, body: bytes) -> bytes:
        """A charge message's answer, once its charge is durable (or refused)."""
        doc: Any = json.loads(body)
        entries = [(n, Cost._of(_unhex(e), _unhex(d))) for n, e, d in doc["entries"]]
        if not {n for n, _ in entries} <= self.limits.keys():
            raise RuntimeError("a worker tried to charge a budget its analyst does not draw on")
        record = ChargeRecord(str(doc["description"]), str(doc["plan"]))
        try:
            qid = self.ledger.charge(entries, record, self.limits)
        except PinqError as err:
            return json.dumps({"error": str(err)}).encode()
        if qid is not None:
            self.charged.add(qid)
        return json.dumps({"query_id": qid}).encode()

    def store(self, body: bytes) -> None:
        """Store a released answer of a query charged in this request (an answer that cannot
        be stored is only not cached: asking again is charged again)."""
        qid, key, answer = json.loads(body)
        if qid in self.charged and isinstance(key, str) and isinstance(answer, str):
            with contextlib.suppress(PinqError):
                self.ledger.store_keyed(qid, key, answer)
