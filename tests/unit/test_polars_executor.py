"""The Polars engine's own contract: what it wraps and how lazily, how Polars types map to
pinqpy's, exact sums at extremes, salted priorities that read every column, and pinqpy's
semantics where Polars' own differ. The cross-engine suites (``-k polars``) check the rest:
the same charges and, with noise off, the same answers as pandas."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pl = pytest.importorskip("polars")

import pinqpy as pq  # noqa: E402
from pinqpy.core.lattice import Lattice, SumGrid  # noqa: E402
from pinqpy.engines.polars.priorities import row_priority  # noqa: E402
from pinqpy.engines.registry import executor_for  # noqa: E402
from pinqpy.engines.sources import PolarsTable  # noqa: E402
from pinqpy.expr.parser import parse_expression  # noqa: E402
from pinqpy.plan.grouping import Grouping  # noqa: E402


def _rows(frame: pq.PrivateFrame) -> pd.DataFrame:
    return executor_for(frame._plan, frame._rel.catalog).rows(frame._plan)  # type: ignore[attr-defined]


def _count(frame: pq.PrivateFrame) -> int:
    with pq.testing.no_noise():
        return int(frame.count(epsilon=1.0))


PEOPLE = pl.DataFrame(
    {
        "age": [23, 35, 47, 52, 61, 70, None],
        "income": [21_000.0, 48_000.0, None, 55_000.0, 40_000.0, 12_000.0, 30_000.0],
        "state": ["CA", "NY", "CA", "TX", None, "CA", "NY"],
    }
)


# -- sources ------------------------------------------------------------------------------------
@pytest.mark.parametrize("lazy", [False, True])
def test_dataframes_and_lazyframes_run_on_polars_with_pandas_answers(lazy: bool) -> None:
    data = PEOPLE.lazy() if lazy else PEOPLE
    meta = {"bounds": {"income": (0, 100_000), "age": (0, 100)}, "keys": {"state": ["CA", "NY"]}}
    f = pq.PrivateFrame(data, pq.Budget(100), **meta)  # type: ignore[arg-type]
    g = pq.PrivateFrame(PEOPLE.to_pandas(), pq.Budget(100), **meta)  # type: ignore[arg-type]
    assert f.engine == "polars" and g.engine == "pandas"
    assert f.schema == {"age": "int", "income": "float", "state": "str"}
    with pq.testing.no_noise():
        for make in (
            lambda x: x.where("age >= 40").count(epsilon=1),
            lambda x: x.sum("income", epsilon=1),
            lambda x: x.mean("income", epsilon=1),
            lambda x: x.median("age", epsilon=1),
            lambda x: list(x.partition("state").count(epsilon=1)),
        ):
            assert make(f) == make(g)


def test_a_pandas_dataframe_runs_on_polars_when_asked(tmp_path: Path) -> None:
    f = pq.PrivateFrame(PEOPLE.to_pandas(), pq.Budget(10), engine="polars")
    assert f.engine == "polars" and _count(f.where("state = 'CA'")) == 3
    with pytest.raises(pq.PinqError, match="Polars frame runs on the polars engine"):
        pq.PrivateFrame(PEOPLE, pq.Budget(1), engine="duckdb")


def test_wrapping_a_lazyframe_runs_no_query() -> None:
    runs: list[int] = []

    def watched(s: pl.Series) -> pl.Series:
        runs.append(len(s))
        return s

    lf = PEOPLE.lazy().with_columns(pl.col("age").map_batches(watched, return_dtype=pl.Int64))
    f = pq.PrivateFrame(lf, pq.Budget(10))
    assert runs == []  # only the schema was read
    assert _count(f.where("age > 40")) == 4 and runs


def test_files_are_scanned_lazily_and_read_per_query(tmp_path: Path) -> None:
    csv, parquet = tmp_path / "p.csv", tmp_path / "p.parquet"
    PEOPLE.write_csv(csv)
    PEOPLE.write_parquet(parquet)
    from_csv = pq.PrivateFrame.from_csv(csv, pq.Budget(10), engine="polars")
    from_parquet = pq.PrivateFrame.from_parquet(parquet, pq.Budget(10), engine="polars")
    for f, scan in ((from_csv, "CSV SCAN"), (from_parquet, "PARQUET SCAN")):
        table = f._rel.catalog.data(f._plan.table)
        assert isinstance(table, PolarsTable) and isinstance(table.frame, pl.LazyFrame)
        assert scan.lower() in table.frame.explain().lower()
    assert from_csv.schema == {"age": "int", "income": "float", "state": "str"}
    assert from_parquet.schema == from_csv.schema
    # Nothing was read into memory: rows written after the wrap are read by the query.
    pl.concat([PEOPLE, PEOPLE]).write_csv(csv)
    assert _count(from_csv) == 14
    assert _count(from_parquet) == 7


def test_a_parquet_file_wrapped_again_is_read_as_it_is_now(tmp_path: Path) -> None:
    """Wrapping an unchanged file again reuses its scan (its metadata is read once); a file
    changed since (size, modification time) is scanned afresh, with its new rows and types."""
    path = tmp_path / "p.parquet"
    PEOPLE.write_parquet(path)
    first = pq.PrivateFrame.from_parquet(path, pq.Budget(10), engine="polars")
    again = pq.PrivateFrame.from_parquet(path, pq.Budget(10), engine="polars")
    assert _count(first) == _count(again) == 7
    pl.concat([PEOPLE, PEOPLE]).with_columns(pl.col("age").cast(pl.Float64)).write_parquet(path)
    later = pq.PrivateFrame.from_parquet(path, pq.Budget(10), engine="polars")
    assert _count(later) == 14 and later.schema["age"] == "float"


def test_a_csv_value_that_does_not_parse_as_its_inferred_type_is_null(tmp_path: Path) -> None:
    path = tmp_path / "late.csv"
    lines = ["n"] + [str(i) for i in range(12_000)] + ["4.5", "x"]
    path.write_text("\n".join(lines) + "\n")
    f = pq.PrivateFrame.from_csv(path, pq.Budget(10), engine="polars")
    assert f.schema == {"n": "int"}  # inferred from the first rows, when the file was wrapped
    assert _count(f) == 12_002 and _count(f.where("n IS NULL")) == 2  # never an error
    # The types are the wrapped ones: a query infers nothing from the file as it is then.
    path.write_text("n\nx\ny\n3\n")
    assert _count(f.where("n IS NULL")) == 2 and _count(f.where("n = 3")) == 1


def test_declared_types_are_cast_and_checked_once(tmp_path: Path) -> None:
    data = pl.DataFrame(
        {
            "code": ["01", " 2", None],
            "flag": ["yes", "No", None],
            "t": ["2020-01-01", "2021-06-01 10:00:00+02:00", None],
        }
    )
    declared = {"code": "int", "flag": "bool", "t": "datetime"}
    f = pq.PrivateFrame(data, pq.Budget(10), schema=declared)
    assert f.schema == declared
    assert _count(f.where("code = 2 AND NOT flag")) == 1
    assert _count(f.where("t > '2021-06-01 07:59:59' AND t < '2021-06-01 08:00:01'")) == 1
    with pytest.raises(pq.PinqError, match="does not convert to the declared type int"):
        pq.PrivateFrame(pl.DataFrame({"code": ["1", "x"]}), pq.Budget(1), schema={"code": "int"})
    with pytest.raises(pq.PinqError, match="cannot be declared any"):
        pq.PrivateFrame(data, pq.Budget(1), schema={"code": "any"})


@pytest.mark.parametrize("declared", ["int", "float", "bool", "str", "datetime"])
def test_a_column_of_no_values_converts_to_any_declared_type(tmp_path: Path, declared) -> None:
    """A parquet column written with no value (Polars type Null: an empty table, or a file
    whose column is NULL throughout) is NULL in every declared type, as on pandas."""
    path = tmp_path / "empty.parquet"
    pl.DataFrame({"c": pl.Series([None, None], dtype=pl.Null), "k": [1, 2]}).write_parquet(path)
    f = pq.PrivateFrame.from_parquet(path, pq.Budget(10), engine="polars", schema={"c": declared})
    assert f.schema["c"] == declared
    assert _count(f) == 2 and _count(f.where("c IS NULL")) == 2


# -- types ----------------------------------------------------------------------------------------
def test_an_object_column_is_refused_with_a_hint_and_converts_when_declared() -> None:
    data = pl.DataFrame({"o": pl.Series([1, "x", None], dtype=pl.Object), "n": [1, 2, 3]})
    hint = r"column 'o' holds Python objects .*schema=\{'o': 'str'\}"
    with pytest.raises(pq.PinqError, match=hint):
        pq.PrivateFrame(data, pq.Budget(1))
    f = pq.PrivateFrame(data, pq.Budget(10), schema={"o": "str"})
    assert f.schema == {"o": "str", "n": "int"}
    assert _count(f.where("o = '1'")) == 1 and _count(f.where("o IS NULL")) == 1


def test_polars_types_map_to_pinqpy_kinds_from_the_schema_alone() -> None:
    data = pl.DataFrame(
        {
            "i8": pl.Series([1, None], dtype=pl.Int8),
            "u64": pl.Series([2**64 - 1, 3], dtype=pl.UInt64),
            "i128": pl.Series([2**100, -5], dtype=pl.Int128),
            "f32": pl.Series([1.5, float("nan")], dtype=pl.Float32),
            "dec": pl.Series([Decimal("1.25"), None], dtype=pl.Decimal(10, 2)),
            "cat": pl.Series(["a", None], dtype=pl.Categorical),
            "enum": pl.Series(["lo", "hi"], dtype=pl.Enum(["lo", "hi"])),
            "day": [dt.date(2020, 1, 2), None],
            "ns": pl.Series([dt.datetime(2020, 1, 1, 12), None]).cast(pl.Datetime("ns")),
            "tz": pl.Series([dt.datetime(2020, 1, 1, 12), None]).dt.replace_time_zone("CET"),
            "dur": pl.Series([dt.timedelta(seconds=90), None]),
            "flag": [True, None],
            "text": ["x", None],
            "items": [[1, 2], None],
            "rec": [{"a": 1}, None],
            "raw": [b"\x00", None],
            "none": pl.Series([None, None], dtype=pl.Null),
            "clock": [dt.time(1, 2), None],
        }
    )
    f = pq.PrivateFrame(data, pq.Budget(100))
    assert f.schema == {
        "i8": "int", "u64": "int", "i128": "int", "f32": "float", "dec": "float",
        "cat": "str", "enum": "str", "day": "datetime", "ns": "datetime", "tz": "datetime",
        "dur": "float", "flag": "bool", "text": "str", "items": "any", "rec": "any",
        "raw": "any", "none": "any", "clock": "any",
    }  # fmt: skip
    rows = _rows(f)
    assert pd.isna(rows["u64"][0]) and rows["u64"][1] == 3  # beyond int64: NULL
    assert pd.isna(rows["i128"][0]) and rows["i128"][1] == -5
    assert pd.isna(rows["f32"][1])  # NaN is NULL
    assert rows["cat"][0] == "a" and pd.isna(rows["cat"][1])
    assert list(rows["enum"]) == ["lo", "hi"]
    assert rows["day"][0] == pd.Timestamp("2020-01-02")
    assert rows["tz"][0] == pd.Timestamp("2020-01-01 11:00")  # naive UTC
    assert rows["dur"][0] == 90.0  # seconds
    assert _count(f.where("i8 + 1 = 2 AND dec = 1.25 AND enum = 'lo' AND dur > 60")) == 1
    assert _count(f.where("items IS NULL AND rec IS NULL AND raw IS NULL")) == 1
    assert _count(f.where("none IS NULL")) == 2


# -- exact sums -----------------------------------------------------------------------------------
def test_integer_sums_are_exact_beyond_int64() -> None:
    big = 2**62
    values = [big, big, big, -5, 7, None]
    f = pq.PrivateFrame(pl.DataFrame({"x": values}), pq.Budget(100))
    ex = executor_for(f._plan, f._rel.catalog)
    sums, counts = ex.clamped_sum(f._plan, None, parse_expression("x"), -(2**62), 2**62)
    assert sums[0] == float(3 * big + 2) and counts[0] == 5  # Int128: an Int64 sum wraps
    s1, _, n = ex.lattice_sums(f._plan, None, parse_expression("x"), -(2**62), 2**62)
    d1, _, dn = Lattice.of(-(2**62), 2**62).value_sums([v for v in values if v is not None])
    assert (s1[0], n[0]) == (d1, dn)


def test_float_sums_are_exact_on_the_grid_far_from_zero() -> None:
    rng = np.random.default_rng(3)
    lo, hi = 1e7, 1e7 + 1
    x = lo + rng.random(200_000)
    f = pq.PrivateFrame(pl.DataFrame({"x": x}), pq.Budget(100))
    ex = executor_for(f._plan, f._rel.catalog)
    sums, _ = ex.clamped_sum(f._plan, None, parse_expression("x"), lo, hi)
    grid = SumGrid.of(lo, hi)
    assert sums[0] == grid.total(int(grid.indices(x).sum()))
    s1, s2, n = ex.lattice_sums(f._plan, None, parse_expression("x"), lo, hi, squares=True)
    assert (s1[0], s2[0], n[0]) == Lattice.of(lo, hi).value_sums(x)


_EXTREMES = [
    -math.inf, -1e308, -5e-324, -0.0, 0.0, 5e-324, 0.5, 1.5, 2.5, 1e-300, 3.0, 7.25, 1e308,
    math.inf, math.nan, None,
]


@pytest.mark.parametrize(
    "bounds", [(0.0, 10.0), (-1e-300, 1e-300), (-1e300, 1e300), (2.5, 2.5), (-7.0, 0.125)]
)
def test_lattice_reads_in_one_query_are_the_reference_indices(bounds: tuple[float, float]) -> None:
    """Several lattice reads of one query (each its own working column of indices, without
    the final clamp into [0, K]) give pandas' exact sums, per group, at the extremes."""
    from pinqpy.engines.base import Read

    rng = np.random.default_rng(11)
    x = _EXTREMES + list(rng.normal(0, 4, 300)) + list(rng.choice([0.5, 2.5, -1.5], 100))
    y = [None if v is None else -v for v in x]
    data = {"x": x, "y": y, "g": [i % 3 for i in range(len(x))]}
    frames = [
        pq.PrivateFrame(pl.DataFrame(data, strict=False), pq.Budget(100)),
        pq.PrivateFrame(pd.DataFrame(data).astype({"x": float, "y": float}), pq.Budget(100)),
    ]
    grouping = Grouping(("g",), (0, 1, 2))
    asks = [("x", True), ("y", False), ("x + y", True)]
    polars, pandas = (executor_for(f._plan, f._rel.catalog) for f in frames)
    reads = [
        Read(polars, frames[0]._plan, "moments" if sq else "mean", parse_expression(e), *bounds)
        for e, sq in asks
    ]
    together = polars.read_together(frames[0]._plan, grouping, reads)
    alone = [
        pandas.lattice_sums(frames[1]._plan, grouping, parse_expression(e), *bounds, squares=sq)
        for e, sq in asks
    ]
    got = [[(list(a), list(b), list(n)) for a, b, n in r] for r in (together, alone)]
    assert got[0] == got[1]
    want = [Lattice.of(*bounds).value_sums([v for v in x[g::3] if v is not None]) for g in range(3)]
    assert [tuple(col[g] for col in got[0][0]) for g in range(3)] == want


# -- priorities -----------------------------------------------------------------------------------
_MIXED = pl.DataFrame(
    {
        "u": [1, 1, 1, 1, 1, 1],
        "f": [0.5, 0.5, 0.5, 0.5, 0.5, -0.0],
        "s": ["a", "a", "a", "a", "b", "a"],
        "l": [[1, 2], [1, 3], [1, 2], [1, 2], [1, 2], [1, 2]],
        "r": [{"k": 1}, {"k": 1}, {"k": 2}, {"k": 1}, {"k": 1}, {"k": 1}],
    }
)


def _priorities(df: pl.DataFrame, seed: int) -> list[int]:
    with pq.testing.seed(seed):
        return df.select(row_priority(df.columns).alias("p")).get_column("p").to_list()


def test_priorities_read_every_column_and_are_functions_of_the_row_and_salt() -> None:
    p = _priorities(_MIXED, 1)
    # Rows 0 and 3 are equal; every other row differs from row 0 in one column only (a
    # list item, a struct field, a string, -0.0 for 0.5): each has its own priority.
    assert p[0] == p[3]
    assert len({p[i] for i in (0, 1, 2, 4, 5)}) == 5
    # The same salt gives each row the same priority wherever it is and whatever else is
    # in the frame; another salt reorders them.
    shuffled = _MIXED[[5, 2, 0, 4, 1, 3]]
    assert _priorities(shuffled, 1) == [p[i] for i in (5, 2, 0, 4, 1, 3)]
    assert _priorities(_MIXED.head(2), 1) == p[:2]
    assert _priorities(_MIXED, 2) != p
    other = _priorities(_MIXED, 3)
    assert sorted(range(6), key=lambda i: other[i]) != sorted(range(6), key=lambda i: p[i])


def test_minus_zero_and_zero_get_one_priority() -> None:
    df = pl.DataFrame({"f": [0.0, -0.0], "s": ["x", "x"]})
    a, b = _priorities(df, 7)
    assert a == b


def test_a_truncation_keeps_each_row_under_some_salt() -> None:
    # Rows that differ only in a list column: which is kept depends on the salt, not on
    # the rows' positions.
    df = pl.DataFrame({"u": [1, 1, 1], "l": [[1], [2], [3]]})
    f = pq.PrivateFrame(df, pq.Budget(100), privacy_unit="u").bound_contributions(1)
    kept = set()
    for seed in range(40):
        with pq.testing.seed(seed):
            kept.add(tuple(_rows(f)["l"][0]))
    assert kept == {(1,), (2,), (3,)}


# -- pinqpy's semantics where Polars' own differ --------------------------------------------------
def test_faults_are_null_and_arithmetic_follows_pandas() -> None:
    df = pl.DataFrame({"a": [2**63 - 1, -7, 7, 5], "b": [1, 2, -2, 0], "x": [1e20, -7.5, 7.5, 5.0]})
    f = pq.PrivateFrame(df, pq.Budget(100))
    g = pq.PrivateFrame(df.to_pandas(), pq.Budget(100))
    for expr in ("a + b", "a % b", "a / b", "x % 3.0", "-a", "ABS(a)", "CAST(x AS INT)",
                 "ROUND(x / 3, 2)", "CAST(x AS VARCHAR)", "SQRT(-x)", "LN(b)"):  # fmt: skip
        got = [None if pd.isna(v) else v for v in _rows(f.select(v=expr))["v"]]
        want = [None if pd.isna(v) else v for v in _rows(g.select(v=expr))["v"]]
        assert got == want, expr
    assert _rows(f.select(v="x % 3.0"))["v"][0] == math.fmod(1e20, 3.0)
    # A division by a constant is the correctly rounded quotient (not x * (1/3)).
    xs = np.random.default_rng(0).random(1000) * 1e10
    g = pq.PrivateFrame(pl.DataFrame({"x": xs}), pq.Budget(1))
    assert np.array_equal(_rows(g.select(v="x / 3"))["v"].to_numpy(), xs / 3.0)


def test_like_is_linear_and_exact() -> None:
    text = ["a" * 30_000 + "b", "a" * 8 + "c", "a" * 7 + "c", "a.c", "abc", "A%C", None]
    f = pq.PrivateFrame(pl.DataFrame({"s": text}), pq.Budget(100))
    assert _count(f.where("s LIKE '%a%a%a%a%a%a%a%a%c'")) == 1  # Rust regex: no backtracking
    assert _count(f.where("s LIKE 'a.c'")) == 1 and _count(f.where("s LIKE 'a_c'")) == 2
    assert _count(f.where("s LIKE 'A\\%C'")) == 1


def test_keys_are_canonical_and_null_like_units_are_dropped() -> None:
    df = pl.DataFrame({"u": [1.0, float("nan"), None, 2.0, 2.0], "k": [-0.0, 0.0, 0.0, 1.0, None]})
    f = pq.PrivateFrame(df, pq.Budget(100, delta=1e-3), privacy_unit="u")
    ex = executor_for(f._plan, f._rel.catalog)
    keys, counts = ex.key_counts(f._plan, ("k",))
    assert keys == [0.0, 1.0, None] and list(counts) == [3, 1, 1]
    assert math.copysign(1.0, keys[0]) == 1.0  # +0.0, never -0.0
    # A NaN or NULL unit belongs to no one: bound_contributions drops both rows.
    assert _count(f.bound_contributions(5)) == 3
    bounded = f.bound_contributions(5).where("k IS NULL OR k >= 0")
    assert _count(bounded) == 3


@pytest.mark.parametrize(
    "candidates",
    [
        np.linspace(0.0, 1000.0, 101),
        np.arange(0.0, 200_001.0, 200.0),
        np.array([-3.0, 0.5, 2.0, 9.0]),
    ],
    ids=["float grid", "integer grid", "uneven"],
)
@pytest.mark.parametrize("ints", [False, True])
def test_buckets_are_pandas_buckets(candidates: np.ndarray, ints: bool) -> None:
    rng = np.random.default_rng(5)
    lo, hi = candidates[0] - 10, candidates[-1] + 10
    x = rng.uniform(lo, hi, 5_000)
    x[:200] = rng.choice(candidates, 200)  # values on the candidates themselves
    values = np.round(x).astype(np.int64) if ints else x
    data = pd.DataFrame({"x": values, "k": rng.integers(0, 3, len(values))})
    grouping = Grouping(("k",), (0, 1, 2))
    got, want = [], []
    for engine, out in (("polars", got), ("pandas", want)):
        f = pq.PrivateFrame(data, pq.Budget(1), engine=engine)
        ex = executor_for(f._plan, f._rel.catalog)
        for g in (None, grouping):
            eq, gap = ex.buckets(f._plan, g, parse_expression("x"), candidates)
            out.append((eq.tolist(), gap.tolist()))
    assert got == want


def test_session_sql_over_polars_tables_and_a_polars_public_table() -> None:
    session = pq.Session()
    meta = {"bounds": {"income": (0, 100_000)}, "keys": {"state": ["CA", "NY", "TX"]}}
    session.register("people", PEOPLE, budget=pq.Budget(100), **meta)  # type: ignore[arg-type]
    session.register("same", PEOPLE.to_pandas(), budget=pq.Budget(100), **meta)  # type: ignore[arg-type]
    session.register_public("regions", pl.DataFrame({"state": ["CA", "NY"], "region": ["W", "E"]}))
    assert session.table("people").engine == "polars"
    query = (
        "SELECT state, COUNT(*) AS n, SUM(income) AS total FROM {t} "
        "WHERE age >= 30 GROUP BY state"
    )
    joined = (
        "SELECT r.region, COUNT(*) AS n FROM {t} p JOIN regions r ON p.state = r.state "
        "GROUP BY r.region"
    )
    with pq.testing.no_noise():
        for q in (query, joined):
            got = session.sql(q.format(t="people"), epsilon=1)
            want = session.sql(q.format(t="same"), epsilon=1)
            pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))


def test_a_unit_column_named_like_a_working_column_counts_truncations() -> None:
    df = pl.DataFrame({"n": [1, 1, 1, 2, None], "len": [5, 6, 7, 8, 9]})
    f = pq.PrivateFrame(df, pq.Budget(10), privacy_unit="n")
    assert _count(f.bound_contributions(2)) == 3


def test_categories_are_read_as_text_and_hashed_by_their_text() -> None:
    text = pl.DataFrame({"u": ["b", "a", "b", None, "c"], "v": [1, 2, 3, 4, 5]})
    # The same values, as categories whose codes follow another order of first appearance.
    cats = pl.concat([text.tail(3), text.head(2)]).with_columns(pl.col("u").cast(pl.Categorical))
    enum = text.with_columns(pl.col("u").cast(pl.Enum(["c", "b", "a"])))
    for data in (cats, enum):
        f = pq.PrivateFrame(data, pq.Budget(100), keys={"u": ["a", "b", "z"]})
        assert f.schema["u"] == "str"
        with pq.testing.no_noise():
            assert list(f.partition("u").count(epsilon=1)) == [1, 2, 0]
        assert _count(f.where("u < 'b' OR u LIKE 'c%'")) == 2
        users = pq.PrivateFrame(data, pq.Budget(100), privacy_unit="u")
        assert _count(users.bound_contributions(1)) == 3
        assert len(_rows(users.bound_contributions(1))) == 3
        p_text = dict(zip(text["v"], _priorities(text, 9), strict=True))
        p_cat = dict(zip(data["v"], _priorities_of(data, 9), strict=True))
        assert p_cat == p_text  # a function of the value, not of the category's code


def _priorities_of(df: pl.DataFrame, seed: int) -> list[int]:
    text = [c for c, t in df.schema.items() if isinstance(t, pl.Categorical | pl.Enum)]
    with pq.testing.seed(seed):
        return df.select(row_priority(df.columns, text).alias("p")).get_column("p").to_list()


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_null_like_unit_ids_from_files_belong_to_no_one(tmp_path: Path, kind: str) -> None:
    df = pl.DataFrame({"u": [1.0, float("nan"), None, 2.0, 2.0], "k": [-0.0, 0.0, 0.0, 1.0, None]})
    path = tmp_path / f"units.{kind}"
    df.write_parquet(path) if kind == "parquet" else df.write_csv(path)
    read = pq.PrivateFrame.from_parquet if kind == "parquet" else pq.PrivateFrame.from_csv
    f = read(path, pq.Budget(100), engine="polars", privacy_unit="u")
    assert _count(f.bound_contributions(5)) == 3  # NaN and NULL units are dropped
    assert _count(f.groupby("u").agg(n="COUNT(*)")) == 2
    with pq.testing.no_noise():
        hist = f.bound_contributions(5).partition("k", keys=[0.0, 1.0, None]).count(epsilon=1)
    assert list(hist) == [1, 1, 1]
