"""Calibration: with a fixed seed, the noise each mechanism adds has its stated law.

Every tolerance is derived from the sampling distribution of the statistic it bounds and set
at 5 standard errors (a two-sided normal tail of 5.7e-7 per assertion), never widened to pass.
The seeds are fixed, so the tests are deterministic; the tolerances make them robust to any
seed rather than tuned to one.

The additive noises are exact discrete distributions (the discrete Laplace and discrete
Gaussian on the integers, or on a release's lattice in grid units), so their moments and
coverage probabilities are computed here from their pmfs, summed term by term, and the samples
are also put through a chi-square goodness-of-fit test against the pmf (rejected below
p = 1e-4).

Coverage tests check that the documented confidence intervals cover the exact value at least
as often as claimed; for a count the interval ``value ± t`` covers with probability exactly
``P(|X| <= t)`` (at least ``level``, more by the size of the last atom), which is checked.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from pinqpy import testing
from pinqpy.noise.mechanisms import (
    ArgmaxMechanism,
    CountMechanism,
    MeanMechanism,
    QuantileMechanism,
    SumMechanism,
    VarianceMechanism,
)
from pinqpy.noise.source import SecureSource, SeededSource

N = 200_000
Z = 5.0  # standard errors allowed
P_MIN = 1e-4  # reject a goodness-of-fit test below this p-value


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


def dlaplace_pmf(b: Fraction, xs: np.ndarray) -> np.ndarray:
    """(1-q)/(1+q)·q^|x| with q = e^{-1/b}."""
    a = 1 / float(b)
    return -math.expm1(-a) / (1 + math.exp(-a)) * np.exp(-np.abs(xs) * a)


def dgauss_pmf(sigma2: Fraction, xs: np.ndarray) -> np.ndarray:
    """e^{-x²/(2σ²)} normalized over xs (which hold all but e^-800 of the mass)."""
    w = np.exp(-(xs.astype(np.float64) ** 2) / (2 * float(sigma2)))
    return w / w.sum()


def support(scale: float) -> np.ndarray:
    w = math.ceil(40 * scale) + 5
    return np.arange(-w, w + 1)


def check_pmf(noise: np.ndarray, xs: np.ndarray, pmf: np.ndarray) -> None:
    """Integer noise against its exact pmf: the mean, the variance and E|X| each within 5 SE
    (SEs from the pmf's own moments: Var(X), Var(X²) = E X⁴ - (E X²)², Var|X|), and a chi-square
    goodness of fit with tails pooled until every expected count is at least 5."""
    n = noise.size
    assert noise.dtype.kind == "i"
    m2 = float((pmf * xs**2).sum())
    m4 = float((pmf * xs.astype(np.float64) ** 4).sum())
    mabs = float((pmf * np.abs(xs)).sum())
    assert abs(noise.mean()) < Z * math.sqrt(m2 / n)
    assert abs((noise.astype(np.float64) ** 2).mean() - m2) < Z * math.sqrt((m4 - m2 * m2) / n)
    assert abs(np.abs(noise).mean() - mabs) < Z * math.sqrt((m2 - mabs * mabs) / n)
    lo, hi = int(xs[0]), int(xs[-1])
    counts = np.bincount(np.clip(noise, lo, hi) - lo, minlength=xs.size).astype(float)
    expected = n * pmf / pmf.sum()
    big = np.flatnonzero(expected >= 5)
    first, last = int(big[0]), int(big[-1])
    if expected[:first].sum() < 5:
        first += 1
    if expected[last + 1 :].sum() < 5:
        last -= 1
    edges = [(0, first), *((i, i + 1) for i in range(first, last + 1)), (last + 1, xs.size)]
    # Wide supports: group runs of values so that the chi-square has a few hundred cells.
    width = max(1, (last - first) // 400)
    if width > 1:
        inner = [(i, min(i + width, last + 1)) for i in range(first, last + 1, width)]
        edges = [(0, first), *inner, (last + 1, xs.size)]
    obs = np.array([counts[a:b].sum() for a, b in edges])
    exp = np.array([expected[a:b].sum() for a, b in edges])
    assert (exp >= 5).all()
    stat = float(((obs - exp) ** 2 / exp).sum())
    assert stats.chi2.sf(stat, df=obs.size - 1) > P_MIN


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
def test_count_discrete_laplace_calibration():
    mech = CountMechanism(0.25)
    assert mech.noise.b == 4 and mech.noise_scale == 4.0
    with testing.seed(1):
        noisy, _ = mech.release(np.full(N, 100))
    xs = support(4.0)
    check_pmf(noisy - 100, xs, dlaplace_pmf(Fraction(4), xs))
    # E|X| = 2q/(1 - q²) and Var X = 2q/(1 - q)² for the discrete Laplace (pmf sums agree).
    q = math.exp(-1 / 4)
    pmf = dlaplace_pmf(Fraction(4), xs)
    assert mech.expected_error() == pytest.approx(float((pmf * np.abs(xs)).sum()), rel=1e-12)
    assert mech.expected_error() == pytest.approx(2 * q / (1 - q * q), rel=1e-12)
    assert mech.noise.variance() == pytest.approx(float((pmf * xs**2).sum()), rel=1e-12)


def test_count_discrete_gaussian_calibration():
    mech = CountMechanism(0.5, delta=1e-6)
    s2 = mech.noise.sigma2
    with testing.seed(2):
        noisy, _ = mech.release(np.zeros(N, dtype=np.int64))
    xs = support(math.sqrt(s2))
    pmf = dgauss_pmf(s2, xs)
    check_pmf(noisy, xs, pmf)
    assert mech.expected_error() == pytest.approx(float((pmf * np.abs(xs)).sum()), rel=1e-9)


def lattice_units(noisy: np.ndarray, exact: float, g: Fraction) -> np.ndarray:
    """The integer noise of a lattice release, in grid units: noisy/g - round(exact/g)."""
    k = g.numerator.bit_length() - 1 if g >= 1 else -(g.denominator.bit_length() - 1)
    units = np.ldexp(noisy, -k)
    assert (units == np.rint(units)).all()
    return units.astype(np.int64) - round(Fraction(exact) / g)


def test_sum_calibration():
    mech = SumMechanism(0.5, -30, 20)
    # Sensitivity max(|lo|, |hi|) = 30; grid 2^-6 (the largest power of two <= 30/1024); the
    # snapped sum moves by at most S = 30·64 + 1 = 1921 units; unit scale S/0.5 = 3842 units,
    # i.e. 3842/64 = 60.03125 in the sum's own units (Δ/ε = 60 plus 2^-9 relative at most).
    assert mech.grid == Fraction(1, 64) and mech.noise.unit.b == 3842
    assert mech.noise_scale == 60.03125
    with testing.seed(3):
        noisy, _ = mech.release(np.full(N, 7.3))
    units = lattice_units(noisy, 7.3, mech.grid)
    xs = support(3842.0)
    check_pmf(units, xs, dlaplace_pmf(Fraction(3842), xs))
    gauss = SumMechanism(1.0, 0, 10, delta=1e-5)
    s2 = gauss.noise.unit.sigma2
    with testing.seed(4):
        noisy, _ = gauss.release(np.full(N, 0.1))
    units = lattice_units(noisy, 0.1, gauss.grid)
    xs = support(math.sqrt(s2))
    check_pmf(units, xs, dgauss_pmf(s2, xs))


def test_mean_measurement_calibration():
    mech = MeanMechanism(0.2, 0, 100)
    # Half the budget each: centred sum on grid 2^-5 (50/1024 -> 1/32), S = 50·32 + 1 = 1601
    # units, unit scale 1601/0.1 = 16010 (500.3125 in value units); count scale 1/0.1 = 10.
    g = mech.sum_noise.grid
    assert g == Fraction(1, 32) and mech.sum_noise.unit.b == 16010
    assert mech.sum_noise.scale == 500.3125 and mech.count_noise.b == 10
    sums, counts = np.full(N, 4000.0), np.full(N, 80)
    with testing.seed(5):
        s, n = mech._measure(mech.lattice.index_sums(sums, counts), counts)
    units = lattice_units(s, 4000.0 - 50 * 80, g)
    xs = support(16010.0)
    check_pmf(units, xs, dlaplace_pmf(Fraction(16010), xs))
    xs = support(10.0)
    check_pmf(n - counts, xs, dlaplace_pmf(Fraction(10), xs))
    gauss = MeanMechanism(1.0, -1, 1, delta=1e-6)
    with testing.seed(6):
        zeros = gauss.lattice.index_sums(np.zeros(N), np.full(N, 10))  # values summing to 0
        s, n = gauss._measure(zeros, np.full(N, 10))
    s2u, s2c = gauss.sum_noise.unit.sigma2, gauss.count_noise.sigma2
    xs = support(math.sqrt(s2u))
    check_pmf(lattice_units(s, 0.0, gauss.sum_noise.grid), xs, dgauss_pmf(s2u, xs))
    xs = support(math.sqrt(s2c))
    check_pmf(n - 10, xs, dgauss_pmf(s2c, xs))


def test_variance_measurement_scales():
    mech = VarianceMechanism(0.3, 0, 10)
    # Thirds of 0.3: count 1/0.1; centred sum h = 5 on grid 2^-8 (5/1024), S = 1281, scale
    # 12810 units = 50.0390625; shifted squares h²/2 = 12.5 on grid 2^-7, S = 1601, scale
    # 16010 units = 125.078125.
    assert mech.count_noise.b == 10
    assert (mech.sum_noise.grid, mech.sum_noise.unit.b) == (Fraction(1, 256), 12810)
    assert (mech.sq_noise.grid, mech.sq_noise.unit.b) == (Fraction(1, 128), 16010)
    assert (mech.count_noise.scale, mech.sum_noise.scale, mech.sq_noise.scale) == (
        10.0,
        50.0390625,
        125.078125,
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
    mech = QuantileMechanism(1.0, 0.5, 0, 100, ci_share=0.25)
    assert mech.ci_noise.b == 4  # a quarter of epsilon, sensitivity 1: discrete Laplace(4)
    eq, gap = mech.bin_counts(np.arange(0, 101, 3))
    keys = 20_000
    exact = mech._scores_from_bins(mech._coarse_bins(eq, gap).astype(float))[0]
    with testing.seed(8):
        noisy = mech._cut_scores(np.repeat(eq, keys, axis=0), np.repeat(gap, keys, axis=0))
    # The middle cut's noise is 0.5·(sum of 32 noises below) - 0.5·(sum of 32 above), each a
    # discrete Laplace(4) of variance v = 2q/(1-q)² (q = e^{-1/4}): variance 0.25·64·v. For a
    # sample sd over K draws, Var(s²) ≈ σ⁴(2 + κ)/K with κ the excess kurtosis (κ1 = m4/v² - 3
    # for one noise, from its pmf; κ1/64 for an equally weighted sum of 64), so
    # SE(s) ≈ σ·sqrt((2 + κ)/(4K)).
    xs = support(4.0)
    pmf = dlaplace_pmf(Fraction(4), xs)
    v = float((pmf * xs**2).sum())
    kappa1 = float((pmf * xs.astype(float) ** 4).sum()) / v**2 - 3
    q = math.exp(-1 / 4)
    assert v == pytest.approx(2 * q / (1 - q) ** 2, rel=1e-12)
    mid = len(mech.cuts) // 2
    err = noisy[:, mid] - exact[mid]
    sd = math.sqrt(0.25 * 64 * v)
    se = sd * math.sqrt((2 + kappa1 / 64) / (4 * keys))
    assert abs(err.std(ddof=1) - sd) < Z * se
    assert abs(err.mean()) < Z * sd / math.sqrt(keys)


def test_argmax_selection_frequencies():
    eps = 0.4
    mech = ArgmaxMechanism(eps, 4)
    counts = np.array([10, 12, 9, 13])
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
        _, acc = mech.release(np.full(TRIALS, 250))
    low, high = acc.interval(level)
    t = int(mech.accuracy(level))
    assert np.array_equal(high - low, np.full(TRIALS, 2 * t))  # integer half-width t
    # The exact coverage P(|X| <= t) from the pmf: at least level, and t is the least such.
    noise = mech.noise
    xs = support(noise.scale)
    pmf = dlaplace_pmf(noise.b, xs) if delta is None else dgauss_pmf(noise.sigma2, xs)
    cover = float(pmf[np.abs(xs) <= t].sum())
    assert cover >= level > float(pmf[np.abs(xs) <= t - 1].sum())
    # The intervals cover the exact count as often as that (binomial, 5 SE).
    rate = ((low <= 250) & (high >= 250)).mean()
    assert abs(rate - cover) <= Z * math.sqrt(cover * (1 - cover) / TRIALS)


def test_sum_ci_coverage():
    mech = SumMechanism(0.1, 0, 50)
    with testing.seed(11):
        _, acc = mech.release(np.full(TRIALS, 1234.0))
    low, high = acc.interval(0.95)
    # Half-width g·(t_u + 1/2) with t_u the unit noise's own 95% half-width: the snapping
    # error is at most half a step. Coverage P(|Z| <= t_u) (1234 is on the grid here).
    t_u = int(mech.noise.unit.half_width(0.95))
    assert mech.accuracy(0.95) == float(mech.grid * (t_u + Fraction(1, 2)))
    xs = support(float(mech.noise.unit.b))
    pmf = dlaplace_pmf(mech.noise.unit.b, xs)
    cover = float(pmf[np.abs(xs) <= t_u].sum())
    assert cover >= 0.95
    rate = ((low <= 1234.0) & (high >= 1234.0)).mean()
    assert abs(rate - cover) <= Z * math.sqrt(cover * (1 - cover) / TRIALS)


@pytest.mark.parametrize(("n", "true_mean"), [(3, 90.0), (40, 25.0), (5000, 61.5)])
@pytest.mark.parametrize("delta", [None, 1e-6])
def test_mean_ci_coverage(n: int, true_mean: float, delta: float | None):
    mech = MeanMechanism(0.5, 0, 100, delta=delta)
    with testing.seed(12):
        sums = mech.lattice.index_sums(np.full(TRIALS, true_mean * n), np.full(TRIALS, n))
        values, acc = mech.release(sums, np.full(TRIALS, float(n)))
    low, high = acc.interval(0.95)
    assert ((low <= values) & (values <= high)).all()
    assert ((low >= 0) & (high <= 100)).all()
    check_coverage((low <= true_mean) & (true_mean <= high), 0.95, conservative=True)


def test_variance_ci_coverage():
    rng = np.random.default_rng(0)
    data = rng.uniform(0, 10, size=400)
    mech = VarianceMechanism(1.0, 0, 10)
    with testing.seed(13):
        s, s2, n = mech.lattice.value_sums(data)
        values, acc = mech.release([s] * TRIALS, [s2] * TRIALS, np.full(TRIALS, float(n)))
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
    mech = QuantileMechanism(1.0, q, 0, 100, ci_share=0.25)
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


@pytest.mark.parametrize("level", [0.5, 0.9, 0.95, 0.999])
def test_discrete_half_widths_are_the_least_integers_that_cover(level: float):
    for mech in (CountMechanism(1.0, delta=1e-6), CountMechanism(0.05), CountMechanism(7)):
        noise = mech.noise
        t = int(mech.accuracy(level))
        xs = support(noise.scale)
        pmf = dlaplace_pmf(noise.b, xs) if hasattr(noise, "b") else dgauss_pmf(noise.sigma2, xs)
        assert float(pmf[np.abs(xs) <= t].sum()) >= level
        if t > 0:
            assert float(pmf[np.abs(xs) <= t - 1].sum()) < level
