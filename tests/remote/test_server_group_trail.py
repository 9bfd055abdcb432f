"""A group member's audit trail: every charge to the shared budget, only their own questions.

A real server, two members of one group (alice and bob) and an analyst of her own (carol),
each with their own client (``pq.connect``) and raw HTTP.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from fractions import Fraction

import httpx
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.remote.server.trail import OTHERS
from tests.remote.harness import ServerProcess, default_config, start_server

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

CONFIG = default_config(("carol",)) + (
    "\n[groups.lab]\nbudget = { epsilon = 5 }\n"
    '[analysts.alice]\ntables = ["pums"]\ngroup = "lab"\n'
    '[analysts.bob]\ntables = ["pums"]\ngroup = "lab"\n'
)
# What alice asks: literals that must never reach bob.
ALICE_SQL = "SELECT COUNT(*) FROM pums WHERE income > 123456"
ALICE_WHERE = "age = 77"
SECRETS = ("123456", "77")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = start_server(tmp_path_factory.mktemp("group"), CONFIG, analysts=("alice", "bob", "carol"))
    alice = pq.connect(s.url, token=s.tokens["alice"])
    alice.sql(ALICE_SQL, epsilon=0.1)
    alice.table("pums").where(ALICE_WHERE).count(epsilon=0.1)
    bob = pq.connect(s.url, token=s.tokens["bob"])
    bob.sql("SELECT COUNT(*) FROM pums WHERE age < 30", epsilon=0.1)
    yield s
    s.stop()


def trails(server: ServerProcess, who: str) -> dict[str, pd.DataFrame]:
    s = pq.connect(server.url, token=server.tokens[who])
    return {"/v1/audit": s.audit(), "SHOW LEDGER": s.sql("SHOW LEDGER")}


def shows(trail: pd.DataFrame, texts: tuple[str, ...]) -> int:
    """How many lines of ``trail`` show any of ``texts`` in any column."""
    lines = (" ".join(map(str, row)) for row in trail.itertuples(index=False))
    return sum(any(t in line for t in texts) for line in lines)


def test_a_member_sees_every_charge_but_only_their_own_questions(server):
    for where, trail in trails(server, "bob").items():
        assert len(trail) == 3, where  # every charge to the group's budget ...
        assert list(trail["epsilon_exact"]) == ["1/10"] * 3
        assert trail["created"].is_monotonic_increasing
        assert shows(trail, SECRETS) == 0, where  # ... none of alice's questions
        assert list(trail["description"][:2]) == [OTHERS, OTHERS]
        assert set(trail["plan"][:2]) == {""}
        assert trail["description"].iloc[2] == "SELECT COUNT(*) FROM pums WHERE age < 30"


def test_the_asker_sees_their_own_questions(server):
    for where, trail in trails(server, "alice").items():
        assert len(trail) == 3, where
        assert list(trail["description"][:2]) == [
            ALICE_SQL,
            f"count() over Where({ALICE_WHERE}) <- pums",
        ]
        assert "income > 123456" in trail["plan"].iloc[0]
        assert trail["description"].iloc[2] == OTHERS


def test_raw_audit_bodies_hold_no_other_members_question(server):
    r = httpx.get(server.url + "/v1/audit", headers=server.headers("bob"), timeout=30)
    assert r.status_code == 200
    assert not any(secret in r.text for secret in SECRETS)
    sql = httpx.post(
        server.url + "/v1/sql",
        headers=server.headers("bob"),
        json={"query": "SHOW LEDGER"},
        timeout=30,
    )
    assert sql.status_code == 200
    assert not any(secret in sql.text for secret in SECRETS)


def test_another_members_question_is_not_answered_from_their_cache(server):
    """A free answer would tell bob that alice asked exactly this; it is charged afresh."""
    bob = pq.connect(server.url, token=server.tokens["bob"])
    before = Fraction(bob.budgets["pums"].spent.epsilon)
    bob.sql(ALICE_SQL, epsilon=0.1)
    assert Fraction(bob.budgets["pums"].spent.epsilon) - before == Fraction(1, 10)
    bob.sql(ALICE_SQL, epsilon=0.1)  # his own repeat is free
    assert Fraction(bob.budgets["pums"].spent.epsilon) - before == Fraction(1, 10)
    alice = pq.connect(server.url, token=server.tokens["alice"])
    alice.sql(ALICE_SQL, epsilon=0.1)  # and so is hers
    assert Fraction(bob.budgets["pums"].spent.epsilon) - before == Fraction(1, 10)


def test_an_analyst_of_their_own_sees_only_their_budget(server):
    carol = pq.connect(server.url, token=server.tokens["carol"])
    carol.sql("SELECT COUNT(*) FROM pums WHERE age > 1", epsilon=0.1)
    trail = carol.audit()
    assert set(trail["budget"]) == {"analyst:carol/pums"}
    assert list(trail["description"]) == ["SELECT COUNT(*) FROM pums WHERE age > 1"]


def test_after_a_restart_each_member_still_sees_their_own(server):
    restarted = server.restart()
    try:
        theirs = trails(restarted, "bob")["/v1/audit"]
        assert list(theirs["description"][:2]) == [OTHERS, OTHERS]
        assert shows(theirs, ("77",)) == 0  # (bob has since asked alice's SQL himself)
        mine = trails(restarted, "alice")["SHOW LEDGER"]
        assert mine["description"].iloc[0] == ALICE_SQL
    finally:
        restarted.stop()
