"""The exact discrete Gaussian sampler (CKS20 Algorithm 3) and the fitting of its variance
(:mod:`pinqpy.noise.samplers`)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from pinqpy.core.exact import to_fraction
from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise
from pinqpy.noise.samplers._bits import (
    _COUNT_CLAMP,
    _I64_MAX,
    _SQRT_I64,
    MAX_BOUND,
    Shape,
    _Bits,
    _bits_for,
    _collect,
    _nz,
    _shape_size,
)
from pinqpy.noise.samplers.bernoulli import _bern_exp_split, _bern_exp_unit
from pinqpy.noise.samplers.laplace import _discrete_laplace
from pinqpy.noise.samplers.rounding import round_up_dyadic


# -- discrete Gaussian -----------------------------------------------------------------------
class _GaussPlan:
    """Integer constants for CKS20 Algorithm 3 with ``σ² = a/b`` and ``t = floor(σ) + 1``.

    The acceptance probability is ``exp(-gamma)`` with ``gamma = (|Y| - σ²/t)² / (2σ²)``.

    * Path "A" (``D = 2·a·b·t² <= 2**62``): with ``w = |Y|·b·t - a``, ``gamma = w²/D``; split
      into ``q = w² // D`` and ``r = w² % D`` for :func:`_bern_exp_split`.
    * Path "B" (larger ``D``, ``σ² >= 1/2``): write ``v = ||Y| - σ²/t| = j + φ/(b·t)`` with ``j``
      an integer and ``0 <= φ < b·t``. Then ``v² = j² + 2jφ/(bt) + (φ/(bt))²`` and, with
      ``1/(2σ²) = b/(2a)``,

          gamma = j²·b/(2a)  +  j·φ/(t·a)  +  (φ/(bt))·(φ/(bt))·(b/(2a)),

      three non-negative terms, so ``exp(-gamma)`` is the product of three independent
      Bernoulli(exp(-term)) -- the first two split as in path A, the third (at most
      ``1/(2σ²) <= 1``) a product of three fractions each at most 1, drawn factor by factor.
      Every denominator is at most ``2**62`` when ``2a``, ``t·a`` and ``b·t`` are.

    The floor ``j`` and the numerator ``φ`` need no big products: with ``a = b·t·c + e``
    (``0 <= e < b·t``) and ``h = |Y| - c``, ``|Y| - σ²/t = h - e/(bt)``; if ``h >= 1`` it is
    positive with ``j = h - 1, φ = bt - e`` (or ``j = h, φ = 0`` when ``e = 0``), and if
    ``h <= 0`` it is ``-(−h + e/(bt))`` with ``j = -h, φ = e``.
    """

    __slots__ = ("a", "b", "bt", "c", "d", "e", "path", "t")

    def __init__(self, sigma2: Fraction, path: str | None = None):
        a, b = sigma2.numerator, sigma2.denominator
        t = math.isqrt(a // b) + 1  # floor(sqrt(x)) = isqrt(floor(x)) for real x >= 0
        d = 2 * a * b * t * t
        self.a, self.b, self.t, self.d, self.bt = a, b, t, d, b * t
        self.c, self.e = divmod(a, b * t)
        b_ok = 2 * a <= MAX_BOUND and t * a <= MAX_BOUND and b * t <= MAX_BOUND and b <= 2 * a
        if path is None:
            path = "A" if d <= MAX_BOUND else "B"
        if (path == "A" and d > MAX_BOUND) or (path == "B" and not b_ok):
            raise PinqError(
                "sigma2 is too large or its denominator too big for the exact discrete Gaussian "
                "sampler; round it up with round_up_dyadic() or use a coarser grid"
            )
        self.path = path


def _gaussian_params(sigma2: Any) -> Fraction:
    f = to_fraction(sigma2, "sigma2")
    if f <= 0:
        raise PinqError("a discrete Gaussian sigma2 must be positive")
    return f


def _divmod_obj(prod: np.ndarray, d: int) -> tuple[np.ndarray, np.ndarray]:
    """``divmod(prod, d)`` for a Python-int object array; quotient clamped at ``2**62``."""
    q = prod // d
    r = prod - q * d
    return np.minimum(q, _COUNT_CLAMP).astype(np.int64), r.astype(np.int64)


def _accept_a(bits: _Bits, plan: _GaussPlan, y: np.ndarray) -> np.ndarray:
    """Path A acceptance: ``Bernoulli(exp(-w²/D))`` with ``w = |Y|·b·t - a``."""
    a, p, d = plan.a, plan.bt, plan.d
    # a**2 < D/2 <= 2**61, so a < _SQRT_I64; for |Y| <= (a + _SQRT_I64) // p then
    # -_SQRT_I64 < -a <= w <= _SQRT_I64 and w² fits in int64.
    big = _nz(y > (a + _SQRT_I64) // p)
    ys = y
    if big.size:
        ys = y.copy()
        ys[big] = 0
    w = ys * p - a
    sq = w * w
    q = sq // d
    r = sq - q * d
    if big.size:
        wb = y[big].astype(object) * p - a
        q[big], r[big] = _divmod_obj(wb * wb, d)
    return _bern_exp_split(bits, q, r, d, y.size)


def _accept_b(bits: _Bits, plan: _GaussPlan, y: np.ndarray) -> np.ndarray:
    """Path B acceptance: three independent factors (see :class:`_GaussPlan`)."""
    a, b, t, bt, c, e = plan.a, plan.b, plan.t, plan.bt, plan.c, plan.e
    m = y.size
    h = y - c
    pos = h >= 1
    j = np.where(pos, h - (1 if e > 0 else 0), -h)
    phi = np.where(pos, bt - e if e > 0 else 0, e).astype(np.int64)
    # gamma1 = j²·b/(2a); gamma2 = j·φ/(t·a). Safe in int64 while j·j·b and j·bt fit.
    big = _nz(j > min(math.isqrt(_I64_MAX // b), _I64_MAX // bt))
    js = j
    if big.size:
        js = j.copy()
        js[big] = 0
    g1 = js * js * b
    q1, r1 = g1 // (2 * a), g1 % (2 * a)
    g2 = js * phi
    q2, r2 = g2 // (t * a), g2 % (t * a)
    if big.size:
        jb = j[big].astype(object)
        q1[big], r1[big] = _divmod_obj(jb * jb * b, 2 * a)
        q2[big], r2[big] = _divmod_obj(jb * phi[big].astype(object), t * a)
    out = np.zeros(m, dtype=bool)
    live = _nz(_bern_exp_split(bits, q1, r1, 2 * a, m))
    live = live[_nz(_bern_exp_split(bits, q2[live], r2[live], t * a, live.size))]
    ph = phi[live]
    ok = _bern_exp_unit(bits, [(ph, bt), (ph, bt), (b, 2 * a)], live.size)
    out[live[_nz(ok)]] = True
    return out


def _gaussian_batch(bits: _Bits, plan: _GaussPlan, attempts: int) -> np.ndarray:
    """One vectorized round of CKS20 Algorithm 3.

    ``Y`` is discrete Laplace of scale ``t`` (``P(Y) ∝ exp(-|Y|/t)``), kept with probability
    ``exp(-(|Y| - σ²/t)²/(2σ²))``. Expanding the square, ``|Y|/t + (|Y| - σ²/t)²/(2σ²) =
    Y²/(2σ²) + σ²/(2t²)``, so a kept ``Y`` has ``P(Y) ∝ exp(-Y²/(2σ²))``: the discrete
    Gaussian (``t = floor(σ) + 1`` keeps the acceptance rate high).
    """
    y = _discrete_laplace(bits, plan.t, 1, attempts)
    ay = np.abs(y)
    keep = _accept_a(bits, plan, ay) if plan.path == "A" else _accept_b(bits, plan, ay)
    return y[_nz(keep)]


def _discrete_gaussian(bits: _Bits, plan: _GaussPlan, m: int) -> np.ndarray:
    return _collect(m, lambda n: _gaussian_batch(bits, plan, n), bits)


def discrete_gaussian(
    sigma2: Fraction | int | float | str,
    size: Shape,
    source: _noise.RandomSource | None = None,
) -> np.ndarray:
    """Exact discrete Gaussian samples: ``P(x) ∝ exp(-x²/(2·sigma2))`` on the integers.

    ``sigma2 = σ² = a/b`` is a positive rational; Canonne, Kamath & Steinke (2020), Algorithm 3
    (derivation in ``_gaussian_batch``), with ``t = floor(σ) + 1 = isqrt(a // b) + 1`` computed
    exactly. The acceptance test uses exact rationals (see ``_GaussPlan``). **Limits:** either
    ``2·a·b·t² <= 2**62`` (roughly ``σ <= 2**15`` for integer ``σ²``), or ``σ² >= 1/2`` with
    ``t·a``, ``b·t`` and ``2a`` at most ``2**62`` (roughly ``σ <= 2**20.6`` for integer
    ``σ²``); otherwise :class:`~pinqpy.errors.PinqError`.

    >>> from pinqpy.noise.source import SeededSource
    >>> x = discrete_gaussian(10, 4000, source=SeededSource(0))
    >>> x.dtype, abs(float(x.var()) - 10) < 1.5
    (dtype('int64'), True)
    """
    plan = _GaussPlan(_gaussian_params(sigma2))
    shape, m = _shape_size(size)
    bits = _bits_for(source)
    with _noise._LOCK:
        return _discrete_gaussian(bits, plan, m).reshape(shape)


def _discrete_gaussian_stats(
    sigma2: Fraction | int,
    size: int,
    source: _noise.RandomSource | None = None,
    path: str | None = None,
) -> tuple[np.ndarray, _Bits]:
    """:func:`discrete_gaussian` plus counters; ``path`` forces "A" or "B" (tests)."""
    plan = _GaussPlan(_gaussian_params(sigma2), path)
    bits = _bits_for(source)
    with _noise._LOCK:
        return _discrete_gaussian(bits, plan, int(size)), bits


def _fit_sigma2(sigma2: Fraction) -> Fraction:
    """``sigma2`` rounded up (finest dyadic denominator first) until the sampler accepts it."""
    for bits in range(32, -1, -1):
        f = round_up_dyadic(sigma2, bits)
        try:
            _GaussPlan(f)
        except PinqError:
            continue
        return f
    raise PinqError(
        "sigma is too large in grid units for the exact discrete Gaussian (a lattice release "
        "supports sigma up to about 2**17 times the sensitivity)"
    )
