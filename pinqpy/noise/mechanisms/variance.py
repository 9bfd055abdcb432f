"""Variances and standard deviations: a noisy count, sum and sum of squares, centred at the
bounds' midpoint."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import ClassVar

import numpy as np

from pinqpy.accounting.charges import CompositeCharge
from pinqpy.accounting.cost import check_epsilon
from pinqpy.core.exact import Exact
from pinqpy.core.lattice import Lattice
from pinqpy.errors import PinqError
from pinqpy.noise.mechanisms.base import (
    MAX_VARIANCE_BOUND,
    Mechanism,
    _bounds,
    _count_vector,
    _finite_or,
    _index_sums,
    _optional_delta,
    _quiet,
    _split,
)
from pinqpy.noise.mechanisms.calibration import _float_up
from pinqpy.noise.mechanisms.mean import _mean_box
from pinqpy.results.accuracy import Accuracy
from pinqpy.results.noise import check_level

__all__ = ["VarianceAccuracy", "VarianceMechanism"]


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

    **One changed row** (``changed_row=True``: the whole of a table whose row count is
    public; :func:`pinqpy.pipeline.prepare.changed_row_frame`). Changing one row moves each
    measurement by at most: the count 1 (only a NULL ↔ value change moves it); the centred
    sum ``2h`` (a row's term is in ``[-h, h]``, a NULL's 0); the shifted squares ``h²`` (a
    row's term is in ``[-h²/2, h²/2]``, a NULL's 0). The frame is charged at stability 2 (a
    changed row is one row removed and one added), so the sum and the squares keep their
    sensitivities ``h`` and ``h²/2`` per row of stability, already exact for one changed row,
    and the count is calibrated to ``1/2`` per row of stability (:func:`_count_noise`)
    instead of 1, which two rows added or removed would need.

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
        changed_row: bool = False,
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
        self.changed_row = bool(changed_row)
        count_sens = Fraction(1, 2) if self.changed_row else Fraction(1)
        self._count = _split(count_sens, self.epsilon, dlt, 3, count=True)
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
