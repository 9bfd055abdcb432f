"""Private key selection: which GROUP BY keys to release when none are public, and their
counts, in one step.

Noisy thresholding (Korolova et al. 2009; Wilson et al. 2020) with exact integer noise: count
the rows of each key that occurs, add noise ``X`` to each count, and release the keys whose
noisy count is at least an integer threshold ``tau``, *together with those noisy counts*. The
released counts are the histogram: nothing else is spent on counting the selected keys.

The noise is either

* discrete Laplace of scale ``b = 1/epsilon`` (``P(x) = (1-q)/(1+q)·q^|x|``, ``q = e^{-1/b}``,
  drawn exactly by :func:`pinqpy.noise.samplers.discrete_laplace`), or
* the discrete Gaussian ``N_Z(0, σ²)`` of an (epsilon, delta_noise) count (the ``σ²`` of
  :func:`pinqpy.noise.mechanisms.calibration.discrete_gaussian_sigma2`, drawn exactly by
  :func:`pinqpy.noise.samplers.discrete_gaussian`).

Contribution structure
----------------------
The mechanism is calibrated for neighbours that differ by one privacy unit which contributes
to at most ``G`` keys (``max_groups``) with at most ``k`` rows each (``max_rows``): ``G·k``
rows in all. A frame of stability ``s`` with no more structure known is the case
``G = k = ceil(s)`` (``s`` rows may all be one key's, or ``s`` keys' one each); a user-level
frame limited to ``G`` distinct keys per person and counted in people is ``(G, 1)``; one
limited to ``G`` groups of at most ``k`` rows each is ``(G, k)``. Epsilon is per row, as for
every pinqpy aggregation: a unit of ``R`` rows (the frame's stability; ``R <= G·k``, and
``R = s`` in the unstructured case) moves the vector of counts by at most ``R`` in L1 (and
``√G·k`` in L2), so the Laplace release costs ``R·epsilon`` (for ``(G, k)``: scale
``G·k/ε_total`` for a total ``ε_total``) and the budget pays ``epsilon × stability`` as usual.

The threshold. For the discrete Laplace and an integer ``m >= 1``,

    ``P(X >= m) = Σ_{x>=m} (1-q)/(1+q)·q^x = (1-q)/(1+q) · q^m/(1-q) = q^m/(1+q)
    = e^{-m/b}/(1 + e^{-1/b})``,

and ``tau = k + m`` with ``m >= 1`` the least integer with ``P(X >= m) <= delta/G``
(:func:`selection_threshold`). For the discrete Gaussian, with ``w(x) = e^{-x²/(2σ²)}``:
``w`` decreases on ``x >= 0``, so ``Σ_{x>=m} w(x) <= w(m) + ∫_m^∞ w <= w(m)·(1 + σ²/m)``
(Mills' ratio, ``∫_m^∞ w <= (σ²/m)·w(m)``), and by Poisson summation the normaliser is
``Σ_x w(x) = σ√(2π)·Σ_j e^{-2π²σ²j²} >= σ√(2π)``. Hence, for ``m >= 1``,

    ``P(X >= m) <= e^{-m²/(2σ²)}·(1/σ + σ/m)/√(2π)``,

and for ``σ <= 4096`` also the term-by-term upper bound of
:meth:`~pinqpy.results.noise.DiscreteGaussianNoise.tail` (``P(X >= m) = tail(m-1)/2``); the
smaller of the two bounds (both decrease in ``m``) is used, and ``tau = k + m`` with ``m >= 1``
the least integer whose bound is at most ``delta/G`` (:func:`gaussian_selection_threshold`).
For a user's count ``c <= k`` of a key, ``P(c + X >= tau) = P(X >= tau - c) <= P(X >= m)``.

Both searches work in log space and accept a threshold only with a margin of 1e-11 below
``ln(delta/G)`` (far above the floating-point error of a few ulps of numbers of size
``ln(G/delta)``), so the pass probability never exceeds ``delta/G``; for the Laplace it is as
close to it as an integer threshold allows.

The guarantee
-------------
Let ``D`` and ``D' = D + u`` differ by one unit ``u`` (add/remove neighbours) with the
structure above. Call a key *shared* if it occurs in ``D`` and *new* if it occurs only in
``D'`` (at most ``G`` new keys, each of count ``<= k`` in ``D'``). The noise of every key is
independent, and a key that does not occur releases nothing. Two hybrids:
``D₁ = D +`` (the rows of ``u`` in new keys) and ``D₂ = D +`` (the rows of ``u`` in shared
keys), so ``D ⊂ D₁, D₂ ⊂ D'``.

* *Same keys* (``D₁`` vs ``D'``, and ``D`` vs ``D₂``): the same keys occur, and their counts
  differ by at most ``R`` in L1 (the unit's rows). The output (which keys pass, and their
  noisy counts) is a post-processing of the vector of noisy counts, so it is
  ``R·epsilon``-DP in both directions for the Laplace (the discrete Laplace ratio
  ``e^{|shift|/b}`` multiplied over the keys), and for the Gaussian it is the discrete
  Gaussian of the counts, whose (ε, δ) cost at L2 shift ``<= R`` is the count's charge at
  stability ``R`` (CKS20; for ``R = 1`` exactly the (epsilon, delta_noise) it was calibrated
  to).
* *New keys only* (``D`` vs ``D₁``, and ``D₂`` vs ``D'``): the outputs differ only in the new
  keys, whose noise is independent of the rest. If no new key passes, the output has the
  law of the output without them; by the union bound, some new key passes with probability
  at most ``G·P(X >= tau - k) <= delta``. So for every set ``E`` of outputs,
  ``P_{D₁}(E) <= P_D(E) + delta`` and ``P_D(E) <= P_{D₁}(E) + delta`` (``P_{D₁}(E) >=
  P_D(E)·P(no new key passes) >= P_D(E) - delta``), and the same for ``D₂``, ``D'``.

Chaining the two steps in the order that puts the delta step first in each direction:
``P_D(E) <= P_{D₁}(E) + delta <= e^{ε}·P_{D'}(E) + delta_noise + delta`` and
``P_{D'}(E) <= P_{D₂}(E) + delta <= e^{ε}·P_D(E) + delta_noise + delta``, with
``ε = R·epsilon`` (delta_noise = 0 for the Laplace; for the Gaussian, ε and delta_noise are
the count's charge at stability ``R``). So the one-step release is
``(R·epsilon, delta + delta_noise)``-DP for such units: the charge at the frame's stability
is the noise's charge plus ``delta`` (:attr:`KeySelectionMechanism.charge`). For ``G = k = 1``
this is the classic row-level argument: a new key has count exactly 1 and passes with
probability ``P(X >= tau - 1) <= delta``. For a unit of ``j < G·k`` rows (another budget of the
same frame) the same argument holds with ``min(G, j)`` keys of ``<= min(k, j)`` rows, whose pass
probability is at most that of the full structure, so ``delta`` bounds it too.

Derived frames whose rows a unit both removes and adds (a grouped frame: a changed group's
old row goes and its new row comes; stability ``s`` counts the multiset symmetric
difference) use the unstructured ``G = k = s``, and the same bound holds. Let ``D`` lose
``r₁`` rows and gain ``r₂`` (``r₁ + r₂ <= s``) to become ``D'``; let ``A`` be the keys only
``D`` has and ``B`` those only ``D'`` has: each holds changed rows alone, so at most ``s``
keys of at most ``s`` rows, and some key of ``A`` (of ``B``) passes with probability
``p_A <= delta`` (``p_B <= delta``). Let ``H`` have ``D``'s counts on the shared keys and
``D'``'s on ``B`` (the keys of ``D'``, L1 distance ``<= s`` from it), and ``H'`` ``D'``'s
counts on the shared keys and ``D``'s on ``A`` (the keys of ``D``). ``D`` and ``H`` differ
only in the independent keys of ``A`` and ``B``; with ``r(E)`` the probability that the
shared keys' output is in ``E``, ``P_D(E) <= r(E)·(1 - p_A) + p_A`` and ``P_H(E) >= r(E)·(1 -
p_B)``, so ``P_D(E) - P_H(E) <= p_A·(1 - r(E)) + p_B·r(E) <= max(p_A, p_B) <= delta``, and
the same with ``D`` and ``H`` swapped. Hence ``P_D(E) <= P_H(E) + delta <= e^{ε}·P_{D'}(E) +
delta_noise + delta``, and through ``H'`` the same from ``D'`` to ``D``, with ``ε =
s·epsilon``: the charge at stability ``s``. (The union over ``A`` and ``B`` together would
give ``2·delta``; the two sets never release in the same world, which is what the bound by
their larger probability uses.)

A table whose row count is public has neighbours that differ in **one changed row**
(:class:`~pinqpy.accounting.agents.ChangedRowView`), stability 2 at its own rows. There
``r₁ = r₂ = 1``: ``A`` is at most the removed row's key, ``B`` at most the added row's, each
of one row, so the threshold of ``G = k = 1`` bounds ``p_A`` and ``p_B`` by ``delta``, the
shared keys' counts move by at most 2 in L1 (one down, one up; ``√2`` in L2), and the same
chain gives the charge at stability 2: ``(2·epsilon, delta)`` for the Laplace
(:func:`pinqpy.pipeline.run.key_structure`). Over a frame derived from such a table (a
filter, a join...) a changed row is ``2·s`` rows of stability ``s``, the unstructured case.

The released noisy counts are unbiased for keys far above the threshold; a key near it was
released because its noise was high, so its released count is biased upward (the intervals
describe the noise as drawn, not this selection effect).

The test suite checks the pass rate of single-contributor keys and of ``G``-key units against
these bounds, and audits the released counts of a shared key.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from fractions import Fraction

import numpy as np

from pinqpy.accounting.charges import CompositeCharge
from pinqpy.accounting.cost import Cost
from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise
from pinqpy.noise.mechanisms.base import _count_noise, _count_noise_sample
from pinqpy.results.accuracy import AdditiveAccuracy
from pinqpy.results.noise import DiscreteGaussianNoise, DiscreteLaplaceNoise

__all__ = [
    "KeySelectionMechanism",
    "gaussian_selection_threshold",
    "selection_threshold",
    "structure_for",
]

_LOG_MARGIN = 1e-11


def _log(x: Fraction) -> float:
    """``ln x`` for a positive Fraction, also below the range of doubles."""
    return math.log(x.numerator) - math.log(x.denominator)


def _check_structure(max_groups: int, max_rows: int) -> tuple[int, int]:
    for name, v in (("max_groups", max_groups), ("max_rows", max_rows)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise PinqError(f"{name} must be a positive whole number")
    return int(max_groups), int(max_rows)


def structure_for(stability: object) -> tuple[int, int]:
    """``(G, k) = (ceil(s), ceil(s))``: a frame of stability ``s`` with no more known structure
    (a unit's ``s`` rows may be in one key or in ``s`` keys)."""
    s = math.ceil(Fraction(stability))  # type: ignore[arg-type]
    return max(1, s), max(1, s)


def selection_threshold(
    scale: Fraction, delta: Fraction, max_groups: int = 1, max_rows: int = 1
) -> int:
    """The integer threshold ``k + m``: ``m >= 1`` least with ``q^m/(1+q) <= delta/G``.

    >>> selection_threshold(Fraction(1), Fraction(1, 10**6))  # e^-14/(1+e^-1) = 6.1e-7
    15
    >>> selection_threshold(Fraction(2), Fraction(1, 10**6))  # e^-13.5/(1+e^-0.5) = 8.5e-7
    28
    >>> selection_threshold(Fraction(6), Fraction(1, 10**6), 3, 2)  # 2 + 86: 3.2e-7 <= 1e-6/3
    88
    """
    g, k_rows = _check_structure(max_groups, max_rows)
    a = float(1 / scale)
    log1p_q = math.log1p(math.exp(-a))
    target = _log(Fraction(delta)) - math.log(g) - _LOG_MARGIN

    def log_pass(m: int) -> float:  # ln P(X >= m) = -m/b - ln(1 + q)
        return -m * a - log1p_q

    m = max(1, math.ceil((-target - log1p_q) / a))
    step = max(1, m >> 40)  # keeps the search finite where 1/b is below an ulp of m/b
    while log_pass(m) > target:
        m += step
    while m - step >= 1 and log_pass(m - step) <= target:
        m -= step
    return k_rows + m


def _gaussian_log_tail(noise: DiscreteGaussianNoise, m: int) -> float:
    """An upper bound on ``ln P(X >= m)``, ``m >= 1``, for ``X ~ N_Z(0, σ²)`` (module
    docstring: the closed-form bound, or the term-by-term one where it is smaller)."""
    s2 = float(noise.sigma2)
    sigma = math.sqrt(s2) * (1 - 1e-15)  # rounded down: the bound falls as sigma does
    closed = -(m * m) / (2.0 * s2 * (1 + 1e-15)) - 0.5 * math.log(2 * math.pi)
    closed += math.log(1.0 / sigma + sigma * (1 + 2e-15) / m)
    if noise.scale <= DiscreteGaussianNoise._EXACT_SIGMA:
        t = noise.tail(m - 1) / 2.0
        if t > 0.0:
            return min(closed, math.log(t))
    return closed


def gaussian_selection_threshold(
    sigma2: Fraction, delta: Fraction, max_groups: int = 1, max_rows: int = 1
) -> int:
    """The integer threshold ``k + m`` for discrete Gaussian noise of variance ``sigma2``:
    ``m >= 1`` least whose bound on ``P(X >= m)`` is at most ``delta/G`` (module docstring).

    >>> from pinqpy.noise.mechanisms.calibration import discrete_gaussian_sigma2
    >>> s2 = discrete_gaussian_sigma2(1, Fraction(1, 2 * 10**6))  # sigma 4.39
    >>> gaussian_selection_threshold(s2, Fraction(1, 2 * 10**6))
    23
    """
    g, k_rows = _check_structure(max_groups, max_rows)
    noise = DiscreteGaussianNoise(Fraction(sigma2))
    target = _log(Fraction(delta)) - math.log(g) - _LOG_MARGIN
    hi = 1
    while _gaussian_log_tail(noise, hi) > target:
        hi *= 2
    lo = hi // 2  # 0 (no m below 1) or an m whose bound exceeds the target
    while hi - lo > 1:  # the bound falls with m: bisect for the least m meeting it
        mid = (lo + hi) // 2
        if _gaussian_log_tail(noise, mid) <= target:
            hi = mid
        else:
            lo = mid
    return k_rows + hi


class _ThresholdCharge:
    """The delta of the threshold step: ``delta`` at every stability ``j > 0`` (module
    docstring: a unit of ``j`` rows has at most ``min(G, j)`` new keys of at most
    ``min(k, j)`` rows, which pass with probability at most ``delta`` in all)."""

    def __init__(self, delta: Fraction):
        self.delta = Fraction(delta)

    def at(self, k: object) -> Cost:
        return Cost() if Fraction(k) == 0 else Cost(0, self.delta)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"ThresholdCharge(delta={float(self.delta):g})"


class KeySelectionMechanism:
    """One-step thresholded release; see the module docstring.

    ``epsilon`` is per row (the noise of a sensitivity-1 count at that epsilon); ``delta`` is
    the threshold's share: a unit with at most ``max_groups`` keys of at most ``max_rows``
    rows each makes any of its new keys pass with probability at most ``delta``. With
    ``noise_delta`` the noise is the discrete Gaussian of an (epsilon, noise_delta) count,
    else the discrete Laplace of scale ``1/epsilon``.

    ``threshold`` is an integer: a key is released when its noisy count is at least it.
    ``scale`` is the discrete Laplace scale (an exact Fraction, rounded up to a rational the
    sampler takes) or the Gaussian's ``σ²``; ``noise`` its distribution. Released noisy
    counts are ``int64`` integers. ``charge.at(j)`` is the noise's charge at stability ``j``
    plus ``delta``.

    >>> m = KeySelectionMechanism(Fraction(1), Fraction(1, 10**6))
    >>> m.threshold, m.describe()
    (15, 'KeySelection(DiscreteLaplace(scale=1), threshold=15)')
    >>> m.charge.at(Fraction(2))
    Cost(epsilon=2, delta=0.000001)
    >>> g3k2 = KeySelectionMechanism(Fraction(1, 6), Fraction(1, 10**6), max_groups=3, max_rows=2)
    >>> g3k2.threshold, g3k2.charge.at(6)
    (88, Cost(epsilon=1, delta=0.000001))
    """

    def __init__(
        self,
        epsilon: Fraction,
        delta: Fraction,
        *,
        max_groups: int = 1,
        max_rows: int = 1,
        noise_delta: Fraction | None = None,
    ):
        if not 0 < delta < 1:
            raise ValueError("key selection needs 0 < delta < 1")
        self.max_groups, self.max_rows = _check_structure(max_groups, max_rows)
        self.epsilon = Fraction(epsilon)
        self.delta = Fraction(delta)
        self.noise_delta = None if noise_delta is None else Fraction(noise_delta)
        spec = _count_noise(self.epsilon, self.noise_delta)
        self.noise = spec.noise
        if isinstance(self.noise, DiscreteLaplaceNoise):
            self.scale = self.noise.b
            self.threshold = selection_threshold(
                self.scale, self.delta, self.max_groups, self.max_rows
            )
        else:
            assert isinstance(self.noise, DiscreteGaussianNoise)
            self.scale = self.noise.sigma2
            self.threshold = gaussian_selection_threshold(
                self.scale, self.delta, self.max_groups, self.max_rows
            )
        self.charge = CompositeCharge([spec.charge, _ThresholdCharge(self.delta)])
        self.noise_scale = float(self.noise.scale)

    def pass_probability(self, count: int = 1) -> float:
        """``P(count + X >= threshold)`` for an exact count (for the Laplace exactly; for the
        Gaussian the term-by-term bound of the noise's tail)."""
        m = self.threshold - int(count)
        if isinstance(self.noise, DiscreteLaplaceNoise):
            if m <= 0:
                return 1.0 - self.noise.tail(-m) / 2.0  # 1 - P(X < m) = 1 - P(X > -m)
            a = float(1 / self.scale)
            return math.exp(-m * a - math.log1p(math.exp(-a)))
        if m <= 0:
            return 1.0 - self.noise.tail(-m) / 2.0
        return self.noise.tail(m - 1) / 2.0

    def describe(self) -> str:
        unit = (
            ""
            if self.max_groups == self.max_rows == 1
            else f", unit <= {self.max_groups} keys x {self.max_rows} rows"
        )
        return f"KeySelection({self.noise.describe()}, threshold={self.threshold}{unit})"

    def expected_error(self) -> float:
        """``E|noise|`` of a released count (for keys well above the threshold)."""
        return self.noise.expected_abs()

    def accuracy(self, level: float = 0.95) -> float:
        """The noise's level half-width (for keys well above the threshold)."""
        return self.noise.half_width(level)

    def released_accuracy(self, noisy: np.ndarray) -> AdditiveAccuracy:
        """The accuracy of released noisy counts (post-processing: no charge)."""
        return AdditiveAccuracy(
            np.asarray(noisy, dtype=np.int64),
            self.noise,
            epsilon=self.epsilon,
            delta=self.delta + (self.noise_delta or 0),
            mechanism=self.describe(),
        )

    def release(
        self, keys: list[Hashable], counts: np.ndarray
    ) -> tuple[list[Hashable], np.ndarray]:
        """The keys whose noisy count reaches the threshold, and those noisy counts (int64)."""
        c = np.asarray(counts)
        if c.dtype.kind not in "iu":
            f = c.astype(np.float64)
            if not (np.isfinite(f).all() and (f == np.rint(f)).all()):
                raise ValueError("key counts must be integers")
            c = f
        c = c.astype(np.int64)
        if _noise.noise_disabled():
            keep = c > 0
            return [k for k, ok in zip(keys, keep, strict=True) if ok], c[keep]
        noisy = c + _count_noise_sample(self.noise, c.size) if c.size else c
        keep = noisy >= self.threshold
        return [k for k, ok in zip(keys, keep, strict=True) if ok], noisy[keep]
