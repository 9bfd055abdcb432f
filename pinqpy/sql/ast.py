"""The SQL statement AST: small immutable nodes with source positions.

Expressions inside statements are the expression AST of :mod:`pinqpy.expr.ast` (a column
written ``p.age`` is ``Column("age", table="p")``). Every node carries ``pos`` (1-based line
and column of its first token) when it was parsed with positions; positions never take part
in equality, so two parses of the same text compare equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal as Lit

from pinqpy.expr.ast import Expr, Pos

# How a name was written: each dotted part and whether it was quoted (``"x"`` or a backtick
# name). SQL matches an unquoted part case-insensitively, a quoted one exactly; an empty path
# means the name is matched exactly. Never part of equality.
Path = tuple[tuple[str, bool], ...]

__all__ = [
    "Describe",
    "Explain",
    "FromItem",
    "GroupKey",
    "Join",
    "MarginalColumn",
    "MarginalsQuery",
    "OrderItem",
    "Path",
    "Query",
    "Select",
    "SelectItem",
    "SetQuery",
    "ShowBudget",
    "ShowLedger",
    "ShowTables",
    "Star",
    "Statement",
    "SubqueryFrom",
    "TableFrom",
]


@dataclass(frozen=True)
class Star:
    """``*`` or ``t.*`` in a select list."""

    table: str | None = None
    path: Path = field(default=(), compare=False, repr=False)
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SelectItem:
    """One output of a SELECT: an expression (or ``*``) with an optional alias."""

    expr: Expr | Star
    alias: str | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TableFrom:
    """``FROM name [AS alias]``; ``FROM schema.name`` keeps the qualifiers in ``schema``
    (``FROM project.dataset.t`` has the schema ``("project", "dataset")``)."""

    name: str
    alias: str | None = None
    schema: tuple[str, ...] = ()
    path: Path = field(default=(), compare=False, repr=False)
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SubqueryFrom:
    """``FROM (query) [AS alias]``."""

    query: Query
    alias: str | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Join:
    """``left [INNER | LEFT] JOIN right ON cond | USING (cols) [WITH BOUNDS (bl, br)]``.

    Exactly one of ``on`` and ``using`` is set. ``bounds`` is the per-key row bound of each
    side for a join of two private tables.
    """

    left: FromItem
    right: FromItem
    kind: Lit["inner", "left"] = "inner"
    on: Expr | None = None
    using: tuple[str, ...] | None = None
    bounds: tuple[int, int] | None = None
    using_paths: tuple[Path, ...] = field(default=(), compare=False, repr=False)
    pos: Pos | None = field(default=None, compare=False, repr=False)


FromItem = TableFrom | SubqueryFrom | Join


@dataclass(frozen=True)
class GroupKey:
    """A GROUP BY item; ``keys`` holds an inline public key list (``state IN ('CA', 'NY')``)."""

    expr: Expr
    keys: tuple[Expr, ...] | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class OrderItem:
    expr: Expr
    descending: bool = False
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Select:
    """One SELECT block.

    ``options`` merges ``OPTIONS (...)`` at the end and BigQuery's ``SELECT WITH
    DIFFERENTIAL_PRIVACY OPTIONS (...)`` prefix; keys are lower-cased option names, values
    Python literals (numbers, strings, booleans). ``from_`` is None only for a SELECT with no
    FROM clause (which the compiler refuses). SQL Server's ``SELECT TOP n`` is ``limit = n``.
    """

    items: tuple[SelectItem, ...]
    from_: FromItem | None
    where: Expr | None = None
    group_by: tuple[GroupKey, ...] | None = None
    having: Expr | None = None
    order_by: tuple[OrderItem, ...] | None = None
    limit: int | None = None
    distinct: bool = False
    options: tuple[tuple[str, object], ...] = ()
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SetQuery:
    """``left UNION [ALL] | INTERSECT | EXCEPT right`` (left-associative, INTERSECT binds
    tighter, as in SQL). ``order_by``/``limit``/``options`` written after the last operand
    belong to the set query."""

    op: Lit["union", "union_all", "intersect", "except"]
    left: Query
    right: Query
    order_by: tuple[OrderItem, ...] | None = None
    limit: int | None = None
    options: tuple[tuple[str, object], ...] = ()
    pos: Pos | None = field(default=None, compare=False, repr=False)


Query = Select | SetQuery


@dataclass(frozen=True)
class Explain:
    query: Query
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ShowTables:
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ShowBudget:
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ShowLedger:
    """``SHOW LEDGER``: the audit trail of every budget kept in a ledger file."""

    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Describe:
    name: str
    schema: tuple[str, ...] = ()
    path: Path = field(default=(), compare=False, repr=False)
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class MarginalColumn:
    """One column of a marginal: its declared keys, an inline key list, or cut points."""

    name: str
    keys: tuple[object, ...] | None = None
    cuts: tuple[object, ...] | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class MarginalsQuery:
    """``[EXPLAIN] SELECT MARGINALS (a, b), (b, c) FROM t [WHERE ...] [OPTIONS (...)]``."""

    marginals: tuple[tuple[MarginalColumn, ...], ...]
    table: TableFrom
    where: Expr | None = None
    options: tuple[tuple[str, object], ...] = ()
    explain: bool = False
    pos: Pos | None = field(default=None, compare=False, repr=False)


Statement = (
    Select | SetQuery | Explain | ShowTables | ShowBudget | ShowLedger | Describe | MarginalsQuery
)
