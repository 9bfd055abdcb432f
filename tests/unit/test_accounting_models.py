"""Accounting models (pinqpy.accounting.models): zCDP conversions and the pure/approx/zcdp
accountants.

zCDP composition figures agree with published worked examples, and every conversion is
checked against an independent high-precision evaluation (mpmath, 60 digits) of the formulas
in the papers -- never against pinqpy's own code.

References
----------
BS16  M. Bun, T. Steinke. "Concentrated Differential Privacy: Simplifications, Extensions, and
      Lower Bounds". TCC 2016-B; arXiv:1605.02065 (numbering of the arXiv version).
CKS20 C. Canonne, G. Kamath, T. Steinke. "The Discrete Gaussian for Differential Privacy".
      NeurIPS 2020; arXiv:2004.00010, Section 2.3 (conversion from concentrated DP).
OpenDP  The OpenDP library, ``rust/src/combinators/measure_cast/zCDP_to_approxDP/test.rs``,
      ``test_zCDP_to_approxDP_nontrivial`` (opendp 0.14.x on docs.rs): the Gaussian mechanism
      with scale 4 and sensitivity 1 (rho = 1/32) is (0.6880024554878086, 1e-3)-DP, and its
      delta at epsilon = 0 is 0.1508457845622862.
BW18  B. Balle, Y.-X. Wang. "Improving the Gaussian Mechanism for Differential Privacy".
      ICML 2018, Theorem 8 (the exact privacy profile of the Gaussian mechanism).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath as mp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pinqpy as pq
from pinqpy.accounting.charges import CompositeCharge, GaussianCharge, PureCharge, usage_of
from pinqpy.accounting.cost import Cost
from pinqpy.accounting.models import (
    ApproxAccountant,
    PureAccountant,
    Usage,
    ZcdpAccountant,
    accountant_for,
    gaussian_sigma_for_rho,
    rho_for,
    rho_of_gaussian,
    rho_of_pure,
    zcdp_delta,
    zcdp_epsilon,
    zcdp_epsilon_simple,
)
from pinqpy.noise.mechanisms import gaussian_sigma

# Engine-independent: every test runs on each engine (see the `engine` fixture).
pytestmark = pytest.mark.usefixtures("engine")

F = Fraction
DPS = 60


# -- independent references (mpmath, straight from the papers' formulas) --------------------
def _mpf(x: object) -> mp.mpf:
    if isinstance(x, mp.mpf):
        return x
    q = Fraction(x) if not isinstance(x, float) else Fraction(repr(x))
    return mp.mpf(q.numerator) / q.denominator


def _bisect(fun, lo, hi, n=400):
    """Bisection for an increasing ``fun`` with ``fun(lo) < 0 < fun(hi)``."""
    for _ in range(n):
        mid = (lo + hi) / 2
        if fun(mid) > 0:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def _ln1m(s):
    """ln(1 - 1/a) for a = 1 + s, written so nothing cancels for tiny s."""
    return mp.log(s) - mp.log1p(s)


def ref_epsilon(rho: object, delta: object) -> mp.mpf:
    """CKS20: inf over a > 1 of a·rho + (ln(1/delta) + (a-1)ln(1-1/a) - ln a)/(a-1), >= 0.

    The derivative in a has the sign of rho·(a-1)² + ln a - ln(1/delta), which increases
    from -ln(1/delta) to +inf: bisect it in t = ln(a - 1).
    """
    with mp.workdps(DPS):
        r, big_l = _mpf(rho), -mp.log(_mpf(delta))
        t = _bisect(
            lambda t: r * mp.exp(2 * t) + mp.log1p(mp.exp(t)) - big_l,
            mp.mpf(-3000),
            mp.log(mp.sqrt(big_l / r) + 1),
        )
        s = mp.exp(t)
        g = (1 + s) * r + (big_l + s * _ln1m(s) - mp.log1p(s)) / s
        return max(g, mp.mpf(0))


def ref_delta(rho: object, eps: object) -> mp.mpf:
    """CKS20: inf over a > 1 of exp((a-1)(a·rho - eps))/(a-1)·(1-1/a)^a, at most 1 (convex in a)."""
    with mp.workdps(DPS):
        r, e = _mpf(rho), _mpf(eps)
        t = _bisect(
            lambda t: (2 * mp.exp(t) + 1) * r - e + _ln1m(mp.exp(t)),
            mp.mpf(-3000),
            mp.log(max(mp.mpf(2), (e + 1) / (2 * r) + 2)),
        )
        s = mp.exp(t)
        f = s * ((1 + s) * r - e) + s * _ln1m(s) - mp.log1p(s)
        return min(mp.exp(f), mp.mpf(1))


def ref_rho_for(eps: object, delta: object) -> mp.mpf:
    """The largest rho with CKS20 epsilon <= eps, by a different route than bisection on rho.

    For each a the bound is a·rho + C(a), linear in rho, so ``inf_a bound <= eps`` exactly when
    ``rho <= sup_a (eps - C(a))/a``. Maximise over t = ln(a - 1) by golden section.
    """
    with mp.workdps(DPS):
        e, big_l = _mpf(eps), -mp.log(_mpf(delta))

        def phi(t):
            s = mp.exp(t)
            c = (big_l + s * _ln1m(s) - mp.log1p(s)) / s
            return (e - c) / (1 + s)

        lo, hi = mp.mpf(-60), mp.mpf(60)
        inv = (mp.sqrt(5) - 1) / 2
        for _ in range(300):
            m1, m2 = hi - inv * (hi - lo), lo + inv * (hi - lo)
            if phi(m1) < phi(m2):
                lo = m1
            else:
                hi = m2
        return phi((lo + hi) / 2)


def ref_gaussian_delta(eps: object, sigma: object, sens: object = 1) -> mp.mpf:
    """BW18 Theorem 8: Phi(D/(2s) - eps·s/D) - e^eps·Phi(-D/(2s) - eps·s/D)."""
    with mp.workdps(DPS):
        e, s, d = _mpf(eps), _mpf(Fraction(sigma)), _mpf(sens)
        return mp.ncdf(d / (2 * s) - e * s / d) - mp.exp(e) * mp.ncdf(-d / (2 * s) - e * s / d)


def ref_gaussian_epsilon(sigma: object, delta: object) -> mp.mpf:
    """The least epsilon of the BW18 profile at ``delta`` (sensitivity 1), by bisection."""
    with mp.workdps(DPS):
        target = _mpf(delta)
        return _bisect(lambda e: target - ref_gaussian_delta(e, sigma), mp.mpf(0), mp.mpf(200))


def assert_tight_upper(ours: Fraction, exact: mp.mpf, rel: float = 1e-9) -> None:
    """``ours`` is at least the exact value and within ``rel`` of it."""
    o = _mpf(ours)
    assert o >= exact, (float(ours), mp.nstr(exact, 20))
    assert o <= exact * (1 + rel) + mp.mpf(10) ** -14, (float(ours), mp.nstr(exact, 20))


# -- published worked examples ---------------------------------------------------------------
def test_gaussian_rho_is_sensitivity_squared_over_two_sigma_squared_bs16_prop_1_6():
    # The OpenDP example: scale 4, sensitivity 1 -> rho = (1/4)²/2 = 1/32.
    assert rho_of_gaussian(1, 4) == F(1, 32)
    assert rho_of_gaussian(1, 4.0) == F(1, 32)
    for sens, sigma in [(1, 1), (2, 3), (F(1, 2), 10), (5, F(7, 2))]:
        assert rho_of_gaussian(sens, sigma) == F(sens) ** 2 / (2 * F(sigma) ** 2)
    # A float sigma is the noise actually drawn: read by its exact binary value.
    assert rho_of_gaussian(1, 0.1) == 1 / (2 * F(0.1) ** 2)
    assert rho_of_gaussian(0, 3) == 0
    with pytest.raises(pq.PinqError):
        rho_of_gaussian(1, 0)


def test_sigma_for_a_rho_is_the_least_float_that_fits():
    assert gaussian_sigma_for_rho(1, F(1, 32)) == 4.0
    for sens, rho in [(1, F(1, 10)), (3, F(1, 7)), (F(1, 3), F(2)), (1, F(1, 10**9))]:
        sigma = gaussian_sigma_for_rho(sens, rho)
        assert rho_of_gaussian(sens, sigma) <= rho
        assert rho_of_gaussian(sens, math.nextafter(sigma, 0.0)) > rho
    assert gaussian_sigma_for_rho(0, F(1, 2)) == 0.0
    with pytest.raises(pq.PinqError):
        gaussian_sigma_for_rho(1, 0)


def test_k_fold_gaussian_composition_is_k_over_two_sigma_squared_bs16_lemma_1_7():
    for sigma, k in [(4, 1), (4, 10), (10, 100), (F(5, 2), 37)]:
        total = Usage()
        for _ in range(k):
            total = total + Usage.gaussian(1, 1e-6, 1, sigma)
        assert total.rho == F(k) / (2 * F(sigma) ** 2)
    # 100 Gaussians of sigma = 10 are exactly 1/2-zCDP.
    one = Usage.gaussian(1, 1e-6, 1, 10)
    assert sum((one for _ in range(99)), one).rho == F(1, 2)


def test_pure_dp_is_half_epsilon_squared_zcdp_bs16_prop_1_4():
    assert rho_of_pure(1) == F(1, 2)
    assert rho_of_pure(0.1) == F(1, 200)
    assert rho_of_pure(F(3, 4)) == F(9, 32)
    assert Usage.pure(0.1).rho == F(1, 200)
    assert usage_of(PureCharge(0.1)).rho == F(1, 200)


def test_opendp_worked_example_gaussian_scale_4():
    rho = rho_of_gaussian(1, 4)
    # OpenDP: cdp_epsilon(rho, 1e-3) == 0.6880024554878086.
    eps = zcdp_epsilon(rho, 1e-3)
    assert abs(float(eps) - 0.6880024554878086) <= 1e-11 * 0.6880024554878086
    assert_tight_upper(eps, ref_epsilon(rho, F(1, 1000)))
    # OpenDP: profile.delta(0.0) == 0.1508457845622862.
    d0 = zcdp_delta(rho, 0)
    assert abs(float(d0) - 0.1508457845622862) <= 1e-11 * 0.1508457845622862
    assert_tight_upper(d0, ref_delta(rho, 0))
    # OpenDP: profile.delta(0.6880024554878085) == 1e-3 (to the last digit they print).
    assert abs(float(zcdp_delta(rho, 0.6880024554878085)) - 1e-3) <= 1e-11
    # OpenDP: cdp_epsilon(rho, 0.1508457845622862) == 0.0 -- ours is 0 up to its safety margin.
    assert zcdp_epsilon(rho, 0.1508457845622862) <= F(1, 10**12)
    assert zcdp_epsilon(rho, 0.16) == 0


def test_simple_conversion_is_bs16_prop_1_3():
    for rho, delta in [(F(1, 32), F(1, 1000)), (F(1, 2), F(1, 10**6)), (F(3), F(1, 10**10))]:
        with mp.workdps(DPS):
            r = _mpf(rho)
            exact = r + 2 * mp.sqrt(r * mp.log(1 / _mpf(delta)))
        assert_tight_upper(zcdp_epsilon_simple(rho, delta), exact)
    assert zcdp_epsilon_simple(0, 1e-6) == 0


@pytest.mark.parametrize("rho", [F(1, 10**8), F(1, 10**4), F(1, 32), F(1, 2), F(3), F(50)])
@pytest.mark.parametrize("delta", [F(1, 10**30), F(1, 10**10), F(1, 10**6), F(1, 10**3), F(1, 10)])
def test_tight_conversion_improves_on_the_classic_one_cks20(rho, delta):
    tight, simple = zcdp_epsilon(rho, delta), zcdp_epsilon_simple(rho, delta)
    assert tight <= simple
    if simple > 1e-6:
        assert tight < simple
    # The classic bound read the other way (BS16 Prop. 1.3): delta <= e^{-(eps-rho)²/(4 rho)}.
    eps = 2 * rho + F(1, 3)
    with mp.workdps(DPS):
        classic = mp.exp(-((_mpf(eps) - _mpf(rho)) ** 2) / (4 * _mpf(rho)))
    if classic > mp.mpf(10) ** -300:
        assert _mpf(zcdp_delta(rho, eps)) <= classic


@pytest.mark.parametrize("sigma", [0.5, 1.0, 4.0, 20.0])
@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 3.0])
def test_conversion_never_beats_the_exact_gaussian_profile_bw18(sigma, eps):
    """The Gaussian mechanism is rho-zCDP, so the conversion must bound its exact delta."""
    rho = rho_of_gaussian(1, sigma)
    exact = ref_gaussian_delta(eps, sigma)
    assert _mpf(zcdp_delta(rho, eps)) >= exact


# -- conversions against the independent reference -------------------------------------------
RHOS = [F(1, 10**12), F(1, 10**8), F(1, 10**4), F(1, 32), F(1, 2), F(3), F(50), F(1000)]
DELTAS = [
    F(1, 10**400),
    F(1, 10**30),
    F(1, 10**10),
    F(1, 10**6),
    F(1, 1000),
    F(1, 10),
    F(1, 2),
    F(9, 10),
]


@pytest.mark.parametrize("rho", RHOS)
@pytest.mark.parametrize("delta", DELTAS)
def test_zcdp_epsilon_is_never_below_the_exact_infimum_and_is_tight(rho, delta):
    ours = zcdp_epsilon(rho, delta)
    assert isinstance(ours, Fraction)
    exact = ref_epsilon(rho, delta)
    if exact == 0:
        assert ours <= F(1, 10**12)
    else:
        assert_tight_upper(ours, exact)


@pytest.mark.parametrize("rho", [F(1, 10**4), F(1, 32), F(1, 2), F(3), F(50)])
@pytest.mark.parametrize("eps", [F(0), F(1, 100), F(1, 2), F(2), F(10), F(100)])
def test_zcdp_delta_is_never_below_the_exact_infimum_and_is_tight(rho, eps):
    ours = zcdp_delta(rho, eps)
    exact = ref_delta(rho, eps)
    assert _mpf(ours) >= exact
    if exact > mp.mpf(10) ** -300:
        assert _mpf(ours) <= exact * (1 + 1e-9)
    else:  # below the float range: the smallest positive float, still an upper bound
        assert ours <= F(1, 10**300)


def test_zcdp_delta_and_epsilon_are_inverse_readings():
    for rho, delta in [(F(1, 32), F(1, 1000)), (F(1, 2), F(1, 10**6)), (F(3), F(1, 10**10))]:
        eps = zcdp_epsilon(rho, delta)
        assert zcdp_delta(rho, eps) <= delta
        assert zcdp_delta(rho, eps * (1 - F(1, 10**6))) > delta


def test_degenerate_inputs():
    assert zcdp_epsilon(0, F(1, 10**6)) == 0
    assert zcdp_epsilon(F(1, 2), 1) == 0
    assert zcdp_delta(0, 1) == 0
    assert zcdp_delta(F(10**4), 0) == 1
    with pytest.raises(pq.PinqError):
        zcdp_epsilon(F(1, 2), 0)
    with pytest.raises(pq.PinqError):
        zcdp_epsilon(-1, F(1, 10))
    with pytest.raises(pq.PinqError):
        rho_for(1, 1)
    assert rho_for(1, 0) == 0


# -- rounding direction and monotonicity -----------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(
    rho=st.fractions(min_value=F(1, 10**9), max_value=F(200), max_denominator=10**9),
    log10_delta=st.integers(min_value=-40, max_value=-1),
)
def test_epsilon_rounds_up_for_random_inputs(rho, log10_delta):
    delta = F(1, 10**-log10_delta)
    ours = zcdp_epsilon(rho, delta)
    exact = ref_epsilon(rho, delta)
    assert _mpf(ours) >= exact
    assert _mpf(ours) <= exact * (1 + 1e-9) + mp.mpf(10) ** -12


def test_epsilon_grows_with_rho_and_shrinks_with_delta():
    rhos = [F(1, 10**6) * 2**i for i in range(30)]
    for delta in [F(1, 10**10), F(1, 10**5), F(1, 10)]:
        eps = [zcdp_epsilon(r, delta) for r in rhos]
        assert all(a <= b for a, b in itertools.pairwise(eps))
        assert eps[-1] > eps[0]
    deltas = [F(1, 10**k) for k in range(1, 40)]
    eps = [zcdp_epsilon(F(1, 10), d) for d in deltas]
    assert all(a < b for a, b in itertools.pairwise(eps))
    # delta shrinks as epsilon grows, grows with rho
    ds = [zcdp_delta(F(1, 4), F(k, 4)) for k in range(0, 40)]
    assert all(a >= b for a, b in itertools.pairwise(ds))
    ds = [zcdp_delta(F(k, 100), 1) for k in range(1, 60)]
    assert all(a <= b for a, b in itertools.pairwise(ds))


@pytest.mark.parametrize("eps", [F(1, 100), F(1, 10), F(1), F(2), F(10), F(100)])
@pytest.mark.parametrize("delta", [F(1, 10**30), F(1, 10**10), F(1, 10**6), F(1, 1000), F(3, 10)])
def test_rho_for_is_the_largest_rho_that_fits(eps, delta):
    r = rho_for(eps, delta)
    # It fits, a hair more does not, and it is rounded down from the exact value.
    assert zcdp_epsilon(r, delta) <= eps
    assert zcdp_epsilon(r * (1 + F(1, 10**9)), delta) > eps
    exact = ref_rho_for(eps, delta)
    assert _mpf(r) <= exact
    assert _mpf(r) >= exact * (1 - 1e-9)
    # A bounded denominator: at most 12 significant digits.
    assert (r * 10 ** (11 - math.floor(math.log10(r)))).denominator == 1


def test_rho_for_a_budget_of_one_and_a_millionth():
    # The rho-budget of Budget(epsilon=1, delta=1e-6): 0.0243559703..., the classic conversion
    # would allow only (sqrt(ln(1/delta) + 1) - sqrt(ln(1/delta)))² = 0.01747...
    r = rho_for(1, 1e-6)
    assert abs(float(r) - float(ref_rho_for(1, F(1, 10**6)))) < 1e-11
    big_l = math.log(1e6)
    classic = (math.sqrt(big_l + 1) - math.sqrt(big_l)) ** 2
    assert round(classic, 5) == 0.01747
    assert float(r) > classic
    assert zcdp_epsilon_simple(F(classic) * (1 - F(1, 10**9)), F(1, 10**6)) <= 1


# -- composition: zCDP against basic composition ---------------------------------------------
def test_gaussian_crossover_zcdp_beats_basic_composition_from_the_second_query():
    """k Gaussian queries of the same sigma, total delta fixed.

    Basic composition gives each query delta/k and its exact (BW18) epsilon at that delta,
    then adds the epsilons; zCDP adds rho = k/(2σ²) and converts once at delta. For one query
    the exact Gaussian profile wins (the conversion loses a little); from two queries on, zCDP
    wins, and by a factor that grows like sqrt(k).
    """
    delta = F(1, 10**6)
    for sigma in [2.0, 10.0]:
        ratios = []
        for k in [1, 2, 3, 5, 10, 100]:
            basic = k * ref_gaussian_epsilon(sigma, _mpf(delta) / k)
            zcdp = _mpf(zcdp_epsilon(k * rho_of_gaussian(1, sigma), delta))
            ratios.append(basic / zcdp)
        assert ratios[0] < 1  # one query: basic (exact) is better
        assert all(r > 1 for r in ratios[1:])  # two or more: zCDP is better
        assert all(a < b for a, b in itertools.pairwise(ratios))
        assert ratios[-1] > 5


def test_laplace_crossover_in_a_zcdp_budget():
    """k Laplace (pure) queries of epsilon 0.1 and a total delta of 1e-6.

    Pure accounting pays 0.1·k. zCDP pays rho = k·0.1²/2 and converts at delta; the
    crossover k* (the first k where zCDP's epsilon is smaller) is computed here with the
    independent reference and matched by pinqpy's conversion.
    """
    e0, delta = F(1, 10), F(1, 10**6)

    def first_win(eps_of):
        return next(k for k in range(1, 500) if eps_of(k) < e0 * k)

    k_ref = first_win(lambda k: ref_epsilon(k * e0 * e0 / 2, delta))
    k_ours = first_win(lambda k: _mpf(zcdp_epsilon(k * rho_of_pure(e0), delta)))
    assert k_ours == k_ref == 24
    # and it stays won, by a growing margin
    ratios = [zcdp_epsilon(k * rho_of_pure(e0), delta) / (e0 * k) for k in (k_ref, 4 * k_ref)]
    assert 1 > ratios[0] > ratios[1]
    # In a budget: Budget(epsilon=5, delta=1e-6) holds 50 such queries under pure accounting
    # and more under zCDP.
    n_pure = _count_fits(PureAccountant(), Usage.pure(e0), Cost(5))
    n_zcdp = _count_fits(ZcdpAccountant(), Usage.pure(e0), Cost(5, F(1, 10**6)))
    assert n_pure == 50
    assert n_zcdp == int(rho_for(5, F(1, 10**6)) / rho_of_pure(e0)) > 50


def _count_fits(acc, charge: Usage, total: Cost) -> int:
    """How many copies of ``charge`` fit ``total`` (by bisection on the count)."""
    lo, hi = 0, 1
    while acc.check(Usage(), _times(charge, hi), total):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if acc.check(Usage(), _times(charge, mid), total):
            lo = mid
        else:
            hi = mid
    return lo


def _times(u: Usage, n: int) -> Usage:
    return Usage(u.epsilon * n, u.delta * n, None if u.rho is None else u.rho * n)


# -- usages and accountants ------------------------------------------------------------------
def test_usage_at_k_scales_rho_by_k_squared():
    u = Usage.gaussian(F(1, 2), F(1, 10**7), 1, 10)
    assert u.rho == F(1, 200)
    for k in [2, 3, F(5, 2), 10]:
        uk = u.at(k)
        assert uk.rho == u.rho * F(k) ** 2
        assert uk.epsilon == u.epsilon * F(k)
        assert uk.delta == Cost(u.epsilon, u.delta).at(k).delta
    assert u.at(1) is u
    assert u.at(0).is_zero
    assert Usage.pure(F(1, 10)).at(3) == Usage(F(3, 10), F(0), F(9, 200))
    assert Usage.from_cost(Cost(1, 1e-6)).at(4).rho is None


def test_usage_reads_numbers_exactly_and_refuses_negatives():
    u = Usage(0.1, 1e-6, 0.005)
    assert (u.epsilon, u.delta, u.rho) == (F(1, 10), F(1, 10**6), F(1, 200))
    assert type(Usage(Cost(0.5).epsilon).epsilon) is Fraction
    with pytest.raises(pq.PinqError):
        Usage(F(-1))
    with pytest.raises(pq.PinqError):
        Usage(rho=F(-1, 2))


def test_usage_of_charges():
    g = GaussianCharge(1, 1e-6, 1, gaussian_sigma(1, 1, 1e-6))
    rho1 = rho_of_gaussian(1, g.sigma)
    for k in [1, 2, 5]:
        u = usage_of(g, k)
        assert u.rho == k * k * rho1  # sensitivity k·D
        assert (u.epsilon, u.delta) == (g.at(k).epsilon, g.at(k).delta)  # exact BW18 reading
    comp = CompositeCharge([PureCharge(0.1), g])
    assert usage_of(comp, 2).rho == 4 * (F(1, 200) + rho1)
    assert usage_of(Cost(0.5)).rho == F(1, 8)
    assert usage_of(Cost(0.5, 1e-7)).rho is None
    with pytest.raises(TypeError):
        usage_of(object())


@settings(max_examples=80, deadline=None)
@given(
    a=st.tuples(*[st.fractions(min_value=0, max_value=5, max_denominator=100)] * 3),
    b=st.tuples(*[st.fractions(min_value=0, max_value=5, max_denominator=100)] * 3),
    k=st.integers(min_value=1, max_value=6),
)
def test_usage_algebra(a, b, k):
    ua, ub = Usage(*a), Usage(*b)
    assert ua + ub == ub + ua
    m = ua.max(ub)
    assert (m.epsilon, m.delta, m.rho) == tuple(max(x, y) for x, y in zip(a, b, strict=True))
    assert (ua + ub) - ub == ua
    assert (ua + ub).at(k).rho == ua.at(k).rho + ub.at(k).rho
    assert ua.at(k).rho == a[2] * k * k


def test_pure_accountant_refuses_delta():
    acc = accountant_for("pure")
    assert isinstance(acc, PureAccountant)
    total = Cost(1)
    acc.validate_total(total)
    with pytest.raises(pq.PinqError):
        acc.validate_total(Cost(1, 1e-6))
    g = usage_of(GaussianCharge(0.1, 1e-9, 1, gaussian_sigma(1, 0.1, 1e-9)))
    assert not acc.check(Usage(), g, total)
    assert acc.check(Usage.pure(0.5), Usage.pure(0.5), total)
    assert not acc.check(Usage.pure(0.5), Usage.pure(F(1, 2) + F(1, 10**30)), total)
    assert acc.as_cost(Usage.pure(0.25) + Usage.pure(0.5), total) == Cost(0.75)
    assert acc.remaining(Usage.pure(0.25), total) == Cost(0.75)


def test_approx_accountant_adds_epsilons_and_deltas():
    acc = accountant_for("approx")
    assert isinstance(acc, ApproxAccountant)
    total = Cost(1, 1e-6)
    spent = Usage()
    for _ in range(10):
        c = Usage.from_cost(Cost(0.1, 1e-7))
        assert acc.check(spent, c, total)
        spent = spent + c
    assert acc.as_cost(spent, total) == Cost(1, 1e-6)
    assert acc.remaining(spent, total).is_zero
    assert not acc.check(spent, Usage.pure(F(1, 10**9)), total)
    # delta alone can run out
    assert not acc.check(Usage.from_cost(Cost(0.1, 1e-6)), Usage.from_cost(Cost(0.1, 1e-12)), total)


def test_zcdp_accountant_refuses_non_gaussian_delta_charges():
    acc = accountant_for("zcdp")
    assert isinstance(acc, ZcdpAccountant)
    total = Cost(1, 1e-6)
    approx_charge = Usage.from_cost(Cost(0.1, 1e-8))
    with pytest.raises(pq.PrivacyError, match="Gaussian"):
        acc.check(Usage(), approx_charge, total)
    with pytest.raises(pq.PinqError):
        acc.check(Usage.pure(0.1), usage_of(Cost(0.1, 1e-9)), total)
    # Gaussian and pure charges are fine, and mix.
    g = usage_of(GaussianCharge(0.5, 1e-7, 1, gaussian_sigma(1, 0.5, 1e-7)))
    assert acc.check(Usage.pure(0.1), g, total)
    with pytest.raises(pq.PinqError):
        acc.validate_total(Cost(1))


def test_zcdp_accountant_adds_rho_and_fills_its_rho_budget_exactly():
    acc = ZcdpAccountant()
    total = Cost(1, 1e-6)
    budget = acc.rho_budget(total)
    assert budget == rho_for(1, 1e-6)
    piece = Usage(F(0), F(0), budget / 10)
    spent = Usage()
    for _ in range(10):
        assert acc.check(spent, piece, total)
        spent = spent + piece
    assert spent.rho == budget
    assert not acc.check(spent, Usage(F(0), F(0), F(1, 10**30)), total)
    # Reported in (epsilon, delta): the whole budget reads as at most epsilon = 1 at delta.
    cost = acc.as_cost(spent, total)
    assert cost.delta == total.delta
    assert cost.epsilon <= 1
    assert cost.epsilon >= 1 - 1e-9
    assert acc.remaining(spent, total).is_zero
    # Half-way: the conversion of half the rho, and what is left reads below the total.
    half = Usage(F(0), F(0), budget / 2)
    spent_cost, left = acc.as_cost(half, total), acc.remaining(half, total)
    assert spent_cost.epsilon == zcdp_epsilon(budget / 2, total.delta)
    assert left.epsilon <= spent_cost.epsilon
    assert left.epsilon >= spent_cost.epsilon * (1 - F(1, 10**8))
    assert acc.as_cost(Usage(), total) == Cost()
    assert float(acc.remaining(Usage(), total).epsilon) == pytest.approx(1, rel=1e-8)


def test_zcdp_pure_charges_count_half_epsilon_squared():
    acc = ZcdpAccountant()
    total = Cost(1, 1e-6)
    budget = acc.rho_budget(total)
    n = int(budget / rho_of_pure(0.1))  # 4 Laplace queries of 0.1 fit: rho 4/200 <= 0.02435...
    assert n == 4
    spent = Usage()
    for _ in range(n):
        assert acc.check(spent, Usage.pure(0.1), total)
        spent = spent + Usage.pure(0.1)
    assert not acc.check(spent, Usage.pure(0.1), total)


@pytest.mark.parametrize("model", ["pure", "approx", "zcdp"])
def test_partition_parent_pays_the_maximum_per_component(model):
    acc = accountant_for(model)
    total = Cost(1) if model == "pure" else Cost(1, 1e-6)
    if model == "pure":
        parts = [Usage.pure(0.3), Usage.pure(0.5), Usage.pure(0.4)]
    else:  # rhos 1/72, 1/98, 1/128: their sum exceeds the rho-budget 0.02435..., each fits
        parts = [
            Usage.gaussian(0.3, 1e-7, 1, 6),
            Usage.gaussian(0.5, 2e-7, 1, 7),
            Usage.gaussian(0.4, 4e-7, 1, 8),
        ]
    parent = Usage()
    for p in parts:
        parent = parent.max(p)
    assert parent.epsilon == max(p.epsilon for p in parts)
    assert parent.delta == max(p.delta for p in parts)
    assert parent.rho == max(p.rho for p in parts)
    # The maximum, not the sum: the sum does not fit, the maximum does.
    assert not acc.check(Usage(), parts[0] + parts[1] + parts[2], total)
    assert acc.check(Usage(), parent, total)
    # Increments as the partition agent computes them, at stability K: K² on rho.
    K = 2
    inc = parent.at(K) - Usage().at(K)
    assert inc.rho == K * K * parent.rho


def test_partition_max_in_zcdp_is_taken_over_rho_not_over_the_sum():
    acc = ZcdpAccountant()
    total = Cost(1, 1e-6)
    budget = acc.rho_budget(total)
    part = Usage(F(0), F(0), budget * F(6, 10))
    assert not acc.check(Usage(), part + part, total)  # two sequential uses do not fit
    assert acc.check(Usage(), part.max(part), total)  # two disjoint parts do


def test_accountant_for_lists_the_choices():
    assert {accountant_for(n).name for n in ("pure", "approx", "zcdp")} == {
        "pure",
        "approx",
        "zcdp",
    }
    with pytest.raises(pq.PinqError, match="'pure', 'approx', 'zcdp'"):
        accountant_for("rdp")
    with pytest.raises(pq.PinqError):
        accountant_for(None)  # type: ignore[arg-type]
