"""Who spent what (pinqpy.accounting.ledger_summary): per budget and per charge, exact, read
from an open ledger or from the file read-only, labels only when asked for, and zCDP budgets
read in (epsilon, delta) as the budget itself reports them."""

from __future__ import annotations

import hashlib
import sqlite3
from fractions import Fraction
from pathlib import Path

import pytest

import pinqpy as pq
from pinqpy.accounting.ledger import ChargeRecord, Ledger
from pinqpy.accounting.ledger_summary import budget_owner, summarize_ledger


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}


@pytest.fixture
def served(tmp_path: Path) -> Path:
    """A server's ledger: two analysts on one table, one on a group budget, three charges."""
    path = tmp_path / "ledger.db"
    with Ledger(path) as led:
        for name in ("analyst:ada/adult", "analyst:bob/adult", "group:team/adult"):
            led.open_budget(name, pq.Cost(epsilon=1, delta=Fraction(1, 10**6)))
        for name, eps, sql in (
            ("analyst:ada/adult", Fraction(1, 10), "SELECT COUNT(*) FROM adult WHERE age > 30"),
            ("analyst:ada/adult", Fraction(1, 5), "SELECT AVG(age) FROM adult"),
            ("group:team/adult", Fraction(1, 4), "SELECT COUNT(*) FROM adult"),
        ):
            led.charge([(name, pq.Cost(eps))], ChargeRecord(sql), {})
    return path


def test_one_row_per_budget_with_its_owner_table_spent_and_last_time(served: Path) -> None:
    summary = summarize_ledger(served)
    rows = {b.name: b for b in summary.budgets}
    ada, bob, team = rows["analyst:ada/adult"], rows["analyst:bob/adult"], rows["group:team/adult"]
    assert (ada.owner, ada.table, team.owner) == ("analyst ada", "adult", "group team")
    assert ada.spent.epsilon == Fraction(3, 10) and ada.remaining.epsilon == Fraction(7, 10)
    assert ada.total == pq.Cost(epsilon=1, delta=Fraction(1, 10**6))
    assert (ada.queries, bob.queries, team.queries) == (2, 0, 1)
    assert bob.last_query is None and bob.spent == pq.Cost(0)
    times = [c.time for c in summary.charges]
    assert ada.last_query == times[1] and times == sorted(times)
    assert summary.problems == ()
    frame = summary.budgets_frame()
    assert list(frame["analyst"]) == ["analyst ada", "analyst bob", "group team"]
    assert list(frame["queries"]) == [2, 0, 1]
    assert frame["spent"].tolist() == pytest.approx([0.3, 0.0, 0.25])


def test_labels_only_when_asked_for(served: Path) -> None:
    plain = summarize_ledger(served)
    assert all(c.label is None for c in plain.charges)
    assert plain.charges_frame()["label"].isna().all()
    curator = summarize_ledger(served, with_labels=True)
    assert curator.charges[0].label == "SELECT COUNT(*) FROM adult WHERE age > 30"
    assert [c.cost.epsilon for c in curator.charges] == [  # type: ignore[union-attr]
        Fraction(1, 10), Fraction(1, 5), Fraction(1, 4),
    ]  # fmt: skip


def test_reading_a_file_writes_nothing_and_creates_nothing(served: Path, tmp_path: Path) -> None:
    before = _digest(served.parent)
    summarize_ledger(served, with_labels=True)
    after = _digest(served.parent)
    # The database is untouched; SQLite may add its shared-memory index and an empty log
    # beside it (a read-only connection to a WAL file needs them), never anything else.
    assert after["ledger.db"] == before["ledger.db"]
    assert set(after) <= {"ledger.db", "ledger.db-wal", "ledger.db-shm"}
    wal = served.parent / "ledger.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    missing = tmp_path / "none" / "ledger.db"
    with pytest.raises(pq.PinqError, match="no ledger file"):
        summarize_ledger(missing)
    assert not missing.exists()
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(pq.PinqError, match="not a pinqpy ledger"):
        summarize_ledger(other)


def test_an_open_ledger_is_read_through_its_own_connection(served: Path) -> None:
    with Ledger(served) as led:
        led.charge([("analyst:bob/adult", pq.Cost(Fraction(1, 2)))], ChargeRecord("count"), {})
        summary = summarize_ledger(led)
    assert {b.name: b.queries for b in summary.budgets}["analyst:bob/adult"] == 1


def test_zcdp_budgets_read_as_the_budget_reports_them(tmp_path: Path) -> None:
    path = tmp_path / "z.db"
    budget = pq.Budget(1, 1e-6, accounting="zcdp", ledger=str(path), name="adult@/x.csv")
    frame = pq.PrivateFrame(__import__("pandas").DataFrame({"x": range(10)}), budget)
    frame.count(epsilon=0.1)
    frame.where("x > 2").count(epsilon=0.1)
    [row] = summarize_ledger(path).budgets
    assert row.accounting == "zcdp" and row.rho_spent is not None and row.rho_spent > 0
    assert row.spent == budget.spent and row.remaining == budget.remaining
    assert row.queries == 2 and (row.owner, row.table) == ("", "adult")
    charges = summarize_ledger(path).charges
    assert all(c.cost is None and c.rho is not None for c in charges)


def test_an_edited_file_is_shown_with_its_problems(served: Path) -> None:
    with sqlite3.connect(served) as conn:
        conn.execute("UPDATE budgets SET spent_epsilon = '0/1' WHERE name = 'analyst:ada/adult'")
    summary = summarize_ledger(served)
    assert any("analyst:ada/adult" in p for p in summary.problems)


@pytest.mark.parametrize(
    ("name", "owner"),
    [
        ("analyst:ada/adult", ("analyst ada", "adult")),
        ("group:a/b/c", ("group a", "b/c")),
        ("people@/data/p.csv", ("", "people")),
        ("default", ("", "default")),
    ],
)
def test_budget_names(name: str, owner: tuple[str, str]) -> None:
    assert budget_owner(name) == owner
