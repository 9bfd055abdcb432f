"""Noise calibration: the Laplace scale, the analytic Gaussian sigma and the discrete
Gaussian variance of a count, from public parameters only."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from pinqpy.accounting.cost import _nonneg, check_epsilon, check_part_delta
from pinqpy.accounting.models import rho_for, zcdp_delta
from pinqpy.accounting.profiles import _DELTA_MARGIN, _gauss_delta_ratio, discrete_gaussian_delta
from pinqpy.errors import PinqError
from pinqpy.noise.samplers import round_up_dyadic
from pinqpy.noise.samplers.gaussian import _fit_sigma2

__all__ = ["discrete_gaussian_sigma2", "gaussian_sigma", "laplace_scale"]


# -- exact-to-float helpers ----------------------------------------------------------------
def _round_up(x: Fraction) -> float:
    """The smallest float not below the exact value ``x``."""
    f = float(x)  # correctly rounded (int / int true division)
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


_float_up = _round_up


# -- Laplace and the analytic Gaussian -----------------------------------------------------
def laplace_scale(sensitivity: object, epsilon: object) -> float:
    """The Laplace scale ``b = sensitivity / epsilon``, exact, rounded up to a float.

    Derivation (Dwork, McSherry, Nissim & Smith, TCC 2006): if ``|f(D) - f(D')| <= s`` for
    neighbours, the densities of ``f(D) + Lap(b)`` and ``f(D') + Lap(b)`` at any output ``y``
    differ by the factor ``exp((|y - f(D')| - |y - f(D)|)/b) <= exp(s/b)`` (triangle
    inequality). ``b = s/epsilon`` makes that ``e^epsilon``; a larger ``b`` only helps, hence
    rounding up.

    >>> laplace_scale(1, 0.1)
    10.0
    >>> from fractions import Fraction
    >>> Fraction(laplace_scale(1, 3)) >= Fraction(1, 3)
    True
    """
    sens = _nonneg(sensitivity, "sensitivity")
    eps = check_epsilon(epsilon)
    return _round_up(sens / eps)


def gaussian_sigma(sensitivity: object, epsilon: object, delta: object) -> float:
    """The smallest sigma for which ``N(0, sigma²)`` noise is (epsilon, delta)-DP.

    Analytic Gaussian mechanism (Balle & Wang, ICML 2018): the profile of
    :func:`gaussian_delta` is strictly decreasing in ``sigma`` (it tends to 1 as sigma -> 0 and
    to 0 as sigma -> inf), so the least sigma meeting ``delta`` is found by bisection. We solve
    for ``r = sigma/D`` (the profile depends on ``D/sigma`` only) in log space: bracket by
    doubling/halving, then bisect ``log r`` until the bracket is a few ulps wide, and return
    the *upper* (conservative) end, whose delta is verified to be within the target. The
    target is ``delta·(1 - 1e-9)`` to absorb floating-point error in evaluating the profile;
    the result is rounded up into a float after multiplying by the exact sensitivity.

    >>> from pinqpy.accounting.profiles import gaussian_delta
    >>> s = gaussian_sigma(1, 1.0, 1e-5)
    >>> round(s, 4), gaussian_delta(1.0, 1, s) <= 1e-5
    (3.7306, True)
    >>> gaussian_delta(1.0, 1, s * (1 - 1e-6)) > 1e-5
    True
    """
    sens = _nonneg(sensitivity, "sensitivity")
    eps = float(check_epsilon(epsilon))
    dlt = check_part_delta(delta)
    if sens == 0:
        return 0.0
    target = float(dlt) * (1.0 - _DELTA_MARGIN)

    def ok(log_r: float) -> bool:
        return _gauss_delta_ratio(eps, math.exp(log_r)) <= target

    hi = 0.0
    while not ok(hi):
        hi += 1.0
    lo = hi - 1.0
    while ok(lo):
        lo -= 1.0
    # Invariant: ok(hi) and not ok(lo).
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    r = math.exp(hi)
    while _gauss_delta_ratio(eps, r) > target:  # exp() rounding; never loops in practice
        r = math.nextafter(r, math.inf)
    return _round_up(Fraction(r) * sens)


# -- the discrete Gaussian: exact (epsilon, delta) profile and calibration -----------------
#: Counts calibrate the discrete Gaussian by its exact profile (CKS20 Theorem 7, summed term by
#: term) while sigma is at most this; above it, by its zCDP guarantee (see
#: :func:`discrete_gaussian_sigma2`).
DG_EXACT_MAX_SIGMA = 2**14


@functools.lru_cache(maxsize=512)
def _rho_within(epsilon: Fraction, delta: Fraction) -> Fraction:
    """The largest rho (to the precision of :func:`~pinqpy.accounting.models.rho_for`) whose CKS20
    conversion ``zcdp_delta(rho, epsilon)`` is at most ``delta``, checked directly."""
    rho = rho_for(epsilon, delta)
    steps = 0
    while rho > 0 and zcdp_delta(rho, epsilon) > delta:
        steps += 1
        if steps > 1024:  # rho_for is verified, so this only happens on float underflow
            raise PinqError(
                "no Gaussian noise can be calibrated for this epsilon and delta; use a larger delta"
            )
        rho = rho * Fraction(2**30 - 1, 2**30)
    if rho <= 0:  # pragma: no cover - rho_for never returns 0 for delta > 0
        raise PinqError("no Gaussian noise meets this epsilon and delta")
    return rho


@functools.lru_cache(maxsize=512)
def _count_sigma2(epsilon: Fraction, delta: Fraction) -> tuple[Fraction, str]:
    """``(σ², method)`` for a discrete Gaussian count; see :func:`discrete_gaussian_sigma2`."""

    def ok(s2: Fraction) -> bool:
        return Fraction(discrete_gaussian_delta(s2, epsilon)) <= delta

    sc = gaussian_sigma(1, epsilon, delta)  # the continuous calibration: a starting point only
    if sc <= DG_EXACT_MAX_SIGMA / 2 and delta > Fraction(1, 10**290):
        hi = round_up_dyadic(Fraction(sc) ** 2 * Fraction(5, 4), 32)
        while not ok(hi):
            hi *= 2
        lo = round_up_dyadic(Fraction(sc) ** 2 * Fraction(4, 5), 32)
        while lo > Fraction(1, 2**32) and ok(lo):
            lo /= 2
        # Invariant: ok(hi) and not ok(lo) (or lo negligible); bisect to 2**-30 relative.
        while hi - lo > hi / 2**30:
            mid = round_up_dyadic((lo + hi) / 2, 32)
            if mid >= hi:
                break
            if ok(mid):
                hi = mid
            else:
                lo = mid
        s2 = _fit_sigma2(hi)  # rounded up to what the sampler takes
        while not ok(s2):  # the profile falls with sigma, so this never loops in practice
            s2 = _fit_sigma2(s2 * (1 + Fraction(1, 2**20)))
        if s2 <= DG_EXACT_MAX_SIGMA**2:
            return s2, "exact"
    rho = _rho_within(epsilon, delta)
    try:
        return _fit_sigma2(round_up_dyadic(1 / (2 * rho), 32)), "zCDP"
    except PinqError:
        raise PinqError(
            "epsilon is too small for an exact discrete Gaussian count at this delta; use the "
            "Laplace mechanism (no delta) or a larger epsilon"
        ) from None


def discrete_gaussian_sigma2(epsilon: object, delta: object) -> Fraction:
    """The variance ``σ²`` of the discrete Gaussian noise of an (epsilon, delta) count.

    The analytic calibration of :func:`gaussian_sigma` is for the *continuous* Gaussian and is
    not assumed to carry over. Instead, for sensitivity 1 (a count; neighbouring counts differ
    by exactly 1 or 0):

    * **exact profile** (continuous sigma up to ``DG_EXACT_MAX_SIGMA / 2 = 8192``): the least
      ``σ²`` (a dyadic rational, found by bisection to ``2**-30`` relative from a bracket around
      the continuous value, then rounded up to what the exact sampler accepts) whose CKS20
      Theorem 7 delta, evaluated with a rigorous error bound by
      :func:`discrete_gaussian_delta`, is at most ``delta``. The returned ``σ²`` is verified to
      satisfy it.
    * **zCDP** (larger sigma, i.e. tiny epsilons, where summing ``O(σ)`` terms per evaluation
      is slow): the discrete Gaussian with sensitivity ``Δ`` is ``ρ = Δ²/(2σ²)``-zCDP (CKS20,
      Proposition 5; the same ``ρ`` as the continuous one), and ``ρ``-zCDP implies
      ``(ε, zcdp_delta(ρ, ε))``-DP (CKS20's conversion,
      :func:`pinqpy.accounting.models.zcdp_delta`). So ``σ² = 1/(2ρ)`` with ``ρ`` the largest
      whose conversion meets ``delta`` (rounded up). This costs a few percent more noise.

    At ``ε = 1``, ``δ = 1e-6`` the exact profile gives ``σ² = 76877723237/2**32 ≈ 17.8995``,
    ``σ ≈ 4.2308``: slightly *more* than the continuous analytic Gaussian's 4.2247 (at
    ``σ = 4`` the discrete delta is 3.06e-6 against the continuous 2.92e-6), and less than
    the zCDP route's 4.53.

    >>> s2 = discrete_gaussian_sigma2(1, Fraction(1, 10**6))
    >>> s2, discrete_gaussian_delta(s2, 1) <= 1e-6
    (Fraction(76877723237, 4294967296), True)
    """
    eps = check_epsilon(epsilon)
    dlt = check_part_delta(delta)
    return _count_sigma2(Fraction(eps), Fraction(dlt))[0]
