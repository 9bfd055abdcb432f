"""The immutable syntax tree of pinqpy expressions.

Plans hold these nodes, so this module imports neither pandas nor lark. Nodes compare by value
and ignore their source position, so ``parse_expression("a+1") == parse_expression("a + 1")``.

>>> e = Binary(">=", Column("age"), Literal(18))
>>> e.to_sql()
'age >= 18'
>>> sorted(e.columns())
['age']
>>> Binary("*", Binary("+", Column("a"), Literal(1)), Column("b")).to_sql()
'(a + 1) * b'
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

__all__ = [
    "AGGREGATE_FUNCTIONS",
    "AGGREGATE_SPELLINGS",
    "SCALAR_FUNCTIONS",
    "Between",
    "Binary",
    "Call",
    "Case",
    "Cast",
    "Column",
    "Expr",
    "InList",
    "IsNull",
    "Like",
    "Literal",
    "NamedArg",
    "Pos",
    "Unary",
    "canonical_aggregate",
    "contains_aggregate",
    "negate",
    "quote_identifier",
]

AGGREGATE_FUNCTIONS: frozenset[str] = frozenset(
    {
        "COUNT",
        "SUM",
        "AVG",
        "MEDIAN",
        "PERCENTILE",
        "QUANTILE",
        "VARIANCE",
        "STDDEV",
        "VAR_POP",
        "STDDEV_POP",
        "MIN",
        "MAX",
        # Other systems' spellings (AGGREGATE_SPELLINGS says what each one is).
        "VAR",
        "VAR_SAMP",
        "STD",
        "STDDEV_SAMP",
        "PERCENTILE_CONT",
        "STDEV",
        "STDEVP",
        "VARP",
    }
)

# Spellings of BigQuery, SmartNoise and PostgreSQL and the aggregate each one is: VARIANCE and
# STDDEV are the sample forms (divide by n - 1), as in those systems; VAR_POP and STDDEV_POP
# divide by n. PERCENTILE_CONT(x, p) takes its arguments in PERCENTILE's order. SQL Server's
# STDEV and its population forms STDEVP and VARP (SmartNoise's tests write STDEV) likewise.
AGGREGATE_SPELLINGS: dict[str, str] = {
    "VAR": "VARIANCE",
    "VAR_SAMP": "VARIANCE",
    "STD": "STDDEV",
    "STDDEV_SAMP": "STDDEV",
    "PERCENTILE_CONT": "PERCENTILE",
    "STDEV": "STDDEV",
    "STDEVP": "STDDEV_POP",
    "VARP": "VAR_POP",
}


def canonical_aggregate(name: str) -> str:
    """The aggregate a spelling names (upper-case).

    >>> canonical_aggregate("var_samp"), canonical_aggregate("VAR_POP")
    ('VARIANCE', 'VAR_POP')
    """
    upper = name.upper()
    return AGGREGATE_SPELLINGS.get(upper, upper)


SCALAR_FUNCTIONS: frozenset[str] = frozenset(
    {
        "ABS",
        "FLOOR",
        "CEIL",
        "CEILING",
        "ROUND",
        "SQRT",
        "LN",
        "LOG",
        "LOG10",
        "EXP",
        "POWER",
        "POW",
        "SIGN",
        "LEAST",
        "GREATEST",
        "COALESCE",
        "NULLIF",
        "IF",
        "IIF",
        "LOWER",
        "UPPER",
        "LENGTH",
        "SUBSTR",
        "SUBSTRING",
        "TRIM",
        "LTRIM",
        "RTRIM",
        "CONCAT",
    }
)

BINARY_OPS: frozenset[str] = frozenset(
    {"+", "-", "*", "/", "%", "=", "<>", "<", "<=", ">", ">=", "AND", "OR", "||"}
)


@dataclass(frozen=True)
class Pos:
    """A 1-based line and column: the first character of a node's first token."""

    line: int
    column: int


# Binding strength used by to_sql; the grammar has the same levels (loosest first).
_OR, _AND, _NOT, _IS, _CMP, _PRED, _CONCAT, _ADD, _MUL, _UNARY, _PRIMARY = range(1, 12)
_BINARY_LEVEL = {
    "OR": _OR,
    "AND": _AND,
    "=": _CMP,
    "<>": _CMP,
    "<": _CMP,
    "<=": _CMP,
    ">": _CMP,
    ">=": _CMP,
    "||": _CONCAT,
    "+": _ADD,
    "-": _ADD,
    "*": _MUL,
    "/": _MUL,
    "%": _MUL,
}

_BARE_NAME = re.compile(r"[^\W\d]\w*\Z")

# Words quoted in output even before the statement grammar reserves them, so that to_sql()
# text stays valid whichever SQL keywords the grammar file defines.
_SQL_WORDS = frozenset(
    [
        "ALL",
        "AND",
        "ANY",
        "AS",
        "ASC",
        "BETWEEN",
        "BOUNDS",
        "BY",
        "CASE",
        "CAST",
        "CROSS",
        "DESC",
        "DESCRIBE",
        "DISTINCT",
        "ELSE",
        "END",
        "EXCEPT",
        "EXISTS",
        "EXPLAIN",
        "FALSE",
        "FROM",
        "FULL",
        "GROUP",
        "HAVING",
        "IN",
        "INNER",
        "INTERSECT",
        "IS",
        "JOIN",
        "LEFT",
        "LIKE",
        "LIMIT",
        "NATURAL",
        "NOT",
        "NULL",
        "OFFSET",
        "ON",
        "OPTIONS",
        "OR",
        "ORDER",
        "OUTER",
        "RIGHT",
        "SELECT",
        "SHOW",
        "TABLE",
        "TABLES",
        "THEN",
        "TRUE",
        "UNION",
        "USING",
        "WHEN",
        "WHERE",
        "WITH",
    ]
)


def quote_identifier(name: str) -> str:
    """A column or table name as SQL text: bare when it can be, else in double quotes.

    >>> quote_identifier("age"), quote_identifier("odd name"), quote_identifier("select")
    ('age', '"odd name"', '"select"')
    """
    from pinqpy.core.grammar import keywords  # late: only rendering needs the grammar file

    upper = name.upper()
    if _BARE_NAME.match(name) and upper not in _SQL_WORDS and upper not in keywords():
        return name
    return '"' + name.replace('"', '""') + '"'


class _Sql:
    """Accumulates SQL text and the offset at which each node's text starts."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.offsets: dict[int, int] = {}

    def emit(self, s: str) -> None:
        self.parts.append(s)
        self.length += len(s)

    def node(self, e: Expr, min_level: int) -> None:
        """Render ``e``, in parentheses if it binds more loosely than ``min_level``."""
        paren = e._level() < min_level
        if paren:
            self.emit("(")
        self.offsets.setdefault(id(e), self.length)
        e._render(self)
        if paren:
            self.emit(")")

    def nodes(self, items: tuple[Expr, ...]) -> None:
        for i, item in enumerate(items):
            if i:
                self.emit(", ")
            self.node(item, _OR)

    def text(self) -> str:
        return "".join(self.parts)


@dataclass(frozen=True)
class Expr:
    """Base of every expression node."""

    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)

    _child_fields: ClassVar[tuple[str, ...]] = ()

    def children(self) -> tuple[Expr, ...]:
        """The direct sub-expressions, in source order."""
        out: list[Expr] = []
        for name in self._child_fields:
            value = getattr(self, name)
            if isinstance(value, Expr):
                out.append(value)
            elif isinstance(value, tuple):
                for item in value:
                    if isinstance(item, Expr):
                        out.append(item)
                    elif isinstance(item, tuple):  # CASE's (condition, result) pairs
                        out.extend(x for x in item if isinstance(x, Expr))
        return tuple(out)

    def walk(self) -> Iterator[Expr]:
        """This node and every node below it, parents before children."""
        stack: list[Expr] = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children()))

    def columns(self) -> frozenset[str]:
        """Names of the columns the expression reads."""
        return frozenset(n.name for n in self.walk() if isinstance(n, Column))

    def map_children(self, fn: Callable[[Expr], Expr]) -> Expr:
        """A copy with ``fn`` applied to each direct child (position kept)."""
        changes: dict[str, Any] = {}
        for name in self._child_fields:
            value = getattr(self, name)
            if isinstance(value, Expr):
                changes[name] = fn(value)
            elif isinstance(value, tuple):
                changes[name] = tuple(
                    tuple(fn(x) for x in item) if isinstance(item, tuple) else fn(item)
                    for item in value
                )
        return replace(self, **changes) if changes else self

    def transform(self, fn: Callable[[Expr], Expr]) -> Expr:
        """Rewrite bottom-up: children first, then ``fn`` on the rebuilt node."""
        return fn(self.map_children(lambda c: c.transform(fn)))

    def to_sql(self) -> str:
        """Canonical SQL text; parsing it gives back an equal tree."""
        out = _Sql()
        out.node(self, _OR)
        return out.text()

    def sql_offsets(self) -> tuple[str, dict[int, int]]:
        """``to_sql()`` plus, for each node (by ``id``), the 0-based offset where it starts."""
        out = _Sql()
        out.node(self, _OR)
        return out.text(), out.offsets

    def __str__(self) -> str:
        return self.to_sql()

    # Rendering hooks for subclasses.
    def _level(self) -> int:
        return _PRIMARY

    def _render(self, out: _Sql) -> None:
        raise NotImplementedError


@dataclass(frozen=True)
class Column(Expr):
    """A column reference; ``table`` is set for qualified names (``v.visits``).

    ``path`` is how a SQL statement spelled the reference: each dotted part (``schema``,
    ``table``, ``name``) with whether it was quoted. SQL matches an unquoted part
    case-insensitively and a quoted one exactly; a Column with no path (built in Python or
    parsed from an expression string) names its column exactly. The path takes no part in
    equality, hashing or JSON: the SQL compiler replaces every such reference by the exact
    column it resolves to before anything else sees it.
    """

    name: str
    table: str | None = None
    path: tuple[tuple[str, bool], ...] = field(default=(), compare=False, repr=False, kw_only=True)

    def _render(self, out: _Sql) -> None:
        if self.table is not None:
            out.emit(quote_identifier(self.table) + ".")
        out.emit(quote_identifier(self.name))


def _literal_key(value: object) -> tuple[type, object]:
    # TRUE, 1 and 1.0 are different literals even though Python says they are equal.
    return (type(value), value)


@dataclass(frozen=True, eq=False)
class Literal(Expr):
    """A constant: int, float, str, bool or None (NULL).

    >>> Literal(1) == Literal(True), Literal("it's").to_sql()
    (False, "'it''s'")
    """

    value: int | float | str | bool | None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Literal):
            return NotImplemented
        return _literal_key(self.value) == _literal_key(other.value)

    def __hash__(self) -> int:
        return hash(_literal_key(self.value))

    def _level(self) -> int:
        v = self.value
        negative = (
            isinstance(v, int | float) and not isinstance(v, bool) and math.copysign(1, v) < 0
        )
        return _UNARY if negative else _PRIMARY

    def _render(self, out: _Sql) -> None:
        v = self.value
        if v is None:
            out.emit("NULL")
        elif isinstance(v, bool):
            out.emit("TRUE" if v else "FALSE")
        elif isinstance(v, int):
            out.emit(str(v))
        elif isinstance(v, float):
            if math.isnan(v):
                out.emit("CAST(NULL AS DOUBLE)")
            elif math.isinf(v):
                out.emit("1e999" if v > 0 else "-1e999")  # parses back to +-inf
            else:
                out.emit(repr(v))
        else:
            out.emit("'" + str(v).replace("'", "''") + "'")


@dataclass(frozen=True)
class Unary(Expr):
    """``-x`` or ``NOT x``."""

    op: str
    operand: Expr

    _child_fields: ClassVar[tuple[str, ...]] = ("operand",)

    def _level(self) -> int:
        return _NOT if self.op == "NOT" else _UNARY

    def _render(self, out: _Sql) -> None:
        if self.op == "NOT":
            out.emit("NOT ")
            out.node(self.operand, _NOT)
            return
        # "--" would start a comment: keep a space between two minus signs.
        out.emit("- " if _starts_with_minus(self.operand) else "-")
        out.node(self.operand, _UNARY)


def _starts_with_minus(e: Expr) -> bool:
    # Only nodes at the unary level or tighter are printed without parentheses here.
    if isinstance(e, Unary):
        return e.op == "-"
    return isinstance(e, Literal) and e._level() == _UNARY


@dataclass(frozen=True)
class Binary(Expr):
    """Arithmetic, comparison, ``AND``/``OR`` and ``||``."""

    op: str
    left: Expr
    right: Expr

    _child_fields: ClassVar[tuple[str, ...]] = ("left", "right")

    def _level(self) -> int:
        return _BINARY_LEVEL[self.op]

    def _render(self, out: _Sql) -> None:
        level = _BINARY_LEVEL[self.op]
        if level == _CMP:
            # Comparisons do not chain: both sides must bind more tightly.
            out.node(self.left, _PRED)
            out.emit(f" {self.op} ")
            out.node(self.right, _PRED)
        else:
            # Left-associative: a right operand at the same level needs parentheses.
            out.node(self.left, level)
            out.emit(f" {self.op} ")
            out.node(self.right, level + 1)


@dataclass(frozen=True)
class Call(Expr):
    """A function or aggregate call; ``COUNT(*)`` is ``Call("COUNT", (), star=True)``."""

    name: str
    args: tuple[Expr, ...] = ()
    distinct: bool = False
    star: bool = False

    _child_fields: ClassVar[tuple[str, ...]] = ("args",)

    def _render(self, out: _Sql) -> None:
        out.emit(self.name + "(")
        if self.star:
            out.emit("*")
            for arg in self.args:  # only named arguments follow *
                out.emit(", ")
                out.node(arg, _OR)
        else:
            if self.distinct:
                out.emit("DISTINCT ")
            out.nodes(self.args)
        out.emit(")")


@dataclass(frozen=True)
class NamedArg(Expr):
    """A named argument of a call, ``name => value`` or ``name => (lo, hi)`` (BigQuery's
    ``contribution_bounds_per_group => (0, 100)``); ``name`` is lower-case.

    It is only ever an item of :attr:`Call.args`, after the positional arguments; the SQL
    compiler takes it out of the call before anything else reads it, and the checker
    refuses it everywhere else.
    """

    name: str
    values: tuple[Expr, ...]
    pair: bool = False

    _child_fields: ClassVar[tuple[str, ...]] = ("values",)

    def _render(self, out: _Sql) -> None:
        out.emit(f"{self.name} => ")
        if self.pair:
            out.emit("(")
            out.nodes(self.values)
            out.emit(")")
        else:
            out.node(self.values[0], _OR)


@dataclass(frozen=True)
class Case(Expr):
    """``CASE WHEN c1 THEN r1 ... [ELSE e] END`` (a simple CASE is parsed into this form)."""

    whens: tuple[tuple[Expr, Expr], ...]
    else_: Expr | None = None

    _child_fields: ClassVar[tuple[str, ...]] = ("whens", "else_")

    def _render(self, out: _Sql) -> None:
        out.emit("CASE")
        for cond, result in self.whens:
            out.emit(" WHEN ")
            out.node(cond, _OR)
            out.emit(" THEN ")
            out.node(result, _OR)
        if self.else_ is not None:
            out.emit(" ELSE ")
            out.node(self.else_, _OR)
        out.emit(" END")


@dataclass(frozen=True)
class Cast(Expr):
    """``CAST(x AS type)``; ``type_name`` is upper-case (``"INT"``, ``"DOUBLE"``, ...)."""

    operand: Expr
    type_name: str

    _child_fields: ClassVar[tuple[str, ...]] = ("operand",)

    def _render(self, out: _Sql) -> None:
        out.emit("CAST(")
        out.node(self.operand, _OR)
        out.emit(f" AS {self.type_name})")


@dataclass(frozen=True)
class InList(Expr):
    """``x [NOT] IN (a, b, ...)``."""

    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False

    _child_fields: ClassVar[tuple[str, ...]] = ("operand", "items")

    def _level(self) -> int:
        return _PRED if self.items else _PRIMARY

    def _render(self, out: _Sql) -> None:
        if not self.items:
            # SQL has no empty IN list; "x IN ()" is false for every row.
            out.emit("TRUE" if self.negated else "FALSE")
            return
        out.node(self.operand, _CONCAT)
        out.emit(" NOT IN (" if self.negated else " IN (")
        out.nodes(self.items)
        out.emit(")")


@dataclass(frozen=True)
class Between(Expr):
    """``x [NOT] BETWEEN low AND high`` (both ends included)."""

    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False

    _child_fields: ClassVar[tuple[str, ...]] = ("operand", "low", "high")

    def _level(self) -> int:
        return _PRED

    def _render(self, out: _Sql) -> None:
        out.node(self.operand, _CONCAT)
        out.emit(" NOT BETWEEN " if self.negated else " BETWEEN ")
        out.node(self.low, _CONCAT)
        out.emit(" AND ")
        out.node(self.high, _CONCAT)


@dataclass(frozen=True)
class Like(Expr):
    """``x [NOT] LIKE pattern`` with ``%`` (any run) and ``_`` (one character)."""

    operand: Expr
    pattern: Expr
    negated: bool = False

    _child_fields: ClassVar[tuple[str, ...]] = ("operand", "pattern")

    def _level(self) -> int:
        return _PRED

    def _render(self, out: _Sql) -> None:
        out.node(self.operand, _CONCAT)
        out.emit(" NOT LIKE " if self.negated else " LIKE ")
        out.node(self.pattern, _CONCAT)


@dataclass(frozen=True)
class IsNull(Expr):
    """``x IS [NOT] NULL``."""

    operand: Expr
    negated: bool = False

    _child_fields: ClassVar[tuple[str, ...]] = ("operand",)

    def _level(self) -> int:
        return _IS

    def _render(self, out: _Sql) -> None:
        out.node(self.operand, _IS)
        out.emit(" IS NOT NULL" if self.negated else " IS NULL")


MAX_DEPTH = 256


def depth(e: Expr) -> int:
    """How deeply ``e`` nests (1 for a leaf), computed without recursion.

    Deeper expressions are refused (MAX_DEPTH) before anything recursive touches them.

    >>> from pinqpy.expr.parser import parse_expression
    >>> depth(parse_expression("a + b * c"))
    3
    """
    deepest = 0
    stack = [(e, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in node.children())
    return deepest


def contains_aggregate(e: Expr) -> bool:
    """Whether ``e`` calls an aggregate anywhere.

    >>> contains_aggregate(Binary("+", Call("SUM", (Column("x"),)), Literal(1)))
    True
    >>> contains_aggregate(Call("ABS", (Column("x"),)))
    False
    """
    return any(isinstance(n, Call) and n.name in AGGREGATE_FUNCTIONS for n in e.walk())


def negate(e: Expr, pos: Pos | None = None) -> Expr:
    """``-e``, folding a numeric literal into a negative literal (as the parser does).

    >>> negate(Literal(5))
    Literal(value=-5)
    """
    if (
        isinstance(e, Literal)
        and isinstance(e.value, int | float)
        and not isinstance(e.value, bool)
    ):
        return Literal(-e.value, pos=pos if pos is not None else e.pos)
    return Unary("-", e, pos=pos)
