"""How pq.Marginals fits its model (pinqpy.results.pgm): the start and the stop.

The fit is a projection of the noisy counts onto tables that agree with each other. The true
tables are such tables, so a fit that reaches the projection is no farther from them than the
noisy counts, in the measurements' own norm (a projection onto a convex set moves no point
away from a point of the set). On the Eurostat LFS sample, whose large counts and structural
zeros are far from the uniform start, mbi's fixed 1,000 steps stopped short of that.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import pinqpy as pq
from pinqpy.results import pgm
from tests.conftest import data_csv

pytest.importorskip("mbi")

COLUMNS = ["SEX", "AGE", "HWUSUAL", "ILOSTAT"]
KEYS = {"SEX": [1, 2], "ILOSTAT": [1, 2, 3, 9]}
# A NULL cell for the two columns that have NULLs: every row is in every marginal, so the
# true tables agree with each other.
CUTS = {"AGE": [20, 40, 60, None], "HWUSUAL": [1, 20, 40, None]}


def test_one_way_shares_weight_each_sum_by_its_variance() -> None:
    sizes = {"a": 2, "b": 2}
    measurements = [
        (("a", "b"), np.array([10.0, 30.0, 50.0, 10.0]), 2.0),  # a-sums 40, 60: variance 8
        (("a",), np.array([98.0, 2.0]), 1.0),  # variance 1
    ]
    shares = pgm.one_way_shares(sizes, measurements)
    a = (np.array([40.0, 60.0]) / 8 + np.array([98.0, 2.0])) / (1 / 8 + 1)
    assert np.allclose(shares["a"], (a + 1) / (a + 1).sum())
    b = np.array([60.0, 40.0])  # b is measured once: its sums, plus one row per cell
    assert np.allclose(shares["b"], (b + 1) / (b + 1).sum())
    clipped = pgm.one_way_shares({"a": 2}, [(("a",), np.array([-5.0, 9.0]), 1.0)])
    assert np.allclose(clipped["a"], [1 / 11, 10 / 11])


def test_consistent_tables_are_closer_than_the_noisy_ones() -> None:
    df = data_csv("eurostat_lfs_fr_4cols.csv")
    pairs = list(itertools.combinations(COLUMNS, 2))
    frame = pq.PrivateFrame(df, pq.Budget(10**6), keys=KEYS)
    with pq.testing.no_noise():
        truth = frame.marginals(pairs, epsilon=1, cuts=CUTS).measurements
    for seed in range(2):
        f = pq.PrivateFrame(df, pq.Budget(10, 1e-6, accounting="zcdp"), keys=KEYS)
        with pq.testing.seed(seed):
            m = f.marginals(pairs, rho=0.1 / len(pairs), cuts=CUTS)
        exact = np.concatenate([np.asarray(truth[p], float) for p in pairs])
        noisy = np.concatenate([np.asarray(m.measurements[p], float) for p in pairs])
        fitted = np.concatenate([m.table(p)["count"].to_numpy() for p in pairs])
        # Every marginal has the same noise, so the norm is the plain L2 norm.
        assert np.linalg.norm(fitted - exact) <= np.linalg.norm(noisy - exact)
