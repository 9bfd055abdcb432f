"""Numerical privacy-loss checks: exact output laws on neighbouring inputs.

For each mechanism we take a pair of neighbouring datasets (one row added), compute the exact
output probabilities -- the pmfs of the exact discrete noises on the integers or on the
release's lattice, or the selection probabilities -- and check that the largest absolute
log-ratio is at most epsilon, and, on an adversarial pair, at least 0.99·epsilon, so the
calibration is not wastefully loose. The quantities compared (counts, snapped sums in grid
units) come from the raw rows, computed here independently of the mechanism's own
bookkeeping; only the public noise parameters are read from the mechanism, and those are
checked against their formulas. For the discrete Gaussian the delta is the hockey-stick
divergence summed term by term in 60-digit arithmetic.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from pinqpy.accounting.charges import DiscreteGaussianCharge, GaussianCharge
from pinqpy.accounting.profiles import _log_ndtr, discrete_gaussian_delta, gaussian_delta
from pinqpy.noise.lattice_release import grid_for
from pinqpy.noise.mechanisms import (
    ArgmaxMechanism,
    CountMechanism,
    MeanMechanism,
    QuantileMechanism,
    SumMechanism,
    VarianceMechanism,
    discrete_gaussian_sigma2,
    gaussian_sigma,
)

scipy_stats = pytest.importorskip("scipy.stats")
scipy_special = pytest.importorskip("scipy.special")
scipy_integrate = pytest.importorskip("scipy.integrate")
mp = pytest.importorskip("mpmath")

TOL = 1e-9


def laplace_logpdf(y: np.ndarray, centre: float, b: float) -> np.ndarray:
    return -np.abs(y - centre) / b - math.log(2 * b)


def dlaplace_logpmf(y: np.ndarray, centre: int, b: Fraction) -> np.ndarray:
    """log P(centre + X = y), X discrete Laplace of scale b: (1-q)/(1+q)·q^|x|, q = e^{-1/b}."""
    a = 1 / float(b)
    log_norm = math.log(-math.expm1(-a)) - math.log1p(math.exp(-a))
    return log_norm - np.abs(y - centre) * a


def max_loss(logp: np.ndarray, logq: np.ndarray) -> float:
    return float(np.max(np.abs(logp - logq)))


def grid_around(a: float, b: float, scale: float) -> np.ndarray:
    lo, hi = min(a, b) - 30 * scale, max(a, b) + 30 * scale
    return np.linspace(lo, hi, 20_001)


def int_range(a: int, b: int, scale: float) -> np.ndarray:
    """Every integer output within 30 scales of both answers (the log-ratio is monotone
    beyond, so its maximum over all integers is attained here)."""
    w = math.ceil(30 * scale)
    return np.arange(min(a, b) - w, max(a, b) + w + 1)


def dlaplace_loss(k1: int, k2: int, b: Fraction) -> float:
    """The largest |log P(k1 + X = y) - log P(k2 + X = y)| over integer outputs y."""
    y = int_range(k1, k2, float(b))
    return max_loss(dlaplace_logpmf(y, k1, b), dlaplace_logpmf(y, k2, b))


def snapped(value: float, g: Fraction) -> int:
    """round(value/g), ties to even, exactly (the lattice release's grid units)."""
    return round(Fraction(value) / g)


# -- counts: the discrete Laplace -----------------------------------------------------------
@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 3.0, Fraction(2, 7)])
def test_count_discrete_laplace_loss(eps):
    mech = CountMechanism(eps)
    assert mech.noise.b == 1 / Fraction(str(eps) if isinstance(eps, float) else eps)
    rows = np.ones(41, dtype=np.int64)
    c, c2 = int(rows.sum()), int(np.append(rows, 1).sum())  # neighbour: one row added
    loss = dlaplace_loss(c, c2, mech.noise.b)
    e = float(eps)
    assert loss <= e + TOL
    assert loss >= 0.99 * e


# -- sums: the lattice Laplace --------------------------------------------------------------
def lattice_params(mech: SumMechanism, sens: Fraction, eps: Fraction) -> tuple[Fraction, Fraction]:
    """The grid and unit scale, checked against their public formulas."""
    g = grid_for(sens, eps)
    s_units = math.ceil(sens / g) + 1
    assert mech.grid == g and mech.noise.unit.b == Fraction(s_units) / eps
    return g, mech.noise.unit.b


@pytest.mark.parametrize(("lo", "hi", "extra"), [(0, 100, 100), (-5, 3, -5), (-7.5, 7.5, 7.5)])
def test_sum_lattice_laplace_loss(lo: float, hi: float, extra: float):
    eps = Fraction(1, 2)
    mech = SumMechanism(eps, lo, hi)
    g, b = lattice_params(mech, max(Fraction(abs(lo)), Fraction(abs(hi))), eps)
    data = np.clip(np.array([1.0, 2.0, -3.0, 50.0]), lo, hi)
    s, s2 = data.sum(), np.append(data, extra).sum()
    loss = dlaplace_loss(snapped(s, g), snapped(s2, g), b)
    assert loss <= eps + TOL
    assert loss >= 0.99 * eps  # the extreme row attains the sensitivity (Δ/g of S grid units)


def test_sum_loss_for_every_row_value_is_bounded():
    eps, lo, hi = Fraction(3, 10), -2.0, 9.0
    mech = SumMechanism(eps, lo, hi)
    g, b = lattice_params(mech, Fraction(9), eps)
    rng = np.random.default_rng(0)
    for extra in np.concatenate([np.linspace(lo, hi, 23), rng.uniform(lo, hi, 50)]):
        for base in (0.0, 0.3 * float(g), 0.5 * float(g), 1234.5678):  # every rounding phase
            k1, k2 = snapped(base, g), snapped(base + extra, g)
            assert abs(k1 - k2) <= math.ceil(9 / g) + 1
            assert dlaplace_loss(k1, k2, b) <= eps + TOL


# -- the mean: joint law of (S', N') --------------------------------------------------------
@pytest.mark.parametrize("extra", [0.0, 100.0, 37.0])
@pytest.mark.parametrize("eps", [Fraction(1, 10), Fraction(1)])
def test_mean_joint_loss(eps: Fraction, extra: float):
    lo, hi = 0.0, 100.0
    mech = MeanMechanism(eps, lo, hi)
    data = np.array([10.0, 20.0, 90.0])
    mid = (lo + hi) / 2
    # The two measurements, computed from the rows: centred sum (on its lattice) and count.
    g = mech.sum_noise.grid
    assert g == grid_for(50, eps / 2)
    bs, bn = mech.sum_noise.unit.b, mech.count_noise.b
    assert bs == (math.ceil(50 / g) + 1) / (eps / 2) and bn == 2 / eps
    k, n = snapped(float((data - mid).sum()), g), len(data)
    k2, n2 = snapped(float((data - mid).sum() + (extra - mid)), g), n + 1
    # The joint pmf is a product, so the log-ratio is a sum of the two factors' log-ratios,
    # and its maximum over the product of outputs is the sum of the two maxima.
    loss = dlaplace_loss(k, k2, bs) + dlaplace_loss(n, n2, bn)
    assert loss <= eps + TOL
    if extra in (lo, hi):  # an extreme row uses both halves of the budget fully
        assert loss >= 0.99 * eps


def test_mean_measurements_match_the_formula():
    # The mechanism's measurements are exactly the centred sum and count (noise off).
    from pinqpy import testing

    mech = MeanMechanism(1.0, 0, 100)
    data = np.array([10.0, 20.0, 90.0])
    with testing.no_noise():
        s, n = mech._measure(mech.lattice.index_sums([data.sum()], [3]), np.array([len(data)]))
    assert s[0] == pytest.approx((data - 50).sum()) and n[0] == 3 and n.dtype == np.int64


def test_variance_joint_loss():
    eps, lo, hi = Fraction(9, 10), 0.0, 10.0
    mech = VarianceMechanism(eps, lo, hi)
    mid, h = 5.0, 5.0
    data = np.array([1.0, 4.0, 9.0])
    third = eps / 3
    gs, gq = mech.sum_noise.grid, mech.sq_noise.grid
    assert gs == grid_for(h, third) and gq == grid_for(Fraction(25, 2), third)

    def stats(d: np.ndarray) -> tuple[int, int, int]:
        return (
            len(d),
            snapped(float((d - mid).sum()), gs),
            snapped(float(((d - mid) ** 2 - h * h / 2).sum()), gq),
        )

    scales = [mech.count_noise.b, mech.sum_noise.unit.b, mech.sq_noise.unit.b]
    worst = Fraction(0)
    for extra in (lo, hi, mid, 7.0):
        a, b = stats(data), stats(np.append(data, extra))
        # The joint pmf factorizes: the maximum log-ratio is the sum of the factors' maxima.
        loss = sum(dlaplace_loss(ai, bi, sc) for ai, bi, sc in zip(a, b, scales, strict=True))
        assert loss <= eps + TOL
        worst = max(worst, Fraction(loss))
    # An extreme row moves the squares by h²/2 only when (x-mid)² - h²/2 = ±h²/2: at lo/hi
    # (+h²/2) and at mid (-h²/2); both then also move the count by 1. At lo/hi the sum moves
    # by h too: the full epsilon.
    assert worst >= Fraction(99, 100) * eps


# -- selections: permute-and-flip -----------------------------------------------------------
def utilities(values: np.ndarray, cands: np.ndarray, q: float) -> np.ndarray:
    """-|(1-q)·#{x < c} - q·#{x > c}| from the rows (independent of the mechanism)."""
    v = np.asarray(values, dtype=float)[None, :]
    c = cands[:, None]
    return -np.abs((1 - q) * (v < c).sum(1) - q * (v > c).sum(1))


def pf_probs(gamma: np.ndarray) -> np.ndarray:
    """The permute-and-flip law for coin exponents ``gamma`` (coins ``p = e^-gamma``).

    P(r) = p_r·E[1/(1 + K_r)], K_r the number of heads among the other coins: the output is
    uniform over the heads (see _mechanisms._permute_and_flip). K_r's pmf is a convolution
    of binomials over groups of equal coins -- a different computation from the
    mechanism's Gauss-Legendre quadrature.
    """
    vals, inv, cnt = np.unique(np.round(gamma, 12), return_inverse=True, return_counts=True)
    p = np.exp(-vals)
    whole = [scipy_stats.binom.pmf(np.arange(c + 1), c, pv) for c, pv in zip(cnt, p, strict=True)]
    out = np.empty(vals.size)
    for v in range(vals.size):
        dist = scipy_stats.binom.pmf(np.arange(cnt[v]), cnt[v] - 1, p[v])
        for w in range(vals.size):
            if w != v:
                dist = np.convolve(dist, whole[w])
        out[v] = p[v] * float((dist / (1 + np.arange(dist.size))).sum())
    return out[inv]


def pf_quantile_probs(values: np.ndarray, cands: np.ndarray, q: float, eps_sel: float):
    u = utilities(values, cands, q)
    return pf_probs(np.minimum(eps_sel * (u.max() - u) / (2 * max(q, 1 - q)), 64.0))


def test_the_vectorized_law_is_sequential_permute_and_flip():
    """Brute force over every visiting order: the sequential mechanism (flip in a random order,
    output the first heads) has exactly the law of 'uniform among all heads'."""
    from pinqpy.noise.mechanisms.selection import _pf_law

    rng = np.random.default_rng(3)
    for m in (1, 2, 3, 4, 5):
        for _ in range(5):
            gamma = rng.uniform(0, 3, m)
            gamma[rng.integers(m)] = 0.0  # the best candidate: p = 1
            p = np.exp(-gamma)
            seq = np.zeros(m)
            perms = list(itertools.permutations(range(m)))
            for order in perms:
                miss = 1.0
                for i in order:  # candidate i is output if all before it were tails
                    seq[i] += miss * p[i] / len(perms)
                    miss *= 1 - p[i]
            assert np.allclose(seq, pf_probs(gamma), rtol=1e-12, atol=0)
            assert np.allclose(seq, _pf_law(gamma[None, :])[0], rtol=1e-12, atol=0)


def adversarial_pair(q: float, top: int) -> tuple[list[float], list[float]]:
    """A pair where one candidate's utility rises by Δu while most candidates fall by Δu.

    For q <= 1/2: one row at 2 and k = (1-q)/q rows at ``top`` make every candidate strictly
    between 2 and ``top`` score 0 (a wide plateau of M coins of probability 1). Adding a row at
    0 raises (1-q)·#{x < c} by Δu = 1-q for every c > 0: the plateau drops to -Δu (coins
    λ = e^{-eps/2}) while candidate 2 rises from -Δu to 0 (coin λ -> 1). Its probability goes
    from λ/(M+1) to about 1/(1 + λM): a ratio approaching 1/λ² = e^{eps} as the plateau widens.
    Mirrored for q > 1/2.
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
    eps, top = 1.0, 1000
    mech = QuantileMechanism(eps, q, 0, top, ci_share=Fraction(1, 4))
    cands = mech.candidates
    assert len(cands) == top + 1
    eps_sel = float(mech.select_epsilon)
    d, d2 = adversarial_pair(q, top)
    p = pf_quantile_probs(np.array(d), cands, q, eps_sel)
    p2 = pf_quantile_probs(np.array(d2), cands, q, eps_sel)
    # The mechanism's own law equals the one computed from the rows.
    eq, gap = mech.bin_counts(np.array(d))
    assert np.allclose(mech._selection_probabilities(eq, gap)[0], p, rtol=1e-9, atol=0)
    sel_loss = max_loss(np.log(p), np.log(p2))
    assert sel_loss <= eps_sel + TOL
    assert sel_loss >= 0.99 * eps_sel

    # The coarse histogram: the neighbours' bins differ by exactly 1 in one bin (L1 = 1),
    # so discrete Laplace noise of scale 1/eps_ci on every (integer) bin loses at most
    # eps_ci, attained in the tails.
    bins = mech._coarse_bins(*mech.bin_counts(np.array(d)))[0]
    bins2 = mech._coarse_bins(*mech.bin_counts(np.array(d2)))[0]
    assert np.abs(bins - bins2).sum() == 1 and bins.dtype.kind == "i"
    assert mech.ci_noise.b == 1 / mech.ci_epsilon
    i = int(np.argmax(bins != bins2))
    hist_loss = dlaplace_loss(int(bins[i]), int(bins2[i]), mech.ci_noise.b)
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
        p = pf_quantile_probs(d, mech.candidates, q, eps)
        p2 = pf_quantile_probs(np.append(d, extra), mech.candidates, q, eps)
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
        assert np.allclose(p, pf_quantile_probs(d, mech.candidates, q, eps), rtol=1e-9, atol=0)
        assert max_loss(np.log(p), np.log(p2)) <= eps + TOL


def test_quantile_exponents_are_exact_rationals():
    # q = 3/10: integer scores -|7·L - 3·G|, sensitivity M = 7; eps_sel = 3/4·(2/5) = 3/10.
    mech = QuantileMechanism(Fraction(2, 5), Fraction(3, 10), 0, 20, ci_share=Fraction(1, 4))
    assert (mech._pf_mult, mech._pf_den) == (3, 2 * 7 * 10)
    # A q with a huge denominator is used to 2^-24; an epsilon with one is rounded down.
    eps = Fraction(10**20 + 1, 3 * 10**20)
    odd = QuantileMechanism(eps, 1 / 3, 0, 20, ci_share=0)
    assert odd._q_pf.denominator <= 2**24 and abs(odd._q_pf - Fraction(1, 3)) <= Fraction(1, 2**25)
    assert odd._pf_den <= 2**56 and eps - Fraction(1, 2**30) < odd._pf_eps <= eps


# -- argmax: monotone permute-and-flip -------------------------------------------------------
def pf_argmax_probs(counts: np.ndarray, eps: float) -> np.ndarray:
    return pf_probs(np.minimum(eps * (counts.max() - counts), 64.0 + math.ceil(eps)))


@pytest.mark.parametrize("eps", [0.1, 1.0, 2.0])
def test_argmax_loss_is_tight(eps: float):
    mech = ArgmaxMechanism(eps, 3)
    counts = np.array([0, round(50 / eps), round(50 / eps)])  # the low candidate gains a row
    counts2 = counts + np.array([1, 0, 0])
    p = mech._selection_probabilities(counts)[0]
    p2 = mech._selection_probabilities(counts2)[0]
    assert np.allclose(p, pf_argmax_probs(counts, eps), rtol=1e-9, atol=0)
    loss = max_loss(np.log(p), np.log(p2))
    assert loss <= eps + TOL
    assert loss >= 0.99 * eps  # case (a) of the proof: P(t) grows by exactly e^eps


def test_argmax_loss_random_neighbours():
    # Both cases of the proof: a non-maximal count gains a row, or a maximal one (ties too).
    eps = 0.6
    mech = ArgmaxMechanism(eps, 5)
    rng = np.random.default_rng(9)
    worst = 0.0
    for _ in range(500):
        counts = rng.integers(0, 6, size=5)
        counts2 = counts.copy()
        counts2[rng.integers(0, 5)] += 1
        p = mech._selection_probabilities(counts)[0]
        p2 = mech._selection_probabilities(counts2)[0]
        assert np.allclose(p, pf_argmax_probs(counts, eps), rtol=1e-9, atol=0)
        worst = max(worst, max_loss(np.log(p), np.log(p2)))
    assert eps * 0.99 <= worst <= eps + TOL


def test_argmax_clip_keeps_the_bound():
    # Gaps far beyond the clip: the clipped coins still give at most epsilon.
    eps = 3.0
    mech = ArgmaxMechanism(eps, 4)
    for counts in ([0, 500, 1000, 1000], [999, 1000, 0, 40], [1000, 1000, 1000, 0]):
        c = np.array(counts)
        for t in range(4):
            c2 = c.copy()
            c2[t] += 1
            p = mech._selection_probabilities(c)[0]
            p2 = mech._selection_probabilities(c2)[0]
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


def test_continuous_gaussian_charge_is_kept_for_the_continuous_mechanism():
    charge = GaussianCharge(1, 1e-6, 1, gaussian_sigma(1, 1, 1e-6))
    assert not isinstance(charge, DiscreteGaussianCharge)
    assert charge.at(2).delta < DiscreteGaussianCharge(1, 1e-6, 1, charge.sigma).at(2).delta


# -- the discrete Gaussian ------------------------------------------------------------------
mp.mp.dps = 60


def mp_dg_delta(sigma2: Fraction, eps: object, mu: int) -> object:
    """Σ_y max(0, p(y) - e^eps·p(y + mu)) for p = N_Z(0, sigma2), term by term (60 digits).

    The hockey-stick divergence between the output laws at answers k and k + mu, from the pmf
    itself (not from Theorem 7's closed form); |y| <= mu + 40σ + 10 holds all but e^-800 of
    the mass.
    """
    with mp.workdps(60):
        s2 = mp.mpf(sigma2.numerator) / sigma2.denominator
        e = mp.mpf(Fraction(eps).numerator) / Fraction(eps).denominator
        top = mu + int(40 * mp.sqrt(s2)) + 10
        w = {y: mp.exp(-(mp.mpf(y) ** 2) / (2 * s2)) for y in range(-top, top + mu + 1)}
        z = mp.fsum(w[y] for y in range(-top, top + 1))
        ee = mp.exp(e)
        return mp.fsum(max(mp.mpf(0), w[y] - ee * w[y + mu]) for y in range(-top, top + 1)) / z


@pytest.mark.parametrize(
    ("eps", "delta"),
    [
        (Fraction(4, 5), Fraction(1, 10**5)),
        (1, Fraction(1, 10**6)),
        (Fraction(1, 10), Fraction(1, 10**3)),
        (3, Fraction(1, 10**9)),
        (Fraction(1, 3), Fraction(1, 10**7)),
    ],
)
def test_discrete_gaussian_count_meets_delta_and_is_tight(eps, delta):
    mech = CountMechanism(eps, delta=delta)
    s2 = mech.noise.sigma2
    assert s2 == discrete_gaussian_sigma2(eps, delta)
    # Valid: the hockey-stick divergence between the laws at counts k and k + 1.
    assert mp_dg_delta(s2, eps, 1) <= delta
    # Tight: one part in a million less variance violates it (the bisection stops at 2^-30).
    assert mp_dg_delta(s2 * (1 - Fraction(1, 10**6)), eps, 1) > delta
    # The count charge is exactly what was asked at stability 1.
    assert mech.charge.at(1).epsilon == eps and mech.charge.at(1).delta == delta


def test_the_continuous_calibration_does_not_carry_over():
    # At the analytic Gaussian's sigma for (1, 1e-6), the discrete Gaussian misses delta.
    sc = Fraction(gaussian_sigma(1, 1, 1e-6))
    assert mp_dg_delta(sc * sc, 1, 1) > Fraction(1, 10**6)
    assert discrete_gaussian_sigma2(1, Fraction(1, 10**6)) > sc * sc


@pytest.mark.parametrize("s2", [Fraction(1, 3), Fraction(1), Fraction(16), Fraction(179, 10)])
@pytest.mark.parametrize("eps", [0, Fraction(1, 10), 1, 3])
@pytest.mark.parametrize("mu", [1, 2, 5])
def test_discrete_gaussian_delta_is_a_tight_upper_bound(s2, eps, mu):
    exact = mp_dg_delta(s2, eps, mu)
    got = discrete_gaussian_delta(s2, eps, mu)
    if exact < mp.mpf("1e-300"):
        assert got <= 1e-300
        return
    assert got >= exact
    if got < 1.0:
        assert got <= exact * (1 + mp.mpf("1e-9"))


def test_smaller_shifts_are_covered():
    # delta is non-decreasing in the integer shift (proved in discrete_gaussian_delta).
    for s2 in (Fraction(1, 2), Fraction(4), Fraction(30)):
        for eps in (0, Fraction(1, 4), 1, 2):
            deltas = [mp_dg_delta(s2, eps, mu) for mu in range(1, 9)]
            assert all(a <= b for a, b in itertools.pairwise(deltas))


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize(
    ("eps", "delta"), [(1, Fraction(1, 10**6)), (Fraction(3, 10), Fraction(1, 10**5))]
)
def test_discrete_gaussian_group_privacy_delta(k: int, eps, delta):
    mech = CountMechanism(eps, delta=delta)
    cost = mech.charge.at(k)
    assert cost.epsilon == k * Fraction(eps)
    exact = mp_dg_delta(mech.noise.sigma2, k * Fraction(eps), k)  # k rows move a count by k
    assert exact <= cost.delta <= exact * (1 + mp.mpf("1e-6"))
    # Tighter than the generic group bound k·e^{(k-1)eps}·delta.
    assert cost.delta < k * math.exp((k - 1) * float(eps)) * float(delta)


def lattice_dg_delta(sigma2: Fraction, eps: Fraction, shift: int) -> float:
    """The hockey-stick divergence of N_Z(0, sigma2) vs N_Z(shift, sigma2) in float64.

    Each term is p(y)·(1 - e^{eps - L(y)}) with L(y) = (shift² + 2y·shift)/(2σ²) the privacy
    loss, summed where L > eps: no cancellation, so float64 is accurate to ~1e-12 here.
    """
    s2 = float(sigma2)
    sigma = math.sqrt(s2)
    y = np.arange(-math.ceil(40 * sigma) - shift, math.ceil(40 * sigma) + 1, dtype=np.float64)
    logw = -(y * y) / (2 * s2)
    log_z = np.log(np.exp(logw).sum())
    loss = (shift * shift + 2 * y * shift) / (2 * s2)
    pos = loss > float(eps)
    return float((np.exp(logw[pos] - log_z) * -np.expm1(float(eps) - loss[pos])).sum())


@pytest.mark.parametrize(
    ("eps", "delta"), [(Fraction(1), Fraction(1, 10**6)), (Fraction(1, 4), Fraction(1, 10**5))]
)
def test_lattice_gaussian_meets_delta(eps, delta):
    # A sum's snapped answer moves by at most S = ceil(Δ/g) + 1 grid units; by monotonicity
    # in the shift (test_smaller_shifts_are_covered) the worst pair is at S.
    for mech, parts in (
        (SumMechanism(eps, 0, 10, delta=delta), 1),
        (MeanMechanism(eps, 0, 10, delta=delta), 2),
    ):
        noise = mech.noise if parts == 1 else mech.sum_noise
        sens = Fraction(10) if parts == 1 else Fraction(5)
        g, s2 = noise.grid, noise.unit.sigma2
        shift = math.ceil(sens / g) + 1
        exact = lattice_dg_delta(s2, eps / parts, shift)
        assert exact <= float(delta / parts)
        assert exact >= 0.01 * float(delta / parts)  # zCDP is conservative, not absurdly so
