"""The accuracy of a release: the object mechanisms hand back with their released values, one
entry per key, which results hold and ask for intervals; and the preview of an aggregation's
accuracy before it runs (:class:`AccuracyPreview`).
"""

from __future__ import annotations

import copy
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from pinqpy.core.exact import Exact
from pinqpy.results.format import _fmt
from pinqpy.results.noise import NoiseDistribution, check_level

__all__ = ["Accuracy", "AccuracyPreview", "AdditiveAccuracy", "ArgmaxAccuracy"]


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

    @property
    def integer(self) -> bool:
        """Whether the released values are integers (counts drawn with integer noise)."""
        return self.values.dtype.kind in "iu"

    @abstractmethod
    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Per-key ``(low, high)`` covering the exact value with probability >= ``level``."""

    def symmetric_half_width(self, level: float = 0.95) -> float | None:
        """The ``t`` of a ``value ± t`` interval when the interval has that form, else None."""
        return None

    @property
    def has_interval(self) -> bool:
        """Whether :meth:`interval` gives a value-space interval (a quantile released without
        one refuses; see :meth:`rank_error`)."""
        return True

    def rank_error(self, level: float = 0.95) -> float | None:
        """For a release without a value-space interval: the data-independent error, in
        ranks (rows), that holds with probability at least ``level``; else None."""
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
    Integer values with integer noise (a count with discrete noise) get integer intervals
    (``int64`` arrays).
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

    @property
    def integer(self) -> bool:
        return self.noise.integer and self.values.dtype.kind in "iu"

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        t = self.noise.half_width(level)
        if self.integer:
            v = self.values.astype(np.int64)
            return v - int(t), v + int(t)
        v = self.values.astype(np.float64)
        # Never inf, and never a warning: only values near the largest double could overflow.
        top = np.finfo(np.float64).max
        with np.errstate(over="ignore", invalid="ignore"):
            return np.clip(v - t, -top, top), np.clip(v + t, -top, top)

    def symmetric_half_width(self, level: float = 0.95) -> float | None:
        return self.noise.half_width(level)


class ArgmaxAccuracy(Accuracy):
    """A private argmax over ``n_candidates`` public candidates with parameter ``epsilon``.

    ``interval(level)`` is ``(0, tolerance)`` for every key: with probability at least
    ``level``, the chosen candidate's exact count is at most ``tolerance`` below the largest
    exact count, where ``tolerance = ln(n / (1 - level)) / epsilon`` (the exponential
    mechanism's utility bound; see :class:`pinqpy.noise.mechanisms.ArgmaxMechanism`). It is a
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
            mechanism=mechanism or f"PermuteAndFlip(epsilon={_fmt(float(Exact(epsilon)))})",
            epsilon=epsilon,
            noise_scale=scale,
        )
        self.n_candidates = int(n_candidates)
        self.indices = (
            np.zeros(len(self), dtype=np.int64) if indices is None else np.asarray(indices)
        )

    _per_key: ClassVar[tuple[str, ...]] = ("values", "indices")

    @property
    def integer(self) -> bool:
        return False  # candidate indices or labels, not counts

    def tolerance(self, level: float = 0.95) -> float:
        """How far below the maximum count the chosen count may be, at this level."""
        lv = check_level(level)
        return math.log(self.n_candidates / (1.0 - lv)) / float(self.epsilon)

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        t = self.tolerance(level)
        return np.zeros(len(self)), np.full(len(self), t)


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
