"""Grid bucketing, in SQL and in numpy, places every value exactly where a binary search over
the candidates does, including values one ulp either side of a candidate, where a floor of
the quotient rounds wrongly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinqpy.engines.buckets import bucket_query, grid_bucket_counts, uniform_grid
from pinqpy.noise.mechanisms import default_candidates


def reference(values: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Bucket 2j for x == c_j, 2j + 1 for c_j < x < c_j+1 (values clamped first)."""
    x = np.clip(values, cand[0], cand[-1])
    j = np.searchsorted(cand, x, side="left")
    hit = cand[np.minimum(j, len(cand) - 1)] == x
    return np.where(hit, 2 * j, 2 * j - 1)


def in_duckdb(values: np.ndarray, cand: np.ndarray) -> np.ndarray:
    duckdb = pytest.importorskip("duckdb")
    grid = uniform_grid(cand)
    assert grid is not None
    con = duckdb.connect()
    con.register(
        "v", pd.DataFrame({"g": 0, "x": values.astype("float64"), "i": range(len(values))})
    )
    rows = "SELECT g, x, i FROM v"
    query = bucket_query(
        f"SELECT g, i, x FROM ({rows})",
        "g, i",
        "x",
        "b",
        grid,
        lambda f: f"CAST('{f!r}' AS DOUBLE)",
    )
    out = con.sql(f"SELECT i, b FROM ({query}) ORDER BY i").fetchall()
    return np.array([b for _, b in out], dtype=np.int64)


def tricky_values(cand: np.ndarray, extra: list[float]) -> np.ndarray:
    near = np.concatenate(
        [cand, np.nextafter(cand, -np.inf), np.nextafter(cand, np.inf), (cand[:-1] + cand[1:]) / 2]
    )
    return np.concatenate([near, np.array(extra, dtype="float64")])


@pytest.mark.parametrize(
    "bounds", [(0, 100), (0, 500_000), (0.0, 1.0), (-3.5, 7.25), (0.1, 0.7), (18, 90.5), (-1e6, 3)]
)
def test_default_grids_bucket_exactly(bounds: tuple[float, float]) -> None:
    cand = default_candidates(*bounds)
    values = tricky_values(cand, [-1e9, 1e9, bounds[0] - 1, bounds[1] + 1])
    np.testing.assert_array_equal(in_duckdb(values, cand), reference(values, cand))


def in_numpy(values: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Each value's bucket from grid_bucket_counts, one value per group."""
    grid = uniform_grid(cand)
    assert grid is not None
    counts = grid_bucket_counts(values, np.arange(len(values)), len(values), grid)
    assert (counts.sum(axis=1) == 1).all()
    return counts.argmax(axis=1)


@pytest.mark.parametrize(
    "bounds", [(0, 100), (0, 500_000), (0.0, 1.0), (-3.5, 7.25), (0.1, 0.7), (18, 90.5), (-1e6, 3)]
)
def test_default_grids_bucket_exactly_in_numpy(bounds: tuple[float, float]) -> None:
    cand = default_candidates(*bounds)
    values = tricky_values(cand, [-1e9, 1e9, -np.inf, np.inf, bounds[0] - 1, bounds[1] + 1])
    np.testing.assert_array_equal(in_numpy(values, cand), reference(values, cand))


def test_numpy_counts_skip_nan_and_unlisted_rows_across_blocks() -> None:
    rng = np.random.default_rng(7)
    cand = default_candidates(0, 1000)
    n = 70_000  # several blocks of rows, the last one partial
    values = rng.uniform(-100, 1100, n)
    values[::3] = values[::3].round()  # many values on candidates
    values[rng.random(n) < 0.05] = np.nan
    codes = rng.integers(-1, 3, n)
    grid = uniform_grid(cand)
    assert grid is not None
    got = grid_bucket_counts(values, codes, 3, grid)
    ok = ~np.isnan(values)
    buckets = reference(values[ok], cand)
    for g in range(3):
        want = np.bincount(buckets[codes[ok] == g], minlength=2 * len(cand) - 1)
        np.testing.assert_array_equal(got[g], want)
    one = grid_bucket_counts(values, None, 1, grid)
    np.testing.assert_array_equal(one[0], np.bincount(buckets, minlength=2 * len(cand) - 1))


@settings(max_examples=40, deadline=None)
@given(
    lo=st.floats(-1e6, 1e6, allow_nan=False),
    width=st.floats(1e-3, 1e6, allow_nan=False),
    m=st.integers(2, 300),
    extra=st.lists(st.floats(-2e6, 2e6, allow_nan=False), max_size=20),
)
def test_random_linspace_grids(lo: float, width: float, m: int, extra: list[float]) -> None:
    cand = np.linspace(lo, lo + width, m)
    if uniform_grid(cand) is None:
        return  # not an exact arithmetic grid: the engine uses its range join instead
    values = tricky_values(cand, extra)
    np.testing.assert_array_equal(in_numpy(values, cand), reference(values, cand))
    np.testing.assert_array_equal(in_duckdb(values, cand), reference(values, cand))


def test_grids_not_of_the_form_are_refused() -> None:
    assert uniform_grid(np.array([0.0, 1.0, 3.0])) is None
    assert uniform_grid(np.array([5.0])) is None
    assert uniform_grid(np.array([0.0, np.inf])) is None
    assert uniform_grid(np.array([2.0, 1.0])) is None
