"""The pandas engine's truncation priorities (``pinqpy.engines.pandas.priorities``).

A truncation keeps, per key, the rows first in the order of (primary, secondary): a salted
hash of the row's typed columns, then a salted hash of all its values. The order must be a
function of each row's own values and the salt, never of other rows or positions, including
when primaries tie (rows that differ only in text) and whatever pandas type holds a number.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import pinqpy as pq
from pinqpy.engines.pandas.priorities import RowPriorities, _typed_word, keep_lowest
from pinqpy.engines.registry import executor_for


def kept_texts(df: pd.DataFrame, seed: int, limit: int = 3) -> set[str]:
    """The ``t`` values of unit 0's rows that ``bound_contributions(limit)`` keeps."""
    f = pq.PrivateFrame(df, pq.Budget(epsilon=10), privacy_unit="unit")
    t = f.bound_contributions(limit)
    with pq.testing.seed(seed):
        out = executor_for(t._plan, t._rel.catalog).rows(t._plan)
    return set(out.loc[out["unit"] == 0, "t"])


def one_unit_of_text_rows() -> pd.DataFrame:
    """Unit 0's ten rows agree in every typed column and differ only in text, so their
    primaries tie and the secondary alone orders them."""
    return pd.DataFrame({"unit": [0] * 10, "x": [7] * 10, "t": [f"r{i}" for i in range(10)]})


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_rows_tied_on_typed_columns_are_chosen_by_their_own_values(seed: int) -> None:
    base = one_unit_of_text_rows()
    kept = kept_texts(base, seed)
    assert len(kept) == 3
    rng = np.random.default_rng(seed)
    others = pd.DataFrame(
        {
            "unit": rng.integers(1, 50, 400),
            "x": [7] * 400,
            "t": [f"o{i}" for i in rng.integers(0, 5, 400)],
        }
    )
    for trial in range(5):
        # Other units' rows arriving, and any row order: unit 0 keeps the same rows.
        mixed = pd.concat([base, others.iloc[: 80 * trial]], ignore_index=True)
        mixed = mixed.sample(frac=1.0, random_state=trial).reset_index(drop=True)
        assert kept_texts(mixed, seed) == kept
    # And the choice does change with the salt (three of ten rows, four salts).
    assert len({frozenset(kept_texts(base, s)) for s in (1, 2, 3, 4)}) > 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rows_tied_but_for_lists_are_chosen_by_their_own_contents(seed: int) -> None:
    # Unit 0's rows differ only in a list column (which pandas cannot hash): the secondary
    # hashes the lists' contents, so the rows kept do not depend on positions or on other
    # units' rows, as a partition's fixed salts need (pinqpy.plan.salts).
    values = [[i, i] for i in range(4)] + [{"k": i} for i in range(4)] + [[[i]] for i in range(4)]
    base = pd.DataFrame({"unit": [0] * 12, "x": [7] * 12, "t": values})
    kept = kept_lists(base, seed)
    assert len(kept) == 3
    others = pd.DataFrame({"unit": range(1, 41), "x": [7] * 40, "t": [[k] for k in range(40)]})
    for trial in range(4):
        mixed = pd.concat([base, others.iloc[: 10 * trial]], ignore_index=True)
        mixed = mixed.sample(frac=1.0, random_state=trial).reset_index(drop=True)
        assert kept_lists(mixed, seed) == kept
    assert len({frozenset(kept_lists(base, s)) for s in (1, 2, 3, 4)}) > 1


def kept_lists(df: pd.DataFrame, seed: int) -> set[str]:
    f = pq.PrivateFrame(df, pq.Budget(epsilon=10), privacy_unit="unit")
    t = f.bound_contributions(3)
    with pq.testing.seed(seed):
        out = executor_for(t._plan, t._rel.catalog).rows(t._plan)
    return {repr(v) for v in out.loc[out["unit"] == 0, "t"]}


def test_the_text_of_a_value_tells_contents_apart() -> None:
    from pinqpy.engines.pandas.priorities import _text

    assert _text([1, 2]) == _text([1, 2]) and _text([1, 2]) != _text([2, 1])
    assert _text(["a,b"]) != _text(["a", "b"]) and _text([1]) != _text((1,))
    assert _text({"a": 1}) != _text({"a": 2}) and _text({1, 2}) == _text({2, 1})
    assert _text(np.array([1.5, 2.0])) != _text(np.array([1.5, 2.5]))
    assert _text([1.0]) != _text([1]) and _text(["1"]) != _text([1])


class _Given(RowPriorities):
    """Priorities chosen by the test: ``primary`` as given, ``secondary`` a row's label."""

    def __init__(self, primary: np.ndarray, secondary: np.ndarray) -> None:
        self.primary = primary.astype(np.uint64)
        self._secondary = secondary.astype(np.uint64)
        self.asked: list[int] = []

    def secondary(self, rows: np.ndarray) -> np.ndarray:
        self.asked.extend(rows.tolist())
        return self._secondary[rows]


def test_ties_in_the_packed_key_are_ordered_by_the_full_primary_then_the_secondary() -> None:
    codes = np.array([0, 0, 0, 0, 1, 1])
    # Rows 0 and 1 differ only in the low bit, which the packed key drops (as do rows 4
    # and 5); rows 2 and 3 have equal primaries and differ in the secondary.
    primary = np.array([(5 << 40) + 1, 5 << 40, 9 << 40, 9 << 40, 1, 2])
    secondary = np.array([0, 0, 8, 3, 0, 0])
    for order in (np.arange(6), np.array([1, 0, 3, 2, 5, 4])):
        p = _Given(primary[order], secondary[order])
        keep = keep_lowest(codes[order], p, 3)
        kept_rows = set(order[keep].tolist())
        assert kept_rows == {0, 1, 3, 4, 5}  # row 3's secondary is below row 2's
        # Only the rows tied on the full primary are hashed whole (2 and 3, wherever they are).
        assert sorted(order[p.asked].tolist()) == [2, 3]


def test_no_ties_hash_no_row_whole() -> None:
    p = _Given(np.array([3, 1, 2, 4]) << 40, np.zeros(4))
    assert keep_lowest(np.array([0, 0, 0, 1]), p, 1).tolist() == [1, 3]
    assert p.asked == []


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (pd.Series([1, 2, 3]), pd.Series([1, 2, 3], dtype="Int64")),
        (pd.Series([1, 2, 3]), pd.Series([1, 2, 3], dtype=pd.ArrowDtype(pa.int64()))),
        (pd.Series([True, False]), pd.Series([True, False], dtype="boolean")),
        (pd.Series([0.5, np.nan]), pd.Series([0.5, None], dtype="Float64")),
        (pd.Series([0.0, 1.5]), pd.Series([-0.0, 1.5])),
        (pd.Series([1, 2], dtype="uint8"), pd.Series([1, 2], dtype="int64")),
    ],
)
def test_a_typed_value_gives_one_word_whichever_pandas_type_holds_it(
    a: pd.Series, b: pd.Series
) -> None:
    assert _typed_word(a).tolist() == _typed_word(b).tolist()


def test_nulls_are_one_word_and_text_is_left_to_the_secondary() -> None:
    ints = _typed_word(pd.Series([1, None], dtype="Int64"))
    floats = _typed_word(pd.Series([1.0, np.nan]))
    assert ints[1] == floats[1]
    assert _typed_word(pd.Series(["a", "b"])) is None
    assert _typed_word(pd.Series(["a", "b"], dtype="category")) is None
    assert _typed_word(pd.Series([1, 2], dtype="category")) is None


def test_the_primary_reads_typed_columns_and_the_salt_only() -> None:
    df = pd.DataFrame({"a": [1, 2, 1], "t": ["x", "y", "z"]})
    with pq.testing.seed(5):
        p = RowPriorities(df)
    with pq.testing.seed(5):
        q = RowPriorities(df.iloc[[2, 0]].reset_index(drop=True))
    # Rows 0 and 2 agree on every typed column: equal primaries, here and in another frame.
    assert p.primary[0] == p.primary[2] == q.primary[0] == q.primary[1]
    assert p.primary[0] != p.primary[1]
    with pq.testing.seed(6):
        assert RowPriorities(df).primary[0] != p.primary[0]
