"""Keys and truncation, the same on every engine.

- Truncation (``bound_contributions``, bounded joins) is random for every column type: the
  salt keys the priority of numeric rows too, and a row's priority depends on its own values
  and the salt only.
- NULL-like keys (None, NaN, ``pd.NA``, ``NaT``) are one key when rows are matched to
  partition parts and to grouped releases; a key matches the values equal to it under the
  column's type (``True`` and ``1.0`` find 1 in an integer column).
- Released keys (private key selection) are canonical: ``+0.0``, one NULL (None), the Python
  type of the column's type, counts of equal keys merged.
- Rows whose privacy unit is NULL belong to no known person: ``bound_contributions`` and a
  groupby on exactly the unit drop them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pinqpy as pq
from pinqpy.engines.base import canonical_key, canonical_key_counts, column_key_rows
from pinqpy.engines.registry import default_engine, executor_for
from pinqpy.errors import PinqError
from pinqpy.plan import meta
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.meta import check_keys


def frame(df: pd.DataFrame, **kwargs: object) -> pq.PrivateFrame:
    """A frame over ``df``. pandas reads an object column of text as it is (every NULL
    spelling in place); DuckDB and Spark hold one type per column, so there such a column is
    declared ``str``, as a curator would."""
    if default_engine() != "pandas" and "schema" not in kwargs:
        text = {c: "str" for c in df.columns if df[c].dtype == object}
        if text:
            kwargs["schema"] = text
    return pq.PrivateFrame(df, pq.Budget(epsilon=10_000, delta=0.5), **kwargs)  # type: ignore[arg-type]


def rows(f: pq.PrivateFrame) -> pd.DataFrame:
    """The rows of a frame's plan (test-only executor hook)."""
    return executor_for(f._plan, f._rel.catalog).rows(f._plan)


def counts(f: pq.PrivateFrame, columns: tuple[str, ...], keys: tuple) -> list[int]:
    """Exact counts per key of a grouping, as a grouped release reads them."""
    ex = executor_for(f._plan, f._rel.catalog)
    return ex.count(f._plan, Grouping(columns, keys)).tolist()


# -- 1. truncation is random for numeric rows -------------------------------------------------
def numeric_people(units: int = 100, per_unit: int = 8) -> pd.DataFrame:
    n = units * per_unit
    return pd.DataFrame(
        {
            "unit": np.repeat(np.arange(units), per_unit),
            "v": np.arange(n, dtype=np.int64),
            "w": np.arange(n, dtype=np.float64) / 4,
        }
    )


def kept(f: pq.PrivateFrame, seed: int) -> frozenset[int]:
    with pq.testing.seed(seed):
        return frozenset(rows(f)["v"].tolist())


def test_seeds_change_which_numeric_rows_bound_contributions_keeps(engine: str) -> None:
    f = frame(numeric_people(), privacy_unit="unit").bound_contributions(1)
    picks = [kept(f, s) for s in (1, 2, 3)]
    for p in picks:
        assert len(p) == 100  # one row per unit
    # With a salted priority each unit keeps each of its 8 rows with probability 1/8, apart
    # from the other units, so two salts keep the same 100 rows with probability 8**-100. A
    # priority that ignored the salt (as hash_pandas_object does for numbers) keeps the same
    # rows every time.
    assert picks[0] != picks[1] and picks[1] != picks[2] and picks[0] != picks[2]
    # The same salt keeps the same rows.
    assert kept(f, 1) == picks[0]


def test_seeds_change_which_numeric_rows_a_bounded_join_keeps(engine: str) -> None:
    left = frame(numeric_people().rename(columns={"unit": "k"}))
    right = frame(pd.DataFrame({"k": np.arange(100), "z": np.arange(100) * 2.0}))
    joined = left.join(right, on="k", max_rows_per_key=(2, 1))
    picks = [kept(joined, s) for s in (1, 2)]
    assert len(picks[0]) == len(picks[1]) == 200
    # Each key keeps 2 of its 8 rows, a uniformly random pair (28 pairs) per salt: the same
    # 100 pairs twice has probability 28**-100.
    assert picks[0] != picks[1]


def test_a_units_kept_rows_do_not_depend_on_other_units(engine: str) -> None:
    df = numeric_people(units=60)
    more = pd.concat([df, numeric_people(units=90).iloc[60 * 8 :]], ignore_index=True)
    small = kept(frame(df, privacy_unit="unit").bound_contributions(2), 11)
    large = kept(frame(more, privacy_unit="unit").bound_contributions(2), 11)
    assert len(small) == 120 and len(large) == 180
    assert {v for v in large if v < 60 * 8} == small


# -- 2. NULL-like keys are one key --------------------------------------------------------------
NA_TEXT = pd.DataFrame({"k": pd.Series(["a", None, np.nan, pd.NA, "b", None], dtype=object)})
NA_FLOAT = pd.DataFrame({"k": [1.0, np.nan, None, -0.0, 0.0, 2.5]})


@pytest.mark.parametrize("null", [None, np.nan, pd.NA, pd.NaT, float("nan")])
def test_every_null_spelling_of_a_key_matches_every_null_row(engine: str, null: object) -> None:
    f = frame(NA_TEXT)
    assert counts(f, ("k",), (null, "a")) == [4, 1]
    g = frame(NA_FLOAT)
    assert counts(g, ("k",), (null, 0.0)) == [2, 2]


def test_a_null_part_holds_the_rows_a_grouped_release_gives_null(engine: str) -> None:
    f = frame(NA_TEXT)
    with pq.testing.no_noise():
        parts = f.partition("k", keys=[None, "a", "b"])
        grouped = [int(x) for x in parts.count(epsilon=1).tolist()]
        each = [int(parts[k].count(epsilon=1)) for k in (None, "a", "b")]
        selected = f.select_keys("k", epsilon=1, delta=1e-3)
    assert grouped == each == [4, 1, 1]
    assert selected == ["a", "b", None]


def test_integer_and_boolean_keys_match_under_the_column_type(engine: str) -> None:
    f = frame(
        pd.DataFrame(
            {
                "i": [1, 1, 2, 0, 0, 1],
                "x": [1.0, 0.5, 1.0, 0.0, -0.0, 2.0],
                "b": [True, False, True, True, False, False],
            }
        )
    )
    for key, want in ((1, 3), (1.0, 3), (True, 3), (np.int64(1), 3), (1.5, 0), ("1", 0)):
        assert counts(f, ("i",), (key,)) == [want], key
    for key, want in ((1, 2), (1.0, 2), (True, 2), (0, 2), (-0.0, 2), ("1", 0)):
        assert counts(f, ("x",), (key,)) == [want], key
    for key, want in ((True, 3), (1, 3), (1.0, 3), (np.bool_(False), 3), (0, 3), (2, 0)):
        assert counts(f, ("b",), (key,)) == [want], key
    # Keys equal under the column's type count the rows once, for the first of them.
    assert counts(f, ("i",), (1, True, 1.0)) == [3, 0, 0]
    with pq.testing.no_noise():
        assert int(f.partition("i", keys=[1.0])[1.0].count(epsilon=1)) == 3


def test_categorical_keys_and_the_categorical_null(engine: str) -> None:
    df = pd.DataFrame({"c": pd.Categorical(["x", None, "y", "x", None, "x"])})
    f = frame(df)
    assert counts(f, ("c",), (None, "x", "y", "z")) == [2, 3, 1, 0]
    assert counts(f, ("c",), (np.nan, "y")) == [2, 1]
    with pq.testing.no_noise():
        parts = f.partition("c", keys=[None, "x"])
        assert [int(parts[k].count(epsilon=1)) for k in (None, "x")] == [2, 3]
        assert f.select_keys("c", epsilon=1, delta=1e-3) == ["x", "y", None]


def test_multi_column_keys_with_nulls(engine: str) -> None:
    df = pd.DataFrame(
        {
            "a": pd.Series(["x", None, np.nan, "x", None, "x"], dtype=object),
            "b": [1.0, np.nan, None, None, 2.0, 1.0],
        }
    )
    f = frame(df)
    keys = (("x", 1.0), (None, None), ("x", None), (None, 2.0), ("y", 1.0))
    assert counts(f, ("a", "b"), keys) == [2, 2, 1, 1, 0]
    assert counts(f, ("a", "b"), ((pd.NA, np.nan), ("x", 1))) == [2, 2]
    with pq.testing.no_noise():
        parts = f.partition(["a", "b"], keys=list(keys[:4]))
        assert [int(x) for x in parts.count(epsilon=1).tolist()] == [2, 2, 1, 1]
        assert int(parts[(None, None)].count(epsilon=1)) == 2
        got = f.select_keys(["a", "b"], epsilon=1, delta=1e-3)
    assert got == [("x", 1.0), ("x", None), (None, 2.0), (None, None)]


# -- 3. released keys are canonical ------------------------------------------------------------
def test_released_keys_are_canonical(engine: str) -> None:
    df = pd.DataFrame(
        {
            "x": [-0.0, 0.0, -0.0, 1.5, np.nan, None],
            "i": [3, 1, 3, 1, 2, 2],
            "b": [True, False, True, True, False, False],
            "s": ["p", "q", "p", "q", "p", "q"],
        }
    )
    f = frame(df)
    with pq.testing.no_noise():
        xs = f.select_keys("x", epsilon=1, delta=1e-3)
        assert xs == [0.0, 1.5, None]
        assert math.copysign(1.0, xs[0]) == 1.0  # never -0.0, whichever row came first
        assert [type(k) for k in xs[:2]] == [float, float]
        ints = f.select_keys("i", epsilon=1, delta=1e-3)
        assert ints == [1, 2, 3] and all(type(k) is int for k in ints)
        bools = f.select_keys("b", epsilon=1, delta=1e-3)
        assert bools == [False, True] and all(type(k) is bool for k in bools)
        pairs = f.select_keys(["s", "i"], epsilon=1, delta=1e-3)
        assert pairs == [("p", 2), ("p", 3), ("q", 1), ("q", 2)]
        assert all(type(s) is str and type(i) is int for s, i in pairs)
    keys, n = executor_for(f._plan, f._rel.catalog).key_counts(f._plan, ("x",))
    assert keys == [0.0, 1.5, None] and n.tolist() == [3, 1, 2]


def test_released_keys_do_not_depend_on_row_order(engine: str) -> None:
    df = pd.DataFrame({"x": [-0.0, 0.0, 2.0, -0.0], "y": [0.0, -0.0, 2.0, 0.0]})
    f = frame(pd.concat([df, df[::-1]], ignore_index=True))
    with pq.testing.no_noise():
        a = f.select_keys("x", epsilon=1, delta=1e-3)
        b = f.select_keys("y", epsilon=1, delta=1e-3)
    assert a == b == [0.0, 2.0]
    assert [math.copysign(1.0, v) for v in a + b] == [1.0] * 4


def test_sql_group_by_with_private_keys_releases_canonical_keys(engine: str) -> None:
    session = pq.Session()
    df = pd.DataFrame({"x": [-0.0, 0.0, -0.0, 1.5, 1.5]})
    session.register("t", df, budget=pq.Budget(epsilon=100, delta=0.5))
    with pq.testing.no_noise():
        out = session.sql("SELECT x, COUNT(*) AS n FROM t GROUP BY x", epsilon=1, delta=1e-3)
    got = sorted(zip(out["x"].tolist(), out["n"].tolist(), strict=True))
    assert got == [(0.0, 3), (1.5, 2)]
    assert all(math.copysign(1.0, x) == 1.0 for x, _ in got)


def test_untyped_columns_release_one_spelling_per_number() -> None:
    # pandas only: DuckDB and Spark read an object column of mixed types as text.
    col = pd.Series([True, 1, 1.0, 2.5, None, np.nan, "1"], dtype=object)
    for values in (col, col[::-1]):
        f = frame(pd.DataFrame({"k": values.reset_index(drop=True)}))
        keys, n = executor_for(f._plan, f._rel.catalog).key_counts(f._plan, ("k",))
        assert keys == [1, 2.5, "1", None] and n.tolist() == [3, 1, 1, 2]
        assert type(keys[0]) is int


def test_canonical_key_helper() -> None:
    assert canonical_key(np.float64(-0.0), "float") == 0.0
    assert math.copysign(1.0, canonical_key(-0.0, "float")) == 1.0  # type: ignore[arg-type]
    assert type(canonical_key(np.int64(4), "int")) is int
    assert canonical_key(True, "int") == 1 and type(canonical_key(True, "int")) is int
    assert canonical_key(1, "bool") is True
    assert all(canonical_key(v, "str") is None for v in (None, np.nan, pd.NA, pd.NaT))
    assert canonical_key(np.datetime64("NaT"), "datetime") is None
    assert canonical_key(True, "any") == 1 and type(canonical_key(True, "any")) is int
    assert type(canonical_key(2.0, "any")) is int and canonical_key(2.5, "any") == 2.5
    keys, n = canonical_key_counts(
        [(np.float64(-0.0), None), (0.0, np.nan), (1.0, "a")], np.array([1, 2, 3]), ["float", "str"]
    )
    assert keys == [(0.0, None), (1.0, "a")] and n.tolist() == [3, 3]


_PLAIN_KEY = st.one_of(
    st.text(max_size=3),  # lone surrogates too: each is U+FFFD, so two keys may become one
    st.integers(-(2**70), 2**70),
    st.sampled_from([True, False, None, float("nan"), 1.0, -0.0, np.int64(3), pd.NA]),
)


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(_PLAIN_KEY, max_size=8), kind=st.sampled_from(["str", "int", "any"]))
def test_plain_keys_take_the_canonical_spelling_of_the_general_path(
    keys: list[object], kind: str
) -> None:
    """check_keys and column_key_rows skip the call per key for exact str or int keys: what
    they give is what the key-by-key path gives, which every other list takes."""
    plain = meta._plain_keys(keys, kind)  # type: ignore[arg-type]
    if plain is not None:
        assert kind in ("str", "int")
        assert plain == meta._checked_keys(keys, ("k",), {"k": kind})  # type: ignore[dict-item]
    if kind in ("str", "int"):
        # An object() key matches no typed column: it sends the list down the general path
        # and adds no row.
        general = column_key_rows([kind], [*keys, object()], True)
        assert column_key_rows([kind], keys, True) == general


def test_plain_keys_are_still_checked_for_repeats() -> None:
    with pytest.raises(PinqError, match="must not repeat"):
        check_keys(["a\ud800", "a\ufffd"], ("k",), {"k": "str"})  # one key once read
    with pytest.raises(PinqError, match="must not be empty"):
        check_keys([], ("k",), {"k": "int"})
    assert check_keys(["a\ud800"], ("k",), {"k": "str"}) == ("a\ufffd",)


# -- 4. rows with a NULL privacy unit ------------------------------------------------------------
def test_rows_with_a_null_unit_are_dropped_by_bound_contributions(engine: str) -> None:
    df = pd.DataFrame(
        {"unit": [1.0, 1.0, None, np.nan, 2.0, None, 3.0], "v": [1, 2, 3, 4, 5, 6, 7]}
    )
    f = frame(df, privacy_unit="unit")
    with pq.testing.no_noise():
        assert int(f.bound_contributions(10).count(epsilon=1)) == 4
        assert int(f.bound_contributions(1).count(epsilon=1)) == 3
    texts = pd.DataFrame({"unit": pd.Series(["a", None, pd.NA, "b", np.nan], dtype=object)})
    with pq.testing.no_noise():
        g = frame(texts, privacy_unit="unit")
        assert int(g.bound_contributions(5).count(epsilon=1)) == 2


def test_rows_with_a_null_unit_are_dropped_by_a_groupby_on_the_unit(engine: str) -> None:
    df = pd.DataFrame(
        {"unit": pd.Series(["a", None, "a", np.nan, "b", None], dtype=object), "v": range(6)}
    )
    f = frame(df, privacy_unit="unit", bounds={"v": (0, 10)})
    per_unit = f.groupby("unit").agg(n="COUNT(*)", total="SUM(v)")
    with pq.testing.no_noise():
        assert int(per_unit.count(epsilon=1)) == 2  # units a and b; no NULL "person"
        assert int(per_unit.sum("n", epsilon=1, bounds=(0, 10))) == 3
    # Without a privacy unit, a groupby keeps the NULL keys as one group of their own.
    rowwise = frame(df).groupby("unit").agg(n="COUNT(*)")
    with pq.testing.no_noise():
        assert int(rowwise.count(epsilon=1)) == 3


def test_select_keys_max_groups_drops_rows_with_a_null_unit(engine: str) -> None:
    df = pd.DataFrame({"unit": [1.0, None, None, np.nan, 2.0], "k": ["a", "a", "b", "c", "a"]})
    f = frame(df, privacy_unit="unit")
    with pq.testing.no_noise():
        # b and c are held only by rows of no known person: they count nobody.
        assert f.select_keys("k", epsilon=1, delta=1e-3, max_groups=5) == ["a"]


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=12),
    dtype=st.sampled_from(["int64", "int32", "uint64", "int8"]),
    as_index=st.booleans(),
)
def test_integer_key_arrays_take_the_canonical_spelling_of_the_general_path(
    values: list[int], dtype: str, as_index: bool
) -> None:
    """Found keys of an integer column handed over as a numpy or pandas array skip the call
    per key: Python ints in value order, repeats merged, as the key-by-key path gives."""
    info = np.iinfo(dtype)
    arr = np.array([min(max(v, info.min), info.max) for v in values], dtype=dtype)
    keys = pd.Index(arr) if as_index else arr
    counts = np.arange(1, len(arr) + 1, dtype=np.int64)
    fast = canonical_key_counts(keys, counts, ["int"])
    general = canonical_key_counts([v.item() for v in arr], counts, ["int"])
    assert fast[0] == general[0] and fast[1].tolist() == general[1].tolist()
    assert all(type(k) is int for k in fast[0])


def test_nullable_integer_keys_take_the_general_path() -> None:
    keys = pd.Index([3, None, 3], dtype="Int64")
    got = canonical_key_counts(keys, np.array([1, 2, 4]), ["int"])
    assert got[0] == [3, None] and got[1].tolist() == [5, 2]
