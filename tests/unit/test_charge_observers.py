"""observe_charges: who watches sees every committed charge of its own context, exactly, and
nothing of another thread's; watching never changes or stops a charge."""

from __future__ import annotations

import threading
from fractions import Fraction

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.accounting.budget import observe_charges
from pinqpy.errors import BudgetExceededError


def frame(budget: pq.Budget) -> pq.PrivateFrame:
    df = pd.DataFrame({"age": [30, 40, 50, 60], "sex": [0, 1, 0, 1]})
    return pq.PrivateFrame(df, budget=budget, bounds={"age": (0, 100)}, keys={"sex": [0, 1]})


def test_each_charge_is_seen_once_per_budget_with_its_exact_usage():
    seen = []
    b = pq.Budget(epsilon=1)
    f = frame(b)
    with observe_charges(lambda budget, usage: seen.append((budget, usage.epsilon))):
        f.count(epsilon=0.1)
        f.where("age > 35").sum("age", epsilon=0.25)
    assert seen == [(b, Fraction(1, 10)), (b, Fraction(1, 4))]
    assert b.spent.epsilon == Fraction(7, 20)


def test_a_partition_charges_its_budget_once_for_all_parts():
    seen = []
    b = pq.Budget(epsilon=1)
    parts = frame(b).partition("sex")
    with observe_charges(lambda budget, usage: seen.append(usage.epsilon)):
        for key in (0, 1):
            parts[key].count(epsilon=0.1)
    # parallel composition: the second part costs nothing more
    assert seen == [Fraction(1, 10)]


def test_a_refused_charge_is_not_seen_and_outside_the_block_nothing_is():
    seen = []
    b = pq.Budget(epsilon=0.5)
    f = frame(b)
    with observe_charges(lambda budget, usage: seen.append(usage)), pytest.raises(
        BudgetExceededError
    ):
        f.count(epsilon=1)
    f.count(epsilon=0.1)
    assert seen == []


def test_a_refusal_names_the_budget_that_refused_it():
    named, unnamed = pq.Budget(epsilon=0.5, name="analyst:alice/people"), pq.Budget(0.5)
    for budget, name in ((named, "analyst:alice/people"), (unnamed, None)):
        with pytest.raises(BudgetExceededError) as refused:
            frame(budget).count(epsilon=1)
        assert refused.value.budget == name
        with pytest.raises(BudgetExceededError) as refused:  # the delta-less budget's refusal
            frame(budget).count(epsilon=0.1, delta=1e-6)
        assert refused.value.budget == name


def test_observers_nest_and_an_error_in_one_neither_stops_the_charge_nor_the_others():
    outer, inner = [], []

    def broken(budget, usage):
        raise RuntimeError("observer failed")

    b = pq.Budget(epsilon=1)
    f = frame(b)
    with observe_charges(lambda bb, u: outer.append(u.epsilon)):
        with observe_charges(broken), observe_charges(lambda bb, u: inner.append(u.epsilon)):
            f.count(epsilon=0.1)
        f.count(epsilon=0.2)
    assert outer == [Fraction(1, 10), Fraction(1, 5)]
    assert inner == [Fraction(1, 10)]
    assert b.spent.epsilon == Fraction(3, 10)


def test_another_threads_charges_are_not_seen():
    seen = []
    b = pq.Budget(epsilon=10)
    f = frame(b)
    started, release = threading.Event(), threading.Event()

    def elsewhere():
        started.wait()
        for i in range(5):
            f.where(f"age > {i}").count(epsilon=0.5)  # five questions, each charged
        release.set()

    t = threading.Thread(target=elsewhere)
    t.start()
    with observe_charges(lambda budget, usage: seen.append(usage.epsilon)):
        started.set()
        f.count(epsilon=0.1)
        release.wait(30)
    t.join()
    assert seen == [Fraction(1, 10)]
    assert b.spent.epsilon == Fraction(26, 10)


def test_a_zcdp_budget_is_seen_with_its_rho():
    seen = []
    b = pq.Budget(epsilon=1, delta=1e-6, accounting="zcdp")
    with observe_charges(lambda budget, usage: seen.append(usage.rho)):
        frame(b).count(epsilon=0.1)
    assert seen == [Fraction(1, 200)]  # (0.1)^2 / 2
