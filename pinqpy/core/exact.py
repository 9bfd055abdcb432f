"""Exact numbers for privacy accounting.

Budgets never drift: every epsilon and delta is held as a :class:`fractions.Fraction`. A float
that a user types (``0.1``) is read by its shortest decimal spelling, so ``0.1`` is exactly
``1/10`` and ten charges of 0.1 fill a budget of 1.0 exactly.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from numbers import Rational, Real

import numpy as np

from pinqpy.errors import PinqError

__all__ = ["Exact", "ceil_fraction", "to_fraction"]


def to_fraction(value: object, what: str = "value") -> Fraction:
    """Convert a user-supplied number to an exact Fraction (floats by their decimal spelling)."""
    if isinstance(value, bool | np.bool_):
        raise PinqError(f"{what} must be a number, not a bool")
    if isinstance(value, Fraction):
        return value
    if isinstance(value, np.integer):  # exactly, before numbers.Rational (Fraction fails)
        return Fraction(int(value))
    if isinstance(value, np.floating):  # by its decimal spelling, like a Python float
        if not np.isfinite(value):
            raise PinqError(f"{what} must be finite")
        return Fraction(str(value) if value.dtype.itemsize <= 8 else repr(float(value)))
    if isinstance(value, complex | np.complexfloating):
        raise PinqError(f"{what} must be a real number")
    if isinstance(value, int | Rational):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PinqError(f"{what} must be finite")
        return Fraction(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise PinqError(f"{what} must be finite")
        return Fraction(value)
    if isinstance(value, str):
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise PinqError(f"{what} must be a number") from None
    if isinstance(value, Real):
        f = float(value)
        if not math.isfinite(f):
            raise PinqError(f"{what} must be finite")
        return Fraction(repr(f))
    # numpy scalars are not registered as numbers.Real in every version
    try:
        f = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise PinqError(f"{what} must be a number") from None
    if not math.isfinite(f):
        raise PinqError(f"{what} must be finite")
    return Fraction(repr(f))


def ceil_fraction(x: float) -> Fraction:
    """The smallest Fraction not below the float ``x`` plus a safety margin of 2**-40 relative.

    Used where an irrational quantity (an exponential in a group-privacy bound) must be
    rounded *up* into exact accounting.
    """
    if not math.isfinite(x):
        raise PinqError("a privacy parameter is not finite")
    up = math.nextafter(x, math.inf)
    return Fraction(up) * (1 + Fraction(1, 2**40))


class Exact(Fraction):
    """A Fraction that compares equal to a float with the same decimal spelling.

    ``budget.spent.epsilon == 0.3`` is true after charging 0.1 and 0.2, as a user expects,
    while the arithmetic underneath stays exact.

    >>> Exact(3, 10) == 0.3
    True
    >>> float(Exact(1, 3)) == 1 / 3
    True
    """

    __slots__ = ()

    def __new__(cls, numerator: object = 0, denominator: object = None) -> Exact:
        if denominator is None:
            return super().__new__(cls, to_fraction(numerator))
        return super().__new__(cls, numerator, denominator)  # type: ignore[arg-type]

    @classmethod
    def of(cls, value: Fraction) -> Exact:
        """Wrap an existing Fraction without re-validating it (hot path of the accounting)."""
        if type(value) is cls:
            return value
        obj = Fraction.__new__(cls)
        obj._numerator = value.numerator  # type: ignore[attr-defined]
        obj._denominator = value.denominator  # type: ignore[attr-defined]
        return obj

    @staticmethod
    def _coerce(other: object) -> object:
        if isinstance(other, float) and math.isfinite(other):
            return Fraction(repr(other))
        return other

    def __eq__(self, other: object) -> bool:
        return Fraction.__eq__(self, self._coerce(other))

    def __hash__(self) -> int:
        return Fraction.__hash__(self)

    def __lt__(self, other: object) -> bool:
        return Fraction.__lt__(self, self._coerce(other))  # type: ignore[arg-type]

    def __le__(self, other: object) -> bool:
        return Fraction.__le__(self, self._coerce(other))  # type: ignore[arg-type]

    def __gt__(self, other: object) -> bool:
        return Fraction.__gt__(self, self._coerce(other))  # type: ignore[arg-type]

    def __ge__(self, other: object) -> bool:
        return Fraction.__ge__(self, self._coerce(other))  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return _decimal_or_fraction(self)

    __str__ = __repr__


def _decimal_or_fraction(x: Fraction) -> str:
    """Show a terminating decimal when there is one (``0.3``), else ``1/3``."""
    d = x.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d == 1:
        s = format(Decimal(x.numerator) / Decimal(x.denominator), "f")
        if "." in s:
            s = s.rstrip("0").rstrip(".")
        return s
    return f"{x.numerator}/{x.denominator}"
