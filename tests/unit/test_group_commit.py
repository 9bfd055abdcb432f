"""Group commit: the writes waiting together share one transaction, each as if alone."""

from __future__ import annotations

import sqlite3
import threading
import time
from fractions import Fraction

import pytest

import pinqpy as pq
from pinqpy.accounting.group_commit import GroupCommit
from pinqpy.accounting.ledger import ChargeRecord, Ledger


def rec(text: str = "q") -> ChargeRecord:
    return ChargeRecord(text, "plan")


def wait_for(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the condition never held")
        time.sleep(0.001)


def held_batch(ledger: Ledger, n: int, charge_one) -> list[object]:
    """Charge once with the transaction held open until ``n`` more charges (threads running
    ``charge_one(i)``) are queued behind it; the results of those ``n``, in order."""
    group = ledger._writes()
    results: list[object] = [None] * n

    def hold(name, spent, cost, limit):  # runs inside the first transaction
        wait_for(lambda: len(group._queue) == n)
        return (spent + cost).fits_in(limit)

    def worker(i: int) -> None:
        try:
            results[i] = charge_one(i)
        except Exception as exc:
            results[i] = exc

    first = threading.Thread(
        target=lambda: ledger.charge([("b", pq.Cost(Fraction(1, 100)))], rec("first"), {}, hold)
    )
    first.start()
    wait_for(lambda: group._leading)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in [first, *threads]:
        t.join(60)
    return results


def test_charges_waiting_together_share_one_transaction_and_never_overspend(tmp_path):
    limit = pq.Cost(epsilon=Fraction(5, 100))
    with Ledger(tmp_path / "l.db") as led:
        led.open_budget("b", limit)
        group = led._writes()
        before = (group.transactions, group.writes)
        # one charge holds the file; eight more queue: one transaction takes all eight, and
        # it charges exactly the four that still fit, in order, as eight transactions would
        results = held_batch(
            led, 8, lambda i: led.charge([("b", pq.Cost(Fraction(1, 100)))], rec(f"q{i}"), {})
        )
        assert (group.transactions - before[0], group.writes - before[1]) == (2, 9)
        assert sum(r is not None for r in results) == 4
        assert led.spent("b") == limit
        assert led.check() == []
        assert len(led.charges("b")) == 5


def test_a_failing_write_is_undone_alone_and_told_its_error(tmp_path):
    total = pq.Cost(epsilon=1)
    with Ledger(tmp_path / "l.db") as led:
        led.open_budget("b", total)

        def charge_one(i: int) -> object:
            name = "nobody" if i == 1 else "b"
            return led.charge([(name, pq.Cost(Fraction(1, 10)))], rec(f"q{i}"), {})

        results = held_batch(led, 3, charge_one)
        assert isinstance(results[1], pq.PinqError) and "no budget named" in str(results[1])
        assert all(isinstance(r, int) for r in (results[0], results[2]))
        # the holding charge and two of the three
        assert led.spent("b") == pq.Cost(Fraction(1, 100) + Fraction(2, 10))
        assert led.check() == []


def test_a_transaction_that_fails_fails_every_write_in_it(tmp_path):
    path = tmp_path / "plain.db"
    setup = sqlite3.connect(path)
    setup.execute("CREATE TABLE t (x INTEGER)")
    setup.commit()
    setup.close()

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(path, isolation_level=None, check_same_thread=False)

    group = GroupCommit(connect, lambda exc: pq.PinqError("locked"))
    release = threading.Event()
    outcome: dict[str, object] = {}

    def blocker(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t VALUES (1)")
        wait_for(lambda: len(group._queue) == 2)

    def doomed(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t VALUES (2)")
        release.wait()
        raise KeyboardInterrupt  # not an error of the write: the whole transaction fails

    def run(name: str, work) -> None:
        try:
            outcome[name] = group.run(work)
        except BaseException as exc:
            outcome[name] = exc

    first = threading.Thread(target=run, args=("first", blocker))
    first.start()
    wait_for(lambda: group._leading)
    def bystander(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO t VALUES (3)")

    others = [
        threading.Thread(target=run, args=("doomed", doomed)),
        threading.Thread(target=run, args=("bystander", bystander)),
    ]
    for t in others:
        t.start()
    first.join(30)
    release.set()
    for t in others:
        t.join(30)
    assert outcome["first"] is None  # committed alone, before the others queued
    assert isinstance(outcome["doomed"], KeyboardInterrupt | pq.PinqError)
    assert isinstance(outcome["bystander"], pq.PinqError | KeyboardInterrupt)
    rows = sorted(r[0] for r in connect().execute("SELECT x FROM t"))
    assert rows == [1]  # nothing of the failed transaction was kept
    group.close()


def test_every_ledger_of_one_file_in_a_process_shares_its_write_group(tmp_path):
    path = tmp_path / "l.db"
    with Ledger(path) as a, Ledger(path) as b:
        assert a._writes() is b._writes()
        other = tmp_path / "m.db"
        with Ledger(other) as c:
            assert c._writes() is not a._writes()
    # the last user closed it: a new ledger of the file gets a new group
    with Ledger(path) as again:
        group = again._writes()
        assert group.users == 1
        again.open_budget("b", pq.Cost(1))
        assert again.charge([("b", pq.Cost(Fraction(1, 2)))], rec(), {}) is not None


def test_a_ledger_dropped_without_close_gives_up_its_group(tmp_path):
    import gc

    path = tmp_path / "l.db"
    led = Ledger(path)
    group = led._writes()
    assert group.users == 1
    del led
    gc.collect()
    assert group.users == 0 and group._conn is None


@pytest.mark.parametrize("n", [1, 5])
def test_answers_stored_together_are_all_kept(tmp_path, n):
    with Ledger(tmp_path / "l.db") as led:
        led.open_budget("b", pq.Cost(1))
        ids = [led.charge([("b", pq.Cost(Fraction(1, 100)))], rec(), {}) for _ in range(n)]
        threads = [
            threading.Thread(target=led.store_answer, args=(q, f"key{q}", f'{{"v": {q}}}'))
            for q in ids
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert [led.cached(f"key{q}") for q in ids] == [f'{{"v": {q}}}' for q in ids]
