"""HAVING and ORDER BY run on the released values, after the charge; a fault in them (an
unknown function, a condition that is not true/false) must be refused before it, with a caret,
spending nothing: with public keys and with keys chosen privately alike."""

from __future__ import annotations

import pytest

import pinqpy as pq
from pinqpy.demo import load_pums

BOUNDS = {"age": (0, 100), "income": (0, 500_000)}


@pytest.fixture
def session() -> pq.Session:
    s = pq.Session()
    s.register("people", load_pums(), budget=pq.Budget(10, 1e-3), bounds=BOUNDS,
               keys={"sex": [0, 1]})  # fmt: skip
    return s


@pytest.mark.parametrize(
    ("query", "message", "fault"),
    [
        # educ has no public keys: the query would select them privately first
        ("SELECT educ, AVG(age) AS a FROM people GROUP BY educ HAVING COUNTCOUNT(*) > 100",
         "unknown function 'COUNTCOUNT'", "COUNTCOUNT"),
        ("SELECT sex, AVG(age) AS a FROM people GROUP BY sex HAVING COUNTCOUNT(*) > 100",
         "unknown function 'COUNTCOUNT'", "COUNTCOUNT"),
        ("SELECT sex, AVG(age) AS a FROM people GROUP BY sex HAVING a + 1",
         "HAVING needs a condition (true or false)", "a + 1"),
        ("SELECT sex, AVG(age) AS a FROM people GROUP BY sex ORDER BY FOO(a)",
         "unknown function 'FOO'", "FOO"),
        ("SELECT educ, COUNT(*) AS n FROM people GROUP BY educ ORDER BY LOWER(n) DESC",
         "LOWER", "LOWER"),
    ],
)  # fmt: skip
def test_refused_before_the_charge(
    session: pq.Session, query: str, message: str, fault: str
) -> None:
    with pytest.raises(pq.PinqSyntaxError) as err:
        session.sql(query, epsilon=1, delta=1e-6)
    assert message in str(err.value)
    assert err.value.column == query.index(fault) + 1  # the caret under the fault
    budget = session.sql("SHOW BUDGET")
    assert budget["spent_epsilon"].tolist() == [0] and budget["spent_delta"].tolist() == [0]


@pytest.mark.parametrize(
    "query",
    [
        "SELECT sex, AVG(age) AS a FROM people GROUP BY sex ORDER BY 2",
        "SELECT sex AS s, AVG(age) * 2 AS a FROM people GROUP BY sex HAVING a > 0 AND s = 1",
        "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex HAVING n > '5' ORDER BY n DESC, 1",
    ],
)
def test_sound_post_processing_still_runs(session: pq.Session, query: str) -> None:
    result = session.sql(query, epsilon=1)
    assert len(result) <= 2
