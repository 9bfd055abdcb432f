"""A public fixed-point lattice, so that means and variances are summed exactly.

**Why.** A mean or variance is released through *centred* sums (``Σ (x - mid)``,
``Σ (x - mid)²``), whose sensitivity is set by the bounds' width ``w = hi - lo``. Summing
the values in floating point and centring afterwards (``Σx - mid·n``) makes the float
error grow with the bounds' distance from zero: for ``(1e7, 1e7 + 1)`` the error of
``Σx² - 2·mid·Σx + mid²·n`` is thousands of times the sensitivity, and the noise no longer
hides it (Casacuberta et al., "Widespread underestimation of sensitivity in differentially
private libraries", CCS 2022). Here no float error ever reaches a sum.

**The lattice.** From the public bounds only: ``q = 2**j`` is the largest power of two with
``w/q >= 2**BITS`` (so ``2**BITS <= w/q < 2**(BITS+1)``; ``q = 1`` when ``w = 0``),
``B = R(lo/q)`` and ``K = R(hi/q) - B``, where ``R`` rounds half to even. Each clamped value
``x`` in ``[lo, hi]`` is mapped, row by row, to the integer

    ``d(x) = R(x·2**-j) - B``, then clamped into ``[0, K]``.

Every step is exact in IEEE doubles, so every engine (numpy, DuckDB, Spark) computes the
same ``d``: multiplying by a power of two only moves the exponent (done in at most two
factors that are normal doubles; an underflow to a subnormal may round, deterministically);
``R`` of a double is exact; ``R(...)`` and ``B`` are integer-valued doubles whose exact
difference is an integer of magnitude at most ``K + 1 <= 2**(BITS+1) + 1 < 2**53``, so the
subtraction is exact. ``x ↦ d(x)`` is monotone (rounded multiplication and ``R`` are), so
for ``x`` in ``[lo, hi]`` it already lies in ``[0, K]``; the final clamp only makes that
independent of the argument. What matters for privacy is only that ``d`` is a function of
the row alone with values in ``{0, ..., K}``; any float detail inside it is harmless.

**Exact sums.** Engines sum ``d`` and ``d²`` as integers: ``d <= K <= 2**(BITS+1)``, so a
sum of ``n`` terms is below ``n·2**21`` (``n·2**42`` for squares). DuckDB sums BIGINT into
HUGEINT (128 bits); Spark sums ``d`` as BIGINT and ``d²`` as two BIGINT parts
(``d² >> 21`` and ``d² & (2**21 - 1)``), exact below ``2**42`` rows; pandas maps and sums in
one blocked numpy pass whose float sums are proved exact (:mod:`pinqpy.core.grid_sums`),
block totals combined as Python ints. No sum can overflow for any number of rows an engine
can hold, so nothing is refused or raised. The last clamp of ``d`` into ``[0, K]`` may be
left out by an engine whose values are clamped into ``[lo, hi]`` first: it is then the
identity. A NULL clamped to ``lo`` (as SQL's GREATEST and LEAST do) has ``d(lo) = 0``, so it
adds nothing, and only the count must leave it out.

**Centred sums, exactly.** With ``u = 2d - K`` (in ``[-K, K]``), the quantised value is
``x̂ = q·(B + d) = c + (q/2)·u`` with the public centre ``c = q·(B + K/2)``. The mechanisms
release

    ``S = (q/2)·Σu = (q/2)·(2·Σd - K·n)``  and
    ``C = (q/2)²·Σu² - (h²/2)·n``, ``Σu² = 4·Σd² - 4K·Σd + K²·n``,

computed from the integers with :class:`fractions.Fraction`: exact. One row changes ``S`` by
``(q/2)·u``, at most ``h = q·K/2`` (:attr:`Lattice.half`), and ``C`` by
``(q/2)²·u² - h²/2`` in ``[-h²/2, h²/2]``: these are the sensitivities, exactly, with no
float error term. ``h`` is within ``q/2 <= w·2**-(BITS+1)`` of ``w/2`` (``h = w/2`` exactly
when ``lo`` and ``hi`` are multiples of ``q``, as integer bounds narrower than ``2**20``
are).

**Accuracy.** Quantisation moves each value by ``|x̂ - x| <= q/2 <= w·2**-(BITS+1)``
(``4.8e-7`` of the width at ``BITS = 20``), deterministically: the mean moves by at most
``q/2``, the population variance by at most ``2·h·(q/2) + (q/2)² < 2**-BITS·w²/2``
(``1e-6`` of the largest variance ``w²/4`` times 4). Values already on the lattice
(integers, with integer ``lo`` and ``w < 2**20``) are not moved at all.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

__all__ = ["BITS", "SUM_BITS", "Lattice", "SumGrid"]

#: ``2**BITS <= K < 2**(BITS+1)`` levels span the bounds.
BITS = 20
# Exponents of the scale factors: each a normal double, so multiplying by it is exact
# (unless the product under/overflows, which only rounds deterministically).
_MAX_EXP = 1000


def _factors(shift: int) -> tuple[float, ...]:
    """Normal doubles whose product is ``2**-shift``."""
    e = -shift
    if abs(e) <= _MAX_EXP:
        return (math.ldexp(1.0, e),)
    a = e // 2
    return (math.ldexp(1.0, a), math.ldexp(1.0, e - a))


def _floor_log2(x: Fraction) -> int:
    """``floor(log2(x))`` for ``x > 0``, exactly."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** e > x:
        e -= 1
    return e


class _PowerOfTwoStep:
    """What a grid of step ``2**shift`` offers: its exact scale factors, its step, and the
    values scaled to steps (the same multiplications, one scratch array)."""

    shift: int

    @property
    def factors(self) -> tuple[float, ...]:
        """Normal doubles whose product is ``2**-shift``; multiplying by each is exact."""
        return _factors(self.shift)

    @property
    def step(self) -> Fraction:
        """``q = 2**shift``."""
        return Fraction(2) ** self.shift

    def _scaled(self, values: np.ndarray) -> np.ndarray:
        """``values · 2**-shift`` as a new float64 array."""
        t = np.array(values, dtype=np.float64, copy=True)
        for f in self.factors:
            np.multiply(t, f, out=t)
        return t


@dataclass(frozen=True)
class Lattice(_PowerOfTwoStep):
    """The lattice of the bounds ``(lo, hi)``: step ``2**shift``, ``base`` and ``levels``.

    >>> lat = Lattice.of(0.0, 100.0)
    >>> lat.step, lat.levels, lat.half, lat.centre
    (Fraction(1, 16384), 1638400, Fraction(50, 1), Fraction(50, 1))
    >>> lat.index(37.0), lat.index(1e9)
    (606208, 1638400)
    >>> lat.centred_sum(lat.index(37.0), 1)  # 37 - 50
    Fraction(-13, 1)
    """

    lo: float
    hi: float
    shift: int
    base: float
    levels: int

    @staticmethod
    @functools.lru_cache(maxsize=512)
    def of(lo: float, hi: float) -> Lattice:
        lo, hi = float(lo), float(hi)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
            raise ValueError("the lattice needs finite bounds lo <= hi")
        w = Fraction(hi) - Fraction(lo)
        shift = 0 if w == 0 else _floor_log2(w) - BITS
        lat = Lattice(lo, hi, shift, 0.0, 0)
        base = lat._round(lo)
        top = lat._round(hi)
        return Lattice(lo, hi, shift, base, int(top - base))

    # -- public constants ------------------------------------------------------------------
    @property
    def half(self) -> Fraction:
        """``h = q·K/2``: the most one row moves the centred sum (its sensitivity)."""
        return self.step * self.levels / 2

    @property
    def centre(self) -> Fraction:
        """``c = q·(B + K/2)``, the value the sums are centred on."""
        return self.step * (Fraction(self.base) + Fraction(self.levels, 2))

    # -- the per-row map -------------------------------------------------------------------
    def _round(self, x: float) -> float:
        t = x
        for f in self.factors:
            t *= f
        return float(round(t)) if math.isfinite(t) else t  # round(): half to even, exact

    def index(self, x: float) -> int:
        """``d(x)`` for one value (clamped into the bounds first): the reference map."""
        x = min(max(float(x), self.lo), self.hi)
        d = self._round(x) - self.base
        return int(min(max(d, 0.0), float(self.levels)))

    def indices(self, clamped: np.ndarray) -> np.ndarray:
        """``d`` of each value of ``clamped`` (already clamped into the bounds), ``int64``."""
        t = self._scaled(clamped)
        np.rint(t, out=t)
        np.subtract(t, self.base, out=t)
        np.clip(t, 0.0, float(self.levels), out=t)
        return t.astype(np.int64)

    def sql(self, clamped: str, lit: Callable[[float], str], rint: str) -> str:
        """``d`` of the SQL double ``clamped`` (already clamped into the bounds), as a double:
        ``lit`` spells a float literal exactly, ``rint`` names half-to-even rounding
        (``ROUND_EVEN`` in DuckDB, ``bround`` in Spark), called as ``rint(t, 0)``."""
        t = clamped
        for f in self.factors:
            t = f"({t}) * {lit(f)}"
        d = f"{rint}({t}, 0) - {lit(self.base)}"
        return f"least(greatest({d}, {lit(0.0)}), {lit(float(self.levels))})"

    # -- exact centred sums ----------------------------------------------------------------
    def centred_sum(self, s1: int, n: int) -> Fraction:
        """``S = (q/2)·(2·Σd - K·n)`` exactly, from ``s1 = Σd`` over ``n`` values."""
        return self.step / 2 * (2 * int(s1) - self.levels * int(n))

    def centred_squares(self, s1: int, s2: int, n: int) -> Fraction:
        """``C = (q/2)²·Σu² - (h²/2)·n`` exactly, from ``Σd``, ``Σd²`` and ``n``."""
        k, s1, s2, n = self.levels, int(s1), int(s2), int(n)
        sum_u2 = 4 * s2 - 4 * k * s1 + k * k * n
        return (self.step / 2) ** 2 * sum_u2 - self.half**2 / 2 * n

    def value_sums(self, values: np.ndarray | list[float]) -> tuple[int, int, int]:
        """``(Σd, Σd², n)`` of raw values (NaN skipped, the rest clamped): for tests and
        for callers holding plain values."""
        v = np.asarray(values, dtype=np.float64)
        v = v[~np.isnan(v)]
        d = [int(x) for x in self.indices(np.clip(v, self.lo, self.hi))]
        return sum(d), sum(x * x for x in d), len(d)

    def index_sums(self, value_sums: object, counts: object) -> list[int]:
        """``Σd`` per key from exact sums of values that lie on the lattice (integers, for
        bounds like ``(0, 100)``): ``Σx/q - B·n``. For tests and callers holding exact value
        sums; raises ValueError if a sum is not of lattice values."""
        out = []
        for s, n in zip(_flat(value_sums), _flat(counts), strict=True):
            d = Fraction(s) / self.step - Fraction(self.base) * int(n)
            if d.denominator != 1:
                raise ValueError("these sums are not of values on the lattice")
            out.append(int(d))
        return out

    def index_sumsqs(self, value_sumsqs: object, value_sums: object, counts: object) -> list[int]:
        """``Σd²`` per key from exact sums of squares and sums of lattice values:
        ``Σx²/q² - 2B·Σx/q + B²·n`` (see :meth:`index_sums`)."""
        out = []
        q, b = self.step, Fraction(self.base)
        for s2, s, n in zip(_flat(value_sumsqs), _flat(value_sums), _flat(counts), strict=True):
            d = Fraction(s2) / q**2 - 2 * b * Fraction(s) / q + b * b * int(n)
            if d.denominator != 1:
                raise ValueError("these sums are not of values on the lattice")
            out.append(int(d))
        return out


def _flat(x: object) -> list[float]:
    return [float(v) for v in np.atleast_1d(np.asarray(x, dtype=np.float64)).tolist()]


#: A plain sum's grid: ``|x|/q < 2**(SUM_BITS + 1)`` for every clamped value.
SUM_BITS = 40


@dataclass(frozen=True)
class SumGrid(_PowerOfTwoStep):
    """A plain SUM's fixed point: values truncated toward zero to multiples of ``q = 2**shift``.

    With ``M = max(|lo|, |hi|)``, ``q`` is the largest power of two with ``M/q >= 2**40``
    (never below ``2**-1074``, of which every double is a multiple; ``q = 1`` for ``M = 0``).
    Each clamped value maps to ``k = trunc(x·2**-shift)``, exactly (scaling by a power of two
    is exact, and so is truncation), ``|k| < 2**41``; engines sum the ``k`` as integers
    (exactly: DuckDB in 128 bits, Spark in two BIGINT parts, pandas in one blocked pass of
    exact float row sums, :mod:`pinqpy.core.grid_sums`) and return ``q·Σk`` converted to a
    double (within 2 ulps).

    **Sensitivity.** Truncation toward zero never increases a magnitude: ``|q·k| <= |x| <= M``.
    So the sum of the quantised values has sensitivity ``max(|lo|, |hi|)`` exactly, the
    SUM mechanism's. The only error left is the final conversion to a double, at most
    ``2·2**-53·|Σ| <= n·2**-52·M``: ``2**-52·n`` of the sensitivity (below ``1e-6`` up to
    ``4·10**9`` rows). A float sum of the values erred by up to ``n²·2**-53·M`` instead
    (recursive summation), which for ``10**8`` rows is the sensitivity itself.

    **Accuracy.** Each value moves by less than ``q <= M·2**-40`` (nothing for integers when
    ``M < 2**41``, nor for any value that is a multiple of ``q``).

    >>> g = SumGrid.of(-5.0, 3.0)
    >>> g.step, g.indices(np.array([2.5, -0.1]))[0] * g.step
    (Fraction(1, 274877906944), Fraction(5, 2))
    """

    shift: int

    @staticmethod
    @functools.lru_cache(maxsize=512)
    def of(lo: float, hi: float) -> SumGrid:
        m = Fraction(max(abs(float(lo)), abs(float(hi))))
        if m == 0:
            return SumGrid(0)
        return SumGrid(max(_floor_log2(m) - SUM_BITS, -1074))

    @property
    def step_float(self) -> float:
        return math.ldexp(1.0, self.shift)

    def indices(self, clamped: np.ndarray) -> np.ndarray:
        """``k`` of each (clamped, finite) value, ``int64``."""
        t = self._scaled(clamped)
        np.trunc(t, out=t)
        return t.astype(np.int64)

    def sql(self, clamped: str, lit: Callable[[float], str]) -> str:
        """The scaled value ``x·2**-shift`` of the SQL double ``clamped`` (to be truncated)."""
        t = clamped
        for f in self.factors:
            t = f"({t}) * {lit(f)}"
        return t

    def total(self, k_sum: int) -> float:
        """``q·Σk`` as the nearest double (saturating beyond the doubles' range)."""
        x = self.step * int(k_sum)
        try:
            return float(x)
        except OverflowError:
            return 1.7976931348623157e308 if x > 0 else -1.7976931348623157e308
