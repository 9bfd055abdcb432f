"""Private key selection by noisy thresholding (Python API and the SQL GROUP BY fallback)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.noise.keyselect import KeySelectionMechanism

mp = pytest.importorskip("mpmath")


def pass_probability(eps: Fraction, threshold: int) -> mp.mpf:
    """P(1 + X >= threshold) for X discrete Laplace of scale 1/eps, summed from the pmf."""
    with mp.workdps(50):
        a = mp.mpf(eps.numerator) / eps.denominator
        q = mp.exp(-a)
        k = threshold - 1
        return mp.nsum(lambda x: (1 - q) / (1 + q) * q**x, [k, mp.inf])


def test_single_contributor_keys_are_never_released_in_10000_trials():
    """At delta = 1e-6 each single-row key passes with probability at most 1e-6 (here
    q^k/(1+q) = 8.5e-7 at k = 27, b = 2), so 10,000 independent trials release none with
    probability 1 - 8.5e-3 (and at a fixed seed, none)."""
    m = KeySelectionMechanism(Fraction(1, 2), Fraction(1, 10**6))
    assert m.threshold == 28
    keys = list(range(10_000))
    with pq.testing.seed(20):
        released, _ = m.release(keys, np.ones(10_000, dtype=np.int64))
    assert released == []


@pytest.mark.parametrize(
    ("eps", "delta"),
    [
        (Fraction(1), Fraction(1, 10**6)),
        (Fraction(1, 10), Fraction(1, 10**9)),
        (Fraction(1, 2), Fraction(1, 100)),
        (Fraction(3), Fraction(1, 10**12)),
        (Fraction(2, 7), Fraction(1, 3)),
    ],
)
def test_threshold_is_the_least_integer_meeting_delta(eps, delta):
    """P(count-1 key passes) = P(X >= tau - 1) = e^{-k/b}/(1 + e^{-1/b}) <= delta at the
    threshold, and the next lower integer threshold would exceed delta (checked with a 50-digit
    sum of the pmf, independently of the closed form)."""
    m = KeySelectionMechanism(eps, delta)
    assert isinstance(m.threshold, int) and m.threshold >= 2
    p = pass_probability(eps, m.threshold)
    assert p <= delta
    assert m.threshold == 2 or pass_probability(eps, m.threshold - 1) > delta
    # the closed form of the module docstring agrees with the pmf sum
    k = m.threshold - 1
    with mp.workdps(50):
        a = mp.mpf(eps.numerator) / eps.denominator  # 1/b
        closed = mp.exp(-k * a) / (1 + mp.exp(-a))
        assert abs(closed - p) <= p * mp.mpf("1e-40")
    assert m.pass_probability(1) == pytest.approx(float(p), rel=1e-12)


def test_empirical_release_rate_of_a_rare_key_matches_its_probability():
    """With epsilon 1 and delta = 0.01 the threshold is 6 (k = 5: e^-5/(1 + e^-1) = 0.0049;
    k = 4 would give 0.0134 > 0.01). The release rate of a count-1 key over 200,000 trials is
    binomial: within 5 standard errors of that probability."""
    m = KeySelectionMechanism(Fraction(1), Fraction(1, 100))
    assert m.threshold == 6
    p = math.exp(-5) / (1 + math.exp(-1))
    with pq.testing.seed(21):
        released, noisy = m.release(list(range(200_000)), np.ones(200_000, dtype=np.int64))
    rate = len(released) / 200_000
    assert abs(rate - p) < 5 * math.sqrt(p * (1 - p) / 200_000)
    assert noisy.dtype == np.int64 and (noisy >= 6).all()


def test_key_selection_with_noise_off_and_describe():
    m = KeySelectionMechanism(Fraction(1), Fraction(1, 10**6))
    assert m.describe() == "KeySelection(DiscreteLaplace(scale=1), threshold=15)"
    assert m.scale == 1 and m.noise_scale == 1.0
    with pq.testing.no_noise():
        keys, counts = m.release(["a", "b", "c"], np.array([0, 3, 1]))
    assert keys == ["b", "c"] and counts.tolist() == [3, 1]
    with pytest.raises(ValueError):
        m.release(["a"], np.array([0.5]))
    assert m.pass_probability(100) == pytest.approx(1.0)


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
    from pinqpy.engines.pandas import executor as _pandas_executor

    def boom(*a, **k):
        raise AssertionError("data was read")

    monkeypatch.setattr(_pandas_executor.PandasExecutor, "relation", boom)
    b = pq.Budget(epsilon=1)
    f = pq.PrivateFrame(pd.DataFrame({"x": [1.0]}), b, bounds={"x": (0, 10)})
    count = f.accuracy("count", epsilon=0.1)
    # Discrete Laplace(10): P(|X| > t) = 2q^{t+1}/(1+q), q = e^{-0.1}, is <= 0.05 first at
    # t = 30 (t + 1 >= 10·ln(40/(1+q)) = 30.44).
    q = math.exp(-0.1)
    assert 2 * q**31 / (1 + q) <= 0.05 < 2 * q**30 / (1 + q)
    assert count.error == 30
    # The sum of x in (0, 10) at epsilon 0.5: grid 2^-7, S = 1281 units, unit scale 2562; the
    # unit noise's 95% half-width is 7675 (t + 1 >= 2562·ln(40/(1+e^{-1/2562})) = 7675.4),
    # plus half a step of snapping: (7675 + 1/2)/128 = 59.96484375 (Laplace(20): 59.9).
    qs = math.exp(-1 / 2562)
    assert 2 * qs**7676 / (1 + qs) <= 0.05 < 2 * qs**7675 / (1 + qs)
    assert f.accuracy("sum", "x", epsilon=0.5).error == 7675.5 / 128
    assert f.accuracy("median", "x", epsilon=1).unit == "ranks"
    assert f.concat(f).accuracy("count", epsilon=0.1).charge[repr(b)] == pq.Cost(0.2)
    assert b.spent.is_zero
