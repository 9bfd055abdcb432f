"""Differential tests: the Spark engine gives the pandas engine's exact aggregates.

Spark jobs cost a fraction of a second each, so expression checks are batched: every
expression becomes a column next to a row id, and ``key_counts`` over all columns compares
every value of every row in one job.
"""

from __future__ import annotations

import gc
import itertools
import math
import os
import subprocess
import sys
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pinqpy as pq
from pinqpy.demo import load_pums
from pinqpy.engines.pandas.executor import PandasExecutor
from pinqpy.engines.spark import sums as spark_sums
from pinqpy.engines.spark.call import Call
from pinqpy.engines.spark.executor import SparkExecutor
from pinqpy.engines.spark.session import is_spark_dataframe, local_session
from pinqpy.engines.spark.types import kind_of, spark_schema, to_spark
from pinqpy.errors import PinqError
from pinqpy.expr.parser import parse_expression
from pinqpy.expr.types import schema_from_pandas
from pinqpy.plan.batch import batch
from pinqpy.plan.catalog import Catalog, new_id
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import Distinct, PyFunc, Source, TableRef, Where


def _pandas(f: pq.PrivateFrame) -> PandasExecutor:
    """The pandas executor reading the tables of ``f``'s plan."""
    return PandasExecutor().bound(f._rel.catalog)


def _at(ex: SparkExecutor, f: pq.PrivateFrame) -> SparkExecutor:
    """``ex`` reading the tables of ``f``'s plan."""
    return ex.bound(f._rel.catalog)


def _source(ex: SparkExecutor, data: object, columns: tuple[str, ...]) -> tuple[Source, Any]:
    """A plan source over ``data`` (not a frame's), and ``ex`` reading it."""
    table = TableRef(new_id("table"), "t", columns, "nobody")
    return Source(table), ex.bound(Catalog({table.id: data}))


SEX = Grouping(("sex",), (0, 1, 7))
SEX_RACE = Grouping(("sex", "race"), ((0, 1), (1, 2), (1, 99), (0, 3)))


@pytest.fixture(scope="module")
def spark() -> Any:
    # A JVM that compiles quickly suits a short run of small queries (if this starts the JVM);
    # the session itself is local_session()'s.
    with pytest.MonkeyPatch.context() as mp:
        if "PYSPARK_SUBMIT_ARGS" not in os.environ:
            mp.setenv(
                "PYSPARK_SUBMIT_ARGS",
                '--driver-java-options "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" pyspark-shell',
            )
        return local_session()


@pytest.fixture(scope="module")
def ex(spark: Any) -> SparkExecutor:
    return SparkExecutor(spark)


@pytest.fixture(scope="module")
def pums() -> pd.DataFrame:
    return load_pums()


def _frame(df: pd.DataFrame, **kwargs: object) -> pq.PrivateFrame:
    return pq.PrivateFrame(df, pq.Budget(1e6), **kwargs)  # type: ignore[arg-type]


def _same_counts(ex: SparkExecutor, f: pq.PrivateFrame, grouping: Grouping | None) -> None:
    frame = f
    plan = frame._plan
    np.testing.assert_array_equal(
        _at(ex, f).count(plan, grouping), _pandas(f).count(plan, grouping)
    )


def _same_moments(
    ex: SparkExecutor,
    f: pq.PrivateFrame,
    grouping: Grouping | None,
    expr: str,
    lo: float,
    hi: float,
) -> None:
    frame = f
    plan = frame._plan
    e = parse_expression(expr)
    # Exact lattice-index sums: the engines agree to the last integer.
    want = _pandas(f).lattice_sums(plan, grouping, e, lo, hi, squares=True)
    got = _at(ex, f).lattice_sums(plan, grouping, e, lo, hi, squares=True)
    assert got[0] == want[0] and got[1] == want[1], expr
    np.testing.assert_array_equal(got[2], want[2], err_msg=expr)


def _cell(v: object) -> object:
    """One key value in a comparable form (every NULL is None)."""
    if v is None:
        return None
    try:
        if pd.isna(v):  # type: ignore[arg-type]
            return None
    except (TypeError, ValueError):
        pass
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, float | np.floating):
        return float(v)
    return v


def _same_value(got: object, want: object) -> bool:
    g, w = _cell(got), _cell(want)
    if isinstance(g, float) and isinstance(w, float):
        return math.isclose(g, w, rel_tol=1e-12, abs_tol=1e-300)
    return g == w and type(g) is type(w)


def _same_keys(
    got: tuple[list[Hashable], np.ndarray],
    want: tuple[list[Hashable], np.ndarray],
    names: Sequence[str],
) -> None:
    np.testing.assert_array_equal(got[1], want[1])
    assert len(got[0]) == len(want[0])
    for g_row, w_row in zip(got[0], want[0], strict=True):
        g_t = g_row if isinstance(g_row, tuple) else (g_row,)
        w_t = w_row if isinstance(w_row, tuple) else (w_row,)
        for name, g, w in zip(names, g_t, w_t, strict=True):
            assert _same_value(g, w), f"{name}: spark {g!r} != pandas {w!r} (row {g_t[0]!r})"


def _same_values(ex: SparkExecutor, f: pq.PrivateFrame, exprs: Sequence[str]) -> None:
    """Every row's value of every expression, compared in one Spark job (``rid`` is a row id)."""
    names = [f"x{i}" for i in range(len(exprs))]
    frame = f.select("rid", **dict(zip(names, exprs, strict=True)))
    plan = frame._plan
    cols = ("rid", *names)
    labels = ["rid", *exprs]
    _same_keys(_at(ex, frame).key_counts(plan, cols), _pandas(frame).key_counts(plan, cols), labels)


# -- every plan node, groupings with missing and multi-column keys ----------------------------
PLANS: list[Callable[[pq.PrivateFrame], pq.PrivateFrame]] = [
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
    lambda f: f.join(pd.DataFrame({"race": [1, 1, 5], "age": [0, 1, 2]}), on="race", how="left"),
]


@pytest.mark.parametrize("build", PLANS)
def test_counts_and_moments_match_pandas(ex: SparkExecutor, pums: pd.DataFrame, build) -> None:
    frame = build(_frame(pums))
    _same_counts(ex, frame, SEX_RACE)
    _same_moments(ex, frame, SEX, "income / 1000.0", -5, 60.5)


def test_clamped_sum_and_single_group(ex: SparkExecutor, pums: pd.DataFrame) -> None:
    frame = _frame(pums).where("age >= 40")
    plan = frame._plan
    e = parse_expression("age")
    got = _at(ex, frame).clamped_sum(plan, None, e, 18, 70)
    want = _pandas(frame).clamped_sum(plan, None, e, 18, 70)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-9)
    np.testing.assert_array_equal(got[1], want[1])
    assert got[0].shape == (1,) and got[1].dtype == np.int64


def test_groupby_aggregates_match(ex: SparkExecutor, pums: pd.DataFrame) -> None:
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
            c="COUNT(NULLIF(married, 1))",
        )
    )
    frame = g
    plan = frame._plan
    keys = tuple((r, s) for r in range(1, 8) for s in (0, 1))
    _same_counts(ex, frame, Grouping(("race", "sex"), keys))
    # The aggregates of every group, exactly, in one job.
    cols = ("race", "sex", "n", "s", "a", "lo", "hi", "med", "v", "sd", "d", "c")
    _same_keys(_at(ex, frame).key_counts(plan, cols), _pandas(frame).key_counts(plan, cols), cols)


def test_buckets_candidates_and_keys(ex: SparkExecutor, pums: pd.DataFrame) -> None:
    frame = _frame(pums).where("age >= 20")
    plan = frame._plan
    cands = np.array([0.0, 10.0, 20.0, 20.0, 40.0, 80.0])
    v = parse_expression("income / 1000.0")
    for grouping in (None, SEX_RACE):
        want = _pandas(frame).buckets(plan, grouping, v, cands)
        got = _at(ex, frame).buckets(plan, grouping, v, cands)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    # A long integer grid (as default quantile candidates are) over a column with NULLs.
    grid = np.arange(-3, 120).astype(np.float64)
    e = parse_expression("IF(age > 60, NULL, age + 0.5 * (educ % 2))")
    want = _pandas(frame).buckets(plan, SEX, e, grid)
    got = _at(ex, frame).buckets(plan, SEX, e, grid)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    for expr, cs, grouping in [
        ("race", (1, 2, 3, 9, 3.5), SEX_RACE),
        ("CAST(sex AS VARCHAR)", ("0", "1", "x"), None),
        ("married = 1", (True, False, None), SEX),
        ("IF(age > 50, NULL, sex)", (None, 0, 1), SEX),
    ]:
        e = parse_expression(expr)
        np.testing.assert_array_equal(
            _at(ex, frame).candidate_counts(plan, grouping, e, cs),
            _pandas(frame).candidate_counts(plan, grouping, e, cs),
            err_msg=expr,
        )
    cols = ("sex", "married")
    _same_keys(_at(ex, frame).key_counts(plan, cols), _pandas(frame).key_counts(plan, cols), cols)


def test_no_listed_key_can_match(ex: SparkExecutor, pums: pd.DataFrame) -> None:
    frame = _frame(pums)
    plan = frame._plan
    grouping = Grouping(("sex",), ("a", "b"))
    np.testing.assert_array_equal(_at(ex, frame).count(plan, grouping), [0, 0])
    sums, _, counts = _at(ex, frame).lattice_sums(
        plan, grouping, parse_expression("age"), 0, 1, True
    )
    assert sums == [0, 0] and counts.tolist() == [0, 0]


def test_partition_parts(ex: SparkExecutor, pums: pd.DataFrame) -> None:
    f = _frame(pums)
    parts = f.partition("race", keys=[1, 2, 42])
    for key in (1, 42):
        frame = parts[key].where("age > 25")
        _same_counts(ex, frame, SEX)
        _same_moments(ex, frame, SEX, "income", 0, 1e5)
    multi = f.partition(["sex", "married"], keys=[(0, 1), (1, 0)])
    _same_counts(ex, multi[(1, 0)], None)


def test_truncation_keeps_min_rows_per_key(ex: SparkExecutor, pums: pd.DataFrame) -> None:
    df = pums.assign(person=np.arange(len(pums)) % 97)
    f = _frame(df, privacy_unit="person")
    frame = f.bound_contributions(3)
    plan = frame._plan
    got, want = (
        _at(ex, frame).key_counts(plan, ("person",)),
        _pandas(frame).key_counts(plan, ("person",)),
    )
    _same_keys(got, want, ("person",))
    assert got[1].max() == 3
    # A bounded join: per-key counts are min(rows, b_l) * min(rows, b_r).
    left = _frame(pums).select("age", "sex")
    right = _frame(pums).select("age", "income")
    join = left.join(right, on="age", max_rows_per_key=(2, 3))
    _same_counts(ex, join, Grouping(("age",), tuple(range(15, 95))))


def test_truncation_is_random_but_consistent(ex: SparkExecutor) -> None:
    # Which rows are kept changes with the salt; the number per key never does.
    df = pd.DataFrame({"u": np.repeat(np.arange(20), 10), "v": np.arange(200, dtype=float)})
    frame = _frame(df, privacy_unit="u").bound_contributions(2)
    plan = frame._plan
    e = parse_expression("v")
    # Two salts give the same sum about once in 80 tries; four all the same, almost never.
    sums = {float(_at(ex, frame).clamped_sum(plan, None, e, 0, 1000)[0][0]) for _ in range(4)}
    assert len(sums) > 1
    np.testing.assert_array_equal(
        _at(ex, frame).count(plan, Grouping(("u",), (0, 5, 19))), [2, 2, 2]
    )


def test_unique_key_join(ex: SparkExecutor, pums: pd.DataFrame) -> None:
    f = _frame(pums)
    counts = f.groupby("race").agg(n="COUNT(*)")
    incomes = f.where("age > 40").groupby("race").agg(s="SUM(income)")
    frame = counts.join(incomes, on="race")
    plan = frame._plan
    _same_counts(ex, frame, None)
    cols = ("race", "n", "s")
    _same_keys(_at(ex, frame).key_counts(plan, cols), _pandas(frame).key_counts(plan, cols), cols)


def test_explode_matches(ex: SparkExecutor) -> None:
    df = pd.DataFrame(
        {
            "k": [1, 1, 2, 3, 4],
            "tags": [["a", "b", "c"], [], None, ["b", None, "b", "d"], "z"],
            "nums": [[1.5, np.nan, 2.0], [3.0], [], None, 7],
        }
    )
    f = _frame(df)
    frame = f.explode("tags", 2)
    for grouping in (None, Grouping(("tags",), ("a", "b", "c", "d", "z", "q"))):
        _same_counts(ex, frame, grouping)
    nums = f.explode("nums", 5)
    _same_moments(ex, nums, Grouping(("k",), (1, 2, 3, 4)), "nums", 0, 10)


def test_null_and_many_keys(ex: SparkExecutor) -> None:
    # A NULL key matches NULL values; past the inline limit keys and candidates are sent
    # as a table.
    rng = np.random.default_rng(3)
    df = pd.DataFrame(
        {
            "k": pd.array([None if i % 7 == 0 else int(i) for i in rng.integers(0, 2000, 400)]),
            "x": rng.normal(0, 10, 400),
        }
    )
    f = _frame(df)
    for keys in ((None, 3, 5, 1999), (*range(1500), None)):
        grouping = Grouping(("k",), keys)
        _same_counts(ex, f, grouping)
        _same_moments(ex, f, grouping, "x", -5, 5)
    e = parse_expression("k")
    for cands in ((None, 1, 2, 3), (*range(1200), None)):
        np.testing.assert_array_equal(
            _at(ex, f).candidate_counts(f._plan, None, e, cands),
            _pandas(f).candidate_counts(f._plan, None, e, cands),
        )
    # A grid that is not uniform, as a table, and a uniform one.
    for cands in (np.sqrt(np.arange(1500.0)) - 20, np.linspace(-30.0, 30.0, 1201)):
        want = _pandas(f).buckets(f._plan, None, parse_expression("x"), cands)
        got = _at(ex, f).buckets(f._plan, None, parse_expression("x"), cands)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_prefetched_reads_in_one_job(
    ex: SparkExecutor, pums: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pinqpy.engines.base import Read
    from pinqpy.plan.batch import batch

    jobs: list[str] = []
    collect = Call.collect
    monkeypatch.setattr(
        Call, "collect", lambda self, text: jobs.append(text) or collect(self, text)
    )
    frame = _frame(pums).where("age > 20")
    plan = frame._plan
    x, y = parse_expression("income / 1000.0"), parse_expression("IF(age > 60, NULL, age)")
    # No listed key can match the last grouping: nothing to run.
    for grouping, n_jobs in ((None, 1), (SEX_RACE, 1), (Grouping(("sex",), ("a",)), 0)):
        bex = _at(ex, frame)
        reads = [Read(bex, plan, "count"), Read(bex, plan, "sum", x, 0, 50)]
        reads.append(Read(bex, plan, "moments", y, 18, 70))
        jobs.clear()
        with batch():
            bex.prefetch(reads, grouping)
            got = [
                bex.count(plan, grouping),
                bex.clamped_sum(plan, grouping, x, 0, 50),
                bex.lattice_sums(plan, grouping, y, 18, 70, squares=True),
            ]
        assert len(jobs) == n_jobs
        np.testing.assert_array_equal(got[0], _pandas(frame).count(plan, grouping))
        for g, w in zip(got[1], _pandas(frame).clamped_sum(plan, grouping, x, 0, 50), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-9)
        want = _pandas(frame).lattice_sums(plan, grouping, y, 18, 70, squares=True)
        assert got[2][0] == want[0] and got[2][1] == want[1]
        np.testing.assert_array_equal(got[2][2], want[2])


def test_translation_matches_sparks_analysis(ex: SparkExecutor, pums: pd.DataFrame) -> None:
    # Column kinds are worked out without asking Spark; every node's must be Spark's own.
    faults = _frame(_fault_frame())
    gen = _frame(
        pd.DataFrame(
            {
                "i": pd.array([1, None], dtype="Int64"),
                "f": [0.5, np.nan],
                "s": ["a", None],
                "g": [0, 1],
            }
        )
    )
    lists = _frame(pd.DataFrame({"k": [1, 2], "l": [[1.5, 2.0], None], "t": [["a"], ["b"]]}))
    f = _frame(pums)
    frames = [build(f) for build in PLANS]
    frames += [
        faults.select(**{f"x{i}": e for i, e in enumerate(FAULT_EXPRS + STRING_EXPRS)}),
        gen.select(**{f"x{i}": e for i, e in enumerate(GEN_EXPRS)}),
        gen.select(x="1").union(gen.select(x="1.5")),
        gen.select(x="NULL", y="g").concat(gen.select(x="s", y="f")),
        f.groupby("race").agg(n="COUNT(*)", s="SUM(income)", m="MEDIAN(age)"),
        f.partition("race", keys=[1, 2])[2].assign(race="race * 1.5"),
        lists.explode("l", 3).select("l", "t", m="l * 2"),
        lists.select("k", "l").distinct("k"),
        lists.select("k", c="COALESCE(l, l)", d="IF(k > 1, l, NULL)").explode("c", 1),
        _frame(pums.assign(p=np.arange(len(pums)) % 9), privacy_unit="p").bound_contributions(2),
    ]
    for frame in frames:
        with _at(ex, frame)._call("checking the translation") as (_, p):
            p.visit(frame._plan)
            for _node, rel in list(p._memo.values()):
                fields = p.analysed(rel)
                assert [f.name for f in fields] == [c.name for c in rel.cols]
                assert [kind_of(f.dataType) for f in fields] == [c.kind for c in rel.cols]


def test_a_query_is_translated_once(
    ex: SparkExecutor, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    df = pd.DataFrame({"u": np.repeat(np.arange(20), 10), "v": np.arange(200, dtype=float)})
    frame = _frame(df, privacy_unit="u").bound_contributions(2)
    plan = frame._plan
    e = parse_expression("v")
    analyses: list[str] = []
    sql = Call.sql
    monkeypatch.setattr(Call, "sql", lambda self, text: analyses.append(text) or sql(self, text))
    bex = _at(ex, frame)
    with batch():
        # The check before the charge needs no Spark analysis here, and every aggregate of
        # the batch sees the same truncation.
        bex.validate(plan, e, numeric=True)
        assert analyses == []
        sums = {float(bex.clamped_sum(plan, None, e, 0, 1000)[0][0]) for _ in range(3)}
    assert len(sums) == 1
    # Types pinqpy does not model are left to Spark's analysis, before any charge.
    sdf = spark.createDataFrame([({"a": 1},)], "m map<string,int>")
    maps, mex = _source(ex, sdf, ("m",))
    with pytest.raises(PinqError, match="while checking a query"):
        mex.validate(Distinct(maps, ("m",)))
    assert len(analyses) == 1


def test_source_views_go_with_their_frames(ex: SparkExecutor, spark: Any) -> None:
    def views() -> set[str]:
        return {t.name for t in spark.catalog.listTables() if t.name.startswith(ex._sources.prefix)}

    before = views()
    sdf = spark.sql("SELECT id AS a FROM range(5)")
    plan, bex = _source(ex, sdf, ("a",))
    assert bex.count(plan, None).tolist() == [5]
    assert bex.count(Where(plan, parse_expression("a > 1")), None).tolist() == [3]
    made = views() - before
    assert len(made) == 1  # one view per source, kept while it lives
    del sdf, plan, bex
    gc.collect()
    other, oex = _source(ex, spark.sql("SELECT 1 AS b"), ("b",))
    assert oex.count(other, None).tolist() == [1]  # the next call drops the view
    assert not made & views()


# -- expressions: data faults, strings --------------------------------------------------------
def _fault_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rid": np.arange(6),
            "a": pd.array([1, 0, None, -4, 9_000_000_000_000_000_000 // 1000, 7], dtype="Int64"),
            "b": [0.0, 0.0, 2.5, np.nan, -1.0, np.inf],
            "s": ["12", "x", None, " 7 ", "3.5", "-2"],
            "t": ["yes", "0", "maybe", None, "TRUE", "off"],
            "m": [-(2**63), 2**63 - 1, 5, -5, 0, None],
        }
    )


FAULT_EXPRS = [
    "a / 0",
    "a / b",
    "a % 0",
    "b % 0",
    "a % 3",
    "-7 % 3",
    "a * 9223372036854775807",
    "a * 1000000000000000000",
    "m + 1",
    "m - 1",
    "-m",
    "ABS(m)",
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
    "CAST(b * 1e300 AS BIGINT)",
    "CAST(CAST(t AS BOOLEAN) AS INT)",
    "FLOOR(b)",
    "FLOOR(b * 1e300)",
    "CEIL(b / 3)",
    "ROUND(b * 10)",
    "ROUND(-2.5 + b)",
    "ROUND(b, 1)",
    "ROUND(a / 7.0, 2)",
    "ROUND(b, -400)",
    "SIGN(b)",
    "SIGN(a)",
    "LEAST(a, b, 3)",
    "GREATEST(a, NULL, b)",
    "COALESCE(b, a, 0)",
    "NULLIF(a, 0)",
    "IF(a > 1, a, b)",
    "CASE WHEN b > 0 THEN a WHEN s = 'x' THEN 100 ELSE NULL END",
    "LENGTH(s)",
    "LENGTH(CONCAT(s, t, NULL))",
    "LENGTH(SUBSTR(s, 2, 1) || t)",
    "b BETWEEN -1 AND 1",
    "s IN ('12', 'x') OR a IN (0, NULL)",
    "s > '5'",
    "CAST(t AS BOOLEAN) = TRUE",
    "(a / b) IS NULL",
    "(a / b) > 1",
    "NOT (b > 0)",
    "1 / 0",
    "FLOOR(1e300)",
    # Sums and positive powers check only their result for being finite; repeated
    # sub-expressions are computed once.
    "POWER(b * 1e200, 2) + 1",
    "(b / 0) * 0 + POWER(b, 2)",
    "POWER(b - 1, 3) - POWER(b - 1, 3)",
    "POWER(b, 0.5) + POWER(b, 0.5)",
    "POWER(a, 2) * 0 + POWER(a, 2)",
    "POWER(b, -1) + 1",
    "CASE WHEN POWER(b - 1, 2) <= POWER(b + 1, 2) THEN POWER(b - 1, 2) ELSE -1 END",
]


def test_data_faults_give_null(ex: SparkExecutor, spark: Any) -> None:
    f = _frame(_fault_frame())
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"  # Spark 4's default
    _same_values(ex, f, FAULT_EXPRS)
    # Faults give NULL whatever the session's ANSI setting.
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        _same_values(ex, f, FAULT_EXPRS)
    finally:
        spark.conf.set("spark.sql.ansi.enabled", "true")
    # Aggregates over groups with a NULL key, of text and infinite values.
    g = f.groupby("t").agg(n="COUNT(s)", x="SUM(b)", y="AVG(CAST(s AS DOUBLE))", z="MAX(a)")
    cols = ("t", "n", "x", "y", "z")
    _same_keys(_at(ex, g).key_counts(g._plan, cols), _pandas(g).key_counts(g._plan, cols), cols)
    # Predicates (NULL is not true) and aggregated values (infinities are clamped).
    for expr in ("(a / b) IS NULL", "CAST(s AS DOUBLE) > 1", "LN(b) IS NOT NULL OR a < 0"):
        _same_counts(ex, f.where(expr), None)
    _same_moments(ex, f, None, "b", -10, 10)
    _same_moments(ex, f, None, "s", -10, 10)
    _same_moments(ex, f, None, "a * 1000000000000000000", -1e6, 1e6)


STRING_EXPRS = [
    "LOWER(t) || '!'",
    "UPPER(TRIM(s))",
    "LTRIM(s) || '|' || RTRIM(s)",
    "CAST(a AS VARCHAR)",
    "CAST(b AS VARCHAR)",
    "CAST(b / 7 AS VARCHAR)",
    "CAST(b * 1e20 AS VARCHAR)",
    "CAST(b * 1e-7 AS VARCHAR)",
    "CAST(a * 1000 AS DOUBLE) || ''",
    "CAST(b / 10000 AS VARCHAR)",
    "CAST(-b AS VARCHAR)",
    "CONCAT(s, '-', t)",
    "SUBSTRING(t, 0, 3)",
    "SUBSTR(t, 2)",
    "SUBSTR(t, -1, 3)",
    "CAST(b > 0 AS VARCHAR)",
    "t LIKE '%e%'",
    "t LIKE '_e_'",
    "s NOT LIKE '%.%'",
    "s || 'it''s \\ 100%' LIKE '%\\%'",
    "COALESCE(s, t, 'none')",
    "CAST('2021-03-04 05:06:07' AS TIMESTAMP) > '2021-01-01'",
    "CAST(CAST('2021-03-04 05:06:07' AS DATE) = '2021-03-04' AS VARCHAR)",
]


def test_string_values_match(ex: SparkExecutor, spark: Any) -> None:
    f = _frame(_fault_frame())
    _same_values(ex, f, STRING_EXPRS)
    # Literals read the same when the session does not unescape backslashes in them.
    spark.conf.set("spark.sql.parser.escapedStringLiterals", "true")
    try:
        _same_values(ex, f, STRING_EXPRS)
    finally:
        spark.conf.unset("spark.sql.parser.escapedStringLiterals")


def test_public_join_matches_null_keys(ex: SparkExecutor) -> None:
    # pandas merges NULL keys with NULL keys, so the engine joins with <=>.
    f = _frame(_fault_frame())
    pub = pd.DataFrame({"a": [1.0, np.nan, 7.0, 1.0], "w": [10, 20, 30, 40]})
    by_row = Grouping(("rid",), tuple(range(6)))
    for how in ("inner", "left"):
        _same_moments(ex, f.join(pub, on="a", how=how), by_row, "w", 0, 100)
    texts = pd.DataFrame({"t": ["yes", None, "x"], "w": [1, 2, 3]})
    _same_moments(ex, f.join(texts, on="t", how="left"), by_row, "w", 0, 100)


def test_datetime_columns(ex: SparkExecutor) -> None:
    df = pd.DataFrame(
        {
            "rid": np.arange(4),
            "d": pd.to_datetime(
                ["2020-01-01 10:00", "2021-06-30 23:59:59", None, "1999-12-31"], format="ISO8601"
            ),
            "k": ["2020-01-01", "2021-06-30 23:59:59", "2021", None],
        }
    )
    f = _frame(df)
    exprs = ["d > '2020-06-01'", "d = CAST(k AS TIMESTAMP)", "CAST(d AS DATE) = CAST(k AS DATE)"]
    _same_values(ex, f, exprs)
    cols = ("d",)
    _same_keys(_at(ex, f).key_counts(f._plan, cols), _pandas(f).key_counts(f._plan, cols), cols)
    grouping = Grouping(("d",), (pd.Timestamp("2020-01-01 10:00"), pd.Timestamp("1999-01-01")))
    _same_counts(ex, f, grouping)
    _same_counts(
        ex,
        f.partition("d", keys=[pd.Timestamp("1999-12-31")])[pd.Timestamp("1999-12-31")],
        None,
    )


def test_unsupported_things_are_pinq_errors(ex: SparkExecutor, pums: pd.DataFrame) -> None:
    frame = _frame(pums, allow_callables=True).where(lambda d: d["age"] > 30)
    plan = frame._plan
    with pytest.raises(PinqError, match="callable"):
        _at(ex, frame).count(plan, None)
    other = _frame(pums)
    with pytest.raises(PinqError, match="callable"):
        _at(ex, other).clamped_sum(other._plan, None, PyFunc(lambda d: d["age"], "f"), 0, 1)
    with pytest.raises(PinqError, match="SUBSTR"):
        bad = other.where("SUBSTR(CAST(age AS VARCHAR), age) = '1'")
        _at(ex, bad).count(bad._plan, None)


def test_engine_errors_hide_their_text(ex: SparkExecutor, spark: Any) -> None:
    # Spark cannot compare maps, so DISTINCT over one fails inside Spark.
    sdf = spark.createDataFrame([({"secret-value": 1},)], "m map<string,int>")
    source, bex = _source(ex, sdf, ("m",))
    with pytest.raises(PinqError, match="Spark engine failed while counting") as info:
        bex.count(Distinct(source, ("m",)), None)
    assert "secret" not in str(info.value)
    assert info.value.__cause__ is None and info.value.__suppress_context__


# -- Spark sources and conversion -------------------------------------------------------------
def test_spark_dataframe_source(ex: SparkExecutor, spark: Any) -> None:
    # Native Spark types: int, float (with NaN), decimal, date; normalized like pandas data.
    sdf = spark.sql(
        "SELECT CAST(id AS INT) AS i, CAST(id % 3 AS SMALLINT) AS g, "
        "CAST(IF(id % 4 = 0, 'NaN', id / 2) AS FLOAT) AS x, CAST(id AS DECIMAL(10, 2)) AS dec, "
        "date_add(DATE'2020-01-01', CAST(id AS INT)) AS day FROM range(10)"
    )
    df = pd.DataFrame(
        {
            "i": np.arange(10),
            "g": np.arange(10) % 3,
            "x": [np.nan if i % 4 == 0 else i / 2 for i in range(10)],
            "dec": np.arange(10, dtype=float),
            "day": pd.date_range("2020-01-01", periods=10),
        }
    )
    frame = _frame(df).where("i > 2 AND day < '2020-01-09'")
    plan = frame._plan
    assert isinstance(plan, Where) and isinstance(plan.child, Source)
    sex = ex.bound(Catalog({plan.child.table.id: sdf}))
    grouping = Grouping(("g",), (0, 1, 2))
    np.testing.assert_array_equal(sex.count(plan, grouping), _pandas(frame).count(plan, grouping))
    for expr in ("x", "dec * i"):
        e = parse_expression(expr)
        got = sex.lattice_sums(plan, grouping, e, 0, 20, squares=True)
        want = _pandas(frame).lattice_sums(plan, grouping, e, 0, 20, squares=True)
        assert got[0] == want[0] and got[1] == want[1]
        np.testing.assert_array_equal(got[2], want[2])
    assert spark_schema(sdf) == {
        "i": "int",
        "g": "int",
        "x": "float",
        "dec": "float",
        "day": "datetime",
    }


def test_parquet_file_is_read_by_name(spark: Any, tmp_path: Any) -> None:
    """A parquet file on Spark is read by name in each query, its schema taken once per
    unchanged file; its answers are pandas' own (small ints, float NaN, strings)."""
    from pinqpy import testing
    from pinqpy.engines.sources import SparkFile

    rng = np.random.default_rng(4)
    n = 200
    df = pd.DataFrame(
        {
            "g": (np.arange(n) % 3).astype("int16"),
            "x": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)).astype("float32"),
            "s": rng.choice(["a", "b", None], size=n),
        }
    )
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    f = pq.PrivateFrame.from_parquet(path, pq.Budget(100), engine="spark")
    assert f.engine == "spark" and isinstance(f._rel.catalog.data(f._plan.table), SparkFile)
    assert f.schema == {"g": "int", "x": "float", "s": "str"}
    local = pq.PrivateFrame(pd.read_parquet(path), pq.Budget(100))

    def answers(frame: pq.PrivateFrame) -> list[object]:
        return [
            int(frame.where("s <> 'b' OR s IS NULL").count(epsilon=1.0)),
            frame.partition("g", keys=[0, 1, 2]).count(epsilon=1.0).tolist(),
            round(float(frame.sum("x", epsilon=1.0, bounds=(-1, 1))), 9),
        ]

    with testing.no_noise():
        assert answers(f) == answers(local)
    # A session that turned SQL on files off gets a DataFrame of the file instead.
    spark.conf.set("spark.sql.runSQLOnFiles", "false")
    try:
        off = pq.PrivateFrame.from_parquet(path, pq.Budget(100), engine="spark")
        assert is_spark_dataframe(off._rel.catalog.data(off._plan.table))
        with testing.no_noise():
            assert answers(off) == answers(local)
    finally:
        spark.conf.set("spark.sql.runSQLOnFiles", "true")
    again = pq.PrivateFrame.from_parquet(path, pq.Budget(1), engine="spark")
    schemas = [g._rel.catalog.data(g._plan.table).schema for g in (again, f)]
    assert schemas[0] is schemas[1]  # not read again
    df.assign(y=1).to_parquet(path)  # rewritten: a new schema is read
    changed = pq.PrivateFrame.from_parquet(path, pq.Budget(1), engine="spark")
    assert changed.columns == ["g", "x", "s", "y"]


def test_to_spark_is_exact(spark: Any) -> None:
    df = pd.DataFrame(
        {
            "i": np.array([1, -(2**63), 2**63 - 1], dtype=np.int64),
            "f": [1.5, np.nan, np.inf],
            "ni": pd.array([1, None, 3], dtype="Int64"),
            "nb": pd.array([True, None, False], dtype="boolean"),
            "ns": pd.array(["a", None, "c"], dtype="string"),
            "os": pd.Series(["x", None, np.nan], dtype=object),
            "ob": pd.Series([True, None, False], dtype=object),
            "dt": pd.to_datetime(
                ["2020-01-01 10:00:00.123456", None, "1970-01-01"], format="ISO8601"
            ),
            "tz": pd.to_datetime(
                ["2020-01-01 10:00+02:00", None, "2020-01-01 00:00Z"], utc=True, format="ISO8601"
            ),
            "td": pd.to_timedelta([1.5, None, 60], unit="s"),
            "li": pd.Series([[1, 2], [], None], dtype=object),
            "mixed": pd.Series([1, "a", None], dtype=object),
            "u": np.array([1, 2**64 - 1, 3], dtype=np.uint64),
            "cat": pd.Categorical(["p", None, "q"]),
        }
    )
    sdf = to_spark(spark, df)
    types = {f.name: f.dataType.simpleString() for f in sdf.schema.fields}
    assert types == {
        "i": "bigint",
        "f": "double",
        "ni": "bigint",
        "nb": "boolean",
        "ns": "string",
        "os": "string",
        "ob": "boolean",
        "dt": "timestamp",
        "tz": "timestamp",
        "td": "double",
        "li": "array<bigint>",
        "mixed": "string",
        "u": "bigint",
        "cat": "string",
    }
    # Timestamps as wall times in the session's zone, whatever Python's local zone is.
    cols = [
        f"CAST(`{c}` AS TIMESTAMP_NTZ) AS `{c}`" if c in ("dt", "tz") else f"`{c}`" for c in types
    ]
    sdf.createOrReplaceTempView("__pinq_test_conv")
    rows = [
        r.asDict() for r in spark.sql(f"SELECT {', '.join(cols)} FROM __pinq_test_conv").collect()
    ]
    spark.catalog.dropTempView("__pinq_test_conv")
    assert [r["i"] for r in rows] == [1, -(2**63), 2**63 - 1]
    assert rows[0]["f"] == 1.5 and rows[1]["f"] is None and rows[2]["f"] == math.inf
    assert [r["ni"] for r in rows] == [1, None, 3]
    assert [r["nb"] for r in rows] == [True, None, False]
    assert [r["ns"] for r in rows] == ["a", None, "c"]
    assert [r["os"] for r in rows] == ["x", None, None]  # never the text 'nan'
    assert [r["ob"] for r in rows] == [True, None, False]
    assert [str(r["dt"]) if r["dt"] else None for r in rows] == [
        "2020-01-01 10:00:00.123456",
        None,
        "1970-01-01 00:00:00",
    ]
    assert [str(r["tz"]) if r["tz"] else None for r in rows] == [
        "2020-01-01 08:00:00",
        None,
        "2020-01-01 00:00:00",
    ]
    assert [r["td"] for r in rows] == [1.5, None, 60.0]
    assert [r["li"] for r in rows] == [[1, 2], [], None]
    assert [r["mixed"] for r in rows] == ["1", "a", None]
    assert [r["u"] for r in rows] == [1, None, 3]  # beyond int64: NULL, as pandas_eval
    assert [r["cat"] for r in rows] == ["p", None, "q"]
    # Object columns of scalars are `any` to pandas and must be declared to reach Spark.
    plain = df[["i", "f", "ni", "nb", "ns", "dt", "li"]]
    assert spark_schema(to_spark(spark, plain)) == schema_from_pandas(plain)


def test_session_and_detection(spark: Any, pums: pd.DataFrame) -> None:
    assert local_session() is spark
    assert is_spark_dataframe(to_spark(spark, pums.head(3)))
    assert not is_spark_dataframe(pums)
    assert not is_spark_dataframe(None)
    # Importing the module and asking about a pandas frame does not import pyspark.
    code = (
        "import sys, pandas as pd\n"
        "import pinqpy.engines.spark.executor\n"
        "import pinqpy.engines.spark.session as s\n"
        "assert not s.is_spark_dataframe(pd.DataFrame())\n"
        "assert 'pyspark' not in sys.modules, 'pyspark was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_pyspark_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(PinqError, match=r"pip install 'pinqpy\[spark\]'"):
        SparkExecutor()


def test_validate_reads_no_data(ex: SparkExecutor, pums: pd.DataFrame) -> None:
    f = _frame(pums)
    _at(ex, f).validate(f.where("age > 3")._plan, parse_expression("income"), numeric=True)
    with pytest.raises(PinqError, match="callable"):
        _at(ex, f).validate(f._plan, PyFunc(lambda d: d["age"], "f"))
    lists = _frame(pd.DataFrame({"l": [[1], [2]]}))
    with pytest.raises(PinqError, match="as a number"):
        _at(ex, lists).validate(lists._plan, parse_expression("l"), numeric=True)


# -- generated frames with NULLs --------------------------------------------------------------
@st.composite
def _frames(draw: st.DrawFn) -> pd.DataFrame:
    n = draw(st.integers(0, 12))
    ints = st.one_of(st.none(), st.integers(-4, 4))
    floats = st.one_of(st.none(), st.sampled_from([0.0, -1.5, 2.25, 3.0, 1e308, -0.5, -0.0]))
    strs = st.one_of(st.none(), st.sampled_from(["a", "b", "2", " 3", "x1", "", "1e2", "inf"]))
    return pd.DataFrame(
        {
            "rid": np.arange(n),
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
    "ROUND(f / 3, 2)",
    "GREATEST(i, f)",
    "LEAST(i, CAST(s AS INT))",
    "CASE WHEN i > 0 AND f > 0 THEN i ELSE f END",
    "IF(s IS NULL OR i < 0, 1, 0)",
    "COALESCE(i, CAST(s AS INT), -1)",
    "LENGTH(s || 'z')",
    "f || s",
    "i BETWEEN f AND 2",
    "s IN ('a', '2') OR f IN (0, -1.5)",
    "NULLIF(f, 0)",
]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(df=_frames(), expr=st.sampled_from(GEN_EXPRS), grouping_keys=st.sampled_from([1, 3]))
def test_generated_frames_match(
    ex: SparkExecutor, df: pd.DataFrame, expr: str, grouping_keys: int
) -> None:
    f = _frame(df)
    grouping = Grouping(("g",), (*(0, 1, 2, 5)[:grouping_keys], 5))
    _same_values(ex, f, GEN_EXPRS)
    combined = f.where("i > 0 OR f < 1 AND s <> 'a'").union(f.where(f"({expr}) IS NULL"))
    _same_moments(ex, combined, grouping, expr, -10, 10)


def test_columns_that_differ_only_in_case_are_refused(ex: SparkExecutor) -> None:
    # Spark SQL matches column names without regard to case, so "age" and "AGE" collide.
    f = _frame(pd.DataFrame({"age": np.arange(10)})).select("age", AGE="age * 2")
    with pytest.raises(PinqError, match="Spark engine cannot hold both columns 'age' and 'AGE'"):
        _at(ex, f).validate(f._plan)


def test_clamped_sums_in_two_integer_parts_are_exact(ex: SparkExecutor) -> None:
    """A clamped sum's grid units are summed as two BIGINT parts (k = hi·2**20 + lo): exact
    for negative units, units near 2**41 and per group, as the pandas engine's exact sum."""
    from pinqpy.core.lattice import SumGrid

    lo, hi = -5.0, 3.0
    values = [-5.0, -4.999999999, 3.0, 2.999999999, -0.1, 0.1, 1e-12, -1e-12, 7.0, -9.0, None]
    df = pd.DataFrame({"g": [i % 3 for i in range(len(values))], "x": values})
    f = _frame(df, keys={"g": [0, 1, 2]})
    grouping = Grouping(("g",), (0, 1, 2))
    got, counts = _at(ex, f).clamped_sum(f._plan, grouping, parse_expression("x"), lo, hi)
    grid = SumGrid.of(lo, hi)
    for g in range(3):
        xs = [v for i, v in enumerate(values) if i % 3 == g and v is not None]
        clipped = np.clip(np.array(xs, dtype=float), lo, hi)
        k = int(grid.indices(clipped).sum())
        assert got[g] == grid.total(k)
        assert counts[g] == len(xs)


def test_nulls_clamped_to_lo_add_nothing_to_the_exact_sums(ex: SparkExecutor) -> None:
    """Spark's greatest/least send a NULL to lo: its lattice unit is 0 and its SUM unit is
    taken back out, so sums, squares and counts equal the pandas engine's exactly, for a group
    of NULLs only, NULLs among values, bounds whose lo has a nonzero unit, and no grouping."""
    lo, hi = 2.5, 1e7 + 0.25
    values = [None, None, 3.0, None, 1e9, 2.5, -7.0, None, 123.456, None, 1e7]
    df = pd.DataFrame({"g": [0, 0, 1, 2, 1, 1, 2, 0, 2, 3, 3], "x": values})
    f = _frame(df, keys={"g": [0, 1, 2, 3]})
    x = parse_expression("x")
    for grouping in (Grouping(("g",), (0, 1, 2, 3)), None):
        spark_ex, pandas_ex = _at(ex, f), _pandas(f)
        got = spark_ex.lattice_sums(f._plan, grouping, x, lo, hi, squares=True)
        want = pandas_ex.lattice_sums(f._plan, grouping, x, lo, hi, squares=True)
        assert (got[0], got[1], list(got[2])) == (want[0], want[1], list(want[2]))
        sums, counts = spark_ex.clamped_sum(f._plan, grouping, x, lo, hi)
        want_sums, want_counts = pandas_ex.clamped_sum(f._plan, grouping, x, lo, hi)
        assert list(sums) == list(want_sums) and list(counts) == list(want_counts)
    assert counts[0] == 6  # (the last, ungrouped, call)


def _on_grid(ex: SparkExecutor, f: pq.PrivateFrame, grouping: Grouping | None, r: tuple) -> Any:
    """Request ``r`` (a sums.py request) with every value on its grid: the path integer
    values took before they were summed in integers."""
    got = _at(ex, f)._aggregated("t", f._plan, grouping, [r], [r[1]], False)
    assert got is not None
    return got[0]


def _int_frame() -> pq.PrivateFrame:
    # Groups with values, with NULLs among values, with NULLs only, and with no rows (3).
    values = [None, 7, -3, 2**40, None, 55, -(2**40), 101, -6, 0, None, None, 12, 99, 100]
    g = [0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 4, 4, 0, 1, 2]
    df = pd.DataFrame({"g": g, "x": pd.array(values, dtype="Int64")})
    return _frame(df, keys={"g": [0, 1, 2, 3, 4]})


@pytest.mark.parametrize(
    "lo, hi",
    [
        (0, 100),
        (-5, 3),
        (10, 10),
        (-(2**20), 2**20 - 1),  # the widest lattice of step 1 (shift 0)
        (-(2**40), 2**41 - 1),  # the widest SUM grid holding every integer
        (-(2.0**62), 2.0**62),  # not integers a double holds exactly: on the grid
        (0.5, 99.5),  # not integers: on the grid
    ],
)
def test_integer_sums_are_the_grid_sums(
    ex: SparkExecutor, lo: float, hi: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Integers with integer bounds are clamped and summed in BIGINT: the same sums, squares
    and counts as on the grid (and as pandas), grouped and not, NULLs taken out."""
    jobs: list[str] = []
    collect = Call.collect
    monkeypatch.setattr(
        Call, "collect", lambda self, text: jobs.append(text) or collect(self, text)
    )
    f = _int_frame()
    x = parse_expression("x")
    for grouping in (Grouping(("g",), (0, 1, 2, 3, 4)), None):
        jobs.clear()
        sums, counts = _at(ex, f).clamped_sum(f._plan, grouping, x, lo, hi)
        assert ("try_sum" in jobs[-1]) == (abs(lo) < 2**53 and float(lo).is_integer())
        want_sums, want_counts = _on_grid(ex, f, grouping, ("clamped_sum", x, lo, hi))
        assert list(sums) == list(want_sums) and list(counts) == list(want_counts)
        pandas_sums, _ = _pandas(f).clamped_sum(f._plan, grouping, x, lo, hi)
        assert list(sums) == list(pandas_sums)
        for squares, kind in ((False, "lattice"), (True, "lattice2")):
            got = _at(ex, f).lattice_sums(f._plan, grouping, x, lo, hi, squares=squares)
            want = _on_grid(ex, f, grouping, (kind, x, lo, hi))
            assert (got[0], got[1], list(got[2])) == (want[0], want[1], list(want[2]))
    assert list(counts) == [11]


def test_integer_sums_beyond_the_grid_are_exact(ex: SparkExecutor) -> None:
    """Bounds up to 2**53 give the exact integer sum (the other engines' answer), correctly
    rounded once, where the grid would truncate each value to a multiple of 2**13."""
    values = [2**53 - 1, 3, -(2**52) - 7, None, 2**53]
    f = _frame(pd.DataFrame({"x": pd.array(values, dtype="Int64")}))
    x = parse_expression("x")
    lo, hi = -(2**53), 2**53
    sums, counts = _at(ex, f).clamped_sum(f._plan, None, x, lo, hi)
    exact = sum(v for v in values if v is not None)
    assert sums[0] == float(exact) and counts[0] == 4
    assert _on_grid(ex, f, None, ("clamped_sum", x, lo, hi))[0][0] != float(exact)


def _overflow_cases(spark: Any) -> list[Any]:
    """Integer sums whose single BIGINT running sum leaves int64 (bounds ±2**53): grouped and
    in one partition summed in order, where the total would fit but a running sum does not."""
    big = 2**53
    values = [big] * 2000 + [5, None]
    g = [0] * 2001 + [1]
    cases = [_frame(pd.DataFrame({"g": g, "x": pd.array(values, dtype="Int64")}))]
    values = [big] * 1100 + [-big] * 1100 + [5, None]
    rows = [(0, v) for v in values[:-1]] + [(1, None)]
    cases.append(_frame(spark.createDataFrame(rows, "g long, x long").coalesce(1)))
    return cases


def test_wide_integer_sums_in_parts_never_overflow(
    ex: SparkExecutor, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bounds ±2**53 sum u in three 21-bit parts: sums a single BIGINT would overflow are
    exact in one job, under either ANSI setting. Whether a second job runs never depends on
    the values (it could only past 2**42 rows)."""
    jobs: list[str] = []
    collect = Call.collect
    monkeypatch.setattr(
        Call, "collect", lambda self, text: jobs.append(text) or collect(self, text)
    )
    x = parse_expression("x")
    big = 2**53
    cases = _overflow_cases(spark)
    want = [([float(2000 * big + 5), 0.0], [2001, 0]), ([5.0, 0.0], [2201, 0])]
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    try:
        for setting in ("true", "false"):
            spark.conf.set("spark.sql.ansi.enabled", setting)
            for f, w in zip(cases, want, strict=True):
                jobs.clear()
                sums, counts = _at(ex, f).clamped_sum(
                    f._plan, Grouping(("g",), (0, 1)), x, -big, big
                )
                assert (list(sums), list(counts)) == w
                assert len(jobs) == 1 and jobs[0].count("try_sum") == 3
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)


def test_overflowing_integer_sums_are_summed_on_the_grid(
    ex: SparkExecutor, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past 2**42 rows a part's try_sum could overflow: made to here with one 63-bit part. A
    NULL try_sum makes the query run again on the grid: the grid's exact sums, and no error
    under either ANSI setting. try_sum stays NULL once a running sum overflows, even where
    the total would fit (one partition, summed in order)."""
    monkeypatch.setattr(spark_sums, "_INT_PART", 63)
    big = 2**53
    x = parse_expression("x")
    r = ("clamped_sum", x, -big, big)
    ansi = spark.conf.get("spark.sql.ansi.enabled")
    try:
        for setting in ("true", "false"):
            spark.conf.set("spark.sql.ansi.enabled", setting)
            cases = itertools.product(_overflow_cases(spark), (Grouping(("g",), (0, 1)), None))
            for f, grouping in cases:
                bex = _at(ex, f)
                assert bex._aggregated("t", f._plan, grouping, [r], [x], True) is None
                sums, counts = bex.clamped_sum(f._plan, grouping, x, -big, big)
                want_sums, want_counts = _on_grid(ex, f, grouping, r)
                assert list(sums) == list(want_sums) and list(counts) == list(want_counts)
        assert sums[0] == 0.0  # 5 truncated to the grid's multiples of 2**13
    finally:
        spark.conf.set("spark.sql.ansi.enabled", ansi)


def test_integer_and_grid_requests_of_one_value_in_one_job(ex: SparkExecutor) -> None:
    """One BIGINT value read by requests in integers and on the grid at once: each as alone."""
    from pinqpy.engines.base import Read

    f = _int_frame()
    x = parse_expression("x")
    grouping = Grouping(("g",), (0, 1, 2, 3, 4))
    bex = _at(ex, f)
    reads = [Read(bex, f._plan, "sum", x, 0, 100), Read(bex, f._plan, "moments", x, 0.5, 99.5)]
    reads.append(Read(bex, f._plan, "mean", x, -5, 3))
    got = bex.read_together(f._plan, grouping, reads)
    want = [
        _pandas(f).clamped_sum(f._plan, grouping, x, 0, 100),
        _pandas(f).lattice_sums(f._plan, grouping, x, 0.5, 99.5, squares=True),
        _pandas(f).lattice_sums(f._plan, grouping, x, -5, 3, squares=False),
    ]
    assert list(got[0][0]) == list(want[0][0]) and list(got[0][1]) == list(want[0][1])
    for g, w in zip(got[1:], want[1:], strict=True):
        assert (g[0], g[1], list(g[2])) == (w[0], w[1], list(w[2]))


def _kept_maps(spark: Any, rows: list[tuple[int, dict[str, int]]], seed: int, parts: int) -> dict:
    """The map each person keeps under bound_contributions(1), with the salt of ``seed``,
    from a Spark DataFrame of ``rows`` split into ``parts`` partitions."""
    from pyspark.sql import types as T

    from pinqpy.engines.registry import executor_for

    schema = T.StructType(
        [
            T.StructField("u", T.LongType()),
            T.StructField("m", T.MapType(T.StringType(), T.LongType())),
        ]
    )
    sdf = spark.createDataFrame(rows, schema).repartition(parts)
    frame = pq.PrivateFrame(sdf, pq.Budget(1), privacy_unit="u").bound_contributions(1)
    with pq.testing.seed(seed):
        got = executor_for(frame._plan, frame._rel.catalog).rows(frame._plan)
    return {int(u): dict(m) for u, m in zip(got["u"], got["m"], strict=True)}


def test_truncation_orders_rows_that_differ_only_in_a_map_by_the_map(spark: Any) -> None:
    """A row's priority hashes its map columns too (by their JSON text): one person's rows
    that differ only in a map are ordered by the rows and the salt, never by where Spark
    holds them, so the same rows are kept whatever the order, partitioning or other people."""
    person = [(0, {"visit": i}) for i in range(8)]
    others = [(u, {"visit": u}) for u in range(1, 6)]
    rng = np.random.default_rng(5)
    kept = []
    for seed in range(6):
        base = _kept_maps(spark, person + others, seed, 1)
        shuffled = [person[i] for i in rng.permutation(len(person))]
        assert _kept_maps(spark, others[::-1] + shuffled, seed, 3)[0] == base[0]
        more = others + [(u, {"visit": -u}) for u in range(6, 30)]
        assert _kept_maps(spark, shuffled + more, seed, 5)[0] == base[0]
        kept.append(base[0]["visit"])
    # The salt chooses: six salts keep one row of eight all alike with probability 8**-5.
    assert len(set(kept)) > 1
