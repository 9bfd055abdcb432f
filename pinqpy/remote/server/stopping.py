"""Who may run now, and how a request past its run-time limit is stopped.

Every request that reads data holds a :class:`Ticket`: its analyst, its deadline (its
admission plus ``query_timeout_s``) and whether it has *started*, that is reached the point
where its aggregation may charge. The :class:`Gate` lets at most ``max_running`` requests
read data at once, and one at a time on the DuckDB connections and the Spark session the
server shares (a DuckDB connection fails under concurrent use, after the charge). A request
waits for its turn until its deadline at most.

At the deadline the server calls :meth:`Gate.stop`:

* a request that has **not started** never will: it checks its ticket when its turn comes,
  under the same lock, and gives up uncharged (:class:`NotStarted`);
* a request that has started on **DuckDB or Spark** is interrupted: every DuckDB connection
  the server's tables live on is interrupted (``connection.interrupt()``) and every Spark job
  cancelled (``cancelAllJobs``), now and every :data:`INTERRUPT_EVERY` seconds until its
  work returns. Only the request holding the shared engines is ever interrupted (the gate
  lets one at a time in, and the interrupt is sent under the lock that records which one);
  an interrupted read fails inside that request's thread, after its charge, and its
  failure reaches nobody: the analyst was answered 504 at the deadline.

A pandas request started in the server's own process cannot be stopped (no thread can be);
the server runs pandas requests in worker processes it can kill instead
(:mod:`pinqpy.remote.server.workers`), and only an analyst granted pandas tables together
with DuckDB or Spark ones has pandas work in the server's process.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from pinqpy.errors import PinqError

__all__ = ["INTERRUPT_EVERY", "Gate", "NotStarted", "Ticket", "not_started"]

#: Seconds between two interrupts of a request past its limit, until its work returns.
INTERRUPT_EVERY = 0.05


class NotStarted(PinqError):
    """A request that waited for its turn until its deadline: it did not start, and nothing
    was charged."""


@dataclass(eq=False)
class Ticket:
    """One request's claim on the server's work (see the module docstring)."""

    analyst: str
    deadline: float  # time.monotonic()
    cancelled: bool = False
    started: bool = False
    done: threading.Event = field(default_factory=threading.Event)

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


class Gate:
    """At most ``max_running`` requests reading data at once, one at a time on the shared
    engines; ``duckdb`` and ``spark`` are what :meth:`stop` interrupts (see the module
    docstring)."""

    def __init__(self, max_running: int, duckdb: Iterable[Any] = (), spark: Iterable[Any] = ()):
        self._slots = threading.BoundedSemaphore(max_running)
        self._shared = threading.Lock()
        self._guard = threading.Lock()  # orders start, stop and interrupts
        self._running: Ticket | None = None  # the request on the shared engines
        self._local = threading.local()
        self._duckdb = list(duckdb)
        self._spark = list(spark)

    @contextlib.contextmanager
    def bound(self, ticket: Ticket) -> Iterator[None]:
        """Run the work of this thread under ``ticket`` (read by :meth:`hold`)."""
        self._local.ticket = ticket
        try:
            yield
        finally:
            self._local.ticket = None

    @contextlib.contextmanager
    def slot(self, ticket: Ticket) -> Iterator[None]:
        """One of the ``max_running`` slots, waited for until the ticket's deadline."""
        if not self._slots.acquire(timeout=ticket.remaining()):
            raise not_started()
        try:
            yield
        finally:
            self._slots.release()

    @contextlib.contextmanager
    def hold(self, shared: bool) -> Iterator[None]:
        """Where a request's aggregation starts (it may charge inside): a run slot, the
        shared engines when ``shared``, and the ticket's check. Without a ticket (a worker
        process, whose server holds the slot) only the shared engines' lock is taken."""
        ticket: Ticket | None = getattr(self._local, "ticket", None)
        if ticket is None:
            with self._shared if shared else contextlib.nullcontext():
                yield
            return
        with self.slot(ticket):
            if shared and not self._shared.acquire(timeout=ticket.remaining()):
                raise not_started()
            try:
                self._start(ticket, shared)
                try:
                    yield
                finally:
                    with self._guard:
                        if self._running is ticket:
                            self._running = None
            finally:
                if shared:
                    self._shared.release()

    def _start(self, ticket: Ticket, shared: bool) -> None:
        with self._guard:
            if ticket.cancelled or ticket.remaining() <= 0:
                raise not_started()
            ticket.started = True
            if shared:
                self._running = ticket

    def stop(self, ticket: Ticket) -> tuple[bool, bool]:
        """Stop ``ticket``'s work at its deadline: ``(started, interrupted)``. A ticket not
        started never starts; one on the shared engines is interrupted until it returns."""
        with self._guard:
            ticket.cancelled = True
            started, shared = ticket.started, self._running is ticket
        if shared:
            threading.Thread(
                target=self._interrupt_until_done, args=(ticket,), daemon=True
            ).start()
        return started, shared

    def _interrupt_until_done(self, ticket: Ticket) -> None:
        while True:
            with self._guard:
                if self._running is not ticket:
                    return  # it left the shared engines: nothing of it runs there
                self._interrupt()
            if ticket.done.wait(INTERRUPT_EVERY):
                return

    def _interrupt(self) -> None:
        for con in self._duckdb:
            with contextlib.suppress(Exception):
                con.interrupt()
        for sc in self._spark:
            with contextlib.suppress(Exception):
                sc.cancelAllJobs()


def not_started() -> NotStarted:
    """The refusal of a request that waited for its turn until its deadline."""
    return NotStarted(
        "the server was busy for the whole of this request's run-time limit: it did not start "
        "and nothing was charged; try again"
    )
