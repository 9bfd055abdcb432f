"""Frames over a DuckDB table name share one hidden view per connection while the table is
unchanged, and read exactly what a fresh view would; keyed aggregates match their groups to
the listed keys exactly (binary text equality), whatever the connection's collation."""

from __future__ import annotations

import gc

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy import testing
from pinqpy.errors import PinqError

duckdb = pytest.importorskip("duckdb")

from pinqpy.engines.duckdb.executor import DuckDBExecutor  # noqa: E402
from pinqpy.engines.wrapping import duckdb_source  # noqa: E402

VIEWS = "SELECT view_name FROM duckdb_views() WHERE schema_name = '__pinqpy' ORDER BY 1"


def _views(con: object) -> list[str]:
    return [r[0] for r in con.sql(VIEWS).fetchall()]  # type: ignore[attr-defined]


def _source(frame: pq.PrivateFrame) -> str:
    (data,) = frame._rel.catalog._tables.values()
    return str(data.source)


def _count(frame: pq.PrivateFrame, where: str | None = None) -> int:
    f = frame.where(where) if where else frame
    with testing.no_noise():
        return int(f.count(epsilon=1))


@pytest.fixture
def con() -> object:
    c = duckdb.connect()
    c.execute("CREATE TABLE t AS SELECT range AS x, CAST(range % 3 AS VARCHAR) AS s FROM range(30)")
    yield c
    c.close()


def test_frames_over_one_name_share_one_view(con: object) -> None:
    frames = [
        pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con) for _ in range(5)
    ]
    assert len({_source(f) for f in frames}) == 1
    assert len(_views(con)) == 1
    assert [_count(f, "x < 10") for f in frames] == [10] * 5
    assert con.sql("SHOW TABLES").fetchall() == [("t",)]  # type: ignore[attr-defined]
    # Each frame is still its own table: its own id, its own answers.
    ids = {next(iter(f._rel.catalog._tables)) for f in frames}
    assert len(ids) == 5


def test_a_replaced_table_of_other_types_gets_a_new_view(con: object) -> None:
    old = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    assert old.schema["x"] == "int"
    con.execute("CREATE OR REPLACE TABLE t AS SELECT 'a' || range AS x FROM range(7)")  # type: ignore[attr-defined]
    new = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    assert dict(new.schema) == {"x": "str"}
    assert _source(new) != _source(old)
    assert _count(new) == 7
    # The earlier frame keeps its own view, whose definition did not change.
    assert _source(old) in {f'"memory"."__pinqpy"."{v}"' for v in _views(con)}


def test_a_replaced_table_of_the_same_types_is_read_as_it_is_now(con: object) -> None:
    """As before: a frame over a table name reads the table as it is when a query runs."""
    old = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    con.execute("CREATE OR REPLACE TABLE t AS SELECT range AS x, 'z' AS s FROM range(4)")  # type: ignore[attr-defined]
    new = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    assert _source(new) == _source(old)
    assert _count(new) == 4
    assert _count(old) == 4


def test_an_added_column_is_seen_by_a_new_wrap(con: object) -> None:
    pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    con.execute("ALTER TABLE t ADD COLUMN y DOUBLE")  # type: ignore[attr-defined]
    new = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    assert new.schema["y"] == "float"


def test_a_change_from_another_connection_is_seen(tmp_path: object) -> None:
    path = str(tmp_path / "db.duckdb")  # type: ignore[operator]
    a = duckdb.connect(path)
    b = duckdb.connect(path)
    try:
        a.execute("CREATE TABLE t AS SELECT range AS x FROM range(5)")
        first = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=a)
        pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=a)
        b.execute("CREATE OR REPLACE TABLE t AS SELECT 'v' AS x")
        again = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=a)
        assert dict(again.schema) == {"x": "str"}
        assert _source(again) != _source(first)
    finally:
        a.close()
        b.close()


def test_a_dropped_hidden_schema_is_made_again(con: object) -> None:
    pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    con.execute("DROP SCHEMA __pinqpy CASCADE")  # type: ignore[attr-defined]
    again = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    assert _count(again) == 30
    assert len(_views(con)) == 1


def test_another_database_in_use_gets_its_own_table(con: object) -> None:
    pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    con.execute("ATTACH ':memory:' AS other")  # type: ignore[attr-defined]
    con.execute("USE other")  # type: ignore[attr-defined]
    con.execute("CREATE TABLE t AS SELECT range AS x, 'q' AS s FROM range(3)")  # type: ignore[attr-defined]
    there = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    assert _count(there) == 3
    con.execute("USE memory")  # type: ignore[attr-defined]
    here = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    assert _count(here) == 30


def test_a_closed_connection_is_refused_as_before(con: object) -> None:
    pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    con.close()  # type: ignore[attr-defined]
    with pytest.raises(PinqError, match=r"DuckDB cannot read the table 't'"):
        pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)


def test_a_missing_table_is_refused_as_before(con: object) -> None:
    pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    con.execute("DROP TABLE t")  # type: ignore[attr-defined]
    with pytest.raises(PinqError, match=r"the table 't' is not in this DuckDB connection"):
        pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)


def test_views_no_longer_kept_are_dropped_after_their_frames(
    con: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(duckdb_source, "_TABLE_VIEWS_KEPT", 1)
    con.execute("CREATE TABLE u AS SELECT 1 AS x")  # type: ignore[attr-defined]
    f = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    pq.PrivateFrame("u", pq.Budget(10), engine="duckdb", connection=con)  # t's is not kept
    assert len(_views(con)) == 2
    assert _count(f) == 30  # still read while its frame lives
    del f
    gc.collect()
    pq.PrivateFrame("u", pq.Budget(10), engine="duckdb", connection=con)  # the next use
    assert len(_views(con)) == 1


def test_declared_types_still_get_their_own_view(con: object) -> None:
    f = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con, schema={"s": "int"})
    g = pq.PrivateFrame("t", pq.Budget(10), engine="duckdb", connection=con)
    assert f.schema["s"] == "int" and g.schema["s"] == "str"
    assert _source(f) != _source(g)


# -- keyed aggregates: groups matched to the listed keys ------------------------------------
def test_keys_match_exact_text_under_a_case_blind_collation() -> None:
    rows = pd.DataFrame({"s": ["Ab", "ab", "AB", "Ab", None, "x"], "v": [1, 2, 3, 4, 5, 6]})
    c = duckdb.connect()
    try:
        c.execute("SET default_collation = 'nocase'")
        c.register("src", rows)
        c.execute("CREATE TABLE t AS SELECT * FROM src")
        keys = ["Ab", "ab", "q", None]
        f = pq.PrivateFrame("t", pq.Budget(100), engine="duckdb", connection=c)
        p = pq.PrivateFrame(rows, pq.Budget(100), engine="pandas")
        with testing.no_noise():
            for g in (f, p):
                part = g.partition("s", keys=keys)
                assert list(np.asarray(part.count(epsilon=1))) == [2, 1, 0, 1]
                sums = np.asarray(part.sum("v", epsilon=1, bounds=(0, 10)))
                assert list(sums) == [5.0, 2.0, 0.0, 5.0]
    finally:
        c.close()


def test_enum_by_name_declared_in_reverse_compares_as_text(con: object) -> None:
    con.execute(  # type: ignore[attr-defined]
        "CREATE TABLE e AS SELECT CAST(s AS ENUM('2', '1', '0')) AS s, x FROM t"
    )
    f = pq.PrivateFrame("e", pq.Budget(100), engine="duckdb", connection=con)
    with testing.no_noise():
        counts = f.partition("s", keys=["0", "2", "9", None]).count(epsilon=1)
        assert list(np.asarray(counts)) == [10, 10, 0, 0]
        assert _count(f, "s < '1'") == 10  # text order, not the enum's


def test_two_key_columns_with_many_combinations() -> None:
    """Listed values whose combinations exceed what is matched in Python: joined in DuckDB."""
    n = 6000
    df = pd.DataFrame({"a": np.arange(n) % 97, "b": np.arange(n) % 89})
    keys = [(i % 97, i % 89) for i in range(0, 2 * n, 7)][:5000]
    duck = pq.PrivateFrame(df, pq.Budget(100), engine="duckdb")
    pand = pq.PrivateFrame(df, pq.Budget(100), engine="pandas")
    with testing.no_noise():
        got = np.asarray(duck.partition(["a", "b"], keys=keys).count(epsilon=1))
        want = np.asarray(pand.partition(["a", "b"], keys=keys).count(epsilon=1))
    assert got.tolist() == want.tolist()


def test_match_groups_gives_up_when_two_groups_meet_one_key() -> None:
    keys = [(0, "a"), (1, "b")]
    assert DuckDBExecutor._match_groups([("a", 3), ("b", 4), ("c", 9)], keys, 1) == [
        (0, 3),
        (1, 4),
    ]
    assert DuckDBExecutor._match_groups([(0.0, 3), (-0.0, 4)], [(0, 0.0)], 1) is None
    assert DuckDBExecutor._match_groups([(float("nan"), 3), (None, 2)], [(0, None)], 1) == [(0, 2)]


def test_two_frames_over_one_name_combine_as_on_pandas(con: object) -> None:
    df = con.sql("SELECT * FROM t").df()  # type: ignore[attr-defined]
    b = pq.Budget(100)
    duck = [pq.PrivateFrame("t", b, engine="duckdb", connection=con) for _ in range(2)]
    pand = [pq.PrivateFrame(df, b, engine="pandas") for _ in range(2)]
    got = []
    with testing.no_noise():
        for f, g in (duck, pand):
            got.append(
                [
                    _count(f.concat(g), "x < 5"),
                    _count(f.concat(f)),
                    _count(f.join(g, on="s", max_rows_per_key=(2, 3))),
                    np.asarray(
                        f.concat(g).partition("s", keys=["0", "2"]).count(epsilon=1)
                    ).tolist(),
                ]
            )
    assert got[0] == got[1]
    assert got[0][:2] == [10, 60]
