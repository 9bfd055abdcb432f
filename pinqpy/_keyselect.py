"""Private key selection: which GROUP BY keys to release when none are public.

Noisy thresholding (Korolova et al. 2009; Wilson et al. 2020): count the rows of each key
that occurs, add Laplace noise of scale ``b = 1/epsilon`` to each count and release the keys
whose noisy count exceeds the threshold ``tau = 1 + b·ln(1/(2·delta))``.

Derivation, for neighbours that differ by one row (the frame-level guarantee; the budget pays
it times the frame's stability like every other aggregation):

* The row changes one key's count by 1 and no other. For a key present in both datasets the
  release decision is post-processing of a Laplace count of sensitivity 1: ``epsilon``.
* If the row's key occurs only in the larger dataset, that key has count exactly 1 there and
  is released with probability ``P(1 + Lap(b) > tau) = ½·exp(-(tau - 1)/b) = delta``. Every
  other outcome is covered by the first case, so the selection is (epsilon, delta)-DP.

For a user-level table each unit is first limited to ``max_groups`` distinct keys
(``distinct(unit, keys).bound_contributions(max_groups)``, stability ``max_groups``), and the
count of a key is then its number of distinct units.

A key with a single contributor is thus released with probability at most ``delta``; the test
suite checks that over 10,000 trials at the calibrated threshold.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from fractions import Fraction

import numpy as np

from . import _noise
from ._mechanisms import laplace_scale
from .budget import Cost

__all__ = ["KeySelectionMechanism"]


class KeySelectionMechanism:
    """Noisy thresholding at frame-level (epsilon, delta); see the module docstring.

    >>> m = KeySelectionMechanism(Fraction(1), Fraction(1, 10**6))
    >>> round(m.threshold, 3)
    14.122
    >>> m.charge.at(Fraction(2))
    Cost(epsilon=2, delta=...)
    """

    def __init__(self, epsilon: Fraction, delta: Fraction):
        if not 0 < delta < 1:
            raise ValueError("key selection needs 0 < delta < 1")
        self.epsilon = epsilon
        self.delta = delta
        self.scale = laplace_scale(1, epsilon)
        # Rounded up: a higher threshold only releases fewer keys.
        self.threshold = math.nextafter(
            1.0 + self.scale * math.log(1.0 / (2.0 * float(delta))), math.inf
        )
        self.charge = Cost(epsilon, delta)
        self.noise_scale = self.scale

    def describe(self) -> str:
        return f"KeySelection(Laplace(scale={self.scale:.6g}), threshold={self.threshold:.6g})"

    def release(
        self, keys: list[Hashable], counts: np.ndarray
    ) -> tuple[list[Hashable], np.ndarray]:
        """The keys whose noisy count passes the threshold, and those noisy counts."""
        counts = np.asarray(counts, dtype=np.float64)
        if _noise.noise_disabled():
            keep = counts > 0
            return [k for k, ok in zip(keys, keep, strict=True) if ok], counts[keep]
        noisy = counts + _noise.laplace_noise(counts.shape, self.scale)
        keep = noisy > self.threshold
        return [k for k, ok in zip(keys, keep, strict=True) if ok], noisy[keep]


def frame_delta_for(delta: Fraction, stability: Fraction, epsilon: Fraction) -> Fraction:
    """The frame-level delta whose group-privacy price at ``stability`` stays within ``delta``.

    ``Cost.at(k)`` charges ``k·e^((k-1)·epsilon)·delta`` for k > 1; this inverts it with a
    small margin for the rounding up that ``Cost.at`` does.
    """
    if stability == 1:
        return delta
    factor = float(stability) * math.exp(float((stability - 1) * epsilon))
    return Fraction(float(delta) / factor * (1 - 1e-9))
