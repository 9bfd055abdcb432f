"""The curator is warned, once per table, when column types are inferred from a file's rows.

Column types are public facts, and inferred ones follow the rows (on pandas one empty field
makes an integer column float): every interface that reads a CSV file without declared types
says so as the table is loaded, in its own words for declaring them (``schema=``,
``--schema``, the server config's ``schema = {...}``), and never shows a value.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_PATH
from pinqpy.errors import InferredTypesWarning, PinqWarning
from pinqpy.interfaces.cli import main
from pinqpy.remote.server.config import load_config
from pinqpy.remote.server.run import demo_config
from pinqpy.remote.server.state import ServerState, inferred_type_warnings

SECRET_NAME = "Zebedee"
SECRET_NUMBER = 987654321


@pytest.fixture
def people(tmp_path: Path) -> Path:
    path = tmp_path / "people.csv"
    path.write_text(f"pid,name,income\n1,{SECRET_NAME},{SECRET_NUMBER}\n2,Ann,\n")
    return path


def _shows_no_value(text: str) -> None:
    assert SECRET_NAME not in text and str(SECRET_NUMBER) not in text and "Ann" not in text


def _loaded(call) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        call()
    return [w for w in seen if issubclass(w.category, PinqWarning)]


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_from_csv_warns_once_with_the_schema_that_declares_the_inferred_types(
    people: Path, engine: str
) -> None:
    seen = _loaded(lambda: pq.PrivateFrame.from_csv(people, pq.Budget(1), engine=engine))
    assert len(seen) == 1
    (w,) = seen
    assert w.category is InferredTypesWarning
    text = str(w.message)
    assert "inferred from the file's rows" in text and "public facts" in text
    # The declaration names every inferred column with its type, in the Python API's terms;
    # income holds an empty field: pandas reads it as float, DuckDB as an integer.
    income = "float" if engine == "pandas" else "int"
    assert f"schema={{'pid': 'int', 'name': 'str', 'income': '{income}'}}" in text
    assert w.filename == __file__  # pointed at the curator's call
    _shows_no_value(text)


def test_declared_columns_are_left_out_and_a_fully_declared_file_is_not_warned_about(
    people: Path,
) -> None:
    budget = pq.Budget(1)
    (w,) = _loaded(lambda: pq.PrivateFrame.from_csv(people, budget, schema={"income": "int"}))
    assert "schema={'pid': 'int', 'name': 'str'}" in str(w.message)
    every = {"pid": "int", "name": "str", "income": "int"}
    assert _loaded(lambda: pq.PrivateFrame.from_csv(people, budget, schema=every)) == []


def test_parquet_files_and_dataframes_carry_their_own_types(tmp_path: Path) -> None:
    df = pd.DataFrame({"pid": [1, 2], "income": [3.0, None]})
    df.to_parquet(tmp_path / "people.parquet")
    budget = pq.Budget(1)
    assert _loaded(lambda: pq.PrivateFrame.from_parquet(tmp_path / "people.parquet", budget)) == []
    assert _loaded(lambda: pq.PrivateFrame(df, budget)) == []


def test_a_registered_csv_frame_was_warned_about_once_when_read(people: Path) -> None:
    def load() -> None:
        frame = pq.PrivateFrame.from_csv(people, pq.Budget(1))
        session = pq.Session()
        session.register("people", frame)  # a second wrap of nothing: no second warning
        session.sql("DESCRIBE people")

    assert len(_loaded(load)) == 1


def test_the_command_line_warns_with_its_schema_flags(
    people: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["query", f"people={people}", "--epsilon", "1", "--no-ledger"]
    assert main([*argv, "SELECT COUNT(*) AS n FROM people"]) == 0
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if "inferred" in x]
    assert len(lines) == 1
    assert lines[0].startswith(f"pinqpy: warning: table people ({people}): column types")
    assert lines[0].endswith("--schema pid=int --schema name=str --schema income=float")
    _shows_no_value(err)
    declared = ["--schema", "pid=int", "--schema", "name=str", "--schema", "income=int"]
    assert main([*argv, *declared, "SELECT COUNT(*) AS n FROM people"]) == 0
    assert "inferred" not in capsys.readouterr().err


def test_the_command_line_demo_sample_is_not_warned_about(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["query", "--demo-data", "--no-ledger", "SELECT COUNT(*) AS n FROM pums"]) == 0
    assert "inferred" not in capsys.readouterr().err


CONFIG = """
[server]
ledger = "ledger.db"
tokens = "tokens.json"

[tables.people]
source = "csv"
path = "people.csv"
{schema}

[tables.pums]
source = "csv"
path = "{pums}"
engine = "duckdb"
[tables.pums.schema]
age = "int"
sex = "int"
educ = "int"
race = "int"
income = "float"
married = "int"

[analysts.alice]
tables = ["people", "pums"]
budget = {{ epsilon = 1 }}

[analysts.bob]
tables = ["people"]
budget = {{ epsilon = 1 }}
"""


def _server_warnings(people: Path, schema: str) -> list[str]:
    config = people.parent / "server.toml"
    config.write_text(CONFIG.format(schema=schema, pums=PUMS_PATH))
    state = ServerState(load_config(config))
    try:
        return inferred_type_warnings(state)
    finally:
        state.close()


def test_the_server_warns_once_per_configured_table_with_its_config_line(people: Path) -> None:
    (line,) = _server_warnings(people, "")  # people, granted to two analysts: one warning
    assert line.startswith("table people: column types were inferred")
    assert line.endswith(
        'schema = { pid = "int", name = "str", income = "float" } under [tables.people]'
    )
    _shows_no_value(line)
    declared = 'schema = { pid = "int", name = "str", income = "int" }'
    assert _server_warnings(people, declared) == []


def test_the_bundled_server_sample_declares_its_types(tmp_path: Path) -> None:
    cfg = load_config(demo_config())
    # As pinqpy serve --demo runs it: its ledger and tokens in a scratch folder.
    cfg = replace(cfg, ledger=tmp_path / "demo.ledger.db", tokens=tmp_path / "tokens.json")
    state = ServerState(cfg)
    try:
        assert inferred_type_warnings(state) == []
    finally:
        state.close()
