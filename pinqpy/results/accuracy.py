"""The accuracy of a release: the object mechanisms hand back with their released values, one
entry per key, which results hold and ask for intervals; and the preview of an aggregation's
accuracy before it runs (:class:`AccuracyPreview`), in the answer's own units where the public
facts allow it: :func:`mean_figure` (a mean's first-order error for ``n`` rows, derived in
:func:`mean_first_order`, or over a public row count), :func:`quantile_figure` (ranks, and
values assuming an even spread), :func:`key_selection_figure` (the threshold).
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from pinqpy.core.exact import Exact
from pinqpy.errors import PinqError
from pinqpy.results.format import _fmt
from pinqpy.results.noise import (
    DiscreteGaussianNoise,
    DiscreteLaplaceNoise,
    GaussianNoise,
    LaplaceNoise,
    LatticeNoise,
    NoiseDistribution,
    ZeroNoise,
    check_level,
)

__all__ = [
    "Accuracy",
    "AccuracyPreview",
    "AdditiveAccuracy",
    "ArgmaxAccuracy",
    "ErrorFigure",
    "key_selection_figure",
    "mean_figure",
    "mean_first_order",
    "quantile_figure",
]


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

    @property
    def has_interval(self) -> bool:
        """Whether :meth:`interval` gives a value-space interval (a quantile released without
        one refuses; see :meth:`rank_error`)."""
        return True

    def rank_error(self, level: float = 0.95) -> float | None:
        """For a release without a value-space interval: the data-independent error, in
        ranks (rows), that holds with probability at least ``level``; else None."""
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


# -- previews: an aggregation's error before it runs, in the answer's own units -------------
def _one_sided(noise: NoiseDistribution) -> Any:
    """``u -> P(X > u)`` for the (symmetric) noise ``X``, vectorised, as a continuous law.

    The sum noise of a mean is a lattice release: ``g`` times integer noise of scale in the
    thousands plus a rounding of at most ``g/2`` (``g`` is about ``2**-20`` of the bounds'
    width), so the continuous law of the same scale describes it to far better than the
    figures are printed. A discrete noise used here is read the same way.
    """
    if isinstance(noise, ZeroNoise) or noise.scale <= 0:
        return lambda u: (np.asarray(u) < 0).astype(np.float64)
    gaussian = isinstance(noise, GaussianNoise | DiscreteGaussianNoise) or (
        isinstance(noise, LatticeNoise) and isinstance(noise.unit, DiscreteGaussianNoise)
    )
    scale = float(noise.scale)
    if gaussian:
        from scipy.special import ndtr

        return lambda u: ndtr(-np.asarray(u, dtype=np.float64) / scale)

    def laplace(u: Any) -> np.ndarray:
        u = np.asarray(u, dtype=np.float64)
        half = 0.5 * np.exp(-np.abs(u) / scale)
        return np.where(u >= 0, half, 1.0 - half)

    return laplace


def _symmetric_masses(noise: NoiseDistribution) -> tuple[np.ndarray, np.ndarray]:
    """``(k, p)``: the law of ``|Y|`` for the count noise ``Y`` on points ``k >= 0``.

    Integer noise (what pinqpy draws for counts) exactly: ``P(|Y| = k) = P(|Y| > k-1) -
    P(|Y| > k)`` from its tail, up to a ``k`` whose tail is below ``1e-13``. A continuous
    noise is discretised on a grid of a 64th of its scale (its mass in each cell put at the
    cell's centre).
    """
    if isinstance(noise, ZeroNoise) or noise.scale <= 0:
        return np.zeros(1), np.ones(1)
    if isinstance(noise, DiscreteLaplaceNoise | DiscreteGaussianNoise):
        top = int(noise.half_width(1.0 - 1e-13)) + 1
        ks = np.arange(top + 1)
        tails = np.array([noise.tail(int(k)) for k in ks]) if top < 4096 else None
        if tails is None:  # a huge scale: the continuous law of the same scale is as good
            return _symmetric_masses(
                LaplaceNoise(noise.scale)
                if isinstance(noise, DiscreteLaplaceNoise)
                else GaussianNoise(noise.scale)
            )
        above = np.concatenate([[1.0], tails[:-1]])
        return ks.astype(np.float64), np.clip(above - tails, 0.0, 1.0)
    step = noise.scale / 64.0
    edges = np.arange(0.0, noise.half_width(1.0 - 1e-13) + 2 * step, step)
    one = _one_sided(noise)
    tails = 2.0 * one(edges)  # P(|Y| > edge)
    return edges[:-1] + step / 2, np.clip(tails[:-1] - tails[1:], 0.0, 1.0)


def _abs_tail(sum_noise: NoiseDistribution, count_noise: NoiseDistribution, c: float) -> Any:
    """``t -> P(|X + c·Y| > t)`` for independent symmetric ``X`` (sum) and ``Y`` (count).

    Conditioning on ``|Y| = k`` (either sign gives the same law, by symmetry):
    ``P(|X + c·k| > t) = P(X > t - c·k) + P(X > t + c·k)``, summed against ``P(|Y| = k)``.
    """
    one = _one_sided(sum_noise)
    ks, ps = _symmetric_masses(count_noise)
    shift = c * ks

    def tail(t: float) -> float:
        return float(np.dot(ps, one(t - shift) + one(t + shift)))

    return tail


def mean_first_order(
    sum_noise: NoiseDistribution,
    count_noise: NoiseDistribution,
    offset: float,
    level: float = 0.95,
) -> float:
    """The ``C`` of a mean's first-order error ``C/n`` at ``level``, for a mean ``offset``
    from the centre of the bounds (in the value's units).

    **Derivation.** The mean releases ``mid + (S + η_S)/(n + η_C)``, with ``S`` the exact
    centred sum (``S = n·d``, ``d = mean - mid``), ``η_S`` the sum's noise and ``η_C`` the
    count's. To first order in the noise over ``n``,

        ``(S + η_S)/(n + η_C) - S/n = (n·η_S - S·η_C)/(n·(n + η_C)) ≈ (η_S - d·η_C)/n``,

    so the error is ``Z/n`` with ``Z = η_S - d·η_C``, whose law does not depend on ``n``.
    ``C`` is the least ``t`` with ``P(|Z| > t) <= 1 - level``: the ``level`` half-width,
    computed from the two public noise laws (:func:`_abs_tail`) by bisection. The neglected
    term is of relative size ``η_C/n`` (a few in a thousand for ``n`` of some thousands at
    epsilon near 1).

    **The widest offset.** ``d`` is unknown, but ``|d| <= h`` (the half-width of the bounds).
    For each value of ``η_C``, ``P(|η_S + a| <= t)`` falls as ``|a|`` grows (``η_S`` is
    symmetric and unimodal, so moving the window ``[-t - a, t - a]`` away from 0 loses
    mass); hence ``P(|Z| > t)`` grows with ``|d|`` and ``offset = h`` gives a figure that
    holds for every mean within the bounds. ``offset = 0`` (a mean at the centre) gives the
    sum's noise alone.

    >>> from fractions import Fraction
    >>> x, y = LaplaceNoise(100.0), DiscreteLaplaceNoise(Fraction(2))
    >>> round(mean_first_order(x, y, 0.0), 1)  # the sum's Laplace alone: 100·ln 20
    299.6
    >>> round(mean_first_order(x, y, 50.0), 1) > 299.6
    True
    """
    lv = check_level(level)
    alpha = 1.0 - lv
    tail = _abs_tail(sum_noise, count_noise, abs(float(offset)))
    # By the union bound the tail at tS + |d|·tN (each at 1 - alpha/2) is at most alpha.
    hi = sum_noise.half_width(1.0 - alpha / 2.0) + abs(offset) * count_noise.half_width(
        1.0 - alpha / 2.0
    )
    hi = max(hi, 1e-300)
    while tail(hi) > alpha:  # the continuous reading of a discrete law may sit a hair above
        hi *= 1.5
    lo = 0.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if tail(mid) > alpha:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-9 * hi:
            break
    return hi


@dataclass(frozen=True)
class ErrorFigure:
    """One aggregation's error before it runs, in the answer's own units where the public
    facts allow it: ``error`` (at ``level``; None when no figure exists without ``n``),
    ``unit`` (``""`` for the value's own units, ``"ranks"`` for rows of rank), ``note`` (the
    assumption behind it, in words), ``short`` (a few words for EXPLAIN), and what the figure
    is made of (``error_times_n`` for a mean: ``error ≈ error_times_n / n``; ``rank_error``
    for a quantile; ``noise_scale``)."""

    error: float | None
    unit: str
    note: str
    short: str
    noise_scale: float | dict[str, float] | None = None
    error_times_n: float | None = None
    rank_error: float | None = None
    n: float | None = None
    expected: float | None = None
    expected_times_n: float | None = None


def _fmt_n(n: float) -> str:
    """A row count as written: ``1000``, not ``1000.0``."""
    return str(int(n)) if float(n).is_integer() else _fmt(n, 4)


def _units(column: str | None) -> str:
    return f"{column}'s units" if column else "the column's units"


def _check_n(n: object) -> float | None:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int | float | np.integer | np.floating):
        raise PinqError("n (a row count) must be a number")
    value = float(n)
    if not math.isfinite(value) or value <= 0:
        raise PinqError("n (a row count) must be a positive number")
    return value


def _integrate_tail(tail: Any, upper: float) -> float:
    """``E|Z| = ∫_0^∞ P(|Z| > t) dt``, by the trapezoid rule up to ``upper`` (beyond which
    the tail is below 1e-12)."""
    ts = np.linspace(0.0, upper, 801)
    vals = np.array([tail(float(t)) for t in ts])
    return float(np.sum((vals[1:] + vals[:-1]) * 0.5 * np.diff(ts)))


def mean_figure(
    mech: Any, *, level: float = 0.95, n: object = None, column: str | None = None
) -> ErrorFigure:
    """The error of a mean mechanism's release in the value's units.

    Two measurements (``mech.sum_noise``, ``mech.count_noise``, lattice half-width
    ``mech.lattice.half``): the first-order figure ``C/n`` of :func:`mean_first_order` at the
    widest offset, for ``n`` rows; without ``n`` only ``C`` exists, and the figure says so. A
    public row count (a mechanism with ``sum_noise`` and no ``count_noise``, its ``n`` the
    curator's): the error is the sum's noise over ``n`` exactly, ``t/n`` with ``t`` the
    noise's ``level`` half-width. Figures are capped at the bounds' width ``hi - lo`` (a mean
    of values within the bounds is within them). ``expected`` is the same figure's expected
    absolute error (``E|Z|/n``, ``E|Z| = ∫ P(|Z| > t) dt`` numerically; ``expected_times_n``
    is ``E|Z|``), which EXPLAIN shows.
    """
    lv = check_level(level)
    size = _check_n(n)
    width = float(mech.hi - mech.lo)
    units = _units(column)
    pct = f"{lv * 100:g}%"
    count_noise = getattr(mech, "count_noise", None)
    if count_noise is None:  # the row count is public
        public = int(mech.n)
        size = float(public)
        t = mech.sum_noise.half_width(lv)
        scale = float(mech.sum_noise.scale)
        if public <= 0:
            return ErrorFigure(
                width, "", "the public row count is 0: the mean is any value in the bounds",
                "no rows (public count 0)", scale, None, None, 0.0, width,
            )  # fmt: skip
        err = min(t / public, width)
        expected = min(mech.sum_noise.expected_abs() / public, width)
        note = (
            f"the row count n = {public} is public (declared by the curator), so the mean is "
            f"the noisy sum over n: its error is the sum's noise / n, exactly, in {units}"
        )
        short = f"row count public, n = {public}"
        return ErrorFigure(
            err, "", note, short, scale / public, t, None, size, expected,
            mech.sum_noise.expected_abs(),
        )  # fmt: skip
    half = float(mech.lattice.half)
    c = mean_first_order(mech.sum_noise, count_noise, half, lv)
    scales = {"sum": float(mech.sum_noise.scale), "count": float(count_noise.scale)}
    tail = _abs_tail(mech.sum_noise, count_noise, half)
    c_expected = _integrate_tail(tail, 4.0 * mean_first_order(
        mech.sum_noise, count_noise, half, 1.0 - 1e-12))  # fmt: skip
    if size is None:
        note = (
            f"n the number of rows averaged; first order, for any mean within the bounds; "
            f"pass n= (a guessed or public row count) for a figure in {units}; whatever n, "
            f"the mean stays within the bounds (width {_fmt(width, 4)})"
        )
        return ErrorFigure(
            width, "", note, f"± {_fmt(c, 4)}/n for n rows; pass n= for a figure in {units}",
            scales, c, None, None, None, c_expected,
        )  # fmt: skip
    t_n = count_noise.half_width(lv)
    if size - t_n < 1.0:
        note = (
            f"n = {_fmt_n(size)} is too few rows for this epsilon: the noisy count can be near "
            f"0, so the error can reach the bounds' width ({_fmt(width, 4)})"
        )
        return ErrorFigure(width, "", note, f"n = {_fmt_n(size)} too few rows", scales, c,
                           None, size, width, c_expected)  # fmt: skip
    err = min(c / size, width)
    note = (
        f"for n = {_fmt_n(size)} rows, in {units}: {pct} half-width of the first-order error "
        f"(noisy sum - mean × noisy count)/n = {_fmt(c, 4)}/n, for any mean within the bounds"
    )
    return ErrorFigure(
        err, "", note, f"for n = {_fmt_n(size)} rows (first order)", scales, c, None, size,
        min(c_expected / size, width), c_expected,
    )  # fmt: skip


def quantile_figure(
    mech: Any, *, level: float = 0.95, n: object = None, column: str | None = None
) -> ErrorFigure:
    """The error of a quantile mechanism's release, in ranks and, given ``n``, in values.

    The exponential mechanism's guarantee is in ranks: with probability ``level`` the chosen
    candidate's score is within ``r = mech.accuracy(level)`` rows of the best one's
    (:meth:`~pinqpy.noise.mechanisms.QuantileMechanism.accuracy`). Moving a candidate past
    ``k`` rows moves its score ``(1-q)·#below - q·#above`` by exactly ``k``, so a score
    ``r`` worse is ``r`` rows of rank away. Ranks become values only under an assumption on
    how the values spread: **values spread evenly over the bounds** (``n/(hi - lo)`` rows per
    unit of value) turns ``r`` rows into ``r·(hi - lo)/n``; and the best candidate is within
    half a candidate step ``s/2`` (``s`` the largest gap between consecutive candidates) of
    the exact quantile. So the figure is ``r·(hi - lo)/n + s/2``, capped at ``hi - lo``.
    Data bunched where the quantile is gives less, sparse data more: the note says so.

    ``noise_scale`` is the selection's rank scale ``2·Δu/eps_sel`` (rows): a candidate's
    weight falls ``e``-fold for each such number of rows its score is below the best.
    """
    lv = check_level(level)
    size = _check_n(n)
    ranks = float(mech.accuracy(lv))
    expected_ranks = float(mech.expected_error())
    scale = 2.0 * float(mech.sensitivity) / float(mech._pf_eps)
    width = float(mech.hi - mech.lo)
    cands = np.asarray(mech.candidates, dtype=np.float64)
    step = float(np.max(np.diff(cands))) if cands.size > 1 else 0.0
    units = _units(column)
    if size is None:
        note = (
            f"within {_fmt(ranks, 4)} rows of rank of the exact quantile; pass n= for a figure "
            f"in {units} (about {_fmt(ranks, 4)}·{_fmt(width, 4)}/n + {_fmt(step / 2, 4)}, "
            "assuming values spread evenly over the bounds)"
        )
        return ErrorFigure(
            ranks, "ranks", note, f"pass n= for a figure in {units}", scale, None, ranks,
            None, expected_ranks,
        )  # fmt: skip
    err = min(ranks * width / size + step / 2.0, width)
    expected = min(expected_ranks * width / size + step / 2.0, width)
    note = (
        f"for n = {_fmt_n(size)} rows, in {units}, assuming values spread evenly over the "
        f"bounds [{float(mech.lo):g}, {float(mech.hi):g}]: {_fmt(ranks, 4)} rows of "
        f"rank × {_fmt(width, 4)}/n + half a candidate step ({_fmt(step / 2, 4)})"
    )
    short = f"for n = {_fmt_n(size)} rows spread evenly over the bounds"
    return ErrorFigure(err, "", note, short, scale, None, ranks, size, expected)


def key_selection_figure(mech: Any, *, level: float = 0.95) -> ErrorFigure:
    """What a private key selection (``mech``, a ``KeySelectionMechanism``) would give.

    A key with ``c`` rows is released when ``c + X >= T`` (``T = mech.threshold``, ``X`` the
    symmetric integer noise), so with probability ``P(X >= T - c)``: exactly 1/2 or more at
    ``c = T`` (``P(X >= 0) >= 1/2``), below 1/2 for ``c < T``. A key needs about ``T`` rows
    to be released half the time; the figure also gives the least count released with
    probability ``level``. A released count's error is the noise's: at most its ``level``
    half-width with probability ``level`` (for keys well above ``T``; keys near it are
    released more often when the noise is positive).
    """
    lv = check_level(level)
    t = float(mech.noise.half_width(lv))
    rows = int(mech.threshold)
    while mech.pass_probability(rows) < lv:
        rows += 1
    note = (
        f"a key needs about {mech.threshold} rows to be released with probability 1/2 "
        f"({rows} for probability {lv:g}); a released count is off by at most {_fmt(t, 4)} "
        f"rows with probability {lv:g}"
    )
    return ErrorFigure(t, "rows", note, f"threshold {mech.threshold} rows",
                       float(mech.noise.scale), None, None, None)  # fmt: skip


@dataclass(frozen=True)
class AccuracyPreview:
    """What an aggregation *would* give at some epsilon, computed without data or charge.

    ``error`` bounds ``|released - exact|`` with probability at least ``level``, in the
    value's own units (a count in rows, a sum or mean in the column's units), except:

    * a quantile without ``n`` (``unit="ranks"``): rows of rank; with ``n=`` (a guessed or
      public row count) it is in the value's units, assuming values spread evenly over the
      bounds (:func:`quantile_figure`), and ``rank_error`` keeps the rank figure;
    * a mean without ``n`` and without a public row count: its error is ``error_times_n / n``
      (first order, :func:`mean_first_order`), which needs ``n``; ``error`` is then only the
      bounds' width, which holds for any number of rows, and ``note`` says what to pass.

    ``note`` states the assumption behind ``error`` in words; ``n`` is the row count it is
    for (given, or public). ``noise_scale``: the noise's scale when there is one noise (a
    count's or sum's discrete Laplace ``b`` or Gaussian ``σ``; a public-size mean's scale on
    the mean, ``b/n``; a quantile's rank scale ``2·Δu/eps_sel`` in rows), or a dict of the
    scales by name when there are several (a mean: ``{"sum": ..., "count": ...}``).
    ``threshold`` is a key selection's (rows). ``charge`` is what it would cost each budget
    (named by ``repr``). ``neighbours`` is the neighbour relation that charge protects:
    ``one row added or removed``, ``one person added or removed (...)``, or for a table whose
    row count is public ``one row changed, n public (n = ...)`` (each table's, named, when
    the frame reads several).

    ``expected`` is the expected absolute error in the same units as ``error`` (None for a
    mean without ``n``, whose expected error is ``expected_times_n / n``); ``delta`` is the
    measurement's delta and ``rho`` its zCDP cost at stability 1 when a budget it draws on
    accounts in zCDP (else None). The repr is one line and ``_repr_html_`` a small table
    (:mod:`pinqpy.results.preview_text`).
    """

    aggregation: str
    mechanism: str
    epsilon: Exact
    level: float
    error: float
    unit: str
    noise_scale: float | dict[str, float] | None
    charge: dict[str, object]
    note: str = ""
    n: float | None = None
    error_times_n: float | None = None
    rank_error: float | None = None
    threshold: int | None = None
    details: dict[str, float] = field(default_factory=dict)
    expected: float | None = None
    expected_times_n: float | None = None
    delta: float = 0.0
    rho: float | None = None
    neighbours: str = ""

    def __repr__(self) -> str:
        from pinqpy.results.preview_text import preview_line

        return preview_line(self)

    def _repr_html_(self) -> str:
        from pinqpy.results.preview_text import preview_html

        return preview_html(self)

    def __str__(self) -> str:
        from pinqpy.results.preview_text import charge_text

        cost = charge_text(self)
        if self.error_times_n is not None and self.n is None:
            what = f"the error is about ± {_fmt(self.error_times_n, 4)}/n"
        else:
            unit = f" {self.unit}" if self.unit else ""
            what = f"the error is at most {self.error:.6g}{unit}"
        note = f" ({self.note})" if self.note else ""
        relation = f"; neighbours: {self.neighbours}" if self.neighbours else ""
        return (
            f"{self.aggregation} at epsilon {self.epsilon}: {self.mechanism}; with probability "
            f"{self.level:g} {what}{note}; it would charge {cost}{relation}"
        )
