"""Privacy profiles of the Gaussian mechanisms: the exact delta at a given epsilon.

:func:`gaussian_delta` is the continuous Gaussian's profile (Balle & Wang, ICML 2018) and
:func:`discrete_gaussian_delta` the discrete Gaussian's (Canonne, Kamath & Steinke, NeurIPS
2020, "CKS20"). The charges of :mod:`pinqpy.accounting.charges` read them for group privacy;
the noise calibrations of :mod:`pinqpy.noise.mechanisms` invert them.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from pinqpy.accounting.cost import _nonneg
from pinqpy.core.exact import to_fraction
from pinqpy.errors import PinqError

__all__ = ["discrete_gaussian_delta", "gaussian_delta"]

# Relative safety margin on delta for the analytic Gaussian: sigma is solved for
# delta * (1 - 1e-9), and a group-privacy delta is charged at (1 + 1e-9) times its computed
# value. The float evaluation of delta is accurate to ~1e-12 relative (see _gauss_delta_ratio),
# so the margin dominates rounding while moving sigma by only ~1e-9 relative.
_DELTA_MARGIN = 1e-9


_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT1_2 = math.sqrt(0.5)


def _log_ndtr(x: float) -> float:
    """``log Phi(x)`` for the standard normal CDF, accurate from -inf to +inf.

    * ``x > 0``: ``log(1 - Phi(-x))`` via ``log1p`` (Phi is close to 1);
    * ``-20 < x <= 0``: ``log(erfc(-x/√2)/2)`` (``erfc`` is accurate in relative terms and
      does not underflow there: ``Phi(-20) ≈ 3e-89``);
    * ``x <= -20``: the asymptotic series ``Phi(x) = phi(x)/|x| · Σ_k (-1)^k (2k-1)!!/x^{2k}``
      (Abramowitz & Stegun 26.2.12), 12 terms: at ``|x| = 20`` the first omitted term is below
      ``1e-18``, and the logarithm is taken before anything can underflow.

    >>> round(_log_ndtr(0.0), 12) == round(math.log(0.5), 12)
    True
    >>> round(_log_ndtr(-40.0), 6)
    -804.608442
    """
    if x > 0.0:
        return math.log1p(-0.5 * math.erfc(x * _SQRT1_2))
    if x > -20.0:
        return math.log(0.5 * math.erfc(-x * _SQRT1_2))
    x2 = x * x
    term = 1.0
    total = 1.0
    for k in range(1, 12):
        term *= -(2 * k - 1) / x2
        total += term
    return -0.5 * x2 - math.log(-x) - _LOG_SQRT_2PI + math.log(total)


_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
# 8-point Gauss-Legendre rule on [-1, 1] (nodes, weights), for the integral in
# _gauss_delta_ratio; exact for polynomials of degree 15.
_GL_NODES, _GL_WEIGHTS = (tuple(float(v) for v in x) for x in np.polynomial.legendre.leggauss(8))


def _erfcx_cf(z: float, shift: int) -> float:
    """``z + a_1/(z + a_2/(z + ...))`` with ``a_n = (n + shift)/2``, by the modified Lentz method.

    With ``shift = 0`` this is ``1/(√π·erfcx(z))`` (Abramowitz & Stegun 7.1.14, ``z > 0``);
    with ``shift = 1`` it is the tail after the first step, so that
    ``1/(√π·erfcx(z)) = z + (1/2)/_erfcx_cf(z, 1)`` without cancellation. Used for ``z >= 3``,
    where it converges in at most ~100 steps to full precision.
    """
    tiny = 1e-300
    f = c = z
    d = 0.0
    for n in range(1, 1000):
        an = 0.5 * (n + shift)
        d = z + an * d
        d = 1.0 / (d if d != 0.0 else tiny)
        c = z + an / (c if c != 0.0 else tiny)
        delta = c * d
        f *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return f


def _log_erfcx(z: float) -> float:
    """``log(erfcx(z))`` for the scaled complementary error function ``e^{z²}·erfc(z)``.

    For ``z < 3``: ``log(erfc(z)) + z²`` (``z² < 9`` adds at most ~1e-15 of absolute error; for
    negative ``z``, ``erfc(z)`` is in (1, 2)). For ``z >= 3``: the continued fraction of
    :func:`_erfcx_cf` -- relative accuracy is what matters here, and no ``e^{z²}`` is formed.

    >>> round(_log_erfcx(0.0), 12)
    0.0
    >>> round(math.exp(_log_erfcx(10.0)) * math.sqrt(math.pi) * 10.0, 6)  # 1 - 1/(2z²) + ...
    0.995073
    """
    if z < 3.0:
        return math.log(math.erfc(z)) + z * z
    return math.log(_INV_SQRT_PI / _erfcx_cf(z, 0))


def _d_log_erfcx(z: float) -> float:
    """The derivative ``d/dz log(erfcx(z)) = 2z - 2/(√π·erfcx(z))`` (always negative).

    For ``z >= 3`` the two terms nearly cancel; the continued fraction gives their difference
    directly: ``-2·(1/2)/_erfcx_cf(z, 1)``.
    """
    if z >= 3.0:
        return -1.0 / _erfcx_cf(z, 1)
    if z < -26.0:  # 2/(√π·erfcx(z)) < e^{-676}: negligible beside 2z
        return 2.0 * z
    return 2.0 * z - 2.0 * _INV_SQRT_PI * math.exp(-_log_erfcx(z))


def _gauss_delta_ratio(eps: float, r: float) -> float:
    """delta of the Gaussian mechanism with ``sigma / sensitivity = r`` at privacy level eps.

    ``delta = A - e^eps·B`` with ``A = Phi(a)``, ``B = Phi(b)``, ``a = 1/(2r) - eps·r``,
    ``b = -1/(2r) - eps·r``. Writing ``Phi(x) = erfcx(-x/√2)·e^{-x²/2}/2`` and using the
    identity ``b² - a² = (b - a)(b + a) = 2·eps``, the ratio ``e^eps·B/A`` is exactly
    ``erfcx(z_b)/erfcx(z_a)`` with ``z_a = -a/√2`` and ``z_b = z_a + 1/(r√2)``. So

        ``delta = A·(1 - e^t)``,  ``t = log erfcx(z_b) - log erfcx(z_a) < 0``,

    which never forms ``e^eps`` (no overflow for large eps) and never subtracts two large
    ``x²/2`` terms. When ``t`` is tiny (delta far below ``A``: small eps, large sigma) even
    the difference of two logarithms loses digits, so ``t`` is then computed as the integral
    of ``d/dz log erfcx`` over ``[z_a, z_b]`` by 8-point Gauss-Legendre quadrature (the
    interval is short against the scale on which the integrand varies, so the rule is exact
    to rounding). The last step uses ``-expm1``. Against 60-digit arithmetic the relative
    error is below 1e-11 for epsilon from 1e-6 to 700 and deltas down to 1e-300
    (``tests/unit/test_privacy_loss.py``).
    """
    a = 0.5 / r - eps * r
    z_a = -a * _SQRT1_2
    h = _SQRT1_2 / r
    t = _log_erfcx(z_a + h) - _log_erfcx(z_a)
    if t > -1e-3:
        half = 0.5 * h
        t = half * sum(
            w * _d_log_erfcx(z_a + half * (1.0 + x))
            for x, w in zip(_GL_NODES, _GL_WEIGHTS, strict=True)
        )
    if t >= 0.0:  # only through rounding, when delta is 0 to working precision
        return 0.0
    return math.exp(_log_ndtr(a)) * -math.expm1(t)


def gaussian_delta(epsilon: object, sensitivity: object, sigma: float) -> float:
    """The exact delta of the Gaussian mechanism ``f(D) + N(0, sigma²)`` at level epsilon.

    Balle & Wang, "Improving the Gaussian Mechanism for Differential Privacy: Analytical
    Calibration and Optimal Denoising", ICML 2018, Theorem 8: with L2 sensitivity ``D``, the
    mechanism is (epsilon, delta)-DP if and only if

        ``delta >= Phi(D/(2s) - eps·s/D) - e^eps · Phi(-D/(2s) - eps·s/D)``   (``s = sigma``).

    The right-hand side (returned here, as a float) is the mechanism's privacy profile: the
    hockey-stick divergence between ``N(0, sigma²)`` and ``N(D, sigma²)``. It depends on
    ``D/sigma`` only, and it is valid for every epsilon (unlike the classical
    ``sigma = D·sqrt(2 ln(1.25/delta))/epsilon``, which needs epsilon < 1).

    >>> round(gaussian_delta(1.0, 1.0, 4.0), 8)
    2.92e-06
    """
    sens = float(_nonneg(sensitivity, "sensitivity"))
    eps = float(to_fraction(epsilon, "epsilon"))
    sig = float(sigma)
    if sens == 0.0:
        return 0.0
    if not sig > 0.0:
        return 1.0
    return _gauss_delta_ratio(eps, sig / sens)


# -- the discrete Gaussian ------------------------------------------------------------------
_UNIT = 2.0**-53  # unit roundoff of a double


def _float_down(x: Fraction) -> float:
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def discrete_gaussian_delta(sigma2: object, epsilon: object, sensitivity: int = 1) -> float:
    """An upper bound, tight to ~1e-9 relative, on the delta of the discrete Gaussian at epsilon.

    CKS20, Theorem 7: adding ``Y ~ N_Z(0, σ²)`` to an integer query of sensitivity ``Δ`` is
    ``(ε, δ)``-DP for

        ``δ = P[Y > εσ²/Δ - Δ/2] - e^ε·P[Y > εσ²/Δ + Δ/2]``,

    and this is the exact (optimal) delta when the two answers differ by ``Δ``. Derivation
    for answers ``k`` and ``k + μ`` (``p`` the pmf of ``Y``, symmetric): the delta is
    ``δ_μ = Σ_y (p(y) - e^ε·p(y + μ))_+``, and ``p(y) > e^ε·p(y + μ)`` iff
    ``((y+μ)² - y²)/(2σ²) > ε`` iff ``y > εσ²/μ - μ/2 =: c_μ``. So ``δ_μ = P[Y > c_μ] -
    e^ε·P[Y > c_μ + μ]``: the expression above at ``μ = Δ``; the other direction gives the same
    by symmetry.

    *Smaller shifts are covered* (``δ_μ <= δ_{μ+1}`` for integers ``μ >= 1``, so answers
    that differ by any ``μ <= Δ`` are ``(ε, δ_Δ)``-close): on ``R = {y > c_μ}`` we have
    ``y > -μ/2``, so ``|y + μ + 1| >= |y + μ|`` and ``p(y + μ + 1) <= p(y + μ)`` (``p``
    falls with ``|y|``); hence ``δ_{μ+1} >= Σ_{y∈R} (p(y) - e^ε·p(y + μ + 1)) >=
    Σ_{y∈R} (p(y) - e^ε·p(y + μ)) = δ_μ``.

    Evaluation. With ``w(y) = e^{-y²/(2σ²)}``, ``Z = Σ_y w(y)``, ``T(m) = Σ_{y>=m} w(y)`` and
    ``m = floor(c) + 1`` (the least integer above ``c``; computed exactly from Fractions),
    ``P[Y > c] = T(m)/Z`` and ``P[Y > c + Δ] = T(m + Δ)/Z``, so

        ``δ·Z = Σ_{y=m}^{m+Δ-1} w(y) - (e^ε - 1)·T(m + Δ)``.

    The terms are summed in float64 over ``0 <= y <= Y`` with ``Y² >= (m+Δ)² + 160σ²``: the
    omitted terms (``< e^{-80}`` relative) only make ``T`` and ``Z`` smaller, which makes the
    bound larger. Each sum of ``n`` terms with exponents at most ``x`` is within
    ``γ = (n + 3x + 16)·2**-53`` relative of the exact one (``x`` is exact to 3 ulps, ``exp``
    adds one; a sum of positive terms errs by at most ``n`` ulps), so

        ``δ <= (A·(1+γ) - (e^ε-1)↓·T·(1-γ)) / (Z·(1-γ))``

    with ``(e^ε - 1)↓`` a lower bound, is what is returned (times ``1 + 8·2**-53`` for the
    last operations). All three sums are of positive terms (``m`` may be ``<= 0``: the terms
    run over ``-Y <= y <= Y``), so there is no cancellation inside them. A delta below
    ``e^{-690}`` is returned as ``1e-300`` (still an upper bound). The cost is
    ``O(εσ² + 26σ)`` terms.

    >>> d = discrete_gaussian_delta(Fraction(16), 1)  # the continuous Gaussian: 2.92e-06
    >>> 3.055e-06 < d < 3.056e-06
    True
    >>> round(discrete_gaussian_delta(1, 0), 6)  # at ε = 0, the TV distance P(Y = 0) = 1/Z
    0.398942
    """
    s2 = to_fraction(sigma2, "sigma2")
    eps = to_fraction(epsilon, "epsilon")
    d = int(sensitivity)
    if s2 <= 0 or eps < 0 or d < 1:
        raise PinqError("discrete_gaussian_delta needs sigma2 > 0, epsilon >= 0, sensitivity >= 1")
    c = eps * s2 / d - Fraction(d, 2)
    m = math.floor(c) + 1  # >= 1 - Δ/2, since c >= -Δ/2
    # For m >= 1: δ <= Σ_{y=m}^{m+Δ-1} w(y)/Z <= Δ·w(m) (w falls on y >= 0, Z >= 1).
    if m >= 1 and math.log(d) - _float_down(Fraction(m * m) / (2 * s2)) < -690.0:
        return 1e-300
    big_y = math.isqrt(math.ceil((abs(m) + d) ** 2 + 160 * s2)) + 2
    if big_y >= 1 << 26:  # y² must stay exact in float64
        raise PinqError("sigma2 is too large to evaluate the discrete Gaussian profile")
    s2f = float(s2)
    y = np.arange(-big_y, big_y + 1, dtype=np.float64)  # y[i] = i - big_y
    w = np.exp(-(y * y) / (2.0 * s2f))
    gamma = (2 * big_y + 1 + 3.0 * big_y * big_y / (2.0 * s2f) + 16.0) * _UNIT
    i = m + big_y  # the index of y = m
    a = float(w[i : i + d].sum()) * (1.0 + gamma)
    t = float(w[i + d :].sum()) * (1.0 - gamma)
    z = float(w.sum()) * (1.0 - gamma)
    e = _float_down(eps)
    if e <= 700.0:
        b = math.expm1(e) * (1.0 - 4.0 * _UNIT) * t
    elif t == 0.0:
        b = 0.0
    else:  # e^ε - 1 overflows: work with its logarithm (ε + log1p(-e^-ε), within 4 ulps)
        log_b = e + math.log1p(-math.exp(-e)) + math.log(t)
        if log_b > 709.0:
            return 0.0  # (e^ε - 1)·T exceeds A: no output pair violates e^ε
        b = math.exp(log_b - 8.0 * _UNIT * (abs(log_b) + e + 1.0))
    num = a - b
    if num <= 0.0:
        return 0.0
    return min(1.0, num / z * (1.0 + 8.0 * _UNIT))
