"""The Polars translation of pinqpy's expressions gives pandas' values, row by row.

Random expressions over columns of every kind (integers at the int64 extremes, floats with
infinities and -0.0, text that reads as numbers, booleans and timestamps, booleans,
timestamps of two units), with NULLs, are evaluated by :mod:`pinqpy.expr.pandas_eval` and by
the Polars engine's translation; the values must agree: exactly, but for the transcendental
functions, whose last bit each math library computes its own way (within 1e-12, relative).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pl = pytest.importorskip("polars")

from pinqpy.engines.polars.expressions import PolarsExpr  # noqa: E402
from pinqpy.engines.polars.plans import Rel, normalized  # noqa: E402
from pinqpy.engines.polars.source import from_pandas  # noqa: E402
from pinqpy.errors import PinqError  # noqa: E402
from pinqpy.expr.pandas_eval import evaluate  # noqa: E402
from pinqpy.expr.parser import parse_expression  # noqa: E402

DATA = pd.DataFrame(
    {
        "i": pd.array([0, -7, 7, 2**63 - 1, -(2**63), 12, None, 3], dtype="Int64"),
        "f": [1.5, 0.0, float("inf"), -2.5, None, 1e20, 3.0, 1e-7],
        "s": [" 12", "abc", "2020-01-02 03:04:05", "true", None, "1e3", "", "a_b%c"],
        "b": pd.array([True, False, None, True, False, True, None, False], dtype="boolean"),
        "t": pd.to_datetime(
            ["2020-01-01", "1999-12-31 23:59:59", None, "2262-04-11", "1700-01-01", "2020-06-15",
             "2020-01-01 00:00:00.000001", "1970-01-01"], format="ISO8601"
        ).as_unit("us"),
        # (A nanosecond off a microsecond value is left out: pandas compares such a value
        # equal to a microsecond constant, as DuckDB and Polars do not.)
        "n": pd.to_datetime(["2020-01-01", None, "2000-02-29", "2020-01-01 00:00:00.000001",
                             "1999-01-01", "2262-01-01", "1678-01-01", "1970-01-01"],
                            format="ISO8601").as_unit("ns"),
    }
)  # fmt: skip
_TRANSCENDENTAL = ("EXP", "LN", "LOG", "LOG10", "POWER", "POW", "SQRT")

leaf = st.sampled_from(
    ["i", "f", "s", "b", "0", "1", "-3", "2.5", "0.5", "1e308", "9223372036854775807",
     "NULL", "TRUE", "FALSE", "'x'", "' 7 '", "'2020-01-01'", "'1.5'", "'yes'", "''"]
)  # fmt: skip
# Timestamps (of two units) and text that reads as one, through what reads them as times
# (timestamps are left out above):
# pandas writes a timestamp's text in a format chosen from all the column's values (with
# microseconds if any row has some), so text of timestamps is not compared here.
time_leaf = st.sampled_from(
    ["t", "n", "CAST(s AS TIMESTAMP)", "CAST('2020-01-01 00:00:00' AS TIMESTAMP)", "NULL",
     "CAST('1999-12-31T23:59:59Z' AS TIMESTAMP)", "CAST(t AS DATE)", "CAST(n AS DATE)"]
)  # fmt: skip
time_ops = ["COALESCE({}, {})", "LEAST({}, {})", "GREATEST({}, {})", "NULLIF({}, {})",
            "CASE WHEN ({}) IS NULL THEN {} END"]
time_tests = ["({}) = ({})", "({}) < ({})", "({}) >= ({})",
              "({}) < '2020-01-01' OR ({}) = '1999-12-31 23:59:59'"]  # fmt: skip
unary = ["-({})", "NOT ({})", "ABS({})", "SIGN({})", "FLOOR({})", "CEIL({})", "ROUND({})",
         "ROUND({}, 2)", "ROUND({}, -1)", "SQRT({})", "LN({})", "EXP({})", "LOWER({})",
         # (POWER with a NULL operand is left out: pandas reads NULL as NaN, and IEEE's pow
         # gives 1 for 1**NaN and NaN**0, where NULL stays NULL on Polars, DuckDB and Spark.)
         "POWER({}, 2)", "POWER({}, 0.5)", "POWER(2, {})",
         "UPPER({})", "TRIM({})", "LTRIM({})", "LENGTH({})", "SUBSTR({}, 2, 3)", "SUBSTR({}, 0)",
         "CAST({} AS INT)", "CAST({} AS DOUBLE)", "CAST({} AS VARCHAR)", "CAST({} AS BOOLEAN)",
         "({}) IS NULL", "({}) IS NOT NULL",
         "({}) LIKE 'a%'", "({}) LIKE '%1%'", "({}) LIKE '_b%c'", "({}) LIKE 'a\\_b%'",
         "({}) IN (1, 'x', NULL)", "({}) IN ('abc', 'true')", "({}) IN (0, 7, 12)"]  # fmt: skip
binary = ["({}) + ({})", "({}) - ({})", "({}) * ({})", "({}) / ({})", "({}) % ({})",
          "({}) = ({})", "({}) <> ({})", "({}) < ({})", "({}) >= ({})", "({}) AND ({})",
          "({}) OR ({})", "({}) || ({})", "COALESCE({}, {})", "NULLIF({}, {})",
          "LEAST({}, {})", "GREATEST({}, {})", "CONCAT({}, {})",
          "IF({}, {}, 0)", "CASE WHEN {} THEN {} ELSE NULL END",
          "({}) BETWEEN ({}) AND 10"]  # fmt: skip


def _expressions() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(st.sampled_from(unary), inner).map(lambda t: t[0].format(t[1])),
            st.tuples(st.sampled_from(binary), inner, inner).map(lambda t: t[0].format(t[1], t[2])),
        )

    return st.recursive(leaf, extend, max_leaves=6)


def _time_expressions() -> st.SearchStrategy[str]:
    """Timestamps, and comparisons of them (never text of a timestamp)."""

    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.tuples(st.sampled_from(time_ops), inner, inner).map(
            lambda t: t[0].format(t[1], t[2])
        )

    times = st.recursive(time_leaf, extend, max_leaves=4)
    tests = st.tuples(st.sampled_from(time_tests), times, times).map(
        lambda t: t[0].format(t[1], t[2])
    )
    return st.one_of(times, tests)


def _plain(v: object) -> object:
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, np.datetime64):
        v = pd.Timestamp(v)
    return v


def _same(a: object, b: object, loose: bool) -> bool:
    a, b = _plain(a), _plain(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        if isinstance(b, bool):
            return False
        if loose:
            return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
        return a == b  # zeros of either sign are equal (see _ZERO)
    if isinstance(a, str) and isinstance(b, str):
        return _ZERO.sub("0.0", a) == _ZERO.sub("0.0", b)
    return bool(a == b) and type(a) is type(b)


# Polars computes a few operations with a zero the other way round from IEEE (``0.0 - x`` as
# ``-x``, ``x ** 0.5`` as ``sqrt(x)``), so a computed zero may have the other sign: the zeros
# are equal and one key, and differ only in their text. (-0.0 in the data is left out above.)
_ZERO = re.compile(r"-0\.0(?![0-9e])")


_POLARS = normalized(from_pandas(DATA).lazy(), list(from_pandas(DATA).schema.items()))


def _polars_values(text: str) -> list[object]:
    rel = Rel(_POLARS)
    t = PolarsExpr(rel.cols())
    v = t.tr(parse_expression(text))
    # with_columns: a constant still has one value per row.
    out = t.apply(rel.lf).with_columns(v.expr.alias("__v")).collect().get_column("__v")
    # Timestamps through pandas, which keeps nanoseconds; the rest as Python values.
    return out.to_pandas().tolist() if out.dtype.is_temporal() else out.to_list()


_FUZZ = settings(
    max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)


@_FUZZ
@given(text=_time_expressions())
def test_polars_timestamps_give_pandas_values(text: str) -> None:
    _check(text)


@_FUZZ
@given(text=_expressions())
def test_polars_expressions_give_pandas_values(text: str) -> None:
    _check(text)


def _check(text: str) -> None:
    try:
        want = evaluate(parse_expression(text), DATA).tolist()
    except PinqError as exc:
        with pytest.raises(PinqError):
            _polars_values(text)
        del exc
        return
    got = _polars_values(text)
    loose = any(f in text for f in _TRANSCENDENTAL)
    assert len(got) == len(want)
    pairs = enumerate(zip(got, want, strict=True))
    bad = [(i, g, w) for i, (g, w) in pairs if not _same(g, w, loose)]
    assert not bad, (text, bad)
