"""Key values as every engine matches and releases them: one spelling per key.

All NULL-likes (None, NaN, ``pd.NA``, ``NaT``) are one key, ``None``; a typed column's keys take
its Python type (``-0.0`` is ``+0.0``; ``1``, ``1.0`` and ``True`` are one number). Public key
lists are checked in this spelling (:func:`pinqpy.plan.meta.check_keys`), parts match rows by it,
and released keys are spelt by it, so nothing released depends on which row came first.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pinqpy.expr.types import valid_text

__all__ = ["NO_MATCH", "TYPED_KINDS", "canonical_key", "is_null_key"]

# A key value that no row of a column can equal (``1.5`` on an integer column, text on a number
# column): it matches nothing and counts 0.
NO_MATCH: Any = type("NoMatch", (), {"__repr__": lambda self: "NO_MATCH"})()


_NEVER_NULL = frozenset({str, int, bool})


def is_null_key(v: object) -> bool:
    """Whether ``v`` is NULL-like: None, NaN (float or numpy), ``pd.NA`` or ``NaT`` (pandas or
    numpy). Every NULL-like value is one and the same key."""
    if type(v) in _NEVER_NULL:  # the usual keys skip pandas' isna (a few µs a key)
        return False
    if v is None or v is pd.NA or v is pd.NaT:
        return True
    if isinstance(v, float | np.floating | np.datetime64 | np.timedelta64):
        return bool(np.isnat(v)) if isinstance(v, np.datetime64 | np.timedelta64) else bool(v != v)
    try:
        return bool(pd.isna(v)) if pd.api.types.is_scalar(v) else False
    except (TypeError, ValueError):
        return False


def _number(v: object) -> int | float | None:
    """``v`` as a Python int (integral numbers and bools) or float (+0.0 for zero), or None
    when it is not a real number."""
    import numbers

    if isinstance(v, bool | np.bool_):
        return int(bool(v))
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        if f.is_integer():
            return int(f)
        return f + 0.0
    return None


def canonical_key(v: object, kind: str) -> object:
    """The one spelling of a key value of a column of ``kind`` ("int", "float", "bool",
    "str", "datetime"; anything else is untyped, as pandas' object columns are): the value
    every row equal to ``v`` under the column's type is released as, and matched by.

    - Every NULL-like value (None, NaN, ``pd.NA``, ``NaT``) is ``None``.
    - Typed columns give the Python type of the column: ``int``, ``float`` (``+0.0`` for zero,
      so ``-0.0`` is never released), ``bool``, ``str``, ``pd.Timestamp``; numpy scalars
      become Python scalars. A value no row of the column can equal (``1.5`` or ``"a"`` on an
      integer column, ``2`` on a boolean one) is :data:`NO_MATCH`.
    - Untyped columns compare as Python does (``1 == 1.0 == True``): a number is an ``int``
      when integral (so ``True`` and ``1.0`` are released as ``1``, whatever row came
      first), else a ``float``; text is ``str``; anything else is kept as it is.

    >>> canonical_key(-0.0, "float"), canonical_key(True, "int"), canonical_key(1.0, "any")
    (0.0, 1, 1)
    >>> canonical_key(float("nan"), "str") is None, canonical_key(1.5, "int")
    (True, NO_MATCH)
    """
    if is_null_key(v):
        return None
    if kind in ("int", "float", "bool"):
        num = _number(v)
        if num is None:
            return NO_MATCH
        if kind == "float":
            return float(num) + 0.0
        if isinstance(num, float):
            return NO_MATCH
        if kind == "int":
            return num
        return bool(num) if num in (0, 1) else NO_MATCH
    if kind == "str":
        # Text reads as tables do: a lone surrogate is U+FFFD (pinqpy.expr.types.valid_text).
        return valid_text(str(v)) if isinstance(v, str) else NO_MATCH
    if kind == "datetime":
        if isinstance(v, str) or _number(v) is not None:
            return NO_MATCH
        try:
            return pd.Timestamp(v)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return NO_MATCH
    num = _number(v)
    if num is not None:
        return num
    if isinstance(v, str):
        return valid_text(str(v))
    if isinstance(v, np.generic):
        return v.item()
    return v


TYPED_KINDS = frozenset({"int", "float", "bool", "str", "datetime"})
