"""No data crosses the wire: every response body of a long session, read raw, holds no private
value, no exact row count or aggregate, no server path and no fingerprint of the data.

The server runs as in production (real noise, a ledger). Every body the client receives is
recorded as the transport reads it off the connection, before the client decodes it, so
nothing the client does afterwards can hide a leak.

Exact figures are looked for only where noise makes a coincidence (all but) impossible. Sums
and means are released on a lattice whose grid is a power of two, and every secret number
below has cents that no such grid holds. A count is released with discrete noise, which is zero
with probability about ``epsilon / 2``; so every aggregation of the whole table, whose release
holds a noisy row count (a count, the count inside a mean, a quantile's rank histogram), is
asked at ``epsilon = 1e-6`` (a coincidence has probability under ``1e-6``), and the counts of
subsets asked at larger epsilons are hundreds of rows away from the whole table's.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.pipeline import answers
from pinqpy.remote.client.transport import Transport
from tests.remote.harness import start_server

N_ROWS = 1237
SECRET_AGE = 7319  # one person's age, far outside the public bounds
SECRET_NAME = "Zebulon-Quartz"
STATES = ["CA", "NY", "TX"]


def people() -> pd.DataFrame:
    rng = np.random.default_rng(17)
    cents = rng.choice([c for c in range(1, 100) if c % 25], N_ROWS)  # never a dyadic fraction
    df = pd.DataFrame(
        {
            "name": [f"Person-{i:04d}-Moravec" for i in range(N_ROWS)],
            "zip": [f"Z{n}" for n in rng.integers(10_000, 99_999, N_ROWS)],
            "state": rng.choice(STATES, N_ROWS),
            "sex": rng.integers(0, 2, N_ROWS),
            "age": rng.integers(18, 91, N_ROWS),
            "income": rng.integers(5_000, 150_000, N_ROWS) + cents / 100,
        }
    )
    df.loc[611, ["name", "age"]] = [SECRET_NAME, SECRET_AGE]
    return df


CONFIG = """\
[server]
host = "127.0.0.1"

[tables.people]
source = "csv"
path = "people.csv"
bounds = {{ age = [0, 100], income = [0, 200000] }}
keys = {{ state = {states}, sex = [0, 1] }}

[analysts.carol]
tables = ["people"]
budget = {{ epsilon = 100, delta = 1e-5 }}
"""


def session_queries(s: Any) -> None:
    """A long session: every kind of request an analyst makes, errors included."""
    t = s.table("people")
    repr(s), repr(t), s.tables, repr(s.budget)
    whole = 1e-6  # see the module docstring
    t.count(epsilon=whole)
    s.sql("SELECT COUNT(*) AS n FROM people", epsilon=whole)
    t.sum("income", epsilon=whole)
    t.mean("income", epsilon=whole)
    t.mean("age", epsilon=whole)
    t.median("age", epsilon=whole)
    t.quantile("age", 0.9, epsilon=whole)
    s.sql("SELECT AVG(income) FROM people", epsilon=whole)  # asked twice: the second is cached
    s.sql("SELECT AVG(income) FROM people", epsilon=whole)
    older = t.where("age > 30")
    older.count(epsilon=0.5)
    older.mean("income", epsilon=0.5)
    older.median("age", epsilon=0.5)
    t.where(pq.col("state") == "CA").count(epsilon=0.5, delta=1e-7)
    t.argmax("state", STATES, epsilon=0.5)
    t.select_keys("state", epsilon=1, delta=1e-6)
    t.accuracy("mean", "income", epsilon=0.5, n=1000)
    parts = t.partition("sex")
    parts.count(epsilon=0.5)
    parts.sum("income", epsilon=0.5)
    parts.mean("age", epsilon=0.5)
    parts[0].median("age", epsilon=0.5)
    parts[1].count(epsilon=0.5)
    t.partition("state").argmax("sex", [0, 1], epsilon=0.5)
    t.partition("state").quantile("age", 0.25, epsilon=0.5)
    by_state = t.groupby("state").agg(total="SUM(income)", n="COUNT(*)")
    by_state.mean("total", epsilon=0.5, bounds=(0, 10**8))
    regions = pd.DataFrame({"state": STATES, "region": ["west", "east", "south"]})
    t.join(regions, on="state").partition("region", ["west", "east", "south"]).count(0.5)
    t.assign(decade="FLOOR(age / 10)").partition("decade", range(0, 11)).count(0.5)
    s.sql("SELECT sex, SUM(income) AS s, AVG(age) AS a FROM people GROUP BY sex", epsilon=1)
    s.sql("SELECT state, COUNT(*) FROM people WHERE income > 50000 GROUP BY state", epsilon=1)
    s.explain("SELECT sex, AVG(income) FROM people GROUP BY sex", epsilon=1)
    s.sql("EXPLAIN SELECT MEDIAN(age) FROM people", epsilon=1)
    s.describe("people")
    for statement in ("SHOW TABLES", "SHOW BUDGET", "SHOW LEDGER"):
        s.sql(statement)
    s.budget.spent, s.budget.remaining, s.budget.total, s.budget.audit(), s.audit()
    for bad in (
        lambda: t.mean("incme", epsilon=0.5),
        lambda: t.count(epsilon=1000),
        lambda: t.sum("zip", epsilon=0.5),
        lambda: s.sql("SELECT name FROM people", epsilon=1),
        lambda: s.sql("SELEC COUNT(*) FROM people", epsilon=1),
        lambda: s.sql("SELECT COUNT(*) FROM secrets", epsilon=1),
        lambda: s.table("secrets"),
        lambda: t.partition("zip"),
    ):
        with pytest.raises(pq.PinqError):
            bad()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    directory = tmp_path_factory.mktemp("no_data_crosses")
    df = people()
    df.to_csv(directory / "people.csv", index=False)
    server = start_server(directory, CONFIG.format(states=json.dumps(STATES)), analysts=("carol",))
    bodies: list[bytes] = []

    real = Transport._exchange

    def record(self: Transport, method: str, path: str, body: bytes | None) -> Any:
        status, content = real(self, method, path, body)
        bodies.append(content)
        return status, content

    with pytest.MonkeyPatch.context() as mp:
        # Every request of the session records the body it receives, the first included.
        mp.setattr(Transport, "_exchange", record)
        with pq.connect(server.url, token=server.tokens["carol"]) as s:
            session_queries(s)
    local = pq.PrivateFrame.from_csv(directory / "people.csv", pq.Budget(1), name="people")
    server.stop()
    with sqlite3.connect(server.ledger) as ledger:
        stored = [
            *(v for (v,) in ledger.execute("SELECT value FROM meta")),
            *(k for (k,) in ledger.execute("SELECT cache_key FROM answers")),
            *(
                k
                for (k,) in ledger.execute(
                    "SELECT cache_key FROM queries WHERE cache_key IS NOT NULL"
                )
            ),
        ]
    yield {
        "bodies": bodies,
        "data": df,
        "paths": [str(directory), str(server.config), str(server.ledger)],
        "fingerprint": answers.fingerprint(local._plan.table, local._rel.catalog),
        "ledger": [v for v in stored if isinstance(v, str) and len(v) >= 16],
    }


def _leaves(doc: Any) -> Iterator[Any]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield k
            yield from _leaves(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _leaves(v)
    else:
        yield doc


def _exact_aggregates(df: pd.DataFrame) -> list[float]:
    """Exact figures of the data that the session's released values estimate."""
    out = [float(df["income"].sum()), float(df["income"].mean()), float(df["age"].mean())]
    clamped = df.assign(age=df["age"].clip(0, 100))
    out += [float(clamped["age"].mean()), float(clamped["age"].sum())]
    for _, g in df.groupby("sex"):
        out += [float(g["income"].sum()), float(g["income"].mean())]
    for _, g in df.groupby("state"):
        out += [float(g["income"].sum())]
    return out


def leaks(body: bytes, recorded: dict[str, Any]) -> list[str]:
    """What ``body`` shows that it must not: private values, the exact row count or an exact
    aggregate (as a JSON number or spelt in text), a server path, a fingerprint."""
    df: pd.DataFrame = recorded["data"]
    text = body.decode("utf-8")
    found = [
        secret
        for secret in (
            *df["name"],
            *df["zip"],
            *recorded["paths"],
            recorded["fingerprint"],
            *recorded["ledger"],
            "Traceback",
            'File "',
        )
        if secret in text
    ]
    numbers = {float(N_ROWS), float(SECRET_AGE), *map(float, df["income"])}
    numbers |= set(_exact_aggregates(df))
    spelt = re.compile(r"(?<![\d.])(" + f"{N_ROWS}|{SECRET_AGE}" + r")(?!\d)")
    incomes = [f"{v:.2f}" for v in df["income"]]
    for leaf in _leaves(json.loads(body)):
        if isinstance(leaf, bool):
            continue
        if isinstance(leaf, int | float) and float(leaf) in numbers:
            found.append(repr(leaf))
        elif isinstance(leaf, str):
            found += [m.group(0) for m in spelt.finditer(leaf)]
            found += [v for v in incomes if v in leaf]
    return found


def test_the_session_was_long(recorded: dict[str, Any]) -> None:
    bodies = recorded["bodies"]
    assert len(bodies) >= 45
    assert b'"analyst":"carol"' in bodies[0]  # the session document is recorded too
    assert recorded["ledger"]  # the ledger's secret and stored answers' keys are looked for
    for body in bodies:
        json.loads(body)  # every answer is JSON, errors too


def test_the_leak_finder_finds_leaks(recorded: dict[str, Any]) -> None:
    df: pd.DataFrame = recorded["data"]
    planted = [
        {"result": {"rows": N_ROWS}},
        {"result": {"kind": "plain", "value": float(df["income"].sum())}},
        {"result": [float(df["income"].iloc[3])]},
        {"error": {"message": f"row {SECRET_NAME} is odd"}},
        {"error": {"message": f"cannot read {recorded['paths'][0]}/people.csv"}},
        {"note": f"{N_ROWS} rows"},
        {"key": recorded["fingerprint"]},
    ]
    for doc in planted:
        assert leaks(json.dumps(doc).encode(), recorded), doc


def test_no_response_body_shows_data(recorded: dict[str, Any]) -> None:
    for body in recorded["bodies"]:
        assert leaks(body, recorded) == [], body[:300]
