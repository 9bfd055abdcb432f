"""Parsing SQL statements: every clause of SQL.md, set operations, options, errors, positions."""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinqpy.core.grammar import get_parser, keywords
from pinqpy.errors import PinqSyntaxError
from pinqpy.expr.ast import Between, Binary, Call, Column, Expr, InList, Literal, Pos, Unary
from pinqpy.expr.parser import parse_tree
from pinqpy.sql.ast import (
    Describe,
    Explain,
    GroupKey,
    Join,
    OrderItem,
    Select,
    SelectItem,
    SetQuery,
    ShowBudget,
    ShowTables,
    Star,
    SubqueryFrom,
    TableFrom,
)
from pinqpy.sql.parser import _fast_parser, parse_statement


def col(name: str, table: str | None = None) -> Column:
    return Column(name, table)


def lit(v: object) -> Literal:
    return Literal(v)  # type: ignore[arg-type]


def select(text: str) -> Select:
    s = parse_statement(text)
    assert isinstance(s, Select)
    return s


def syntax_error(text: str, *, positions: bool = True) -> PinqSyntaxError:
    with pytest.raises(PinqSyntaxError) as info:
        parse_statement(text, positions=positions)
    return info.value


COUNT_STAR = Call("COUNT", (), star=True)

# Queries covering the dialect; the position and fast-path tests run over all of them.
CORPUS = [
    "SELECT COUNT(*) FROM people",
    "SELECT sex, COUNT(*) AS n, AVG(income, 0, 100000) avg_income FROM people GROUP BY sex",
    "SELECT COUNT(*) FROM (SELECT pid, COUNT(*) AS visits FROM visits GROUP BY pid) AS v\n"
    "WHERE visits > 5",
    "SELECT state, SUM(x, 0, 100) FROM t WHERE age >= 18 GROUP BY state IN ('CA', 'NY') "
    "HAVING SUM(x, 0, 100) > 10 ORDER BY state DESC LIMIT 5 OPTIONS (epsilon = 0.5, delta = 1e-6)",
    "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=10, delta=.01, privacy_unit_column=pid) "
    "item, AVG(quantity, 0, 100) average_quantity FROM professors GROUP BY item",
    "SELECT a.k, COUNT(*) FROM a JOIN b ON a.k = b.k WITH BOUNDS (5, 5) GROUP BY a.k",
    "SELECT COUNT(*) FROM a LEFT OUTER JOIN b USING (k, j) INNER JOIN c AS z ON b.q = z.q",
    "SELECT DISTINCT a FROM t UNION ALL SELECT a FROM u INTERSECT SELECT a FROM w "
    "EXCEPT SELECT a FROM x ORDER BY a LIMIT 3",
    "(SELECT a FROM t) UNION (SELECT a FROM (SELECT a FROM (SELECT a FROM v) q) r)",
    "EXPLAIN SELECT MEDIAN(age, 0, 100), PERCENTILE(income, 0.9) FROM people",
    "SHOW TABLES",
    "show budget;",
    "DESCRIBE people",
    'SELECT t.*, "odd col" AS "odd alias", `tick` FROM "odd table" t',
    "SELECT COUNT(DISTINCT pid), VARIANCE(x, 0, 1), STDDEV(x, 0, 1), MIN(x, 0, 9), MAX(x, 0, 9)\n"
    "FROM t\nWHERE x BETWEEN 1 AND 2 AND y LIKE 'a%' AND z IS NOT NULL\n"
    "GROUP BY CASE WHEN age < 30 THEN 'young' ELSE 'old' END",
    "SELECT 1",
]


# -- the shape of a query ----------------------------------------------------------------------
def test_minimal_select() -> None:
    assert select("SELECT COUNT(*) FROM people") == Select(
        items=(SelectItem(COUNT_STAR),), from_=TableFrom("people")
    )


def test_every_clause() -> None:
    q = select(
        "SELECT state, COUNT(*) AS n FROM people AS p WHERE age >= 18 GROUP BY state "
        "HAVING n > 10 ORDER BY n DESC, state LIMIT 5 OPTIONS (epsilon = 0.5, delta = 1e-6)"
    )
    assert q == Select(
        items=(SelectItem(col("state")), SelectItem(COUNT_STAR, "n")),
        from_=TableFrom("people", "p"),
        where=Binary(">=", col("age"), lit(18)),
        group_by=(GroupKey(col("state")),),
        having=Binary(">", col("n"), lit(10)),
        order_by=(OrderItem(col("n"), descending=True), OrderItem(col("state"))),
        limit=5,
        options=(("epsilon", 0.5), ("delta", 1e-6)),
    )


def test_select_without_from() -> None:
    assert select("SELECT 1").from_ is None


def test_select_items_stars_and_aliases() -> None:
    q = select('SELECT *, t.*, a AS x, b y, c AS "odd alias", d "select" FROM t')
    assert q.items == (
        SelectItem(Star()),
        SelectItem(Star("t")),
        SelectItem(col("a"), "x"),
        SelectItem(col("b"), "y"),
        SelectItem(col("c"), "odd alias"),
        SelectItem(col("d"), "select"),
    )


def test_distinct_and_all() -> None:
    assert select("SELECT DISTINCT a FROM t").distinct
    assert not select("SELECT ALL a FROM t").distinct
    assert not select("SELECT a FROM t").distinct


def test_qualified_columns() -> None:
    q = select("SELECT p.age FROM people p WHERE p.age > 1")
    assert q.items[0].expr == col("age", "p")
    assert q.where == Binary(">", col("age", "p"), lit(1))


@pytest.mark.parametrize(
    ("text", "expr"),
    [
        ("COUNT(*)", COUNT_STAR),
        ("COUNT(x)", Call("COUNT", (col("x"),))),
        ("COUNT(DISTINCT x)", Call("COUNT", (col("x"),), distinct=True)),
        ("SUM(x)", Call("SUM", (col("x"),))),
        ("SUM(x, 0, 100)", Call("SUM", (col("x"), lit(0), lit(100)))),
        ("AVG(x, -1, 1.5)", Call("AVG", (col("x"), lit(-1), lit(1.5)))),
        (
            "AVG(income / 1000, 0, 200)",
            Call("AVG", (Binary("/", col("income"), lit(1000)), lit(0), lit(200))),
        ),
        ("MEDIAN(x)", Call("MEDIAN", (col("x"),))),
        ("PERCENTILE(x, 0.9)", Call("PERCENTILE", (col("x"), lit(0.9)))),
        ("quantile(x, 0.9)", Call("QUANTILE", (col("x"), lit(0.9)))),
        ("VARIANCE(x, 0, 1)", Call("VARIANCE", (col("x"), lit(0), lit(1)))),
        ("STDDEV(x)", Call("STDDEV", (col("x"),))),
        ("MIN(x)", Call("MIN", (col("x"),))),
        ("MAX(x, 0, 10)", Call("MAX", (col("x"), lit(0), lit(10)))),
        ("COUNT(*) / 2 + 1", Binary("+", Binary("/", COUNT_STAR, lit(2)), lit(1))),
    ],
)
def test_aggregates(text: str, expr: Expr) -> None:
    assert select(f"SELECT {text} FROM t").items[0].expr == expr


# -- FROM and joins ----------------------------------------------------------------------------
def test_table_aliases() -> None:
    assert select("SELECT 1 FROM t").from_ == TableFrom("t")
    assert select("SELECT 1 FROM t AS u").from_ == TableFrom("t", "u")
    assert select("SELECT 1 FROM t u").from_ == TableFrom("t", "u")
    assert select('SELECT 1 FROM "odd table" AS "o t"').from_ == TableFrom("odd table", "o t")
    assert select("SELECT 1 FROM `tick`").from_ == TableFrom("tick")


def test_subquery_in_from() -> None:
    q = select(
        "SELECT COUNT(*) FROM (SELECT pid, COUNT(*) AS visits FROM visits GROUP BY pid) AS v "
        "WHERE visits > 5"
    )
    inner = Select(
        items=(SelectItem(col("pid")), SelectItem(COUNT_STAR, "visits")),
        from_=TableFrom("visits"),
        group_by=(GroupKey(col("pid")),),
    )
    assert q.from_ == SubqueryFrom(inner, "v")
    assert q.where == Binary(">", col("visits"), lit(5))
    assert select("SELECT 1 FROM (SELECT a FROM t)").from_ == SubqueryFrom(
        Select((SelectItem(col("a")),), TableFrom("t"))
    )


def test_nested_subqueries() -> None:
    q = select("SELECT COUNT(*) FROM (SELECT a FROM (SELECT a FROM (SELECT a FROM t) x) y) z")
    depth = 0
    from_ = q.from_
    while isinstance(from_, SubqueryFrom):
        depth += 1
        assert isinstance(from_.query, Select)
        from_ = from_.query.from_
    assert depth == 3
    assert from_ == TableFrom("t")


def test_subquery_may_be_a_set_query() -> None:
    q = select("SELECT COUNT(*) FROM (SELECT a FROM t UNION SELECT a FROM u) AS v")
    assert isinstance(q.from_, SubqueryFrom)
    assert isinstance(q.from_.query, SetQuery)


def test_join_on() -> None:
    q = select("SELECT 1 FROM a JOIN b ON a.k = b.k")
    assert q.from_ == Join(
        TableFrom("a"), TableFrom("b"), "inner", on=Binary("=", col("k", "a"), col("k", "b"))
    )


def test_join_using_and_kinds() -> None:
    assert select("SELECT 1 FROM a INNER JOIN b USING (k)").from_ == Join(
        TableFrom("a"), TableFrom("b"), using=("k",)
    )
    assert select('SELECT 1 FROM a LEFT JOIN b USING (k, "j j")').from_ == Join(
        TableFrom("a"), TableFrom("b"), "left", using=("k", "j j")
    )
    assert select("SELECT 1 FROM a LEFT OUTER JOIN b AS c ON x").from_ == Join(
        TableFrom("a"), TableFrom("b", "c"), "left", on=col("x")
    )


def test_join_with_bounds() -> None:
    q = select("SELECT 1 FROM a JOIN b ON a.k = b.k WITH BOUNDS (5, 7)")
    assert isinstance(q.from_, Join)
    assert q.from_.bounds == (5, 7)
    q = select("SELECT 1 FROM a JOIN b USING (k) with bounds (1, 2)")
    assert isinstance(q.from_, Join)
    assert (q.from_.using, q.from_.bounds) == (("k",), (1, 2))


def test_joins_are_left_associative() -> None:
    q = select("SELECT 1 FROM a JOIN b USING (k) LEFT JOIN (SELECT k FROM c) AS c ON b.k = c.k")
    assert isinstance(q.from_, Join)
    assert q.from_.kind == "left"
    assert q.from_.left == Join(TableFrom("a"), TableFrom("b"), using=("k",))
    assert isinstance(q.from_.right, SubqueryFrom)


@pytest.mark.parametrize("kind", ["CROSS", "RIGHT", "right outer", "FULL", "FULL OUTER", "NATURAL"])
def test_unsupported_joins_are_clear_errors(kind: str) -> None:
    for positions in (True, False):
        err = syntax_error(f"SELECT 1\nFROM a {kind} JOIN b ON a.k = b.k", positions=positions)
        assert f"{' '.join(kind.upper().split())} JOIN is not supported" in err.message
        assert (err.line, err.column) == (2, 8)


def test_join_needs_a_condition() -> None:
    err = syntax_error("SELECT 1 FROM a JOIN b")
    assert "end of text" in err.message
    assert {"ON", "USING"} <= set(err.expected)


def test_bad_bounds() -> None:
    err = syntax_error("SELECT 1 FROM a JOIN b USING (k) WITH BOUND (1, 2)")
    assert "BOUNDS" in err.message and err.column == 39
    err = syntax_error("SELECT 1 FROM a JOIN b USING (k) WITH BOUNDS (1.5, 2)")
    assert "whole numbers" in err.message and err.column == 47


# -- GROUP BY, ORDER BY, LIMIT ----------------------------------------------------------------
def test_group_by_keys_and_inline_key_lists() -> None:
    q = select("SELECT 1 FROM t GROUP BY state IN ('CA', 'NY'), sex, age / 10 IN (1, 2, 3)")
    assert q.group_by == (
        GroupKey(col("state"), (lit("CA"), lit("NY"))),
        GroupKey(col("sex")),
        GroupKey(Binary("/", col("age"), lit(10)), (lit(1), lit(2), lit(3))),
    )


def test_group_by_not_in_is_a_plain_key() -> None:
    q = select("SELECT 1 FROM t GROUP BY state NOT IN ('CA')")
    assert q.group_by == (GroupKey(InList(col("state"), (lit("CA"),), negated=True)),)


def test_group_by_expressions() -> None:
    q = select("SELECT 1 FROM t GROUP BY CASE WHEN age < 30 THEN 'y' ELSE 'o' END, p.sex")
    assert q.group_by is not None and len(q.group_by) == 2
    assert q.group_by[1] == GroupKey(col("sex", "p"))


def test_order_by_directions() -> None:
    q = select("SELECT a, b FROM t ORDER BY a ASC, b DESC, COUNT(*)")
    assert q.order_by == (
        OrderItem(col("a")),
        OrderItem(col("b"), descending=True),
        OrderItem(COUNT_STAR),
    )


def test_limit() -> None:
    assert select("SELECT a FROM t LIMIT 0").limit == 0
    assert select("SELECT a FROM t ORDER BY a LIMIT 10").limit == 10
    err = syntax_error("SELECT a FROM t LIMIT 2.5")
    assert "whole number" in err.message and err.column == 23
    err = syntax_error("SELECT a FROM t LIMIT -1")
    assert err.column == 23


# -- OPTIONS -----------------------------------------------------------------------------------
def test_option_values() -> None:
    q = select(
        "SELECT 1 FROM t OPTIONS (Epsilon = 1, DELTA = 1e-6, d2 = .01, e = 2.5E+3, neg = -2, "
        "s = 'it''s', yes = TRUE, no = false, unit = pid, q = \"Odd\")"
    )
    assert q.options == (
        ("epsilon", 1),
        ("delta", 1e-6),
        ("d2", 0.01),
        ("e", 2500.0),
        ("neg", -2),
        ("s", "it's"),
        ("yes", True),
        ("no", False),
        ("unit", "pid"),
        ("q", "Odd"),
    )
    assert isinstance(q.options[0][1], int)


def test_empty_options() -> None:
    assert select("SELECT 1 FROM t OPTIONS ()").options == ()


def test_bigquery_prefix_and_options_merge_in_source_order() -> None:
    q = select(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS(epsilon=10, privacy_unit_column=pid) "
        "COUNT(*) FROM t OPTIONS (delta = 1e-5)"
    )
    assert q.options == (("epsilon", 10), ("privacy_unit_column", "pid"), ("delta", 1e-5))
    assert q.items == (SelectItem(COUNT_STAR),)
    q = select("select with differential_privacy options () distinct a from t")
    assert q.distinct and q.options == ()


def test_duplicate_options_are_refused() -> None:
    err = syntax_error(
        "SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS (epsilon = 1) 1 OPTIONS (EPSILON=2)"
    )
    assert "epsilon" in err.message and err.column == 67
    err = syntax_error("SELECT 1 OPTIONS (delta = 1, delta = 2)")
    assert err.column == 30


def test_wrong_prefix_word() -> None:
    err = syntax_error("SELECT WITH PRIVACY OPTIONS (epsilon = 1) 1")
    assert "DIFFERENTIAL_PRIVACY" in err.message and err.column == 13


# -- set operations ----------------------------------------------------------------------------
def _s(name: str) -> Select:
    return Select((SelectItem(col("a")),), TableFrom(name))


def _set(text: str) -> SetQuery:
    q = parse_statement(text)
    assert isinstance(q, SetQuery)
    return q


def test_set_operations() -> None:
    assert _set("SELECT a FROM t UNION SELECT a FROM u") == SetQuery("union", _s("t"), _s("u"))
    assert _set("SELECT a FROM t UNION ALL SELECT a FROM u").op == "union_all"
    assert _set("SELECT a FROM t UNION DISTINCT SELECT a FROM u").op == "union"
    assert _set("SELECT a FROM t INTERSECT SELECT a FROM u").op == "intersect"
    assert _set("SELECT a FROM t EXCEPT SELECT a FROM u").op == "except"


def test_intersect_binds_tighter_and_all_are_left_associative() -> None:
    q = _set(
        "SELECT a FROM t UNION SELECT a FROM u INTERSECT SELECT a FROM v EXCEPT SELECT a FROM w"
    )
    assert q == SetQuery(
        "except",
        SetQuery("union", _s("t"), SetQuery("intersect", _s("u"), _s("v"))),
        _s("w"),
    )
    q = _set("SELECT a FROM t INTERSECT SELECT a FROM u INTERSECT SELECT a FROM v")
    assert q == SetQuery("intersect", SetQuery("intersect", _s("t"), _s("u")), _s("v"))


def test_parentheses_group_set_operations() -> None:
    q = _set("SELECT a FROM t UNION (SELECT a FROM u EXCEPT SELECT a FROM v)")
    assert q == SetQuery("union", _s("t"), SetQuery("except", _s("u"), _s("v")))
    assert parse_statement("((SELECT a FROM t))") == _s("t")


def test_trailing_clauses_belong_to_the_set_query() -> None:
    q = _set(
        "SELECT a FROM t UNION ALL SELECT a FROM u ORDER BY a DESC LIMIT 3 OPTIONS (epsilon=1)"
    )
    assert q.left == _s("t") and q.right == _s("u")
    assert q.order_by == (OrderItem(col("a"), descending=True),)
    assert (q.limit, q.options) == (3, (("epsilon", 1),))


def test_clauses_after_a_parenthesised_select_belong_to_it() -> None:
    q = select("(SELECT a FROM t ORDER BY a) LIMIT 2 OPTIONS (epsilon = 1)")
    assert (q.order_by, q.limit, q.options) == ((OrderItem(col("a")),), 2, (("epsilon", 1),))
    err = syntax_error("(SELECT a FROM t LIMIT 2) ORDER BY a")
    assert "LIMIT" in err.message and err.column == 27
    err = syntax_error("(SELECT a FROM t ORDER BY a) ORDER BY a")
    assert "twice" in err.message


def test_intersect_all_is_refused_clearly() -> None:
    err = syntax_error("SELECT a FROM t INTERSECT ALL SELECT a FROM u")
    assert "INTERSECT ALL is not supported" in err.message and err.column == 27
    err = syntax_error("SELECT a FROM t EXCEPT ALL SELECT a FROM u")
    assert "EXCEPT ALL" in err.message


def test_set_operands_keep_their_own_clauses() -> None:
    q = _set("SELECT a FROM t WHERE a > 1 GROUP BY a UNION SELECT a FROM u HAVING a < 2")
    assert isinstance(q.left, Select) and q.left.group_by == (GroupKey(col("a")),)
    assert isinstance(q.right, Select) and q.right.having == Binary("<", col("a"), lit(2))


# -- other statements --------------------------------------------------------------------------
def test_explain() -> None:
    s = parse_statement("EXPLAIN SELECT COUNT(*) FROM t")
    assert s == Explain(Select((SelectItem(COUNT_STAR),), TableFrom("t")))
    s = parse_statement("explain SELECT a FROM t UNION SELECT a FROM u LIMIT 1;")
    assert isinstance(s, Explain) and isinstance(s.query, SetQuery)


def test_show_and_describe() -> None:
    assert parse_statement("SHOW TABLES") == ShowTables()
    assert parse_statement("show tables;") == ShowTables()
    assert parse_statement("Show Budget") == ShowBudget()
    assert parse_statement("DESCRIBE people") == Describe("people")
    assert parse_statement("desc people;") == Describe("people")
    assert parse_statement('DESCRIBE "odd table"') == Describe("odd table")


def test_show_something_else() -> None:
    err = syntax_error("SHOW users")
    assert "SHOW TABLES or SHOW BUDGET" in err.message and err.column == 6
    err = syntax_error("SHOW")
    assert "end of text" in err.message


def test_trailing_semicolon() -> None:
    assert parse_statement("SELECT a FROM t;") == parse_statement("SELECT a FROM t")
    assert parse_statement("SELECT a FROM t ;  \n") == parse_statement("SELECT a FROM t")
    err = syntax_error("SELECT a FROM t;;")
    assert err.column == 17 and err.expected == ["end of text"]
    err = syntax_error("SELECT a FROM t; SELECT b FROM u")
    assert err.column == 18


# -- lexical matters ---------------------------------------------------------------------------
def test_keywords_are_case_insensitive() -> None:
    upper = (
        "SELECT a, COUNT(DISTINCT b) AS n FROM t AS x LEFT OUTER JOIN u ON x.k = u.k "
        "WITH BOUNDS (1, 1) WHERE a IS NOT NULL GROUP BY a IN (1) HAVING n > 1 "
        "UNION ALL SELECT a, 1 FROM t ORDER BY a DESC LIMIT 1 OPTIONS (epsilon = TRUE)"
    )
    words = re.compile(r"\b[A-Z]+\b")
    lower = words.sub(lambda m: m.group().lower(), upper)
    mixed = words.sub(lambda m: m.group().capitalize(), upper)
    assert "select a, count(distinct b) as n" in lower
    expected = parse_statement(upper)
    assert isinstance(expected, SetQuery)
    assert parse_statement(lower) == expected
    assert parse_statement(mixed) == expected
    assert parse_statement("sElEcT a FrOm t oRdEr By a dEsC") == select(
        "SELECT a FROM t ORDER BY a DESC"
    )


def test_identifiers_keep_their_case_and_quotes_allow_keywords() -> None:
    q = select('SELECT "Order", "select" AS "from", Age FROM "Group"')
    assert q.items == (
        SelectItem(col("Order")),
        SelectItem(col("select"), "from"),
        SelectItem(col("Age")),
    )
    assert q.from_ == TableFrom("Group")


def test_statement_keywords_are_reserved_and_quoted_by_to_sql() -> None:
    for word in ["select", "from", "order", "limit", "options", "join", "left", "desc"]:
        syntax_error(f"SELECT {word} FROM t")
        assert word.upper() in keywords()
        assert Column(word).to_sql() == f'"{word}"'


def test_context_words_are_not_reserved() -> None:
    # TABLES, BUDGET, BOUNDS and DIFFERENTIAL_PRIVACY only mean something in one spot.
    q = select("SELECT tables, budget, bounds, differential_privacy FROM budget bounds")
    assert [i.expr for i in q.items] == [
        col("tables"),
        col("budget"),
        col("bounds"),
        col("differential_privacy"),
    ]
    assert q.from_ == TableFrom("budget", "bounds")


def test_comments_and_multiline_text() -> None:
    q = select(
        "-- how many adults\nSELECT COUNT(*) /* all rows */\nFROM people\n"
        "  WHERE age >= 18 -- adults"
    )
    assert q.where == Binary(">=", col("age"), lit(18))


def test_expressions_in_clauses() -> None:
    q = select(
        "SELECT 1 FROM t WHERE NOT (a BETWEEN 1 AND 2) OR b IN (1, 2) AND c::int > CAST(d AS INT)"
    )
    assert isinstance(q.where, Binary) and q.where.op == "OR"
    assert q.where.left == Unary("NOT", Between(col("a"), lit(1), lit(2)))


# -- errors ------------------------------------------------------------------------------------
def test_unexpected_token_on_a_later_line() -> None:
    text = "SELECT state,\n       COUNT(*)\nFROM people\nWHERE age >= 18\nGROUP state"
    for positions in (True, False):
        err = syntax_error(text, positions=positions)
        assert (err.line, err.column) == (5, 7)
        assert "state" in err.message
        assert err.expected == ["BY"]
        assert "GROUP state\n        ^" in str(err)


def test_unexpected_keyword() -> None:
    err = syntax_error("SELECT a,\n  FROM t")
    assert (err.line, err.column) == (2, 3)
    assert err.message == "unexpected keyword 'FROM'"


def test_unexpected_end_points_at_the_end() -> None:
    err = syntax_error("SELECT COUNT(*)\nFROM people\nWHERE age >=   \n")
    assert (err.line, err.column) == (3, 13)
    assert err.message == "unexpected end of text"
    err = syntax_error("SELECT a FROM t JOIN u ON a.k = u.k WITH BOUNDS (1,")
    assert err.column == 52 and err.expected == ["a number"]


def test_unexpected_character_and_unterminated_string() -> None:
    err = syntax_error("SELECT a\nFROM t WHERE a = $1")
    assert (err.line, err.column) == (2, 18)
    err = syntax_error("SELECT a FROM t WHERE a = 'oops")
    assert "unterminated string" in err.message and err.column == 27


def test_expected_tokens_are_readable() -> None:
    err = syntax_error("SELECT a FROM")
    assert err.expected == ["'('", "a name", "a quoted name"]
    assert "expected one of" in str(err)


@pytest.mark.parametrize("text", ["", "   ", "\n\n", "-- only a comment", ";"])
def test_empty_text(text: str) -> None:
    err = syntax_error(text)
    assert err.line is not None and err.column is not None


def test_non_text_is_rejected() -> None:
    with pytest.raises(PinqSyntaxError):
        parse_statement(None)  # type: ignore[arg-type]
    with pytest.raises(PinqSyntaxError):
        parse_statement(b"SELECT 1")  # type: ignore[arg-type]


def test_cross_join_by_comma_is_a_syntax_error() -> None:
    err = syntax_error("SELECT 1 FROM a, b")
    assert err.column == 16


def test_deep_nesting_is_a_pinq_error_not_a_crash() -> None:
    text = "SELECT 1 FROM " + "(SELECT 1 FROM " * 600 + "t" + ")" * 600
    with contextlib.suppress(PinqSyntaxError):
        parse_statement(text, positions=False)
    text = " UNION ".join(["SELECT a FROM t"] * 3000)
    try:
        q = parse_statement(text, positions=False)
    except PinqSyntaxError:
        return
    assert isinstance(q, SetQuery)


def test_huge_numbers_are_a_pinq_error() -> None:
    err = syntax_error("SELECT a FROM t\nLIMIT " + "9" * 5000, positions=False)
    assert (err.line, err.column) == (2, 7)
    syntax_error("SELECT " + "1" * 5000 + " FROM t")


# -- positions ---------------------------------------------------------------------------------
def _nodes(node: object) -> Iterator[object]:
    """Every AST node (statement nodes and expressions) below and including ``node``."""
    if isinstance(node, tuple):
        for item in node:
            yield from _nodes(item)
    elif dataclasses.is_dataclass(node) and not isinstance(node, Pos | type):
        yield node
        for f in dataclasses.fields(node):
            if f.name != "pos":
                yield from _nodes(getattr(node, f.name))


@pytest.mark.parametrize("text", CORPUS)
def test_positions_do_not_change_the_tree(text: str) -> None:
    with_pos = parse_statement(text)
    without = parse_statement(text, positions=False)
    assert with_pos == without
    assert all(getattr(n, "pos", None) is None for n in _nodes(without))
    assert all(getattr(n, "pos", None) is not None for n in _nodes(with_pos))


def test_positions_are_first_tokens() -> None:
    text = (
        "SELECT sex,\n"
        "       COUNT(*) AS n\n"
        "FROM people AS p\n"
        "  LEFT JOIN (SELECT pid FROM v) AS q USING (pid)\n"
        "GROUP BY sex IN (1, 2)\n"
        "ORDER BY n DESC"
    )
    q = select(text)
    assert q.pos == Pos(1, 1)
    assert [i.pos for i in q.items] == [Pos(1, 8), Pos(2, 8)]
    assert q.items[1].expr.pos == Pos(2, 8)
    join = q.from_
    assert isinstance(join, Join)
    assert join.pos == Pos(3, 6)
    assert join.left.pos == Pos(3, 6)
    assert isinstance(join.right, SubqueryFrom)
    assert join.right.pos == Pos(4, 13)
    assert join.right.query.pos == Pos(4, 14)
    assert q.group_by is not None and q.group_by[0].pos == Pos(5, 10)
    assert q.group_by[0].keys is not None and q.group_by[0].keys[1].pos == Pos(5, 21)
    assert q.order_by is not None and q.order_by[0].pos == Pos(6, 10)


def test_positions_of_other_statements() -> None:
    s = parse_statement("\n  EXPLAIN\n SELECT a FROM t UNION SELECT a FROM u")
    assert isinstance(s, Explain) and s.pos == Pos(2, 3)
    assert s.query.pos == Pos(3, 2)
    assert isinstance(s.query, SetQuery) and s.query.right.pos == Pos(3, 24)
    assert parse_statement("  SHOW TABLES").pos == Pos(1, 3)
    assert parse_statement("DESC t").pos == Pos(1, 1)
    star = select("SELECT t.* FROM t").items[0]
    assert star.pos == Pos(1, 8) and isinstance(star.expr, Star) and star.expr.pos == Pos(1, 8)


def test_results_are_cached() -> None:
    text = "SELECT COUNT(*) FROM cached_table"
    assert parse_statement(text) is parse_statement(text)
    assert parse_statement(text, positions=False) is parse_statement(text, positions=False)


# -- the fast path gives exactly lark's tree ---------------------------------------------------
def _fast_tree(text: str) -> object:
    fast = _fast_parser()
    assert fast is not None, "the fast path should work with the installed lark"
    return fast.parse(text)


def _lark_tree(text: str) -> object:
    try:
        return parse_tree(text, "statement", positions=False)
    except PinqSyntaxError:
        return None


@pytest.mark.parametrize("text", CORPUS)
def test_fast_path_matches_lark(text: str) -> None:
    tree = _fast_tree(text)
    assert tree is not None
    assert tree == get_parser("statement", positions=False).parse(text)


_TOKENS = st.sampled_from(
    [
        "SELECT",
        "select",
        "FROM",
        "WHERE",
        "GROUP",
        "BY",
        "HAVING",
        "ORDER",
        "LIMIT",
        "AS",
        "JOIN",
        "LEFT",
        "OUTER",
        "ON",
        "USING",
        "WITH",
        "BOUNDS",
        "OPTIONS",
        "UNION",
        "ALL",
        "INTERSECT",
        "EXCEPT",
        "DISTINCT",
        "EXPLAIN",
        "SHOW",
        "TABLES",
        "DESCRIBE",
        "IN",
        "NOT",
        "AND",
        "OR",
        "CASE",
        "WHEN",
        "THEN",
        "END",
        "NULL",
        "TRUE",
        "COUNT",
        "SUM",
        "a",
        "t",
        "p.x",
        '"q q"',
        "'s'",
        "1",
        "2.5",
        "1e-6",
        "(",
        ")",
        ",",
        "*",
        "=",
        ">",
        "-",
        ";",
        ".",
        "::",
        "DIFFERENTIAL_PRIVACY",
        "ſelect",
        "--c\n",
        "/*c*/",
        "`b`",
        "$",
        "'",
        '"',
    ]
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TOKENS, max_size=30), st.sampled_from([" ", "\n", "  "]))
def test_token_soup_raises_only_pinq_errors_and_fast_path_agrees(
    words: list[str], sep: str
) -> None:
    text = sep.join(words)
    assert _fast_tree(text) == _lark_tree(text)
    for positions in (False, True):
        try:
            parse_statement(text, positions=positions)
        except PinqSyntaxError as err:
            assert err.line is not None and err.column is not None
            assert err.line >= 1 and err.column >= 1


_STRUCTURED = st.builds(
    "SELECT {} FROM {}{}{}".format,
    st.sampled_from(["COUNT(*)", "a, SUM(b, 0, 1) AS s", "*", "t.*", "DISTINCT a"]),
    st.sampled_from(["t", "t AS u", "(SELECT a FROM t) v", "a JOIN b ON a.k = b.k"]),
    st.sampled_from(["", " WHERE a > 1", " WHERE", " GROUP BY a IN (1, 2)", " HAVING"]),
    st.sampled_from(["", " ORDER BY a DESC", " LIMIT 3", " OPTIONS (epsilon = 1)", ";", ")"]),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_STRUCTURED, st.integers(0, 60), st.integers(0, 5))
def test_mangled_queries_raise_only_pinq_errors(text: str, cut: int, drop: int) -> None:
    # Truncate and delete a slice so most inputs are almost-valid queries.
    mangled = text[:cut] + text[cut + drop :]
    assert _fast_tree(mangled) == _lark_tree(mangled)
    try:
        parse_statement(mangled, positions=False)
    except PinqSyntaxError as err:
        assert err.line is not None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=40))
def test_random_text_raises_only_pinq_errors(text: str) -> None:
    assert _fast_tree(text) == _lark_tree(text)
    with contextlib.suppress(PinqSyntaxError):
        parse_statement(text)


# -- other systems' spellings ------------------------------------------------------------------
SPELLINGS = [
    "SELECT TOP 5 sex, COUNT(*) FROM census.pums AS p GROUP BY 1 ORDER BY 2 DESC",
    'SELECT COUNT(*) FROM "census"."pums" WHERE census.pums.age > \'30\'',
    "SELECT VAR(x), VAR_POP(x), STDDEV_POP(x), PERCENTILE_CONT(x, 0.5) FROM `proj.data.t`",
    "SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY income) AS p90, PI() AS pi FROM t",
    "DESCRIBE census.pums",
]


@pytest.mark.parametrize("text", SPELLINGS)
def test_spellings_parse_the_same_with_and_without_positions(text: str) -> None:
    with_pos = parse_statement(text)
    without = parse_statement(text, positions=False)
    assert with_pos == without
    assert all(getattr(n, "pos", None) is None for n in _nodes(without))
    assert all(getattr(n, "pos", None) is not None for n in _nodes(with_pos))


def test_schema_qualified_table() -> None:
    q = select('SELECT COUNT(*) FROM "census".PUMS AS p')
    assert q.from_ == TableFrom("PUMS", "p", ("census",))
    assert isinstance(q.from_, TableFrom)
    assert q.from_.path == (("census", True), ("PUMS", False))
    # BigQuery's backticks around a dotted name hold its parts; double quotes hold one name.
    assert select("SELECT a FROM `proj.data.t`").from_ == TableFrom("t", None, ("proj", "data"))
    assert select('SELECT a FROM "data.t"').from_ == TableFrom("data.t")


def test_column_spelling_is_kept_but_not_compared() -> None:
    q = select('SELECT census.Pums."Age" FROM census.pums')
    e = q.items[0].expr
    assert e == Column("Age", "Pums")
    assert isinstance(e, Column)
    assert e.path == (("census", False), ("Pums", False), ("Age", True))
    # Expression strings of the Python API name columns exactly: no spelling kept.
    from pinqpy.expr.parser import parse_expression

    assert parse_expression("Age").path == ()  # type: ignore[attr-defined]


def test_top_is_a_limit() -> None:
    q = select("SELECT TOP 3 sex, COUNT(*) FROM t GROUP BY sex ORDER BY 2 DESC")
    assert q.limit == 3 and q.order_by is not None
    # TOP is not reserved: a column may still be called top.
    assert select("SELECT top FROM t").items == (SelectItem(col("top")),)
    err = syntax_error("SELECT TOP 3 a FROM t LIMIT 2")
    assert "TOP n and LIMIT" in err.message and (err.line, err.column) == (1, 23)
    err = syntax_error("SELECT TOP 2.5 a FROM t")
    assert (err.line, err.column) == (1, 12)


def test_percentile_cont_within_group_is_percentile_cont() -> None:
    a = select("SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY x) FROM t").items[0].expr
    b = select("SELECT PERCENTILE_CONT(x, 0.9) FROM t").items[0].expr
    assert a == b == Call("PERCENTILE_CONT", (col("x"), lit(0.9)))
    err = syntax_error("SELECT COUNT(*),\n  AVG(x) WITHIN GROUP (ORDER BY x) FROM t")
    assert "PERCENTILE_CONT(p) only" in err.message and (err.line, err.column) == (2, 3)


def test_pi_is_a_constant() -> None:
    import math

    assert select("SELECT PI() * 2 FROM t").items[0].expr == Binary("*", lit(math.pi), lit(2))


@pytest.mark.parametrize(
    ("text", "message", "at"),
    [
        ("SELECT a FROM t LIMIT 1 OFFSET 2", "OFFSET is not supported", (1, 25)),
        ("SELECT a FROM t\nFETCH FIRST 2 ROWS ONLY", "written LIMIT n", (2, 1)),
        ("  WITH q AS (SELECT a FROM t) SELECT a FROM q", "common table expression", (1, 3)),
        ("SELECT COUNT(*) OVER (PARTITION BY a) FROM t", "window functions (OVER)", (1, 17)),
        ("SELECT a FROM t, u", "a comma between tables", (1, 16)),
        ("SELECT a FROM t WHERE b ILIKE 'x'", "LOWER(x) LIKE", (1, 25)),
        ("SELECT a FROM t WHERE b IS FALSE", "write x = FALSE", (1, 28)),
        ("SELECT a FROM [t]", "double quotes", (1, 15)),
    ],
)
def test_other_dialects_constructs_are_named(text: str, message: str, at: tuple[int, int]) -> None:
    for positions in (True, False):
        err = syntax_error(text, positions=positions)
        assert message in err.message
        assert (err.line, err.column) == at
