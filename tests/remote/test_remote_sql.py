"""The SQL fixtures against a real server process.

The server serves the tables of the SQL suite's fixed session (``tests/sql/conftest.py``:
``pums``, ``pums_raw``, ``persons``, ``visits`` with ``max_rows = 3``, ``visits_all``,
``census`` with ``public_size = true``) from
CSV files, each with its own budget, and runs with ``--testing no-noise``. Every fixture case
that uses no public table (a server serves private tables only) runs on the server and on a
local session over the same files with the same public facts, under ``pq.testing.no_noise()``:
the answer must be the same (the same rows, the same intervals; for an error the same class,
message, position and caret; for EXPLAIN the same text and announced charges), and so must
what each budget was charged. The local suite checks the fixtures' own expectations
(``tests/sql/test_fixtures.py``); here the local session's answers are checked against them too,
except the few that depend on how the suite's session was made (``LOCAL_ONLY``).

A query that reads a table whose rows are cut at random (``visits``, bounded by its configured
``max_rows``, joins ``WITH BOUNDS``, and BigQuery's clause, which keeps at most
``max_groups_contributed`` groups per unit) keeps a random choice of rows on each side: there
the shapes, the columns and the charges must agree, not the values.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, PUMS_PATH
from pinqpy.remote.client.session import RemoteSession
from tests.remote.harness import start_server
from tests.remote.test_remote_api import assert_same, config_text
from tests.sql.conftest import BIG_EPSILON, Case, load_cases, persons_df, visits_df
from tests.sql.test_fixtures import _kwargs, check_error, check_plan, check_result

DELTA = 1e-3
PUBLIC = re.compile(r"\b(educ_names|race_groups)\b", re.IGNORECASE)
RANDOM_ROWS = re.compile(
    r"\bvisits\b|\bWITH\s+BOUNDS\b|\bWITH\s+(DIFFERENTIAL_PRIVACY|ANONYMIZATION)\b"
    r"|\bmax_(groups|rows)_contributed\b",
    re.IGNORECASE,
)
# Cases whose expected result lists the tables a session registers (the suite's session has
# public tables too), says where column types came from (the suite registers DataFrames, the
# server reads CSV files: "inferred"), or expects budgets no query has touched yet.
LOCAL_ONLY = {"show_tables", "show_budget", "describe_private_table", "describe_user_level_table"}

CASES = [case for case in load_cases() if not PUBLIC.search(case.query)]

VISIT_BOUNDS = {"minutes": (0, 300), "day": (1, 7)}
TABLES: dict[str, dict[str, Any]] = {
    "pums": {"bounds": PUMS_BOUNDS, "keys": PUMS_KEYS},
    "pums_raw": {"bounds": PUMS_BOUNDS},
    "persons": {
        "bounds": {**PUMS_BOUNDS, "pid": (1, 1000)},
        "keys": {"sex": [0, 1], "married": [0, 1]},
    },
    "visits": {"bounds": VISIT_BOUNDS, "privacy_unit": "pid", "max_rows": 3},
    "visits_all": {"bounds": VISIT_BOUNDS, "privacy_unit": "pid"},
    "census": {"bounds": PUMS_BOUNDS, "keys": PUMS_KEYS, "public_size": True},
}


def _paths(directory: Path) -> dict[str, Path]:
    persons, visits = directory / "persons.csv", directory / "visits.csv"
    persons_df().to_csv(persons, index=False)
    visits_df().to_csv(visits, index=False)
    return {
        "pums": Path(PUMS_PATH),
        "pums_raw": Path(PUMS_PATH),
        "persons": persons,
        "visits": visits,
        "visits_all": visits,
        "census": Path(PUMS_PATH),
    }


@dataclass
class RemoteEnv:
    """What the fixture checks need of an environment (see tests/sql/conftest.SqlEnv)."""

    session: RemoteSession
    # What the budgets had spent after the last comparison (each request costs time: the
    # next comparison starts from it; a charge made in between would show as a difference).
    last: dict[str, tuple[Fraction, Fraction]] | None = None

    def spent(self) -> dict[str, tuple[Fraction, Fraction]]:
        docs = self.session._transport.document("/budget")["budgets"]
        by_label = {doc["name"]: doc["spent"] for doc in docs}
        return {
            table: (
                Fraction(by_label[budget.name]["epsilon"]),
                Fraction(by_label[budget.name]["delta"]),
            )
            for table, budget in self.session.budgets.items()
        }


@dataclass
class LocalEnv:
    session: pq.Session
    budgets: dict[str, pq.Budget]

    def spent(self) -> dict[str, tuple[Fraction, Fraction]]:
        return {
            n: (Fraction(b.spent.epsilon), Fraction(b.spent.delta)) for n, b in self.budgets.items()
        }


def _local(paths: dict[str, Path]) -> LocalEnv:
    """A local session over the same files with the same public facts as the server's."""
    session = pq.Session()
    budgets = {}
    for name, facts in TABLES.items():
        budgets[name] = pq.Budget(BIG_EPSILON, DELTA)
        frame = pq.PrivateFrame.from_csv(
            paths[name],
            budgets[name],
            name=name,
            **{k: v for k, v in facts.items() if k != "max_rows"},
        )
        session.register(name, frame, max_rows=facts.get("max_rows"))
    return LocalEnv(session, budgets)


@pytest.fixture(scope="module")
def envs(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[RemoteEnv, LocalEnv, LocalEnv]]:
    """The server, a local session charged exactly as the server is, and one more local
    session for the fixtures' own checks (which charge as they go)."""
    directory = tmp_path_factory.mktemp("remote_sql")
    paths = _paths(directory)
    server = start_server(directory, config_text(paths, TABLES, BIG_EPSILON), testing="no-noise")
    with pq.connect(server.url, token=server.tokens["alice"]) as session:
        yield RemoteEnv(session), _local(paths), _local(paths)
    server.stop()


def test_enough_cases_run_remotely() -> None:
    assert len(CASES) >= 150
    assert {case.expect for case in CASES} == {"error", "plan", "result"}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_fixture(case: Case, envs: tuple[RemoteEnv, LocalEnv, LocalEnv]) -> None:
    remote, local, checked = envs
    kwargs = _kwargs(case)
    random_rows = bool(RANDOM_ROWS.search(case.query))
    if case.expect == "plan":
        text = case.query
        if not text.lstrip().upper().startswith("EXPLAIN"):
            text = "EXPLAIN " + text
        same_as_local(text, kwargs, remote, local, random_rows)
        query = re.sub(r"^\s*EXPLAIN\s+", "", case.query, flags=re.IGNORECASE)
        same_as_local(query, kwargs, remote, local, random_rows)
    else:
        same_as_local(case.query, kwargs, remote, local, random_rows)
    if case.name not in LOCAL_ONLY:
        check = {"error": check_error, "plan": check_plan, "result": check_result}[case.expect]
        check(case, checked)  # type: ignore[arg-type]


def same_as_local(
    query: str,
    kwargs: dict[str, Any],
    remote: RemoteEnv,
    local: LocalEnv,
    random_rows: bool = False,
) -> None:
    """The remote answer (or error) is the local one, and so is the charge."""
    before = (remote.last or remote.spent(), local.spent())
    outcomes = []
    for env in (local, remote):
        try:
            with pq.testing.no_noise():
                outcomes.append(env.session.sql(query, **kwargs))
        except pq.PinqError as err:
            outcomes.append(err)
    want, got = outcomes
    if isinstance(want, pq.PinqError) or isinstance(got, pq.PinqError):
        assert type(got) is type(want), (want, got)
        assert str(got) == str(want)  # the message, and the caret under the same column
        for attr in ("line", "column", "text"):
            assert getattr(got, attr, None) == getattr(want, attr, None), attr
    elif isinstance(want, str):  # an EXPLAIN
        assert str(got) == str(want)
        assert got.charges == want.charges  # type: ignore[attr-defined]
    elif random_rows:
        assert type(got) is type(want)
        assert list(got.columns) == list(want.columns) and len(got) == len(want)
    else:
        assert_same(want, got)
    after = (remote.spent(), local.spent())
    remote.last = after[0]
    charged_remote = {t: after[0][t][0] - before[0][t][0] for t in after[0]}
    charged_local = {t: after[1][t][0] - before[1][t][0] for t in after[1]}
    assert charged_remote == charged_local


STATEMENTS = [
    "SHOW TABLES",
    "SHOW BUDGET",
    "DESCRIBE pums",
    "describe visits;",
    "EXPLAIN SELECT sex, COUNT(*) FROM pums GROUP BY sex",
    "SHOW BUDGET extra",
    "DESCRIBE educ_names",
]


@pytest.mark.parametrize("query", STATEMENTS)
def test_statements(query: str, envs: tuple[RemoteEnv, LocalEnv, LocalEnv]) -> None:
    remote, local, _ = envs
    same_as_local(query, {"epsilon": 1}, remote, local)


def test_explain_and_describe_methods(envs: tuple[RemoteEnv, LocalEnv, LocalEnv]) -> None:
    remote, local, _ = envs
    query = "SELECT educ, AVG(income) FROM pums_raw GROUP BY educ IN (9, 13)"
    plan = remote.session.explain(query, epsilon=0.5)
    assert plan == local.session.explain(query, epsilon=0.5)
    assert plan.startswith("EXPLAIN (charges nothing, reads no data)")
    pd.testing.assert_frame_equal(
        remote.session.describe("persons"), local.session.describe("persons")
    )
    with pytest.raises(pq.PinqSyntaxError) as info:
        remote.session.explain("SHOW TABLES")
    assert str(info.value) == "explain() takes a SELECT query"
    budget = remote.session.sql("SHOW BUDGET")
    assert list(budget["budget"]) == [f"budget of {name}" for name in TABLES]


def test_explain_states_a_mean_for_a_row_count(
    envs: tuple[RemoteEnv, LocalEnv, LocalEnv],
) -> None:
    """``n=`` crosses the wire: the server's EXPLAIN states the mean's error for that many rows,
    as the local one does, and a SELECT that is not EXPLAIN refuses it the same way."""
    remote, local, _ = envs
    query = "SELECT AVG(income) FROM pums_raw"
    plan = remote.session.explain(query, epsilon=0.5, n=1000)
    assert plan == local.session.explain(query, epsilon=0.5, n=1000)
    assert plan != remote.session.explain(query, epsilon=0.5)
    assert remote.session.sql("EXPLAIN " + query, epsilon=0.5, n=1000) == plan
    before = remote.session.sql("SHOW BUDGET")
    with pytest.raises(pq.PinqError) as remote_err:
        remote.session.sql(query, epsilon=0.5, n=1000)
    with pytest.raises(pq.PinqError) as local_err:
        local.session.sql(query, epsilon=0.5, n=1000)
    assert str(remote_err.value) == str(local_err.value)
    pd.testing.assert_frame_equal(remote.session.sql("SHOW BUDGET"), before)


def test_a_syntax_error_shows_the_same_caret(envs: tuple[RemoteEnv, LocalEnv, LocalEnv]) -> None:
    remote, local, _ = envs
    query = "SELECT sex,\n       COUNT(*)\nFROM pums\nGROUP BY sexx"
    with pytest.raises(pq.PinqSyntaxError) as got:
        remote.session.sql(query, epsilon=1)
    with pytest.raises(pq.PinqSyntaxError) as want:
        local.session.sql(query, epsilon=1)
    assert str(got.value) == str(want.value)
    assert (got.value.line, got.value.column) == (4, 10)
    assert str(got.value).splitlines()[-1] == "  " + " " * 9 + "^"
    with pytest.raises(pq.PinqSyntaxError, match="a query must be text, not int"):
        remote.session.sql(3)  # type: ignore[arg-type]
