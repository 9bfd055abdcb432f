"""Static checks: unknown names, argument counts, aggregates, types; positions and carets."""

from __future__ import annotations

import pytest

from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import Binary, Call, Column, Literal
from pinqpy.expr.check import check_expression, infer_type
from pinqpy.expr.parser import parse_expression

SCHEMA = {
    "age": "int",
    "income": "float",
    "sex": "str",
    "married": "bool",
    "born": "datetime",
    "misc": "any",
    "Mixed": "int",
}


def check(text: str, **kwargs: object) -> str:
    return check_expression(parse_expression(text), SCHEMA, text=text, **kwargs)  # type: ignore[arg-type]


def fails(text: str, **kwargs: object) -> PinqSyntaxError:
    with pytest.raises(PinqSyntaxError) as info:
        check(text, **kwargs)
    return info.value


# -- result types ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "type_"),
    [
        ("age", "int"),
        ("age + 1", "int"),
        ("age / 2", "float"),
        ("age % 7", "int"),
        ("age * income", "float"),
        ("-age", "int"),
        ("age >= 18 AND sex = 'F'", "bool"),
        ("NOT married", "bool"),
        ("married + 1", "int"),
        ("sex || age", "str"),
        ("CASE WHEN age > 1 THEN 1 ELSE 2.5 END", "float"),
        ("CASE WHEN age > 1 THEN 'a' END", "str"),
        ("CASE WHEN age > 1 THEN NULL END", "any"),
        ("CAST(age AS VARCHAR)", "str"),
        ("CAST(sex AS INT)", "int"),
        ("CAST(age AS DOUBLE)", "float"),
        ("CAST(sex AS DATE)", "datetime"),
        ("FLOOR(income / 10)", "int"),
        ("ROUND(income)", "int"),
        ("ROUND(income, 2)", "float"),
        ("ABS(age)", "int"),
        ("SQRT(age)", "float"),
        ("POWER(age, 2)", "float"),
        ("LEAST(age, 3)", "int"),
        ("GREATEST(age, income)", "float"),
        ("COALESCE(sex, 'x')", "str"),
        ("NULLIF(age, 0)", "int"),
        ("IF(married, 1, 0)", "int"),
        ("LOWER(sex)", "str"),
        ("LENGTH(sex)", "int"),
        ("SUBSTR(sex, 1, 2)", "str"),
        ("CONCAT(sex, age, NULL)", "str"),
        ("born > '2020-01-01'", "bool"),
        ("misc + 1", "any"),
        ("misc LIKE 'a%'", "bool"),
        ("age IN (1, 2.5)", "bool"),
        ("sex LIKE 'F%'", "bool"),
        ("age IS NULL", "bool"),
        ("age BETWEEN 1 AND 2", "bool"),
    ],
)
def test_result_types(text: str, type_: str) -> None:
    assert check(text) == type_


@pytest.mark.parametrize(
    ("text", "type_"),
    [
        ("COUNT(*)", "int"),
        ("COUNT(sex)", "int"),
        ("COUNT(DISTINCT sex)", "int"),
        ("SUM(income)", "float"),
        ("SUM(income, 0, 1e5)", "float"),
        ("AVG(income / 1000, 0, 200)", "float"),
        ("MEDIAN(age)", "float"),
        ("PERCENTILE(age, 0.9)", "float"),
        ("QUANTILE(age, 0.5, 0, 100)", "float"),
        ("VARIANCE(age, -1, 1)", "float"),
        ("STDDEV(age)", "float"),
        ("MIN(age)", "float"),
        ("MAX(age, 0, 120)", "float"),
        ("SUM(married)", "float"),
        ("COUNT(*) + 1", "int"),
    ],
)
def test_aggregates_where_allowed(text: str, type_: str) -> None:
    assert check(text, allow_aggregates=True) == type_


# -- unknown names -----------------------------------------------------------------------------
def test_unknown_column_with_suggestion_and_caret() -> None:
    err = fails("agee > 1")
    assert err.message == "unknown column 'agee'; did you mean 'age'?"
    assert (err.line, err.column) == (1, 1)
    assert str(err).splitlines()[1:] == ["  agee > 1", "  ^"]


def test_unknown_column_position_deep_inside() -> None:
    text = "age > 1 AND\n  LOWER(sexx) = 'f'"
    err = fails(text)
    assert (err.line, err.column) == (2, 9)
    assert "did you mean 'sex'?" in err.message


def test_suggestion_prefers_case_difference() -> None:
    assert "did you mean 'Mixed'?" in fails("mixed + 1").message
    assert "did you mean 'age'?" in fails("AGE + 1").message


def test_no_suggestion_when_nothing_is_close() -> None:
    err = fails("zzzz = 1")
    assert err.message == "unknown column 'zzzz'"


def test_double_quoted_string_hint() -> None:
    err = fails('sex = "Female"')
    assert "single quotes" in err.message
    assert (err.line, err.column) == (1, 7)


def test_unknown_function() -> None:
    err = fails("age > 1 AND LOWR(sex) = 'f'")
    assert "unknown function 'LOWR'" in err.message
    assert "LOWER" in err.message
    assert (err.line, err.column) == (1, 13)


def test_unknown_cast_type() -> None:
    err = fails("CAST(age AS INTEGR)")
    assert "unknown type 'INTEGR'" in err.message
    assert "INTEGER" in err.message


def test_qualified_columns() -> None:
    schema = {"v.visits": "int", "age": "int"}
    assert check_expression(parse_expression("v.visits + t.age"), schema) == "int"
    with pytest.raises(PinqSyntaxError):
        check_expression(parse_expression("v.nope"), schema)


# -- argument counts ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("ROUND(age, 1, 2)", "ROUND takes 1 or 2 arguments"),
        ("ABS()", "ABS takes 1 argument"),
        ("ABS(age, 1)", "ABS takes 1 argument"),
        ("POWER(age)", "POWER takes 2 arguments"),
        ("LEAST()", "LEAST takes at least 1 argument"),
        ("SUBSTR(sex)", "SUBSTR takes 2 or 3 arguments"),
        ("NULLIF(age)", "NULLIF takes 2 arguments"),
    ],
)
def test_scalar_arity(text: str, fragment: str) -> None:
    err = fails(text)
    assert fragment in err.message
    assert (err.line, err.column) == (1, 1)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("SUM(age, 0)", "SUM takes 1 or 3 arguments"),
        ("AVG(age, 0, 1, 2)", "AVG takes 1 or 3 arguments"),
        ("PERCENTILE(age)", "PERCENTILE takes 2 or 4 arguments"),
        ("QUANTILE(age, 0.5, 0)", "QUANTILE takes 2 or 4 arguments"),
        ("COUNT(age, sex)", "COUNT takes 1 argument"),
        ("COUNT()", "COUNT takes 1 argument"),
        ("MEDIAN(age, 1)", "MEDIAN takes 1 or 3 arguments"),
        ("SUM(*)", "only COUNT(*)"),
        ("SUM(DISTINCT age)", "COUNT(DISTINCT x)"),
    ],
)
def test_aggregate_arity(text: str, fragment: str) -> None:
    err = fails(text, allow_aggregates=True)
    assert fragment in err.message


def test_aggregate_bounds_must_be_constant_numbers() -> None:
    assert "constant number" in fails("SUM(age, 0, income)", allow_aggregates=True).message
    assert "constant number" in fails("SUM(age, 'a', 1)", allow_aggregates=True).message
    assert "lower <= upper" in fails("SUM(age, 10, 1)", allow_aggregates=True).message
    assert "between 0 and 1" in fails("PERCENTILE(age, 1.5)", allow_aggregates=True).message
    assert check("SUM(age, -1e3, 2 * 500)", allow_aggregates=True) == "float"


# -- aggregates --------------------------------------------------------------------------------
def test_aggregate_not_allowed_in_row_expressions() -> None:
    err = fails("age > AVG(age)")
    assert "aggregate AVG is not allowed here" in err.message
    assert (err.line, err.column) == (1, 7)


def test_nested_aggregates() -> None:
    err = fails("SUM(COUNT(*))", allow_aggregates=True)
    assert "cannot be nested" in err.message
    assert (err.line, err.column) == (1, 5)


# -- types -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "fragment", "column"),
    [
        ("'abc' + 1", "is a string", 1),
        ("age + sex", "is a string", 7),
        ("LOWER(age)", "LOWER needs a string", 7),
        ("LENGTH(income)", "LENGTH needs a string", 8),
        ("age AND married", "true/false", 1),
        ("NOT age", "true/false", 5),
        ("sex LIKE 'a%' OR age LIKE '1%'", "LIKE needs a string", 18),
        ("age = 'x'", "cannot compare int with str", 7),
        ("sex < 3", "cannot compare str with int", 7),
        ("age IN (1, 'a')", "cannot compare", 12),
        ("CASE WHEN married THEN 1 ELSE 'x' END", "mixes values", 31),
        ("CASE WHEN age THEN 1 END", "true/false", 11),
        ("born + 1", "needs numbers", 1),
        ("-sex", "unary minus", 2),
        ("SQRT(sex)", "SQRT needs a number", 6),
        ("sex LIKE age", "pattern", 10),
        ("sex LIKE sex", "constant string", 10),
        ("SUBSTR(sex, age)", "constant integer", 13),
        ("CAST(born AS INT)", "cannot CAST", 6),
    ],
)
def test_type_errors(text: str, fragment: str, column: int) -> None:
    err = fails(text)
    assert fragment in err.message
    assert (err.line, err.column) == (1, column)


def test_aggregate_of_string() -> None:
    err = fails("SUM(sex)", allow_aggregates=True)
    assert "SUM needs numbers" in err.message
    assert err.column == 5
    assert check("COUNT(sex)", allow_aggregates=True) == "int"


def test_any_type_is_never_a_type_error() -> None:
    for text in ["misc + 1", "LOWER(misc)", "misc AND age > 1", "SUM(misc)", "misc = 'x'"]:
        check(text, allow_aggregates=True)


# -- no source text ----------------------------------------------------------------------------
def test_error_without_text_points_into_canonical_sql() -> None:
    e = Binary(">=", Call("ABS", (Column("agee"),)), Literal(18))
    with pytest.raises(PinqSyntaxError) as info:
        check_expression(e, SCHEMA)
    err = info.value
    assert err.text == "ABS(agee) >= 18"
    assert (err.line, err.column) == (1, 5)
    assert str(err).splitlines()[-1] == "  " + " " * 4 + "^"


def test_errors_are_pinq_errors() -> None:
    assert issubclass(PinqSyntaxError, PinqError)


def test_infer_type_never_raises() -> None:
    assert infer_type(parse_expression("nope + 1"), SCHEMA) == "any"
    assert infer_type(parse_expression("age > 1"), SCHEMA) == "bool"


# -- other systems' spellings ------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        "VAR(age)",
        "VAR_SAMP(age, 0, 100)",
        "VAR_POP(age)",
        "STD(income)",
        "STDDEV_SAMP(income)",
        "STDDEV_POP(income, 0, 10)",
        "PERCENTILE_CONT(age, 0.9)",
        "PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age)",
    ],
)
def test_aggregate_spellings_check(text: str) -> None:
    assert check(text, allow_aggregates=True) == "float"


def test_percentile_cont_level_is_checked() -> None:
    err = fails("PERCENTILE_CONT(age, 1.5)", allow_aggregates=True)
    assert "between 0 and 1" in err.message and err.column == 22


def test_pi_is_a_float_constant() -> None:
    assert check("PI() * age") == "float"
    err = fails("age > PI(2)")
    assert err.message == "PI() takes no arguments" and err.column == 7


@pytest.mark.parametrize("name", ["RAND", "random"])
def test_random_values_are_refused(name: str) -> None:
    err = fails(f"age + {name}() > 1")
    assert "not supported: a random value per row could not be reproduced" in err.message
    assert err.column == 7


@pytest.mark.parametrize(
    ("text", "hint"),
    [("NVL(age, 0)", "COALESCE(x, y)"), ("LEN(sex)", "LENGTH(s)"), ("MOD(age, 2)", "a % b")],
)
def test_other_functions_name_the_pinqpy_spelling(text: str, hint: str) -> None:
    err = fails(text)
    assert err.message.endswith(f"pinqpy writes {hint}") and err.column == 1
