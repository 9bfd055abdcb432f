"""The blocked grid sums (pinqpy.core.grid_sums) equal the reference per-row maps summed as
Python ints, exactly: for every dtype an engine hands them, NULLs, infinities, masks, block
edges, bounds far from zero or near the ends of the doubles, and sums at their proved maxima."""

from __future__ import annotations

import numpy as np
import pytest

from pinqpy.core import grid_sums as gs
from pinqpy.core.lattice import Lattice, SumGrid

BOUNDS = [
    (0.0, 100.0),
    (-50.0, 250_000.0),
    (1e7, 1e7 + 1),  # far from zero: the float-cancellation case
    (-1e300, 1e300),
    (0.0, 5e-324),  # subnormal width
    (-3.5, -3.5),  # one point
    (-1e-9, 7e15),
    (2.0**60, 2.0**61),
]
SIZES = [0, 1, 1023, gs.SQUARE_ROW + 1, gs.BLOCK - 1, gs.BLOCK + 5]


def _exact(ints: np.ndarray) -> int:
    return sum(int(v) for v in ints.tolist())


def _reference_lattice(lat: Lattice, v: np.ndarray, keep: np.ndarray | None) -> tuple:
    x = v.astype(np.float64)
    ok = ~np.isnan(x) if keep is None else ~np.isnan(x) & keep
    d = lat.indices(np.clip(x[ok], lat.lo, lat.hi))
    return _exact(d), _exact(d.astype(object) ** 2), int(ok.sum())


def _reference_grid(g: SumGrid, v: np.ndarray, lo: float, hi: float, keep: np.ndarray | None):
    x = v.astype(np.float64)
    ok = ~np.isnan(x) if keep is None else ~np.isnan(x) & keep
    return _exact(g.indices(np.clip(x[ok], lo, hi))), int(ok.sum())


def _values(rng: np.random.Generator, n: int, lo: float, hi: float) -> np.ndarray:
    """Values inside, at, and beyond the bounds, with NaN, ±inf and -0.0."""
    w = hi - lo if np.isfinite(hi - lo) else 1e300
    x = lo + rng.uniform(-0.25, 1.25, n) * w
    picks = rng.integers(0, 8, n)
    x[picks == 0] = np.nan
    x[picks == 1] = lo
    x[picks == 2] = hi
    x[picks == 3] = np.inf if n % 2 else -np.inf
    x[picks == 4] = -0.0
    return x


@pytest.mark.parametrize("lo, hi", BOUNDS)
@pytest.mark.parametrize("n", SIZES)
def test_lattice_sums_equal_the_reference(lo: float, hi: float, n: int) -> None:
    rng = np.random.default_rng(n)
    lat = Lattice.of(lo, hi)
    v = _values(rng, n, lo, hi)
    keep = rng.random(n) < 0.7
    assert gs.lattice_sums(lat, v, squares=True) == _reference_lattice(lat, v, None)
    assert gs.lattice_sums(lat, v, keep, squares=True) == _reference_lattice(lat, v, keep)
    s1, s2, count = gs.lattice_sums(lat, v)
    assert (s1, s2, count) == (_reference_lattice(lat, v, None)[0], 0, count)


@pytest.mark.parametrize("lo, hi", BOUNDS)
@pytest.mark.parametrize("n", SIZES)
def test_grid_sum_equals_the_reference(lo: float, hi: float, n: int) -> None:
    rng = np.random.default_rng(n + 1)
    g = SumGrid.of(lo, hi)
    v = _values(rng, n, lo, hi)
    keep = rng.random(n) < 0.5
    assert gs.grid_sum(g, v, lo, hi) == _reference_grid(g, v, lo, hi, None)
    assert gs.grid_sum(g, v, lo, hi, keep) == _reference_grid(g, v, lo, hi, keep)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8", "int8", "bool"])
def test_other_dtypes_sum_as_their_float64_values(dtype: str) -> None:
    rng = np.random.default_rng(3)
    raw = rng.normal(0, 300, gs.BLOCK + 77)
    v = raw.astype(dtype) if dtype != "bool" else raw > 0
    if v.dtype.kind == "f":
        v[::13] = np.nan
    for lo, hi in [(-100.5, 200.25), (0.0, 1.0), (1e7, 1e7 + 1)]:
        lat, g = Lattice.of(lo, hi), SumGrid.of(lo, hi)
        assert gs.lattice_sums(lat, v, squares=True) == _reference_lattice(lat, v, None)
        assert gs.grid_sum(g, v, lo, hi) == _reference_grid(g, v, lo, hi, None)


def test_squares_at_their_proved_maximum() -> None:
    """Every unit at K = 2**21 (the largest a lattice has): Σd² = n·K², summed in float
    rows of 2**10 units, is exact."""
    lo, hi = 0.4, 2.0**21 - 0.4  # width below 2**21: q = 1, and K = R(hi) - R(lo) = 2**21
    lat = Lattice.of(lo, hi)
    assert lat.levels == 2**21
    n = 3 * gs.BLOCK + 11
    v = np.full(n, hi)
    assert gs.lattice_sums(lat, v, squares=True) == (n * 2**21, n * 2**42, n)
    codes = np.zeros(n, dtype=np.int64)
    assert gs.lattice_group_sums(lat, v, codes, 1, squares=True) == ([n * 2**21], [n * 2**42])


def test_sum_units_at_their_proved_maximum() -> None:
    """Units of magnitude 2**41 - 1 (just below the SUM grid's bound), all of one sign and
    mixed: each float row of 2**12 units sums exactly."""
    m = 2.0**41 - 1  # q = 1 for M in [2**40, 2**41)
    g = SumGrid.of(-m, m)
    assert g.step == 1
    n = gs.BLOCK + 3 * gs.SUM_ROW + 5
    top = np.full(n, m)
    assert gs.grid_sum(g, top, -m, m) == (n * (2**41 - 1), n)
    mixed = np.where(np.arange(n) % 3 == 0, -m, m)
    want = _reference_grid(g, mixed, -m, m, None)
    assert gs.grid_sum(g, mixed, -m, m) == want
    codes = np.arange(n) % 2
    sums = gs.grid_group_sums(g, mixed, -m, m, codes, 2)
    assert sums == [_reference_grid(g, mixed[codes == j], -m, m, None)[0] for j in (0, 1)]


@pytest.mark.parametrize("lo, hi", BOUNDS)
def test_group_sums_equal_the_reference(lo: float, hi: float) -> None:
    rng = np.random.default_rng(5)
    n, k = 2 * gs.BLOCK + 9, 7
    v = _values(rng, n, lo, hi)
    codes = rng.integers(0, k + 1, n)  # k: a row not counted
    lat, g = Lattice.of(lo, hi), SumGrid.of(lo, hi)
    s1, s2 = gs.lattice_group_sums(lat, v, codes, k, squares=True)
    sums = gs.grid_group_sums(g, v, lo, hi, codes, k)
    for j in range(k):
        ref = _reference_lattice(lat, v[codes == j], None)
        assert (s1[j], s2[j]) == ref[:2]
        assert sums[j] == _reference_grid(g, v[codes == j], lo, hi, None)[0]
    assert gs.lattice_group_sums(lat, v, codes, k)[1] == [0] * k


def test_group_totals_move_to_python_ints_before_int64_could_overflow() -> None:
    totals = gs._GroupTotals(2)
    big = np.array([2.0**52, -(2.0**52)])
    for _ in range(3000):  # 3000·2**52 is past 2**63
        totals.add(big, 2**52)
    assert totals.totals() == [3000 * 2**52, -3000 * 2**52]
