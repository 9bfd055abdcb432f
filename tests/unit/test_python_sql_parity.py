"""Python's methods answer what SQL answers: partition keys from integer bounds, and
variance/std with SQL's mechanism, defaults and charge."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import load_pums
from pinqpy.pipeline.relation import MAX_PARTITION_KEYS
from pinqpy.sql.compiler import MAX_GROUPS

BOUNDS = {"age": (0, 100), "income": (0, 500_000)}


def _frame(budget: pq.Budget | None = None, **kw: object) -> pq.PrivateFrame:
    return pq.PrivateFrame(load_pums(), budget or pq.Budget(10), bounds=BOUNDS, **kw)


def _session(frame: pq.PrivateFrame) -> pq.Session:
    s = pq.Session()
    s.register("people", frame)
    return s


# -- partition keys from bounds -------------------------------------------------------------
def test_partition_takes_integer_keys_from_bounds_as_group_by_does() -> None:
    frame = _frame()
    parts = frame.partition("age")
    assert list(parts) == list(range(0, 101))
    with pq.testing.seed(4):
        py = frame.partition("age").count(epsilon=0.5)
    with pq.testing.seed(4):
        sql = _session(_frame()).sql("SELECT age, COUNT(*) AS n FROM people GROUP BY age", 0.5)
    assert list(py.index) == sql["age"].tolist()
    assert py.tolist() == sql["n"].tolist()


def test_partition_takes_booleans_as_group_by_does() -> None:
    df = pd.DataFrame({"flag": [True, False, True]})
    parts = pq.PrivateFrame(df, pq.Budget(1)).partition("flag")
    assert list(parts) == [False, True]


def test_declared_keys_win_over_bounds() -> None:
    frame = _frame(keys={"age": [30, 40]})
    assert list(frame.partition("age")) == [30, 40]


def test_float_bounds_give_no_keys() -> None:
    df = pd.DataFrame({"x": [0.5, 1.5]})
    frame = pq.PrivateFrame(df, pq.Budget(1), bounds={"x": (0, 2)})
    with pytest.raises(pq.PrivacyError, match="partition needs public keys for 'x'"):
        frame.partition("x")
    with pytest.raises(pq.PrivacyError, match="GROUP BY x"):
        _session(frame).sql("SELECT x, COUNT(*) FROM people GROUP BY x", 0.1)


def test_too_wide_bounds_are_refused_like_sql() -> None:
    frame = _frame()  # income spans 500,001 integers: more than SQL derives
    with pytest.raises(pq.PrivacyError, match="partition needs public keys for 'income'"):
        frame.partition("income")
    with pytest.raises(pq.PrivacyError, match="GROUP BY income"):
        _session(frame).sql("SELECT income, COUNT(*) FROM people GROUP BY income", 0.1)
    # nothing charged on either refusal
    assert frame.budgets[0].spent.epsilon == 0


def test_partition_key_limit_matches_sql() -> None:
    assert MAX_PARTITION_KEYS == MAX_GROUPS
    df = pd.DataFrame({"a": [1], "b": [2], "c": [3]})
    wide = {"a": (0, 9_999), "b": (0, 9_999), "c": (0, 1)}
    frame = pq.PrivateFrame(df, pq.Budget(1), bounds=wide)
    with pytest.raises(pq.PrivacyError, match="key combinations; at most 1,000,000"):
        frame.partition(["a", "b"])


# -- variance and std ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "sql_name", "ddof"),
    [
        ("variance", "VARIANCE", 1),
        ("variance", "VAR_POP", 0),
        ("std", "STDDEV", 1),
        ("std", "STDDEV_POP", 0),
    ],
)
def test_variance_and_std_equal_sql_with_the_same_seed(
    method: str, sql_name: str, ddof: int
) -> None:
    py_budget, sql_budget = pq.Budget(1), pq.Budget(1)
    with pq.testing.seed(11):
        py = getattr(_frame(py_budget), method)("age", epsilon=0.3, ddof=ddof)
    with pq.testing.seed(11):
        sql = _session(_frame(sql_budget)).sql(f"SELECT {sql_name}(age) AS v FROM people", 0.3)
    assert float(py) == pytest.approx(float(sql["v"].iloc[0]), rel=1e-12)
    assert py_budget.spent == sql_budget.spent == pq.Cost(0.3)


def test_variance_defaults_to_the_sample_form() -> None:
    with pq.testing.no_noise():
        sample = float(_frame().variance("age", epsilon=1))
        population = float(_frame().variance("age", epsilon=1, ddof=0))
        std = float(_frame().std("age", epsilon=1))
    ages = load_pums()["age"]
    assert sample == pytest.approx(ages.var(ddof=1), rel=1e-4)
    assert population == pytest.approx(ages.var(ddof=0), rel=1e-4)
    assert std == pytest.approx(math.sqrt(sample), rel=1e-9)


def test_variance_charges_epsilon_times_stability() -> None:
    budget = pq.Budget(2)
    grouped = _frame(budget).groupby("educ").agg(m="AVG(age)")
    grouped.variance("m", epsilon=0.25, bounds=(0, 100))
    assert budget.spent == pq.Cost(0.5)


def test_partition_variance_equals_sql_group_by() -> None:
    keys = {"sex": [1, 2]}
    with pq.testing.seed(2):
        py = _frame(keys=keys).partition("sex").std("income", epsilon=0.6)
    with pq.testing.seed(2):
        sql = _session(_frame(keys=keys)).sql(
            "SELECT sex, STDDEV(income) AS s FROM people GROUP BY sex", 0.6
        )
    assert py.tolist() == pytest.approx(sql["s"].tolist(), rel=1e-12)


def test_variance_without_bounds_is_refused_before_charging() -> None:
    budget = pq.Budget(1)
    with pytest.raises(pq.PrivacyError, match="variance needs bounds for educ"):
        _frame(budget).variance("educ", epsilon=0.1)
    with pytest.raises(pq.PinqError, match="ddof must be 0 or 1"):
        _frame(budget).std("age", epsilon=0.1, ddof=2)
    assert budget.spent.epsilon == 0
