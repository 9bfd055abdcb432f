"""Accuracy in the answer's own units: previews (``PrivateFrame.accuracy``,
``Partition.accuracy``) and EXPLAIN state a mean's and a quantile's error in the column's units
(given ``n`` or a public row count), with the assumption behind the figure; key selection
previews its threshold. Statistical checks use fixed seeds; their tolerances are derived from
the binomial law of a coverage estimate."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import load_pums
from pinqpy.noise.keyselect import KeySelectionMechanism
from pinqpy.noise.mechanisms import MeanMechanism, QuantileMechanism
from pinqpy.results.accuracy import mean_figure, mean_first_order, quantile_figure
from pinqpy.results.format import sig
from pinqpy.results.noise import DiscreteLaplaceNoise, LaplaceNoise

BOUNDS = {"age": (0, 100), "income": (0, 500_000)}
KEYS = {"sex": [0, 1], "race": [1, 2, 3, 4, 5, 6]}


def pums(**facts: object) -> pq.PrivateFrame:
    return pq.PrivateFrame(load_pums(), pq.Budget(10, 1e-5), bounds=BOUNDS, keys=KEYS, **facts)


def coverage_tolerance(level: float, reps: int, z: float = 4.5) -> float:
    """``z`` standard deviations of a coverage estimate from ``reps`` independent draws
    (binomial: ``sqrt(level·(1 - level)/reps)``); ``z = 4.5`` fails a correct figure with
    probability below 1e-5."""
    return z * math.sqrt(level * (1 - level) / reps)


# -- the mean's first-order figure ------------------------------------------------------------
def test_first_order_constant_limits() -> None:
    x = LaplaceNoise(100.0)
    y = DiscreteLaplaceNoise(2)
    # Offset 0: the sum's noise alone, whose 95% half-width is b·ln 20.
    assert mean_first_order(x, y, 0.0) == pytest.approx(100 * math.log(20), rel=1e-6)
    # It grows with the offset and stays below the union bound tS + |d|·tN at 97.5% each.
    c = [mean_first_order(x, y, d) for d in (0.0, 10.0, 30.0, 50.0)]
    assert c == sorted(c) and len(set(c)) == 4
    union = x.half_width(0.975) + 50 * y.half_width(0.975)
    assert c[-1] < union


@pytest.mark.parametrize("value", [50.0, 90.0])
def test_mean_first_order_coverage_on_simulated_data(value: float) -> None:
    """n = 1000 rows all at ``value``: the mean's error is within C(d)/n with probability 95%
    (d = value - mid, the mean's true offset), over 20,000 independent releases."""
    m = MeanMechanism(1, 0, 100)
    n, reps, level = 1000, 20_000, 0.95
    s, _, c = m.lattice.value_sums([value] * n)
    with pq.testing.seed(11):
        released, _acc = m.release([s] * reps, np.array([c] * reps))
    exact = float(m.mid + m.centred([s], [c])[0] / c)
    err = np.abs(released - exact)
    d = value - m.mid
    figure = mean_first_order(m.sum_noise, m.count_noise, d, level) / n
    # The first-order term leaves out a relative (η_C/n) of at most 6/1000 at 99.9%, which moves
    # the coverage by at most density·t·0.006 < 0.002 (the tail density at t is 0.05/b per
    # unit, t ≈ 3b): allowed on top of the binomial tolerance.
    tol = coverage_tolerance(level, reps) + 0.002
    assert abs(np.mean(err <= figure) - level) <= tol
    # The preview's figure is for the widest offset: it covers at least the level.
    preview = mean_figure(m, level=level, n=n, column="x")
    assert preview.error == pytest.approx(
        mean_first_order(m.sum_noise, m.count_noise, float(m.lattice.half), level) / n
    )
    assert np.mean(err <= preview.error) >= level - tol
    # The expected-error figure EXPLAIN prints: the mean |error| at offset d matches E|Z|/n
    # within 4.5 standard errors of the sample mean (at offset h it is an upper figure).
    sem = float(np.std(err)) / math.sqrt(reps)
    assert float(np.mean(err)) <= preview.expected + 4.5 * sem
    if value == 50.0:
        assert preview.expected > float(np.mean(err)) + 4.5 * sem  # centre: well below it


def test_quantile_value_figure_covers_evenly_spread_data() -> None:
    """n = 1000 values spread evenly over [0, 100]: the median's error is within
    r·(hi - lo)/n + step/2 with probability at least 95% (4,000 releases)."""
    q = QuantileMechanism(1, 0.5, 0, 100)
    values = (np.arange(1000) + 0.5) / 10
    eq, gap = q.bin_counts(values)
    reps, level = 4000, 0.95
    with pq.testing.seed(12):
        released, _ = q.release(np.tile(eq, (reps, 1)), np.tile(gap, (reps, 1)))
    fig = quantile_figure(q, level=level, n=1000, column="x")
    assert fig.error == pytest.approx(q.accuracy(level) * 100 / 1000 + 0.5)
    assert fig.rank_error == pytest.approx(q.accuracy(level))
    err = np.abs(released - np.median(values))
    assert np.mean(err <= fig.error) >= level - coverage_tolerance(level, reps)
    assert "spread evenly over the bounds" in fig.note


# -- PrivateFrame.accuracy ---------------------------------------------------------------------
def test_mean_preview_needs_n_and_says_so() -> None:
    f = pums()
    p = f.accuracy("mean", "age", epsilon=1)
    m = MeanMechanism(1, 0, 100)
    c = mean_first_order(m.sum_noise, m.count_noise, 50.0)
    assert p.error_times_n == pytest.approx(c) and p.n is None
    assert p.error == 100  # only the bounds' width holds without n ...
    text = str(p)
    assert f"± {c:.4g}/n" in text and "pass n=" in text  # ... and the text says what n is for
    assert "at most 100" not in text
    assert p.noise_scale == {"sum": m.sum_noise.scale, "count": m.count_noise.scale}


def test_mean_preview_with_n_in_value_units() -> None:
    f = pums()
    p = f.accuracy("mean", "age", epsilon=1, n=1000)
    m = MeanMechanism(1, 0, 100)
    assert p.error == pytest.approx(mean_first_order(m.sum_noise, m.count_noise, 50.0) / 1000)
    assert 0.3 < p.error < 0.5 and p.n == 1000 and p.unit == ""
    assert "age's units" in p.note and "n = 1000" in p.note and "first-order" in p.note
    assert f.accuracy("mean", "age", epsilon=1, n=4000).error == pytest.approx(p.error / 4)
    # Too few rows for a first-order figure: the width, and the note says why.
    small = f.accuracy("mean", "age", epsilon=1, n=3)
    assert small.error == 100 and "too few rows" in small.note
    for bad in (0, -5, "many", math.inf, True):
        with pytest.raises(pq.PinqError, match="n"):
            f.accuracy("mean", "age", epsilon=1, n=bad)
    with pytest.raises(pq.PinqError, match="does not depend on it"):
        f.accuracy("count", epsilon=1, n=1000)
    assert f.budgets[0].spent == pq.Cost(0)


def test_public_size_mean_uses_the_public_count() -> None:
    f = pums(public_size=True)
    p = f.accuracy("mean", "age", epsilon=1)
    assert p.n == 1000 and "public" in p.note and "n = 1000" in p.note
    t = f.accuracy("mean", "age", epsilon=1, n=5)  # n= cannot override the public count
    assert t.error == p.error
    assert isinstance(p.noise_scale, float) and p.noise_scale == pytest.approx(50.03 / 1000, 1e-3)
    with pq.testing.seed(4):
        released = f.mean("age", 1)
    lo, hi = released.ci(0.95)
    assert (hi - lo) / 2 == pytest.approx(p.error, rel=1e-3)


def test_median_preview_in_ranks_and_values() -> None:
    f = pums()
    q = QuantileMechanism(1, 0.5, 0, 100)
    plain = f.accuracy("median", "age", epsilon=1)
    assert plain.unit == "ranks" and plain.error == pytest.approx(q.accuracy(0.95))
    assert "pass n=" in str(plain) and "ranks" in str(plain)
    assert plain.noise_scale == pytest.approx(2 * 0.5 / 1)  # rank scale 2·Δu/eps_sel
    valued = f.accuracy("median", "age", epsilon=1, n=1000)
    assert valued.unit == "" and valued.rank_error == pytest.approx(plain.error)
    assert valued.error == pytest.approx(plain.error * 100 / 1000 + 0.5)
    assert "spread evenly" in str(valued)
    q90 = f.accuracy("quantile", "age", epsilon=0.5, q=0.9, n=2000)
    assert q90.noise_scale == pytest.approx(2 * 0.9 / 0.5)


def test_variance_preview_names_its_scales() -> None:
    p = pums().accuracy("variance", "age", epsilon=1)
    assert set(p.noise_scale) == {"count", "sum", "sq"}  # type: ignore[arg-type]


# -- Partition.accuracy --------------------------------------------------------------------------
def test_partition_accuracy_is_per_part_and_free() -> None:
    f = pums(public_size=True)  # a part's size is never public, even when the frame's is
    parts = f.partition("sex")
    p = parts.accuracy("mean", "age", epsilon=1, n=500)
    plain = pums().accuracy("mean", "age", epsilon=1, n=500)
    assert p.error == pytest.approx(plain.error) and "public" not in p.note
    assert parts.accuracy("count", epsilon=0.5).error == 6
    med = parts.accuracy("median", "age", epsilon=1, n=500)
    assert med.error == pytest.approx(med.rank_error * 100 / 500 + 0.5)
    assert f.budgets[0].spent == pq.Cost(0)
    # The charge it announces is what the per-part aggregation charges (one for all parts).
    parts.mean("age", 1)
    assert list(p.charge.values()) == [f.budgets[0].spent]
    with pytest.raises(pq.PinqError, match="public already"):
        parts.accuracy("histogram", "race", epsilon=1)


# -- key selection ---------------------------------------------------------------------------
def test_key_selection_preview() -> None:
    f = pums()
    p = f.accuracy("select_keys", "educ", epsilon=1, delta=1e-6)
    m = KeySelectionMechanism(Fraction(1), Fraction(1, 10**6))
    assert p.threshold == m.threshold == 15 and p.unit == "rows"
    assert m.pass_probability(p.threshold) >= 0.5 > m.pass_probability(p.threshold - 1)
    assert m.pass_probability(int(p.details["rows_for_level"])) >= 0.95
    assert "15 rows to be released with probability 1/2" in p.note
    assert p.error == 3.0  # the released counts' 95% half-width (discrete Laplace, scale 1)
    assert f.budgets[0].spent == pq.Cost(0)
    h = f.accuracy("histogram", ["educ", "married"], epsilon=0.5, delta=1e-6)
    assert h.threshold is not None and h.threshold > p.threshold  # scale 2: a higher bar
    # Public keys: a count per key, no threshold.
    public = f.accuracy("histogram", "race", epsilon=1)
    assert public.threshold is None and "public keys" in public.note
    with pytest.raises(pq.PrivacyError, match="delta"):
        f.accuracy("select_keys", "educ", epsilon=1)
    # The charge is what select_keys charges.
    f.select_keys("educ", epsilon=1, delta=1e-6)
    assert list(p.charge.values()) == [f.budgets[0].spent]


def test_key_selection_threshold_statistically() -> None:
    """A key of exactly T rows is released with probability pass_probability(T) >= 1/2."""
    m = KeySelectionMechanism(Fraction(1), Fraction(1, 10**6))
    reps = 20_000
    keys = list(range(reps))
    with pq.testing.seed(13):
        selected, _ = m.release(keys, np.full(reps, m.threshold))
    rate = len(selected) / reps
    p = m.pass_probability(m.threshold)
    assert abs(rate - p) <= 4.5 * math.sqrt(p * (1 - p) / reps) and p >= 0.5


# -- EXPLAIN -------------------------------------------------------------------------------------
@pytest.fixture
def session() -> pq.Session:
    s = pq.Session()
    s.register("pums", load_pums(), budget=pq.Budget(5), bounds=BOUNDS, keys=KEYS)
    s.register("census", pq.PrivateFrame(load_pums(), pq.Budget(5), bounds=BOUNDS,
                                          public_size=True))  # fmt: skip
    return s


def _spent(s: pq.Session) -> list[pq.Cost]:
    return [s.table(t).budgets[0].spent for t in ("pums", "census")]


def test_explain_with_n_keyword_and_option(session: pq.Session) -> None:
    query = "SELECT AVG(age) AS a, MEDIAN(age) AS m FROM pums"
    by_option = session.sql(f"EXPLAIN {query} OPTIONS (n = 1000)", epsilon=1)
    by_keyword = session.sql(f"EXPLAIN {query}", epsilon=1, n=1000)
    by_method = session.explain(query, epsilon=1, n=1000)
    assert str(by_option) == str(by_keyword) == str(by_method)
    mean = pums().accuracy("mean", "age", epsilon=0.5, n=1000)
    assert f"± {sig(mean.error)} at 95%) for n = 1000 rows" in by_option
    assert "spread evenly over the bounds" in by_option
    without = session.explain(query, epsilon=1)
    assert f"± {sig(mean.error_times_n)}/n at 95%" in without
    assert "OPTIONS (n = ...) gives a figure in age's units" in without
    assert "ranks; OPTIONS (n = ...) gives a figure in age's units" in without
    assert _spent(session) == [pq.Cost(0), pq.Cost(0)]  # EXPLAIN charges nothing


def test_explain_grouped_and_public(session: pq.Session) -> None:
    grouped = session.explain("SELECT sex, AVG(age) FROM pums GROUP BY sex", epsilon=1, n=400)
    assert "for n = 400 rows a group" in grouped
    public = session.explain("SELECT AVG(age) FROM census", epsilon=1)
    assert "the row count public (n = 1000)" in public
    assert _spent(session) == [pq.Cost(0), pq.Cost(0)]


def test_n_only_with_explain(session: pq.Session) -> None:
    with pytest.raises(pq.PinqSyntaxError, match="only with EXPLAIN") as info:
        session.sql("SELECT AVG(age) FROM pums OPTIONS (n = 1000)", epsilon=1)
    assert info.value.column == 36
    with pytest.raises(pq.PinqSyntaxError, match="only with EXPLAIN"):
        session.sql("SELECT AVG(age) FROM pums", epsilon=1, n=1000)
    with pytest.raises(pq.PinqSyntaxError, match="positive number of rows"):
        session.sql("EXPLAIN SELECT AVG(age) FROM pums OPTIONS (n = 'many')", epsilon=1)
    with pytest.raises(pq.PinqSyntaxError, match="given twice"):
        session.sql("EXPLAIN SELECT AVG(age) FROM pums OPTIONS (n = 10)", epsilon=1, n=20)
    with pytest.raises(pq.PinqError, match="positive"):
        session.explain("SELECT AVG(age) FROM pums", epsilon=1, n=-1)
    assert _spent(session) == [pq.Cost(0), pq.Cost(0)]


def test_docs_figures_are_what_the_frame_says() -> None:
    frame = pq.PrivateFrame(pd.DataFrame({"x": [1.0]}), pq.Budget(1), bounds={"x": (0, 10)})
    p = frame.accuracy("mean", "x", epsilon=1, n=100)
    assert "x's units" in p.note
