"""Published DP SQL of other systems, run through pinqpy as a new user would.

The corpus is ``tests/fixtures/published/queries.sql`` (its header gives the format and the
sources); the tables are ``tests/e2e/published_tables.py``. Every query runs on the pandas
and the DuckDB engine with noise switched off (``pq.testing.no_noise``), so the number of
rows, including the groups a private key selection keeps, is exact -- except where a
unit's groups are sampled (BigQuery's ``max_groups_contributed``): there the corpus gives the
range ``lo..hi`` that the sampling allows. A query that should be
answered must give the listed columns and rows and charge something; one that should be
refused must raise the listed error with the listed text, carry a caret where the refusal is
syntax-level, charge nothing, and the spelling the corpus gives ``instead`` must be answered.

The corpus holds 158 queries: 124 answered, 34 refused for a right reason (not a DP query,
or a construct pinqpy documents it does not take, with the error naming what to write).
Before this corpus was run, 7 of the answered ones were refused (SmartNoise's key-only
releases ``SELECT educ FROM PUMS.PUMS GROUP BY educ`` and ``SELECT DISTINCT educ ...``,
``COUNT(ALL x)``, SQL Server's ``STDEV``), and 2 refusals did not name the spelling that
works (``SUM(DISTINCT x)``, ``LOG2``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import pytest

import pinqpy as pq
from tests.e2e.published_tables import make_session

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "published" / "queries.sql"
ERRORS = {"PinqSyntaxError": pq.PinqSyntaxError, "PrivacyError": pq.PrivacyError}
SYSTEMS = ("sn_", "bq_", "zeta_anon_", "odp_", "pinq_")


@dataclass
class Entry:
    name: str
    query: str
    fields: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, key: str) -> str:
        return self.fields[key]

    def get(self, key: str) -> str | None:
        return self.fields.get(key)


def load_corpus() -> list[Entry]:
    entries = []
    for block in CORPUS.read_text(encoding="utf-8").split("\n\n"):
        lines = [line for line in block.strip().split("\n") if line]
        if not lines or not lines[0].startswith("-- query:"):
            continue  # the file's header
        fields = {}
        query = []
        for line in lines:
            m = re.match(r"-- (\w+): (.*)$", line)
            if m and not query:
                fields[m.group(1)] = m.group(2).strip()
            else:
                query.append(line)
        entries.append(Entry(fields["query"], "\n".join(query), fields))
    return entries


ENTRIES = load_corpus()


def _call(entry: Entry) -> dict[str, float]:
    call = entry["call"]
    if call == "none":
        return {}
    return {k.strip(): float(v) for k, v in (part.split("=") for part in call.split(","))}


def _requested(entry: Entry, kwargs: dict[str, float]) -> tuple[Fraction, Fraction]:
    """The query's (epsilon, delta): the call's arguments, or its OPTIONS."""
    found = dict(re.findall(r"\b(epsilon|delta)\s*=\s*([0-9.eE+-]+)", entry.query))
    epsilon = kwargs.get("epsilon", found.get("epsilon"))
    delta = kwargs.get("delta", found.get("delta", 0))
    return Fraction(str(epsilon)), Fraction(str(delta))


def _spent(budgets: list[pq.Budget]) -> list[tuple[Fraction, Fraction]]:
    return [(Fraction(b.spent.epsilon), Fraction(b.spent.delta)) for b in budgets]


def test_corpus_shape() -> None:
    """60+ distinct queries from every system, each with its source and outcome."""
    names = [e.name for e in ENTRIES]
    assert len(names) == len(set(names)) and len({e.query for e in ENTRIES}) == len(ENTRIES)
    assert len(ENTRIES) >= 60
    for prefix in SYSTEMS:
        assert any(n.startswith(prefix) for n in names), prefix
    for e in ENTRIES:
        assert e["source"] and e["db"] and e["table"] and e["expect"] in ("answer", "refuse")
        if e["expect"] == "refuse":
            assert e["error"] in ERRORS and e["message"] and e["why"], e.name
            assert (e.get("at") is not None) == (e["error"] == "PinqSyntaxError"), e.name
        else:
            assert e["columns"] and re.fullmatch(r"\d+(\.\.\d+)?", e["rows"]), e.name


@pytest.fixture(params=["pandas", "duckdb", "polars"])
def engine(request: pytest.FixtureRequest):
    with pq.testing.engine(request.param):
        yield request.param


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_published_query(entry: Entry, engine: str) -> None:
    session, budgets = make_session(entry["db"])
    before = _spent(budgets)
    kwargs = _call(entry)
    if entry["expect"] == "answer":
        plan = session.explain(entry.query, **kwargs)
        assert "Total charge" in str(plan) and _spent(budgets) == before, "EXPLAIN is free"
        with pq.testing.seed(0), pq.testing.no_noise():
            result = session.sql(entry.query, **kwargs)
        assert " | ".join(map(str, result.columns)) == entry["columns"]
        low, _, high = entry["rows"].partition("..")
        assert int(low) <= len(result) <= int(high or low)
        epsilon, delta = _requested(entry, kwargs)
        after = _spent(budgets)
        charged = [(e - e0, d - d0) for (e, d), (e0, d0) in zip(after, before, strict=True)]
        assert max(e for e, _ in charged) == epsilon, "the query's epsilon is its total charge"
        assert all(d <= delta for _, d in charged), "no more delta than the query has"
        return
    with pytest.raises(ERRORS[entry["error"]]) as info:
        session.sql(entry.query, **kwargs)
    err = info.value
    assert type(err) is ERRORS[entry["error"]]  # a syntax error is not a privacy refusal
    assert entry["message"] in str(err)
    if isinstance(err, pq.PinqSyntaxError):
        line, column = (int(x) for x in entry["at"].split(":"))
        assert (err.line, err.column) == (line, column)
        assert "^" in str(err)  # the caret under the construct
    assert _spent(budgets) == before, "a refusal charges nothing"
    instead = entry.get("instead")
    if instead is not None:
        with pq.testing.seed(0), pq.testing.no_noise():
            fixed = session.sql(instead, **kwargs)
        assert len(fixed) >= 1
        assert _spent(budgets) != before


def test_bigquery_key_release_counts_units() -> None:
    """Under a BigQuery privacy unit, a query of keys alone keeps a group by a noisy count of
    its units (each unit counted once per group it keeps), charged the query's epsilon and
    delta exactly (professors is user-level on id: stability 1 after max_groups_contributed)."""
    session, budgets = make_session("bigquery")
    query = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-5, "
        "privacy_unit_column = id) item FROM professors GROUP BY item"
    )
    plan = str(session.explain(query))
    assert "COUNT(*, contribution_bounds_per_group => (0, 1))" in plan
    assert "only the selected keys released" in plan
    with pq.testing.seed(0), pq.testing.no_noise():
        result = session.sql(query)
    assert list(result.columns) == ["item"]
    assert set(result["item"]) <= {"pen", "pencil", "scissors"}
    assert _spent(budgets)[0] == (Fraction(1), Fraction(1, 10**5))
