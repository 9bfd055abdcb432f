"""Quantiles: permute-and-flip over a public grid of candidates, with a value-space interval
from a discrete-Laplace histogram."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import ClassVar

import numpy as np

from pinqpy.accounting.charges import PureCharge
from pinqpy.accounting.cost import check_epsilon
from pinqpy.core.exact import Exact, to_fraction
from pinqpy.errors import PinqError
from pinqpy.noise.mechanisms.base import Mechanism, _bounds, _count_noise_sample, _quiet
from pinqpy.noise.mechanisms.calibration import _float_up
from pinqpy.noise.mechanisms.selection import (
    _PF_MAX_DEN_BITS,
    PF_CLIP,
    _permute_and_flip,
    _pf_epsilon,
    _pf_law,
)
from pinqpy.noise.samplers import _fit_laplace_scale
from pinqpy.results.accuracy import Accuracy
from pinqpy.results.format import _fmt
from pinqpy.results.noise import DiscreteLaplaceNoise, check_level

__all__ = [
    "QUANTILE_CI_CUTS",
    "QUANTILE_CI_SHARE",
    "QuantileAccuracy",
    "QuantileMechanism",
    "default_candidates",
]

# -- quantiles: permute-and-flip over a public grid ----------------------------------------
QUANTILE_GRID_POINTS = 1001
QUANTILE_MAX_INTEGER_GRID = 10_000
QUANTILE_CI_CUTS = 33
QUANTILE_CI_SHARE = Fraction(1, 4)


def default_candidates(lo: float, hi: float) -> np.ndarray:
    """The public candidate grid for a quantile over ``[lo, hi]``.

    Every integer from ``lo`` to ``hi`` when both are integers and ``hi - lo <= 10_000``
    (ages, years, counts: the answer is exact to the unit); otherwise 1001 evenly spaced
    points including both ends (a resolution of 0.1% of the range).

    >>> default_candidates(0, 4).tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0]
    >>> len(default_candidates(0, 1e6))
    1001
    """
    lo_f, hi_f = _bounds(lo, hi)
    if lo_f == hi_f:
        return np.array([lo_f])
    if lo_f.is_integer() and hi_f.is_integer() and hi_f - lo_f <= QUANTILE_MAX_INTEGER_GRID:
        return np.arange(int(lo_f), int(hi_f) + 1).astype(np.float64)
    grid = np.linspace(lo_f, hi_f, QUANTILE_GRID_POINTS)
    grid[0], grid[-1] = lo_f, hi_f
    return grid


def _chernoff_threshold(n_terms: Sequence[tuple[int, float]], b: float, log_inv_p: float) -> float:
    """A ``t`` with ``P(Σ_j w_j·Y_j >= t) <= p`` for i.i.d. ``Y_j``, Laplace or discrete Laplace
    of scale ``b``.

    **The discrete Laplace is covered.** With ``a = 1/b`` and ``q = e^{-a}``, the discrete
    Laplace has ``E[e^{λX}] = (1-q)²/((1-qe^λ)(1-qe^{-λ})) = (cosh a - 1)/(cosh a - cosh λ)``
    for ``|λ| < a`` (multiply top and bottom by ``1/q``). This is at most the continuous
    ``a²/(a² - λ²) = 1/(1 - λ²b²)``: cross-multiplying, the claim is
    ``a²(cosh λ - 1) <= λ²(cosh a - 1)``, i.e. ``(cosh λ - 1)/λ² <= (cosh a - 1)/a²``, true
    because ``(cosh x - 1)/x² = Σ_k x^{2k-2}/(2k)!`` increases with ``|x|``. So every Chernoff
    bound below, derived from the continuous MGF, holds for the discrete Laplace too.

    ``n_terms`` lists ``(count, weight)`` groups. The moment generating function of
    ``Laplace(b)`` is ``1/(1 - λ²b²)`` for ``|λ| < 1/b``, so for ``S = Σ w_j Y_j`` and
    ``0 < λ < 1/(b·max|w|)``, Chernoff's bound gives
    ``P(S >= t) <= exp(-λt + Λ(λ))``, ``Λ(λ) = -Σ_j log(1 - λ²w_j²b²)``. Hence
    ``t(λ) = (log(1/p) + Λ(λ))/λ`` is a valid threshold for *every* such λ; we pick λ where
    ``λΛ'(λ) - Λ(λ) = log(1/p)`` (the optimum, found by bisection; the function is increasing
    in λ) and evaluate ``t(λ)`` there, so imprecision in λ can only loosen, never invalidate.
    """
    terms = [(n, abs(w)) for n, w in n_terms if n > 0 and w != 0]
    if not terms or b == 0:
        return 0.0
    wmax = max(w for _, w in terms)
    lam_max = 1.0 / (b * wmax)

    def big_lambda(lam: float) -> float:
        return -sum(n * math.log1p(-((lam * w * b) ** 2)) for n, w in terms)

    def d_lambda(lam: float) -> float:
        return sum(n * 2 * lam * (w * b) ** 2 / (1 - (lam * w * b) ** 2) for n, w in terms)

    lo, hi = 0.0, lam_max
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if mid * d_lambda(mid) - big_lambda(mid) < log_inv_p:
            lo = mid
        else:
            hi = mid
    lam = lo if lo > 0 else 0.5 * lam_max
    return (log_inv_p + big_lambda(lam)) / lam


class QuantileAccuracy(Accuracy):
    """Value-space confidence intervals for a released quantile.

    Method (a documented share ``ci_epsilon`` of the quantile's epsilon pays for it):

    1. **Noisy coarse histogram.** Cut candidates ``c_{k_0} = lo < c_{k_1} < ... <
       c_{k_C} = hi`` (up to 33, evenly spaced along the grid) split the rows into ``2C + 1``
       disjoint bins: ``{x = c_{k_i}}`` and ``c_{k_i} < x < c_{k_{i+1}}``. Adding or removing a
       row changes exactly one bin by one, so discrete Laplace noise of scale ``1/ci_epsilon``
       on every (integer) bin is ``ci_epsilon``-DP (L1 sensitivity 1; the ratio argument of
       :func:`_count_noise`, applied to the one bin that changes).
    2. **Noisy scores at the cuts.** The quantile's score function is
       ``g_j = (1-q)·#{x < c_j} - q·#{x > c_j}``, non-decreasing in ``j``; from the noisy
       bins, ``ĝ_i = (1-q)·(bins below c_{k_i}) - q·(bins above c_{k_i})`` estimates ``g`` at
       cut ``i`` with noise ``(1-q)·Σ(2i noises) - q·Σ(2(C-i) noises)``.
    3. **Simultaneous bounds.** :func:`_chernoff_threshold` gives ``t_i`` with
       ``P(|ĝ_i - g_{k_i}| >= t_i) <= alpha/(C+1)`` (each side ``alpha/(2(C+1))``); by the union
       bound all ``C + 1`` cuts are within their ``t_i`` with probability ``>= 1 - alpha``.
    4. **Inversion.** ``g_k >= 0`` implies the lowest best-scoring candidate (the exact
       quantile, ties to the lowest) is at or below ``c_k``: every higher candidate scores no
       better. ``g_k <= 0`` implies the *highest* best-scoring candidate is at or above
       ``c_k``. So the interval runs from the largest cut with ``ĝ_i + t_i <= 0`` (else
       ``lo``) to the smallest cut with ``ĝ_i - t_i >= 0`` (else ``hi``), and it is widened to
       contain the released value.

    Guarantee: with probability at least ``level`` the interval contains an exact
    ``q``-quantile of the data in the sense of the mechanism (a candidate of best score);
    when the best-scoring candidate is unique -- the usual case with many distinct values --
    it contains *the* exact quantile. Resolution is limited by the cut spacing
    (``(hi-lo)/32``) and by the histogram noise; the interval costs no extra privacy beyond
    the charged epsilon.
    """

    _per_key: ClassVar[tuple[str, ...]] = ("values", "indices", "scores")

    def __init__(
        self,
        values: np.ndarray,
        indices: np.ndarray,
        scores: np.ndarray | None,
        *,
        mech: QuantileMechanism,
    ):
        super().__init__(values, mechanism=mech.describe(), epsilon=mech.epsilon, delta=mech.delta)
        self.indices = np.asarray(indices)
        self.scores = (
            np.zeros((len(self), len(mech.cuts))) if scores is None else np.asarray(scores)
        )
        self._mech = mech

    @property
    def has_interval(self) -> bool:
        return self._mech.ci_noise is not None

    def rank_error(self, level: float = 0.95) -> float | None:
        """The selection's rank error at ``level`` (:meth:`QuantileMechanism.accuracy`), when
        no value-space interval was paid for."""
        return None if self.has_interval else self._mech.accuracy(level)

    @_quiet
    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        mech = self._mech
        cands = mech.candidates
        n = len(self)
        if mech.ci_noise is None:
            # Nothing was paid for a value-space interval. The rank error of the selection is
            # data independent, but mapping ranks to values needs the data's distribution, so
            # no interval is invented here.
            raise PinqError(
                "this quantile was released without an interval; ask median(..., ci=True) or "
                "quantile(..., ci=True), which spends a quarter of epsilon on it (in SQL: "
                "OPTIONS (quantile_ci = true))"
            )
        t = mech.ci_thresholds(level)
        cuts = mech.cuts
        low_idx = np.zeros(n, dtype=np.int64)
        high_idx = np.full(n, len(cands) - 1, dtype=np.int64)
        surely_nonpos = self.scores + t <= 0  # g <= 0 there: an exact quantile is at/above
        surely_nonneg = self.scores - t >= 0  # g >= 0 there: the exact quantile is at/below
        has_low = surely_nonpos.any(axis=1)
        has_high = surely_nonneg.any(axis=1)
        last = surely_nonpos.shape[1] - 1 - np.argmax(surely_nonpos[:, ::-1], axis=1)
        first = np.argmax(surely_nonneg, axis=1)
        low_idx = np.where(has_low, cuts[last], low_idx)
        high_idx = np.where(has_high, cuts[first], high_idx)
        a, b = np.minimum(low_idx, high_idx), np.maximum(low_idx, high_idx)
        low = np.minimum(cands[a], self.values)
        high = np.maximum(cands[b], self.values)
        return low, high


class QuantileMechanism(Mechanism):
    """The ``q``-quantile by the exponential mechanism over a public candidate grid.

    **Scores.** For candidate ``c_j``, with ``L_j = #{x < c_j}`` and ``G_j = #{x > c_j}``
    (values clamped into ``[lo, hi]``), the utility is ``u_j = -|(1-q)·L_j - q·G_j|``: zero
    where a ``q`` share of the other rows is above and ``1-q`` below. Adding a row ``x``
    raises ``L_j`` by one (if ``x < c_j``), or ``G_j`` (if ``x > c_j``), or neither, so
    ``(1-q)L_j - qG_j`` moves by ``1-q``, ``-q`` or 0 and ``|Δu_j| <= Δu = max(q, 1-q)``.

    **One changed row** (``changed_row=True``: the whole of a table whose row count is
    public; :func:`pinqpy.pipeline.prepare.changed_row_frame`). Changing a row ``x`` into
    ``x'`` removes ``x``'s term from ``D_j = (1-q)L_j - qG_j`` (``-(1-q)``, ``+q`` or 0: a
    NULL or NaN is in neither count, a value equal to ``c_j`` neither) and adds ``x'``'s
    (``+(1-q)``, ``-q`` or 0), so ``D_j``, and with it ``u_j``, moves by at most
    ``(1-q) + q = 1``. Two rows added or removed, the generic bound, would be ``2·max(q,
    1-q) >= 1`` (equal only for the median). The frame is charged at stability 2, so the
    scores are calibrated to ``Δu = 1/2`` per row of stability (the coins' exponent
    ``eps_sel·(U* - U_j)/b`` for ``q = a/b``): the *Privacy* argument below, with every score
    moving by at most ``2·Δu = 1``, makes the selection ``2·eps_sel``-DP for one changed row,
    the charge at 2. The interval's coarse histogram needs nothing new: one changed row
    moves one row from one bin to another, L1 2, which the charge at 2 covers.

    **Selection: permute-and-flip.** Each candidate gets the coin
    ``p_j = exp(-eps_sel·(u* - u_j)/(2Δu))`` (``u*`` the best score) and
    :func:`_permute_and_flip` releases a candidate with ``P(j) = p_j·∫_0^1 Π_{i≠j}(1 - p_i·t)
    dt`` (McKenna & Sheldon, NeurIPS 2020) -- never worse in expected score than the
    exponential mechanism ``P(j) ∝ p_j``, and sampled exactly, with no floating point.

    *Privacy* (exactly ``eps_sel``-DP for every ``q``). With ``c = eps_sel/(2Δu)``,
    ``s_i = e^{c·u_i}`` and ``S = max s_i = e^{c·u*}``, substituting ``t = S·v`` gives
    ``P(j) = s_j·∫_0^{1/S} Π_{i≠j}(1 - s_i·v) dv``, every factor in ``[0, 1]`` there. For a
    neighbour every score moves by at most ``Δu``, so ``s'_i <= e^{eps/2}·s_i`` and
    ``S' >= e^{-eps/2}·S``. Then ``P'(j) <= e^{eps/2}·s_j·∫_0^{e^{eps/2}/S} Π(1 -
    e^{-eps/2}·s_i·v) dv`` (smaller factors; a longer range, on which the factors stay
    ``>= 0`` because ``e^{-eps/2}·s_i·v <= s_i/S <= 1``), which is ``e^{eps}·P(j)`` after
    ``w = e^{-eps/2}·v``. The other direction is the same with the roles swapped. (PINQ's
    order statistic could lose up to ``2·max(q, 1-q)·eps``.)

    *Exact rationals.* With ``q = a/b`` the scores times ``b`` are integers
    ``U_j = -|(b-a)·L_j - a·G_j|`` of sensitivity ``M = max(a, b-a)``, so the exponent is
    ``eps_sel·(U* - U_j)/(2M)``, a rational, clipped at ``PF_CLIP`` (free, see
    :func:`_permute_and_flip`). ``q`` is used exactly when ``b <= 2**24`` (any decimal ``q``
    up to 7 digits), else rounded to the nearest multiple of ``2**-24``; ``eps_sel`` is
    capped at :data:`PF_MAX_EPSILON` and rounded *down* to a denominator of at most
    ``2**(55 - bit_length(M))`` if needed (:func:`_pf_epsilon`; less privacy loss than
    charged).

    **Budget.** By default (``ci_share=0``) the whole ``epsilon`` goes to the selection:
    ``eps_sel = epsilon``, and the release is the exponential mechanism (permute-and-flip)
    alone, exactly ``epsilon``-DP by the *Privacy* argument above with ``eps_sel = epsilon``;
    nothing else is computed from the data. Its rank error (*Utility* below) is data
    independent and is what :meth:`accuracy` states, in ranks; its value-space interval is
    not (it depends on how the data spread between candidates), so ``ci()`` then refuses
    rather than invent one. Asking for an interval (``ci=True`` in the API, which passes
    ``ci_share=QUANTILE_CI_SHARE = 1/4``) splits ``epsilon``: ``eps_sel = (1 -
    ci_share)·epsilon`` for the selection and ``ci_epsilon = ci_share·epsilon`` for a noisy
    coarse histogram that makes a value-space ``ci()`` possible (:class:`QuantileAccuracy`).
    By sequential composition that release is exactly ``epsilon``-DP too; the charge is
    ``PureCharge(epsilon)`` either way. A quarter keeps most of the budget on the answer
    (the selection's rank error grows by only ``4/3``) while the 33-cut histogram's noise,
    scale ``4/epsilon`` per bin, stays small next to the cut spacing for any table of a few
    hundred rows.

    **Inputs.** ``release(eq_counts, gap_counts)`` with ``eq_counts[k, j] = #{x == c_j}``
    (shape ``(n_keys, m)``) and ``gap_counts[k, j] = #{c_j < x < c_{j+1}}``
    (shape ``(n_keys, m-1)``); :meth:`bin_counts` computes them from values.

    **Released values.** A quantile is one of the public candidates ``c_j``, fixed before any
    data is read, and so are the endpoints of its ``ci`` (candidates at the cuts, or the
    bounds): every released number is a public value chosen by a private index, so its
    floating-point bits carry nothing beyond that index and no lattice is needed.

    **Utility.** With probability ``>= level`` the chosen candidate's score is within
    ``2Δu·(ln m + ln(1/(1-level)))/eps_sel`` of the best (in rows of rank).

    >>> from pinqpy import testing
    >>> m = QuantileMechanism(1.0, 0.5, 0, 10)
    >>> eq, gap = m.bin_counts(np.array([1, 2, 3, 3, 9]))
    >>> with testing.no_noise():
    ...     v, acc = m.release(eq, gap)
    >>> v.tolist()
    [3.0]
    >>> float(m.select_epsilon), float(m.ci_epsilon)
    (1.0, 0.0)
    >>> m = QuantileMechanism(1.0, 0.5, 0, 10, ci_share=QUANTILE_CI_SHARE)
    >>> float(m.select_epsilon), float(m.ci_epsilon)
    (0.75, 0.25)
    """

    def __init__(
        self,
        epsilon: object,
        q: object,
        lo: object,
        hi: object,
        candidates: object = None,
        *,
        ci_share: object = 0,
        changed_row: bool = False,
    ):
        self.lo, self.hi = _bounds(lo, hi)
        self.changed_row = bool(changed_row)
        self.epsilon = Exact(check_epsilon(epsilon))
        self.delta = Exact(0)
        qq = to_fraction(q, "q")
        if not 0 <= qq <= 1:
            raise PinqError("a quantile q must be between 0 and 1")
        self.q = float(qq)
        self._q_exact = qq
        share = to_fraction(ci_share, "ci_share")
        if not 0 <= share < 1:
            raise PinqError("ci_share must be at least 0 and below 1")
        self.ci_share = Exact(share)
        self.select_epsilon = Exact(self.epsilon * (1 - share))
        self.ci_epsilon = Exact(self.epsilon * share)
        # Exact selection exponents eps_sel·(U* - U)/(2M): see "Exact rationals" above.
        q_pf = qq if qq.denominator <= 1 << 24 else Fraction(round(qq * 2**24), 2**24)
        self._q_pf = q_pf
        big_m = max(q_pf.numerator, q_pf.denominator - q_pf.numerator)
        # One changed row: U moves by at most b = q_pf.denominator, calibrated as b/2 per
        # row of stability, so 2M is b (and b <= 2·big_m keeps the denominator's room).
        two_m = q_pf.denominator if self.changed_row else 2 * big_m
        self.sensitivity = Fraction(1, 2) if self.changed_row else max(qq, 1 - qq)
        e_sel = _pf_epsilon(
            Fraction(self.select_epsilon), _PF_MAX_DEN_BITS - 1 - big_m.bit_length(), 0
        )
        if e_sel <= 0:
            raise PinqError("epsilon is too small for the quantile's exact selection")
        self._pf_eps = e_sel
        self._pf_mult = e_sel.numerator
        self._pf_den = two_m * e_sel.denominator
        self.candidates = self._grid(candidates)
        m = len(self.candidates)
        n_cuts = min(m, QUANTILE_CI_CUTS)
        self.cuts = np.unique(np.round(np.linspace(0, m - 1, n_cuts)).astype(np.int64))
        self.ci_noise = (
            DiscreteLaplaceNoise(_fit_laplace_scale(1 / Fraction(self.ci_epsilon)))
            if share > 0
            else None
        )
        self.charge = PureCharge(self.epsilon)
        self.noise_scale = None
        self._thresholds: dict[float, np.ndarray] = {}

    def _grid(self, candidates: object) -> np.ndarray:
        if candidates is None:
            return default_candidates(self.lo, self.hi)
        try:
            c = np.asarray(candidates, dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise PinqError("quantile candidates must be numbers") from None
        if not np.isfinite(c).all():
            raise PinqError("quantile candidates must be finite")
        if ((c < self.lo) | (c > self.hi)).any():
            raise PinqError("quantile candidates must lie within the bounds")
        return np.unique(np.concatenate([c, [self.lo, self.hi]]))

    # -- description and data-free accuracy ----------------------------------------------
    def describe(self) -> str:
        text = (
            f"PermuteAndFlip(epsilon={self.select_epsilon!r}, q={_fmt(self.q)}, "
            f"candidates={len(self.candidates)})"
        )
        if self.ci_noise is not None:
            text += f" + {self.ci_noise.describe()} histogram for ci"
        return text

    def accuracy(self, level: float = 0.95) -> float:
        """Rank error (rows): with prob. >= level the choice scores within this of the best.

        Permute-and-flip releases a candidate with probability at most its own coin ``p_j``
        (it must come up heads), so the candidates scoring ``s`` or more below the best have
        total probability at most ``m·exp(-eps_sel·s/(2Δu))`` (the clip at ``PF_CLIP`` nats
        is beyond any ``s`` used here); setting that to ``1 - level`` gives
        ``s = 2Δu·(ln m + ln(1/(1-level)))/eps_sel`` -- the exponential mechanism's bound.
        """
        lv = check_level(level)
        m = len(self.candidates)
        return (2 * float(self.sensitivity) * (math.log(m) + math.log(1 / (1 - lv)))) / float(
            self._pf_eps
        )

    def expected_error(self) -> float:
        """Expected rank error (rows): at most ``∫ min(1, m·e^{-eps_sel·s/(2Δu)}) ds``."""
        m = len(self.candidates)
        return 2 * float(self.sensitivity) * (math.log(m) + 1) / float(self._pf_eps)

    def ci_thresholds(self, level: float) -> np.ndarray:
        """The simultaneous noise bounds ``t_i`` on the cut scores (public; no data)."""
        lv = check_level(level)
        cached = self._thresholds.get(lv)
        if cached is not None:
            return cached
        assert self.ci_noise is not None
        n_cuts = len(self.cuts)
        below_w, above_w = 1.0 - self.q, self.q
        log_inv_p = math.log(2 * n_cuts / (1 - lv))
        t = np.array(
            [
                _chernoff_threshold(
                    [(2 * i, below_w), (2 * (n_cuts - 1 - i), above_w)],
                    _float_up(self.ci_noise.b),
                    log_inv_p,
                )
                for i in range(n_cuts)
            ]
        )
        self._thresholds[lv] = t
        return t

    # -- data ----------------------------------------------------------------------------
    def bin_counts(
        self, values: object, codes: object = None, n_keys: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(eq_counts, gap_counts)`` for ``values`` (NaN dropped, others clamped).

        With ``codes`` (an int per value, 0 <= code < n_keys) the counts are per key, shape
        ``(n_keys, m)`` and ``(n_keys, m-1)``; rows with other codes are dropped.
        """
        v = np.asarray(values, dtype=np.float64).ravel()
        keep = ~np.isnan(v)
        if codes is None:
            k = np.zeros(v.shape, dtype=np.int64)
            n_keys = 1
        else:
            k = np.asarray(codes, dtype=np.int64).ravel()
            keep &= (k >= 0) & (k < n_keys)
        v, k = np.clip(v[keep], self.lo, self.hi), k[keep]
        c = self.candidates
        m = len(c)
        pos = np.searchsorted(c, v, side="left")
        exact = c[np.minimum(pos, m - 1)] == v
        eq = np.bincount(k[exact] * m + pos[exact], minlength=n_keys * m)
        gap_pos = pos[~exact] - 1  # strictly between c[pos-1] and c[pos]
        gm = max(m - 1, 1)
        gap = np.bincount(k[~exact] * gm + gap_pos, minlength=n_keys * gm)
        return eq.reshape(n_keys, m), gap.reshape(n_keys, gm)[:, : m - 1]

    def _check_counts(self, eq_counts: object, gap_counts: object) -> tuple[np.ndarray, ...]:
        m = len(self.candidates)
        eq = np.asarray(eq_counts, dtype=np.int64)
        gap = np.asarray(gap_counts, dtype=np.int64)
        if eq.ndim == 1:
            eq = eq[None, :]
        if gap.ndim == 1:
            gap = gap[None, :]
        if eq.shape[1:] != (m,) or gap.shape != (eq.shape[0], m - 1):
            raise ValueError("eq_counts must be (n_keys, m) and gap_counts (n_keys, m-1)")
        if (eq < 0).any() or (gap < 0).any():
            raise ValueError("counts cannot be negative")
        return eq, gap

    @staticmethod
    def _below(eq: np.ndarray, gap: np.ndarray) -> np.ndarray:
        """``L[k, j] = #{x < c_j}``: cumulative rows in ``[c_i, c_{i+1})`` for ``i < j``."""
        below = np.zeros(eq.shape, dtype=np.int64)
        np.cumsum(eq[:, :-1] + gap, axis=1, out=below[:, 1:])
        return below

    def _int_scores(self, eq: np.ndarray, gap: np.ndarray) -> np.ndarray:
        """``U[k, j] = -|(b-a)·L_j - a·G_j|`` for ``q = a/b``: ``b`` times the utilities,
        exact integers (``int64``, or Python ints when they could overflow)."""
        below = self._below(eq, gap)
        total = eq.sum(axis=1, keepdims=True) + gap.sum(axis=1, keepdims=True)
        above = total - below - eq
        a, b = self._q_pf.numerator, self._q_pf.denominator
        if total.size and int(total.max()) * b >= 1 << 61:
            below, above = below.astype(object), above.astype(object)
        return -abs((b - a) * below - a * above)

    def _gaps(self, eq: np.ndarray, gap: np.ndarray) -> np.ndarray:
        u = self._int_scores(eq, gap)
        return u.max(axis=1, keepdims=True) - u

    def scores(self, eq_counts: object, gap_counts: object) -> np.ndarray:
        """Utilities ``u[k, j] = -|(1-q)·L_j - q·G_j|`` as floats (reads data; for tests)."""
        eq, gap = self._check_counts(eq_counts, gap_counts)
        return (self._int_scores(eq, gap) / self._q_pf.denominator).astype(np.float64)

    def _selection_exponents(self, eq_counts: object, gap_counts: object) -> np.ndarray:
        """The coin exponents ``min(PF_CLIP, eps_sel·(U* - U_j)/(2M))`` as floats (tests)."""
        eq, gap = self._check_counts(eq_counts, gap_counts)
        g = self._gaps(eq, gap).astype(np.float64)
        return np.minimum(self._pf_mult * g / self._pf_den, float(PF_CLIP))

    def _selection_probabilities(self, eq_counts: object, gap_counts: object) -> np.ndarray:
        """The exact permute-and-flip law of the selection (for tests; reads data)."""
        return _pf_law(self._selection_exponents(eq_counts, gap_counts))

    def _coarse_bins(self, eq: np.ndarray, gap: np.ndarray) -> np.ndarray:
        """Exact coarse histogram, shape ``(n_keys, 2C - 1)`` for ``C`` cuts (reads data).

        Interleaved ``[#{x = c_{k_0}}, #{c_{k_0} < x < c_{k_1}}, #{x = c_{k_1}}, ...,
        #{x = c_{k_last}}]``: disjoint bins covering ``[lo, hi]``, so one row is in exactly
        one bin and adding or removing it changes the histogram by 1 in L1.
        """
        below = self._below(eq, gap)
        cuts = self.cuts
        bins = np.empty((eq.shape[0], 2 * len(cuts) - 1), dtype=np.int64)
        bins[:, 0::2] = eq[:, cuts]
        bins[:, 1::2] = below[:, cuts[1:]] - below[:, cuts[:-1]] - eq[:, cuts[:-1]]
        return bins

    def _scores_from_bins(self, bins: np.ndarray) -> np.ndarray:
        """``(1-q)·(bins below cut i) - q·(bins above cut i)`` for every cut (post-processing)."""
        n_keys = bins.shape[0]
        # prefix[:, p] = sum of the first p bins; cut i is bin 2i.
        prefix = np.concatenate([np.zeros((n_keys, 1)), np.cumsum(bins, axis=1)], axis=1)
        total = prefix[:, -1:]
        before = prefix[:, 0::2][:, : (bins.shape[1] + 1) // 2]
        after = total - prefix[:, 1::2]
        return (1.0 - self.q) * before - self.q * after

    def _cut_scores(self, eq: np.ndarray, gap: np.ndarray) -> np.ndarray:
        """Noisy scores at the cut candidates, from a discrete-Laplace-noised coarse histogram."""
        assert self.ci_noise is not None
        bins = self._coarse_bins(eq, gap)
        noisy = bins + _count_noise_sample(self.ci_noise, bins.size).reshape(bins.shape)
        return self._scores_from_bins(noisy.astype(np.float64))

    def release(self, eq_counts: object, gap_counts: object) -> tuple[np.ndarray, Accuracy]:
        """Noisy quantiles (values from the candidate grid), one per key."""
        eq, gap = self._check_counts(eq_counts, gap_counts)
        idx = _permute_and_flip(self._gaps(eq, gap), self._pf_mult, self._pf_den, PF_CLIP)
        values = self.candidates[idx]
        scores = self._cut_scores(eq, gap) if self.ci_noise is not None else None
        return values, QuantileAccuracy(values, idx, scores, mech=self)
