"""Short spellings of released numbers, shared by the results' reprs and their HTML: a value
with its interval is ``value ± e`` when the interval is symmetric about it, ``value [low,
high]`` when it is not."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


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


def sig(x: float, digits: int = 4) -> str:
    """``x`` with at most ``digits`` significant digits, written out below a million and in
    exponent form above (an error figure, where more digits would claim false precision).

    >>> sig(102912.7), sig(500000), sig(22531234.5), sig(29.9573), sig(0.000123456), sig(50)
    ('102900', '500000', '2.253e+07', '29.96', '0.0001235', '50')
    """
    x = float(x)
    if not math.isfinite(x):
        return repr(x)
    if x == 0:
        return "0"
    rounded = float(f"{x:.{digits}g}")
    if 1e-4 <= abs(rounded) < 1e6:
        return np.format_float_positional(rounded, trim="-")
    return f"{rounded:.{digits}g}"


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fiub" and b.dtype.kind in "fiub":
        return bool(np.array_equal(a.astype(np.float64), b.astype(np.float64), equal_nan=True))
    return all(x == y for x, y in zip(a.tolist(), b.tolist(), strict=True))


def _num(x: float, integer: bool) -> str:
    """A released number as shown next to its interval."""
    if integer:
        return str(int(x))
    return _fmt(float(x), 6)


def _symmetric(value: float, low: float, high: float) -> float | None:
    """``e`` when ``[low, high]`` is ``value ± e`` (to float rounding), else None."""
    up, down = high - value, value - low
    if not (np.isfinite(up) and np.isfinite(down)):
        return None
    if abs(up - down) <= 1e-9 * max(abs(up), abs(down), abs(value), 1e-300):
        return max(up, down)
    return None


def value_text(value: float, low: float, high: float, integer: bool = False) -> str:
    """``value ± e`` for a symmetric interval, else ``value [low, high]``.

    >>> value_text(512, 509, 515, integer=True), value_text(41.2, 40.1, 42.9)
    ('512 ± 3', '41.2 [40.1, 42.9]')
    """
    shown = _num(value, integer)
    e = _symmetric(float(value), float(low), float(high))
    if e is not None:
        return f"{shown} ± {_num(e, integer)}"
    return f"{shown} [{_num(low, integer)}, {_num(high, integer)}]"


def interval_text(low: float, high: float, value: float, integer: bool = False) -> str:
    """The interval alone: ``± e`` when symmetric about ``value``, else ``[low, high]``."""
    e = _symmetric(float(value), float(low), float(high))
    if e is not None:
        return f"± {_num(e, integer)}"
    return f"[{_num(low, integer)}, {_num(high, integer)}]"


def _is_integer(acc: Any, low: Any) -> bool:
    return bool(getattr(acc, "integer", False)) and np.asarray(low).dtype.kind in "iu"


def interval_cells(
    values: Any, low: Any, high: Any, acc: Any, *, with_value: bool = True
) -> list[str]:
    """One cell per value: :func:`value_text` (or :func:`interval_text` alone)."""
    integer = _is_integer(acc, low)
    vals = np.asarray(values)
    out = []
    for v, lo, hi in zip(vals.tolist(), np.asarray(low).tolist(), np.asarray(high).tolist(),
                         strict=True):  # fmt: skip
        out.append(
            value_text(v, lo, hi, integer) if with_value else interval_text(lo, hi, v, integer)
        )
    return out
