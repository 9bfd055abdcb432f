"""The SQL functions of pandas evaluation (ABS, ROUND, SUBSTR, COALESCE, ...), each given the
evaluator and its evaluated arguments."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from pinqpy.errors import PinqError
from pinqpy.expr.pandas_eval.evaluator import _Evaluator, _Function
from pinqpy.expr.pandas_eval.numeric import _I64_MIN, _round_half_away
from pinqpy.expr.pandas_eval.values import (
    _UNSET,
    _V,
    _arr_mask,
    _float_result,
    _float_to_int,
    _or_masks,
)

_MAX_POSITION = 2**62  # beyond the length of any string


def _abs(ev: _Evaluator, a: list[_V]) -> _V:
    v = ev.numeric(a[0])
    if v.kind == "float":
        return _V("float", np.abs(v.data))
    bad = v.data == _I64_MIN
    return _V("int", np.abs(v.data), _or_masks(_arr_mask(v), bad if bad.any() else None))


def _sign(ev: _Evaluator, a: list[_V]) -> _V:
    v = ev.numeric(a[0])
    return _V(v.kind, np.sign(v.data), v._mask if v.kind == "int" else _UNSET)


def _round(ev: _Evaluator, a: list[_V]) -> _V:
    if len(a) == 1:
        return ev.to_int_fn(a[0], _round_half_away)
    x = ev.as_float(ev.numeric(a[0]))
    digits = ev.as_float(ev.numeric(a[1]))
    scale = np.power(10.0, np.trunc(digits))
    return _float_result(_round_half_away(x * scale) / scale)


def _power(ev: _Evaluator, a: list[_V]) -> _V:
    x = ev.as_float(ev.numeric(a[0]))
    y = ev.as_float(ev.numeric(a[1]))
    # NULL is NaN here, and the POWER of a NULL is NULL, as in SQL: IEEE pow makes
    # pow(NaN, 0) and pow(1, NaN) 1 (so POWER(x = NULL, 0) was 1 on pandas alone).
    null = np.isnan(x) | np.isnan(y)
    return _float_result(np.where(null, np.nan, np.power(x, y)))


def _substr(ev: _Evaluator, a: list[_V]) -> _V:
    a = [a[0], *(ev.const(v) for v in a[1:])]
    if not all(v.scalar for v in a[1:]):
        raise PinqError("the start and length of SUBSTR must be constant integers")
    if any(v.data is None for v in a[1:]):
        return ev.null_of("str")
    start = int(a[1].data)
    begin = start - 1  # SQL counts from 1; positions before the first one are skipped
    # Positions are clamped to what a string can hold (no result changes), so that a huge
    # start or length never overflows.
    first = min(max(begin, 0), _MAX_POSITION)
    if len(a) == 3:
        length = int(a[2].data)
        if length < 0:
            return ev.null_of("str")
        end = min(max(begin + length, 0), _MAX_POSITION)
        return ev.str_fn(a[0], lambda s: s.str.slice(first, end))
    return ev.str_fn(a[0], lambda s: s.str.slice(first))


def _length(ev: _Evaluator, a: list[_V]) -> _V:
    v = ev.full(ev.to_str(a[0]))
    lengths = v.data.str.len().to_numpy(dtype=np.float64, na_value=np.nan)
    return _float_to_int(lengths)


def _concat_fn(ev: _Evaluator, a: list[_V]) -> _V:
    # CONCAT skips NULLs (PostgreSQL); || does not.
    out: Any = ""
    for v in a:
        s = ev.to_str(v)
        piece = s.data.fillna("") if not s.scalar else "" if s.data is None else s.data
        out = out + piece
    return ev.full(_V("str", out if isinstance(out, pd.Series) else str(out)))


def _nullif(ev: _Evaluator, a: list[_V]) -> _V:
    x = ev.full(a[0])
    same = ev.compare("=", x, a[1]).data
    if not same.any():
        return x
    return ev.select(~same, x, ev.null_of(x.kind))


def _if(ev: _Evaluator, a: list[_V]) -> _V:
    cond = ev.boolean(a[0]).data
    kind = ev.result_kind(a[1:])
    x, y = ev.to_kind(a[1], kind), ev.to_kind(a[2], kind)
    return ev.full(ev.select(cond, x, y))


_FUNCTIONS: dict[str, _Function] = {
    "ABS": _abs,
    "SIGN": _sign,
    "FLOOR": lambda ev, a: ev.to_int_fn(a[0], np.floor),
    "CEIL": lambda ev, a: ev.to_int_fn(a[0], np.ceil),
    "CEILING": lambda ev, a: ev.to_int_fn(a[0], np.ceil),
    "ROUND": _round,
    "SQRT": lambda ev, a: ev.math1(a[0], np.sqrt),
    "LN": lambda ev, a: ev.math1(a[0], np.log),
    "LOG": lambda ev, a: ev.math1(a[0], np.log10),  # PostgreSQL: LOG(x) is base 10
    "LOG10": lambda ev, a: ev.math1(a[0], np.log10),
    "EXP": lambda ev, a: ev.math1(a[0], np.exp),
    "POWER": _power,
    "POW": _power,
    "LEAST": lambda ev, a: ev.extreme(a, True),
    "GREATEST": lambda ev, a: ev.extreme(a, False),
    "COALESCE": lambda ev, a: ev.coalesce(a),
    "NULLIF": _nullif,
    "IF": _if,
    "IIF": _if,
    "LOWER": lambda ev, a: ev.str_fn(a[0], lambda s: s.str.lower()),
    "UPPER": lambda ev, a: ev.str_fn(a[0], lambda s: s.str.upper()),
    "TRIM": lambda ev, a: ev.str_fn(a[0], lambda s: s.str.strip(" ")),
    "LTRIM": lambda ev, a: ev.str_fn(a[0], lambda s: s.str.lstrip(" ")),
    "RTRIM": lambda ev, a: ev.str_fn(a[0], lambda s: s.str.rstrip(" ")),
    "LENGTH": _length,
    "SUBSTR": _substr,
    "SUBSTRING": _substr,
    "CONCAT": _concat_fn,
}
