"""Grouped releases and key counts over string (and other plain) key columns on the SQL
engines: DuckDB VARCHAR and ENUM columns, Spark strings. The SQL groups by the column and
matches the few groups to the listed keys; the answers must be those of the pandas engine
(a key matches values equal to it under the column's type, a NULL key matches NULL, unlisted
values count nowhere)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq

duckdb = pytest.importorskip("duckdb")

STATES = ["b", "a", "c", "a", None, "b", "a", "zz", "", "a", None, "c"]
INCOME = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, None]
KEYS = ["a", "b", "q", None, "", "c"]  # "q" has no rows, "zz" is unlisted


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"state": STATES, "income": pd.array(INCOME, dtype="Int64")})


@pytest.fixture
def con() -> Iterator[object]:
    c = duckdb.connect()
    c.register("src", _frame())
    # Declared in reverse text order: an enum must still compare as its text.
    values = ", ".join(f"'{v}'" for v in sorted({s for s in STATES if s is not None})[::-1])
    c.execute(f"CREATE TABLE te AS SELECT CAST(state AS ENUM({values})) AS state, income FROM src")
    c.execute("CREATE TABLE tv AS SELECT * FROM src")
    yield c
    c.close()


def _releases(f: pq.PrivateFrame, keys: list[object]) -> list[np.ndarray]:
    part = f.partition("state", keys=keys)
    with pq.testing.no_noise():
        return [
            np.asarray(part.count(epsilon=1), dtype=float),
            np.asarray(part.sum("income", epsilon=1, bounds=(0, 100)), dtype=float),
            np.asarray(part.mean("income", epsilon=1, bounds=(0, 100)), dtype=float),
        ]


def _expected(keys: list[object]) -> list[np.ndarray]:
    return _releases(pq.PrivateFrame(_frame(), pq.Budget(1000), engine="pandas"), keys)


@pytest.mark.parametrize("table", ["tv", "te"])
def test_duckdb_varchar_and_enum_keys_match_pandas(con: object, table: str) -> None:
    f = pq.PrivateFrame(con.table(table), pq.Budget(1000), engine="duckdb", connection=con)  # type: ignore[attr-defined]
    for keys in (KEYS, ["a"], [None], ["q"], ["zz", "c"]):
        got = _releases(f, keys)
        for g, e in zip(got, _expected(keys), strict=True):
            np.testing.assert_allclose(g, e)


def test_duckdb_enum_reads_as_text(con: object) -> None:
    """An enum column compares, sorts, computes and concatenates as its text."""
    f = pq.PrivateFrame(con.table("te"), pq.Budget(100), engine="duckdb", connection=con)  # type: ignore[attr-defined]
    p = pq.PrivateFrame(_frame(), pq.Budget(100), engine="pandas")
    other = pd.DataFrame({"state": ["zz", "y", None], "income": pd.array([1, 2, 3], "Int64")})
    con.execute(
        "CREATE TABLE te2 AS SELECT CAST(state AS ENUM('y', 'zz')) AS state, income FROM other"
    )  # type: ignore[attr-defined]
    f2 = pq.PrivateFrame(con.table("te2"), pq.Budget(100), engine="duckdb", connection=con)  # type: ignore[attr-defined]
    p2 = pq.PrivateFrame(other, pq.Budget(100), engine="pandas")
    with pq.testing.no_noise():
        for g in (f, p):
            assert int(g.where("state < 'b'").count(epsilon=1)) == 5  # "", and four "a"
        for g, g2 in ((f, f2), (p, p2)):
            both = g.concat(g2)
            counts = both.partition("state", keys=["zz", "y", None]).count(epsilon=1)
            assert list(np.asarray(counts)) == [2, 1, 3]
            upper = g.assign(s="upper(state)").partition("s", keys=["A", "ZZ"]).count(epsilon=1)
            assert list(np.asarray(upper)) == [4, 1]
            distinct = g.distinct("state").count(epsilon=1)
            assert int(distinct) == 6


def test_duckdb_histogram_keys_are_text(con: object) -> None:
    rows = pd.DataFrame({"state": ["a"] * 400 + ["b"] * 300 + ["c"]})
    con.register("many", rows)  # type: ignore[attr-defined]
    con.execute("CREATE TABLE me AS SELECT CAST(state AS ENUM('a', 'b', 'c')) AS state FROM many")  # type: ignore[attr-defined]
    for name in ("many", "me"):
        f = pq.PrivateFrame(con.table(name), pq.Budget(10, 1e-3), engine="duckdb", connection=con)  # type: ignore[attr-defined]
        with pq.testing.no_noise():
            h = f.histogram("state", epsilon=1, delta=1e-6)
        exact = {"a": 400, "b": 300, "c": 1}
        assert h.index.tolist()[:2] == ["a", "b"]
        assert all(type(k) is str for k in h.index)
        assert dict(zip(h.index, np.asarray(h).tolist(), strict=True)) == {
            k: exact[k] for k in h.index
        }


def test_duckdb_float_and_int_keys(con: object) -> None:
    df = pd.DataFrame(
        {
            "x": [0.0, -0.0, np.nan, None, 1.5, 2.0, 2.0, 3.0],
            "n": pd.array([1, 1, 2, None, 3, 3, 3, 4], dtype="Int64"),
        }
    )
    duck = pq.PrivateFrame(df, pq.Budget(1000), engine="duckdb")
    pand = pq.PrivateFrame(df, pq.Budget(1000), engine="pandas")
    with pq.testing.no_noise():
        for col, keys in (("x", [-0.0, None, 2, 7.0]), ("n", [1, None, 3, 9])):
            got = duck.partition(col, keys=keys).count(epsilon=1)
            want = pand.partition(col, keys=keys).count(epsilon=1)
            assert list(np.asarray(got)) == list(np.asarray(want))


def test_spark_string_keys_match_pandas() -> None:
    pytest.importorskip("pyspark")
    f = pq.PrivateFrame(_frame(), pq.Budget(1000), engine="spark")
    got = _releases(f, KEYS)
    for g, e in zip(got, _expected(KEYS), strict=True):
        np.testing.assert_allclose(g, e)
