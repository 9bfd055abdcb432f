"""Differential tests: the DuckDB engine gives the pandas engine's exact aggregates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

duckdb = pytest.importorskip("duckdb")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import pinqpy as pq  # noqa: E402
from pinqpy._duckdb_executor import DuckDBExecutor  # noqa: E402
from pinqpy._executor import Grouping  # noqa: E402
from pinqpy._expr.parser import parse_expression  # noqa: E402
from pinqpy._pandas_executor import PandasExecutor  # noqa: E402
from pinqpy._plan import PlanNode, PyFunc  # noqa: E402
from pinqpy.demo import load_pums  # noqa: E402
from pinqpy.errors import PinqError  # noqa: E402

PANDAS = PandasExecutor()


@pytest.fixture(scope="module")
def pums() -> pd.DataFrame:
    return load_pums()


def _frame(df: pd.DataFrame, **kwargs: object) -> pq.PrivateFrame:
    return pq.PrivateFrame(df, pq.Budget(1e6), **kwargs)  # type: ignore[arg-type]


def _same_counts(plan: PlanNode, grouping: Grouping | None) -> None:
    np.testing.assert_array_equal(
        DuckDBExecutor().count(plan, grouping), PANDAS.count(plan, grouping)
    )


def _same_moments(
    plan: PlanNode, grouping: Grouping | None, expr: str, lo: float, hi: float
) -> None:
    e = parse_expression(expr)
    want = PANDAS.clamped_moments(plan, grouping, e, lo, hi)
    got = DuckDBExecutor().clamped_moments(plan, grouping, e, lo, hi)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-9, atol=1e-6)
    np.testing.assert_array_equal(got[2], want[2])
    s_got = DuckDBExecutor().clamped_sum(plan, grouping, e, lo, hi)
    np.testing.assert_allclose(s_got[0], want[0], rtol=1e-9, atol=1e-6)
    np.testing.assert_array_equal(s_got[1], want[2])


SEX = Grouping(("sex",), (0, 1, 7))
SEX_RACE = Grouping(("sex", "race"), ((0, 1), (1, 2), (1, 99), (0, 3)))


@pytest.mark.parametrize(
    "build",
    [
        lambda f: f,
        lambda f: f.where("age > 30 AND income / (educ - 9) > 100"),
        lambda f: f.where("NOT (married = 1 OR age BETWEEN 20 AND 40)"),
        lambda f: f.where("race IN (1, 3) AND CAST(age AS VARCHAR) LIKE '3%'"),
        lambda f: f.select("sex", "race", "age", "income"),
        lambda f: f.assign(x="LN(income - 5000)", y="FLOOR(age / 7)").where("x IS NULL"),
        lambda f: f.assign(age="age * 2").where("age > 100"),
        lambda f: f.distinct("sex", "race", "age", "income"),
        lambda f: f.concat(f.where("age > 50")),
        lambda f: f.union(f.where("age > 50")),
        lambda f: f.intersect(f.where("age > 50")),
        lambda f: f.difference(f.where("age > 50")),
        lambda f: f.join(pd.DataFrame({"race": [1, 2, 3], "rn": ["a", "b", "c"]}), on="race"),
        lambda f: f.join(
            pd.DataFrame({"race": [1, 1, 5], "age": [0, 1, 2]}), on="race", how="left"
        ),
    ],
)
def test_counts_and_moments_match_pandas(pums: pd.DataFrame, build) -> None:
    plan = build(_frame(pums))._plan
    for grouping in (None, SEX, SEX_RACE):
        _same_counts(plan, grouping)
        _same_moments(plan, grouping, "age", 18, 70)
        _same_moments(plan, grouping, "income / 1000.0", -5, 60.5)


def test_groupby_aggregates_match(pums: pd.DataFrame) -> None:
    g = (
        _frame(pums)
        .groupby("race", "sex")
        .agg(
            n="COUNT(*)",
            s="SUM(income)",
            a="AVG(age)",
            lo="MIN(age)",
            hi="MAX(income)",
            med="MEDIAN(age)",
            v="VARIANCE(age)",
            sd="STDDEV(income)",
            d="COUNT(DISTINCT educ)",
        )
    )
    plan = g._plan
    keys = tuple((r, s) for r in range(1, 8) for s in (0, 1))
    grouping = Grouping(("race", "sex"), keys)
    _same_counts(plan, grouping)
    for col, lo, hi in [
        ("n", 0, 500),
        ("s", 0, 1e7),
        ("a", 0, 100),
        ("lo", 0, 99),
        ("hi", 0, 1e6),
        ("med", 0, 99),
        ("v", 0, 1e4),
        ("sd", 0, 1e6),
        ("d", 0, 20),
    ]:
        _same_moments(plan, grouping, col, lo, hi)


def test_buckets_candidates_and_keys(pums: pd.DataFrame) -> None:
    plan = _frame(pums).where("age >= 20")._plan
    d = DuckDBExecutor()
    cands = np.array([0.0, 10.0, 20.0, 20.0, 40.0, 80.0])
    v = parse_expression("income / 1000.0")
    for grouping in (None, SEX, SEX_RACE):
        want = PANDAS.buckets(plan, grouping, v, cands)
        got = d.buckets(plan, grouping, v, cands)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        for expr, cs in [("race", (1, 2, 3, 9)), ("CAST(sex AS VARCHAR)", ("0", "1", "x"))]:
            e = parse_expression(expr)
            np.testing.assert_array_equal(
                d.candidate_counts(plan, grouping, e, cs),
                PANDAS.candidate_counts(plan, grouping, e, cs),
            )
    keys, counts = d.key_counts(plan, ("sex", "married"))
    want_keys, want_counts = PANDAS.key_counts(plan, ("sex", "married"))
    assert keys == want_keys
    np.testing.assert_array_equal(counts, want_counts)


def test_partition_parts(pums: pd.DataFrame) -> None:
    f = _frame(pums)
    parts = f.partition("race", keys=[1, 2, 42])
    for key in (1, 2, 42):
        plan = parts[key].where("age > 25")._plan
        _same_counts(plan, None)
        _same_counts(plan, SEX)
        _same_moments(plan, SEX, "income", 0, 1e5)


def test_truncation_keeps_min_rows_per_key(pums: pd.DataFrame) -> None:
    df = pums.assign(person=np.arange(len(pums)) % 97)
    f = _frame(df, privacy_unit="person")
    plan = f.bound_contributions(3)._plan
    d = DuckDBExecutor()
    k_d, c_d = d.key_counts(plan, ("person",))
    k_p, c_p = PANDAS.key_counts(plan, ("person",))
    assert k_d == k_p
    np.testing.assert_array_equal(c_d, c_p)
    assert c_d.max() == 3
    # A bounded join: per-key counts are min(rows, b_l) * min(rows, b_r).
    left = _frame(pums).select("age", "sex")
    right = _frame(pums).select("age", "income")
    join = left.join(right, on="age", max_rows_per_key=(2, 3))._plan
    ages = tuple(range(15, 95))
    _same_counts(join, None)
    _same_counts(join, Grouping(("age",), ages))


def _fault_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "a": pd.array([1, 0, None, -4, 9_000_000_000_000_000_000 // 1000, 7], dtype="Int64"),
            "b": [0.0, 0.0, 2.5, np.nan, -1.0, np.inf],
            "s": ["12", "x", None, " 7 ", "3.5", "-2"],
            "t": ["yes", "0", "maybe", None, "TRUE", "off"],
        }
    )


FAULT_EXPRS = [
    "a / 0",
    "a / b",
    "a % 0",
    "b % 0",
    "a * 9223372036854775807",
    "a * 1000000000000000000",
    "-a",
    "ABS(a)",
    "LN(b)",
    "LN(a)",
    "SQRT(b)",
    "SQRT(a - 100)",
    "LOG(a)",
    "LOG10(b)",
    "EXP(a)",
    "POWER(b, 0.5)",
    "POWER(a, 1000)",
    "CAST(s AS INT)",
    "CAST(s AS DOUBLE)",
    "CAST(b AS BIGINT)",
    "CAST(CAST(t AS BOOLEAN) AS INT)",
    "FLOOR(b)",
    "CEIL(b / 3)",
    "ROUND(b * 10)",
    "ROUND(b, 1)",
    "SIGN(b)",
    "LEAST(a, b, 3)",
    "GREATEST(a, NULL, b)",
    "COALESCE(b, a, 0)",
    "NULLIF(a, 0)",
    "IF(a > 1, a, b)",
    "CASE WHEN b > 0 THEN a WHEN s = 'x' THEN 100 ELSE NULL END",
    "LENGTH(s)",
    "LENGTH(CONCAT(s, t, NULL))",
    "LENGTH(SUBSTR(s, 2, 1) || t)",
]


@pytest.mark.parametrize("expr", FAULT_EXPRS)
def test_data_faults_give_null(expr: str) -> None:
    f = _frame(_fault_frame())
    plan = f._plan
    _same_moments(plan, None, expr, -1e6, 1e6)
    e = parse_expression(expr)
    _same_counts(f.where(f"({expr}) IS NULL")._plan, None)
    _same_counts(f.where(parse_expression(f"({e.to_sql()}) > 1").to_sql())._plan, None)


@pytest.mark.parametrize(
    "expr",
    [
        "LOWER(t) || '!'",
        "UPPER(TRIM(s))",
        "CAST(a AS VARCHAR)",
        "CONCAT(s, '-', t)",
        "SUBSTRING(t, 0, 3)",
        "CAST(b > 0 AS VARCHAR)",
    ],
)
def test_string_values_match(expr: str) -> None:
    plan = _frame(_fault_frame()).select(x=expr)._plan
    got = DuckDBExecutor().key_counts(plan, ("x",))
    want = PANDAS.key_counts(plan, ("x",))
    assert [None if k is None or k != k else k for k in got[0]] == [
        None if k is None or k != k else k for k in want[0]
    ]
    np.testing.assert_array_equal(got[1], want[1])


def test_explode_matches() -> None:
    df = pd.DataFrame(
        {"k": [1, 1, 2, 3], "tags": [["a", "b", "c"], [], None, ["b", None, "b", "d"]]}
    )
    plan = _frame(df).explode("tags", 2)._plan
    for grouping in (None, Grouping(("tags",), ("a", "b", "c", "d", "z"))):
        _same_counts(plan, grouping)


def test_unsupported_things_are_pinq_errors(pums: pd.DataFrame) -> None:
    plan = _frame(pums).where(lambda d: d["age"] > 30)._plan
    with pytest.raises(PinqError, match="callable"):
        DuckDBExecutor().count(plan, None)
    with pytest.raises(PinqError, match="callable"):
        DuckDBExecutor().clamped_sum(
            _frame(pums)._plan, None, PyFunc(lambda d: d["age"], "f"), 0, 1
        )


def test_duckdb_relation_source() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS i, range % 3 AS g FROM range(10)")
    df = con.sql("SELECT * FROM t").df()
    f = _frame(df)
    plan = f.where("i > 2")._plan
    rel_plan = _replace_source(plan, con.sql("SELECT * FROM t"))
    got = DuckDBExecutor(con).count(rel_plan, Grouping(("g",), (0, 1, 2)))
    np.testing.assert_array_equal(got, PANDAS.count(plan, Grouping(("g",), (0, 1, 2))))


def _replace_source(plan: PlanNode, data: object) -> PlanNode:
    from dataclasses import replace

    from pinqpy._plan import Source, Where

    assert isinstance(plan, Where) and isinstance(plan.child, Source)
    return replace(plan, child=Source(replace(plan.child.table, data=data)))


# -- generated frames with NULLs --------------------------------------------------------------
@st.composite
def _frames(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(0, 12))
    ints = st.one_of(st.none(), st.integers(-4, 4))
    floats = st.one_of(st.none(), st.sampled_from([0.0, -1.5, 2.25, 3.0, 1e308, -0.5]))
    strs = st.one_of(st.none(), st.sampled_from(["a", "b", "2", " 3", "x1", ""]))
    return pd.DataFrame(
        {
            "i": pd.array(draw(st.lists(ints, min_size=n, max_size=n)), dtype="Int64"),
            "f": np.array(
                [
                    np.nan if v is None else v
                    for v in draw(st.lists(floats, min_size=n, max_size=n))
                ],
                dtype=float,
            ),
            "s": pd.Series(draw(st.lists(strs, min_size=n, max_size=n)), dtype=object),
            "g": draw(st.lists(st.integers(0, 2), min_size=n, max_size=n)),
        }
    )


GEN_EXPRS = [
    "i / f",
    "i % i",
    "f * f",
    "i + f",
    "CAST(s AS INT) * 2",
    "CAST(s AS DOUBLE)",
    "LN(f)",
    "ROUND(f)",
    "GREATEST(i, f)",
    "LEAST(i, CAST(s AS INT))",
    "CASE WHEN i > 0 AND f > 0 THEN i ELSE f END",
    "IF(s IS NULL OR i < 0, 1, 0)",
    "COALESCE(i, CAST(s AS INT), -1)",
    "LENGTH(s || 'z')",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=_frames(), expr=st.sampled_from(GEN_EXPRS))
def test_generated_frames_match(df: pd.DataFrame, expr: str) -> None:
    f = _frame(df)
    grouping = Grouping(("g",), (0, 1, 2, 5))
    _same_moments(f._plan, grouping, expr, -10, 10)
    _same_counts(f.where(f"({expr}) IS NULL")._plan, grouping)
    _same_counts(f.where("i > 0 OR f < 1 AND s <> 'a'").distinct("g", "s")._plan, grouping)
    _same_counts(f.union(f.where("i IS NULL"))._plan, grouping)
    _same_counts(f.intersect(f.where("f IS NOT NULL"))._plan, None)
    got, want = DuckDBExecutor().key_counts(f._plan, ("s",)), PANDAS.key_counts(f._plan, ("s",))
    assert [k if isinstance(k, str) else None for k in got[0]] == [
        k if isinstance(k, str) else None for k in want[0]
    ]
    np.testing.assert_array_equal(got[1], want[1])
