"""Column types come from the schema (dtypes, declarations), never from the values.

An ``object`` column is ``any``; each of its values is compared as its own type, so one
added row never changes another row's result. ``schema=`` declares types on every
constructor and ``--schema`` on the command line; a bad declaration is refused before any
charge. CSV types are inferred once from the file, and DESCRIBE says so.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.expr.pandas_eval import evaluate
from pinqpy.expr.parser import parse_expression
from pinqpy.interfaces.cli import main

BAD = [{"code": "integer"}, {"nope": "int"}, {"code": "int"}, "code=str"]


def _codes(n: int = 1000) -> pd.Series:
    rng = np.random.default_rng(3)
    return pd.Series(list(rng.integers(0, 20, n)), dtype=object)


def _count(df: pd.DataFrame, where: str, **kw: object) -> int:
    frame = pq.PrivateFrame(df, pq.Budget(10), **kw)  # type: ignore[arg-type]
    with pq.testing.no_noise():
        return int(frame.where(where).count(epsilon=1.0))


# -- the attack: one row flipping a whole column's semantics ------------------------------------
@pytest.mark.parametrize("extra", ["abc", "5", 2.5, True, None, [1, 2], pd.Timestamp(0)])
@pytest.mark.parametrize("where", ["code > '9'", "code > 9", "code = '12'", "code >= 'a'"])
def test_one_row_changes_one_row(extra: object, where: str) -> None:
    base = pd.DataFrame({"code": _codes()})
    extra_row = pd.DataFrame({"code": pd.Series([extra], dtype=object)})
    neighbour = pd.concat([base, extra_row], ignore_index=True)
    assert neighbour["code"].dtype == object
    a, b = _count(base, where), _count(neighbour, where)
    assert abs(a - b) <= 1
    # Row by row: every original row's result is unchanged.
    before = evaluate(parse_expression(where), base).tolist()
    after = evaluate(parse_expression(where), neighbour).tolist()[: len(base)]
    assert [None if pd.isna(x) else x for x in before] == [None if pd.isna(x) else x for x in after]


def test_any_rule_reads_each_value_as_its_own_type() -> None:
    df = pd.DataFrame({"o": pd.Series([12, "12", "x", 2.5, True, None, [1]], dtype=object)})

    def ev(text: str) -> list[object]:
        return [None if pd.isna(v) else v for v in evaluate(parse_expression(text), df).tolist()]

    # 12 > '9' is numeric (the literal read as 9); '12' > '9' compares strings.
    assert ev("o > '9'") == [True, False, True, False, False, None, None]
    assert ev("o > 9") == [True, True, None, False, False, None, None]
    assert ev("o = 'x'") == [None, False, True, None, None, None, None]
    assert ev("o + 1") == [13.0, 13.0, None, 3.5, 2.0, None, None]
    assert ev("o IS NULL") == [False, False, False, False, False, True, False]


# -- the schema does not depend on the values ----------------------------------------------------
@pytest.mark.parametrize("values", [[1, 2, 3], ["a", "b"], [1, "a"], [1.5, None], [True], []])
def test_object_column_is_any(values: list[object]) -> None:
    df = pd.DataFrame({"o": pd.Series(values, dtype=object)})
    frame = pq.PrivateFrame(df, pq.Budget(1), engine="pandas")
    assert frame.schema == {"o": "any"}
    session = pq.Session()
    session.register("t", df, budget=pq.Budget(1), engine="pandas")
    row = session.sql("DESCRIBE t").set_index("column").loc["o"]
    assert row["type"] == "any" and row["type_source"] == "engine"


def test_pandas_strings_stay_str() -> None:
    frame = pq.PrivateFrame(pd.DataFrame({"s": ["a", "b"]}), pq.Budget(1), engine="pandas")
    assert frame.schema == {"s": "str"}


def test_mixed_object_column_refused_on_other_engines(engine: str) -> None:
    df = pd.DataFrame({"code": pd.Series([1, "a"], dtype=object)})
    budget = pq.Budget(1)
    if engine == "pandas":
        assert pq.PrivateFrame(df, budget).schema["code"] == "any"
        return
    with pytest.raises(pq.PinqError, match="declare it"):
        pq.PrivateFrame(df, budget)
    assert float(budget.spent.epsilon) == 0


# -- declared schemas ----------------------------------------------------------------------------
def test_declared_schema_on_dataframes(engine: str) -> None:
    df = pd.DataFrame({"code": pd.Series([7, "12", "x", None], dtype=object), "n": [1, 2, 3, 4]})
    budget = pq.Budget(10)
    frame = pq.PrivateFrame(df, budget, schema={"code": "str"})
    assert frame.schema == {"code": "str", "n": "int"}
    with pq.testing.no_noise():
        assert int(frame.where("code > '2'").count(epsilon=0.5)) == 2  # '7' and 'x'
    session = pq.Session()
    session.register("t", df, budget=budget, schema={"code": "str", "n": "float"})
    described = session.sql("DESCRIBE t").set_index("column")
    assert list(described["type"]) == ["str", "float"]
    assert set(described["type_source"]) == {"declared"}
    spent = budget.spent
    for bad in BAD:
        with pytest.raises(pq.PinqError):
            pq.PrivateFrame(df, budget, schema=bad)  # type: ignore[arg-type]
        with pytest.raises(pq.PinqError):
            session.register("u", df, budget=budget, schema=bad)  # type: ignore[arg-type]
    assert budget.spent == spent


def test_declared_int_converts_and_checks() -> None:
    df = pd.DataFrame({"v": pd.Series(["1", 2, None, " 3 "], dtype=object)})
    frame = pq.PrivateFrame(df, pq.Budget(1), schema={"v": "int"})
    assert frame.schema == {"v": "int"}
    with pq.testing.no_noise():
        assert int(frame.sum("v", epsilon=0.5, bounds=(0, 10))) == 6
    for bad in (["1.5"], ["x"], pd.to_datetime(["2020-01-01"])):
        with pytest.raises(pq.PinqError, match="does not convert"):
            pq.PrivateFrame(pd.DataFrame({"v": bad}), pq.Budget(1), schema={"v": "int"})
    assert df["v"].dtype == object  # the curator's frame is left as it was


@pytest.fixture
def csv_file(tmp_path: Path) -> Path:
    path = tmp_path / "codes.csv"
    path.write_text("code,n\n007,1\n12,2\nx,3\n")
    return path


@pytest.fixture
def parquet_file(tmp_path: Path) -> Path:
    path = tmp_path / "codes.parquet"
    pd.DataFrame({"code": ["007", "12", "x"], "n": [1, 2, 3]}).to_parquet(path)
    return path


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_declared_schema_on_files(
    engine: str, kind: str, csv_file: Path, parquet_file: Path
) -> None:
    path = csv_file if kind == "csv" else parquet_file
    read = pq.PrivateFrame.from_csv if kind == "csv" else pq.PrivateFrame.from_parquet
    budget = pq.Budget(10)
    frame = read(path, budget, engine=engine, schema={"code": "str", "n": "float"})
    assert frame.schema == {"code": "str", "n": "float"}
    with pq.testing.no_noise():
        assert int(frame.where("code = '007'").count(epsilon=0.5)) == 1  # read as text
    session = pq.Session()
    session.register("t", frame)
    described = session.sql("DESCRIBE t").set_index("column")
    assert set(described["type_source"]) == {"declared"}
    spent = budget.spent
    for bad in BAD:
        with pytest.raises(pq.PinqError):
            read(path, budget, engine=engine, schema=bad)  # type: ignore[arg-type]
    assert budget.spent == spent


def test_csv_types_are_inferred_and_described(engine: str, csv_file: Path) -> None:
    frame = pq.PrivateFrame.from_csv(csv_file, pq.Budget(1), engine=engine)
    assert frame.schema == {"code": "str", "n": "int"}  # the same on every engine
    session = pq.Session()
    session.register("t", frame)
    described = session.sql("DESCRIBE t").set_index("column")
    assert list(described["type_source"]) == ["inferred", "inferred"]


# -- the command line ----------------------------------------------------------------------------
def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("cli_engine", ["pandas", "duckdb", "polars"])
def test_cli_schema(cli_engine: str, csv_file: Path) -> None:
    pytest.importorskip(cli_engine)
    base = ["query", f"t={csv_file}", "--epsilon", "1", "--engine", cli_engine]
    code, out, _ = _cli(*base, "--schema", "code=str", "--schema", "n=float", "DESCRIBE t")
    assert code == 0
    assert "declared" in out and "inferred" not in out and "float" in out
    code, out, _ = _cli(*base, "DESCRIBE t")
    assert code == 0 and "inferred" in out
    for bad in ("code=integer", "nope=int", "code=int", "code"):
        code, _, err = _cli(*base, "--schema", bad, "SELECT COUNT(*) FROM t")
        assert code != 0 and "schema" in err.lower()
