"""Statistical privacy audits: every mechanism, run many times on adversarial neighbours.

Each test runs a mechanism ``n`` times on each of two neighbouring datasets ``D``, ``D'`` (one
row added) and asks the auditor of :mod:`tests.audit.auditor` for a lower confidence bound on
the privacy loss:

* a first, separate batch picks the most distinguishing event ``S`` (a union of output bins:
  likelihood-ratio-ranked bins or a tail), so the choice cannot bias the estimate;
* a second batch estimates ``p = P[M(D) ∈ S]`` and ``p' = P[M(D') ∈ S]`` with exact one-sided
  Clopper–Pearson bounds (``scipy.stats.beta``), both directions, Bonferroni over the four
  bounds at an overall confidence of ``1 - 1e-6``;
* ``ε_lb = ln((p_lo - δ)/p'_hi)``, and for a claim about δ at a given ε,
  ``δ_lb = p_lo - e^ε·p'_hi``.

**The assertions.** For every pinqpy mechanism ``ε_lb <= ε`` claimed (resp. ``δ_lb <= δ``): if
the mechanism keeps its claim this fails with probability at most 1e-6, so a failure is a
finding, not flakiness. Each honest audit also checks a loose *floor* on ``ε_lb`` (about half
of what the short run observes), so an audit that has silently become vacuous -- an event
never found, a mechanism far noisier than its claim -- is noticed too. Then **power**: the
same auditor, at the same sample sizes, must report ``ε_lb > ε`` (resp. ``δ_lb > δ``) for
deliberately broken mechanisms, proving these tests can fail.

**Adversarial neighbours** (the pair decides how much of the loss is visible):

* count: 0 vs 1 rows (Laplace: every tail ``{y >= t}``, ``t >= 1``, has ratio ``e^ε``);
  the Gaussian count at ``δ = 1e-2`` (where the profile is visible with 200,000 samples) and
  at ``δ = 1e-5``;
* sum over ``[-5, 3]``: no rows vs one row at the bound of largest magnitude, -5;
* mean over ``[0, 10]``: three rows at 0 vs the same plus one at 10 (an extreme row in a small
  group), released with its confidence interval (the interval is computed from the two noisy
  measurements, so it shows more of them than the value alone);
* variance over ``[0, 10]``: ten rows at 10 vs the same plus one at 0, with its interval;
* quantile (grid 0..20, all of epsilon on the selection): for ``q = 0.9`` ten rows at 0, and
  the added row at 20 breaks the tie of every candidate in ``(0, 20)`` (their score jumps from
  -1 to -0.1); for ``q = 0.5`` eleven rows at 10 and one at 2, plus a row at 20 (found by an
  exact search over small datasets for the pair whose loss is most visible at these sizes);
  and the default mechanism (a quarter of epsilon on the noisy histogram behind ``ci()``),
  released with its interval;
* argmax: counts ``[0, 3, 3]`` vs ``[1, 3, 3]`` (the unlikely candidate gains a row: its
  probability rises by almost ``e^ε``);
* key selection: a key held by one row (released with probability exactly δ) vs no such key;
  and a key present in both, with counts 4 and 5 near the threshold;
* the one-step release (keys and their noisy counts) for a unit of G = 3 keys of k = 2 rows:
  its three new keys vs none (δ), and three shared keys near the threshold moved by 2 rows
  each (ε); the Gaussian variant's lone row (δ) and present key (ε);
* end to end: a :class:`~pinqpy.PrivateFrame` partitioned into three parts, the neighbour one
  row in one part; the whole released Series must meet the per-query ε (parallel
  composition), and the budget is charged ε once.

Outputs are binned, never given a density, so the audits hold unchanged when the continuous
samplers are replaced by exact discrete ones (integers, lattice points). Randomness comes from
``pinqpy.testing.seed`` (a ``SeededSource``), and every release is one vectorized call over
up to a million trials.

**Broken mechanisms** (each must be caught): Laplace count noise at half the scale; the
Gaussian count at half its sigma; a sum calibrated to ``|hi|`` when ``lo = -5``; PINQ's
NoisyAverage (noise divided by the exact count, redrawn until inside the bounds: about 2ε);
the ``q = 0.9`` exponential mechanism without its factor 2 (``P ∝ exp(ε·u)``, as PINQ's
NoisyOrderStatistic: 1.8ε); report-noisy-max at half the Gumbel scale; a key-selection
threshold one too low; a one-step threshold set for one key per unit when a unit holds
three; and one row counted in two parts of a partition that is charged
once (2ε, visible only jointly).

**Running.** ``pytest tests/audit`` runs the short audits (200,000 outputs per dataset per
batch -- 60,000 for the quantile with its interval, 2,000 frames for the end-to-end audit;
about 20 s). ``pytest -m slow tests/audit`` (or ``PINQPY_SLOW_AUDITS=1``; see ``conftest.py``)
runs the same audits with 10 million outputs per dataset (100,000 frames end to end) for
tighter bounds; they take minutes. The bounds observed are printed in the terminal summary.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtri

import pinqpy as pq
from pinqpy.noise.keyselect import KeySelectionMechanism
from pinqpy.noise.mechanisms import (
    QUANTILE_CI_SHARE,
    ArgmaxMechanism,
    CountMechanism,
    MeanMechanism,
    QuantileMechanism,
    SumMechanism,
    VarianceMechanism,
    gaussian_sigma,
)
from pinqpy.noise.source import current_source

from .auditor import AuditResult, audit

SHORT = 200_000
LONG = 10_000_000
LONG_SELECT = 1_000_000

SIZES = [
    pytest.param((SHORT, SHORT), id="short"),
    pytest.param((LONG, LONG_SELECT), id="slow", marks=pytest.mark.slow),
]

EPS = 1.0


def run(audit_log: list[AuditResult], size: tuple[int, int], *args: Any, **kw: Any) -> AuditResult:
    n, n_select = size
    result = audit(*args, n=n, n_select=n_select, **kw)
    audit_log.append(result)
    return result


def check_honest(r: AuditResult, floor: float) -> None:
    """The claim holds (at confidence 1 - 1e-6) and the audit is not vacuous."""
    assert r.epsilon_lb <= r.epsilon, r.summary()
    assert r.epsilon_lb >= floor, f"the audit lost its power: {r.summary()}"


def check_broken(r: AuditResult) -> None:
    assert r.epsilon_lb > r.epsilon, f"a broken mechanism went undetected: {r.summary()}"


# -- noise for the broken mechanisms (from the seeded source, like the real ones) ----------
def uniforms(n: int) -> np.ndarray:
    return current_source().uniform(n)


def laplace(n: int, scale: float) -> np.ndarray:
    """Laplace(0, scale) by inversion."""
    u = uniforms(n)
    return scale * np.where(u < 0.5, np.log(2.0 * u), -np.log(2.0 - 2.0 * u))


def normal(n: int, sigma: float) -> np.ndarray:
    return sigma * ndtri(uniforms(n))


# -- draws ---------------------------------------------------------------------------------
def additive_draw(mech: Any, dtype: type = np.int64):
    """Outputs of a count/sum mechanism whose exact aggregate is the dataset."""

    def draw(value: float, n: int) -> np.ndarray:
        exact = np.full(n, value, dtype=dtype)
        return mech.release(exact)[0]

    return draw


# -- counts ----------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES)
def test_count_laplace(size, audit_log):
    mech = CountMechanism(EPS)
    r = run(audit_log, size, additive_draw(mech), 0, 1, epsilon=EPS, seed=101, name="count")
    check_honest(r, 0.5)


@pytest.mark.parametrize("delta", [1e-2, 1e-5])
@pytest.mark.parametrize("size", SIZES)
def test_count_gaussian(size, delta, audit_log):
    mech = CountMechanism(EPS, delta=delta)
    r = run(
        audit_log,
        size,
        additive_draw(mech),
        0,
        1,
        epsilon=EPS,
        delta=delta,
        seed=102,
        name=f"count gaussian delta={delta:g}",
    )
    check_honest(r, 0.4 if delta >= 1e-2 else 0.2)


# -- sums ------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES)
def test_sum(size, audit_log):
    mech = SumMechanism(EPS, -5, 3)
    draw = additive_draw(mech, np.float64)
    r = run(audit_log, size, draw, 0.0, -5.0, epsilon=EPS, seed=103, name="sum")
    check_honest(r, 0.5)


# -- means and variances -----------------------------------------------------------------------
def mean_draw(mech: MeanMechanism):
    """The released mean and its 50% confidence interval (three columns)."""

    def draw(rows: list[float], n: int) -> np.ndarray:
        s, _, c = mech.lattice.value_sums(rows)  # exact lattice-index sums
        values, acc = mech.release(np.full(n, s), np.full(n, c, dtype=np.int64))
        return np.column_stack([values, *acc.interval(0.5)])

    return draw


@pytest.mark.parametrize("size", SIZES)
def test_mean(size, audit_log):
    mech = MeanMechanism(EPS, 0, 10)
    d = [0.0, 0.0, 0.0]
    r = run(audit_log, size, mean_draw(mech), d, [*d, 10.0], epsilon=EPS, seed=104, name="mean")
    check_honest(r, 0.5)


def variance_draw(mech: VarianceMechanism):
    def draw(rows: list[float], n: int) -> np.ndarray:
        s, q, c = mech.lattice.value_sums(rows)  # exact lattice-index sums
        values, acc = mech.release([s] * n, [q] * n, np.full(n, c, dtype=np.int64))
        return np.column_stack([values, *acc.interval(0.5)])

    return draw


@pytest.mark.parametrize("size", SIZES)
def test_variance(size, audit_log):
    mech = VarianceMechanism(EPS, 0, 10)
    d = [10.0] * 10
    r = run(
        audit_log, size, variance_draw(mech), d, [*d, 0.0], epsilon=EPS, seed=105, name="variance"
    )
    check_honest(r, 0.4)


# -- quantiles ---------------------------------------------------------------------------------
QUANTILE_PAIRS = {
    0.9: ([0.0] * 10, 20.0),
    0.5: ([10.0] * 11 + [2.0], 20.0),
}


def quantile_draw(mech: QuantileMechanism, with_ci: bool = False):
    def draw(rows: list[float], n: int) -> np.ndarray:
        eq, gap = mech.bin_counts(np.asarray(rows, dtype=np.float64))
        eq = np.broadcast_to(eq, (n, eq.shape[1]))
        gap = np.broadcast_to(gap, (n, gap.shape[1]))
        values, acc = mech.release(eq, gap)
        if not with_ci:
            return values
        return np.column_stack([values, *acc.interval(0.5)])

    return draw


def quantile_chunk(mech: QuantileMechanism) -> int:
    return max(1, 1_000_000 // len(mech.candidates))


@pytest.mark.parametrize("q", [0.5, 0.9])
@pytest.mark.parametrize("size", SIZES)
def test_quantile(size, q, audit_log):
    mech = QuantileMechanism(EPS, q, 0, 20, ci_share=0)
    d, extra = QUANTILE_PAIRS[q]
    r = run(
        audit_log,
        size,
        quantile_draw(mech),
        d,
        [*d, extra],
        epsilon=EPS,
        seed=106,
        chunk=quantile_chunk(mech),
        name=f"quantile q={q}",
    )
    check_honest(r, 0.5)


# The noisy histogram behind ``ci()`` costs 41 discrete-Laplace draws per release: fewer trials.
CI_SIZES = [
    pytest.param((60_000, 60_000), id="short"),
    pytest.param((LONG, LONG_SELECT), id="slow", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("size", CI_SIZES)
def test_quantile_with_its_interval(size, audit_log):
    """The ``ci=True`` budget split: 3/4 selection, 1/4 a noisy histogram behind ``ci()``."""
    mech = QuantileMechanism(EPS, 0.5, 0, 20, ci_share=QUANTILE_CI_SHARE)
    d, extra = QUANTILE_PAIRS[0.5]
    r = run(
        audit_log,
        size,
        quantile_draw(mech, with_ci=True),
        d,
        [*d, extra],
        epsilon=EPS,
        seed=107,
        chunk=quantile_chunk(mech),
        name="quantile q=0.5 with ci",
    )
    check_honest(r, 0.3)


# -- argmax ----------------------------------------------------------------------------------
def argmax_draw(mech: ArgmaxMechanism):
    def draw(counts: list[int], n: int) -> np.ndarray:
        c = np.broadcast_to(np.asarray(counts, dtype=np.int64), (n, len(counts)))
        return np.asarray(mech.release(c)[0], dtype=np.float64)

    return draw


ARGMAX_PAIR = ([0, 3, 3], [1, 3, 3])


@pytest.mark.parametrize("size", SIZES)
def test_argmax(size, audit_log):
    mech = ArgmaxMechanism(EPS, 3)
    r = run(audit_log, size, argmax_draw(mech), *ARGMAX_PAIR, epsilon=EPS, seed=108, name="argmax")
    check_honest(r, 0.5)


# -- key selection ---------------------------------------------------------------------------
# A δ at which the integer threshold of the exact mechanism is tight: with discrete Laplace
# noise of scale 1 a lone row's key passes the threshold 1 + 4 with probability
# P(X >= 4) = e^-4/(1 + e^-1) ≈ 0.0134, and δ is a hair above that (a δ between two such values
# would leave the audit a factor up to e of slack).
KEY_DELTA = Fraction(math.exp(-4.0) / (1.0 + math.exp(-1.0)) * (1.0 + 1e-6))


def key_draw(mech: KeySelectionMechanism):
    """The key's released noisy count, or NaN when it is not released (or not in the data)."""

    def draw(count: int, n: int) -> np.ndarray:
        out = np.full(n, np.nan)
        if count == 0:  # the key does not occur: nothing about it can be released
            return out
        kept, noisy = mech.release(list(range(n)), np.full(n, count, dtype=np.int64))
        out[np.asarray(kept, dtype=np.int64)] = noisy
        return out

    return draw


@pytest.mark.parametrize("size", SIZES)
def test_key_selection_lone_row_is_released_with_probability_delta(size, audit_log):
    """The δ part: a key only one row holds may be released with probability at most δ."""
    mech = KeySelectionMechanism(Fraction(1), KEY_DELTA)
    r = run(
        audit_log,
        size,
        key_draw(mech),
        0,
        1,
        epsilon=EPS,
        delta=float(KEY_DELTA),
        seed=109,
        objective="delta",
        name="key selection (lone row, delta)",
    )
    assert r.delta_lb <= KEY_DELTA, r.summary()
    assert r.delta_lb >= 0.5 * KEY_DELTA, f"the audit lost its power: {r.summary()}"


@pytest.mark.parametrize("size", SIZES)
def test_key_selection_present_key(size, audit_log):
    """The ε part: a key in both datasets, its count near the threshold."""
    mech = KeySelectionMechanism(Fraction(1), KEY_DELTA)
    r = run(
        audit_log,
        size,
        key_draw(mech),
        4,
        5,
        epsilon=EPS,
        delta=float(KEY_DELTA),
        seed=110,
        name="key selection (present key)",
    )
    check_honest(r, 0.5)


# -- one-step release: units of G keys x k rows, and Gaussian noise ----------------------------
# G = 3 keys of k = 2 rows per unit, epsilon 1/6 per row (scale G·k/ε = 6 for ε = 1 per unit).
# δ is a hair above G·P(X >= 24) = 3·e^-4/(1 + e^-1/6) ≈ 0.0298, where the threshold 2 + 24 is
# tight: the unit's three keys of count 2 pass with probability 1 - (1 - P(X >= 24))^3 ≈
# 0.0295, just under δ (a union bound loses only the overlap).
UNIT_G, UNIT_K = 3, 2
UNIT_EPS_ROW = Fraction(1, UNIT_G * UNIT_K)
UNIT_DELTA = Fraction(UNIT_G * math.exp(-4.0) / (1.0 + math.exp(-1.0 / 6.0)) * (1.0 + 1e-6))
# The Gaussian variant (one row per unit): noise of a (1, 0.01) count, threshold δ 0.03.
GAUSS_NOISE_DELTA = Fraction(1, 100)
GAUSS_KEY_DELTA = Fraction(3, 100)


def unit_draw(mech: KeySelectionMechanism, groups: int):
    """The released noisy counts of a unit's ``groups`` keys (NaN where not released), each
    key holding ``count`` rows (0: the keys do not occur)."""

    def draw(count: int, n: int) -> np.ndarray:
        out = np.full(n * groups, np.nan)
        if count == 0:
            return out.reshape(n, groups)
        kept, noisy = mech.release(list(range(n * groups)), np.full(n * groups, count))
        out[np.asarray(kept, dtype=np.int64)] = noisy
        return out.reshape(n, groups)

    return draw


@pytest.mark.parametrize("size", SIZES)
def test_one_step_unit_of_g_keys_released_with_probability_delta(size, audit_log):
    """The δ part for a unit of G = 3 new keys with k = 2 rows each: whether any of them (and
    which noisy counts) is released, against no such keys."""
    mech = KeySelectionMechanism(UNIT_EPS_ROW, UNIT_DELTA, max_groups=UNIT_G, max_rows=UNIT_K)
    assert mech.threshold == UNIT_K + 24
    r = run(
        audit_log,
        size,
        unit_draw(mech, UNIT_G),
        0,
        UNIT_K,
        epsilon=EPS,
        delta=float(UNIT_DELTA),
        seed=112,
        objective="delta",
        name="one-step release (unit of 3 keys x 2 rows, delta)",
    )
    assert r.delta_lb <= UNIT_DELTA, r.summary()
    assert r.delta_lb >= 0.5 * UNIT_DELTA, f"the audit lost its power: {r.summary()}"


@pytest.mark.parametrize("size", SIZES)
def test_one_step_unit_counts_on_shared_keys(size, audit_log):
    """The ε part: the unit's three keys exist already (count 24, near the threshold 26) and
    the unit adds 2 rows to each: the released counts move by G·k = 6 in L1 at scale 6."""
    mech = KeySelectionMechanism(UNIT_EPS_ROW, UNIT_DELTA, max_groups=UNIT_G, max_rows=UNIT_K)

    def draw(extra: int, n: int) -> np.ndarray:
        return unit_draw(mech, UNIT_G)(24 + extra, n)

    r = run(
        audit_log,
        size,
        draw,
        0,
        UNIT_K,
        epsilon=EPS,
        delta=float(UNIT_DELTA),
        seed=113,
        name="one-step release (unit of 3 keys x 2 rows, shared keys)",
    )
    check_honest(r, 0.35)


@pytest.mark.parametrize("size", SIZES)
def test_one_step_gaussian_lone_row(size, audit_log):
    """The δ part of the Gaussian variant: a key held by one row passes the threshold with
    probability at most the threshold's δ (here 0.028, from the noise's exact tail)."""
    mech = KeySelectionMechanism(Fraction(1), GAUSS_KEY_DELTA, noise_delta=GAUSS_NOISE_DELTA)
    assert 0.9 * GAUSS_KEY_DELTA < mech.pass_probability(1) <= GAUSS_KEY_DELTA
    r = run(
        audit_log,
        size,
        key_draw(mech),
        0,
        1,
        epsilon=EPS,
        delta=float(GAUSS_KEY_DELTA),
        seed=114,
        objective="delta",
        name="one-step release (Gaussian, lone row, delta)",
    )
    assert r.delta_lb <= GAUSS_KEY_DELTA, r.summary()
    assert r.delta_lb >= 0.5 * GAUSS_KEY_DELTA, f"the audit lost its power: {r.summary()}"


@pytest.mark.parametrize("size", SIZES)
def test_one_step_gaussian_present_key(size, audit_log):
    """The ε part of the Gaussian variant: a key near the threshold, counts 4 and 5; the
    claim is (1, noise δ + threshold δ)."""
    mech = KeySelectionMechanism(Fraction(1), GAUSS_KEY_DELTA, noise_delta=GAUSS_NOISE_DELTA)
    r = run(
        audit_log,
        size,
        key_draw(mech),
        4,
        5,
        epsilon=EPS,
        delta=float(GAUSS_KEY_DELTA + GAUSS_NOISE_DELTA),
        seed=115,
        name="one-step release (Gaussian, present key)",
    )
    check_honest(r, 0.3)


# -- end to end: a partition of a PrivateFrame -------------------------------------------------
E2E_ROWS = pd.DataFrame({"g": ["a", "a", "b", "c", "c", "c"]})
E2E_NEIGHBOUR = pd.concat([E2E_ROWS, pd.DataFrame({"g": ["b"]})], ignore_index=True)
E2E_SIZES = [
    pytest.param((2_000, 1_000), id="short"),
    pytest.param((100_000, 20_000), id="slow", marks=pytest.mark.slow),
]


def partition_counts(df: pd.DataFrame, n: int) -> np.ndarray:
    """``n`` fresh frames (so the answer cache never repeats an answer), one Series each."""
    out = np.empty((n, 3))
    for i in range(n):
        budget = pq.Budget(epsilon=EPS)
        parts = pq.PrivateFrame(df, budget).partition("g", keys=["a", "b", "c"])
        out[i] = parts.count(epsilon=EPS).to_numpy(dtype=np.float64)
        if i == 0:  # parallel composition: one charge of ε for the three parts
            assert budget.spent.epsilon == EPS
    return out


@pytest.mark.parametrize("size", E2E_SIZES)
def test_partition_end_to_end(size, audit_log):
    r = run(
        audit_log,
        size,
        partition_counts,
        E2E_ROWS,
        E2E_NEIGHBOUR,
        epsilon=EPS,
        seed=111,
        max_bins=50,
        name="PrivateFrame partition count (3 parts)",
    )
    check_honest(r, 0.3)


# -- power: broken mechanisms must be caught by the same auditor at the same sizes -------------
POWER = (SHORT, SHORT)


def test_power_laplace_at_half_the_scale(audit_log):
    broken = CountMechanism(2 * EPS)  # noise for 2ε, claimed as ε
    r = run(
        audit_log,
        POWER,
        additive_draw(broken),
        0,
        1,
        epsilon=EPS,
        seed=201,
        name="BROKEN count: Laplace at half the scale",
    )
    check_broken(r)


def test_power_gaussian_at_half_sigma(audit_log):
    sigma = gaussian_sigma(1, EPS, 1e-2) / 2  # the analytic Gaussian's sigma, halved

    def draw(count: int, n: int) -> np.ndarray:
        return count + normal(n, sigma)

    r = run(
        audit_log,
        POWER,
        draw,
        0,
        1,
        epsilon=EPS,
        delta=1e-2,
        seed=202,
        name="BROKEN count: Gaussian at half sigma",
    )
    check_broken(r)


def test_power_sum_calibrated_to_the_wrong_bound(audit_log):
    # Noise for the sensitivity max(0, 3) = 3 of bounds (0, 3), but a row can be -5: the
    # classic bug of taking hi as the sensitivity when lo < 0. True loss 5/3·ε.
    broken = SumMechanism(EPS, 0, 3)
    r = run(
        audit_log,
        POWER,
        additive_draw(broken, np.float64),
        0.0,
        -5.0,
        epsilon=EPS,
        seed=203,
        name="BROKEN sum: sensitivity hi instead of max(|lo|, |hi|)",
    )
    check_broken(r)


def pinq_noisy_average(rows: list[float], n: int, epsilon: float) -> np.ndarray:
    """PINQ's NoisyAverage (values in [-1, 1]): ``(tally + Lap(2/ε))/count``, redrawn until it
    lands in [-1, 1]; Uniform(-1, 1) for no rows. Both the count in the denominator and the
    renormalisation of the rejection step depend on the data, so it can lose about 2ε."""
    count = len(rows)
    if count == 0:
        return 2.0 * uniforms(n) - 1.0
    tally = float(np.clip(rows, -1, 1).sum())
    out = np.empty(n)
    todo = np.arange(n)
    while todo.size:
        cand = (tally + laplace(todo.size, 2.0 / epsilon)) / count
        ok = (cand >= -1.0) & (cand <= 1.0)
        out[todo[ok]] = cand[ok]
        todo = todo[~ok]
    return out


def test_power_pinq_noisy_average(audit_log):
    # Twenty rows at -1, plus one at +1: near y = -1 the density ratio approaches
    # e^ε·(2 - e^-ε)·n/(n+1) (the rejection step's normaliser adds the second factor).
    d = [-1.0] * 20
    r = run(
        audit_log,
        POWER,
        lambda rows, n: pinq_noisy_average(rows, n, EPS),
        d,
        [*d, 1.0],
        epsilon=EPS,
        seed=204,
        name="BROKEN mean: PINQ NoisyAverage",
    )
    check_broken(r)


def test_power_quantile_without_the_factor_two(audit_log):
    # P(c) ∝ exp(ε·u(c)) as PINQ's NoisyOrderStatistic (no 1/(2Δu)): for q = 0.9 this is the
    # mechanism below with coefficient 1.8ε/(2·0.9) = ε, and it loses up to 1.8ε.
    q = 0.9
    broken = QuantileMechanism(2 * q * EPS, q, 0, 20, ci_share=0)
    d, extra = QUANTILE_PAIRS[q]
    r = run(
        audit_log,
        POWER,
        quantile_draw(broken),
        d,
        [*d, extra],
        epsilon=EPS,
        seed=205,
        chunk=quantile_chunk(broken),
        name="BROKEN quantile q=0.9: exp(eps*u) without the factor 2",
    )
    check_broken(r)


def test_power_argmax_at_half_the_scale(audit_log):
    broken = ArgmaxMechanism(2 * EPS, 3)  # Gumbel noise of scale 1/(2ε), claimed as ε
    r = run(
        audit_log,
        POWER,
        argmax_draw(broken),
        *ARGMAX_PAIR,
        epsilon=EPS,
        seed=206,
        name="BROKEN argmax: Gumbel at half the scale",
    )
    check_broken(r)


def test_power_key_selection_threshold_too_low(audit_log):
    # The threshold one lower (calibrated to 3δ; an off-by-one such as ``>`` for ``>=`` on a
    # shifted count): a lone row's key is released with probability e·δ.
    broken = KeySelectionMechanism(Fraction(1), 3 * KEY_DELTA)
    assert broken.threshold == KeySelectionMechanism(Fraction(1), KEY_DELTA).threshold - 1
    r = run(
        audit_log,
        POWER,
        key_draw(broken),
        0,
        1,
        epsilon=EPS,
        delta=float(KEY_DELTA),
        seed=207,
        objective="delta",
        name="BROKEN key selection: threshold one too low",
    )
    assert r.delta_lb > KEY_DELTA, f"a broken mechanism went undetected: {r.summary()}"


def test_power_one_step_threshold_ignores_groups(audit_log):
    # The threshold set for one key per unit (G = 1) while a unit holds 3 new keys of 2
    # rows: each passes with probability about 3 times δ/3, the union about 2.6·δ.
    broken = KeySelectionMechanism(UNIT_EPS_ROW, UNIT_DELTA, max_groups=1, max_rows=UNIT_K)
    r = run(
        audit_log,
        POWER,
        unit_draw(broken, UNIT_G),
        0,
        UNIT_K,
        epsilon=EPS,
        delta=float(UNIT_DELTA),
        seed=208,
        objective="delta",
        name="BROKEN one-step release: threshold for one key per unit",
    )
    assert r.delta_lb > UNIT_DELTA, f"a broken mechanism went undetected: {r.summary()}"


def test_power_one_row_in_two_parts(audit_log):
    # Parallel composition misapplied: a row that lands in two parts (stability 2) while the
    # release of both parts is charged ε once. The joint loss is 2ε; the auditor sees it only
    # through events on both columns together (the joint bins).
    mech = CountMechanism(EPS)

    def draw(row_added: int, n: int) -> np.ndarray:
        exact = np.full(2 * n, row_added, dtype=np.int64)
        return mech.release(exact)[0].reshape(n, 2)

    r = run(
        audit_log,
        POWER,
        draw,
        0,
        1,
        epsilon=EPS,
        seed=208,
        name="BROKEN partition: one row in two parts, charged once",
    )
    check_broken(r)


def test_the_auditor_is_calibrated_on_an_exact_mechanism(audit_log):
    """Randomized response with odds exactly e^ε: the bound is close to ε but never above."""
    eps = math.log(3.0)

    def coin(p: float, n: int) -> np.ndarray:
        return (uniforms(n) < p).astype(np.float64)

    r = run(audit_log, POWER, coin, 0.75, 0.25, epsilon=eps, seed=209, name="randomized response")
    assert eps - 0.15 < r.epsilon_lb <= eps, r.summary()
