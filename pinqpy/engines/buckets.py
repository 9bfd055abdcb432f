"""Quantile bucket counts by arithmetic, for engines that aggregate in SQL.

A quantile scores a sorted grid of candidates ``c_0 < ... < c_{m-1}`` from counts of values
equal to each candidate (``eq``) and strictly between neighbours (``gap``). Joining every row
against the intervals is a range join. pinqpy's default grids (every integer, and
``numpy.linspace`` grids such as 0 to 500,000 in 1,000 steps) are usually
``c_k = k·step + start`` exactly in floating point, so an engine can compute each row's
bucket with a few arithmetic operations and run a plain hash aggregation:

- ``k0 = floor((x - start) / step)`` clamped to ``[0, m - 1]``;
- one correction step, since the division can round across a grid point: ``k = k0 - 1`` if
  ``x < c_k0``, ``k0 + 1`` if ``x >= c_{k0+1}``, else ``k0``;
- bucket ``2k`` if ``x == c_k`` (``eq[k]``), else ``2k + 1`` (``gap[k]``).

The correction is enough because ``x`` lies in ``[c_k, c_{k+1})`` for the true ``k``, and the
computed quotient is within a few ulps of ``(x - start) / step``, so its floor is off by at
most one.

``c_k`` is recomputed in the engine by the same IEEE operations that produced the candidate
(a multiply, then an add), so the equality test compares with the candidate itself.
Candidates not of this form use the engine's range join instead.

>>> import numpy as np
>>> uniform_grid(np.linspace(0.0, 10.0, 11))
Grid(start=0.0, step=1.0, stop=10.0, size=11)
>>> uniform_grid(np.array([0.0, 1.0, 3.0])) is None
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Grid", "bucket_query", "grid_bucket_counts", "uniform_grid"]


@dataclass(frozen=True)
class Grid:
    start: float
    step: float
    stop: float
    size: int


def uniform_grid(candidates: np.ndarray) -> Grid | None:
    """The grid the candidates are exactly on, or None (then use a range join)."""
    cand = np.asarray(candidates, dtype="float64")
    m = len(cand)
    if m < 2 or not np.all(np.isfinite(cand)):
        return None
    start, stop = float(cand[0]), float(cand[-1])
    step = (stop - start) / (m - 1)
    if not step > 0:
        return None
    formula = np.arange(m, dtype="float64") * step + start
    if not np.array_equal(cand, formula):
        return None
    return Grid(start, step, stop, m)


def bucket_query(
    rows: str, group: str, value: str, out: str, grid: Grid, lit: Callable[[float], str]
) -> str:
    """SQL that turns ``rows`` (a query with columns ``group`` and ``value``, a non-NULL
    DOUBLE) into ``group`` and the bucket ``out`` (``2k`` or ``2k + 1``) of the value clamped
    into ``[start, stop]``. ``lit`` renders a float literal in the engine's dialect.

    Branch-free, in two SELECTs so ``k0`` and ``k`` are computed once per row; only FLOOR,
    CAST, LEAST and GREATEST are used, which every SQL engine has. Since ``c_{m-1} = stop``
    by the formula too (checked by :func:`uniform_grid`) and ``x <= stop``, the candidate
    after ``k0 = m - 1`` lies above every value and needs no special case.
    """
    m = grid.size
    start, step, stop = lit(grid.start), lit(grid.step), lit(grid.stop)

    def c(k: str) -> str:
        """Candidate k, by the operations that made it."""
        return f"(CAST({k} AS DOUBLE) * {step} + {start})"

    x = f"LEAST(GREATEST({value}, {start}), {stop})"
    k0 = f"LEAST(GREATEST(CAST(FLOOR((__x - {start}) / {step}) AS BIGINT), 0), {m - 1})"
    s1 = f"SELECT {group}, __x, {k0} AS __k0 FROM (SELECT {group}, {x} AS __x FROM ({rows}) s0) s1"
    k = f"__k0 + CAST(__x >= {c('__k0 + 1')} AS BIGINT) - CAST(__x < {c('__k0')} AS BIGINT)"
    s2 = f"SELECT {group}, __x, {k} AS __k FROM ({s1}) s2"
    return f"SELECT {group}, 2 * __k + CAST(__x <> {c('__k')} AS BIGINT) AS {out} FROM ({s2}) s3"


def grid_bucket_counts(
    values: np.ndarray, codes: np.ndarray | None, groups: int, grid: Grid
) -> np.ndarray:
    """numpy's version of :func:`bucket_query`: per group, how many values fall in each bucket,
    shape ``(groups, 2·size - 1)`` (bucket ``2k`` is ``== c_k``, ``2k + 1`` is between ``c_k``
    and ``c_{k+1}``).

    ``values`` may hold NaN (not counted) and ``codes`` may hold -1 (a row outside every
    group; None means one group). The same IEEE operations as in :func:`bucket_query` give the
    same buckets. Blocks of a few thousand rows keep the dozen passes in cache, which makes
    this faster than one pass of ``searchsorted`` over the whole array.
    """
    start, step, stop, m = grid.start, grid.step, grid.stop, grid.size
    width = 2 * m  # the last bucket collects NaN
    flat = np.empty(len(values), dtype=np.intp)  # each row's group and bucket
    block = 1 << 14
    x, k, c = np.empty(block), np.empty(block), np.empty(block)
    t = np.empty(block, dtype=bool)
    for s in range(0, len(values), block):
        part = values[s : s + block]
        n = len(part)
        if n < block:
            x, k, c, t = x[:n], k[:n], c[:n], t[:n]
        np.maximum(part, start, out=x)
        np.minimum(x, stop, out=x)
        np.subtract(x, start, out=k)
        np.divide(k, step, out=k)
        np.floor(k, out=k)
        np.maximum(k, 0, out=k)
        np.minimum(k, m - 1, out=k)
        # One correction step up, else one down: the quotient may round across a grid point.
        np.add(k, 1, out=c)
        np.multiply(c, step, out=c)
        np.add(c, start, out=c)
        np.greater_equal(x, c, out=t)
        np.add(k, t, out=k)
        np.multiply(k, step, out=c)
        np.add(c, start, out=c)
        np.less(x, c, out=t)
        np.subtract(k, t, out=k)
        np.multiply(k, step, out=c)
        np.add(c, start, out=c)
        np.not_equal(x, c, out=t)
        np.multiply(k, 2, out=k)
        np.add(k, t, out=k)
        np.isnan(part, out=t)
        k[t] = width - 1
        b = flat[s : s + n]
        b[...] = k
        if codes is not None:  # code -1 goes to an extra group, dropped below
            g = codes[s : s + n]
            b += np.where(g < 0, groups, g) * width
    out = np.bincount(flat, minlength=(groups + 1) * width)
    return out.reshape(groups + 1, width)[:groups, : width - 1]
