"""BigQuery's differential-privacy SQL: parsing its named arguments and options, reading its
bounds, and the privacy of what the compiler makes of them."""

from __future__ import annotations

from fractions import Fraction

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import Call, Column, Literal, NamedArg
from pinqpy.expr.check import check_expression
from pinqpy.expr.parser import parse_expression
from pinqpy.sql.bigquery import Contribution, normalize_call, split_bounds
from pinqpy.sql.parser import parse_statement


def first_call(sql: str, positions: bool = True) -> Call:
    s = parse_statement(sql, positions=positions)
    expr = s.items[0].expr
    assert isinstance(expr, Call)
    return expr


# -- parsing ----------------------------------------------------------------------------------
def test_named_pair_is_a_named_argument() -> None:
    call = first_call("SELECT SUM(x, contribution_bounds_per_group => (0, 100)) FROM t")
    assert call.name == "SUM"
    assert call.args == (
        Column("x"),
        NamedArg("contribution_bounds_per_group", (Literal(0), Literal(100)), True),
    )


def test_named_arguments_after_star_and_distinct() -> None:
    star = first_call("SELECT COUNT(*, contribution_bounds_per_group=>(0, 5)) FROM t")
    assert star.star and star.args == (
        NamedArg("contribution_bounds_per_group", (Literal(0), Literal(5)), True),
    )
    distinct = first_call("SELECT COUNT(DISTINCT x, a => 1) FROM t")
    assert distinct.distinct and distinct.args == (Column("x"), NamedArg("a", (Literal(1),)))


def test_named_argument_names_are_lower_case_and_case_insensitive() -> None:
    call = first_call("SELECT AVG(x, Contribution_Bounds_Per_Row => (-1, 1)) FROM t")
    arg = call.args[1]
    assert isinstance(arg, NamedArg) and arg.name == "contribution_bounds_per_row"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT SUM(x, contribution_bounds_per_group => (0, 100)) FROM t",
        "SELECT COUNT(*, contribution_bounds_per_group => (0, 5)) FROM t",
        "SELECT PERCENTILE(x, 0.5, contribution_bounds_per_row => (0, 100)) FROM t",
        "SELECT ANON_SUM(x CLAMPED BETWEEN 0 AND 10) FROM t",
    ],
)
def test_to_sql_reads_back_and_the_fast_parse_agrees(sql: str) -> None:
    call = first_call(sql)
    assert first_call(sql, positions=False) == call
    again = first_call(f"SELECT {call.to_sql()} FROM t")
    assert again == call


def test_clamped_between_becomes_a_named_pair() -> None:
    call = first_call("SELECT ANON_SUM(x CLAMPED BETWEEN 0 AND 10) FROM t")
    assert call.args[1] == NamedArg("clamped_between", (Literal(0), Literal(10)), True)
    assert call.args[1].pos is not None and call.args[1].pos.column == 19


def test_clamped_is_still_a_column_name() -> None:
    s = parse_statement("SELECT clamped, COUNT(*) FROM t GROUP BY clamped")
    assert s.items[0].expr == Column("clamped")


def test_anonymization_clause_and_kappa() -> None:
    s = parse_statement(
        "SELECT WITH ANONYMIZATION OPTIONS (epsilon = 1, kappa = 2) ANON_COUNT(*) FROM t"
    )
    assert s.options == (("epsilon", 1), ("max_groups_contributed", 2))


def test_null_and_qualified_option_values() -> None:
    s = parse_statement(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (max_groups_contributed = NULL, "
        "privacy_unit_column = members.id) COUNT(*) FROM t AS members"
    )
    assert s.options == (("max_groups_contributed", None), ("privacy_unit_column", "members.id"))


def test_arrow_outside_a_call_is_a_syntax_error() -> None:
    with pytest.raises(PinqSyntaxError):
        parse_statement("SELECT COUNT(*) FROM t WHERE x => 1")


# -- reading the named arguments ---------------------------------------------------------------
TEXT = "SELECT ..."


def test_split_bounds_returns_the_plain_call_and_the_bound() -> None:
    call = first_call("SELECT SUM(x, contribution_bounds_per_group => (0, 100)) FROM t")
    plain, bound = split_bounds(call, TEXT)
    assert plain == Call("SUM", (Column("x"),))
    assert bound == Contribution("group", 0.0, 100.0)


def test_split_bounds_without_named_arguments_is_the_call() -> None:
    call = first_call("SELECT SUM(x, 0, 1) FROM t")
    assert split_bounds(call, TEXT) == (call, None)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT SUM(x, clamp => (0, 1)) FROM t", "unknown named argument 'clamp'"),
        ("SELECT SUM(x, contribution_bounds_per_group => 1) FROM t", "takes a pair"),
        ("SELECT SUM(x, contribution_bounds_per_group => (y, 1)) FROM t", "constant numbers"),
        ("SELECT SUM(x, contribution_bounds_per_group => (2, 1)) FROM t", "lo > hi"),
        ("SELECT MEDIAN(x, contribution_bounds_per_group => (0, 1)) FROM t", "computed over rows"),
        ("SELECT COUNT(x, contribution_bounds_per_row => (0, 1)) FROM t", "no values to clamp"),
        ("SELECT COUNT(DISTINCT x, contribution_bounds_per_group => (0, 1)) FROM t", "DISTINCT"),
        ("SELECT ABS(x, contribution_bounds_per_row => (0, 1)) FROM t", "not a noisy aggregate"),
    ],
)
def test_split_bounds_refusals_point_at_the_argument(sql: str, message: str) -> None:
    call = first_call(sql)
    with pytest.raises(PinqSyntaxError, match=message.replace("(", r"\(")) as info:
        split_bounds(call, sql)
    assert info.value.line == 1 and info.value.column is not None


def test_normalize_maps_anon_functions_to_their_bound_kind() -> None:
    summed = normalize_call(first_call("SELECT ANON_SUM(x CLAMPED BETWEEN 0 AND 9) FROM t"), TEXT)
    assert summed == Call(
        "SUM",
        (Column("x"), NamedArg("contribution_bounds_per_group", (Literal(0), Literal(9)), True)),
    )
    pct = normalize_call(
        first_call("SELECT ANON_PERCENTILE_CONT(x, 0.5 CLAMPED BETWEEN 0 AND 9) FROM t"), TEXT
    )
    assert isinstance(pct, Call) and pct.name == "PERCENTILE"
    assert isinstance(pct.args[2], NamedArg) and pct.args[2].name == "contribution_bounds_per_row"


def test_normalize_refuses_unsupported_private_aggregates() -> None:
    sql = "SELECT APPROX_COUNT_DISTINCT(x) FROM t"
    with pytest.raises(PinqSyntaxError, match="APPROX_COUNT_DISTINCT is not supported") as info:
        normalize_call(first_call(sql), sql)
    assert (info.value.line, info.value.column) == (1, 8)


def test_checker_refuses_named_arguments_outside_sql_releases() -> None:
    e = parse_expression("SUM(x, contribution_bounds_per_row => (0, 1))")
    with pytest.raises(PinqError, match="named argument contribution_bounds_per_row"):
        check_expression(e, {"x": "int"}, allow_aggregates=True)


# -- privacy of the compiled queries -----------------------------------------------------------
def _visits(extra_rows: int) -> pd.DataFrame:
    """Ten people with three visits each, and person 99 with ``extra_rows`` visits."""
    rows = [{"pid": p, "day": 1 + (p + j) % 3, "minutes": 10} for p in range(10) for j in range(3)]
    rows += [{"pid": 99, "day": 1 + j % 3, "minutes": 300} for j in range(extra_rows)]
    return pd.DataFrame(rows)


def _run(df: pd.DataFrame, query: str) -> tuple[pd.DataFrame, Fraction]:
    budget = pq.Budget(epsilon=100, delta=1e-3)
    session = pq.Session()
    session.register("v", df, budget=budget, privacy_unit="pid", bounds={"minutes": (0, 300)})
    with pq.testing.no_noise():
        out = session.sql(query)
    return pd.DataFrame(out), Fraction(budget.spent.epsilon)


def test_count_distinct_unit_moves_by_one_whatever_the_rows_of_a_person() -> None:
    """Removing a person removes exactly one distinct value: stability 1, no row bound."""
    query = "SELECT COUNT(DISTINCT pid) AS n FROM v OPTIONS (epsilon = 1)"
    without, spent = _run(_visits(0), query)
    with_many, _ = _run(_visits(500), query)
    assert int(with_many["n"][0]) - int(without["n"][0]) == 1
    assert spent == 1


def test_per_group_sum_bounds_one_persons_effect_on_each_group() -> None:
    """With max_groups_contributed = 1 a person adds one clamped total to one group only."""
    query = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = pid, "
        "max_groups_contributed = 1) day, SUM(minutes, contribution_bounds_per_group => "
        "(0, 50)) AS s FROM v GROUP BY day IN (1, 2, 3)"
    )
    without, spent = _run(_visits(0), query)
    with_many, _ = _run(_visits(500), query)
    assert spent == 1
    # Everyone else has 10 minutes on each day, so whichever day each keeps, they add 10:
    # the new person adds one clamped total, 50, to one group, whatever their 500 visits.
    assert without["s"].sum() == 100
    assert with_many["s"].sum() == 150


def test_row_level_table_with_a_query_unit_is_charged_twice() -> None:
    budget = pq.Budget(epsilon=10)
    session = pq.Session()
    df = pd.DataFrame({"pid": [1, 1, 2, 3], "k": [0, 1, 0, 1]})
    session.register("t", df, budget=budget)
    with pq.testing.no_noise():
        session.sql(
            "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = pid) "
            "k, COUNT(*, contribution_bounds_per_group => (0, 1)) AS n FROM t GROUP BY k IN (0, 1)"
        )
    # one unit per group at most (max_groups_contributed defaults to 1), doubled for rows
    assert Fraction(budget.spent.epsilon) == 1
    explained = session.sql(
        "EXPLAIN SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, privacy_unit_column = "
        "pid) k, COUNT(*, contribution_bounds_per_group => (0, 1)) FROM t GROUP BY k IN (0, 1)"
    )
    assert "stability 2" in explained


# -- a row-level table read per unit: the charge is the mechanism's own at stability 2 -------
def _persons_session() -> tuple[pq.Session, pq.Budget]:
    rng = pd.Series(range(1000))
    df = pd.DataFrame({"pid": rng + 1, "race": rng % 5, "age": 20 + rng % 50})
    budget = pq.Budget(epsilon=100, delta=1e-3)
    s = pq.Session()
    s.register("persons", df, budget=budget, bounds={"age": (0, 100), "pid": (1, 1000)})
    return s, budget


KEYS_PER_UNIT = (
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1, delta = 1e-6, "
    "privacy_unit_column = pid) race, COUNT(*, contribution_bounds_per_group => (0, 1)) AS n "
    "FROM persons GROUP BY race"
)


def test_key_selection_per_unit_charges_what_explain_says_and_the_delta_asked() -> None:
    s, budget = _persons_session()
    text = str(s.explain(KEYS_PER_UNIT))
    assert (
        "Total charge to budget of persons (stability 2): Cost(epsilon=1, delta=0.000001)" in text
    )
    with pq.testing.no_noise():
        s.sql(KEYS_PER_UNIT)
    # The query's own epsilon (half of it per unit, at stability 2: a changed row is its
    # unit leaving and coming back) and the threshold's own delta: each side's unit has at
    # most its G keys, and a key only one side has passes with probability at most delta.
    # The generic group rule would have charged 2·e^0.5·delta.
    assert Fraction(budget.spent.epsilon) == 1
    assert Fraction(budget.spent.delta) == Fraction(1, 10**6)


def test_a_sum_per_unit_charges_what_explain_says() -> None:
    s, budget = _persons_session()
    q = (
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 0.5, privacy_unit_column = pid) "
        "SUM(age, contribution_bounds_per_group => (0, 100)) AS total FROM persons"
    )
    assert "(stability 2): Cost(epsilon=0.5)" in str(s.explain(q))
    s.sql(q)
    assert Fraction(budget.spent.epsilon) == Fraction(1, 2) and budget.spent.delta == 0
