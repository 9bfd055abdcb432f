"""What a noisy aggregation returns as a number: a value that carries its accuracy.

* :class:`NoisyValue` is a ``float``: arithmetic, comparison and formatting work as for any
  float (and return plain floats). ``v.ci(0.95)`` is a confidence interval for the exact value,
  computed from the mechanism's public noise distribution and the released values only -- it
  is post-processing and costs no privacy.
* :class:`NoisyCount` is an ``int``: a count released with exact discrete noise, with an
  integer ``ci``. :meth:`NoisyValue.from_release` returns one when the release's values are
  integers.

The other results: argmax labels (:mod:`.labels`), Series and frames (:mod:`.tables`); what
they are computed from: :mod:`.accuracy` and :mod:`.noise`.

>>> import numpy as np
>>> from pinqpy.results.accuracy import AdditiveAccuracy
>>> from pinqpy.results.noise import LaplaceNoise
>>> acc = AdditiveAccuracy(np.array([512.3]), LaplaceNoise(10.0), epsilon=0.1)
>>> v = NoisyValue.from_release(acc)
>>> v
NoisyValue(512.3, ±29.96 at 95%)
>>> v + 1
513.3
>>> [round(x, 2) for x in v.ci(0.95)]
[482.34, 542.26]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pinqpy.core.exact import Exact
from pinqpy.results.accuracy import Accuracy
from pinqpy.results.format import _fmt
from pinqpy.results.html import LEVEL, noisy_scalar_html, result_html

__all__ = ["NoisyCount", "NoisyValue"]


def _fmt_level(level: float) -> str:
    return f"{level * 100:g}%"


class _HasAccuracy:
    """Attributes shared by the scalar results (the accuracy of a one-key release)."""

    _accuracy: Accuracy

    @property
    def accuracy(self) -> Accuracy:
        return self._accuracy

    @property
    def epsilon(self) -> Exact:
        """The epsilon this release was made with (before any stability multiplier)."""
        return self._accuracy.epsilon

    @property
    def delta(self) -> Exact:
        return self._accuracy.delta

    @property
    def mechanism(self) -> str:
        return self._accuracy.mechanism

    @property
    def noise_scale(self) -> float | None:
        return self._accuracy.noise_scale


def _one_key(accuracy: Accuracy) -> Accuracy:
    if not isinstance(accuracy, Accuracy):
        raise TypeError("a noisy result needs an Accuracy")
    if len(accuracy) != 1:
        raise ValueError("a scalar result needs the accuracy of exactly one key")
    return accuracy


class NoisyValue(_HasAccuracy, float):
    """A released number: a ``float`` that also knows how accurate it is.

    Arithmetic returns plain floats (the accuracy describes *this* released value only).
    ``ci(level)`` is a ``(low, high)`` interval for the exact value; for Laplace noise of scale
    ``b`` it is ``value ± b·ln(1/(1-level))``, for Gaussian noise ``value ± sigma·z``, and for a
    mean or quantile the (asymmetric) interval its mechanism documents.

    >>> import numpy as np
    >>> from pinqpy.results.accuracy import AdditiveAccuracy
    >>> from pinqpy.results.noise import GaussianNoise
    >>> v = NoisyValue.from_release(AdditiveAccuracy(np.array([3.5]), GaussianNoise(2.0),
    ...                                               epsilon=1, delta=1e-6))
    >>> v * 2
    7.0
    >>> v.noise_scale, float(v.delta)
    (2.0, 1e-06)
    """

    def _repr_html_(self) -> str:
        return result_html(self)

    def _result_html(self, level: float = LEVEL) -> str:
        return noisy_scalar_html(self, level, label=False)

    def __new__(cls, value: float, accuracy: Accuracy) -> NoisyValue:
        obj = float.__new__(cls, value)
        obj._accuracy = _one_key(accuracy)
        return obj

    @classmethod
    def from_release(cls, accuracy: Accuracy) -> NoisyValue | NoisyCount:
        """The scalar result of a one-key release (its value is ``accuracy.values[0]``).

        A :class:`NoisyCount` (an ``int``) when the accuracy says the values are integers,
        i.e. a count released with discrete noise; a ``NoisyValue`` otherwise.
        """
        acc = _one_key(accuracy)
        if acc.integer:
            return NoisyCount(int(acc.values[0]), acc)
        return cls(float(acc.values[0]), acc)

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """A ``level`` confidence interval ``(low, high)`` for the exact value."""
        low, high = self._accuracy.interval(level)
        return float(low[0]), float(high[0])

    def __repr__(self) -> str:
        level = 0.95
        t = self._accuracy.symmetric_half_width(level)
        if t is not None:
            return f"NoisyValue({_fmt(self)}, ±{_fmt(t, 4)} at {_fmt_level(level)})"
        ranks = self._accuracy.rank_error(level)
        if ranks is not None:
            return (
                f"NoisyValue({_fmt(self)}, within {_fmt(ranks, 4)} ranks at "
                f"{_fmt_level(level)}; no value interval)"
            )
        low, high = self.ci(level)
        return f"NoisyValue({_fmt(self)}, {_fmt_level(level)} ci [{_fmt(low)}, {_fmt(high)}])"

    def __str__(self) -> str:
        return float.__repr__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (NoisyValue, (float(self), self._accuracy))


class NoisyCount(_HasAccuracy, int):
    """A released count: an ``int`` (exact discrete noise keeps counts integers) with its accuracy.

    Arithmetic returns plain ints (or floats, for ``/``), as for any int. ``ci(level)`` is an
    integer interval ``(low, high)`` for the exact count: ``value ± t`` with ``t`` the least
    integer such that the discrete noise is within ``t`` with probability at least ``level``.
    :meth:`NoisyValue.from_release` returns one for a count.

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> from pinqpy.results.accuracy import AdditiveAccuracy
    >>> from pinqpy.results.noise import DiscreteLaplaceNoise
    >>> acc = AdditiveAccuracy(np.array([512]), DiscreteLaplaceNoise(Fraction(10)), epsilon=0.1)
    >>> n = NoisyValue.from_release(acc)
    >>> n, n + 1, n.ci(0.95)
    (NoisyCount(512, ±30 at 95%), 513, (482, 542))
    >>> isinstance(n, int), n.mechanism
    (True, 'DiscreteLaplace(scale=10)')
    """

    def _repr_html_(self) -> str:
        return result_html(self)

    def _result_html(self, level: float = LEVEL) -> str:
        return noisy_scalar_html(self, level, label=False)

    def __new__(cls, value: int, accuracy: Accuracy) -> NoisyCount:
        obj = int.__new__(cls, value)
        obj._accuracy = _one_key(accuracy)
        return obj

    @classmethod
    def from_release(cls, accuracy: Accuracy) -> NoisyCount:
        """The count of a one-key release (its value is ``accuracy.values[0]``)."""
        return cls(int(_one_key(accuracy).values[0]), accuracy)

    def ci(self, level: float = 0.95) -> tuple[int, int] | tuple[float, float]:
        """A ``level`` confidence interval ``(low, high)`` for the exact count."""
        low, high = self._accuracy.interval(level)
        if np.asarray(low).dtype.kind in "iu":
            return int(low[0]), int(high[0])
        return float(low[0]), float(high[0])

    def __repr__(self) -> str:
        level = 0.95
        t = self._accuracy.symmetric_half_width(level)
        if t is not None:
            width = str(int(t)) if float(t).is_integer() else _fmt(t, 4)
            return f"NoisyCount({int(self)}, ±{width} at {_fmt_level(level)})"
        low, high = self.ci(level)
        return f"NoisyCount({int(self)}, {_fmt_level(level)} ci [{low}, {high}])"

    def __str__(self) -> str:
        return int.__repr__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (NoisyCount, (int(self), self._accuracy))
