"""Rich HTML reprs: schema, stability, budget bars and charges -- never a private value."""

from __future__ import annotations

import html as htmllib
import re
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.accounting.budget import budget_panel
from pinqpy.api.panels import frame_panel, session_panel
from pinqpy.results import html as render
from pinqpy.results.accuracy import AdditiveAccuracy, ArgmaxAccuracy
from pinqpy.results.html import MAX_CHARGES, result_html
from pinqpy.results.noise import LaplaceNoise
from pinqpy.sql.explain import Explanation

SECRET_AGE = 7319  # a value that must never appear in any HTML pinqpy produces
SECRET_NAME = "Zebulon-Quartz"
SECRET_INCOME = 918273.5
ROWS = 4231  # the row count must never appear either


# The HTML of a frame, a budget and a session: each builds its description, results renders it.
def frame_html(frame: pq.PrivateFrame) -> str:
    return render.frame_html(frame_panel(frame))


def budget_html(budget: pq.Budget) -> str:
    return render.budget_html(budget_panel(budget))


def session_html(session: pq.Session) -> str:
    return render.session_html(session_panel(session._private, session._public))


RENDERERS = {
    pq.PrivateFrame: frame_html,
    pq.Budget: budget_html,
    pq.Session: session_html,
    pq.NoisyFrame: result_html,
    pq.NoisySeries: result_html,
    pq.NoisyValue: result_html,
    pq.NoisyLabel: result_html,
}


@pytest.fixture(autouse=True)
def wired() -> Iterator[None]:
    """``_repr_html_`` on each class, as the package wires it (patched in until it does)."""
    with pytest.MonkeyPatch.context() as mp:
        for cls, fn in RENDERERS.items():
            if cls.__dict__.get("_repr_html_") is None:
                mp.setattr(cls, "_repr_html_", fn, raising=False)
        yield


@pytest.fixture
def secret_df() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "name": rng.choice(["Ann", "Bo", "Cy"], ROWS),
            "age": rng.integers(20, 60, ROWS),
            "income": rng.uniform(0, 1000, ROWS).round(2),
            "uid": np.arange(ROWS) % 977,
        }
    )
    df.loc[17, ["name", "age", "income"]] = [SECRET_NAME, SECRET_AGE, SECRET_INCOME]
    return df


@pytest.fixture
def budget() -> pq.Budget:
    return pq.Budget(epsilon=2.0, name="study")


@pytest.fixture
def people(secret_df: pd.DataFrame, budget: pq.Budget) -> pq.PrivateFrame:
    return pq.PrivateFrame(
        secret_df,
        budget,
        bounds={"age": (0, 100), "income": (0, 1000)},
        keys={"name": ["Ann", "Bo", "Cy"]},
    )


def assert_clean(text: str) -> None:
    assert str(SECRET_AGE) not in text
    assert SECRET_NAME not in text
    assert "918273" not in text
    assert str(ROWS) not in text and f"{ROWS:,}" not in text
    assert "<script" not in text.lower()
    assert "javascript:" not in text.lower()


def texts(html: str) -> str:
    """The visible text of an HTML fragment (tags stripped, entities decoded)."""
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


# -- PrivateFrame ----------------------------------------------------------------------------
def test_frame_html_shows_schema_stability_and_budget(people: pq.PrivateFrame) -> None:
    html = people._repr_html_()
    assert html == frame_html(people)
    assert_clean(html)
    text = texts(html)
    for col, ctype in people.schema.items():
        assert col in text and ctype in text
    assert "[0.0, 100.0]" in text and "[0.0, 1000.0]" in text
    assert "3 public keys" in text
    assert "stability 1 " in text
    assert "Budget 'study'" in text
    assert "spent ε 0 of 2 (0%)" in text and "remaining ε 2" in text
    assert "no charges yet" in text


def test_frame_html_after_charges(people: pq.PrivateFrame, budget: pq.Budget) -> None:
    people.where("age > 30").count(epsilon=0.5)
    people.mean("income", epsilon=0.25)
    html = frame_html(people)
    assert_clean(html)
    text = texts(html)
    assert "spent ε 0.75 of 2 (38%)" in text
    assert "remaining ε 1.25" in text
    assert "charges (2)" in text
    # the bar itself: spent and remaining widths
    assert "width:37.50%" in html and "width:62.50%" in html
    assert 'aria-valuenow="0.75"' in html and 'aria-valuemax="2"' in html


def test_frame_html_derived_frames(people: pq.PrivateFrame, secret_df: pd.DataFrame) -> None:
    grouped = people.where("age > 30").groupby("name").agg(n="COUNT(*)", top="MAX(income)")
    html = frame_html(grouped)
    assert_clean(html)
    assert "stability <b>2</b>" in html
    assert "top" in texts(html)

    users = pq.PrivateFrame(secret_df, pq.Budget(epsilon=1.0), privacy_unit="uid")
    html = frame_html(users)
    assert_clean(html)
    assert "stability <b>∞</b>" in html and "bound_contributions" in html
    assert "privacy unit" in texts(html) and "'uid'" in texts(html)
    assert "stability <b>3</b>" in frame_html(users.bound_contributions(max_rows=3))

    other = pq.PrivateFrame(secret_df, pq.Budget(epsilon=3.0, name="second"))
    both = people.select("age").concat(other.select("age"))
    html = frame_html(both)
    assert_clean(html)
    assert "Budget 'study'" in texts(html)
    assert "Budget 'second'" in texts(html)


def test_frame_html_reads_no_data(
    people: pq.PrivateFrame, secret_df: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rendering never runs a plan over the rows."""
    from pinqpy.engines.pandas.runner import PlanRunner

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the HTML repr read data")

    monkeypatch.setattr(PlanRunner, "visit", refuse)
    other = pq.PrivateFrame(secret_df, pq.Budget(epsilon=1.0))
    with pytest.raises(pq.PinqError, match="failed while reading the data"):
        other.count(epsilon=0.1)  # the patch does stop data from being read
    grouped = people.where("age > 3").groupby("name").agg(n="COUNT(*)")
    assert "n" in texts(frame_html(grouped))
    s = pq.Session()
    s.register("people", people)
    assert "people" in texts(session_html(s))


# -- Budget ----------------------------------------------------------------------------------
def test_budget_html_bar_numbers_and_charges() -> None:
    b = pq.Budget(epsilon=1.0)
    for label in ["first query", "second query", "third query"]:
        b._charge_exact(pq.Cost(epsilon=0.1), label)
    html = b._repr_html_()
    text = texts(html)
    assert "spent ε 0.3 of 1 (30%)" in text and "remaining ε 0.7" in text
    assert "width:30.00%" in html and "width:70.00%" in html
    assert "first query" in text and "third query" in text
    assert "charges (3)" in text
    assert "δ" not in text and "delta" not in text.replace("delta=", "")


def test_budget_html_delta_bar() -> None:
    b = pq.Budget(epsilon=1.0, delta=1e-5)
    b._charge_exact(pq.Cost(epsilon=0.5, delta=2.5e-6), "gaussian")
    text = texts(budget_html(b))
    assert "spent δ 0.0000025 of 0.00001 (25%)" in text
    assert "remaining δ 0.0000075" in text
    assert "spent ε 0.5 of 1 (50%)" in text


def test_budget_html_full_and_accounting_models() -> None:
    b = pq.Budget(epsilon=0.5, accounting="pure")
    b._charge_exact(pq.Cost(epsilon=0.5), "all of it")
    html = budget_html(b)
    assert "(100%)" in html and "width:100.00%" in html and "width:0.00%" in html
    assert "accounting=pure" in html
    z = pq.Budget(epsilon=1.0, delta=1e-6, accounting="zcdp")
    assert "accounting=zcdp" in budget_html(z)


def test_budget_html_lists_recent_charges_only() -> None:
    b = pq.Budget(epsilon=100.0)
    for i in range(MAX_CHARGES + 5):
        b._charge_exact(pq.Cost(epsilon=1), f"query number {i}")
    text = texts(budget_html(b))
    assert f"charges ({MAX_CHARGES + 5})" in text
    assert "5 earlier charge(s) not shown" in text
    assert "query number 4 " not in text
    assert f"query number {MAX_CHARGES + 4}" in text


def test_budget_html_escapes_text() -> None:
    b = pq.Budget(epsilon=1.0, name="<b>x</b>")
    b._charge_exact(pq.Cost(epsilon=0.1), "<script>alert(1)</script> & more")
    html = budget_html(b)
    assert "<script>" not in html and "<b>x</b>" not in html
    assert "&lt;script&gt;" in html and "&amp; more" in html


# -- Session ---------------------------------------------------------------------------------
def test_session_html(people: pq.PrivateFrame, secret_df: pd.DataFrame) -> None:
    s = pq.Session()
    s.register("people", people)
    s.register("visits", secret_df, budget=pq.Budget(epsilon=1.0), privacy_unit="uid", max_rows=2)
    s.register_public("labels", pd.DataFrame({"name": ["Ann"], "label": [SECRET_NAME]}))
    s.sql("SELECT COUNT(*) FROM people", epsilon=0.4)
    html = s._repr_html_()
    assert html == session_html(s)
    assert_clean(html)
    text = texts(html)
    for table in ("people", "visits", "labels"):
        assert table in text
    assert "name: str, age: int" in text
    assert "label" in text  # public schema, not its values
    assert "Budget 'study' of people" in text
    assert "spent ε 0.4 of 2 (20%)" in text
    assert "SELECT COUNT(*) FROM people" in text
    assert "spent ε 0 of 1 (0%)" in text  # the visits budget
    assert "texts" not in text and "no tables" not in text
    assert "no tables registered" in texts(session_html(pq.Session()))


# -- results ---------------------------------------------------------------------------------
def test_noisy_frame_html_shows_values_and_intervals(people: pq.PrivateFrame) -> None:
    s = pq.Session()
    s.register("people", people)
    with pq.testing.seed(3):
        result = s.sql("SELECT name, COUNT(*) AS n FROM people GROUP BY name", epsilon=0.5)
    html = result._repr_html_()
    assert html == result_html(result)
    text = texts(html)
    assert "n 95% interval" in text and html.count("<table") == 1  # values and intervals
    for value in result["n"]:
        assert f"{int(value):,}" in text  # the released (public) counts, as integers
    low, high = result.ci("n").iloc[0]
    assert low < result["n"].iloc[0] < high
    # a count's interval is symmetric about the released value: shown as ± its half-width
    assert f"± {int(high - result['n'].iloc[0])}" in text and "[" not in text.split("n 0")[-1]
    assert "Laplace" in text and "epsilon 0.5" in text


def test_noisy_frame_html_drops_intervals_of_changed_values(people: pq.PrivateFrame) -> None:
    s = pq.Session()
    s.register("people", people)
    result = s.sql("SELECT name, COUNT(*) AS n, AVG(age) AS a FROM people GROUP BY name", 0.5)
    changed = result.copy()
    changed["n"] = changed["n"] * 2
    html = result_html(changed)
    assert "a 95% interval" in texts(html) and "n 95% interval" not in texts(html)
    assert "n: Laplace" not in texts(html)  # n lost its interval; a (a mean) keeps its own
    assert "a: Mean" in texts(html)
    assert "interval" not in result_html(changed[["name"]])


def test_scalar_series_and_label_html() -> None:
    acc = AdditiveAccuracy(np.array([512.25]), LaplaceNoise(10.0), epsilon=0.1)
    value = pq.NoisyValue.from_release(acc)
    text = texts(value._repr_html_())
    assert "512.25" in text and "95% interval ± 29.9573" in text  # symmetric: value ± e
    assert "Laplace(scale=10.0), epsilon 0.1" in text

    acc3 = AdditiveAccuracy(np.array([1.0, 2.0, 3.0]), LaplaceNoise(1.0), epsilon=1)
    series = pq.NoisySeries.from_release(acc3, index=["a", "b", "c"], name="n")
    text = texts(series._repr_html_())
    assert "95% interval" in text and "1.0 ± 3.0" in text  # two digits of the error
    assert "95% interval" not in result_html(series * 2)  # values changed: no interval

    lab = pq.NoisyLabel.from_release(
        ArgmaxAccuracy(np.array(["CA"], dtype=object), epsilon=1.0, n_candidates=3)
    )
    text = texts(lab._repr_html_())
    assert "CA" in text and "at most 4.09434 below" in text


def test_explain_and_plain_frames() -> None:
    text = Explanation("EXPLAIN <plan>\n  Scan t")
    html = result_html(text)
    assert html.startswith("<pre") and "&lt;plan&gt;" in html
    assert "<table" in result_html(pd.DataFrame({"table": ["t"]}))


def test_no_html_for_private_frames_contains_data(
    people: pq.PrivateFrame, secret_df: pd.DataFrame
) -> None:
    frames = [
        people,
        people.where(f"age = {SECRET_AGE - 1}"),
        people.select("name", decade="FLOOR(age / 10)"),
        people.partition("name")["Bo"],
        people.join(pd.DataFrame({"name": ["Ann"], "x": [1]}), on="name"),
    ]
    for frame in frames:
        assert_clean(frame_html(frame))
    assert_clean(budget_html(people.budgets[0]))


def test_release_html_clips_counts_at_0_and_keeps_one_format_per_column() -> None:
    from fractions import Fraction

    from pinqpy.results.noise import DiscreteLaplaceNoise

    counts = AdditiveAccuracy(np.array([3, 250]), DiscreteLaplaceNoise(Fraction(2)), epsilon=0.5)
    means = AdditiveAccuracy(np.array([1.23456, 20.5]), LaplaceNoise(0.04), epsilon=0.5)
    frame = pq.NoisyFrame.from_release(
        pd.DataFrame({"k": ["a", "b"], "n": counts.values, "m": means.values}),
        {"n": counts, "m": means},
    )
    text = texts(frame._repr_html_())
    low, high = frame.ci("n").iloc[0]
    assert low < 0  # the noise's interval reaches below 0 ...
    assert f"3 [0, {int(high)}]" in text  # ... and is shown clipped, lopsided
    assert f"± {int(high - 3)}" in text.split("b 250")[-1]  # the far-from-0 count keeps ±
    assert "clipped at 0" in text
    # one format for the column m: the decimals two digits of its half-width need
    assert "1.23 ± 0.12" in text and "20.50 ± 0.12" in text
    assert frame.ci("n")["low"].iloc[0] == low  # ci() itself is the noise's interval


def test_release_html_of_a_median_series_shows_its_rank_error() -> None:
    frame = pq.PrivateFrame(pd.DataFrame({"g": [0, 1] * 50, "x": range(100)}), pq.Budget(5),
                            bounds={"x": (0, 100)}, keys={"g": [0, 1]})  # fmt: skip
    series = frame.partition("g").median("x", epsilon=1)
    text = texts(series._repr_html_())
    ranks = series.accuracy.rank_error(0.95)
    assert f"± {ranks:.4g} ranks" in text and "rank error (95%)" in text
    assert "interval" not in text.replace("no value interval", "")
