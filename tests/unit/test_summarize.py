"""summarize(): one row per planned measurement, in the column's units where the public facts
allow, the same figures as accuracy() and EXPLAIN, nothing charged and no data read; and the
readable repr of an accuracy preview."""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from html import escape as html_escape

import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums
from pinqpy.engines.pandas.runner import PlanRunner
from pinqpy.interfaces.shell import Shell

COLUMNS = [
    "query", "measurement", "mechanism", "epsilon", "delta", "rho", "noise_scale",
    "expected_error", "ci95_half_width", "unit", "n", "needs_n", "note",
]  # fmt: skip


@pytest.fixture
def no_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Any read of a pandas table fails the test."""

    def refuse(self: object, node: object) -> None:
        raise AssertionError("the data was read")

    monkeypatch.setattr(PlanRunner, "visit_source", refuse)
    yield


def _people(accounting: str = "approx") -> pq.PrivateFrame:
    budget = pq.Budget(1, 1e-6, accounting=accounting)
    return pq.PrivateFrame(load_pums(), budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS)


def test_the_reads_are_really_refused(no_reads: None) -> None:
    with pytest.raises(pq.PinqError, match="failed while reading"):
        _people().count(epsilon=0.1)  # the fixture works: a real count trips it


def test_one_row_per_plan_with_the_previews_figures(no_reads: None) -> None:
    people = _people()
    plans = [
        "count", ("mean", "income"), ("median", "age"), ("quantile", "age", {"q": 0.9}),
        {"aggregation": "sum", "column": "age", "epsilon": 0.3}, ("stddev", "age"),
    ]  # fmt: skip
    table = people.summarize(*plans, epsilon=0.1, n=1000)
    assert list(table.columns) == COLUMNS
    assert list(table["query"]) == [
        "count", "mean(income)", "median(age)", "quantile(age, q=0.9)", "sum(age)", "stddev(age)",
    ]  # fmt: skip
    assert list(table["epsilon"]) == [0.1, 0.1, 0.1, 0.1, 0.3, 0.1]
    for row, (kind, column, kw) in zip(
        table.itertuples(),
        [("count", None, {}), ("mean", "income", {"n": 1000}), ("median", "age", {"n": 1000}),
         ("quantile", "age", {"n": 1000, "q": 0.9}), ("sum", "age", {}), ("stddev", "age", {})],
        strict=True,
    ):  # fmt: skip
        eps = 0.3 if kind == "sum" else 0.1
        want = people.accuracy(kind, column, epsilon=eps, **kw)
        assert row.ci95_half_width == pytest.approx(want.error)
        assert row.expected_error == pytest.approx(want.expected)
        assert row.mechanism == want.mechanism
        assert not row.needs_n
    assert list(table["unit"]) == ["rows", "income", "age", "age", "age", "age"]
    assert list(table["n"].fillna(0)) == [0, 1000, 1000, 1000, 0, 0]  # n only where it counts
    assert table["rho"].isna().all()  # an approx budget: no zCDP reading
    assert people.budgets[0].spent == pq.Cost(0)


def test_figures_that_need_n_say_so(no_reads: None) -> None:
    table = _people().summarize(("mean", "income"), ("median", "age"), "count", epsilon=0.2)
    mean, median, count = (r for _, r in table.iterrows())
    assert mean["needs_n"] and math.isnan(mean["expected_error"])
    assert math.isnan(mean["ci95_half_width"]) and "/n" in mean["note"]
    assert "pass n=" in mean["note"]
    assert median["needs_n"] and median["unit"] == "ranks" and median["ci95_half_width"] > 0
    assert not count["needs_n"] and count["ci95_half_width"] == 15


def test_other_levels_name_their_column_and_zcdp_shows_rho(no_reads: None) -> None:
    table = _people("zcdp").summarize("count", ("count", None, {"delta": 1e-7}), epsilon=0.1,
                                      level=0.9)  # fmt: skip
    assert "ci90_half_width" in table.columns
    pure, gauss = table["rho"]
    assert pure == pytest.approx(0.1**2 / 2)  # an epsilon-DP measurement is eps²/2-zCDP
    assert gauss > 0 and table["delta"].tolist() == [0.0, 1e-7]


def test_a_partition_summarizes_each_part(no_reads: None) -> None:
    parts = _people().partition("sex")
    table = parts.summarize("count", ("mean", "age"), epsilon=0.1, n=500)
    assert list(table["query"]) == ["count per part", "mean(age) per part"]
    assert table["ci95_half_width"][1] == pytest.approx(
        parts.accuracy("mean", "age", epsilon=0.1, n=500).error
    )


def test_bad_plans_are_refused_before_anything(no_reads: None) -> None:
    people = _people()
    with pytest.raises(pq.PinqError, match="needs an epsilon"):
        people.summarize("count")
    with pytest.raises(pq.PinqError, match="at least one plan"):
        people.summarize(epsilon=0.1)
    with pytest.raises(pq.PinqError, match="unknown plan option 'eps'"):
        people.summarize(("count", None, {"eps": 1}), epsilon=0.1)
    with pytest.raises(pq.PinqError, match="each plan is"):
        people.summarize(3, epsilon=0.1)


def _session(accounting: str = "approx") -> pq.Session:
    session = pq.Session()
    budget = pq.Budget(1, 1e-5, accounting=accounting)
    session.register("pums", load_pums(), budget=budget, bounds=PUMS_BOUNDS,
                     keys={"sex": [0, 1]})  # fmt: skip
    return session


def test_session_summarize_states_explains_figures(no_reads: None) -> None:
    session = _session()
    queries = (
        "SELECT COUNT(*), AVG(income) FROM pums",
        "SELECT sex, MEDIAN(age) FROM pums GROUP BY sex OPTIONS (epsilon = 0.4)",
        "SELECT educ, COUNT(*) FROM pums GROUP BY educ OPTIONS (delta = 1e-6)",
    )
    table = session.summarize(*queries, epsilon=0.2, n=1000)
    assert list(table.columns) == COLUMNS
    assert list(table["measurement"]) == ["COUNT(*)", "AVG(income)", "MEDIAN(age)", "COUNT(*)"]
    assert list(table["epsilon"]) == [0.1, 0.1, 0.4, 0.2]
    assert list(table["query"])[:2] == [queries[0]] * 2
    count = session.table("pums").accuracy("count", epsilon=0.1)
    assert table["ci95_half_width"][0] == count.error
    mean = session.table("pums").accuracy("mean", "income", epsilon=0.1, n=1000)
    assert table["ci95_half_width"][1] == pytest.approx(mean.error)
    assert "key selection" in table["note"][3] and table["delta"][3] == 1e-6
    explained = str(session.explain(queries[0], epsilon=0.2, n=1000))
    assert f"± {pq.results.format.sig(mean.error)} at 95%" in explained  # type: ignore[attr-defined]
    assert session.table("pums").budgets[0].spent == pq.Cost(0)


def test_session_summarize_refuses_what_is_not_a_query() -> None:
    with pytest.raises(pq.PinqSyntaxError, match="SELECT"):
        _session().summarize("SHOW TABLES")
    with pytest.raises(pq.PinqError, match="needs an epsilon"):
        _session().summarize("SELECT COUNT(*) FROM pums")


def test_the_shell_prints_it_as_a_table() -> None:
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(_session(), epsilon=0.1, out=out, err=err)
    assert shell.command(".summarize SELECT COUNT(*), AVG(income) FROM pums")
    lines = out.getvalue().splitlines()
    assert lines[0].split()[:3] == ["measurement", "mechanism", "epsilon"]
    assert lines[2].startswith("COUNT(*)") and lines[2].split()[-3:] == ["19.99", "60", "rows"]
    assert "needs n" in lines[3]
    assert lines[-1].startswith("(charged nothing")
    shell.command(".mode csv")
    out.truncate(0), out.seek(0)
    assert shell.command(".summarize SELECT COUNT(*) FROM pums OPTIONS (epsilon = 0.5)")
    assert out.getvalue().splitlines()[1].split(",")[2] == "0.5"
    assert err.getvalue().startswith("(charged nothing")  # the footer keeps csv clean
    assert not shell.command(".summarize")
    assert shell.session.table("pums").budgets[0].spent == pq.Cost(0)  # type: ignore[attr-defined]


# -- the accuracy preview's repr ----------------------------------------------------------------


def test_a_preview_reads_as_one_line_and_a_small_table() -> None:
    people = pq.PrivateFrame(load_pums(), pq.Budget(1, name="census"), bounds=PUMS_BOUNDS)
    count = people.accuracy("count", epsilon=0.1)
    assert repr(count) == (
        "AccuracyPreview(count at epsilon 0.1: ± 30 rows at 95%, expected 9.983 rows; "
        "would charge epsilon 0.1)"
    )
    mean = people.accuracy("mean", "income", epsilon=0.1)
    line = repr(mean)
    assert "\n" not in line and "/n at 95% for n rows" in line
    assert "Budget(" not in line and "charge=" not in line and "Cost(" not in line
    with_n = repr(people.accuracy("mean", "income", epsilon=0.1, n=1000))
    assert "± 20570 at 95% for n = 1000, expected 7508" in with_n
    html = mean._repr_html_()
    assert "<table" in html and "Budget(" not in html and "nothing charged" in html
    assert "Mean(sum: Lattice Laplace" in html
    # the neighbour relation the charge protects, as str() says it
    assert mean.neighbours and f">{html_escape(mean.neighbours)}</td>" in html
    assert f"neighbours: {mean.neighbours}" in str(mean)
    assert "Budget(" not in str(mean)
    keys = people.accuracy("select_keys", "educ", epsilon=0.1, delta=1e-7)
    assert "threshold" in repr(keys) and "delta 1e-07" in repr(keys)


def test_summarize_html_is_a_table(no_reads: None) -> None:
    html = _people().summarize("count", epsilon=0.1)._repr_html_()
    assert "<table" in html and "ci95_half_width" in html

