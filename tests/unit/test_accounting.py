"""Budget arithmetic and PINQ's agents: sequential, partition (max) and atomic binary charges."""

from __future__ import annotations

import math
from fractions import Fraction

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.accounting.agents import PartAgent, PartitionAgent, charge

# Engine-independent: every test runs on each engine (see the `engine` fixture).
pytestmark = pytest.mark.usefixtures("engine")


def frame(budget: pq.Budget, n: int = 20, **kwargs: object) -> pq.PrivateFrame:
    df = pd.DataFrame({"state": ["CA", "NY", "TX", "WA"] * (n // 4), "x": range(n), "y": [1.5] * n})
    return pq.PrivateFrame(df, budget, bounds={"x": (0, 100)}, **kwargs)  # type: ignore[arg-type]


def test_ten_charges_of_a_tenth_fill_a_budget_of_one_exactly():
    b = pq.Budget(epsilon=1.0)
    f = frame(b)
    for i in range(10):  # ten different questions (the same one again would be free)
        f.where(f"x >= {i}").count(epsilon=0.1)
    assert b.spent.epsilon == Fraction(1)
    assert b.remaining.epsilon == 0
    with pytest.raises(pq.BudgetExceededError):
        f.count(epsilon=1e-9)
    assert b.spent.epsilon == 1


def test_charges_add_up_in_sequence():
    b = pq.Budget(epsilon=2)
    f = frame(b)
    f.count(epsilon=0.1)
    f.sum("x", epsilon=0.2)
    f.mean("x", epsilon=0.3)
    f.median("x", epsilon=0.15)
    assert b.spent.epsilon == Fraction(3, 4)
    assert b.spent.epsilon == 0.75
    assert [c for c, _ in b.charges] == [
        pq.Cost(0.1),
        pq.Cost(0.2),
        pq.Cost(0.3),
        pq.Cost(0.15),
    ]


def test_charge_is_multiplied_by_stability():
    b = pq.Budget(epsilon=5)
    f = frame(b)
    f.concat(f).count(epsilon=0.1)
    assert b.spent.epsilon == Fraction(2, 10)
    f.groupby("state").agg(n="COUNT(*)").count(epsilon=0.25)
    assert b.spent.epsilon == Fraction(2, 10) + Fraction(1, 2)


def test_partition_pays_the_maximum_not_the_sum():
    b = pq.Budget(epsilon=1)
    parts = frame(b).partition("state", keys=["CA", "NY", "TX"])
    parts["CA"].count(epsilon=0.3)
    assert b.spent.epsilon == 0.3
    parts["NY"].count(epsilon=0.5)
    assert b.spent.epsilon == 0.5
    parts["CA"].count(epsilon=0.1)  # CA at 0.4 < 0.5: free for the parent
    assert b.spent.epsilon == 0.5
    parts["CA"].count(epsilon=0.2)  # CA at 0.6: the parent pays the growth 0.1
    assert b.spent.epsilon == 0.6


def test_partition_wide_query_charges_once_and_composes_with_parts():
    b = pq.Budget(epsilon=1)
    parts = frame(b).partition("state", keys=["CA", "NY", "TX", "WA"])
    s = parts.count(epsilon=0.1)
    assert isinstance(s, pd.Series)
    assert list(s.index) == ["CA", "NY", "TX", "WA"]
    assert b.spent.epsilon == 0.1
    parts["TX"].count(epsilon=0.2)  # TX now at 0.3
    assert b.spent.epsilon == 0.3
    parts.mean("x", epsilon=0.1)  # all parts +0.1: TX at 0.4
    assert b.spent.epsilon == 0.4


def test_partition_of_a_stable_frame_pays_max_times_stability():
    b = pq.Budget(epsilon=10)
    f = frame(b)
    grouped = f.groupby("x").agg(n="COUNT(*)")  # stability 2
    parts = grouped.partition("n", keys=list(range(5)))
    parts.count(epsilon=0.1)
    assert b.spent.epsilon == Fraction(2, 10)
    parts[1].count(epsilon=0.3)
    assert b.spent.epsilon == Fraction(2, 10) * 4


def test_nested_partitions():
    b = pq.Budget(epsilon=10)
    outer = frame(b).partition("state", keys=["CA", "NY"])
    inner = outer["CA"].partition("x", keys=list(range(20)))
    inner[0].count(epsilon=0.5)
    inner[4].count(epsilon=0.7)
    outer["NY"].count(epsilon=0.6)
    assert b.spent.epsilon == 0.7


def test_binary_operator_charges_both_sides_atomically():
    big, small = pq.Budget(epsilon=1), pq.Budget(epsilon=0.05)
    left, right = frame(big), frame(small)
    joined = left.concat(right)
    with pytest.raises(pq.BudgetExceededError) as err:
        joined.count(epsilon=0.1)
    assert big.spent.epsilon == 0 and small.spent.epsilon == 0
    assert "0.05" in str(err.value) or "remain" in str(err.value)
    joined.count(epsilon=0.05)
    assert big.spent.epsilon == 0.05 and small.spent.epsilon == 0.05


def test_join_where_one_side_budget_is_too_small_charges_neither():
    big, small = pq.Budget(epsilon=1), pq.Budget(epsilon=0.1)
    a = frame(big).groupby("state").agg(n="COUNT(*)")
    c = frame(small).groupby("state").agg(m="COUNT(*)")
    joined = a.join(c, on="state")  # unique on both sides: stability 1 to each grouped side
    # each grouped side has stability 2 to its budget: 0.1 * 2 = 0.2 > 0.1
    with pytest.raises(pq.BudgetExceededError):
        joined.count(epsilon=0.1)
    assert big.spent.is_zero and small.spent.is_zero


def test_refused_query_reads_no_data(monkeypatch):
    b = pq.Budget(epsilon=0.1)
    f = frame(b)
    from pinqpy.engines.pandas import executor as _pandas_executor

    def boom(*a, **k):
        raise AssertionError("data was read")

    monkeypatch.setattr(_pandas_executor.PandasExecutor, "relation", boom)
    with pytest.raises(pq.BudgetExceededError):
        f.count(epsilon=0.2)
    with pytest.raises(pq.PrivacyError, match="bounds"):
        f.sum("y", epsilon=0.01)
    with pytest.raises(pq.PinqSyntaxError):
        f.where("x > 1").mean("x * nosuch", 0.01)
    with pytest.raises(pq.PrivacyError, match="bound_contributions"):
        pq.PrivateFrame(pd.DataFrame({"u": [1]}), b, privacy_unit="u").count(0.01)
    assert b.spent.is_zero


def test_partition_state_unchanged_when_parent_refuses():
    b = pq.Budget(epsilon=0.5)
    parts = frame(b).partition("state", keys=["CA", "NY"])
    parts["CA"].count(epsilon=0.4)
    with pytest.raises(pq.BudgetExceededError):
        parts["NY"].count(epsilon=0.6)
    # NY's refused charge must not linger: 0.45 on NY now fits (max 0.45)
    parts["NY"].count(epsilon=0.45)
    assert b.spent.epsilon == 0.45


def test_gaussian_charge_spends_delta_and_needs_a_delta_budget():
    b = pq.Budget(epsilon=1, delta=1e-5)
    f = frame(b)
    f.count(epsilon=0.5, delta=1e-6)
    assert b.spent == pq.Cost(0.5, 1e-6)
    pure = pq.Budget(epsilon=1)
    with pytest.raises(pq.BudgetExceededError, match="delta"):
        frame(pure).count(epsilon=0.1, delta=1e-6)
    assert pure.spent.is_zero


def test_gaussian_on_stable_frame_pays_group_privacy_delta():
    b = pq.Budget(epsilon=1, delta=0.5)
    f = frame(b)
    f.concat(f).count(epsilon=0.1, delta=1e-6)
    assert b.spent.epsilon == Fraction(2, 10)
    # the tight price exceeds the requested delta but stays below 2·e^eps·delta
    assert 1e-6 < b.spent.delta <= 2 * math.exp(0.1) * 1e-6 * (1 + 1e-9)


def test_agents_directly_max_rule_with_stability():
    b = pq.Budget(epsilon=10)
    p = PartitionAgent({b: Fraction(3)})
    charge({PartAgent(p, "a"): Fraction(1)}, pq.Cost(1))
    charge({PartAgent(p, "b"): Fraction(2)}, pq.Cost(1))  # part b at 2
    assert b.spent.epsilon == 6
    charge({PartAgent(p, "a"): Fraction(1), PartAgent(p, "b"): Fraction(1)}, pq.Cost(1))
    # a at 2, b at 3: max 3 -> 9
    assert b.spent.epsilon == 9


@pytest.mark.parametrize("bad", [-1, 0, float("nan"), float("inf"), -0.0, "x", None])
def test_bad_epsilon_is_refused_and_charges_nothing(bad):
    b = pq.Budget(epsilon=1)
    with pytest.raises(pq.PinqError):
        frame(b).count(epsilon=bad)
    assert b.spent.is_zero


@pytest.mark.parametrize("bad", [-1, 0, float("nan"), float("inf")])
def test_bad_budget_epsilon(bad):
    with pytest.raises(pq.PinqError):
        pq.Budget(epsilon=bad)


def test_budget_repr_shows_no_data():
    b = pq.Budget(epsilon=1)
    frame(b).count(epsilon=0.25)
    assert repr(b) == "Budget(epsilon=1, spent=0.25, remaining=0.75)"


def test_cost_arithmetic_is_exact():
    total = pq.Cost()
    for _ in range(3):
        total = total + pq.Cost(0.1)
    assert total.epsilon == Fraction(3, 10)
    assert total.epsilon == 0.3


def test_asking_the_same_question_again_is_free_and_gives_the_same_answer():
    b = pq.Budget(epsilon=1)
    f = frame(b)
    first = f.where("x > 3").count(epsilon=0.1)
    again = f.where("x  >  3").count(epsilon=0.1)  # same question, spelt differently
    assert float(again) == float(first)
    assert b.spent.epsilon == 0.1
    f.where("x > 3").count(epsilon=0.2)  # a different epsilon is a different question
    assert b.spent.epsilon == Fraction(3, 10)
    assert len(b.charges) == 2


def test_cache_never_answers_new_data_from_old_data():
    b = pq.Budget(epsilon=1)
    df = pd.DataFrame({"x": range(10)})
    pq.PrivateFrame(df, b).count(epsilon=0.1)
    pq.PrivateFrame(df.copy(), b).count(epsilon=0.1)  # another table: charged again
    assert b.spent.epsilon == Fraction(2, 10)


def test_callables_are_never_cached(engine: str):
    b = pq.Budget(epsilon=1)
    f = frame(b, allow_callables=True)
    pred = lambda df: df.x > 3  # noqa: E731
    if engine != "pandas":
        # Only pandas runs Python callables; other engines refuse before charging.
        with pytest.raises(pq.PinqError, match="callable"):
            f.where(pred).count(epsilon=0.1)
        assert b.spent.epsilon == 0
        return
    f.where(pred).count(epsilon=0.1)
    f.where(pred).count(epsilon=0.1)
    assert b.spent.epsilon == Fraction(2, 10)


def test_partition_series_are_indexed_by_key_with_names():
    df = pd.DataFrame({"a": ["x", "y"] * 5, "b": [0, 1, 1, 0, 0] * 2})
    b = pq.Budget(epsilon=1)
    one = pq.PrivateFrame(df, b).partition("a", keys=["x", "y"])
    two = pq.PrivateFrame(df, b).partition(["a", "b"], keys=[("x", 0), ("y", 1)])
    with pq.testing.no_noise():
        s1 = one.count(epsilon=0.1)
        s2 = two.count(epsilon=0.1)
    assert s1.index.name == "a" and s1.loc["x"] == 5
    assert isinstance(s2.index, pd.MultiIndex) and list(s2.index.names) == ["a", "b"]
    assert s2.loc[("x", 0)] == 3 and s2.loc[("y", 1)] == 2
    assert list(s2.ci().index) == [("x", 0), ("y", 1)]
