"""The Python expression builder: pq.col(...) expressions mean what the strings mean."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from pinqpy.api.expressions import Expression, as_expr, case, col, func, lit
from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import Binary, Column, Literal
from pinqpy.expr.check import check_expression
from pinqpy.expr.pandas_eval import evaluate, predicate_mask
from pinqpy.expr.parser import parse_expression

DF = pd.DataFrame(
    {
        "age": [12, 18, 40, 70, 33],
        "income": [0.0, 1500.0, np.nan, 40000.0, 52000.5],
        "sex": ["F", "M", "F", None, "M"],
        "state": ["CA", "NY", "TX", "CA", "WA"],
    }
)


@pytest.mark.parametrize(
    ("built", "text"),
    [
        (col("age") >= 18, "age >= 18"),
        ((col("age") >= 18) & (col("sex") == "F"), "age >= 18 AND sex = 'F'"),
        ((col("age") < 18) | ~(col("sex") != "M"), "age < 18 OR NOT sex <> 'M'"),
        (col("income") / 1000, "income / 1000"),
        ((col("age") + 1) * 2, "(age + 1) * 2"),
        (col("age") - (col("age") - 1), "age - (age - 1)"),
        (100 - col("age"), "100 - age"),
        (2 * col("age") % 7, "2 * age % 7"),
        (-col("age"), "-age"),
        (-lit(5) + col("age"), "-5 + age"),
        (col("age") // 10, "FLOOR(age / 10)"),
        (col("age") ** 2, "POWER(age, 2)"),
        (col("state").isin(["CA", "NY"]), "state IN ('CA', 'NY')"),
        (~col("state").isin(["CA"]), "NOT state IN ('CA')"),
        (col("age").between(18, 65), "age BETWEEN 18 AND 65"),
        (col("state").like("C%"), "state LIKE 'C%'"),
        (col("sex").is_null(), "sex IS NULL"),
        (col("sex").is_not_null(), "sex IS NOT NULL"),
        (col("income").cast("int"), "CAST(income AS INT)"),
        (col("age").abs(), "ABS(age)"),
        ((col("income") / 3).floor(), "FLOOR(income / 3)"),
        ((col("income") / 3).ceil(), "CEIL(income / 3)"),
        ((col("income") / 3).round(), "ROUND(income / 3)"),
        ((col("income") / 3).round(2), "ROUND(income / 3, 2)"),
        (col("income").sqrt(), "SQRT(income)"),
        (col("income").ln(), "LN(income)"),
        (col("age").exp(), "EXP(age)"),
        (col("sex").lower(), "LOWER(sex)"),
        (col("sex").upper(), "UPPER(sex)"),
        (col("state").length(), "LENGTH(state)"),
        (col("sex").coalesce("?"), "COALESCE(sex, '?')"),
        (col("income").coalesce(col("age"), 0), "COALESCE(income, age, 0)"),
        (func("greatest", col("age"), 21), "GREATEST(age, 21)"),
        (
            case((col("age") < 18, "minor"), else_="adult"),
            "CASE WHEN age < 18 THEN 'minor' ELSE 'adult' END",
        ),
        (col("state").substr(1, 1), "SUBSTR(state, 1, 1)"),
    ],
)
def test_builder_matches_strings(built: Expression, text: str) -> None:
    parsed = parse_expression(text)
    assert built.expr == parsed
    assert built.to_sql() == parsed.to_sql()
    got, want = evaluate(built.expr, DF), evaluate(parsed, DF)
    pd.testing.assert_series_equal(got, want)


def test_predicates_evaluate_identically() -> None:
    built = (col("age") >= 18) & (col("income") > 1000)
    text = "age >= 18 AND income > 1000"
    assert np.array_equal(
        predicate_mask(built.expr, DF), predicate_mask(parse_expression(text), DF)
    )
    assert predicate_mask(built.expr, DF).tolist() == [False, True, False, True, True]


def test_reflected_logic_with_python_bools() -> None:
    assert (True & (col("age") > 1)).to_sql() == "TRUE AND age > 1"
    assert ((col("age") > 1) | False).to_sql() == "age > 1 OR FALSE"


def test_comparisons_return_expressions_not_bools() -> None:
    e = col("age") == 18
    assert isinstance(e, Expression)
    assert isinstance(col("a") != col("b"), Expression)


def test_bool_raises_with_hint() -> None:
    with pytest.raises(PinqError, match="&"):
        bool(col("age") > 1)
    with pytest.raises(PinqError):
        if col("age") > 1:
            pass
    with pytest.raises(PinqError):
        _ = 0 < col("age") < 10
    with pytest.raises(PinqError):
        _ = (col("age") > 1) and (col("age") < 5)


def test_not_hashable() -> None:
    with pytest.raises(TypeError):
        hash(col("age"))


def test_repr_and_str() -> None:
    e = (col("age") >= 18) & (col("sex") == "F")
    assert repr(e) == "Expression(\"age >= 18 AND sex = 'F'\")"
    assert str(e) == "age >= 18 AND sex = 'F'"
    assert Expression("age+1").to_sql() == "age + 1"


def test_lit_values() -> None:
    assert lit(3).expr == Literal(3)
    assert lit(2.5).expr == Literal(2.5)
    assert lit(True).expr == Literal(True)
    assert lit(None).expr == Literal(None)
    assert lit(np.int64(7)).expr == Literal(7)
    assert lit(np.float32(0.5)).expr == Literal(0.5)
    assert lit(np.bool_(True)).expr == Literal(True)
    assert lit(float("nan")).expr == Literal(None)
    assert lit(dt.date(2020, 1, 31)).expr == Literal("2020-01-31")
    assert lit(pd.Timestamp("2020-01-31 12:00")).expr == Literal("2020-01-31 12:00:00")
    assert lit(-4).to_sql() == "-4"
    with pytest.raises(PinqError):
        lit(float("inf"))
    with pytest.raises(PinqError):
        lit([1, 2])
    with pytest.raises(PinqError):
        lit(object())


def test_col_and_func_validation() -> None:
    assert col("odd name").to_sql() == '"odd name"'
    with pytest.raises(PinqError):
        col("")
    with pytest.raises(PinqError):
        col(3)  # type: ignore[arg-type]
    with pytest.raises(PinqError):
        func("bad name", 1)
    with pytest.raises(PinqError):
        col("age").cast("NOTATYPE")
    with pytest.raises(PinqError):
        col("age").isin("abc")
    with pytest.raises(PinqError):
        col("age").like(3)  # type: ignore[arg-type]
    with pytest.raises(PinqError):
        case()


def test_empty_isin_is_false_like_pandas() -> None:
    e = col("state").isin([])
    assert predicate_mask(e.expr, DF).tolist() == [False] * 5
    assert predicate_mask((~e).expr, DF).tolist() == [True] * 5


def test_builder_expressions_are_checked_with_carets_into_sql() -> None:
    schema = {"age": "int", "sex": "str"}
    e = (col("age") >= 18) & (col("sexx") == "F")
    with pytest.raises(PinqSyntaxError) as info:
        check_expression(e.expr, schema)
    err = info.value
    assert "did you mean 'sex'" in err.message
    assert err.text == "age >= 18 AND sexx = 'F'"
    assert err.column == 15


def test_builder_round_trips_through_sql() -> None:
    e = case((col("age").between(0, 17), "minor"), (col("sex").is_null(), None), else_=-1.5)
    assert parse_expression(e.to_sql()) == e.expr


def test_as_expr() -> None:
    e, text = as_expr("age > 1")
    assert e == Binary(">", Column("age"), Literal(1))
    assert text == "age > 1"
    e2, text2 = as_expr(col("age") > 1)
    assert e2 == e and text2 is None
    e3, text3 = as_expr(e)
    assert e3 is e and text3 is None
    with pytest.raises(PinqError, match="the filter must be"):
        as_expr(42, what="the filter")  # type: ignore[arg-type]
    with pytest.raises(PinqSyntaxError):
        as_expr("age >")
