"""Accounting models: how charges compose and when they fit a budget.

A :class:`~pinqpy.Budget` holds a total ``(epsilon, delta)``; an *accountant* decides how the
charges drawn from it add up and whether the next one still fits. Three models:

``"pure"`` -- :class:`PureAccountant`
    epsilon-DP only. Epsilons add (basic composition, Dwork & Roth, "The Algorithmic
    Foundations of Differential Privacy", 2014, Theorem 3.14); a charge with a delta never fits,
    and the total's delta must be 0.

``"approx"`` -- :class:`ApproxAccountant`
    (epsilon, delta)-DP with basic composition: epsilons add and deltas add (Dwork & Roth,
    Theorem 3.16). This is PINQ's model and pinqpy's default.

``"zcdp"`` -- :class:`ZcdpAccountant`
    Zero-concentrated DP (Bun & Steinke, "Concentrated Differential Privacy: Simplifications,
    Extensions, and Lower Bounds", TCC 2016, arXiv:1605.02065; *BS16* below). A mechanism is
    rho-zCDP when the Rényi divergence of order ``a`` between its outputs on neighbours is at
    most ``rho·a`` for every ``a > 1``. Charges are kept as rho:

    * a Gaussian mechanism with L2 sensitivity ``D`` and noise ``N(0, sigma²)`` is
      ``D²/(2 sigma²)``-zCDP (BS16, Proposition 1.6) -- :func:`rho_of_gaussian`;
    * an epsilon-DP mechanism is ``epsilon²/2``-zCDP (BS16, Proposition 1.4) --
      :func:`rho_of_pure`;
    * rhos add under composition (BS16, Lemma 1.7);
    * a group of ``k`` rows sees ``k²·rho`` (BS16, Proposition 1.9);
    * an (epsilon, delta) charge with ``delta > 0`` that is not a Gaussian mechanism has no
      zCDP guarantee at all (only BS16's weaker "approximate zCDP", which composes
      differently), so it is refused with a :class:`~pinqpy.PrivacyError`.

    The budget's ``(epsilon, delta)`` is turned into a rho-budget once, by :func:`rho_for`: the
    largest rho whose (epsilon, delta) reading fits, using the tight conversion of Canonne,
    Kamath & Steinke ("The Discrete Gaussian for Differential Privacy", NeurIPS 2020,
    arXiv:2004.00010, Section 2.3; *CKS20* below) -- :func:`zcdp_epsilon`,
    :func:`zcdp_delta`. A charge fits when the total rho stays within it; that comparison is
    exact, so many small charges fill a zCDP budget exactly, as they do an epsilon budget.

For ``k`` Gaussian queries of noise ``sigma`` zCDP pays ``ρ = k/(2σ²)``, whose (epsilon,
delta) reading grows like ``sqrt(k)``, while basic composition grows like ``k``. At a fixed
total delta, zCDP beats basic composition of the exact (analytic Gaussian) costs from the
second query on; for a single query the exact reading is better. For Laplace queries of
epsilon 0.1 at delta 1e-6 the crossover is at 24 queries (``epsilon²/2`` is a loose rho for
one Laplace query). ``tests/unit/test_accounting_models.py`` checks both crossovers.

**Partitions: the maximum rule holds in every model.** PINQ's ``partition`` splits a frame
into disjoint parts and charges the parent only the *largest* part total (McSherry, "Privacy
Integrated Queries", SIGMOD 2009, parallel composition). Why this is sound here:

* One privacy unit changes at most ``K`` rows of the partitioned frame (its stability), and
  each row lies in exactly one part; so part ``i`` sees ``k_i`` changed rows with
  ``Σ k_i <= K``, and every other part's input -- hence its output distribution -- is
  unchanged. Independent mechanisms on unchanged inputs leak nothing, so the privacy loss of
  the whole release is that of the affected parts only.
* pure: the loss is ``Σ k_i·eps_i <= K·max eps``.
* approx: the affected parts compose to ``(Σ k_i eps_i, Σ_i δ_i(k_i))`` with the group bound
  ``δ(k) = k·e^{(k-1)eps}·δ``, at most ``K·max eps`` and ``K·e^{(K-1)max eps}·max δ``: the
  componentwise maximum taken to the group size ``K`` (:meth:`Usage.at`).
* zCDP: Rényi divergences of independent outputs add, and a part with ``k_i`` changed rows
  contributes at most ``k_i²·rho_i``; ``Σ k_i² rho_i <= (Σ k_i)²·max rho <= K²·max rho``. So
  the parent pays ``max rho`` (times ``K²``), and the maximum is taken over rho *before* any
  conversion to (epsilon, delta).

:class:`Usage` carries all three readings of a charge (epsilon, delta and rho) so that one
partition bookkeeping serves every model: ``Usage.max`` is componentwise.

**Rounding.** Exact :class:`fractions.Fraction` arithmetic wherever the formulas are rational
(rho of a Gaussian, rho of a pure charge, composition, group privacy of rho). The conversions
involve logarithms and an optimisation; they are computed in floating point and rounded in the
safe direction: an epsilon or delta *up* (at least the exact value), a rho-budget *down*.
Every ``α > 1`` gives a valid CKS20 bound, so the optimisation can only cost tightness, never
soundness; the float evaluation at the chosen ``α`` gets a margin of ``1e-13`` times the sum
of the magnitudes of its terms (far above the few-ulp error of the evaluation), then
:func:`pinqpy.core.exact.ceil_fraction`, then a decimal ceiling to 12 significant digits so the
numbers print legibly.

>>> rho_of_gaussian(1, 4)                      # BS16 Prop. 1.6: 1/(2·4²)
Fraction(1, 32)
>>> zcdp_epsilon(Fraction(1, 32), 1e-3)        # CKS20, tight
Fraction(688002455489, 1000000000000)
>>> zcdp_epsilon_simple(Fraction(1, 32), 1e-3)  # BS16 Prop. 1.3
Fraction(480240273607, 500000000000)
>>> float(rho_for(1, 1e-6))                    # the rho-budget of (1, 1e-6)
0.0243559703586
>>> acc = accountant_for("zcdp")
>>> from pinqpy.accounting.cost import Cost
>>> total = Cost(1, 1e-6)
>>> acc.check(Usage(), Usage.gaussian(0.5, 1e-7, 1, 10), total)
True
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

from pinqpy.accounting.cost import Cost
from pinqpy.core.exact import ceil_fraction, to_fraction
from pinqpy.errors import PinqError, PrivacyError

__all__ = [
    "Accountant",
    "ApproxAccountant",
    "PureAccountant",
    "Usage",
    "ZcdpAccountant",
    "accountant_for",
    "gaussian_sigma_for_rho",
    "rho_for",
    "rho_of_gaussian",
    "rho_of_pure",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_epsilon_simple",
]

_ZERO = Fraction(0)
# Absolute error allowance of a float evaluation, relative to the sum of the magnitudes of the
# terms that were added: each term carries a few ulps (2^-53 ≈ 1.1e-16) of rounding error.
_MARGIN = 1e-13
# Significant digits kept when a converted value is written as a Fraction.
_DIGITS = 12


def _cost(epsilon: Fraction, delta: Fraction) -> Cost:
    return Cost._of(epsilon, delta)


# -- exact <-> float, with a direction -----------------------------------------------------
def _float_up(x: Fraction) -> float:
    """The smallest float not below ``x`` (``x >= 0``)."""
    try:
        f = float(x)
    except OverflowError:
        raise PinqError("a privacy parameter is too large") from None
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    if math.isinf(f):
        raise PinqError("a privacy parameter is too large")
    return f


def _float_down(x: Fraction) -> float:
    """The largest float not above ``x``."""
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, -math.inf)
    return f


def _ceil_digits(x: Fraction) -> Fraction:
    """``x`` rounded up to :data:`_DIGITS` significant decimal digits (a short Fraction)."""
    if x <= 0:
        return _ZERO
    exponent = math.floor(math.log10(float(x))) if float(x) > 0 else -330
    scale = Fraction(10) ** (_DIGITS - 1 - exponent)
    return Fraction(math.ceil(x * scale)) / scale


def _floor_digits(x: Fraction) -> Fraction:
    """``x`` rounded down to :data:`_DIGITS` significant decimal digits."""
    if x <= 0:
        return _ZERO
    exponent = math.floor(math.log10(float(x))) if float(x) > 0 else -330
    scale = Fraction(10) ** (_DIGITS - 1 - exponent)
    return Fraction(math.floor(x * scale)) / scale


def _exact_value(value: object, what: str) -> Fraction:
    """A non-negative exact number; a float is read by its exact binary value.

    Used for a noise scale and a sensitivity: the noise actually added has the float's binary
    value, so that (not its decimal spelling) is what the privacy guarantee is about.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PinqError(f"{what} must be finite")
        x = Fraction(value)
    else:
        x = to_fraction(value, what)
    if x < 0:
        raise PinqError(f"{what} cannot be negative")
    return x


def _nonneg(value: object, what: str) -> Fraction:
    x = to_fraction(value, what)
    if x < 0:
        raise PinqError(f"{what} cannot be negative")
    return x


def _ln_inv(delta: Fraction) -> float:
    """``ln(1/delta)`` for ``0 < delta < 1`` as a float, for tiny deltas too.

    ``delta`` is rounded down first, so the logarithm leans up (the safe side for epsilon).
    Near 1 it is ``-log1p(delta - 1)`` (no cancellation); below the float range it is the
    difference of the logarithms of the numerator and denominator.
    """
    if delta > Fraction(1, 2):
        return -math.log1p(_float_down(delta - 1))
    d = _float_down(delta)
    if d > 1e-300:
        return -math.log(d)
    return math.log(delta.denominator) - math.log(delta.numerator)


# -- rho of a mechanism --------------------------------------------------------------------
def rho_of_gaussian(sensitivity: object, sigma: object) -> Fraction:
    """rho of the Gaussian mechanism: ``D²/(2σ²)`` (BS16, Proposition 1.6), exactly.

    Derivation: ``N(μ, σ²)`` and ``N(μ', σ²)`` have Rényi divergence ``a·(μ-μ')²/(2σ²)`` at
    every order ``a``; with ``|μ - μ'| <= D`` that is ``a·rho`` for ``rho = D²/(2σ²)``.
    Floats are read by their exact binary value (the noise really drawn), so the result is
    exact for every input.

    >>> rho_of_gaussian(1, 4)
    Fraction(1, 32)
    >>> rho_of_gaussian(2, 0.5)
    Fraction(8, 1)
    """
    d = _exact_value(sensitivity, "sensitivity")
    s = _exact_value(sigma, "sigma")
    if d == 0:
        return _ZERO
    if s == 0:
        raise PinqError("a Gaussian mechanism with sensitivity needs sigma > 0")
    return d * d / (2 * s * s)


def gaussian_sigma_for_rho(sensitivity: object, rho: object) -> float:
    """The least float sigma with ``rho_of_gaussian(sensitivity, sigma) <= rho``: ``D/sqrt(2 rho)``.

    For calibrating a Gaussian mechanism directly to a rho (BS16, Proposition 1.6 read
    backwards), rounded up so that the exact rho of the noise drawn never exceeds ``rho``.

    >>> gaussian_sigma_for_rho(1, Fraction(1, 32))
    4.0
    >>> rho_of_gaussian(3, gaussian_sigma_for_rho(3, 0.1)) <= Fraction(1, 10)
    True
    """
    d = _exact_value(sensitivity, "sensitivity")
    r = _nonneg(rho, "rho")
    if r == 0:
        raise PinqError("a Gaussian mechanism cannot be 0-zCDP")
    if d == 0:
        return 0.0
    sigma = math.sqrt(float(d * d / (2 * r)))
    while rho_of_gaussian(d, sigma) > r:
        sigma = math.nextafter(sigma, math.inf)
    # and not more than needed: step down while the one below still fits
    while sigma > 0 and rho_of_gaussian(d, math.nextafter(sigma, 0.0)) <= r:
        sigma = math.nextafter(sigma, 0.0)
    return sigma


def rho_of_pure(epsilon: object) -> Fraction:
    """rho of an epsilon-DP mechanism: ``epsilon²/2`` (BS16, Proposition 1.4), exactly.

    >>> rho_of_pure(Fraction(1, 10))
    Fraction(1, 200)
    >>> rho_of_pure(1)
    Fraction(1, 2)
    """
    e = _nonneg(epsilon, "epsilon")
    return e * e / 2


# -- zCDP -> (epsilon, delta): the CKS20 conversion ----------------------------------------
#
# rho-zCDP bounds every Rényi divergence D_a <= a·rho. CKS20 (Section 2.3) turn a Rényi bound
# into approximate DP: for every a > 1 the mechanism is (eps, delta)-DP with
#
#     delta = exp((a-1)(a·rho - eps)) / (a-1) · (1 - 1/a)^a.                              (1)
#
# With s = a - 1 > 0 (kept as its own float so that nothing cancels near a = 1):
#
#     ln delta = f(s) = s·((1+s)·rho - eps) + s·ln(1 - 1/a) - ln a,
#     f'(s)  = (2a - 1)·rho - eps + ln(1 - 1/a),      f''(s) = 2 rho + 1/(a(a-1)) > 0,
#
# so f is strictly convex and its minimiser is the unique root of the increasing f'. Solving
# (1) for eps instead, with L = ln(1/delta):
#
#     eps = g(s) = a·rho + (L - ln a)/(a-1) + ln(1 - 1/a),
#     g'(s) = rho - (L - ln a)/(a-1)²,
#
# whose sign is that of h(s) = rho·s² + ln(1+s) - L, strictly increasing from -L < 0 to +inf:
# g is unimodal and its minimiser is the unique root of h. Both roots are found by bisection
# on ln s (scale-free, from s ~ 1e-300 to s ~ 1e150), then the bound is evaluated at both
# ends of the final bracket and the smaller one kept; each is a valid bound in its own right.


def _ln_one_minus_inv(s: float) -> tuple[float, float]:
    """``ln(1 - 1/a)`` for ``a = 1 + s``, with the magnitude of the terms that formed it."""
    if s > 1.0:
        v = -math.log1p(1.0 / s)
        return v, -v
    ls, lp = math.log(s), math.log1p(s)
    return ls - lp, abs(ls) + lp


def _eps_at(rho: float, big_l: float, s: float) -> float:
    """An upper bound on ``g(s)``: the float value plus the evaluation margin."""
    lp = math.log1p(s)
    t3, m3 = _ln_one_minus_inv(s)
    t1 = (1.0 + s) * rho
    value = t1 + (big_l - lp) / s + t3
    magnitude = t1 + (big_l + lp) / s + m3
    return value + _MARGIN * magnitude


def _bisect_log(
    pred_positive: Callable[[float], bool], lo: float, hi: float
) -> tuple[float, float]:
    """Shrink ``[lo, hi]`` (``pred(lo)`` false, ``pred(hi)`` true) by bisection on ``ln s``."""
    tl, th = math.log(lo), math.log(hi)
    for _ in range(200):
        tm = 0.5 * (tl + th)
        if tm in (tl, th):
            break
        if pred_positive(math.exp(tm)):
            th = tm
        else:
            tl = tm
    return math.exp(tl), math.exp(th)


def _eps_upper(rho: float, big_l: float) -> float:
    """``min_s g(s)`` plus margin: the tight CKS20 epsilon, as a float leaning up (may be < 0)."""

    def h_positive(s: float) -> bool:
        return rho * s * s + math.log1p(s) - big_l > 0.0

    # h(hi) = ln(1 + hi) > 0; h(lo) <= L/4 + L/4 - L < 0 since ln(1+s) <= s. (Square roots
    # taken apart so that a tiny rho does not overflow L/rho.)
    root_l, root_rho = math.sqrt(big_l), math.sqrt(rho)
    hi = min(root_l / root_rho, 1e300)
    lo = min(big_l / 4.0, 0.5 * root_l / root_rho)
    for _ in range(2000):
        if h_positive(hi) or hi >= 1e300:
            break
        hi *= 2.0
    for _ in range(2000):
        if not h_positive(lo) or lo < 1e-300:
            break
        lo *= 0.5
    lo = max(lo, 1e-300)
    a, b = _bisect_log(h_positive, lo, hi)
    return min(_eps_at(rho, big_l, a), _eps_at(rho, big_l, b))


def _log_delta_at(rho: float, eps: float, s: float) -> float:
    """An upper bound on ``f(s) = ln delta`` at ``a = 1 + s``."""
    t3, m3 = _ln_one_minus_inv(s)
    lp = math.log1p(s)
    value = s * ((1.0 + s) * rho - eps) + s * t3 - lp
    magnitude = s * ((1.0 + s) * rho + eps) + s * m3 + lp
    return value + _MARGIN * magnitude


def _log_delta_upper(rho: float, eps: float) -> float:
    """``min_s f(s)`` plus margin: the log of the tight CKS20 delta, leaning up."""

    def fprime_positive(s: float) -> bool:
        t3, _ = _ln_one_minus_inv(s)
        return (2.0 * s + 1.0) * rho - eps + t3 > 0.0

    # f'(hi) >= 1 + rho - ln 2 > 0 for hi >= max(1, (eps + 1)/(2 rho)); for s <= 1,
    # f'(s) <= 3 rho + ln s, negative for s < exp(-(3 rho + 1)).
    hi = min(max(1.0, (eps + 1.0) / (2.0 * rho)), 1e300)
    for _ in range(2000):
        if fprime_positive(hi) or hi >= 1e300:
            break
        hi *= 2.0
    lo = max(math.exp(-min(3.0 * rho + 1.0, 690.0)), 1e-300)
    if fprime_positive(lo):  # the minimiser is below 1e-300: take lo, still a valid bound
        return _log_delta_at(rho, eps, lo)
    a, b = _bisect_log(fprime_positive, lo, hi)
    return min(_log_delta_at(rho, eps, a), _log_delta_at(rho, eps, b))


def zcdp_epsilon(rho: object, delta: object) -> Fraction:
    """The least epsilon such that rho-zCDP implies (epsilon, delta)-DP (CKS20), rounded up.

    ``inf_{a>1} [ a·rho + (ln(1/delta) + (a-1)·ln(1 - 1/a) - ln a)/(a-1) ]``, clamped at 0
    (CKS20, Section 2.3; solve their bound (1) on delta for epsilon). Never below the exact
    infimum; above it by about ``1e-11`` relative (the rounding into a 12-digit Fraction).

    Always below :func:`zcdp_epsilon_simple`: at every ``a`` the bracket is the classic
    ``a·rho + ln(1/delta)/(a-1)`` (minimised at ``a = 1 + sqrt(ln(1/delta)/rho)`` to give
    BS16's ``rho + 2·sqrt(rho·ln(1/delta))``) plus two negative terms, ``ln(1 - 1/a)`` and
    ``-ln(a)/(a-1)``.

    >>> float(zcdp_epsilon(Fraction(1, 32), 1e-3))
    0.688002455489
    >>> zcdp_epsilon(0, 1e-6), zcdp_epsilon(Fraction(1, 32), 0.5)
    (Fraction(0, 1), Fraction(0, 1))
    """
    r = _nonneg(rho, "rho")
    d = _nonneg(delta, "delta")
    if r == 0 or d >= 1:
        return _ZERO
    if d == 0:
        raise PinqError("rho-zCDP with rho > 0 implies no finite epsilon at delta = 0")
    value = _eps_upper(_float_up(r), _ln_inv(d))
    if not value > 0.0:
        return _ZERO
    return _ceil_digits(ceil_fraction(value))


def zcdp_epsilon_simple(rho: object, delta: object) -> Fraction:
    """The classic conversion ``rho + 2·sqrt(rho·ln(1/delta))`` (BS16, Proposition 1.3), rounded up.

    Looser than :func:`zcdp_epsilon` everywhere; kept as the reference it improves on.

    >>> float(zcdp_epsilon_simple(Fraction(1, 2), Fraction(1, 10**6)))
    5.75652176977
    """
    r = _nonneg(rho, "rho")
    d = _nonneg(delta, "delta")
    if r == 0 or d >= 1:
        return _ZERO
    if d == 0:
        raise PinqError("rho-zCDP with rho > 0 implies no finite epsilon at delta = 0")
    rf, big_l = _float_up(r), _ln_inv(d)
    root = math.sqrt(rf * big_l)
    value = rf + 2.0 * root
    return _ceil_digits(ceil_fraction(value + _MARGIN * value))


def zcdp_delta(rho: object, epsilon: object) -> Fraction:
    """The least delta such that rho-zCDP implies (epsilon, delta)-DP (CKS20), rounded up.

    ``inf_{a>1} exp((a-1)(a·rho - epsilon))/(a-1) · (1 - 1/a)^a``, at most 1. Never below the
    exact infimum. Below BS16's ``exp(-(epsilon - rho)²/(4 rho))`` (the infimum of the first
    factor alone), since the second factor is ``exp((a-1)·ln(1-1/a) - ln a) < 1``.

    >>> float(zcdp_delta(Fraction(1, 32), 0))
    0.150845784563
    >>> zcdp_delta(Fraction(1, 32), Fraction(688002455489, 10**12)) <= Fraction(1, 1000)
    True
    """
    r = _nonneg(rho, "rho")
    e = _nonneg(epsilon, "epsilon")
    if r == 0:
        return _ZERO
    log_delta = _log_delta_upper(_float_up(r), _float_down(e))
    if log_delta >= 0.0:
        return Fraction(1)
    return min(Fraction(1), _ceil_digits(ceil_fraction(math.exp(log_delta))))


def rho_for(epsilon: object, delta: object) -> Fraction:
    """The largest rho with ``zcdp_epsilon(rho, delta) <= epsilon``, rounded down.

    The rho-budget of a zCDP budget of ``(epsilon, delta)``: any total rho up to it converts
    to at most ``epsilon`` at ``delta``. Found by bisection on rho (the CKS20 epsilon is
    increasing in rho), written with a bounded denominator, and verified with
    :func:`zcdp_epsilon` before it is returned. ``delta = 0`` gives 0.

    >>> r = rho_for(1, 1e-6)
    >>> r
    Fraction(121779851793, 5000000000000)
    >>> zcdp_epsilon(r, 1e-6) <= 1
    True
    """
    e = _nonneg(epsilon, "epsilon")
    d = _nonneg(delta, "delta")
    if d >= 1:
        raise PinqError("a zCDP budget needs delta below 1")
    if d == 0:
        return _ZERO
    return _rho_for(e, d)


@functools.lru_cache(maxsize=256)
def _rho_for(e: Fraction, d: Fraction) -> Fraction:
    big_l = _ln_inv(d)
    target = _float_down(e) * (1.0 - 2e-11)

    def fits(r: float) -> bool:
        return r == 0.0 or _eps_upper(r, big_l) <= target

    lo, hi = 0.0, float(e) + 1.0
    for _ in range(2000):
        if not fits(hi):
            break
        lo, hi = hi, hi * 2.0
    else:  # pragma: no cover - every rho fits only when delta >= 1, excluded above
        raise PinqError("could not bound rho for this budget")
    for _ in range(400):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi) or hi - lo <= hi * 1e-15:
            break
        if fits(mid):
            lo = mid
        else:
            hi = mid
    r = _floor_digits(Fraction(lo))
    # Verify with the public (Fraction-rounded) conversion; step down if rounding disagrees.
    while r > 0 and zcdp_epsilon(r, d) > e:
        r = _floor_digits(r * (1 - Fraction(1, 10**11)))
    return r


# -- usage: what one charge uses, in every model -------------------------------------------
@dataclass(frozen=True)
class Usage:
    """What a charge uses, read in every model at once.

    ``epsilon`` and ``delta`` are its (epsilon, delta) cost (pure and approx models); ``rho``
    is its zCDP cost, or ``None`` when the charge has no zCDP guarantee (an (epsilon, delta)
    mechanism with ``delta > 0`` other than the Gaussian). Usages add componentwise
    (``None`` absorbs), ``max`` is componentwise (parallel composition), and ``at(k)`` is
    group privacy for ``k`` rows.

    >>> u = Usage.pure(Fraction(1, 10)) + Usage.gaussian(1, 1e-6, 1, 4)
    >>> u.epsilon, u.rho
    (Fraction(11, 10), Fraction(29, 800))
    >>> u.at(2).rho
    Fraction(29, 200)
    >>> (u + Usage(epsilon=Fraction(1), delta=Fraction(1, 10**9), rho=None)).rho is None
    True
    """

    epsilon: Fraction = _ZERO
    delta: Fraction = _ZERO
    rho: Fraction | None = _ZERO

    def __post_init__(self) -> None:
        for name in ("epsilon", "delta", "rho"):
            v = getattr(self, name)
            if v is None and name == "rho":
                continue
            if type(v) is not Fraction:
                object.__setattr__(self, name, Fraction(_nonneg(v, name)))
            elif v < 0:
                raise PinqError("a usage cannot be negative")

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def pure(cls, epsilon: object) -> Usage:
        """An epsilon-DP charge: ``(epsilon, 0)`` and ``rho = epsilon²/2``."""
        e = _nonneg(epsilon, "epsilon")
        return cls(e, _ZERO, rho_of_pure(e))

    @classmethod
    def gaussian(cls, epsilon: object, delta: object, sensitivity: object, sigma: object) -> Usage:
        """A Gaussian mechanism calibrated to ``(epsilon, delta)``: rho is ``D²/(2σ²)``."""
        return cls(
            _nonneg(epsilon, "epsilon"),
            _nonneg(delta, "delta"),
            rho_of_gaussian(sensitivity, sigma),
        )

    @classmethod
    def from_cost(cls, cost: Cost) -> Usage:
        """A charge known only by its (epsilon, delta): rho only when delta is 0."""
        e, d = Fraction(cost.epsilon), Fraction(cost.delta)
        return cls(e, d, rho_of_pure(e) if d == 0 else None)

    # -- arithmetic -----------------------------------------------------------------------
    def __add__(self, other: Usage) -> Usage:
        rho = None if self.rho is None or other.rho is None else self.rho + other.rho
        return Usage(self.epsilon + other.epsilon, self.delta + other.delta, rho)

    def __sub__(self, other: Usage) -> Usage:
        """Componentwise difference clamped at 0 (only used for monotone increments)."""
        rho = None if self.rho is None or other.rho is None else max(self.rho - other.rho, _ZERO)
        return Usage(
            max(self.epsilon - other.epsilon, _ZERO), max(self.delta - other.delta, _ZERO), rho
        )

    def max(self, other: Usage) -> Usage:
        """Componentwise maximum: what a partition's parent pays (see the module docstring)."""
        rho = None if self.rho is None or other.rho is None else max(self.rho, other.rho)
        return Usage(max(self.epsilon, other.epsilon), max(self.delta, other.delta), rho)

    def at(self, k: object) -> Usage:
        """This usage for a group of ``k`` rows: ``k·epsilon``, ``k²·rho`` (BS16 Prop. 1.9),
        and delta by the generic group bound ``k·e^{(k-1)·epsilon}·delta`` of
        :meth:`pinqpy.Cost.at`, rounded up.

        >>> Usage.pure(Fraction(1, 10)).at(3)
        Usage(epsilon=Fraction(3, 10), delta=Fraction(0, 1), rho=Fraction(9, 200))
        """
        kk = k if isinstance(k, Fraction) else to_fraction(k, "stability")
        if kk == 1:
            return self
        if kk < 0:
            raise PinqError("a stability cannot be negative")
        if kk == 0:
            return Usage()
        delta = _cost(self.epsilon, self.delta).at(kk).delta if self.delta else _ZERO
        rho = None if self.rho is None else self.rho * kk * kk
        return Usage(self.epsilon * kk, Fraction(delta), rho)

    @property
    def is_zero(self) -> bool:
        return self.epsilon == 0 and self.delta == 0 and self.rho == 0

    @property
    def cost(self) -> Cost:
        """The (epsilon, delta) reading (basic composition)."""
        return _cost(self.epsilon, self.delta)


# -- accountants -----------------------------------------------------------------------------
class Accountant(ABC):
    """How one accounting model composes charges and checks them against a total."""

    name: ClassVar[str]

    def validate_total(self, total: Cost) -> None:
        """Raise :class:`~pinqpy.PinqError` if ``total`` cannot be a budget in this model."""
        if not 0 <= total.delta < 1:
            raise PinqError("a budget's delta must be at least 0 and below 1")

    @abstractmethod
    def check(self, spent: Usage, charge: Usage, total: Cost) -> bool:
        """Does ``spent + charge`` fit ``total``? (Raises if the charge is inexpressible.)"""

    @abstractmethod
    def as_cost(self, usage: Usage, total: Cost) -> Cost:
        """``usage`` reported as an (epsilon, delta) pair."""

    def remaining(self, spent: Usage, total: Cost) -> Cost:
        """What is left, as an (epsilon, delta) pair (``total - spent`` unless overridden)."""
        return total - self.as_cost(spent, total)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class PureAccountant(Accountant):
    """epsilon-DP: epsilons add; a charge with a delta never fits.

    >>> acc, total = PureAccountant(), _cost(Fraction(1), _ZERO)
    >>> acc.check(Usage.pure(0.5), Usage.pure(0.5), total)
    True
    >>> acc.check(Usage(), Usage.gaussian(0.1, 1e-9, 1, 50), total)
    False
    """

    name = "pure"

    def validate_total(self, total: Cost) -> None:
        if total.delta != 0:
            raise PinqError("pure accounting needs a budget with delta = 0")

    def check(self, spent: Usage, charge: Usage, total: Cost) -> bool:
        if charge.delta > 0 or spent.delta > 0:
            return False
        return spent.epsilon + charge.epsilon <= total.epsilon

    def as_cost(self, usage: Usage, total: Cost) -> Cost:
        return _cost(usage.epsilon, _ZERO)


class ApproxAccountant(Accountant):
    """(epsilon, delta)-DP with basic composition: epsilons add, deltas add.

    >>> acc, total = ApproxAccountant(), _cost(Fraction(1), Fraction(1, 10**6))
    >>> u = Usage.gaussian(0.5, 5e-7, 1, 10)
    >>> acc.check(u, u, total), acc.check(u + u, u, total)
    (True, False)
    >>> acc.as_cost(u + u, total)
    Cost(epsilon=1, delta=0.000001)
    """

    name = "approx"

    def check(self, spent: Usage, charge: Usage, total: Cost) -> bool:
        return (
            spent.epsilon + charge.epsilon <= total.epsilon
            and spent.delta + charge.delta <= total.delta
        )

    def as_cost(self, usage: Usage, total: Cost) -> Cost:
        return _cost(usage.epsilon, usage.delta)


class ZcdpAccountant(Accountant):
    """zCDP: rhos add; the total rho must stay within :func:`rho_for` of the budget.

    ``as_cost`` reports a rho as the (epsilon, delta) it converts to at the budget's delta
    (CKS20), never above the budget's epsilon while within the rho-budget; ``remaining`` is
    the conversion of the rho still unspent, rounded down.

    >>> acc, total = ZcdpAccountant(), _cost(Fraction(1), Fraction(1, 10**6))
    >>> g = Usage.gaussian(0.5, 1e-7, 1, 10)          # rho = 1/200
    >>> spent = Usage()
    >>> while acc.check(spent, g, total):
    ...     spent = spent + g
    >>> spent.rho, acc.rho_budget(total)
    (Fraction(1, 50), Fraction(121779851793, 5000000000000))
    >>> acc.as_cost(spent, total).epsilon <= 1
    True
    """

    name = "zcdp"

    def validate_total(self, total: Cost) -> None:
        if not 0 < total.delta < 1:
            raise PinqError(
                "zcdp accounting converts rho to (epsilon, delta) and needs a budget delta "
                "above 0 and below 1"
            )

    def rho_budget(self, total: Cost) -> Fraction:
        """The largest total rho that fits ``total`` (:func:`rho_for`)."""
        return rho_for(total.epsilon, total.delta)

    @staticmethod
    def _rho(usage: Usage) -> Fraction:
        if usage.rho is None:
            raise PrivacyError(
                "this charge is an (epsilon, delta) guarantee with delta > 0 that is not a "
                "Gaussian mechanism, and has no zCDP (rho) reading; use a Budget with "
                "accounting='approx', or a Gaussian or pure mechanism"
            )
        return usage.rho

    def check(self, spent: Usage, charge: Usage, total: Cost) -> bool:
        rho = self._rho(spent) + self._rho(charge)
        return rho <= self.rho_budget(total)

    def as_cost(self, usage: Usage, total: Cost) -> Cost:
        rho = self._rho(usage)
        if rho == 0:
            return _cost(_ZERO, _ZERO)
        eps = zcdp_epsilon(rho, total.delta)
        if rho <= self.rho_budget(total):
            # true eps(rho) <= true eps(budget) <= zcdp_epsilon(budget) <= total.epsilon
            eps = min(eps, Fraction(total.epsilon))
        return _cost(eps, Fraction(total.delta))

    def remaining(self, spent: Usage, total: Cost) -> Cost:
        used = self._rho(spent)
        if used == 0:  # nothing spent: exactly the total, not the conversion of its rho
            return _cost(Fraction(total.epsilon), Fraction(total.delta))
        left = self.rho_budget(total) - used
        if _float_down(left) <= 0.0:
            return _cost(_ZERO, _ZERO)
        value = _eps_upper(_float_down(left), _ln_inv(Fraction(total.delta)))
        eps = _floor_digits(Fraction(max(value * (1.0 - 1e-9), 0.0)))
        return _cost(min(eps, Fraction(total.epsilon)), Fraction(total.delta))


_ACCOUNTANTS: dict[str, Accountant] = {
    a.name: a for a in (PureAccountant(), ApproxAccountant(), ZcdpAccountant())
}


def accountant_for(name: str) -> Accountant:
    """The accountant of a model: ``"pure"``, ``"approx"`` or ``"zcdp"``.

    >>> accountant_for("zcdp")
    ZcdpAccountant()
    >>> accountant_for("renyi")
    Traceback (most recent call last):
    ...
    pinqpy.errors.PinqError: unknown accounting 'renyi'; choose one of 'pure', 'approx', 'zcdp'
    """
    acc = _ACCOUNTANTS.get(name) if isinstance(name, str) else None
    if acc is None:
        choices = ", ".join(repr(n) for n in _ACCOUNTANTS)
        raise PinqError(f"unknown accounting {name!r}; choose one of {choices}")
    return acc
