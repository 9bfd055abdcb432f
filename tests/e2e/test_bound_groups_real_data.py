"""User-level histograms with a bound on the groups per person (G = 3, k = 2), on real data."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd

import pinqpy as pq
from pinqpy.accounting.charges import usage_of
from pinqpy.noise.mechanisms import CountMechanism
from tests.conftest import data_csv

EDUC = list(range(1, 17))


def test_pums_dup_user_level_histogram_g3_k2(engine):
    """PUMS_dup: 1,000 people with 1 to 4 identical rows each. Each person is one education
    level, so G = 3 keeps it, and k = 2 keeps at most two of their rows."""
    dup = data_csv("PUMS_dup.csv")
    truth = dup.groupby(["pid", "educ"]).size().clip(upper=2).groupby(level=1).sum()
    budget = pq.Budget(epsilon=10)
    people = pq.PrivateFrame(dup, budget, privacy_unit="pid")
    bounded = people.bound_contributions(max_groups=3, max_rows_per_group=2, by="educ")
    assert bounded.stability == 6
    with pq.testing.seed(11):
        hist = bounded.partition("educ", keys=EDUC).count(epsilon=1)
    assert budget.spent.epsilon == 6  # G·k·epsilon
    for educ in EDUC:
        # Discrete Laplace of scale 1: |noise| < 12 with probability 1 - 1e-5 per key.
        assert abs(int(hist.loc[educ]) - int(truth.loc[educ])) < 12, educ


def test_pums_regions_each_keep_three_education_levels(engine):
    """PUMS 5% extract, with the PUMA (a region of about 100,000 people) as the unit: every
    region has 6 to 16 education levels, so G = 3 binds. Under zCDP the histogram costs
    G·k²·rho, the L2 sensitivity sqrt(3)·2, not (3·2)²·rho."""
    pums = data_csv("PUMS5extract10000.csv")
    # Per region, each education level kept with probability 3/levels, at most 2 rows of it.
    clipped = pums.groupby(["puma", "educ"]).size().clip(upper=2)
    expected = float(clipped.groupby(level=0).apply(lambda s: 3 * s.mean()).sum())  # 1,174.0
    budget = pq.Budget(epsilon=5, delta=1e-6, accounting="zcdp")
    regions = pq.PrivateFrame(pums[["puma", "educ", "income"]], budget, privacy_unit="puma")
    bounded = regions.bound_contributions(max_groups=3, max_rows_per_group=2, by="educ")
    eps, delta = Fraction(1), Fraction(1, 10**7)
    with pq.testing.seed(12):
        hist = bounded.partition("educ", keys=EDUC).count(eps, delta=delta)
    rho1 = usage_of(CountMechanism(eps, delta=delta).charge, 1).rho
    assert budget._spent.rho == 3 * 2 * 2 * rho1
    # The random choice has sd 10.6 and the noise of the sum of 16 counts about 19.
    assert abs(float(pd.Series(hist).sum()) - expected) < 110
    with pq.testing.no_noise(), pq.testing.seed(13):
        exact = bounded.partition("educ", keys=EDUC).count(epsilon=0.01)
    assert abs(int(exact.sum()) - expected) < 60
    assert (exact <= 233 * 2).all()
