"""Budgets in each accounting model: pure, approx (basic composition) and zCDP."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.accounting.models import rho_for, zcdp_epsilon


def frame(budget: pq.Budget) -> pq.PrivateFrame:
    df = pd.DataFrame({"k": ["a", "b", "c"] * 10, "x": range(30)})
    return pq.PrivateFrame(df, budget, bounds={"x": (0, 100)})


def test_accounting_names_and_bad_choice():
    assert pq.Budget(epsilon=1).accounting == "approx"
    assert pq.Budget(epsilon=1, accounting="pure").accounting == "pure"
    with pytest.raises(pq.PinqError, match="zcdp"):
        pq.Budget(epsilon=1, accounting="renyi")
    with pytest.raises(pq.PinqError):
        pq.Budget(epsilon=1, delta=1e-6, accounting="pure")
    with pytest.raises(pq.PinqError):
        pq.Budget(epsilon=1, accounting="zcdp")  # zCDP converts at a delta > 0


def test_pure_budget_refuses_gaussian_charges():
    b = pq.Budget(epsilon=1, accounting="pure")
    with pytest.raises(pq.BudgetExceededError):
        frame(b).count(epsilon=0.1, delta=1e-9)
    assert b.spent.is_zero
    frame(b).count(epsilon=0.1)
    assert b.spent == pq.Cost(0.1)


def test_zcdp_composes_gaussians_as_rho_and_reports_epsilon_delta():
    # each Gaussian below has rho ~ 0.012; a (3, 1e-6) budget holds rho ~ 0.14
    b = pq.Budget(epsilon=3, delta=1e-6, accounting="zcdp")
    f = frame(b)
    rhos = []
    for i in range(5):
        f.where(f"x >= {i}").count(epsilon=0.5, delta=1e-7)
        rhos.append(b._spent.rho)
    # five equal Gaussian charges: rho adds linearly
    assert rhos[4] == 5 * rhos[0]
    spent = b.spent
    assert spent.delta == Fraction(1, 10**6)
    assert spent.epsilon == zcdp_epsilon(rhos[4], Fraction(1, 10**6))
    assert spent.epsilon <= 3
    # basic composition would have charged 2.5 epsilon for the same five queries
    basic = pq.Budget(epsilon=10, delta=1e-5)
    g = frame(basic)
    for i in range(5):
        g.where(f"x >= {i}").count(epsilon=0.5, delta=1e-7)
    assert basic.spent.epsilon == 2.5 > spent.epsilon


def test_zcdp_refuses_when_rho_budget_is_exhausted_and_changes_nothing():
    b = pq.Budget(epsilon=0.5, delta=1e-6, accounting="zcdp")
    f = frame(b)
    i = 0
    with pytest.raises(pq.BudgetExceededError):
        while True:
            f.where(f"x >= {i}").count(epsilon=0.2, delta=1e-7)
            i += 1
    before = b._spent
    with pytest.raises(pq.BudgetExceededError):
        f.where("x >= 99").count(epsilon=0.2, delta=1e-7)
    assert b._spent == before
    assert b._spent.rho <= rho_for(Fraction(1, 2), Fraction(1, 10**6))


@pytest.mark.parametrize("model", ["pure", "approx", "zcdp"])
def test_partition_pays_the_maximum_in_every_model(model):
    delta = 1e-6 if model == "zcdp" else 0
    b = pq.Budget(epsilon=10, delta=delta, accounting=model)
    parts = frame(b).partition("k", keys=["a", "b", "c"])
    parts["a"].count(epsilon=0.3)
    parts["b"].count(epsilon=0.5)
    reference = pq.Budget(epsilon=10, delta=delta, accounting=model)
    frame(reference).count(epsilon=0.5)
    assert b._spent == reference._spent
    assert b.spent == reference.spent


def test_zcdp_group_privacy_scales_rho_by_k_squared():
    b = pq.Budget(epsilon=10, delta=1e-6, accounting="zcdp")
    f = frame(b)
    f.count(epsilon=0.5, delta=1e-7)
    one = b._spent.rho
    b2 = pq.Budget(epsilon=10, delta=1e-6, accounting="zcdp")
    g = frame(b2)
    g.concat(g).count(epsilon=0.5, delta=1e-7)
    assert b2._spent.rho == 4 * one


def test_zcdp_refuses_key_selection_which_has_no_rho():
    b = pq.Budget(epsilon=10, delta=1e-3, accounting="zcdp")
    with pytest.raises(pq.PrivacyError, match="approx"):
        frame(b).select_keys("k", epsilon=1, delta=1e-6)
    assert b._spent.is_zero
