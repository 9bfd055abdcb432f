"""A durable privacy ledger: every charge kept in an SQLite file.

A :class:`Ledger` records each charge in one SQLite transaction that is committed *before*
the caller computes and releases the noisy answer. Reopening the file restores what each
budget has spent (exactly: epsilons and deltas are stored as ``"numerator/denominator"``
text) and the answers already released, so a repeated question can be answered again from the
cache at no further cost. Several threads and several processes may share one file; a charge
reads the spent total and writes the new one under SQLite's write lock, so together they can
never overspend. The tables are an audit trail: what was asked, by which plan, when, and at
what epsilon and delta (:meth:`Ledger.charges`).

Who may write the file
----------------------
The ledger file is the **curator's**: only the curator (and pinqpy processes the curator runs)
may have write access to it, and analysts should not read it either (it holds the secret
below). An analyst who can write it could lower what was spent, and one who can delete it
resets the budget (deleting or replacing the file is a curator action; a fresh file with the
same name cannot be told apart from the inside). Within those limits the ledger does not
trust its file blindly:

* **Integrity on open.** Opening a ledger checks that every budget's running spent equals
  the exact sum of its recorded charges and stays within its total; on a mismatch (an edited
  spent, a deleted or edited charge row) it raises :class:`~pinqpy.PinqError` and writes
  nothing. ``Ledger(path, verify=False)`` opens such a file for inspection
  (:meth:`Ledger.check`, :meth:`Ledger.charges`) but refuses to charge or to serve answers.
* **Answers are data.** Cached answers are stored as JSON (see :mod:`pinqpy.pipeline.answers`),
  never pickled, so a row planted in the file cannot run code in the curator's process.
* **A secret of its own.** Each file holds a random secret, made when the file is created.
  Answers are stored under an HMAC of their question under that secret, so nothing derived
  from the data can be recomputed from outside. The audit trail shows no cache key.

>>> import os, shutil, tempfile
>>> from pinqpy.accounting.cost import Cost
>>> folder = tempfile.mkdtemp()
>>> path = os.path.join(folder, "budget.db")
>>> with Ledger(path) as ledger:
...     ledger.open_budget("main", Cost(epsilon=1))
...     qid = ledger.charge([("main", Cost(epsilon=0.25))], ChargeRecord("count"),
...                         {"main": Cost(epsilon=1)})
...     ledger.store_answer(qid, "count|eps=1/4", '{"value": 41.7}')
>>> with Ledger(path) as ledger:          # a later process, say
...     ledger.spent("main"), ledger.cached("count|eps=1/4")
(Cost(epsilon=0.25), '{"value": 41.7}')
>>> shutil.rmtree(folder)

Durability
----------
The file runs in **WAL mode with** ``synchronous=FULL``. Both WAL and the rollback journal
are *atomic* under a crash at any instant: SQLite never exposes a half-written transaction,
and recovery on the next open (WAL replay, or hot-journal rollback) leaves a consistent file.
What differs is *durability* and cost:

* A commit in WAL mode appends the transaction to the ``-wal`` file; with ``synchronous=FULL``
  the WAL is fsync'ed before ``COMMIT`` returns, so a committed charge survives SIGKILL *and*
  power loss or an OS crash. (``synchronous=NORMAL`` would survive SIGKILL too, since the data
  is in the OS page cache, but the last commits could roll back after a power loss, so a
  charge whose answer was already released could be forgotten. A privacy ledger must not
  allow that.)
* The rollback journal with ``synchronous=FULL`` is equally durable but syncs the journal and
  then the database on every commit (at least two syncs against WAL's one; several times
  slower in ``benchmarks/bench_ledger.py``), and a writer blocks readers; WAL lets an auditor
  read the ledger while charges go on.

Only :meth:`Ledger.store_answer` commits without its own sync (``synchronous=NORMAL`` for
that one transaction, WAL only): an answer is released after its charge was synced, so a
power loss can at worst forget a cached answer (asking again is charged again), never a
charge. It still survives the process being killed, and the next charge syncs it.

WAL needs every process on the same host (it shares memory through the ``-shm`` file), so a
ledger must not live on a network file system. If the file system refuses WAL the ledger
keeps SQLite's rollback journal, still with ``synchronous=FULL`` (durable, slower).
``fullfsync`` is turned on as well: it only matters on macOS, where plain ``fsync`` does not
flush the disk's cache.

Concurrency
-----------
A connection waits up to :data:`BUSY_TIMEOUT` seconds for the write lock instead of failing.
:meth:`Ledger.charge` opens its transaction with ``BEGIN IMMEDIATE``, which takes the write
lock *before* it reads the spent totals, so reading, checking and writing are one serialised
step across processes. Within a process a lock guards the one connection, so a ledger may be
shared by threads; after ``fork`` the child opens a connection of its own.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Protocol, TypeVar

from pinqpy.accounting.cost import Cost
from pinqpy.accounting.group_commit import GroupCommit, group_for, release
from pinqpy.accounting.ledger_file import (
    BUSY_TIMEOUT,
    SCHEMA_VERSION,
    decode,
    encode,
    group_connection,
    init_schema,
    locked_out,
    open_file,
    spent_problems,
    stored_cost,
    utc_now,
)
from pinqpy.errors import PinqError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BUSY_TIMEOUT", "SCHEMA_VERSION", "ChargeRecord", "Ledger", "Relay"]

T = TypeVar("T")

# Connections abandoned by a forked child. SQLite forbids using (or closing) a connection
# inherited across fork; keeping a reference stops the garbage collector from closing it.
_ABANDONED: list[sqlite3.Connection] = []


@dataclass(frozen=True)
class ChargeRecord:
    """What a charge is for, as the audit trail shows it.

    ``description`` is a short text (``"count"``, or the SQL of a query) and ``plan`` the
    canonical text of the query's plan. ``cache_key`` (the key its answer will be cached
    under) is accepted for compatibility and never written: keys are not part of the audit
    trail.

    >>> ChargeRecord("count").plan
    ''
    """

    description: str
    plan: str = ""
    cache_key: str | None = None


def _fits_within(spent: Cost, cost: Cost, limit: Cost) -> bool:
    return spent.epsilon + cost.epsilon <= limit.epsilon and spent.delta + cost.delta <= limit.delta


class Relay(Protocol):
    """Where a ledger sends its writes instead of making them (:meth:`Ledger.relay_writes`):
    the charge (entries by budget name, sorted) returns its query id, or None when it does
    not fit, once it is durable; an answer is stored under its answer key."""

    def charge(self, entries: list[tuple[str, Cost]], record: ChargeRecord) -> int | None: ...

    def store_answer(self, query_id: int, answer_key: str, answer: str) -> None: ...


class Ledger:
    """A privacy ledger in the SQLite file ``path`` (created if absent).

    Budgets are identified by name. :meth:`charge` is the one way spending grows; it commits
    durably before returning. A ledger is a context manager and may be shared by threads and
    by processes on the same host. See the module documentation for the durability settings.
    """

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = True):
        self.path = os.fspath(path)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self.journal_mode = ""
        self._verify = verify
        self._secret = b""
        #: What the integrity check on open found (empty: the file is consistent). Only a
        #: ledger opened with ``verify=False`` can have problems; it then refuses every write.
        self.problems: list[str] = []
        # Writes go through this process's write group for the file (group commit), or
        # through a relay to the process that charges for this one (a server's worker).
        self._group: GroupCommit | None = None
        self._group_pid = 0
        self._done_with_group: weakref.finalize | None = None
        self._relay: Relay | None = None
        self._conn = self._connect()

    # -- connection ------------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        conn, self.journal_mode = open_file(self.path)
        try:
            self._secret, self.problems = init_schema(conn, self.path, self._verify)
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise PinqError(f"{self.path!r} is not a usable pinqpy ledger: {exc}") from None
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def _use(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._conn is None:
                raise PinqError("this ledger is closed")
            if os.getpid() != self._pid:  # forked: never touch the parent's connection
                _ABANDONED.append(self._conn)
                self._conn = None
                self._pid = os.getpid()
                self._conn = self._connect()
            yield self._conn

    def _require_consistent(self) -> None:
        if self.problems:
            raise PinqError(
                f"the ledger {self.path!r} failed its integrity check ("
                f"{'; '.join(self.problems[:3])}); it was opened for inspection only and "
                "neither charges nor serves answers"
            )

    def _answer_key(self, cache_key: str) -> str:
        """The key an answer is stored under: an HMAC of its question under the file's secret."""
        return hmac.new(self._secret, cache_key.encode("utf-8"), hashlib.sha256).hexdigest()

    def _writes(self) -> GroupCommit:
        """This process's write group for the file (:mod:`pinqpy.accounting.group_commit`)."""
        with self._lock:
            if self._conn is None:
                raise PinqError("this ledger is closed")
            if self._group is None or self._group_pid != os.getpid():
                if self._done_with_group is not None:
                    self._done_with_group.detach()  # another process's group: left alone
                group = group_for(
                    self.path,
                    functools.partial(group_connection, self.path),
                    functools.partial(locked_out, self.path),
                )
                self._group, self._group_pid = group, os.getpid()
                # A ledger dropped without close() still gives up its use of the group.
                self._done_with_group = weakref.finalize(self, release, group)
            return self._group

    def _transact(self, work: Callable[[sqlite3.Connection], T], durable: bool = True) -> T:
        """``work(connection)`` in a write transaction holding SQLite's write lock, with
        the other writes of this process that are waiting (group commit); returns what it
        returned once the transaction has committed.

        ``durable=False`` needs no sync of its own (WAL ``synchronous=NORMAL``, when the
        whole batch needs none): still atomic, and safe when the process is killed, but lost
        on power loss unless a later durable commit syncs the log (every later charge does).
        Only in WAL mode: with a rollback journal, ``NORMAL`` could corrupt the file on power
        loss, so it stays FULL.
        """
        self._require_consistent()
        return self._writes().run(work, durable)  # type: ignore[no-any-return]

    def relay_writes(self, relay: Relay | None) -> None:
        """Send this ledger's charges and stored answers to ``relay`` instead of writing
        them here (None: write them here again). A server's worker process relays them to
        the server, whose write group commits the charges of all its workers together; a
        charge with a ``fits`` rule of its own is still written here."""
        self._relay = relay

    def close(self) -> None:
        """Close the file (idempotent). Committed charges are already on disk."""
        with self._lock:
            conn, self._conn = self._conn, None
            done, self._done_with_group = self._done_with_group, None
            if conn is not None:
                if os.getpid() == self._pid:
                    conn.close()
                else:
                    _ABANDONED.append(conn)
        if done is not None:
            done()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else self.journal_mode
        return f"Ledger({self.path!r}, {state})"

    # -- budgets -----------------------------------------------------------------------------
    def open_budget(self, name: str, total: Cost, accounting: str = "approx") -> None:
        """Create the budget ``name`` with ``total``, or check that the stored one matches.

        A ledger file cannot silently change a budget's total or its accounting model:
        a mismatch raises :class:`~pinqpy.PinqError`.
        """
        if not isinstance(name, str) or not name:
            raise PinqError("a ledger budget needs a non-empty name")
        if not isinstance(accounting, str) or not accounting:
            raise PinqError("a ledger budget needs a non-empty accounting name")
        self._transact(lambda conn: self._open_budget_in(conn, name, total, accounting))

    def _open_budget_in(
        self, conn: sqlite3.Connection, name: str, total: Cost, accounting: str
    ) -> None:
        row = conn.execute(
            "SELECT total_epsilon, total_delta, accounting FROM budgets WHERE name = ?",
            (name,),
        ).fetchone()
        if row is None:
            zero = encode(Fraction(0))
            conn.execute(
                "INSERT INTO budgets (name, total_epsilon, total_delta, accounting, "
                "spent_epsilon, spent_delta, created) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (name, encode(total.epsilon), encode(total.delta), accounting, zero, zero,
                 utc_now()),
            )  # fmt: skip
            return
        stored = stored_cost(decode(row[0]), decode(row[1]))
        if stored != total or row[2] != accounting:
            raise PinqError(
                f"the ledger {self.path!r} holds budget {name!r} with total {stored!r} "
                f"({row[2]} accounting), but it was opened with {total!r} ({accounting} "
                "accounting); a ledger file cannot silently change a budget's total. "
                "Open it with the stored total, or use a new ledger file"
            )

    def spent(self, name: str) -> Cost:
        """What budget ``name`` has spent, exactly, as committed in the file."""
        with self._use() as conn:
            row = conn.execute(
                "SELECT spent_epsilon, spent_delta FROM budgets WHERE name = ?", (name,)
            ).fetchone()
        if row is None:
            raise PinqError(f"the ledger has no budget named {name!r}")
        return stored_cost(decode(row[0]), decode(row[1]))

    def total(self, name: str) -> Cost:
        """The total budget ``name`` was opened with."""
        with self._use() as conn:
            row = conn.execute(
                "SELECT total_epsilon, total_delta FROM budgets WHERE name = ?", (name,)
            ).fetchone()
        if row is None:
            raise PinqError(f"the ledger has no budget named {name!r}")
        return stored_cost(decode(row[0]), decode(row[1]))

    # -- charging ----------------------------------------------------------------------------
    def charge(
        self,
        entries: list[tuple[str, Cost]],
        record: ChargeRecord,
        limits: dict[str, Cost],
        fits: Callable[[str, Cost, Cost, Cost], bool] | None = None,
    ) -> int | None:
        """Charge every ``(budget name, cost)`` of ``entries`` in one durable transaction.

        Under the write lock, each budget's stored spent is read and ``spent + cost`` checked
        against ``limits[name]`` (the stored total when a name is missing from ``limits``):
        both components within the limit, or ``fits(name, spent, cost, limit)`` when given.
        If every entry fits, one charge row per entry is written under a new query id, the
        running totals are updated, the transaction is committed (and synced) and the id is
        returned. If any entry does not fit, nothing is written and ``None`` is returned.
        Entries naming the same budget twice are added together.
        """
        if not isinstance(record, ChargeRecord):
            raise PinqError("charge() needs a ChargeRecord describing the query")
        merged: dict[str, Cost] = {}
        for name, cost in entries:
            merged[name] = merged[name] + cost if name in merged else cost
        if self._relay is not None and fits is None:
            self._require_consistent()
            return self._relay.charge(sorted(merged.items()), record)
        return self._transact(lambda conn: self._charge_in(conn, merged, record, limits, fits))

    def _charge_in(
        self,
        conn: sqlite3.Connection,
        merged: dict[str, Cost],
        record: ChargeRecord,
        limits: dict[str, Cost],
        fits: Callable[[str, Cost, Cost, Cost], bool] | None,
    ) -> int | None:
        """:meth:`charge`'s reads, check and writes, inside a write transaction: nothing is
        written unless every entry fits."""
        now = utc_now()  # under the write lock, so times follow query ids
        updates: list[tuple[str, str, str]] = []
        for name in sorted(merged):
            cost = merged[name]
            row = conn.execute(
                "SELECT spent_epsilon, spent_delta, total_epsilon, total_delta "
                "FROM budgets WHERE name = ?",
                (name,),
            ).fetchone()
            if row is None:
                raise PinqError(f"the ledger has no budget named {name!r}; open it first")
            spent = stored_cost(decode(row[0]), decode(row[1]))
            limit = limits.get(name)
            if limit is None:
                limit = stored_cost(decode(row[2]), decode(row[3]))
            ok = fits(name, spent, cost, limit) if fits else _fits_within(spent, cost, limit)
            if not ok:
                return None
            updates.append(
                (encode(spent.epsilon + cost.epsilon), encode(spent.delta + cost.delta), name)
            )
        cur = conn.execute(  # no cache key: keys are not part of the audit trail
            "INSERT INTO queries (description, plan, cache_key, created) VALUES (?, ?, ?, ?)",
            (record.description, record.plan, None, now),
        )
        qid = cur.lastrowid
        assert qid is not None
        conn.executemany(
            "INSERT INTO charges (query_id, budget, epsilon, delta) VALUES (?, ?, ?, ?)",
            [
                (qid, name, encode(merged[name].epsilon), encode(merged[name].delta))
                for name in sorted(merged)
            ],
        )
        conn.executemany(
            "UPDATE budgets SET spent_epsilon = ?, spent_delta = ? WHERE name = ?", updates
        )
        self._charged(conn, qid)
        return qid

    def _charged(self, conn: sqlite3.Connection, query_id: int) -> None:
        """More rows to write in the transaction of charge ``query_id`` (none here; a
        subclass may note more about the query, atomically with its charge)."""

    # -- answers -----------------------------------------------------------------------------
    def store_answer(self, query_id: int, cache_key: str, answer: str) -> None:
        """Attach a released answer (a JSON text the caller made) to committed query ``query_id``.

        The answer is stored under an HMAC of ``cache_key`` under the file's secret, never
        under ``cache_key`` itself.

        A query keeps its first stored answer. Several queries may store answers under one
        key (two processes that asked the same question at once); :meth:`cached` returns the
        earliest.

        The answer is committed atomically but without its own disk sync (it survives the
        process being killed; the next charge's sync makes it durable against power loss).
        The charge it belongs to was synced before the answer existed, so a power loss can
        at worst forget an answer, and asking again is then charged again: the ledger never
        under-counts, and a query costs one sync, not two.
        """
        if not isinstance(answer, str) or not isinstance(cache_key, str):
            raise PinqError("store_answer() takes a text cache key and a text answer")
        self.store_keyed(query_id, self._answer_key(cache_key), answer)

    def store_keyed(self, query_id: int, answer_key: str, answer: str) -> None:
        """:meth:`store_answer` under an answer key already made (an HMAC of the question
        under this file's secret, as :meth:`store_answer` makes it): what a relay of a
        worker's writes stores."""
        if self._relay is not None:
            self._require_consistent()
            self._relay.store_answer(query_id, answer_key, answer)
            return

        def store(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM queries WHERE id = ?", (query_id,)).fetchone() is None:
                raise PinqError(f"the ledger has no query {query_id}; charge it first")
            conn.execute(
                "INSERT OR IGNORE INTO answers (query_id, cache_key, answer, created) "
                "VALUES (?, ?, ?, ?)",
                (query_id, answer_key, answer, utc_now()),
            )

        self._transact(store, durable=False)

    def cached(self, cache_key: str) -> str | None:
        """The answer stored under ``cache_key`` (the earliest one), or ``None``."""
        self._require_consistent()
        with self._use() as conn:
            row = conn.execute(
                "SELECT answer FROM answers WHERE cache_key = ? ORDER BY query_id LIMIT 1",
                (self._answer_key(cache_key),),
            ).fetchone()
        return None if row is None else str(row[0])

    # -- audit -------------------------------------------------------------------------------
    def charges(self, name: str | None = None) -> pd.DataFrame:
        """The audit trail: one row per (query, budget) charge, oldest first.

        Columns: ``query_id``, ``budget``, ``epsilon`` and ``delta`` (floats),
        ``epsilon_exact`` and ``delta_exact`` (exact ``"num/den"`` text), ``description``,
        ``plan``, ``created`` (UTC, ISO 8601 text) and ``has_answer``. No cache key or
        fingerprint is shown: nothing in the trail is derived from the data. With
        ``name``, only that budget's charges. A query charged to no budget appears once with
        budget ``None`` and zero cost.
        """
        import pandas as pd

        sql = (
            "SELECT q.id, c.budget, c.epsilon, c.delta, q.description, q.plan, "
            "q.created, a.query_id IS NOT NULL "
            "FROM queries q {join} charges c ON c.query_id = q.id "
            "LEFT JOIN answers a ON a.query_id = q.id {where} ORDER BY q.id, c.budget"
        )
        if name is None:
            query, params = sql.format(join="LEFT JOIN", where=""), ()
        else:
            query, params = sql.format(join="JOIN", where="WHERE c.budget = ?"), (name,)
        with self._use() as conn:
            rows = conn.execute(query, params).fetchall()
        zero = encode(Fraction(0))
        records = []
        for qid, budget, eps, dlt, desc, plan, created, has_answer in rows:
            e, d = decode(eps or zero), decode(dlt or zero)
            records.append(
                (qid, budget, float(e), float(d), encode(e), encode(d), desc, plan,
                 created, bool(has_answer))
            )  # fmt: skip
        columns = [
            "query_id", "budget", "epsilon", "delta", "epsilon_exact", "delta_exact",
            "description", "plan", "created", "has_answer",
        ]  # fmt: skip
        df = pd.DataFrame.from_records(records, columns=columns)
        return df.astype(
            {"query_id": "int64", "epsilon": "float64", "delta": "float64", "has_answer": bool}
        )

    def budgets(self) -> pd.DataFrame:
        """One row per budget: name, accounting, total and spent (floats and exact text)."""
        import pandas as pd

        with self._use() as conn:
            rows = conn.execute(
                "SELECT name, accounting, total_epsilon, total_delta, spent_epsilon, "
                "spent_delta, created FROM budgets ORDER BY name"
            ).fetchall()
        records = []
        for name, acc, te, td, se, sd, created in rows:
            t_e, t_d, s_e, s_d = (decode(v) for v in (te, td, se, sd))
            records.append(
                (name, acc, float(t_e), float(t_d), float(s_e), float(s_d), encode(t_e),
                 encode(t_d), encode(s_e), encode(s_d), created)
            )  # fmt: skip
        columns = [
            "budget", "accounting", "total_epsilon", "total_delta", "spent_epsilon",
            "spent_delta", "total_epsilon_exact", "total_delta_exact", "spent_epsilon_exact",
            "spent_delta_exact", "created",
        ]  # fmt: skip
        return pd.DataFrame.from_records(records, columns=columns)

    def check(self) -> list[str]:
        """Problems found in the file; an empty list means it is consistent.

        Runs SQLite's ``integrity_check`` and checks that every budget's running spent equals
        the exact sum of its charge rows, and that no budget has spent beyond its total (the
        latter checks are also made whenever a ledger is opened).
        """
        with self._use() as conn:
            conn.execute("BEGIN")  # one consistent snapshot for every read below
            try:
                integrity = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
                problems = spent_problems(conn)
            finally:
                conn.execute("COMMIT")
        if integrity != ["ok"]:
            problems[:0] = [f"integrity_check: {line}" for line in integrity]
        return problems
