"""No repr, error or warning shows a private value or the row count."""

from __future__ import annotations

import copy
import pickle
import warnings

import pandas as pd
import pytest

import pinqpy as pq

SECRET_AGE = 7319  # a value that must never appear in any text pinqpy produces
SECRET_NAME = "Zebulon-Quartz"


@pytest.fixture
def people() -> pq.PrivateFrame:
    df = pd.DataFrame(
        {
            "name": ["Ann", SECRET_NAME, "Bo"] * 11,
            "age": [30, SECRET_AGE, 45] * 11,
            "income": [1.0, 2.0, 0.0] * 11,
        }
    )
    return pq.PrivateFrame(df, pq.Budget(epsilon=10), bounds={"age": (0, 100)})


def assert_clean(text: str) -> None:
    assert str(SECRET_AGE) not in text
    assert SECRET_NAME not in text
    assert "33" not in text  # the row count


def test_repr_shows_schema_stability_budget_only(people):
    text = repr(people)
    assert_clean(text)
    assert "age" in text and "stability=1" in text and "Budget(" in text
    assert_clean(repr(people.where("age > 3").groupby("name").agg(n="COUNT(*)")))
    assert_clean(repr(people.partition("name", keys=["Ann", "Bo"])))


def test_no_len_iteration_head_indexing_or_pickle(people):
    with pytest.raises(pq.PrivacyError, match="count"):
        len(people)
    with pytest.raises(pq.PrivacyError):
        iter(people)
    with pytest.raises(pq.PrivacyError):
        list(people)
    with pytest.raises(pq.PrivacyError):
        people.head()
    with pytest.raises(pq.PrivacyError):
        people["age"]
    with pytest.raises(pq.PrivacyError):
        pickle.dumps(people)
    assert copy.deepcopy(people) is people
    assert bool(people)


def test_errors_never_quote_data(people):
    msgs = []
    for bad in [
        lambda: people.where("agee > 3"),
        lambda: people.where("age > 'x' +"),
        lambda: people.sum("name", epsilon=0.1),
        lambda: people.sum("income", epsilon=0.1),
        lambda: people.partition("name"),
        lambda: people.partition("age", keys=["a"]),
        lambda: people.count(epsilon=100),
        lambda: people.where(lambda df: df["age"] / 0 > df["name"]).count(0.1),
        lambda: people.where(lambda df: df.loc[df.age == SECRET_AGE, "name"].iloc[5]).count(1),
    ]:
        with pytest.raises(pq.PinqError) as err:
            bad()
        msgs.append(str(err.value))
    for m in msgs:
        assert_clean(m)


def test_data_faults_give_null_without_warnings(people):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pq.testing.seed(1):
            v = people.mean("age / (income - income)", epsilon=1, bounds=(0, 10))
            c = people.where("CAST(name AS INT) > 1 OR LN(income - 5) > 0").count(epsilon=1)
    assert 0 <= v <= 10
    assert float(c) == float(c)  # not NaN


def test_noisy_results_show_only_the_release(people):
    with pq.testing.seed(2):
        r = people.count(epsilon=1)
    assert_clean(repr(r).replace(f"{float(r):.6g}", ""))
