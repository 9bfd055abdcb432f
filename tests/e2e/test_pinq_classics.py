"""PINQ's classic programs (McSherry 2009), end to end, with exact charges."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq

# Engine-independent: every test runs on each engine (see the `engine` fixture).
pytestmark = pytest.mark.usefixtures("engine")


@pytest.fixture
def edges() -> pd.DataFrame:
    rng = np.random.default_rng(2009)
    return pd.DataFrame(
        {"src": rng.integers(0, 1000, 10_000), "dst": rng.integers(0, 1000, 10_000)}
    )


def test_degree_histogram_charges_exactly_point_two(edges):
    budget = pq.Budget(epsilon=1)
    graph = pq.PrivateFrame(edges, budget)
    degrees = graph.groupby("src").agg(degree="COUNT(*)")
    assert degrees.stability == 2
    parts = degrees.partition("degree", keys=list(range(20)))
    hist = parts.count(epsilon=0.1)
    assert budget.spent.epsilon == Fraction(1, 5)
    assert list(hist.index) == list(range(20))
    assert isinstance(hist, pd.Series)


def test_degree_histogram_is_accurate_at_large_epsilon(edges):
    budget = pq.Budget(epsilon=100)
    degrees = pq.PrivateFrame(edges, budget).groupby("src").agg(degree="COUNT(*)")
    with pq.testing.seed(11):
        hist = degrees.partition("degree", keys=list(range(20))).count(epsilon=50)
    true = edges.groupby("src").size().value_counts().reindex(range(20), fill_value=0)
    # Laplace scale 1/50 per bin: 20 bins all within 0.5 has probability > 1 - 20·e^-25.
    assert np.all(np.abs(hist.to_numpy() - true.to_numpy()) < 0.5)


def _nearest_centre_expr(centres: np.ndarray) -> str:
    dist = [
        " + ".join(f"POWER(x{i} - ({float(c[i])!r}), 2)" for i in range(centres.shape[1]))
        for c in centres
    ]
    d0, d1, d2 = (f"({d})" for d in dist)
    return f"CASE WHEN {d0} <= {d1} AND {d0} <= {d2} THEN 0 WHEN {d1} <= {d2} THEN 1 ELSE 2 END"


def test_kmeans_charges_exactly_four_and_finds_the_clusters(engine):
    rng = np.random.default_rng(7)
    dims, per_cluster = 8, 10_000
    true_means = np.array([[4.0] * dims, [-4.0] * dims, [4.0] * 4 + [-4.0] * 4])
    pts = np.vstack([rng.normal(m, 1.0, size=(per_cluster, dims)) for m in true_means])
    df = pd.DataFrame(pts, columns=[f"x{i}" for i in range(dims)])
    bounds = {f"x{i}": (-10.0, 10.0) for i in range(dims)}
    budget = pq.Budget(epsilon=4.0)
    points = pq.PrivateFrame(df, budget, bounds=bounds)

    # Spark runs one job per mean (seconds each): two rounds there, at a larger epsilon per
    # mean, so the whole budget is still spent. The clusters are 16 apart and the guess about
    # 4 off, so the first round already labels every point right.
    rounds = 2 if engine == "spark" else 5
    epsilon = 4 / (rounds * dims)  # 0.25 or 0.1
    centres = true_means + rng.normal(0, 1.5, size=true_means.shape)  # a rough public guess
    with pq.testing.seed(5):
        for _ in range(rounds):
            labelled = points.assign(cluster=_nearest_centre_expr(centres))
            parts = labelled.partition("cluster", keys=[0, 1, 2])
            centres = np.column_stack(
                [parts.mean(f"x{i}", epsilon=epsilon).to_numpy() for i in range(dims)]
            )
    assert budget.spent.epsilon == 4
    assert budget.remaining.epsilon == 0
    # Each final coordinate is mid + S'/N' with S' noise Laplace(200) and N' noise Laplace(20)
    # at epsilon 0.1 (less at 0.25) on n = 10,000 points near 4 in magnitude, so its noise
    # error is about 0.02·(L1 - 0.4·L2) for standard Laplaces L1, L2, whose tail is
    # P(|L1 - 0.4·L2| > t) = (e^-t - 0.16·e^-2.5t) / 0.84. A family-wise failure rate of
    # 1e-6 over the 24 coordinates needs t = 17.1, i.e. 0.34; the points' own sample means
    # sit within 5 standard errors (0.05) of the true means. Hence 0.4.
    assert np.max(np.abs(centres - true_means)) < 0.4
