"""Random bits cut into chunks, uniform integers below a bound, and the shared helpers of
the exact samplers (:mod:`pinqpy.noise.samplers`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise

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
# Candidates drawn per sample and round where a loop redraws until a test passes, when at
# most _AHEAD_MAX samples are still looping: with a rejection rate at most 1/2 a sample needs
# another round with probability at most 2**-4. Small batches pay per round (dozens of numpy
# calls), large ones per random bit, so only small ones look ahead.
_AHEAD = 4
_AHEAD_MAX = 1024


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
        if redo.size > _AHEAD_MAX:
            c = bits.chunks(redo.size, width)
            out[redo] = c < _sub(num, redo)
            redo = redo[_nz(c >= n)]
            continue
        # Each redrawn sample of a small batch gets _AHEAD candidates at once and keeps the
        # first below n: the same law as redrawing one at a time (candidates are i.i.d.; the
        # unused ones are discarded unseen), in about one round instead of log2(m).
        c = bits.chunks(redo.size * _AHEAD, width).reshape(redo.size, _AHEAD)
        valid = c < n
        rows = np.arange(redo.size)
        first = valid.argmax(axis=1)  # the first valid candidate (0 where none is)
        found = valid[rows, first]
        got = _nz(found)
        out[redo[got]] = c[got, first[got]] < _sub(num, redo[got])
        redo = redo[_nz(~found)]
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


# -- rejection in batches --------------------------------------------------------------------
def _collect(m: int, batch: Callable[[int], np.ndarray], bits: _Bits) -> np.ndarray:
    """The first ``m`` accepted outputs of i.i.d. attempts, made in batches.

    ``batch(M)`` makes ``M`` attempts and returns the accepted outputs in order. A pilot
    batch measures the acceptance rate; later batches aim at what is still needed (integer
    arithmetic: ``need · tried / accepted`` plus a margin). For a small ``m`` (a partition's
    few keys) the pilot makes ``2·m + 16`` attempts: the samplers here accept more than half
    of theirs at the scales of counts and sums, so one round almost always suffices, and a
    round's fixed cost (dozens of small numpy calls) is what a small batch pays, not its
    size. How many attempts are made depends only on ``m`` and the random bits, never on
    the data.
    """
    parts: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    got = tried = accepted = 0
    while got < m:
        bits.rounds += 1
        need = m - got
        if tried == 0:
            attempts = 2 * need + 16 if need <= 1024 else 1040
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
