"""Numerical privacy-loss checks: exact output laws on neighbouring inputs.

For each mechanism we take a pair of neighbouring datasets (one row added), compute the exact
output density (continuous outputs, on a grid) or probabilities (selections), and check that
the largest absolute log-ratio is at most epsilon -- and, on an adversarial pair, at least
0.99·epsilon, so the calibration is not wastefully loose. The quantities compared come from
the raw rows, computed here independently of the mechanism's own bookkeeping.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from pinqpy._mechanisms import (
    ArgmaxMechanism,
    CountMechanism,
    GaussianCharge,
    MeanMechanism,
    QuantileMechanism,
    SumMechanism,
    VarianceMechanism,
    _log_ndtr,
    gaussian_delta,
    gaussian_sigma,
)

scipy_stats = pytest.importorskip("scipy.stats")
scipy_special = pytest.importorskip("scipy.special")
scipy_integrate = pytest.importorskip("scipy.integrate")

TOL = 1e-9


def laplace_logpdf(y: np.ndarray, centre: float, b: float) -> np.ndarray:
    return -np.abs(y - centre) / b - math.log(2 * b)


def max_loss(logp: np.ndarray, logq: np.ndarray) -> float:
    return float(np.max(np.abs(logp - logq)))


def grid_around(a: float, b: float, scale: float) -> np.ndarray:
    lo, hi = min(a, b) - 30 * scale, max(a, b) + 30 * scale
    return np.linspace(lo, hi, 20_001)


# -- Laplace: counts and sums ---------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 3.0])
def test_count_laplace_loss(eps: float):
    mech = CountMechanism(eps)
    rows = np.ones(41)
    c, c2 = rows.sum(), np.append(rows, 1).sum()  # neighbour: one row added
    b = mech.noise_scale
    y = grid_around(c, c2, b)
    loss = max_loss(laplace_logpdf(y, c, b), laplace_logpdf(y, c2, b))
    assert loss <= eps + TOL
    assert loss >= 0.99 * eps


@pytest.mark.parametrize(("lo", "hi", "extra"), [(0, 100, 100), (-5, 3, -5), (-7.5, 7.5, 7.5)])
def test_sum_laplace_loss(lo: float, hi: float, extra: float):
    eps = 0.5
    mech = SumMechanism(eps, lo, hi)
    data = np.clip(np.array([1.0, 2.0, -3.0, 50.0]), lo, hi)
    s, s2 = data.sum(), np.append(data, extra).sum()
    b = mech.noise_scale
    y = grid_around(s, s2, b)
    loss = max_loss(laplace_logpdf(y, s, b), laplace_logpdf(y, s2, b))
    assert loss <= eps + TOL
    assert loss >= 0.99 * eps  # the extreme row attains the sensitivity


def test_sum_loss_for_every_row_value_is_bounded():
    eps, lo, hi = 0.3, -2.0, 9.0
    mech = SumMechanism(eps, lo, hi)
    b = mech.noise_scale
    for extra in np.linspace(lo, hi, 23):
        y = grid_around(0.0, extra, b)
        assert max_loss(laplace_logpdf(y, 0.0, b), laplace_logpdf(y, extra, b)) <= eps + TOL


# -- the mean: joint law of (S', N') --------------------------------------------------------
@pytest.mark.parametrize("extra", [0.0, 100.0, 37.0])
@pytest.mark.parametrize("eps", [0.1, 1.0])
def test_mean_joint_loss(eps: float, extra: float):
    lo, hi = 0.0, 100.0
    mech = MeanMechanism(eps, lo, hi)
    data = np.array([10.0, 20.0, 90.0])
    mid = (lo + hi) / 2
    # The two measurements, computed from the rows: centred sum and count.
    s, n = float((data - mid).sum()), float(len(data))
    s2, n2 = s + (extra - mid), n + 1
    bs, bn = mech.sum_noise.scale, mech.count_noise.scale
    ys = grid_around(s, s2, bs)[::20]
    yn = grid_around(n, n2, bn)[::20]
    gs, gn = np.meshgrid(ys, yn, indexing="ij")
    logp = laplace_logpdf(gs, s, bs) + laplace_logpdf(gn, n, bn)
    logq = laplace_logpdf(gs, s2, bs) + laplace_logpdf(gn, n2, bn)
    loss = max_loss(logp, logq)
    assert loss <= eps + TOL
    if extra in (lo, hi):  # an extreme row uses both halves of the budget fully
        assert loss >= 0.99 * eps


def test_mean_measurements_match_the_formula():
    # The mechanism's measurements are exactly the centred sum and count (noise off).
    from pinqpy import testing

    mech = MeanMechanism(1.0, 0, 100)
    data = np.array([10.0, 20.0, 90.0])
    with testing.no_noise():
        s, n = mech._measure(np.array([data.sum()]), np.array([len(data)]))
    assert s[0] == pytest.approx((data - 50).sum()) and n[0] == 3


def test_variance_joint_loss():
    eps, lo, hi = 0.9, 0.0, 10.0
    mech = VarianceMechanism(eps, lo, hi)
    mid, h = 5.0, 5.0
    data = np.array([1.0, 4.0, 9.0])

    def stats(d: np.ndarray) -> np.ndarray:
        return np.array([len(d), (d - mid).sum(), ((d - mid) ** 2 - h * h / 2).sum()])

    scales = [mech.count_noise.scale, mech.sum_noise.scale, mech.sq_noise.scale]
    worst = 0.0
    for extra in (lo, hi, mid, 7.0):
        a, b = stats(data), stats(np.append(data, extra))
        # The joint density factorizes; the grid maximum of each factor's log-ratio is
        # |a_i - b_i|/scale_i, attained in the tails, so the joint maximum is their sum.
        loss = 0.0
        for ai, bi, sc in zip(a, b, scales, strict=True):
            y = grid_around(ai, bi, sc)
            loss += max_loss(laplace_logpdf(y, ai, sc), laplace_logpdf(y, bi, sc))
        assert loss <= eps + TOL
        worst = max(worst, loss)
    # An extreme row moves the squares by h²/2 only when (x-mid)² - h²/2 = ±h²/2: at lo/hi
    # (+h²/2) and at mid (-h²/2); both then also move the count by 1. At lo/hi the sum moves
    # by h too: the full epsilon.
    assert worst >= 0.99 * eps


# -- quantile: exponential mechanism + coarse histogram -------------------------------------
def utilities(values: np.ndarray, cands: np.ndarray, q: float) -> np.ndarray:
    """-|(1-q)·#{x < c} - q·#{x > c}| from the rows (independent of the mechanism)."""
    v = np.asarray(values, dtype=float)[None, :]
    c = cands[:, None]
    return -np.abs((1 - q) * (v < c).sum(1) - q * (v > c).sum(1))


def em_probs(values: np.ndarray, cands: np.ndarray, q: float, eps_sel: float) -> np.ndarray:
    logits = eps_sel * utilities(values, cands, q) / (2 * max(q, 1 - q))
    logits -= logits.max()
    p = np.exp(logits)
    return p / p.sum()


def adversarial_pair(q: float, top: int) -> tuple[list[float], list[float]]:
    """A pair where one candidate's utility rises by Δu while most of the mass falls by Δu.

    For q <= 1/2: one row at 2 and k = (1-q)/q rows at ``top`` make every candidate strictly
    between 2 and ``top`` score 0 (a wide plateau holding almost all the probability).
    Adding a row at 0 raises (1-q)·#{x < c} by Δu = 1-q for every c > 0: the plateau drops to
    -Δu while candidates 1 and 2 (negative g) rise by Δu. Their probability grows by
    e^{eps/2} from their own score and by nearly e^{eps/2} from the shrinking normalizer: the
    loss approaches eps as the plateau widens. Mirrored for q > 1/2.
    """
    if q <= 0.5:
        k = round((1 - q) / q)
        d = [2.0] + [float(top)] * k
        return d, [*d, 0.0]
    k = round(q / (1 - q))
    d = [float(top - 2)] + [0.0] * k
    return d, [*d, float(top)]


@pytest.mark.parametrize("q", [0.1, 0.5, 0.9])
def test_quantile_selection_loss_is_tight(q: float):
    eps, top = 1.0, 10_000
    mech = QuantileMechanism(eps, q, 0, top)
    cands = mech.candidates
    assert len(cands) == top + 1
    eps_sel = float(mech.select_epsilon)
    d, d2 = adversarial_pair(q, top)
    p, p2 = em_probs(np.array(d), cands, q, eps_sel), em_probs(np.array(d2), cands, q, eps_sel)
    # The mechanism's own law equals the formula computed from the rows.
    eq, gap = mech.bin_counts(np.array(d))
    assert np.allclose(mech._selection_probabilities(eq, gap)[0], p, rtol=1e-12, atol=0)
    sel_loss = max_loss(np.log(p), np.log(p2))
    assert sel_loss <= eps_sel + TOL
    assert sel_loss >= 0.99 * eps_sel

    # The coarse histogram: the neighbours' bins differ by exactly 1 in one bin (L1 = 1),
    # so Laplace(1/eps_ci) on every bin loses at most eps_ci, attained in the tails.
    bins = mech._coarse_bins(*mech.bin_counts(np.array(d)))[0]
    bins2 = mech._coarse_bins(*mech.bin_counts(np.array(d2)))[0]
    assert np.abs(bins - bins2).sum() == 1
    b = mech.ci_noise.scale
    i = int(np.argmax(bins != bins2))
    y = grid_around(bins[i], bins2[i], b)
    hist_loss = max_loss(laplace_logpdf(y, bins[i], b), laplace_logpdf(y, bins2[i], b))
    assert hist_loss <= float(mech.ci_epsilon) + TOL

    # The joint release (selection, noisy histogram) has independent parts: losses add.
    total = sel_loss + hist_loss
    assert total <= eps + TOL
    assert total >= 0.99 * eps


@pytest.mark.parametrize("q", [0.0, 0.1, 0.25, 0.5, 0.9, 1.0])
def test_quantile_selection_loss_random_neighbours(q: float):
    eps = 0.7
    mech = QuantileMechanism(eps, q, 0, 20, ci_share=0)
    assert mech.select_epsilon == eps
    rng = np.random.default_rng(int(q * 100))
    worst = 0.0
    for _ in range(300):
        n = int(rng.integers(0, 12))
        d = rng.integers(0, 21, size=n).astype(float)
        extra = float(rng.integers(0, 21))
        p = em_probs(d, mech.candidates, q, eps)
        p2 = em_probs(np.append(d, extra), mech.candidates, q, eps)
        worst = max(worst, max_loss(np.log(p), np.log(p2)))
    assert worst <= eps + TOL


def test_quantile_values_between_candidates():
    # Rows between grid points (a coarse custom grid) keep the sensitivity max(q, 1-q).
    eps, q = 0.8, 0.3
    mech = QuantileMechanism(eps, q, 0, 1, candidates=[0, 0.25, 0.5, 0.75, 1], ci_share=0)
    rng = np.random.default_rng(5)
    for _ in range(200):
        d = rng.uniform(0, 1, size=int(rng.integers(0, 8)))
        extra = float(rng.uniform(0, 1))
        eq, gap = mech.bin_counts(d)
        eq2, gap2 = mech.bin_counts(np.append(d, extra))
        p = mech._selection_probabilities(eq, gap)[0]
        p2 = mech._selection_probabilities(eq2, gap2)[0]
        assert np.allclose(p, em_probs(d, mech.candidates, q, eps), rtol=1e-12, atol=0)
        assert max_loss(np.log(p), np.log(p2)) <= eps + TOL


# -- argmax: report noisy max ---------------------------------------------------------------
@pytest.mark.parametrize("eps", [0.1, 1.0, 2.0])
def test_argmax_loss_is_tight(eps: float):
    mech = ArgmaxMechanism(eps, 3)
    counts = np.array([0.0, 50 / eps, 50 / eps])  # the low candidate gains a row
    counts2 = counts + np.array([1.0, 0.0, 0.0])
    p = mech._selection_probabilities(counts)[0]
    p2 = mech._selection_probabilities(counts2)[0]
    expected = np.exp(eps * counts - np.max(eps * counts))
    assert np.allclose(p, expected / expected.sum(), rtol=1e-12, atol=0)
    loss = max_loss(np.log(p), np.log(p2))
    assert loss <= eps + TOL
    assert loss >= 0.99 * eps


def test_argmax_loss_random_neighbours():
    eps = 0.6
    mech = ArgmaxMechanism(eps, 5)
    rng = np.random.default_rng(9)
    for _ in range(500):
        counts = rng.integers(0, 10, size=5).astype(float)
        counts2 = counts.copy()
        counts2[rng.integers(0, 5)] += 1
        p = mech._selection_probabilities(counts)[0]
        p2 = mech._selection_probabilities(counts2)[0]
        assert max_loss(np.log(p), np.log(p2)) <= eps + TOL


# -- the analytic Gaussian ------------------------------------------------------------------
def scipy_delta(eps: float, d: float, sigma: float) -> float:
    a = d / (2 * sigma) - eps * sigma / d
    b = -d / (2 * sigma) - eps * sigma / d
    return float(scipy_stats.norm.cdf(a) - math.exp(eps) * scipy_stats.norm.cdf(b))


def hockey_stick(eps: float, d: float, sigma: float) -> float:
    """∫ max(0, p(y) - e^eps·q(y)) dy for p = N(0, σ²), q = N(d, σ²), by quadrature."""
    # p > e^eps·q exactly for y below this point.
    y_star = d / 2 - eps * sigma**2 / d
    p = scipy_stats.norm(0, sigma).pdf
    q = scipy_stats.norm(d, sigma).pdf
    val, _ = scipy_integrate.quad(
        lambda y: p(y) - math.exp(eps) * q(y),
        y_star - 40 * sigma,
        y_star,
        epsabs=0,
        epsrel=1e-10,
        limit=200,
    )
    return val


@pytest.mark.parametrize("x", [-1e4, -300.0, -40.0, -20.0, -19.99, -7.5, -1.0, 0.0, 2.0, 9.0])
def test_log_ndtr_matches_scipy(x: float):
    assert _log_ndtr(x) == pytest.approx(float(scipy_special.log_ndtr(x)), rel=1e-13, abs=1e-300)


def test_gaussian_delta_against_high_precision():
    # The profile is evaluated without cancellation: 60-digit arithmetic agrees to 1e-11
    # relative (the sigma solver's safety margin is 1e-9) from moderate deltas down to 1e-300.
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60

    def exact(eps: float, r: float):
        e, rr = mp.mpf(eps), mp.mpf(r)
        return mp.ncdf(1 / (2 * rr) - e * rr) - mp.e**e * mp.ncdf(-1 / (2 * rr) - e * rr)

    checked = 0
    for eps in (1e-6, 1e-4, 1e-3, 0.01, 0.1, 1.0, 5.0, 20.0, 100.0, 700.0):
        for r in (1e-3, 0.01, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0, 1e3, 1e4, 3e4, 1e5, 1e6):
            ref = exact(eps, r)
            if not mp.mpf("1e-300") < ref < 0.5:
                continue
            got = gaussian_delta(eps, 1.0, r)
            assert abs((mp.mpf(got) - ref) / ref) < 1e-11, (eps, r)
            checked += 1
    assert checked > 40


@pytest.mark.parametrize("eps", [0.1, 1.0, 5.0, 20.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-10])
def test_analytic_gaussian_is_valid_and_tight(eps: float, delta: float):
    sigma = gaussian_sigma(1, eps, delta)
    # Valid: the exact profile at sigma meets the requested delta (checked with scipy too).
    assert gaussian_delta(eps, 1, sigma) <= delta
    assert scipy_delta(eps, 1.0, sigma) <= delta * (1 + 1e-7)
    # Tight: a sigma smaller by one part in a million violates it.
    assert gaussian_delta(eps, 1, sigma * (1 - 1e-6)) > delta
    assert scipy_delta(eps, 1.0, sigma * (1 - 1e-6)) > delta


@pytest.mark.parametrize(("eps", "delta"), [(0.1, 1e-3), (1.0, 1e-5), (5.0, 1e-4)])
def test_gaussian_delta_is_the_hockey_stick_divergence(eps: float, delta: float):
    sigma = gaussian_sigma(2.5, eps, delta)
    assert hockey_stick(eps, 2.5, sigma) == pytest.approx(gaussian_delta(eps, 2.5, sigma), rel=1e-6)


def test_gaussian_sigma_scales_with_sensitivity():
    s1 = gaussian_sigma(1, 0.5, 1e-6)
    for d in (0.25, 3, 1000):
        assert gaussian_sigma(d, 0.5, 1e-6) == pytest.approx(d * s1, rel=1e-12)


def test_analytic_sigma_beats_classical_below_eps_one():
    for eps in (0.1, 0.5, 0.9):
        classical = math.sqrt(2 * math.log(1.25 / 1e-6)) / eps
        assert gaussian_sigma(1, eps, 1e-6) < classical


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (0.3, 1e-5), (4.0, 1e-8)])
def test_gaussian_group_privacy_delta(k: int, eps: float, delta: float):
    sigma = gaussian_sigma(1, eps, delta)
    charge = GaussianCharge(eps, delta, 1, sigma)
    cost = charge.at(k)
    assert cost.epsilon == Fraction(k) * Fraction(str(eps))
    exact = scipy_delta(k * eps, k * 1.0, sigma)  # k rows move a count by k
    charged = float(cost.delta)
    assert exact <= charged <= exact * (1 + 1e-6)
    # Tighter than the generic group bound k·e^{(k-1)eps}·delta.
    assert charged < k * math.exp((k - 1) * eps) * delta


def test_gaussian_charge_at_one_is_exactly_the_request():
    charge = GaussianCharge(Fraction(1, 3), Fraction(1, 10**6), 1, gaussian_sigma(1, 1 / 3, 1e-6))
    cost = charge.at(1)
    assert cost.epsilon == Fraction(1, 3) and cost.delta == Fraction(1, 10**6)


def test_gaussian_count_densities_meet_delta():
    # The hockey-stick divergence between the output laws on neighbours is the mechanism's delta.
    eps, delta = 0.8, 1e-5
    mech = CountMechanism(eps, delta=delta)
    assert hockey_stick(eps, 1.0, mech.noise_scale) <= delta * (1 + 1e-6)
    mean = MeanMechanism(eps, 0, 10, delta=delta)
    cost = mean.charge.at(1)
    assert cost.epsilon == Fraction("0.8") and cost.delta == Fraction(1, 10**5)
    # Each half is (eps/2, delta/2) for its own sensitivity.
    assert hockey_stick(eps / 2, 5.0, mean.sum_noise.scale) <= delta / 2 * (1 + 1e-6)
    assert hockey_stick(eps / 2, 1.0, mean.count_noise.scale) <= delta / 2 * (1 + 1e-6)
