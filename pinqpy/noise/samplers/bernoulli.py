"""Exact ``Bernoulli(exp(-gamma))`` for rational ``gamma`` (CKS20 Algorithms 1 and 2), on
chunks of random bits (:mod:`pinqpy.noise.samplers`)."""

from __future__ import annotations

import math

import numpy as np

from pinqpy.noise import source as _noise
from pinqpy.noise.samplers._bits import (
    _AHEAD,
    _AHEAD_MAX,
    _I64_MAX,
    MAX_BOUND,
    IntOrArray,
    Shape,
    _as_int_param,
    _below_array,
    _below_scalar,
    _bern_below,
    _Bits,
    _bits_for,
    _broadcast,
    _check_range,
    _nz,
    _param_shape,
    _sub,
)

# -- Bernoulli(exp(-gamma)) ------------------------------------------------------------------
# Bernoulli(exp(-1)) by CKS20 Algorithm 1 with gamma = 1, its first five trials inverted from
# one uniform integer. Algorithm 1 draws A_k ~ Bernoulli(gamma/k) for k = 1, 2, ... until the
# first failure, at K, and returns [K odd]. With gamma = 1, P(K > k) = P(A_1..A_k all succeed)
# = 1/k!. For u uniform on [0, 120) = [0, 5!): P(u < 120/k!) = 1/k! exactly for k <= 5, and the
# events {u < 120/k!} are nested as the events {K > k} are, so K = 1 + #{k <= 5 : u < 120/k!}
# has the law of K whenever that count is below 5. The count is 5 only for u = 0 (probability
# 1/5! = P(K > 5)); those samples continue with fresh trials Bernoulli(1/k), k = 6, 7, ...
# A 7-bit chunk lands in [0, 120) with probability 15/16.
_E1_COUNT = np.array(
    [sum(1 for k in range(1, 6) if u < 120 // math.factorial(k)) for u in range(120)]
)
_E1_RESULT = (1 + _E1_COUNT) % 2 == 1  # [K odd] with K = 1 + count


def _bern_exp1(bits: _Bits, m: int) -> np.ndarray:
    """``m`` exact Bernoulli(exp(-1)) samples (CKS20 Algorithm 1, ``gamma = 1``; see above)."""
    u = _below_scalar(bits, 120, m)
    out = _E1_RESULT[u]
    idx = np.flatnonzero(u == 0)  # K > 5: keep drawing Bernoulli(1/k) from k = 6
    k = 6
    while idx.size:
        bits.rounds += 1
        fail = _below_scalar(bits, k, idx.size) != 0
        out[idx[_nz(fail)]] = k % 2 == 1
        idx = idx[_nz(~fail)]
        k += 1
    return out


def _geometric_exp1(bits: _Bits, m: int) -> np.ndarray:
    """The number ``V`` of successes before the first failure of Bernoulli(exp(-1)) trials.

    ``P(V >= v) = exp(-v)``: the geometric law used by CKS20 Algorithm 2. Each round runs one
    trial for every sample that has not failed yet; a fraction ``1 - 1/e`` stops each round.
    Once at most ``_AHEAD_MAX`` samples are left, a round runs their next ``_AHEAD`` trials
    at once, and a sample's ``V`` grows by its successes before its first failure among them
    (all ``_AHEAD`` if none failed, and it goes on). Trials past the first failure are
    discarded unseen, so this is the law of running them one at a time.
    """
    v = np.zeros(m, dtype=np.int64)
    idx = np.arange(m)
    while idx.size > _AHEAD_MAX:
        bits.rounds += 1
        idx = idx[_nz(_bern_exp1(bits, idx.size))]
        v[idx] += 1
    while idx.size:
        bits.rounds += 1
        fails = ~_bern_exp1(bits, idx.size * _AHEAD).reshape(idx.size, _AHEAD)
        first = np.where(fails.any(axis=1), fails.argmax(axis=1), _AHEAD)
        v[idx] += first
        idx = idx[_nz(first == _AHEAD)]
    return v


Factor = tuple[IntOrArray, IntOrArray]


def _trial(bits: _Bits, factors: list[Factor], k: int, m: int) -> np.ndarray:
    """Bernoulli(gamma/k) with ``gamma = prod(num/den)`` over ``factors`` (each at most 1).

    One factor ``num/den`` with ``den·k <= 2**62``: ``[uniform_below(den·k) < num]``, since
    ``num`` of the ``den·k`` equally likely values fall below ``num``. Otherwise the product of
    probabilities is the conjunction of independent Bernoullis, ``Bernoulli(1/k)`` and one
    ``Bernoulli(num/den)`` per factor, evaluated in turn on the samples still succeeding.
    """
    if len(factors) == 1:
        num, den = factors[0]
        if isinstance(den, np.ndarray):
            if den.size and int(den.max()) <= MAX_BOUND // k:
                return _below_array(bits, den * k, m) < num
        elif den <= MAX_BOUND // k:
            return _bern_below(bits, num, den * k, m)
    succ = np.ones(m, dtype=bool)
    live = np.arange(m)
    terms: list[Factor] = ([(1, k)] if k > 1 else []) + factors
    for num, den in terms:
        if isinstance(den, np.ndarray):
            ok = _below_array(bits, den[live], live.size) < _sub(num, live)
        else:
            ok = _bern_below(bits, _sub(num, live), den, live.size)
        succ[live[_nz(~ok)]] = False
        live = live[_nz(ok)]
    return succ


def _bern_exp_unit(bits: _Bits, factors: list[Factor], m: int) -> np.ndarray:
    """Exact Bernoulli(exp(-gamma)) for ``gamma = prod(num/den) in [0, 1]`` (CKS20 Alg. 1).

    Draw ``A_k ~ Bernoulli(gamma/k)`` for ``k = 1, 2, ...`` until the first failure, at ``K``;
    return ``[K odd]``. Then ``P(K > k) = gamma**k / k!`` and

        P(K odd) = sum over odd k of (P(K > k-1) - P(K > k))
                 = 1 - gamma + gamma**2/2! - gamma**3/3! + ... = exp(-gamma).

    All active samples share ``k`` in a round, so one round is one vectorized trial. Samples
    with ``gamma = 0`` fail their first trial surely and return 1 without drawing.
    """
    out = np.ones(m, dtype=bool)
    nonzero = np.ones(m, dtype=bool)
    for num, _ in factors:
        if isinstance(num, np.ndarray):
            nonzero &= num > 0
        elif num == 0:
            nonzero[:] = False
    idx = np.flatnonzero(nonzero)
    fs = [(_sub(n, idx), _sub(d, idx)) for n, d in factors]
    k = 1
    while idx.size:
        bits.rounds += 1
        succ = _trial(bits, fs, k, idx.size)
        if k % 2 == 0:  # the samples failing now stop at an even K
            out[idx[_nz(~succ)]] = False
        sel = _nz(succ)
        idx = idx[sel]
        fs = [(_sub(n, sel), _sub(d, sel)) for n, d in fs]
        k += 1
    return out


def _bern_exp_split(
    bits: _Bits, q: IntOrArray, r: IntOrArray, den: IntOrArray, m: int
) -> np.ndarray:
    """Exact Bernoulli(exp(-(q + r/den))) for integers ``q >= 0``, ``0 <= r < den <= 2**62``.

    CKS20 Algorithm 1 for ``gamma > 1``: ``exp(-gamma) = exp(-1)**q · exp(-r/den)``, so the
    result is the conjunction of ``q`` independent Bernoulli(exp(-1)) trials and one
    Bernoulli(exp(-r/den)). The ``exp(-1)`` trials stop at a sample's first failure, so the
    number of rounds is about ``ln(m)`` however large ``q`` is.
    """
    out = _bern_exp_unit(bits, [(r, den)], m)
    if not isinstance(q, np.ndarray):
        if q == 0:
            return out
        q = np.full(m, q, dtype=np.int64)
    idx = np.flatnonzero(out & (q > 0))
    rem = q[idx]
    while idx.size:
        bits.rounds += 1
        ok = _bern_exp1(bits, idx.size)
        out[idx[_nz(~ok)]] = False
        keep = _nz(ok & (rem > 1))
        idx = idx[keep]
        rem = rem[keep] - 1
    return out


def bernoulli_exp(
    num: int | np.ndarray,
    den: int | np.ndarray,
    size: Shape | None = None,
    source: _noise.RandomSource | None = None,
) -> np.ndarray:
    """Exact Bernoulli(exp(-num/den)) samples, dtype ``bool``.

    ``num`` and ``den`` are ints or integer arrays (per-sample rationals, broadcast to
    ``size``), ``0 <= num < 2**63`` and ``1 <= den <= 2**62``. Canonne, Kamath & Steinke (2020),
    Algorithm 1: write ``gamma = q + r/den`` (``q = num // den``); ``exp(-r/den)`` comes from
    trials ``Bernoulli(r/(den·k))`` (see ``_bern_exp_unit``) and ``exp(-q)`` from ``q``
    independent Bernoulli(exp(-1)) trials that must all succeed.

    **Limits.** A trial ``Bernoulli(r/(den·k))`` is ``[uniform_below(den·k) < r]`` while
    ``den·k <= 2**62``; beyond, it is drawn as ``Bernoulli(r/den)`` and ``Bernoulli(1/k)``
    jointly (the same law), so ``k`` is unbounded and only ``den <= 2**62`` is required. A
    larger rational raises :class:`~pinqpy.errors.PinqError`; :func:`round_up_dyadic` bounds a
    denominator (rounding ``num/den`` *up*, which only lowers ``exp(-num/den)``).

    >>> from pinqpy.noise.source import SeededSource
    >>> b = bernoulli_exp(0, 1, 5, source=SeededSource(0))
    >>> b.tolist()
    [True, True, True, True, True]
    >>> x = bernoulli_exp(1, 1, 20000, source=SeededSource(3))
    >>> abs(float(x.mean()) - 0.36788) < 0.02
    True
    """
    nn = _as_int_param(num, "num")
    dd = _as_int_param(den, "den")
    _check_range(nn, 0, _I64_MAX, "bernoulli_exp needs 0 <= num < 2**63")
    _check_range(dd, 1, MAX_BOUND, "bernoulli_exp needs 1 <= den <= 2**62")
    shape = _param_shape(size, nn, dd)
    m = math.prod(shape)
    nn, dd = _broadcast(nn, shape), _broadcast(dd, shape)
    q, r = nn // dd, nn % dd
    bits = _bits_for(source)
    with _noise._LOCK:
        return _bern_exp_split(bits, q, r, dd, m).reshape(shape)
