"""Result types: NoisyValue, NoisyLabel, NoisySeries and the Accuracy they carry."""

from __future__ import annotations

import copy
import math
import pickle
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from pinqpy import testing
from pinqpy.errors import PinqError
from pinqpy.noise.mechanisms import (
    ArgmaxMechanism,
    CountMechanism,
    MeanMechanism,
    QuantileMechanism,
)
from pinqpy.results.accuracy import AdditiveAccuracy, ArgmaxAccuracy
from pinqpy.results.labels import NoisyLabel
from pinqpy.results.noise import (
    DiscreteGaussianNoise,
    DiscreteLaplaceNoise,
    GaussianNoise,
    LaplaceNoise,
    LatticeNoise,
    ZeroNoise,
)
from pinqpy.results.tables import NoisySeries
from pinqpy.results.values import NoisyCount, NoisyValue


@pytest.fixture(autouse=True)
def _clean_state():
    testing.reset()
    yield
    testing.reset()


def laplace_value(v: float = 512.3, b: float = 10.0) -> NoisyValue:
    return NoisyValue.from_release(AdditiveAccuracy(np.array([v]), LaplaceNoise(b), epsilon=0.1))


# -- NoisyValue -----------------------------------------------------------------------------
def test_noisy_value_behaves_as_a_float():
    v = laplace_value()
    assert isinstance(v, float) and v == 512.3
    for result in (v + 1, v - 1, v * 2, v / 2, -v, abs(v), v**2, 1 + v, round(v, 1)):
        assert type(result) is float
    assert v > 500 and v < 600 and math.isclose(v, 512.3)
    assert f"{v:.1f}" == "512.3" and str(v) == "512.3"
    assert int(v) == 512 and np.float64(v) == 512.3
    assert sum([v, v]) == pytest.approx(1024.6)


def test_noisy_value_repr_shows_only_the_released_value():
    assert repr(laplace_value()) == "NoisyValue(512.3, ±29.96 at 95%)"
    assert repr(laplace_value(1234567.0, 1.0)) == "NoisyValue(1234567, ±2.996 at 95%)"


def test_laplace_ci():
    v = laplace_value(100.0, 4.0)
    for level in (0.5, 0.9, 0.95, 0.99):
        t = 4.0 * math.log(1 / (1 - level))
        assert v.ci(level) == pytest.approx((100 - t, 100 + t), rel=1e-15)
    assert v.ci() == v.ci(0.95)


def test_gaussian_ci():
    acc = AdditiveAccuracy(np.array([3.0]), GaussianNoise(2.0), epsilon=1, delta=1e-6)
    v = NoisyValue.from_release(acc)
    z = NormalDist().inv_cdf(0.95)
    assert v.ci(0.9) == pytest.approx((3 - 2 * z, 3 + 2 * z), rel=1e-14)
    assert v.mechanism == "Gaussian(sigma=2.0)" and v.noise_scale == 2.0
    assert v.delta == 1e-6 and v.epsilon == 1


def test_ci_level_validation():
    v = laplace_value()
    for bad in (0, 1, 1.5, -0.1, "x"):
        with pytest.raises(PinqError):
            v.ci(bad)


def test_noisy_value_attributes():
    v = laplace_value()
    assert v.epsilon == 0.1 and v.delta == 0
    assert v.mechanism == "Laplace(scale=10.0)" and v.noise_scale == 10.0
    assert v.accuracy.values.tolist() == [512.3]


def test_noisy_value_pickles_and_copies():
    v = laplace_value()
    for w in (pickle.loads(pickle.dumps(v)), copy.copy(v), copy.deepcopy(v)):
        assert isinstance(w, NoisyValue) and w == v and w.ci() == v.ci()


def test_noisy_value_needs_one_key():
    acc = AdditiveAccuracy(np.array([1.0, 2.0]), LaplaceNoise(1.0), epsilon=1)
    with pytest.raises(ValueError):
        NoisyValue.from_release(acc)
    with pytest.raises(TypeError):
        NoisyValue(1.0, "not an accuracy")  # type: ignore[arg-type]


def test_asymmetric_intervals_in_repr():
    mech = MeanMechanism(1.0, 0, 100)
    with testing.seed(1):
        _, acc = mech.release(mech.lattice.index_sums([5000.0], [100]), np.array([100.0]))
    v = NoisyValue.from_release(acc)
    low, high = v.ci()
    assert low <= v <= high
    assert repr(v).startswith("NoisyValue(") and "95% ci [" in repr(v)


def test_quantile_value_ci_is_a_value_interval():
    mech = QuantileMechanism(1.0, 0.5, 0, 100, ci_share=0.25)
    eq, gap = mech.bin_counts(np.arange(0, 100, 0.5))
    with testing.seed(2):
        _, acc = mech.release(eq, gap)
    v = NoisyValue.from_release(acc)
    low, high = v.ci(0.95)
    assert 0 <= low <= v <= high <= 100


def test_quantile_value_without_interval_states_ranks():
    mech = QuantileMechanism(1.0, 0.5, 0, 100)
    eq, gap = mech.bin_counts(np.arange(0, 100, 0.5))
    with testing.seed(2):
        _, acc = mech.release(eq, gap)
    v = NoisyValue.from_release(acc)
    with pytest.raises(PinqError, match="spends a quarter of epsilon"):
        v.ci(0.95)
    ranks = f"{mech.accuracy(0.95):.4g}"
    assert repr(v) == f"NoisyValue({v!s}, within {ranks} ranks at 95%; no value interval)"
    html = v._repr_html_()
    assert "ranks of the exact quantile" in html and "interval [" not in html


# -- NoisyLabel -----------------------------------------------------------------------------
def test_noisy_label():
    mech = ArgmaxMechanism(1.0, 3, labels=["CA", "NY", "TX"])
    with testing.no_noise():
        _, acc = mech.release(np.array([3, 9, 1]))
    lab = NoisyLabel.from_release(acc)
    assert isinstance(lab, str) and lab == "NY" and lab.upper() == "NY"
    assert lab.candidate == "NY"
    assert lab.ci(0.95) == pytest.approx((0.0, math.log(3 / 0.05)))
    assert lab.epsilon == 1 and lab.noise_scale == 1.0
    assert "NY" in repr(lab) and "PermuteAndFlip" in repr(lab)
    w = pickle.loads(pickle.dumps(lab))
    assert w == lab and w.ci() == lab.ci()


def test_noisy_label_of_a_non_string_candidate():
    acc = ArgmaxAccuracy(np.array([7], dtype=object), epsilon=0.5, n_candidates=2)
    lab = NoisyLabel.from_release(acc)
    # The candidate itself, with its type (an int subclass), still carrying the accuracy.
    assert lab == 7 and lab != "7" and lab.candidate == 7 and isinstance(lab, int)
    assert isinstance(lab, NoisyLabel) and hash(lab) == hash(7)
    assert lab.ci(0.95) == pytest.approx((0.0, math.log(2 / 0.05) / 0.5))
    w = pickle.loads(pickle.dumps(lab))
    assert w == 7 and type(w) is type(lab) and w.ci() == lab.ci()


@pytest.mark.parametrize(
    "candidate, kind",
    [
        (2.5, float),
        (np.float32(0.25), float),
        (np.int64(3), int),
        (True, None),
        (("a", 1), None),
        (None, None),
        (pd.Timestamp("2020-01-01"), None),
    ],
)
def test_noisy_label_keeps_the_candidates_type(candidate, kind):
    values = np.empty(1, dtype=object)
    values[0] = candidate
    lab = NoisyLabel.from_release(ArgmaxAccuracy(values, epsilon=1, n_candidates=2))
    assert lab == candidate and hash(lab) == hash(candidate) and lab.candidate is candidate
    assert isinstance(lab, NoisyLabel) and lab.ci()[0] == 0.0
    if kind is not None:
        assert isinstance(lab, kind)
    else:
        assert type(lab).__name__ == "NoisyChoice" and {candidate: 1}[lab] == 1
    assert pickle.loads(pickle.dumps(lab)) == candidate and "NoisyLabel(" in repr(lab)
    assert lab._repr_html_()


# -- NoisySeries ----------------------------------------------------------------------------
def counts_series() -> NoisySeries:
    mech = CountMechanism(1.0)
    with testing.seed(3):
        _, acc = mech.release(np.array([10, 20, 30, 40]))
    return NoisySeries.from_release(acc, index=["a", "b", "c", "d"], name="n")


def test_noisy_series_is_a_series_with_ci():
    s = counts_series()
    assert isinstance(s, pd.Series) and s.name == "n" and list(s.index) == ["a", "b", "c", "d"]
    assert s.dtype == np.int64
    ci = s.ci(0.9)
    assert isinstance(ci, pd.DataFrame) and list(ci.columns) == ["low", "high"]
    assert list(ci.index) == list(s.index)
    # Discrete Laplace of scale 1: P(|X| > t) = 2e^{-(t+1)}/(1 + e^{-1}) is 0.173 at t = 1 and
    # 0.0636 at t = 2, so the 90% half-width is the integer 2.
    assert 2 * math.exp(-3) / (1 + math.exp(-1)) <= 0.1 < 2 * math.exp(-2) / (1 + math.exp(-1))
    assert (ci["low"] == s - 2).all() and (ci["high"] == s + 2).all()
    assert ci["low"].dtype == np.int64
    assert s.epsilon == 1 and s.delta == 0 and s.noise_scale == 1.0
    assert s.mechanism == "DiscreteLaplace(scale=1)"


def test_noisy_series_survives_slicing_filtering_and_sorting():
    s = counts_series()
    full = s.ci()
    for part in (s.iloc[1:3], s[s > 25], s.loc[["d", "a"]], s.sort_values(ascending=False)):
        assert isinstance(part, NoisySeries)
        ci = part.ci()
        assert list(ci.index) == list(part.index)
        assert np.allclose(ci.to_numpy(), full.loc[part.index].to_numpy())
    assert isinstance(s.copy(), NoisySeries) and s.copy().ci().equals(full)


def test_noisy_series_pickles():
    s = counts_series()
    t = pickle.loads(pickle.dumps(s))
    assert isinstance(t, NoisySeries) and t.ci().equals(s.ci())


def test_noisy_series_refuses_changed_values():
    s = counts_series()
    for changed in (s * 2, s + 1, s // 2, s.astype(float) / 3):
        with pytest.raises(PinqError, match="changed"):
            changed.ci()
    other = NoisySeries([1.0, 2.0])
    with pytest.raises(PinqError):
        other.ci()


def test_noisy_series_of_means_and_labels():
    mech = MeanMechanism(1.0, 0, 10)
    with testing.seed(4):
        sums = mech.lattice.index_sums([50.0, 0.0], [10, 0])
        _, acc = mech.release(sums, np.array([10.0, 0.0]))
    s = NoisySeries.from_release(acc, index=pd.Index(["x", "y"], name="key"))
    ci = s.ci()
    assert (ci["low"] <= s).all() and (s <= ci["high"]).all()
    assert s.index.name == "key" and ci.index.name == "key"
    arg = ArgmaxMechanism(1.0, 2, labels=["p", "q"])
    with testing.no_noise():
        _, lacc = arg.release(np.array([[1, 2], [5, 0]]))
    labels = NoisySeries.from_release(lacc, index=[2020, 2021])
    assert labels.tolist() == ["q", "p"]
    assert labels.ci().loc[2021, "high"] == pytest.approx(math.log(2 / 0.05))


def test_noisy_series_validation():
    acc = AdditiveAccuracy(np.array([1.0, 2.0]), LaplaceNoise(1.0), epsilon=1)
    with pytest.raises(ValueError):
        NoisySeries.from_release(acc, index=["a"])
    with pytest.raises(ValueError):
        NoisySeries.from_release(acc, index=["a", "a"])
    s = NoisySeries.from_release(acc)
    assert list(s.index) == [0, 1]


# -- NoisyCount and the discrete noises -----------------------------------------------------
def count_value(v: int = 512, b: int = 10) -> NoisyCount:
    acc = AdditiveAccuracy(np.array([v]), DiscreteLaplaceNoise(Fraction(b)), epsilon=Fraction(1, b))
    out = NoisyValue.from_release(acc)
    assert isinstance(out, NoisyCount)
    return out


def test_noisy_count_behaves_as_an_int():
    n = count_value()
    assert isinstance(n, int) and not isinstance(n, float) and n == 512
    for result in (n + 1, n - 1, n * 2, -n, abs(n), n**2, 1 + n, n // 3, round(n)):
        assert type(result) is int
    assert type(n / 2) is float and n / 2 == 256.0
    assert f"{n:d}" == "512" and f"{n:.1f}" == "512.0" and str(n) == "512"
    assert list(range(3))[n - 510] == 2  # usable as an index
    assert np.int64(n) == 512 and int(n) == 512


def test_noisy_count_ci_is_an_integer_interval():
    n = count_value(100, 10)
    # 95%: the least t with 2q^{t+1}/(1+q) <= 0.05, q = e^{-0.1}: t + 1 >= 10·ln(40/(1+q)),
    # i.e. t + 1 >= 30.44, t = 30.
    q = math.exp(-0.1)
    assert 2 * q**31 / (1 + q) <= 0.05 < 2 * q**30 / (1 + q)
    low, high = n.ci(0.95)
    assert (low, high) == (70, 130) and type(low) is int and type(high) is int
    assert repr(n) == "NoisyCount(100, ±30 at 95%)"
    assert n.mechanism == "DiscreteLaplace(scale=10)" and n.noise_scale == 10.0
    assert n.epsilon == Fraction(1, 10) and n.delta == 0


def test_noisy_count_pickles_and_copies():
    n = count_value()
    for m in (pickle.loads(pickle.dumps(n)), copy.copy(n), copy.deepcopy(n)):
        assert isinstance(m, NoisyCount) and m == n and m.ci() == n.ci()


def test_from_release_dispatches_on_the_accuracy():
    float_acc = AdditiveAccuracy(np.array([3.0]), LaplaceNoise(1.0), epsilon=1)
    assert type(NoisyValue.from_release(float_acc)) is NoisyValue
    int_acc = AdditiveAccuracy(np.array([3]), DiscreteLaplaceNoise(Fraction(1)), epsilon=1)
    assert type(NoisyValue.from_release(int_acc)) is NoisyCount
    # integer values with continuous noise are not counts with integer intervals
    mixed = AdditiveAccuracy(np.array([3]), LaplaceNoise(1.0), epsilon=1)
    assert not mixed.integer and type(NoisyValue.from_release(mixed)) is NoisyValue
    assert NoisyCount.from_release(int_acc) == 3


def brute_tail(pmf, xs: np.ndarray, t: int) -> float:
    return float(pmf[np.abs(xs) > t].sum())


@pytest.mark.parametrize("b", [Fraction(1, 3), Fraction(1), Fraction(10, 3), Fraction(50)])
def test_discrete_laplace_noise_tails_and_half_widths(b):
    noise = DiscreteLaplaceNoise(b)
    a = 1 / float(b)
    xs = np.arange(-4000, 4001)
    pmf = -math.expm1(-a) / (1 + math.exp(-a)) * np.exp(-np.abs(xs) * a)
    for t in (0, 1, 5, 40):
        assert noise.tail(t) == pytest.approx(brute_tail(pmf, xs, t), rel=1e-9, abs=1e-300)
    for level in (0.5, 0.9, 0.95, 0.999999):
        t = int(noise.half_width(level))
        assert brute_tail(pmf, xs, t) <= 1 - level
        assert t == 0 or brute_tail(pmf, xs, t - 1) > 1 - level
    assert noise.expected_abs() == pytest.approx(float((pmf * np.abs(xs)).sum()), rel=1e-10)
    assert noise.integer and noise.describe().startswith("DiscreteLaplace(scale=")


@pytest.mark.parametrize("s2", [Fraction(1, 4), Fraction(16), Fraction(179, 10), Fraction(10**6)])
def test_discrete_gaussian_noise_tails_and_half_widths(s2):
    noise = DiscreteGaussianNoise(s2)
    sigma = math.sqrt(s2)
    w = math.ceil(40 * sigma) + 5
    xs = np.arange(-w, w + 1)
    pmf = np.exp(-(xs.astype(float) ** 2) / (2 * float(s2)))
    pmf /= pmf.sum()
    for level in (0.5, 0.9, 0.95, 0.999999):
        t = int(noise.half_width(level))
        assert brute_tail(pmf, xs, t) <= 1 - level
        assert t == 0 or brute_tail(pmf, xs, t - 1) > 1 - level
    assert noise.expected_abs() == pytest.approx(float((pmf * np.abs(xs)).sum()), rel=1e-9)


def test_discrete_gaussian_noise_beyond_the_summation_range_is_conservative():
    noise = DiscreteGaussianNoise(Fraction(10**8))  # sigma 10^4 > 4096: the erfc bound
    z = NormalDist().inv_cdf(0.975)
    t = int(noise.half_width(0.95))
    assert t == math.ceil(1e4 * z)  # within one of the exact value, never below it
    assert noise.expected_abs() == pytest.approx(1e4 * math.sqrt(2 / math.pi), rel=1e-9)


def test_lattice_noise_adds_half_a_step():
    unit = DiscreteLaplaceNoise(Fraction(2562))
    noise = LatticeNoise(unit, Fraction(1, 128))
    t = int(unit.half_width(0.9))
    assert noise.half_width(0.9) == (t + 0.5) / 128
    assert noise.scale == 2562 / 128
    assert noise.expected_abs() == pytest.approx((unit.expected_abs() + 0.5) / 128)
    assert noise.describe() == "Lattice Laplace(scale=20.0156, grid=2^-7)"
    g = LatticeNoise(DiscreteGaussianNoise(Fraction(4 * 10**6)), Fraction(2))
    assert g.describe() == "Lattice Gaussian(sigma=4000.0, grid=2^1)"
    with pytest.raises(PinqError):
        LatticeNoise(unit, Fraction(3, 4))
    with pytest.raises(PinqError):
        DiscreteLaplaceNoise(Fraction(0))
    assert ZeroNoise().half_width(0.9) == 0.0 and ZeroNoise().scale == 0.0


def test_accuracy_take():
    acc = AdditiveAccuracy(np.array([1.0, 2.0, 3.0]), LaplaceNoise(1.0), epsilon=1)
    one = acc.take(1)
    assert len(one) == 1 and one.values.tolist() == [2.0]
    assert len(acc.take([0, 2])) == 2 and len(acc) == 3
    assert "keys=3" in repr(acc)
