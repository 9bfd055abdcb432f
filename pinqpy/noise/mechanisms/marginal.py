"""The two mechanisms marginal measurement adds: a count calibrated by zCDP, and a choice among
candidate marginals by their (integer) error scores.

* :class:`ZcdpCountMechanism` -- a count with the discrete Gaussian of variance ``1/(2ρ)``,
  asked for by ``ρ`` rather than ``(epsilon, delta)`` (the zCDP split of
  ``frame.marginals(..., rho=...)`` and of ``synthesize``);
* :class:`ScoreSelectionMechanism` -- permute-and-flip over integer scores that one row moves
  by at most 1 each (MST's choice of the worst-fitted pair of columns).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from pinqpy.accounting.charges import DiscreteGaussianCharge, PureCharge, _sqrt_down
from pinqpy.accounting.cost import check_epsilon, check_part_delta
from pinqpy.accounting.models import zcdp_epsilon
from pinqpy.core.exact import Exact, to_fraction
from pinqpy.errors import PinqError
from pinqpy.noise.mechanisms.additive import CountMechanism
from pinqpy.noise.mechanisms.base import Mechanism, _Noise
from pinqpy.noise.mechanisms.selection import (
    _PF_MAX_DEN_BITS,
    PF_CLIP,
    _permute_and_flip,
    _pf_epsilon,
)
from pinqpy.noise.samplers import _fit_sigma2
from pinqpy.results.accuracy import Accuracy, ArgmaxAccuracy
from pinqpy.results.noise import DiscreteGaussianNoise

__all__ = ["MAX_RHO", "ScoreSelectionMechanism", "ZcdpCountMechanism", "check_rho"]

#: The largest rho a measurement takes (as ``budget.MAX_EPSILON`` caps an epsilon).
MAX_RHO = Fraction(10**100)


def check_rho(rho: object, what: str = "rho") -> Fraction:
    """A positive, finite rho as an exact Fraction (its decimal spelling: ``0.1`` is 1/10)."""
    if isinstance(rho, bool):
        raise PinqError(f"{what} must be a positive number")
    try:
        r = to_fraction(rho, what)
    except (PinqError, TypeError, ValueError, OverflowError):
        raise PinqError(f"{what} must be a positive number") from None
    if not 0 < r <= MAX_RHO:
        raise PinqError(f"{what} must be a positive number at most 1e100")
    return r


class ZcdpCountMechanism(CountMechanism):
    """A noisy count with the discrete Gaussian ``N_Z(0, σ²)``, ``σ² >= 1/(2ρ)``: ρ-zCDP.

    **Privacy.** Adding or removing one row moves a count by at most 1, and the discrete
    Gaussian of variance parameter ``σ²`` under shifts of at most 1 is ``1/(2σ²)``-zCDP
    (Canonne, Kamath & Steinke 2020, Proposition 5). ``σ²`` is ``1/(2ρ)`` rounded *up* to a
    parameter the exact sampler takes (more noise only), so the release is ρ-zCDP. Over the
    keys of a partition one row moves one key's count, so the whole vector is ρ-zCDP too.

    **Charge.** A :class:`~pinqpy.accounting.charges.DiscreteGaussianCharge` with sensitivity 1
    and ``sigma`` the largest float not above ``σ``: a zCDP budget reads ``ρ' =
    1/(2·sigma²) >= 1/(2σ²)`` from it (at stability ``k``: ``k²·ρ'``); an (epsilon, delta)
    budget reads ``(zcdp_epsilon(ρ, δ), δ)`` (rho-zCDP implies that, CKS20 Section 2.3), at
    stability ``k`` the group reading of that charge. ``delta`` is only that reading's delta.

    >>> m = ZcdpCountMechanism(Fraction(1, 2), Fraction(1, 10**6))
    >>> m.noise.sigma2, m.describe()
    (Fraction(1, 1), 'DiscreteGaussian(sigma=1.0)')
    """

    def __init__(self, rho: object, delta: object):
        self.rho = Exact(check_rho(rho))
        dlt = check_part_delta(delta)
        s2 = _fit_sigma2(1 / (2 * Fraction(self.rho)))
        eps = zcdp_epsilon(Fraction(self.rho), dlt)
        self.epsilon = Exact(eps)
        charge = DiscreteGaussianCharge(eps, dlt, 1, _sqrt_down(s2), sigma2=s2)
        self._setup(_Noise("count", DiscreteGaussianNoise(s2), charge, Fraction(1), eps), dlt)


class ScoreSelectionMechanism(Mechanism):
    """The candidate with the largest integer score, by permute-and-flip: epsilon-DP for
    scores that adding or removing one row moves by at most 1 each.

    ``release(scores)`` takes one integer score per candidate and flips, for candidate ``i``,
    a coin of probability ``exp(-epsilon·(s* - s_i)/2)`` (``s*`` the largest score; exponents
    clipped at ``PF_CLIP + ceil(epsilon/2)`` nats, which costs no privacy: see
    :func:`~pinqpy.noise.mechanisms.selection._permute_and_flip`).

    **Privacy.** Permute-and-flip with coins ``exp(-epsilon·(q* - q_i)/(2Δ))`` is epsilon-DP
    for a quality ``q`` of sensitivity ``Δ`` (McKenna & Sheldon 2020, Theorem 1: it is the
    exponential mechanism's guarantee, with no monotonicity needed). Here ``Δ = 1``: an MST
    score is the L1 distance between a marginal's exact counts and a public estimate, and one
    row changes one cell of the marginal by 1, so the score by at most 1. At stability ``k``
    the budget pays ``k·epsilon`` (group privacy, :class:`PureCharge`).

    **Accuracy.** A candidate ``t`` below the best is chosen with probability at most its coin,
    so with probability ``>= level`` the chosen score is within
    ``2·ln(m/(1-level))/epsilon`` of the largest, for ``m`` candidates.
    """

    def __init__(self, epsilon: object, n_candidates: int):
        self.epsilon = Exact(check_epsilon(epsilon))
        self.delta = Exact(0)
        if int(n_candidates) < 1:
            raise PinqError("a selection needs at least one candidate")
        self.n_candidates = int(n_candidates)
        half = _pf_epsilon(Fraction(self.epsilon) / 2, _PF_MAX_DEN_BITS, PF_CLIP)
        if half <= 0:
            raise PinqError("epsilon is too small for the selection's exact coins")
        self._pf_eps = half
        self._clip = PF_CLIP + math.ceil(half)
        self.noise_scale = float(2 / Fraction(self.epsilon))
        self.charge = PureCharge(self.epsilon)

    def describe(self) -> str:
        return f"PermuteAndFlip(epsilon={self.epsilon!r}, candidates={self.n_candidates})"

    def accuracy(self, level: float = 0.95) -> float:
        """Score shortfall ``2·ln(m/(1-level))/epsilon`` of the choice below the best."""
        return math.log(self.n_candidates / (1.0 - float(level))) / float(self._pf_eps)

    def expected_error(self) -> float:
        return (math.log(self.n_candidates) + 1.0) / float(self._pf_eps)

    def release(self, scores: object) -> tuple[np.ndarray, Accuracy]:
        """The chosen candidate's index (an array of one), with its accuracy."""
        s = np.asarray(scores, dtype=np.int64).reshape(1, -1)
        if s.shape[1] != self.n_candidates:
            raise ValueError("scores must have one entry per candidate")
        gaps = s.max(axis=1, keepdims=True) - s
        num, den = self._pf_eps.numerator, self._pf_eps.denominator
        idx = _permute_and_flip(gaps, num, den, self._clip)
        acc = ArgmaxAccuracy(
            idx, epsilon=self.epsilon, n_candidates=self.n_candidates,
            mechanism=self.describe(), indices=idx,
        )
        return idx, acc
