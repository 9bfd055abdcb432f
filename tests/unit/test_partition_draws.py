"""Partitions of a frame whose rows are chosen afresh on every read (``bound_contributions``,
a bounded join): the largest-part rule holds within one query, not across queries."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.plan.stability import draws_afresh


@pytest.fixture
def visits() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame({"user": rng.integers(0, 50, 400), "state": rng.choice(["CA", "NY"], 400)})


def _frame(df: pd.DataFrame, budget: pq.Budget) -> pq.PrivateFrame:
    return pq.PrivateFrame(df, budget, privacy_unit="user", keys={"state": ["CA", "NY"]})


def test_parts_of_a_bounded_frame_asked_in_separate_queries_each_pay(visits):
    # A user's 3 kept rows can all be in CA at one read and all in NY at the next: two
    # queries cost 3·0.25 + 3·0.5, not 3·max(0.25, 0.5).
    budget = pq.Budget(epsilon=100)
    parts = _frame(visits, budget).bound_contributions(3).partition("state")
    parts["CA"].count(epsilon=0.25)
    assert budget.spent.epsilon == pq.Cost(epsilon=0.75).epsilon
    parts["NY"].count(epsilon=0.5)
    assert budget.spent.epsilon == pq.Cost(epsilon=2.25).epsilon
    parts["NY"].count(epsilon=0.5)  # the same question: the cached answer, free
    assert budget.spent.epsilon == pq.Cost(epsilon=2.25).epsilon


def test_one_query_over_every_part_still_pays_once(visits):
    budget = pq.Budget(epsilon=100)
    parts = _frame(visits, budget).bound_contributions(3).partition("state")
    parts.count(epsilon=0.125)
    parts["CA"].concat(parts["NY"]).count(epsilon=0.25)  # one read of both parts
    assert budget.spent.epsilon == pq.Cost(epsilon=3 * 0.125 + 3 * 0.25).epsilon


def test_a_deterministic_parent_keeps_the_largest_part_rule(visits):
    budget = pq.Budget(epsilon=100)
    parts = pq.PrivateFrame(visits, budget, keys={"state": ["CA", "NY"]}).partition("state")
    parts["CA"].count(epsilon=0.25)
    parts["NY"].count(epsilon=0.5)
    assert budget.spent.epsilon == pq.Cost(epsilon=0.5).epsilon


def test_which_plans_draw_afresh(visits):
    budget = pq.Budget(epsilon=100)
    people = _frame(visits, budget)
    assert not draws_afresh(people.where("state = 'CA'")._plan)
    assert draws_afresh(people.bound_contributions(2).where("state = 'CA'")._plan)
    g = people.groupby("user").agg(n="COUNT(*)")
    assert not draws_afresh(g.join(g, on="user")._plan)
    assert draws_afresh(people.join(people, on="user", max_rows_per_key=(1, 1))._plan)
    # a part of a partition of a bounded frame: its parent draws afresh
    part = people.bound_contributions(2).partition("state")["CA"]
    assert draws_afresh(part._plan)
