"""A type error on a column whose type was inferred from a CSV file says the curator can
declare it (pinqpy.pipeline.typenotes), in Python and SQL, in each interface's words; a
declared or DataFrame column, or a column inside a larger expression, gets no such note."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.errors import PinqSyntaxError
from pinqpy.interfaces.errors import for_interface, one_line

NOTE = "educ: type inferred from the file's text; the curator can declare it"


@pytest.fixture
def csv_path(tmp_path: Path) -> Path:
    path = tmp_path / "people.csv"
    pd.DataFrame({"educ": [1, 2, 3], "age": [30, 40, 50]}).to_csv(path, index=False)
    return path


def _session(path: Path, **kw: object) -> pq.Session:
    session = pq.Session()
    frame = pq.PrivateFrame.from_csv(str(path), pq.Budget(1), **kw)  # type: ignore[arg-type]
    session.register("people", frame)
    return session


@pytest.mark.parametrize(
    "condition", ["educ = 'BA'", "educ LIKE 'B%'", "educ IN ('BA', 'MA')", "NOT educ"]
)
def test_sql_type_errors_on_inferred_columns_say_how_to_declare(
    csv_path: Path, condition: str
) -> None:
    session = _session(csv_path)
    with pytest.raises(PinqSyntaxError) as info:
        session.sql(f"SELECT COUNT(*) FROM people WHERE {condition}", epsilon=0.1)
    err = info.value
    assert NOTE in err.message and "schema={'educ': TYPE}" in err.message
    assert err.line == 1 and err.column is not None  # the caret still points at the fault
    assert "--schema educ=TYPE" in one_line(err, "cli")
    assert "--schema educ=TYPE" in for_interface(err, "shell")
    assert "schema={'educ': TYPE}" in one_line(err, "magic")
    assert session.table("people").budgets[0].spent == pq.Cost(0)


def test_python_expressions_get_the_note_too(csv_path: Path) -> None:
    frame = pq.PrivateFrame.from_csv(str(csv_path), pq.Budget(1))
    with pytest.raises(PinqSyntaxError, match="type inferred from the file's text"):
        frame.where("educ = 'BA'")
    with pytest.raises(PinqSyntaxError, match="type inferred"):
        frame.assign(x=pq.col("educ").lower())


def test_no_note_where_the_type_was_not_inferred(csv_path: Path) -> None:
    declared = _session(csv_path, schema={"educ": "int"})
    with pytest.raises(PinqSyntaxError) as info:
        declared.sql("SELECT COUNT(*) FROM people WHERE educ = 'BA'", epsilon=0.1)
    assert "inferred" not in info.value.message
    frame = pq.PrivateFrame(pd.DataFrame({"educ": [1, 2]}), pq.Budget(1))
    with pytest.raises(PinqSyntaxError) as from_pandas:
        frame.where("educ = 'BA'")
    assert "inferred" not in from_pandas.value.message
    # A column inside a larger expression: declaring its type is not the fix.
    with pytest.raises(PinqSyntaxError) as inside:
        _session(csv_path).sql("SELECT COUNT(*) FROM people WHERE educ || 'x' > 3", epsilon=0.1)
    assert "inferred" not in inside.value.message


def test_the_declared_type_makes_the_query_work(csv_path: Path) -> None:
    session = _session(csv_path, schema={"educ": "str"})
    with pq.testing.no_noise():
        out = session.sql("SELECT COUNT(*) AS n FROM people WHERE educ = '2'", epsilon=0.1)
    assert int(out["n"][0]) == 1
