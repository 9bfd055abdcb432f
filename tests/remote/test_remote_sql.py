"""The SQL fixtures against a real server process.

The server serves the tables of the SQL suite's fixed session (``tests/sql/conftest.py``:
``pums``, ``pums_raw``, ``persons``, ``visits`` with ``max_rows = 3``, ``visits_all``) from
CSV files, each with its own budget, and runs with ``--testing no-noise``. Every fixture case
that uses no public table (a server serves private tables only) is checked twice:

- by the fixture's own checks (``tests/sql/test_fixtures.py``): the rows, the exact charge
  per budget, the EXPLAIN text and what running the query charges, and for an error its class,
  message and caret;
- against a local session over the same files with the same public facts: the same answer
  (or error text) and the same charges.

The fixture checks run on both sessions, so both have charged the same at every step. A few
results depend on how the suite's own session was made (``LOCAL_ONLY``): those are compared
with the local session only.
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
from tests.remote.test_remote_api import _toml, assert_same
from tests.sql.conftest import BIG_EPSILON, Case, load_cases, persons_df, visits_df
from tests.sql.test_fixtures import _kwargs, check_error, check_plan, check_result

DELTA = 1e-3
PUBLIC = re.compile(r"\b(educ_names|race_groups)\b", re.IGNORECASE)
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
    }


def _config(paths: dict[str, Path]) -> str:
    lines = ["[server]", 'host = "127.0.0.1"', ""]
    for name, facts in TABLES.items():
        lines += [f"[tables.{name}]", 'source = "csv"', f"path = {_toml(str(paths[name]))}"]
        lines += [f"{key} = {_toml(value)}" for key, value in facts.items()]
        lines.append("")
    lines += [
        "[analysts.alice]",
        f"tables = {_toml(list(TABLES))}",
        f"budget = {{ epsilon = {BIG_EPSILON}, delta = {DELTA} }}",
    ]
    return "\n".join(lines) + "\n"


@dataclass
class RemoteEnv:
    """What the fixture checks need of an environment (see tests/sql/conftest.SqlEnv)."""

    session: RemoteSession

    def spent(self) -> dict[str, tuple[Fraction, Fraction]]:
        docs = self.session._transport.get("/budget")["budgets"]
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


@pytest.fixture(scope="module")
def envs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RemoteEnv, LocalEnv]]:
    directory = tmp_path_factory.mktemp("remote_sql")
    paths = _paths(directory)
    server = start_server(directory, _config(paths), testing="no-noise")
    local = pq.Session()
    budgets = {}
    for name, facts in TABLES.items():
        budgets[name] = pq.Budget(BIG_EPSILON, DELTA)
        frame = pq.PrivateFrame.from_csv(
            paths[name],
            budgets[name],
            name=name,
            **{k: v for k, v in facts.items() if k != "max_rows"},
        )
        local.register(name, frame, max_rows=facts.get("max_rows"))
    with pq.connect(server.url, token=server.tokens["alice"]) as session:
        yield RemoteEnv(session), LocalEnv(local, budgets)
    server.stop()


def test_enough_cases_run_remotely() -> None:
    assert len(CASES) >= 150
    assert {case.expect for case in CASES} == {"error", "plan", "result"}


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in CASES])
def test_fixture(case: Case, envs: tuple[RemoteEnv, LocalEnv]) -> None:
    remote, local = envs
    if case.name not in LOCAL_ONLY:
        check = {"error": check_error, "plan": check_plan, "result": check_result}[case.expect]
        for env in (local, remote):
            check(case, env)  # type: ignore[arg-type]
    same_as_local(case.query, _kwargs(case), remote, local)


def same_as_local(query: str, kwargs: dict[str, Any], remote: RemoteEnv, local: LocalEnv) -> None:
    """The remote answer (or error) is the local one, and so is the charge."""
    before = (remote.spent(), local.spent())
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
    else:
        assert_same(want, got)
    after = (remote.spent(), local.spent())
    charged_remote = {t: after[0][t][0] - before[0][t][0] for t in after[0]}
    charged_local = {t: after[1][t][0] - before[1][t][0] for t in after[1]}
    assert charged_remote == charged_local
    assert remote.spent() == local.spent()


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
def test_statements(query: str, envs: tuple[RemoteEnv, LocalEnv]) -> None:
    remote, local = envs
    same_as_local(query, {"epsilon": 1}, remote, local)


def test_explain_and_describe_methods(envs: tuple[RemoteEnv, LocalEnv]) -> None:
    remote, local = envs
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


def test_a_syntax_error_shows_the_same_caret(envs: tuple[RemoteEnv, LocalEnv]) -> None:
    remote, local = envs
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
