"""Result types: NoisyValue, NoisyLabel, NoisySeries and the Accuracy they carry."""

from __future__ import annotations

import copy
import math
import pickle
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

from pinqpy import testing
from pinqpy._mechanisms import ArgmaxMechanism, CountMechanism, MeanMechanism, QuantileMechanism
from pinqpy.errors import PinqError
from pinqpy.results import (
    AdditiveAccuracy,
    ArgmaxAccuracy,
    GaussianNoise,
    LaplaceNoise,
    NoisyLabel,
    NoisySeries,
    NoisyValue,
)


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
        _, acc = mech.release(np.array([5000.0]), np.array([100.0]))
    v = NoisyValue.from_release(acc)
    low, high = v.ci()
    assert low <= v <= high
    assert repr(v).startswith("NoisyValue(") and "95% ci [" in repr(v)


def test_quantile_value_ci_is_a_value_interval():
    mech = QuantileMechanism(1.0, 0.5, 0, 100)
    eq, gap = mech.bin_counts(np.arange(0, 100, 0.5))
    with testing.seed(2):
        _, acc = mech.release(eq, gap)
    v = NoisyValue.from_release(acc)
    low, high = v.ci(0.95)
    assert 0 <= low <= v <= high <= 100


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
    assert "NY" in repr(lab) and "ReportNoisyMax" in repr(lab)
    w = pickle.loads(pickle.dumps(lab))
    assert w == lab and w.ci() == lab.ci()


def test_noisy_label_of_a_non_string_candidate():
    acc = ArgmaxAccuracy(np.array([7], dtype=object), epsilon=0.5, n_candidates=2)
    lab = NoisyLabel.from_release(acc)
    assert lab == "7" and lab.candidate == 7


# -- NoisySeries ----------------------------------------------------------------------------
def counts_series() -> NoisySeries:
    mech = CountMechanism(1.0)
    with testing.seed(3):
        _, acc = mech.release(np.array([10.0, 20.0, 30.0, 40.0]))
    return NoisySeries.from_release(acc, index=["a", "b", "c", "d"], name="n")


def test_noisy_series_is_a_series_with_ci():
    s = counts_series()
    assert isinstance(s, pd.Series) and s.name == "n" and list(s.index) == ["a", "b", "c", "d"]
    ci = s.ci(0.9)
    assert isinstance(ci, pd.DataFrame) and list(ci.columns) == ["low", "high"]
    assert list(ci.index) == list(s.index)
    t = math.log(10)
    assert np.allclose(ci["low"], s - t) and np.allclose(ci["high"], s + t)
    assert s.epsilon == 1 and s.delta == 0 and s.noise_scale == 1.0
    assert s.mechanism == "Laplace(scale=1.0)"


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
    for changed in (s * 2, s + 1, s.round(0)):
        with pytest.raises(PinqError, match="changed"):
            changed.ci()
    other = NoisySeries([1.0, 2.0])
    with pytest.raises(PinqError):
        other.ci()


def test_noisy_series_of_means_and_labels():
    mech = MeanMechanism(1.0, 0, 10)
    with testing.seed(4):
        _, acc = mech.release(np.array([50.0, 0.0]), np.array([10.0, 0.0]))
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


def test_accuracy_take():
    acc = AdditiveAccuracy(np.array([1.0, 2.0, 3.0]), LaplaceNoise(1.0), epsilon=1)
    one = acc.take(1)
    assert len(one) == 1 and one.values.tolist() == [2.0]
    assert len(acc.take([0, 2])) == 2 and len(acc) == 3
    assert "keys=3" in repr(acc)
