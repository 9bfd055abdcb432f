"""Float error of means and variances: the exact values the noise is calibrated for.

The threat (Casacuberta et al., CCS 2022): a centred sum computed as ``Σx - mid·n`` (or
``Σx² - 2·mid·Σx + mid²·n``) in floats errs by far more than its sensitivity for bounds far
from zero, and the error leaks. pinqpy quantises each value on a public lattice
(:mod:`pinqpy.core.lattice`) and sums integers exactly; the documented bound is:

* the engine's ``(Σd, Σd², n)`` equal the sums of the reference map computed with Fractions
  (error 0);
* the centred sums ``S``, ``C`` the mechanisms noise are those of the quantised values,
  exactly (error 0, so 0 of the sensitivity), and one row moves them by at most ``h`` and
  ``h²/2``;
* quantisation moves each value by at most ``q/2 <= (hi - lo)·2**-21``;
* with noise off, the released measurement is the exact one correctly rounded to a float.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pinqpy as pq
from pinqpy.core.lattice import BITS, Lattice, SumGrid
from pinqpy.engines.registry import executor_for
from pinqpy.errors import PinqError
from pinqpy.expr.parser import parse_expression
from pinqpy.noise.mechanisms import MeanMechanism, VarianceMechanism
from pinqpy.noise.mechanisms.base import _to_float
from pinqpy.plan.grouping import Grouping

ADVERSARIAL_BOUNDS = [
    (1e7, 1e7 + 1),
    (-1e15, -1e15 + 2),
    (0.0, 1.0),
    (-3.0, 5.0),
    (0.1, 0.2),
    (1e300, 1e300 * (1 + 2**-40)),
    (-1e308, 1e308),
    (5e-324, 1e-300),
    (-1e-310, 1e-310),
    (2.0**60, 2.0**60 + 2.0**10),
    (123456.789, 123456.79),
    (4.0, 4.0),
]


def ref_index(lat: Lattice, x: float) -> int:
    """The lattice index of ``x`` with exact rational arithmetic (no float at all)."""
    xc = Fraction(min(max(x, lat.lo), lat.hi))  # clamping a float is exact
    q = lat.step
    d = round(xc / q) - round(Fraction(lat.lo) / q)  # round(): half to even, exact
    return min(max(d, 0), lat.levels)


def ref_sums(lat: Lattice, xs: list[float]) -> tuple[int, int, int]:
    ds = [ref_index(lat, x) for x in xs if not math.isnan(x)]
    return sum(ds), sum(d * d for d in ds), len(ds)


finite = st.floats(allow_nan=False, allow_infinity=False)
values = st.one_of(
    finite,
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e7, 1e7 + 0.5, -1e15]),
    st.floats(min_value=-1e16, max_value=1e16),
)


@st.composite
def bounds(draw: st.DrawFn) -> tuple[float, float]:
    if draw(st.booleans()):
        return draw(st.sampled_from(ADVERSARIAL_BOUNDS))
    a, b = draw(finite), draw(finite)
    return (min(a, b), max(a, b))


def _mechanisms_for(lo: float, hi: float) -> tuple[MeanMechanism, VarianceMechanism] | None:
    """Both mechanisms, or None where the public bounds are refused before any charge (a
    lattice outside the doubles, a variance beyond the largest float)."""
    try:
        return MeanMechanism(1, lo, hi), VarianceMechanism(1, lo, hi)
    except PinqError:
        return None


def _frame(xs: list[float], keys: list[int] | None = None) -> pq.PrivateFrame:
    df = pd.DataFrame({"x": np.array(xs, dtype=np.float64)})
    if keys is not None:
        df["k"] = np.array(keys, dtype=np.int64)
    return pq.PrivateFrame(df, pq.Budget(epsilon=1))


def _examples(engine: str) -> int:
    return 6 if engine == "spark" else 100


@pytest.mark.parametrize("lo, hi", ADVERSARIAL_BOUNDS)
def test_lattice_constants(lo: float, hi: float) -> None:
    """K levels span the bounds; h is within q/2 of the half-width; q <= width·2**-20."""
    lat = Lattice.of(lo, hi)
    w = Fraction(hi) - Fraction(lo)
    assert lat.index(lo) == 0 and lat.index(hi) == lat.levels
    assert ref_index(lat, lo) == 0 and ref_index(lat, hi) == lat.levels
    if w:
        assert 2**BITS <= w / lat.step < 2 ** (BITS + 1)
        assert abs(lat.half - w / 2) <= lat.step / 2
    else:
        assert lat.levels == 0 and lat.half == 0


def test_engine_lattice_sums_are_exact(engine: str) -> None:
    @settings(
        max_examples=_examples(engine),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(bounds(), st.lists(values, max_size=12), st.data())
    def check(b: tuple[float, float], xs: list[float], data: st.DataObject) -> None:
        lo, hi = b
        lat = Lattice.of(lo, hi)
        keys = data.draw(st.lists(st.integers(0, 2), min_size=len(xs), max_size=len(xs)))
        f = _frame(xs, keys)
        ex = executor_for(f._plan, f._rel.catalog)
        e = parse_expression("x")
        s1, s2, n = ex.lattice_sums(f._plan, None, e, lo, hi, squares=True)
        assert (s1[0], s2[0], int(n[0])) == ref_sums(lat, xs)
        grouping = Grouping(("k",), (0, 2, 5))
        g1, g2, gn = ex.lattice_sums(f._plan, grouping, e, lo, hi, squares=True)
        for i, key in enumerate((0, 2, 5)):
            part = [x for x, k in zip(xs, keys, strict=True) if k == key]
            assert (g1[i], g2[i], int(gn[i])) == ref_sums(lat, part)
        # Every value is moved by at most q/2 (the documented quantisation).
        for x in xs:
            if not math.isnan(x):
                xc = Fraction(min(max(x, lo), hi))
                xq = lat.step * (round(Fraction(lo) / lat.step) + ref_index(lat, x))
                assert abs(xq - xc) <= lat.step / 2

    check()


def _exact_centred(lat: Lattice, xs: list[float]) -> tuple[Fraction, Fraction, int]:
    """S and C of the quantised values, from the values themselves, with Fractions."""
    q, base, c = lat.step, round(Fraction(lat.lo) / lat.step), lat.centre
    xq = [q * (base + ref_index(lat, x)) for x in xs if not math.isnan(x)]
    s = sum((x - c for x in xq), Fraction(0))
    sq = sum(((x - c) ** 2 - lat.half**2 / 2 for x in xq), Fraction(0))
    return s, sq, len(xq)


def test_pre_noise_values_are_exact_and_released_correctly_rounded(engine: str) -> None:
    @settings(
        max_examples=_examples(engine),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(bounds(), st.lists(values, max_size=10))
    def check(b: tuple[float, float], xs: list[float]) -> None:
        lo, hi = b
        f = _frame(xs)
        ex = executor_for(f._plan, f._rel.catalog)
        e = parse_expression("x")
        s1, s2, n = ex.lattice_sums(f._plan, None, e, lo, hi, squares=True)
        mechs = _mechanisms_for(lo, hi)
        if mechs is None:
            return
        mean, var = mechs
        want_s, want_c, want_n = _exact_centred(var.lattice, xs)
        got_s, got_c = var.centred(s1, s2, n)
        assert (got_s[0], got_c[0], int(n[0])) == (want_s, want_c, want_n)  # error 0
        assert mean.centred(s1, n) == [want_s]
        with pq.testing.no_noise():
            _, acc = var.release(s1, s2, n)
        # Released: the exact value correctly rounded (a relative 2**-53 of it).
        for got, want in ((acc.noisy_sum[0], want_s), (acc.noisy_sq[0], want_c)):
            assert got == _to_float(want)

    check()


def test_mean_with_noise_off_is_the_quantised_mean(engine: str) -> None:
    """End to end through the frame: within q/2 (+ the float of the result) of the exact
    mean of the clamped values."""
    xs = [1e7 + 0.3, 1e7 + 0.7, np.nan, np.inf, 1e7 - 5, 1e7 + 0.123456789]
    lo, hi = 1e7, 1e7 + 1
    f = _frame(xs)
    with pq.testing.no_noise():
        got = float(f.mean("x", 0.5, (lo, hi)))
        var = float(f.variance("x", 0.5, (lo, hi)))
    clamped = [Fraction(min(max(x, lo), hi)) for x in xs if x == x]
    exact = sum(clamped, Fraction(0)) / len(clamped)
    q = Lattice.of(lo, hi).step
    assert abs(Fraction(got) - exact) <= q / 2 + Fraction(math.ulp(hi))
    m = exact
    exact_var = sum(((c - m) ** 2 for c in clamped), Fraction(0)) / (len(clamped) - 1)
    assert abs(Fraction(var) - exact_var) <= Fraction(1, 10**5)


def _captured_variance_measurements(
    monkeypatch: pytest.MonkeyPatch,
) -> list[tuple[list[Fraction], list[Fraction]]]:
    seen: list[tuple[list[Fraction], list[Fraction]]] = []
    original = VarianceMechanism.centred

    def spy(self, *args):  # type: ignore[no-untyped-def]
        out = original(self, *args)
        seen.append(out)
        return out

    monkeypatch.setattr(VarianceMechanism, "centred", spy)
    return seen


def test_reproduced_attack_variance_far_from_zero(
    engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``VARIANCE(flag + 1e7, 1e7, 1e7 + 1)`` on neighbouring datasets: the exact pre-noise
    measurements differ by at most their sensitivities (the float formula this replaces
    differed by about 12,000 times the sensitivity)."""
    rng = np.random.default_rng(1)
    base = rng.integers(0, 2, 2000)
    seen = _captured_variance_measurements(monkeypatch)
    for flags in (base, np.append(base, 1), np.append(base, 0)):
        session = pq.Session()
        session.register("t", pq.PrivateFrame(pd.DataFrame({"flag": flags}), pq.Budget(10)))
        with pq.testing.no_noise():
            out = session.sql(
                "SELECT VARIANCE(flag + 1e7, 1e7, 1e7 + 1) AS v, AVG(flag + 1e7, 1e7, 1e7 + 1) "
                "AS a, COUNT(*) AS n FROM t",  # read together: one engine query
                epsilon=1,
            )
        assert float(out["v"].iloc[0]) == pytest.approx(np.var(flags, ddof=1), abs=1e-6)
        assert float(out["a"].iloc[0]) == pytest.approx(1e7 + flags.mean(), abs=1e-7)
    mech = VarianceMechanism(1, 1e7, 1e7 + 1)
    h = mech.lattice.half
    assert h == Fraction(1, 2)
    (s0, c0), (s1, c1), (s2, c2) = ((s[0], c[0]) for s, c in seen)
    worst = Fraction(0)
    for s, c in ((s1, c1), (s2, c2)):
        assert abs(s - s0) <= h and abs(c - c0) <= h * h / 2  # exact: no error term at all
        worst = max(worst, abs(s - s0) / h, abs(c - c0) / (h * h / 2))
    assert worst == 1  # an extreme row moves them by exactly the sensitivity
    # The old float formula on the same data errs by far more than the sensitivity.
    x = base.astype(np.float64) + 1e7
    mid = 1e7 + 0.5
    old = float(np.sum(x * x) - 2 * mid * np.sum(x) + mid * mid * len(x))
    true = sum((Fraction(float(v)) - Fraction(mid)) ** 2 for v in x)
    assert abs(Fraction(old) - true) > 10 * (h * h / 2)  # ~96 sensitivities here


def test_neighbouring_measurements_move_by_at_most_the_sensitivity(engine: str) -> None:
    @settings(
        max_examples=_examples(engine),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(st.sampled_from(ADVERSARIAL_BOUNDS), st.lists(values, max_size=8), values)
    def check(b: tuple[float, float], xs: list[float], extra: float) -> None:
        lo, hi = b
        mechs = _mechanisms_for(lo, hi)
        if mechs is None:
            return
        var = mechs[1]
        e = parse_expression("x")
        out = []
        for rows in (xs, [*xs, extra]):
            f = _frame(rows)
            ex = executor_for(f._plan, f._rel.catalog)
            s1, s2, n = ex.lattice_sums(f._plan, None, e, lo, hi, True)
            s, c = var.centred(s1, s2, n)
            out.append((s[0], c[0]))
        h = var.lattice.half
        assert abs(out[1][0] - out[0][0]) <= h
        assert abs(out[1][1] - out[0][1]) <= h * h / 2

    check()


def test_plain_sum_is_exact_before_its_conversion(engine: str) -> None:
    """SUM: the engine's sum is the exact sum of the values truncated to the SUM's grid
    (|q·k| <= |x|, so the sensitivity max(|lo|, |hi|) holds exactly), converted to a double
    within 2 ulps; every value moved by less than q <= max(|lo|, |hi|)·2**-40."""

    @settings(
        max_examples=_examples(engine),
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(bounds(), st.lists(values, max_size=12))
    def check(b: tuple[float, float], xs: list[float]) -> None:
        lo, hi = b
        f = _frame(xs)
        ex = executor_for(f._plan, f._rel.catalog)
        got = ex.clamped_sum(f._plan, None, parse_expression("x"), lo, hi)
        grid = SumGrid.of(lo, hi)
        q, m = grid.step, max(abs(Fraction(lo)), abs(Fraction(hi)))
        total = Fraction(0)
        for x in xs:
            if math.isnan(x):
                continue
            xc = Fraction(min(max(x, lo), hi))
            xq = q * math.trunc(xc / q)
            assert abs(xq) <= abs(xc) and abs(xq - xc) < q and q <= max(m * 2**-40, q)
            total += xq
        s = float(got[0][0])
        if abs(total) < Fraction(sys.float_info.max):
            assert abs(Fraction(s) - total) <= 2 * Fraction(math.ulp(float(total)))
            if m:
                assert abs(Fraction(s) - total) / m <= Fraction(len(xs) + 1, 2**52)

    check()


def test_integer_shortcut_equals_the_per_row_lattice(engine: str) -> None:
    """An int64 column with integer bounds takes an exact integer-sum route (pandas, DuckDB)
    when the lattice step is at most 1; it must give the very index sums of the per-row map."""

    @settings(
        max_examples={"pandas": 150, "duckdb": 60, "polars": 60}.get(engine, 5),
        deadline=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        values=st.lists(st.integers(-(2**40), 2**40), max_size=40),
        lo=st.integers(-(2**41), 2**41),
        width=st.integers(0, 2**23),
        masked=st.booleans(),
    )
    def prop(values: list[int], lo: int, width: int, masked: bool) -> None:
        hi = lo + width
        df = pd.DataFrame({"x": pd.array(values, dtype="int64"), "m": range(len(values))})
        f = pq.PrivateFrame(df, pq.Budget(1))
        if masked:
            f = f.where("m % 2 = 0")
            values = values[::2]
        ex = executor_for(f._plan, f._rel.catalog)
        got = ex.lattice_sums(f._plan, None, parse_expression("x"), lo, hi)
        s1, _, n = Lattice.of(lo, hi).value_sums(values)
        assert int(got[0][0]) == s1 and int(got[2][0]) == n

    prop()
