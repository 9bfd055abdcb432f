"""Wrap-time text cleaning (pinqpy.engines.text) column at a time equals the value-by-value
reference on every shape of object data: nested containers of every kind and depth, NULL-like
values, subclasses, object and numeric arrays; and what needs no change is kept as it is."""

from __future__ import annotations

from collections import namedtuple
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.engines.text import clean_text, clean_value
from pinqpy.expr.types import valid_text

Pair = namedtuple("Pair", "a b")


class Tag(str):
    pass


class Items(list):  # type: ignore[type-arg]
    pass


def reference(x: object, depth: int = 0) -> object:
    """The per-value rule, written out plainly: strings through valid_text; lists, tuples,
    sets, frozensets and object arrays item by item, 20 levels deep; a container is kept when
    none of its items changes."""
    if isinstance(x, str):
        return valid_text(x)
    if depth > 20:
        return x
    if isinstance(x, list | tuple | set | frozenset):
        items = [reference(v, depth + 1) for v in x]
        if all(a is b for a, b in zip(items, x, strict=True)):
            return x
        if isinstance(x, list):
            return items
        try:
            return type(x)(items)
        except Exception:
            return tuple(items)
    if isinstance(x, np.ndarray) and x.dtype == object:
        fixed = [reference(v, depth + 1) for v in x.ravel()]
        if all(a is b for a, b in zip(fixed, x.ravel(), strict=True)):
            return x
        out = np.empty(x.shape, dtype=object)
        out.ravel()[:] = fixed
        return out
    return x


def nested(depth: int, leaf: object) -> object:
    x = leaf
    for _ in range(depth):
        x = [x]
    return x


def same(a: Any, b: Any) -> bool:
    """Equal values of equal types (arrays by content, NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        pairs = zip(a.ravel(), b.ravel(), strict=True) if a.shape == b.shape else None
        return pairs is not None and all(same(x, y) for x, y in pairs)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and np.isnan(a):
        return bool(np.isnan(b))
    return bool(a == b) if not (a is pd.NA or a is pd.NaT) else a is b


VALUES: list[Any] = [
    "plain",
    "é",
    "x\ud800",
    "\ud83d\ude00",
    Tag("t\udc00"),
    Tag("fine"),
    None,
    np.nan,
    pd.NA,
    pd.NaT,
    3,
    2.5,
    b"\xff",
    ["a", "b\ud800", [1, ["\udfff"]]],
    ("ok", "z\ud800"),
    Pair("a\ud800", 2),
    {"s\ud800", "t"},
    frozenset({"u\ud800"}),
    Items(["v\ud800"]),
    Items(["clean"]),
    [],
    [[], ()],
    {"key\ud800": "value\ud800"},  # dicts are not looked into
    np.array(["w\ud800", 1], dtype=object),
    np.array([["a", "b"], ["c\ud800", "d"]], dtype=object),
    np.array([1.5, 2.5]),
    nested(20, "deep\ud800"),  # the string at depth 20: cleaned
    nested(22, "deeper\ud800"),  # beyond the depth: kept
    nested(21, "edge\ud800"),
    [np.array(["x\ud800"], dtype=object), "y"],
]


@pytest.mark.parametrize("i", range(len(VALUES)))
def test_one_value_in_a_column_is_cleaned_as_the_reference(i: int) -> None:
    v = VALUES[i]
    col = pd.Series([None, v, "pad"], dtype=object)
    got = clean_text(pd.DataFrame({"c": col}))["c"].iloc[1]
    want = reference(v)
    assert same(got, want)
    assert (got is v) == (want is v)  # kept exactly when the reference keeps it
    assert same(clean_value(v), want)


def test_every_value_together_and_shuffled() -> None:
    rng = np.random.default_rng(0)
    picks = rng.integers(0, len(VALUES), 2000)
    col = pd.Series([VALUES[j] for j in picks], dtype=object)
    out = clean_text(pd.DataFrame({"c": col}))["c"]
    for got, v in zip(out.tolist(), col.tolist(), strict=True):
        assert same(got, reference(v))


def test_one_long_list_is_checked_in_one_flat_pass() -> None:
    items: list[object] = list(range(200_000))
    items[123_456] = "bad\ud800"
    df = pd.DataFrame({"l": pd.Series([items, ["fine"]], dtype=object)})
    out = clean_text(df)
    assert out["l"].iloc[0][123_456] == "bad\ufffd" and out["l"].iloc[0][:5] == [0, 1, 2, 3, 4]
    assert out["l"].iloc[1] is df["l"].iloc[1]
    clean = pd.DataFrame({"l": pd.Series([list(range(200_000))], dtype=object)})
    assert clean_text(clean) is clean


def test_a_container_whose_len_lies_is_cleaned_one_by_one() -> None:
    class Liar(list):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 0

    v = Liar(["q\ud800"])
    got = clean_text(pd.DataFrame({"c": pd.Series([v, ["r"]], dtype=object)}))["c"].iloc[0]
    assert got == ["q\ufffd"]


def test_categories_to_clean_make_an_object_column() -> None:
    cats = pd.CategoricalDtype(pd.Index(["a\ud800", "b"], dtype=object))
    s = pd.Series(pd.Categorical.from_codes([0, 1, 0], dtype=cats))
    out = clean_text(pd.DataFrame({"c": s}))["c"]
    assert out.dtype == object and out.tolist() == ["a\ufffd", "b", "a\ufffd"]
    two = pd.CategoricalDtype(pd.Index(["b", "z\ud800"], dtype=object))
    unused = pd.Series(pd.Categorical.from_codes([0], dtype=two))
    assert clean_text(pd.DataFrame({"c": unused}))["c"].tolist() == ["b"]


def test_a_wrapped_list_column_explodes_to_clean_text() -> None:
    df = pd.DataFrame({"l": pd.Series([["a\ud800", "b"], ["a\ufffd"]], dtype=object)})
    f = pq.PrivateFrame(df, pq.Budget(epsilon=10))
    with pq.testing.no_noise():
        got = f.explode("l", max_items=2).partition("l", keys=["a\ufffd", "b"]).count(epsilon=1)
    assert [int(v) for v in got.to_numpy()] == [2, 1]
