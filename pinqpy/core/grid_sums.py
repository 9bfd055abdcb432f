"""Exact sums of grid units over a numpy array, in one vectorised pass of cache-sized blocks.

The lattice of a mean or variance (:class:`~pinqpy.core.lattice.Lattice`) and the fixed
point of a plain SUM (:class:`~pinqpy.core.lattice.SumGrid`) map each clamped value to an
integer unit; this module sums those units exactly, at close to the speed of reading the
column once. Each block of at most :data:`BLOCK` rows is mapped in place in one float64
buffer (clamp, scale by powers of two, round), so no temporary grows with the data and the
buffer stays in cache; the block's units are summed in float64 where every partial sum is
provably an integer below ``2**53`` (so no rounding can happen, in any order of addition),
and the block totals are added as Python ints (or in ``int64`` while provably below
``2**63``). No Python runs per row; a few calls run per block.

**Why each float sum is exact.** A float64 addition of two integers whose exact sum has
magnitude at most ``2**53`` returns that sum exactly. If every term is a non-negative
integer and the terms' total is at most ``2**53``, then every partial sum any algorithm forms
(numpy's pairwise sum, BLAS's several accumulators, a fused multiply-add) is a sub-sum of the
terms, an integer in ``[0, 2**53]``: no step rounds, and the result is the exact total. With
terms of either sign, ``Σ|t| <= 2**53`` bounds every sub-sum the same way. Sums are taken as
dot products of short rows (with ones, or of a row with itself; numpy's ``matmul`` over a
stack of rows, which BLAS computes one row at a time, never spreading one over threads),
so they run at the speed of memory; the argument holds for any order of the additions.
The bounds used:

* lattice units ``d`` lie in ``[0, K]`` with ``K <= 2**21`` (``K = R(hi/q) - R(lo/q) <
  w/q + 1 < 2**21 + 1``): a row of :data:`SUM_ROW` ``= 2**12`` units sums below ``2**33``;
* their squares ``d² <= 2**42`` are summed as dot products of rows of :data:`SQUARE_ROW`
  ``= 2**10`` units (``2**10·2**42 = 2**52``; ``d·d`` itself is exact, below ``2**53``);
* SUM units have ``|k| < 2**41``: rows of :data:`SUM_ROW` ``= 2**12`` units sum below
  ``2**53`` in magnitude;
* per-group sums (``np.bincount``'s float64 accumulator adds each row's weight to its
  group's running total in row order) use blocks of :data:`GROUP_BLOCK` ``= 2**20`` rows and
  weights split so that a group's total stays below ``2**53``: ``d`` itself (``2**41``),
  ``d² = 2**11·(a·d) + b·d`` with ``a = floor(d/2**11) <= 2**10``, ``b = d - 2**11·a <
  2**11`` (``a·d < 2**31.01``, ``b·d < 2**32``: totals below ``2**52``), and
  ``k = 2**21·a + r`` with ``|a| <= 2**20``, ``0 <= r < 2**21`` (``2**41``).

Every split and product above is itself exact: scaling by a power of two and ``floor`` are
exact, ``d - 2**11·a`` is an exact difference of integers below ``2**53``, and products of
integers below ``2**53`` are exact. The row totals (integers below ``2**53``) are converted
to ``int64`` exactly and summed there: a block's ``2**6`` dot products sum below ``2**58``.

**The units are those of the reference map.** The per-row arithmetic is the same as
:meth:`Lattice.indices <pinqpy.core.lattice.Lattice.indices>` and
:meth:`SumGrid.indices <pinqpy.core.lattice.SumGrid.indices>` (the same float64 operations in
the same order on the same float64 value of each row; a float32, integer or boolean column
converts to float64 exactly as ``astype`` does), except the lattice's last clamp of ``d``
into ``[0, K]``: that one is the identity here, because the values are clamped into
``[lo, hi]`` first and the map is monotone with ``d(lo) = 0`` and ``d(hi) = K``. The clamp
sends a NaN (NULL) to ``lo`` (``fmax``), so on a lattice its unit is ``d(lo) = 0``; a NULL's
SUM unit, and any unit of a row outside ``keep``, is set to 0. Such rows add nothing, and
they are left out of the row count.
"""

from __future__ import annotations

import numpy as np

from pinqpy.core.lattice import Lattice, SumGrid

__all__ = [
    "BLOCK",
    "GROUP_BLOCK",
    "SQUARE_ROW",
    "SUM_ROW",
    "grid_group_sums",
    "grid_sum",
    "lattice_group_sums",
    "lattice_sums",
]

#: Rows per block of an ungrouped sum: a 512 KiB float64 buffer, which stays in cache.
BLOCK = 1 << 16
#: Units per exact dot product of squares: ``2**10 · (2**21)**2 = 2**52``.
SQUARE_ROW = 1 << 10
#: Units per exact float sum of SUM units: ``2**12 · 2**41 = 2**53``.
SUM_ROW = 1 << 12
#: Rows per block of a grouped sum: every group's float total stays below ``2**53``.
GROUP_BLOCK = 1 << 20
_SPLIT = 2.0**11  # d = a·2**11 + b
_SPLIT_K = 2.0**21  # k = a·2**21 + r
_INT64_ROOM = 2**62


def _as_float(values: np.ndarray) -> np.ndarray:
    """The values as a real-valued numpy array a float64 ufunc reads without a copy."""
    v = np.asarray(values)
    if v.dtype.kind not in "fiub" or v.ndim != 1:
        v = np.asarray(v, dtype=np.float64).reshape(-1)
    return v


def _clamp(src: np.ndarray, lo: float, hi: float, out: np.ndarray) -> None:
    """``out = min(max(float64(src), lo), hi)``, ``±inf`` to the bounds and NaN to ``lo``
    (``fmax`` returns its other argument for a NaN): no NaN goes further."""
    np.fmax(src, lo, out=out, dtype=np.float64)
    np.minimum(out, hi, out=out)


def _lattice_units(lat: Lattice, src: np.ndarray, out: np.ndarray) -> None:
    """``d`` of each value of ``src``, into ``out``: clamp, scale, round, less the base."""
    _clamp(src, lat.lo, lat.hi, out)
    for f in lat.factors:
        np.multiply(out, f, out=out)
    np.rint(out, out=out)
    np.subtract(out, lat.base, out=out)


def _grid_units(grid: SumGrid, src: np.ndarray, lo: float, hi: float, out: np.ndarray) -> None:
    """``k`` of each value of ``src``, into ``out``: clamp, scale, truncate toward zero."""
    _clamp(src, lo, hi, out)
    for f in grid.factors:
        np.multiply(out, f, out=out)
    np.trunc(out, out=out)


def _skip(
    src: np.ndarray, out: np.ndarray, keep: np.ndarray | None, scratch: np.ndarray, zero: bool
) -> int:
    """How many rows are left out: NaN in ``src`` and rows outside ``keep``. Rows outside
    ``keep`` get the unit 0, and so do NaN rows when ``zero`` (otherwise they keep the unit
    of ``lo``, which is 0 on a lattice)."""
    m = len(out)
    if src.dtype.kind != "f":
        if keep is None:
            return 0
        drop = np.logical_not(keep, out=scratch[:m])
    else:
        drop = np.isnan(src, out=scratch[:m])
        if keep is not None:
            np.less_equal(keep, drop, out=drop)  # not kept, or NaN
        elif not zero:
            return int(np.count_nonzero(drop))
    dropped = int(np.count_nonzero(drop))
    if dropped:
        np.copyto(out, 0.0, where=drop)
    return dropped


def _row_sums(units: np.ndarray, ones: np.ndarray) -> int:
    """The exact sum of ``units`` (``len`` a multiple of ``len(ones)``, a column of ones):
    each row's sum, a product with ``ones``, is exact (see the module docstring)."""
    parts = units.reshape(-1, 1, len(ones)) @ ones
    return int(parts.reshape(-1).astype(np.int64).sum())


def _row_squares(units: np.ndarray) -> int:
    """The exact ``Σ d²`` of ``units`` (``len`` a multiple of :data:`SQUARE_ROW`)."""
    rows = units.reshape(-1, 1, SQUARE_ROW)
    parts = np.matmul(rows, rows.transpose(0, 2, 1)).reshape(-1)
    return int(parts.astype(np.int64).sum())


def _padded(buf: np.ndarray, m: int, row: int) -> np.ndarray:
    """The first ``m`` units of ``buf`` and zeros up to a multiple of ``row``."""
    end = -(-m // row) * row
    buf[m:end] = 0.0
    return buf[:end]


def _buffers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """A float64 block buffer and a bool scratch one: :data:`BLOCK` long, or less for fewer
    rows, and always a multiple of :data:`SUM_ROW` (so of :data:`SQUARE_ROW`) for padding."""
    size = min(BLOCK, -(-max(n, 1) // SUM_ROW) * SUM_ROW)
    return np.empty(size), np.empty(size, dtype=bool)


def _blocks(n: int, size: int) -> range:
    return range(0, max(n, 1), size)


def lattice_sums(
    lat: Lattice, values: np.ndarray, keep: np.ndarray | None = None, squares: bool = False
) -> tuple[int, int, int]:
    """``(Σd, Σd², n)`` over the non-NaN values of ``values`` (inside ``keep``, if given),
    clamped into the lattice's bounds; ``Σd² = 0`` unless ``squares``. Exact.

    >>> lat = Lattice.of(0.0, 100.0)
    >>> v = np.array([37.0, np.nan, 1e9, -3.0])
    >>> lattice_sums(lat, v, squares=True) == lat.value_sums(v)
    True
    """
    src = _as_float(values)
    buf, scratch = _buffers(len(src))
    ones = np.ones((SUM_ROW, 1))
    s1 = s2 = n = 0
    for start in _blocks(len(src), BLOCK):
        blk = src[start : start + BLOCK]
        m = len(blk)
        out = buf[:m]
        _lattice_units(lat, blk, out)
        kept = None if keep is None else keep[start : start + BLOCK]
        n += m - _skip(blk, out, kept, scratch, zero=False)
        units = _padded(buf, m, SUM_ROW)
        s1 += _row_sums(units, ones)
        if squares:
            s2 += _row_squares(units)
    return s1, s2, n


def grid_sum(
    grid: SumGrid, values: np.ndarray, lo: float, hi: float, keep: np.ndarray | None = None
) -> tuple[int, int]:
    """``(Σk, n)`` over the non-NaN values of ``values`` (inside ``keep``) clamped into
    ``[lo, hi]``, ``k`` the SUM grid's unit. Exact.

    >>> g = SumGrid.of(-5.0, 3.0)
    >>> k, n = grid_sum(g, np.array([2.5, -0.1, np.nan, 9.0]), -5.0, 3.0)
    >>> k == int(g.indices(np.array([2.5, -0.1, 3.0])).sum()), n
    (True, 3)
    """
    src = _as_float(values)
    buf, scratch = _buffers(len(src))
    ones = np.ones((SUM_ROW, 1))
    total = n = 0
    for start in _blocks(len(src), BLOCK):
        blk = src[start : start + BLOCK]
        m = len(blk)
        out = buf[:m]
        _grid_units(grid, blk, lo, hi, out)
        kept = None if keep is None else keep[start : start + BLOCK]
        n += m - _skip(blk, out, kept, scratch, zero=True)
        total += _row_sums(_padded(buf, m, SUM_ROW), ones)
    return total, n


class _GroupTotals:
    """Exact per-group totals: an ``int64`` array while every entry is provably below
    ``2**62`` in magnitude, moved into Python ints before it could pass that."""

    def __init__(self, k: int) -> None:
        self.fast = np.zeros(k, dtype=np.int64)
        self.slow = [0] * k
        self.room = _INT64_ROOM

    def add(self, part: np.ndarray, bound: int) -> None:
        """Add ``part`` (integer-valued float64, each entry at most ``bound`` in magnitude)."""
        if bound > self.room:
            self.slow = [a + int(b) for a, b in zip(self.slow, self.fast.tolist(), strict=True)]
            self.fast[:] = 0
            self.room = _INT64_ROOM
        self.fast += part.astype(np.int64)
        self.room -= bound

    def totals(self, scale: int = 1) -> list[int]:
        return [(a + int(b)) * scale for a, b in zip(self.slow, self.fast.tolist(), strict=True)]


def _group_weights(codes: np.ndarray, k: int, weights: np.ndarray) -> np.ndarray:
    """Per group position ``0..k-1``, the float64 sum of ``weights``; position ``k`` and
    above (rows not counted) is dropped."""
    return np.bincount(codes, weights=weights, minlength=k + 1)[:k]


def lattice_group_sums(
    lat: Lattice, values: np.ndarray, codes: np.ndarray, k: int, squares: bool = False
) -> tuple[list[int], list[int]]:
    """Per group position ``0..k-1`` (``codes``; ``k`` marks a row not counted): ``Σd`` and
    ``Σd²`` (zeros unless ``squares``) of the non-NaN values clamped into the bounds. Exact.

    >>> lat = Lattice.of(0.0, 100.0)
    >>> v = np.array([37.0, 50.0, np.nan, 1e9])
    >>> s1, s2 = lattice_group_sums(lat, v, np.array([0, 1, 0, 2]), 2, squares=True)
    >>> [s1, s2] == [[lat.value_sums(v[[0]])[0], lat.value_sums(v[[1]])[0]],
    ...              [lat.value_sums(v[[0]])[1], lat.value_sums(v[[1]])[1]]]
    True
    """
    src = _as_float(values)
    size = min(GROUP_BLOCK, max(len(src), 1))
    buf = np.empty(size)
    part_a = np.empty(size) if squares else buf
    part_b = np.empty(size) if squares else buf
    top = lat.levels
    s1, sa, sb = _GroupTotals(k), _GroupTotals(k), _GroupTotals(k)
    for start in _blocks(len(src), size):
        blk = src[start : start + size]
        m = len(blk)
        d, c = buf[:m], codes[start : start + size]
        _lattice_units(lat, blk, d)
        s1.add(_group_weights(c, k, d), m * top)
        if squares:
            a = np.multiply(d, 1.0 / _SPLIT, out=part_a[:m])
            np.floor(a, out=a)
            b_d = np.multiply(a, -_SPLIT, out=part_b[:m])  # -2**11·a, b = d - 2**11·a, b·d
            np.add(b_d, d, out=b_d)
            np.multiply(b_d, d, out=b_d)
            np.multiply(a, d, out=a)  # a·d
            sa.add(_group_weights(c, k, a), m * (top // 2**11) * top)
            sb.add(_group_weights(c, k, b_d), m * 2**11 * top)
    if not squares:
        return s1.totals(), [0] * k
    big, small = sa.totals(2**11), sb.totals()
    return s1.totals(), [x + y for x, y in zip(big, small, strict=True)]


def grid_group_sums(
    grid: SumGrid, values: np.ndarray, lo: float, hi: float, codes: np.ndarray, k: int
) -> list[int]:
    """Per group position ``0..k-1`` (``codes``; ``k`` marks a row not counted): ``Σk`` of
    the non-NaN values clamped into ``[lo, hi]``. Exact.

    >>> g = SumGrid.of(-5.0, 3.0)
    >>> got = grid_group_sums(g, np.array([2.5, -0.1, 9.0]), -5.0, 3.0, np.array([0, 1, 0]), 2)
    >>> got == [int(g.indices(np.array([2.5, 3.0])).sum()), int(g.indices(np.array([-0.1]))[0])]
    True
    """
    src = _as_float(values)
    size = min(GROUP_BLOCK, max(len(src), 1))
    buf = np.empty(size)
    high = np.empty(size)
    scratch = np.empty(size, dtype=bool)
    hi_tot, lo_tot = _GroupTotals(k), _GroupTotals(k)
    for start in _blocks(len(src), size):
        blk = src[start : start + size]
        m = len(blk)
        u, c = buf[:m], codes[start : start + size]
        _grid_units(grid, blk, lo, hi, u)
        _skip(blk, u, None, scratch, zero=True)
        a = np.multiply(u, 1.0 / _SPLIT_K, out=high[:m])
        np.floor(a, out=a)  # |a| <= 2**20
        hi_tot.add(_group_weights(c, k, a), m * 2**20)
        np.multiply(a, -_SPLIT_K, out=a)
        np.add(u, a, out=u)  # r = k - 2**21·a in [0, 2**21)
        lo_tot.add(_group_weights(c, k, u), m * 2**21)
    return [x + y for x, y in zip(hi_tot.totals(2**21), lo_tot.totals(), strict=True)]
