"""Statistical audits of releases as the API makes them: the one-step unknown-key histogram of
a group-bounded frame, a Gaussian split of a group-bounded frame, and COUNT(DISTINCT unit).

tests/audit/test_privacy_audit.py audits each mechanism on inputs written by hand. Here the
inputs are what the API itself gives the mechanism on two neighbouring datasets, and the
claim is what the API charged: each query runs once on ``D`` and once on ``D'`` (one person
added) with noise off, the mechanism it built and the exact values it was given are captured
at its ``release``, and the auditor (:mod:`tests.audit.auditor`) then draws that mechanism's
outputs on those exact values many times (vectorized) and bounds the privacy loss from below
against the charge. So a wrong structure, threshold, noise scale or charge anywhere between
the frame and the mechanism is visible, not only a faulty sampler.

* **One-step histogram**, ``bound_contributions(max_groups=3, max_rows_per_group=2,
  by="k").histogram("k", 1/6, delta)``: the new person's three keys of two rows against no
  such keys (the threshold's delta, ``objective="delta"``), and three shared keys near the
  threshold moved by two rows each (epsilon). Power: the same captured counts released with
  a threshold for one row per key (ignoring ``k``) must break the delta.
* **Gaussian split**: ``bound_contributions(max_groups=16, max_rows_per_group=1, by="k")``
  then ``partition("k", ...).count(epsilon, delta=...)`` on a zCDP budget; the new person
  adds one row to each of 16 parts. The audited output is the sum of those 16 released counts
  (post-processing, the statistic that sees an L2 shift best); the claim is the budget's rho
  converted at delta 0.01. Power: the claim of one part's rho (what a charge that forgot the
  spread over ``G`` parts would pay) must be exceeded.
* **COUNT(DISTINCT unit)** in SQL on a user-level table: the new person has 40 rows, and the
  count moves by one at the query's whole epsilon. Power: the same noise on the count of
  rows (which moves by 40) must exceed it.

Sizes as in test_privacy_audit.py: 200,000 outputs per dataset and batch, or 10 million with
``-m slow``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.accounting.models import zcdp_epsilon
from pinqpy.noise.keyselect import KeySelectionMechanism
from pinqpy.noise.mechanisms import CountMechanism

from .auditor import AuditResult, audit

SIZES = [
    pytest.param((200_000, 200_000), id="short"),
    pytest.param((10_000_000, 1_000_000), id="slow", marks=pytest.mark.slow),
]
POWER = (200_000, 200_000)


def run(audit_log: list[AuditResult], size: tuple[int, int], *args: Any, **kw: Any) -> AuditResult:
    n, n_select = size
    result = audit(*args, n=n, n_select=n_select, **kw)
    audit_log.append(result)
    return result


class Capture:
    """The mechanism objects of one class that ``release`` was called on, and their inputs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cls: type):
        self.calls: list[tuple[Any, tuple]] = []
        original = cls.release

        def release(mech: Any, *args: Any) -> Any:
            self.calls.append((mech, args))
            return original(mech, *args)

        monkeypatch.setattr(cls, "release", release)


# -- the one-step histogram of a group-bounded frame ----------------------------------------------
G, K = 3, 2
EPS_ROW = Fraction(1, G * K)  # epsilon 1 for the person (stability 6)
# A hair above G·P(X >= 24) at scale 6, where the threshold 2 + 24 is tight (see
# test_privacy_audit.py): the person's three keys pass with probability just under delta.
UNIT_DELTA = Fraction(G * np.exp(-4.0) / (1.0 + np.exp(-1.0 / 6.0)) * (1.0 + 1e-6))


def users_frame(users: list[list[str]]) -> pd.DataFrame:
    recs = [(pid, k) for pid, keys in enumerate(users) for k in keys]
    return pd.DataFrame(recs, columns=["pid", "k"]).astype({"pid": "int64", "k": "str"})


def one_step_inputs(
    monkeypatch: pytest.MonkeyPatch, d: pd.DataFrame, d2: pd.DataFrame
) -> tuple[KeySelectionMechanism, list[str], np.ndarray, np.ndarray, pq.Cost]:
    """The histogram's mechanism, the keys of either side and their exact counts on ``D`` and
    ``D'`` (0 where a key does not occur), and the charge."""
    cap = Capture(monkeypatch, KeySelectionMechanism)
    costs, exact = [], []
    for df in (d, d2):
        budget = pq.Budget(epsilon=10, delta=0.5)
        f = pq.PrivateFrame(df, budget, privacy_unit="pid")
        bounded = f.bound_contributions(max_groups=G, max_rows_per_group=K, by="k")
        with pq.testing.no_noise(), pq.testing.seed(7):
            bounded.histogram("k", EPS_ROW, delta=UNIT_DELTA)
        _mech, (keys, counts) = cap.calls[-1]
        exact.append(dict(zip(keys, np.asarray(counts).tolist(), strict=True)))
        costs.append(budget.spent)
    assert costs[0] == costs[1]
    m0, m1 = cap.calls[0][0], cap.calls[1][0]
    assert (m0.threshold, m0.max_groups, m0.max_rows) == (m1.threshold, G, K)
    keys = sorted(set(exact[0]) | set(exact[1]))
    c0 = np.array([exact[0].get(k, 0) for k in keys], dtype=np.int64)
    c1 = np.array([exact[1].get(k, 0) for k in keys], dtype=np.int64)
    return m1, keys, c0, c1, costs[0]


def one_step_draw(mech: KeySelectionMechanism):
    """``n`` releases of keys of exact counts ``counts`` (a key of count 0 does not occur):
    each key's released noisy count, NaN where it was not released."""

    def draw(counts: np.ndarray, n: int) -> np.ndarray:
        occurs = np.flatnonzero(counts > 0)
        out = np.full((n, len(counts)), np.nan)
        if len(occurs) == 0:
            return out
        ids = np.arange(n * len(occurs))
        kept, noisy = mech.release(list(ids), np.tile(counts[occurs], n))
        kept = np.asarray(kept, dtype=np.int64)
        out[kept // len(occurs), occurs[kept % len(occurs)]] = noisy
        return out

    return draw


NEW_PERSON = ["x", "x", "y", "y", "z", "z", "z"]  # three keys of two rows (a third z is dropped)


@pytest.mark.parametrize("size", SIZES)
def test_histogram_of_a_new_persons_keys_releases_them_with_probability_delta(
    size, audit_log, monkeypatch
):
    others = [["a", "a", "b"], ["b", "c"]] * 20
    mech, keys, c0, c1, cost = one_step_inputs(
        monkeypatch, users_frame(others), users_frame([*others, NEW_PERSON])
    )
    assert mech.threshold == K + 24 and cost == pq.Cost(1, UNIT_DELTA)
    new = [i for i, k in enumerate(keys) if k in "xyz"]
    assert c0[new].tolist() == [0, 0, 0] and c1[new].tolist() == [K, K, K]
    r = run(
        audit_log,
        size,
        one_step_draw(mech),
        c0,
        c1,
        epsilon=float(cost.epsilon),
        delta=float(cost.delta),
        seed=201,
        objective="delta",
        name="API histogram, group-bounded (3 new keys x 2 rows, delta)",
    )
    assert r.delta_lb <= cost.delta, r.summary()
    assert r.delta_lb >= 0.5 * cost.delta, f"the audit lost its power: {r.summary()}"


@pytest.mark.parametrize("size", SIZES)
def test_histogram_of_shared_keys_near_the_threshold_meets_its_epsilon(
    size, audit_log, monkeypatch
):
    # Twelve people with two rows in each of x, y, z: counts 24, two below the threshold 26.
    others = [["x", "x", "y", "y", "z", "z"]] * 12
    mech, _keys, c0, c1, cost = one_step_inputs(
        monkeypatch, users_frame(others), users_frame([*others, NEW_PERSON])
    )
    assert c0.tolist() == [24, 24, 24] and c1.tolist() == [26, 26, 26]
    r = run(
        audit_log,
        size,
        one_step_draw(mech),
        c0,
        c1,
        epsilon=float(cost.epsilon),
        delta=float(cost.delta),
        seed=202,
        name="API histogram, group-bounded (3 shared keys x 2 rows, epsilon)",
    )
    assert r.epsilon_lb <= cost.epsilon, r.summary()
    assert r.epsilon_lb >= 0.35, f"the audit lost its power: {r.summary()}"


def test_power_histogram_threshold_for_one_row_per_key(audit_log, monkeypatch):
    others = [["a", "a", "b"], ["b", "c"]] * 20
    mech, _keys, c0, c1, cost = one_step_inputs(
        monkeypatch, users_frame(others), users_frame([*others, NEW_PERSON])
    )
    broken = KeySelectionMechanism(mech.epsilon, mech.delta, max_groups=G, max_rows=1)
    assert broken.threshold == mech.threshold - (K - 1)
    r = run(
        audit_log,
        POWER,
        one_step_draw(broken),
        c0,
        c1,
        epsilon=float(cost.epsilon),
        delta=float(cost.delta),
        seed=203,
        objective="delta",
        name="BROKEN: histogram threshold ignoring the rows per key",
    )
    assert r.delta_lb > cost.delta, f"a broken threshold went undetected: {r.summary()}"


# -- a Gaussian split of a group-bounded frame -------------------------------------------------
SPLIT_G = 16
SPLIT_EPS, SPLIT_DELTA = 0.25, 1e-3  # the per-part count: sigma 8.23
CLAIM_DELTA = Fraction(1, 100)


def split_inputs(monkeypatch: pytest.MonkeyPatch):
    keys = list(range(SPLIT_G + 2))
    others = [[i % len(keys), (i + 1) % len(keys)] for i in range(40)]
    new = list(range(SPLIT_G)) * 2  # two rows in each of 16 parts: one is kept per part
    cap = Capture(monkeypatch, CountMechanism)
    exact, rhos = [], []
    for users in (others, [*others, new]):
        recs = [(pid, k) for pid, ks in enumerate(users) for k in ks]
        df = pd.DataFrame(recs, columns=["pid", "k"]).astype("int64")
        budget = pq.Budget(10, 0.1, accounting="zcdp")
        f = pq.PrivateFrame(df, budget, privacy_unit="pid")
        bounded = f.bound_contributions(max_groups=SPLIT_G, max_rows_per_group=1, by="k")
        with pq.testing.no_noise(), pq.testing.seed(11):
            bounded.partition("k", keys=keys).count(SPLIT_EPS, delta=SPLIT_DELTA)
        mech, (counts,) = cap.calls[-1]
        exact.append(np.asarray(counts, dtype=np.int64))
        rhos.append(budget._spent.rho)
    assert rhos[0] == rhos[1]
    moved = exact[1] - exact[0]
    assert moved[:SPLIT_G].tolist() == [1] * SPLIT_G and not moved[SPLIT_G:].any()
    return mech, exact[0], exact[1], rhos[0]


def split_draw(mech: CountMechanism):
    """The sum of the released counts of the new person's 16 parts."""

    def draw(counts: np.ndarray, n: int) -> np.ndarray:
        noisy = mech.release(np.tile(counts, n))[0].reshape(n, len(counts))
        return noisy[:, :SPLIT_G].sum(axis=1).astype(np.float64)

    return draw


@pytest.mark.parametrize("size", SIZES)
def test_gaussian_split_of_a_group_bounded_frame_meets_its_zcdp_charge(
    size, audit_log, monkeypatch
):
    mech, c0, c1, rho = split_inputs(monkeypatch)
    eps = float(zcdp_epsilon(rho, CLAIM_DELTA))
    r = run(
        audit_log,
        size,
        split_draw(mech),
        c0,
        c1,
        epsilon=eps,
        delta=float(CLAIM_DELTA),
        seed=204,
        name="API Gaussian split, 16 groups x 1 row (sum of the parts)",
    )
    assert r.epsilon_lb <= eps, r.summary()
    assert r.epsilon_lb >= 0.3, f"the audit lost its power: {r.summary()}"


def test_power_gaussian_split_charged_as_one_part(audit_log, monkeypatch):
    mech, c0, c1, rho = split_inputs(monkeypatch)
    eps = float(zcdp_epsilon(rho / SPLIT_G, CLAIM_DELTA))  # a charge that forgot the G parts
    r = run(
        audit_log,
        POWER,
        split_draw(mech),
        c0,
        c1,
        epsilon=eps,
        delta=float(CLAIM_DELTA),
        seed=205,
        name="BROKEN: Gaussian split charged for one part",
    )
    assert r.epsilon_lb > eps, f"an undercharged split went undetected: {r.summary()}"


# -- COUNT(DISTINCT unit) --------------------------------------------------------------------------
def distinct_inputs(monkeypatch: pytest.MonkeyPatch, sql: str):
    cap = Capture(monkeypatch, CountMechanism)
    exact, costs = [], []
    for people in (30, 31):
        rows = [1] * 29 + [2] + ([40] if people == 31 else [])  # the new person: 40 rows
        df = pd.DataFrame({"pid": np.repeat(np.arange(people), rows)}).astype("int64")
        budget = pq.Budget(10)
        s = pq.Session()
        s.register("t", df, budget=budget, privacy_unit="pid", max_rows=40)
        with pq.testing.no_noise():
            s.sql(sql, epsilon=1)
        mech, (counts,) = cap.calls[-1]
        exact.append(int(np.asarray(counts).reshape(-1)[0]))
        costs.append(budget.spent)
    assert costs[0] == costs[1]
    return mech, exact[0], exact[1], costs[0]


def count_draw(mech: CountMechanism):
    def draw(count: int, n: int) -> np.ndarray:
        return mech.release(np.full(n, count, dtype=np.int64))[0].astype(np.float64)

    return draw


@pytest.mark.parametrize("size", SIZES)
def test_count_distinct_unit_meets_its_epsilon(size, audit_log, monkeypatch):
    mech, c0, c1, cost = distinct_inputs(monkeypatch, "SELECT COUNT(DISTINCT pid) AS n FROM t")
    assert (c0, c1) == (30, 31) and cost == pq.Cost(1)
    r = run(
        audit_log,
        size,
        count_draw(mech),
        c0,
        c1,
        epsilon=float(cost.epsilon),
        seed=206,
        name="SQL COUNT(DISTINCT pid), a person of 40 rows",
    )
    assert r.epsilon_lb <= cost.epsilon, r.summary()
    assert r.epsilon_lb >= 0.5, f"the audit lost its power: {r.summary()}"


def test_power_count_distinct_read_as_a_count_of_rows(audit_log, monkeypatch):
    mech, _c0, _c1, cost = distinct_inputs(monkeypatch, "SELECT COUNT(DISTINCT pid) AS n FROM t")
    # The same noise on the rows (31 vs 71 with the new person's 40): what charging a count
    # of people at the noise of one person, but counting rows, would release.
    r = run(
        audit_log,
        POWER,
        count_draw(mech),
        31,
        71,
        epsilon=float(cost.epsilon),
        seed=207,
        name="BROKEN: COUNT(DISTINCT pid) computed over rows",
    )
    assert r.epsilon_lb > cost.epsilon, f"a row count went undetected: {r.summary()}"
