"""Private key selection by noisy thresholding (Python API and the SQL GROUP BY fallback)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy._keyselect import KeySelectionMechanism


def test_single_contributor_keys_are_never_released_in_10000_trials():
    """At delta = 1e-6 each single-row key passes with probability exactly 1e-6, so 10,000
    independent trials release none with probability 1 - 1e-2 (and at a fixed seed, none)."""
    m = KeySelectionMechanism(Fraction(1, 2), Fraction(1, 10**6))
    keys = list(range(10_000))
    with pq.testing.seed(20):
        released, _ = m.release(keys, np.ones(10_000))
    assert released == []


def test_threshold_is_calibrated_to_delta():
    """P(1 + Lap(b) > tau) = exp(-(tau - 1)/b) / 2 must equal delta."""
    for eps, delta in [(Fraction(1), Fraction(1, 10**6)), (Fraction(1, 10), Fraction(1, 10**9))]:
        m = KeySelectionMechanism(eps, delta)
        b = 1 / float(eps)
        assert math.isclose(0.5 * math.exp(-(m.threshold - 1) / b), float(delta), rel_tol=1e-9)


def test_empirical_release_rate_of_a_rare_key_matches_delta():
    """With delta = 0.01 the release rate of a count-1 key over 200,000 trials is 0.01, with a
    standard error of sqrt(0.01·0.99/200000) = 2.2e-4: within 5 SE."""
    m = KeySelectionMechanism(Fraction(1), Fraction(1, 100))
    with pq.testing.seed(21):
        released, _ = m.release(list(range(200_000)), np.ones(200_000))
    rate = len(released) / 200_000
    assert abs(rate - 0.01) < 5 * math.sqrt(0.01 * 0.99 / 200_000)


def test_frame_select_keys_releases_common_keys_and_charges():
    df = pd.DataFrame({"city": ["Oslo"] * 400 + ["Bergen"] * 300 + ["Hamar"]})
    b = pq.Budget(epsilon=1, delta=1e-5)
    people = pq.PrivateFrame(df, b)
    with pq.testing.seed(5):
        keys = people.select_keys("city", epsilon=0.5, delta=1e-6)
    assert keys == ["Bergen", "Oslo"]
    assert b.spent == pq.Cost(0.5, 1e-6)


def test_select_keys_is_never_releasing_a_lone_row_over_many_calls():
    df = pd.DataFrame({"city": ["Oslo"] * 60 + ["Hamar"]})
    b = pq.Budget(epsilon=10**6, delta=0.5)
    people = pq.PrivateFrame(df, b)
    with pq.testing.seed(6):
        seen = [
            people.where(f"LENGTH(city) > {-i}").select_keys("city", 1, 1e-6) for i in range(300)
        ]
    assert all("Hamar" not in keys for keys in seen)


def test_user_level_select_keys_needs_and_uses_max_groups():
    rows = [{"pid": p, "city": c} for p in range(300) for c in ["Oslo", "Bergen", "Oslo"]]
    rows += [{"pid": 999, "city": "Hamar"}] * 50  # one person, many rows: still one unit
    b = pq.Budget(epsilon=10, delta=1e-3)
    visits = pq.PrivateFrame(pd.DataFrame(rows), b, privacy_unit="pid")
    with pytest.raises(pq.PrivacyError, match="max_groups"):
        visits.select_keys("city", epsilon=1, delta=1e-6)
    assert b.spent.is_zero
    with pq.testing.seed(7):
        keys = visits.select_keys("city", epsilon=1, delta=1e-6, max_groups=2)
    assert keys == ["Bergen", "Oslo"]  # Hamar has one contributor however many rows
    assert b.spent.epsilon == 2  # stability max_groups = 2


def test_sql_group_by_without_public_keys_selects_privately():
    from pinqpy.demo import PUMS_BOUNDS, load_pums

    s = pq.Session()
    b = pq.Budget(epsilon=10, delta=1e-5)
    s.register("pums", load_pums(), budget=b, bounds=PUMS_BOUNDS)
    with pytest.raises(pq.PrivacyError, match="delta"):
        s.sql("SELECT educ, COUNT(*) FROM pums GROUP BY educ", epsilon=1)
    assert b.spent.is_zero
    with pq.testing.seed(8):
        out = s.sql("SELECT educ, COUNT(*) AS n FROM pums GROUP BY educ", epsilon=1, delta=1e-6)
    assert b.spent == pq.Cost(1, 1e-6)
    # threshold 1 + 2·ln(1/2e-6) = 27.2 at scale 2: the large education groups are released
    assert {9, 13}.issubset(set(out["educ"]))
    true = load_pums().educ.value_counts()
    assert all(true[k] > 5 for k in out["educ"])


def test_accuracy_preview_spends_nothing_and_reads_nothing(monkeypatch):
    from pinqpy import _pandas_executor

    def boom(*a, **k):
        raise AssertionError("data was read")

    monkeypatch.setattr(_pandas_executor.PandasExecutor, "relation", boom)
    b = pq.Budget(epsilon=1)
    f = pq.PrivateFrame(pd.DataFrame({"x": [1.0]}), b, bounds={"x": (0, 10)})
    count = f.accuracy("count", epsilon=0.1)
    # Laplace(10): P(|noise| <= t) = 1 - e^{-t/10} = 0.95 at t = 10·ln 20
    assert math.isclose(count.error, 10 * math.log(20), rel_tol=1e-9)
    assert f.accuracy("sum", "x", epsilon=0.5).error == pytest.approx(20 * math.log(20))
    assert f.accuracy("median", "x", epsilon=1).unit == "ranks"
    assert f.concat(f).accuracy("count", epsilon=0.1).charge[repr(b)] == pq.Cost(0.2)
    assert b.spent.is_zero
