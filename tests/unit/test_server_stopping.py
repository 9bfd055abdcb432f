"""The server's gate, admission and member ledgers, in one process (real DuckDB, real
SQLite files): who may run, what a stop does, what a member's trail shows."""

from __future__ import annotations

import threading
import time
from fractions import Fraction

import pytest

from pinqpy.accounting.cost import Cost
from pinqpy.accounting.ledger import ChargeRecord, Ledger
from pinqpy.remote.server.admission import Admission, Crowded
from pinqpy.remote.server.config import Limits
from pinqpy.remote.server.stopping import Gate, NotStarted, Ticket
from pinqpy.remote.server.trail import OTHERS, MemberLedger, prepare


def ticket(seconds: float = 30, who: str = "alice") -> Ticket:
    return Ticket(who, time.monotonic() + seconds)


# -- the gate ----------------------------------------------------------------------------------
def test_a_ticket_stopped_before_its_turn_never_starts():
    gate = Gate(1)
    first, second = ticket(), ticket()
    with gate.bound(first), gate.hold(shared=True):
        assert first.started
        assert gate.stop(second) == (False, False)
    refused = pytest.raises(NotStarted, match="nothing was charged")
    with gate.bound(second), refused, gate.hold(shared=True):
        pass
    assert not second.started


def test_a_ticket_past_its_deadline_while_waiting_gives_up():
    gate = Gate(1)
    holder, waiter = ticket(), ticket(0.2)
    failures: list[BaseException] = []

    def wait() -> None:
        try:
            with gate.bound(waiter), gate.hold(shared=False):
                pass
        except NotStarted as err:
            failures.append(err)

    with gate.bound(holder), gate.hold(shared=False):  # the one slot
        t = threading.Thread(target=wait)
        t.start()
        t.join(10)
    assert len(failures) == 1 and not waiter.started


def test_a_stop_interrupts_the_duckdb_query_of_that_ticket_only():
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    gate = Gate(2, duckdb=[con])
    running = ticket()
    outcome: list[str] = []

    def work() -> None:
        try:
            with gate.bound(running), gate.hold(shared=True):
                con.execute(
                    "SELECT count(*) FROM range(3000000000) a, range(10) b "
                    "WHERE a.range % 7 = b.range"
                ).fetchall()
            outcome.append("finished")
        except duckdb.InterruptException:
            outcome.append("interrupted")
        finally:
            running.done.set()

    t = threading.Thread(target=work)
    t.start()
    for _ in range(200):  # bounded: until the query holds the shared engines
        if running.started:
            break
        time.sleep(0.01)
    time.sleep(0.2)
    other = ticket()
    assert gate.stop(other) == (False, False)  # not running: nothing is interrupted
    assert gate.stop(running) == (True, True)
    t.join(30)
    assert outcome == ["interrupted"]
    assert con.execute("SELECT 42").fetchall() == [(42,)]  # the next query runs as ever


def test_without_a_ticket_only_the_shared_lock_is_taken():
    gate = Gate(1)  # a worker process's gate: its server holds the slot
    with gate.hold(shared=True), gate.hold(shared=False):
        pass


# -- admission ---------------------------------------------------------------------------------
def test_admission_refuses_past_each_cap_and_counts_releases():
    a = Admission(Limits(max_requests=3, max_requests_per_analyst=2))
    a.admit("alice")
    a.admit("alice")
    with pytest.raises(Crowded, match="already has 2 requests in progress") as err:
        a.admit("alice")
    assert err.value.status == 429
    a.admit("bob")
    with pytest.raises(Crowded, match="3 requests are in progress") as err:
        a.admit("carol")
    assert err.value.status == 503
    a.release("alice")
    a.admit("carol")
    assert (a.in_progress(), a.in_progress("alice"), a.in_progress("carol")) == (3, 1, 1)


# -- member ledgers ----------------------------------------------------------------------------
def test_a_member_ledger_shows_only_its_members_questions(tmp_path):
    path = tmp_path / "l.db"
    with Ledger(path) as base:
        base.open_budget("group:lab/t", Cost(1))
        prepare(base)
    alice, bob = MemberLedger(path, "alice"), MemberLedger(path, "bob")
    try:
        limits = {"group:lab/t": Cost(1)}
        qa = alice.charge([("group:lab/t", Cost(0.25))], ChargeRecord("age > 77", "P(77)"), limits)
        qb = bob.charge([("group:lab/t", Cost(0.5))], ChargeRecord("age < 30", "P(30)"), limits)
        assert qa is not None and qb is not None
        seen = bob.charges("group:lab/t")
        assert list(seen["description"]) == [OTHERS, "age < 30"]
        assert list(seen["plan"]) == ["", "P(30)"]
        assert list(seen["epsilon_exact"]) == ["1/4", "1/2"]
        assert seen["has_answer"].iloc[0] is None
        assert list(alice.charges("group:lab/t")["description"]) == ["age > 77", OTHERS]
        # one budget: both spend it, and it refuses what neither could pay
        assert alice.spent("group:lab/t") == Cost(Fraction(3, 4))
        assert bob.charge([("group:lab/t", Cost(0.5))], ChargeRecord("x"), limits) is None
        # answers are kept per member
        alice.store_answer(qa, "question", '{"v": 1}')
        assert alice.cached("question") == '{"v": 1}'
        assert bob.cached("question") is None
    finally:
        alice.close()
        bob.close()


def test_a_charge_whose_asker_was_never_noted_shows_as_anothers(tmp_path):
    """The note follows the charge; a crash between them hides the question from everyone."""
    path = tmp_path / "l.db"
    with Ledger(path) as base:
        base.open_budget("group:lab/t", Cost(1))
        prepare(base)
        base.charge([("group:lab/t", Cost(0.25))], ChargeRecord("age > 77"), {})
    with MemberLedger(path, "alice") as alice:
        assert list(alice.charges("group:lab/t")["description"]) == [OTHERS]
