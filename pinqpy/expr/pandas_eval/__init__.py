"""Vectorized evaluation of expressions over a pandas DataFrame, with SQL NULL semantics.

NULL propagates through arithmetic and comparisons; AND, OR and NOT use three-valued logic.
A fault that depends on the data (division by zero, overflow, the square root of a negative,
a value that does not CAST) gives NULL for that row: evaluation never raises because of a
value and never warns. Work is done column-at-a-time with numpy; the only per-row loop reads
the Python objects of an ``object`` column once.

Types come from dtypes, never from values. An ``object`` column is of kind ``"any"``: each of
its values is read on its own, as it would be in a column of its own type (a number as a
number, a string as a string; anything else, such as a date or a list, as NULL), so one row
never changes how another is compared (see :data:`pinqpy.expr.types.ANY_RULE`).

The parts: :mod:`.values` (the kinds of values and their conversions), :mod:`.numeric`
(int64 overflow, rounding, timestamps), :mod:`.like` (LIKE matching), :mod:`.evaluator`
(operators, comparisons, CAST) and :mod:`.functions` (the SQL function table).

>>> import pandas as pd
>>> from pinqpy.expr.parser import parse_expression as p
>>> df = pd.DataFrame({"a": [1, 2, 3], "b": [0, 1, None]})
>>> evaluate(p("a / b"), df).tolist()
[nan, 2.0, nan]
>>> predicate_mask(p("b IS NULL OR a > 2"), df).tolist()
[False, False, True]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.errors import PinqError
from pinqpy.expr.ast import Expr
from pinqpy.expr.pandas_eval.evaluator import _Evaluator
from pinqpy.expr.pandas_eval.functions import _FUNCTIONS
from pinqpy.expr.pandas_eval.values import _V, _to_series

__all__ = ["evaluate", "predicate_mask"]


def _guarded(expr: Expr, run: Callable[[], Any]) -> Any:
    """Run an evaluation step; library errors become PinqErrors that quote no data."""
    try:
        with np.errstate(all="ignore"):
            return run()
    except PinqError:
        raise
    except RecursionError:
        raise PinqError("the expression is nested too deeply to evaluate") from None
    except (ArithmeticError, AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        # A library error message may quote a value from the data: report only its kind.
        raise PinqError(
            f"could not evaluate {_short(expr)} ({type(exc).__name__}); details are hidden "
            "because they may contain private values"
        ) from None


def _evaluate(expr: Expr, df: pd.DataFrame) -> tuple[_Evaluator, _V]:
    ev = _Evaluator(df, len(df), _FUNCTIONS)
    ev.mark(expr)
    return ev, _guarded(expr, lambda: ev.full(ev.eval(expr)))


def _short(expr: Expr) -> str:
    try:
        text = expr.to_sql()
    except RecursionError:
        return "the expression"
    return repr(text if len(text) <= 60 else text[:57] + "...")


def evaluate(expr: Expr, df: pd.DataFrame) -> pd.Series:
    """The value of ``expr`` on every row of ``df``, as a Series aligned with ``df.index``.

    NULL is NaN for floats, NA in nullable integer and boolean results, NaN in strings.

    >>> import pandas as pd
    >>> from pinqpy.expr.parser import parse_expression as p
    >>> df = pd.DataFrame({"s": ["Ann", None]})
    >>> evaluate(p("LOWER(s) || '!'"), df).tolist()
    ['ann!', nan]
    """
    _, v = _evaluate(expr, df)
    return _guarded(expr, lambda: _to_series(v, df.index))


def predicate_mask(expr: Expr, df: pd.DataFrame) -> np.ndarray:
    """A numpy bool array: True exactly where ``expr`` is TRUE (NULL and FALSE give False).

    >>> import pandas as pd
    >>> from pinqpy.expr.parser import parse_expression as p
    >>> predicate_mask(p("age >= 18"), pd.DataFrame({"age": [12, 30]})).tolist()
    [False, True]
    """
    ev, v = _evaluate(expr, df)
    v = _guarded(expr, lambda: ev.full(ev.boolean(v)))
    # Bool data is false wherever the value is NULL, so it is the mask as it stands.
    out = np.asarray(v.data, dtype=bool)
    if not out.flags.owndata:
        out = out.copy()  # a bare bool column: never hand out a view of the frame's data
    return out
