"""The SQLite privacy ledger: exact spent across reopen, atomic charges, cache, audit trail."""

from __future__ import annotations

import json
import sqlite3
import threading
from datetime import UTC, datetime
from fractions import Fraction

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.accounting.ledger import ChargeRecord, Ledger
from pinqpy.accounting.ledger_file import decode as _decode
from pinqpy.accounting.ledger_file import encode as _encode

ONE = pq.Cost(epsilon=1)


@pytest.fixture
def path(tmp_path):
    return tmp_path / "budget.db"


def rec(desc: str = "count", **kw: object) -> ChargeRecord:
    return ChargeRecord(desc, **kw)  # type: ignore[arg-type]


def test_ten_charges_of_a_tenth_fill_one_exactly_and_survive_reopen(path):
    with Ledger(path) as led:
        led.open_budget("b", ONE)
        ids = [led.charge([("b", pq.Cost(epsilon=0.1))], rec(), {"b": ONE}) for _ in range(10)]
        assert all(isinstance(i, int) for i in ids)
        assert ids == sorted(ids) and len(set(ids)) == 10
        assert led.spent("b").epsilon == Fraction(1)
    with Ledger(path) as led:
        led.open_budget("b", ONE)
        spent = led.spent("b")
        assert spent.epsilon == Fraction(1) and spent.delta == 0
        assert type(spent) is pq.Cost
        assert led.charge([("b", pq.Cost(epsilon=Fraction(1, 10**30)))], rec(), {"b": ONE}) is None
        assert led.spent("b").epsilon == 1
        assert led.check() == []


def test_delta_is_exact_too(path):
    total = pq.Cost(epsilon=1, delta=1e-6)
    with Ledger(path) as led:
        led.open_budget("b", total)
        for _ in range(4):
            assert led.charge([("b", pq.Cost(0.25, 2.5e-7))], rec(), {"b": total}) is not None
        assert led.charge([("b", pq.Cost(0, Fraction(1, 10**40)))], rec(), {"b": total}) is None
    with Ledger(path) as led:
        assert led.spent("b") == total


def test_mismatched_total_or_accounting_on_reopen_is_refused(path):
    with Ledger(path) as led:
        led.open_budget("b", ONE)
        led.open_budget("b", pq.Cost(epsilon=1.0))  # same total, spelled differently: fine
    with Ledger(path) as led:
        with pytest.raises(pq.PinqError, match="cannot silently change a budget's total"):
            led.open_budget("b", pq.Cost(epsilon=2))
        with pytest.raises(pq.PinqError, match="cannot silently change"):
            led.open_budget("b", pq.Cost(epsilon=1, delta=1e-9))
        with pytest.raises(pq.PinqError, match="accounting"):
            led.open_budget("b", ONE, accounting="rdp")
        assert led.total("b") == ONE


def test_unknown_budget_is_an_error(path):
    with Ledger(path) as led:
        with pytest.raises(pq.PinqError, match="no budget named"):
            led.spent("nope")
        with pytest.raises(pq.PinqError, match="no budget named"):
            led.charge([("nope", ONE)], rec(), {})
        assert led.charges().empty


def test_multi_budget_charge_is_atomic(path):
    a_total, b_total = pq.Cost(epsilon=1), pq.Cost(epsilon=0.5)
    limits = {"a": a_total, "b": b_total}
    with Ledger(path) as led:
        led.open_budget("a", a_total)
        led.open_budget("b", b_total)
        qid = led.charge([("a", pq.Cost(0.4)), ("b", pq.Cost(0.4))], rec("join"), limits)
        assert qid is not None
        # fits a (0.8 <= 1) but not b (0.8 > 0.5): nothing at all is written
        assert led.charge([("a", pq.Cost(0.4)), ("b", pq.Cost(0.4))], rec("again"), limits) is None
        assert led.spent("a").epsilon == Fraction(2, 5)
        assert led.spent("b").epsilon == Fraction(2, 5)
        df = led.charges()
        assert list(df.query_id) == [qid, qid]
        assert list(df.budget) == ["a", "b"]
        assert "again" not in set(df.description)
        assert led.check() == []
    with Ledger(path) as led:  # and nothing of the refused charge reached the file
        assert led.spent("b").epsilon == Fraction(2, 5)
        assert len(led.charges()) == 2


def test_duplicate_entries_for_one_budget_add_up(path):
    with Ledger(path) as led:
        led.open_budget("a", ONE)
        qid = led.charge([("a", pq.Cost(0.25)), ("a", pq.Cost(0.5))], rec(), {"a": ONE})
        assert led.spent("a").epsilon == Fraction(3, 4)
        df = led.charges("a")
        assert list(df.query_id) == [qid] and list(df.epsilon_exact) == ["3/4"]
        assert led.charge([("a", pq.Cost(0.2)), ("a", pq.Cost(0.1))], rec(), {"a": ONE}) is None


def test_limits_and_custom_fits_rule(path):
    with Ledger(path) as led:
        led.open_budget("a", ONE, accounting="custom")
        # a tighter limit than the stored total is honoured
        assert led.charge([("a", pq.Cost(0.6))], rec(), {"a": pq.Cost(0.5)}) is None
        # a missing limit falls back to the stored total
        assert led.charge([("a", pq.Cost(0.6))], rec(), {}) is not None

        seen = []

        def only_epsilon_squared(name, spent, cost, limit):
            seen.append((name, spent, cost, limit))
            return (spent.epsilon + cost.epsilon) ** 2 <= limit.epsilon

        assert (
            led.charge([("a", pq.Cost(0.3))], rec(), {"a": ONE}, only_epsilon_squared) is not None
        )
        assert seen == [("a", pq.Cost(0.6), pq.Cost(0.3), ONE)]
        assert led.charge([("a", pq.Cost(0.2))], rec(), {"a": ONE}, only_epsilon_squared) is None
        assert led.spent("a").epsilon == Fraction(9, 10)

        def broken(*args):
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            led.charge([("a", pq.Cost(0.01))], rec(), {"a": ONE}, broken)
        assert led.spent("a").epsilon == Fraction(9, 10)  # rolled back
        assert led.check() == []


def test_cached_answers_survive_reopen(path):
    answer = json.dumps({"value": 41.7, "epsilon": "1/10"})
    with Ledger(path) as led:
        led.open_budget("b", ONE)
        qid = led.charge([("b", pq.Cost(0.1))], rec(cache_key="k1"), {"b": ONE})
        assert led.cached("k1") is None
        led.store_answer(qid, "k1", answer)
        led.store_answer(qid, "k1", "ignored: a query keeps its first answer")
        assert led.cached("k1") == answer
        with pytest.raises(pq.PinqError, match="no query"):
            led.store_answer(qid + 100, "k2", "{}")
    with Ledger(path) as led:
        assert led.cached("k1") == answer
        assert led.cached("k2") is None
        # a second process that asked the same question stores its own; the first is served
        q2 = led.charge([("b", pq.Cost(0.1))], rec(cache_key="k1"), {"b": ONE})
        led.store_answer(q2, "k1", '{"value": 40.0}')
        assert led.cached("k1") == answer
        assert list(led.charges().has_answer) == [True, True]


def test_audit_dataframe_columns_and_content(path):
    before = datetime.now(UTC)
    with Ledger(path) as led:
        led.open_budget("a", pq.Cost(1, 1e-6))
        led.open_budget("b", ONE)
        limits = {"a": pq.Cost(1, 1e-6), "b": ONE}
        q1 = led.charge(
            [("a", pq.Cost(Fraction(1, 3)))],
            ChargeRecord("count", plan="Count(Where(Source(a), age >= 18))", cache_key="c1"),
            limits,
        )
        q2 = led.charge(
            [("a", pq.Cost(0.1, 1e-7)), ("b", pq.Cost(0.2))],
            ChargeRecord("SELECT COUNT(*) FROM a JOIN b"),
            limits,
        )
        led.store_answer(q1, "c1", "{}")
        df = led.charges()
    assert list(df.columns) == [
        "query_id",
        "budget",
        "epsilon",
        "delta",
        "epsilon_exact",
        "delta_exact",
        "description",
        "plan",
        "created",
        "has_answer",
    ]
    assert list(df.query_id) == [q1, q2, q2]
    assert list(df.budget) == ["a", "a", "b"]
    assert list(df.epsilon_exact) == ["1/3", "1/10", "1/5"]
    assert list(df.delta_exact) == ["0/1", "1/10000000", "0/1"]
    assert df.epsilon.tolist() == [1 / 3, 0.1, 0.2]
    assert df.delta.tolist() == [0.0, 1e-7, 0.0]
    join = "SELECT COUNT(*) FROM a JOIN b"
    assert df.description.tolist() == ["count", join, join]
    assert df.plan[0] == "Count(Where(Source(a), age >= 18))" and df.plan[1] == ""
    assert "cache_key" not in df.columns  # keys are never part of the audit trail
    assert df.has_answer.tolist() == [True, False, False]
    for stamp in df.created:
        t = datetime.fromisoformat(stamp)
        assert t.utcoffset().total_seconds() == 0
        assert before <= t <= datetime.now(UTC)
    assert str(df.query_id.dtype) == "int64" and df.has_answer.dtype == bool
    with Ledger(path) as led:
        only_b = led.charges("b")
        budgets = led.budgets()
    assert only_b.budget.tolist() == ["b"] and only_b.query_id.tolist() == [q2]
    assert budgets.budget.tolist() == ["a", "b"]
    assert budgets.spent_epsilon_exact.tolist() == ["13/30", "1/5"]
    assert budgets.spent_delta_exact.tolist() == ["1/10000000", "0/1"]


def test_consistency_check_detects_a_tampered_running_total(path):
    with Ledger(path) as led:
        led.open_budget("b", ONE)
        for _ in range(3):
            led.charge([("b", pq.Cost(0.1))], rec(), {"b": ONE})
        assert led.check() == []
    raw = sqlite3.connect(path)
    raw.execute("UPDATE budgets SET spent_epsilon = '1/5' WHERE name = 'b'")
    raw.commit()
    raw.close()
    with pytest.raises(pq.PinqError, match="integrity check"):
        Ledger(path)  # a tampered file is refused when opened
    with Ledger(path, verify=False) as led:  # but can be opened for inspection
        problems = led.check()
        assert led.problems == problems
        with pytest.raises(pq.PinqError, match="inspection only"):
            led.charge([("b", pq.Cost(0.1))], rec(), {"b": ONE})
    assert len(problems) == 1 and "running spent 1/5" in problems[0] and "3/10" in problems[0]


def test_schema_is_versioned_and_foreign_files_are_refused(tmp_path, path):
    Ledger(path).close()
    raw = sqlite3.connect(path)
    meta = dict(raw.execute("SELECT key, value FROM meta"))
    assert meta["format"] == "pinqpy-ledger" and meta["schema_version"] == "2"
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    raw.commit()
    raw.close()
    with pytest.raises(pq.PinqError, match="newer pinqpy"):
        Ledger(path)

    other = tmp_path / "other.db"
    raw = sqlite3.connect(other)
    raw.execute("CREATE TABLE t (x)")
    raw.commit()
    raw.close()
    with pytest.raises(pq.PinqError, match="not a pinqpy ledger"):
        Ledger(other)

    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(pq.PinqError, match="not a usable pinqpy ledger"):
        Ledger(junk)


def test_durability_pragmas(path):
    with Ledger(path) as led:
        assert led.journal_mode == "wal"
        with led._use() as conn:
            assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
            assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
            assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1


def test_closed_ledger_refuses_use(path):
    led = Ledger(path)
    led.close()
    led.close()  # idempotent
    with pytest.raises(pq.PinqError, match="closed"):
        led.spent("b")
    assert "closed" in repr(led)


def test_huge_rationals_round_trip():
    for x in [Fraction(0), Fraction(1, 10), Fraction(10**5000, 3), Fraction(1, 2**30000 + 1)]:
        assert _decode(_encode(x)) == x
    assert _encode(Fraction(7, 2)) == "7/2"
    with pytest.raises(pq.PinqError, match="malformed"):
        _decode("1/0")
    with pytest.raises(pq.PinqError, match="negative"):
        _decode("-1/2")


def test_huge_denominators_are_stored_exactly(path):
    tiny = Fraction(1, 3**9000)  # 4295 decimal digits: beyond int->str's default limit
    total = pq.Cost(epsilon=1, delta=Fraction(1, 10**6))
    with Ledger(path) as led:
        led.open_budget("b", total)
        assert led.charge([("b", pq.Cost(tiny, tiny))], rec(), {"b": total}) is not None
    with Ledger(path) as led:
        assert led.spent("b") == pq.Cost(tiny, tiny)
        assert led.check() == []


def test_threads_share_one_ledger_without_overspending(path):
    limit = pq.Cost(epsilon=Fraction(50, 1000))
    # four threads: two share one Ledger object, two share another on the same file
    with Ledger(path) as led, Ledger(path) as other:
        led.open_budget("b", limit)
        results: list[int | None] = []
        lock = threading.Lock()

        def work(ledger: Ledger) -> None:
            for _ in range(20):
                r = ledger.charge([("b", pq.Cost(Fraction(1, 1000)))], rec(), {"b": limit})
                with lock:
                    results.append(r)

        threads = [threading.Thread(target=work, args=(x,)) for x in (led, led, other, other)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(r is not None for r in results) == 50
        assert led.spent("b") == limit
        assert led.check() == []


def test_zero_entry_query_is_recorded(path):
    with Ledger(path) as led:
        qid = led.charge([], rec("free"), {})
        assert qid is not None
        df = led.charges()
        assert pd.isna(df.budget[0]) and len(df) == 1 and df.epsilon_exact.tolist() == ["0/1"]
        assert led.charges("b").empty
