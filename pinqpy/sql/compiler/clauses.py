"""The checks every SELECT shares, inner or outer: an expression's type over a frame, a
condition, a constant argument, and the WHERE clause (a filter of stability 1)."""

from __future__ import annotations

from typing import Any

from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import Call, Expr, contains_aggregate
from pinqpy.expr.check import _NOT_CONSTANT, check_expression, constant_value
from pinqpy.pipeline.relation import Relation
from pinqpy.sql import ast as q
from pinqpy.sql.compiler.context import Context
from pinqpy.sql.compiler.scopes import Scope, resolve

__all__ = ["check", "condition", "constant_argument", "where"]


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


def constant_argument(ctx: Context, e: Expr, call: Call) -> Any:
    """The value of one of ``call``'s extra arguments (a quantile level, a bound), which
    must be a constant."""
    v = constant_value(e)
    if v is _NOT_CONSTANT:
        raise ctx.syntax(f"{call.name}'s extra arguments must be constants", e.pos or call.pos)
    return v


def where(ctx: Context, scope: Scope, s: q.Select, frame: Relation) -> Relation:
    """``frame`` filtered by the statement's WHERE clause, if it has one."""
    if s.where is None:
        return frame
    w = resolve(ctx, scope, s.where)
    if contains_aggregate(w):
        raise ctx.syntax("aggregates are not allowed in WHERE; use HAVING", w.pos)
    condition(ctx, w, frame, "WHERE")
    return frame.where(w)
