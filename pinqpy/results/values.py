"""What a noisy aggregation returns: numbers, labels and Series that carry their accuracy.

* :class:`NoisyValue` is a ``float``: arithmetic, comparison and formatting work as for any
  float (and return plain floats). ``v.ci(0.95)`` is a confidence interval for the exact value,
  computed from the mechanism's public noise distribution and the released values only -- it
  is post-processing and costs no privacy.
* :class:`NoisyCount` is an ``int``: a count released with exact discrete noise, with an
  integer ``ci``. :meth:`NoisyValue.from_release` returns one when the release's values are
  integers.
* :class:`NoisyLabel` is a ``str`` (the candidate an argmax chose) whose ``ci`` says how far
  below the true maximum count the chosen candidate's count can be.
* :class:`NoisySeries` is a :class:`pandas.Series` (one released value per key of a partition)
  that keeps its accuracy through slicing, sorting and filtering.
* :class:`Accuracy` is the object mechanisms hand back with their releases, one entry per key;
  results hold one and ask it for intervals.
* The noise distributions: :class:`DiscreteLaplaceNoise`, :class:`DiscreteGaussianNoise` (on
  the integers), :class:`LatticeNoise` (a real answer on a public grid ``g·Z``),
  :class:`ZeroNoise`; :class:`LaplaceNoise` and :class:`GaussianNoise` are the continuous
  laws (no mechanism of pinqpy draws them any more; kept for callers' own accuracies).

>>> import numpy as np
>>> acc = AdditiveAccuracy(np.array([512.3]), LaplaceNoise(10.0), epsilon=0.1)
>>> v = NoisyValue.from_release(acc)
>>> v
NoisyValue(512.3, ±29.96 at 95%)
>>> v + 1
513.3
>>> [round(x, 2) for x in v.ci(0.95)]
[482.34, 542.26]
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from statistics import NormalDist
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from pinqpy.core.exact import Exact
from pinqpy.errors import PinqError
from pinqpy.results.format import _fmt, _same_values
from pinqpy.results.html import (
    LEVEL,
    noisy_frame_html,
    noisy_scalar_html,
    noisy_series_html,
    result_html,
)

__all__ = [
    "Accuracy",
    "AccuracyPreview",
    "AdditiveAccuracy",
    "ArgmaxAccuracy",
    "DiscreteGaussianNoise",
    "DiscreteLaplaceNoise",
    "GaussianNoise",
    "LaplaceNoise",
    "LatticeNoise",
    "NoiseDistribution",
    "NoisyChoice",
    "NoisyCount",
    "NoisyFloatLabel",
    "NoisyFrame",
    "NoisyIntLabel",
    "NoisyLabel",
    "NoisySeries",
    "NoisyValue",
    "ZeroNoise",
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


# -- accuracy ------------------------------------------------------------------------------
class Accuracy(ABC):
    """The accuracy of one release, one entry per key, computed without reading data again.

    Holds the released values and whatever *public or released* quantities its intervals need
    (never an exact aggregate). ``interval(level)`` returns arrays ``(low, high)`` with one
    entry per key: with probability at least ``level`` (over the mechanism's randomness) the
    exact value lies in ``[low, high]``. ``take(idx)`` restricts to some keys, so a result can
    be sliced.

    Attributes: ``mechanism`` (a one-line description), ``epsilon`` and ``delta`` (what the
    release was asked for, before any stability multiplier), ``noise_scale`` (float or None).
    """

    # Names of the attributes that hold one entry per key (sliced by ``take``).
    _per_key: ClassVar[tuple[str, ...]] = ("values",)

    def __init__(
        self,
        values: np.ndarray,
        *,
        mechanism: str,
        epsilon: object,
        delta: object = 0,
        noise_scale: float | None = None,
    ):
        self.values = np.asarray(values)
        if self.values.ndim != 1:
            raise ValueError("released values must be one-dimensional (one per key)")
        self.mechanism = mechanism
        self.epsilon = Exact(epsilon)
        self.delta = Exact(delta)
        self.noise_scale = noise_scale

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def integer(self) -> bool:
        """Whether the released values are integers (counts drawn with integer noise)."""
        return self.values.dtype.kind in "iu"

    @abstractmethod
    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Per-key ``(low, high)`` covering the exact value with probability >= ``level``."""

    def symmetric_half_width(self, level: float = 0.95) -> float | None:
        """The ``t`` of a ``value ± t`` interval when the interval has that form, else None."""
        return None

    def take(self, idx: Any) -> Accuracy:
        """This accuracy restricted to the keys at positions ``idx`` (numpy indexing)."""
        out = copy.copy(self)
        for name in self._per_key:
            setattr(out, name, np.asarray(getattr(self, name))[idx])
        if np.ndim(out.values) == 0:
            for name in self._per_key:
                setattr(out, name, np.atleast_1d(getattr(out, name)))
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.mechanism}, keys={len(self)})"


class AdditiveAccuracy(Accuracy):
    """Released value = exact value + independent noise from a known distribution.

    The interval is ``value ± noise.half_width(level)``: since ``|noise| <= t`` with
    probability ``level``, the exact value ``value - noise`` is within ``t`` of ``value``.
    Integer values with integer noise (a count with discrete noise) get integer intervals
    (``int64`` arrays).
    """

    def __init__(
        self,
        values: np.ndarray,
        noise: NoiseDistribution,
        *,
        epsilon: object,
        delta: object = 0,
        mechanism: str | None = None,
    ):
        super().__init__(
            values,
            mechanism=mechanism or noise.describe(),
            epsilon=epsilon,
            delta=delta,
            noise_scale=noise.scale,
        )
        self.noise = noise

    @property
    def integer(self) -> bool:
        return self.noise.integer and self.values.dtype.kind in "iu"

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        t = self.noise.half_width(level)
        if self.integer:
            v = self.values.astype(np.int64)
            return v - int(t), v + int(t)
        v = self.values.astype(np.float64)
        # Never inf, and never a warning: only values near the largest double could overflow.
        top = np.finfo(np.float64).max
        with np.errstate(over="ignore", invalid="ignore"):
            return np.clip(v - t, -top, top), np.clip(v + t, -top, top)

    def symmetric_half_width(self, level: float = 0.95) -> float | None:
        return self.noise.half_width(level)


class ArgmaxAccuracy(Accuracy):
    """A private argmax over ``n_candidates`` public candidates with parameter ``epsilon``.

    ``interval(level)`` is ``(0, tolerance)`` for every key: with probability at least
    ``level``, the chosen candidate's exact count is at most ``tolerance`` below the largest
    exact count, where ``tolerance = ln(n / (1 - level)) / epsilon`` (the exponential
    mechanism's utility bound; see :class:`pinqpy.noise.mechanisms.ArgmaxMechanism`). It is a
    statement about the *shortfall* of the choice, not an interval of labels.
    """

    def __init__(
        self,
        values: np.ndarray,
        *,
        epsilon: object,
        n_candidates: int,
        mechanism: str | None = None,
        indices: np.ndarray | None = None,
    ):
        scale = float(1 / Fraction(Exact(epsilon)))
        super().__init__(
            values,
            mechanism=mechanism or f"PermuteAndFlip(epsilon={_fmt(float(Exact(epsilon)))})",
            epsilon=epsilon,
            noise_scale=scale,
        )
        self.n_candidates = int(n_candidates)
        self.indices = (
            np.zeros(len(self), dtype=np.int64) if indices is None else np.asarray(indices)
        )

    _per_key: ClassVar[tuple[str, ...]] = ("values", "indices")

    @property
    def integer(self) -> bool:
        return False  # candidate indices or labels, not counts

    def tolerance(self, level: float = 0.95) -> float:
        """How far below the maximum count the chosen count may be, at this level."""
        lv = check_level(level)
        return math.log(self.n_candidates / (1.0 - lv)) / float(self.epsilon)

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        t = self.tolerance(level)
        return np.zeros(len(self)), np.full(len(self), t)


# -- formatting ----------------------------------------------------------------------------
def _fmt_level(level: float) -> str:
    return f"{level * 100:g}%"


class _HasAccuracy:
    """Attributes shared by the scalar results (the accuracy of a one-key release)."""

    _accuracy: Accuracy

    @property
    def accuracy(self) -> Accuracy:
        return self._accuracy

    @property
    def epsilon(self) -> Exact:
        """The epsilon this release was made with (before any stability multiplier)."""
        return self._accuracy.epsilon

    @property
    def delta(self) -> Exact:
        return self._accuracy.delta

    @property
    def mechanism(self) -> str:
        return self._accuracy.mechanism

    @property
    def noise_scale(self) -> float | None:
        return self._accuracy.noise_scale


def _one_key(accuracy: Accuracy) -> Accuracy:
    if not isinstance(accuracy, Accuracy):
        raise TypeError("a noisy result needs an Accuracy")
    if len(accuracy) != 1:
        raise ValueError("a scalar result needs the accuracy of exactly one key")
    return accuracy


class NoisyValue(_HasAccuracy, float):
    """A released number: a ``float`` that also knows how accurate it is.

    Arithmetic returns plain floats (the accuracy describes *this* released value only).
    ``ci(level)`` is a ``(low, high)`` interval for the exact value; for Laplace noise of scale
    ``b`` it is ``value ± b·ln(1/(1-level))``, for Gaussian noise ``value ± sigma·z``, and for a
    mean or quantile the (asymmetric) interval its mechanism documents.

    >>> import numpy as np
    >>> v = NoisyValue.from_release(AdditiveAccuracy(np.array([3.5]), GaussianNoise(2.0),
    ...                                               epsilon=1, delta=1e-6))
    >>> v * 2
    7.0
    >>> v.noise_scale, float(v.delta)
    (2.0, 1e-06)
    """

    def _repr_html_(self) -> str:
        return result_html(self)

    def _result_html(self, level: float = LEVEL) -> str:
        return noisy_scalar_html(self, level, label=False)

    def __new__(cls, value: float, accuracy: Accuracy) -> NoisyValue:
        obj = float.__new__(cls, value)
        obj._accuracy = _one_key(accuracy)
        return obj

    @classmethod
    def from_release(cls, accuracy: Accuracy) -> NoisyValue | NoisyCount:
        """The scalar result of a one-key release (its value is ``accuracy.values[0]``).

        A :class:`NoisyCount` (an ``int``) when the accuracy says the values are integers,
        i.e. a count released with discrete noise; a ``NoisyValue`` otherwise.
        """
        acc = _one_key(accuracy)
        if acc.integer:
            return NoisyCount(int(acc.values[0]), acc)
        return cls(float(acc.values[0]), acc)

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """A ``level`` confidence interval ``(low, high)`` for the exact value."""
        low, high = self._accuracy.interval(level)
        return float(low[0]), float(high[0])

    def __repr__(self) -> str:
        level = 0.95
        t = self._accuracy.symmetric_half_width(level)
        if t is not None:
            return f"NoisyValue({_fmt(self)}, ±{_fmt(t, 4)} at {_fmt_level(level)})"
        low, high = self.ci(level)
        return f"NoisyValue({_fmt(self)}, {_fmt_level(level)} ci [{_fmt(low)}, {_fmt(high)}])"

    def __str__(self) -> str:
        return float.__repr__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (NoisyValue, (float(self), self._accuracy))


class NoisyCount(_HasAccuracy, int):
    """A released count: an ``int`` (exact discrete noise keeps counts integers) with its accuracy.

    Arithmetic returns plain ints (or floats, for ``/``), as for any int. ``ci(level)`` is an
    integer interval ``(low, high)`` for the exact count: ``value ± t`` with ``t`` the least
    integer such that the discrete noise is within ``t`` with probability at least ``level``.
    :meth:`NoisyValue.from_release` returns one for a count.

    >>> import numpy as np
    >>> acc = AdditiveAccuracy(np.array([512]), DiscreteLaplaceNoise(Fraction(10)), epsilon=0.1)
    >>> n = NoisyValue.from_release(acc)
    >>> n, n + 1, n.ci(0.95)
    (NoisyCount(512, ±30 at 95%), 513, (482, 542))
    >>> isinstance(n, int), n.mechanism
    (True, 'DiscreteLaplace(scale=10)')
    """

    def _repr_html_(self) -> str:
        return result_html(self)

    def __new__(cls, value: int, accuracy: Accuracy) -> NoisyCount:
        obj = int.__new__(cls, value)
        obj._accuracy = _one_key(accuracy)
        return obj

    @classmethod
    def from_release(cls, accuracy: Accuracy) -> NoisyCount:
        """The count of a one-key release (its value is ``accuracy.values[0]``)."""
        return cls(int(_one_key(accuracy).values[0]), accuracy)

    def ci(self, level: float = 0.95) -> tuple[int, int] | tuple[float, float]:
        """A ``level`` confidence interval ``(low, high)`` for the exact count."""
        low, high = self._accuracy.interval(level)
        if np.asarray(low).dtype.kind in "iu":
            return int(low[0]), int(high[0])
        return float(low[0]), float(high[0])

    def __repr__(self) -> str:
        level = 0.95
        t = self._accuracy.symmetric_half_width(level)
        if t is not None:
            width = str(int(t)) if float(t).is_integer() else _fmt(t, 4)
            return f"NoisyCount({int(self)}, ±{width} at {_fmt_level(level)})"
        low, high = self.ci(level)
        return f"NoisyCount({int(self)}, {_fmt_level(level)} ci [{low}, {high}])"

    def __str__(self) -> str:
        return int.__repr__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (NoisyCount, (int(self), self._accuracy))


class _LabelType(type):
    """``isinstance(x, NoisyLabel)`` holds for every argmax result, whatever its candidate's
    type (a ``str`` subclass for strings, an ``int`` or ``float`` subclass for numbers, a
    :class:`NoisyChoice` wrapper otherwise)."""

    def __instancecheck__(cls, obj: object) -> bool:
        if cls is NoisyLabel and isinstance(obj, _Label):
            return True
        return type.__instancecheck__(cls, obj)


class _Label(_HasAccuracy):
    """What every argmax result has: ``candidate``, ``ci(level)``, a repr and pickling."""

    candidate: Any

    def _repr_html_(self) -> str:
        return result_html(self)

    def _result_html(self, level: float = LEVEL) -> str:
        return noisy_scalar_html(self, level, label=True)

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """``(0.0, tolerance)``: how far below the maximum count the choice's count can be."""
        low, high = self._accuracy.interval(level)
        return float(low[0]), float(high[0])

    def __repr__(self) -> str:
        return f"NoisyLabel({self.candidate!r}, mechanism={self.mechanism!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (NoisyLabel, (self.candidate, self._accuracy))


def _is_int_candidate(c: object) -> bool:
    return type(c) is int or isinstance(c, np.integer)


def _is_float_candidate(c: object) -> bool:
    return type(c) is float or isinstance(c, np.floating)


class NoisyLabel(_Label, str, metaclass=_LabelType):
    """The candidate a noisy argmax chose, *itself*, with the argmax's accuracy.

    ``NoisyLabel(candidate, accuracy)`` returns a result of the candidate's own type, so it
    compares equal to (and hashes like) the candidate:

    * a ``str`` candidate gives a ``NoisyLabel``, a ``str`` subclass;
    * an ``int`` (or numpy integer) gives a :class:`NoisyIntLabel`, an ``int`` subclass;
    * a ``float`` (or numpy float) gives a :class:`NoisyFloatLabel`, a ``float`` subclass;
    * anything else (``bool``, which cannot be subclassed, tuples, ``None``, dates, ...) gives
      a :class:`NoisyChoice`, a wrapper whose ``==`` and ``hash`` are the candidate's.

    All of them pass ``isinstance(x, NoisyLabel)`` and have ``candidate`` (the original
    candidate object) and ``ci(level)``, which returns ``(0.0, tolerance)``: with probability
    at least ``level`` the chosen candidate's exact count is within ``tolerance`` below the
    largest exact count among the candidates.

    >>> import numpy as np
    >>> acc = ArgmaxAccuracy(np.array(["CA"], dtype=object), epsilon=1.0, n_candidates=3)
    >>> lab = NoisyLabel.from_release(acc)
    >>> lab == "CA", [round(x, 3) for x in lab.ci(0.95)]
    (True, [0.0, 4.094])
    >>> nine = NoisyLabel(9, acc)
    >>> nine == 9, type(nine).__name__, isinstance(nine, int), isinstance(nine, NoisyLabel)
    (True, 'NoisyIntLabel', True, True)
    """

    def __new__(cls, candidate: Hashable, accuracy: Accuracy) -> Any:
        if cls is NoisyLabel and not isinstance(candidate, str):
            if _is_int_candidate(candidate):
                return NoisyIntLabel(candidate, accuracy)
            if _is_float_candidate(candidate):
                return NoisyFloatLabel(candidate, accuracy)
            return NoisyChoice(candidate, accuracy)
        obj = str.__new__(cls, candidate)
        obj._accuracy = _one_key(accuracy)
        obj.candidate = candidate
        return obj

    @classmethod
    def from_release(cls, accuracy: Accuracy) -> Any:
        return NoisyLabel(_one_key(accuracy).values[0], accuracy)

    def __repr__(self) -> str:
        return f"NoisyLabel({str.__repr__(self)}, mechanism={self.mechanism!r})"


class NoisyIntLabel(_Label, int):
    """An argmax's chosen ``int`` candidate: an ``int`` equal to it, with the accuracy.

    See :class:`NoisyLabel`. Arithmetic returns plain ints.
    """

    def __new__(cls, candidate: Any, accuracy: Accuracy) -> NoisyIntLabel:
        obj = int.__new__(cls, int(candidate))
        obj._accuracy = _one_key(accuracy)
        obj.candidate = candidate
        return obj

    def __str__(self) -> str:
        return int.__repr__(self)


class NoisyFloatLabel(_Label, float):
    """An argmax's chosen ``float`` candidate: a ``float`` equal to it, with the accuracy.

    See :class:`NoisyLabel`. Arithmetic returns plain floats.
    """

    def __new__(cls, candidate: Any, accuracy: Accuracy) -> NoisyFloatLabel:
        obj = float.__new__(cls, float(candidate))
        obj._accuracy = _one_key(accuracy)
        obj.candidate = candidate
        return obj

    def __str__(self) -> str:
        return float.__repr__(self)


class NoisyChoice(_Label):
    """An argmax's chosen candidate of a type that cannot be subclassed (``bool``) or is not
    worth subclassing (tuples, ``None``, dates, ...): a wrapper that compares equal to the
    candidate and hashes like it, so ``choice == candidate`` and ``{candidate: 1}[choice]``
    work. ``candidate`` is the candidate itself; see :class:`NoisyLabel`.
    """

    __slots__ = ("_accuracy", "candidate")

    def __init__(self, candidate: Any, accuracy: Accuracy):
        self._accuracy = _one_key(accuracy)
        self.candidate = candidate

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NoisyChoice):
            other = other.candidate
        return bool(self.candidate == other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.candidate)

    def __bool__(self) -> bool:
        return bool(self.candidate)

    def __str__(self) -> str:
        return str(self.candidate)


class NoisySeries(pd.Series):
    """One released value per key, as a pandas Series that keeps its accuracy.

    Slicing, filtering, sorting and reindexing within the released keys keep the accuracy
    (``_metadata`` plus ``_constructor``). ``ci(level)`` returns a DataFrame with columns
    ``low`` and ``high`` and the Series' own index. The accuracy belongs to the *released*
    values: if the values were changed (``s * 2``, ``s.round()``), ``ci`` refuses rather than
    report an interval for numbers the mechanism never released.

    >>> import numpy as np
    >>> acc = AdditiveAccuracy(np.array([10.0, 20.0, 30.0]), LaplaceNoise(1.0), epsilon=1)
    >>> s = NoisySeries.from_release(acc, index=["a", "b", "c"], name="n")
    >>> s[s > 15].ci(0.5)
             low       high
    b  19.306853  20.693147
    c  29.306853  30.693147
    """

    def _repr_html_(self) -> str:
        return result_html(self)

    def _result_html(self, level: float = LEVEL) -> str:
        return noisy_series_html(self, level)

    _metadata: ClassVar[list[str]] = ["_pq_accuracy", "_pq_keys"]  # type: ignore[misc]

    @property
    def _constructor(self) -> type[NoisySeries]:
        return NoisySeries

    @property
    def _constructor_expanddim(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    @classmethod
    def from_release(
        cls,
        accuracy: Accuracy,
        index: Sequence[Hashable] | pd.Index | None = None,
        name: Hashable | None = None,
    ) -> NoisySeries:
        """The Series of a release over keys ``index`` (in release order)."""
        if not isinstance(accuracy, Accuracy):
            raise TypeError("a NoisySeries needs an Accuracy")
        if index is None:
            idx = pd.RangeIndex(len(accuracy))
        else:  # keep a MultiIndex and index names as given
            idx = index if isinstance(index, pd.Index) else pd.Index(index)
        if len(idx) != len(accuracy):
            raise ValueError("the index must have one label per released key")
        if not idx.is_unique:
            raise ValueError("the keys of a release must be unique")
        s = cls(accuracy.values, index=idx, name=name)
        s._pq_accuracy = accuracy
        s._pq_keys = idx
        return s

    def _acc(self) -> Accuracy:
        acc = getattr(self, "_pq_accuracy", None)
        if acc is None:
            raise PinqError("this Series carries no accuracy (it was not released by pinqpy)")
        return acc

    @property
    def accuracy(self) -> Accuracy:
        return self._acc()

    @property
    def epsilon(self) -> Exact:
        return self._acc().epsilon

    @property
    def delta(self) -> Exact:
        return self._acc().delta

    @property
    def mechanism(self) -> str:
        return self._acc().mechanism

    @property
    def noise_scale(self) -> float | None:
        return self._acc().noise_scale

    def ci(self, level: float = 0.95) -> pd.DataFrame:
        """Per-key ``level`` confidence intervals: a DataFrame with columns ``low``, ``high``."""
        acc = self._acc()
        keys: pd.Index = self._pq_keys
        positions = keys.get_indexer(self.index)
        if (positions < 0).any():
            raise PinqError("ci(): this Series has keys that were not part of the release")
        if not _same_values(np.asarray(self.values), acc.values[positions]):
            raise PinqError(
                "ci() describes the released values, and this Series' values were changed; "
                "take the interval of the released Series and transform it instead"
            )
        low, high = acc.interval(level)
        return pd.DataFrame({"low": low[positions], "high": high[positions]}, index=self.index)


class NoisyFrame(pd.DataFrame):
    """A SQL answer: a pandas DataFrame whose noisy columns keep their accuracy.

    ``ci(column, level)`` gives a DataFrame of ``low``/``high`` for one noisy column, on the
    frame's current index (so it follows row filters); ``ci(level=...)`` without a column
    gives every noisy column side by side. Columns computed from several aggregates
    (``SUM(x) / COUNT(*)``) carry no interval of their own.
    """

    def _repr_html_(self) -> str:
        return result_html(self)

    def _result_html(self, level: float = LEVEL) -> str:
        return noisy_frame_html(self, level)

    _metadata: ClassVar[list[str]] = ["_pq_accuracy"]  # type: ignore[misc]

    @property
    def _constructor(self) -> type[NoisyFrame]:
        return NoisyFrame

    @classmethod
    def from_release(cls, data: pd.DataFrame, accuracy: dict[str, Accuracy]) -> NoisyFrame:
        out = cls(data)
        out._pq_accuracy = {col: (acc, data.index.copy()) for col, acc in accuracy.items()}
        return out

    @property
    def accuracy(self) -> dict[str, Accuracy]:
        """The accuracy of each noisy column, by column name."""
        return {c: a for c, (a, _) in getattr(self, "_pq_accuracy", {}).items()}

    def ci(self, column: str | None = None, level: float = 0.95) -> pd.DataFrame:
        """``level`` confidence intervals for one noisy column, or for all of them."""
        store = getattr(self, "_pq_accuracy", {})
        if column is None:
            if not store:
                raise PinqError("this result has no noisy column with an interval")
            parts = {c: self.ci(c, level) for c in store if c in self.columns}
            return pd.concat(parts, axis=1)
        if column not in store:
            raise PinqError(
                f"column {column!r} has no interval: only single noisy aggregates carry one"
            )
        acc, index = store[column]
        low, high = acc.interval(check_level(level))
        frame = pd.DataFrame({"low": low, "high": high}, index=index)
        return frame.reindex(self.index)


@dataclass(frozen=True)
class AccuracyPreview:
    """What an aggregation *would* give at some epsilon, computed without data or charge.

    ``error`` bounds ``|released - exact|`` with probability at least ``level``; its unit is
    the value's own, except for quantiles (``unit="rank"``: rows of rank) and means without a
    group size (a bound that holds for any number of rows). ``charge`` is what it would cost
    each budget (named by ``repr``).
    """

    aggregation: str
    mechanism: str
    epsilon: Exact
    level: float
    error: float
    unit: str
    noise_scale: float | None
    charge: dict[str, object]

    def __str__(self) -> str:
        cost = "; ".join(f"{c!r} to {b}" for b, c in self.charge.items())
        unit = f" {self.unit}" if self.unit else ""
        return (
            f"{self.aggregation} at epsilon {self.epsilon}: {self.mechanism}; with probability "
            f"{self.level:g} the error is at most {self.error:.6g}{unit}; it would charge {cost}"
        )
