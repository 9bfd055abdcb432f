"""Floating-point-safe noise in the mechanisms: integer counts and one public lattice per release.

The property tested here is the one Mironov's attack (CCS 2012) breaks for textbook float
noise: which numbers a release can output must not depend on the data. Counts are integers;
a real-valued measurement (a sum, the centred sum of a mean or a variance, the centred sum of
squares) is an exact multiple of a power of two ``g`` that depends only on the public
parameters, so the released values of two neighbouring datasets lie on the same lattice.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy import testing
from pinqpy.noise.lattice_release import grid_for, grid_for_gaussian
from pinqpy.noise.mechanisms import CountMechanism, MeanMechanism, SumMechanism, VarianceMechanism
from pinqpy.noise.source import SecureSource
from pinqpy.results.tables import NoisySeries
from pinqpy.results.values import NoisyCount, NoisyValue

REPS = 5_000


@pytest.fixture(autouse=True)
def _clean_state():
    testing.reset()
    yield
    testing.reset()


def grid_exponent(g: Fraction) -> int:
    k = g.numerator.bit_length() - 1 if g >= 1 else -(g.denominator.bit_length() - 1)
    assert Fraction(2) ** k == g, "the grid is a power of two"
    return k


def on_lattice(values: np.ndarray, g: Fraction) -> bool:
    """Every value is an exact integer multiple of ``g`` (``ldexp`` only moves exponents)."""
    units = np.ldexp(np.asarray(values, dtype=np.float64), -grid_exponent(g))
    return bool((units == np.rint(units)).all())


def neighbours(lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Two datasets differing by one row (an extreme value, so the sum moves the most)."""
    rng = np.random.default_rng(7)
    d = rng.uniform(lo, hi, 101)
    return d, np.append(d, hi)


# -- sums -----------------------------------------------------------------------------------
@pytest.mark.parametrize("delta", [None, 1e-6])
@pytest.mark.parametrize(
    ("eps", "lo", "hi"), [(0.5, 0.0, 10.0), (0.1, -3.7, 1e6), (2.0, -1.0, 1.0)]
)
def test_sum_outputs_of_neighbours_land_on_one_public_lattice(eps, lo, hi, delta):
    d1, d2 = neighbours(lo, hi)
    mech = SumMechanism(eps, lo, hi, delta=delta)
    sens = max(Fraction(abs(lo)), Fraction(abs(hi)))
    g = grid_for(sens, Fraction(str(eps))) if delta is None else mech.grid
    assert mech.grid == g  # the pure grid is grid_for(Δ, ε): public parameters only
    if delta is not None:
        assert g == grid_for_gaussian(sens, Fraction(mech.charge.sigma))
    # Released many times (one key per repetition), on two neighbouring datasets.
    with testing.seed(11):
        out1, acc1 = mech.release(np.full(REPS, math.fsum(d1)))
        out2, acc2 = mech.release(np.full(REPS, math.fsum(d2)))
    assert on_lattice(out1, g) and on_lattice(out2, g)
    # the same g for both: residues modulo g are identically zero for either dataset
    assert not np.fmod(out1, float(g)).any() and not np.fmod(out2, float(g)).any()
    assert acc1.mechanism == acc2.mechanism == mech.describe()
    # and the outputs are not all on a coarser lattice (the noise really spans the grid)
    assert not on_lattice(np.concatenate([out1, out2]), 2 * g)


def test_sum_lattice_with_the_operating_system_source():
    from pinqpy.noise import source as _noise

    assert isinstance(_noise.current_source(), SecureSource)  # the default, after reset()
    mech = SumMechanism(0.3, 0, 100)
    out, _ = mech.release(np.full(1000, 4321.123))
    assert on_lattice(out, mech.grid)


# -- means and variances --------------------------------------------------------------------
@pytest.mark.parametrize("delta", [None, 1e-6])
def test_mean_measurements_of_neighbours_land_on_one_lattice_and_counts_are_integers(delta):
    lo, hi = 0.0, 100.0
    d1, d2 = neighbours(lo, hi)
    mech = MeanMechanism(0.4, lo, hi, delta=delta)
    g = mech.sum_noise.grid
    # The centred sum has sensitivity h = 50: its grid comes from (50, 0.2) (or the Gaussian
    # calibration), never from the data.
    if delta is None:
        assert g == grid_for(50, Fraction(1, 5))
    sums = [np.full(REPS, mech.lattice.value_sums(d)[0]) for d in (d1, d2)]
    counts = [np.full(REPS, len(d)) for d in (d1, d2)]
    with testing.seed(12):
        releases = [mech.release(s, c) for s, c in zip(sums, counts, strict=True)]
    for values, acc in releases:
        assert on_lattice(acc.noisy_sum, g)  # the noisy centred sum S'
        assert (acc.noisy_count == np.rint(acc.noisy_count)).all()  # the noisy count N'
        # The mean is post-processing of (S', N') only: recomputed exactly from them.
        expected = np.clip(mech.mid + acc.noisy_sum / np.maximum(acc.noisy_count, 1.0), lo, hi)
        assert np.array_equal(values, expected)


def test_variance_measurements_land_on_public_lattices():
    lo, hi = -2.0, 6.0
    d1, d2 = neighbours(lo, hi)
    mech = VarianceMechanism(0.9, lo, hi)
    gs, gq = mech.sum_noise.grid, mech.sq_noise.grid
    assert gs == grid_for(4, Fraction(3, 10)) and gq == grid_for(8, Fraction(3, 10))
    with testing.seed(13):
        for d in (d1, d2):
            s, s2, n = mech.lattice.value_sums(d)
            _, acc = mech.release([s] * REPS, [s2] * REPS, np.full(REPS, n))
            assert on_lattice(acc.noisy_sum, gs) and on_lattice(acc.noisy_sq, gq)
            assert (acc.noisy_count == np.rint(acc.noisy_count)).all()


# -- counts are integers --------------------------------------------------------------------
@pytest.mark.parametrize("delta", [None, 1e-6])
def test_counts_are_integers_end_to_end(delta):
    df = pd.DataFrame({"k": ["a"] * 30 + ["b"] * 12, "x": np.arange(42.0)})
    frame = pq.PrivateFrame(df, pq.Budget(epsilon=10, delta=1e-3), bounds={"x": (0, 50)})
    with testing.seed(14):
        n = frame.count(epsilon=1, delta=delta)
        parts = frame.partition("k", keys=["a", "b", "c"]).count(epsilon=1, delta=delta)
    # A scalar count is a Python int (a NoisyCount), with an integer interval.
    assert isinstance(n, int) and isinstance(n, NoisyCount) and not isinstance(n, float)
    assert type(int(n)) is int and type(n + 1) is int
    low, high = n.ci(0.95)
    assert type(low) is int and type(high) is int and low <= n <= high
    assert n.mechanism.startswith("DiscreteGaussian" if delta else "DiscreteLaplace")
    # A partition's counts are a numpy int64 Series that keeps its accuracy.
    assert isinstance(parts, NoisySeries) and parts.dtype == np.int64
    ci = parts.ci(0.9)
    assert ci["low"].dtype == ci["high"].dtype == np.int64
    assert (ci["low"] <= parts).all() and (parts <= ci["high"]).all()
    # means and sums stay floats
    assert isinstance(frame.sum("x", epsilon=1), NoisyValue)


def test_from_release_picks_the_scalar_type_from_the_accuracy():
    with testing.no_noise():
        _, acc = CountMechanism(1).release(np.array([7]))
        _, facc = SumMechanism(1, 0, 1).release(np.array([7.0]))
    assert isinstance(NoisyValue.from_release(acc), NoisyCount)
    assert NoisyValue.from_release(acc) == 7
    v = NoisyValue.from_release(facc)
    assert isinstance(v, NoisyValue) and isinstance(v, float) and v == 7.0


# -- no floating-point sampling anywhere in a release ---------------------------------------
def test_releases_call_no_float_sampler_and_no_transcendental(monkeypatch):
    """Mechanisms are built first (calibration reads public parameters only); then every
    float sampler of the random source and every exp/log/sqrt is made to fail, and each
    release still runs: the noise and the selections are drawn with integers only."""
    from pinqpy.noise import source as _noise
    from pinqpy.noise.keyselect import KeySelectionMechanism
    from pinqpy.noise.mechanisms import ArgmaxMechanism, QuantileMechanism

    mechs = {
        "count": CountMechanism(0.5),
        "count_g": CountMechanism(0.5, delta=1e-6),
        "sum": SumMechanism(0.5, 0, 10),
        "sum_g": SumMechanism(0.5, 0, 10, delta=1e-6),
        "mean": MeanMechanism(0.5, 0, 10),
        "variance": VarianceMechanism(0.5, 0, 10),
        "quantile": QuantileMechanism(0.5, 0.3, 0, 100),
        "argmax": ArgmaxMechanism(0.5, 4),
        "keys": KeySelectionMechanism(Fraction(1), Fraction(1, 10**6)),
    }
    eq, gap = mechs["quantile"].bin_counts(np.arange(100.0), np.arange(100) % 3, 3)

    def boom(*args, **kwargs):
        raise AssertionError("a floating-point sampler or transcendental was called")

    for name in ("laplace", "gaussian", "gumbel", "uniform"):
        monkeypatch.setattr(_noise.RandomSource, name, boom)
    for name in ("exp", "log", "sqrt", "expm1", "log1p", "power"):
        monkeypatch.setattr(np, name, boom)
    for name in ("exp", "log", "sqrt", "log2", "pow", "expm1", "log1p"):
        monkeypatch.setattr(math, name, boom)
    with testing.seed(15):
        mechs["count"].release(np.arange(50))
        mechs["count_g"].release(np.arange(50))
        mechs["sum"].release(np.linspace(0, 100, 50))
        mechs["sum_g"].release(np.linspace(0, 100, 50))
        mechs["mean"].release(np.full(5, 3 * 2**20), np.full(5, 6))
        mechs["variance"].release(np.full(5, 3 * 2**20), np.full(5, 2**40), np.full(5, 6))
        mechs["quantile"].release(eq, gap)
        mechs["argmax"].release(np.array([[3, 9, 1, 9], [0, 0, 0, 0]]))
        mechs["keys"].release(["a", "b"], np.array([40, 1]))
