"""The public noise distributions a release's accuracy is computed from.

:class:`DiscreteLaplaceNoise`, :class:`DiscreteGaussianNoise` (on the integers),
:class:`LatticeNoise` (a real answer on a public grid ``g·Z``), :class:`ZeroNoise`;
:class:`LaplaceNoise` and :class:`GaussianNoise` are the continuous laws (no mechanism of
pinqpy draws them any more; kept for callers' own accuracies). :func:`check_level` checks the
confidence level every interval is asked for.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from statistics import NormalDist
from typing import ClassVar

import numpy as np

from pinqpy.errors import PinqError
from pinqpy.results.format import _fmt

__all__ = [
    "DiscreteGaussianNoise",
    "DiscreteLaplaceNoise",
    "GaussianNoise",
    "LaplaceNoise",
    "LatticeNoise",
    "NoiseDistribution",
    "ZeroNoise",
    "check_level",
]


def check_level(level: float) -> float:
    """A confidence level strictly between 0 and 1."""
    try:
        lv = float(level)
    except (TypeError, ValueError):
        raise PinqError("a confidence level must be a number between 0 and 1") from None
    if not 0.0 < lv < 1.0:
        raise PinqError(f"a confidence level must be above 0 and below 1 (got {lv:g})")
    return lv


# -- noise distributions -------------------------------------------------------------------
class NoiseDistribution(ABC):
    """A public, data-independent additive noise distribution (symmetric about 0).

    ``integer`` is true for noise on the integers (added to integer answers, it keeps them
    integers, and its half-widths are integers).
    """

    integer: ClassVar[bool] = False

    @property
    @abstractmethod
    def scale(self) -> float:
        """The distribution's scale parameter (Laplace b, Gaussian sigma)."""

    @abstractmethod
    def half_width(self, level: float) -> float:
        """The smallest ``t`` with ``P(|X| <= t) >= level``."""

    @abstractmethod
    def expected_abs(self) -> float:
        """``E|X|``: the expected absolute error this noise adds."""

    @abstractmethod
    def describe(self) -> str:
        """One line, e.g. ``Laplace(scale=10.0)``."""


@dataclass(frozen=True)
class LaplaceNoise(NoiseDistribution):
    """Laplace(0, b), density ``e^{-|x|/b} / 2b``.

    ``P(|X| > t) = e^{-t/b}``, so the level-``L`` half-width is ``b·ln(1/(1-L))`` (about
    ``3.0·b`` at 95%), and ``E|X| = b`` (``|X|`` is exponential with mean ``b``).

    >>> round(LaplaceNoise(10.0).half_width(0.95), 4)
    29.9573
    """

    b: float

    @property
    def scale(self) -> float:
        return self.b

    def half_width(self, level: float) -> float:
        return self.b * math.log(1.0 / (1.0 - check_level(level)))

    def tail(self, t: float) -> float:
        """``P(|X| > t)``."""
        return math.exp(-t / self.b) if self.b > 0 else float(t < 0)

    def expected_abs(self) -> float:
        return self.b

    def describe(self) -> str:
        return f"Laplace(scale={_fmt(self.b)})"


@dataclass(frozen=True)
class GaussianNoise(NoiseDistribution):
    """Normal(0, sigma²).

    ``P(|X| <= sigma·z) = level`` for ``z = Phi^{-1}((1 + level)/2)`` (1.96 at 95%), and
    ``E|X| = sigma·sqrt(2/pi)``.

    >>> round(GaussianNoise(1.0).half_width(0.95), 4)
    1.96
    """

    sigma: float

    @property
    def scale(self) -> float:
        return self.sigma

    def half_width(self, level: float) -> float:
        z = NormalDist().inv_cdf((1.0 + check_level(level)) / 2.0)
        return self.sigma * z

    def expected_abs(self) -> float:
        return self.sigma * math.sqrt(2.0 / math.pi)

    def describe(self) -> str:
        return f"Gaussian(sigma={_fmt(self.sigma)})"


# -- exact discrete noise ------------------------------------------------------------------
_LN2 = math.log(2.0)
_UNIT = 2.0**-53  # unit roundoff of a double
# A computed log-tail must sit this far below ln(alpha) to be accepted. Each log-tail below is
# a sum of a few terms of magnitude at most ~40 (alpha is at least 2**-53, so the tails that
# matter are at least that), each off by a few ulps: an absolute error below 1e-13, far inside
# this margin. So an accepted half-width is never too small; it is one too large only when
# the exact tail is within 1e-11 (relative) of alpha.
_LOG_MARGIN = 1e-11


def _alpha_down(level: float) -> float:
    """The largest float not above ``1 - level``, computed exactly (``level`` in (0, 1))."""
    alpha = 1 - Fraction(check_level(level))
    a = float(alpha)
    if Fraction(a) > alpha:
        a = math.nextafter(a, 0.0)
    return a


def _fmt_exact(x: Fraction) -> str:
    """An exact parameter for ``describe()``: integers without a decimal point."""
    if x.denominator == 1:
        return str(x.numerator)
    return _fmt(float(x))


def _fmt_grid(g: Fraction) -> str:
    """A power of two ``2**k`` as ``2^k``."""
    k = g.numerator.bit_length() - 1 if g >= 1 else -(g.denominator.bit_length() - 1)
    return f"2^{k}"


def _float_up(x: Fraction) -> float:
    f = float(x)
    if Fraction(f) < x:
        f = math.nextafter(f, math.inf)
    return f


@dataclass(frozen=True)
class DiscreteLaplaceNoise(NoiseDistribution):
    """The discrete Laplace on the integers: ``P(x) = (1-q)/(1+q) · q**|x|``, ``q = e^{-1/b}``.

    Drawn exactly by :func:`pinqpy.noise.samplers.discrete_laplace` (``b`` is the exact rational
    scale). Its tails, for an integer ``t >= 0``: ``P(X > t) = Σ_{x>t} (1-q)/(1+q)·q^x =
    q^{t+1}/(1+q)``, so

        ``P(|X| > t) = 2·q^{t+1}/(1+q)``,  ``E|X| = 2q/(1-q²)``,  ``Var X = 2q/(1-q)²``

    (``E|X| = 2(1-q)/(1+q)·Σ_k k q^k = 2(1-q)/(1+q)·q/(1-q)²``). The level-``L`` half-width is
    the least integer ``t`` with ``P(|X| > t) <= 1 - L``: ``|X| <= t`` then holds with
    probability at least ``L`` (more, by the size of the last atom, since ``X`` is discrete).
    It is found in log space, ``ln P(|X| > t) = ln 2 - (t+1)/b - ln(1+q)``, and accepted only
    with a margin that covers floating-point error (``_LOG_MARGIN``), so it is never too small.

    >>> n = DiscreteLaplaceNoise(Fraction(10))
    >>> n.half_width(0.95), n.describe()
    (30.0, 'DiscreteLaplace(scale=10)')
    >>> n.tail(30) <= 0.05 < n.tail(29)
    True
    """

    b: Fraction
    integer: ClassVar[bool] = True

    def __post_init__(self) -> None:
        b = Fraction(self.b)
        if b <= 0:
            raise PinqError("a discrete Laplace scale must be positive")
        object.__setattr__(self, "b", b)

    @property
    def scale(self) -> float:
        return float(self.b)

    @cached_property
    def _a(self) -> float:
        return float(1 / self.b)  # 1/b, correctly rounded

    def _log_tail(self, t: int) -> float:
        """``ln P(|X| > t)`` for an integer ``t >= 0``."""
        a = self._a
        return _LN2 - (t + 1) * a - math.log1p(math.exp(-a))

    def tail(self, t: int) -> float:
        """``P(|X| > t)`` for an integer ``t`` (1 for ``t < 0``)."""
        return 1.0 if t < 0 else min(1.0, math.exp(self._log_tail(int(t))))

    def within(self, t: int) -> float:
        """``P(|X| <= t)``."""
        return 0.0 if t < 0 else -math.expm1(self._log_tail(int(t)))

    def half_width(self, level: float) -> float:
        target = math.log(_alpha_down(level)) - _LOG_MARGIN
        a = self._a
        # (t+1)·a >= ln 2 - ln(1+q) - target gives the log-tail <= target.
        t = max(0, math.ceil((_LN2 - math.log1p(math.exp(-a)) - target) / a) - 1)
        step = max(1, t >> 40)  # keeps the search finite where 1/b is below an ulp of (t+1)/b
        while self._log_tail(t) > target:
            t += step
        while t >= step and self._log_tail(t - step) <= target:
            t -= step
        return float(t)

    def expected_abs(self) -> float:
        q = math.exp(-self._a)
        return 2.0 * q / (-math.expm1(-self._a) * (1.0 + q))

    def variance(self) -> float:
        q = math.exp(-self._a)
        return 2.0 * q / math.expm1(-self._a) ** 2

    def describe(self) -> str:
        return f"DiscreteLaplace(scale={_fmt_exact(self.b)})"


@dataclass(frozen=True)
class DiscreteGaussianNoise(NoiseDistribution):
    """The discrete Gaussian on the integers: ``P(x) ∝ e^{-x²/(2σ²)}`` with ``σ² = sigma2``.

    Drawn exactly by :func:`pinqpy.noise.samplers.discrete_gaussian` (Canonne, Kamath & Steinke
    2020). With ``w(y) = e^{-y²/(2σ²)}`` and ``Z = Σ_y w(y)``, ``P(|X| > t) = 2·Σ_{y>t} w(y)/Z``.

    * ``σ <= 4096``: the sums are computed term by term over ``0 <= y <= Y = ceil(12σ) + 16``
      (suffix sums, smallest terms first). The part beyond ``Y`` is at most
      ``∫_Y^∞ e^{-u²/(2σ²)} du <= (σ²/Y)·w(Y)`` (Mills' ratio), ``w(Y) <= e^{-72}``, and is
      added to the tail; every sum of ``n`` terms is also widened by its worst-case rounding
      error, ``(n + 3·72 + 16)`` unit roundoffs. So ``tail(t)`` is an upper bound within about
      ``1e-11`` relative of the exact value.
    * ``σ > 4096``: ``w`` decreases on ``y >= 0``, so ``Σ_{y>t} w(y) <= ∫_t^∞ w``; and by
      Poisson summation ``Z = σ√(2π)·Σ_k e^{-2π²σ²k²} >= σ√(2π)``. Hence
      ``P(|X| > t) <= 2·Φ̄(t/σ) = erfc(t/(σ√2))``, the continuous Gaussian tail, which is used
      as the (conservative) tail: the half-width is then at most one more than the exact one.

    The level-``L`` half-width is the least integer ``t`` whose tail bound is at most
    ``1 - L``, so ``P(|X| <= t) >= L``.

    >>> n = DiscreteGaussianNoise(Fraction(16))
    >>> n.half_width(0.95), n.describe()
    (8.0, 'DiscreteGaussian(sigma=4.0)')
    >>> n.tail(8) <= 0.05 < n.tail(7)
    True
    """

    sigma2: Fraction
    integer: ClassVar[bool] = True

    _EXACT_SIGMA: ClassVar[float] = 4096.0

    def __post_init__(self) -> None:
        s2 = Fraction(self.sigma2)
        if s2 <= 0:
            raise PinqError("a discrete Gaussian sigma2 must be positive")
        object.__setattr__(self, "sigma2", s2)

    @cached_property
    def scale(self) -> float:  # type: ignore[override]
        return math.sqrt(float(self.sigma2))

    @cached_property
    def _sums(self) -> tuple[np.ndarray, float, float] | None:
        """``(tail_upper, Z, Σ y·w(y))``: ``tail_upper[t] >= P(|X| > t)`` for ``0 <= t <= Y``."""
        sigma = self.scale
        if sigma > self._EXACT_SIGMA:
            return None
        s2 = float(self.sigma2)
        big_y = math.ceil(12.0 * sigma) + 16
        y = np.arange(big_y + 1, dtype=np.float64)
        w = np.exp(-(y * y) / (2.0 * s2))
        suffix = np.cumsum(w[::-1])[::-1]  # suffix[t] = Σ_{y >= t} w(y), smallest terms first
        above = np.append(suffix[1:], 0.0)  # Σ_{y > t} w(y) over the computed range
        beyond = s2 / big_y * float(w[-1])  # Mills' bound on Σ_{y > Y} w(y)
        gamma = (big_y + 1 + 3 * 72 + 16) * _UNIT
        z_low = (float(w[0]) + 2.0 * float(suffix[1])) * (1.0 - gamma)
        tail = np.minimum(2.0 * (above + beyond) * (1.0 + gamma) / z_low, 1.0)
        first_moment = 2.0 * float((y * w).sum())
        return tail, z_low / (1.0 - gamma), first_moment

    def tail(self, t: int) -> float:
        """An upper bound on ``P(|X| > t)`` (exact to ~1e-11 relative for ``σ <= 4096``)."""
        t = int(t)
        if t < 0:
            return 1.0
        sums = self._sums
        if sums is None:
            return min(1.0, math.erfc(t / (self.scale * math.sqrt(2.0))) * (1.0 + 1e-12))
        tail = sums[0]
        return float(tail[t]) if t < tail.size else 0.0

    def within(self, t: int) -> float:
        """A lower bound on ``P(|X| <= t)``."""
        return 1.0 - self.tail(t)

    def half_width(self, level: float) -> float:
        alpha = _alpha_down(level)
        sums = self._sums
        if sums is not None:
            ok = np.flatnonzero(sums[0] <= alpha)
            return float(ok[0])  # the last entry is ~e^-72 relative, below any alpha
        z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
        t = max(0, math.ceil(self.scale * z * (1.0 - 1e-9)))
        while self.tail(t) > alpha:
            t += 1
        while t > 0 and self.tail(t - 1) <= alpha:
            t -= 1
        return float(t)

    def expected_abs(self) -> float:
        sums = self._sums
        if sums is None:  # the continuous value; they differ by ~1/(12σ²) relative here
            return self.scale * math.sqrt(2.0 / math.pi)
        return sums[2] / sums[1]

    def describe(self) -> str:
        return f"DiscreteGaussian(sigma={_fmt(self.scale)})"


@dataclass(frozen=True)
class LatticeNoise(NoiseDistribution):
    """The error of a lattice release ``g·(round(v/g) + Z)``, ``Z`` the integer noise ``unit``
    (:func:`pinqpy.noise.lattice_release.lattice_laplace`,
    :func:`~pinqpy.noise.lattice_release.lattice_gaussian`).

    The released value minus the exact one is ``g·(round(v/g) - v/g) + g·Z``: a rounding
    error of at most ``g/2`` plus ``g`` times the integer noise. So ``|error| <= g·(t + 1/2)``
    whenever ``|Z| <= t``, and the level-``L`` half-width is ``g·(t_L + 1/2)`` with ``t_L`` the
    unit noise's own half-width (rounded up to a float); ``E|error| <= g·(E|Z| + 1/2)``. The
    released double is ``n·g`` exactly while ``|n| <= 2**53`` grid steps: for aggregates of
    clamped values that needs more than ``2**42`` rows, so no further term is added.
    ``scale`` is ``g`` times the unit noise's scale (the Laplace ``b`` or Gaussian ``σ`` in the
    value's own units).

    >>> n = LatticeNoise(DiscreteLaplaceNoise(Fraction(2562)), Fraction(1, 128))
    >>> n.describe()
    'Lattice Laplace(scale=20.0156, grid=2^-7)'
    >>> n.half_width(0.95) == float(Fraction(1, 128) * (Fraction(7675) + Fraction(1, 2)))
    True
    """

    unit: DiscreteLaplaceNoise | DiscreteGaussianNoise
    grid: Fraction

    def __post_init__(self) -> None:
        g = Fraction(self.grid)
        if g <= 0 or (g.numerator & (g.numerator - 1)) or (g.denominator & (g.denominator - 1)):
            raise PinqError("a lattice grid must be a positive power of two")
        object.__setattr__(self, "grid", g)

    @property
    def scale(self) -> float:
        return float(self.grid) * self.unit.scale  # exact: g is a power of two

    def half_width(self, level: float) -> float:
        t = int(self.unit.half_width(level))
        return _float_up(self.grid * (t + Fraction(1, 2)))

    def expected_abs(self) -> float:
        return float(self.grid) * (self.unit.expected_abs() + 0.5)

    def describe(self) -> str:
        if isinstance(self.unit, DiscreteLaplaceNoise):
            what = f"Laplace(scale={_fmt(self.scale)}"
        else:
            what = f"Gaussian(sigma={_fmt(self.scale)}"
        return f"Lattice {what}, grid={_fmt_grid(self.grid)})"


@dataclass(frozen=True)
class ZeroNoise(NoiseDistribution):
    """No noise: the answer has sensitivity 0 (bounds of width 0), so it is released exactly.

    >>> ZeroNoise().half_width(0.99), ZeroNoise().describe()
    (0.0, 'NoNoise(sensitivity=0)')
    """

    @property
    def scale(self) -> float:
        return 0.0

    def half_width(self, level: float) -> float:
        check_level(level)
        return 0.0

    def expected_abs(self) -> float:
        return 0.0

    def describe(self) -> str:
        return "NoNoise(sensitivity=0)"
