"""Charges: what a mechanism costs at stability ``k``, known before any data is read.

A mechanism (:mod:`pinqpy.noise.mechanisms`) produces one of these; the agents
(:mod:`pinqpy.accounting.agents`) ask it for its cost at each stability of the frame's lineage
(``at(k) -> Cost``), and :func:`usage_of` reads it in every accounting model.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from pinqpy.accounting.cost import Cost, _nonneg, _stability, check_epsilon, check_part_delta
from pinqpy.accounting.models import Usage, rho_of_gaussian, rho_of_pure, zcdp_delta
from pinqpy.accounting.profiles import _DELTA_MARGIN, discrete_gaussian_delta, gaussian_delta
from pinqpy.core.exact import Exact, ceil_fraction, to_fraction
from pinqpy.errors import PinqError
from pinqpy.results.format import _fmt

__all__ = [
    "CompositeCharge",
    "DiscreteGaussianCharge",
    "FreeCharge",
    "GaussianCharge",
    "PureCharge",
    "usage_of",
]

_ZERO = Fraction(0)


class PureCharge:
    """The charge of an epsilon-DP mechanism: ``at(k) = Cost(k·epsilon)``.

    Group privacy for pure DP: a mechanism that is epsilon-DP for one-row changes is
    ``k·epsilon``-DP for ``k``-row changes (apply the one-row bound ``k`` times along a path of
    neighbours).

    >>> PureCharge(0.1).at(3)
    Cost(epsilon=0.3)
    """

    def __init__(self, epsilon: object):
        self.epsilon = Exact(check_epsilon(epsilon))

    def at(self, k: object) -> Cost:
        return Cost(_stability(k) * self.epsilon)

    def __repr__(self) -> str:
        return f"PureCharge(epsilon={self.epsilon!r})"


class GaussianCharge:
    """The charge of a Gaussian mechanism with sensitivity ``D`` and noise ``sigma``.

    ``at(1)`` is ``Cost(epsilon, delta)`` exactly as requested (``sigma`` was calibrated for
    it). At stability ``k > 1`` one privacy unit moves the aggregate by up to ``k·D``, and the
    Gaussian mechanism with sensitivity ``k·D`` is exactly ``(k·epsilon, delta')``-DP for

        ``delta' = gaussian_delta(k·epsilon, k·D, sigma)``

    (Balle & Wang's profile at ratio ``k·D/sigma``), rounded up into a Fraction. In zCDP terms
    the mechanism is ``rho = D²/(2 sigma²)``-zCDP and the group of ``k`` rows sees
    ``k²·rho`` (Bun & Steinke, TCC 2016, Proposition 27); the profile above is the exact
    (epsilon, delta) reading of that, tighter than the generic group bound
    ``k·e^{(k-1)epsilon}·delta``.

    >>> c = GaussianCharge(1, 1e-6, 1, 4.224678889532045)  # gaussian_sigma(1, 1, 1e-6)
    >>> c.at(1)
    Cost(epsilon=1, delta=0.000001)
    >>> 1e-6 < float(c.at(2).delta) < 2 * math.exp(1) * 1e-6
    True
    """

    def __init__(self, epsilon: object, delta: object, sensitivity: object, sigma: float):
        self.epsilon = Exact(check_epsilon(epsilon))
        self.delta = Exact(check_part_delta(delta))
        self.sensitivity = _nonneg(sensitivity, "sensitivity")
        self.sigma = float(sigma)

    def at(self, k: object) -> Cost:
        kk = _stability(k)
        if kk == 0:
            return Cost()
        if kk == 1:
            return Cost(self.epsilon, self.delta)
        d = gaussian_delta(kk * self.epsilon, kk * self.sensitivity, self.sigma)
        return Cost(kk * self.epsilon, ceil_fraction(d * (1.0 + _DELTA_MARGIN)))

    def __repr__(self) -> str:
        return (
            f"GaussianCharge(epsilon={self.epsilon!r}, delta={float(self.delta):g}, "
            f"sigma={_fmt(self.sigma)})"
        )


class DiscreteGaussianCharge(GaussianCharge):
    """The charge of a discrete Gaussian release (a count, or a lattice sum).

    ``at(1)`` is ``Cost(epsilon, delta)`` as calibrated (for a count by
    :func:`~pinqpy.noise.mechanisms.discrete_gaussian_sigma2`, for a lattice release by
    ``_lattice_noise`` in :mod:`pinqpy.noise.mechanisms.base`). At stability ``k``: the released
    integer (a count, or a sum in grid units) moves by at most ``k`` times its one-row
    sensitivity ``Δ_u``, and the discrete Gaussian ``N_Z(0, σ_u²)`` under such shifts is
    ``k²·Δ_u²/(2σ_u²)``-zCDP (CKS20, Proposition 5: the Rényi divergence of order ``a``
    between ``N_Z(μ, σ²)`` and ``N_Z(ν, σ²)`` is at most ``a(μ-ν)²/(2σ²)``). The charge is
    that rho converted by CKS20: ``(k·eps, zcdp_delta(k²·rho, k·eps))``.

    For a count (``sigma2``, the exact variance of the integer noise, given; sensitivity 1)
    a group of ``k > 1`` rows moves the count by at most ``ceil(k)``, and the exact CKS20
    profile :func:`discrete_gaussian_delta` at sensitivity ``ceil(k)`` -- which covers every
    smaller shift, see there -- is used when it is below the zCDP conversion (it always is
    in practice: at ``ε = 1``, ``δ = 1e-6``, ``k = 2`` it charges ``3.06e-6`` against the
    conversion's ``1.4e-5``).

    ``sensitivity`` and ``sigma`` are stored so that ``rho_of_gaussian(sensitivity, sigma)``
    is at least the true ``rho`` of the noise drawn -- which is what
    :func:`usage_of` reads from any ``GaussianCharge``; it needs nothing else (``at(k)`` and
    these two attributes).

    >>> s2 = Fraction(76877723237, 2**32)  # discrete_gaussian_sigma2(1, Fraction(1, 10**6))
    >>> c = DiscreteGaussianCharge(1, Fraction(1, 10**6), 1, _sqrt_down(s2), sigma2=s2)
    >>> c.at(1)
    Cost(epsilon=1, delta=0.000001)
    >>> c.at(2).epsilon == 2, 3.05e-6 < float(c.at(2).delta) < 3.06e-6
    (True, True)
    >>> lattice = DiscreteGaussianCharge(1, Fraction(1, 10**6), 1, _sqrt_down(s2))
    >>> 1.3e-5 < float(lattice.at(2).delta) < 1.4e-5  # zCDP conversion only
    True
    """

    def __init__(
        self,
        epsilon: object,
        delta: object,
        sensitivity: object,
        sigma: float,
        *,
        sigma2: Fraction | None = None,
    ):
        super().__init__(epsilon, delta, sensitivity, sigma)
        self.sigma2 = sigma2

    def at(self, k: object) -> Cost:
        kk = _stability(k)
        if kk == 0:
            return Cost()
        if kk == 1:
            return Cost(self.epsilon, self.delta)
        rho = kk * kk * rho_of_gaussian(self.sensitivity, self.sigma)
        e = kk * self.epsilon
        d = zcdp_delta(rho, e)
        if self.sigma2 is not None and 1 < kk <= 1 << 20:
            d = min(d, _group_delta(self.sigma2, e, math.ceil(kk)))
        return Cost(e, d)

    def __repr__(self) -> str:
        return (
            f"DiscreteGaussianCharge(epsilon={self.epsilon!r}, delta={float(self.delta):g}, "
            f"sigma={_fmt(self.sigma)})"
        )


@functools.lru_cache(maxsize=1024)
def _group_delta(sigma2: Fraction, epsilon: Fraction, shift: int) -> Fraction:
    """:func:`discrete_gaussian_delta` at sensitivity ``shift``, rounded up into a Fraction
    (1, the trivial bound, where it cannot be evaluated)."""
    try:
        d = discrete_gaussian_delta(sigma2, epsilon, shift)
    except PinqError:
        return Fraction(1)
    return min(Fraction(1), ceil_fraction(d))


class FreeCharge:
    """The charge of releasing a public number (a row count the curator declared public):
    nothing, at any stability. The release is a function of public facts alone, so it is
    0-DP and composes with anything for free.

    >>> FreeCharge().at(3)
    Cost(epsilon=0)
    """

    def at(self, k: object) -> Cost:
        return Cost()

    def __repr__(self) -> str:
        return "FreeCharge()"


class CompositeCharge:
    """Sequential composition: ``at(k)`` is the sum of the parts' ``at(k)``.

    >>> CompositeCharge([PureCharge(0.05), PureCharge(0.05)]).at(2)
    Cost(epsilon=0.2)
    """

    def __init__(self, parts: Sequence[Any]):
        self.parts = tuple(parts)

    def at(self, k: object) -> Cost:
        kk = _stability(k)
        total = Cost()
        for part in self.parts:
            total = total + part.at(kk)
        return total

    def __repr__(self) -> str:
        return f"CompositeCharge({list(self.parts)!r})"


def _sqrt_down(x: Fraction) -> float:
    """The largest float ``s`` with ``s² <= x`` (exactly)."""
    s = math.sqrt(float(x))
    while s > 0 and Fraction(s) ** 2 > x:
        s = math.nextafter(s, 0.0)
    while Fraction(math.nextafter(s, math.inf)) ** 2 <= x:
        s = math.nextafter(s, math.inf)
    return s


def usage_of(charge: object, k: object = 1) -> Usage:
    """The :class:`Usage` of a mechanism's charge at stability ``k``.

    * :class:`PureCharge` -- ``(k·eps, 0)``, ``rho = (k·eps)²/2``;
    * :class:`GaussianCharge` -- its exact (analytic Gaussian) cost
      ``charge.at(k)`` and ``rho = (k·D)²/(2σ²)`` (sensitivity ``k·D`` for ``k`` rows);
    * :class:`CompositeCharge` -- the sum of its parts;
    * a :class:`~pinqpy.Cost`, or any other object with ``at(k) -> Cost`` -- known only by
      its (epsilon, delta): rho when delta is 0, else none.

    >>> u = usage_of(CompositeCharge([PureCharge(0.1), GaussianCharge(1, 1e-6, 1, 4.0)]), 2)
    >>> u.rho == 4 * (Fraction(1, 200) + Fraction(1, 32)), u.epsilon
    (True, Fraction(11, 5))
    """
    kk = k if isinstance(k, Fraction) else to_fraction(k, "stability")
    if isinstance(charge, CompositeCharge):
        total = Usage()
        for part in charge.parts:
            total = total + usage_of(part, kk)
        return total
    if isinstance(charge, GaussianCharge):
        c = charge.at(kk)
        rho = kk * kk * rho_of_gaussian(charge.sensitivity, charge.sigma)
        return Usage(Fraction(c.epsilon), Fraction(c.delta), rho)
    if isinstance(charge, PureCharge):
        e = Fraction(charge.at(kk).epsilon)
        return Usage(e, _ZERO, rho_of_pure(e))
    if isinstance(charge, Cost):
        return Usage.from_cost(charge.at(kk))
    at = getattr(charge, "at", None)
    if at is None:
        raise TypeError(f"not a charge: {type(charge).__name__}")
    return Usage.from_cost(at(kk))
