"""PostgreSQL tables read where they lie, on the session's real test server: catalog types
(arrays as lists), explode's items, NULL-like keys and units of a stored table, the two ways
of grouping rows by listed keys, one statement per aggregate, and refusals before the charge.

Every answer is compared, under ``no_noise``, with the pandas engine on the same values."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.engines.postgres.connection import link_for
from pinqpy.engines.registry import executor_for
from pinqpy.engines.sqlgen import groups
from pinqpy.expr.parser import parse_expression
from pinqpy.plan.grouping import Grouping

psycopg = pytest.importorskip("psycopg")
_names = itertools.count()


@pytest.fixture
def table(postgres_url):
    """Make a table from a CREATE's column list and rows (SQL literals); yields its name."""
    made: list[str] = []

    def make(columns: str, rows: list[str]) -> str:
        name = f"t_{next(_names)}"
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f"CREATE TABLE {name} ({columns})")
            if rows:
                conn.execute(f"INSERT INTO {name} VALUES {', '.join(rows)}")
        made.append(name)
        return name

    yield make
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for name in made:
            conn.execute(f"DROP TABLE IF EXISTS {name}")


def _both(postgres_url: str, name: str, df: pd.DataFrame, **kw: object):
    """The stored table, and its values as a pandas DataFrame on pandas."""
    b = pq.Budget(epsilon=10**6, delta=0.5)
    return pq.PrivateFrame.from_sql(postgres_url, name, b, **kw), pq.PrivateFrame(df, b, **kw)


def _loaded(postgres_url: str, df: pd.DataFrame) -> pq.PrivateFrame:
    """A pandas DataFrame copied into the server (its lists as arrays)."""
    with pq.testing.engine("postgres", postgres_url):
        return pq.PrivateFrame(df, pq.Budget(epsilon=10**6))


# -- types -------------------------------------------------------------------------------------
def test_arrays_are_lists_and_other_types_are_refused_before_anything(postgres_url, table):
    name = table(
        "i int[], t text[], d double precision[], s timestamptz[], v varchar(3)[], n int",
        ["('{1}', '{a}', '{1.5}', '{2020-01-01 00:00+00}', '{x}', 1)"],
    )
    b = pq.Budget(epsilon=1)
    f = pq.PrivateFrame.from_sql(postgres_url, name, b)
    assert f.schema == {"i": "any", "t": "any", "d": "any", "s": "any", "v": "any", "n": "int"}
    bad = table("j json[], n int", [])
    with pytest.raises(pq.PinqError, match=r"column 'j' .* type json\[\].*CREATE VIEW"):
        pq.PrivateFrame.from_sql(postgres_url, bad, b)
    assert b.spent.epsilon == 0


def test_an_enum_array_reads_as_text(postgres_url, table):
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP TYPE IF EXISTS pinq_mood CASCADE")
        conn.execute("CREATE TYPE pinq_mood AS ENUM ('sad', 'ok')")
    name = table("m pinq_mood[]", ["('{sad,NULL,ok}')", "('{ok}')"])
    f, p = _both(postgres_url, name, pd.DataFrame({"m": [["sad", None, "ok"], ["ok"]]}))
    with pq.testing.no_noise():
        for g in (f, p):
            got = g.explode("m", max_items=5).partition("m", keys=["sad", "ok"]).count(1)
            assert got.tolist() == [1, 2]


# -- explode -----------------------------------------------------------------------------------
# Each stored array and the Python list pinqpy reads it as (what the pandas engine explodes).
ARRAYS = [
    ("int[]", "'[0:3]={NULL,1,2,3}'", [None, 1, 2, 3]),  # its own lower bound
    ("int[]", "'{{1,NULL},{3,4}}'", [1, None, 3, 4]),  # two dimensions: items in order
    ("int[]", "'{}'", []),
    ("int[]", "NULL", None),
    ("double precision[]", "'{NaN,1.5,NULL,-0.0,Infinity}'", [np.nan, 1.5, None, -0.0, np.inf]),
    ("real[]", "'{NaN,2.5}'", [np.nan, 2.5]),
    ("numeric[]", "'{1e400,NaN,NULL,2.5,-1e-400}'", [np.inf, np.nan, None, 2.5, 0.0]),
    ("text[]", r"""'{"",NULL,"NULL","a\"b\\c"}'""", ["", None, "NULL", 'a"b\\c']),
    ("character(3)[]", "'{\"a  \",b}'", ["a", "b"]),  # padding is not text
    ("boolean[]", "'{t,NULL,f}'", [True, None, False]),
]


@pytest.mark.parametrize(
    ("sql_type", "literal", "items"), ARRAYS, ids=[a[0] + a[1] for a in ARRAYS]
)
@pytest.mark.parametrize("k", [1, 2, 10])
def test_explode_reads_an_array_as_the_list_it_holds(
    postgres_url, table, sql_type, literal, items, k
):
    name = table(f"a {sql_type}, n int", [f"({literal}, 1)", f"({literal}, 2)"])
    df = pd.DataFrame({"a": pd.Series([items, items], dtype=object), "n": [1, 2]})
    f, p = _both(postgres_url, name, df)
    kept = [x for x in (items or []) if x is not None and x == x][:k]
    with pq.testing.no_noise():
        for g in (f, p, _loaded(postgres_url, df)):
            e = g.explode("a", max_items=k)
            assert int(e.count(1)) == 2 * len(kept)
            keys = sorted({x for x in kept if not isinstance(x, str) or x}, key=repr)
            if keys:
                assert e.partition("a", keys=keys).count(1).tolist() == [
                    2 * kept.count(x) for x in keys
                ]


def test_timestamps_in_an_array_are_utc_and_infinity_is_null(postgres_url, table):
    name = table(
        "s timestamptz[], d date[]",
        ["('{infinity,2020-01-01 00:00+02,NULL}', '{-infinity,2020-01-02}')"],
    )
    b = pq.Budget(epsilon=100)
    f = pq.PrivateFrame.from_sql(postgres_url, name, b)
    with pq.testing.no_noise():
        s = f.explode("s", max_items=1)
        assert s.partition("s", keys=[pd.Timestamp("2019-12-31 22:00")]).count(1).tolist() == [1]
        d = f.explode("d", max_items=1)
        assert d.partition("d", keys=[pd.Timestamp("2020-01-02")]).count(1).tolist() == [1]


def test_lists_of_different_item_types_concatenate(postgres_url):
    b = pq.Budget(epsilon=100)
    ints = pd.DataFrame({"l": pd.Series([[1, 2], [3]], dtype=object)})
    empty = pd.DataFrame({"l": pd.Series([[], None], dtype=object)})  # read as text[]
    with pq.testing.engine("postgres", postgres_url), pq.testing.no_noise():
        both = pq.PrivateFrame(ints, b).concat(pq.PrivateFrame(empty, b))
        assert int(both.explode("l", max_items=5).count(1)) == 3
        assert int(both.distinct("l").count(1)) == 4


def test_lists_that_cannot_be_combined_are_refused_before_the_charge(postgres_url, table):
    name = table("i int[], t text[]", ["('{1}', '{a}')"])
    b = pq.Budget(epsilon=100)
    f = pq.PrivateFrame.from_sql(postgres_url, name, b)
    with pytest.raises(pq.PinqError, match="nothing was charged"):
        f.select(x="COALESCE(i, t)").count(1)
    assert b.spent.epsilon == 0


# -- NULL-like keys and units of a stored table ------------------------------------------------
def test_nan_units_belong_to_nobody_and_nan_keys_are_the_null_key(postgres_url, table):
    name = table(
        "uid double precision, k double precision, v int",
        [
            "('NaN', 1, 1)", "('NaN', 1, 2)", "(NULL, 2, 3)", "(NULL, -0.0, 4)", "(1, 0.0, 5)",
            "(1, 'NaN', 6)", "(2, NULL, 7)", "(-0.0, 3, 8)", "(0.0, 3, 9)",
        ],
    )  # fmt: skip
    df = pd.DataFrame(
        {
            "uid": [np.nan, np.nan, None, None, 1, 1, 2, -0.0, 0.0],
            "k": [1, 1, 2, -0.0, 0.0, np.nan, None, 3, 3],
            "v": range(1, 10),
        }
    )
    f, p = _both(postgres_url, name, df, privacy_unit="uid")
    with pq.testing.no_noise():
        got = []
        for g in (f, p):
            kept = g.bound_contributions(max_rows=3)
            got.append(
                (
                    int(kept.count(1)),  # NaN and NULL units dropped: 5 rows of 3 people
                    int(g.groupby("uid").agg(n="COUNT(*)").count(1)),
                    kept.partition("k", keys=[0.0, None, 1, 3]).count(1).tolist(),
                    kept.histogram("k", epsilon=1, delta=1e-3).to_dict(),
                )
            )
        assert got[0] == got[1] == (5, 3, [1, 2, 0, 2], {0.0: 1, 3.0: 2, None: 2})


# -- groups ------------------------------------------------------------------------------------
def test_many_key_combinations_are_joined_and_agree(postgres_url, monkeypatch):
    rng = np.random.default_rng(3)
    df = pd.DataFrame(
        {
            "a": rng.integers(0, 30, 400),
            "b": rng.choice(["x", "y", None], 400),
            "v": rng.normal(size=400),
        }
    )
    keys = [(a, b) for a in range(30) for b in ("x", "y", None)]
    budget = pq.Budget(epsilon=10**6)
    want = pq.PrivateFrame(df, budget)
    with pq.testing.engine("postgres", postgres_url):
        got = pq.PrivateFrame(df, budget)
    with pq.testing.no_noise():
        expected = want.partition(["a", "b"], keys=keys).sum("v", bounds=(-1, 1), epsilon=1)
        for inline in (10**6, 10):  # matched in Python, then joined in SQL
            monkeypatch.setattr(groups, "INLINE_GROUPS", inline)
            parts = got.partition(["a", "b"], keys=keys)
            assert parts.sum("v", bounds=(-1, 1), epsilon=1).tolist() == expected.tolist()


def test_computed_values_in_groups_of_listed_keys_agree(postgres_url, monkeypatch):
    """A value computed through bound sub-expressions (ROUND, POWER of a column) read in
    groups of listed keys, both ways of grouping: once a syntax error after the charge."""
    rng = np.random.default_rng(5)
    df = pd.DataFrame({"g": rng.integers(0, 4, 300), "x": rng.normal(size=300)})
    budget = pq.Budget(epsilon=10**6)
    want = pq.PrivateFrame(df, budget)
    with pq.testing.engine("postgres", postgres_url):
        got = pq.PrivateFrame(df, budget)
    value = "ROUND(x, 3) + POWER(x, 3)"
    with pq.testing.no_noise():
        parts = want.partition("g", keys=[0, 1, 2, 3, 9])
        expected = parts.sum(value, bounds=(-2, 2), epsilon=1).tolist()
        for inline in (10**6, 1):  # matched in Python, then joined in SQL
            monkeypatch.setattr(groups, "INLINE_GROUPS", inline)
            parts = got.partition("g", keys=[0, 1, 2, 3, 9])
            assert parts.sum(value, bounds=(-2, 2), epsilon=1).tolist() == expected
    assert expected[-1] == 0 and any(v != 0 for v in expected)


def test_integer_buckets_on_integer_grids_agree_with_pandas(postgres_url, monkeypatch):
    """Buckets of integers on a uniform grid of integers (one integer expression per row):
    values on a point, between points, outside the grid and NULL, near 2**53 too, in one
    group and in listed groups both ways of grouping, as pandas' binary search finds them;
    a float value or a grid of non-integers takes the other path, with the same answer."""
    rng = np.random.default_rng(11)
    n = 500
    df = pd.DataFrame(
        {
            "g": rng.integers(0, 3, n),
            "x": pd.array(rng.integers(-30, 240, n), dtype="Int64"),
            "big": pd.array(2**53 - rng.integers(0, 40, n), dtype="Int64"),
            "f": rng.integers(-30, 240, n).astype(float),
        }
    )
    df.loc[::17, "x"] = pd.NA
    budget = pq.Budget(epsilon=10**6)
    want = pq.PrivateFrame(df, budget)
    got = _loaded(postgres_url, df)
    grids = [
        ("x", np.arange(0.0, 201.0, 20.0)),
        ("x", np.arange(-25.0, 26.0, 5.0)),
        ("x", np.arange(0.0, 200.0, 2.5)),
        ("f", np.arange(0.0, 201.0, 20.0)),
        ("big", np.arange(2.0**53 - 30, 2.0**53 + 1, 2.0)),
    ]
    pandas_ex = executor_for(want._rel.plan, want._rel.catalog)
    pg_ex = executor_for(got._rel.plan, got._rel.catalog)
    for (col, cands), grouping in itertools.product(
        grids, (None, Grouping(("g",), (0, 2, 9)))
    ):
        value = parse_expression(col)
        expected = pandas_ex.buckets(want._rel.plan, grouping, value, cands)
        for inline in (10**6, 1):  # matched in Python, then joined in SQL
            monkeypatch.setattr(groups, "INLINE_GROUPS", inline)
            eq, between = pg_ex.buckets(got._rel.plan, grouping, value, cands)
            np.testing.assert_array_equal(eq, expected[0])
            np.testing.assert_array_equal(between, expected[1])
        assert expected[0].sum() + expected[1].sum() > 0


def test_every_aggregate_is_one_statement_and_one_round_trip(postgres_url, table):
    name = table("k text, v double precision", ["('a', 1.5)", "('b', NULL)", "(NULL, 2)"])
    b = pq.Budget(epsilon=100)
    # A connection of its own: the URL's shared link may still owe other tests' temporary
    # tables a DROP (run before its next read), which would be counted here.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        f = pq.PrivateFrame.from_sql(conn, name, b, bounds={"v": (0, 10)})
        link = link_for(conn)
        assert executor_for(f._rel.plan, f._rel.catalog).link is link
        for read in (
            lambda: f.count(1),
            lambda: f.sum("v", epsilon=1),
            lambda: f.mean("v", epsilon=1),
            lambda: f.median("v", epsilon=1),
            lambda: f.partition("k", keys=["a", None]).count(1),
        ):
            s0, r0 = link.statements, link.round_trips
            with pq.testing.seed(1):
                read()
            assert (link.statements - s0, link.round_trips - r0) == (1, 1)


def test_numbers_below_the_doubles_read_as_zero_never_as_an_error(postgres_url, table):
    name = table(
        "n numeric, t text",
        ["(1e-400, '1e-400')", "(-1e-400, '-2e-330')", "(1e400, '5e-324')", "('NaN', 'x')"],
    )
    df = pd.DataFrame(
        {"n": [0.0, -0.0, np.inf, np.nan], "t": ["1e-400", "-2e-330", "5e-324", "x"]}
    )
    f, p = _both(postgres_url, name, df)
    with pq.testing.no_noise():
        for g in (f, p):
            zeros = g.where("n = 0").count(1)
            read = g.select(x="CAST(t AS FLOAT)").where("x = 0").count(1)
            tiny = g.select(x="CAST(t AS FLOAT)").where("x > 0").count(1)
            assert (int(zeros), int(read), int(tiny)) == (2, 2, 1)


def test_integer_sums_are_exact_beyond_the_doubles_integers(postgres_url, table):
    """A clamped sum of integers with integer bounds is the exact integer sum, converted to
    a double once: 2**53 + 1 + 1 is 2**53 + 2, which a sum of doubles rounds to 2**53; a
    NULL adds nothing, whichever bound it would be clamped to."""
    big = 2**53
    name = table("x bigint", [f"({big})", "(1)", "(1)", "(NULL)", "(-5)"])
    f = pq.PrivateFrame.from_sql(postgres_url, name, pq.Budget(epsilon=1))
    ex = executor_for(f._rel.plan, f._rel.catalog)
    for lo, hi, want in ((-big, big, big + 2 - 5), (1, big, big + 3), (-7, -6, -6 * 4)):
        sums, counts = ex.clamped_sum(f._rel.plan, None, parse_expression("x"), lo, hi)
        assert (float(sums[0]), int(counts[0])) == (float(want), 4)


# -- text read as a timestamp --------------------------------------------------------------------
_STAMP_TEXTS = [
    "2000-01-01",
    "2000-01-01 12:30",
    "2000-01-01T12:30:15",
    "2000-01-01 23:59:59.999999",
    "2000-01-01 00:00:00.0000001",
    "2000-01-01 24:00:00",
    "2000-01-01 12:60",
    "2000-02-29",
    "2001-02-29",
    "2000-04-31",
    "2000-13-01",
    "0000-01-01",
    "0000-02-29",
    "0001-01-01",
    "9999-12-31 23:59:59",
    " 2000-01-01",
    "2000-01-01 ",
    "2000-01-01\n",
    "2000-1-1",
    "20000101",
    "2000",
    "infinity",
    "epoch",
    "now",
    "2000-01-01 00:00:00+01:00",
    "2000-01-01Z",
    "",
    None,
]


def test_text_is_read_as_a_timestamp_only_in_pinqpys_form(postgres_url, table):
    """CAST of text AS TIMESTAMP and AS DATE over a stored text column: the value pandas
    gives on every spelling (TIMESTAMP_TEXT alone, year 0 as 1 BC; a day that does not
    exist and every other spelling NULL), never an error."""
    df = pd.DataFrame({"rid": range(len(_STAMP_TEXTS)), "s": _STAMP_TEXTS})
    rows = [f"({i}, {'NULL' if s is None else repr(s)})" for i, s in enumerate(_STAMP_TEXTS)]
    name = table("rid int, s text", [r.replace("'\\n'", "E'\\n'") for r in rows])
    b = pq.Budget(epsilon=1)
    f = pq.PrivateFrame.from_sql(postgres_url, name, b)
    p = pq.PrivateFrame(df, b, schema={"s": "str"})
    got = []
    for g in (f, p):
        h = g.select("rid", ts="CAST(s AS TIMESTAMP)", d="CAST(s AS DATE)")
        out = executor_for(h._plan, h._rel.catalog).rows(h._plan).sort_values("rid")
        got.append([(None if pd.isna(a) else pd.Timestamp(a)) for a in [*out["ts"], *out["d"]]])
    assert got[0] == got[1]
    assert got[1][0] == pd.Timestamp("2000-01-01") and got[1][3].microsecond == 999999


def test_timestamp_keys_of_any_year_are_read_after_the_charge(postgres_url, table):
    """Stored timestamps before year 1 and after 9999 (PostgreSQL holds both; psycopg's own
    loader raises on them) are keys of an unknown-key histogram like any other."""
    name = table(
        "d timestamp",
        ["('12000-01-01')"] * 40 + ["('0001-01-01 BC')"] * 40 + ["('2000-01-01 12:00')"] * 40,
    )
    b = pq.Budget(epsilon=10, delta=0.5)
    f = pq.PrivateFrame.from_sql(postgres_url, name, b)
    with pq.testing.no_noise():
        got = f.histogram("d", epsilon=1, delta=1e-6)
    assert dict(got) == {
        pd.Timestamp(np.datetime64("0000-01-01", "us")): 40,
        pd.Timestamp(np.datetime64("2000-01-01T12:00", "us")): 40,
        pd.Timestamp(np.datetime64("12000-01-01", "us")): 40,
    }
