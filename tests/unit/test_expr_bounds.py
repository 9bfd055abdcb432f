"""Bounds and public keys derived from metadata alone (interval arithmetic)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinqpy.expr.bounds import derive_bounds, derive_keys
from pinqpy.expr.pandas_eval import evaluate
from pinqpy.expr.parser import parse_expression

BOUNDS = {"income": (0, 500_000), "age": (0, 100), "x": (-2, 3), "y": (1, 4), "z": (-5, -1)}


def b(
    text: str, bounds: dict[str, tuple[float, float]] | None = None
) -> tuple[float, float] | None:
    return derive_bounds(parse_expression(text), BOUNDS if bounds is None else bounds)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("income / 1000", (0, 500)),
        ("income", (0, 500_000)),
        ("42", (42, 42)),
        ("-x", (-3, 2)),
        ("x + y", (-1, 7)),
        ("x - y", (-6, 2)),
        ("x * y", (-8, 12)),
        ("x * z", (-15, 10)),
        ("x / y", (-2, 3)),
        ("y / z", (-4, -0.2)),
        ("age % 7", (0, 7)),
        ("x % 2", (-2, 2)),
        ("ABS(x)", (0, 3)),
        ("ABS(z)", (1, 5)),
        ("FLOOR(x / 2)", (-1, 1)),
        ("CEIL(x / 2)", (-1, 2)),
        ("ROUND(x / 4)", (-1, 1)),
        ("ROUND(income / 7, 1)", (0, 71428.6)),
        ("SIGN(x)", (-1, 1)),
        ("SQRT(age)", (0, 10)),
        ("SQRT(x)", (0, 3**0.5)),
        ("LN(y)", (0, np.log(4))),
        ("LOG10(age + 1)", (0, np.log10(101))),
        ("EXP(x)", (np.exp(-2), np.exp(3))),
        ("POWER(x, 2)", (0, 9)),
        ("POWER(x, 3)", (-8, 27)),
        ("POWER(z, 2)", (1, 25)),
        ("POWER(y, 0.5)", (1, 2)),
        ("POWER(y, -1)", (0.25, 1)),
        ("LEAST(income, 100)", (0, 100)),
        ("GREATEST(x, 0)", (0, 3)),
        ("LEAST(x, y)", (-2, 4)),
        ("COALESCE(x, 10)", (-2, 10)),
        ("COALESCE(x, NULL, y)", (-2, 4)),
        ("CASE WHEN age < 18 THEN 0 WHEN age < 65 THEN income ELSE 1000 END", (0, 500_000)),
        ("CASE WHEN age < 18 THEN x END", (-2, 3)),
        ("CASE WHEN age < 18 THEN x ELSE NULL END", (-2, 3)),
        ("IF(age > 1, x, y)", (-2, 4)),
        ("NULLIF(x, 0)", (-2, 3)),
        ("CAST(income AS DOUBLE)", (0, 500_000)),
        ("CAST(x / 4 AS INT)", (-1, 1)),
        ("CAST(age > 18 AS INT)", (0, 1)),
        ("age >= 18", (0, 1)),
        ("x IN (1, 2)", (0, 1)),
        ("-(x + 1) * 2", (-8, 2)),
    ],
)
def test_derive_bounds(text: str, want: tuple[float, float]) -> None:
    got = b(text)
    assert got is not None
    assert got == pytest.approx(want)


@pytest.mark.parametrize(
    "text",
    [
        "unknown + 1",
        "x / x",  # the divisor interval contains 0
        "y / x",
        "x % x",
        "LN(x)",  # unbounded below near 0
        "CASE WHEN age > 1 THEN unknown ELSE 1 END",
        "COALESCE(x, unknown)",
        "LEAST(x, unknown)",
        "LOWER('a')",
        "CAST(x AS VARCHAR)",
        "NULL",
        "SUM(x)",
        "POWER(x, y)",
        "POWER(x, 0.5 * 1) + SQRT(z)",
        "'abc'",
    ],
)
def test_underivable_bounds_are_none(text: str) -> None:
    assert b(text) is None


def test_bounds_results_are_floats_and_never_read_data() -> None:
    got = b("income / 1000")
    assert got == (0.0, 500.0)
    assert all(isinstance(v, float) for v in got)  # type: ignore[union-attr]


def test_infinite_bounds_are_not_derived() -> None:
    assert b("x * 10", {"x": (0, float("inf"))}) is None
    assert b("EXP(x)", {"x": (0, 1000)}) is None


# -- soundness: every value of the expression lies inside the derived interval -----------------
_COLS = ["x", "y", "z"]


def _leaf() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(_COLS),
        st.integers(-5, 5).map(str),
        st.sampled_from(["0.5", "2.5", "NULL"]),
    )


def _grow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    two = st.tuples(children, children)
    return st.one_of(
        st.builds(
            lambda p, op: f"({p[0]} {op} {p[1]})", two, st.sampled_from(["+", "-", "*", "/", "%"])
        ),
        children.map(lambda c: f"-({c})"),
        st.builds(
            lambda f, c: f"{f}({c})",
            st.sampled_from(["ABS", "FLOOR", "CEIL", "ROUND", "SQRT", "SIGN", "LN"]),
            children,
        ),
        children.map(lambda c: f"ROUND({c}, 1)"),
        children.map(lambda c: f"POWER({c}, 2)"),
        children.map(lambda c: f"CAST({c} AS INT)"),
        two.map(lambda p: f"LEAST({p[0]}, {p[1]})"),
        two.map(lambda p: f"GREATEST({p[0]}, {p[1]})"),
        two.map(lambda p: f"COALESCE({p[0]}, {p[1]})"),
        two.map(lambda p: f"CASE WHEN x > 0 THEN {p[0]} ELSE {p[1]} END"),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.recursive(_leaf(), _grow, max_leaves=6),
    st.lists(
        st.tuples(st.floats(-2, 3), st.floats(1, 4), st.floats(-5, -1), st.booleans()),
        min_size=1,
        max_size=12,
    ),
)
def test_bounds_are_sound(text: str, rows: list[tuple[float, float, float, bool]]) -> None:
    bounds = {"x": (-2.0, 3.0), "y": (1.0, 4.0), "z": (-5.0, -1.0)}
    expr = parse_expression(text)
    got = derive_bounds(expr, bounds)
    if got is None:
        return
    # Include the interval ends, and NULLs, among the rows.
    data = [(-2.0, 1.0, -5.0, False), (3.0, 4.0, -1.0, False), *rows]
    df = pd.DataFrame(
        {
            "x": [np.nan if null else r[0] for *r, null in data],
            "y": [r[1] for r in data],
            "z": [r[2] for r in data],
        }
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        values = evaluate(expr, df).to_numpy(dtype=np.float64, na_value=np.nan)
    values = values[~np.isnan(values)]
    tol = 1e-9 * max(1.0, abs(got[0]), abs(got[1]))
    assert np.all(values >= got[0] - tol), (text, got, values)
    assert np.all(values <= got[1] + tol), (text, got, values)


# -- public keys -------------------------------------------------------------------------------
TYPES = {"age": "int", "state": "str", "married": "bool", "income": "float", "sex": "int"}
KEYS = {"state": ["CA", "NY", "TX"], "sex": [0, 1]}


def k(text: str, bounds: dict[str, tuple[float, float]] | None = None) -> list[object] | None:
    return derive_keys(parse_expression(text), KEYS, BOUNDS if bounds is None else bounds, TYPES)


def test_declared_keys() -> None:
    assert k("state") == ["CA", "NY", "TX"]


def test_boolean_expressions() -> None:
    assert k("married") == [False, True]
    assert k("age >= 18") == [False, True]
    assert k("state IN ('CA') OR married") == [False, True]


def test_case_with_literal_results() -> None:
    text = "CASE WHEN age < 18 THEN 'minor' WHEN age < 65 THEN 'adult' ELSE 'senior' END"
    assert k(text) == ["minor", "adult", "senior"]
    assert k("CASE WHEN age < 18 THEN 1 WHEN income > 5 THEN 1 END") == [1, None]
    assert k("CASE WHEN age < 18 THEN -1 ELSE 1 END") == [-1, 1]
    assert k("CASE WHEN age < 18 THEN age ELSE 1 END") == list(range(0, 101))


def test_int_column_with_bounds() -> None:
    assert k("age") == list(range(0, 101))
    assert k("age", {"age": (0, 20_000)}) is None  # wider than 10,000
    assert k("age", {}) is None


def test_int_expressions_with_derived_bounds() -> None:
    assert k("FLOOR(age / 10)") == list(range(0, 11))
    assert k("age % 3") == [0, 1, 2, 3]


def test_expressions_over_declared_keys() -> None:
    assert k("LOWER(state)") == ["ca", "ny", "tx"]
    assert k("state || '-' || sex") == [
        "CA-0",
        "CA-1",
        "NY-0",
        "NY-1",
        "TX-0",
        "TX-1",
    ]


def test_no_keys() -> None:
    assert k("income") is None
    assert k("unknown") is None
    assert k("income / 2") is None
