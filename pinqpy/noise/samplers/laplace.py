"""The exact discrete Laplace sampler (CKS20 Algorithm 2) and the fitting of its scale
(:mod:`pinqpy.noise.samplers`)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from pinqpy.core.exact import to_fraction
from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise
from pinqpy.noise.samplers._bits import (
    _I64_MAX,
    MAX_BOUND,
    MAX_SCALE,
    Shape,
    _below_scalar,
    _Bits,
    _bits_for,
    _collect,
    _nz,
    _shape_size,
)
from pinqpy.noise.samplers.bernoulli import _bern_exp_unit, _geometric_exp1
from pinqpy.noise.samplers.rounding import round_up_dyadic


def _laplace_batch(bits: _Bits, t: int, s: int, attempts: int) -> np.ndarray:
    """One vectorized round of CKS20 Algorithm 2 (discrete Laplace of scale ``t/s``).

    Per attempt: ``U`` uniform on ``[0, t)``, kept with probability ``exp(-U/t)``; ``V`` with
    ``P(V >= v) = exp(-v)``. Then ``X = U + t·V`` has ``P(X = x) ∝ exp(-U/t)·exp(-V) =
    exp(-x/t)`` on ``x >= 0``, so ``Y = X // s`` has ``P(Y = y) ∝ sum_{x=ys}^{ys+s-1} exp(-x/t)
    ∝ exp(-y·s/t)``. A fair sign ``B`` gives ``±Y``; the pair (``B`` negative, ``Y = 0``) is
    rejected so that 0 is not counted twice. The result has ``P(z) ∝ exp(-|z|·s/t)``.
    """
    u = _below_scalar(bits, t, attempts)
    u = u[_nz(_bern_exp_unit(bits, [(u, t)], attempts))]
    m = u.size
    v = _geometric_exp1(bits, m)
    # X = U + t·V overflows int64 only when V > (2**63 - 1 - (t - 1)) // t; those rare entries
    # are computed with Python integers.
    big = _nz(v > (_I64_MAX - (t - 1)) // t)
    if big.size:
        vb = v[big]
        v[big] = 0
    x = u + t * v
    y = x if s == 1 else x // s
    if big.size:
        yb = (u[big].astype(object) + t * vb.astype(object)) // s
        if yb.max() > _I64_MAX:
            raise PinqError("a discrete Laplace sample does not fit in int64; lower the scale")
        y[big] = yb.astype(np.int64)
    neg = bits.chunks(m, 1).astype(np.int64)  # the sign bit B, 0 or 1
    # (y XOR -B) + B is -y when B = 1 (two's complement) and y when B = 0; the pair
    # (B = 1, y = 0) is exactly where y + 1 - B = 0.
    return ((y ^ -neg) + neg)[_nz(y + 1 - neg)]


def _laplace_params(scale: Any) -> tuple[int, int]:
    f = to_fraction(scale, "scale")
    if f <= 0:
        raise PinqError("a discrete Laplace scale must be positive")
    if f > MAX_SCALE:
        raise PinqError("a discrete Laplace scale must be at most 2**56")
    if f.numerator > MAX_BOUND or f.denominator > MAX_BOUND:
        raise PinqError(
            "a discrete Laplace scale needs numerator and denominator at most 2**62; "
            "round it up with round_up_dyadic()"
        )
    return f.numerator, f.denominator


def _discrete_laplace(bits: _Bits, t: int, s: int, m: int) -> np.ndarray:
    return _collect(m, lambda n: _laplace_batch(bits, t, s, n), bits)


def discrete_laplace(
    scale: Fraction | int | float | str,
    size: Shape,
    source: _noise.RandomSource | None = None,
) -> np.ndarray:
    """Exact discrete Laplace samples: ``P(x) = (1-q)/(1+q) · q**|x|``, ``q = exp(-1/scale)``.

    ``scale = t/s`` is a positive rational (a Fraction, an int, or a float read by its decimal
    spelling) with ``t, s <= 2**62`` and ``scale <= 2**56``; the algorithm is Canonne, Kamath &
    Steinke (2020), Algorithm 2 (derivation in ``_laplace_batch``). Adding it to an integer
    answer of sensitivity ``Δ`` with ``scale = Δ/ε`` is ``ε``-DP: the ratio of the probabilities
    of any output under two neighbours is ``exp((|y-k'| - |y-k|)/scale) <= exp(Δ/scale)``.

    >>> from fractions import Fraction
    >>> from pinqpy.noise.source import SeededSource
    >>> x = discrete_laplace(Fraction(1, 2), (2, 3), source=SeededSource(0))
    >>> x.shape, x.dtype
    ((2, 3), dtype('int64'))
    """
    t, s = _laplace_params(scale)
    shape, m = _shape_size(size)
    bits = _bits_for(source)
    with _noise._LOCK:
        return _discrete_laplace(bits, t, s, m).reshape(shape)


def _discrete_laplace_stats(
    scale: Fraction | int, size: int, source: _noise.RandomSource | None = None
) -> tuple[np.ndarray, _Bits]:
    """:func:`discrete_laplace` plus its counters (``rounds`` of rejection, ``words`` drawn)."""
    t, s = _laplace_params(scale)
    bits = _bits_for(source)
    with _noise._LOCK:
        return _discrete_laplace(bits, t, s, int(size)), bits


def _fit_laplace_scale(scale: Fraction) -> Fraction:
    """The smallest-denominator-change rounding up of ``scale`` that the sampler accepts."""
    for bits in range(32, -1, -1):
        f = round_up_dyadic(scale, bits)
        if f.numerator <= MAX_BOUND and f.denominator <= MAX_BOUND:
            _laplace_params(f)
            return f
    raise PinqError("the discrete Laplace scale is too large")  # pragma: no cover
