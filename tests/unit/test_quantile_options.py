"""Quantiles: the whole epsilon selects unless ci=True; public candidates need no bounds."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

import pinqpy as pq


def _frame(budget: pq.Budget, **kwargs: object) -> pq.PrivateFrame:
    df = pd.DataFrame({"x": [float(i % 50) for i in range(400)], "g": [i % 2 for i in range(400)]})
    return pq.PrivateFrame(df, budget, **kwargs)  # type: ignore[arg-type]


def test_median_without_ci_refuses_an_interval_and_states_ranks():
    b = pq.Budget(epsilon=10)
    f = _frame(b, bounds={"x": (0, 100)})
    m = f.median("x", epsilon=1)
    assert b.spent.epsilon == 1
    assert "histogram" not in m.mechanism and "epsilon=1," in m.mechanism
    with pytest.raises(pq.PinqError, match=r"median\(\.\.\., ci=True\).*quarter of epsilon"):
        m.ci()
    assert "ranks" in repr(m) and "no value interval" in repr(m)
    preview = f.accuracy("median", "x", epsilon=1)
    assert "ranks" in str(preview)
    assert b.spent.epsilon == 1  # the refusal and the preview charge nothing


def test_median_with_ci_spends_a_quarter_on_the_interval():
    b = pq.Budget(epsilon=10)
    f = _frame(b, bounds={"x": (0, 100)})
    with pq.testing.seed(4):
        m = f.quantile("x", 0.5, epsilon=1, ci=True)
    assert "PermuteAndFlip(epsilon=0.75," in m.mechanism and "histogram for ci" in m.mechanism
    assert b.spent.epsilon == 1
    low, high = m.ci(0.95)
    assert 0 <= low <= m <= high <= 100
    with pytest.raises(pq.PinqError, match="ci must be True or False"):
        f.median("x", epsilon=1, ci="yes")  # type: ignore[arg-type]
    assert b.spent.epsilon == 1


def test_partition_median_ci_flag():
    b = pq.Budget(epsilon=10)
    parts = _frame(b, bounds={"x": (0, 100)}).partition("g", keys=[0, 1])
    plain = parts.median("x", epsilon=1)
    with pytest.raises(pq.PinqError, match="ci=True"):
        plain.ci()
    paid = parts.quantile("x", 0.5, epsilon=1, ci=True)
    assert list(paid.ci().columns) == ["low", "high"]


def test_candidates_alone_bound_a_quantile():
    b = pq.Budget(epsilon=10)
    f = _frame(b)  # no bounds declared
    with pytest.raises(pq.PrivacyError, match="needs bounds for x"):
        f.median("x", epsilon=1)
    assert b.spent.epsilon == 0
    with pq.testing.no_noise():
        m = f.median("x", epsilon=1, candidates=[30, 10, 20, 40])
    assert m == 20.0  # the best of the public candidates (the exact median is 24.5)
    assert "candidates=4" in m.mechanism  # the grid is the candidates; no bounds added
    gen = (c for c in [0.0, 25.0, 49.0])
    with pq.testing.no_noise():
        assert f.quantile("x", 0.9, epsilon=1, candidates=gen) == 49.0  # a clamped top row
    with pytest.raises(pq.PinqError, match="at least two finite numbers"):
        f.median("x", epsilon=1, candidates=[5])
    with pytest.raises(pq.PinqError, match="candidates must be numbers"):
        f.median("x", epsilon=1, candidates="abc")
    assert b.spent.epsilon == Fraction(2)  # the refusals charged nothing


def test_declared_bounds_still_bound_candidates():
    f = _frame(pq.Budget(epsilon=10), bounds={"x": (0, 100)})
    with pytest.raises(pq.PinqError, match="within the bounds"):
        f.median("x", epsilon=1, candidates=[50, 200])


def test_bounds_error_names_an_expression_by_its_sql():
    f = _frame(pq.Budget(epsilon=10))
    with pytest.raises(pq.PrivacyError, match=r"needs bounds for x \* 2: ") as err:
        f.median(pq.col("x") * 2, epsilon=1)
    assert "this expression" not in str(err.value)


def test_sql_result_shows_no_interval_for_a_quantile_without_one():
    s = pq.Session()
    s.register("t", pd.DataFrame({"x": [float(i) for i in range(200)]}), budget=pq.Budget(10))
    r = s.sql("SELECT COUNT(*) AS n, MEDIAN(x, 0, 200) AS m FROM t", epsilon=1)
    html = r._repr_html_()
    assert len(r.ci("n")) == 1  # the count keeps its interval
    with pytest.raises(pq.PinqError, match="quantile_ci = true"):
        r.ci("m")
    # The median shows its rank error (as the text repr does), never an interval of values.
    assert "m rank error (95%)" in html and "m 95% interval" not in html
    assert "n 95% interval" in html
    paid = s.sql("SELECT MEDIAN(x, 0, 200) AS m FROM t OPTIONS (quantile_ci = true)", epsilon=1)
    assert "PermuteAndFlip" in paid._repr_html_()
    assert "m 95% interval" in paid._repr_html_()
