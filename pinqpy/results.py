"""What a noisy aggregation returns: numbers, labels and Series that carry their accuracy.

* :class:`NoisyValue` is a ``float``: arithmetic, comparison and formatting work as for any
  float (and return plain floats). ``v.ci(0.95)`` is a confidence interval for the exact value,
  computed from the mechanism's public noise distribution and the released values only -- it
  is post-processing and costs no privacy.
* :class:`NoisyLabel` is a ``str`` (the candidate an argmax chose) whose ``ci`` says how far
  below the true maximum count the chosen candidate's count can be.
* :class:`NoisySeries` is a :class:`pandas.Series` (one released value per key of a partition)
  that keeps its accuracy through slicing, sorting and filtering.
* :class:`Accuracy` is the object mechanisms hand back with their releases, one entry per key;
  results hold one and ask it for intervals.

>>> import numpy as np
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

import copy
import math
from abc import ABC, abstractmethod
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ._exact import Exact
from .errors import PinqError

__all__ = [
    "Accuracy",
    "AccuracyPreview",
    "AdditiveAccuracy",
    "ArgmaxAccuracy",
    "GaussianNoise",
    "LaplaceNoise",
    "NoiseDistribution",
    "NoisyFrame",
    "NoisyLabel",
    "NoisySeries",
    "NoisyValue",
]


def check_level(level: float) -> float:
    """A confidence level strictly between 0 and 1."""
    try:
        lv = float(level)
    except (TypeError, ValueError):
        raise PinqError("a confidence level must be a number between 0 and 1") from None
    if not 0.0 < lv < 1.0:
        raise PinqError(f"a confidence level must be above 0 and below 1 (got {lv:g})")
    return lv


# -- noise distributions -------------------------------------------------------------------
class NoiseDistribution(ABC):
    """A public, data-independent additive noise distribution (symmetric about 0)."""

    @property
    @abstractmethod
    def scale(self) -> float:
        """The distribution's scale parameter (Laplace b, Gaussian sigma)."""

    @abstractmethod
    def half_width(self, level: float) -> float:
        """The smallest ``t`` with ``P(|X| <= t) >= level``."""

    @abstractmethod
    def expected_abs(self) -> float:
        """``E|X|``: the expected absolute error this noise adds."""

    @abstractmethod
    def describe(self) -> str:
        """One line, e.g. ``Laplace(scale=10.0)``."""


@dataclass(frozen=True)
class LaplaceNoise(NoiseDistribution):
    """Laplace(0, b), density ``e^{-|x|/b} / 2b``.

    ``P(|X| > t) = e^{-t/b}``, so the level-``L`` half-width is ``b·ln(1/(1-L))`` (about
    ``3.0·b`` at 95%), and ``E|X| = b`` (``|X|`` is exponential with mean ``b``).

    >>> round(LaplaceNoise(10.0).half_width(0.95), 4)
    29.9573
    """

    b: float

    @property
    def scale(self) -> float:
        return self.b

    def half_width(self, level: float) -> float:
        return self.b * math.log(1.0 / (1.0 - check_level(level)))

    def tail(self, t: float) -> float:
        """``P(|X| > t)``."""
        return math.exp(-t / self.b) if self.b > 0 else float(t < 0)

    def expected_abs(self) -> float:
        return self.b

    def describe(self) -> str:
        return f"Laplace(scale={_fmt(self.b)})"


@dataclass(frozen=True)
class GaussianNoise(NoiseDistribution):
    """Normal(0, sigma²).

    ``P(|X| <= sigma·z) = level`` for ``z = Phi^{-1}((1 + level)/2)`` (1.96 at 95%), and
    ``E|X| = sigma·sqrt(2/pi)``.

    >>> round(GaussianNoise(1.0).half_width(0.95), 4)
    1.96
    """

    sigma: float

    @property
    def scale(self) -> float:
        return self.sigma

    def half_width(self, level: float) -> float:
        z = NormalDist().inv_cdf((1.0 + check_level(level)) / 2.0)
        return self.sigma * z

    def expected_abs(self) -> float:
        return self.sigma * math.sqrt(2.0 / math.pi)

    def describe(self) -> str:
        return f"Gaussian(sigma={_fmt(self.sigma)})"


# -- accuracy ------------------------------------------------------------------------------
class Accuracy(ABC):
    """The accuracy of one release, one entry per key, computed without reading data again.

    Holds the released values and whatever *public or released* quantities its intervals need
    (never an exact aggregate). ``interval(level)`` returns arrays ``(low, high)`` with one
    entry per key: with probability at least ``level`` (over the mechanism's randomness) the
    exact value lies in ``[low, high]``. ``take(idx)`` restricts to some keys, so a result can
    be sliced.

    Attributes: ``mechanism`` (a one-line description), ``epsilon`` and ``delta`` (what the
    release was asked for, before any stability multiplier), ``noise_scale`` (float or None).
    """

    # Names of the attributes that hold one entry per key (sliced by ``take``).
    _per_key: ClassVar[tuple[str, ...]] = ("values",)

    def __init__(
        self,
        values: np.ndarray,
        *,
        mechanism: str,
        epsilon: object,
        delta: object = 0,
        noise_scale: float | None = None,
    ):
        self.values = np.asarray(values)
        if self.values.ndim != 1:
            raise ValueError("released values must be one-dimensional (one per key)")
        self.mechanism = mechanism
        self.epsilon = Exact(epsilon)
        self.delta = Exact(delta)
        self.noise_scale = noise_scale

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @abstractmethod
    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Per-key ``(low, high)`` covering the exact value with probability >= ``level``."""

    def symmetric_half_width(self, level: float = 0.95) -> float | None:
        """The ``t`` of a ``value ± t`` interval when the interval has that form, else None."""
        return None

    def take(self, idx: Any) -> Accuracy:
        """This accuracy restricted to the keys at positions ``idx`` (numpy indexing)."""
        out = copy.copy(self)
        for name in self._per_key:
            setattr(out, name, np.asarray(getattr(self, name))[idx])
        if np.ndim(out.values) == 0:
            for name in self._per_key:
                setattr(out, name, np.atleast_1d(getattr(out, name)))
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.mechanism}, keys={len(self)})"


class AdditiveAccuracy(Accuracy):
    """Released value = exact value + independent noise from a known distribution.

    The interval is ``value ± noise.half_width(level)``: since ``|noise| <= t`` with
    probability ``level``, the exact value ``value - noise`` is within ``t`` of ``value``.
    """

    def __init__(
        self,
        values: np.ndarray,
        noise: NoiseDistribution,
        *,
        epsilon: object,
        delta: object = 0,
        mechanism: str | None = None,
    ):
        super().__init__(
            values,
            mechanism=mechanism or noise.describe(),
            epsilon=epsilon,
            delta=delta,
            noise_scale=noise.scale,
        )
        self.noise = noise

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        t = self.noise.half_width(level)
        v = self.values.astype(np.float64)
        return v - t, v + t

    def symmetric_half_width(self, level: float = 0.95) -> float | None:
        return self.noise.half_width(level)


class ArgmaxAccuracy(Accuracy):
    """Report-noisy-max over ``n_candidates`` public candidates with parameter ``epsilon``.

    ``interval(level)`` is ``(0, tolerance)`` for every key: with probability at least
    ``level``, the chosen candidate's exact count is at most ``tolerance`` below the largest
    exact count, where ``tolerance = ln(n / (1 - level)) / epsilon`` (the exponential
    mechanism's utility bound; see :class:`pinqpy._mechanisms.ArgmaxMechanism`). It is a
    statement about the *shortfall* of the choice, not an interval of labels.
    """

    def __init__(
        self,
        values: np.ndarray,
        *,
        epsilon: object,
        n_candidates: int,
        mechanism: str | None = None,
        indices: np.ndarray | None = None,
    ):
        scale = float(1 / Fraction(Exact(epsilon)))
        super().__init__(
            values,
            mechanism=mechanism or f"ReportNoisyMax(Gumbel(scale={_fmt(scale)}))",
            epsilon=epsilon,
            noise_scale=scale,
        )
        self.n_candidates = int(n_candidates)
        self.indices = (
            np.zeros(len(self), dtype=np.int64) if indices is None else np.asarray(indices)
        )

    _per_key: ClassVar[tuple[str, ...]] = ("values", "indices")

    def tolerance(self, level: float = 0.95) -> float:
        """How far below the maximum count the chosen count may be, at this level."""
        lv = check_level(level)
        return math.log(self.n_candidates / (1.0 - lv)) / float(self.epsilon)

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        t = self.tolerance(level)
        return np.zeros(len(self)), np.full(len(self), t)


# -- formatting ----------------------------------------------------------------------------
def _fmt(x: float, digits: int = 6) -> str:
    """A short readable number: integers as such, else ``digits`` significant digits."""
    x = float(x)
    if not math.isfinite(x):
        return repr(x)
    if x == int(x) and abs(x) < 1e15:
        return f"{x:.1f}" if abs(x) < 1e6 else str(int(x))
    if 1e-4 <= abs(x) < 1e15:
        return np.format_float_positional(
            x, precision=digits, unique=False, fractional=False, trim="-"
        )
    return f"{x:.{digits}g}"


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
    >>> v = NoisyValue.from_release(AdditiveAccuracy(np.array([3.5]), GaussianNoise(2.0),
    ...                                               epsilon=1, delta=1e-6))
    >>> v * 2
    7.0
    >>> v.noise_scale, float(v.delta)
    (2.0, 1e-06)
    """

    def __new__(cls, value: float, accuracy: Accuracy) -> NoisyValue:
        obj = float.__new__(cls, value)
        obj._accuracy = _one_key(accuracy)
        return obj

    @classmethod
    def from_release(cls, accuracy: Accuracy) -> NoisyValue:
        """The scalar result of a one-key release (its value is ``accuracy.values[0]``)."""
        return cls(float(_one_key(accuracy).values[0]), accuracy)

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """A ``level`` confidence interval ``(low, high)`` for the exact value."""
        low, high = self._accuracy.interval(level)
        return float(low[0]), float(high[0])

    def __repr__(self) -> str:
        level = 0.95
        t = self._accuracy.symmetric_half_width(level)
        if t is not None:
            return f"NoisyValue({_fmt(self)}, ±{_fmt(t, 4)} at {_fmt_level(level)})"
        low, high = self.ci(level)
        return f"NoisyValue({_fmt(self)}, {_fmt_level(level)} ci [{_fmt(low)}, {_fmt(high)}])"

    def __str__(self) -> str:
        return float.__repr__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (NoisyValue, (float(self), self._accuracy))


class NoisyLabel(_HasAccuracy, str):
    """The candidate a noisy argmax chose: a ``str``, with the argmax's accuracy.

    ``candidate`` is the original candidate object (the ``str`` is its text). ``ci(level)``
    returns ``(0.0, tolerance)``: with probability at least ``level`` the chosen candidate's
    exact count is within ``tolerance`` below the largest exact count among the candidates.

    >>> import numpy as np
    >>> acc = ArgmaxAccuracy(np.array(["CA"], dtype=object), epsilon=1.0, n_candidates=3)
    >>> lab = NoisyLabel.from_release(acc)
    >>> lab == "CA", [round(x, 3) for x in lab.ci(0.95)]
    (True, [0.0, 4.094])
    """

    def __new__(cls, candidate: Hashable, accuracy: Accuracy) -> NoisyLabel:
        obj = str.__new__(cls, candidate)
        obj._accuracy = _one_key(accuracy)
        obj.candidate = candidate
        return obj

    @classmethod
    def from_release(cls, accuracy: Accuracy) -> NoisyLabel:
        return cls(_one_key(accuracy).values[0], accuracy)

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """``(0.0, tolerance)``: how far below the maximum count the choice's count can be."""
        low, high = self._accuracy.interval(level)
        return float(low[0]), float(high[0])

    def __repr__(self) -> str:
        return f"NoisyLabel({str.__repr__(self)}, mechanism={self.mechanism!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (NoisyLabel, (self.candidate, self._accuracy))


class NoisySeries(pd.Series):
    """One released value per key, as a pandas Series that keeps its accuracy.

    Slicing, filtering, sorting and reindexing within the released keys keep the accuracy
    (``_metadata`` plus ``_constructor``). ``ci(level)`` returns a DataFrame with columns
    ``low`` and ``high`` and the Series' own index. The accuracy belongs to the *released*
    values: if the values were changed (``s * 2``, ``s.round()``), ``ci`` refuses rather than
    report an interval for numbers the mechanism never released.

    >>> import numpy as np
    >>> acc = AdditiveAccuracy(np.array([10.0, 20.0, 30.0]), LaplaceNoise(1.0), epsilon=1)
    >>> s = NoisySeries.from_release(acc, index=["a", "b", "c"], name="n")
    >>> s[s > 15].ci(0.5)
             low       high
    b  19.306853  20.693147
    c  29.306853  30.693147
    """

    _metadata: ClassVar[list[str]] = ["_pq_accuracy", "_pq_keys"]  # type: ignore[misc]

    @property
    def _constructor(self) -> type[NoisySeries]:
        return NoisySeries

    @property
    def _constructor_expanddim(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    @classmethod
    def from_release(
        cls,
        accuracy: Accuracy,
        index: Sequence[Hashable] | pd.Index | None = None,
        name: Hashable | None = None,
    ) -> NoisySeries:
        """The Series of a release over keys ``index`` (in release order)."""
        if not isinstance(accuracy, Accuracy):
            raise TypeError("a NoisySeries needs an Accuracy")
        idx = pd.RangeIndex(len(accuracy)) if index is None else pd.Index(index)
        if len(idx) != len(accuracy):
            raise ValueError("the index must have one label per released key")
        if not idx.is_unique:
            raise ValueError("the keys of a release must be unique")
        s = cls(accuracy.values, index=idx, name=name)
        s._pq_accuracy = accuracy
        s._pq_keys = idx
        return s

    def _acc(self) -> Accuracy:
        acc = getattr(self, "_pq_accuracy", None)
        if acc is None:
            raise PinqError("this Series carries no accuracy (it was not released by pinqpy)")
        return acc

    @property
    def accuracy(self) -> Accuracy:
        return self._acc()

    @property
    def epsilon(self) -> Exact:
        return self._acc().epsilon

    @property
    def delta(self) -> Exact:
        return self._acc().delta

    @property
    def mechanism(self) -> str:
        return self._acc().mechanism

    @property
    def noise_scale(self) -> float | None:
        return self._acc().noise_scale

    def ci(self, level: float = 0.95) -> pd.DataFrame:
        """Per-key ``level`` confidence intervals: a DataFrame with columns ``low``, ``high``."""
        acc = self._acc()
        keys: pd.Index = self._pq_keys
        positions = keys.get_indexer(self.index)
        if (positions < 0).any():
            raise PinqError("ci(): this Series has keys that were not part of the release")
        if not _same_values(np.asarray(self.values), acc.values[positions]):
            raise PinqError(
                "ci() describes the released values, and this Series' values were changed; "
                "take the interval of the released Series and transform it instead"
            )
        low, high = acc.interval(level)
        return pd.DataFrame({"low": low[positions], "high": high[positions]}, index=self.index)


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fiub" and b.dtype.kind in "fiub":
        return bool(np.array_equal(a.astype(np.float64), b.astype(np.float64), equal_nan=True))
    return all(x == y for x, y in zip(a.tolist(), b.tolist(), strict=True))


class NoisyFrame(pd.DataFrame):
    """A SQL answer: a pandas DataFrame whose noisy columns keep their accuracy.

    ``ci(column, level)`` gives a DataFrame of ``low``/``high`` for one noisy column, on the
    frame's current index (so it follows row filters); ``ci(level=...)`` without a column
    gives every noisy column side by side. Columns computed from several aggregates
    (``SUM(x) / COUNT(*)``) carry no interval of their own.
    """

    _metadata: ClassVar[list[str]] = ["_pq_accuracy"]  # type: ignore[misc]

    @property
    def _constructor(self) -> type[NoisyFrame]:
        return NoisyFrame

    @classmethod
    def from_release(cls, data: pd.DataFrame, accuracy: dict[str, Accuracy]) -> NoisyFrame:
        out = cls(data)
        out._pq_accuracy = {col: (acc, data.index.copy()) for col, acc in accuracy.items()}
        return out

    @property
    def accuracy(self) -> dict[str, Accuracy]:
        """The accuracy of each noisy column, by column name."""
        return {c: a for c, (a, _) in getattr(self, "_pq_accuracy", {}).items()}

    def ci(self, column: str | None = None, level: float = 0.95) -> pd.DataFrame:
        """``level`` confidence intervals for one noisy column, or for all of them."""
        store = getattr(self, "_pq_accuracy", {})
        if column is None:
            if not store:
                raise PinqError("this result has no noisy column with an interval")
            parts = {c: self.ci(c, level) for c in store if c in self.columns}
            return pd.concat(parts, axis=1)
        if column not in store:
            raise PinqError(
                f"column {column!r} has no interval: only single noisy aggregates carry one"
            )
        acc, index = store[column]
        low, high = acc.interval(check_level(level))
        frame = pd.DataFrame({"low": low, "high": high}, index=index)
        return frame.reindex(self.index)


@dataclass(frozen=True)
class AccuracyPreview:
    """What an aggregation *would* give at some epsilon, computed without data or charge.

    ``error`` bounds ``|released - exact|`` with probability at least ``level``; its unit is
    the value's own, except for quantiles (``unit="rank"``: rows of rank) and means without a
    group size (a bound that holds for any number of rows). ``charge`` is what it would cost
    each budget (named by ``repr``).
    """

    aggregation: str
    mechanism: str
    epsilon: Exact
    level: float
    error: float
    unit: str
    noise_scale: float | None
    charge: dict[str, object]

    def __str__(self) -> str:
        cost = "; ".join(f"{c!r} to {b}" for b, c in self.charge.items())
        unit = f" {self.unit}" if self.unit else ""
        return (
            f"{self.aggregation} at epsilon {self.epsilon}: {self.mechanism}; with probability "
            f"{self.level:g} the error is at most {self.error:.6g}{unit}; it would charge {cost}"
        )
