"""Exact samplers and lattice releases: distributions, limits, vectorization, low-order bits.

Statistical tests run at fixed seeds (``SeededSource(seed)`` passed as ``source=``), so they are
deterministic; the thresholds below say how unlikely a failure would be for a correct sampler
at a fresh seed.

* Frequencies. For ``N`` independent Bernoulli(p) draws the frequency ``f`` has mean ``p`` and
  standard error ``se = sqrt(p(1-p)/N)``; by the central limit theorem ``|f - p| > 5·se`` has
  probability about ``5.7e-7`` (``N·p >= 100`` everywhere below, so the normal approximation
  is sound).
* Goodness of fit. Counts per value are compared with ``N·pmf`` by Pearson's chi-square, tails
  pooled until every expected count is at least 5; the fit is rejected when the p-value (from
  ``scipy.stats.chi2``) is below ``1e-4``.
* Moments. A sample variance of ``N`` draws has standard error ``sqrt((mu4 - var²)/N)`` with
  ``mu4`` the fourth central moment (computed from the exact pmf); we allow 5 of those.
"""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from pinqpy import testing
from pinqpy.errors import PinqError
from pinqpy.noise import lattice_release as L
from pinqpy.noise import source as _noise
from pinqpy.noise.lattice_release import (
    grid_for,
    grid_for_gaussian,
    lattice_gaussian,
    lattice_laplace,
)
from pinqpy.noise.samplers import _bits as B
from pinqpy.noise.samplers import bernoulli as E
from pinqpy.noise.samplers import (
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    round_up_dyadic,
    uniform_below,
)
from pinqpy.noise.samplers import gaussian as G
from pinqpy.noise.samplers import laplace as LAP
from pinqpy.noise.source import SecureSource, SeededSource

P_MIN = 1e-4  # reject a goodness-of-fit test below this p-value
N = 200_000


# -- helpers ---------------------------------------------------------------------------------
def chisq_pvalue(samples: np.ndarray, xs: np.ndarray, pmf: np.ndarray) -> float:
    """Pearson chi-square p-value of integer ``samples`` against ``pmf`` on support ``xs``.

    ``xs`` is a contiguous range holding all but a negligible mass; values outside it are
    pooled into the end bins, and tails are pooled until every expected count is at least 5.
    """
    n = samples.size
    pmf = pmf / pmf.sum()
    lo, hi = int(xs[0]), int(xs[-1])
    counts = np.bincount(np.clip(samples, lo, hi) - lo, minlength=xs.size).astype(float)
    expected = n * pmf
    # The pmfs are unimodal: the values with expected count >= 5 form one run [first, last].
    # Everything left of the run is one bin, merged into the run's first value if still short
    # of 5 (likewise on the right).
    big = np.flatnonzero(expected >= 5)
    first, last = int(big[0]), int(big[-1])
    if expected[:first].sum() < 5:
        first += 1
    if expected[last + 1 :].sum() < 5:
        last -= 1
    edges = [(0, first), *((i, i + 1) for i in range(first, last + 1)), (last + 1, xs.size)]
    obs = np.array([counts[a:b].sum() for a, b in edges])
    exp = np.array([expected[a:b].sum() for a, b in edges])
    assert (exp >= 5).all() and obs.sum() == n
    stat = float(((obs - exp) ** 2 / exp).sum())
    return float(stats.chi2.sf(stat, df=obs.size - 1))


def binned_pvalue(samples: np.ndarray, xs: np.ndarray, pmf: np.ndarray, width: int) -> float:
    """:func:`chisq_pvalue` after grouping the support into runs of ``width`` values."""
    starts = np.arange(0, xs.size, width)
    bin_pmf = np.add.reduceat(pmf / pmf.sum(), starts)
    bins = (np.clip(samples, xs[0], xs[-1]) - xs[0]) // width
    return chisq_pvalue(bins, np.arange(starts.size), bin_pmf)


def laplace_pmf(scale: Fraction, xs: np.ndarray) -> np.ndarray:
    q = math.exp(-1 / float(scale))
    return (1 - q) / (1 + q) * q ** np.abs(xs).astype(float)


def gaussian_pmf(sigma2: Fraction, xs: np.ndarray) -> np.ndarray:
    w = np.exp(-(xs.astype(float) ** 2) / (2 * float(sigma2)))
    return w / w.sum()


def check_moments(samples: np.ndarray, xs: np.ndarray, pmf: np.ndarray) -> None:
    """Mean 0, exact variance, and symmetric signs, each within 5 standard errors."""
    pmf = pmf / pmf.sum()
    x = xs.astype(float)
    var = float((pmf * x**2).sum())
    mu4 = float((pmf * x**4).sum())
    n = samples.size
    s = samples.astype(float)
    assert abs(s.mean()) <= 5 * math.sqrt(var / n)
    assert abs(float((s**2).mean()) - var) <= 5 * math.sqrt((mu4 - var**2) / n)
    pos, neg = int((samples > 0).sum()), int((samples < 0).sum())
    if pos + neg:  # symmetry: given x != 0, the sign is a fair coin
        assert abs(pos - neg) <= 5 * math.sqrt(pos + neg)


# -- random bits ----------------------------------------------------------------------------
@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 32, 33, 62, 64])
def test_chunks_are_uniform_bits(width):
    bits = B._Bits(SeededSource(width))
    m = 50_000
    c = bits.chunks(m, width)
    assert c.size == m
    assert int(c.max()) < 2**width
    for b in {0, width // 2, width - 1}:
        ones = int(((c.astype(np.uint64) >> np.uint64(b)) & np.uint64(1)).sum())
        assert abs(ones - m / 2) <= 5 * math.sqrt(m / 4)


def test_bits_count_words_drawn():
    bits = B._Bits(SeededSource(0))
    bits.chunks(64, 1)
    bits.chunks(3, 20)
    assert bits.nbytes == 8 + 12 and bits.words == 2.5


# -- uniform_below ----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 3, 7, 10, 100, 1000])
def test_uniform_below_chi_square(n):
    x = uniform_below(n, N, source=SeededSource(n))
    assert x.dtype == np.int64 and x.shape == (N,)
    assert int(x.min()) >= 0 and int(x.max()) < n
    counts = np.bincount(x, minlength=n)
    assert stats.chisquare(counts).pvalue > P_MIN


def test_uniform_below_per_sample_bounds():
    bounds = np.tile(np.arange(1, 201, dtype=np.int64), 1000)
    x = uniform_below(bounds, source=SeededSource(1))
    assert x.shape == bounds.shape
    assert (x >= 0).all() and (x < bounds).all()
    assert (x[bounds == 1] == 0).all()
    for n in (6, 37, 200):  # each bound's samples are uniform on their own range
        counts = np.bincount(x[bounds == n], minlength=n)
        assert stats.chisquare(counts).pvalue > P_MIN


def test_uniform_below_extremes_and_shapes():
    big = [2**62, 2**62 - 1, 3 * 2**60 + 1, 2**61 + 1]
    for n in big:
        x = uniform_below(n, 10_000, source=SeededSource(2))
        assert (x >= 0).all() and (x < n).all()
        # the top bit of [0, n) is used: about half of the values lie above n/2 or so
        assert (x >= n // 4).mean() > 0.6
    assert (uniform_below(1, 5, source=SeededSource(0)) == 0).all()
    assert uniform_below(4, (3, 4), source=SeededSource(0)).shape == (3, 4)
    mixed = uniform_below(np.array([[1, 2**62], [3, 2**40]]), source=SeededSource(0))
    assert mixed.shape == (2, 2) and (mixed < [[1, 2**62], [3, 2**40]]).all()
    assert uniform_below(5, 0, source=SeededSource(0)).shape == (0,)


@pytest.mark.parametrize("bad", [0, -3, 2**62 + 1, np.array([1, 0]), 1.5])
def test_uniform_below_rejects_bad_bounds(bad):
    with pytest.raises(PinqError):
        uniform_below(bad, 3, source=SeededSource(0))


def test_uniform_below_needs_a_size():
    with pytest.raises(PinqError):
        uniform_below(5)
    with pytest.raises(PinqError):
        uniform_below(np.array([2, 3]), 5)


# -- bernoulli_exp ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("num", "den"), [(0, 1), (1, 3), (1, 1), (5, 2), (7, 1), (2**61, 3 * 2**60), (7 * 2**58, 2**58)]
)
def test_bernoulli_exp_frequency(num, den):
    """Frequency within 5 standard errors of exp(-num/den) (the last two force den·K > 2**62)."""
    gamma = Fraction(num, den)
    x = bernoulli_exp(num, den, N, source=SeededSource(num % 1000 + den % 1000))
    assert x.dtype == np.bool_ and x.shape == (N,)
    p = math.exp(-float(gamma))
    if gamma == 0:
        assert x.all()
        return
    se = math.sqrt(p * (1 - p) / N)
    assert abs(float(x.mean()) - p) <= 5 * se


def test_bernoulli_exp_per_sample_rationals():
    gammas = [(0, 1), (1, 3), (1, 1), (5, 2), (3, 1)]
    num = np.repeat(np.array([g[0] for g in gammas], dtype=np.int64), 60_000)
    den = np.repeat(np.array([g[1] for g in gammas], dtype=np.int64), 60_000)
    x = bernoulli_exp(num, den, source=SeededSource(9))
    for i, (a, b) in enumerate(gammas):
        f = float(x[i * 60_000 : (i + 1) * 60_000].mean())
        p = math.exp(-a / b)
        assert abs(f - p) <= 5 * math.sqrt(p * (1 - p) / 60_000) + 1e-12


def test_bernoulli_exp_huge_gamma_is_false_and_terminates():
    bits = B._Bits(SeededSource(4))
    out = E._bern_exp_split(bits, B._COUNT_CLAMP, 0, 1, 100_000)
    assert not out.any()
    assert bits.rounds < 100  # survivors fall by a factor e per round
    assert not bernoulli_exp(2**63 - 1, 1, 1000, source=SeededSource(4)).any()


def test_bernoulli_exp1_and_geometric():
    bits = B._Bits(SeededSource(5))
    b = E._bern_exp1(bits, N)
    p = math.exp(-1)
    assert abs(float(b.mean()) - p) <= 5 * math.sqrt(p * (1 - p) / N)
    v = E._geometric_exp1(bits, N)  # P(V >= k) = e^-k
    for k in (1, 2, 4):
        pk = math.exp(-k)
        assert abs(float((v >= k).mean()) - pk) <= 5 * math.sqrt(pk * (1 - pk) / N)


def test_small_batches_look_ahead_with_the_same_law():
    """Below B._AHEAD_MAX live samples, the geometric loop and the redraws of _bern_below take
    several candidates a round; many small batches must give the laws of one big one."""
    assert B._AHEAD > 1 and B._AHEAD_MAX > 50
    bits = B._Bits(SeededSource(6))
    v = np.concatenate([E._geometric_exp1(bits, 50) for _ in range(N // 50)])
    for k in (1, 2, 4, 6):
        pk = math.exp(-k)
        assert abs(float((v >= k).mean()) - pk) <= 5 * math.sqrt(pk * (1 - pk) / N)
    # n = 40 is not a power of two, so a quarter of the chunks are redrawn: [c < 13] for c
    # uniform on [0, 40) is Bernoulli(13/40).
    b = np.concatenate([B._bern_below(bits, 13, 40, 50) for _ in range(N // 50)])
    p = 13 / 40
    assert abs(float(b.mean()) - p) <= 5 * math.sqrt(p * (1 - p) / N)


@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(10, 3)])
def test_discrete_laplace_in_small_batches_matches_exact_pmf(scale):
    """A partition's few keys: 4,000 draws of 50 (one pilot round each) have the exact law."""
    src = SeededSource(12)
    x = np.concatenate([discrete_laplace(scale, 50, source=src) for _ in range(N // 50)])
    w = int(60 * float(scale)) + 10
    xs = np.arange(-w, w + 1)
    pmf = laplace_pmf(scale, xs)
    assert chisq_pvalue(x, xs, pmf) > P_MIN
    check_moments(x, xs, pmf)


def test_bernoulli_exp_table_is_algorithm_1():
    """The 5!-inversion table gives P(K > k) = 1/k! for k <= 5, as sequential trials would."""
    counts = E._E1_COUNT
    for k in range(1, 6):
        assert Fraction(int((counts >= k).sum()), 120) == Fraction(1, math.factorial(k))


@pytest.mark.parametrize(
    ("num", "den"), [(-1, 1), (1, 0), (1, 2**62 + 1), (2**63, 1), (np.array([1.5]), 1)]
)
def test_bernoulli_exp_rejects_bad_rationals(num, den):
    with pytest.raises(PinqError):
        bernoulli_exp(num, den, 4, source=SeededSource(0))


# -- discrete Laplace -------------------------------------------------------------------------
@pytest.mark.parametrize("scale", [Fraction(1, 2), Fraction(1), Fraction(10, 3), Fraction(25)])
def test_discrete_laplace_matches_exact_pmf(scale):
    x = discrete_laplace(scale, N, source=SeededSource(11))
    assert x.dtype == np.int64 and x.shape == (N,)
    w = int(60 * float(scale)) + 10  # mass beyond w is below e**-60
    xs = np.arange(-w, w + 1)
    pmf = laplace_pmf(scale, xs)
    assert chisq_pvalue(x, xs, pmf) > P_MIN
    check_moments(x, xs, pmf)
    # closed-form variance 2q/(1-q)**2 agrees with the pmf sum used above
    q = math.exp(-1 / float(scale))
    assert math.isclose(float((pmf * xs.astype(float) ** 2).sum()), 2 * q / (1 - q) ** 2)


def test_discrete_laplace_accepts_ints_floats_and_shapes():
    a = discrete_laplace(3, (4, 5), source=SeededSource(1))
    assert a.shape == (4, 5)
    b = discrete_laplace(0.5, 10, source=SeededSource(1))  # 0.5 read as 1/2
    c = discrete_laplace(Fraction(1, 2), 10, source=SeededSource(1))
    assert (b == c).all()
    assert discrete_laplace(2, 0, source=SeededSource(1)).shape == (0,)


def test_discrete_laplace_is_reproducible_and_uses_current_source():
    a = discrete_laplace(Fraction(10, 3), 1000, source=SeededSource(3))
    b = discrete_laplace(Fraction(10, 3), 1000, source=SeededSource(3))
    assert (a == b).all()
    with testing.seed(8):
        c = discrete_laplace(Fraction(10, 3), 1000)
    with testing.seed(8):
        d = discrete_laplace(Fraction(10, 3), 1000)
    assert (c == d).all()
    assert isinstance(_noise.current_source(), SecureSource)
    assert discrete_laplace(7, 100).shape == (100,)  # the secure default source


def test_discrete_laplace_large_scale_uses_python_ints_exactly():
    """t = 2**62 - 1: X = U + t·V overflows int64 when V >= 2, handled with Python ints."""
    scale = Fraction(2**62 - 1, 2**7)  # about 2**55
    x = discrete_laplace(scale, 20_000, source=SeededSource(12))
    assert x.dtype == np.int64
    mean_abs = float(np.abs(x.astype(float)).mean())
    # E|X| ~= scale for a large scale; the relative standard error is about 1/sqrt(20000)
    assert abs(mean_abs / float(scale) - 1) < 0.05
    assert (np.abs(x) > 2 * float(scale)).any()  # the overflowing branch was exercised


@pytest.mark.parametrize(
    "scale", [0, -1, Fraction(2**57), Fraction(1, 2**63), Fraction(2**62 + 1, 2**20)]
)
def test_discrete_laplace_rejects_bad_scales(scale):
    with pytest.raises(PinqError):
        discrete_laplace(scale, 3, source=SeededSource(0))


def test_discrete_laplace_vectorized_rounds_are_few():
    """200,000 samples run a few hundred vectorized rounds in all, not 200,000 iterations."""
    x, bits = LAP._discrete_laplace_stats(Fraction(10, 3), 200_000, SeededSource(13))
    assert x.shape == (200_000,)
    assert bits.rounds < 1_000
    assert bits.words < 200_000  # packed bits: well under one 64-bit word per sample


# -- discrete Gaussian ------------------------------------------------------------------------
SIGMA2 = [Fraction(1, 4), Fraction(1), Fraction(10), Fraction(400)]


@pytest.mark.parametrize("sigma2", SIGMA2)
def test_discrete_gaussian_matches_exact_pmf(sigma2):
    x = discrete_gaussian(sigma2, N, source=SeededSource(21))
    assert x.dtype == np.int64 and x.shape == (N,)
    w = int(40 * math.sqrt(float(sigma2))) + 10  # mass beyond w is below e**-800
    xs = np.arange(-w, w + 1)
    pmf = gaussian_pmf(sigma2, xs)
    assert chisq_pvalue(x, xs, pmf) > P_MIN
    check_moments(x, xs, pmf)


@pytest.mark.parametrize("sigma2", [*SIGMA2[1:], Fraction(1, 2), Fraction(7, 3)])
def test_discrete_gaussian_path_b_matches_exact_pmf(sigma2):
    """The three-factor acceptance test (used for large sigma) has the same law."""
    x, _ = G._discrete_gaussian_stats(sigma2, N, SeededSource(22), path="B")
    w = int(40 * math.sqrt(float(sigma2))) + 10
    xs = np.arange(-w, w + 1)
    pmf = gaussian_pmf(sigma2, xs)
    assert chisq_pvalue(x, xs, pmf) > P_MIN
    check_moments(x, xs, pmf)


def binned_normal_pvalue(x: np.ndarray, sigma: float, nbins: int = 40) -> float:
    """Chi-square of ``x`` in equiprobable-ish bins of a normal law (huge-sigma regime).

    For sigma in the thousands the discrete Gaussian's mass on an integer interval equals the
    normal mass of the interval widened by 1/2 at both ends up to relative error far below
    1e-9 (Euler-Maclaurin / Poisson summation), so the normal CDF gives the expected counts.
    """
    edges = np.round(stats.norm.ppf(np.linspace(0, 1, nbins + 1)[1:-1]) * sigma).astype(np.int64)
    cdf = stats.norm.cdf((edges + 0.5) / sigma)  # P(X <= edge)
    probs = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    idx = np.searchsorted(edges, x, side="left")  # bin i holds edges[i-1] < x <= edges[i]
    counts = np.bincount(idx, minlength=nbins)
    return float(stats.chisquare(counts, probs * x.size).pvalue)


def test_discrete_gaussian_large_sigma_path_b_and_overflow_fallback():
    big = Fraction(2**36)  # sigma = 2**18: 2·a·b·t² > 2**62, so path B is chosen
    assert G._GaussPlan(big).path == "B"
    x = discrete_gaussian(big, 50_000, source=SeededSource(23))
    assert binned_normal_pvalue(x, 2.0**18) > P_MIN
    # Path A near its limit: |Y| > about 6.6 t takes the Python-int branch (~0.1% of draws).
    s2 = Fraction(2**29)
    plan = G._GaussPlan(s2)
    assert plan.path == "A" and (plan.a + B._SQRT_I64) // plan.bt < 7 * plan.t
    y = discrete_gaussian(s2, 100_000, source=SeededSource(24))
    assert binned_normal_pvalue(y, 2.0**14.5) > P_MIN


def test_gaussian_acceptance_fallbacks_handle_huge_y():
    bits = B._Bits(SeededSource(25))
    huge = np.array([0, 3, 10**15, 2**62], dtype=np.int64)
    for plan in (G._GaussPlan(Fraction(10)), G._GaussPlan(Fraction(10), "B")):
        acc = G._accept_a(bits, plan, huge) if plan.path == "A" else G._accept_b(bits, plan, huge)
        assert not acc[2:].any()  # gamma astronomically large: never accepted
    q, r = G._divmod_obj(np.array([10**30, 7], dtype=object), 10**6)
    assert q.tolist() == [B._COUNT_CLAMP, 0] and r.tolist() == [0, 7]


def test_discrete_gaussian_limits():
    with pytest.raises(PinqError):
        discrete_gaussian(0, 3, source=SeededSource(0))
    with pytest.raises(PinqError):
        discrete_gaussian(Fraction(2**50), 3, source=SeededSource(0))  # sigma = 2**25
    with pytest.raises(PinqError):  # sigma² < 1/2 with a huge denominator
        discrete_gaussian(Fraction(2**70 + 1, 2**72), 3, source=SeededSource(0))
    # ... which rounding up to a bounded denominator fixes
    ok = round_up_dyadic(Fraction(2**70 + 1, 2**72), 20)
    assert ok >= Fraction(2**70 + 1, 2**72)
    assert discrete_gaussian(ok, 3, source=SeededSource(0)).shape == (3,)


def test_float_math_is_not_on_the_sampling_path(monkeypatch):
    """No exp/log/sqrt (numpy or math) is called while sampling."""

    def boom(*args, **kwargs):
        raise AssertionError("floating-point transcendental on the sampling path")

    for name in ("exp", "log", "sqrt", "expm1", "log1p", "power"):
        monkeypatch.setattr(np, name, boom)
    for name in ("exp", "log", "sqrt", "log2", "pow"):
        monkeypatch.setattr(math, name, boom)
    src = SeededSource(0)
    discrete_laplace(Fraction(10, 3), 5000, source=src)
    discrete_gaussian(Fraction(10), 5000, source=src)
    G._discrete_gaussian_stats(Fraction(10), 5000, src, path="B")
    bernoulli_exp(np.arange(100), 7, source=src)
    lattice_laplace(np.arange(50) * 0.1, 1, Fraction(1, 2), source=src)
    lattice_gaussian(np.arange(50) * 0.1, 1, 3, source=src)


# -- parameter rounding ---------------------------------------------------------------------
@given(
    st.fractions(min_value=Fraction(1, 10**9), max_value=10**9),
    st.integers(min_value=0, max_value=40),
)
@settings(max_examples=200, deadline=None)
def test_round_up_dyadic_only_rounds_up(x, bits):
    y = round_up_dyadic(x, bits)
    assert y >= x and y - x < Fraction(1, 2**bits)
    assert y == x or y.denominator <= 2**bits


# -- lattice releases -----------------------------------------------------------------------
def on_lattice(out: np.ndarray, g: Fraction) -> bool:
    """Whether every output is an exact integer multiple of the power of two ``g``."""
    k = g.numerator.bit_length() - 1 if g >= 1 else -(g.denominator.bit_length() - 1)
    assert Fraction(2) ** k == g
    units = np.ldexp(out, -k)  # exact: only the exponent moves
    return bool((units == np.rint(units)).all())


def test_grid_depends_only_on_public_parameters():
    assert grid_for(1, Fraction(1, 2)) == Fraction(1, 1024)
    assert grid_for(20, Fraction(1, 2)) == Fraction(1, 64)  # 20/1024 = 0.0195 >= 1/64
    assert grid_for(100, 4) == Fraction(1, 64)  # min(100, 25) / 1024 = 0.0244
    assert grid_for(1, 1, bits=0) == 1
    g = grid_for(Fraction(3, 7), Fraction(1, 10), bits=12)
    assert g <= Fraction(3, 7) / 2**12 < 2 * g  # the largest power of two below
    gs = {
        lattice_laplace(v, 20, Fraction(1, 2), source=SeededSource(0))[1]
        for v in ([0.0], [1e9], [-3.25, 7.5], np.linspace(0, 1, 100))
    }
    assert gs == {grid_for(20, Fraction(1, 2))}


def test_lattice_laplace_neighbours_land_on_one_lattice():
    """Two neighbouring sums released many times: every output on the same g·Z, g identical."""
    sens, eps = Fraction(20), Fraction(1, 2)
    reps = 20_000
    a = np.full(reps, 1234.56789)
    b = np.full(reps, 1234.56789 + 17.25)
    out_a, g_a, unit_a = lattice_laplace(a, sens, eps, source=SeededSource(31))
    out_b, g_b, unit_b = lattice_laplace(b, sens, eps, source=SeededSource(32))
    assert g_a == g_b == grid_for(sens, eps) and unit_a == unit_b
    assert on_lattice(out_a, g_a) and on_lattice(out_b, g_b)
    # the residues modulo g are all zero for both datasets: nothing to tell them apart by
    assert set(np.unique(np.fmod(out_a, float(g_a)))) <= {0.0}
    assert set(np.unique(np.fmod(out_b, float(g_b)))) <= {0.0}
    # The noise is discrete Laplace with the reported scale, in grid units.
    snapped = round(Fraction(1234.56789) / g_a)
    units = np.ldexp(out_a, g_a.denominator.bit_length() - 1).astype(np.int64) - snapped
    w = int(40 * float(unit_a))
    xs = np.arange(-w, w + 1)
    pmf = laplace_pmf(unit_a, xs)
    assert binned_pvalue(units, xs, pmf, 64) > P_MIN
    check_moments(units, xs, pmf)
    # sensitivity in grid units S = ceil(20 / g) + 1, scale S / eps
    assert unit_a == Fraction(math.ceil(sens / g_a) + 1) / eps


def test_float_laplace_outputs_are_not_on_a_lattice():
    """Motivation: the float Laplace in _noise leaves data-dependent low-order bits."""
    g = grid_for(20, Fraction(1, 2))
    src = SeededSource(33)
    for x in (1234.56789, 1234.56789 + 17.25):
        out = x + src.laplace(10_000, scale=40.0)
        units = out / float(g)
        off = units != np.rint(units)
        assert off.mean() > 0.99  # almost no output is a multiple of g
    # and the low bits of x + noise depend on x: the residues mod g differ between datasets
    r1 = np.fmod(1234.56789 + src.laplace(10_000, 40.0), float(g))
    r2 = np.fmod(1234.56789 + 17.25 + src.laplace(10_000, 40.0), float(g))
    assert np.unique(r1).size > 100 and np.unique(r2).size > 100


def test_snap_rounds_half_to_even_exactly():
    k = -10
    g = 2.0**k
    vals = np.array([2.5 * g, 3.5 * g, -2.5 * g, 0.4999 * g, 1e-300, -0.0, 2.0**61 * g])
    out, _ = L._snap(vals, k)
    assert out.tolist() == [2, 4, -2, 0, 0, 0, 2**61]
    # Beyond the lattice's range values saturate (1-Lipschitz), never raise: _snap runs after
    # the charge. NaN (unreachable from clamped inputs) reads as 0.
    c = int(L.SATURATION_STEPS)
    big = np.array([2.0**62 * g, -(2.0**62) * g, np.inf, -np.inf, np.nan, 1e308])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, _ = L._snap(big, k)
    assert out.tolist() == [c, -c, c, -c, 0, c]
    assert c < 2**62


@given(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    st.floats(min_value=0, max_value=1),
    st.sampled_from([Fraction(1), Fraction(20), Fraction(3, 7), Fraction(1000)]),
    st.sampled_from([Fraction(1, 10), Fraction(1), Fraction(3)]),
)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_snapping_adds_at_most_one_grid_step(x, frac, sens, eps):
    """|v - v'| <= Δ implies |round(v/g) - round(v'/g)| <= floor(Δ/g) + 1 <= S."""
    g = grid_for(sens, eps)
    k = g.numerator.bit_length() - 1 if g >= 1 else -(g.denominator.bit_length() - 1)
    y = x + float(sens) * frac
    if Fraction(abs(y - x)) > sens:  # float rounding of x + Δ·frac may overshoot
        return
    a, _ = L._snap(np.array([x]), k)
    b, _ = L._snap(np.array([y]), k)
    diff = abs(int(a[0]) - int(b[0]))
    assert diff <= math.floor(sens / g) + 1 <= L._units_sensitivity(sens, g)


def test_lattice_laplace_shapes_no_noise_and_errors():
    v = np.arange(6, dtype=float).reshape(2, 3) * 0.3
    out, g, _ = lattice_laplace(v, 1, 1, source=SeededSource(0))
    assert out.shape == (2, 3) and on_lattice(out, g)
    with testing.no_noise():
        exact, g2, _ = lattice_laplace(v, 1, 1)
    assert (exact == v).all() and g2 == g
    # Values beyond the lattice's range saturate instead of raising (this runs after a
    # charge): the release stays a lattice point at most SATURATION_STEPS steps plus noise.
    with testing.seed(0):
        big, g3, unit = lattice_laplace([1e30, -np.inf, float("nan")], 1, 1)
    assert on_lattice(big, g3) and np.isfinite(big).all()
    top = L.SATURATION_STEPS * float(g3)
    assert abs(big[0] - top) < 60 * float(unit * g3) and abs(big[1] + top) < 60 * float(unit * g3)
    with pytest.raises(PinqError):
        lattice_laplace([1.0], 0, 1)
    with pytest.raises(PinqError):
        lattice_laplace([1.0], 1, -1)
    with pytest.raises(PinqError):
        lattice_laplace([1.0], Fraction(1, 2**1100), 1)  # grid below the doubles' range


def test_lattice_laplace_rounds_awkward_scales_up():
    eps = Fraction(10**20 + 1, 3 * 10**20)  # S/eps has a huge numerator and denominator
    out, g, unit = lattice_laplace([5.0, 6.0], 1, eps, source=SeededSource(0))
    exact = Fraction(math.ceil(1 / g) + 1) / eps
    assert unit >= exact and unit - exact <= Fraction(1, 2**32)
    assert on_lattice(out, g)


def test_lattice_gaussian_neighbours_and_calibration():
    sens, sigma = Fraction(20), Fraction(53)
    a = np.full(10_000, 1234.56789)
    b = a + 17.25
    out_a, g_a, s2_a = lattice_gaussian(a, sens, sigma, source=SeededSource(41))
    out_b, g_b, s2_b = lattice_gaussian(b, sens, sigma, source=SeededSource(42))
    assert g_a == g_b == grid_for_gaussian(sens, sigma) and s2_a == s2_b
    assert on_lattice(out_a, g_a) and on_lattice(out_b, g_b)
    su = math.ceil(sens / g_a) + 1
    # zCDP: rho = S²/(2 σ_u²) is no more than the caller's Δ²/(2σ²)
    assert Fraction(su * su) / (2 * s2_a) <= sens * sens / (2 * sigma * sigma)
    # and the real-valued noise is only slightly wider than sigma
    sd = float(np.std(out_a - float(round(Fraction(1234.56789) / g_a) * g_a)))
    assert abs(sd / float(sigma) - 1) < 0.05


def test_grid_for_gaussian_coarsens_for_huge_sigma():
    g = grid_for_gaussian(1, 5)
    assert g == Fraction(1, 1024)
    g_big = grid_for_gaussian(1, 5000)  # sigma/Δ large: keep sigma/g <= 2**18
    assert Fraction(5000) / g_big <= 2**18 < 2 * Fraction(5000) / g_big
    assert g_big == Fraction(1, 32)
    out, g2, s2 = lattice_gaussian([0.0, 1.0], 1, 5000, source=SeededSource(0))
    assert g2 == g_big and on_lattice(out, g2)
    assert s2 >= (5000 * 33) ** 2  # S = 33 grid units: sigma inflated by 33/32 only
    with pytest.raises(PinqError):  # sigma/Δ = 10**6: no lattice keeps both within range
        lattice_gaussian([0.0], 1, 10**6, source=SeededSource(0))
    with testing.no_noise():
        exact, _, _ = lattice_gaussian([0.25], 1, 3)
    assert exact.tolist() == [0.25]


def test_lattice_release_refuses_absurd_noise():
    with pytest.raises(PinqError):
        L._release(np.array([0]), np.array([2**62]), 0, (1,))
