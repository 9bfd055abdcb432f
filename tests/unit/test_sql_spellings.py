"""SQL name resolution and other systems' spellings, on sessions built for each rule (the
fixed SQL session of tests/sql cannot hold tables that differ only in case or share a last
name part)."""

from __future__ import annotations

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.expr.check import read_untyped_literals
from pinqpy.expr.parser import parse_expression
from pinqpy.sql.compiler import resolve_table


def _session(**tables: pd.DataFrame) -> pq.Session:
    s = pq.Session()
    for name, df in tables.items():
        s.register(name.replace("__", "."), df, budget=pq.Budget(epsilon=100))
    return s


def _df() -> pd.DataFrame:
    return pd.DataFrame({"age": [10, 20, 30, 40, 50], "AGE": [1, 1, 1, 1, 99]})


def _error(s: pq.Session, query: str) -> pq.PinqSyntaxError:
    with pytest.raises(pq.PinqSyntaxError) as info:
        s.sql(query, epsilon=1)
    return info.value


@pytest.mark.parametrize(
    ("names", "written", "found"),
    [
        (["pums"], "PUMS.PUMS", ["pums"]),
        (["pums"], "x.pums", ["pums"]),
        (["census.pums", "pums"], "census.pums", ["census.pums"]),
        (["census.pums", "pums"], "pums", ["pums"]),
        (["census.pums"], "pums", ["census.pums"]),
        (["a.t", "b.t"], "t", ["a.t", "b.t"]),
        (["a.t", "b.t"], "B.T", ["b.t"]),
        (["a.t", "b.t"], "c.t", []),
        (["pums", "PUMS"], "pums", ["pums"]),
        (["pums", "PUMS"], "Pums", ["pums", "PUMS"]),
    ],
)
def test_resolve_table(names: list[str], written: str, found: list[str]) -> None:
    path = tuple((part, False) for part in written.split("."))
    assert resolve_table(names, path) == found


def test_quoted_table_parts_are_exact() -> None:
    assert resolve_table(["pums"], (("PUMS", True),)) == []
    assert resolve_table(["census.pums"], (("census.pums", True),)) == ["census.pums"]


def test_exact_case_wins_then_ambiguity() -> None:
    s = _session(t=_df())
    with pq.testing.no_noise():
        assert s.sql("SELECT COUNT(*) AS n FROM t WHERE age > 25", epsilon=1)["n"][0] == 3
        assert s.sql('SELECT COUNT(*) AS n FROM t WHERE "AGE" > 25', epsilon=1)["n"][0] == 1
        out = s.sql("SELECT SUM(AGE, 0, 100) AS total FROM T", epsilon=1)
    assert out["total"][0] == 103
    err = _error(s, "SELECT COUNT(*) FROM t\nWHERE Age > 25")
    assert "ambiguous" in err.message and (err.line, err.column) == (2, 7)
    assert "^" in str(err)


def test_ambiguous_table_points_at_the_name() -> None:
    s = _session(a__t=_df(), b__t=_df())
    err = _error(s, "SELECT COUNT(*)\nFROM t")
    assert "table name 't' is ambiguous" in err.message and (err.line, err.column) == (2, 6)
    with pq.testing.no_noise():
        assert s.sql("SELECT COUNT(*) AS n FROM B.T", epsilon=1)["n"][0] == 5


def test_full_dotted_name_wins() -> None:
    s = _session(census__t=_df().head(2), t=_df())
    with pq.testing.no_noise():
        assert s.sql("SELECT COUNT(*) AS n FROM census.t", epsilon=1)["n"][0] == 2
        assert s.sql("SELECT COUNT(*) AS n FROM other.t", epsilon=1)["n"][0] == 5


def test_unaliased_output_keeps_the_real_column_name() -> None:
    s = pq.Session()
    df = pd.DataFrame({"Sex": [0, 1, 1], "x": [1, 2, 3]})
    s.register("t", df, budget=pq.Budget(epsilon=10), keys={"Sex": [0, 1]})
    with pq.testing.no_noise():
        out = s.sql("SELECT SEX, COUNT(*) AS Count FROM t GROUP BY sex", epsilon=1)
    assert list(out.columns) == ["Sex", "Count"]


def test_refusals_charge_nothing() -> None:
    s = _session(t=_df())
    budget = s.table("t").stabilities  # the budgets behind the table
    before = [b.spent for b in budget]
    for query in (
        "SELECT COUNT(*) FROM t WHERE RAND() < 0.5",
        "SELECT COUNT(*) FROM t WHERE age > '2x'",
        "SELECT age, COUNT(*) FROM t GROUP BY 2",
        "SELECT TOP 2 COUNT(*) FROM t LIMIT 1",
    ):
        _error(s, query)
    assert [b.spent for b in budget] == before


def test_read_untyped_literals() -> None:
    schema = {"age": "int", "income": "float", "name": "str"}

    def read(text: str) -> str:
        return read_untyped_literals(parse_expression(text), schema).to_sql()

    assert read("'30' < age") == "30 < age"
    assert read("age + 1 IN ('1', ' 2 ')") == "age + 1 IN (1, 2)"
    assert read("income >= '1e3'") == "income >= 1000.0"
    assert read("name = '30'") == "name = '30'"  # a string column keeps its string
    with pytest.raises(pq.PinqSyntaxError, match="not an integer"):
        read("age = '1_000'")
    with pytest.raises(pq.PinqSyntaxError, match="not a number"):
        read("income BETWEEN '' AND 5")
