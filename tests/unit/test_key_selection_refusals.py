"""Key selection and group bounds: every refusal that needs no data comes before the charge
and spends nothing, and nothing fails after the charge because of what the rows hold.

A key value that cannot be hashed (a list) is no key on every engine, as the pandas engine
has always dropped it: the DuckDB engine used to fail after charging.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import pytest

import pinqpy as pq

LISTS = pd.DataFrame({"items": [[1, 2], [1, 2], [3]] * 100, "k": [1, 2, 3] * 100})


@pytest.mark.parametrize("engine", ["pandas", "duckdb", "polars"])
@pytest.mark.parametrize("columns", ["items", ["items", "k"]])
def test_a_list_value_is_no_key_and_nothing_fails_after_the_charge(engine, columns):
    budget = pq.Budget(10, 1e-3)
    with pq.testing.engine(engine):
        f = pq.PrivateFrame(LISTS, budget)
        with pq.testing.no_noise():
            keys = f.select_keys(columns, 1, 1e-6)
    assert list(keys) == [] and budget.spent == pq.Cost(1, 1e-6)


@pytest.mark.parametrize("engine", ["pandas", "duckdb", "polars"])
def test_sql_group_by_a_list_column_releases_no_key(engine):
    budget = pq.Budget(10, 1e-3)
    s = pq.Session()
    with pq.testing.engine(engine):
        s.register("t", LISTS, budget=budget)
        with pq.testing.no_noise():
            res = s.sql("SELECT items, COUNT(*) AS n FROM t GROUP BY items", epsilon=1, delta=1e-6)
    assert len(res) == 0 and budget.spent == pq.Cost(1, 1e-6)


ROWS = pd.DataFrame({"pid": [1, 1, 2, 3], "k": ["a", "b", "a", "c"], "x": [1.0, 2.0, 3.0, 4.0]})


def _user(budget: pq.Budget) -> pq.PrivateFrame:
    return pq.PrivateFrame(ROWS, budget, privacy_unit="pid")


def _rows(budget: pq.Budget) -> pq.PrivateFrame:
    return pq.PrivateFrame(ROWS, budget)


def _sql(query: str, **kw: object) -> Callable[[pq.Budget], object]:
    def run(budget: pq.Budget) -> object:
        s = pq.Session()
        s.register("t", ROWS, budget=budget, **kw)  # type: ignore[arg-type]
        return s.sql(query, epsilon=1, delta=1e-6)

    return run


REFUSED: dict[str, tuple[Callable[[pq.Budget], object], str]] = {
    "key selection on a zCDP budget": (
        lambda b: _rows(b).histogram("k", 1, delta=1e-6),
        "no zCDP",
    ),
    "histogram without keys or delta": (lambda b: _rows(b).histogram("k", 1), "not public"),
    "repeated public keys": (
        lambda b: _rows(b).histogram("x", 1, keys=[1, 1.0]),
        "must not repeat",
    ),
    "max_groups on a record-level frame": (
        lambda b: _rows(b).select_keys("k", 1, 1e-6, max_groups=2),
        "privacy unit",
    ),
    "unbounded user-level key selection": (
        lambda b: _user(b).select_keys("k", 1, 1e-6),
        "max_groups",
    ),
    "delta of 1": (lambda b: _rows(b).select_keys("k", 1, 1), "delta"),
    "bound groups by the unit": (
        lambda b: _user(b).bound_contributions(max_groups=2, max_rows_per_group=1, by="pid"),
        "privacy unit",
    ),
    "bound groups of a record-level frame": (
        lambda b: _rows(b).bound_contributions(max_groups=2, max_rows_per_group=1, by="k"),
        "user-level",
    ),
    "SQL Gaussian key selection at stability 2": (
        _sql(
            "SELECT k, COUNT(*) FROM t GROUP BY k OPTIONS (noise = 'gaussian')",
            privacy_unit="pid",
            max_rows=2,
        ),
        "stability 1",
    ),
    "SQL per-unit COUNT(*) without a bound on rows": (
        _sql("SELECT k, COUNT(*) FROM t GROUP BY k OPTIONS (max_groups_contributed = 2)",
             privacy_unit="pid"),
        "contribution_bounds_per_group",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refusals_that_need_no_data_spend_nothing(case):
    call, message = REFUSED[case]
    budget = pq.Budget(10, 1e-3, accounting="zcdp" if "zCDP" in case else "approx")
    with pytest.raises(pq.PinqError, match=message):
        result = call(budget)
        if isinstance(result, pq.PrivateFrame):  # a transformation: refused when built
            result.count(1)
    assert budget.spent == pq.Cost(0)
