"""The exact aggregates a query reads, as Polars aggregate expressions, and how their results
are decoded: clamped sums, lattice sums (:mod:`pinqpy.core.lattice`) and quantile buckets.

Sums are exact integer sums, never float ones. Polars' Int64 sum wraps around on overflow, so a
sum is taken in Int64 only where no partial sum can leave the int64 range, and in Int128
otherwise:

- integers clamped to integer bounds ``[lo, hi]``: ``n·max(|lo|, |hi|)`` bounds every partial
  sum; Polars holds fewer than ``2**32`` rows per query (its row index is 32 bits; the 64-bit
  build is read as ``2**64``), so Int64 serves for ``max(|lo|, |hi|) < 2**31`` there;
- a SUM's grid units ``k`` (:class:`~pinqpy.core.lattice.SumGrid`, ``|k| < 2**41``): Int128;
- lattice indices ``d <= 2**21``: Int64 (below ``2**53`` for fewer than ``2**32`` rows, exact
  below ``2**42``); their squares ``d² <= 2**42``: Int128.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from pinqpy.core.lattice import Lattice, SumGrid
from pinqpy.engines.buckets import Grid
from pinqpy.engines.polars.values import clamp

__all__ = [
    "bucket_steps",
    "exact_int_sum",
    "integral",
    "lattice_aggs",
    "lattice_result",
    "sum_aggs",
    "sum_result",
]

_ROWS = 2**32 if pl.get_index_type() == pl.UInt32 else 2**64


def integral(x: float) -> bool:
    """An integer that a double holds exactly."""
    return float(x).is_integer() and abs(x) <= 2**53


def exact_int_sum(c: pl.Expr, bound: int) -> pl.Expr:
    """The exact sum of Int64 values of magnitude at most ``bound`` (as an Int64 while no
    partial sum can overflow it, else as an Int128)."""
    if bound * _ROWS < 2**63:
        return c.sum()
    return c.cast(pl.Int128).sum()


def _scaled(x: pl.Expr, factors: tuple[float, ...]) -> pl.Expr:
    for f in factors:
        x = x * f
    return x


def sum_aggs(v: pl.Expr, kind: str, lo: float, hi: float) -> list[pl.Expr]:
    """The clamped sum of ``v`` (non-NULL values only) and how many there are, exactly:
    integers with integer bounds as integers, other values on the SUM's fixed-point grid
    (truncated toward zero, as a cast to Int64 truncates, so no magnitude grows)."""
    if kind == "int" and integral(lo) and integral(hi):
        bound = max(abs(int(lo)), abs(int(hi)))
        return [exact_int_sum(clamp(v, int(lo), int(hi)), bound), v.count()]
    grid = SumGrid.of(lo, hi)
    k = _scaled(clamp(v, float(lo), float(hi)), grid.factors).cast(pl.Int64)
    return [k.cast(pl.Int128).sum(), v.count()]


def sum_result(kind: str, lo: float, hi: float, total: Any, n: Any) -> tuple[float, int]:
    """A group's (sum, count) from :func:`sum_aggs`' results: the exact total converted to
    a double once."""
    total = int(total or 0)
    if kind == "int" and integral(lo) and integral(hi):
        return float(total), int(n)
    return SumGrid.of(lo, hi).total(total), int(n)


def _lattice_ints(kind: str, lo: float, hi: float, squares: bool) -> bool:
    lat = Lattice.of(lo, hi)
    return kind == "int" and not squares and lat.shift <= 0 and integral(lo) and integral(hi)


def lattice_aggs(
    v: pl.Expr, kind: str, lo: float, hi: float, squares: bool, name: str = "__pinq_d"
) -> tuple[list[pl.Expr], list[pl.Expr]]:
    """Exact ``Σd`` (and ``Σd²`` with ``squares``, else 0) of the lattice indices of ``v``
    clamped into [lo, hi], and the count of non-NULL values, as ``(columns, aggs)``: the
    working column ``name`` (``d``, for ``with_columns``) and the aggregates that read it.
    ``d`` is computed as numpy computes it: the scaled value rounded half to even (Polars'
    ``round``) less the base. It is a column of its own because Polars computes an inline
    expression once per use (three times for ``Σd`` and ``Σd·d``). The lattice's final
    clamp into ``[0, K]`` is left out: ``v`` is clamped into ``[lo, hi]`` first (NaN to
    ``hi``, as Polars orders it), and scaling and rounding are monotone, so ``d`` already
    lies in ``[0, K]`` (:mod:`pinqpy.core.lattice`)."""
    lat = Lattice.of(lo, hi)
    if _lattice_ints(kind, lo, hi, squares):
        # Integers on a lattice of step 2**shift <= 1: rounding is the identity, and
        # Σd = (Σx - lo·n)·2**-shift, from the exact integer sum of the clamped values.
        bound = max(abs(int(lo)), abs(int(hi)))
        return [], [exact_int_sum(clamp(v, int(lo), int(hi)), bound), pl.lit(0), v.count()]
    t = _scaled(clamp(v.cast(pl.Float64), float(lo), float(hi)), lat.factors)
    d = pl.col(name)
    sq = exact_int_sum(d * d, lat.levels**2) if squares else pl.lit(0)
    column = (t.round(0) - lat.base).cast(pl.Int64).alias(name)
    return [column], [exact_int_sum(d, lat.levels), sq, v.count()]


def lattice_result(
    kind: str, lo: float, hi: float, squares: bool, s1: Any, s2: Any, n: Any
) -> tuple[int, int, int]:
    """A group's exact ``(Σd, Σd², n)`` from :func:`lattice_aggs`' results."""
    n = int(n)
    if _lattice_ints(kind, lo, hi, squares):
        lat = Lattice.of(lo, hi)
        return (int(s1 or 0) - int(lo) * n) << -lat.shift, 0, n
    return int(s1 or 0), int(s2 or 0), n


def bucket_steps(x: pl.Expr, kind: str, candidates: np.ndarray, grid: Grid | None) -> list[pl.Expr]:
    """Working columns, each computed from the ones before it (``with_columns`` in turn),
    whose last, ``__pinq_b``, is each non-NULL value's bucket among the sorted candidates:
    ``2j`` for a value equal to candidate ``j``, ``2j - 1`` for one strictly between
    candidates ``j - 1`` and ``j`` (values clamped to the candidates' range first).

    Integers on a grid of integers are bucketed in integer arithmetic, which is exact (the
    grid's points are exact doubles, so a value's bucket is the one pandas finds); other
    values on a uniform grid by the IEEE operations of
    :func:`~pinqpy.engines.buckets.grid_bucket_counts` (the same buckets); others by a binary
    search, as numpy's ``searchsorted``."""
    c, k, b = pl.col("__pinq_c"), pl.col("__pinq_j"), "__pinq_b"
    if grid is not None and kind == "int" and all(
        integral(v) for v in (grid.start, grid.step, grid.stop)
    ):
        start, step = int(grid.start), int(grid.step)
        d = clamp(x, start, int(grid.stop)) - start
        return [
            d.alias("__pinq_c"),
            (c // step).alias("__pinq_j"),
            (2 * k + (c != k * step).cast(pl.Int64)).alias(b),
        ]
    x = x.cast(pl.Float64)
    if grid is not None:
        start, step, m = grid.start, grid.step, grid.size
        return [
            clamp(x, start, grid.stop).alias("__pinq_c"),
            clamp(((c - start) / step).floor(), 0.0, float(m - 1)).alias("__pinq_j"),
            # One correction step up, else one down: the quotient may round across a point.
            (k + (c >= (k + 1.0) * step + start).cast(pl.Float64)).alias("__pinq_j"),
            (k - (c < k * step + start).cast(pl.Float64)).alias("__pinq_j"),
            (2.0 * k + (c != k * step + start).cast(pl.Float64)).cast(pl.Int64).alias(b),
        ]
    cand = pl.Series(np.asarray(candidates, dtype=np.float64))
    j = pl.lit(cand).search_sorted(c, side="left").cast(pl.Int64)
    return [
        clamp(x, float(cand[0]), float(cand[-1])).alias("__pinq_c"),
        pl.min_horizontal(j, len(cand) - 1).alias("__pinq_j"),
        pl.when(pl.lit(cand).gather(k) == c).then(2 * k).otherwise(2 * k - 1).alias(b),
    ]
