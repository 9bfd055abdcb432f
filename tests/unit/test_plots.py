"""Plots, compared by structure (the Axes' artists), never by pixels: a release's bars and its
intervals (a count's clipped at 0), a budget's spending, the error against epsilon; each
produces a PNG with the Agg backend and charges nothing."""

from __future__ import annotations

import io
import sys
from fractions import Fraction

import matplotlib
import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums
from pinqpy.results.accuracy import AdditiveAccuracy
from pinqpy.results.noise import DiscreteLaplaceNoise, LaplaceNoise
from pinqpy.results.tables import NoisySeries

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.container import BarContainer, ErrorbarContainer


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _png(ax: object) -> bytes:
    out = io.BytesIO()
    ax.figure.savefig(out, format="png")  # type: ignore[attr-defined]
    return out.getvalue()


def _bars(ax: object) -> list[float]:
    [bars] = [c for c in ax.containers if isinstance(c, BarContainer)]  # type: ignore[attr-defined]
    return [p.get_height() for p in bars.patches]


def _error_extents(ax: object) -> list[tuple[float, float]]:
    [errs] = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]  # type: ignore[attr-defined]
    segments = errs.lines[2][0].get_segments()
    return [(float(s[0][1]), float(s[1][1])) for s in segments]


def _flat(pairs: object) -> list[float]:
    return [float(x) for pair in pairs for x in pair]  # type: ignore[attr-defined]


def test_a_count_histogram_is_bars_with_intervals_clipped_at_0() -> None:
    acc = AdditiveAccuracy(np.array([2, 40, -3]), DiscreteLaplaceNoise(Fraction(2)), epsilon=0.5)
    series = NoisySeries.from_release(acc, index=pd.Index(["a", "b", "c"], name="city"))
    ax = series.plot()
    assert _bars(ax) == [2, 40, -3]
    low, high = series.ci()["low"].to_numpy(), series.ci()["high"].to_numpy()
    assert low[0] < 0  # the interval reaches below 0 ...
    extents = _error_extents(ax)
    want = [(max(lo, 0), max(hi, 0)) for lo, hi in zip(low, high, strict=True)]
    for got, (lo, hi), v in zip(extents, want, [2, 40, -3], strict=True):
        assert got == (min(lo, v), max(hi, v))  # the bar's own value stays inside
    assert min(e[0] for e in extents[:2]) == 0  # ... and is drawn from 0
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b", "c"]
    assert ax.get_xlabel() == "city" and "count" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["released (noisy)", "95% interval (clipped at 0)"]
    assert _png(ax).startswith(b"\x89PNG")


def test_a_mean_series_is_not_clipped_and_level_is_honoured() -> None:
    acc = AdditiveAccuracy(np.array([-1.5, 2.0]), LaplaceNoise(1.0), epsilon=1)
    series = NoisySeries.from_release(acc, index=["x", "y"], name="score")
    ax = series.plot(level=0.5)
    ci = series.ci(0.5)
    want = _flat(zip(ci["low"], ci["high"], strict=True))
    assert _flat(_error_extents(ax)) == pytest.approx(want)
    assert ax.get_ylabel() == "score"
    assert "50% interval" in ax.get_legend().get_texts()[1].get_text()


def _frame() -> pq.PrivateFrame:
    return pq.PrivateFrame(load_pums(), pq.Budget(10), bounds=PUMS_BOUNDS, keys=PUMS_KEYS)


def test_a_median_without_an_interval_has_no_error_bars() -> None:
    with pq.testing.seed(3):
        medians = _frame().partition("sex").median("age", epsilon=1)
    ax = medians.plot()
    assert len(_bars(ax)) == 2
    assert not [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert "ranks" in ax.get_title() and "no value interval" in ax.get_title()


def test_a_sql_answer_plots_its_noisy_column_by_its_keys() -> None:
    session = pq.Session()
    session.register("p", load_pums(), budget=pq.Budget(10), bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
    with pq.testing.seed(1):
        result = session.sql(
            "SELECT sex, married, COUNT(*) AS n, AVG(age) AS a FROM p GROUP BY sex, married",
            epsilon=1,
        )
    with pytest.raises(pq.PinqError, match="choose one with y="):
        result.plot()
    ax = result.plot(y="n")
    assert _bars(ax) == list(result["n"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0, 0", "0, 1", "1, 0", "1, 1"]
    assert ax.get_xlabel() == "sex, married"
    mean = result.plot(y="a")
    ci = result.ci("a")
    assert _flat(_error_extents(mean)) == pytest.approx(
        _flat(zip(ci["low"], ci["high"], strict=True))
    )
    assert type(result.plot(kind="line", y="n")).__name__ == "Axes"  # pandas' own, as before
    assert type(result["n"].plot.line()).__name__ == "Axes"


def test_budget_plot_shows_each_charge_the_running_total_and_the_total(tmp_path) -> None:
    budget = pq.Budget(1, name="census")
    frame = pq.PrivateFrame(load_pums(), budget, bounds=PUMS_BOUNDS)
    for eps in (0.1, 0.25, 0.05):
        frame.where(f"age > {int(eps * 100)}").count(epsilon=eps)
    ax = budget.plot()
    assert _bars(ax) == pytest.approx([0.1, 0.25, 0.05])
    [step] = [line for line in ax.get_lines() if line.get_label() == "spent so far"]
    assert list(step.get_ydata()) == pytest.approx([0.1, 0.35, 0.4])
    [total] = [line for line in ax.get_lines() if line.get_label() == "total 1"]
    assert list(total.get_ydata()) == [1, 1]
    assert ax.get_title() == "budget 'census': 0.4 of 1 spent"
    assert _png(ax).startswith(b"\x89PNG")


def test_a_ledger_budget_plots_every_charge_the_file_holds(tmp_path) -> None:
    path = tmp_path / "b.db"
    first = pq.Budget(1, name="kept", ledger=str(path))
    pq.PrivateFrame(load_pums(), first).count(epsilon=0.3)
    again = pq.Budget(1, name="kept", ledger=str(path))  # a later run of the same budget
    pq.PrivateFrame(load_pums(), again).where("age > 3").count(epsilon=0.2)
    assert _bars(again.plot()) == pytest.approx([0.3, 0.2])


def test_a_zcdp_budget_plots_what_spent_reports() -> None:
    budget = pq.Budget(1, 1e-6, accounting="zcdp")
    frame = pq.PrivateFrame(load_pums(), budget)
    seen = []
    for i in range(3):
        frame.where(f"age > {i}").count(epsilon=0.1)
        seen.append(float(budget.spent.epsilon))
    [step] = [line for line in budget.plot().get_lines() if line.get_label() == "spent so far"]
    assert list(step.get_ydata()) == pytest.approx(seen)


def test_accuracy_curve_plots_the_previews_and_charges_nothing() -> None:
    frame = _frame()
    epsilons = [0.05, 0.1, 0.5, 1.0]
    ax = frame.accuracy_curve("mean", "income", epsilons=epsilons, n=1000)
    half, expected = ax.get_lines()
    previews = [frame.accuracy("mean", "income", epsilon=e, n=1000) for e in epsilons]
    assert list(half.get_xdata()) == epsilons
    assert list(half.get_ydata()) == pytest.approx([p.error for p in previews])
    assert list(expected.get_ydata()) == pytest.approx([p.expected for p in previews])
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "epsilon"
    assert "n = 1000" in ax.get_title()
    counts = frame.accuracy_curve("count", epsilons=epsilons, n=1000)  # n ignored for a count
    assert list(counts.get_lines()[0].get_ydata()) == [
        frame.accuracy("count", epsilon=e).error for e in epsilons
    ]
    with pytest.raises(pq.PinqError, match="pass n="):
        frame.accuracy_curve("mean", "income", epsilons=epsilons)
    assert frame.budgets[0].spent == pq.Cost(0)
    assert _png(ax).startswith(b"\x89PNG")


def test_without_matplotlib_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(pq.PinqError, match=r"pinqpy\[notebook\]"):
        pq.Budget(1).plot()
    assert pq.Budget(1)._spending() == ([], [], [])  # no charge yet: an empty plot
