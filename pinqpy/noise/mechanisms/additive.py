"""Counts and sums: an exact answer plus exact noise calibrated to a fixed sensitivity."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import ClassVar

import numpy as np

from pinqpy.accounting.charges import FreeCharge
from pinqpy.accounting.cost import _nonneg, check_epsilon
from pinqpy.core.exact import Exact
from pinqpy.noise.mechanisms.base import (
    _AdditiveMechanism,
    _bounds,
    _count_noise,
    _count_vector,
    _keys_vector,
    _lattice_noise,
    _optional_delta,
)
from pinqpy.results.accuracy import Accuracy, AdditiveAccuracy
from pinqpy.results.noise import LatticeNoise, ZeroNoise

__all__ = ["CountMechanism", "PublicCountMechanism", "SumMechanism"]


class CountMechanism(_AdditiveMechanism):
    """A noisy count: sensitivity 1 (adding or removing a row changes a count by one).

    Over a table whose row count is public (neighbours: one row changed) a count of a
    filtered frame, or of each part, moves by at most 1 per part the changed row leaves or
    enters, at most 2 in all: the frame's stability 2 (the partition's largest part at 2)
    charges exactly that under pure DP (L1 2). The count of the whole table is the public
    count itself (:class:`PublicCountMechanism`).

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

    **One changed row** (``changed_row=True``: the whole of a table whose row count is
    public; :func:`pinqpy.pipeline.prepare.changed_row_frame`). Neighbours then differ in one
    row's value, not in a row added or removed. A row contributes its clamped value, in
    ``[lo, hi]``, or 0 when it is NULL (a NaN, -0.0 and ±inf are clamped or skipped into
    the same set), so changing one row moves the sum by at most ``D = max(hi, 0) -
    min(lo, 0)``: ``hi - lo`` for bounds around 0, and ``max(|lo|, |hi|)`` for one-signed
    bounds (NULL ↔ the far bound). Two rows added or removed, the generic bound, would be
    ``2·max(|lo|, |hi|) >= D``. The frame is charged at stability 2 (a changed row is one
    removed and one added), so the noise is calibrated to ``Δ = D/2`` per row of stability:
    the release moves by at most ``2·Δ`` for one changed row, which the charge at 2 covers
    exactly. (On the lattice: the snapped sum moves by at most ``ceil(2Δ/g) + 1 <= 2·(ceil(Δ/g)
    + 1)`` grid units, twice the units the noise is calibrated for.)

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
    >>> SumMechanism(0.1, -5, 3, changed_row=True).sensitivity, SumMechanism(
    ...     0.1, 10, 20, changed_row=True).sensitivity
    (Fraction(4, 1), Fraction(10, 1))
    """

    def __init__(
        self,
        epsilon: object,
        lo: object,
        hi: object,
        delta: object = None,
        *,
        changed_row: bool = False,
    ):
        self.lo, self.hi = _bounds(lo, hi)
        self.epsilon = Exact(check_epsilon(epsilon))
        self.changed_row = bool(changed_row)
        dlt = _optional_delta(delta)
        if self.changed_row:
            sens = (max(Fraction(self.hi), Fraction(0)) - min(Fraction(self.lo), Fraction(0))) / 2
        else:
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


class _NoCountNoise(ZeroNoise):
    """No noise on an integer answer: intervals stay integers."""

    integer: ClassVar[bool] = True


class PublicCountMechanism:
    """The row count of a frame whose count its curator declared public (``public_size``):
    released exactly, charged nothing.

    The count is a public fact, not a function of the private rows beyond what the curator
    published: neighbouring tables (one row changed, the count kept;
    :class:`~pinqpy.accounting.agents.ChangedRowView`) have the same count, so releasing it
    is 0-DP (:class:`~pinqpy.accounting.charges.FreeCharge`), its
    ``ci`` is ``(n, n)`` and its error 0. ``n_of`` reads the public count (once, lazily);
    ``describe()`` shows it, since the number is public.

    >>> m = PublicCountMechanism(lambda: 1000)
    >>> m.describe(), m.charge.at(1), m.accuracy(0.95)
    ('row count public (n = 1000)', Cost(epsilon=0), 0.0)
    >>> values, acc = m.release(np.array([1000]))
    >>> values.tolist(), acc.interval(0.99)
    ([1000], (array([1000]), array([1000])))
    """

    def __init__(self, n_of: Callable[[], int]):
        self._n_of = n_of
        self.epsilon = Exact(0)
        self.delta = Exact(0)
        self.noise = _NoCountNoise()
        self.noise_scale = 0.0
        self.sensitivity = Fraction(0)
        self.charge = FreeCharge()

    @property
    def n(self) -> int:
        """The public row count (read on first use)."""
        return int(self._n_of())

    def describe(self) -> str:
        return f"row count public (n = {self.n})"

    def expected_error(self) -> float:
        return 0.0

    def accuracy(self, level: float = 0.95) -> float:
        return self.noise.half_width(level)

    def release(self, counts: object) -> tuple[np.ndarray, Accuracy]:
        """The public count, as it is (``int64``)."""
        c = _count_vector(counts, "counts")
        return c, AdditiveAccuracy(c, self.noise, epsilon=0, mechanism=self.describe())
