"""Noise mechanisms: built from public parameters, charged before data, released in bulk.

A mechanism object is made from public parameters only (epsilon, delta, bounds, a candidate
grid); it never sees data until ``release``. Before that it already knows

* its ``charge`` -- an object with ``at(k) -> Cost``, the cost at stability ``k`` (see
  :mod:`pinqpy.accounting.agents`), so the budget can be checked before any data is read;
* its accuracy -- ``noise_scale``, ``describe()``, ``expected_error()`` and ``accuracy(level)``
  -- so a plan can be explained without running it.

``release(...)`` turns exact aggregates into noisy ones and returns them with an
:class:`~pinqpy.results.accuracy.Accuracy`. Every release is vectorized over a leading *keys*
axis: a partition releases all its keys in one call (arrays of shape ``(n_keys,)``, or
``(n_keys, m)`` for the quantile's counts). The keys of a partition are disjoint, so one row
changes the aggregate of one key only, and one release over all keys costs the same as a
release over one key (parallel composition; McSherry, "Privacy Integrated Queries", SIGMOD
2009).

**Privacy model.** Neighbouring inputs differ by adding or removing one row of the frame being
aggregated; every sensitivity below is for that relation. The budget layer multiplies by the
frame's stability through ``charge.at(k)``.

The package has one module per family: :mod:`.calibration` (Laplace scale, analytic and
discrete Gaussian calibration), :mod:`.base` (bounds, one noisy measurement, the base
classes), :mod:`.additive` (counts and sums), :mod:`.mean`, :mod:`.variance`,
:mod:`.selection` (exact permute-and-flip), :mod:`.quantile` and :mod:`.argmax`. The charges
they produce are in :mod:`pinqpy.accounting.charges`.

**Exact accounting.** Epsilons and deltas are :class:`fractions.Fraction` throughout. Noise
parameters are exact rationals computed from them and only ever rounded *up* (more noise), and
an exponential mechanism's coefficient is rounded *down*; so no rounding ever makes a
mechanism less private than it is charged for.

**Floating-point-safe noise.** A textbook sampler computes ``scale·log(u)`` in floating point,
and the low-order bits of ``answer + noise`` can then reveal the answer (Mironov, CCS 2012).
Here every additive noise is exact and drawn from the CSPRNG by :mod:`pinqpy.noise.samplers`, with
integer arithmetic only:

* **integer answers** (counts) get the discrete Laplace or the discrete Gaussian of Canonne,
  Kamath & Steinke (NeurIPS 2020, "CKS20") and come out as ``int64`` integers;
* **real answers** (sums, the centred sums of means and variances) are released on a power-of-
  two grid ``g`` chosen from public parameters only, ``g·(round(v/g) + Z)`` with ``Z`` exact
  discrete noise (:func:`~pinqpy.noise.lattice_release.lattice_laplace`,
  :func:`~pinqpy.noise.lattice_release.lattice_gaussian`): every output is a multiple of the
  same ``g`` whatever the data;
* **quantiles** release a public candidate value; a value-space ``ci``, when asked for
  (``ci=True``), comes from a discrete-Laplace histogram paid by a quarter of epsilon;
* **selections** (the quantile's candidate, :class:`ArgmaxMechanism`'s label) use
  permute-and-flip (McKenna & Sheldon, NeurIPS 2020) with exact ``Bernoulli(exp(-γ))`` coins
  on rational exponents ``γ`` (:func:`_permute_and_flip`) instead of Gumbel noise.

No mechanism here calls a floating-point sampler; the float ``laplace_scale``,
``gaussian_sigma`` and :class:`GaussianCharge` remain for the continuous mechanisms'
accounting.

Inside :func:`pinqpy.testing.no_noise` every mechanism releases its exact value (a selection
becomes a plain argmax, lowest index on ties).

>>> import numpy as np
>>> from pinqpy import testing
>>> m = CountMechanism(0.1)
>>> m.describe(), m.charge.at(2)
('DiscreteLaplace(scale=10)', Cost(epsilon=0.2))
>>> with testing.no_noise():
...     values, acc = m.release(np.array([120, 7]))
>>> values.tolist(), values.dtype
([120, 7], dtype('int64'))
"""

from __future__ import annotations

from pinqpy.noise.mechanisms.additive import (
    CountMechanism,
    PublicCountMechanism,
    SumMechanism,
)
from pinqpy.noise.mechanisms.argmax import ArgmaxMechanism
from pinqpy.noise.mechanisms.base import Mechanism
from pinqpy.noise.mechanisms.calibration import (
    discrete_gaussian_sigma2,
    gaussian_sigma,
    laplace_scale,
)
from pinqpy.noise.mechanisms.mean import (
    MeanAccuracy,
    MeanMechanism,
    PublicSizeMeanAccuracy,
    PublicSizeMeanMechanism,
)
from pinqpy.noise.mechanisms.quantile import (
    QUANTILE_CI_CUTS,
    QUANTILE_CI_SHARE,
    QuantileAccuracy,
    QuantileMechanism,
    default_candidates,
)
from pinqpy.noise.mechanisms.selection import PF_MAX_EPSILON
from pinqpy.noise.mechanisms.variance import VarianceAccuracy, VarianceMechanism

__all__ = [
    "PF_MAX_EPSILON",
    "QUANTILE_CI_CUTS",
    "QUANTILE_CI_SHARE",
    "ArgmaxMechanism",
    "CountMechanism",
    "MeanAccuracy",
    "MeanMechanism",
    "Mechanism",
    "PublicCountMechanism",
    "PublicSizeMeanAccuracy",
    "PublicSizeMeanMechanism",
    "QuantileAccuracy",
    "QuantileMechanism",
    "SumMechanism",
    "VarianceAccuracy",
    "VarianceMechanism",
    "default_candidates",
    "discrete_gaussian_sigma2",
    "gaussian_sigma",
    "laplace_scale",
]
