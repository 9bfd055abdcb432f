"""The randomness behind every noisy release.

Two layers:

* A :class:`RandomSource` turns raw random bits into numpy arrays: :meth:`~RandomSource.uint64`,
  :meth:`~RandomSource.bytes`, and uniforms on the open interval (0, 1) with 53 random bits
  each. The continuous distributions the mechanisms need (:meth:`~RandomSource.laplace`,
  :meth:`~RandomSource.gaussian`, :meth:`~RandomSource.gumbel`) are built on those uniforms
  by inversion or Box-Muller, vectorized: one call draws every sample a release needs.
* Mechanisms never touch a source (or numpy's generators) directly. They ask this module for
  noise through one small function per distribution -- :func:`laplace_noise`,
  :func:`gaussian_noise`, :func:`gumbel_noise` -- which reads the process-wide source and the
  test-only "noise disabled" switch. An exact sampler (discrete Laplace, discrete Gaussian)
  drops in as one more such function without any mechanism knowing where its bits come from.

:class:`SecureSource` (the default) reads the operating system's CSPRNG (:func:`os.urandom`)
once per call and reinterprets the bytes as ``uint64`` words: no Python loop per sample, so a
million uniforms take a few milliseconds. :class:`SeededSource` is numpy's PCG64 -- fast and
reproducible, and therefore **for tests only**; :mod:`pinqpy.testing` installs it.

A caveat: noise built from floating-point arithmetic (the continuous samplers below, from the
logarithms of 53-bit uniforms) does not have exactly the textbook density, and the gaps in the
set of representable outputs can in principle leak information (Mironov, "On significance of
the least significant bits for differential privacy", CCS 2012). No mechanism releases them:
every release uses the exact integer samplers of :mod:`pinqpy.noise.samplers` (Canonne, Kamath &
Steinke, NeurIPS 2020) on the random words of these sources. The continuous samplers remain
for tests and for audits of deliberately broken mechanisms.

>>> src = SeededSource(1)
>>> u = src.uniform(5)
>>> bool(((u > 0) & (u < 1)).all())
True
>>> src.laplace(3, scale=2.0).shape
(3,)
"""

from __future__ import annotations

import math
import os
import threading
from abc import ABC, abstractmethod

import numpy as np

__all__ = [
    "RandomSource",
    "SecureSource",
    "SeededSource",
    "current_source",
    "gaussian_noise",
    "gumbel_noise",
    "hooks_active",
    "laplace_noise",
    "noise_disabled",
]

Shape = int | tuple[int, ...]

# 2**-53: the spacing of the 53-bit uniform grid.
_TWO_POW_M53 = 1.0 / 9007199254740992.0


def _size(shape: Shape) -> int:
    if isinstance(shape, int | np.integer):
        if shape < 0:
            raise ValueError("a sample size cannot be negative")
        return int(shape)
    n = 1
    for s in shape:
        if s < 0:
            raise ValueError("a sample size cannot be negative")
        n *= int(s)
    return n


class RandomSource(ABC):
    """A source of random bits, with the continuous samplers the mechanisms build on.

    Subclasses provide :meth:`uint64` and :meth:`bytes`; everything else derives from them, so
    a source is exactly as good as its bits. Every method takes a size or a shape and returns
    one numpy array (vectorized: no per-sample Python work).
    """

    @abstractmethod
    def uint64(self, n: Shape) -> np.ndarray:
        """``n`` independent words uniform on ``[0, 2**64)``, dtype ``uint64``."""

    @abstractmethod
    def bytes(self, n: int) -> bytes:
        """``n`` independent uniformly random bytes."""

    def _words(self, n: Shape) -> np.ndarray:
        """Random ``uint64`` words for internal use (may be a read-only view)."""
        return self.uint64(n)

    def uniform(self, n: Shape) -> np.ndarray:
        """Uniforms strictly inside (0, 1), 53 random bits each.

        With ``k`` the top 53 bits of a random word, the sample is ``k·2**-53``: exactly
        representable (``k < 2**53`` fits a double's 53-bit significand, and the product only
        shifts the exponent), never 1, and symmetric about 1/2 (``k`` and ``2**53 - k`` pair
        up). ``k = 0`` (probability ``2**-53``) is redrawn, so the value is uniform on the
        ``2**53 - 1`` points ``{1, ..., 2**53 - 1}·2**-53`` and never 0. Hence ``log(u)``,
        ``log(1 - u)`` and ``log(-log(u))`` are always finite and the samplers below need no
        further care.
        """
        k = self._words(n) >> np.uint64(11)
        zero = k == 0
        while zero.any():  # practically never runs
            k[zero] = self._words(int(zero.sum())) >> np.uint64(11)
            zero = k == 0
        return k.astype(np.float64) * _TWO_POW_M53

    def laplace(self, n: Shape, scale: float) -> np.ndarray:
        """Laplace(0, ``scale``) by inversion of its CDF.

        For ``U`` uniform on (0, 1): ``X = scale * log(2U)`` when ``U < 1/2`` and
        ``X = -scale * log(2 - 2U)`` otherwise. Then ``P(X <= x) = e^{x/b}/2`` for ``x < 0``
        (``2U <= e^{x/b}``) and symmetrically above, which is the Laplace CDF. One uniform
        per sample; both branches are finite because ``U`` is never 0 or 1.
        """
        u = self.uniform(n)
        lower = u < 0.5
        # log(2u) for the lower half; log(2 - 2u) = log(2(1 - u)) for the upper half.
        mag = np.log(2.0 * np.where(lower, u, 1.0 - u))
        return float(scale) * np.where(lower, mag, -mag)

    def gaussian(self, n: Shape, sigma: float) -> np.ndarray:
        """Normal(0, ``sigma``²) by the Box-Muller transform.

        For independent uniforms ``U1, U2``: ``R = sqrt(-2 log U1)`` is the radius of a
        standard bivariate normal and ``2 pi U2`` its angle, so ``R cos(2 pi U2)`` and
        ``R sin(2 pi U2)`` are two independent standard normals (Box & Muller, 1958). Two
        uniforms give two samples.
        """
        size = _size(n)
        pairs = (size + 1) // 2
        u = self.uniform(2 * pairs)
        radius = np.sqrt(-2.0 * np.log(u[:pairs]))
        angle = (2.0 * math.pi) * u[pairs:]
        z = np.concatenate([radius * np.cos(angle), radius * np.sin(angle)])[:size]
        return float(sigma) * z.reshape(n)

    def gumbel(self, n: Shape) -> np.ndarray:
        """Standard Gumbel by inversion: ``G = -log(-log U)``, since ``P(G <= g) = e^{-e^{-g}}``.

        Used for the Gumbel-max trick: ``argmax_i (s_i + G_i)`` is distributed as
        ``P(i) ∝ e^{s_i}`` (the exponential mechanism, sampled in log space).
        """
        u = self.uniform(n)
        return -np.log(-np.log(u))


class SecureSource(RandomSource):
    """Cryptographically secure randomness from :func:`os.urandom` (the default source).

    Each call makes one ``os.urandom`` request for all the bytes it needs and reinterprets them
    as numpy words; there is no state to seed or to predict.
    """

    def _words(self, n: Shape) -> np.ndarray:
        # One system call for all the bytes, viewed (not copied) as 64-bit words.
        return np.frombuffer(os.urandom(8 * _size(n)), dtype=np.uint64).reshape(n)

    def uint64(self, n: Shape) -> np.ndarray:
        return self._words(n).copy()

    def bytes(self, n: int) -> bytes:
        return os.urandom(int(n))

    def __repr__(self) -> str:
        return "SecureSource()"


class SeededSource(RandomSource):
    """Reproducible randomness from numpy's PCG64 -- **for tests only**.

    A seeded generator is predictable to anyone who knows (or guesses) the seed, which defeats
    differential privacy. :func:`pinqpy.testing.seed` installs one; production code never
    should.
    """

    def __init__(self, seed: int):
        self.seed = int(seed)
        self._gen = np.random.Generator(np.random.PCG64(self.seed))

    def uint64(self, n: Shape) -> np.ndarray:
        size = _size(n)
        return self._gen.bit_generator.random_raw(size).astype(np.uint64).reshape(n)

    def bytes(self, n: int) -> bytes:
        return self._gen.bytes(int(n))

    def __repr__(self) -> str:
        return f"SeededSource({self.seed})"


# -- process-wide state --------------------------------------------------------------------
# One module global guarded by a lock. Sources are shared by threads; a SeededSource's generator
# is not thread-safe by itself, so draws from it are serialized by the same lock.
_LOCK = threading.RLock()
_source: RandomSource = SecureSource()
_noise_disabled: bool = False


def current_source() -> RandomSource:
    """The source every mechanism draws from (a :class:`SecureSource` unless a test swapped it)."""
    with _LOCK:
        return _source


def _set_source(source: RandomSource | None) -> RandomSource:
    """Install ``source`` (``None``: a fresh :class:`SecureSource`); return the previous one.

    Module-private: only :mod:`pinqpy.testing` calls this.
    """
    global _source
    if source is not None and not isinstance(source, RandomSource):
        raise TypeError("a random source must be a RandomSource")
    with _LOCK:
        previous = _source
        _source = source if source is not None else SecureSource()
        return previous


def noise_disabled() -> bool:
    """True only inside :func:`pinqpy.testing.no_noise` (every release is then exact)."""
    with _LOCK:
        return _noise_disabled


def hooks_active() -> bool:
    """Whether a test hook is in force: noise switched off, or a source other than the secure
    one (a seeded, predictable source)."""
    with _LOCK:
        return _noise_disabled or not isinstance(_source, SecureSource)


def _set_noise_disabled(value: bool) -> bool:
    """Switch noise off or on for the whole process; return the previous setting (tests only)."""
    global _noise_disabled
    with _LOCK:
        previous = _noise_disabled
        _noise_disabled = bool(value)
        return previous


# -- one function per distribution: the only way mechanisms obtain noise ---------------------
def _draw(shape: Shape, sampler: str, *args: float) -> np.ndarray:
    with _LOCK:
        if _noise_disabled:
            # Zero noise makes every mechanism release its exact value: additive mechanisms
            # add nothing, and a Gumbel-max selection becomes a plain argmax (lowest index on
            # ties, as numpy's argmax).
            return np.zeros(shape, dtype=np.float64)
        return getattr(_source, sampler)(shape, *args)


def laplace_noise(shape: Shape, scale: float) -> np.ndarray:
    """Laplace(0, ``scale``) noise of the given shape (zeros when ``scale`` is 0)."""
    if scale < 0 or not math.isfinite(scale):
        raise ValueError("a Laplace scale must be finite and non-negative")
    if scale == 0:
        return np.zeros(shape, dtype=np.float64)
    return _draw(shape, "laplace", scale)


def gaussian_noise(shape: Shape, sigma: float) -> np.ndarray:
    """Normal(0, ``sigma``²) noise of the given shape (zeros when ``sigma`` is 0)."""
    if sigma < 0 or not math.isfinite(sigma):
        raise ValueError("a Gaussian sigma must be finite and non-negative")
    if sigma == 0:
        return np.zeros(shape, dtype=np.float64)
    return _draw(shape, "gaussian", sigma)


def gumbel_noise(shape: Shape) -> np.ndarray:
    """Standard Gumbel noise of the given shape, for Gumbel-max selection."""
    return _draw(shape, "gumbel")
