"""Group commit: the write transactions of one process on one ledger file, several per sync.

A charge is durable only once its transaction's ``COMMIT`` has synced the file (WAL,
``synchronous=FULL``: one ``fsync`` of the log), and that sync is most of what a charge
costs. When several threads charge at once, they need not sync one after another: a
:class:`GroupCommit` runs every write that is waiting, each in a savepoint of its own, in
one transaction, and syncs once for all of them.

It is the classic leader/follower queue. A write joins the queue; if no transaction is in
progress its caller becomes the *leader*: it takes every write queued so far (its own
included), runs them in order in one ``BEGIN IMMEDIATE`` transaction, commits, and hands each
caller its result. Writes that arrive meanwhile wait for the next leader, who takes them all
at once. A lone write is committed at once (nobody waits for company), and under load a
transaction holds as many writes as arrived during the previous one's sync.

Why it is as sound as one transaction per write:

* **Serial order.** The writes run one after another on one connection, under the file's
  write lock (``BEGIN IMMEDIATE``). A write reads what the writes before it wrote, so two
  charges in one batch check the budget exactly as two transactions in that order would:
  together they can never overspend.
* **Isolation of failures.** Each write runs in a savepoint: one that raises is rolled back
  alone (its caller gets the error) and the others go on. A write that refuses (a charge
  that does not fit) writes nothing.
* **Durability before the answer.** A caller returns only after the transaction holding its
  write has committed and synced, never before; a process killed at any instant has synced
  a whole batch or none of it. So a charge that returned is on disk, and an answer (which
  is computed only after its charge returned) never exists without its charge. A batch that
  holds only writes that need no sync (answers stored after their charge, see
  :meth:`pinqpy.accounting.ledger.Ledger.store_answer`) commits without one; the next
  synced commit makes it durable.
* **A failed commit fails every write of the batch**: none of them is reported done.

Each process has one group per ledger file (:func:`group_for`), with a connection of its
own, shared by every :class:`~pinqpy.accounting.ledger.Ledger` object on that file in the
process. A forked child makes its own: a connection must never cross ``fork``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from pinqpy.errors import PinqError

__all__ = ["GroupCommit", "Write", "group_for", "release"]


class Write:
    """One write waiting for its transaction: ``work(connection)`` and what it gave."""

    __slots__ = ("done", "durable", "error", "result", "work")

    def __init__(self, work: Callable[[sqlite3.Connection], Any], durable: bool):
        self.work = work
        self.durable = durable
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None


class GroupCommit:
    """The writes of one process on one ledger file (see the module docstring).

    ``connect`` opens the connection the transactions run on (on first use); ``busy`` is the
    error raised when ``BEGIN IMMEDIATE`` gives up waiting for another process's lock."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        busy: Callable[[sqlite3.OperationalError], PinqError],
    ):
        self._connect = connect
        self._busy = busy
        self._conn: sqlite3.Connection | None = None
        self._wal = False
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[Write] = []
        self._leading = False
        self.users = 0
        #: Transactions committed and writes done, for benchmarks and tests.
        self.transactions = 0
        self.writes = 0

    def run(self, work: Callable[[sqlite3.Connection], Any], durable: bool = True) -> Any:
        """Run ``work(connection)`` inside a transaction of this file and return what it
        returned, once that transaction has committed (and synced, when ``durable``).
        ``work`` must not begin, commit or roll back; what it raises is raised here, with
        its writes undone and every other write of the batch kept."""
        write = Write(work, durable)
        with self._cond:
            self._queue.append(write)
            while not write.done:
                if self._leading:
                    self._cond.wait()
                    continue
                self._leading = True
                batch, self._queue = self._queue, []
                self._cond.release()
                try:
                    self._commit(batch)
                finally:
                    self._cond.acquire()
                    self._leading = False
                    self._cond.notify_all()
        if write.error is not None:
            raise write.error
        return write.result

    def close(self) -> None:
        """Close the connection (it is opened again if the group is used after)."""
        with self._cond:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # -- the leader's part -------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self._connect()
            mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
            self._wal = str(mode).lower() == "wal"
        return self._conn

    def _commit(self, batch: list[Write]) -> None:
        """Run ``batch`` in one transaction; every write of it is done when this returns."""
        try:
            conn = self._connection()
            # Only a batch with nothing to sync relaxes it, and only in WAL mode (a rollback
            # journal at NORMAL could corrupt the file on power loss).
            relaxed = self._wal and not any(w.durable for w in batch)
            if relaxed:
                conn.execute("PRAGMA synchronous = NORMAL")
            try:
                self._transaction(conn, batch)
            finally:
                if relaxed:
                    conn.execute("PRAGMA synchronous = FULL")
        except BaseException as exc:
            for w in batch:
                if not w.done:
                    w.error, w.result = _failed(exc), None
            if not isinstance(exc, Exception):
                raise
        finally:
            for w in batch:
                w.done = True

    def _transaction(self, conn: sqlite3.Connection, batch: list[Write]) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._busy(exc) from None
        try:
            for w in batch:
                conn.execute("SAVEPOINT write")
                try:
                    w.result = w.work(conn)
                except Exception as exc:
                    conn.execute("ROLLBACK TO write")
                    w.error = exc
                conn.execute("RELEASE write")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self.transactions += 1
        self.writes += len(batch)
        # Each write's own error stands; the others are done, with their results.
        for w in batch:
            w.done = True


def _failed(exc: BaseException) -> BaseException:
    """What a write of a batch whose transaction failed is told."""
    if isinstance(exc, PinqError):
        return exc
    err = PinqError(
        f"the ledger could not commit this write ({type(exc).__name__}); nothing of it was "
        "kept"
    )
    err.__cause__ = exc
    return err


# -- one group per process and file -------------------------------------------------------
_GROUPS: dict[tuple[int, str], GroupCommit] = {}
_LOCK = threading.Lock()
# Groups a forked child inherited: their connections must be neither used nor closed there.
_INHERITED: list[GroupCommit] = []


def group_for(
    path: str,
    connect: Callable[[], sqlite3.Connection],
    busy: Callable[[sqlite3.OperationalError], PinqError],
) -> GroupCommit:
    """This process's group for the ledger file ``path`` (made on first use); each caller
    counts as one user until it calls :func:`release`."""
    key = (os.getpid(), os.path.realpath(path))
    with _LOCK:
        group = _GROUPS.get(key)
        if group is None:
            group = _GROUPS[key] = GroupCommit(connect, busy)
        group.users += 1
        return group


def release(group: GroupCommit) -> None:
    """One user of ``group`` is done; the last one closes its connection."""
    with _LOCK:
        group.users -= 1
        if group.users > 0:
            return
        for key, g in list(_GROUPS.items()):
            if g is group and key[0] == os.getpid():
                del _GROUPS[key]
                break
        else:
            return  # another process's group (inherited across fork): left alone
    group.close()


def _after_fork() -> None:  # pragma: no cover - in a forked child
    global _LOCK
    _LOCK = threading.Lock()
    _INHERITED.extend(_GROUPS.values())
    _GROUPS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
