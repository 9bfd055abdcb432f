"""The pandas executor's fast paths agree with the plain computations they replace: key
lookups through distinct values, hash counts, one evaluation of a relation per query, and the
NULL handling of nullable columns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pinqpy as pq
from pinqpy.engines.pandas.key_positions import key_positions, listed_key_counts


def columns_and_keys() -> list[tuple[str, pd.Series, tuple[object, ...]]]:
    rng = np.random.default_rng(3)
    ints = pd.Series(rng.integers(-5, 60, 500))
    floats = pd.Series(rng.integers(0, 8, 500).astype(float))
    floats[::7] = np.nan
    text = pd.Series(rng.choice(["a", "b", "c", "dd"], 500))
    text[::11] = None
    cats = text.astype("category")
    bools = pd.Series(rng.random(500) < 0.3)
    nullable = pd.Series(rng.integers(0, 4, 500), dtype="Int64")
    nullable[::5] = pd.NA
    times = pd.Series(pd.to_datetime(["2020-01-01", "2021-06-30", "2022-12-31"] * 166 + [None] * 2))
    mixed = pd.Series([1, True, "1", 1.0, None, "x"] * 50, dtype=object)
    return [
        ("ints", ints, (*range(18, 68), -5, 1000)),
        ("ints as floats", ints, (18.0, 3.0, 2.5)),
        ("floats with NaN", floats, (0.0, 3.0, np.nan, 99.0)),
        ("strings with NULL", text, ("a", "dd", None, "zz")),
        ("categories", cats, ("b", "c", "nope")),
        ("booleans", bools, (True, False)),
        ("nullable ints", nullable, (0, 3, pd.NA)),
        ("datetimes", times, (pd.Timestamp("2021-06-30"), pd.NaT)),
        ("mixed objects", mixed, (1, "1", None)),
    ]


CASES = columns_and_keys()


def lookup_per_row(col: pd.Series, keys: tuple) -> np.ndarray:
    """Each row looked up alone among the non-NULL keys; a NULL row finds the NULL key."""
    null = [i for i, k in enumerate(keys) if pd.isna(k)]
    plain = [i for i, k in enumerate(keys) if not pd.isna(k)]
    index = pd.Index([keys[i] for i in plain], dtype=object)
    out = []
    for v in col.astype(object):
        if pd.isna(v):
            out.append(null[0] if null else -1)
        else:
            j = index.get_indexer([v])[0]
            out.append(plain[j] if j >= 0 else -1)
    return np.array(out)


@pytest.mark.parametrize(("name", "col", "keys"), CASES, ids=[c[0] for c in CASES])
def test_key_positions_match_a_lookup_per_row(name: str, col: pd.Series, keys: tuple) -> None:
    np.testing.assert_array_equal(key_positions(col, keys), lookup_per_row(col, keys))


@pytest.mark.parametrize(("name", "col", "keys"), CASES, ids=[c[0] for c in CASES])
def test_key_counts_match_counting_positions(name: str, col: pd.Series, keys: tuple) -> None:
    pos = lookup_per_row(col, keys)
    want = np.bincount(pos[pos >= 0], minlength=len(keys))
    np.testing.assert_array_equal(listed_key_counts(col, keys), want)


@pytest.mark.parametrize(
    "col",
    [
        pd.Series([1.0, np.nan, np.nan]),
        pd.Series(["a", None, None]),
        pd.Series([1, None, None], dtype="Int64"),
        pd.Series(["a", None, None], dtype="category"),
        pd.Series([1, None, None], dtype=object),
    ],
    ids=["float", "str", "Int64", "category", "object"],
)
def test_a_lone_null_key_counts_the_null_rows(col: pd.Series) -> None:
    df = pd.DataFrame({"k": col})
    frame = pq.PrivateFrame(df, pq.Budget(epsilon=10))
    with pq.testing.no_noise():
        assert int(frame.partition("k", keys=[None])[None].count(epsilon=1)) == 2
        assert int(frame.partition("k", keys=[None]).count(epsilon=1)[None]) == 2


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(-3, 12) | st.none(), max_size=60),
    keys=st.lists(st.integers(-3, 12), unique=True, min_size=1, max_size=8),
)
def test_partition_count_matches_a_python_count(values: list[int | None], keys: list[int]) -> None:
    df = pd.DataFrame({"k": pd.Series(values, dtype="float64"), "x": 1.0})
    frame = pq.PrivateFrame(df, pq.Budget(epsilon=100))
    with pq.testing.no_noise():
        got = frame.where("x > 0").partition("k", keys=keys).count(epsilon=1)
    want = [sum(v == k for v in values) for k in keys]
    assert [int(got[k]) for k in keys] == want


def test_one_query_evaluates_its_relation_once() -> None:
    calls = []

    def adults(df: pd.DataFrame) -> pd.Series:
        calls.append(len(df))
        return df["age"] >= 18

    df = pd.DataFrame({"age": [10, 20, 30, 40], "income": [1.0, 2.0, 3.0, 4.0]})
    frame = pq.PrivateFrame(
        df, pq.Budget(epsilon=10), bounds={"income": (0, 10)}, allow_callables=True
    )
    session = pq.Session()
    session.register("people", frame.where(adults))
    with pq.testing.no_noise():
        out = session.sql("SELECT COUNT(*) AS n, SUM(income) AS s FROM people", epsilon=1)
    assert len(calls) == 1
    assert out["n"].iloc[0] == 3 and out["s"].iloc[0] == pytest.approx(9.0)
    # A second query evaluates afresh: nothing is kept between queries.
    with pq.testing.no_noise():
        session.sql("SELECT COUNT(*) AS n FROM people", epsilon=1)
    assert len(calls) == 2


def test_nullable_integers_skip_their_nulls_in_sums_and_means() -> None:
    df = pd.DataFrame({"v": pd.array([1, None, 3, None, 5], dtype="Int64")})
    frame = pq.PrivateFrame(df, pq.Budget(epsilon=10), bounds={"v": (0, 10)})
    with pq.testing.no_noise():
        assert float(frame.sum("v", epsilon=1)) == pytest.approx(9.0)
        assert float(frame.mean("v", epsilon=1)) == pytest.approx(3.0)
        grouped = frame.partition("v", keys=[1, 3]).sum("v", epsilon=1)
    assert [float(grouped[k]) for k in (1, 3)] == pytest.approx([1.0, 3.0])


def test_select_after_where_copies_only_used_columns_and_keeps_rows() -> None:
    df = pd.DataFrame({"a": [1, 2, 3, 4], "b": ["w", "x", "y", "z"], "c": [0.5] * 4})
    frame = pq.PrivateFrame(df, pq.Budget(epsilon=10))
    picked = frame.where("a >= 2").select(a2="a * 2", one="1")
    with pq.testing.no_noise():
        assert int(picked.count(epsilon=1)) == 3
        assert float(picked.sum("a2", epsilon=1, bounds=(0, 100))) == pytest.approx(18.0)
        assert float(picked.sum("one", epsilon=1, bounds=(0, 1))) == pytest.approx(3.0)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(-(2**40), 2**40), max_size=60),
    lo=st.integers(-(2**41), 2**41),
    width=st.integers(0, 2**42),
    masked=st.booleans(),
)
def test_integer_sums_equal_the_float_sum(
    values: list[int], lo: int, width: int, masked: bool
) -> None:
    """A stored int64 column with integer bounds is summed as integers: the same number as
    the exact sum of the same clipped values; a bound too large for int64 sums falls back to
    the SUM's fixed-point grid (pinqpy.core.lattice.SumGrid), also summed exactly."""
    from pinqpy.core.lattice import SumGrid
    from pinqpy.engines.pandas.executor import PandasExecutor
    from pinqpy.expr.ast import Column

    df = pd.DataFrame({"v": np.array(values, dtype=np.int64), "k": np.arange(len(values)) % 3})
    frame = pq.PrivateFrame(df, pq.Budget(1))
    if masked:
        frame = frame.where("k <> 1")
    plan, ex = frame._plan, PandasExecutor().bound(frame._rel.catalog)
    rows = df[df["k"] != 1] if masked else df
    for hi in (lo + width, float(2**60)):
        got = ex.clamped_sum(plan, None, Column("v"), lo, hi)
        clipped = rows["v"].to_numpy(dtype=float).clip(lo, hi)
        if max(len(rows), 1) * max(abs(lo), abs(hi)) < 2**63:
            want = float(sum(int(v) for v in clipped))  # as integers, exactly
        else:
            grid = SumGrid.of(lo, hi)  # truncated to multiples of q, summed exactly
            want = float(sum(int(k) for k in grid.indices(clipped)) * grid.step)
        assert got[0][0] == want
        assert got[1][0] == len(rows)
