"""Mechanism objects: parameters, charges, data-free accuracy, exact mode and edge cases."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from pinqpy import testing
from pinqpy.accounting.agents import charge
from pinqpy.accounting.budget import Budget
from pinqpy.accounting.charges import (
    CompositeCharge,
    DiscreteGaussianCharge,
    GaussianCharge,
    PureCharge,
)
from pinqpy.accounting.cost import Cost
from pinqpy.accounting.profiles import gaussian_delta
from pinqpy.errors import BudgetExceededError, PinqError
from pinqpy.noise.mechanisms import (
    QUANTILE_CI_CUTS,
    ArgmaxMechanism,
    CountMechanism,
    MeanMechanism,
    QuantileMechanism,
    SumMechanism,
    VarianceMechanism,
    default_candidates,
    gaussian_sigma,
    laplace_scale,
)
from pinqpy.results.accuracy import Accuracy, AdditiveAccuracy


@pytest.fixture(autouse=True)
def _clean_state():
    testing.reset()
    yield
    testing.reset()


# -- noise parameters -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sens", "eps"), [(1, 3), (1, "0.1"), (Fraction(7, 3), Fraction(1, 7)), (0.1, 0.3), (5, 1e-3)]
)
def test_laplace_scale_is_rounded_up(sens, eps):
    b = laplace_scale(sens, eps)
    s = Fraction(sens) if isinstance(sens, float) else Fraction(str(sens))
    exact = s / Fraction(str(eps))
    assert Fraction(b) >= exact
    assert Fraction(math.nextafter(b, 0)) < exact  # the next float down is too small


def test_laplace_scale_validation():
    assert laplace_scale(0, 1) == 0.0
    for bad_eps in (0, -1, float("nan"), float("inf")):
        with pytest.raises(PinqError):
            laplace_scale(1, bad_eps)
    with pytest.raises(PinqError):
        laplace_scale(-1, 1)


def test_gaussian_sigma_validation_and_monotonicity():
    assert gaussian_sigma(0, 1, 1e-6) == 0.0
    for bad in (0, 1, 1.5, -1e-6):
        with pytest.raises(PinqError):
            gaussian_sigma(1, 1, bad)
    # More privacy (smaller eps or delta) needs more noise.
    assert gaussian_sigma(1, 0.5, 1e-6) > gaussian_sigma(1, 1.0, 1e-6)
    assert gaussian_sigma(1, 1.0, 1e-9) > gaussian_sigma(1, 1.0, 1e-6)
    assert gaussian_delta(1.0, 0, 1.0) == 0.0
    assert gaussian_delta(1.0, 1, 0.0) == 1.0


def test_gaussian_sigma_large_epsilon_does_not_overflow():
    s = gaussian_sigma(1, 800, 1e-12)
    assert 0 < s < 1 and gaussian_delta(800, 1, s) <= 1e-12


# -- charges --------------------------------------------------------------------------------
def test_pure_charge():
    c = PureCharge(0.1)
    assert c.at(1) == Cost(0.1)
    assert c.at(Fraction(2)) == Cost(0.2)
    assert c.at(0) == Cost()
    with pytest.raises(PinqError):
        c.at(-1)


def test_gaussian_charge_at_stabilities():
    sigma = gaussian_sigma(1, 0.5, 1e-6)
    c = GaussianCharge(0.5, 1e-6, 1, sigma)
    assert c.at(1) == Cost(0.5, 1e-6)
    assert c.at(0) == Cost()
    two = c.at(2)
    assert two.epsilon == 1 and 1e-6 < two.delta < 1
    assert c.at(3).delta > two.delta


def test_composite_charge_sums_parts():
    c = CompositeCharge([PureCharge(0.1), PureCharge(0.2)])
    assert c.at(1) == Cost(0.3)
    assert c.at(3) == Cost(Fraction(9, 10))


def test_charges_flow_through_the_budget():
    budget = Budget(epsilon=1.0, delta=1e-5)
    for _ in range(10):
        charge({budget: Fraction(1)}, CountMechanism(0.1).charge)
    assert budget.remaining.epsilon == 0
    with pytest.raises(BudgetExceededError):
        charge({budget: Fraction(1)}, CountMechanism(0.1).charge)
    b2 = Budget(epsilon=1.0, delta=1e-5)
    charge({b2: Fraction(1)}, MeanMechanism(0.5, 0, 1, delta=1e-5).charge)
    assert b2.remaining == Cost(0.5, 0)


@pytest.mark.parametrize("delta", [None, 1e-6])
def test_split_mechanisms_charge_exactly_epsilon(delta):
    for mech in (
        MeanMechanism(Fraction(1, 3), 0, 1, delta=delta),
        VarianceMechanism(Fraction(1, 3), 0, 1, delta=delta),
        QuantileMechanism(Fraction(1, 3), 0.5, 0, 1),
    ):
        cost = mech.charge.at(1)
        assert cost.epsilon == Fraction(1, 3)
        assert cost.delta == (0 if delta is None or isinstance(mech, QuantileMechanism) else 1e-6)
        assert mech.charge.at(2).epsilon == Fraction(2, 3)


# -- common surface -------------------------------------------------------------------------
def all_mechanisms():
    return [
        CountMechanism(0.1),
        CountMechanism(0.1, delta=1e-6),
        SumMechanism(0.1, 0, 10),
        SumMechanism(0.1, 0, 10, delta=1e-6),
        MeanMechanism(0.1, 0, 10),
        MeanMechanism(0.1, 0, 10, delta=1e-6),
        VarianceMechanism(0.1, 0, 10),
        VarianceMechanism(0.1, 0, 10, stddev=True),
        QuantileMechanism(0.1, 0.5, 0, 10),
        ArgmaxMechanism(0.1, 4),
    ]


@pytest.mark.parametrize("mech", all_mechanisms(), ids=lambda m: repr(m))
def test_every_mechanism_describes_itself_before_data(mech):
    assert isinstance(mech.describe(), str) and "\n" not in mech.describe()
    assert repr(mech).startswith(type(mech).__name__)
    assert mech.epsilon == 0.1
    assert mech.delta in (0, 1e-6)
    assert mech.noise_scale is None or mech.noise_scale > 0
    assert math.isfinite(mech.expected_error()) and mech.expected_error() > 0
    assert mech.accuracy(0.95) > mech.accuracy(0.5) or isinstance(
        mech, MeanMechanism | VarianceMechanism
    )
    assert mech.charge.at(1).epsilon == 0.1
    with pytest.raises(PinqError):
        mech.accuracy(1.0)


def test_describe_strings():
    assert CountMechanism(0.1).describe() == "DiscreteLaplace(scale=10)"
    assert CountMechanism(0.3).describe() == "DiscreteLaplace(scale=3.33333)"
    assert CountMechanism(1, delta=1e-6).describe() == "DiscreteGaussian(sigma=4.23078)"
    # Sensitivity 4, epsilon 1/2: g = 2^-8 (the largest power of two <= min(4, 8)/1024),
    # S = 4·256 + 1 = 1025 grid units, scale S/eps = 2050 units = 2050/256 = 8.0078125.
    assert SumMechanism(0.5, -4, 2).describe() == "Lattice Laplace(scale=8.00781, grid=2^-8)"
    assert SumMechanism(0.5, -4, 2).noise_scale == 8.0078125
    assert SumMechanism(1, 0, 10, delta=1e-6).describe().startswith("Lattice Gaussian(sigma=")
    assert SumMechanism(1, 0, 0).describe() == "NoNoise(sensitivity=0)"
    assert "candidates=11" in QuantileMechanism(1, 0.5, 0, 10).describe()
    assert "histogram" not in QuantileMechanism(1, 0.5, 0, 10).describe()
    with_ci = QuantileMechanism(1, 0.5, 0, 10, ci_share=0.25)
    assert "DiscreteLaplace(scale=4) histogram" in with_ci.describe()
    assert ArgmaxMechanism(0.5, 3).describe() == "PermuteAndFlip(epsilon=0.5, candidates=3)"
    assert (
        QuantileMechanism(1, 0.5, 0, 10, ci_share=0.25)
        .describe()
        .startswith("PermuteAndFlip(epsilon=0.75, q=0.5, candidates=11)")
    )
    assert (
        QuantileMechanism(1, 0.5, 0, 10).describe()
        == "PermuteAndFlip(epsilon=1, q=0.5, candidates=11)"
    )


def test_delta_zero_means_laplace():
    assert CountMechanism(0.1, delta=0).describe() == "DiscreteLaplace(scale=10)"
    assert CountMechanism(0.1, delta=0.0).delta == 0


def test_bounds_validation():
    for lo, hi in [(5, 1), (0, math.inf), (math.nan, 1), ("a", 1)]:
        with pytest.raises(PinqError):
            SumMechanism(0.1, lo, hi)
        with pytest.raises(PinqError):
            MeanMechanism(0.1, lo, hi)
    with pytest.raises(PinqError):
        CountMechanism(0)
    with pytest.raises(PinqError):
        CountMechanism(0.1, delta=1.0)


# -- counts and sums ------------------------------------------------------------------------
@pytest.mark.parametrize("delta", [None, 1e-6])
def test_count_release_shapes_and_exact_mode(delta):
    mech = CountMechanism(1.0, delta=delta)
    values, acc = mech.release(np.array([3, 0, 7]))
    assert values.shape == (3,) and values.dtype == np.int64  # counts stay integers
    assert isinstance(acc, AdditiveAccuracy) and len(acc) == 3 and acc.integer
    assert np.array_equal(acc.values, values)
    low, high = acc.interval(0.9)
    assert low.dtype == high.dtype == np.int64
    scalar, _ = mech.release(5)
    assert scalar.shape == (1,) and scalar.dtype == np.int64
    with testing.no_noise():
        exact = mech.release(np.array([3, 0, 7]))[0]
    assert exact.tolist() == [3, 0, 7] and exact.dtype == np.int64
    assert mech.release(np.array([3.0, 4.0]))[0].dtype == np.int64  # integral floats accepted
    empty, acc0 = mech.release(np.array([]))
    assert empty.shape == (0,) and empty.dtype == np.int64 and len(acc0) == 0


def test_count_release_refuses_fractional_counts():
    with pytest.raises(ValueError, match="integers"):
        CountMechanism(1.0).release(np.array([1.5]))
    with pytest.raises(ValueError):
        CountMechanism(1.0).release(np.array([2.0**63]))


def test_release_rejects_non_finite_or_misshapen_input():
    with pytest.raises(ValueError):
        CountMechanism(1).release(np.array([1.0, np.nan]))
    with pytest.raises(ValueError):
        CountMechanism(1).release(np.ones((2, 2)))
    with pytest.raises(ValueError):
        MeanMechanism(1, 0, 1).release(np.ones(2), np.ones(3))


def test_sum_sensitivity_is_largest_magnitude():
    assert SumMechanism(1, -5, 3).sensitivity == 5
    assert SumMechanism(1, 2, 9).sensitivity == 9
    assert SumMechanism(1, 0.1, 0.2).sensitivity == Fraction(0.2)  # the float's exact value
    zero = SumMechanism(1, 0, 0)
    assert zero.noise_scale == 0.0 and zero.release(np.zeros(3))[0].tolist() == [0.0] * 3
    assert zero.grid is None
    zero_g = SumMechanism(1, 0, 0, delta=1e-6)
    assert zero_g.release(np.zeros(2))[0].tolist() == [0.0, 0.0]
    assert zero_g.charge.at(1) == Cost(1, 1e-6) and zero_g.charge.at(2).delta == 0


def test_sum_grid_and_unit_scale_come_from_public_parameters():
    # grid_for(Δ, eps) and the unit scale S/eps: the mechanism and the sampler agree.
    from pinqpy.noise.lattice_release import grid_for

    mech = SumMechanism(Fraction(1, 3), -7, 2)
    g = grid_for(7, Fraction(1, 3))
    assert mech.grid == g == Fraction(1, 256)  # min(7, 21)/1024 = 0.0068 -> 2^-8
    assert mech.noise.unit.b == Fraction(7 * 256 + 1) * 3
    assert mech.noise_scale == float(mech.noise.unit.b * g)
    with testing.seed(3):
        values, acc = mech.release(np.array([0.1, -3.3, 1e6]))
    units = values / float(g)
    assert (units == np.rint(units)).all()
    assert acc.mechanism == mech.describe() and acc.noise_scale == mech.noise_scale


def test_no_nan_or_inf_in_releases():
    with testing.seed(0):
        for mech, args in [
            (CountMechanism(1e-3), (np.zeros(1000),)),
            (SumMechanism(1e-3, -1e12, 1e12), (np.zeros(1000),)),
            (MeanMechanism(1e-3, -1e12, 1e12), (np.zeros(1000), np.zeros(1000))),
            (VarianceMechanism(1e-3, -1e6, 1e6), (np.zeros(1000),) * 3),
            (
                QuantileMechanism(1e-3, 0.5, -1e12, 1e12, ci_share=0.25),
                (np.zeros((5, 1001)), np.zeros((5, 1000))),
            ),
        ]:
            values, acc = mech.release(*args)
            assert np.isfinite(values).all()
            low, high = acc.interval(0.99)
            assert np.isfinite(low).all() and np.isfinite(high).all()


# -- means ----------------------------------------------------------------------------------
def test_mean_exact_mode_and_empty_groups():
    mech = MeanMechanism(1.0, 10, 30)
    with testing.no_noise():
        sums = mech.lattice.index_sums([150.0, 0.0, 60.0], [10, 0, 2])  # on the lattice
        values, _ = mech.release(sums, np.array([10, 0, 2]))
    assert values.tolist() == [15.0, 20.0, 30.0]  # empty group: the midpoint


def test_mean_is_always_inside_the_bounds():
    mech = MeanMechanism(0.01, -3, 5)
    with testing.seed(3):
        values, acc = mech.release(np.zeros(5000), np.zeros(5000))  # empty groups, huge noise
    assert ((values >= -3) & (values <= 5)).all()
    low, high = acc.interval(0.95)
    assert ((low >= -3) & (high <= 5) & (low <= values) & (values <= high)).all()


def test_mean_of_a_single_point_range():
    mech = MeanMechanism(1.0, 4, 4)
    assert mech.sum_noise.scale == 0.0
    values, _ = mech.release(np.array([8.0, 0.0]), np.array([2, 0]))
    assert values.tolist() == [4.0, 4.0]


def test_mean_accuracy_before_data():
    mech = MeanMechanism(1.0, 0, 100)
    assert mech.accuracy(0.95) == 100  # no group size: only the width is known
    assert mech.accuracy(0.95, n=10_000) < 1
    assert mech.accuracy(0.95, n=1) == 100
    assert mech.expected_error(n=10_000) < mech.expected_error(n=100) <= 100
    # The data-free bound agrees with the intervals of a release at that group size.
    with testing.seed(4):
        s = mech.lattice.index_sums([50.0 * 10_000], [10_000])[0]
        values, _ = mech.release(np.full(20_000, s), np.full(20_000, 10_000.0))
    err = np.abs(values - 50.0)
    assert (err <= mech.accuracy(0.95, n=10_000)).mean() >= 0.95


def test_mean_ci_post_processing_is_deterministic():
    mech = MeanMechanism(1.0, 0, 10)
    with testing.seed(5):
        _, acc = mech.release(np.array([30.0]), np.array([6.0]))
    assert acc.interval(0.9) == acc.interval(0.9)
    lo90, hi90 = acc.interval(0.9)
    lo99, hi99 = acc.interval(0.99)
    assert lo99 <= lo90 and hi90 <= hi99


# -- variance -------------------------------------------------------------------------------
@pytest.mark.parametrize("ddof", [0, 1])
def test_variance_exact_mode(ddof):
    data = pd.Series([1.0, 4.0, 4.0, 9.0, 2.5])
    mech = VarianceMechanism(1.0, 0, 10, ddof=ddof)
    sd = VarianceMechanism(1.0, 0, 10, ddof=ddof, stddev=True)
    args = mech.lattice.value_sums(data.to_numpy())  # (Σd, Σd², n): data on the lattice
    with testing.no_noise():
        assert mech.release(*args)[0][0] == pytest.approx(data.var(ddof=ddof), rel=1e-12)
        assert sd.release(*args)[0][0] == pytest.approx(data.std(ddof=ddof), rel=1e-12)
        empty = mech.release(np.zeros(1), np.zeros(1), np.zeros(1))[0][0]
    assert 0 <= empty <= 25 * (2 if ddof else 1)
    with pytest.raises(PinqError):
        VarianceMechanism(1.0, 0, 1, ddof=2)


# -- quantiles ------------------------------------------------------------------------------
def test_default_candidates():
    assert default_candidates(0, 100).tolist() == list(range(101))
    assert len(default_candidates(0, 10_000)) == 10_001
    g = default_candidates(0, 10_001)
    assert len(g) == 1001 and g[0] == 0 and g[-1] == 10_001
    g = default_candidates(0.5, 2.5)
    assert len(g) == 1001 and g[0] == 0.5 and g[-1] == 2.5
    assert default_candidates(3, 3).tolist() == [3.0]
    assert (np.diff(default_candidates(-7.25, 1e9)) > 0).all()


def test_custom_candidates():
    mech = QuantileMechanism(1, 0.5, 0, 10, candidates=[5, 2, 2, 7])
    assert mech.candidates.tolist() == [0, 2, 5, 7, 10]
    with pytest.raises(PinqError):
        QuantileMechanism(1, 0.5, 0, 10, candidates=[11])
    with pytest.raises(PinqError):
        QuantileMechanism(1, 0.5, 0, 10, candidates=[np.nan])
    with pytest.raises(PinqError):
        QuantileMechanism(1, 1.5, 0, 10)
    with pytest.raises(PinqError):
        QuantileMechanism(1, 0.5, 0, 10, ci_share=1)


def test_bin_counts_match_brute_force():
    rng = np.random.default_rng(0)
    mech = QuantileMechanism(1, 0.5, -2, 2, candidates=np.linspace(-2, 2, 9))
    values = np.concatenate([rng.uniform(-3, 3, 200), mech.candidates, [np.nan, np.inf, -np.inf]])
    eq, gap = mech.bin_counts(values)
    v = np.clip(values[~np.isnan(values)], -2, 2)
    c = mech.candidates
    assert eq[0].tolist() == [(v == x).sum() for x in c]
    assert gap[0].tolist() == [((v > a) & (v < b)).sum() for a, b in itertools.pairwise(c)]
    # Per key with codes.
    codes = rng.integers(-1, 3, size=values.size)
    eqk, gapk = mech.bin_counts(values, codes=codes, n_keys=3)
    assert eqk.shape == (3, 9) and gapk.shape == (3, 8)
    for k in range(3):
        e1, g1 = mech.bin_counts(values[codes == k])
        assert np.array_equal(eqk[k], e1[0]) and np.array_equal(gapk[k], g1[0])


def exact_quantile(values: np.ndarray, cands: np.ndarray, q: float) -> float:
    v = values[None, :]
    c = cands[:, None]
    u = -np.abs((1 - q) * (v < c).sum(1) - q * (v > c).sum(1))
    return float(cands[np.argmax(u)])  # first best: ties to the lowest


@pytest.mark.parametrize("q", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_quantile_exact_mode(q):
    rng = np.random.default_rng(1)
    data = rng.integers(0, 50, 101).astype(float)
    mech = QuantileMechanism(1.0, q, 0, 50)
    eq, gap = mech.bin_counts(data)
    with testing.no_noise():
        values, _ = mech.release(eq, gap)
    assert values[0] == exact_quantile(data, mech.candidates, q)
    if q == 0.5:
        assert values[0] == np.median(data)  # odd count: the middle value
    if q == 0.0:
        assert values[0] == data.min()
    if q == 1.0:
        assert values[0] == data.max()


def test_quantile_ties_go_to_the_lowest_and_empty_is_inside():
    mech = QuantileMechanism(1.0, 0.5, 0, 10, ci_share=0.25)
    # Every c strictly between 2 and 8 scores 0 (one row below, one above): a tie.
    eq, gap = mech.bin_counts(np.array([2.0, 8.0]))
    empty_eq, empty_gap = mech.bin_counts(np.array([]))
    with testing.no_noise():
        assert mech.release(eq, gap)[0].tolist() == [3.0]
        assert mech.release(empty_eq, empty_gap)[0].tolist() == [0.0]
    with testing.seed(2):
        values, acc = mech.release(np.repeat(empty_eq, 500, 0), np.repeat(empty_gap, 500, 0))
    assert ((values >= 0) & (values <= 10)).all()
    low, high = acc.interval(0.95)
    assert ((low >= 0) & (high <= 10)).all()


def test_quantile_release_is_vectorized_over_keys():
    mech = QuantileMechanism(2.0, 0.5, 0, 100)
    groups = [np.arange(10.0), np.arange(50.0, 90.0), np.array([99.0] * 7)]
    codes = np.concatenate([[k] * len(g) for k, g in enumerate(groups)])
    eq, gap = mech.bin_counts(np.concatenate(groups), codes=codes, n_keys=3)
    with testing.no_noise():
        values, acc = mech.release(eq, gap)
    assert values.tolist() == [4.0, 69.0, 99.0]
    assert len(acc) == 3 and acc.take([2]).values.tolist() == [99.0]
    with pytest.raises(ValueError):
        mech.release(eq[:, :5], gap)


def test_quantile_ci_is_in_value_space():
    mech = QuantileMechanism(1.0, 0.5, 0, 100, ci_share=0.25)
    data = np.random.default_rng(3).normal(40, 10, 5000).clip(0, 100)
    eq, gap = mech.bin_counts(data)
    with testing.seed(3):
        values, acc = mech.release(eq, gap)
    low, high = acc.interval(0.95)
    assert low[0] <= values[0] <= high[0]
    assert low[0] <= np.median(data) <= high[0]
    assert high[0] - low[0] <= 10  # a few cut spacings, not the whole range
    assert len(mech.cuts) == QUANTILE_CI_CUTS and mech.cuts[0] == 0 and mech.cuts[-1] == 100


def test_quantile_without_ci_share():
    mech = QuantileMechanism(1.0, 0.5, 0, 100)  # the default: the whole epsilon selects
    assert mech.select_epsilon == 1 and mech.ci_epsilon == 0 and mech.ci_noise is None
    assert "histogram" not in mech.describe()
    eq, gap = mech.bin_counts(np.arange(100.0))
    _, acc = mech.release(eq, gap)
    # No value-space interval was paid for: ci refuses, the rank error is stated instead.
    assert not acc.has_interval
    with pytest.raises(PinqError, match=r"without an interval; ask median\(\.\.\., ci=True\)"):
        acc.interval(0.95)
    assert acc.rank_error(0.9) == mech.accuracy(0.9)
    assert QuantileMechanism(1.0, 0.5, 0, 100, ci_share=0.25).release(eq, gap)[1].has_interval


def test_quantile_single_candidate():
    mech = QuantileMechanism(1.0, 0.3, 5, 5, ci_share=0.25)
    eq, gap = mech.bin_counts(np.array([1.0, 9.0, 5.0]))
    assert eq.tolist() == [[3]] and gap.shape == (1, 0)
    values, acc = mech.release(eq, gap)
    assert values.tolist() == [5.0]
    assert [x.tolist() for x in acc.interval(0.95)] == [[5.0], [5.0]]


def test_quantile_accuracy_before_data():
    for share, eps_sel in ((0, 1.0), (0.25, 0.75)):
        mech = QuantileMechanism(1.0, 0.5, 0, 100, ci_share=share)
        bound = 2 * 0.5 * (math.log(101) + math.log(20)) / eps_sel
        assert mech.accuracy(0.95) == pytest.approx(bound)
        assert mech.expected_error() == pytest.approx(2 * 0.5 * (math.log(101) + 1) / eps_sel)
    assert mech.ci_thresholds(0.95).shape == (QUANTILE_CI_CUTS,)
    assert (mech.ci_thresholds(0.99) > mech.ci_thresholds(0.9)).all()


# -- argmax ---------------------------------------------------------------------------------
def test_argmax_exact_mode_and_labels():
    mech = ArgmaxMechanism(1.0, 3, labels=[("CA", 1), ("NY", 2), ("TX", 3)])
    counts = np.array([[1, 5, 5], [9, 0, 0], [0, 0, 0]])
    with testing.no_noise():
        idx, acc = mech.release(counts)
    assert idx.tolist() == [1, 0, 0]
    assert acc.values.tolist() == [("NY", 2), ("CA", 1), ("CA", 1)]
    assert acc.take([0]).indices.tolist() == [1]


def test_argmax_validation_and_accuracy():
    with pytest.raises(PinqError):
        ArgmaxMechanism(1.0, 0)
    with pytest.raises(ValueError):
        ArgmaxMechanism(1.0, 2, labels=["a"])
    mech = ArgmaxMechanism(0.5, 4)
    with pytest.raises(ValueError):
        mech.release(np.zeros((2, 3)))
    assert mech.accuracy(0.95) == pytest.approx(math.log(4 / 0.05) / 0.5)
    assert mech.expected_error() == pytest.approx((math.log(4) + 1) / 0.5)
    assert mech.noise_scale == 2.0


def test_argmax_picks_a_clear_winner():
    mech = ArgmaxMechanism(1.0, 3)
    with testing.seed(1):
        idx, _ = mech.release(np.repeat([[10.0, 100.0, 20.0]], 1000, axis=0))
    assert (idx == 1).all()


def test_accuracy_is_an_accuracy():
    _, acc = CountMechanism(1).release(np.ones(2))
    assert isinstance(acc, Accuracy)
    assert acc.epsilon == 1 and acc.delta == 0 and acc.mechanism == "DiscreteLaplace(scale=1)"


# -- discrete Gaussian charges --------------------------------------------------------------
def test_discrete_gaussian_charges_are_gaussian_charges_usage_of_understands():
    from pinqpy.accounting.charges import usage_of
    from pinqpy.accounting.models import rho_of_gaussian

    for mech in (
        CountMechanism(0.5, delta=1e-6),
        SumMechanism(0.5, 0, 10, delta=1e-6),
    ):
        c = mech.charge
        assert isinstance(c, DiscreteGaussianCharge) and isinstance(c, GaussianCharge)
        assert c.at(1) == Cost(0.5, 1e-6)
        u = usage_of(c, 3)
        assert u.epsilon == Fraction(3, 2)
        assert u.rho == 9 * rho_of_gaussian(c.sensitivity, c.sigma)
    # For a count, the stored sigma is the largest float not above sqrt(sigma2): the rho
    # usage_of reads is at least the true 1/(2 sigma2).
    count = CountMechanism(0.5, delta=1e-6)
    s2 = count.noise.sigma2
    assert rho_of_gaussian(1, count.charge.sigma) >= 1 / (2 * s2)
    assert Fraction(math.nextafter(count.charge.sigma, math.inf)) ** 2 > s2
    # For a lattice sum, the unit noise's rho S²/(2 sigma_u²) is within the charged rho.
    total = SumMechanism(0.5, 0, 10, delta=1e-6)
    g, s2u = total.noise.grid, total.noise.unit.sigma2
    su = math.ceil(10 / g) + 1
    assert Fraction(su * su) / (2 * s2u) <= rho_of_gaussian(10, total.charge.sigma)


def test_mean_and_variance_charge_exactly_epsilon_with_discrete_parts():
    mean = MeanMechanism(Fraction(1, 3), 0, 1, delta=1e-6)
    parts = mean.charge.parts
    assert [type(p).__name__ for p in parts] == ["DiscreteGaussianCharge"] * 2
    var = VarianceMechanism(0.3, 0, 10)
    assert [p.at(1) for p in var.charge.parts] == [Cost(0.1)] * 3


def test_mean_sensitivity_covers_a_rounded_midpoint():
    from pinqpy.noise.mechanisms.mean import _half_width

    lo, hi = 0.1, 0.7  # 0.5·(lo + hi) is not exactly the real midpoint of the two floats
    mid = 0.5 * (lo + hi)
    h = _half_width(lo, hi)
    assert h >= Fraction(hi) - Fraction(mid) and h >= Fraction(mid) - Fraction(lo)
    assert h >= (Fraction(hi) - Fraction(lo)) / 2
    assert MeanMechanism(1, lo, hi).noise_scale is None
