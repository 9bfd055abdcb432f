"""Rounding a noise parameter up onto a dyadic grid: only ever more noise
(:mod:`pinqpy.noise.samplers`)."""

from __future__ import annotations

from fractions import Fraction

from pinqpy.core.exact import to_fraction
from pinqpy.errors import PinqError


def round_up_dyadic(x: Fraction | int | float | str, bits: int = 32) -> Fraction:
    """``x`` if its denominator is at most ``2**bits``, else ``ceil(x·2**bits) / 2**bits``.

    The result is never below ``x`` and exceeds it by less than ``2**-bits``. Used on a noise
    scale (or variance) it can only add noise, hence privacy.

    >>> round_up_dyadic(Fraction(10, 3))
    Fraction(10, 3)
    >>> round_up_dyadic(Fraction(1, 3), bits=1)
    Fraction(1, 2)
    """
    f = to_fraction(x, "x")
    if bits < 0:
        raise PinqError("bits must be non-negative")
    if f.denominator <= 1 << bits:
        return f
    return Fraction(-((-f.numerator << bits) // f.denominator), 1 << bits)
