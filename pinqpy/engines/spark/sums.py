"""The exact counts, sums and lattice sums of several requests over one plan, computed by one
Spark job: the SQL of each request's grid units and aggregates, and their results.

**Integers.** A value of kind int (BIGINT: known from the schema and the expression, never
from the values) with bounds that are integers a double holds exactly (``|lo|, |hi| <=
2**53``) is clamped and summed in BIGINT, with no double in between (it costs about what
Spark's own ``SUM(LEAST(GREATEST(x, lo), hi))`` costs):

* A clamped sum is ``lo·n + Σu``, ``u = c - lo`` for ``c = least(greatest(x, lo), hi)``
  (just ``c`` when ``lo = 0``), ``n`` the count of non-NULL values: each ``u`` is exact
  (``0 <= u <= hi - lo <= 2**54``, no overflow), a NULL's ``u`` is 0, and the clamped value
  ``c`` has ``|c| <= max(|lo|, |hi|)``, the SUM's sensitivity. ``u`` is summed in parts of
  21 bits (one part when ``hi - lo < 2**21``, as for most bounds; up to three), each part
  in ``[0, 2**21)``: no part's sum can leave the int64 range below ``2**42`` rows, the
  grid's own bound (below), so how the sum is computed never depends on the values. The
  parts are summed with ``try_sum``, which returns NULL rather than wrap or raise once a
  running sum leaves the int64 range, whatever the ANSI setting; only beyond ``2**42``
  rows could that happen, and the query then runs again on the grid. ``Σu`` is the parts'
  sums shifted back into place, in Python, and the exact total is converted to a double
  once. For ``|lo|, |hi| < 2**41`` every integer lies on the SUM's grid (``q <= 1``), so
  this is the grid's total exactly; beyond, it is the exact sum the DuckDB, Polars and
  pandas engines give integers, where the grid truncates to multiples of ``q``.
* Lattice sums (means, variances) where the lattice step is ``2**shift <= 1`` (``hi - lo <
  2**21``): ``x·2**-shift`` is an integer, rounding is the identity, so ``d = u·2**-shift``
  with ``u = c - lo`` in ``[0, hi - lo]``, computed exactly in BIGINT. ``Σu`` and ``Σu²`` (in
  two parts, as ``d²`` below) are summed with the same bound as ``d``'s: exact below
  ``2**42`` rows, no overflow; ``Σd = Σu·2**-shift`` and ``Σd² = Σu²·4**-shift`` in Python.

**Other values** (floats, other bounds) are read as DOUBLEs and mapped onto the grid units of
pinqpy.core.lattice, computed in doubles exactly as numpy computes them
(rint is Java's Math.rint, half to even on doubles as np.rint is, without bround's decimal
arithmetic) and summed as BIGINT in parts no sum can overflow below 2**42 rows: never a
float sum, never a DECIMAL one (several times slower). Each unit is one CAST of one
expression of the value: no CASE, no second clamp.

A NULL value is clamped to ``lo`` (Spark's greatest and least skip NULLs), whose lattice
unit (and ``u``) is 0, so it adds nothing and only the count (``COUNT(v)``, the non-NULL
values) leaves it out; its SUM unit ``k(lo)`` is taken back out in Python,
``(COUNT(*) - COUNT(v))·k(lo)``.
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

__all__ = ["REQUESTS", "request_columns", "request_results", "request_values"]

#: The request of each read kind (pinqpy.engines.base.Read) by that name.
REQUESTS = {"count": "count", "sum": "clamped_sum", "mean": "lattice", "moments": "lattice2"}
# A clamped sum's grid units are summed in two BIGINT parts split at this bit (see
# _request_sql).
_SUM_SPLIT = 20
_SQUARE_SPLIT = 21  # d² < 2**43 is summed as d² >> 21 (< 2**22) and d² & (2**21 - 1)
# An integer clamped sum's u = c - lo is summed in parts of this many bits (see the docstring).
_INT_PART = 21
# The aggregates of each request, on the grid and on integers.
_WIDTH = {"count": 1, "clamped_sum": 4, "lattice": 2, "lattice2": 4}
_INT_WIDTH = {"lattice": 2, "lattice2": 4}


def request_values(requests: Sequence[tuple[Any, ...]]) -> list[Expr | PyFunc]:
    """The distinct values the requests aggregate (each read once, as ``__pinq_v<i>``)."""
    values: list[Expr | PyFunc] = []
    for r in requests:
        if r[0] not in _WIDTH:
            raise PinqError(f"unknown aggregate {r[0]!r}")
        if r[0] != "count" and not any(r[1] is v for v in values):
            values.append(r[1])
    return values


def _integral(x: float) -> bool:
    """An integer that a double holds exactly."""
    return float(x).is_integer() and abs(float(x)) <= 2**53


def _on_ints(r: tuple[Any, ...], bigint: bool) -> bool:
    """Whether request ``r`` of a value that is BIGINT (``bigint``) is summed in integers."""
    if not bigint or r[0] == "count" or not (_integral(r[2]) and _integral(r[3])):
        return False
    return r[0] == "clamped_sum" or Lattice.of(float(r[2]), float(r[3])).shift <= 0


def request_columns(
    requests: Sequence[tuple[Any, ...]], values: Sequence[Expr | PyFunc], bigint: Sequence[bool]
) -> tuple[list[str], list[str], list[bool]]:
    """The projection of the values (``bigint[i]``: ``__pinq_v<i>`` is a BIGINT, otherwise a
    DOUBLE) and of every request's units, all the aggregates, in the order
    :func:`request_results` reads them, and which requests are summed in integers."""
    # Per request: the SQL of its units (none for a count), then its aggregates.
    units: list[str] = [f"__pinq_v{i}" for i in range(len(values))]
    aggs: list[str] = []
    ints: list[bool] = []
    for j, r in enumerate(requests):
        i = -1 if r[0] == "count" else next(n for n, v in enumerate(values) if v is r[1])
        on_ints = i >= 0 and _on_ints(r, bigint[i])
        v = f"__pinq_v{i}"
        if i >= 0 and bigint[i] and not on_ints:
            v = f"CAST({v} AS DOUBLE)"  # as the value reads where no request is on integers
        unit, more = (_int_sql if on_ints else _request_sql)(r, v, f"__pinq_u{j}")
        units += [unit] if unit else []
        aggs += more
        ints.append(on_ints)
    return units, aggs, ints


def _int_sql(r: tuple[Any, ...], v: str, unit: str) -> tuple[str, list[str]]:
    """:func:`_request_sql` of a request summed in integers (see the module's docstring)."""
    lo, hi = int(float(r[2])), int(float(r[3]))
    clamped = f"least(greatest({v}, {SPARK.int_lit(lo)}), {SPARK.int_lit(hi)})"
    u = f"{clamped} - {SPARK.int_lit(lo)} AS {unit}" if lo else f"{clamped} AS {unit}"
    if r[0] == "clamped_sum":
        return u, [*(f"try_sum({part})" for part in _int_parts(r, unit)), f"COUNT({v})"]
    if r[0] == "lattice":
        return u, [f"sum({unit})", f"COUNT({v})"]
    return u, [f"sum({unit})", *_square_sums(unit), f"COUNT({v})"]


def _int_parts(r: tuple[Any, ...], unit: str) -> list[str]:
    """The SQL of the parts of ``unit`` = ``c - lo`` in ``[0, hi - lo]``, ``_INT_PART`` bits
    each from the lowest (the last part is the rest: under ``2**_INT_PART`` too)."""
    n = _int_part_count(r)
    if n == 1:
        return [unit]
    mask = (1 << _INT_PART) - 1
    parts = [f"({unit} & {mask})"]
    parts += [f"(shiftright({unit}, {_INT_PART * p}) & {mask})" for p in range(1, n - 1)]
    return [*parts, f"shiftright({unit}, {_INT_PART * (n - 1)})"]


def _int_part_count(r: tuple[Any, ...]) -> int:
    """How many parts of ``_INT_PART`` bits hold ``hi - lo`` of an integer clamped sum."""
    span = int(float(r[3])) - int(float(r[2]))
    return max(1, -(-span.bit_length() // _INT_PART))


def _width(r: tuple[Any, ...], on_ints: bool) -> int:
    """How many aggregates request ``r`` reads (``on_ints``: summed in integers)."""
    if not on_ints:
        return _WIDTH[r[0]]
    return _int_part_count(r) + 1 if r[0] == "clamped_sum" else _INT_WIDTH[r[0]]


def _square_sums(unit: str) -> list[str]:
    """The sums of the two parts of ``unit``² (< 2**43): ``>> 21`` and the low 21 bits."""
    sq = f"({unit} * {unit})"
    mask = (1 << _SQUARE_SPLIT) - 1
    return [f"sum(shiftright({sq}, {_SQUARE_SPLIT}))", f"sum({sq} & {mask})"]


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
    return d, [f"sum({unit})", *_square_sums(unit), f"COUNT({v})"]


def request_results(
    requests: Sequence[tuple[Any, ...]],
    ints: Sequence[bool],
    rows: Sequence[tuple[Any, ...]],
    k: int,
) -> list[Any] | None:
    """Each request's result (as its read method returns it) from the rows of
    :func:`request_columns`' aggregates (``ints``: which requests are summed in integers): a
    group's position, then each request's columns. None if an integer sum overflowed (the
    query must run again on the grid)."""
    counts = [np.zeros(k, dtype=np.int64) for _ in requests]
    sums = [np.zeros(k) for _ in requests]
    isums: list[list[int]] = [[0] * k for _ in requests]
    isumsq: list[list[int]] = [[0] * k for _ in requests]
    for row in rows:
        gi, at = int(row[0]), 1
        for j, r in enumerate(requests):
            width = _width(r, ints[j])
            got = row[at : at + width]
            at += width
            if r[0] == "count":
                counts[j][gi] = int(got[0])
                continue
            n = got[-2] if r[0] == "clamped_sum" and not ints[j] else got[-1]
            if not n:  # no value in this group: nothing to add (a single group's sum is NULL)
                continue
            counts[j][gi] = int(n)
            if r[0] == "clamped_sum":
                total = _int_total(r, got, n) if ints[j] else _grid_total(r, got, n)
                if total is None:
                    return None
                sums[j][gi] = total
            elif ints[j]:
                scale = -Lattice.of(float(r[2]), float(r[3])).shift
                isums[j][gi] = int(got[0]) << scale
                if r[0] == "lattice2":
                    isumsq[j][gi] = ((int(got[1]) << _SQUARE_SPLIT) + int(got[2])) << 2 * scale
            else:
                isums[j][gi] = int(got[0])
                if r[0] == "lattice2":
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


def _grid_total(r: tuple[Any, ...], got: Sequence[Any], n: int) -> float:
    """A clamped sum from its grid units' two parts, less the units of its NULLs."""
    grid = SumGrid.of(float(r[2]), float(r[3]))
    nulls = int(got[3]) - int(n)  # each summed as k(lo): taken back out
    at_lo = int(grid.indices(np.array([float(r[2])]))[0])
    return grid.total((int(got[0]) << _SUM_SPLIT) + int(got[1]) - nulls * at_lo)


def _int_total(r: tuple[Any, ...], got: Sequence[Any], n: int) -> float | None:
    """A clamped sum ``lo·n + Σu`` from the exact integer sums of ``u``'s parts; None on
    overflow (``try_sum`` gave NULL although a value was summed)."""
    parts = got[:-1]
    if any(p is None for p in parts):
        return None
    total = sum(int(p) << (_INT_PART * i) for i, p in enumerate(parts))
    return float(int(float(r[2])) * int(n) + total)
