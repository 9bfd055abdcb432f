"""Means: a noisy centred sum over a noisy count, with a confidence box over both."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from pinqpy.accounting.charges import CompositeCharge
from pinqpy.accounting.cost import check_epsilon
from pinqpy.core.exact import Exact
from pinqpy.core.lattice import Lattice
from pinqpy.noise.mechanisms.base import (
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
from pinqpy.results.accuracy import Accuracy
from pinqpy.results.noise import NoiseDistribution, check_level

__all__ = [
    "MeanAccuracy",
    "MeanMechanism",
    "PublicSizeMeanAccuracy",
    "PublicSizeMeanMechanism",
]


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


def _centred_sums(lattice: Any, index_sums: object, counts: object) -> list[Fraction]:
    """Per key, the exact sum of the lattice values minus the centre (``S`` before noise)."""
    s = _index_sums(index_sums, "sums")
    c = _count_vector(counts, "counts")
    if len(s) != c.shape[0]:
        raise ValueError("sums and counts must have one entry per key each")
    return [lattice.centred_sum(si, ni) for si, ni in zip(s, c.tolist(), strict=True)]


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

    **One changed row** (a table whose row count is public): this mechanism runs on its
    groups and derived frames, never on the table's own rows (there the count is public:
    :class:`PublicSizeMeanMechanism`). One changed row moves a group's centred sum by at
    most ``2h`` and its count by at most 1 (the row leaves or enters it), or the sum by ``2h``
    and the count by 0 (it stays): at most two rows added or removed, what the frame's
    stability 2 charges. So the generic rule is its bound.

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
        return _centred_sums(self.lattice, index_sums, counts)

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


class PublicSizeMeanAccuracy(Accuracy):
    """Confidence intervals for a mean over a public row count ``n``: released value
    ``mid + S'/n`` (clamped), ``S' = S + X``.

    With ``t`` the ``level`` half-width of ``X``, ``|X| <= t`` with probability ``level``, and
    then the exact ``mid + S/n`` is within ``t/n`` of ``mid + S'/n``; clamping into the bounds
    moves the released value toward the exact one (which lies in them), so the interval is
    ``value ± t/n``, widened by the quantisation slack ``q/2`` and clipped into the bounds.
    """

    def __init__(
        self,
        values: np.ndarray,
        *,
        noise: NoiseDistribution,
        n: int,
        lo: float,
        hi: float,
        epsilon: object,
        delta: object,
        mechanism: str,
        slack: float = 0.0,
    ):
        super().__init__(
            values,
            mechanism=mechanism,
            epsilon=epsilon,
            delta=delta,
            noise_scale=noise.scale / max(n, 1),
        )
        self.noise, self.n, self.lo, self.hi, self.slack = noise, n, lo, hi, slack

    @_quiet
    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        t = self.noise.half_width(check_level(level)) / max(self.n, 1) + self.slack
        v = np.asarray(self.values, dtype=np.float64)
        if self.n == 0:  # no rows: the mean is undefined, any value in the bounds
            return np.full_like(v, self.lo), np.full_like(v, self.hi)
        low = np.clip(v - t, self.lo, self.hi)
        high = np.clip(v + t, self.lo, self.hi)
        return np.minimum(low, v), np.maximum(high, v)


class PublicSizeMeanMechanism(Mechanism):
    """A noisy mean over a frame whose row count ``n`` is public (``public_size``).

    Released value ``mid + S'/n``, clamped into ``[lo, hi]``, where ``S' = S + noise`` is the
    centred sum ``S = Σ (x̂ - mid)`` of the lattice-quantised clamped values (as in
    :class:`MeanMechanism`), measured with **all** of the mean's epsilon; no count is
    measured, since ``n`` is public.

    **Privacy (one changed row).** Declaring the count public makes the table's neighbours
    those of bounded DP: the same ``n`` rows, one of them changed
    (:class:`~pinqpy.accounting.agents.ChangedRowView`). Changing a row replaces its term
    ``x̂ - mid`` of ``S`` by another; each lies in ``[-h, h]`` (``h`` the lattice half-width,
    within ``q/2`` of ``(hi - lo)/2``; a NULL's term is 0), so ``S`` moves by at most ``2h``,
    attained by a row moved from ``lo`` to ``hi``. The noise is calibrated for ``(h,
    epsilon)``, ``h`` per row added or removed, and the frame is charged at stability 2 (a
    changed row is one row removed and one added): the lattice release moves by at most
    ``2h`` for one changed row, which the charge at 2 covers exactly (``2·epsilon``-DP,
    ``4·rho`` in zCDP, the Gaussian profile at shift ``2h``). So a mean asked at epsilon
    costs ``2·epsilon``, and one charged ``epsilon`` has noise of scale ``2h/epsilon`` on
    ``S``: the same as calibrating the centred sum to its change-one-row sensitivity ``2h``,
    which is the bound this mechanism uses. Dividing by the public constant ``n`` and adding
    the public ``mid`` (then clamping) are post-processing; ``n`` is the same in both
    neighbours.

    **NULLs.** A NULL value contributes 0 to ``S`` (the engine's sums skip it), exactly as if
    it were the midpoint ``mid``, while ``n`` counts every row. So the released value is the
    mean over all ``n`` rows with NULLs counted as ``mid``: equal to SQL's AVG (which skips
    NULLs) when the column has none. This is what the mechanism measures, soundly, whatever
    the data; callers that cannot rule NULLs out say so (EXPLAIN's description, the docs).

    **Accuracy.** The error is ``X/n`` with ``X`` the sum's noise: Laplace scale
    ``h/epsilon ≈ (hi - lo)/(2·epsilon)`` on ``S``, so ``(hi - lo)/(2·n·epsilon)`` on the
    mean, for a charge of ``2·epsilon`` -- against the two-measurement mean's
    ``2·h/epsilon`` on its sum plus a noisy count at the same epsilon. ``ci`` is described in
    :class:`PublicSizeMeanAccuracy`.

    ``release(index_sums, counts, n)`` takes each key's exact lattice-index sum ``Σd``, the
    number of non-NULL values it covers, and the public row count ``n`` (one key only: a
    public count belongs to a whole frame, never to a group).

    >>> from pinqpy import testing
    >>> m = PublicSizeMeanMechanism(0.2, 0, 100, lambda: 4)
    >>> m.describe().split(", row ")[1]
    'count public (n = 4), NULL counted as 50)'
    >>> s, _, k = m.lattice.value_sums([10.0, 20.0, 60.0])
    >>> with testing.no_noise():
    ...     v, _ = m.release([s], np.array([k]), 4)   # the 4th row is NULL: counted as 50
    >>> v.tolist()
    [35.0]
    """

    def __init__(
        self,
        epsilon: object,
        lo: object,
        hi: object,
        n_of: Callable[[], int],
        delta: object = None,
    ):
        self.lo, self.hi = _bounds(lo, hi)
        self.epsilon = Exact(check_epsilon(epsilon))
        dlt = _optional_delta(delta)
        self.delta = Exact(dlt or 0)
        self.lattice = Lattice.of(self.lo, self.hi)
        self._n_of = n_of
        self._sum = _split(self.lattice.half, self.epsilon, dlt, 1, count=False)
        self.sum_noise = self._sum.noise
        self.charge = self._sum.charge
        self.noise_scale = None

    @property
    def n(self) -> int:
        """The public row count (read on first use)."""
        return int(self._n_of())

    @property
    def mid(self) -> float:
        """The public centre of the lattice (``(lo + hi)/2`` for bounds on the lattice)."""
        return float(self.lattice.centre)

    def describe(self) -> str:
        return (
            f"Mean(sum: {self.sum_noise.describe()}, row count public (n = {self.n}), "
            f"NULL counted as {self.mid:g})"
        )

    def expected_error(self, n: float | None = None) -> float:
        """``E|X|/n`` (at most ``hi - lo``); ``n`` is the public count unless given."""
        size = self.n if n is None else n
        width = self.hi - self.lo
        if size <= 0:
            return width
        return min(self.sum_noise.expected_abs() / size, width)

    def accuracy(self, level: float = 0.95, n: float | None = None) -> float:
        """A bound on ``|released - exact|`` w.p. >= level: ``t/n`` with ``t`` the noise's
        ``level`` half-width (at most ``hi - lo``); ``n`` is the public count unless given."""
        size = self.n if n is None else n
        width = self.hi - self.lo
        if size <= 0:
            return width
        return min(self.sum_noise.half_width(check_level(level)) / size, width)

    def centred(self, index_sums: object, counts: object) -> list[Fraction]:
        """The exact centred sums ``S`` the noise is calibrated for (before any noise)."""
        return _centred_sums(self.lattice, index_sums, counts)

    @_quiet
    def release(
        self, index_sums: object, counts: object, n: int | None = None
    ) -> tuple[np.ndarray, Accuracy]:
        """Noisy means ``mid + S'/n`` from exact lattice-index sums and non-NULL counts."""
        size = self.n if n is None else int(n)
        noisy_sum = self._sum.add_exact(self.centred(index_sums, counts))
        mean = self.mid + noisy_sum / max(size, 1)
        values = np.clip(_finite_or(mean, self.mid), self.lo, self.hi)
        acc = PublicSizeMeanAccuracy(
            values,
            noise=self.sum_noise,
            n=size,
            lo=self.lo,
            hi=self.hi,
            epsilon=self.epsilon,
            delta=self.delta,
            mechanism=self.describe(),
            slack=_float_up(self.lattice.step / 2),
        )
        return values, acc
