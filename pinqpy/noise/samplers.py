"""Exact noise samplers from random bits (real numbers are released on a public lattice by
:mod:`pinqpy.noise.lattice_release`, with these samplers' integer noise).

API (every sampler draws from a :class:`~pinqpy.noise.source.RandomSource`, by default
:func:`~pinqpy.noise.source.current_source`, and is vectorized over all the samples it is asked
for):

* ``uniform_below(n, size=None, source=None) -> int64 array`` -- uniform integers in ``[0, n)``,
  ``1 <= n <= 2**62``; ``n`` an int or an int64 array of per-sample bounds.
* ``bernoulli_exp(num, den, size=None, source=None) -> bool array`` -- Bernoulli(exp(-num/den))
  for non-negative rationals (ints or int64 arrays; ``den <= 2**62``).
* ``discrete_laplace(scale, size, source=None) -> int64 array`` -- ``P(x) ∝ exp(-|x|/scale)``
  on the integers, ``scale`` a positive rational.
* ``discrete_gaussian(sigma2, size, source=None) -> int64 array`` -- ``P(x) ∝ exp(-x²/(2σ²))``
  on the integers, ``sigma2 = σ²`` a positive rational.
* ``round_up_dyadic(x, bits=32) -> Fraction`` -- ``x`` itself if its denominator is at most
  ``2**bits``, else the least multiple of ``2**-bits`` above it (rounding a noise scale *up*
  only adds privacy).

Why
---
A textbook Laplace sampler computes ``scale * log(u)`` in floating point. The set of doubles it
can return around ``x + noise`` depends on ``x``: Mironov ("On significance of the least
significant bits for differential privacy", CCS 2012) showed that the low-order bits of such an
output can reveal the true answer exactly. Here

* integer answers get exact discrete noise: every acceptance probability is ``exp(-r)`` for an
  exact rational ``r``, realised by Bernoulli trials on uniform random integers, following
  Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy", NeurIPS 2020
  ("CKS20"); no floating-point ``exp``, ``log`` or ``sqrt`` appears on a sampling path, only
  integer arithmetic (numpy ``int64``/``uint64``, and Python ``int`` for rare overflowing
  cases);
* real answers get the same exact integer noise on a public lattice
  (:mod:`pinqpy.noise.lattice_release`).

Vectorization
-------------
Each sampler handles all requested samples at once with numpy arrays and masks. The only
Python loops run over *rounds* of rejection: each round processes every still-active sample,
and the number of active samples falls geometrically, so a million samples take a few hundred
vectorized rounds in all (counting every nested loop), not a million steps. Outer rejection
loops ("attempt ``M`` candidates, keep the accepted ones in order") take the first ``m``
accepted candidates of an i.i.d. sequence of attempts, which are ``m`` i.i.d. draws from the
target; the batch sizes adapt to the acceptance rate seen so far, which changes how many
attempts are made at once but not their distribution.

Randomness comes from ``source.bytes(n)``, cut into chunks of the few bits each trial needs
(see ``_Bits``). Calls hold the lock of :mod:`pinqpy.noise.source`, so a seeded test source is used
by one sampler at a time and stays reproducible. The samplers are plain distributions and
ignore :func:`pinqpy.testing.no_noise` (the lattice releases honour it).

>>> from fractions import Fraction
>>> from pinqpy.noise.source import SeededSource
>>> x = discrete_laplace(Fraction(10, 3), 1000, source=SeededSource(0))
>>> x.dtype, x.shape
(dtype('int64'), (1000,))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from pinqpy.core.exact import to_fraction
from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise

__all__ = [
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_laplace",
    "round_up_dyadic",
    "uniform_below",
]

Shape = int | tuple[int, ...]
IntOrArray = int | np.ndarray

#: Largest bound for :func:`uniform_below` and largest denominator anywhere: ``2**62``. Keeping
#: bounds at most ``2**62`` leaves every comparison and sum of two bounds inside ``int64``.
MAX_BOUND = 1 << 62
_I64_MAX = (1 << 63) - 1
_SQRT_I64 = math.isqrt(_I64_MAX)  # 3037000499: the largest x with x*x in int64
#: Largest discrete-Laplace scale: outputs are ``int64``; with ``scale <= 2**56`` an output
#: beyond ``2**63`` needs a ``Exp(1)`` variable above 128, probability below ``e**-127``.
MAX_SCALE = Fraction(1 << 56)
# Samples whose pending count of Bernoulli(exp(-1)) trials exceeds this are clamped to it. A
# clamped count could only matter after 2**62 rounds of the trial loop, which no terminating
# run reaches (every round each surviving sample fails with probability 1 - 1/e), so the
# clamp never changes an output of a run that finishes.
_COUNT_CLAMP = 1 << 62


# -- random bits -----------------------------------------------------------------------------
class _Bits:
    """Uniform ``width``-bit chunks cut from a :class:`~pinqpy.noise.source.RandomSource`'s bytes.

    Independent uniform bytes give independent uniform bits, so any disjoint groups of bits are
    independent uniform integers. A chunk of ``width`` bits occupies the low bits of its own
    1-, 2-, 4- or 8-byte unsigned integer (the rest of that integer is discarded), except that
    chunks of at most 4 bits are packed ``8 // width`` to a byte. Byte-aligned chunks cost a few
    spare random bits but no shifting: reading bytes from the operating system's CSPRNG and
    unpacking them are the slowest steps of a sampler, and most trials here need 1 to 8 bits.
    ``words`` counts bytes drawn / 8 and ``rounds`` counts rejection-loop rounds (debug aids
    for tests and benchmarks).
    """

    __slots__ = ("nbytes", "rounds", "source")

    def __init__(self, source: _noise.RandomSource):
        self.source = source
        self.nbytes = 0
        self.rounds = 0

    @property
    def words(self) -> float:
        """Random 64-bit words drawn so far."""
        return self.nbytes / 8

    def _raw(self, nbytes: int) -> np.ndarray:
        self.nbytes += nbytes
        return np.frombuffer(self.source.bytes(nbytes), dtype=np.uint8)

    def chunks(self, count: int, width: int) -> np.ndarray:
        """``count`` independent uniform integers in ``[0, 2**width)``, ``1 <= width <= 64``.

        The dtype is the narrowest unsigned type holding ``width`` bits.
        """
        if width <= 4:
            per = 8 // width
            raw = self._raw(-(-count // per))
            if width == 1:
                return np.unpackbits(raw)[:count]
            out = np.empty(raw.size * per, dtype=np.uint8)
            mask = np.uint8((1 << width) - 1)
            for i in range(per):  # a fixed number of bit positions, not samples
                np.bitwise_and(raw >> np.uint8(i * width), mask, out=out[i::per])
            return out[:count]
        dtype = np.uint8 if width <= 8 else np.uint16 if width <= 16 else np.uint32
        if width > 32:
            dtype = np.uint64
        size = np.dtype(dtype).itemsize
        vals = self._raw(count * size).view(dtype)
        if width == 8 * size:
            return vals
        return vals & dtype((1 << width) - 1)


def _bits_for(source: _noise.RandomSource | None) -> _Bits:
    src = _noise.current_source() if source is None else source
    if not isinstance(src, _noise.RandomSource):
        raise TypeError("source must be a pinqpy.noise.source.RandomSource")
    return _Bits(src)


def _shape_size(size: Shape) -> tuple[tuple[int, ...], int]:
    shape = (int(size),) if isinstance(size, int | np.integer) else tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise PinqError("a sample size cannot be negative")
    return shape, math.prod(shape)


def _sub(x: IntOrArray, idx: np.ndarray) -> IntOrArray:
    """``x[idx]`` for a per-sample array, ``x`` itself for a scalar shared by all samples."""
    return x[idx] if isinstance(x, np.ndarray) else x


# Speed note: with random masks, ``a[mask]`` and ``np.where(mask, b, c)`` are several times
# slower than ``a[np.flatnonzero(mask)]`` and integer arithmetic, so the hot paths use indices.
_nz = np.flatnonzero


# -- uniform integers ------------------------------------------------------------------------
def _smear(x: np.ndarray) -> np.ndarray:
    """Set every bit below the highest set bit: ``2**bit_length(x) - 1`` per entry (uint64)."""
    for s in (1, 2, 4, 8, 16, 32):
        x = x | (x >> np.uint64(s))
    return x


def _below_scalar(bits: _Bits, n: int, m: int) -> np.ndarray:
    """``m`` uniform integers in ``[0, n)`` for one bound ``n`` (``1 <= n <= 2**62``).

    With ``w = bit_length(n - 1)``, a uniform ``w``-bit chunk lies in ``[0, n)`` with
    probability ``n / 2**w > 1/2`` and is then uniform there (every accepted value has the same
    probability ``2**-w``). Candidates are i.i.d., so the accepted ones, in order, are i.i.d.
    uniform on ``[0, n)``; we draw the expected number needed plus a margin and keep the first
    ``m`` (another round only if the margin fell short).
    """
    if m == 0 or n == 1:
        return np.zeros(m, dtype=np.int64)
    width = (n - 1).bit_length()
    if n == 1 << width:
        return bits.chunks(m, width).astype(np.int64)
    out = np.empty(m, dtype=np.int64)
    filled = 0
    while filled < m:
        bits.rounds += 1
        need = m - filled
        draw = (need << width) // n + 3 * math.isqrt(need) + 8
        cand = bits.chunks(draw, width)
        cand = cand[_nz(cand < n)]  # n < 2**width fits the chunks' dtype
        take = min(need, cand.size)
        out[filled : filled + take] = cand[:take]
        filled += take
    return out


def _below_array(bits: _Bits, n: np.ndarray, m: int) -> np.ndarray:
    """Uniform integers in ``[0, n[i])`` for per-sample bounds ``n`` (int64, ``1..2**62``).

    Each sample masks a random chunk to ``2**bit_length(n[i] - 1) - 1`` and rejects values
    ``>= n[i]`` (acceptance above 1/2 each round); rejected samples retry in the next round.
    """
    nu = n.astype(np.uint64)
    mask = _smear(nu - np.uint64(1))
    out = np.zeros(m, dtype=np.int64)
    pending = np.flatnonzero(nu > 1)
    while pending.size:
        bits.rounds += 1
        sub_mask = mask[pending]
        width = int(sub_mask.max()).bit_length()
        cand = bits.chunks(pending.size, width).astype(np.uint64) & sub_mask
        ok = cand < nu[pending]
        sel = _nz(ok)
        out[pending[sel]] = cand[sel]
        pending = pending[_nz(~ok)]
    return out


def _bern_below(bits: _Bits, num: IntOrArray, n: int, m: int) -> np.ndarray:
    """Bernoulli(num/n) as ``[uniform_below(n) < num]``, for one bound ``n`` (``num <= n``).

    The same rejection as :func:`_below_scalar`, decided per sample: a ``w``-bit chunk ``c``
    below ``n`` is a uniform value on ``[0, n)`` and the answer is ``[c < num]``; a chunk
    ``>= n`` is redrawn. Only the comparison is kept, which saves materializing the values.
    """
    if m == 0 or n == 1:
        return np.less(0, num) if isinstance(num, np.ndarray) else np.full(m, num > 0)
    width = (n - 1).bit_length()
    c = bits.chunks(m, width)
    out = c < num
    redo = _nz(c >= n) if n < 1 << width else np.zeros(0, dtype=np.intp)
    while redo.size:
        bits.rounds += 1
        c = bits.chunks(redo.size, width)
        out[redo] = c < _sub(num, redo)
        redo = redo[_nz(c >= n)]
    return out


def _below(bits: _Bits, n: IntOrArray, m: int) -> np.ndarray:
    if isinstance(n, np.ndarray):
        return _below_array(bits, n, m)
    return _below_scalar(bits, int(n), m)


def _as_int_param(x: Any, what: str) -> IntOrArray:
    """An int, or an int64 array, from a user-supplied integer parameter."""
    if isinstance(x, bool | np.bool_):
        raise PinqError(f"{what} must be an integer, not a bool")
    if isinstance(x, int | np.integer):
        return int(x)
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise PinqError(f"{what} must be an integer or an integer array")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > _I64_MAX:
        raise PinqError(f"{what} does not fit in int64")
    return arr.astype(np.int64)


def _broadcast(x: IntOrArray, shape: tuple[int, ...]) -> IntOrArray:
    if isinstance(x, np.ndarray):
        try:
            return np.broadcast_to(x, shape).reshape(-1)
        except ValueError:
            raise PinqError("a parameter array does not match the sample size") from None
    return x


def _param_shape(size: Shape | None, *params: IntOrArray) -> tuple[int, ...]:
    if size is not None:
        return _shape_size(size)[0]
    arrays = [p for p in params if isinstance(p, np.ndarray)]
    if not arrays:
        raise PinqError("give a size, or array parameters whose shape is the size")
    return np.broadcast_shapes(*(a.shape for a in arrays))


def _check_range(x: IntOrArray, lo: int, hi: int, message: str) -> None:
    if isinstance(x, np.ndarray):
        if x.size and (int(x.min()) < lo or int(x.max()) > hi):
            raise PinqError(message)
    elif not lo <= x <= hi:
        raise PinqError(message)


def uniform_below(
    n: int | np.ndarray,
    size: Shape | None = None,
    source: _noise.RandomSource | None = None,
) -> np.ndarray:
    """Unbiased uniform integers in ``[0, n)``, dtype ``int64``.

    ``n`` is an int or an integer array of per-sample bounds (then ``size`` defaults to its
    shape), with ``1 <= n <= 2**62``. Each sample takes ``w`` uniform random bits, i.e. a random
    word masked to the next power of two ``2**w >= n``, and is redrawn while it is ``>= n``: the
    accepted value is uniform because every value in ``[0, n)`` has the same chance ``2**-w``
    per draw, and a draw is accepted with probability ``n / 2**w > 1/2``. (The ``w`` bits come
    from the low bits of a 1-, 2-, 4- or 8-byte word, or several to a byte when ``w <= 4``.)

    >>> from pinqpy.noise.source import SeededSource
    >>> x = uniform_below(10, 1000, source=SeededSource(0))
    >>> int(x.min()), int(x.max())
    (0, 9)
    >>> import numpy as np
    >>> y = uniform_below(np.array([1, 2, 3, 2**62]), source=SeededSource(0))
    >>> bool((y < [1, 2, 3, 2**62]).all()), int(y[0])
    (True, 0)
    """
    nn = _as_int_param(n, "n")
    _check_range(nn, 1, MAX_BOUND, "uniform_below needs 1 <= n <= 2**62")
    shape = _param_shape(size, nn)
    m = math.prod(shape)
    nn = _broadcast(nn, shape)
    bits = _bits_for(source)
    with _noise._LOCK:
        return _below(bits, nn, m).reshape(shape)


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
    """
    v = np.zeros(m, dtype=np.int64)
    idx = np.arange(m)
    while idx.size:
        bits.rounds += 1
        idx = idx[_nz(_bern_exp1(bits, idx.size))]
        v[idx] += 1
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


# -- discrete Laplace ------------------------------------------------------------------------
def _collect(m: int, batch: Callable[[int], np.ndarray], bits: _Bits) -> np.ndarray:
    """The first ``m`` accepted outputs of i.i.d. attempts, made in batches.

    ``batch(M)`` makes ``M`` attempts and returns the accepted outputs in order. A small pilot
    batch measures the acceptance rate; later batches aim at what is still needed (integer
    arithmetic: ``need · tried / accepted`` plus a margin).
    """
    parts: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    got = tried = accepted = 0
    while got < m:
        bits.rounds += 1
        need = m - got
        if tried == 0:
            attempts = min(need, 1024) + 16
        elif accepted == 0:
            attempts = 2 * tried
        else:
            attempts = need * tried // accepted + 4 * math.isqrt(need) + 16
            attempts = min(attempts, 64 * need + 1024)
        vals = batch(attempts)
        tried += attempts
        accepted += vals.size
        take = vals[:need]
        parts.append(take)
        got += take.size
    return parts[-1] if len(parts) == 2 else np.concatenate(parts)


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


# -- rounding parameters up ------------------------------------------------------------------
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


def _fit_laplace_scale(scale: Fraction) -> Fraction:
    """The smallest-denominator-change rounding up of ``scale`` that the sampler accepts."""
    for bits in range(32, -1, -1):
        f = round_up_dyadic(scale, bits)
        if f.numerator <= MAX_BOUND and f.denominator <= MAX_BOUND:
            _laplace_params(f)
            return f
    raise PinqError("the discrete Laplace scale is too large")  # pragma: no cover


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
