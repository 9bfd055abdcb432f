"""Argmax: report the noisy maximum by permute-and-flip over exact counts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from pinqpy.accounting.charges import PureCharge
from pinqpy.accounting.cost import check_epsilon
from pinqpy.core.exact import Exact
from pinqpy.errors import PinqError
from pinqpy.noise.mechanisms.base import Mechanism
from pinqpy.noise.mechanisms.calibration import _round_up
from pinqpy.noise.mechanisms.selection import (
    _PF_MAX_DEN_BITS,
    PF_CLIP,
    _permute_and_flip,
    _pf_epsilon,
    _pf_law,
)
from pinqpy.results.accuracy import Accuracy, ArgmaxAccuracy
from pinqpy.results.noise import check_level

__all__ = ["ArgmaxMechanism"]


# -- argmax: report noisy max ------------------------------------------------------------
class ArgmaxMechanism(Mechanism):
    """The most frequent of ``n_candidates`` public candidates, by permute-and-flip.

    ``release(counts)`` takes ``counts[k, i]`` = rows of key ``k`` equal to candidate ``i``
    (integers) and runs :func:`_permute_and_flip` with coins ``p_i = exp(-eps·(c* - c_i))``
    (``c*`` the largest count; exponents clipped at ``PF_CLIP + ceil(eps)`` nats): an exact
    sampler, never worse in expected count than report-noisy-max with Gumbel noise
    (``P(i) ∝ p_i``), which it replaces.

    **Privacy: exactly epsilon-DP, without the factor 2 of the general case**, because counts
    are *monotone*: adding a row raises one count ``c_t`` by one and leaves the others. Write
    ``P(r) = p_r·E[1/(1 + K_r)]`` (``K_r``: heads among the other coins; see
    :func:`_permute_and_flip`) and ``λ = e^{-eps}``. Two cases.

    (a) ``c_t + 1 <= c*`` (``c*`` unchanged): only ``p_t`` changes, to ``θ·p_t`` with
        ``1 <= θ <= e^eps``. So ``P'(t) = θ·P(t)``. For ``r ≠ t``, ``P'(r) <= P(r)`` (more
        heads among the others), and splitting on coin ``t``, ``E[1/(1+K_r)] = (1-p_t)·A +
        p_t·B`` with ``A = E[1/(1+J)] <= 2B``, ``B = E[1/(2+J)]`` (``J``: heads other than ``r``
        and ``t``; ``1/(2+j) >= 1/(2(1+j))``). ``P'(r) >= λ·P(r)`` reduces to
        ``A(1 - λ - p_t(θ - λ)) + B·p_t(θ - λ) >= 0``, which holds with ``B >= A/2`` because
        ``p_t <= λ`` (the clip is at least ``eps``) and ``θ <= 1/λ``:
        ``1 - λ - λ(1/λ - λ)/2 = (1 - λ)²/2 >= 0``.
    (b) ``c_t = c*`` (``t`` becomes the unique maximum): ``p_t = 1`` in both; every other
        ``p_i`` becomes ``p'_i ∈ [λ·p_i, p_i]``. With ``f(x) = ∫_0^1 Π(1 - x_i·u) du`` and
        ``g(x) = ∫_0^1 (1-u)·Π(1 - x_i·u) du`` over the others, ``P(t) = f(p)`` and
        ``P(r) = p_r·g(p)`` for ``r ≠ t`` (coin ``t`` is surely heads). Both are decreasing
        in every ``x_i``, and the substitution ``v = λu`` gives ``λ·f(λp) =
        ∫_0^λ Π(1 - p_i v) dv <= f(p)`` and ``λ·g(λp) = ∫_0^λ (1 - v/λ)·Π(1 - p_i v) dv
        <= g(p)``. Hence ``1 <= P'(t)/P(t) <= f(λp)/f(p) <= e^eps`` and
        ``λ <= P'(r)/P(r) <= g(λp)/g(p) <= e^eps``.

    Removing a row is the same pair read backwards. The clip keeps case (a)'s ``p_t <= λ``
    (exponents are at least ``min(clip, eps) = eps`` below the best) and case (b)'s
    ``p'_i ∈ [λ·p_i, p_i]``.

    **One changed row** (a table whose row count is public: stability 2 at its own rows).
    A changed row lowers one candidate's count by at most 1 and raises another's by at most
    1: not monotone, but a removal followed by an addition, each a monotone step of the
    argument above, so ``2·eps``, the charge at stability 2. The general
    (non-monotone) bound for scores of sensitivity 1 needs coins at half the rate for
    ``eps``, the same cost, so the generic rule is this mechanism's change-one-row bound
    and it has no special case.

    **Exact rationals.** ``eps = e/d`` (capped at :data:`PF_MAX_EPSILON` and rounded *down* to
    a denominator of at most ``2**56`` if needed, :func:`_pf_epsilon`; either only adds
    privacy): the coin of candidate ``i`` is ``Bernoulli(exp(-e·(c* - c_i)/d))``.

    **Accuracy.** A candidate whose count is ``s`` below the maximum is released with
    probability at most its coin, ``e^{-eps·s}``, so all such candidates together have
    probability at most ``n·e^{-eps·s}``. Setting that to ``1 - level``: with probability
    ``>= level`` the chosen count is within ``ln(n/(1-level))/epsilon`` of the maximum.

    >>> from pinqpy import testing
    >>> m = ArgmaxMechanism(0.5, 3, labels=["CA", "NY", "TX"])
    >>> with testing.no_noise():
    ...     idx, acc = m.release(np.array([[5, 9, 9]]))
    >>> idx.tolist(), acc.values.tolist()
    ([1], ['NY'])
    >>> round(m.accuracy(0.95), 3), m.describe()
    (8.189, 'PermuteAndFlip(epsilon=0.5, candidates=3)')
    """

    def __init__(self, epsilon: object, n_candidates: int, *, labels: Sequence[Any] | None = None):
        self.epsilon = Exact(check_epsilon(epsilon))
        self.delta = Exact(0)
        n = int(n_candidates)
        if n < 1:
            raise PinqError("argmax needs at least one candidate")
        self.n_candidates = n
        if labels is not None and len(labels) != n:
            raise ValueError("labels must have one entry per candidate")
        self.labels: np.ndarray | None = None
        if labels is not None:
            # Element by element, so tuple labels stay whole (one object per candidate).
            self.labels = np.empty(n, dtype=object)
            for i, label in enumerate(labels):
                self.labels[i] = label
        eps = _pf_epsilon(Fraction(self.epsilon), _PF_MAX_DEN_BITS, PF_CLIP)
        if eps <= 0:
            raise PinqError("epsilon is too small for the argmax's exact selection")
        self._pf_eps = eps
        self._clip = PF_CLIP + math.ceil(eps)
        self.noise_scale = _round_up(1 / Fraction(self.epsilon))
        self.charge = PureCharge(self.epsilon)

    def describe(self) -> str:
        return f"PermuteAndFlip(epsilon={self.epsilon!r}, candidates={self.n_candidates})"

    def accuracy(self, level: float = 0.95) -> float:
        """Count shortfall ``ln(n/(1-level))/epsilon`` of the choice below the maximum."""
        lv = check_level(level)
        return math.log(self.n_candidates / (1.0 - lv)) / float(self._pf_eps)

    def expected_error(self) -> float:
        """Expected shortfall ``<= ∫ min(1, n·e^{-eps·s}) ds = (ln n + 1)/epsilon``."""
        return (math.log(self.n_candidates) + 1.0) / float(self._pf_eps)

    def _gaps(self, counts: object) -> np.ndarray:
        c = np.asarray(counts)
        if c.ndim == 1:
            c = c[None, :]
        if c.ndim != 2 or c.shape[1] != self.n_candidates:
            raise ValueError("counts must be (n_keys, n_candidates)")
        if c.dtype.kind not in "iu":
            f = c.astype(np.float64)
            if not np.isfinite(f).all():
                raise ValueError("counts must be finite")
            if not (f == np.rint(f)).all() or (np.abs(f) >= 2.0**62).any():
                raise ValueError("counts must be integers")
            c = f
        c = c.astype(np.int64)
        return c.max(axis=1, keepdims=True) - c if c.size else c

    def _selection_exponents(self, counts: object) -> np.ndarray:
        """The coin exponents ``min(clip, eps·(c* - c_i))`` as floats (for tests)."""
        g = self._gaps(counts).astype(np.float64)
        return np.minimum(float(self._pf_eps) * g, float(self._clip))

    def _selection_probabilities(self, counts: object) -> np.ndarray:
        """The exact permute-and-flip law (for tests; reads data)."""
        return _pf_law(self._selection_exponents(counts))

    def release(self, counts: object) -> tuple[np.ndarray, Accuracy]:
        """Chosen candidate indices, one per key (and an accuracy holding their labels)."""
        gaps = self._gaps(counts)
        idx = _permute_and_flip(gaps, self._pf_eps.numerator, self._pf_eps.denominator, self._clip)
        values = idx if self.labels is None else self.labels[idx]
        acc = ArgmaxAccuracy(
            values,
            epsilon=self.epsilon,
            n_candidates=self.n_candidates,
            mechanism=self.describe(),
            indices=idx,
        )
        return idx, acc
