"""Queries over real public microdata: the bundled PUMS sample and tests/data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums
from tests.conftest import data_csv


@pytest.fixture
def pums() -> pd.DataFrame:
    return load_pums()


def test_bundled_sample_is_the_real_pums(pums):
    assert pums.shape == (1000, 6)
    assert list(pums.columns) == ["age", "sex", "educ", "race", "income", "married"]


def test_pums_queries_are_accurate_and_charged(pums):
    budget = pq.Budget(epsilon=10)
    people = pq.PrivateFrame(pums, budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
    with pq.testing.seed(3):
        n = people.count(epsilon=2)
        old = people.where("age >= 65").count(epsilon=2)
        income = people.mean("income", epsilon=2)
        by_sex = people.partition("sex").count(epsilon=2)
        med = people.median("age", epsilon=1)
    assert budget.spent.epsilon == 9
    # Laplace(1/2): |noise| < 10 with probability 1 - e^-20.
    assert abs(n - 1000) < 10
    assert abs(old - int((pums.age >= 65).sum())) < 10
    assert abs(by_sex.loc[0] - 486) < 10 and abs(by_sex.loc[1] - 514) < 10
    # the true mean is 34,380; the sum noise has scale 250,000 / 1 = 250,000 -> 250 per row
    assert abs(income - pums.income.mean()) < 5_000
    assert 30 <= med <= 55  # true median 42
    lo, hi = n.ci(0.95)
    assert lo < float(n) < hi


def test_pums_user_level_table_with_bounded_contributions():
    dup = data_csv("PUMS_dup.csv")
    budget = pq.Budget(epsilon=5)
    visits = pq.PrivateFrame(dup, budget, privacy_unit="pid", bounds={"age": (0, 100)})
    with pytest.raises(pq.PrivacyError, match="bound_contributions"):
        visits.count(epsilon=1)
    assert budget.spent.is_zero
    one_each = visits.bound_contributions(max_rows=1)
    with pq.testing.seed(8):
        persons = one_each.count(epsilon=2)
        per_person = visits.groupby("pid").agg(rows="COUNT(*)")
        heavy = per_person.where("rows >= 3").count(epsilon=2)
    assert budget.spent.epsilon == 4
    assert abs(persons - 1000) < 15
    assert abs(heavy - (180 + 93)) < 15


def test_pums_with_nulls_never_gives_nan():
    nulls = data_csv("PUMS_null.csv")
    budget = pq.Budget(epsilon=10)
    f = pq.PrivateFrame(nulls, budget, bounds={"age": (0, 100), "income": (0, 500_000)})
    with pq.testing.seed(4):
        values = [
            f.mean("age", epsilon=1),
            f.sum("income", epsilon=1),
            f.median("income", epsilon=1),
            f.where("age > 200").mean("age", epsilon=1),  # empty: still inside the bounds
            f.where("sex IS NULL").count(epsilon=1),
        ]
    for v in values:
        assert np.isfinite(float(v))
    assert 0 <= values[3] <= 100
    assert abs(values[4] - 112) < 20


def test_adult_queries():
    adult = data_csv("adult.csv")
    budget = pq.Budget(epsilon=5)
    people = pq.PrivateFrame(adult, budget, bounds={"age": (17, 90), "hours_per_week": (1, 99)})
    education = sorted(adult.education.unique())  # the UCI value list is public
    with pq.testing.seed(9):
        top = people.argmax("education", candidates=education, epsilon=1)
        rich = people.where("income = '>50K'").count(epsilon=1)
        hours = people.partition("sex", keys=["Female", "Male"]).mean("hours_per_week", 1)
        age90 = people.quantile("age", 0.9, epsilon=1)
    assert budget.spent.epsilon == 4
    assert top == "HS-grad"
    assert abs(rich - (adult.income == ">50K").sum()) < 20
    assert hours.loc["Male"] > hours.loc["Female"]
    true90 = adult.age.quantile(0.9)
    assert abs(age90 - true90) <= 3


def test_real_data_key_selection_refused_without_keys(pums):
    people = pq.PrivateFrame(pums, pq.Budget(epsilon=1))
    with pytest.raises(pq.PrivacyError, match="keys"):
        people.partition("race")
