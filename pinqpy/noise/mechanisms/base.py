"""What every mechanism shares: validated public bounds, one noisy measurement (:class:`_Noise`:
exact integer noise for counts, lattice noise for real answers), the per-key vectors a release
reads, and the :class:`Mechanism` base classes."""

from __future__ import annotations

import functools
import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from pinqpy.accounting.charges import DiscreteGaussianCharge, PureCharge, _sqrt_down
from pinqpy.accounting.cost import check_part_delta
from pinqpy.accounting.models import gaussian_sigma_for_rho
from pinqpy.core.exact import Exact
from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise
from pinqpy.noise.lattice_release import (
    _units_sensitivity,
    grid_for,
    grid_for_gaussian,
    lattice_gaussian,
    lattice_laplace,
)
from pinqpy.noise.mechanisms.calibration import _rho_within, discrete_gaussian_sigma2
from pinqpy.noise.samplers import (
    _fit_laplace_scale,
    _fit_sigma2,
    discrete_gaussian,
    discrete_laplace,
)
from pinqpy.results.accuracy import AdditiveAccuracy
from pinqpy.results.noise import (
    DiscreteGaussianNoise,
    DiscreteLaplaceNoise,
    LatticeNoise,
    NoiseDistribution,
    ZeroNoise,
)

__all__ = ["Mechanism"]


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


def _count_noise(
    epsilon: Fraction, delta: Fraction | None, sensitivity: Fraction = Fraction(1)
) -> _Noise:
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

    ``sensitivity = 1/2`` (a count of a public-size table's rows, charged at stability 2 for
    one changed row, which moves it by at most 1: :class:`VarianceMechanism`): the discrete
    Laplace of scale ``Δ/ε`` (at stability 2 the ratio for a shift of ``1 = 2·Δ`` is
    ``e^{2ε}``), or with a delta the discrete Gaussian of ``σ² >= Δ²/(2ρ)``, ``ρ`` the largest
    with ``zcdp_delta(ρ, ε) <= δ``, charged by its zCDP conversion alone (at stability 2:
    shifts of at most 1 give ``1/(2σ²) <= 4ρ``, CKS20 Proposition 5).
    """
    one = Fraction(1)
    if sensitivity != one:
        return _scaled_count_noise(epsilon, delta, Fraction(sensitivity))
    if delta is None:
        b = _fit_laplace_scale(1 / epsilon)
        return _Noise("count", DiscreteLaplaceNoise(b), PureCharge(epsilon), one, epsilon)
    s2 = discrete_gaussian_sigma2(epsilon, delta)
    charge = DiscreteGaussianCharge(epsilon, delta, 1, _sqrt_down(s2), sigma2=s2)
    return _Noise("count", DiscreteGaussianNoise(s2), charge, one, epsilon)


def _scaled_count_noise(epsilon: Fraction, delta: Fraction | None, sens: Fraction) -> _Noise:
    """:func:`_count_noise` for a sensitivity other than 1 (see there)."""
    if delta is None:
        b = _fit_laplace_scale(sens / epsilon)
        return _Noise("count", DiscreteLaplaceNoise(b), PureCharge(epsilon), sens, epsilon)
    rho = _rho_within(epsilon, delta)
    s2 = _fit_sigma2(sens * sens / (2 * rho))
    charge = DiscreteGaussianCharge(epsilon, delta, sens, _sqrt_down(s2))
    return _Noise("count", DiscreteGaussianNoise(s2), charge, sens, epsilon)


def _lattice_noise(sensitivity: Fraction, epsilon: Fraction, delta: Fraction | None) -> _Noise:
    """Lattice noise for a real answer of sensitivity ``Δ`` (public parameters only).

    * Pure: ``g = grid_for(Δ, ε)``, ``S = ceil(Δ/g) + 1`` the sensitivity of ``round(v/g)`` in
      grid units, discrete Laplace of scale ``S/ε`` units (rounded up): neighbouring snapped
      answers differ by at most ``S`` units, so the ratio is at most ``e^{S/(S/ε)} = e^ε``
      (as for a count). In the value's units the noise scale is ``g·S/ε <= (Δ + 2g)/ε``,
      at most ``2**-9`` relatively above ``Δ/ε``.
    * With a delta: by zCDP. ``ρ`` is the largest (to ``rho_for``'s precision) with
      ``zcdp_delta(ρ, ε) <= δ``, ``σ = Δ/sqrt(2ρ)`` (``gaussian_sigma_for_rho``, rounded up)
      and :func:`~pinqpy.noise.lattice_release.lattice_gaussian` draws discrete Gaussian noise
      of variance ``σ_u² >= (σ·S/Δ)²`` grid units: shifts of at most ``S`` units give
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


def _split(
    sensitivity: Fraction, epsilon: Fraction, delta: Fraction | None, parts: int, *, count: bool
) -> _Noise:
    eps = Fraction(epsilon) / parts
    dlt = None if delta is None else Fraction(delta) / parts
    return _count_noise(eps, dlt, sensitivity) if count else _lattice_noise(sensitivity, eps, dlt)


def _keys_vector(x: object, what: str) -> np.ndarray:
    """Exact per-key aggregates as a float64 vector (a scalar is one key).

    Runs after the charge, so it never raises because of the values: with bounds within
    :data:`MAX_BOUND` sums of clamped values are finite, and should a non-finite one come
    anyway ``±inf`` is kept (the lattice saturates it, as it would the exact huge value) and
    NaN reads as 0 (deterministic; see :func:`pinqpy.noise.lattice_release._snap`).
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
