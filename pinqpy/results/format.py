"""Short spellings of released numbers, shared by the results' reprs and their HTML."""

from __future__ import annotations

import math

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


def _same_values(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "fiub" and b.dtype.kind in "fiub":
        return bool(np.array_equal(a.astype(np.float64), b.astype(np.float64), equal_nan=True))
    return all(x == y for x, y in zip(a.tolist(), b.tolist(), strict=True))
