"""Calibration: with a fixed seed, the noise each mechanism adds has its stated law.

Every tolerance is derived from the sampling distribution of the statistic it bounds and set
at 5 standard errors (a two-sided normal tail of 5.7e-7 per assertion), never widened to pass.
The seeds are fixed, so the tests are deterministic; the tolerances make them robust to any
seed rather than tuned to one.

Coverage tests check that the documented confidence intervals cover the exact value at least
as often as claimed (exactly as often for Laplace/Gaussian noise, where the interval is exact).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from pinqpy import testing
from pinqpy._mechanisms import (
    ArgmaxMechanism,
    CountMechanism,
    MeanMechanism,
    QuantileMechanism,
    SumMechanism,
    VarianceMechanism,
)
from pinqpy._noise import SecureSource, SeededSource

N = 200_000
Z = 5.0  # standard errors allowed


@pytest.fixture(autouse=True)
def _clean_state():
    testing.reset()
    yield
    testing.reset()


def check_laplace(noise: np.ndarray, b: float) -> None:
    """Laplace(b): |X| is exponential with mean b and sd b, so mean|X| has SE b/sqrt(N).

    Also E[X] = 0 with sd(X) = b·sqrt(2) -> SE b·sqrt(2/N); and E[X²] = 2b² with
    Var(X²) = E[X⁴] - 4b⁴ = 24b⁴ - 4b⁴ = 20b⁴ -> SE b²·sqrt(20/N).
    """
    n = noise.size
    assert abs(np.abs(noise).mean() - b) < Z * b / math.sqrt(n)
    assert abs(noise.mean()) < Z * b * math.sqrt(2 / n)
    assert abs((noise**2).mean() - 2 * b * b) < Z * b * b * math.sqrt(20 / n)


def check_gaussian(noise: np.ndarray, sigma: float) -> None:
    """N(0, σ²): the sample sd has SE ≈ σ/sqrt(2(N-1)) (delta method on Var(s²) = 2σ⁴/(N-1));
    the mean has SE σ/sqrt(N); E|X| = σ·sqrt(2/π) with Var|X| = σ²(1 - 2/π)."""
    n = noise.size
    assert abs(noise.std(ddof=1) - sigma) < Z * sigma / math.sqrt(2 * (n - 1))
    assert abs(noise.mean()) < Z * sigma / math.sqrt(n)
    mad = math.sqrt(2 / math.pi)
    assert abs(np.abs(noise).mean() - sigma * mad) < Z * sigma * math.sqrt((1 - mad**2) / n)


def check_frequencies(draws: np.ndarray, probs: np.ndarray) -> None:
    """Each category's frequency is binomial: SE sqrt(p(1-p)/N); 5 SE per category keeps the
    family-wise false-alarm rate below m·5.7e-7."""
    n = draws.size
    freq = np.bincount(draws, minlength=probs.size) / n
    se = np.sqrt(probs * (1 - probs) / n)
    assert (np.abs(freq - probs) <= Z * se + 1e-12).all()


def check_coverage(covered: np.ndarray, level: float, *, conservative: bool) -> None:
    """The covering fraction of T independent intervals is binomial(T, level)/T when the
    interval is exact (SE sqrt(level(1-level)/T)); a conservative interval must not fall
    below level by more than 5 SE."""
    t = covered.size
    se = math.sqrt(level * (1 - level) / t)
    rate = covered.mean()
    assert rate >= level - Z * se
    if not conservative:
        assert rate <= level + Z * se


# -- the sources ----------------------------------------------------------------------------
@pytest.mark.parametrize("source", [SeededSource(20), SecureSource()], ids=repr)
def test_source_distributions(source):
    u = source.uniform(N)
    # Uniform(0,1): mean 1/2 with SE sqrt(1/12/N); variance 1/12 with Var(U²-ish) -> use the
    # mean of (U - 1/2)² = 1/12, whose per-sample variance is 1/80 - 1/144 = 1/180.
    assert abs(u.mean() - 0.5) < Z * math.sqrt(1 / 12 / N)
    assert abs(((u - 0.5) ** 2).mean() - 1 / 12) < Z * math.sqrt(1 / 180 / N)
    check_laplace(source.laplace(N, 3.0), 3.0)
    check_gaussian(source.gaussian(N, 2.5), 2.5)
    g = source.gumbel(N)
    # Standard Gumbel: mean = Euler's gamma, variance π²/6 -> SE π/sqrt(6N).
    assert abs(g.mean() - 0.5772156649015329) < Z * math.pi / math.sqrt(6 * N)


def test_laplace_quantiles_match_the_cdf():
    # P(X <= x) for Laplace(b) at several points; each empirical CDF value is binomial.
    b = 2.0
    x = SeededSource(4).laplace(N, b)
    for point in (-5.0, -1.0, 0.0, 0.7, 4.0):
        p = 0.5 * math.exp(point / b) if point < 0 else 1 - 0.5 * math.exp(-point / b)
        assert abs((x <= point).mean() - p) < Z * math.sqrt(p * (1 - p) / N)


# -- additive mechanisms --------------------------------------------------------------------
def test_count_laplace_calibration():
    mech = CountMechanism(0.25)
    assert mech.noise_scale == 4.0
    with testing.seed(1):
        noisy, _ = mech.release(np.full(N, 100.0))
    check_laplace(noisy - 100.0, mech.noise_scale)


def test_count_gaussian_calibration():
    mech = CountMechanism(0.5, delta=1e-6)
    with testing.seed(2):
        noisy, _ = mech.release(np.zeros(N))
    check_gaussian(noisy, mech.noise_scale)


def test_sum_calibration():
    mech = SumMechanism(0.5, -30, 20)
    assert mech.noise_scale == 60.0  # sensitivity max(|lo|, |hi|) = 30, over 0.5
    with testing.seed(3):
        noisy, _ = mech.release(np.full(N, 7.0))
    check_laplace(noisy - 7.0, 60.0)
    gauss = SumMechanism(1.0, 0, 10, delta=1e-5)
    with testing.seed(4):
        noisy, _ = gauss.release(np.zeros(N))
    check_gaussian(noisy, gauss.noise_scale)


def test_mean_measurement_calibration():
    mech = MeanMechanism(0.2, 0, 100)
    # Half the budget each: centred sum ~ Laplace(50/0.1), count ~ Laplace(1/0.1).
    assert mech.sum_noise.scale == 500.0 and mech.count_noise.scale == 10.0
    sums, counts = np.full(N, 4000.0), np.full(N, 80.0)
    with testing.seed(5):
        s, n = mech._measure(sums, counts)
    check_laplace(s - (sums - 50 * counts), 500.0)
    check_laplace(n - counts, 10.0)
    gauss = MeanMechanism(1.0, -1, 1, delta=1e-6)
    with testing.seed(6):
        s, n = gauss._measure(np.zeros(N), np.full(N, 10.0))
    check_gaussian(s, gauss.sum_noise.scale)
    check_gaussian(n - 10.0, gauss.count_noise.scale)


def test_variance_measurement_scales():
    mech = VarianceMechanism(0.3, 0, 10)
    # Thirds of 0.3: count 1/0.1, centred sum 5/0.1, shifted squares (25/2)/0.1.
    assert (mech.count_noise.scale, mech.sum_noise.scale, mech.sq_noise.scale) == (
        10.0,
        50.0,
        125.0,
    )


# -- selections -----------------------------------------------------------------------------
@pytest.mark.parametrize("q", [0.1, 0.5, 0.9])
def test_quantile_selection_frequencies(q: float):
    mech = QuantileMechanism(0.6, q, 0, 10, ci_share=0)
    data = np.array([1, 2, 2, 3, 5, 8, 8, 9, 10, 4, 6])
    eq, gap = mech.bin_counts(data)
    probs = mech._selection_probabilities(eq, gap)[0]
    with testing.seed(7):
        _, acc = mech.release(np.repeat(eq, N, axis=0), np.repeat(gap, N, axis=0))
    check_frequencies(acc.indices, probs)


def test_quantile_histogram_noise_calibration():
    mech = QuantileMechanism(1.0, 0.5, 0, 100)
    assert mech.ci_noise.scale == 4.0  # a quarter of epsilon, sensitivity 1
    eq, gap = mech.bin_counts(np.arange(0, 101, 3))
    keys = 20_000
    exact = mech._scores_from_bins(mech._coarse_bins(eq, gap).astype(float))[0]
    with testing.seed(8):
        noisy = mech._cut_scores(np.repeat(eq, keys, axis=0), np.repeat(gap, keys, axis=0))
    # The middle cut's noise is 0.5·(sum of 32 Laplaces below) - 0.5·(sum of 32 above):
    # variance 0.25·64·2b² = 32b². For a sample sd over K draws, Var(s²) ≈ σ⁴(2 + κ)/K with κ
    # the excess kurtosis (3 for one Laplace, 3/64 for an equally weighted sum of 64), so
    # SE(s) ≈ σ·sqrt((2 + κ)/(4K)).
    mid = len(mech.cuts) // 2
    err = noisy[:, mid] - exact[mid]
    sd = math.sqrt(0.25 * 64 * 2 * 4.0**2)
    se = sd * math.sqrt((2 + 3 / 64) / (4 * keys))
    assert abs(err.std(ddof=1) - sd) < Z * se
    assert abs(err.mean()) < Z * sd / math.sqrt(keys)


def test_argmax_selection_frequencies():
    eps = 0.4
    mech = ArgmaxMechanism(eps, 4)
    counts = np.array([10.0, 12.0, 9.0, 12.5])
    probs = mech._selection_probabilities(counts)[0]
    with testing.seed(9):
        idx, _ = mech.release(np.repeat(counts[None, :], N, axis=0))
    check_frequencies(idx, probs)


# -- confidence-interval coverage -----------------------------------------------------------
TRIALS = 20_000


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95])
@pytest.mark.parametrize("delta", [None, 1e-6])
def test_count_ci_coverage_is_exact(level: float, delta: float | None):
    mech = CountMechanism(0.3, delta=delta)
    with testing.seed(10):
        _, acc = mech.release(np.full(TRIALS, 250.0))
    low, high = acc.interval(level)
    check_coverage((low <= 250.0) & (high >= 250.0), level, conservative=False)
    # The stated pre-data accuracy is the same half-width.
    assert np.allclose(high - low, 2 * mech.accuracy(level))


def test_sum_ci_coverage_is_exact():
    mech = SumMechanism(0.1, 0, 50)
    with testing.seed(11):
        _, acc = mech.release(np.full(TRIALS, 1234.0))
    low, high = acc.interval(0.95)
    check_coverage((low <= 1234.0) & (high >= 1234.0), 0.95, conservative=False)


@pytest.mark.parametrize(("n", "true_mean"), [(3, 90.0), (40, 25.0), (5000, 61.5)])
@pytest.mark.parametrize("delta", [None, 1e-6])
def test_mean_ci_coverage(n: int, true_mean: float, delta: float | None):
    mech = MeanMechanism(0.5, 0, 100, delta=delta)
    with testing.seed(12):
        values, acc = mech.release(np.full(TRIALS, true_mean * n), np.full(TRIALS, float(n)))
    low, high = acc.interval(0.95)
    assert ((low <= values) & (values <= high)).all()
    assert ((low >= 0) & (high <= 100)).all()
    check_coverage((low <= true_mean) & (true_mean <= high), 0.95, conservative=True)


def test_variance_ci_coverage():
    rng = np.random.default_rng(0)
    data = rng.uniform(0, 10, size=400)
    mech = VarianceMechanism(1.0, 0, 10)
    with testing.seed(13):
        values, acc = mech.release(
            np.full(TRIALS, data.sum()), np.full(TRIALS, (data**2).sum()), np.full(TRIALS, 400.0)
        )
    low, high = acc.interval(0.95)
    assert ((low <= values) & (values <= high)).all()
    truth = data.var(ddof=1)
    check_coverage((low <= truth) & (truth <= high), 0.95, conservative=True)


def best_candidates(values: np.ndarray, cands: np.ndarray, q: float) -> np.ndarray:
    v = values[None, :]
    c = cands[:, None]
    u = -np.abs((1 - q) * (v < c).sum(1) - q * (v > c).sum(1))
    return np.flatnonzero(u == u.max())


@pytest.mark.parametrize("q", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("n", [30, 2000])
def test_quantile_ci_coverage(q: float, n: int):
    rng = np.random.default_rng(int(q * 10) + n)
    data = np.clip(rng.normal(40, 15, size=n), 0, 100)
    mech = QuantileMechanism(1.0, q, 0, 100)
    eq, gap = mech.bin_counts(data)
    best = mech.candidates[best_candidates(data, mech.candidates, q)]
    keys = 4000
    with testing.seed(14):
        values, acc = mech.release(np.repeat(eq, keys, axis=0), np.repeat(gap, keys, axis=0))
    low, high = acc.interval(0.95)
    assert ((low <= values) & (values <= high)).all()
    # Covered when the interval contains a best-scoring candidate (see QuantileAccuracy).
    covered = (low[:, None] <= best[None, :]) & (best[None, :] <= high[:, None])
    check_coverage(covered.any(axis=1), 0.95, conservative=True)
    # And in particular the exact quantile the mechanism releases without noise.
    with testing.no_noise():
        exact, _ = mech.release(eq, gap)
    check_coverage((low <= exact[0]) & (exact[0] <= high), 0.95, conservative=True)


def test_argmax_tolerance_coverage():
    eps = 0.5
    mech = ArgmaxMechanism(eps, 6)
    counts = np.array([20.0, 19.0, 18.0, 10.0, 20.0, 5.0])
    with testing.seed(15):
        idx, acc = mech.release(np.repeat(counts[None, :], TRIALS, axis=0))
    shortfall = counts.max() - counts[idx]
    _, tol = acc.interval(0.9)
    check_coverage(shortfall <= tol, 0.9, conservative=True)


def test_two_sided_normal_quantile_used_for_gaussian_ci():
    mech = CountMechanism(1.0, delta=1e-6)
    z = NormalDist().inv_cdf(0.975)
    assert mech.accuracy(0.95) == pytest.approx(mech.noise_scale * z, rel=1e-12)
