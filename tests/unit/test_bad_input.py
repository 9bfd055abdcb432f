"""Bad input gets a clear pinqpy error, and nothing is charged."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import pinqpy as pq


@pytest.fixture
def setup():
    budget = pq.Budget(epsilon=1)
    df = pd.DataFrame({"age": [20, 30, 40], "state": ["CA", "NY", "CA"], "x": [1.0, 2.0, 3.0]})
    return budget, pq.PrivateFrame(df, budget, bounds={"age": (0, 100)})


@pytest.mark.parametrize("eps", [-0.1, 0, 0.0, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("agg", ["count", "sum", "mean", "median", "quantile", "argmax"])
def test_bad_epsilon(setup, eps, agg):
    budget, f = setup
    calls = {
        "count": lambda: f.count(epsilon=eps),
        "sum": lambda: f.sum("age", epsilon=eps),
        "mean": lambda: f.mean("age", epsilon=eps),
        "median": lambda: f.median("age", epsilon=eps),
        "quantile": lambda: f.quantile("age", 0.3, epsilon=eps),
        "argmax": lambda: f.argmax("state", ["CA", "NY"], epsilon=eps),
    }
    with pytest.raises(pq.PinqError, match="epsilon"):
        calls[agg]()
    assert budget.spent.is_zero


def test_bounds_lo_above_hi(setup):
    budget, f = setup
    with pytest.raises(pq.PinqError, match="lo > hi"):
        f.sum("age", epsilon=0.1, bounds=(10, 0))
    with pytest.raises(pq.PinqError, match="lo > hi"):
        pq.PrivateFrame(pd.DataFrame({"a": [1]}), budget, bounds={"a": (5, 1)})
    with pytest.raises(pq.PinqError):
        f.mean("age", epsilon=0.1, bounds=(0, math.inf))
    assert budget.spent.is_zero


def test_unknown_column_has_caret(setup):
    budget, f = setup
    with pytest.raises(pq.PinqSyntaxError) as err:
        f.where("agee >= 18")
    assert err.value.line == 1 and err.value.column == 1
    assert "^" in str(err.value)
    with pytest.raises(pq.PinqSyntaxError) as err:
        f.where("age >= 18 AND stat = 'CA'")
    assert err.value.column == 15
    with pytest.raises(pq.PinqError):
        f.select("nope")
    with pytest.raises(pq.PinqError):
        f.sum("nope", epsilon=0.1)
    with pytest.raises(pq.PinqError):
        f.partition("nope", keys=[1])
    assert budget.spent.is_zero


def test_keys_of_the_wrong_type(setup):
    budget, f = setup
    with pytest.raises(pq.PinqError, match="key"):
        f.partition("state", keys=[1, 2])
    with pytest.raises(pq.PinqError, match="key"):
        f.partition("age", keys=["20", "30"])
    with pytest.raises(pq.PinqError):
        f.partition(["age", "state"], keys=[20, 30])
    with pytest.raises(pq.PinqError):
        f.partition("state", keys="CA")
    assert budget.spent.is_zero


def test_exhausted_budget(setup):
    budget, f = setup
    f.count(epsilon=1)
    with pytest.raises(pq.BudgetExceededError, match="remain"):
        f.count(epsilon=0.01)
    assert budget.spent.epsilon == 1


def test_callables_refused_when_disallowed():
    budget = pq.Budget(epsilon=1)
    f = pq.PrivateFrame(pd.DataFrame({"a": [1, 2]}), budget, allow_callables=False)
    with pytest.raises(pq.PrivacyError, match="allow_callables"):
        f.where(lambda df: df.a > 1)
    with pytest.raises(pq.PrivacyError, match="allow_callables"):
        f.assign(b=lambda df: df.a * 2)
    f.where("a > 1")  # expressions still work
    assert budget.spent.is_zero


def test_callables_work_when_allowed():
    budget = pq.Budget(epsilon=10)
    f = pq.PrivateFrame(pd.DataFrame({"a": list(range(100))}), budget, allow_callables=True)
    with pq.testing.no_noise():
        assert f.where(lambda df: df.a >= 50).count(epsilon=1) == 50
        assert f.assign(b=lambda df: df.a * 2).sum("b", epsilon=1, bounds=(0, 1000)) == 9900


def test_other_bad_arguments(setup):
    budget, f = setup
    with pytest.raises(pq.PinqError):
        f.explode("state", max_items=0)
    with pytest.raises(pq.PinqError):
        f.bound_contributions(max_rows=2)  # row-level frame
    with pytest.raises(pq.PinqError):
        f.quantile("age", 1.5, epsilon=0.1)
    with pytest.raises(pq.PinqError):
        f.join(f, on="state")  # not unique, no bounds
    with pytest.raises(pq.PinqError):
        f.concat(f.select("age"))
    with pytest.raises(pq.PinqError):
        f.count(epsilon=0.1, delta=2)
    with pytest.raises(pq.PinqError):
        pq.PrivateFrame([1, 2, 3], budget)  # type: ignore[arg-type]
    with pytest.raises(pq.PinqError):
        pq.PrivateFrame(pd.DataFrame({"a": [1]}), budget, privacy_unit="nope")
    assert budget.spent.is_zero


def test_callables_are_refused_by_default_before_the_charge():
    budget = pq.Budget(epsilon=10)
    f = pq.PrivateFrame(pd.DataFrame({"a": list(range(100))}), budget)
    with pytest.raises(pq.PrivacyError, match="allow_callables=True"):
        f.where(lambda df: df.a >= 50)
    with pytest.raises(pq.PrivacyError, match="allow_callables=True"):
        f.sum(lambda df: df.a, epsilon=1, bounds=(0, 100))
    assert budget.spent.epsilon == 0


def test_public_table_with_nullable_integer_null_key_joins(engine: str) -> None:
    """A nullable-integer public key holding <NA> is one NULL key, as every engine matches
    it; nothing raises outside pinqpy."""
    budget = pq.Budget(epsilon=10)
    pub = pd.DataFrame({"k": pd.array([1, pd.NA, 3], dtype="Int64"), "lab": ["a", "b", "c"]})
    f = pq.PrivateFrame(pd.DataFrame({"k": pd.array([1, 2, 3, None], dtype="Int64")}), budget)
    joined = f.join(pub, on="k")
    assert joined.stability == 1
    with pq.testing.no_noise():
        assert int(joined.count(epsilon=1)) == 3  # 1, 3 and the NULL key, on every engine
