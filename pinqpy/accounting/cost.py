"""What a query costs: :class:`Cost`, an exact (epsilon, delta) pair, and the checks every
query's epsilon and delta pass before anything is charged.

>>> Cost(epsilon=0.1) + Cost(epsilon=0.2, delta=1e-6)
Cost(epsilon=0.3, delta=0.000001)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from pinqpy.core.exact import Exact, ceil_fraction, to_fraction
from pinqpy.errors import PinqError

__all__ = ["MAX_EPSILON", "MIN_DELTA", "Cost", "check_delta", "check_epsilon", "check_part_delta"]

_ZERO = Fraction(0)


@dataclass(frozen=True, init=False)
class Cost:
    """An (epsilon, delta) pair held exactly.

    ``Cost(epsilon=0.1)`` reads ``0.1`` as exactly one tenth. Costs add componentwise.
    """

    epsilon: Exact
    delta: Exact

    def __init__(self, epsilon: object = 0, delta: object = 0):
        eps = to_fraction(epsilon, "epsilon")
        dlt = to_fraction(delta, "delta")
        if eps < 0 or dlt < 0:
            raise PinqError("a cost cannot be negative")
        object.__setattr__(self, "epsilon", Exact(eps))
        object.__setattr__(self, "delta", Exact(dlt))

    @classmethod
    def _of(cls, epsilon: Fraction, delta: Fraction) -> Cost:
        """A cost from values already known to be exact and non-negative (no re-validation)."""
        obj = object.__new__(cls)
        object.__setattr__(obj, "epsilon", Exact.of(epsilon))
        object.__setattr__(obj, "delta", Exact.of(delta))
        return obj

    def __add__(self, other: Cost) -> Cost:
        return Cost._of(self.epsilon + other.epsilon, self.delta + other.delta)

    def __sub__(self, other: Cost) -> Cost:
        # Only ever used for monotone increments, which are never negative.
        return Cost._of(
            max(self.epsilon - other.epsilon, _ZERO), max(self.delta - other.delta, _ZERO)
        )

    def max(self, other: Cost) -> Cost:
        """Componentwise maximum (parallel composition)."""
        return Cost._of(max(self.epsilon, other.epsilon), max(self.delta, other.delta))

    def fits_in(self, other: Cost) -> bool:
        return self.epsilon <= other.epsilon and self.delta <= other.delta

    @property
    def is_zero(self) -> bool:
        return self.epsilon == 0 and self.delta == 0

    def at(self, k: object) -> Cost:
        """This cost as seen by a source whose one privacy unit changes up to ``k`` rows here.

        Group privacy for an (epsilon, delta)-DP mechanism and groups of size k:
        ``(k·epsilon, k·e^((k-1)·epsilon)·delta)`` (Dwork & Roth, Theorem 2.2 extended to
        delta). Epsilon scales exactly; a non-zero delta for k > 1 involves an exponential and
        is rounded *up* into exact arithmetic. For k = 1 the cost is returned unchanged.
        """
        kk = to_fraction(k, "stability") if not isinstance(k, Fraction) else k
        if kk == 1:
            return self
        if kk < 0:
            raise PinqError("a stability cannot be negative")
        if kk == 0:
            return Cost()
        eps = self.epsilon * kk
        if self.delta == 0:
            return Cost._of(eps, _ZERO)
        # In logs, so a large (k-1)·epsilon cannot overflow. A delta of 1 holds for every
        # mechanism, so a group delta at or above 1 is charged as 1 (no budget can pay it).
        # (An exponent above 1e6 is charged 1 without converting it: it may exceed doubles.)
        exponent = (kk - 1) * self.epsilon
        log_delta = (
            math.log(kk.numerator)
            - math.log(kk.denominator)
            + (float(exponent) if exponent <= 10**6 else math.inf)
            + math.log(self.delta.numerator)
            - math.log(self.delta.denominator)
        )
        if log_delta >= 0:
            return Cost(eps, max(Fraction(1), self.delta * kk))
        delta = ceil_fraction(math.exp(log_delta))
        delta = max(delta, self.delta * kk)
        return Cost(eps, delta)

    def __repr__(self) -> str:
        if self.delta == 0:
            return f"Cost(epsilon={self.epsilon!r})"
        return f"Cost(epsilon={self.epsilon!r}, delta={_short(self.delta)})"


def _short(x: Fraction) -> str:
    """A readable spelling of a small delta (``1e-06``) that stays exact where it is short."""
    r = repr(Exact(x))
    return r if len(r) <= 12 else f"{float(x):.6g}"


def _check_epsilon(value: object, what: str) -> Fraction:
    """A positive, finite epsilon, or a clear error."""
    if isinstance(value, float) and math.isnan(value):
        raise PinqError(f"{what} must be a positive finite number, not NaN")
    if isinstance(value, float) and math.isinf(value):
        raise PinqError(f"{what} must be a positive finite number, not infinity")
    eps = to_fraction(value, what)
    if eps <= 0:
        raise PinqError(f"{what} must be positive (got {float(eps):g})")
    return eps


#: The largest epsilon one measurement may ask for: ``10**100``. Far beyond any meaningful
#: guarantee (``e**epsilon`` bounds the privacy loss), it is refused before any charge
#: because the noise calibrations work in doubles: below it every derived quantity (``1/ε``,
#: ``ε²``, a Gaussian's sigma) stays finite and every release is total. A budget's total may be
#: larger.
MAX_EPSILON = Fraction(10**100)


def check_epsilon(value: object, what: str = "epsilon") -> Fraction:
    """Validate a query's epsilon: positive, finite and at most :data:`MAX_EPSILON`, else
    :class:`PinqError`.

    >>> check_epsilon(1e101)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pinqpy.errors.PinqError: epsilon is too large (1e+101): one measurement may ask ...1e+100
    """
    eps = _check_epsilon(value, what)
    if eps > MAX_EPSILON:
        raise PinqError(
            f"{what} is too large ({_big(eps)}): one measurement may ask for at most "
            f"{float(MAX_EPSILON):g}"
        )
    return eps


def _big(x: Fraction) -> str:
    """``x`` spelt like a float, also beyond the range of doubles."""
    try:
        return f"{float(x):g}"
    except OverflowError:
        return f"about 1e{len(str(x.numerator // x.denominator)) - 1}"


#: The smallest delta a query may ask for. Below it the noise cannot be calibrated in
#: bounded time with float-checked bounds (subnormal floats), and no release needs it.
MIN_DELTA = Fraction(1, 10**300)


def check_delta(value: object, what: str = "delta", *, minimum: Fraction = MIN_DELTA) -> Fraction:
    """Validate a query's delta: in ``[minimum, 1)`` when given (``minimum`` is
    :data:`MIN_DELTA` for a query; the parts a mechanism splits it into may go lower).

    >>> check_delta(5e-324)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pinqpy.errors.PinqError: delta is too small to calibrate noise for (4.94066e-324); ...
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise PinqError(f"{what} must be a number in (0, 1)")
    d = to_fraction(value, what)
    if not 0 < d < 1:
        raise PinqError(f"{what} must be above 0 and below 1 (got {float(d):g})")
    if d < minimum:
        raise PinqError(
            f"{what} is too small to calibrate noise for ({float(d):g}); the smallest delta "
            f"pinqpy accepts is {float(minimum):g}"
        )
    return d


# A mechanism may split a query's delta (a mean: half to the sum, half to the count), so its
# parts may go below MIN_DELTA; still far above the subnormal floats calibration cannot use.
_MIN_PART_DELTA = MIN_DELTA / 10**6


def check_part_delta(value: object, what: str = "delta") -> Fraction:
    """A mechanism's (or a part's) delta: in ``[MIN_DELTA / 10**6, 1)``."""
    return check_delta(value, what, minimum=_MIN_PART_DELTA)


def _nonneg(value: object, what: str) -> Fraction:
    """A non-negative exact number. A float is read by its exact binary value.

    Data are clamped in float64, so a float bound's binary value (not its decimal spelling) is
    the largest magnitude a clamped value can have; reading it exactly keeps sensitivities
    from being understated by the last bit.
    """
    if isinstance(value, float | np.floating):
        f = float(value)
        if not math.isfinite(f):
            raise PinqError(f"{what} must be finite")
        x = Fraction(f)
    else:
        x = to_fraction(value, what)
    if x < 0:
        raise PinqError(f"{what} cannot be negative")
    return x


def _stability(k: object) -> Fraction:
    kk = k if isinstance(k, Fraction) else to_fraction(k, "stability")
    if kk < 0:
        raise PinqError("a stability cannot be negative")
    return kk
