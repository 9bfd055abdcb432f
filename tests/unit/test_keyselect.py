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


# -- one step: units of G keys x k rows, the Gaussian variant, the released counts -----------
def laplace_tail(scale: Fraction, m: int) -> mp.mpf:
    """P(X >= m) for X discrete Laplace of ``scale``, summed from the pmf (50 digits)."""
    with mp.workdps(50):
        q = mp.exp(-mp.mpf(scale.denominator) / scale.numerator)
        return mp.nsum(lambda x: (1 - q) / (1 + q) * q**x, [m, mp.inf])


def gaussian_tail(sigma2: Fraction, m: int) -> mp.mpf:
    """P(X >= m) for X ~ N_Z(0, sigma2), summed from the pmf (50 digits)."""
    with mp.workdps(50):
        s2 = mp.mpf(sigma2.numerator) / sigma2.denominator

        def w(x: mp.mpf) -> mp.mpf:
            return mp.exp(-(x**2) / (2 * s2))

        total = w(0) + 2 * mp.nsum(w, [1, mp.inf])
        return mp.nsum(w, [m, mp.inf]) / total


@pytest.mark.parametrize(
    ("eps", "delta", "groups", "rows"),
    [
        (Fraction(1, 6), Fraction(1, 10**6), 3, 2),
        (Fraction(1, 2), Fraction(1, 10**6), 2, 1),
        (Fraction(1, 5), Fraction(1, 10**9), 1, 5),
        (Fraction(1), Fraction(1, 100), 10, 1),
        (Fraction(2, 7), Fraction(1, 3), 4, 3),
    ],
)
def test_laplace_threshold_for_g_keys_of_k_rows(eps, delta, groups, rows):
    """tau = k + m, m least with G·P(X >= m) <= delta: a unit's G new keys of at most k rows
    each pass with probability at most delta in all, and m - 1 would exceed it."""
    m = KeySelectionMechanism(eps, delta, max_groups=groups, max_rows=rows)
    margin = m.threshold - rows
    assert margin >= 1
    assert groups * laplace_tail(m.scale, margin) <= delta
    assert margin == 1 or groups * laplace_tail(m.scale, margin - 1) > delta
    for count in range(1, rows + 1):  # every count up to k passes with at most delta/G
        assert m.pass_probability(count) <= float(delta) / groups * (1 + 1e-12)
    assert m.pass_probability(rows) == pytest.approx(float(laplace_tail(m.scale, margin)))
    # the charge at the unit's G·k rows: G·k·epsilon and delta
    assert m.charge.at(groups * rows) == pq.Cost(groups * rows * eps, delta)


@pytest.mark.parametrize(
    ("eps", "noise_delta", "delta", "groups", "rows"),
    [
        (Fraction(1), Fraction(1, 2 * 10**6), Fraction(1, 2 * 10**6), 1, 1),
        (Fraction(1, 2), Fraction(1, 10**5), Fraction(1, 10**6), 3, 2),
        (Fraction(1), Fraction(1, 100), Fraction(3, 100), 1, 1),
        (Fraction(1, 10), Fraction(1, 10**8), Fraction(1, 10**9), 2, 1),
    ],
)
def test_gaussian_threshold_for_g_keys_of_k_rows(eps, noise_delta, delta, groups, rows):
    """The Gaussian threshold's bound holds for the exact pmf (G·P(X >= tau - k) <= delta),
    and the threshold is the least that meets it or at most one above the least integer the
    exact tail would allow (the closed-form bound is looser than the exact sum)."""
    from pinqpy.noise.mechanisms.calibration import discrete_gaussian_sigma2

    m = KeySelectionMechanism(eps, delta, max_groups=groups, max_rows=rows, noise_delta=noise_delta)
    assert m.scale == discrete_gaussian_sigma2(eps, noise_delta)  # the count's own sigma²
    margin = m.threshold - rows
    exact = gaussian_tail(m.scale, margin)
    assert groups * exact <= delta
    least = margin
    while least > 1 and groups * gaussian_tail(m.scale, least - 1) <= delta:
        least -= 1
    assert margin - least <= 1
    assert m.pass_probability(rows) == pytest.approx(float(exact), rel=1e-6)
    assert m.charge.at(1) == pq.Cost(eps, noise_delta + delta)


def test_gaussian_closed_form_bound_is_an_upper_bound_far_in_the_tail():
    """Beyond the term-by-term sums the closed form e^{-m²/2σ²}(1/σ + σ/m)/√(2π) is used:
    it bounds the exact tail, within a factor 2 there."""
    from pinqpy.noise.keyselect import _gaussian_log_tail
    from pinqpy.results.noise import DiscreteGaussianNoise

    for s2 in (Fraction(3), Fraction(18), Fraction(400)):
        noise = DiscreteGaussianNoise(s2)
        sigma = math.sqrt(float(s2))
        for z in (1, 3, 6, 9):
            mm = max(1, round(z * sigma))
            exact = gaussian_tail(s2, mm)
            closed = -(mm**2) / (2 * float(s2)) - 0.5 * math.log(2 * math.pi)
            closed += math.log(1 / sigma + sigma / mm)
            assert mp.log(exact) <= closed
            assert closed - float(mp.log(exact)) < math.log(2) + 1 / mm
            assert mp.log(exact) <= _gaussian_log_tail(noise, mm) <= closed + 1e-9


def test_threshold_refuses_bad_structure():
    with pytest.raises(pq.PinqError, match="max_groups"):
        KeySelectionMechanism(Fraction(1), Fraction(1, 10**6), max_groups=0)
    with pytest.raises(pq.PinqError, match="max_rows"):
        KeySelectionMechanism(Fraction(1), Fraction(1, 10**6), max_rows=1.5)  # type: ignore[arg-type]


def test_released_counts_are_the_noisy_counts_that_passed():
    m = KeySelectionMechanism(Fraction(1), Fraction(1, 10**6))
    # Threshold 15, noise scale 1: "d" (5) passes with probability about e**-10, so which keys
    # pass does not hang on the seed (a count of 14 would pass about one time in four).
    counts = np.array([100, 1, 40, 5, 0])
    with pq.testing.seed(30):
        keys, noisy = m.release(list("abcde"), counts)
    assert keys == ["a", "c"] and (noisy >= m.threshold).all()
    assert np.abs(noisy - np.array([100, 40])).max() < 15
    acc = m.released_accuracy(noisy)
    low, high = acc.interval(0.95)
    assert (low <= noisy).all() and (noisy <= high).all() and acc.values.dtype == np.int64


def test_select_keys_carries_its_counts_and_histogram_is_them():
    df = pd.DataFrame({"city": ["Oslo"] * 400 + ["Bergen"] * 300 + ["Hamar"] + ["Alta"] * 90})
    b = pq.Budget(epsilon=10, delta=1e-3)
    people = pq.PrivateFrame(df, b)
    with pq.testing.seed(31):
        keys = people.select_keys("city", epsilon=1, delta=1e-6)
    assert keys == ["Alta", "Bergen", "Oslo"]  # sorted, Hamar (one row) left out
    assert isinstance(keys, list) and isinstance(keys.counts, pq.NoisySeries)
    assert keys.counts.index.tolist() == keys and keys.counts.index.name == "city"
    assert (keys.counts - pd.Series({"Alta": 90, "Bergen": 300, "Oslo": 400})).abs().max() < 15
    assert list(keys.counts.ci(0.95).columns) == ["low", "high"]
    assert b.spent == pq.Cost(1, 1e-6)  # the counts are post-processing
    with pq.testing.seed(31):
        h = pq.PrivateFrame(df, pq.Budget(epsilon=1, delta=1e-6)).histogram(
            "city", epsilon=1, delta=1e-6
        )
    pd.testing.assert_series_equal(pd.Series(h), pd.Series(keys.counts))


def test_histogram_with_public_keys_is_a_partition_count():
    df = pd.DataFrame({"city": ["Oslo"] * 40 + ["Bergen"] * 30})
    b1, b2 = pq.Budget(epsilon=1), pq.Budget(epsilon=1)
    with pq.testing.seed(32):
        h = pq.PrivateFrame(df, b1).histogram("city", 0.5, keys=["Oslo", "Bergen", "Hamar"])
    with pq.testing.seed(32):
        want = pq.PrivateFrame(df, b2).partition("city", ["Oslo", "Bergen", "Hamar"]).count(0.5)
    pd.testing.assert_series_equal(pd.Series(h), pd.Series(want))
    assert b1.spent == b2.spent == pq.Cost(0.5)
    declared = pq.PrivateFrame(df, pq.Budget(epsilon=1), keys={"city": ["Bergen", "Oslo"]})
    with pq.testing.no_noise():
        h = declared.histogram("city", 0.5, delta=1e-6)  # declared keys: delta is not used
    assert h.to_dict() == {"Bergen": 30, "Oslo": 40}
    assert declared.budgets[0].spent == pq.Cost(0.5)


def test_histogram_without_keys_needs_delta_and_charges_nothing_when_refused():
    df = pd.DataFrame({"city": ["Oslo"] * 40, "pid": range(40)})
    b = pq.Budget(epsilon=1, delta=1e-6)
    with pytest.raises(pq.PrivacyError, match="delta"):
        pq.PrivateFrame(df, b).histogram("city", 0.5)
    with pytest.raises(pq.PrivacyError, match="privacy unit"):
        pq.PrivateFrame(df, b).histogram("city", 0.5, delta=1e-6, max_groups=2)
    with pytest.raises(pq.PinqError, match="column"):
        pq.PrivateFrame(df, b).histogram(3, 0.5, delta=1e-6)  # type: ignore[arg-type]
    assert b.spent.is_zero


def test_user_level_histogram_counts_people_in_at_most_g_keys():
    rows = [{"pid": p, "city": c} for p in range(300) for c in ["Oslo", "Bergen", "Oslo"]]
    rows += [{"pid": 999, "city": "Hamar"}] * 50
    b = pq.Budget(epsilon=10, delta=1e-3)
    visits = pq.PrivateFrame(pd.DataFrame(rows), b, privacy_unit="pid")
    with pq.testing.no_noise():
        h = visits.histogram(["city"], epsilon=1, delta=1e-6, max_groups=2)
    assert h.to_dict() == {"Bergen": 300, "Hamar": 1, "Oslo": 300}  # people, not rows
    assert b.spent == pq.Cost(2, 1e-6)  # stability G = 2, delta once
    with pq.testing.seed(33):
        h = visits.histogram("city", epsilon=1, delta=1e-6, max_groups=2)
    assert h.index.tolist() == ["Bergen", "Oslo"]  # one person alone never passes
    with pq.testing.no_noise():  # public keys: a partition count of people, charged G·epsilon
        h = visits.histogram("city", epsilon=1, keys=["Oslo", "Hamar", "Tromso"], max_groups=2)
    assert h.to_dict() == {"Oslo": 300, "Hamar": 1, "Tromso": 0}
    assert b.spent == pq.Cost(6, 2e-6)


def test_sql_count_star_is_the_key_selection():
    from pinqpy.demo import PUMS_BOUNDS, load_pums

    s = pq.Session()
    b = pq.Budget(epsilon=10, delta=1e-5)
    s.register("pums", load_pums(), budget=b, bounds=PUMS_BOUNDS)
    q = "SELECT educ, COUNT(*) AS n FROM pums GROUP BY educ"
    plan = s.sql("EXPLAIN " + q, epsilon=1, delta=1e-6)
    assert "epsilon 1 = 1 measurement(s) x 1 x stability 1" in plan
    assert "the GROUP BY key selection, its noisy counts released" in plan
    with pq.testing.seed(34):
        out = s.sql(q, epsilon=1, delta=1e-6)
    assert b.spent == pq.Cost(1, 1e-6)
    true = load_pums().educ.value_counts()
    # scale 1 (not 2): every released count within 15 of the truth at this seed
    assert all(abs(n - true[k]) < 15 for k, n in zip(out["educ"], out["n"], strict=True))
    assert "KeySelection" in out.accuracy["n"].mechanism


def test_group_bounded_frame_sets_the_threshold_for_its_g_keys_of_k_rows():
    """bound_contributions(max_groups=3, max_rows_per_group=2, by=city): a person falls in at
    most 3 cities, 2 rows each, so the threshold is 2 + m with 3·P(X >= m) <= delta at scale
    6 (88), not the 6 + m of a unit of 6 rows anywhere (96)."""
    rows = [{"uid": u, "city": f"c{(u + j) % 5}"} for u in range(400) for j in range(4)]
    b = pq.Budget(epsilon=10, delta=1e-3)
    f = pq.PrivateFrame(pd.DataFrame(rows * 2), b, privacy_unit="uid")
    g = f.bound_contributions(max_groups=3, max_rows_per_group=2, by="city")
    assert g.stability == 6
    with pq.testing.seed(35):
        keys = g.select_keys("city", epsilon=Fraction(1, 6), delta=1e-6)
    mech = keys.counts.accuracy.mechanism
    assert "threshold=88, unit <= 3 keys x 2 rows" in mech
    assert b.spent == pq.Cost(1, 1e-6)
    generic = f.bound_contributions(6)
    with pq.testing.seed(35):
        h = generic.histogram("city", epsilon=Fraction(1, 6), delta=1e-6)
    assert "threshold=96, unit <= 6 keys x 6 rows" in h.accuracy.mechanism


def test_sql_on_a_group_bounded_table_uses_its_g_keys_of_k_rows():
    rows = [{"uid": u, "city": f"c{(u + j) % 5}"} for u in range(400) for j in range(4)]
    b = pq.Budget(epsilon=10, delta=1e-3)
    f = pq.PrivateFrame(pd.DataFrame(rows * 2), b, privacy_unit="uid")
    s = pq.Session()
    s.register("v", f.bound_contributions(max_groups=3, max_rows_per_group=2, by="city"))
    q = "SELECT city, COUNT(*) AS n FROM v GROUP BY city"
    plan = s.sql("EXPLAIN " + q, epsilon=1, delta=1e-6)
    assert "KeySelection(DiscreteLaplace(scale=6), threshold=88, unit <= 3 keys x 2 rows)" in plan
    assert "epsilon 1 = 1 measurement(s) x 1/6 x stability 6" in plan
    with pq.testing.no_noise():
        out = s.sql(q, epsilon=1, delta=1e-6)
    assert list(out.columns) == ["city", "n"] and len(out) == 5
    assert b.spent == pq.Cost(1, 1e-6)
