"""Releases of real numbers on a public lattice, with exact discrete noise.

API (the noise is drawn by :mod:`pinqpy.noise.samplers` from a
:class:`~pinqpy.noise.source.RandomSource`, by default
:func:`~pinqpy.noise.source.current_source`):

* ``grid_for(sensitivity, epsilon, bits=10) -> Fraction`` and
  ``grid_for_gaussian(sensitivity, sigma, bits=10) -> Fraction`` -- the power of two ``g`` on
  whose multiples a real-valued answer is released, from public parameters only.
* ``lattice_laplace(values, sensitivity, epsilon, *, bits=10, source=None)
  -> (released, grid, unit_scale)`` and ``lattice_gaussian(values, sensitivity, sigma, *,
  bits=10, source=None) -> (released, grid, unit_sigma2)`` -- snap exact answers to ``g·Z``
  and add discrete noise counted in grid units.

Real answers are released as ``g·(round(value/g) + Z)`` with ``Z`` exact discrete noise and
``g = 2**k`` chosen from public parameters only. Every output is an integer multiple of the
same ``g`` whatever the data, so its low-order bits carry no information about the data (a
textbook float sampler's low-order bits can reveal the answer: Mironov, CCS 2012; see
:mod:`pinqpy.noise.samplers`). Both releases honour :func:`pinqpy.testing.no_noise` and return
the exact values.

>>> from fractions import Fraction
>>> from pinqpy.noise.source import SeededSource
>>> out, g, unit = lattice_laplace([1234.56789], 1, Fraction(1, 2), source=SeededSource(1))
>>> g, unit
(Fraction(1, 1024), Fraction(2050, 1))
>>> bool(float(out[0] / float(g)).is_integer())
True
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from pinqpy.core.exact import to_fraction
from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise
from pinqpy.noise.samplers._bits import _bits_for
from pinqpy.noise.samplers.gaussian import _discrete_gaussian, _fit_sigma2, _GaussPlan
from pinqpy.noise.samplers.laplace import _discrete_laplace, _fit_laplace_scale, _laplace_params

__all__ = ["grid_for", "grid_for_gaussian", "lattice_gaussian", "lattice_laplace"]

# Lattice exponents: g = 2**k with -1074 <= k (multiples of g are doubles down to the smallest
# subnormal) and k + 63 <= 1023 (an int64 number of grid steps times g stays finite).
_MIN_GRID_EXP, _MAX_GRID_EXP = -1074, 960


def _pow2_floor_exp(x: Fraction) -> int:
    """The largest ``k`` with ``2**k <= x`` (``x > 0``), by exact comparisons."""
    k = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** k > x:
        k -= 1
    while Fraction(2) ** (k + 1) <= x:
        k += 1
    return k


def _check_grid(k: int) -> Fraction:
    if not _MIN_GRID_EXP <= k <= _MAX_GRID_EXP:
        raise PinqError("the lattice for these parameters is outside the range of doubles")
    return Fraction(2) ** k


#: The grid is never finer than ``Δ·2**-GRID_MAX_STEPS_EXP`` (``Δ`` the sensitivity).
GRID_MAX_STEPS_EXP = 30


def _grid_floor_exp(d: Fraction) -> int:
    """The least ``k`` allowed for a grid ``2**k`` at sensitivity ``d`` (``d·2**-30 < 2**k``).

    Why a floor. An answer is released as an ``int64`` count of grid steps, so only answers
    within ``2**62`` steps are represented exactly; beyond, :func:`_snap` saturates them. A
    finer grid would only come from a huge epsilon (above about ``2**19`` at the default 10
    bits), where the noise is a fraction of a step and a finer grid buys nothing; with the
    floor, ``2**62`` steps are more than ``2**32·Δ``, so a sum saturates only beyond ``2**32``
    rows at the bound. The floor depends on ``Δ`` only (public).
    """
    return _pow2_floor_exp(d) - GRID_MAX_STEPS_EXP + 1


def _positive(x: Any, what: str) -> Fraction:
    f = to_fraction(x, what)
    if f <= 0:
        raise PinqError(f"{what} must be positive")
    return f


def grid_for(
    sensitivity: Fraction | int | float | str,
    epsilon: Fraction | int | float | str,
    bits: int = 10,
) -> Fraction:
    """The lattice spacing ``g = 2**k`` for a Laplace release: public parameters only.

    ``g`` is the largest power of two with ``g <= min(Δ, Δ/ε) / 2**bits``. Hence the noise scale
    ``Δ/ε`` is at least ``2**bits`` grid steps, and so is ``Δ``: snapping to the grid adds at
    most one step to the sensitivity (see :func:`lattice_laplace`), a relative cost of at most
    ``2**-bits`` in noise. ``g`` depends on ``(Δ, ε, bits)`` and nothing else.

    The grid is never finer than ``Δ·2**-30`` (see :func:`_grid_floor_exp`): that matters only
    for ``ε`` above about ``2**(29 - bits)``, where the noise is a grid step or less anyway.

    >>> grid_for(1, Fraction(1, 2)), grid_for(100, 4)
    (Fraction(1, 1024), Fraction(1, 64))
    >>> grid_for(1, 10**20) == Fraction(1, 2**29)
    True
    """
    d = _positive(sensitivity, "sensitivity")
    eps = _positive(epsilon, "epsilon")
    return _check_grid(max(_pow2_floor_exp(min(d, d / eps) / 2**bits), _grid_floor_exp(d)))


# σ in grid units is kept at most 2**18 so that the discrete Gaussian sampler's limits hold.
_GAUSS_MAX_SIGMA_EXP = 18


def grid_for_gaussian(
    sensitivity: Fraction | int | float | str,
    sigma: Fraction | int | float | str,
    bits: int = 10,
) -> Fraction:
    """The lattice spacing ``g = 2**k`` for a Gaussian release: public parameters only.

    The largest power of two with ``g <= min(Δ, σ) / 2**bits``, unless that makes ``σ/g`` exceed
    ``2**18`` (only when ``σ > 2**(18 - bits)·Δ``, i.e. very small privacy parameters): then the
    smallest power of two with ``σ/g <= 2**18``, which keeps ``σ`` in grid units within the
    exact sampler's range at the cost of a coarser grid. Never finer than ``Δ·2**-30``, as
    :func:`grid_for`.

    >>> grid_for_gaussian(1, 5)
    Fraction(1, 1024)
    """
    d = _positive(sensitivity, "sensitivity")
    sig = _positive(sigma, "sigma")
    k = max(_pow2_floor_exp(min(d, sig) / 2**bits), _grid_floor_exp(d))
    k_min = _pow2_floor_exp(sig / 2**_GAUSS_MAX_SIGMA_EXP)
    if Fraction(2) ** k_min < sig / 2**_GAUSS_MAX_SIGMA_EXP:
        k_min += 1  # smallest k with sig / 2**k <= 2**18
    return _check_grid(max(k, k_min))


#: The largest number of grid steps a release can start from: the largest double below
#: ``2**62`` (doubles there are ``2**10`` apart). Exact answers beyond it are saturated.
SATURATION_STEPS = 2.0**62 - 2.0**10


def _snap(values: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``round(clamp(v/2**k))`` (half to even) exactly, as ``int64``; also the float64 input.

    **Total.** No value makes this raise or warn, since it runs after the charge:

    * ``v/g`` is clamped into ``[-C, C]`` with ``C = SATURATION_STEPS < 2**62`` (saturation).
      Clamping is 1-Lipschitz -- ``|clamp(a) - clamp(b)| <= |a - b|`` -- so answers of
      sensitivity ``Δ`` stay of sensitivity ``Δ`` after it, and :func:`_units_sensitivity`
      holds unchanged; ``C`` depends on nothing but the grid (public). Saturation only ever
      acts on answers beyond ``C·g`` in magnitude (at least ``2**32·Δ``, see
      :func:`_grid_floor_exp`), whose release is then ``±C·g`` plus noise: still private,
      though its accuracy statement no longer describes the distance to the exact answer.
    * ``±inf`` saturates like any value beyond ``C·g``.
    * NaN cannot arise from the mechanisms' inputs (clamped values whose bounds
      :func:`pinqpy.noise.mechanisms.base._bounds` limits, so no float sum overflows); should
      one come anyway it is read as 0, deterministically, and never raises.

    Exactness: a float is an exact binary rational, and ``ldexp(v, -k) = v·2**-k`` only moves
    its exponent, so it is exact unless it overflows (to ``±inf``: then ``|v| > C·g`` and the
    clamp gives the same ``±C`` as on the exact value) or falls into the subnormal range, where
    ``|v/g| < 2**-1022`` and the correctly rounded result, 0, is unaffected. ``np.rint`` rounds
    a double to the nearest integer, ties to even, exactly (below ``2**53`` every integer is
    representable, above it the input is already an integer), and ``|x| <= C < 2**62``
    converts to ``int64`` exactly.
    """
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(all="ignore"):
        x = np.ldexp(np.nan_to_num(v, nan=0.0, posinf=np.inf, neginf=-np.inf), -k)
        x = np.rint(np.clip(x, -SATURATION_STEPS, SATURATION_STEPS))
    return x.astype(np.int64), v


def _units_sensitivity(d: Fraction, g: Fraction) -> int:
    """``S = ceil(Δ/g) + 1``: the sensitivity in grid units after snapping.

    ``round(x)`` is within 1/2 of ``x``, so for neighbours with ``|v - v'| <= Δ``,
    ``|round(v/g) - round(v'/g)| <= Δ/g + 1``; being an integer it is at most
    ``floor(Δ/g) + 1 <= ceil(Δ/g) + 1``. (The bound ``floor(Δ/g) + 1`` is attained, e.g. by
    ``v/g = 1/2`` and ``v'/g = 1/2 + Δ/g`` for integer ``Δ/g``; we use ``ceil + 1``, one spare
    step when ``Δ/g`` is not an integer.)
    """
    return math.ceil(d / g) + 1  # Fraction.__ceil__: exact


def _release(k_exact: np.ndarray, noise: np.ndarray, k: int, shape: tuple[int, ...]) -> np.ndarray:
    if noise.size and int(np.abs(noise).max()) >= 1 << 62:
        # A data-independent event of negligible probability; refusing reveals nothing.
        raise PinqError("a noise sample is too large to release")
    noisy = k_exact.reshape(-1) + noise  # |each| < 2**62, so the sum fits int64
    return np.ldexp(noisy.astype(np.float64), k).reshape(shape)


def lattice_laplace(
    values: Any,
    sensitivity: Fraction | int | float | str,
    epsilon: Fraction | int | float | str,
    *,
    bits: int = 10,
    source: _noise.RandomSource | None = None,
) -> tuple[np.ndarray, Fraction, Fraction]:
    """Release real answers as ``g·(round(v/g) + Z)`` with ``Z`` exact discrete Laplace.

    ``g = grid_for(sensitivity, epsilon, bits)``; ``S = ceil(Δ/g) + 1`` is the sensitivity of
    the snapped answer in grid units (derivation in ``_units_sensitivity``), and ``Z`` has scale
    ``S/ε`` grid units (rounded up to a dyadic rational if its terms are too large, which only
    adds noise), so the release is ``ε``-DP for answers of sensitivity ``Δ``. Returns
    ``(released, g, unit_scale)``: float64 outputs of the shape of ``values``, the grid and the
    noise scale in grid units.

    **Low-order bits.** Every output is ``n·g`` for an integer ``n``, exactly (a double holds
    ``n·2**k`` exactly while ``|n| <= 2**53``; beyond, the conversion rounds ``n`` to 53
    significant bits, a deterministic post-processing of the noisy integer that still yields a
    multiple of ``g``). ``g`` depends only on ``(Δ, ε, bits)``, so which doubles can be output,
    and with what probabilities given the snapped value, is the same for all data: the low bits
    carry nothing beyond the DP release itself.

    The guarantee assumes ``values`` are the exact answers of sensitivity ``Δ`` (rounding error
    in computing them is the caller's to bound). Values beyond ``SATURATION_STEPS`` grid steps
    (and ``±inf``) are saturated to it, which keeps the sensitivity (see :func:`_snap`): the
    release never raises because of the values. Inside :func:`pinqpy.testing.no_noise` the
    values are returned unchanged.

    >>> from pinqpy.noise.source import SeededSource
    >>> out, g, unit = lattice_laplace([3.7, -1e6], 1, 1, source=SeededSource(0))
    >>> g, unit
    (Fraction(1, 1024), Fraction(1025, 1))
    >>> [float(o / float(g)).is_integer() for o in out]
    [True, True]
    """
    d = _positive(sensitivity, "sensitivity")
    eps = _positive(epsilon, "epsilon")
    g = grid_for(d, eps, bits)
    k = _pow2_floor_exp(g)
    unit_scale = _fit_laplace_scale(Fraction(_units_sensitivity(d, g)) / eps)
    k_exact, v = _snap(values, k)
    if _noise.noise_disabled():
        return v.copy(), g, unit_scale
    t, s = _laplace_params(unit_scale)
    bits_ = _bits_for(source)
    with _noise._LOCK:
        noise = _discrete_laplace(bits_, t, s, k_exact.size)
    return _release(k_exact, noise, k, v.shape), g, unit_scale


def lattice_gaussian(
    values: Any,
    sensitivity: Fraction | int | float | str,
    sigma: Fraction | int | float | str,
    *,
    bits: int = 10,
    source: _noise.RandomSource | None = None,
) -> tuple[np.ndarray, Fraction, Fraction]:
    """Release real answers as ``g·(round(v/g) + Z)`` with ``Z`` exact discrete Gaussian.

    ``sigma`` is the standard deviation the caller calibrated for sensitivity ``Δ``. With
    ``g = grid_for_gaussian(Δ, σ, bits)`` and ``S = ceil(Δ/g) + 1`` the sensitivity in grid
    units, ``Z`` has variance ``σ_u² >= (σ·S/Δ)²`` grid units (rounded up to a rational the
    sampler takes): the ratio ``S/σ_u <= Δ/σ``, so the zero-concentrated DP parameter
    ``ρ = S²/(2σ_u²) <= Δ²/(2σ²)`` is what the caller paid for (CKS20: the discrete Gaussian
    has the same ``ρ`` as the continuous one), and the real-valued noise ``g·Z`` has standard
    deviation at most about ``σ·(1 + 2g/Δ)``. Returns ``(released, g, unit_sigma2)``. Outputs
    are multiples of ``g``, which depends only on ``(Δ, σ, bits)``; see
    :func:`lattice_laplace` for the low-bits argument and the ``no_noise`` behaviour.

    >>> from pinqpy.noise.source import SeededSource
    >>> out, g, s2 = lattice_gaussian([0.1, 2.5], 1, 4, source=SeededSource(0))
    >>> g, s2
    (Fraction(1, 1024), Fraction(16810000, 1))
    >>> [float(o / float(g)).is_integer() for o in out]
    [True, True]
    """
    d = _positive(sensitivity, "sensitivity")
    sig = _positive(sigma, "sigma")
    g = grid_for_gaussian(d, sig, bits)
    k = _pow2_floor_exp(g)
    su = _units_sensitivity(d, g)
    unit_sigma2 = _fit_sigma2(sig * sig * su * su / (d * d))
    plan = _GaussPlan(unit_sigma2)
    k_exact, v = _snap(values, k)
    if _noise.noise_disabled():
        return v.copy(), g, unit_sigma2
    bits_ = _bits_for(source)
    with _noise._LOCK:
        noise = _discrete_gaussian(bits_, plan, k_exact.size)
    return _release(k_exact, noise, k, v.shape), g, unit_sigma2
