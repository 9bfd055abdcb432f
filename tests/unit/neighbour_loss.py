"""The privacy loss a release's exact inputs imply between two neighbouring datasets.

:func:`captured` records what every mechanism's ``release`` is given (the exact, pre-noise
statistics: counts, lattice sums, bin counts, candidate counts) while a query runs.
:func:`implied_loss` then reads two such records, one per neighbour, and returns the pure-DP
loss the calibration implies: for a measurement with noise calibrated to sensitivity ``Δ``
at epsilon ``e``, a change of ``d`` in its statistic costs ``e·d/Δ`` (summed over keys: the
parts of a partition, the groups of a GROUP BY, are released together). A release is
sound for the pair when that loss is at most what the budget was charged. The figures are
exact rationals of the engines' exact inputs, never of noisy outputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from fractions import Fraction
from typing import Any
from unittest import mock

import numpy as np

from pinqpy.noise.keyselect import KeySelectionMechanism
from pinqpy.noise.mechanisms import (
    ArgmaxMechanism,
    CountMechanism,
    MeanMechanism,
    PublicCountMechanism,
    PublicSizeMeanMechanism,
    QuantileMechanism,
    SumMechanism,
    VarianceMechanism,
)

MECHANISMS = (
    ArgmaxMechanism,
    CountMechanism,
    KeySelectionMechanism,
    MeanMechanism,
    PublicCountMechanism,
    PublicSizeMeanMechanism,
    QuantileMechanism,
    SumMechanism,
    VarianceMechanism,
)

Record = tuple[Any, tuple[Any, ...]]


@contextmanager
def captured() -> Iterator[list[Record]]:
    """Every ``(mechanism, release arguments)`` of the releases run inside."""
    seen: list[Record] = []

    def spy(cls: type) -> Any:
        original = cls.release

        def release(self: Any, *args: Any) -> Any:
            seen.append((self, args))
            return original(self, *args)

        return mock.patch.object(cls, "release", release)

    with ExitStack() as stack:
        for cls in MECHANISMS:
            stack.enter_context(spy(cls))
        yield seen


def _exact(values: Any) -> list[Fraction]:
    out = []
    for v in np.asarray(values, dtype=object).ravel().tolist():
        out.append(Fraction(int(v)) if isinstance(v, int | np.integer) else Fraction(float(v)))
    return out


def _l1(a: Any, b: Any) -> Fraction:
    xa, xb = _exact(a), _exact(b)
    assert len(xa) == len(xb), "the neighbours' releases have different shapes"
    return sum((abs(x - y) for x, y in zip(xa, xb, strict=True)), Fraction(0))


class Violation(AssertionError):
    """A release whose calibration the pair of neighbours breaks outright."""


def _measured(spec: Any, a: Any, b: Any) -> Fraction:
    """``e·L1/Δ`` for one noisy measurement (a ``_Noise``: its epsilon and sensitivity)."""
    d = _l1(a, b)
    if spec.sensitivity == 0:
        if d:
            raise Violation("a statistic of sensitivity 0 moved")
        return Fraction(0)
    return Fraction(spec.epsilon) * d / Fraction(spec.sensitivity)


def _quantile(m: QuantileMechanism, a: tuple, b: tuple) -> Fraction:
    (eq1, gap1), (eq2, gap2) = m._check_counts(*a), m._check_counts(*b)
    u1, u2 = m._int_scores(eq1, gap1), m._int_scores(eq2, gap2)
    per_key = np.abs(np.asarray(u1, dtype=object) - np.asarray(u2, dtype=object)).max(axis=1)
    shift = sum((Fraction(int(x)) for x in per_key.tolist()), Fraction(0))
    sens = Fraction(m.sensitivity) * m._q_pf.denominator  # in the integer scores' units
    loss = Fraction(m.select_epsilon) * shift / sens
    if m.ci_noise is not None:
        bins = _l1(m._coarse_bins(eq1, gap1), m._coarse_bins(eq2, gap2))
        loss += Fraction(m.ci_epsilon) * bins
    return loss


def _key_selection(m: KeySelectionMechanism, a: tuple, b: tuple) -> Fraction:
    ca = {k: int(c) for k, c in zip(a[0], np.asarray(a[1]).tolist(), strict=True)}
    cb = {k: int(c) for k, c in zip(b[0], np.asarray(b[1]).tolist(), strict=True)}
    for only in (set(ca) - set(cb), set(cb) - set(ca)):
        side = ca if only <= set(ca) else cb
        if len(only) > m.max_groups or any(side[k] > m.max_rows for k in only):
            raise Violation(
                f"keys only one neighbour has ({sorted(map(repr, only))}) exceed the "
                f"{m.max_groups} keys of at most {m.max_rows} rows the threshold assumes"
            )
    keys = set(ca) | set(cb)
    moved = sum(abs(ca.get(k, 0) - cb.get(k, 0)) for k in keys)
    return Fraction(m.epsilon) * moved


def implied_loss(first: Record, second: Record) -> Fraction:
    """The pure-DP loss of one release between two neighbours (see the module docstring)."""
    m, a = first
    m2, b = second
    assert type(m) is type(m2), "the neighbours ran different mechanisms"
    if isinstance(m, PublicCountMechanism):
        if _l1(a, b):
            raise Violation("a count released as public moved between neighbours")
        return Fraction(0)
    if isinstance(m, CountMechanism | SumMechanism):
        return _measured(m._spec, a[0], b[0])
    if isinstance(m, PublicSizeMeanMechanism):
        assert int(a[2]) == int(b[2]), "the public row count differs between neighbours"
        return _measured(m._sum, m.centred(a[0], a[1]), m.centred(b[0], b[1]))
    if isinstance(m, MeanMechanism):
        s = _measured(m._sum, m.centred(a[0], a[1]), m.centred(b[0], b[1]))
        return s + _measured(m._count, a[1], b[1])
    if isinstance(m, VarianceMechanism):
        (s1, c1), (s2, c2) = m.centred(*a), m.centred(*b)
        return (
            _measured(m._count, a[2], b[2])
            + _measured(m._sum, s1, s2)
            + _measured(m._sq, c1, c2)
        )
    if isinstance(m, QuantileMechanism):
        return _quantile(m, a, b)
    if isinstance(m, ArgmaxMechanism):
        # Monotone counts: each unit of L1 is one row added or removed, epsilon each.
        return Fraction(m.epsilon) * _l1(a[0], b[0])
    if isinstance(m, KeySelectionMechanism):
        return _key_selection(m, a, b)
    raise AssertionError(f"no loss rule for {type(m).__name__}")


def total_loss(first: Sequence[Record], second: Sequence[Record]) -> Fraction:
    """The loss of a query's releases together (sequential composition)."""
    assert len(first) == len(second), "the neighbours ran different numbers of releases"
    return sum((implied_loss(x, y) for x, y in zip(first, second, strict=True)), Fraction(0))
