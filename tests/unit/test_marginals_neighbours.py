"""Marginals and synthesize on neighbouring datasets: the charge covers every measurement.

One added or removed person moves each marginal's exact counts (``pq.testing.no_noise()``) by
at most the frame's stability in L1, on pandas, DuckDB and Spark, with adversarial rows: NULL
and NaN keys, values at cut points, -0.0, ±inf, a renamed column, and user-level frames
bounded with ``bound_contributions``. Refusals that need no data come before any charge.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.pipeline import synthesize as ps

CUTS = {"age": [20, 40, 60]}
KEYS = {"sex": [1, 2], "emp": [0, 1]}
MARGINALS = [("age", "sex"), ("sex", "emp"), ("age",)]


def base() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "uid": [1, 1, 2, 3, 4, 5, 6, 7],
            "age": [10.0, 20.0, 35.0, 40.0, 59.5, 60.0, 70.0, 19.99],
            "sex": [1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0],
            "emp": [0, 1, 1, 0, 1, 0, 1, 1],
        }
    )


#: Rows one person adds: at each cut point, -0.0, ±inf, NaN/NULL in a cut or a key column,
#: an undeclared key.
ADDED = [
    {"age": 20.0, "sex": 1.0, "emp": 1},
    {"age": 40.0, "sex": 2.0, "emp": 0},
    {"age": -0.0, "sex": 1.0, "emp": 0},
    {"age": math.inf, "sex": 2.0, "emp": 1},
    {"age": -math.inf, "sex": 1.0, "emp": 1},
    {"age": math.nan, "sex": 1.0, "emp": 1},
    {"age": 30.0, "sex": math.nan, "emp": 1},
    {"age": 30.0, "sex": 3.0, "emp": 1},
]


def exact(frame: pq.PrivateFrame, **kw: object) -> pq.Marginals:
    with pq.testing.no_noise():
        return frame.marginals(MARGINALS, epsilon=0.5, keys=KEYS, cuts=CUTS, **kw)


def l1(a: pq.Marginals, b: pq.Marginals) -> list[int]:
    return [
        int(np.abs(np.asarray(a.measurements[c]) - np.asarray(b.measurements[c])).sum())
        for c in MARGINALS
    ]


@pytest.mark.parametrize("row", ADDED, ids=lambda r: f"{r['age']}-{r['sex']}")
def test_one_row_moves_each_marginal_by_at_most_one(engine: str, row: dict) -> None:
    df = base()
    bigger = pd.concat([df, pd.DataFrame([{"uid": 99, **row}])], ignore_index=True)
    budget = pq.Budget(10)
    small = exact(pq.PrivateFrame(df.drop(columns="uid"), budget))
    big = exact(pq.PrivateFrame(bigger.drop(columns="uid"), pq.Budget(10)))
    assert max(l1(small, big)) <= 1
    assert budget.spent == pq.Cost(Fraction(3, 2))  # 3 marginals x 0.5 x stability 1


def test_cells_at_cut_points_and_nulls(engine: str) -> None:
    df = pd.DataFrame([{"uid": i, **r} for i, r in enumerate(ADDED)])
    m = exact(pq.PrivateFrame(df, pq.Budget(10)))
    age = m.measurements[("age",)]
    assert list(age.index) == ["(-inf, 20)", "[20, 40)", "[40, 60)", "[60, inf)"]
    # 20 -> [20, 40); 40 -> [40, 60); -0.0 and -inf -> first; inf -> last; NaN dropped;
    # the rows with an undeclared or NULL sex still count in age alone.
    assert age.tolist() == [2, 3, 1, 1]
    assert int(m.measurements[("sex", "emp")].sum()) == 6
    with pq.testing.no_noise():
        nulls = pq.PrivateFrame(df, pq.Budget(1)).marginals(
            [("age",)], epsilon=1, cuts={"age": [20, 40, 60, None]}
        )
    assert nulls.measurements[("age",)].tolist() == [2, 3, 1, 1, 1]


def test_renamed_column_keeps_its_keys(engine: str) -> None:
    f = pq.PrivateFrame(base(), pq.Budget(5), keys={"sex": [1, 2]})
    with pq.testing.no_noise():
        m = f.select("age", gender="sex").marginals([("gender",)], epsilon=1)
    assert m.measurements[("gender",)].tolist() == [4, 4]
    with pytest.raises(pq.PrivacyError, match="public domain"):
        f.assign(sex="sex + 0").marginals([("sex",)], epsilon=1)


def test_user_level_bounded_moves_at_most_its_stability(engine: str) -> None:
    df = base()
    person = pd.DataFrame([{"uid": 99, **r} for r in ADDED[:4]])  # a new person, 4 rows
    bigger = pd.concat([df, person], ignore_index=True)
    budget = pq.Budget(10)
    with pq.testing.seed(5):
        small = exact(pq.PrivateFrame(df, budget, privacy_unit="uid").bound_contributions(2))
    with pq.testing.seed(5):
        frame = pq.PrivateFrame(bigger, pq.Budget(10), privacy_unit="uid")
        big = exact(frame.bound_contributions(2))
    assert max(l1(small, big)) <= 2
    assert budget.spent == pq.Cost(3)  # 3 marginals x 0.5 x stability 2


def test_charges_and_refusals_before_the_charge() -> None:
    budget = pq.Budget(1)
    f = pq.PrivateFrame(base(), budget, keys={"sex": [1, 2]})
    for bad in (
        lambda: f.marginals([("age", "sex")], epsilon=0.1),  # no domain for age
        lambda: f.marginals([("sex",)], epsilon=0.1, cuts={"sex": [1, 1]}),  # not increasing
        lambda: f.marginals([("sex",)], epsilon=0.1, rho=0.1),
        lambda: f.marginals([("sex",), ("sex",)], epsilon=0.1),
        lambda: f.marginals([("sex",)], rho=0.1),  # rho on an approx budget without delta
        lambda: f.synthesize(0.1, columns=["sex", "emp"], keys=KEYS, max_degree=3),
    ):
        with pytest.raises(pq.PinqError):
            bad()
    assert budget.spent == pq.Cost(0)
    text = f.marginals([("sex",), ("emp",)], epsilon=0.2, keys=KEYS, explain=True)
    assert "charge Cost(epsilon=0.4)" in text and budget.spent == pq.Cost(0)
    with pytest.raises(pq.BudgetExceededError):
        f.marginals([("sex",), ("emp",)], epsilon=0.6, keys=KEYS)
    assert budget.spent == pq.Cost(0)


def test_rho_is_charged_as_rho_on_a_zcdp_budget() -> None:
    budget = pq.Budget(1, 1e-6, accounting="zcdp")
    f = pq.PrivateFrame(base(), budget, keys=KEYS)
    f.marginals([("sex",), ("emp",)], rho=Fraction(1, 100))
    # 2 x 1/100, read back through the budget's (epsilon, delta) conversion
    spent_rho = budget._current().rho
    assert Fraction(1, 50) <= spent_rho <= Fraction(1, 50) * (1 + Fraction(1, 10**6))


def test_synthesize_charges_its_total_and_scores_have_sensitivity_one(engine: str) -> None:
    budget = pq.Budget(3)
    f = pq.PrivateFrame(base(), budget, keys=KEYS)
    m = f.synthesize(1, columns=["age", "sex", "emp"], cuts=CUTS)
    assert budget.spent == pq.Cost(1)
    assert len(m.cliques) == 5 and all(len(c) == 2 for c in m.cliques[3:])
    bigger = pd.concat([base(), pd.DataFrame([{"uid": 9, **ADDED[0]}])], ignore_index=True)
    plans = [
        ps.plan_synthesis(pq.PrivateFrame(d, pq.Budget(9), keys=KEYS)._rel,
                          ["age", "sex", "emp"], epsilon=1, cuts=CUTS)
        for d in (base(), bigger)
    ]
    one_way = m.measurements  # a public estimate, the same for both neighbours
    scores = [ps._scores(p, {c[0]: one_way[c] for c in m.cliques[:3]}) for p in plans]
    assert np.abs(scores[0] - scores[1]).max() <= 1
