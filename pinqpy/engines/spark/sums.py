"""The exact counts, sums and lattice sums of several requests over one plan, computed by one
Spark job: the SQL of each request's grid units and aggregates, and their results.

The grid units of pinqpy.core.lattice, computed in doubles exactly as numpy computes them
(rint is Java's Math.rint, half to even on doubles as np.rint is, without bround's decimal
arithmetic) and summed as BIGINT in parts no sum can overflow below 2**42 rows: never a
float sum, never a DECIMAL one (several times slower). Each unit is one CAST of one
expression of the value: no CASE, no second clamp. A NULL value is clamped to ``lo`` (Spark's
greatest and least skip NULLs), whose lattice unit is 0, so it adds nothing and only the
count (``COUNT(v)``, the non-NULL values) leaves it out; its SUM unit ``k(lo)`` is taken back
out in Python, ``(COUNT(*) - COUNT(v))·k(lo)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pinqpy.core.lattice import Lattice, SumGrid
from pinqpy.engines.spark.dialect import SPARK
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Expr
from pinqpy.plan.nodes import PyFunc

__all__ = ["REQUESTS", "request_columns", "request_results"]

#: The request of each read kind (pinqpy.engines.base.Read) by that name.
REQUESTS = {"count": "count", "sum": "clamped_sum", "mean": "lattice", "moments": "lattice2"}
# A clamped sum's grid units are summed in two BIGINT parts split at this bit (see
# _request_sql).
_SUM_SPLIT = 20
_SQUARE_SPLIT = 21  # d² < 2**43 is summed as d² >> 21 (< 2**22) and d² & (2**21 - 1)


def request_columns(
    requests: Sequence[tuple[Any, ...]],
) -> tuple[list[Expr | PyFunc], list[str], list[str]]:
    """The distinct values the requests aggregate (each read once, as ``__pinq_v<i>``), the
    projection of those and of every request's grid units, and all the aggregates, in the
    order :func:`request_results` reads them."""
    values: list[Expr | PyFunc] = []
    for r in requests:
        if r[0] not in ("count", "clamped_sum", "lattice", "lattice2"):
            raise PinqError(f"unknown aggregate {r[0]!r}")
        if r[0] != "count" and not any(r[1] is v for v in values):
            values.append(r[1])
    # Per request: the SQL of its grid units (none for a count), then its aggregates.
    units: list[str] = [f"__pinq_v{i}" for i in range(len(values))]
    aggs: list[str] = []
    for j, r in enumerate(requests):
        i = -1 if r[0] == "count" else next(n for n, v in enumerate(values) if v is r[1])
        unit, more = _request_sql(r, f"__pinq_v{i}", f"__pinq_u{j}")
        units += [unit] if unit else []
        aggs += more
    return values, units, aggs


def _request_sql(r: tuple[Any, ...], v: str, unit: str) -> tuple[str, list[str]]:
    """The projection of request ``r``'s grid unit (``""`` for a count) of the value column
    ``v``, named ``unit``, and its aggregates."""
    if r[0] == "count":
        return "", ["COUNT(*)"]
    lo, hi = float(r[2]), float(r[3])
    clamped = f"least(greatest({v}, {SPARK.float_lit(lo)}), {SPARK.float_lit(hi)})"
    if r[0] == "clamped_sum":
        # SumGrid: truncated toward zero to multiples of q (CAST to BIGINT truncates; never
        # larger in magnitude, so the sensitivity stays max(|lo|, |hi|)), |k| < 2**41, split
        # as k = hi·2**20 + lo (an arithmetic shift and a mask, exact in two's complement),
        # |hi| < 2**21 and 0 <= lo < 2**20.
        k = f"CAST({SumGrid.of(lo, hi).sql(clamped, SPARK.float_lit)} AS BIGINT) AS {unit}"
        mask = (1 << _SUM_SPLIT) - 1
        sums = [f"sum(shiftright({unit}, {_SUM_SPLIT}))", f"sum({unit} & {mask})"]
        return k, [*sums, f"COUNT({v})", "COUNT(*)"]
    # The lattice: d = R(x·2**-shift) - B, in [0, K] for x in [lo, hi] (K <= 2**21; the
    # lattice's last clamp into [0, K] is the identity there, see pinqpy.core.grid_sums).
    lat = Lattice.of(lo, hi)
    t = clamped
    for f in lat.factors:
        t = f"({t}) * {SPARK.float_lit(f)}"
    d = f"CAST(rint({t}) - {SPARK.float_lit(lat.base)} AS BIGINT) AS {unit}"
    if r[0] == "lattice":
        return d, [f"sum({unit})", f"COUNT({v})"]
    sq = f"({unit} * {unit})"
    mask = (1 << _SQUARE_SPLIT) - 1
    squares = [f"sum(shiftright({sq}, {_SQUARE_SPLIT}))", f"sum({sq} & {mask})"]
    return d, [f"sum({unit})", *squares, f"COUNT({v})"]


def request_results(
    requests: Sequence[tuple[Any, ...]], rows: Sequence[tuple[Any, ...]], k: int
) -> list[Any]:
    """Each request's result (as its read method returns it) from the rows of
    :func:`_request_sql`'s aggregates: a group's position, then each request's columns."""
    counts = [np.zeros(k, dtype=np.int64) for _ in requests]
    sums = [np.zeros(k) for _ in requests]
    isums: list[list[int]] = [[0] * k for _ in requests]
    isumsq: list[list[int]] = [[0] * k for _ in requests]
    width = {"count": 1, "clamped_sum": 4, "lattice": 2, "lattice2": 4}
    for row in rows:
        gi, at = int(row[0]), 1
        for j, r in enumerate(requests):
            got = row[at : at + width[r[0]]]
            at += width[r[0]]
            if r[0] == "count":
                counts[j][gi] = int(got[0])
                continue
            n = got[-2] if r[0] == "clamped_sum" else got[-1]
            if not n:  # no value in this group: nothing to add (a single group's sum is NULL)
                continue
            counts[j][gi] = int(n)
            if r[0] == "clamped_sum":
                grid = SumGrid.of(float(r[2]), float(r[3]))
                nulls = int(got[3]) - int(n)  # each summed as k(lo): taken back out
                at_lo = int(grid.indices(np.array([float(r[2])]))[0])
                total = (int(got[0]) << _SUM_SPLIT) + int(got[1]) - nulls * at_lo
                sums[j][gi] = grid.total(total)
            elif r[0] == "lattice":
                isums[j][gi] = int(got[0])
            else:
                isums[j][gi] = int(got[0])
                isumsq[j][gi] = (int(got[1]) << _SQUARE_SPLIT) + int(got[2])
    out: list[Any] = []
    for j, r in enumerate(requests):
        if r[0] == "count":
            out.append(counts[j])
        elif r[0] == "clamped_sum":
            out.append((sums[j], counts[j]))
        else:
            out.append((isums[j], isumsq[j], counts[j]))
    return out
