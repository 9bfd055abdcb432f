"""Noise mechanisms: built from public parameters, charged before data, released in bulk.

A mechanism object is made from public parameters only (epsilon, delta, bounds, a candidate
grid); it never sees data until ``release``. Before that it already knows

* its ``charge`` -- an object with ``at(k) -> Cost``, the cost at stability ``k`` (see
  :mod:`pinqpy.accounting.agents`), so the budget can be checked before any data is read;
* its accuracy -- ``noise_scale``, ``describe()``, ``expected_error()`` and ``accuracy(level)``
  -- so a plan can be explained without running it.

``release(...)`` turns exact aggregates into noisy ones and returns them with an
:class:`~pinqpy.results.values.Accuracy`. Every release is vectorized over a leading *keys* axis: a
partition releases all its keys in one call (arrays of shape ``(n_keys,)``, or
``(n_keys, m)`` for the quantile's counts). The keys of a partition are disjoint, so one row
changes the aggregate of one key only, and one release over all keys costs the same as a
release over one key (parallel composition; McSherry, "Privacy Integrated Queries", SIGMOD
2009).

**Privacy model.** Neighbouring inputs differ by adding or removing one row of the frame being
aggregated; every sensitivity below is for that relation. The budget layer multiplies by the
frame's stability through ``charge.at(k)``.

**Exact accounting.** Epsilons and deltas are :class:`fractions.Fraction` throughout. Noise
parameters are exact rationals computed from them and only ever rounded *up* (more noise), and
an exponential mechanism's coefficient is rounded *down*; so no rounding ever makes a
mechanism less private than it is charged for.

**Floating-point-safe noise.** A textbook sampler computes ``scale·log(u)`` in floating point,
and the low-order bits of ``answer + noise`` can then reveal the answer (Mironov, CCS 2012).
Here every additive noise is exact and drawn from the CSPRNG by :mod:`pinqpy.noise.samplers`, with
integer arithmetic only:

* **integer answers** (counts) get the discrete Laplace or the discrete Gaussian of Canonne,
  Kamath & Steinke (NeurIPS 2020, "CKS20") and come out as ``int64`` integers;
* **real answers** (sums, the centred sums of means and variances) are released on a power-of-
  two grid ``g`` chosen from public parameters only, ``g·(round(v/g) + Z)`` with ``Z`` exact
  discrete noise (:func:`~pinqpy.noise.samplers.lattice_laplace`,
  :func:`~pinqpy.noise.samplers.lattice_gaussian`): every output is a multiple of the same ``g``
  whatever the data;
* **quantiles** release a public candidate value; their value-space ``ci`` comes from a
  discrete-Laplace histogram;
* **selections** (the quantile's candidate, :class:`ArgmaxMechanism`'s label) use
  permute-and-flip (McKenna & Sheldon, NeurIPS 2020) with exact ``Bernoulli(exp(-γ))`` coins
  on rational exponents ``γ`` (:func:`_permute_and_flip`) instead of Gumbel noise.

No mechanism here calls a floating-point sampler; the float ``laplace_scale``,
``gaussian_sigma`` and :class:`GaussianCharge` remain for the continuous mechanisms'
accounting.

Inside :func:`pinqpy.testing.no_noise` every mechanism releases its exact value (a selection
becomes a plain argmax, lowest index on ties).

>>> import numpy as np
>>> from pinqpy import testing
>>> m = CountMechanism(0.1)
>>> m.describe(), m.charge.at(2)
('DiscreteLaplace(scale=10)', Cost(epsilon=0.2))
>>> with testing.no_noise():
...     values, acc = m.release(np.array([120, 7]))
>>> values.tolist(), values.dtype
([120, 7], dtype('int64'))
"""

from __future__ import annotations

import functools
import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from pinqpy.accounting.charges import (
    CompositeCharge,
    DiscreteGaussianCharge,
    GaussianCharge,
    PureCharge,
    _sqrt_down,
)
from pinqpy.accounting.cost import _nonneg, check_epsilon, check_part_delta
from pinqpy.accounting.models import gaussian_sigma_for_rho, rho_for, zcdp_delta
from pinqpy.accounting.profiles import (
    _DELTA_MARGIN,
    _gauss_delta_ratio,
    discrete_gaussian_delta,
    gaussian_delta,
)
from pinqpy.core.exact import Exact, to_fraction
from pinqpy.core.lattice import Lattice
from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise
from pinqpy.noise.samplers import (
    _fit_laplace_scale,
    _fit_sigma2,
    _units_sensitivity,
    bernoulli_exp,
    discrete_gaussian,
    discrete_laplace,
    grid_for,
    grid_for_gaussian,
    lattice_gaussian,
    lattice_laplace,
    round_up_dyadic,
    uniform_below,
)
from pinqpy.results.format import _fmt
from pinqpy.results.values import (
    Accuracy,
    AdditiveAccuracy,
    ArgmaxAccuracy,
    DiscreteGaussianNoise,
    DiscreteLaplaceNoise,
    LatticeNoise,
    NoiseDistribution,
    ZeroNoise,
    check_level,
)

__all__ = [
    "ArgmaxMechanism",
    "CompositeCharge",
    "CountMechanism",
    "DiscreteGaussianCharge",
    "GaussianCharge",
    "MeanAccuracy",
    "MeanMechanism",
    "Mechanism",
    "PureCharge",
    "QuantileAccuracy",
    "QuantileMechanism",
    "SumMechanism",
    "VarianceAccuracy",
    "VarianceMechanism",
    "default_candidates",
    "discrete_gaussian_delta",
    "discrete_gaussian_sigma2",
    "gaussian_delta",
    "gaussian_sigma",
    "laplace_scale",
]

# -- exact-to-float helpers ----------------------------------------------------------------
def _round_up(x: Fraction) -> float:
    """The smallest float not below the exact value ``x``."""
    f = float(x)  # correctly rounded (int / int true division)
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


_float_up = _round_up


def _optional_delta(delta: object) -> Fraction | None:
    """``None`` or 0 selects a pure (Laplace) mechanism; otherwise a delta in (0, 1)."""
    if delta is None:
        return None
    if not isinstance(delta, bool) and isinstance(delta, int | float | Fraction) and delta == 0:
        return None
    return check_part_delta(delta)


#: The largest bound magnitude a sum, mean or quantile accepts: ``2**959`` (about 4.9e288).
#: An engine sums at most ``2**63`` clamped values (row counts are ``int64``), so every
#: partial float sum is at most ``2**63·2**959 = 2**1022`` in magnitude (plus rounding far
#: below the next power of two), and so is ``mid·count``: their difference, the centred sum
#: of a mean, stays finite. Width, midpoint and sensitivity are then finite too.
MAX_BOUND = 2.0**959
#: The largest bound magnitude a variance or standard deviation accepts: ``2**476`` (about
#: 1.95e143), so that sums of ``2**63`` squares, ``2·mid·sum`` and ``mid²·count`` stay below
#: ``2**1016`` each and the shifted sum of squares is finite.
MAX_VARIANCE_BOUND = 2.0**476


def _bounds(lo: object, hi: object, limit: float = MAX_BOUND) -> tuple[float, float]:
    """Validated public bounds as floats (the values the executor clamps to).

    Bounds beyond ``limit`` in magnitude are refused (before any charge): the float sums and
    the lattice released after the charge could not represent what the query can produce.
    """
    try:
        lo_f, hi_f = float(lo), float(hi)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise PinqError("bounds must be two numbers (low, high)") from None
    if not (math.isfinite(lo_f) and math.isfinite(hi_f)):
        raise PinqError("bounds must be finite numbers")
    if lo_f > hi_f:
        raise PinqError("bounds must be given as (low, high) with low <= high")
    if max(abs(lo_f), abs(hi_f)) > limit:
        raise PinqError(
            f"bounds ({lo_f:g}, {hi_f:g}) are too large for this aggregation: each must be at "
            f"most {limit:.4g} in magnitude (2**{math.frexp(limit)[1] - 1}), so that widths, "
            "midpoints and sums over any number of rows stay finite"
        )
    return lo_f, hi_f


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


# -- shared machinery ----------------------------------------------------------------------
class _Noise:
    """One noisy measurement: its noise distribution, its charge, and how it is drawn.

    Built from public parameters only (``kind`` is ``"count"``, ``"lattice"`` or ``"zero"``).
    ``add(x)`` returns ``x`` plus the noise: ``int64`` for a count, float64 multiples of the
    grid for a lattice release, ``x`` itself for zero sensitivity. Inside
    :func:`pinqpy.testing.no_noise` it returns ``x`` unchanged (as the lattice samplers do).
    """

    __slots__ = ("charge", "epsilon", "kind", "noise", "sensitivity", "sigma")

    def __init__(
        self,
        kind: str,
        noise: NoiseDistribution,
        charge: Any,
        sensitivity: Fraction,
        epsilon: Fraction,
        sigma: Fraction | None = None,
    ):
        self.kind, self.noise, self.charge = kind, noise, charge
        self.sensitivity, self.epsilon, self.sigma = sensitivity, epsilon, sigma

    def add(self, x: np.ndarray) -> np.ndarray:
        if self.kind == "count":
            return x + _count_noise_sample(self.noise, x.size)
        if self.kind == "zero" or x.size == 0:
            return x.astype(np.float64)
        noise = self.noise
        assert isinstance(noise, LatticeNoise)
        if isinstance(noise.unit, DiscreteLaplaceNoise):
            out, g, unit = lattice_laplace(x, self.sensitivity, self.epsilon)
            assert g == noise.grid and unit == noise.unit.b
        else:
            assert self.sigma is not None
            out, g, unit = lattice_gaussian(x, self.sensitivity, self.sigma)
            assert g == noise.grid and unit == noise.unit.sigma2
        return out

    def add_exact(self, values: Sequence[Fraction]) -> np.ndarray:
        """Noisy releases of exact rational answers (a lattice release; :class:`Lattice` sums).

        No float touches the answer before the noise: ``m = round(v/g)`` (half to even) is
        computed exactly, the exact integer noise ``Z`` in grid units is added as Python
        integers, and only ``g·(m + Z)`` -- a post-processing of the noisy integer -- is
        rounded to the nearest float (saturating at the largest finite float). So the
        sensitivity in grid units is exactly ``ceil(Δ/g) + 1`` (see ``_units_sensitivity``),
        whatever the size of the answer. Inside :func:`pinqpy.testing.no_noise`, and for zero
        sensitivity, the answers are returned correctly rounded.
        """
        if self.kind == "count":
            raise ValueError("add_exact releases real answers, not counts")
        if self.kind == "zero" or not values or _noise.noise_disabled():
            return np.array([_to_float(v) for v in values], dtype=np.float64)
        noise = self.noise
        assert isinstance(noise, LatticeNoise)
        g = Fraction(noise.grid)
        snapped = [round(Fraction(v) / g) for v in values]
        z = _count_noise_sample(noise.unit, len(snapped))
        return np.array(
            [_to_float((m + int(zi)) * g) for m, zi in zip(snapped, z.tolist(), strict=True)],
            dtype=np.float64,
        )


def _to_float(x: Fraction | int) -> float:
    """The float nearest ``x``, or the largest finite float of its sign beyond the range."""
    try:
        return float(x)
    except OverflowError:
        return sys.float_info.max if x > 0 else -sys.float_info.max


def _index_sums(x: object, what: str) -> list[int]:
    """Exact per-key integer sums (of lattice indices) as Python ints: integer arrays, lists
    of (arbitrarily large) ints, or integral floats (checked)."""
    arr = np.atleast_1d(np.asarray(x, dtype=object))
    if arr.ndim != 1:
        raise ValueError(f"{what} must have one entry per key (a 1-d array)")
    out: list[int] = []
    for v in arr.tolist():
        try:
            i = int(v)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{what} must be integers") from None
        if isinstance(v, bool | np.bool_) or i != v:
            raise ValueError(f"{what} must be integers")
        out.append(i)
    return out


def _count_noise_sample(noise: NoiseDistribution, n: int) -> np.ndarray:
    """``n`` exact integer noises (zeros inside ``no_noise``), ``int64``."""
    if _noise.noise_disabled() or n == 0:
        return np.zeros(n, dtype=np.int64)
    if isinstance(noise, DiscreteLaplaceNoise):
        z = discrete_laplace(noise.b, n)
    else:
        assert isinstance(noise, DiscreteGaussianNoise)
        z = discrete_gaussian(noise.sigma2, n)
    if int(np.abs(z).max()) >= 1 << 62:
        # A data-independent event of negligible probability; refusing reveals nothing.
        raise PinqError("a noise sample is too large to release")
    return z


def _count_noise(epsilon: Fraction, delta: Fraction | None) -> _Noise:
    """Exact integer noise for an integer answer of sensitivity 1 (a count).

    * Pure: the discrete Laplace with scale ``b = Δ/ε`` (here ``1/ε``, rounded up to a rational
      the sampler takes, which only adds noise). For integer answers ``k``, ``k'`` with
      ``|k - k'| <= Δ`` and any integer output ``y``, the probabilities differ by the factor
      ``q^{|y-k|}/q^{|y-k'|} = exp((|y-k'| - |y-k|)/b) <= exp(Δ/b) = e^ε`` (triangle
      inequality; ``q = e^{-1/b}``, the normalizer is the same): ``ε``-DP, attained for
      ``y <= min(k, k')``.
    * With a delta: the discrete Gaussian with ``σ² =`` :func:`discrete_gaussian_sigma2`,
      charged by :class:`DiscreteGaussianCharge`; its ``sigma`` attribute is the largest float
      not above ``σ``, so ``rho_of_gaussian(1, sigma) >= 1/(2σ²)``.
    """
    one = Fraction(1)
    if delta is None:
        b = _fit_laplace_scale(1 / epsilon)
        return _Noise("count", DiscreteLaplaceNoise(b), PureCharge(epsilon), one, epsilon)
    s2 = discrete_gaussian_sigma2(epsilon, delta)
    charge = DiscreteGaussianCharge(epsilon, delta, 1, _sqrt_down(s2), sigma2=s2)
    return _Noise("count", DiscreteGaussianNoise(s2), charge, one, epsilon)


def _lattice_noise(sensitivity: Fraction, epsilon: Fraction, delta: Fraction | None) -> _Noise:
    """Lattice noise for a real answer of sensitivity ``Δ`` (public parameters only).

    * Pure: ``g = grid_for(Δ, ε)``, ``S = ceil(Δ/g) + 1`` the sensitivity of ``round(v/g)`` in
      grid units, discrete Laplace of scale ``S/ε`` units (rounded up): neighbouring snapped
      answers differ by at most ``S`` units, so the ratio is at most ``e^{S/(S/ε)} = e^ε``
      (as for a count). In the value's units the noise scale is ``g·S/ε <= (Δ + 2g)/ε``,
      at most ``2**-9`` relatively above ``Δ/ε``.
    * With a delta: by zCDP. ``ρ`` is the largest (to ``rho_for``'s precision) with
      ``zcdp_delta(ρ, ε) <= δ``, ``σ = Δ/sqrt(2ρ)`` (``gaussian_sigma_for_rho``, rounded up)
      and :func:`~pinqpy.noise.samplers.lattice_gaussian` draws discrete Gaussian noise of variance
      ``σ_u² >= (σ·S/Δ)²`` grid units: shifts of at most ``S`` units give
      ``ρ_u = S²/(2σ_u²) <= Δ²/(2σ²) <= ρ`` (CKS20, Proposition 5), hence ``(ε, δ)``-DP. The
      continuous analytic calibration is not used: it is exact for the continuous Gaussian
      only.
    * ``Δ = 0`` (bounds of width 0): the answer is constant, released exactly.
    """
    if sensitivity == 0:
        charge: Any = (
            PureCharge(epsilon) if delta is None else DiscreteGaussianCharge(epsilon, delta, 0, 0.0)
        )
        return _Noise("zero", ZeroNoise(), charge, sensitivity, epsilon)
    if delta is None:
        g = grid_for(sensitivity, epsilon)
        b = _fit_laplace_scale(Fraction(_units_sensitivity(sensitivity, g)) / epsilon)
        noise = LatticeNoise(DiscreteLaplaceNoise(b), g)
        return _Noise("lattice", noise, PureCharge(epsilon), sensitivity, epsilon)
    rho = _rho_within(epsilon, delta)
    try:
        sigma_f = gaussian_sigma_for_rho(sensitivity, rho)
    except OverflowError:
        raise PinqError(
            "the Gaussian noise for these bounds, epsilon and delta is beyond the range of "
            "doubles; narrow the bounds or ask for a larger epsilon"
        ) from None
    sigma = Fraction(sigma_f)
    g = grid_for_gaussian(sensitivity, sigma)
    su = _units_sensitivity(sensitivity, g)
    s2 = _fit_sigma2(sigma * sigma * su * su / (sensitivity * sensitivity))
    charge = DiscreteGaussianCharge(epsilon, delta, sensitivity, sigma_f)
    noise = LatticeNoise(DiscreteGaussianNoise(s2), g)
    return _Noise("lattice", noise, charge, sensitivity, epsilon, sigma)


def _keys_vector(x: object, what: str) -> np.ndarray:
    """Exact per-key aggregates as a float64 vector (a scalar is one key).

    Runs after the charge, so it never raises because of the values: with bounds within
    :data:`MAX_BOUND` sums of clamped values are finite, and should a non-finite one come
    anyway ``±inf`` is kept (the lattice saturates it, as it would the exact huge value) and
    NaN reads as 0 (deterministic; see :func:`pinqpy.noise.samplers._snap`).
    """
    arr = np.atleast_1d(np.asarray(x, dtype=np.float64))
    if arr.ndim != 1:
        raise ValueError(f"{what} must have one entry per key (a 1-d array)")
    return np.nan_to_num(arr, nan=0.0, posinf=np.inf, neginf=-np.inf)


def _count_vector(x: object, what: str) -> np.ndarray:
    """Exact per-key counts as an ``int64`` vector (integral floats are accepted)."""
    arr = np.atleast_1d(np.asarray(x))
    if arr.ndim != 1:
        raise ValueError(f"{what} must have one entry per key (a 1-d array)")
    if arr.dtype.kind in "iub":
        return arr.astype(np.int64)
    f = np.asarray(arr, dtype=np.float64)
    if not np.isfinite(f).all():
        # An executor bug (engines count in integers), not a condition data can trigger.
        raise ValueError(f"{what} must be finite")
    if not (f == np.rint(f)).all() or (np.abs(f) >= 2.0**62).any():
        raise ValueError(f"{what} must be integers")
    return f.astype(np.int64)


def _finite_or(values: np.ndarray, fallback: float) -> np.ndarray:
    """Never release NaN/inf (only reachable with absurd public parameters)."""
    return np.where(np.isfinite(values), values, fallback)


def _quiet(func: Any) -> Any:
    """Run ``func`` with numpy's floating-point warnings off.

    Post-processing of noisy values (and their intervals) runs after the charge, so it must
    not warn; every such function maps non-finite intermediates to a fixed fallback
    (:func:`_finite_or`), a deterministic function of the released values.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return func(*args, **kwargs)

    return wrapper


class Mechanism(ABC):
    """Common surface of every mechanism.

    Attributes: ``epsilon`` and ``delta`` (Exact; delta 0 for pure mechanisms), ``charge``
    (``.at(k) -> Cost``), ``noise_scale`` (the primary noise parameter, or None).
    """

    epsilon: Exact
    delta: Exact
    charge: Any
    noise_scale: float | None

    @abstractmethod
    def describe(self) -> str:
        """One line saying which noise is added, e.g. ``DiscreteLaplace(scale=10)``."""

    @abstractmethod
    def expected_error(self) -> float:
        """Expected absolute error of a release, known before any data is read."""

    @abstractmethod
    def accuracy(self, level: float = 0.95) -> float:
        """An error bound holding with probability >= ``level``, before any data is read."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"


class _AdditiveMechanism(Mechanism):
    """``value + noise`` with exact noise calibrated to a fixed sensitivity."""

    sensitivity: Fraction
    noise: NoiseDistribution
    _spec: _Noise

    def _setup(self, spec: _Noise, delta: Fraction | None) -> None:
        self._spec = spec
        self.delta = Exact(delta or 0)
        self.sensitivity = spec.sensitivity
        self.noise, self.charge = spec.noise, spec.charge
        self.noise_scale = self.noise.scale

    def describe(self) -> str:
        return self.noise.describe()

    def expected_error(self) -> float:
        """``E|noise|`` (for a lattice release, plus at most half a grid step of rounding)."""
        return self.noise.expected_abs()

    def accuracy(self, level: float = 0.95) -> float:
        """The least half-width ``t`` with ``P(|error| <= t) >= level``."""
        return self.noise.half_width(level)

    def _accuracy(self, noisy: np.ndarray) -> AdditiveAccuracy:
        return AdditiveAccuracy(
            noisy, self.noise, epsilon=self.epsilon, delta=self.delta, mechanism=self.describe()
        )


class CountMechanism(_AdditiveMechanism):
    """A noisy count: sensitivity 1 (adding or removing a row changes a count by one).

    Exact integer noise (:func:`_count_noise`): the discrete Laplace of scale ``1/epsilon``
    (epsilon-DP), or with ``delta`` the discrete Gaussian calibrated by its exact CKS20 profile
    (:func:`discrete_gaussian_sigma2`). Released counts are ``int64`` integers.

    >>> CountMechanism(0.5).noise_scale, CountMechanism(0.5).describe()
    (2.0, 'DiscreteLaplace(scale=2)')
    >>> round(CountMechanism(1, delta=1e-6).noise_scale, 4)
    4.2308
    """

    def __init__(self, epsilon: object, delta: object = None):
        self.epsilon = Exact(check_epsilon(epsilon))
        dlt = _optional_delta(delta)
        self._setup(_count_noise(Fraction(self.epsilon), dlt), dlt)

    def release(self, counts: object) -> tuple[np.ndarray, Accuracy]:
        """Noisy counts, one per key, as ``int64`` integers."""
        c = _count_vector(counts, "counts")
        noisy = self._spec.add(c)
        return noisy, self._accuracy(noisy)


class SumMechanism(_AdditiveMechanism):
    """A noisy sum of values clamped into ``[lo, hi]`` (clamping is the executor's job).

    Adding or removing one row changes the sum by that row's value, whose magnitude is at
    most ``max(|lo|, |hi|)``: that is the sensitivity ``Δ``. The sum is released on the lattice
    ``g·Z`` with ``g = 2**k`` chosen from ``(Δ, epsilon, delta)`` only, with exact discrete
    noise in grid units (:func:`_lattice_noise`): every released sum is a multiple of ``g``,
    whatever the data.

    **Float error.** Every engine sums the clamped values exactly on a fixed-point grid
    (:class:`~pinqpy.core.lattice.SumGrid`: truncated toward zero to multiples of
    ``q <= Δ·2**-40``, which never increases a magnitude, so ``Δ`` stays exact; integer
    columns with integer bounds exactly as integers) and converts the exact sum to a double
    once, within 2 ulps: an error of at most ``n·2**-52·Δ`` for ``n`` rows, below ``1e-6·Δ``
    up to ``4·10**9`` rows. (A float sum of the values could err by ``n²·2**-53·Δ``, the
    sensitivity itself at ``10**8`` rows.) Quantisation moves each value by less than ``q``,
    deterministically and row by row, which costs accuracy only.

    >>> m = SumMechanism(0.1, -5, 3)
    >>> m.describe()
    'Lattice Laplace(scale=50.0391, grid=2^-8)'
    """

    def __init__(self, epsilon: object, lo: object, hi: object, delta: object = None):
        self.lo, self.hi = _bounds(lo, hi)
        self.epsilon = Exact(check_epsilon(epsilon))
        dlt = _optional_delta(delta)
        sens = max(_nonneg(abs(self.lo), "bound"), _nonneg(abs(self.hi), "bound"))
        self._setup(_lattice_noise(sens, Fraction(self.epsilon), dlt), dlt)

    @property
    def grid(self) -> Fraction | None:
        """The public lattice spacing of the released sums (None for zero sensitivity)."""
        return self.noise.grid if isinstance(self.noise, LatticeNoise) else None

    def release(self, sums: object) -> tuple[np.ndarray, Accuracy]:
        """Noisy sums, one per key (float64 multiples of :attr:`grid`)."""
        x = _keys_vector(sums, "sums")
        noisy = self._spec.add(x)
        return noisy, self._accuracy(noisy)


def _split(
    sensitivity: Fraction, epsilon: Fraction, delta: Fraction | None, parts: int, *, count: bool
) -> _Noise:
    eps = Fraction(epsilon) / parts
    dlt = None if delta is None else Fraction(delta) / parts
    return _count_noise(eps, dlt) if count else _lattice_noise(sensitivity, eps, dlt)


def _half_width(lo: float, hi: float) -> Fraction:
    """``max |x - mid|`` over ``[lo, hi]`` for the float ``mid = 0.5·(lo + hi)``, exactly.

    This is ``(hi - lo)/2`` when ``mid`` is exact, and covers its rounding otherwise.

    >>> _half_width(0.0, 100.0), _half_width(-3.0, 5.0)
    (Fraction(50, 1), Fraction(4, 1))
    """
    mid = Fraction(0.5 * (lo + hi))
    return max(Fraction(hi) - mid, mid - Fraction(lo))


def _mean_box(
    s1: np.ndarray, s2: np.ndarray, n1: np.ndarray, n2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Range of ``s/n`` over the box ``[s1, s2] × [n1, n2]`` (``n1 > 0``).

    For fixed ``n > 0`` the ratio increases with ``s``; for fixed ``s`` it is monotone in
    ``n``: so the extremes are at corners, ``min(s1/n1, s1/n2)`` and ``max(s2/n1, s2/n2)``.
    """
    low = np.minimum(s1 / n1, s1 / n2)
    high = np.maximum(s2 / n1, s2 / n2)
    return low, high


class MeanAccuracy(Accuracy):
    """Confidence intervals for a noisy mean, from the released noisy sum and count only.

    Let ``S' = S + X`` (noisy centred sum) and ``N' = N + Y`` (noisy count) be the released
    measurements, with ``X``, ``Y`` independent noise of known distributions. With
    ``alpha = 1 - level``, take ``tS``, ``tN`` with ``P(|X| > tS) = P(|Y| > tN) = alpha/2``.
    On the event ``|X| <= tS and |Y| <= tN`` -- probability at least ``level`` by the union
    bound -- the exact ``(S, N)`` lies in the box ``[S' ± tS] × [N' ± tN]``, and for a
    non-empty group ``N >= 1``. The exact mean ``mid + S/N`` then lies in
    ``mid + range(S/N over the box with N >= 1)``, clipped into the bounds (the mean of values
    in ``[lo, hi]`` is in ``[lo, hi]``). If the box has no ``N >= 1``, the interval is the
    whole ``[lo, hi]``. The exact mean is of the values quantised to the public lattice
    (:class:`~pinqpy.core.lattice.Lattice`), which differ from the clamped values by at most
    ``slack = q/2``: the interval is widened by it, then to contain the released value.
    (``mid`` and ``h`` are the lattice's centre and half-width.)

    This is a sound (conservative) interval, computed by post-processing released values, not
    a Monte-Carlo approximation. For an empty group the exact mean is undefined and the
    interval carries no guarantee.
    """

    _per_key: ClassVar[tuple[str, ...]] = ("values", "noisy_sum", "noisy_count")

    def __init__(
        self,
        values: np.ndarray,
        noisy_sum: np.ndarray,
        noisy_count: np.ndarray,
        *,
        sum_noise: NoiseDistribution,
        count_noise: NoiseDistribution,
        lo: float,
        hi: float,
        epsilon: object,
        delta: object,
        mechanism: str,
        centre: float | None = None,
        half: float | None = None,
        slack: float = 0.0,
    ):
        super().__init__(values, mechanism=mechanism, epsilon=epsilon, delta=delta)
        self.noisy_sum = np.asarray(noisy_sum, dtype=np.float64)
        self.noisy_count = np.asarray(noisy_count, dtype=np.float64)
        self.sum_noise = sum_noise
        self.count_noise = count_noise
        self.lo, self.hi = lo, hi
        self.centre = 0.5 * (lo + hi) if centre is None else centre
        self.half = 0.5 * (hi - lo) if half is None else half
        self.slack = slack

    @_quiet
    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        alpha = 1.0 - check_level(level)
        t_s = self.sum_noise.half_width(1.0 - alpha / 2.0)
        t_n = self.count_noise.half_width(1.0 - alpha / 2.0)
        mid, half = self.centre, self.half
        n2 = self.noisy_count + t_n
        n1 = np.maximum(self.noisy_count - t_n, 1.0)
        feasible = n2 >= 1.0
        n2 = np.maximum(n2, 1.0)
        r_lo, r_hi = _mean_box(self.noisy_sum - t_s, self.noisy_sum + t_s, n1, n2)
        low = np.where(feasible, mid + np.clip(r_lo, -half, half) - self.slack, self.lo)
        high = np.where(feasible, mid + np.clip(r_hi, -half, half) + self.slack, self.hi)
        low = np.clip(_finite_or(low, self.lo), self.lo, self.hi)
        high = np.clip(_finite_or(high, self.hi), self.lo, self.hi)
        return np.minimum(low, self.values), np.maximum(high, self.values)


class MeanMechanism(Mechanism):
    """A noisy mean of values clamped into ``[lo, hi]``, exactly epsilon-DP.

    Values are quantised on the public lattice of the bounds
    (:class:`~pinqpy.core.lattice.Lattice`: step ``q = 2**j`` with ``2**20 <= (hi - lo)/q <
    2**21``), whose centre ``mid`` and half-width ``h = q·K/2`` (within ``q/2`` of
    ``(hi - lo)/2``) are public. Two measurements, each with half the budget (``epsilon/2``,
    and ``delta/2`` each with Gaussian noise):

    * the centred sum ``S' = Σ (x̂ - mid) + noise`` of the quantised values ``x̂``: one row
      changes it by ``x̂ - mid``, and ``|x̂ - mid| <= h``, so the sensitivity is ``h`` -- half
      the ``max(|lo|, |hi|)`` of a plain sum for bounds like ``(0, hi)``, and far less for
      bounds away from 0. ``S`` is computed **exactly**: the engine sums the rows' integer
      lattice indices exactly, ``S = (q/2)·(2·Σd - K·N)`` is a rational, and its snapping to
      the noise grid and the noise are exact integers (:meth:`_Noise.add_exact`). So the
      value the noise is calibrated for carries no float error at all (a float
      ``Σx - mid·N`` erred by thousands of sensitivities for bounds like ``(1e7, 1e7 + 1)``).
      It is released on a public lattice ``g·Z`` with exact discrete noise
      (:func:`_lattice_noise`);
    * the count ``N' = N + noise``, sensitivity 1, with exact integer noise
      (:func:`_count_noise`): ``N'`` is an integer.

    Sequential composition makes the pair exactly ``(epsilon, delta)``-DP; everything after is
    post-processing: ``mean = mid + S'/max(N', 1)``, clamped into ``[lo, hi]``. Never NaN;
    an empty group gets a value inside the bounds (``mid`` when noise is off). PINQ's
    NoisyAverage could lose up to about ``2·epsilon``; the split above costs exactly the
    charged epsilon. ``ci`` is described in :class:`MeanAccuracy`. Quantisation moves the
    exact mean by at most ``q/2 <= (hi - lo)·2**-21``.

    ``release(index_sums, counts)`` takes each key's exact sum of lattice indices ``Σd``
    (:meth:`pinqpy.engines.base.Executor.lattice_sums`; :meth:`Lattice.value_sums` for plain
    values).

    >>> from pinqpy import testing
    >>> m = MeanMechanism(0.2, 0, 100)
    >>> m.describe()
    'Mean(sum: Lattice Laplace(scale=500.312, grid=2^-5), count: DiscreteLaplace(scale=10))'
    >>> s, _, n = m.lattice.value_sums([10.0, 20.0, 60.0])
    >>> with testing.no_noise():
    ...     v, _ = m.release([s, 0], np.array([n, 0]))
    >>> v.tolist()
    [30.0, 50.0]
    """

    def __init__(self, epsilon: object, lo: object, hi: object, delta: object = None):
        self.lo, self.hi = _bounds(lo, hi)
        self.epsilon = Exact(check_epsilon(epsilon))
        dlt = _optional_delta(delta)
        self.delta = Exact(dlt or 0)
        self.lattice = Lattice.of(self.lo, self.hi)
        half = self.lattice.half
        self._sum = _split(half, self.epsilon, dlt, 2, count=False)
        self._count = _split(Fraction(1), self.epsilon, dlt, 2, count=True)
        self.sum_noise, self.count_noise = self._sum.noise, self._count.noise
        self.charge = CompositeCharge([self._sum.charge, self._count.charge])
        # Two noises; no single scale describes the mean's error (see describe()).
        self.noise_scale = None

    @property
    def mid(self) -> float:
        """The public centre of the lattice (``(lo + hi)/2`` for bounds on the lattice)."""
        return float(self.lattice.centre)

    def describe(self) -> str:
        return f"Mean(sum: {self.sum_noise.describe()}, count: {self.count_noise.describe()})"

    def expected_error(self, n: float | None = None) -> float:
        """First-order expected error for a group of ``n`` rows, capped at ``hi - lo``.

        ``S'/N' - S/N ≈ (X - (S/N)·Y)/N``, so ``E|error| <~ (E|X| + h·E|Y|)/n``. Without
        ``n`` (nothing known about group sizes) the answer is the width ``hi - lo``.
        """
        width = self.hi - self.lo
        if n is None or n <= 0:
            return width
        half = 0.5 * width
        err = (self.sum_noise.expected_abs() + half * self.count_noise.expected_abs()) / n
        return min(err, width)

    def accuracy(self, level: float = 0.95, n: float | None = None) -> float:
        """A bound on ``|released - exact|`` for a group of ``n`` rows, holding w.p. >= level.

        With ``tS``, ``tN`` the ``1 - alpha/2`` half-widths of the two noises, on the event
        ``|X| <= tS, |Y| <= tN`` (probability >= level):
        ``|(S+X)/(N+Y) - S/N| = |N·X - S·Y| / (N·(N+Y)) <= (tS + h·tN)/(n - tN)`` using
        ``|S| <= h·N``, provided ``n - tN >= 1`` (then ``N' >= 1`` and the ``max(N', 1)`` is
        inactive). Otherwise, or without ``n``, the bound is the width ``hi - lo``.
        """
        alpha = 1.0 - check_level(level)
        width = self.hi - self.lo
        if n is None:
            return width
        t_s = self.sum_noise.half_width(1.0 - alpha / 2.0)
        t_n = self.count_noise.half_width(1.0 - alpha / 2.0)
        if n - t_n < 1.0:
            return width
        return min((t_s + 0.5 * width * t_n) / (n - t_n), width)

    def centred(self, index_sums: object, counts: object) -> list[Fraction]:
        """The exact centred sums ``S`` the noise is calibrated for (before any noise)."""
        s = _index_sums(index_sums, "sums")
        c = _count_vector(counts, "counts")
        if len(s) != c.shape[0]:
            raise ValueError("sums and counts must have one entry per key each")
        return [self.lattice.centred_sum(si, ni) for si, ni in zip(s, c.tolist(), strict=True)]

    def _measure(self, index_sums: object, counts: object) -> tuple[np.ndarray, np.ndarray]:
        """The two private measurements ``(S', N')`` (everything else is post-processing)."""
        exact = self.centred(index_sums, counts)
        c = _count_vector(counts, "counts")
        return self._sum.add_exact(exact), self._count.add(c)

    @_quiet
    def _post(self, noisy_sum: np.ndarray, noisy_count: np.ndarray) -> np.ndarray:
        mean = self.mid + noisy_sum / np.maximum(noisy_count, 1.0)
        return np.clip(_finite_or(mean, self.mid), self.lo, self.hi)

    def release(self, index_sums: object, counts: object) -> tuple[np.ndarray, Accuracy]:
        """Noisy means from exact lattice-index sums ``Σd`` and ``counts`` (one per key)."""
        noisy_sum, noisy_count = self._measure(index_sums, counts)
        values = self._post(noisy_sum, noisy_count)
        acc = MeanAccuracy(
            values,
            noisy_sum,
            noisy_count,
            sum_noise=self.sum_noise,
            count_noise=self.count_noise,
            lo=self.lo,
            hi=self.hi,
            epsilon=self.epsilon,
            delta=self.delta,
            mechanism=self.describe(),
            centre=self.mid,
            half=_float_up(self.lattice.half),
            slack=_float_up(self.lattice.step / 2),
        )
        return values, acc


class VarianceAccuracy(Accuracy):
    """Intervals for a noisy variance (or standard deviation) by interval arithmetic.

    With ``alpha = 1 - level`` and each of the three noises within its ``1 - alpha/3``
    half-width (probability >= level by the union bound), the exact ``N``, centred sum ``S``
    and shifted sum of squares ``C = Σ (x-mid)² - (h²/2)·N`` lie in boxes around the released
    values, and the population variance ``C/N + h²/2 - (S/N)²`` lies in the interval obtained
    by evaluating each term's range over the box (corners for the ratios, as in
    :class:`MeanAccuracy`), clipped into ``[0, h²]``; ``ddof`` then scales by ``N/(N-ddof)``,
    which is decreasing in ``N``. Widened to contain the released value.
    """

    _per_key: ClassVar[tuple[str, ...]] = ("values", "noisy_sum", "noisy_sq", "noisy_count")

    def __init__(
        self,
        values: np.ndarray,
        noisy_sum: np.ndarray,
        noisy_sq: np.ndarray,
        noisy_count: np.ndarray,
        *,
        mech: VarianceMechanism,
    ):
        super().__init__(values, mechanism=mech.describe(), epsilon=mech.epsilon, delta=mech.delta)
        self.noisy_sum = noisy_sum
        self.noisy_sq = noisy_sq
        self.noisy_count = noisy_count
        self._mech = mech

    @_quiet
    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        m = self._mech
        alpha = 1.0 - check_level(level)
        t_s = m.sum_noise.half_width(1.0 - alpha / 3.0)
        t_q = m.sq_noise.half_width(1.0 - alpha / 3.0)
        t_n = m.count_noise.half_width(1.0 - alpha / 3.0)
        h2 = m.half**2
        need = 1.0 + m.ddof
        n2 = self.noisy_count + t_n
        feasible = n2 >= need
        n2 = np.maximum(n2, need)
        n1 = np.maximum(self.noisy_count - t_n, need)
        r_lo, r_hi = _mean_box(self.noisy_sum - t_s, self.noisy_sum + t_s, n1, n2)
        r_lo, r_hi = np.clip(r_lo, -m.half, m.half), np.clip(r_hi, -m.half, m.half)
        sq_hi = np.maximum(r_lo**2, r_hi**2)
        sq_lo = np.where((r_lo <= 0) & (r_hi >= 0), 0.0, np.minimum(r_lo**2, r_hi**2))
        c_lo, c_hi = _mean_box(self.noisy_sq - t_q, self.noisy_sq + t_q, n1, n2)
        # The exact variance is of the quantised values, within m.slack of the clamped ones'.
        pop_lo = np.clip(c_lo + h2 / 2 - sq_hi - m.slack, 0.0, h2)
        pop_hi = np.clip(c_hi + h2 / 2 - sq_lo + m.slack, 0.0, h2)
        low = pop_lo * n2 / (n2 - m.ddof)
        high = pop_hi * n1 / (n1 - m.ddof)
        top = m._max_value()
        low = np.where(feasible, low, 0.0)
        high = np.where(feasible, high, top)
        if m.stddev:
            low, high = np.sqrt(low), np.sqrt(high)
        low = _finite_or(low, 0.0)
        high = _finite_or(high, math.sqrt(top) if m.stddev else top)
        return np.minimum(low, self.values), np.maximum(high, self.values)


class VarianceMechanism(Mechanism):
    """A noisy variance (or standard deviation) of values clamped into ``[lo, hi]``.

    Epsilon (and delta) is split in thirds over three measurements, with the lattice, its
    centre ``mid`` and half-width ``h`` as in :class:`MeanMechanism` (``x̂`` the quantised
    values):

    * the count ``N'``, sensitivity 1;
    * the centred sum ``S' = Σ (x̂ - mid) + noise``, sensitivity ``h``;
    * the shifted centred sum of squares ``C' = Σ ((x̂ - mid)² - h²/2) + noise``: a row adds
      ``(x̂-mid)² - h²/2``, which lies in ``[-h²/2, h²/2]``, so the sensitivity is ``h²/2``.

    ``S`` and ``C`` are computed **exactly** from the engine's exact integer sums ``Σd``,
    ``Σd²`` and ``N`` (:meth:`~pinqpy.core.lattice.Lattice.centred_squares`), and snapped and
    noised with exact integers (:meth:`_Noise.add_exact`): their error before the noise is
    zero, so the sensitivities above are exact. (The float ``Σx² - 2·mid·Σx + mid²·N`` this
    replaces erred by about 12,000 sensitivities for ``VARIANCE(flag + 1e7, 1e7, 1e7 + 1)``.)
    Quantisation moves the exact population variance by at most
    ``slack = 2·h·(q/2) + (q/2)²``, about ``2**-20·(hi - lo)²/2``.

    Post-processing, with ``n = max(N', 1 + ddof)``: the population variance
    ``(C' + (h²/2)·n)/n - (S'/n)²`` clipped into ``[0, h²]`` (no values in ``[lo, hi]`` vary
    more), times ``n/(n - ddof)``; ``stddev=True`` takes the square root. ``ddof=1`` (the
    default) is the sample variance, as SQL's ``VARIANCE``/``STDDEV`` and pandas.
    ``release(index_sums, index_sumsq, counts)`` takes the exact sums ``Σd`` and ``Σd²`` of
    the rows' lattice indices (:meth:`pinqpy.engines.base.Executor.lattice_sums`).

    >>> from pinqpy import testing
    >>> m = VarianceMechanism(0.3, 0, 10, ddof=0)
    >>> s, s2, n = m.lattice.value_sums([0.0, 10.0])
    >>> with testing.no_noise():
    ...     v, _ = m.release([s], [s2], np.array([n]))
    >>> v.tolist()  # values {0, 10}: population variance 25
    [25.0]
    """

    def __init__(
        self,
        epsilon: object,
        lo: object,
        hi: object,
        delta: object = None,
        *,
        ddof: int = 1,
        stddev: bool = False,
    ):
        self.lo, self.hi = _bounds(lo, hi, MAX_VARIANCE_BOUND)
        self.epsilon = Exact(check_epsilon(epsilon))
        dlt = _optional_delta(delta)
        self.delta = Exact(dlt or 0)
        if ddof not in (0, 1):
            raise PinqError("ddof must be 0 or 1")
        self.ddof = int(ddof)
        self.stddev = bool(stddev)
        self.lattice = Lattice.of(self.lo, self.hi)
        half = self.lattice.half
        self.half = _float_up(half)
        if self.half > 1e154:  # self.half**2 would overflow
            # From the public bounds, before any charge: no float holds such a variance.
            raise PinqError("bounds too wide for a variance: (hi - lo)² overflows a float")
        q2 = self.lattice.step / 2
        self.slack = _float_up(2 * half * q2 + q2 * q2)
        # A row adds (x̂ - mid)² - h²/2, exactly, in [-h²/2, h²/2].
        sq_sens = half * half / 2
        self._count = _split(Fraction(1), self.epsilon, dlt, 3, count=True)
        self._sum = _split(half, self.epsilon, dlt, 3, count=False)
        self._sq = _split(sq_sens, self.epsilon, dlt, 3, count=False)
        self.count_noise, self.sum_noise = self._count.noise, self._sum.noise
        self.sq_noise = self._sq.noise
        self.charge = CompositeCharge([self._count.charge, self._sum.charge, self._sq.charge])
        self.noise_scale = None

    @property
    def mid(self) -> float:
        """The public centre of the lattice (``(lo + hi)/2`` for bounds on the lattice)."""
        return float(self.lattice.centre)

    def _max_value(self) -> float:
        # The largest variance values in [lo, hi] can have: h² (population); with ddof=1
        # and n = 2 the sample variance reaches 2h².
        return self.half**2 * (2.0 if self.ddof else 1.0)

    def describe(self) -> str:
        what = "Stddev" if self.stddev else "Variance"
        return (
            f"{what}(count: {self.count_noise.describe()}, sum: {self.sum_noise.describe()}, "
            f"squares: {self.sq_noise.describe()})"
        )

    def expected_error(self, n: float | None = None) -> float:
        """A first-order expected error for ``n`` rows; without ``n`` the largest value.

        ``var ≈ C/N + h²/2 - (S/N)²`` moves by about ``(|X_C| + 2h·|X_S| + h²·|Y|)/n`` to first
        order; for the standard deviation ``|√a - √b| <= √|a - b|`` bounds the error.
        """
        top = self._max_value()
        if n is None or n <= 1 + self.ddof:
            return math.sqrt(top) if self.stddev else top
        err = (
            self.sq_noise.expected_abs()
            + self.half * 2 * self.sum_noise.expected_abs()
            + self.half**2 * self.count_noise.expected_abs()
        ) / n
        return min(math.sqrt(err) if self.stddev else err, math.sqrt(top) if self.stddev else top)

    def accuracy(self, level: float = 0.95) -> float:
        """The worst-case error, the largest possible value (holds at every level).

        A data-free bound that shrinks with the group size would need the group's spread;
        the release's own :class:`VarianceAccuracy` gives data-dependent intervals.
        """
        check_level(level)
        top = self._max_value()
        return math.sqrt(top) if self.stddev else top

    def centred(
        self, index_sums: object, index_sumsq: object, counts: object
    ) -> tuple[list[Fraction], list[Fraction]]:
        """The exact ``S`` and ``C`` the noise is calibrated for (before any noise)."""
        s = _index_sums(index_sums, "sums")
        q = _index_sums(index_sumsq, "sums of squares")
        c = _count_vector(counts, "counts").tolist()
        if not len(s) == len(q) == len(c):
            raise ValueError("sums, sums of squares and counts must have one entry per key")
        lat = self.lattice
        sums = [lat.centred_sum(a, n) for a, n in zip(s, c, strict=True)]
        squares = [lat.centred_squares(a, b, n) for a, b, n in zip(s, q, c, strict=True)]
        return sums, squares

    @_quiet
    def release(
        self, index_sums: object, index_sumsq: object, counts: object
    ) -> tuple[np.ndarray, Accuracy]:
        """Noisy variances (or stddevs) from exact lattice-index sums ``Σd``, ``Σd²`` and
        counts."""
        centred, centred_sq = self.centred(index_sums, index_sumsq, counts)
        c = _count_vector(counts, "counts")
        h2 = self.half**2
        noisy_count = self._count.add(c)
        noisy_sum = self._sum.add_exact(centred)
        noisy_sq = self._sq.add_exact(centred_sq)
        n = np.maximum(noisy_count, 1.0 + self.ddof)
        pop = (noisy_sq + 0.5 * h2 * n) / n - (noisy_sum / n) ** 2
        var = np.clip(_finite_or(pop, 0.0), 0.0, h2) * n / (n - self.ddof)
        var = np.clip(_finite_or(var, 0.0), 0.0, self._max_value())
        values = np.sqrt(var) if self.stddev else var
        acc = VarianceAccuracy(values, noisy_sum, noisy_sq, noisy_count, mech=self)
        return values, acc


# -- exact selection: permute-and-flip ------------------------------------------------------
#: Selection exponents are clipped at this many nats (argmax: at least ``epsilon`` more): a
#: candidate that far below the best is flipped with probability ``e^-64`` instead of less.
#: The clip keeps every exponent a bounded rational and, as shown in
#: :func:`_permute_and_flip`, costs no privacy; it could only matter to the utility bounds
#: beyond ``ln(m/(1-level)) > 64``, which no float ``level < 1`` and candidate count reach.
PF_CLIP = 64
# Denominators of the exact coin exponents stay at most 2**56, so that a clipped numerator
# (at most (PF_CLIP + 1)·den) is below 2**63 as bernoulli_exp needs.
_PF_MAX_DEN_BITS = 56


#: The largest epsilon a selection (quantile, argmax) spends on its coins: ``2**32``. A query
#: may be charged more, but its coins use ``min(epsilon, 2**32)``: a mechanism that is
#: ``ε'``-DP is ``ε``-DP for every ``ε >= ε'``, so this only ever adds privacy. It keeps the
#: exact coins' integers inside ``int64`` (an epsilon of 1e20 has a numerator beyond
#: ``2**63``), and costs nothing useful: at ``2**32`` a candidate one row (argmax) or
#: ``2**-24`` of a row (quantile) below the best is flipped with probability below
#: ``e**-64``.
PF_MAX_EPSILON = Fraction(2**32)


def _pf_epsilon(x: Fraction, den_bits: int, extra: int) -> Fraction:
    """``min(x, PF_MAX_EPSILON)`` rounded *down* to a denominator the exact coins can use.

    The denominator is at most ``2**den_bits`` and also small enough that
    ``den·(extra + 2·ceil(eps) + 1) < 2**63``: callers clip ``numerator·gap`` at
    ``(extra + ceil(eps))·den`` and add the numerator, so every intermediate fits ``int64``.
    """
    e = min(x, PF_MAX_EPSILON)
    room = ((1 << 63) // (extra + 2 * math.ceil(e) + 1)).bit_length() - 1
    return _dyadic_down(e, max(0, min(den_bits, room)))


def _dyadic_down(x: Fraction, bits: int) -> Fraction:
    """``x`` if its denominator is at most ``2**bits``, else ``floor(x·2**bits)/2**bits``."""
    if x.denominator <= 1 << bits:
        return x
    return Fraction((x.numerator << bits) // x.denominator, 1 << bits)


def _permute_and_flip(gaps: np.ndarray, mult: int, den: int, clip: int) -> np.ndarray:
    """Exact permute-and-flip over each row of ``gaps`` (non-negative integer score gaps).

    **The mechanism** (McKenna & Sheldon, "Permute-and-Flip: A new mechanism for
    differentially private selection", NeurIPS 2020): visit the candidates in a uniformly
    random order and flip, for candidate ``i``, a coin of heads-probability
    ``p_i = exp(-γ_i)``; output the first candidate that comes up heads. Here
    ``γ_i = min(clip, mult·gap_i/den)`` is an exact rational and the best candidate has
    ``gap = 0``, ``p = 1``, so some coin always comes up heads. The coins are drawn by
    :func:`pinqpy.noise.samplers.bernoulli_exp` (CKS20's exact ``Bernoulli(exp(-γ))``) and the
    order by :func:`~pinqpy.noise.samplers.uniform_below`: no floating point on the sampling path.

    **Vectorized form, and why it is the same law.** Draw *every* coin ``C_i`` at once (all
    candidates of all keys), count the heads ``H = {i : C_i = 1}`` per key, and output a
    uniformly random element of ``H``. Proof: the coins are independent of the order ``π``,
    and the sequential mechanism outputs the first element of ``H`` in the order ``π`` -- the
    coins it does not reach do not change its output, so drawing them too changes nothing.
    Given ``H`` (non-empty), the relative order of ``H``'s elements under a uniformly random
    ``π`` is a uniformly random ordering of ``H``, so its first element is uniform on ``H``.
    Hence ``P(output = r) = p_r·E[1/(1 + K_r)]`` with ``K_r`` the number of heads among the
    other candidates, ``= p_r·∫_0^1 Π_{i≠r} (1 - p_i·u) du`` (since
    ``E[t^K] = Π(1 - p_i + p_i·t)`` and ``∫_0^1 t^K dt = 1/(1+K)``; ``u = 1 - t``).

    **Clipping costs no privacy.** ``γ_i = min(clip, c·(q* - q_i))`` is the unclipped exponent
    of the quality ``q'_i = max(q_i, q* - clip/c)``, whose maximum is ``q*`` again; a maximum
    of two functions that each move by at most ``Δ`` between neighbours moves by at most
    ``Δ``, so ``q'`` has the sensitivity of ``q`` (and the monotone argument of
    :class:`ArgmaxMechanism` allows for it explicitly).

    Inside :func:`pinqpy.testing.no_noise` the output is the lowest index with gap 0.
    """
    if gaps.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    if _noise.noise_disabled():
        return np.argmax(gaps == 0, axis=1).astype(np.int64)
    cap = clip * den  # <= 2**62
    # mult·gap, clipped at cap, without overflow: gaps above cap // mult are clipped anyway.
    g = np.minimum(gaps, cap // mult + 1).astype(np.int64)
    num = np.minimum(g * mult, cap)  # g·mult <= (cap/mult + 1)·mult <= cap + mult < 2**63
    coins = bernoulli_exp(num, den)
    heads = coins.sum(axis=1)
    pick = uniform_below(heads.astype(np.int64))
    return np.argmax(np.cumsum(coins, axis=1) > pick[:, None], axis=1).astype(np.int64)


def _pf_law(gamma: np.ndarray) -> np.ndarray:
    """The exact permute-and-flip law for exponents ``gamma`` (shape ``(n_keys, m)``): for tests.

    ``P(r) = p_r·∫_0^1 Π_{i≠r} (1 - p_i u) du`` (see :func:`_permute_and_flip`), the
    integrand a polynomial of degree ``m - 1`` integrated exactly (to rounding) by
    Gauss-Legendre with ``m//2 + 1`` nodes; products in log space. ``O(m²)`` work per key.
    """
    k, m = gamma.shape
    x, w = np.polynomial.legendre.leggauss(m // 2 + 1)
    u, w = (x + 1.0) / 2.0, w / 2.0
    out = np.empty((k, m))
    for row in range(k):
        p = np.exp(-gamma[row])
        logs = np.log1p(-p[:, None] * u[None, :])  # (m, nodes); u < 1 keeps 1 - p·u > 0
        others = np.exp(logs.sum(axis=0)[None, :] - logs)
        out[row] = p * (others @ w)
    return out


# -- quantiles: permute-and-flip over a public grid ----------------------------------------
QUANTILE_GRID_POINTS = 1001
QUANTILE_MAX_INTEGER_GRID = 10_000
QUANTILE_CI_CUTS = 33
QUANTILE_CI_SHARE = Fraction(1, 4)


def default_candidates(lo: float, hi: float) -> np.ndarray:
    """The public candidate grid for a quantile over ``[lo, hi]``.

    Every integer from ``lo`` to ``hi`` when both are integers and ``hi - lo <= 10_000``
    (ages, years, counts: the answer is exact to the unit); otherwise 1001 evenly spaced
    points including both ends (a resolution of 0.1% of the range).

    >>> default_candidates(0, 4).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0]
    >>> len(default_candidates(0, 1e6))
    1001
    """
    lo_f, hi_f = _bounds(lo, hi)
    if lo_f == hi_f:
        return np.array([lo_f])
    if lo_f.is_integer() and hi_f.is_integer() and hi_f - lo_f <= QUANTILE_MAX_INTEGER_GRID:
        return np.arange(int(lo_f), int(hi_f) + 1).astype(np.float64)
    grid = np.linspace(lo_f, hi_f, QUANTILE_GRID_POINTS)
    grid[0], grid[-1] = lo_f, hi_f
    return grid


def _chernoff_threshold(n_terms: Sequence[tuple[int, float]], b: float, log_inv_p: float) -> float:
    """A ``t`` with ``P(Σ_j w_j·Y_j >= t) <= p`` for i.i.d. ``Y_j``, Laplace or discrete Laplace
    of scale ``b``.

    **The discrete Laplace is covered.** With ``a = 1/b`` and ``q = e^{-a}``, the discrete
    Laplace has ``E[e^{λX}] = (1-q)²/((1-qe^λ)(1-qe^{-λ})) = (cosh a - 1)/(cosh a - cosh λ)``
    for ``|λ| < a`` (multiply top and bottom by ``1/q``). This is at most the continuous
    ``a²/(a² - λ²) = 1/(1 - λ²b²)``: cross-multiplying, the claim is
    ``a²(cosh λ - 1) <= λ²(cosh a - 1)``, i.e. ``(cosh λ - 1)/λ² <= (cosh a - 1)/a²``, true
    because ``(cosh x - 1)/x² = Σ_k x^{2k-2}/(2k)!`` increases with ``|x|``. So every Chernoff
    bound below, derived from the continuous MGF, holds for the discrete Laplace too.

    ``n_terms`` lists ``(count, weight)`` groups. The moment generating function of
    ``Laplace(b)`` is ``1/(1 - λ²b²)`` for ``|λ| < 1/b``, so for ``S = Σ w_j Y_j`` and
    ``0 < λ < 1/(b·max|w|)``, Chernoff's bound gives
    ``P(S >= t) <= exp(-λt + Λ(λ))``, ``Λ(λ) = -Σ_j log(1 - λ²w_j²b²)``. Hence
    ``t(λ) = (log(1/p) + Λ(λ))/λ`` is a valid threshold for *every* such λ; we pick λ where
    ``λΛ'(λ) - Λ(λ) = log(1/p)`` (the optimum, found by bisection; the function is increasing
    in λ) and evaluate ``t(λ)`` there, so imprecision in λ can only loosen, never invalidate.
    """
    terms = [(n, abs(w)) for n, w in n_terms if n > 0 and w != 0]
    if not terms or b == 0:
        return 0.0
    wmax = max(w for _, w in terms)
    lam_max = 1.0 / (b * wmax)

    def big_lambda(lam: float) -> float:
        return -sum(n * math.log1p(-((lam * w * b) ** 2)) for n, w in terms)

    def d_lambda(lam: float) -> float:
        return sum(n * 2 * lam * (w * b) ** 2 / (1 - (lam * w * b) ** 2) for n, w in terms)

    lo, hi = 0.0, lam_max
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if mid * d_lambda(mid) - big_lambda(mid) < log_inv_p:
            lo = mid
        else:
            hi = mid
    lam = lo if lo > 0 else 0.5 * lam_max
    return (log_inv_p + big_lambda(lam)) / lam


class QuantileAccuracy(Accuracy):
    """Value-space confidence intervals for a released quantile.

    Method (a documented share ``ci_epsilon`` of the quantile's epsilon pays for it):

    1. **Noisy coarse histogram.** Cut candidates ``c_{k_0} = lo < c_{k_1} < ... <
       c_{k_C} = hi`` (up to 33, evenly spaced along the grid) split the rows into ``2C + 1``
       disjoint bins: ``{x = c_{k_i}}`` and ``c_{k_i} < x < c_{k_{i+1}}``. Adding or removing a
       row changes exactly one bin by one, so discrete Laplace noise of scale ``1/ci_epsilon``
       on every (integer) bin is ``ci_epsilon``-DP (L1 sensitivity 1; the ratio argument of
       :func:`_count_noise`, applied to the one bin that changes).
    2. **Noisy scores at the cuts.** The quantile's score function is
       ``g_j = (1-q)·#{x < c_j} - q·#{x > c_j}``, non-decreasing in ``j``; from the noisy
       bins, ``ĝ_i = (1-q)·(bins below c_{k_i}) - q·(bins above c_{k_i})`` estimates ``g`` at
       cut ``i`` with noise ``(1-q)·Σ(2i noises) - q·Σ(2(C-i) noises)``.
    3. **Simultaneous bounds.** :func:`_chernoff_threshold` gives ``t_i`` with
       ``P(|ĝ_i - g_{k_i}| >= t_i) <= alpha/(C+1)`` (each side ``alpha/(2(C+1))``); by the union
       bound all ``C + 1`` cuts are within their ``t_i`` with probability ``>= 1 - alpha``.
    4. **Inversion.** ``g_k >= 0`` implies the lowest best-scoring candidate (the exact
       quantile, ties to the lowest) is at or below ``c_k``: every higher candidate scores no
       better. ``g_k <= 0`` implies the *highest* best-scoring candidate is at or above
       ``c_k``. So the interval runs from the largest cut with ``ĝ_i + t_i <= 0`` (else
       ``lo``) to the smallest cut with ``ĝ_i - t_i >= 0`` (else ``hi``), and it is widened to
       contain the released value.

    Guarantee: with probability at least ``level`` the interval contains an exact
    ``q``-quantile of the data in the sense of the mechanism (a candidate of best score);
    when the best-scoring candidate is unique -- the usual case with many distinct values --
    it contains *the* exact quantile. Resolution is limited by the cut spacing
    (``(hi-lo)/32``) and by the histogram noise; the interval costs no extra privacy beyond
    the charged epsilon.
    """

    _per_key: ClassVar[tuple[str, ...]] = ("values", "indices", "scores")

    def __init__(
        self,
        values: np.ndarray,
        indices: np.ndarray,
        scores: np.ndarray | None,
        *,
        mech: QuantileMechanism,
    ):
        super().__init__(values, mechanism=mech.describe(), epsilon=mech.epsilon, delta=mech.delta)
        self.indices = np.asarray(indices)
        self.scores = (
            np.zeros((len(self), len(mech.cuts))) if scores is None else np.asarray(scores)
        )
        self._mech = mech

    @_quiet
    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        mech = self._mech
        cands = mech.candidates
        n = len(self)
        if mech.ci_noise is None:  # no share of epsilon for the ci: only the bounds are known
            return np.full(n, cands[0]), np.full(n, cands[-1])
        t = mech.ci_thresholds(level)
        cuts = mech.cuts
        low_idx = np.zeros(n, dtype=np.int64)
        high_idx = np.full(n, len(cands) - 1, dtype=np.int64)
        surely_nonpos = self.scores + t <= 0  # g <= 0 there: an exact quantile is at/above
        surely_nonneg = self.scores - t >= 0  # g >= 0 there: the exact quantile is at/below
        has_low = surely_nonpos.any(axis=1)
        has_high = surely_nonneg.any(axis=1)
        last = surely_nonpos.shape[1] - 1 - np.argmax(surely_nonpos[:, ::-1], axis=1)
        first = np.argmax(surely_nonneg, axis=1)
        low_idx = np.where(has_low, cuts[last], low_idx)
        high_idx = np.where(has_high, cuts[first], high_idx)
        a, b = np.minimum(low_idx, high_idx), np.maximum(low_idx, high_idx)
        low = np.minimum(cands[a], self.values)
        high = np.maximum(cands[b], self.values)
        return low, high


class QuantileMechanism(Mechanism):
    """The ``q``-quantile by the exponential mechanism over a public candidate grid.

    **Scores.** For candidate ``c_j``, with ``L_j = #{x < c_j}`` and ``G_j = #{x > c_j}``
    (values clamped into ``[lo, hi]``), the utility is ``u_j = -|(1-q)·L_j - q·G_j|``: zero
    where a ``q`` share of the other rows is above and ``1-q`` below. Adding a row ``x``
    raises ``L_j`` by one (if ``x < c_j``), or ``G_j`` (if ``x > c_j``), or neither, so
    ``(1-q)L_j - qG_j`` moves by ``1-q``, ``-q`` or 0 and ``|Δu_j| <= Δu = max(q, 1-q)``.

    **Selection: permute-and-flip.** Each candidate gets the coin
    ``p_j = exp(-eps_sel·(u* - u_j)/(2Δu))`` (``u*`` the best score) and
    :func:`_permute_and_flip` releases a candidate with ``P(j) = p_j·∫_0^1 Π_{i≠j}(1 - p_i·t)
    dt`` (McKenna & Sheldon, NeurIPS 2020) -- never worse in expected score than the
    exponential mechanism ``P(j) ∝ p_j``, and sampled exactly, with no floating point.

    *Privacy* (exactly ``eps_sel``-DP for every ``q``). With ``c = eps_sel/(2Δu)``,
    ``s_i = e^{c·u_i}`` and ``S = max s_i = e^{c·u*}``, substituting ``t = S·v`` gives
    ``P(j) = s_j·∫_0^{1/S} Π_{i≠j}(1 - s_i·v) dv``, every factor in ``[0, 1]`` there. For a
    neighbour every score moves by at most ``Δu``, so ``s'_i <= e^{eps/2}·s_i`` and
    ``S' >= e^{-eps/2}·S``. Then ``P'(j) <= e^{eps/2}·s_j·∫_0^{e^{eps/2}/S} Π(1 -
    e^{-eps/2}·s_i·v) dv`` (smaller factors; a longer range, on which the factors stay
    ``>= 0`` because ``e^{-eps/2}·s_i·v <= s_i/S <= 1``), which is ``e^{eps}·P(j)`` after
    ``w = e^{-eps/2}·v``. The other direction is the same with the roles swapped. (PINQ's
    order statistic could lose up to ``2·max(q, 1-q)·eps``.)

    *Exact rationals.* With ``q = a/b`` the scores times ``b`` are integers
    ``U_j = -|(b-a)·L_j - a·G_j|`` of sensitivity ``M = max(a, b-a)``, so the exponent is
    ``eps_sel·(U* - U_j)/(2M)``, a rational, clipped at ``PF_CLIP`` (free, see
    :func:`_permute_and_flip`). ``q`` is used exactly when ``b <= 2**24`` (any decimal ``q``
    up to 7 digits), else rounded to the nearest multiple of ``2**-24``; ``eps_sel`` is
    capped at :data:`PF_MAX_EPSILON` and rounded *down* to a denominator of at most
    ``2**(55 - bit_length(M))`` if needed (:func:`_pf_epsilon`; less privacy loss than
    charged).

    **Budget.** ``epsilon`` is split: ``eps_sel = (1 - ci_share)·epsilon`` for the selection
    and ``ci_epsilon = ci_share·epsilon`` (default 1/4) for a noisy coarse histogram that
    makes a value-space ``ci()`` possible (:class:`QuantileAccuracy`). By sequential
    composition the release is exactly ``epsilon``-DP; the charge is ``PureCharge(epsilon)``.
    ``ci_share=0`` spends everything on the selection, and ``ci()`` is then ``[lo, hi]``.

    **Inputs.** ``release(eq_counts, gap_counts)`` with ``eq_counts[k, j] = #{x == c_j}``
    (shape ``(n_keys, m)``) and ``gap_counts[k, j] = #{c_j < x < c_{j+1}}``
    (shape ``(n_keys, m-1)``); :meth:`bin_counts` computes them from values.

    **Released values.** A quantile is one of the public candidates ``c_j``, fixed before any
    data is read, and so are the endpoints of its ``ci`` (candidates at the cuts, or the
    bounds): every released number is a public value chosen by a private index, so its
    floating-point bits carry nothing beyond that index and no lattice is needed.

    **Utility.** With probability ``>= level`` the chosen candidate's score is within
    ``2Δu·(ln m + ln(1/(1-level)))/eps_sel`` of the best (in rows of rank).

    >>> from pinqpy import testing
    >>> m = QuantileMechanism(1.0, 0.5, 0, 10)
    >>> eq, gap = m.bin_counts(np.array([1, 2, 3, 3, 9]))
    >>> with testing.no_noise():
    ...     v, acc = m.release(eq, gap)
    >>> v.tolist()
    [3.0]
    >>> float(m.select_epsilon), float(m.ci_epsilon)
    (0.75, 0.25)
    """

    def __init__(
        self,
        epsilon: object,
        q: object,
        lo: object,
        hi: object,
        candidates: object = None,
        *,
        ci_share: object = QUANTILE_CI_SHARE,
    ):
        self.lo, self.hi = _bounds(lo, hi)
        self.epsilon = Exact(check_epsilon(epsilon))
        self.delta = Exact(0)
        qq = to_fraction(q, "q")
        if not 0 <= qq <= 1:
            raise PinqError("a quantile q must be between 0 and 1")
        self.q = float(qq)
        self._q_exact = qq
        share = to_fraction(ci_share, "ci_share")
        if not 0 <= share < 1:
            raise PinqError("ci_share must be at least 0 and below 1")
        self.ci_share = Exact(share)
        self.select_epsilon = Exact(self.epsilon * (1 - share))
        self.ci_epsilon = Exact(self.epsilon * share)
        self.sensitivity = max(qq, 1 - qq)
        # Exact selection exponents eps_sel·(U* - U)/(2M): see "Exact rationals" above.
        q_pf = qq if qq.denominator <= 1 << 24 else Fraction(round(qq * 2**24), 2**24)
        self._q_pf = q_pf
        big_m = max(q_pf.numerator, q_pf.denominator - q_pf.numerator)
        e_sel = _pf_epsilon(
            Fraction(self.select_epsilon), _PF_MAX_DEN_BITS - 1 - big_m.bit_length(), 0
        )
        if e_sel <= 0:
            raise PinqError("epsilon is too small for the quantile's exact selection")
        self._pf_eps = e_sel
        self._pf_mult = e_sel.numerator
        self._pf_den = 2 * big_m * e_sel.denominator
        self.candidates = self._grid(candidates)
        m = len(self.candidates)
        n_cuts = min(m, QUANTILE_CI_CUTS)
        self.cuts = np.unique(np.round(np.linspace(0, m - 1, n_cuts)).astype(np.int64))
        self.ci_noise = (
            DiscreteLaplaceNoise(_fit_laplace_scale(1 / Fraction(self.ci_epsilon)))
            if share > 0
            else None
        )
        self.charge = PureCharge(self.epsilon)
        self.noise_scale = None
        self._thresholds: dict[float, np.ndarray] = {}

    def _grid(self, candidates: object) -> np.ndarray:
        if candidates is None:
            return default_candidates(self.lo, self.hi)
        try:
            c = np.asarray(candidates, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise PinqError("quantile candidates must be numbers") from None
        if not np.isfinite(c).all():
            raise PinqError("quantile candidates must be finite")
        if ((c < self.lo) | (c > self.hi)).any():
            raise PinqError("quantile candidates must lie within the bounds")
        return np.unique(np.concatenate([c, [self.lo, self.hi]]))

    # -- description and data-free accuracy ----------------------------------------------
    def describe(self) -> str:
        text = (
            f"PermuteAndFlip(epsilon={self.select_epsilon!r}, q={_fmt(self.q)}, "
            f"candidates={len(self.candidates)})"
        )
        if self.ci_noise is not None:
            text += f" + {self.ci_noise.describe()} histogram for ci"
        return text

    def accuracy(self, level: float = 0.95) -> float:
        """Rank error (rows): with prob. >= level the choice scores within this of the best.

        Permute-and-flip releases a candidate with probability at most its own coin ``p_j``
        (it must come up heads), so the candidates scoring ``s`` or more below the best have
        total probability at most ``m·exp(-eps_sel·s/(2Δu))`` (the clip at ``PF_CLIP`` nats
        is beyond any ``s`` used here); setting that to ``1 - level`` gives
        ``s = 2Δu·(ln m + ln(1/(1-level)))/eps_sel`` -- the exponential mechanism's bound.
        """
        lv = check_level(level)
        m = len(self.candidates)
        return (2 * float(self.sensitivity) * (math.log(m) + math.log(1 / (1 - lv)))) / float(
            self._pf_eps
        )

    def expected_error(self) -> float:
        """Expected rank error (rows): at most ``∫ min(1, m·e^{-eps_sel·s/(2Δu)}) ds``."""
        m = len(self.candidates)
        return 2 * float(self.sensitivity) * (math.log(m) + 1) / float(self._pf_eps)

    def ci_thresholds(self, level: float) -> np.ndarray:
        """The simultaneous noise bounds ``t_i`` on the cut scores (public; no data)."""
        lv = check_level(level)
        cached = self._thresholds.get(lv)
        if cached is not None:
            return cached
        assert self.ci_noise is not None
        n_cuts = len(self.cuts)
        below_w, above_w = 1.0 - self.q, self.q
        log_inv_p = math.log(2 * n_cuts / (1 - lv))
        t = np.array(
            [
                _chernoff_threshold(
                    [(2 * i, below_w), (2 * (n_cuts - 1 - i), above_w)],
                    _float_up(self.ci_noise.b),
                    log_inv_p,
                )
                for i in range(n_cuts)
            ]
        )
        self._thresholds[lv] = t
        return t

    # -- data ----------------------------------------------------------------------------
    def bin_counts(
        self, values: object, codes: object = None, n_keys: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(eq_counts, gap_counts)`` for ``values`` (NaN dropped, others clamped).

        With ``codes`` (an int per value, 0 <= code < n_keys) the counts are per key, shape
        ``(n_keys, m)`` and ``(n_keys, m-1)``; rows with other codes are dropped.
        """
        v = np.asarray(values, dtype=np.float64).ravel()
        keep = ~np.isnan(v)
        if codes is None:
            k = np.zeros(v.shape, dtype=np.int64)
            n_keys = 1
        else:
            k = np.asarray(codes, dtype=np.int64).ravel()
            keep &= (k >= 0) & (k < n_keys)
        v, k = np.clip(v[keep], self.lo, self.hi), k[keep]
        c = self.candidates
        m = len(c)
        pos = np.searchsorted(c, v, side="left")
        exact = c[np.minimum(pos, m - 1)] == v
        eq = np.bincount(k[exact] * m + pos[exact], minlength=n_keys * m)
        gap_pos = pos[~exact] - 1  # strictly between c[pos-1] and c[pos]
        gm = max(m - 1, 1)
        gap = np.bincount(k[~exact] * gm + gap_pos, minlength=n_keys * gm)
        return eq.reshape(n_keys, m), gap.reshape(n_keys, gm)[:, : m - 1]

    def _check_counts(self, eq_counts: object, gap_counts: object) -> tuple[np.ndarray, ...]:
        m = len(self.candidates)
        eq = np.asarray(eq_counts, dtype=np.int64)
        gap = np.asarray(gap_counts, dtype=np.int64)
        if eq.ndim == 1:
            eq = eq[None, :]
        if gap.ndim == 1:
            gap = gap[None, :]
        if eq.shape[1:] != (m,) or gap.shape != (eq.shape[0], m - 1):
            raise ValueError("eq_counts must be (n_keys, m) and gap_counts (n_keys, m-1)")
        if (eq < 0).any() or (gap < 0).any():
            raise ValueError("counts cannot be negative")
        return eq, gap

    @staticmethod
    def _below(eq: np.ndarray, gap: np.ndarray) -> np.ndarray:
        """``L[k, j] = #{x < c_j}``: cumulative rows in ``[c_i, c_{i+1})`` for ``i < j``."""
        below = np.zeros(eq.shape, dtype=np.int64)
        np.cumsum(eq[:, :-1] + gap, axis=1, out=below[:, 1:])
        return below

    def _int_scores(self, eq: np.ndarray, gap: np.ndarray) -> np.ndarray:
        """``U[k, j] = -|(b-a)·L_j - a·G_j|`` for ``q = a/b``: ``b`` times the utilities,
        exact integers (``int64``, or Python ints when they could overflow)."""
        below = self._below(eq, gap)
        total = eq.sum(axis=1, keepdims=True) + gap.sum(axis=1, keepdims=True)
        above = total - below - eq
        a, b = self._q_pf.numerator, self._q_pf.denominator
        if total.size and int(total.max()) * b >= 1 << 61:
            below, above = below.astype(object), above.astype(object)
        return -abs((b - a) * below - a * above)

    def _gaps(self, eq: np.ndarray, gap: np.ndarray) -> np.ndarray:
        u = self._int_scores(eq, gap)
        return u.max(axis=1, keepdims=True) - u

    def scores(self, eq_counts: object, gap_counts: object) -> np.ndarray:
        """Utilities ``u[k, j] = -|(1-q)·L_j - q·G_j|`` as floats (reads data; for tests)."""
        eq, gap = self._check_counts(eq_counts, gap_counts)
        return (self._int_scores(eq, gap) / self._q_pf.denominator).astype(np.float64)

    def _selection_exponents(self, eq_counts: object, gap_counts: object) -> np.ndarray:
        """The coin exponents ``min(PF_CLIP, eps_sel·(U* - U_j)/(2M))`` as floats (tests)."""
        eq, gap = self._check_counts(eq_counts, gap_counts)
        g = self._gaps(eq, gap).astype(np.float64)
        return np.minimum(self._pf_mult * g / self._pf_den, float(PF_CLIP))

    def _selection_probabilities(self, eq_counts: object, gap_counts: object) -> np.ndarray:
        """The exact permute-and-flip law of the selection (for tests; reads data)."""
        return _pf_law(self._selection_exponents(eq_counts, gap_counts))

    def _coarse_bins(self, eq: np.ndarray, gap: np.ndarray) -> np.ndarray:
        """Exact coarse histogram, shape ``(n_keys, 2C - 1)`` for ``C`` cuts (reads data).

        Interleaved ``[#{x = c_{k_0}}, #{c_{k_0} < x < c_{k_1}}, #{x = c_{k_1}}, ...,
        #{x = c_{k_last}}]``: disjoint bins covering ``[lo, hi]``, so one row is in exactly
        one bin and adding or removing it changes the histogram by 1 in L1.
        """
        below = self._below(eq, gap)
        cuts = self.cuts
        bins = np.empty((eq.shape[0], 2 * len(cuts) - 1), dtype=np.int64)
        bins[:, 0::2] = eq[:, cuts]
        bins[:, 1::2] = below[:, cuts[1:]] - below[:, cuts[:-1]] - eq[:, cuts[:-1]]
        return bins

    def _scores_from_bins(self, bins: np.ndarray) -> np.ndarray:
        """``(1-q)·(bins below cut i) - q·(bins above cut i)`` for every cut (post-processing)."""
        n_keys = bins.shape[0]
        # prefix[:, p] = sum of the first p bins; cut i is bin 2i.
        prefix = np.concatenate([np.zeros((n_keys, 1)), np.cumsum(bins, axis=1)], axis=1)
        total = prefix[:, -1:]
        before = prefix[:, 0::2][:, : (bins.shape[1] + 1) // 2]
        after = total - prefix[:, 1::2]
        return (1.0 - self.q) * before - self.q * after

    def _cut_scores(self, eq: np.ndarray, gap: np.ndarray) -> np.ndarray:
        """Noisy scores at the cut candidates, from a discrete-Laplace-noised coarse histogram."""
        assert self.ci_noise is not None
        bins = self._coarse_bins(eq, gap)
        noisy = bins + _count_noise_sample(self.ci_noise, bins.size).reshape(bins.shape)
        return self._scores_from_bins(noisy.astype(np.float64))

    def release(self, eq_counts: object, gap_counts: object) -> tuple[np.ndarray, Accuracy]:
        """Noisy quantiles (values from the candidate grid), one per key."""
        eq, gap = self._check_counts(eq_counts, gap_counts)
        idx = _permute_and_flip(self._gaps(eq, gap), self._pf_mult, self._pf_den, PF_CLIP)
        values = self.candidates[idx]
        scores = self._cut_scores(eq, gap) if self.ci_noise is not None else None
        return values, QuantileAccuracy(values, idx, scores, mech=self)


# -- argmax: report noisy max ------------------------------------------------------------
class ArgmaxMechanism(Mechanism):
    """The most frequent of ``n_candidates`` public candidates, by permute-and-flip.

    ``release(counts)`` takes ``counts[k, i]`` = rows of key ``k`` equal to candidate ``i``
    (integers) and runs :func:`_permute_and_flip` with coins ``p_i = exp(-eps·(c* - c_i))``
    (``c*`` the largest count; exponents clipped at ``PF_CLIP + ceil(eps)`` nats): an exact
    sampler, never worse in expected count than report-noisy-max with Gumbel noise
    (``P(i) ∝ p_i``), which it replaces.

    **Privacy: exactly epsilon-DP, without the factor 2 of the general case**, because counts
    are *monotone*: adding a row raises one count ``c_t`` by one and leaves the others. Write
    ``P(r) = p_r·E[1/(1 + K_r)]`` (``K_r``: heads among the other coins; see
    :func:`_permute_and_flip`) and ``λ = e^{-eps}``. Two cases.

    (a) ``c_t + 1 <= c*`` (``c*`` unchanged): only ``p_t`` changes, to ``θ·p_t`` with
        ``1 <= θ <= e^eps``. So ``P'(t) = θ·P(t)``. For ``r ≠ t``, ``P'(r) <= P(r)`` (more
        heads among the others), and splitting on coin ``t``, ``E[1/(1+K_r)] = (1-p_t)·A +
        p_t·B`` with ``A = E[1/(1+J)] <= 2B``, ``B = E[1/(2+J)]`` (``J``: heads other than ``r``
        and ``t``; ``1/(2+j) >= 1/(2(1+j))``). ``P'(r) >= λ·P(r)`` reduces to
        ``A(1 - λ - p_t(θ - λ)) + B·p_t(θ - λ) >= 0``, which holds with ``B >= A/2`` because
        ``p_t <= λ`` (the clip is at least ``eps``) and ``θ <= 1/λ``:
        ``1 - λ - λ(1/λ - λ)/2 = (1 - λ)²/2 >= 0``.
    (b) ``c_t = c*`` (``t`` becomes the unique maximum): ``p_t = 1`` in both; every other
        ``p_i`` becomes ``p'_i ∈ [λ·p_i, p_i]``. With ``f(x) = ∫_0^1 Π(1 - x_i·u) du`` and
        ``g(x) = ∫_0^1 (1-u)·Π(1 - x_i·u) du`` over the others, ``P(t) = f(p)`` and
        ``P(r) = p_r·g(p)`` for ``r ≠ t`` (coin ``t`` is surely heads). Both are decreasing
        in every ``x_i``, and the substitution ``v = λu`` gives ``λ·f(λp) =
        ∫_0^λ Π(1 - p_i v) dv <= f(p)`` and ``λ·g(λp) = ∫_0^λ (1 - v/λ)·Π(1 - p_i v) dv
        <= g(p)``. Hence ``1 <= P'(t)/P(t) <= f(λp)/f(p) <= e^eps`` and
        ``λ <= P'(r)/P(r) <= g(λp)/g(p) <= e^eps``.

    Removing a row is the same pair read backwards. The clip keeps case (a)'s ``p_t <= λ``
    (exponents are at least ``min(clip, eps) = eps`` below the best) and case (b)'s
    ``p'_i ∈ [λ·p_i, p_i]``.

    **Exact rationals.** ``eps = e/d`` (capped at :data:`PF_MAX_EPSILON` and rounded *down* to
    a denominator of at most ``2**56`` if needed, :func:`_pf_epsilon`; either only adds
    privacy): the coin of candidate ``i`` is ``Bernoulli(exp(-e·(c* - c_i)/d))``.

    **Accuracy.** A candidate whose count is ``s`` below the maximum is released with
    probability at most its coin, ``e^{-eps·s}``, so all such candidates together have
    probability at most ``n·e^{-eps·s}``. Setting that to ``1 - level``: with probability
    ``>= level`` the chosen count is within ``ln(n/(1-level))/epsilon`` of the maximum.

    >>> from pinqpy import testing
    >>> m = ArgmaxMechanism(0.5, 3, labels=["CA", "NY", "TX"])
    >>> with testing.no_noise():
    ...     idx, acc = m.release(np.array([[5, 9, 9]]))
    >>> idx.tolist(), acc.values.tolist()
    ([1], ['NY'])
    >>> round(m.accuracy(0.95), 3), m.describe()
    (8.189, 'PermuteAndFlip(epsilon=0.5, candidates=3)')
    """

    def __init__(self, epsilon: object, n_candidates: int, *, labels: Sequence[Any] | None = None):
        self.epsilon = Exact(check_epsilon(epsilon))
        self.delta = Exact(0)
        n = int(n_candidates)
        if n < 1:
            raise PinqError("argmax needs at least one candidate")
        self.n_candidates = n
        if labels is not None and len(labels) != n:
            raise ValueError("labels must have one entry per candidate")
        self.labels: np.ndarray | None = None
        if labels is not None:
            # Element by element, so tuple labels stay whole (one object per candidate).
            self.labels = np.empty(n, dtype=object)
            for i, label in enumerate(labels):
                self.labels[i] = label
        eps = _pf_epsilon(Fraction(self.epsilon), _PF_MAX_DEN_BITS, PF_CLIP)
        if eps <= 0:
            raise PinqError("epsilon is too small for the argmax's exact selection")
        self._pf_eps = eps
        self._clip = PF_CLIP + math.ceil(eps)
        self.noise_scale = _round_up(1 / Fraction(self.epsilon))
        self.charge = PureCharge(self.epsilon)

    def describe(self) -> str:
        return f"PermuteAndFlip(epsilon={self.epsilon!r}, candidates={self.n_candidates})"

    def accuracy(self, level: float = 0.95) -> float:
        """Count shortfall ``ln(n/(1-level))/epsilon`` of the choice below the maximum."""
        lv = check_level(level)
        return math.log(self.n_candidates / (1.0 - lv)) / float(self._pf_eps)

    def expected_error(self) -> float:
        """Expected shortfall ``<= ∫ min(1, n·e^{-eps·s}) ds = (ln n + 1)/epsilon``."""
        return (math.log(self.n_candidates) + 1.0) / float(self._pf_eps)

    def _gaps(self, counts: object) -> np.ndarray:
        c = np.asarray(counts)
        if c.ndim == 1:
            c = c[None, :]
        if c.ndim != 2 or c.shape[1] != self.n_candidates:
            raise ValueError("counts must be (n_keys, n_candidates)")
        if c.dtype.kind not in "iu":
            f = c.astype(np.float64)
            if not np.isfinite(f).all():
                raise ValueError("counts must be finite")
            if not (f == np.rint(f)).all() or (np.abs(f) >= 2.0**62).any():
                raise ValueError("counts must be integers")
            c = f
        c = c.astype(np.int64)
        return c.max(axis=1, keepdims=True) - c if c.size else c

    def _selection_exponents(self, counts: object) -> np.ndarray:
        """The coin exponents ``min(clip, eps·(c* - c_i))`` as floats (for tests)."""
        g = self._gaps(counts).astype(np.float64)
        return np.minimum(float(self._pf_eps) * g, float(self._clip))

    def _selection_probabilities(self, counts: object) -> np.ndarray:
        """The exact permute-and-flip law (for tests; reads data)."""
        return _pf_law(self._selection_exponents(counts))

    def release(self, counts: object) -> tuple[np.ndarray, Accuracy]:
        """Chosen candidate indices, one per key (and an accuracy holding their labels)."""
        gaps = self._gaps(counts)
        idx = _permute_and_flip(gaps, self._pf_eps.numerator, self._pf_eps.denominator, self._clip)
        values = idx if self.labels is None else self.labels[idx]
        acc = ArgmaxAccuracy(
            values,
            epsilon=self.epsilon,
            n_candidates=self.n_candidates,
            mechanism=self.describe(),
            indices=idx,
        )
        return idx, acc
