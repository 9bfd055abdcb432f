"""Text keys give the same answers whatever pandas stores them as: pandas 3's default Arrow
strings, Python-storage strings, object columns and categoricals (with unused categories),
on the fast paths each storage takes (one hash count, codes, Arrow lookups)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq

VALUES = ["Oslo", "Bergen", None, "Tromsø", "Oslo", "", "Oslo", "Bergen", None, "Ålesund"] * 30
KEYS = ["Oslo", "Tromsø", None, "Bergen", "Hamar", "oslo", ""]


def _column(kind: str) -> pd.Series:
    if kind == "arrow":
        return pd.Series(VALUES, dtype="str")
    if kind == "python":
        return pd.Series(VALUES, dtype="string[python]")
    if kind == "object":
        return pd.Series(VALUES, dtype=object)
    # a categorical with an unused category, and categories in their own order
    cats = ["Ålesund", "Hamar", "Bergen", "Oslo", "Tromsø", ""]
    return pd.Series(pd.Categorical(VALUES, categories=cats))


KINDS = ["arrow", "python", "object", "categorical"]


def _frame(kind: str) -> pq.PrivateFrame:
    df = pd.DataFrame({"city": _column(kind), "x": np.arange(len(VALUES)) % 7})
    return pq.PrivateFrame(df, pq.Budget(epsilon=1e6, delta=0.5))


def _expected_counts() -> list[int]:
    s = pd.Series(VALUES, dtype=object)
    out = []
    for k in KEYS:
        if k is None:
            out.append(int(s.isna().sum()))
        elif isinstance(k, str):
            out.append(int((s == k).sum()))
        else:
            out.append(0)  # an integer key matches no text
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_partition_count_and_sum_match_by_hand(kind: str) -> None:
    f = _frame(kind)
    with pq.testing.no_noise():
        counts = f.partition("city", keys=KEYS).count(epsilon=1)
        sums = f.partition("city", keys=KEYS).sum("x", epsilon=1, bounds=(0, 10))
        where = f.where("x >= 3").partition("city", keys=KEYS).count(epsilon=1)
    assert [int(v) for v in counts.to_numpy()] == _expected_counts()
    s = pd.DataFrame({"city": pd.Series(VALUES, dtype=object), "x": np.arange(len(VALUES)) % 7})
    want_sums = []
    want_where = []
    for k in KEYS:
        rows = s[s.city.isna()] if k is None else s[s.city == k] if isinstance(k, str) else s[:0]
        want_sums.append(float(rows.x.sum()))
        want_where.append(int((rows.x >= 3).sum()))
    assert [float(v) for v in sums.to_numpy()] == want_sums
    assert [int(v) for v in where.to_numpy()] == want_where


@pytest.mark.parametrize("kind", KINDS)
def test_unknown_key_histogram_releases_only_keys_that_occur(kind: str) -> None:
    f = _frame(kind)
    with pq.testing.no_noise():
        h = f.histogram("city", epsilon=1, delta=1e-6)
    s = pd.Series(VALUES, dtype=object)
    # every key here holds 30 or more rows, above the threshold; NULL is a key too, and
    # the unused category "Hamar" is never released
    assert "Hamar" not in list(h.index)
    got = {k: int(v) for k, v in zip(h.index, h.to_numpy(), strict=True)}
    assert got.pop(None) == int(s.isna().sum())
    assert got == {k: int(n) for k, n in s.dropna().value_counts().items()}


def test_all_storages_agree_with_each_other_on_a_grouped_mean() -> None:
    got: list[Any] = []
    for kind in KINDS:
        with pq.testing.no_noise():
            m = _frame(kind).partition("city", keys=KEYS[:4]).mean("x", epsilon=1, bounds=(0, 6))
        got.append([round(float(v), 9) for v in m.to_numpy()])
    assert all(g == got[0] for g in got)


def test_an_object_column_with_unhashable_values_still_counts_the_text() -> None:
    vals = ["a", ["a"], "a", None, ("a",), "b"]
    df = pd.DataFrame({"k": pd.Series(vals, dtype=object)})
    f = pq.PrivateFrame(df, pq.Budget(epsilon=1e6, delta=0.5))
    with pq.testing.no_noise():
        c = f.partition("k", keys=["a", "b", None, ("a",)]).count(epsilon=1)
    # a list is no key (not even NULL); the tuple ("a",) is a hashable key of its own
    assert [int(v) for v in c.to_numpy()] == [2, 1, 1, 1]


def test_wrapping_cleans_text_only_where_a_value_needs_it() -> None:
    from pinqpy.engines.text import clean_text

    clean = pd.DataFrame({"s": pd.Series(["a", "é", None, np.nan, "z"], dtype=object)})
    assert clean_text(clean) is clean  # nothing to change: the frame itself
    bad = pd.DataFrame({"s": pd.Series(["a", "b\ud800", None, "c"], dtype=object)})
    out = clean_text(bad)
    assert out is not bad and out["s"].tolist()[1] == "b\ufffd"
    mixed = pd.DataFrame({"s": pd.Series([1, "x\ud800", [2, "\ud800"]], dtype=object)})
    assert clean_text(mixed)["s"].tolist() == [1, "x\ufffd", [2, "\ufffd"]]
    # chunk edges: a lone surrogate far down a long column is found too
    long = ["ok"] * 250_001
    long[-1] = "\udc00"
    assert clean_text(pd.DataFrame({"s": pd.Series(long, dtype=object)}))["s"].iloc[-1] == "\ufffd"
