"""Outputs of the outermost SELECT that combine GROUP BY keys with aggregates.

A key inside such an expression is the released key (post-processing of public or privately
released keys and noisy aggregates); any other column is a raw value, refused when the query
is compiled, so before anything is charged (it used to be charged, then fail).
"""

from __future__ import annotations

import pandas as pd
import pytest

import pinqpy as pq

ROWS = pd.DataFrame({"g": [1, 1, 2, 2, 2], "x": [1.0, 2.0, 3.0, 4.0, 5.0]})


def session() -> tuple[pq.Session, pq.Budget]:
    budget = pq.Budget(10, 1e-3)
    s = pq.Session()
    s.register("t", ROWS, budget=budget, bounds={"x": (0, 10)}, keys={"g": [1, 2]})
    return s, budget


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT g, g * COUNT(*) AS v FROM t GROUP BY g", [2, 6]),
        ("SELECT g, SUM(x) - g AS v FROM t GROUP BY g", [2.0, 10.0]),
        ("SELECT g * COUNT(*) AS v FROM t GROUP BY g ORDER BY v", [2, 6]),
        ("SELECT g + 1 AS h, COUNT(*) * (g + 1) AS v FROM t GROUP BY g + 1", [4, 9]),
    ],
)
def test_keys_inside_an_aggregate_expression_are_the_released_keys(sql, expected):
    s, budget = session()
    with pq.testing.no_noise():
        res = s.sql(sql, epsilon=1)
    assert res["v"].tolist() == expected
    assert budget.spent.epsilon == 1


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT x + COUNT(*) AS v FROM t",
        "SELECT g, x * COUNT(*) AS v FROM t GROUP BY g",
        "SELECT g, SUM(x) / x AS v FROM t GROUP BY g",
    ],
)
def test_a_raw_column_beside_an_aggregate_is_refused_before_the_charge(sql):
    s, budget = session()
    with pytest.raises(pq.PrivacyError, match="raw column"):
        s.sql(sql, epsilon=1)
    assert budget.spent == pq.Cost(0)
