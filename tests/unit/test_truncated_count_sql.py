"""The SQL engines count a truncation without choosing its rows (pinqpy.plan.truncation).

An ungrouped count over ``bound_contributions``/``bound_degree`` (with only ``select`` or
``assign`` between) is computed as ``Σ min(rows per key, limit)``. Under ``no_noise`` it must
equal the count of the materialised truncation (a ``where`` above the truncation is not
shortcut, so ``.where("TRUE")`` materialises it) and the count a direct computation gives,
with the same charge.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.engines.sqlgen.plans import CtePlanSql

pytest.importorskip("duckdb")

Frame = pq.PrivateFrame


@pytest.fixture
def shortcuts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Records each truncation counted by the shortcut (so a test knows it was taken)."""
    seen: list[object] = []
    original = CtePlanSql.truncated_count

    def spy(self: CtePlanSql, tc: object) -> str:
        seen.append(tc)
        return original(self, tc)  # type: ignore[arg-type]

    monkeypatch.setattr(CtePlanSql, "truncated_count", spy)
    yield seen


def _key(v: object) -> object:
    """A unit's key as the engines group it: NULL-likes are one key, -0.0 is 0.0."""
    if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
        return None
    return v + 0.0 if isinstance(v, float) else v


def _expected(df: pd.DataFrame, cols: list[str], limit: int, drop_null: bool) -> int:
    keys = Counter(tuple(_key(v) for v in row) for row in df[cols].itertuples(index=False))
    return sum(
        min(n, limit) for k, n in keys.items() if not (drop_null and any(v is None for v in k))
    )


def _counts(
    engine: str,
    df: pd.DataFrame,
    unit: str | None,
    build: Callable[[Frame], Frame],
) -> tuple[int, int, pq.Budget, pq.Budget]:
    """The shortcut count and the materialised one, exact, and the budgets they charged."""
    b1, b2 = pq.Budget(100.0), pq.Budget(100.0)
    f1 = Frame(df, b1, engine=engine, privacy_unit=unit)
    f2 = Frame(df, b2, engine=engine, privacy_unit=unit)
    with pq.testing.no_noise():
        short = build(f1).count(epsilon=0.5)
        full = build(f2).where("TRUE").count(epsilon=0.5)
    return int(short), int(full), b1, b2


UNITS: dict[str, list[object]] = {
    "int_nulls": [1, 1, 1, None, None, 2, 3, 3, 3, 3, 3, None],
    "float_nan_zero": [0.0, -0.0, 0.0, float("nan"), float("nan"), None, 1.5, 1.5, -0.0, 2.0],
    "str_nulls": ["a", "a", "a", "b", None, "c", "c", "c", "c", None, "", ""],
}


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_float_units_with_nan_and_signed_zero(engine: str, shortcuts: list[object]) -> None:
    if engine == "spark":
        pytest.importorskip("pyspark")
    units = UNITS["float_nan_zero"]
    df = pd.DataFrame({"uid": units, "x": range(len(units))})
    short, full, b1, b2 = _counts(engine, df, "uid", lambda f: f.bound_contributions(2))
    assert shortcuts, "the shortcut was not taken"
    # 0.0 (four rows, -0.0 among them) -> 2, 1.5 -> 2, 2.0 -> 1; NaN and None dropped.
    assert short == full == _expected(df, ["uid"], 2, drop_null=True) == 5
    assert b1.spent == b2.spent


@pytest.mark.parametrize("name", ["int_nulls", "str_nulls"])
@pytest.mark.parametrize("limit", [1, 2, 4])
def test_units_with_nulls(name: str, limit: int, shortcuts: list[object]) -> None:
    units = UNITS[name]
    df = pd.DataFrame({"uid": units, "x": range(len(units))})
    if name == "int_nulls":
        df["uid"] = df["uid"].astype("Int64")
    short, full, b1, b2 = _counts("duckdb", df, "uid", lambda f: f.bound_contributions(limit))
    assert len(shortcuts) == 1
    assert short == full == _expected(df, ["uid"], limit, drop_null=True)
    assert b1.spent == b2.spent == pq.Cost(0.5 * limit)


def test_where_before_and_select_assign_after(shortcuts: list[object]) -> None:
    df = pd.DataFrame({"uid": [1] * 6 + [2] * 3 + [3], "x": [1, 5, 5, 5, 5, 9, 5, 5, 1, 5]})
    kept = df[df["x"] > 2]
    builds: list[Callable[[Frame], Frame]] = [
        lambda f: f.where("x > 2").bound_contributions(3),
        lambda f: f.where("x > 2").bound_contributions(3).select("x"),
        lambda f: f.where("x > 2").bound_contributions(3).assign(y="x * 2", x="x + 1"),
    ]
    for build in builds:
        short, full, b1, b2 = _counts("duckdb", df, "uid", build)
        assert short == full == _expected(kept, ["uid"], 3, drop_null=True) == 3 + 2 + 1
        assert b1.spent == b2.spent
    assert len(shortcuts) == len(builds)


def test_bound_degree_on_several_columns_with_nulls(shortcuts: list[object]) -> None:
    df = pd.DataFrame(
        {
            "a": ["x", "x", "x", None, None, None, "y", "y", None],
            "b": [1.0, 1.0, -0.0, float("nan"), None, float("nan"), 0.0, 0.0, 2.0],
        }
    )
    short, full, b1, b2 = _counts("duckdb", df, None, lambda f: f.bound_degree(["a", "b"], 2))
    assert shortcuts
    # (x, 1.0): 2 -> 2; (x, 0.0): 1; (NULL, NULL): 3 -> 2; (y, 0.0): 2; (NULL, 2.0): 1.
    assert short == full == _expected(df, ["a", "b"], 2, drop_null=False) == 8
    assert b1.spent == b2.spent


def test_empty_table(shortcuts: list[object]) -> None:
    df = pd.DataFrame({"uid": pd.Series([], dtype="int64"), "x": pd.Series([], dtype="float64")})
    short, full, b1, b2 = _counts("duckdb", df, "uid", lambda f: f.bound_contributions(3))
    assert shortcuts
    assert short == full == 0
    assert b1.spent == b2.spent


def test_many_units_against_pandas(shortcuts: list[object]) -> None:
    """Units of 1 to 12 rows against a limit of 5: the pandas engine's materialised count."""
    uid = [u for u in range(200) for _ in range(1 + u % 12)]
    df = pd.DataFrame({"uid": uid, "x": range(len(uid))})
    with pq.testing.no_noise():
        duck = Frame(df, pq.Budget(10), engine="duckdb", privacy_unit="uid")
        pand = Frame(df, pq.Budget(10), engine="pandas", privacy_unit="uid")
        a = duck.bound_contributions(5).count(epsilon=1)
        b = pand.bound_contributions(5).count(epsilon=1)
    assert shortcuts
    assert a == b == _expected(df, ["uid"], 5, drop_null=True)


def test_grouped_counts_and_sums_still_materialise(shortcuts: list[object]) -> None:
    df = pd.DataFrame({"uid": [1, 1, 1, 2], "g": ["a", "a", "b", "b"], "x": [1, 2, 3, 4]})
    f = Frame(df, pq.Budget(10), engine="duckdb", privacy_unit="uid").bound_contributions(2)
    with pq.testing.no_noise():
        counts = f.partition("g", keys=["a", "b"]).count(epsilon=1)
        total = f.sum("x", epsilon=1, bounds=(0, 10))
    assert not shortcuts
    assert int(counts.sum()) == 3
    assert total in (1 + 2 + 4, 1 + 3 + 4, 2 + 3 + 4)


def test_spark_string_units_and_bound_degree(shortcuts: list[object]) -> None:
    pytest.importorskip("pyspark")
    units = UNITS["str_nulls"]
    df = pd.DataFrame({"uid": units, "x": range(len(units))})
    short, full, b1, b2 = _counts("spark", df, "uid", lambda f: f.bound_contributions(2))
    assert short == full == _expected(df, ["uid"], 2, drop_null=True)
    assert b1.spent == b2.spent
    df2 = pd.DataFrame({"a": ["x", "x", "x", None, None], "b": [1, 1, 1, None, None]})
    short, full, _, _ = _counts("spark", df2, None, lambda f: f.bound_degree(["a", "b"], 1))
    assert short == full == 2
    assert len(shortcuts) == 2
