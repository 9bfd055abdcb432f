"""The outer SELECT list, HAVING and ORDER BY: expressions over the released values.

The outermost SELECT releases only noisy aggregates and GROUP BY keys. :func:`outputs`
takes its items, HAVING and ORDER BY over the FROM clause's relation and the GROUP BY keys,
and returns the distinct aggregate calls to measure, with each output, HAVING and ORDER BY
rewritten over the released values: ``__m{i}`` is the i-th measurement, ``__k{i}`` the i-th
key. Those run after the charge, on noisy values only (post-processing), so every fault in
them (a raw column, an unknown function, a type error) is refused here, before anything is
charged.

Before that, :func:`outer_select` puts the statement in the shape the release reads:
ZetaSQL's ``ANON_`` spellings as pinqpy's aggregates, and ``SELECT DISTINCT`` without an
aggregate as the GROUP BY it means.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from pinqpy.errors import PinqSyntaxError, PrivacyError
from pinqpy.expr.ast import (
    AGGREGATE_FUNCTIONS,
    MAX_DEPTH,
    Call,
    Column,
    Expr,
    Literal,
    contains_aggregate,
    depth,
)
from pinqpy.expr.check import check_expression, infer_type, read_untyped_literals
from pinqpy.pipeline.relation import Relation
from pinqpy.sql import ast as q
from pinqpy.sql.bigquery import normalize_call, split_bounds
from pinqpy.sql.compiler.clauses import check
from pinqpy.sql.compiler.context import Context
from pinqpy.sql.compiler.scopes import Scope, alias_named, lookup, output_name, resolve

__all__ = ["OuterSelect", "Outputs", "outer_select", "outputs", "stripped"]


@dataclass(frozen=True)
class OuterSelect:
    """The outermost SELECT as the release reads it, whether DISTINCT drops duplicate
    released rows, and the notes on ZetaSQL spellings read otherwise."""

    select: q.Select
    distinct: bool
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Outputs:
    """The aggregate calls to measure (``__m{i}`` is ``calls[i]``) and what is released:
    each output as (name, expression over ``__k{i}`` and ``__m{i}``), HAVING and ORDER BY."""

    calls: tuple[Call, ...]
    outputs: tuple[tuple[str, Expr], ...]
    having: Expr | None
    order_by: tuple[q.OrderItem, ...] | None


# -- the shape of the outer query ----------------------------------------------------------
def outer_select(ctx: Context, s: q.Query) -> OuterSelect:
    """The outermost query as one SELECT of noisy aggregates (refused otherwise)."""
    if isinstance(s, q.SetQuery):
        raise PrivacyError(
            "the outermost query must be one SELECT of noisy aggregates; put "
            "UNION / INTERSECT / EXCEPT inside a subquery: SELECT COUNT(*) FROM (... UNION ...)"
        )
    distinct = False
    if s.distinct:
        s, distinct = _top_distinct(s)
    notes: list[str] = []
    s = _normalized(ctx, s, notes)
    return OuterSelect(s, distinct, tuple(notes))


def _top_distinct(s: q.Select) -> tuple[q.Select, bool]:
    """The outermost ``SELECT DISTINCT``: a query over released values, or a key release.

    With an aggregate or a GROUP BY, DISTINCT drops duplicate rows of the noisy answer:
    post-processing, which costs nothing and reads nothing more (the second value says
    so). Without either (``SELECT DISTINCT educ FROM t``), it asks which values occur: the
    same question as ``SELECT educ FROM t GROUP BY educ``, answered the same way (see
    :func:`~.keys.keys_only`). ``SELECT DISTINCT *`` would release raw rows and is refused.
    """
    if any(isinstance(it.expr, q.Star) for it in s.items):
        raise PrivacyError(
            "SELECT DISTINCT * at the top would release raw rows; write SELECT "
            "<columns> FROM t GROUP BY <columns>, or aggregate outside a subquery"
        )
    if s.group_by or any(contains_aggregate(it.expr) for it in s.items):  # type: ignore[arg-type]
        return s, True
    keys = tuple(q.GroupKey(it.expr, pos=it.pos) for it in s.items)  # type: ignore[arg-type]
    return dataclasses.replace(s, group_by=keys, distinct=False), False


def _normalized(ctx: Context, s: q.Select, notes: list[str]) -> q.Select:
    """``s`` with ZetaSQL's ANON_ spellings read as pinqpy's aggregates."""

    def fix(e: Expr) -> Expr:
        # Too deep an expression is refused by resolve() with its own message.
        return e if depth(e) > MAX_DEPTH else normalize_call(e, ctx.text, notes)

    return dataclasses.replace(
        s,
        items=tuple(
            it if isinstance(it.expr, q.Star) else dataclasses.replace(it, expr=fix(it.expr))
            for it in s.items
        ),
        having=None if s.having is None else fix(s.having),
        order_by=None
        if s.order_by is None
        else tuple(dataclasses.replace(o, expr=fix(o.expr)) for o in s.order_by),
    )


def stripped(ctx: Context, e: Expr) -> Expr:
    """``e`` with the named arguments of its calls checked and taken out."""

    def fix(node: Expr) -> Expr:
        return split_bounds(node, ctx.text)[0] if isinstance(node, Call) else node

    return e.transform(fix)


# -- what is released ----------------------------------------------------------------------
class _Released:
    """The outer query's aggregate calls as they are met (this pass's own working state),
    and the rewriting of an expression over the released values."""

    def __init__(self, ctx: Context, scope: Scope, frame: Relation, keys: tuple[Expr, ...]):
        self.ctx, self.scope, self.frame, self.keys = ctx, scope, frame, keys
        self.calls: list[Call] = []

    def _key(self, e: Expr) -> int | None:
        return next((i for i, ke in enumerate(self.keys) if ke == e), None)

    def _measured(self, call: Call) -> Column:
        check(self.ctx, stripped(self.ctx, call), self.frame, aggregates=True)
        if call not in self.calls:
            self.calls.append(call)
        return Column(f"__m{self.calls.index(call)}")

    def measure(self, e: Expr) -> Expr:
        """An output with aggregates, top-down: each aggregate becomes its measurement,
        each GROUP BY key its released key; any other column would be a raw value, and
        is refused here, before the charge (evaluated after it, it would fail there)."""

        def swap(node: Expr) -> Expr:
            if isinstance(node, Call) and node.name in AGGREGATE_FUNCTIONS:
                return self._measured(node)
            idx = self._key(node)
            if idx is not None:
                return Column(f"__k{idx}")
            if isinstance(node, Column):
                raise PrivacyError(
                    f"{node.to_sql()} next to an aggregate in SELECT is a raw column: the "
                    "outermost SELECT releases only noisy aggregates and GROUP BY keys; "
                    "wrap it in an aggregate or add it to GROUP BY"
                )
            return node.map_children(swap)

        return swap(e)

    def post(self, e: Expr, aliases: dict[str, Expr]) -> Expr:
        """HAVING / ORDER BY (top-down): aliases, keys and aggregates (measured if new)."""
        if isinstance(e, Call) and e.name in AGGREGATE_FUNCTIONS:
            return self._measured(resolve(self.ctx, self.scope, e))  # type: ignore[arg-type]
        if isinstance(e, Column):
            alias = alias_named(self.ctx, e, aliases)
            if alias is not None:
                return aliases[alias]
            col = Column(lookup(self.ctx, self.scope, e), pos=e.pos)
            idx = self._key(col)
            if idx is None:
                raise PrivacyError(
                    f"{e.to_sql()} in HAVING / ORDER BY is a raw column; use an aggregate, "
                    "a GROUP BY key or an output alias"
                )
            return Column(f"__k{idx}")
        return e.map_children(lambda child: self.post(child, aliases))

    def types(self) -> dict[str, str]:
        """The type of each released value so far."""
        types = {f"__m{i}": infer_type(c, self.frame.schema) for i, c in enumerate(self.calls)}
        types.update({f"__k{i}": infer_type(k, self.frame.schema) for i, k in enumerate(self.keys)})
        return types


def outputs(
    ctx: Context, scope: Scope, s: q.Select, frame: Relation, keys: tuple[Expr, ...]
) -> Outputs:
    """The measurements and released expressions of the outer SELECT over ``frame``,
    grouped by ``keys`` (the resolved GROUP BY expressions)."""
    released = _Released(ctx, scope, frame, keys)
    outs, aliases = _select_list(ctx, scope, s, frame, released)
    having = released.post(s.having, aliases) if s.having is not None else None
    if having is not None:
        # HAVING COUNT(*) > '5': the literal is read as the aggregate's (or key's) type.
        having = read_untyped_literals(having, released.types(), text=ctx.text)
    order_by = (
        tuple(
            q.OrderItem(
                _ordinal(ctx, o.expr, outs) or released.post(o.expr, aliases),
                o.descending,
                o.pos,
            )
            for o in s.order_by
        )
        if s.order_by
        else None
    )
    _check_released(ctx, s, released, having, order_by)
    return Outputs(tuple(released.calls), tuple(outs), having, order_by)


def _select_list(
    ctx: Context, scope: Scope, s: q.Select, frame: Relation, released: _Released
) -> tuple[list[tuple[str, Expr]], dict[str, Expr]]:
    """Each SELECT item as (name, released expression), and the outputs by alias."""
    outs: list[tuple[str, Expr]] = []
    aliases: dict[str, Expr] = {}
    for item in s.items:
        if isinstance(item.expr, q.Star):
            raise PrivacyError(
                "SELECT * at the top would release raw rows: every output of the "
                "outermost SELECT must be a noisy aggregate (COUNT, SUM, AVG, ...) or a "
                "GROUP BY key"
            )
        e = resolve(ctx, scope, item.expr)
        name = item.alias or output_name(ctx, scope, item.expr)
        # Names, functions and argument counts first: an unknown function is a syntax
        # error wherever it appears, before any privacy question.
        check(ctx, stripped(ctx, e), frame, aggregates=True)
        if contains_aggregate(e):
            out = released.measure(e)
        else:
            idx = next((i for i, ke in enumerate(released.keys) if ke == e), None)
            if idx is None and not e.columns():
                # A constant (SELECT 1 AS one, 'x' AS tag): public, the same in every
                # output row, so it reveals nothing and is charged nothing.
                outs.append((_unique_output(ctx, name, outs, item), e))
                aliases[name] = e
                continue
            if idx is None:
                what = item.expr.to_sql()
                raise PrivacyError(
                    f"SELECT {what}: the outermost SELECT releases only noisy aggregates "
                    "and GROUP BY keys; a raw value would reveal individual rows. Wrap it "
                    "in an aggregate or add it to GROUP BY"
                )
            out = Column(f"__k{idx}")
        outs.append((_unique_output(ctx, name, outs, item), out))
        aliases[name] = out
    return outs, aliases


def _check_released(
    ctx: Context,
    s: q.Select,
    released: _Released,
    having: Expr | None,
    order_by: tuple[q.OrderItem, ...] | None,
) -> None:
    """HAVING and ORDER BY run on the released values, after the charge: check them now
    (an unknown function, a type error), so that their refusal spends nothing."""
    types = released.types()
    spelled = {f"__m{i}": c.to_sql() for i, c in enumerate(released.calls)}
    spelled.update({f"__k{i}": k.to_sql() for i, k in enumerate(released.keys)})

    def check_released(e: Expr, written: Expr, clause: str) -> str:
        try:
            return check_expression(e, types, text=ctx.text)
        except PinqSyntaxError as err:
            if not re.search(r"__[mk]\d", str(err)):
                raise
            # A fault on a released value: say it in the query's own terms, at the clause.
            message = re.sub(r"__[mk]\d+", lambda m: spelled[m.group(0)], err.message)
            raise ctx.syntax(f"{clause} {written.to_sql()}: {message}", written.pos) from None

    if having is not None:
        assert s.having is not None
        ctype = check_released(having, s.having, "HAVING")
        if ctype not in ("bool", "any"):
            raise ctx.syntax(
                f"HAVING needs a condition (true or false), but {s.having.to_sql()} is of "
                f"type {ctype}; compare it with something, e.g. COUNT(*) > 10",
                s.having.pos,
            )
    for item, written in zip(order_by or (), s.order_by or (), strict=True):
        if isinstance(item.expr, Expr):
            check_released(item.expr, written.expr, "ORDER BY")


def _ordinal(ctx: Context, e: Expr, outs: list[tuple[str, Expr]]) -> Expr | None:
    """``ORDER BY 2``: the second output (PostgreSQL), or None if ``e`` is no position."""
    if not (isinstance(e, Literal) and type(e.value) is int):
        return None
    if not 1 <= e.value <= len(outs):
        raise ctx.syntax(
            f"ORDER BY {e.value}: the SELECT list has {len(outs)} output(s); a position "
            "counts them from 1",
            e.pos,
        )
    return outs[e.value - 1][1]


def _unique_output(
    ctx: Context, name: str, outs: list[tuple[str, Expr]], item: q.SelectItem
) -> str:
    if any(n == name for n, _ in outs):
        raise ctx.syntax(f"two outputs are named {name!r}; use AS", item.pos)
    return name
