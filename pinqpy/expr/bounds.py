"""Public facts that follow expressions: value bounds and key sets, derived without data.

Declared bounds flow through expressions by interval arithmetic, so a bound is needed only
where none can be derived:

>>> from pinqpy.expr.parser import parse_expression as p
>>> derive_bounds(p("income / 1000"), {"income": (0, 500_000)})
(0.0, 500.0)
>>> derive_bounds(p("CASE WHEN age < 18 THEN 0 ELSE income END"), {"income": (0, 100)})
(0.0, 100.0)
>>> derive_keys(p("age >= 18"), {}, {}, {"age": "int"})
[False, True]
>>> derive_keys(p("FLOOR(age / 10)"), {}, {"age": (0, 99)}, {"age": "int"})
[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pinqpy.expr.ast import (
    AGGREGATE_FUNCTIONS,
    Between,
    Binary,
    Call,
    Case,
    Cast,
    Column,
    Expr,
    InList,
    IsNull,
    Like,
    Literal,
    Unary,
)
from pinqpy.expr.check import _NOT_CONSTANT, constant_value, infer_type, resolve_column
from pinqpy.expr.types import CAST_TYPES, ColumnType

__all__ = ["MAX_DERIVED_KEYS", "derive_bounds", "derive_keys"]

# The most keys derived from an integer range or a grid of declared keys.
MAX_DERIVED_KEYS = 10_000

Interval = tuple[float, float]


class _Null:
    """Marks an expression that is NULL on every row (it adds nothing to a hull)."""


_ALWAYS_NULL = _Null()
_Bound = Interval | _Null | None

_BOOLEAN_NODES = (InList, Between, Like, IsNull)
_COMPARISONS = frozenset({"=", "<>", "<", "<=", ">", ">=", "AND", "OR"})


def _finite(lo: float, hi: float) -> Interval | None:
    if math.isfinite(lo) and math.isfinite(hi) and lo <= hi:
        return (float(lo), float(hi))
    return None


def _hull(parts: list[_Bound]) -> _Bound:
    """The smallest interval holding every non-NULL part; None if any part is unknown."""
    known: list[Interval] = []
    for part in parts:
        if part is None:
            return None
        if isinstance(part, tuple):
            known.append(part)
    if not known:
        return _ALWAYS_NULL
    return (min(p[0] for p in known), max(p[1] for p in known))


def _never_null(e: Expr) -> bool:
    v = constant_value(e)
    return v is not _NOT_CONSTANT and v is not None


class _Deriver:
    def __init__(self, bounds: Mapping[str, tuple[float, float]]) -> None:
        self.bounds = bounds

    def derive(self, e: Expr) -> _Bound:
        try:
            return self._derive(e)
        except (OverflowError, ValueError, ZeroDivisionError):
            return None

    def _derive(self, e: Expr) -> _Bound:
        if isinstance(e, Column):
            key = resolve_column(e, self.bounds)
            if key is None:
                return None
            lo, hi = self.bounds[key]
            return _finite(float(lo), float(hi))
        if isinstance(e, Literal):
            v = e.value
            if v is None:
                return _ALWAYS_NULL
            if isinstance(v, bool):
                return (float(v), float(v))
            if isinstance(v, int | float):
                return _finite(float(v), float(v))
            return None
        if isinstance(e, _BOOLEAN_NODES):
            return (0.0, 1.0)
        if isinstance(e, Unary):
            if e.op == "NOT":
                return (0.0, 1.0)
            a = self.derive(e.operand)
            return (-a[1], -a[0]) if isinstance(a, tuple) else a
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Case):
            parts = [self.derive(r) for _, r in e.whens]
            parts.append(self.derive(e.else_) if e.else_ is not None else _ALWAYS_NULL)
            return _hull(parts)
        if isinstance(e, Cast):
            return self.cast(e)
        if isinstance(e, Call):
            return self.call(e)
        return None

    def binary(self, e: Binary) -> _Bound:
        if e.op in _COMPARISONS:
            return (0.0, 1.0)
        if e.op == "||":
            return None
        a, b = self.derive(e.left), self.derive(e.right)
        if a is None or b is None:
            return None
        if isinstance(a, _Null) or isinstance(b, _Null):
            return _ALWAYS_NULL
        (a0, a1), (b0, b1) = a, b
        if e.op == "+":
            return _finite(a0 + b0, a1 + b1)
        if e.op == "-":
            return _finite(a0 - b1, a1 - b0)
        if e.op == "*":
            products = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
            return _finite(min(products), max(products))
        if e.op == "/":
            if b0 <= 0 <= b1:  # the divisor may be zero: no finite bound
                return None
            quotients = [a0 / b0, a0 / b1, a1 / b0, a1 / b1]
            return _finite(min(quotients), max(quotients))
        if e.op == "%":
            if b0 <= 0 <= b1:
                return None
            # The remainder takes the dividend's sign and is smaller than the divisor.
            m = max(abs(b0), abs(b1))
            lo = 0.0 if a0 >= 0 else max(a0, -m)
            hi = 0.0 if a1 <= 0 else min(a1, m)
            return _finite(lo, hi)
        return None

    def cast(self, e: Cast) -> _Bound:
        target = CAST_TYPES.get(e.type_name.upper())
        if target not in ("int", "float", "bool"):
            return None
        a = self.derive(e.operand)
        if not isinstance(a, tuple):
            return a
        if target == "bool":
            return (0.0, 1.0)
        if target == "int":
            return _finite(math.floor(a[0]), math.ceil(a[1]))
        return a

    def call(self, e: Call) -> _Bound:
        name = e.name.upper()
        if name in AGGREGATE_FUNCTIONS:
            return None
        if name in ("COALESCE", "LEAST", "GREATEST", "NULLIF", "IF", "IIF"):
            return self.combine(name, e.args)
        if len(e.args) not in (1, 2):
            return None
        a = self.derive(e.args[0])
        if not isinstance(a, tuple):
            return a
        lo, hi = a
        if name == "ABS":
            if lo >= 0:
                return a
            if hi <= 0:
                return (-hi, -lo)
            return (0.0, max(-lo, hi))
        if name == "SIGN":
            return (float(_sign(lo)), float(_sign(hi)))
        if name == "FLOOR":
            return _finite(math.floor(lo), math.floor(hi))
        if name in ("CEIL", "CEILING"):
            return _finite(math.ceil(lo), math.ceil(hi))
        if name == "ROUND":
            return self.round(a, e.args[1:])
        if name == "SQRT":
            # Negative inputs give NULL, which adds nothing.
            return None if hi < 0 else _finite(math.sqrt(max(lo, 0.0)), math.sqrt(hi))
        if name == "EXP":
            return _finite(math.exp(lo), math.exp(hi))
        if name in ("LN", "LOG", "LOG10"):
            if lo <= 0:
                return None
            f = math.log if name == "LN" else math.log10
            return _finite(f(lo), f(hi))
        if name in ("POWER", "POW") and len(e.args) == 2:
            return self.power(a, e.args[1])
        return None

    def round(self, a: Interval, rest: tuple[Expr, ...]) -> _Bound:
        digits = 0
        if rest:
            d = constant_value(rest[0])
            if isinstance(d, bool) or not isinstance(d, int):
                return None
            digits = d
        scale = 10.0**digits
        # Round outward so the interval still holds every rounded value.
        return _finite(math.floor(a[0] * scale) / scale, math.ceil(a[1] * scale) / scale)

    def power(self, base: Interval, exponent_expr: Expr) -> _Bound:
        p = constant_value(exponent_expr)
        if isinstance(p, bool) or not isinstance(p, int | float):
            return None
        lo, hi = base
        if float(p).is_integer() and p >= 0:
            k = int(p)
            if k == 0:
                return (1.0, 1.0)
            if k % 2 == 1:
                return _finite(lo**k, hi**k)
            if lo >= 0:
                return _finite(lo**k, hi**k)
            if hi <= 0:
                return _finite(hi**k, lo**k)
            return _finite(0.0, max(lo**k, hi**k))
        if p > 0:
            # Fractional powers of negatives are NULL; the rest is increasing.
            return None if hi < 0 else _finite(max(lo, 0.0) ** p, hi**p)
        if lo > 0:  # negative power of positives: decreasing
            return _finite(hi**p, lo**p)
        return None

    def combine(self, name: str, args: tuple[Expr, ...]) -> _Bound:
        if name == "NULLIF":
            return self.derive(args[0]) if args else None
        if name in ("IF", "IIF"):
            return _hull([self.derive(a) for a in args[1:]]) if len(args) == 3 else None
        parts = [self.derive(a) for a in args]
        if name == "COALESCE":
            return _hull(parts)
        if any(p is None for p in parts):
            return None
        known = [(p, a) for p, a in zip(parts, args, strict=True) if isinstance(p, tuple)]
        if not known:
            return _ALWAYS_NULL
        # NULL arguments are skipped (PostgreSQL), so any single argument may be the answer;
        # arguments that are never NULL tighten one side.
        lo = min(p[0] for p, _ in known)
        hi = max(p[1] for p, _ in known)
        sure = [p for p, a in known if _never_null(a)]
        if name == "GREATEST" and sure:
            lo = max(lo, max(p[0] for p in sure))
        if name == "LEAST" and sure:
            hi = min(hi, min(p[1] for p in sure))
        return _finite(lo, hi)


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def derive_bounds(
    expr: Expr, bounds: Mapping[str, tuple[float, float]]
) -> tuple[float, float] | None:
    """The interval every non-NULL value of ``expr`` lies in, or None if it cannot be derived.

    Uses only the declared ``bounds`` (column -> (lower, upper)); never reads data.
    Booleans count as 0/1.

    >>> from pinqpy.expr.parser import parse_expression as p
    >>> derive_bounds(p("COALESCE(x, 0) * 2"), {"x": (1, 5)})
    (0.0, 10.0)
    >>> derive_bounds(p("CAST(x / 3 AS INT)"), {"x": (0, 10)})
    (0.0, 4.0)
    >>> derive_bounds(p("x / y"), {"x": (0, 1), "y": (-1, 1)}) is None
    True
    """
    try:
        result = _Deriver(bounds).derive(expr)
    except RecursionError:
        return None
    return result if isinstance(result, tuple) else None


def _case_literal_keys(e: Case) -> list[Any] | None:
    results = [r for _, r in e.whens] + [e.else_ if e.else_ is not None else Literal(None)]
    values: list[Any] = []
    seen: set[tuple[type, Any]] = set()
    for r in results:
        v = constant_value(r)
        if v is _NOT_CONSTANT:
            return None
        key = (type(v), v)
        if key not in seen:
            seen.add(key)
            values.append(v)
    return values


def _grid_keys(expr: Expr, keys: Mapping[str, list[Any]]) -> list[Any] | None:
    """Evaluate ``expr`` on every combination of its columns' public keys."""
    names: list[str] = []  # in order of first appearance, so keys vary like the text reads
    for node in expr.walk():
        if isinstance(node, Column) and node.name not in names:
            if node.name not in keys:
                return None
            names.append(node.name)
    size = 1
    for n in names:
        size *= max(len(keys[n]), 1)
        if size > MAX_DERIVED_KEYS:
            return None
    if any(isinstance(n, Column) and n.table is not None for n in expr.walk()):
        return None
    import itertools

    import pandas as pd

    from pinqpy.expr.pandas_eval import evaluate

    grid = pd.DataFrame(list(itertools.product(*(list(keys[n]) for n in names))), columns=names)
    if grid.empty:
        return []
    values = evaluate(expr, grid)
    out: list[Any] = []
    seen: set[tuple[type, Any]] = set()
    for v in values.dropna().tolist():
        key = (type(v), v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def derive_keys(
    expr: Expr,
    keys: Mapping[str, list[Any]],
    bounds: Mapping[str, tuple[float, float]],
    types: Mapping[str, ColumnType],
) -> list[Any] | None:
    """Public keys for grouping by ``expr``, from metadata only; None when there are none.

    In order of preference: a column's declared keys; ``[False, True]`` for a boolean; the
    distinct literal results of a CASE (``None`` too when it has no ELSE); the expression
    evaluated over its columns' declared keys; the integers of a derived range of at most
    10,000 values.

    >>> from pinqpy.expr.parser import parse_expression as p
    >>> derive_keys(p("CASE WHEN age < 18 THEN 'minor' ELSE 'adult' END"), {}, {}, {"age": "int"})
    ['minor', 'adult']
    >>> derive_keys(p("LOWER(state)"), {"state": ["CA", "NY"]}, {}, {"state": "str"})
    ['ca', 'ny']
    >>> derive_keys(p("income"), {}, {"income": (0, 1e6)}, {"income": "int"}) is None
    True
    """
    if isinstance(expr, Column):
        key = resolve_column(expr, keys)
        if key is not None:
            return list(keys[key])
    t = infer_type(expr, types)
    if t == "bool":
        return [False, True]
    if isinstance(expr, Case):
        found = _case_literal_keys(expr)
        if found is not None:
            return found
    if expr.columns() and not any(
        isinstance(n, Call) and n.name in AGGREGATE_FUNCTIONS for n in expr.walk()
    ):
        try:
            found = _grid_keys(expr, keys)
        except Exception:  # metadata of an unexpected shape: no keys rather than an error
            found = None
        if found is not None:
            return found
    if t == "int":
        b = derive_bounds(expr, bounds)
        if b is not None and b[1] - b[0] <= MAX_DERIVED_KEYS:
            return list(range(math.ceil(b[0]), math.floor(b[1]) + 1))
    return None
