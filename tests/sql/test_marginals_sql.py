"""SELECT MARGINALS: the grammar, EXPLAIN before the charge, and the same measurement as the
Python call (a total epsilon split over the marginals and the table's stability)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.sql import ast as q
from pinqpy.sql.parser import parse_statement


def session() -> tuple[pq.Session, pq.Budget]:
    df = pd.DataFrame({"age": [10, 20, 35, 40, None, 70], "sex": [1, 2, 1, 2, 1, 2],
                       "emp": [1, 0, 1, 1, 0, 0]})
    s, b = pq.Session(), pq.Budget(5)
    s.register("people", df, budget=b, keys={"sex": [1, 2], "emp": [0, 1]})
    return s, b


@pytest.mark.parametrize("positions", [True, False])
def test_grammar(positions: bool) -> None:
    st = parse_statement(
        "explain select marginals (sex IN (1, 2), emp), (CUT(age, 20, -5.5e1, NULL)) "
        "from people where age > 3 options (rho = 0.1);",
        positions=positions,
    )
    assert isinstance(st, q.MarginalsQuery) and st.explain
    assert st.marginals[0][0].keys == (1, 2) and st.marginals[1][0].cuts == (20, -55.0, None)
    assert dict(st.options) == {"rho": 0.1}
    with pytest.raises(pq.PinqSyntaxError, match="CUT"):
        parse_statement("SELECT MARGINALS (BIN(age, 1)) FROM people")


def test_explain_charges_nothing_and_sql_matches_python(engine: str) -> None:
    s, b = session()
    text = s.sql("EXPLAIN SELECT MARGINALS (CUT(age, 20, 40), sex), (sex, emp) FROM people",
                 epsilon=1)
    assert "DiscreteLaplace(scale=2)" in text and b.spent == pq.Cost(0)
    with pq.testing.no_noise():
        m = s.sql("SELECT MARGINALS (CUT(age, 20, 40), sex), (sex, emp) FROM people "
                  "OPTIONS (epsilon = 1)")
        p = s.table("people").marginals([("age", "sex"), ("sex", "emp")], epsilon=0.5,
                                        cuts={"age": [20, 40]})
    assert b.spent == pq.Cost(2)  # SQL: total 1; Python: 0.5 per marginal
    for c in m.cliques:
        assert np.array_equal(np.asarray(m.measurements[c]), np.asarray(p.measurements[c]))
    assert m.measurements[("age", "sex")].tolist() == [1, 0, 1, 1, 0, 2]


def test_refusals_name_the_fix() -> None:
    s, b = session()
    for bad, match in (
        ("SELECT MARGINALS (age) FROM people OPTIONS (epsilon = 1)", "public domain"),
        ("SELECT MARGINALS (sex) FROM people OPTIONS (epsilon = 1, noise = 'x')", "unknown option"),
        ("SELECT MARGINALS (sex) FROM nobody OPTIONS (epsilon = 1)", "not a private table"),
        ("SELECT MARGINALS (sex IN (1)), (sex IN (2)) FROM people OPTIONS (epsilon = 1)", "twice"),
        ("SELECT MARGINALS (sex) FROM people", "epsilon"),
    ):
        with pytest.raises(pq.PinqError, match=match):
            s.sql(bad)
    assert b.spent == pq.Cost(0)
