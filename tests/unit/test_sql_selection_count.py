"""Which aggregate of a GROUP BY over private keys the key selection's noisy counts are.

The selection counts the rows of the relation the query's aggregates read, one noisy count
per key, and those counts are released as an aggregate only when they are that aggregate's
exact value: a plain ``COUNT(*)``; under BigQuery's per-unit semantics ``COUNT(DISTINCT
unit)`` and a ``COUNT(*)`` whose per-unit count is clamped to at most 1. A per-unit
``COUNT(*)`` clamped to a larger bound is a sum of counts, not the number of units, so it is
measured on the released keys with its own share, and with noise off it gives what the
same query over public keys gives.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest

import pinqpy as pq

# Unit 1 has six rows in group 0; units 2 and 3 one row each in groups 0, 1 and 2.
ROWS = pd.DataFrame({"pid": [1] * 6 + [2, 2, 3], "k": [0] * 6 + [0, 1, 2]})


def session(engine: str) -> tuple[pq.Session, pq.Budget]:
    s = pq.Session()
    budget = pq.Budget(epsilon=100, delta=1e-3)
    with pq.testing.engine(engine):
        s.register("t", ROWS, budget=budget, privacy_unit="pid")
    return s, budget


def exact(engine: str, sql: str) -> dict[int, float]:
    s, _ = session(engine)
    with pq.testing.engine(engine), pq.testing.no_noise():
        res = s.sql(sql, epsilon=1, delta=1e-5)
    return dict(zip(res["k"].tolist(), res["n"].astype(float).tolist(), strict=True))


def split(sql: str) -> str:
    s, budget = session("pandas")
    text = str(s.sql("EXPLAIN " + sql, epsilon=1, delta=1e-5))
    assert budget.spent.epsilon == 0
    m = re.search(r"Noisy measurements: (.*)", text)
    assert m is not None, text
    return m.group(1)


CLAMPED = [
    ("COUNT(*, contribution_bounds_per_group => (0, 5))", "OPTIONS (max_groups_contributed = 2)"),
    ("COUNT(*)", "OPTIONS (privacy_unit_column = pid, max_rows_contributed = 5)"),
]


@pytest.mark.parametrize("engine", ["pandas", "duckdb", "polars"])
@pytest.mark.parametrize(("agg", "options"), CLAMPED)
def test_a_per_unit_count_clamped_above_one_is_not_the_selection(engine, agg, options):
    private = exact(engine, f"SELECT k, {agg} AS n FROM t GROUP BY k {options}")
    public = exact(engine, f"SELECT k, {agg} AS n FROM t GROUP BY k IN (0, 1, 2) {options}")
    assert private == public
    assert private[0] == 6  # unit 1's six rows (clamped to 5) and unit 2's one
    # The selection is a measurement of its own: two shares, not one.
    assert split(f"SELECT k, {agg} AS n FROM t GROUP BY k {options}").startswith(
        "epsilon 1 = 2 measurement(s)"
    )


@pytest.mark.parametrize(
    "agg",
    [
        "COUNT(DISTINCT pid)",
        "COUNT(*, contribution_bounds_per_group => (0, 1))",
    ],
)
def test_counts_of_units_per_group_are_the_selection(agg):
    sql = f"SELECT k, {agg} AS n FROM t GROUP BY k OPTIONS (max_groups_contributed = 2)"
    assert split(sql) == "epsilon 1 = 1 measurement(s) x 0.5 x stability 2"
    for engine in ("pandas", "duckdb", "polars"):
        assert exact(engine, sql) == {0: 2, 1: 1, 2: 1}


def test_a_plain_count_star_is_still_the_selection():
    s = pq.Session()
    s.register("r", ROWS.drop(columns="pid"), budget=pq.Budget(epsilon=10, delta=1e-3))
    text = str(s.sql("EXPLAIN SELECT k, COUNT(*) AS n FROM r GROUP BY k", epsilon=1, delta=1e-5))
    assert "epsilon 1 = 1 measurement(s) x 1 x stability 1" in text
    assert "the GROUP BY key selection, its noisy counts released" in text


def test_a_release_with_no_key_states_the_epsilon_it_charged():
    """When no key passes the threshold, each aggregate still states its own share (as it
    does with keys), not a placeholder: whether keys were released changes nothing else."""
    few = pd.DataFrame({"k": [1, 2, 3]})
    many = pd.DataFrame({"k": [1] * 300})
    sql = "SELECT k, SUM(k, 0, 5) AS s, AVG(k, 0, 5) AS a FROM r GROUP BY k"
    headers = []
    for df in (few, many):
        s = pq.Session()
        s.register("r", df, budget=pq.Budget(epsilon=10, delta=1e-3))
        with pq.testing.seed(1):
            res = s.sql(sql, epsilon=1, delta=1e-6)
        headers.append(repr(res).splitlines()[0])
        assert len(res) == (0 if df is few else 1)
    assert headers[0] == headers[1] == "noisy (epsilon 1/3 each), 95% intervals:"
