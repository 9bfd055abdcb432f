"""Exact selection by permute-and-flip, the coins the quantile and the argmax release with."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from pinqpy.noise import source as _noise
from pinqpy.noise.samplers import bernoulli_exp, uniform_below

__all__ = ["PF_MAX_EPSILON"]

# -- exact selection: permute-and-flip ------------------------------------------------------
#: Selection exponents are clipped at this many nats (argmax: at least ``epsilon`` more): a
#: candidate that far below the best is flipped with probability ``e^-64`` instead of less.
#: The clip keeps every exponent a bounded rational and, as shown in
#: :func:`_permute_and_flip`, costs no privacy; it could only matter to the utility bounds
#: beyond ``ln(m/(1-level)) > 64``, which no float ``level < 1`` and candidate count reach.
PF_CLIP = 64
# Denominators of the exact coin exponents stay at most 2**56, so that a clipped numerator
# (at most (PF_CLIP + 1)·den) is below 2**63 as bernoulli_exp needs.
_PF_MAX_DEN_BITS = 56


#: The largest epsilon a selection (quantile, argmax) spends on its coins: ``2**32``. A query
#: may be charged more, but its coins use ``min(epsilon, 2**32)``: a mechanism that is
#: ``ε'``-DP is ``ε``-DP for every ``ε >= ε'``, so this only ever adds privacy. It keeps the
#: exact coins' integers inside ``int64`` (an epsilon of 1e20 has a numerator beyond
#: ``2**63``), and costs nothing useful: at ``2**32`` a candidate one row (argmax) or
#: ``2**-24`` of a row (quantile) below the best is flipped with probability below
#: ``e**-64``.
PF_MAX_EPSILON = Fraction(2**32)


def _pf_epsilon(x: Fraction, den_bits: int, extra: int) -> Fraction:
    """``min(x, PF_MAX_EPSILON)`` rounded *down* to a denominator the exact coins can use.

    The denominator is at most ``2**den_bits`` and also small enough that
    ``den·(extra + 2·ceil(eps) + 1) < 2**63``: callers clip ``numerator·gap`` at
    ``(extra + ceil(eps))·den`` and add the numerator, so every intermediate fits ``int64``.
    """
    e = min(x, PF_MAX_EPSILON)
    room = ((1 << 63) // (extra + 2 * math.ceil(e) + 1)).bit_length() - 1
    return _dyadic_down(e, max(0, min(den_bits, room)))


def _dyadic_down(x: Fraction, bits: int) -> Fraction:
    """``x`` if its denominator is at most ``2**bits``, else ``floor(x·2**bits)/2**bits``."""
    if x.denominator <= 1 << bits:
        return x
    return Fraction((x.numerator << bits) // x.denominator, 1 << bits)


def _permute_and_flip(gaps: np.ndarray, mult: int, den: int, clip: int) -> np.ndarray:
    """Exact permute-and-flip over each row of ``gaps`` (non-negative integer score gaps).

    **The mechanism** (McKenna & Sheldon, "Permute-and-Flip: A new mechanism for
    differentially private selection", NeurIPS 2020): visit the candidates in a uniformly
    random order and flip, for candidate ``i``, a coin of heads-probability
    ``p_i = exp(-γ_i)``; output the first candidate that comes up heads. Here
    ``γ_i = min(clip, mult·gap_i/den)`` is an exact rational and the best candidate has
    ``gap = 0``, ``p = 1``, so some coin always comes up heads. The coins are drawn by
    :func:`pinqpy.noise.samplers.bernoulli_exp` (CKS20's exact ``Bernoulli(exp(-γ))``) and the
    order by :func:`~pinqpy.noise.samplers.uniform_below`: no floating point on the sampling path.

    **Vectorized form, and why it is the same law.** Draw *every* coin ``C_i`` at once (all
    candidates of all keys), count the heads ``H = {i : C_i = 1}`` per key, and output a
    uniformly random element of ``H``. Proof: the coins are independent of the order ``π``,
    and the sequential mechanism outputs the first element of ``H`` in the order ``π`` -- the
    coins it does not reach do not change its output, so drawing them too changes nothing.
    Given ``H`` (non-empty), the relative order of ``H``'s elements under a uniformly random
    ``π`` is a uniformly random ordering of ``H``, so its first element is uniform on ``H``.
    Hence ``P(output = r) = p_r·E[1/(1 + K_r)]`` with ``K_r`` the number of heads among the
    other candidates, ``= p_r·∫_0^1 Π_{i≠r} (1 - p_i·u) du`` (since
    ``E[t^K] = Π(1 - p_i + p_i·t)`` and ``∫_0^1 t^K dt = 1/(1+K)``; ``u = 1 - t``).

    **Clipping costs no privacy.** ``γ_i = min(clip, c·(q* - q_i))`` is the unclipped exponent
    of the quality ``q'_i = max(q_i, q* - clip/c)``, whose maximum is ``q*`` again; a maximum
    of two functions that each move by at most ``Δ`` between neighbours moves by at most
    ``Δ``, so ``q'`` has the sensitivity of ``q`` (and the monotone argument of
    :class:`ArgmaxMechanism` allows for it explicitly).

    Inside :func:`pinqpy.testing.no_noise` the output is the lowest index with gap 0.
    """
    if gaps.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    if _noise.noise_disabled():
        return np.argmax(gaps == 0, axis=1).astype(np.int64)
    cap = clip * den  # <= 2**62
    # mult·gap, clipped at cap, without overflow: gaps above cap // mult are clipped anyway.
    g = np.minimum(gaps, cap // mult + 1).astype(np.int64)
    num = np.minimum(g * mult, cap)  # g·mult <= (cap/mult + 1)·mult <= cap + mult < 2**63
    coins = bernoulli_exp(num, den)
    heads = coins.sum(axis=1)
    pick = uniform_below(heads.astype(np.int64))
    return np.argmax(np.cumsum(coins, axis=1) > pick[:, None], axis=1).astype(np.int64)


def _pf_law(gamma: np.ndarray) -> np.ndarray:
    """The exact permute-and-flip law for exponents ``gamma`` (shape ``(n_keys, m)``): for tests.

    ``P(r) = p_r·∫_0^1 Π_{i≠r} (1 - p_i u) du`` (see :func:`_permute_and_flip`), the
    integrand a polynomial of degree ``m - 1`` integrated exactly (to rounding) by
    Gauss-Legendre with ``m//2 + 1`` nodes; products in log space. ``O(m²)`` work per key.
    """
    k, m = gamma.shape
    x, w = np.polynomial.legendre.leggauss(m // 2 + 1)
    u, w = (x + 1.0) / 2.0, w / 2.0
    out = np.empty((k, m))
    for row in range(k):
        p = np.exp(-gamma[row])
        logs = np.log1p(-p[:, None] * u[None, :])  # (m, nodes); u < 1 keeps 1 - p·u > 0
        others = np.exp(logs.sum(axis=0)[None, :] - logs)
        out[row] = p * (others @ w)
    return out
