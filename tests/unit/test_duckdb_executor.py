"""Differential tests: the DuckDB engine gives the pandas engine's exact aggregates."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

duckdb = pytest.importorskip("duckdb")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import pinqpy as pq  # noqa: E402
from pinqpy import testing  # noqa: E402
from pinqpy.demo import load_pums  # noqa: E402
from pinqpy.engines.duckdb.executor import DuckDBExecutor  # noqa: E402
from pinqpy.engines.pandas.executor import PandasExecutor  # noqa: E402
from pinqpy.errors import PinqError  # noqa: E402
from pinqpy.expr.parser import parse_expression  # noqa: E402
from pinqpy.plan.catalog import Catalog  # noqa: E402
from pinqpy.plan.grouping import Grouping  # noqa: E402
from pinqpy.plan.nodes import PlanNode, PyFunc, Source  # noqa: E402


@pytest.fixture(scope="module")
def pums() -> pd.DataFrame:
    return load_pums()


def _frame(df: pd.DataFrame, **kwargs: object) -> pq.PrivateFrame:
    return pq.PrivateFrame(df, pq.Budget(1e6), **kwargs)  # type: ignore[arg-type]


def _pandas(f: pq.PrivateFrame) -> PandasExecutor:
    """The pandas executor reading the tables of ``f``'s plan."""
    return PandasExecutor().bound(f._rel.catalog)


def _duck(f: pq.PrivateFrame, con: object = None) -> DuckDBExecutor:
    """A DuckDB executor (on ``con``) reading the tables of ``f``'s plan."""
    return DuckDBExecutor(con).bound(f._rel.catalog)


def _same_counts(f: pq.PrivateFrame, grouping: Grouping | None) -> None:
    plan = f._plan
    np.testing.assert_array_equal(_duck(f).count(plan, grouping), _pandas(f).count(plan, grouping))


def _same_moments(
    f: pq.PrivateFrame, grouping: Grouping | None, expr: str, lo: float, hi: float
) -> None:
    plan = f._plan
    e = parse_expression(expr)
    # Exact lattice-index sums: the engines agree to the last integer.
    want = _pandas(f).lattice_sums(plan, grouping, e, lo, hi, squares=True)
    got = _duck(f).lattice_sums(plan, grouping, e, lo, hi, squares=True)
    assert got[0] == want[0] and got[1] == want[1]
    np.testing.assert_array_equal(got[2], want[2])
    s_want = _pandas(f).clamped_sum(plan, grouping, e, lo, hi)
    s_got = _duck(f).clamped_sum(plan, grouping, e, lo, hi)
    np.testing.assert_allclose(s_got[0], s_want[0], rtol=1e-9, atol=1e-6)
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
    frame = build(_frame(pums))
    for grouping in (None, SEX, SEX_RACE):
        _same_counts(frame, grouping)
        _same_moments(frame, grouping, "age", 18, 70)
        _same_moments(frame, grouping, "income / 1000.0", -5, 60.5)


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
    frame = g
    keys = tuple((r, s) for r in range(1, 8) for s in (0, 1))
    grouping = Grouping(("race", "sex"), keys)
    _same_counts(frame, grouping)
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
        _same_moments(frame, grouping, col, lo, hi)


def test_buckets_candidates_and_keys(pums: pd.DataFrame) -> None:
    frame = _frame(pums).where("age >= 20")
    plan = frame._plan
    d = _duck(frame)
    cands = np.array([0.0, 10.0, 20.0, 20.0, 40.0, 80.0])
    v = parse_expression("income / 1000.0")
    for grouping in (None, SEX, SEX_RACE):
        want = _pandas(frame).buckets(plan, grouping, v, cands)
        got = d.buckets(plan, grouping, v, cands)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        for expr, cs in [("race", (1, 2, 3, 9)), ("CAST(sex AS VARCHAR)", ("0", "1", "x"))]:
            e = parse_expression(expr)
            np.testing.assert_array_equal(
                d.candidate_counts(plan, grouping, e, cs),
                _pandas(frame).candidate_counts(plan, grouping, e, cs),
            )
    keys, counts = d.key_counts(plan, ("sex", "married"))
    want_keys, want_counts = _pandas(frame).key_counts(plan, ("sex", "married"))
    assert keys == want_keys
    np.testing.assert_array_equal(counts, want_counts)


def test_partition_parts(pums: pd.DataFrame) -> None:
    f = _frame(pums)
    parts = f.partition("race", keys=[1, 2, 42])
    for key in (1, 2, 42):
        frame = parts[key].where("age > 25")
        _same_counts(frame, None)
        _same_counts(frame, SEX)
        _same_moments(frame, SEX, "income", 0, 1e5)


def test_truncation_keeps_min_rows_per_key(pums: pd.DataFrame) -> None:
    df = pums.assign(person=np.arange(len(pums)) % 97)
    f = _frame(df, privacy_unit="person")
    frame = f.bound_contributions(3)
    plan = frame._plan
    d = _duck(frame)
    k_d, c_d = d.key_counts(plan, ("person",))
    k_p, c_p = _pandas(frame).key_counts(plan, ("person",))
    assert k_d == k_p
    np.testing.assert_array_equal(c_d, c_p)
    assert c_d.max() == 3
    # A bounded join: per-key counts are min(rows, b_l) * min(rows, b_r).
    left = _frame(pums).select("age", "sex")
    right = _frame(pums).select("age", "income")
    join = left.join(right, on="age", max_rows_per_key=(2, 3))
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
    _same_moments(f, None, expr, -1e6, 1e6)
    e = parse_expression(expr)
    _same_counts(f.where(f"({expr}) IS NULL"), None)
    _same_counts(f.where(parse_expression(f"({e.to_sql()}) > 1").to_sql()), None)


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
    frame = _frame(_fault_frame()).select(x=expr)
    plan = frame._plan
    got = _duck(frame).key_counts(plan, ("x",))
    want = _pandas(frame).key_counts(plan, ("x",))
    assert [None if k is None or k != k else k for k in got[0]] == [
        None if k is None or k != k else k for k in want[0]
    ]
    np.testing.assert_array_equal(got[1], want[1])


def test_explode_matches() -> None:
    df = pd.DataFrame(
        {"k": [1, 1, 2, 3], "tags": [["a", "b", "c"], [], None, ["b", None, "b", "d"]]}
    )
    frame = _frame(df).explode("tags", 2)
    for grouping in (None, Grouping(("tags",), ("a", "b", "c", "d", "z"))):
        _same_counts(frame, grouping)


def test_unsupported_things_are_pinq_errors(pums: pd.DataFrame) -> None:
    frame = _frame(pums, allow_callables=True).where(lambda d: d["age"] > 30)
    plan = frame._plan
    with pytest.raises(PinqError, match="callable"):
        _duck(frame).count(plan, None)
    with pytest.raises(PinqError, match="callable"):
        other = _frame(pums)
        _duck(other).clamped_sum(other._plan, None, PyFunc(lambda d: d["age"], "f"), 0, 1)


def test_duckdb_relation_source() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS i, range % 3 AS g FROM range(10)")
    df = con.sql("SELECT * FROM t").df()
    f = _frame(df)
    frame = f.where("i > 2")
    plan = frame._plan
    catalog = _swap_sources(frame, con.sql("SELECT * FROM t"))
    got = DuckDBExecutor(con).bound(catalog).count(plan, Grouping(("g",), (0, 1, 2)))
    np.testing.assert_array_equal(got, _pandas(frame).count(plan, Grouping(("g",), (0, 1, 2))))


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
    _same_moments(f, grouping, expr, -10, 10)
    _same_counts(f.where(f"({expr}) IS NULL"), grouping)
    _same_counts(f.where("i > 0 OR f < 1 AND s <> 'a'").distinct("g", "s"), grouping)
    _same_counts(f.union(f.where("i IS NULL")), grouping)
    _same_counts(f.intersect(f.where("f IS NOT NULL")), None)
    got, want = _duck(f).key_counts(f._plan, ("s",)), _pandas(f).key_counts(f._plan, ("s",))
    assert [k if isinstance(k, str) else None for k in got[0]] == [
        k if isinstance(k, str) else None for k in want[0]
    ]
    np.testing.assert_array_equal(got[1], want[1])


# -- shared sub-expressions -------------------------------------------------------------------
def _sql_of(f: pq.PrivateFrame) -> str:
    """The SQL the DuckDB engine writes for a plan's rows."""
    from pinqpy.engines.duckdb.plansql import PlanSql

    p = PlanSql(_duck(f))
    return p.query(f"SELECT * FROM {p.visit(f._plan)}")


# Each step writes the previous expression once, and its translation needs it more than once
# (BETWEEN and IN compare it repeatedly, NULLIF compares and returns it, a division and a
# power are checked for being finite, text read as an integer is tested, then cast).
NESTINGS = {
    "between": lambda e: f"CAST((({e}) * 3) BETWEEN -5 AND 5 AS INT) * 2 + 1",
    "in": lambda e: f"CAST(({e}) IN (1, 3, 5) AS INT) + x",
    "nullif": lambda e: f"NULLIF(({e}) / 3 + 1, 2)",
    "greatest": lambda e: f"GREATEST(POWER(({e}) - 1, 2), x) / 7",
    "case": lambda e: f"CASE WHEN ({e}) BETWEEN 0 AND 4 THEN 1 WHEN x > 2 THEN 2 ELSE 3 END",
    "cast": lambda e: f"CAST(CAST(({e}) AS VARCHAR) AS INT) + 1",
}


@pytest.mark.parametrize("name", sorted(NESTINGS))
def test_translation_grows_linearly_with_nesting(name: str) -> None:
    df = pd.DataFrame({"x": pd.array([0, 1, 2, 3, 4, 5, 6, 7, None], dtype="Int64")})
    f = _frame(df)
    exprs = ["x"]
    for _ in range(12):
        exprs.append(NESTINGS[name](exprs[-1]))
    sqls = [_sql_of(f.assign(y=e)) for e in exprs]
    # DuckDB itself rewrites NULLIF(a, b) into a CASE that repeats a: none may be written.
    assert "NULLIF" not in sqls[-1].upper()
    sizes = [len(sql) for sql in sqls]
    steps = np.diff(sizes)
    # Each level adds about the same amount of SQL (written once, then referred to by name);
    # a repeated sub-expression would double (or triple) it at every level.
    assert steps.max() <= 2 * steps[1:].min()
    assert sizes[-1] < 15 * sizes[1]
    # And the deepest one gives pandas' answers.
    deep = f.assign(y=exprs[-1])
    _same_moments(deep, None, "y", -1e6, 1e6)
    _same_counts(deep.where("y IS NULL"), None)
    _same_counts(deep.where("y > 1"), None)


def test_kmeans_style_nearest_centre_translates_once() -> None:
    rng = np.random.default_rng(3)
    df = pd.DataFrame(rng.normal(0, 2, size=(300, 8)), columns=[f"x{i}" for i in range(8)])
    centres = rng.normal(0, 2, size=(3, 8))
    d = [" + ".join(f"POWER(x{i} - ({float(c[i])!r}), 2)" for i in range(8)) for c in centres]
    expr = (
        f"CASE WHEN ({d[0]}) <= ({d[1]}) AND ({d[0]}) <= ({d[2]}) THEN 0 "
        f"WHEN ({d[1]}) <= ({d[2]}) THEN 1 ELSE 2 END"
    )
    f = _frame(df).assign(cluster=expr)
    assert len(_sql_of(f)) < 20 * len(expr)
    grouping = Grouping(("cluster",), (0, 1, 2))
    _same_counts(f, grouping)
    _same_moments(f, grouping, "x3", -10, 10)


# -- NaN stored in DuckDB is NULL, wherever it goes ------------------------------------------
def _swap_sources(f: pq.PrivateFrame, data: object) -> Catalog:
    """A catalog that reads every table of ``f``'s plan as ``data`` (the plan stays as it is)."""
    tables = {}
    stack: list[PlanNode] = [f._plan]
    while stack:
        node = stack.pop()
        if isinstance(node, Source):
            tables[node.table.id] = data
        stack.extend(node.children)
    return Catalog(tables, f._rel.catalog._public, f._rel.catalog._agents)


@pytest.fixture(scope="module")
def nan_tables() -> tuple[pd.DataFrame, object, object]:
    """The same rows in pandas (NaN) and in DuckDB, where half the missing floats are NaN
    (which DuckDB keeps apart from NULL) and the others NULL; also a FLOAT column."""
    rng = np.random.default_rng(11)
    n = 400
    x = rng.choice([0.5, 1.0, 2.0, 3.5, -1.0, 1e6, np.nan], size=n)
    df = pd.DataFrame(
        {
            "k": np.arange(n) % 7,
            "u": np.arange(n) % 31,
            "x": x,
            "y": rng.choice([1.0, 2.0, np.nan], size=n).astype("float32"),
        }
    )
    con = duckdb.connect()
    con.register("src", df)
    con.execute(
        "CREATE TABLE t AS SELECT k, u, CASE WHEN x IS NULL AND k % 2 = 0 THEN 'nan'::DOUBLE "
        "ELSE x END AS x, CASE WHEN y IS NULL AND u % 2 = 1 THEN 'nan'::FLOAT "
        "ELSE y::FLOAT END AS y FROM src"
    )
    assert con.sql("SELECT count(*) FROM t WHERE isnan(x)").fetchall()[0][0] > 0
    assert con.sql("SELECT count(*) FROM t WHERE x IS NULL").fetchall()[0][0] > 0
    return df, con, con.sql("SELECT * FROM t")


NAN_PLANS = [
    lambda f: f,
    lambda f: f.where("x > 1 OR x IS NULL"),
    lambda f: f.where("x BETWEEN 0 AND 3 AND y IS NOT NULL"),
    lambda f: f.select("x", "k"),
    lambda f: f.assign(z="x * 2").select("z", "x", "k"),
    lambda f: f.assign(x="COALESCE(x, -5)"),
    lambda f: f.distinct("x", "k"),
    lambda f: f.distinct("y"),
    lambda f: f.groupby("x").agg(n="COUNT(*)", m="COUNT(y)", s="SUM(x)"),
    lambda f: f.concat(f.where("k = 1")),
    lambda f: f.union(f.where("k = 1")),
    lambda f: f.intersect(f.where("k < 4")),
    lambda f: f.difference(f.where("k < 4")),
    lambda f: f.explode("x", 3),
    # Bounds no key reaches: which rows a truncation keeps differs between engines.
    lambda f: f.where("k < 2").join(
        f.select("x", "u").where("u < 5"), on="x", max_rows_per_key=(100, 100)
    ),
    lambda f: f.partition("x", keys=[None, 0.5, 3.5])[0.5].where("k > 0"),
    lambda f: f.partition("y", keys=[None, 1.0])[1.0],
]


@pytest.mark.parametrize("build", NAN_PLANS)
def test_stored_nan_reads_as_null(nan_tables, build) -> None:
    df, con, rel = nan_tables
    frame = build(_frame(df))
    plan = frame._plan
    d = DuckDBExecutor(con).bound(_swap_sources(frame, rel))
    columns = [
        c for c in ("k", "x", "y", "z", "n", "m", "s") if c in _pandas(frame).rows(plan).columns
    ]
    groupings = [None]
    if "k" in columns:
        groupings.append(Grouping(("k",), (0, 1, 2, 6)))
    if "x" in columns:
        groupings.append(Grouping(("x",), (None, 0.5, 1e6, 7.0)))
    for grouping in groupings:
        np.testing.assert_array_equal(d.count(plan, grouping), _pandas(frame).count(plan, grouping))
        for col in columns:
            e = parse_expression(col)
            want = _pandas(frame).clamped_sum(plan, grouping, e, -2, 3)
            got = d.clamped_sum(plan, grouping, e, -2, 3)
            np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
            np.testing.assert_array_equal(got[1], want[1])
            cands = np.array([-2.0, 0.5, 1.0, 2.0, 3.0])
            for a, b in zip(
                d.buckets(plan, grouping, e, cands),
                _pandas(frame).buckets(plan, grouping, e, cands),
                strict=True,
            ):
                np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(
                d.candidate_counts(plan, grouping, e, (None, 0.5, 3.5, 1.0)),
                _pandas(frame).candidate_counts(plan, grouping, e, (None, 0.5, 3.5, 1.0)),
            )
    for col in columns:
        keys, counts = d.key_counts(plan, (col,))
        want_keys, want_counts = _pandas(frame).key_counts(plan, (col,))
        assert [None if k is None or k != k else k for k in keys] == [
            None if k is None or k != k else k for k in want_keys
        ]
        np.testing.assert_array_equal(counts, want_counts)
    got_rows = d.rows(plan)
    assert not any(
        np.isnan(got_rows[c].to_numpy(dtype=float, na_value=0.0)).any()
        for c in got_rows.columns
        if got_rows[c].dtype.kind == "f"
    )


# -- integer sums and buckets, inline key tables ----------------------------------------------
def _int_frame() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    n = 500
    v = rng.integers(-40, 260, size=n).astype(object)
    v[rng.random(n) < 0.1] = None
    return pd.DataFrame(
        {
            "v": pd.array(v, dtype="Int64"),
            "b": pd.array(rng.random(n) < 0.3, dtype="boolean"),
            "g": rng.choice(["a", "b", "it's", None], size=n),
            "h": rng.choice([0.1, 0.2, 0.30000000000000004, np.nan], size=n),
        }
    )


@pytest.mark.parametrize(
    ("expr", "lo", "hi"),
    [("v", 0, 200), ("v", -10, 10), ("v", 0.5, 99.5), ("b", 0, 1), ("v * 3", -100, 700)],
)
def test_integer_sums_match_pandas(expr: str, lo: float, hi: float) -> None:
    frame = _frame(_int_frame())
    plan = frame._plan
    e = parse_expression(expr)
    for grouping in (None, Grouping(("g",), ("a", "it's", None, "zz"))):
        want = _pandas(frame).clamped_sum(plan, grouping, e, lo, hi)
        got = _duck(frame).clamped_sum(plan, grouping, e, lo, hi)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize(
    "cands",
    [
        np.arange(0.0, 201.0, 2.0),  # an integer grid
        np.linspace(-30.0, 270.0, 101),  # integers, step 3
        np.arange(-5.0, 6.0),  # every integer
        np.linspace(0.0, 1.0, 11),  # not integers
    ],
)
def test_grid_buckets_match_pandas(cands: np.ndarray) -> None:
    frame = _frame(_int_frame()).where("v <> 7")
    plan = frame._plan
    for expr in ("v", "b", "v / 4"):
        e = parse_expression(expr)
        for grouping in (None, Grouping(("g",), ("a", "b", None))):
            for got, want in zip(
                _duck(frame).buckets(plan, grouping, e, cands),
                _pandas(frame).buckets(plan, grouping, e, cands),
                strict=True,
            ):
                np.testing.assert_array_equal(got, want)


def test_key_tables_of_every_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    from pinqpy.engines.duckdb import grouped, tables

    df = _int_frame()
    frame = _frame(df)
    plan = frame._plan
    groupings = [
        Grouping(("g",), ("a", "it's", None, "zz")),
        Grouping(("h",), (0.1, 0.30000000000000004, 0.3, None)),
        Grouping(("b",), (True, False, None)),
        Grouping(("v",), (*range(-40, 260), None, 3.5)),
        Grouping(("g", "b"), (("a", True), ("it's", None), (None, False))),
    ]
    for small in (True, False):  # written into the query, or registered
        if not small:
            monkeypatch.setattr(tables, "INLINE_ROWS", 0)
            monkeypatch.setattr(grouped, "INLINE_ROWS", 0)
        for grouping in groupings:
            _same_counts(frame, grouping)
            _same_moments(frame, grouping, "v", 0, 100)
            np.testing.assert_array_equal(
                _duck(frame).candidate_counts(plan, grouping, parse_expression("h"), (0.1, 0.2)),
                _pandas(frame).candidate_counts(plan, grouping, parse_expression("h"), (0.1, 0.2)),
            )


# -- one translation per query ----------------------------------------------------------------
def test_a_query_translates_once_and_sees_one_truncation() -> None:
    from pinqpy.plan.batch import batch

    df = pd.DataFrame({"u": np.arange(600) % 20, "x": np.arange(600, dtype=float)})
    frame = _frame(df, privacy_unit="u").bound_contributions(3)
    plan = frame._plan
    ex = _duck(frame)
    x = parse_expression("x")
    with batch():
        ex.validate(plan, x, numeric=True)
        first = ex.clamped_sum(plan, None, x, 0, 1000)
        again = ex.clamped_sum(plan, None, x, 0, 1000)
        counts = ex.count(plan, None)
    np.testing.assert_array_equal(first[0], again[0])  # the same rows kept
    assert counts[0] == first[1][0] == 60


def test_values_only_duckdb_can_check_are_refused_before_the_charge() -> None:
    con = duckdb.connect()
    rel = con.sql("SELECT [1, 2] AS l, {'a': 1} AS s, 1 AS n")
    budget = pq.Budget(1.0)
    f = pq.PrivateFrame(rel, budget, connection=con)
    with pytest.raises(PinqError, match="DuckDB"):
        f.where("COALESCE(l, s) IS NULL").count(epsilon=0.5)
    assert budget.spent.epsilon == 0


# -- a query's counts and sums in one scan ----------------------------------------------------
def _fused_reads(
    ex: DuckDBExecutor, plan: PlanNode, grouping: Grouping | None, specs: list[tuple]
) -> list[object]:
    """Prefetch ``specs`` (kind, expression, lo, hi) together, then read them as a query
    does; also returns how many statements ran."""
    from pinqpy.engines.base import Read
    from pinqpy.plan.batch import batch

    reads = [
        Read(ex, plan, kind, None if e is None else parse_expression(e), lo, hi)
        for kind, e, lo, hi in specs
    ]
    with batch():
        ex.prefetch(reads, grouping)
        out: list[object] = []
        for r in reads:
            if r.kind == "count":
                out.append(ex.count(plan, grouping))
            elif r.kind == "sum":
                out.append(ex.clamped_sum(plan, grouping, r.value, r.lo, r.hi))
            else:
                squares = r.kind == "moments"
                out.append(ex.lattice_sums(plan, grouping, r.value, r.lo, r.hi, squares))
    return out


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL of every statement DuckDB executors run while the test does."""
    seen: list[str] = []
    fetch = DuckDBExecutor._fetch

    def counted(self: DuckDBExecutor, sql: str) -> list:
        seen.append(sql)
        return fetch(self, sql)

    monkeypatch.setattr(DuckDBExecutor, "_fetch", counted)
    return seen


FUSED_SPECS = [
    ("count", None, 0, 0),
    ("sum", "x", -2, 3),
    ("sum", "x", -2.5, 3.5),
    ("moments", "x", -2, 3),
    ("mean", "x", -2.5, 1e7),
    ("sum", "y", 0, 2),
    ("sum", "k * 2", 0, 10),
    ("moments", "COALESCE(x, 1)", 0, 4),
]


@pytest.mark.parametrize("build", NAN_PLANS[:6])
def test_prefetched_reads_equal_single_reads(nan_tables, build) -> None:
    """One statement for several reads gives each read's own answer, NaN and NULL included
    (x holds stored NaN, so the statement runs again with its NaN filters)."""
    df, con, rel = nan_tables
    frame = build(_frame(df))
    plan = frame._plan
    dcat = _swap_sources(frame, rel)
    names = set(_pandas(frame).rows(plan).columns)
    specs = [s for s in FUSED_SPECS if s[1] is None or all(c in names for c in "xyk" if c in s[1])]
    for grouping in (None, Grouping(("k",), (0, 1, 2, 6, 99))):
        got = _fused_reads(DuckDBExecutor(con).bound(dcat), plan, grouping, specs)
        for (kind, e, lo, hi), value in zip(specs, got, strict=True):
            if kind == "count":
                want = _pandas(frame).count(plan, grouping)
                np.testing.assert_array_equal(value, want)
                continue
            expr = parse_expression(e)
            if kind == "sum":
                want = _pandas(frame).clamped_sum(plan, grouping, expr, lo, hi)
            else:
                want = _pandas(frame).lattice_sums(plan, grouping, expr, lo, hi, kind == "moments")
                assert value[0] == want[0] and value[1] == want[1]  # type: ignore[index]
                np.testing.assert_array_equal(value[2], want[2])  # type: ignore[index]
                continue
            for a, b in zip(value, want, strict=True):  # type: ignore[arg-type]
                np.testing.assert_allclose(a, b, rtol=1e-12)


def test_prefetch_runs_one_statement_and_reruns_only_for_nan(
    nan_tables, statements: list[str]
) -> None:
    df, con, rel = nan_tables
    f = _frame(df)
    ex = DuckDBExecutor(con).bound(_swap_sources(f, rel))
    plan = f._plan
    grouping = Grouping(("k",), (0, 1))
    _fused_reads(ex, plan, grouping, [("count", None, 0, 0), ("sum", "k", 0, 5)])
    assert len(statements) == 1  # no stored NaN in k: one scan
    statements.clear()
    _fused_reads(ex, plan, grouping, [("count", None, 0, 0), ("sum", "x", 0, 5)])
    assert len(statements) == 2  # x holds NaN: counted, then read with NaN filters
    assert "FILTER" in statements[1] and "FILTER" not in statements[0]


def test_prefetch_with_no_matching_key_gives_zeros() -> None:
    df = pd.DataFrame({"k": [1, 2, 2], "x": [1.0, 2.0, 3.0]})
    frame = _frame(df)
    plan = frame._plan
    got = _fused_reads(
        _duck(frame),
        plan,
        Grouping(("k",), ("a", "b")),  # strings never match an integer column
        [("count", None, 0, 0), ("sum", "x", 0, 5)],
    )
    np.testing.assert_array_equal(got[0], [0, 0])
    np.testing.assert_array_equal(got[1][0], [0.0, 0.0])  # type: ignore[index]


def test_sql_count_and_mean_read_the_join_once(statements: list[str]) -> None:
    """A SQL query's COUNT(*) and AVG(x) over one join are one DuckDB statement, and they
    answer what separate reads would."""
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"educ": rng.integers(1, 5, 300), "income": rng.integers(0, 9000, 300)})
    levels = pd.DataFrame({"educ": [1, 2, 3, 4], "level": ["a", "a", "b", "c"]})
    answers = {}
    for engine in ("pandas", "duckdb"):
        session = pq.Session()
        frame = pq.PrivateFrame(df, pq.Budget(10), engine=engine, bounds={"income": (0, 10_000)})
        session.register("people", frame)
        session.register_public("levels", levels)
        statements.clear()
        with testing.no_noise():
            out = session.sql(
                "SELECT l.level, COUNT(*) AS n, AVG(p.income) AS m FROM people AS p "
                "JOIN levels AS l ON p.educ = l.educ GROUP BY l.level",
                epsilon=1.0,
            )
        answers[engine] = out.sort_values("level")[["n", "m"]].to_numpy()
        if engine == "duckdb":
            assert len(statements) == 1
    np.testing.assert_allclose(answers["duckdb"], answers["pandas"], rtol=1e-12)


def test_multi_column_keys_with_nulls_match_pandas() -> None:
    """Keys of several columns where some parts are NULL: a NULL part matches NULL rows on
    both engines, and a key no row has gets zero."""
    rng = np.random.default_rng(8)
    n = 300
    df = pd.DataFrame(
        {
            "a": pd.array(rng.choice([1, 2, None], size=n), dtype="Int64"),
            "b": rng.choice(["x", "y", None], size=n),
            "c": rng.choice([0.5, 1.5, np.nan], size=n),
            "v": rng.normal(size=n),
        }
    )
    frame = _frame(df)
    plan = frame._plan
    grouping = Grouping(
        ("a", "b", "c"),
        ((1, "x", 0.5), (None, "y", 1.5), (2, None, None), (None, None, None), (3, "z", 9.0)),
    )
    _same_counts(frame, grouping)
    _same_moments(frame, grouping, "v", -1, 1)
    assert _pandas(frame).count(plan, grouping)[3] > 0  # the all-NULL key has rows


def test_columns_that_differ_only_in_case_are_refused_before_the_charge() -> None:
    # DuckDB binds "age" and "AGE" to one column: the sum would silently read the wrong one.
    con = duckdb.connect()
    con.register("t", pd.DataFrame({"age": np.arange(100)}))
    budget = pq.Budget(epsilon=10)
    f = pq.PrivateFrame(con.table("t"), budget, connection=con)
    doubled = f.select("age", AGE="age * 2")
    with pytest.raises(PinqError, match=r"'age' and 'AGE'.*without regard to case"):
        doubled.sum("AGE", epsilon=1, bounds=(0, 300))
    assert budget.spent == pq.Cost(0)
    with testing.no_noise():  # one of them alone is fine
        assert float(f.select(AGE="age * 2").sum("AGE", epsilon=1, bounds=(0, 300))) == 9900


# -- the user's connection: no leaked names, relations find their connection ----------------
def _user_tables(con: object) -> list[tuple[object, ...]]:
    return con.sql("SHOW TABLES").fetchall()  # type: ignore[attr-defined]


def test_show_tables_unchanged_by_frames_and_queries(pums: pd.DataFrame) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT * FROM pums")
    before = _user_tables(con)
    budget = pq.Budget(10)
    from_df = pq.PrivateFrame(
        pums, budget, engine="duckdb", connection=con, bounds={"age": (0, 100)}
    )
    from_rel = pq.PrivateFrame(
        con.sql("SELECT * FROM people"), budget, connection=con, bounds={"age": (0, 100)}
    )
    from_name = pq.PrivateFrame("people", budget, engine="duckdb", connection=con)
    labels = pd.DataFrame({"educ": [1, 1, 2], "label": ["a", "b", "c"]})
    with testing.seed(1):
        from_df.where("age > 30").mean("age", epsilon=0.5)
        from_rel.join(labels, on="educ").count(epsilon=0.5)
        from_name.partition("sex", keys=[1, 2]).count(epsilon=0.5)
    assert _user_tables(con) == before
    # The views live in pinqpy's own schema while their frames do.
    hidden = con.sql(
        "SELECT count(*) FROM duckdb_views() WHERE schema_name = '__pinqpy'"
    ).fetchall()[0][0]
    assert hidden >= 3


def test_views_of_gone_frames_are_dropped(pums: pd.DataFrame) -> None:
    import gc

    con = duckdb.connect()
    frame = pq.PrivateFrame(pums, pq.Budget(1), engine="duckdb", connection=con)
    count = "SELECT count(*) FROM duckdb_views() WHERE view_name LIKE '__pinq_src%'"
    assert con.sql(count).fetchall()[0][0] >= 1
    del frame
    gc.collect()
    # The next use of DuckDB drops the views of frames that are gone.
    pq.PrivateFrame(pd.DataFrame({"x": [1]}), pq.Budget(1), engine="duckdb", connection=con)
    names = con.sql(
        "SELECT view_name FROM duckdb_views() WHERE view_name LIKE '__pinq_src%'"
    ).fetchall()
    assert len(names) == 1


def test_relation_finds_a_known_connection_without_connection_argument() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT range AS x FROM range(50)")
    first = con.sql("SELECT * FROM t")
    with pytest.raises(PinqError, match="belongs to as connection=con, once"):
        pq.PrivateFrame(first, pq.Budget(1))
    pq.PrivateFrame(first, pq.Budget(1), connection=con)
    later = pq.PrivateFrame(con.sql("SELECT * FROM t WHERE x < 10"), pq.Budget(1))
    with testing.no_noise():
        assert int(later.count(epsilon=1)) == 10
    assert _user_tables(con) == [("t",)]


def test_relation_of_the_default_connection_needs_no_argument() -> None:
    frame = pq.PrivateFrame(duckdb.sql("SELECT 1 AS x UNION ALL SELECT 2"), pq.Budget(1))
    with testing.no_noise():
        assert int(frame.count(epsilon=1)) == 2


def test_relation_connection_probe_leaves_no_variable() -> None:
    from pinqpy.engines.wrapping.duckdb_source import relation_connection

    con = duckdb.connect()
    pq.PrivateFrame(pd.DataFrame({"x": [1]}), pq.Budget(1), connection=con)
    rel = con.sql("SELECT 1 AS x")
    assert relation_connection(rel) is con
    left = con.sql("SELECT count(*) FROM duckdb_variables() WHERE name LIKE 'pinq_probe%'")
    assert left.fetchall()[0][0] == 0


def test_relation_of_another_connection_is_refused_with_the_fix() -> None:
    a, b = duckdb.connect(), duckdb.connect()
    b.execute("CREATE TABLE t AS SELECT 1 AS x")
    with pytest.raises(PinqError, match="not in this DuckDB connection"):
        pq.PrivateFrame(b.sql("SELECT * FROM t"), pq.Budget(1), connection=a)


def _bucket_reference(x: np.ndarray, cands: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(eq, gap) counts by numpy: NaN skipped, values clamped, a repeated candidate's rows
    at its first position (searchsorted's left side)."""
    x = np.clip(x[~np.isnan(x)], cands[0], cands[-1])
    j = np.searchsorted(cands, x, side="left")
    hit = cands[np.minimum(j, len(cands) - 1)] == x
    flat = np.bincount(np.where(hit, 2 * j, 2 * j - 1), minlength=2 * len(cands) - 1)
    return flat[0::2], flat[1::2]


@pytest.mark.parametrize(
    "cands",
    [
        np.linspace(0.0, 10.0, 11),  # on a grid: bucketed by arithmetic
        np.array([0.0, 0.5, 2.0, 2.0, 7.0, 10.0]),  # off a grid: the range join
    ],
)
def test_bucket_counts_equal_numpy(cands: np.ndarray) -> None:
    rng = np.random.default_rng(11)
    n = 3000
    x = rng.choice([-0.0, 0.0, 0.5, 2.0, 10.0, -3.0, 25.0, np.nan], size=n)
    x = np.where(rng.random(n) < 0.5, rng.uniform(-5.0, 15.0, size=n), x)
    g = rng.choice(["a", "b", "c"], size=n)
    frame = _frame(pd.DataFrame({"x": x, "g": g}))
    plan, e = frame._plan, parse_expression("x")
    eq, gap = _duck(frame).buckets(plan, None, e, cands)
    want = _bucket_reference(x, cands)
    np.testing.assert_array_equal(eq[0], want[0])
    np.testing.assert_array_equal(gap[0], want[1])
    keys = ("b", "zz", "a")  # "zz" matches no row
    eq, gap = _duck(frame).buckets(plan, Grouping(("g",), keys), e, cands)
    assert eq.shape == (3, len(cands)) and gap.shape == (3, len(cands) - 1)
    for i, key in enumerate(keys):
        want = _bucket_reference(x[g == key], cands)
        np.testing.assert_array_equal(eq[i], want[0])
        np.testing.assert_array_equal(gap[i], want[1])
    # Keys no row of the column's type can equal: every count is zero.
    eq, gap = _duck(frame).buckets(plan, Grouping(("g",), (1, 2)), e, cands)
    assert not eq.any() and not gap.any() and eq.shape == (2, len(cands))
