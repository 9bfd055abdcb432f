"""The aggregates DuckDB computes for mechanisms, as SQL select items, and how their rows
are read back: counts, exact clamped sums, exact lattice sums, bucket indices."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np

from pinqpy.core.lattice import Lattice, SumGrid
from pinqpy.engines.base import LatticeSums
from pinqpy.engines.buckets import Grid
from pinqpy.engines.duckdb.dialect import DUCKDB
from pinqpy.engines.duckdb.plansql import PlanSql, value_literal
from pinqpy.engines.sqlgen.expressions import NUMERIC, Lets, numeric_value
from pinqpy.expr.ast import Column, Expr
from pinqpy.plan.nodes import PyFunc

__all__ = [
    "Value",
    "aggregated_value",
    "bucket_counts",
    "count_rows",
    "float_literal",
    "int_bucket_query",
    "integral",
    "lattice_aggs",
    "lattice_rows",
    "sum_aggs",
    "sum_rows",
]


def int_bucket_query(rows: str, grid: Grid) -> str:
    """:func:`~pinqpy.engines.buckets.bucket_query` for integer values (``__pinq_v``) on a grid of
    integers, where integer arithmetic is exact and needs no correction step. The grid's
    points are exact doubles (below 2**53), so a value's bucket is the one pandas finds."""
    start, step, stop = (value_literal(int(x), "int") for x in (grid.start, grid.step, grid.stop))
    d = f"LEAST(GREATEST(__pinq_v, {start}), {stop}) - {start}"
    return (
        f"SELECT __pinq_gi, 2 * (__d // {step}) + CAST(__d % {step} <> 0 AS BIGINT) AS __pinq_b "
        f"FROM (SELECT __pinq_gi, {d} AS __d FROM ({rows}) s0) s1"
    )


def sum_aggs(v: str, kind: str, lo: float, hi: float, when: str = "") -> list[str]:
    """The clamped sum of ``v`` and its count of non-NULL values (over the rows ``when``
    admits: a FILTER clause or ""), exact before its conversion to a double.

    Integers clamped to integer bounds are summed exactly as integers: the float sum pandas
    computes is the same number while it is exact (below 2**53) and its rounding otherwise;
    DuckDB sums integers faster than doubles."""
    if kind == "int":
        lo_s, hi_s = value_literal(int(lo), "int"), value_literal(int(hi), "int")
        return [f"SUM(LEAST(GREATEST({v}, {lo_s}), {hi_s})){when}", f"COUNT({v}){when}"]
    # Other values are summed exactly on the SUM's fixed-point grid (SumGrid): truncated
    # toward zero to multiples of q (never larger in magnitude, so the sensitivity stays
    # max(|lo|, |hi|)), summed as BIGINT into HUGEINT, then scaled by q as a double. A float
    # SUM of 10**8 doubles can err by the sensitivity itself.
    grid = SumGrid.of(lo, hi)
    c = f"LEAST(GREATEST({v}, {float_literal(lo)}), {float_literal(hi)})"
    k = f"CAST(TRUNC({grid.sql(c, float_literal)}) AS BIGINT)"
    total = f"CAST(SUM({k}){when} AS DOUBLE) * {float_literal(grid.step_float)}"
    top = float_literal(sys.float_info.max)
    bottom = float_literal(-sys.float_info.max)
    # (DuckDB's LEAST and GREATEST skip NULLs: COALESCE first.)
    return [f"LEAST(GREATEST(COALESCE({total}, 0.0), {bottom}), {top})", f"COUNT({v}){when}"]


def float_literal(x: float) -> str:
    return value_literal(float(x), "float")


def lattice_aggs(
    v: str, kind: str, lo: float, hi: float, when: str = "", squares: bool = False
) -> list[str]:
    """Exact ``Σd`` (and ``Σd²`` with ``squares``, else 0) of the lattice indices of ``v``
    clamped into [lo, hi] (:class:`~pinqpy.core.lattice.Lattice`), and its count of non-NULL
    values. ``d`` is computed in doubles exactly as numpy computes it (``ROUND_EVEN`` is
    half-to-even, as ``np.rint``), cast to BIGINT (it lies in ``[0, 2**21]``) and summed:
    DuckDB sums BIGINT into HUGEINT, 128 bits, so ``Σd < n·2**21`` and ``Σd² < n·2**42``
    are exact and cannot overflow."""
    lat = Lattice.of(lo, hi)
    if (
        kind == "int"
        and not squares
        and lat.shift <= 0
        and float(lo).is_integer()
        and float(hi).is_integer()
    ):
        # Integers on a lattice of step 2**shift <= 1: x·2**-shift is an integer, rounding
        # is the identity, and d = (x - lo)·2**-shift; so Σd is that multiple of the exact
        # integer (HUGEINT) sum of the clamped values, as on pandas.
        lo_s, hi_s = value_literal(int(lo), "int"), value_literal(int(hi), "int")
        total = f"CAST(COALESCE(SUM(LEAST(GREATEST({v}, {lo_s}), {hi_s})){when}, 0) AS HUGEINT)"
        n = f"COUNT({v}){when}"
        scale = 1 << -lat.shift
        return [f"({total} - CAST({lo_s} AS HUGEINT) * {n}) * CAST({scale} AS HUGEINT)", "0", n]
    c = f"LEAST(GREATEST({v}, {float_literal(lo)}), {float_literal(hi)})"
    if max(abs(Fraction(lo)), abs(Fraction(hi))) / lat.step < 2**62:
        # DuckDB casts a double to BIGINT rounding half to even, as np.rint does, so while
        # every scaled value fits the cast is the rounding (about twice as fast as
        # ROUND_EVEN). The lattice's last clamp into [0, K] is the identity for values
        # clamped into [lo, hi] (pinqpy.core.grid_sums), so it is left out; a NULL, which
        # LEAST and GREATEST send to lo, has d = 0 and adds nothing.
        t = c
        for f in lat.factors:
            t = f"({t}) * {float_literal(f)}"
        d = f"(CAST({t} AS BIGINT) - {int(lat.base)})"
    else:
        d = f"CAST({lat.sql(c, float_literal, 'ROUND_EVEN')} AS BIGINT)"
    sq = f"COALESCE(SUM({d} * {d}){when}, 0)" if squares else "0"
    return [f"COALESCE(SUM({d}){when}, 0)", sq, f"COUNT({v}){when}"]


def count_rows(rows: Sequence[tuple[Any, ...]], k: int) -> np.ndarray:
    out = np.zeros(k, dtype=np.int64)
    for gi, n in rows:
        out[int(gi)] = int(n)
    return out


def bucket_counts(columns: Sequence[np.ndarray], k: int, width: int) -> np.ndarray:
    """The (group, bucket, count) columns of a bucket query as a (k, width) table of counts.
    ``np.add.at`` adds a cell named twice, as adding row by row did (a GROUP BY names each
    once); an empty result (no key can match) is all zeros."""
    flat = np.zeros((k, width), dtype=np.int64)
    if columns:
        gi, b, n = columns
        np.add.at(flat, (gi, b), n)
    return flat


def sum_rows(rows: Sequence[tuple[Any, ...]], k: int) -> tuple[np.ndarray, np.ndarray]:
    sums, counts = np.zeros(k), np.zeros(k, dtype=np.int64)
    for gi, total, n in rows:
        sums[int(gi)], counts[int(gi)] = float(total or 0), int(n)
    return sums, counts


def lattice_rows(rows: Sequence[tuple[Any, ...]], k: int) -> LatticeSums:
    """Exact integer sums per group (HUGEINT arrives as a Python int)."""
    sums, sumsq, counts = [0] * k, [0] * k, np.zeros(k, dtype=np.int64)
    for gi, total, total2, n in rows:
        sums[int(gi)], sumsq[int(gi)], counts[int(gi)] = int(total), int(total2), int(n)
    return sums, sumsq, counts


class Value(NamedTuple):
    """An aggregated value's SQL and kind. ``nan_col``: a stored float column, whose NaN is
    skipped as NULL is (the value is the column, not rewritten). ``stored``: a stored numeric
    column whose NULLs are the value's, so DuckDB can test them from the file's statistics
    (a computed value must be tested on every row)."""

    sql: str
    kind: str
    nan_col: str | None = None
    stored: str | None = None


def aggregated_value(
    p: PlanSql,
    rel: str,
    value: Expr | PyFunc,
    lets: Lets,
    *,
    ints: bool = False,
    as_stored: bool = False,
) -> Value:
    """``value`` as pandas' numeric view: a DOUBLE of kind "float" (with ``ints``, an integer
    value stays BIGINT of kind "int"); with ``as_stored``, the value as translated."""
    if (
        isinstance(value, Column)
        and not as_stored
        and value.name in p.nan(rel)
        and p.kinds(rel)[value.name] == "float"
    ):
        col = DUCKDB.ident(value.name)
        return Value(col, "float", nan_col=col)
    v = p.value_expr(value, rel, lets, "an aggregation")
    if as_stored:
        return Value("NULL" if v.kind == "null" else v.sql, v.kind)
    stored = DUCKDB.ident(value.name) if isinstance(value, Column) and v.kind in NUMERIC else None
    if ints and v.kind in ("int", "bool"):
        return Value(v.sql if v.kind == "int" else f"CAST({v.sql} AS BIGINT)", "int", None, stored)
    return Value(numeric_value(DUCKDB, v), "float", None, stored)


def integral(x: float) -> bool:
    """An integer that a double holds exactly."""
    return float(x).is_integer() and abs(x) <= 2**53
