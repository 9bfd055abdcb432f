"""Entry points of the engines and their refusals: every bad input is a PinqError that
charges nothing, and the engine never changes what is charged."""

from __future__ import annotations

import builtins
import re
import sys
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_PATH, load_pums

duckdb = pytest.importorskip("duckdb")


@pytest.fixture(scope="module")
def pums() -> pd.DataFrame:
    return load_pums()


@pytest.fixture(scope="module")
def pums_parquet(tmp_path_factory: pytest.TempPathFactory, pums: pd.DataFrame) -> Path:
    path = tmp_path_factory.mktemp("data") / "pums.parquet"
    duckdb.connect().from_df(pums).write_parquet(str(path))
    return path


def exact_answers(frame: pq.PrivateFrame) -> list[object]:
    """A spread of aggregations with noise off, as plain Python values."""
    with pq.testing.no_noise():
        adults = frame.where("age >= 30")
        return [
            int(adults.count(epsilon=0.1)),
            float(frame.sum("income", epsilon=0.1, bounds=(0, 500_000))),
            float(frame.mean("age", epsilon=0.1, bounds=(0, 100))),
            float(frame.median("age", epsilon=0.1, bounds=(0, 100))),
            frame.partition("sex", keys=[0, 1, 9]).count(epsilon=0.1).tolist(),
            frame.argmax("educ", candidates=list(range(1, 17)), epsilon=0.1),
        ]


# -- entry points -------------------------------------------------------------------------
def test_duckdb_entry_points_agree_with_pandas(pums: pd.DataFrame, pums_parquet: Path) -> None:
    want = exact_answers(pq.PrivateFrame(pums, pq.Budget(10)))
    con = duckdb.connect()
    con.execute(f"CREATE TABLE people AS SELECT * FROM read_parquet('{pums_parquet}')")
    frames = {
        "DataFrame, engine=duckdb": pq.PrivateFrame(pums, pq.Budget(10), engine="duckdb"),
        "from_parquet": pq.PrivateFrame.from_parquet(pums_parquet, pq.Budget(10), engine="duckdb"),
        "from_csv": pq.PrivateFrame.from_csv(PUMS_PATH, pq.Budget(10), engine="duckdb"),
        "relation": pq.PrivateFrame(con.sql("SELECT * FROM people"), pq.Budget(10), connection=con),
        "default-connection relation": pq.PrivateFrame(
            duckdb.sql(f"SELECT * FROM read_parquet('{pums_parquet}')"), pq.Budget(10)
        ),
        "table name": pq.PrivateFrame("people", pq.Budget(10), connection=con),
    }
    for how, frame in frames.items():
        assert frame.engine == "duckdb", how
        assert exact_answers(frame) == want, how


def test_pandas_file_entry_points(pums: pd.DataFrame, pums_parquet: Path) -> None:
    want = exact_answers(pq.PrivateFrame(pums, pq.Budget(10)))
    for frame in (
        pq.PrivateFrame.from_parquet(pums_parquet, pq.Budget(10)),
        pq.PrivateFrame.from_csv(PUMS_PATH, pq.Budget(10)),
    ):
        assert frame.engine == "pandas"
        assert exact_answers(frame) == want


def test_file_frames_are_named_after_the_file(pums_parquet: Path) -> None:
    frame = pq.PrivateFrame.from_parquet(pums_parquet, pq.Budget(1), engine="duckdb")
    session = pq.Session()
    session.register("p", frame)
    assert "pums" in repr(session.explain("SELECT COUNT(*) FROM p", epsilon=0.1))


def test_charges_are_identical_across_engines(pums: pd.DataFrame) -> None:
    spent = []
    for engine in ("pandas", "duckdb", "polars"):
        budget = pq.Budget(10)
        frame = pq.PrivateFrame(pums, budget, engine=engine, bounds=PUMS_BOUNDS)
        doubled = frame.concat(frame).where("age > 20")
        doubled.count(epsilon=0.1)
        doubled.partition("sex", keys=[0, 1]).mean("age", epsilon=0.2)
        doubled.median("income", epsilon=0.05)
        spent.append(budget.spent)
    assert spent[0] == spent[1] == spent[2]
    assert spent[0].epsilon == 2 * (Fraction("0.1") + Fraction("0.2") + Fraction("0.05"))


def test_session_registers_each_kind(pums: pd.DataFrame, pums_parquet: Path) -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE people AS SELECT * FROM read_parquet('{pums_parquet}')")
    session = pq.Session()
    session.register("a", pums, budget=pq.Budget(10), engine="duckdb", bounds=PUMS_BOUNDS)
    session.register("b", con.table("people"), budget=pq.Budget(10), connection=con)
    session.register("c", "people", budget=pq.Budget(10), connection=con)
    session.register(
        "d", pq.PrivateFrame.from_parquet(pums_parquet, pq.Budget(10), engine="duckdb")
    )
    session.register_public(
        "sexes", duckdb.sql("SELECT 0 AS sex, 'M' AS label UNION ALL SELECT 1, 'F'")
    )
    answers = []
    with pq.testing.no_noise():
        for name in "abcd":
            out = session.sql(
                f"SELECT s.label, COUNT(*) AS n FROM {name} JOIN sexes s ON {name}.sex = s.sex "
                "GROUP BY s.label",
                epsilon=0.1,
            )
            answers.append(out.sort_values("label")["n"].tolist())
    assert session.table("a").engine == "duckdb"
    assert all(a == answers[0] for a in answers)
    assert sum(answers[0]) == len(pums)


def test_duckdb_table_stays_out_of_python(pums_parquet: Path) -> None:
    """A parquet frame reads the file in each query: the connection holds no copy of it."""
    frame = pq.PrivateFrame.from_parquet(pums_parquet, pq.Budget(1), engine="duckdb")
    table = frame._rel.catalog.data(frame._plan.table)  # type: ignore[attr-defined]
    plan = table.connection.sql(f"EXPLAIN SELECT * FROM {table.source}").fetchall()
    assert "parquet" in str(plan).lower()


def test_parquet_schema_is_bound_once_per_unchanged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    duckdb = pytest.importorskip("duckdb")
    path = tmp_path / "t.parquet"
    pd.DataFrame({"a": [1, 2, 3]}).to_parquet(path)
    con = duckdb.connect()
    first = pq.PrivateFrame.from_parquet(path, pq.Budget(1), engine="duckdb", connection=con)
    assert first.columns == ["a"]
    binds: list[str] = []
    monkeypatch.setattr(
        type(con), "sql", lambda self, q, *a, **k: binds.append(q) or duckdb.sql("SELECT 1")
    )
    again = pq.PrivateFrame.from_parquet(path, pq.Budget(1), engine="duckdb", connection=con)
    assert again.columns == ["a"] and binds == []
    monkeypatch.undo()
    # A rewritten file (new size and time) is bound again: the new column is there.
    pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]}).to_parquet(path)
    changed = pq.PrivateFrame.from_parquet(path, pq.Budget(10), engine="duckdb", connection=con)
    assert changed.columns == ["a", "b"]
    with pq.testing.no_noise():
        assert changed.where("b <> 'y'").count(epsilon=1.0) == 2


# -- bad input -----------------------------------------------------------------------------
def test_missing_engine_names_the_extra(monkeypatch: pytest.MonkeyPatch, pums) -> None:
    real_import = builtins.__import__

    def no_engines(name: str, *args: object, **kwargs: object) -> object:
        if name.split(".")[0] in ("duckdb", "pyspark", "polars"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_engines)
    monkeypatch.delitem(sys.modules, "duckdb")
    monkeypatch.delitem(sys.modules, "polars", raising=False)
    monkeypatch.setattr("pinqpy.engines.wrapping.duckdb_source._OWN_DUCKDB", [])
    extras = [(e, f"pinqpy[{e}]") for e in ("duckdb", "spark", "polars")]
    for engine, extra in extras:
        with pytest.raises(pq.PinqError, match=re.escape(f"pip install '{extra}'")):
            pq.PrivateFrame(pums, pq.Budget(1), engine=engine)
        with pytest.raises(pq.PinqError, match="pip install"):
            pq.PrivateFrame.from_csv(PUMS_PATH, pq.Budget(1), engine=engine)


def test_missing_files_are_named(tmp_path: Path) -> None:
    for engine in ("pandas", "duckdb", "spark", "polars"):
        with pytest.raises(pq.PinqError, match="does not exist"):
            pq.PrivateFrame.from_parquet(tmp_path / "nope.parquet", pq.Budget(1), engine=engine)
        with pytest.raises(pq.PinqError, match="no parquet file matches"):
            pq.PrivateFrame.from_parquet(str(tmp_path / "*.parquet"), pq.Budget(1), engine=engine)
        with pytest.raises(pq.PinqError, match=r"csv file .* does not exist"):
            pq.PrivateFrame.from_csv(tmp_path / "nope.csv", pq.Budget(1), engine=engine)


def test_bad_engine_arguments(pums: pd.DataFrame) -> None:
    with pytest.raises(pq.PinqError, match="engine must be one of"):
        pq.PrivateFrame(pums, pq.Budget(1), engine="polaris")  # type: ignore[arg-type]
    with pytest.raises(pq.PinqError, match="DuckDB relation runs on the duckdb engine"):
        pq.PrivateFrame(duckdb.sql("SELECT 1 AS a"), pq.Budget(1), engine="pandas")
    with pytest.raises(pq.PinqError, match="table name needs engine"):
        pq.PrivateFrame("people", pq.Budget(1))
    with pytest.raises(pq.PinqError, match="connection= is a DuckDB connection"):
        pq.PrivateFrame(pums, pq.Budget(1), engine="pandas", connection=duckdb.connect())
    with pytest.raises(pq.PinqError, match="PrivateFrame takes a pandas DataFrame"):
        pq.PrivateFrame([1, 2, 3], pq.Budget(1))
    with pytest.raises(pq.PinqError, match="not in this DuckDB connection"):
        pq.PrivateFrame("no_such_table", pq.Budget(1), connection=duckdb.connect())


def test_relation_of_another_connection_needs_it() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 1 AS a")
    with pytest.raises(pq.PinqError, match="pass the connection it belongs to"):
        pq.PrivateFrame(con.table("t"), pq.Budget(1))
    assert pq.PrivateFrame(con.table("t"), pq.Budget(1), connection=con).engine == "duckdb"


def test_missing_privacy_unit_column(pums: pd.DataFrame) -> None:
    with pytest.raises(pq.PinqError, match="privacy_unit names unknown column 'pid'"):
        pq.PrivateFrame(pums, pq.Budget(1), engine="duckdb", privacy_unit="pid")
    with pytest.raises(pq.PinqError, match="privacy_unit names unknown column 'pid'"):
        pq.PrivateFrame.from_csv(PUMS_PATH, pq.Budget(1), engine="duckdb", privacy_unit="pid")


def test_unaggregatable_column_is_refused_before_the_charge() -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE t AS SELECT i AS a, {'x': i} AS s, [i, i] AS l, map([1], [i]) AS m "
        "FROM range(5) r(i)"
    )
    budget = pq.Budget(1)
    frame = pq.PrivateFrame("t", budget, connection=con)
    assert frame.schema == {"a": "int", "s": "any", "l": "any", "m": "any"}
    for column in ("s", "l", "m"):
        with pytest.raises(pq.PinqError, match=f"cannot aggregate column '{column}'"):
            frame.sum(column, epsilon=0.1, bounds=(0, 1))
        with pytest.raises(pq.PinqError, match="cannot aggregate"):
            frame.median(column, epsilon=0.1, bounds=(0, 1))
    assert budget.spent.epsilon == 0


def test_frames_of_different_engines_do_not_mix(pums: pd.DataFrame) -> None:
    a = pq.PrivateFrame(pums, pq.Budget(1))
    b = pq.PrivateFrame(pums, pq.Budget(1), engine="duckdb")
    c = pq.PrivateFrame(pums, pq.Budget(1), engine="duckdb", connection=duckdb.connect())
    with pytest.raises(pq.PinqError, match="one is on pandas and the other on duckdb"):
        a.concat(b)
    with pytest.raises(pq.PinqError, match="same DuckDB connection"):
        b.join(c, on="age", max_rows_per_key=(1, 1))
    # The same engine instance combines freely.
    assert b.concat(pq.PrivateFrame(pums, pq.Budget(1), engine="duckdb")).engine == "duckdb"


def test_callables_refused_by_sql_engines_before_the_charge(pums: pd.DataFrame) -> None:
    budget = pq.Budget(1)
    frame = pq.PrivateFrame(pums, budget, engine="duckdb", allow_callables=True)
    with pytest.raises(pq.PinqError, match="cannot run the Python callable"):
        frame.where(lambda d: d.age > 30).count(epsilon=0.1)
    with pytest.raises(pq.PinqError, match="cannot run the Python callable"):
        frame.sum(lambda d: d.age, epsilon=0.1, bounds=(0, 100))
    with pytest.raises(pq.PinqError, match="cannot run the Python callable"):
        frame.where(lambda d: d.age > 30).select_keys("sex", epsilon=0.1, delta=1e-6)
    assert budget.spent.epsilon == 0


def test_ledger_keeps_charges_of_engine_frames(tmp_path: Path, pums: pd.DataFrame) -> None:
    ledger = tmp_path / "ledger.db"
    frame = pq.PrivateFrame(pums, pq.Budget(1, ledger=ledger, name="p"), engine="duckdb")
    frame.count(epsilon=0.25)
    again = pq.Budget(1, ledger=ledger, name="p")
    assert again.spent.epsilon == Fraction(1, 4)


def test_testing_engine_switch_restores(pums: pd.DataFrame) -> None:
    with pq.testing.engine("duckdb"):
        assert pq.PrivateFrame(pums, pq.Budget(1)).engine == "duckdb"
        assert pq.PrivateFrame(pums, pq.Budget(1), engine="pandas").engine == "pandas"
    assert pq.PrivateFrame(pums, pq.Budget(1)).engine == "pandas"
    with pytest.raises(pq.PinqError, match="engine must be one of"), pq.testing.engine("x"):
        pass
