"""Reprs never look exact: every released result says it is noisy and shows its intervals,
in text (``repr``, ``print``) and in HTML; ``value ± e`` when the interval is symmetric,
``[low, high]`` when it is not. Scalars stay numbers in arithmetic and ``str``."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import load_pums
from pinqpy.remote.protocol import decode_result, encode_result
from pinqpy.results.format import interval_text, value_text
from pinqpy.results.release_html import _decimals

BOUNDS = {"age": (0, 100), "income": (0, 500_000)}
KEYS = {"sex": [0, 1], "race": [1, 2, 3, 4, 5, 6], "educ": list(range(1, 17))}


def text_of(html: str) -> str:
    """The visible text of an HTML fragment (tags and the pandas CSS dropped)."""
    html = re.sub(r"<style.*?</style>", " ", html, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


@pytest.fixture
def people() -> pq.PrivateFrame:
    return pq.PrivateFrame(load_pums(), pq.Budget(100, 1e-4), bounds=BOUNDS, keys=KEYS)


@pytest.fixture
def session(people: pq.PrivateFrame) -> pq.Session:
    s = pq.Session()
    s.register("pums", people)
    return s


# -- the cell spellings ----------------------------------------------------------------------
def test_value_text_symmetric_and_not() -> None:
    assert value_text(512, 509, 515, integer=True) == "512 ± 3"
    assert value_text(41.25, 40.0, 42.5) == "41.25 ± 1.25"
    assert value_text(41.2, 40.1, 42.9) == "41.2 [40.1, 42.9]"
    assert interval_text(40.1, 42.9, 41.2) == "[40.1, 42.9]"
    assert interval_text(509, 515, 512, integer=True) == "± 3"


# -- scalars ---------------------------------------------------------------------------------
def test_scalars_marked_in_repr_plain_in_arithmetic(people: pq.PrivateFrame) -> None:
    with pq.testing.seed(1):
        n = people.count(epsilon=1)
        total = people.sum("age", epsilon=1)
        mean = people.mean("age", epsilon=1)
        median = people.median("age", epsilon=1)
        q90 = people.quantile("age", 0.9, epsilon=1, ci=True)
    assert re.fullmatch(r"NoisyCount\(\d+, ±3 at 95%\)", repr(n))
    assert re.fullmatch(r"NoisyValue\([\d.]+, ±[\d.]+ at 95%\)", repr(total))
    lo, _hi = mean.ci()
    assert repr(mean).startswith("NoisyValue(") and f"ci [{lo:.6g}" in repr(mean)
    assert "ranks" in repr(median) and "no value interval" in repr(median)
    assert "95% ci [" in repr(q90)
    # str and arithmetic stay plain numbers
    assert str(n) == str(int(n)) and str(mean) == repr(float(mean))
    assert type(n + 1) is int and type(mean * 2) is float and f"{mean:.1f}" == f"{float(mean):.1f}"
    # HTML: symmetric as ± e, asymmetric as [lo, hi]
    assert "95% interval ± 3" in text_of(n._repr_html_())
    assert f"95% interval [{lo:.6g}" in text_of(mean._repr_html_())
    assert "ranks of the exact quantile" in text_of(median._repr_html_())


def test_argmax_label_marked(people: pq.PrivateFrame) -> None:
    with pq.testing.seed(2):
        top = people.argmax("educ", candidates=[1, 9, 13], epsilon=1)
    assert repr(top).startswith("NoisyLabel(") and "PermuteAndFlip" in repr(top)
    assert "below the largest count" in text_of(top._repr_html_())


# -- series ----------------------------------------------------------------------------------
def test_partition_series_text(people: pq.PrivateFrame) -> None:
    parts = people.partition("sex")
    with pq.testing.seed(3):
        counts = parts.count(epsilon=1)
        means = parts.mean("age", epsilon=1)
        medians = parts.median("age", epsilon=1)
        with_ci = parts.median("age", epsilon=1, ci=True)
    text = repr(counts)
    assert text == str(counts)  # print() shows the same
    lines = text.splitlines()
    assert lines[0] == "noisy (epsilon 1), 95% intervals:"
    assert lines[1] == "sex"
    for key, value in counts.items():
        assert re.search(rf"^{key}\s+{value} ± 3$", text, flags=re.M)
    assert lines[-1] == "dtype: int64"
    # a mean's interval is not symmetric: [lo, hi] next to the value
    mtext = repr(means)
    ci = means.ci()
    for key in means.index:
        assert f"[{ci.loc[key, 'low']:.6g}, {ci.loc[key, 'high']:.6g}]" in mtext
    # a median without ci: its rank error, no value interval
    assert "rank errors, no value interval" in repr(medians) and "ranks)" in repr(medians)
    assert "95% intervals" in repr(with_ci) and "[" in repr(with_ci)
    # changed values: still marked noisy, no interval
    doubled = counts * 2
    assert repr(doubled).startswith("noisy (computed from released values")
    assert "±" not in repr(doubled)


def test_series_html_symmetric_and_not(people: pq.PrivateFrame) -> None:
    parts = people.partition("sex")
    with pq.testing.seed(4):
        counts = parts.count(epsilon=1)
        means = parts.mean("age", epsilon=1)
    assert text_of(counts._repr_html_()).count("± 3") == 2
    html = text_of(means._repr_html_())
    lo, hi = means.ci().iloc[0]
    d = _decimals(((means.ci()["high"] - means.ci()["low"]) / 2).to_numpy())
    assert f"[{lo:.{d}f}, {hi:.{d}f}]" in html  # one format for the column


def test_long_series_still_marked(people: pq.PrivateFrame) -> None:
    with pq.testing.seed(5), pd.option_context("display.max_rows", 6, "display.min_rows", 4):
        counts = people.partition("educ").count(epsilon=1)
        text = repr(counts)
    assert text.startswith("noisy (epsilon 1)") and "..." in text and "Length: 16" in text


def test_histogram_and_selected_keys(people: pq.PrivateFrame) -> None:
    with pq.testing.seed(6):
        hist = people.histogram("married", epsilon=1, delta=1e-6)  # keys not public
        keys = people.select_keys("married", epsilon=1, delta=1e-6)
    assert repr(hist).startswith("noisy (epsilon 1, delta 0.000001), 95% intervals:")
    assert "± 3" in repr(hist)
    assert repr(keys) == (
        f"SelectedKeys({list(keys)!r}; chosen privately, their noisy counts in .counts)"
    )
    html = text_of(keys._repr_html_())
    assert f"{len(keys)} key(s) chosen privately" in html and "± 3" in html


# -- frames ----------------------------------------------------------------------------------
def test_sql_group_by_frame_text_and_html(session: pq.Session) -> None:
    with pq.testing.seed(7):
        r = session.sql(
            "SELECT sex, COUNT(*) AS n, AVG(age) AS a, MEDIAN(age) AS m FROM pums GROUP BY sex",
            epsilon=1,
        )
    text = repr(r)
    assert text == str(r)
    assert text.splitlines()[0] == "noisy (epsilon 1/3 each), 95% intervals:"
    lo, hi = r.ci("a").iloc[0]
    assert f"{r['n'].iloc[0]} ± " in text and f"[{lo:.6g}, {hi:.6g}]" in text
    assert "ranks)" in text
    html = text_of(r._repr_html_())
    d = _decimals(((r.ci("a")["high"] - r.ci("a")["low"]) / 2).to_numpy())
    assert "a 95% interval" in html and f"[{lo:.{d}f}, {hi:.{d}f}]" in html and "± " in html
    # the median shows its rank error, as the text repr does
    ranks = r.accuracy["m"].rank_error(0.95)
    assert "m rank error (95%)" in html and f"± {ranks:.4g} ranks" in html


def test_a_noisy_column_taken_alone_stays_marked(session: pq.Session) -> None:
    with pq.testing.seed(9):
        r = session.sql(
            "SELECT sex, COUNT(*) AS n, AVG(age) AS a FROM pums GROUP BY sex", epsilon=1
        )
    n = r["n"]
    assert isinstance(n, pq.NoisySeries)
    assert repr(n).splitlines()[0].startswith("noisy (epsilon")
    pd.testing.assert_frame_equal(n.ci(), r.ci("n"))
    assert repr(r.a) == repr(r["a"]) and "[" in repr(r["a"])
    # a row filter keeps the column's intervals, on the rows kept
    kept = r[r["sex"] == 1]["n"]
    pd.testing.assert_frame_equal(kept.ci(), r.ci("n").loc[[1]])
    # a key column is not noisy, and a changed column has no interval left
    assert type(r["sex"]) is pd.Series
    with pytest.raises(pq.PinqError, match="were changed"):
        (r["n"] * 2).ci()


def test_sql_frame_without_intervals_is_still_marked(session: pq.Session) -> None:
    with pq.testing.seed(8):
        r = session.sql("SELECT sex, SUM(age) / COUNT(*) AS r FROM pums GROUP BY sex", epsilon=1)
    assert repr(r).startswith("noisy (computed from released values")


def test_sql_key_selection_frame() -> None:
    s = pq.Session()
    s.register("raw", load_pums(), budget=pq.Budget(5, 1e-5), bounds=BOUNDS)
    with pq.testing.seed(9):
        r = s.sql("SELECT race, COUNT(*) AS n FROM raw GROUP BY race", epsilon=1, delta=1e-6)
    assert repr(r).splitlines()[0] == "noisy (epsilon 1, delta 0.000001), 95% intervals:"


# -- remote results share the types -------------------------------------------------------------
def test_remote_results_print_the_same(session: pq.Session, people: pq.PrivateFrame) -> None:
    with pq.testing.seed(10):
        results = [
            people.count(epsilon=1),
            people.mean("age", epsilon=1),
            people.partition("sex").mean("age", epsilon=1),
            session.sql("SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex", epsilon=1),
            people.select_keys("race", epsilon=1, delta=1e-6),
        ]
    for result in results:
        back = decode_result(encode_result(result))
        assert type(back) is type(result) and repr(back) == repr(result)


def test_plain_numpy_values_keep_pandas_behaviour(people: pq.PrivateFrame) -> None:
    with pq.testing.seed(11):
        counts = people.partition("sex").count(epsilon=1)
    assert counts.sum() == int(np.asarray(counts).sum())
    assert list(counts.to_frame().columns) == [counts.name if counts.name else 0]
