"""Subqueries and their GROUP BY: an inner query becomes a relation, a transformation.

Takes an inner query (a SELECT or a set operation of two) and returns the relation it
defines, built with the same stable transformations as ``PrivateFrame``'s methods: WHERE is
a filter, the SELECT list a projection, GROUP BY an aggregation into one row per group
(exact values, released only by the outer query), DISTINCT and UNION / INTERSECT / EXCEPT
the set operations. Nothing here is noisy: ORDER BY, LIMIT and OPTIONS belong to the outer
query, and are refused inside.

:func:`from_clause` is the FROM pass (:mod:`.joins`) with this module's compiler for the
subqueries a FROM clause holds.
"""

from __future__ import annotations

from collections.abc import Mapping

from pinqpy.errors import PrivacyError
from pinqpy.expr.ast import (
    AGGREGATE_FUNCTIONS,
    Call,
    Column,
    Expr,
    Literal,
    canonical_aggregate,
    contains_aggregate,
)
from pinqpy.pipeline.relation import Relation
from pinqpy.sql import ast as q
from pinqpy.sql.compiler.clauses import check, where
from pinqpy.sql.compiler.context import Context, Scratch
from pinqpy.sql.compiler.joins import FromClause, compile_from
from pinqpy.sql.compiler.scopes import (
    Scope,
    alias_named,
    alias_of,
    group_keys,
    lookup,
    output_name,
    resolve,
)

__all__ = ["compile_subquery", "from_clause"]

_SET_OPS = {
    "union": "union",
    "union_all": "concat",
    "intersect": "intersect",
    "except": "difference",
}


def from_clause(ctx: Context, item: q.FromItem | None, scratch: Scratch) -> FromClause:
    """The FROM pass, with subqueries compiled by :func:`compile_subquery`."""
    return compile_from(ctx, item, scratch, compile_subquery)


def compile_subquery(ctx: Context, query: q.Query, scratch: Scratch) -> tuple[Relation, Scratch]:
    """The relation an inner query defines, and the scratch after its names."""
    if not isinstance(query, q.SetQuery):
        return _inner_select(ctx, query, scratch)
    if query.order_by or query.limit is not None:
        raise PrivacyError(
            "ORDER BY / LIMIT inside a subquery change which rows exist, so the "
            "answer could depend on one person; apply them to the outermost query"
        )
    left, scratch = compile_subquery(ctx, query.left, scratch)
    right, scratch = compile_subquery(ctx, query.right, scratch)
    if len(left.columns) != len(right.columns):
        raise ctx.syntax(
            f"{query.op.upper().replace('_', ' ')} needs both sides to have the same "
            "number of columns",
            query.pos,
        )
    if right.columns != left.columns:
        right = right.select(
            (), {lc: Column(rc) for lc, rc in zip(left.columns, right.columns, strict=True)}
        )
    return left.set_op(right, _SET_OPS[query.op]), scratch  # type: ignore[arg-type]


def _inner_select(ctx: Context, s: q.Select, scratch: Scratch) -> tuple[Relation, Scratch]:
    if s.order_by or s.limit is not None:
        raise PrivacyError(
            "ORDER BY / LIMIT inside a subquery change which rows exist (so does SELECT "
            "TOP n), so the answer could depend on one person; apply them to the "
            "outermost query"
        )
    if s.options:
        raise ctx.syntax(
            "OPTIONS belong to the outermost query", ctx.locate(r"\bOPTIONS\b", s.pos) or s.pos
        )
    compiled = from_clause(ctx, s.from_, scratch)
    scope, scratch = compiled.scope, compiled.scratch
    if scope.frame is None:
        raise PrivacyError("a subquery over only public tables has nothing private to query")
    frame = where(ctx, scope, s, scope.frame)
    if s.group_by is not None or any(
        not isinstance(i.expr, q.Star) and contains_aggregate(i.expr) for i in s.items
    ):
        frame, scratch = _inner_group(ctx, s, scope, frame, scratch)
    else:
        if s.having is not None:
            raise ctx.syntax("HAVING needs GROUP BY or aggregates", s.having.pos)
        frame = _inner_project(ctx, s, scope, frame)
    if s.distinct:
        frame = frame.distinct()
    return frame, scratch


def _inner_project(ctx: Context, s: q.Select, scope: Scope, frame: Relation) -> Relation:
    outputs: dict[str, Expr] = {}
    for item in s.items:
        if isinstance(item.expr, q.Star):
            if item.expr.table is not None:
                qualifier = item.expr.path or ((item.expr.table, True),)
                visible = [scope.aliases[alias_of(ctx, scope, qualifier, item.pos)]]
            else:
                visible = list(scope.aliases.values())
            for names in visible:
                for col in names.values():
                    outputs.setdefault(col, Column(col))
            continue
        e = resolve(ctx, scope, item.expr)
        check(ctx, e, frame)
        name = item.alias or (
            output_name(ctx, scope, item.expr) if isinstance(item.expr, Column) else e.to_sql()
        )
        if name in outputs:
            raise ctx.syntax(f"the subquery has two columns named {name!r}; use AS", item.pos)
        outputs[name] = e
    plain = [n for n, e in outputs.items() if isinstance(e, Column) and e.name == n]
    computed = {n: e for n, e in outputs.items() if n not in plain}
    frame = frame.select(plain, computed) if computed or plain else frame
    order = list(outputs)
    if frame.columns != order:
        frame = frame.select(order, {})
    return frame


class _Aggregates:
    """The aggregates of one subquery's GROUP BY, each computed once into a scratch column
    (this pass's own working state, never handed on)."""

    def __init__(self, ctx: Context, scratch: Scratch):
        self.ctx = ctx
        self.scratch = scratch
        self.columns: dict[Expr, str] = {}
        self.aggs: dict[str, Expr] = {}

    def column(self, call: Call) -> str:
        """The grouped column that holds ``call``'s value."""
        if call not in self.columns:
            self.columns[call], self.scratch = self.scratch.take("a")
            name = canonical_aggregate(call.name)
            if name in ("PERCENTILE", "QUANTILE"):
                raise self.ctx.syntax(
                    f"{call.name} is not available inside a subquery's GROUP BY", call.pos
                )
            if name in ("VAR_POP", "STDDEV_POP"):
                sample = "VARIANCE" if name == "VAR_POP" else "STDDEV"
                raise self.ctx.syntax(
                    f"{call.name} is not available inside a subquery's GROUP BY; "
                    f"{sample} (the sample form) is",
                    call.pos,
                )
            self.aggs[self.columns[call]] = Call(name, call.args[:1], call.distinct, call.star)
        return self.columns[call]


def _inner_group(
    ctx: Context, s: q.Select, scope: Scope, frame: Relation, scratch: Scratch
) -> tuple[Relation, Scratch]:
    keys, assigns, scratch = _group_columns(ctx, s, scope, frame, scratch)
    if assigns:
        frame = frame.assign(assigns)
    aggregates = _Aggregates(ctx, scratch)
    # (output name, grouped column)
    outputs = [_grouped_output(ctx, scope, frame, item, keys, aggregates) for item in s.items]
    having = None
    if s.having is not None:
        h = _resolve_having(ctx, scope, s.having, dict(outputs))

        def swap(node: Expr) -> Expr:
            if isinstance(node, Call) and node.name in AGGREGATE_FUNCTIONS:
                check(ctx, node, frame, aggregates=True)
                return Column(aggregates.column(node))
            return node

        having = h.transform(swap)
    grouped = frame.aggregate(frame.group_keys([col for _, col in keys]), aggregates.aggs)
    if having is not None:
        grouped = grouped.where(having)
    names = [n for n, _ in outputs]
    if len(set(names)) != len(names):
        raise ctx.syntax("the subquery has two columns with the same name; use AS", s.pos)
    return grouped.select((), {n: Column(c) for n, c in outputs}), aggregates.scratch


def _group_columns(
    ctx: Context, s: q.Select, scope: Scope, frame: Relation, scratch: Scratch
) -> tuple[list[tuple[Expr, str]], dict[str, Expr], Scratch]:
    """The GROUP BY keys as (resolved expression, frame column), the computed ones to
    assign first, and the scratch after their names."""
    keys: list[tuple[Expr, str]] = []
    assigns: dict[str, Expr] = {}
    for gk in group_keys(ctx, scope, s) or ():
        if gk.keys is not None:
            raise ctx.syntax(
                "a key list (GROUP BY x IN (...)) belongs to the outermost GROUP BY", gk.pos
            )
        e = resolve(ctx, scope, gk.expr)
        check(ctx, e, frame)
        if isinstance(e, Column):
            keys.append((e, e.name))
        else:
            name, scratch = scratch.take("g")
            assigns[name] = e
            keys.append((e, name))
    if not keys:  # aggregates with no GROUP BY: one group
        name, scratch = scratch.take("all")
        assigns[name] = Literal(1)
        keys.append((Literal(1), name))
    return keys, assigns, scratch


def _grouped_output(
    ctx: Context,
    scope: Scope,
    frame: Relation,
    item: q.SelectItem,
    keys: list[tuple[Expr, str]],
    aggregates: _Aggregates,
) -> tuple[str, str]:
    """A SELECT item of a GROUP BY subquery: its name and the grouped column it reads."""
    if isinstance(item.expr, q.Star):
        raise ctx.syntax("SELECT * cannot be used with GROUP BY", item.pos)
    e = resolve(ctx, scope, item.expr)
    key_col = next((col for ke, col in keys if ke == e), None)
    if key_col is not None:
        name = item.alias or (
            output_name(ctx, scope, item.expr) if isinstance(item.expr, Column) else e.to_sql()
        )
        return name, key_col
    if isinstance(e, Call) and e.name in AGGREGATE_FUNCTIONS:
        check(ctx, e, frame, aggregates=True)
        return item.alias or item.expr.to_sql(), aggregates.column(e)
    raise ctx.syntax(
        "in a subquery with GROUP BY, each output must be a group key or one aggregate "
        "such as COUNT(*) or SUM(x)",
        item.pos or e.pos,
    )


def _resolve_having(ctx: Context, scope: Scope, h: Expr, aliases: Mapping[str, str]) -> Expr:
    def fix(node: Expr) -> Expr:
        alias = alias_named(ctx, node, aliases)
        if alias is not None:
            return Column(aliases[alias], pos=node.pos)
        if isinstance(node, Column):
            return Column(lookup(ctx, scope, node), pos=node.pos)
        return node

    return h.transform(fix)
