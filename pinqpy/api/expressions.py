"""Building expressions in Python: ``pq.col("age") >= 18`` instead of ``"age >= 18"``.

An :class:`Expression` wraps the same syntax tree that expression strings parse into, so both
spellings mean exactly the same thing. Operators build SQL, they do not compute: ``==``
returns an Expression, and ``&``, ``|``, ``~`` stand for AND, OR, NOT (Python's ``and``,
``or``, ``not`` cannot be overloaded and raise an error that says so).

>>> from pinqpy.api.expressions import col, lit, func
>>> (col("age") >= 18) & (col("sex") == "F")
Expression("age >= 18 AND sex = 'F'")
>>> (col("income") / 1000).floor().to_sql()
'FLOOR(income / 1000)'
>>> func("GREATEST", col("a"), 0).to_sql()
'GREATEST(a, 0)'
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from pinqpy.errors import PinqError
from pinqpy.expr.ast import (
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
    negate,
)
from pinqpy.expr.parser import parse_expression
from pinqpy.expr.types import CAST_TYPES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ExprLike", "Expression", "as_expr", "case", "col", "func", "lit", "unwrap"]

_FUNCTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class Expression:
    """A SQL expression built in Python; combine with operators and methods.

    ``Expression("age + 1")`` parses a string; usually you start from :func:`col` or
    :func:`lit`.

    >>> e = (col("age") + 1) * 2
    >>> e.to_sql()
    '(age + 1) * 2'
    >>> sorted(e.expr.columns())
    ['age']
    """

    __slots__ = ("_expr",)
    __hash__ = None  # type: ignore[assignment]  # == builds SQL, so it cannot hash by value

    def __init__(self, expr: Expr | str) -> None:
        if isinstance(expr, str):
            expr = parse_expression(expr)
        if not isinstance(expr, Expr):
            raise PinqError(
                f"Expression wraps an expression tree or string, not {type(expr).__name__}"
            )
        self._expr = expr

    @property
    def expr(self) -> Expr:
        """The underlying syntax tree."""
        return self._expr

    def to_sql(self) -> str:
        """The expression as SQL text (parses back to the same tree)."""
        return self._expr.to_sql()

    def __repr__(self) -> str:
        return f"Expression({_double_quoted(self.to_sql())})"

    def __str__(self) -> str:
        return self.to_sql()

    def __bool__(self) -> bool:
        raise PinqError(
            "an Expression has no truth value: combine conditions with & (AND), | (OR) and "
            "~ (NOT) instead of and/or/not, and write 0 < x < 1 as (x > 0) & (x < 1)"
        )

    # -- arithmetic -----------------------------------------------------------------------
    def __add__(self, other: Any) -> Expression:
        return _binary("+", self, other)

    def __radd__(self, other: Any) -> Expression:
        return _binary("+", other, self)

    def __sub__(self, other: Any) -> Expression:
        return _binary("-", self, other)

    def __rsub__(self, other: Any) -> Expression:
        return _binary("-", other, self)

    def __mul__(self, other: Any) -> Expression:
        return _binary("*", self, other)

    def __rmul__(self, other: Any) -> Expression:
        return _binary("*", other, self)

    def __truediv__(self, other: Any) -> Expression:
        return _binary("/", self, other)

    def __rtruediv__(self, other: Any) -> Expression:
        return _binary("/", other, self)

    def __floordiv__(self, other: Any) -> Expression:
        return _binary("/", self, other).floor()

    def __rfloordiv__(self, other: Any) -> Expression:
        return _binary("/", other, self).floor()

    def __mod__(self, other: Any) -> Expression:
        return _binary("%", self, other)

    def __rmod__(self, other: Any) -> Expression:
        return _binary("%", other, self)

    def __pow__(self, other: Any) -> Expression:
        return func("POWER", self, other)

    def __rpow__(self, other: Any) -> Expression:
        return func("POWER", other, self)

    def __neg__(self) -> Expression:
        return Expression(negate(self._expr))

    def __pos__(self) -> Expression:
        return self

    # -- comparison -----------------------------------------------------------------------
    def __eq__(self, other: Any) -> Expression:  # type: ignore[override]
        return _binary("=", self, other)

    def __ne__(self, other: Any) -> Expression:  # type: ignore[override]
        return _binary("<>", self, other)

    def __lt__(self, other: Any) -> Expression:
        return _binary("<", self, other)

    def __le__(self, other: Any) -> Expression:
        return _binary("<=", self, other)

    def __gt__(self, other: Any) -> Expression:
        return _binary(">", self, other)

    def __ge__(self, other: Any) -> Expression:
        return _binary(">=", self, other)

    # -- logic ----------------------------------------------------------------------------
    def __and__(self, other: Any) -> Expression:
        return _binary("AND", self, other)

    def __rand__(self, other: Any) -> Expression:
        return _binary("AND", other, self)

    def __or__(self, other: Any) -> Expression:
        return _binary("OR", self, other)

    def __ror__(self, other: Any) -> Expression:
        return _binary("OR", other, self)

    def __invert__(self) -> Expression:
        return Expression(Unary("NOT", self._expr))

    # -- predicates -----------------------------------------------------------------------
    def isin(self, values: Iterable[Any]) -> Expression:
        """``x IN (values)``; an empty list is false for every row, as in pandas.

        >>> col("state").isin(["CA", "NY"]).to_sql()
        "state IN ('CA', 'NY')"
        """
        if isinstance(values, str | bytes):
            raise PinqError("isin takes a list of values, not a single string")
        items = tuple(_to_expr(v) for v in values)
        if not items:
            return lit(False)
        return Expression(InList(self._expr, items))

    def between(self, low: Any, high: Any) -> Expression:
        """``x BETWEEN low AND high`` (both ends included)."""
        return Expression(Between(self._expr, _to_expr(low), _to_expr(high)))

    def like(self, pattern: str) -> Expression:
        """``x LIKE pattern``: ``%`` matches any run of characters, ``_`` exactly one."""
        if not isinstance(pattern, str):
            raise PinqError("like takes a pattern string such as 'A%'")
        return Expression(Like(self._expr, Literal(pattern)))

    def is_null(self) -> Expression:
        """``x IS NULL``."""
        return Expression(IsNull(self._expr))

    def is_not_null(self) -> Expression:
        """``x IS NOT NULL``."""
        return Expression(IsNull(self._expr, True))

    # -- conversions and functions --------------------------------------------------------
    def cast(self, type_name: str) -> Expression:
        """``CAST(x AS type_name)``, e.g. ``"INT"``, ``"DOUBLE"``, ``"VARCHAR"``."""
        upper = str(type_name).upper()
        if upper not in CAST_TYPES:
            raise PinqError(
                f"unknown type {type_name!r}; use one of " + ", ".join(sorted(CAST_TYPES))
            )
        return Expression(Cast(self._expr, upper))

    def abs(self) -> Expression:
        return func("ABS", self)

    def floor(self) -> Expression:
        return func("FLOOR", self)

    def ceil(self) -> Expression:
        return func("CEIL", self)

    def round(self, digits: int = 0) -> Expression:
        """``ROUND(x)`` (an integer, halves away from zero) or ``ROUND(x, digits)``."""
        if isinstance(digits, bool) or not isinstance(digits, int):
            raise PinqError("round's digits must be an int")
        return func("ROUND", self) if digits == 0 else func("ROUND", self, digits)

    def sqrt(self) -> Expression:
        return func("SQRT", self)

    def ln(self) -> Expression:
        return func("LN", self)

    def log10(self) -> Expression:
        return func("LOG10", self)

    def exp(self) -> Expression:
        return func("EXP", self)

    def lower(self) -> Expression:
        return func("LOWER", self)

    def upper(self) -> Expression:
        return func("UPPER", self)

    def length(self) -> Expression:
        return func("LENGTH", self)

    def trim(self) -> Expression:
        return func("TRIM", self)

    def substr(self, start: int, length: int | None = None) -> Expression:
        """``SUBSTR(x, start[, length])`` with 1-based ``start``."""
        return (
            func("SUBSTR", self, start) if length is None else func("SUBSTR", self, start, length)
        )

    def coalesce(self, *others: Any) -> Expression:
        """The first of ``self, *others`` that is not NULL."""
        return func("COALESCE", self, *others)


def _double_quoted(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _binary(op: str, left: Any, right: Any) -> Expression:
    return Expression(Binary(op, _to_expr(left), _to_expr(right)))


def _to_expr(value: Any) -> Expr:
    """An operand as a tree: Expressions as they are, Python values as literals."""
    if isinstance(value, Expression):
        return value.expr
    if isinstance(value, Expr):
        return value
    return lit(value).expr


def _literal_value(value: Any) -> int | float | str | bool | None:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return None  # NaN is how pandas spells a missing number
        if math.isinf(value):
            raise PinqError("lit() takes finite numbers; infinity has no SQL literal")
        return value
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat(sep=" ") if isinstance(value, _dt.datetime) else value.isoformat()
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return _literal_value(item())
    if type(value).__name__ == "Timestamp":
        return _literal_value(value.to_pydatetime())
    raise PinqError(
        f"cannot use a {type(value).__name__} as a SQL literal; use int, float, str, bool or None"
    )


def col(name: str) -> Expression:
    """A column reference.

    >>> col("odd name").to_sql()
    '"odd name"'
    """
    if not isinstance(name, str) or not name:
        raise PinqError("col() takes a non-empty column name")
    return Expression(Column(name))


def lit(value: Any) -> Expression:
    """A constant: int, float, str, bool, None (NULL), or a date/datetime (as ISO text).

    >>> lit("it's").to_sql(), lit(None).to_sql(), lit(-2).to_sql()
    ("'it''s'", 'NULL', '-2')
    """
    if isinstance(value, Expression):
        return value
    return Expression(Literal(_literal_value(value)))


def func(name: str, *args: Any) -> Expression:
    """A call of the SQL function ``name`` (checked against the schema when used).

    >>> func("coalesce", col("x"), 0).to_sql()
    'COALESCE(x, 0)'
    """
    if not isinstance(name, str) or not _FUNCTION_NAME.match(name):
        raise PinqError(f"{name!r} is not a function name")
    return Expression(Call(name.upper(), tuple(_to_expr(a) for a in args)))


def case(*whens: tuple[Any, Any], else_: Any = None) -> Expression:
    """``CASE WHEN c1 THEN r1 ... ELSE else_ END`` from ``(condition, result)`` pairs.

    >>> case((col("age") < 18, "minor"), else_="adult").to_sql()
    "CASE WHEN age < 18 THEN 'minor' ELSE 'adult' END"
    """
    if not whens:
        raise PinqError("case() needs at least one (condition, result) pair")
    pairs = []
    for pair in whens:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise PinqError("each case() argument is a (condition, result) pair")
        pairs.append((_to_expr(pair[0]), _to_expr(pair[1])))
    return Expression(Case(tuple(pairs), None if else_ is None else _to_expr(else_)))


def as_expr(value: str | Expression, *, what: str = "expression") -> tuple[Expr, str | None]:
    """An expression string or Expression as ``(tree, source text or None)``.

    The text is returned so error messages can point into what the user wrote.

    >>> e, text = as_expr("age > 1")
    >>> e.to_sql(), text
    ('age > 1', 'age > 1')
    >>> as_expr(col("age"))[1] is None
    True
    """
    if isinstance(value, str):
        return parse_expression(value), value
    if isinstance(value, Expression):
        return value.expr, None
    if isinstance(value, Expr):
        return value, None
    raise PinqError(
        f'{what} must be an expression string such as "age >= 18" or a pq.col(...) '
        f"expression, not {type(value).__name__}"
    )


#: What an argument that is an expression may be: text, an Expression, or (where the curator
#: allows it) a Python callable over the rows.
ExprLike = str | Expression | Callable[["pd.DataFrame"], Any]


class _NotAnExpression:
    """Stands for an argument of no accepted kind, so the pipeline refuses it as such."""


def unwrap(value: object) -> object:
    """An argument as :mod:`pinqpy.pipeline` takes it: an Expression becomes its syntax tree.

    A bare syntax tree is not one of the user's spellings (text, Expression or callable), so
    it becomes a placeholder that the pipeline refuses with the message for a wrong kind.
    """
    if isinstance(value, Expression):
        return value.expr
    if isinstance(value, Expr):
        return _NotAnExpression()
    return value
