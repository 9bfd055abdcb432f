"""The checks every SELECT shares, inner or outer: an expression's type over a frame, a
condition, and the WHERE clause (a filter: a stable transformation of stability 1)."""

from __future__ import annotations

from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import Expr, contains_aggregate
from pinqpy.expr.check import check_expression
from pinqpy.pipeline.relation import Relation
from pinqpy.sql import ast as q
from pinqpy.sql.compiler.context import Context
from pinqpy.sql.compiler.scopes import Scope, resolve

__all__ = ["check", "condition", "where"]


def check(ctx: Context, e: Expr, frame: Relation, *, aggregates: bool = False) -> str:
    """The type of ``e`` over ``frame``'s columns; a fault is a syntax error at ``e``."""
    try:
        return check_expression(e, frame.schema, text=ctx.text, allow_aggregates=aggregates)
    except PinqSyntaxError:
        raise
    except PinqError as err:
        raise ctx.syntax(str(err), e.pos) from None


def condition(ctx: Context, e: Expr, frame: Relation, clause: str) -> None:
    """Refuse ``e`` as ``clause``'s condition unless it is true or false."""
    ctype = check(ctx, e, frame)
    if ctype not in ("bool", "any"):
        raise ctx.syntax(
            f"{clause} needs a condition (true or false), but {e.to_sql()} is of type "
            f"{ctype}; compare it with something, e.g. x > 0",
            e.pos,
        )


def where(ctx: Context, scope: Scope, s: q.Select, frame: Relation) -> Relation:
    """``frame`` filtered by the statement's WHERE clause, if it has one."""
    if s.where is None:
        return frame
    w = resolve(ctx, scope, s.where)
    if contains_aggregate(w):
        raise ctx.syntax("aggregates are not allowed in WHERE; use HAVING", w.pos)
    condition(ctx, w, frame, "WHERE")
    return frame.where(w)
