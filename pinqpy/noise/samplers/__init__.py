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

from pinqpy.noise.samplers._bits import MAX_BOUND, MAX_SCALE, uniform_below
from pinqpy.noise.samplers.bernoulli import bernoulli_exp
from pinqpy.noise.samplers.gaussian import discrete_gaussian
from pinqpy.noise.samplers.laplace import discrete_laplace
from pinqpy.noise.samplers.rounding import round_up_dyadic

__all__ = [
    "MAX_BOUND",
    "MAX_SCALE",
    "bernoulli_exp",
    "discrete_gaussian",
    "discrete_laplace",
    "round_up_dyadic",
    "uniform_below",
]
