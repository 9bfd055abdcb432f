"""A count over a truncation is computed as Σ min(rows per key, k), without choosing rows
(pinqpy.plan.truncation): here on the pandas engine, against the materialised truncation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.engines.pandas import runner as pandas_runner
from pinqpy.plan.nodes import BoundContributions, BoundDegree, Where
from pinqpy.plan.truncation import truncated_count


def _counts(frame: pq.PrivateFrame, step: Callable[[Any], Any]) -> tuple[int, int]:
    """(shortcut count, count of the materialised truncation) without noise. A ``where``
    above the truncation reads the kept rows, so it is never shortcut."""
    with pq.testing.no_noise():
        short = int(step(frame).count(epsilon=1))
        full = int(step(frame).where("TRUE").count(epsilon=1))
    return short, full


UNITS = {
    "ints": [3, 1, 1, 2, 3, 3, 3, 1, 9, 9],
    "nulls": [1.0, None, np.nan, 1.0, 2.0, None, 1.0, 2.0, 2.0, 2.0],
    "signed zeros and NaN": [0.0, -0.0, 0.0, np.nan, -0.0, 1.5, 1.5, np.nan, 0.0, -0.0],
    "strings": ["a", "b", "a", None, "a", "é", "é", "a", "b", ""],
    "nullable ints": pd.array([1, None, 1, 1, 2, 2, None, 1, 1, 3], dtype="Int64"),
    "unhashable": [[1], "a", "a", (1,), "a", [1], None, "a", (1,), (1,)],
    "huge ids": [2**62, -(2**62), 2**62, 5, 5, 5, 2**62, 5, -(2**62), 0],
}


@pytest.mark.parametrize("units", list(UNITS.values()), ids=list(UNITS))
@pytest.mark.parametrize("k", [1, 2, 3, 100])
def test_count_after_bound_contributions_matches_the_chosen_rows(units: Any, k: int) -> None:
    df = pd.DataFrame({"u": units, "x": range(10)})
    frame = pq.PrivateFrame(df, pq.Budget(epsilon=1e6), privacy_unit="u")
    short, full = _counts(frame, lambda f: f.bound_contributions(max_rows=k))
    assert short == full
    # and against the definition, from pandas directly (NULL units dropped)
    if units is not UNITS["unhashable"]:
        per = df["u"].dropna().value_counts()
        assert short == int(np.minimum(per.to_numpy(), k).sum())


def test_a_where_before_and_a_select_after_keep_the_shortcut_exact() -> None:
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"u": rng.integers(0, 40, 500), "age": rng.integers(0, 90, 500)})
    frame = pq.PrivateFrame(df, pq.Budget(epsilon=1e6), privacy_unit="u")

    def step(f: Any) -> Any:
        return f.where("age >= 30").bound_contributions(max_rows=3).assign(y="age * 2")

    short, full = _counts(frame, step)
    kept = df[df.age >= 30]["u"].value_counts()
    assert short == full == int(np.minimum(kept.to_numpy(), 3).sum())


def test_bound_degree_on_several_columns_counts_a_null_key_as_one_key() -> None:
    df = pd.DataFrame(
        {
            "a": [1, 1, 1, None, None, None, 2, 2, 2, 2],
            "b": ["x", "x", "y", None, None, None, "x", "x", "x", None],
        }
    )
    frame = pq.PrivateFrame(df, pq.Budget(epsilon=1e6))
    short, full = _counts(frame, lambda f: f.bound_degree(["a", "b"], max_rows=2))
    # keys (1,x):2 (1,y):1 (NULL,NULL):3->2 (2,x):3->2 (2,NULL):1
    assert short == full == 8


def test_an_empty_table_counts_zero() -> None:
    df = pd.DataFrame({"u": pd.Series([], dtype="int64"), "x": pd.Series([], dtype="int64")})
    frame = pq.PrivateFrame(df, pq.Budget(epsilon=1e6), privacy_unit="u")
    assert _counts(frame, lambda f: f.bound_contributions(max_rows=2)) == (0, 0)


def test_the_shortcut_chooses_no_rows_and_charges_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    df = pd.DataFrame({"u": [1, 1, 1, 2], "x": [1, 2, 3, 4]})
    chosen: list[int] = []
    real = pandas_runner.truncation_mask

    def spy(*a: Any, **k: Any) -> Any:
        chosen.append(1)
        return real(*a, **k)

    monkeypatch.setattr(pandas_runner, "truncation_mask", spy)
    short_budget, full_budget = pq.Budget(epsilon=10), pq.Budget(epsilon=10)
    short = pq.PrivateFrame(df, short_budget, privacy_unit="u").bound_contributions(max_rows=2)
    full = pq.PrivateFrame(df, full_budget, privacy_unit="u").bound_contributions(max_rows=2)
    short.count(epsilon=0.5)
    assert chosen == []  # no row was chosen for the count
    full.where("TRUE").count(epsilon=0.5)
    assert chosen == [1]
    assert short_budget.spent == full_budget.spent == pq.Cost(1)  # 0.5 x stability 2
    # a sum still chooses rows: its value depends on which rows are kept
    short.sum("x", epsilon=0.5, bounds=(0, 10))
    assert chosen == [1, 1]


def test_the_released_count_is_the_exact_count_plus_the_same_noise() -> None:
    """Seeded releases: the shortcut's noisy count minus the exact count is distributed as
    the mechanism's noise alone (discrete Laplace of scale 1/epsilon: PINQ charges the
    stability, epsilon x 4, and keeps the noise of one row), checked on its
    mean and variance over many releases with tolerances from that distribution."""
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"u": rng.integers(0, 300, 3000)})
    exact = int(np.minimum(df["u"].value_counts().to_numpy(), 4).sum())
    budget = pq.Budget(epsilon=1e9)
    frame = pq.PrivateFrame(df, budget, privacy_unit="u").bound_contributions(max_rows=4)
    n, eps = 1500, 1.0
    with pq.testing.seed(11):
        errs = np.array([int(frame.count(epsilon=eps)) - exact for _ in range(n)], float)
    # discrete Laplace of scale t = 1/eps: variance 2 q / (1 - q)^2 with q = e^(-1/t)
    q = np.exp(-eps)
    var = 2 * q / (1 - q) ** 2
    assert abs(errs.mean()) < 4 * np.sqrt(var / n)
    # the sample variance's standard error: sqrt((mu4 - var^2) / n), mu4 about 6 var^2
    assert abs(errs.var() - var) < 4 * np.sqrt(5 * var**2 / n)


def test_truncated_count_is_found_only_where_the_count_ignores_which_rows() -> None:
    df = pd.DataFrame({"u": [1, 2], "x": [1, 2]})
    f = pq.PrivateFrame(df, pq.Budget(epsilon=1), privacy_unit="u")
    got = truncated_count(f.bound_contributions(max_rows=2).assign(y="x")._rel.plan)
    assert got is not None and got.columns == ("u",) and got.limit == 2 and got.drop_null
    assert isinstance(f.bound_contributions(max_rows=2)._rel.plan, BoundContributions)
    assert truncated_count(f.bound_contributions(max_rows=2).where("x > 1")._rel.plan) is None
    assert isinstance(f.bound_contributions(max_rows=2).where("x > 1")._rel.plan, Where)
    assert truncated_count(f.where("x > 1")._rel.plan) is None
    g = pq.PrivateFrame(df, pq.Budget(epsilon=1)).bound_degree("x", max_rows=1)
    assert isinstance(g._rel.plan, BoundDegree)
    got = truncated_count(g._rel.plan)
    assert got is not None and got.columns == ("x",) and not got.drop_null
