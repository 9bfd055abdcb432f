"""Did-you-mean offers only close names: within a few edits relative to the name's length
(pinqpy.core.names), in SQL, in Python expressions and in the frame's column checks."""

from __future__ import annotations

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.core.names import closest, edit_distance, max_edits
from pinqpy.errors import PinqSyntaxError

COLUMNS = ["age", "sex", "educ", "race", "income", "married"]


@pytest.mark.parametrize(
    ("written", "offered"),
    [
        ("agee", "age"),  # one insertion
        ("nage", "age"),
        ("incmoe", "income"),  # a swap of neighbours is one edit
        ("INCOME", "income"),  # case alone
        ("marreid", "married"),
        ("educaton", None),  # four edits from educ
        ("nope", None),  # the example: nothing like any column
        ("salary", None),
        ("x", None),
    ],
)
def test_only_close_names_are_offered(written: str, offered: str | None) -> None:
    assert closest(written, COLUMNS) == offered


def test_the_edit_bound_grows_with_the_length() -> None:
    assert [max_edits("a" * n) for n in (1, 5, 6, 8, 9, 12)] == [1, 1, 2, 2, 3, 4]
    assert edit_distance("nope", "income") > max_edits("nope")


def _people() -> pq.Session:
    session = pq.Session()
    df = pd.DataFrame({"age": [30, 40], "income": [1.0, 2.0]})
    session.register("people", df, budget=pq.Budget(1), bounds={"age": (0, 100)})
    return session


@pytest.mark.parametrize(
    ("query", "hint"),
    [
        ("SELECT AVG(nope) FROM people", None),
        ("SELECT AVG(agee) FROM people", "'age'"),
        ("SELECT COUNT(*) FROM peple", "'people'"),
        ("SELECT COUNT(*) FROM nothing", None),
        ("SELECT COUNT(*) FROM people WHERE FOO(age) > 1", None),
        ("SELECT COUNT(*) FROM people WHERE FLOR(age) > 1", "FLOOR"),
    ],
)
def test_sql_errors_suggest_only_close_names(query: str, hint: str | None) -> None:
    with pytest.raises(PinqSyntaxError) as info:
        _people().sql(query, epsilon=0.1)
    message = info.value.message
    if hint is None:
        assert "did you mean" not in message, message
    else:
        assert f"did you mean {hint}?" in message, message


def test_python_expressions_and_column_lists_suggest_only_close_names() -> None:
    frame = _people().table("people")
    with pytest.raises(PinqSyntaxError) as far:
        frame.where("nope > 1")
    assert "did you mean" not in far.value.message
    with pytest.raises(PinqSyntaxError) as near:
        frame.select("agee")
    assert "did you mean 'age'?" in near.value.message
    with pytest.raises(PinqSyntaxError) as unrelated:
        frame.select("nope")
    assert "did you mean" not in unrelated.value.message
