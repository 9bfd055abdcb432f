"""Numeric helpers of pandas evaluation: the int64 range, products that wrap around, SQL
rounding, and comparisons of timestamps of different units."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

_I64_MIN = np.iinfo(np.int64).min
_I64_MAX = np.iinfo(np.int64).max
_TWO_63 = 2.0**63


def _as_datetime64(x: Any) -> Any:
    if isinstance(x, pd.Timestamp):
        return x.to_datetime64()
    return x if isinstance(x, np.ndarray | np.datetime64) else np.asarray(x)


_NS_LO = np.datetime64(pd.Timestamp.min.value, "ns").astype("datetime64[us]")
_NS_HI = np.datetime64(pd.Timestamp.max.value, "ns").astype("datetime64[us]")


def _compare_datetimes(op: Callable[[Any, Any], Any], x: Any, y: Any) -> Any:
    """Compare timestamps of different units exactly: numpy would convert both to the finer
    unit, which silently wraps a value outside its range (1500-01-01 in nanoseconds). Values
    that fit in nanoseconds compare in nanoseconds, the others in microseconds (a value outside
    the nanosecond range lies beyond every value inside it, so the order is the same)."""
    x, y = _as_datetime64(x), _as_datetime64(y)
    if np.datetime_data(x.dtype)[0] == np.datetime_data(y.dtype)[0]:
        return op(x, y)
    xu, yu = x.astype("datetime64[us]"), y.astype("datetime64[us]")
    coarse = op(xu, yu)
    fits = (xu >= _NS_LO) & (xu <= _NS_HI) & (yu >= _NS_LO) & (yu <= _NS_HI)
    if not np.any(fits):
        return coarse
    fine = op(x.astype("datetime64[ns]"), y.astype("datetime64[ns]"))
    return np.where(fits, fine, coarse)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    # SQL rounds halves away from zero (numpy rounds them to even).
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _abs_max(x: Any) -> int:
    """The largest magnitude in ``x`` as a Python int (no overflow)."""
    if isinstance(x, np.ndarray):
        if x.size == 0:
            return 0
        return max(abs(int(x.min())), abs(int(x.max())))
    return abs(int(x))


def _mul_overflow(x: Any, y: Any, r: Any) -> Any:
    """Where the int64 product ``r = x * y`` wrapped around.

    Only rows whose float product is near the int64 range can have wrapped; those are
    checked exactly by dividing back.
    """
    near = np.abs(np.asarray(x, dtype=np.float64) * np.asarray(y, dtype=np.float64)) >= 2.0**62
    if not near.any():
        return near
    xb, yb, rb = (np.broadcast_to(v, near.shape)[near] for v in (x, y, r))
    safe_x = np.where(xb == 0, 1, xb)
    wrong = (xb != 0) & ((rb // safe_x) != yb)
    wrong |= ((xb == -1) & (yb == _I64_MIN)) | ((yb == -1) & (xb == _I64_MIN))
    out = np.zeros(near.shape, dtype=bool)
    out[near] = wrong
    return out
