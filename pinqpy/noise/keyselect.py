"""Private key selection: which GROUP BY keys to release when none are public.

Noisy thresholding (Korolova et al. 2009; Wilson et al. 2020) with exact integer noise: count
the rows of each key that occurs, add discrete Laplace noise ``X`` of scale ``b = 1/epsilon``
(``P(x) = (1-q)/(1+q)·q^|x|``, ``q = e^{-1/b}``, drawn exactly by
:func:`pinqpy.noise.samplers.discrete_laplace`) to each count, and release the keys whose noisy
count is at least the integer threshold ``tau = 1 + k``, where ``k`` is the least integer
``>= 1`` with ``e^{-k/b}/(1 + e^{-1/b}) <= delta``.

The tail. For an integer ``k >= 1``,

    ``P(X >= k) = Σ_{x>=k} (1-q)/(1+q)·q^x = (1-q)/(1+q) · q^k/(1-q) = q^k/(1+q)
    = e^{-k/b}/(1 + e^{-1/b})``.

Derivation, for neighbours that differ by one row (the frame-level guarantee; the budget pays
it times the frame's stability like every other aggregation):

* The row changes one key's count by 1 and no other. For a key present in both datasets the
  release decision and the released noisy count are post-processing of a discrete-Laplace
  count of sensitivity 1, which is ``epsilon``-DP (the probabilities of an integer output
  differ by at most ``e^{1/b}``).
* If the row's key occurs only in the larger dataset, that key has count exactly 1 there and
  is released with probability ``P(1 + X >= tau) = P(X >= k) = q^k/(1+q) <= delta``; when it
  is not released the output has the same law as on the smaller dataset. So for any set ``E``
  of outputs ``P_large(E) <= P_small(E) + delta`` and ``P_small(E) <= P_large(E) + delta``,
  and with the first case the selection is ``(epsilon, delta)``-DP.

``k`` is found in log space, ``ln P(X >= k) = -k/b - ln(1 + q)``, and accepted only with a
margin of 1e-11 below ``ln delta`` (far above the floating-point error of a few ulps of
numbers of size ``ln(1/delta)``), so the pass probability of a count-1 key never exceeds
``delta``; it is as close to ``delta`` as an integer threshold allows (the next lower
threshold would exceed it, up to that margin).

For a user-level table each unit is first limited to ``max_groups`` distinct keys
(``distinct(unit, keys).bound_contributions(max_groups)``, stability ``max_groups``), and the
count of a key is then its number of distinct units.

The test suite checks the pass rate of single-contributor keys against ``q^k/(1+q)``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from fractions import Fraction

import numpy as np

from pinqpy.accounting.cost import Cost
from pinqpy.errors import PrivacyError
from pinqpy.noise import source as _noise
from pinqpy.noise.samplers import _fit_laplace_scale, discrete_laplace
from pinqpy.results.noise import DiscreteLaplaceNoise

__all__ = ["KeySelectionMechanism", "frame_delta_for", "selection_threshold"]

_LOG_MARGIN = 1e-11


def _log(x: Fraction) -> float:
    """``ln x`` for a positive Fraction, also below the range of doubles."""
    return math.log(x.numerator) - math.log(x.denominator)


def selection_threshold(scale: Fraction, delta: Fraction) -> int:
    """The integer threshold ``1 + k``: ``k >= 1`` least with ``q^k/(1+q) <= delta``.

    >>> selection_threshold(Fraction(1), Fraction(1, 10**6))  # e^-14/(1+e^-1) = 6.1e-7
    15
    >>> selection_threshold(Fraction(2), Fraction(1, 10**6))  # e^-13.5/(1+e^-0.5) = 8.5e-7
    28
    """
    a = float(1 / scale)
    log1p_q = math.log1p(math.exp(-a))
    target = _log(delta) - _LOG_MARGIN

    def log_pass(k: int) -> float:  # ln P(X >= k) = -k/b - ln(1 + q)
        return -k * a - log1p_q

    k = max(1, math.ceil((-target - log1p_q) / a))
    step = max(1, k >> 40)  # keeps the search finite where 1/b is below an ulp of k/b
    while log_pass(k) > target:
        k += step
    while k - step >= 1 and log_pass(k - step) <= target:
        k -= step
    return 1 + k


class KeySelectionMechanism:
    """Noisy thresholding at frame-level (epsilon, delta); see the module docstring.

    ``threshold`` is an integer: a key is released when its noisy count is at least it.
    ``scale`` is the discrete Laplace scale ``1/epsilon`` (an exact Fraction, rounded up to a
    rational the sampler takes); ``noise`` its distribution. Released noisy counts are
    ``int64`` integers.

    >>> m = KeySelectionMechanism(Fraction(1), Fraction(1, 10**6))
    >>> m.threshold, m.describe()
    (15, 'KeySelection(DiscreteLaplace(scale=1), threshold=15)')
    >>> m.charge.at(Fraction(2))
    Cost(epsilon=2, delta=...)
    """

    def __init__(self, epsilon: Fraction, delta: Fraction):
        if not 0 < delta < 1:
            raise ValueError("key selection needs 0 < delta < 1")
        self.epsilon = epsilon
        self.delta = delta
        self.scale = _fit_laplace_scale(1 / Fraction(epsilon))
        self.noise = DiscreteLaplaceNoise(self.scale)
        self.threshold = selection_threshold(self.scale, Fraction(delta))
        self.charge = Cost(epsilon, delta)
        self.noise_scale = float(self.scale)

    def pass_probability(self, count: int = 1) -> float:
        """``P(count + X >= threshold)`` for an exact count (``count = 1``: at most delta)."""
        k = self.threshold - int(count)
        if k <= 0:
            return 1.0 - self.noise.tail(-k) / 2.0  # 1 - P(X < k) = 1 - P(X > -k)
        a = float(1 / self.scale)
        return math.exp(-k * a - math.log1p(math.exp(-a)))

    def describe(self) -> str:
        return f"KeySelection({self.noise.describe()}, threshold={self.threshold})"

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
        noisy = c + discrete_laplace(self.scale, c.shape) if c.size else c
        keep = noisy >= self.threshold
        return [k for k, ok in zip(keys, keep, strict=True) if ok], noisy[keep]


def frame_delta_for(delta: Fraction, stability: Fraction, epsilon: Fraction) -> Fraction:
    """The frame-level delta whose group-privacy price at ``stability`` stays within ``delta``.

    ``Cost.at(k)`` charges ``k·e^((k-1)·epsilon)·delta`` for k > 1; this inverts it with a
    small margin for the rounding up that ``Cost.at`` does.
    """
    if stability == 1:
        return delta
    # In logs: (k-1)·epsilon may be far beyond exp's range.
    log_frame = _log(Fraction(delta)) - _log(Fraction(stability))
    log_frame -= float((stability - 1) * epsilon)
    if log_frame < -700:  # exp would leave the normal doubles (and their precision)
        raise PrivacyError(
            f"private key selection at stability {float(stability):g} and epsilon "
            f"{float(epsilon):g} would need a per-row delta below about 1e-304 (group privacy "
            "multiplies it by k·e^((k-1)·epsilon)); lower the epsilon or the stability"
        )
    return Fraction(math.exp(log_frame) * (1 - 1e-9))
