"""A reusable statistical privacy auditor: lower confidence bounds on privacy loss.

The guarantee being tested
--------------------------
A mechanism ``M`` is (ε, δ)-differentially private when, for every pair of neighbouring
datasets ``D, D'`` and every event ``S`` of the output space,

    P[M(D) ∈ S]  <=  e^ε · P[M(D') ∈ S] + δ,          and the same with D and D' swapped.

So any single event ``S`` with ``p = P[M(D) ∈ S] > δ`` and ``p' = P[M(D') ∈ S]`` proves
``ε >= ln((p - δ) / p')``. The auditor estimates ``p`` and ``p'`` by running the mechanism many
times on ``D`` and on ``D'`` and turns the estimates into a *lower confidence bound*
``ε_lb``: if the mechanism keeps its claim, then ``ε_lb <= ε`` except with probability at most
``α`` (1e-6 by default). An audit that reports ``ε_lb > ε`` has therefore found, at confidence
``1 - α``, an event on which the claim fails.

The procedure (:func:`audit`)
-----------------------------
1. **Two independent batches per dataset.** A *selection* batch (``n_select`` outputs from each
   of ``M(D)`` and ``M(D')``) and an *estimation* batch (``n`` outputs from each). The draws run
   inside ``pinqpy.testing.seed(seed)``, so an audit is reproducible.
2. **Bins, from the selection batch only.** Every output is mapped to a label by a
   deterministic function fitted on the pooled selection batch (:class:`_ColumnBins`): each
   distinct value its own bin when there are few (discrete outputs: integers, lattice points,
   grid candidates, indices), otherwise about ``max_bins`` quantile bins plus one bin for each
   atom (a value holding more than ``1/max_bins`` of the sample, e.g. a clamp at a bound); NaN
   (for instance "key not released") is a label of its own. A map of outputs to labels is
   post-processing, so every event built from labels is a legitimate event ``S``: nothing here
   assumes a continuous density, and the same code audits continuous and discrete samplers.
   Multi-column outputs (a partition's Series, a value with its confidence interval) are
   binned per column, and jointly on a coarser grid.
3. **Choosing the most distinguishing event, on the selection batch.** For each direction
   (``D`` over ``D'`` and ``D'`` over ``D``) the candidate events are unions of bins, of three
   shapes: the bins ranked by their empirical likelihood ratio (``(c + ½)/(c' + ½)``), taken
   best first -- the Neyman–Pearson family of likelihood-ratio tests; and, for an ordered
   column, the lower and upper tails ``{y < t}`` and ``{y >= t}`` -- over each column's bins
   and, for several columns, ranked over the joint cells as well. The first half of the
   selection batch ranks the bins; the second half scores every candidate by the very bound of
   step 4 (so small, noisy events are penalised automatically, and an event that only fits the
   noise of the ranking half scores poorly), and the best one is kept. The number of bins is
   capped at one per 50 selection outputs (one joint cell per 20).
4. **Estimating on the estimation batch.** The chosen ``S`` is now a fixed event, independent
   of the estimation batch, so there is no selection bias ("winner's curse": the same samples
   choosing and measuring ``S`` would overstate the ratio). With ``k ~ Binomial(n, p)`` and
   ``k' ~ Binomial(n, p')`` the counts of outputs in ``S``, the exact one-sided Clopper–Pearson
   bounds are

       ``p_lo  = Beta⁻¹(a; k, n - k + 1)``   (0 when k = 0),
       ``p'_hi = Beta⁻¹(1 - a; k' + 1, n - k')``   (1 when k' = n),

   which satisfy ``P[p_lo <= p] >= 1 - a`` and ``P[p'_hi >= p'] >= 1 - a`` for every ``p``,
   ``p'`` (the binomial-tail / beta-distribution identity; no normal approximation). Then

       ``ε_lb = ln((p_lo - δ) / p'_hi)``   (``-inf`` when ``p_lo <= δ``).

5. **Multiplicity (Bonferroni).** Two directions, each with one lower and one upper bound:
   four one-sided bounds, each at ``a = α/4``. By the union bound all four hold together with
   probability at least ``1 - α``, and then both directions' ``ε_lb`` are at most the true
   loss. The audit reports the larger. (The selection batch is not part of this count: it only
   chooses which fixed events the estimation batch is asked about.)

For claims about ``δ`` at a given ``ε`` (a key released by one row alone), the same counts give
``δ_lb = p_lo - e^ε · p'_hi`` (``objective="delta"`` ranks the events by it).

Power
-----
A test that cannot fail proves nothing. The test module therefore runs the *same* auditor
with the same sample sizes on deliberately broken mechanisms (noise at half the scale, a sum
calibrated to the wrong bound, PINQ's NoisyAverage, an exponential mechanism without its factor
2, a key-selection threshold one too low, a row counted in two parts charged once) and requires
``ε_lb`` (or ``δ_lb``) to *exceed* the claim.

>>> import numpy as np
>>> from pinqpy.noise.source import current_source
>>> def coin(p, n):  # randomized response: 3:1 odds, exactly ε = ln 3
...     return (current_source().uniform(n) < p).astype(float)
>>> r = audit(coin, 0.75, 0.25, epsilon=np.log(3), n=100_000, n_select=20_000, seed=1)
>>> bool(0.9 < r.epsilon_lb <= np.log(3))
True
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import beta

import pinqpy as pq

__all__ = ["AuditResult", "audit", "cp_lower", "cp_upper"]

Draw = Callable[[Any, int], np.ndarray]


# -- exact binomial confidence bounds ------------------------------------------------------
def cp_lower(k: Any, n: int, a: float) -> np.ndarray:
    """One-sided Clopper–Pearson lower bound: ``P[cp_lower(K, n, a) <= p] >= 1 - a``.

    >>> float(cp_lower(0, 10, 0.05)[0]), round(float(cp_lower(5, 10, 0.05)[0]), 4)
    (0.0, 0.2224)
    """
    k = np.atleast_1d(np.asarray(k, dtype=np.float64))
    out = np.zeros_like(k)
    pos = k > 0
    out[pos] = beta.ppf(a, k[pos], n - k[pos] + 1)
    return out


def cp_upper(k: Any, n: int, a: float) -> np.ndarray:
    """One-sided Clopper–Pearson upper bound: ``P[cp_upper(K, n, a) >= p] >= 1 - a``.

    >>> round(float(cp_upper(0, 10, 0.05)[0]), 4), float(cp_upper(10, 10, 0.05)[0])
    (0.2589, 1.0)
    """
    k = np.atleast_1d(np.asarray(k, dtype=np.float64))
    out = np.ones_like(k)
    below = k < n
    out[below] = beta.ppf(1.0 - a, k[below] + 1, n - k[below])
    return out


def _epsilon_bound(
    k_num: Any, n_num: int, k_den: Any, n_den: int, delta: float, a: float
) -> np.ndarray:
    """``ln((p_lo - δ)/p'_hi)``, element-wise; ``-inf`` where ``p_lo <= δ``."""
    num = cp_lower(k_num, n_num, a) - delta
    den = cp_upper(k_den, n_den, a)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(num > 0, np.log(np.maximum(num, 1e-300) / den), -np.inf)


def _delta_bound(
    k_num: Any, n_num: int, k_den: Any, n_den: int, epsilon: float, a: float
) -> np.ndarray:
    """``p_lo - e^ε·p'_hi``, element-wise: a lower confidence bound on δ at this ε."""
    return cp_lower(k_num, n_num, a) - math.exp(epsilon) * cp_upper(k_den, n_den, a)


# -- bins ----------------------------------------------------------------------------------
class _ColumnBins:
    """A deterministic map of one output column to integer labels, fitted on a sample.

    Labels ``0 .. len(edges)`` are the ordered intervals ``(-inf, e_0), [e_0, e_1), ...,
    [e_last, inf)``; label ``len(edges) + 1`` is NaN.
    """

    def __init__(self, x: np.ndarray, max_bins: int):
        finite = x[np.isfinite(x)]
        if finite.size == 0:
            edges = np.empty(0)
        else:
            uniq, counts = np.unique(finite, return_counts=True)
            if len(uniq) <= max_bins:
                edges = uniq[1:]  # one bin per distinct value
            else:
                atoms = uniq[counts > finite.size / max_bins]
                qs = np.quantile(finite, np.linspace(0.0, 1.0, max_bins + 1)[1:-1])
                edges = np.unique(np.concatenate([qs, atoms, np.nextafter(atoms, np.inf)]))
        self.edges = edges
        self.nan_label = len(edges) + 1
        self.n_labels = len(edges) + 2

    def labels(self, x: np.ndarray) -> np.ndarray:
        lab = np.searchsorted(self.edges, x, side="right")
        lab[np.isnan(x)] = self.nan_label
        return lab

    def describe(self, mask: np.ndarray) -> str:
        """A short text for a set of labels (a tail reads as an inequality)."""
        idx = np.flatnonzero(mask[: self.nan_label])
        nan = " or NaN" if mask[self.nan_label] else ""
        if idx.size == 0:
            return "NaN" if nan else "nothing"
        contiguous = idx[-1] - idx[0] + 1 == idx.size
        if idx.size == self.nan_label:
            return f"y is a number{nan}"
        if contiguous and idx[0] == 0 and idx[-1] < self.nan_label - 1:
            return f"y < {self.edges[idx[-1]]:.6g}{nan}"
        if contiguous and idx[-1] == self.nan_label - 1 and idx[0] > 0:
            return f"y >= {self.edges[idx[0] - 1]:.6g}{nan}"
        if idx.size == 1 and 0 < idx[0] < self.nan_label - 1:
            lo, hi = self.edges[idx[0] - 1], self.edges[idx[0]]
            if hi == np.nextafter(lo, np.inf):
                return f"y = {lo:.6g}{nan}"
            return f"{lo:.6g} <= y < {hi:.6g}{nan}"
        return f"{idx.size} of {self.n_labels - 1} bins{nan}"


class _Binning:
    """Fine per-column bins and, for several columns, a coarse joint binning."""

    def __init__(self, sample: np.ndarray, max_bins: int, max_joint_labels: int):
        self.d = sample.shape[1]
        self.columns = [_ColumnBins(sample[:, j], max_bins) for j in range(self.d)]
        self.coarse: list[_ColumnBins] = []
        if self.d > 1:
            per = max(2, int(max_joint_labels ** (1.0 / self.d)) - 1)
            self.coarse = [_ColumnBins(sample[:, j], per) for j in range(self.d)]
            self.joint_dims = tuple(c.n_labels for c in self.coarse)

    def partitions(self) -> list[tuple[str, int]]:
        """Label spaces: ``("col", j)`` for every column, ``("joint", -1)`` for several."""
        parts = [("col", j) for j in range(self.d)]
        if self.d > 1:
            parts.append(("joint", -1))
        return parts

    def n_labels(self, part: tuple[str, int]) -> int:
        kind, j = part
        return self.columns[j].n_labels if kind == "col" else int(np.prod(self.joint_dims))

    def labels(self, part: tuple[str, int], x: np.ndarray) -> np.ndarray:
        kind, j = part
        if kind == "col":
            return self.columns[j].labels(x[:, j])
        coarse = [c.labels(x[:, i]) for i, c in enumerate(self.coarse)]
        return np.ravel_multi_index(coarse, self.joint_dims)

    def describe(self, part: tuple[str, int], mask: np.ndarray) -> str:
        kind, j = part
        if kind == "col":
            text = self.columns[j].describe(mask)
            return text if self.d == 1 else f"column {j}: {text}"
        return f"joint: {int(mask.sum())} of {mask.size} cells"


def _candidate_events(c_num: np.ndarray, c_den: np.ndarray, ordered: bool) -> list[np.ndarray]:
    """Unions of labels worth trying: ratio-ranked prefixes, and tails of an ordered column."""
    n_labels = c_num.size
    events: list[np.ndarray] = []
    seen = np.flatnonzero((c_num + c_den) > 0)
    ratio = (c_num[seen] + 0.5) / (c_den[seen] + 0.5)
    order = seen[np.argsort(-ratio, kind="stable")]
    for k in range(1, order.size + 1):
        m = np.zeros(n_labels, dtype=bool)
        m[order[:k]] = True
        events.append(m)
    if ordered:
        last = n_labels - 1  # the NaN label is not part of a tail
        for t in range(1, last + 1):  # t = last: every number (NaN excluded)
            low = np.zeros(n_labels, dtype=bool)
            low[:t] = True
            events.append(low)
            if t < last:
                high = np.zeros(n_labels, dtype=bool)
                high[t:last] = True
                events.append(high)
    return events


# -- the audit -----------------------------------------------------------------------------
@dataclass
class AuditResult:
    """What an audit found. ``epsilon_lb`` and ``delta_lb`` hold with confidence ``1 - alpha``."""

    name: str
    epsilon: float
    delta: float
    epsilon_lb: float
    delta_lb: float
    direction: str
    event: str
    k_num: int
    k_den: int
    n: int
    n_select: int
    alpha: float
    seconds: float

    @property
    def p_num(self) -> float:
        return self.k_num / self.n

    @property
    def p_den(self) -> float:
        return self.k_den / self.n

    def summary(self) -> str:
        claim = f"eps={self.epsilon:g}" + (f", delta={self.delta:g}" if self.delta else "")
        return (
            f"{self.name}: claimed {claim}; eps_lb={self.epsilon_lb:.4f} "
            f"delta_lb={self.delta_lb:.3g} [{self.direction}; S = {self.event}; "
            f"p={self.p_num:.4g} p'={self.p_den:.4g}; n={self.n:,}/side; "
            f"{self.seconds:.1f}s]"
        )


def _as_columns(y: Any) -> np.ndarray:
    arr = np.asarray(y, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError("a draw must return an (n,) or (n, d) array")
    return arr


def _draw_all(draw: Draw, dataset: Any, n: int, chunk: int) -> np.ndarray:
    parts = []
    done = 0
    while done < n:
        m = min(chunk, n - done)
        out = _as_columns(draw(dataset, m))
        if out.shape[0] != m:
            raise ValueError(f"draw returned {out.shape[0]} outputs, expected {m}")
        parts.append(out)
        done += m
    return np.concatenate(parts)


def _count_in(
    draw: Draw,
    dataset: Any,
    n: int,
    chunk: int,
    binning: _Binning,
    events: list[tuple[tuple[str, int], np.ndarray]],
) -> list[int]:
    """How many of ``n`` fresh outputs fall in each event (drawn in chunks, not stored)."""
    counts = [0] * len(events)
    done = 0
    while done < n:
        m = min(chunk, n - done)
        out = _as_columns(draw(dataset, m))
        if out.shape[0] != m:
            raise ValueError(f"draw returned {out.shape[0]} outputs, expected {m}")
        for i, (part, mask) in enumerate(events):
            counts[i] += int(mask[binning.labels(part, out)].sum())
        done += m
    return counts


def audit(
    draw: Draw,
    d: Any,
    d_prime: Any,
    *,
    epsilon: float,
    delta: float = 0.0,
    n: int,
    n_select: int | None = None,
    seed: int = 0,
    alpha: float = 1e-6,
    max_bins: int = 200,
    max_joint_labels: int = 4096,
    chunk: int = 1_000_000,
    objective: str = "epsilon",
    name: str = "",
) -> AuditResult:
    """Audit a mechanism on the neighbours ``d``, ``d_prime``; see the module docstring.

    ``draw(dataset, m)`` returns ``m`` independent outputs of the mechanism on ``dataset``, an
    array of shape ``(m,)`` or ``(m, d)`` (floats; NaN allowed). ``epsilon`` and ``delta`` are
    the claim. ``objective`` chooses what the selection batch maximises: ``"epsilon"``
    (``ε_lb`` at the claimed δ) or ``"delta"`` (``δ_lb`` at the claimed ε).
    """
    if objective not in ("epsilon", "delta"):
        raise ValueError("objective must be 'epsilon' or 'delta'")
    n_select = n if n_select is None else n_select
    a = alpha / 4.0
    start = time.perf_counter()
    with pq.testing.seed(seed):
        sel = [_draw_all(draw, ds, n_select, chunk) for ds in (d, d_prime)]
        # Bins need data: at most one per 50 outputs of the selection batch (joint: 20).
        binning = _Binning(
            np.concatenate(sel),
            max(2, min(max_bins, n_select // 50)),
            max(4, min(max_joint_labels, n_select // 20)),
        )

        # Step 3: per direction, the best event on the selection batch. Its first half ranks
        # the bins, its second half scores the candidate events (so that ranking and scoring
        # on the same samples do not favour events that merely fit their noise).
        half = n_select // 2
        rank = [x[:half] for x in sel]
        score = [x[half:] for x in sel]
        m = n_select - half
        chosen: list[tuple[tuple[str, int], np.ndarray]] = []
        for num, den in ((0, 1), (1, 0)):
            best: tuple[float, tuple[str, int], np.ndarray] | None = None
            for part in binning.partitions():
                size = binning.n_labels(part)
                r_num = np.bincount(binning.labels(part, rank[num]), minlength=size)
                r_den = np.bincount(binning.labels(part, rank[den]), minlength=size)
                events = _candidate_events(r_num, r_den, ordered=part[0] == "col")
                if not events:
                    continue
                masks = np.array(events)
                c_num = np.bincount(binning.labels(part, score[num]), minlength=size)
                c_den = np.bincount(binning.labels(part, score[den]), minlength=size)
                k_num, k_den = masks @ c_num, masks @ c_den
                if objective == "epsilon":
                    scores = _epsilon_bound(k_num, m, k_den, m, delta, a)
                else:
                    scores = _delta_bound(k_num, m, k_den, m, epsilon, a)
                i = int(np.argmax(scores))
                if best is None or scores[i] > best[0]:
                    best = (float(scores[i]), part, masks[i])
            assert best is not None
            chosen.append((best[1], best[2]))

        # Step 4: fresh samples, counted in the two fixed events.
        k_d = _count_in(draw, d, n, chunk, binning, chosen)
        k_dp = _count_in(draw, d_prime, n, chunk, binning, chosen)

    results = []
    for i, (num_counts, den_counts, label) in enumerate(
        ((k_d, k_dp, "D over D'"), (k_dp, k_d, "D' over D"))
    ):
        k_num, k_den = num_counts[i], den_counts[i]
        eps_lb = float(_epsilon_bound(k_num, n, k_den, n, delta, a)[0])
        delta_lb = float(_delta_bound(k_num, n, k_den, n, epsilon, a)[0])
        part, mask = chosen[i]
        results.append((eps_lb, delta_lb, label, binning.describe(part, mask), k_num, k_den))
    key = 0 if objective == "epsilon" else 1
    eps_lb, delta_lb, label, event, k_num, k_den = max(results, key=lambda r: r[key])
    return AuditResult(
        name=name,
        epsilon=float(epsilon),
        delta=float(delta),
        epsilon_lb=eps_lb,
        delta_lb=delta_lb,
        direction=label,
        event=event,
        k_num=k_num,
        k_den=k_den,
        n=n,
        n_select=n_select,
        alpha=alpha,
        seconds=time.perf_counter() - start,
    )
