"""The kind rules that every engine's expression translator shares.

A translator (Polars expressions, the SQL generator) turns an expression AST into the
engine's own terms, keeping each value's *kind* ("int", "float", "bool", "str", "datetime",
"null", "other"). Which kind an operator yields, and how an operand is converted to it first,
is the semantics of :mod:`pinqpy.expr.pandas_eval`, the same on every engine; it is written
here once, and a translator only says how its engine spells each step (the hooks below).
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

from pinqpy.errors import PinqError
from pinqpy.expr.ast import Binary, Expr, Like, Literal, Unary
from pinqpy.expr.types import valid_text

__all__ = ["COMPARISONS", "KindRules", "Kinded"]

COMPARISONS = frozenset({"=", "<>", "<", "<=", ">", ">="})


class Kinded(Protocol):
    """A translated value: the engine's expression for it, and its kind."""

    @property
    def kind(self) -> str: ...


T = TypeVar("T", bound=Kinded)


class KindRules(Generic[T]):
    """The operators whose kinds do not depend on the engine, on top of the engine's hooks."""

    # -- hooks: how the engine spells each step -------------------------------------------
    def tr(self, e: Expr) -> T:
        raise NotImplementedError

    def null(self, kind: str) -> T:
        raise NotImplementedError

    def cast(self, v: T, type_name: str) -> T:
        raise NotImplementedError

    def to_str(self, v: T) -> T:
        raise NotImplementedError

    def bool_to_int(self, v: T) -> T:
        """A boolean as the integer 1 or 0 (NULL stays NULL)."""
        raise NotImplementedError

    def negate(self, v: T) -> T:
        """``-v`` of an int (NULL on overflow) or a float."""
        raise NotImplementedError

    def concat(self, a: T, b: T) -> T:
        """``a || b`` of two strings."""
        raise NotImplementedError

    def like_match(self, x: T, pattern: str) -> T:
        """Whether the string ``x`` matches the LIKE ``pattern``."""
        raise NotImplementedError

    def arith(self, op: str, a: T, b: T) -> T:
        raise NotImplementedError

    def compare(self, op: str, a: T, b: T) -> T:
        raise NotImplementedError

    def logic(self, op: str, a: T, b: T) -> T:
        raise NotImplementedError

    def logic_not(self, v: T) -> T:
        raise NotImplementedError

    # -- the shared rules -----------------------------------------------------------------
    def boolean(self, v: T) -> T:
        """``v`` as a boolean: NULL stays NULL, other kinds as CAST(... AS BOOLEAN)."""
        if v.kind == "bool":
            return v
        if v.kind == "null":
            return self.null("bool")
        return self.cast(v, "BOOLEAN")

    def numeric(self, v: T) -> T:
        """``v`` as a number: booleans as 1 or 0, strings parsed as doubles, and values of
        other kinds (dates, lists) NULL."""
        if v.kind in ("int", "float", "null"):
            return v
        if v.kind == "bool":
            return self.bool_to_int(v)
        if v.kind == "str":
            return self.cast(v, "DOUBLE")
        return self.null("float")

    def binary(self, e: Binary) -> T:
        op = e.op
        if op in ("AND", "OR"):
            return self.logic(op, self.tr(e.left), self.tr(e.right))
        a, b = self.tr(e.left), self.tr(e.right)
        if op in COMPARISONS:
            return self.compare(op, a, b)
        if op == "||":
            return self.concat(self.to_str(a), self.to_str(b))
        return self.arith(op, a, b)

    def unary(self, e: Unary) -> T:
        v = self.tr(e.operand)
        if e.op == "NOT":
            return self.logic_not(v)
        if v.kind == "null":
            return self.null("float")
        return self.negate(self.numeric(v))

    def like(self, e: Like) -> T:
        if not isinstance(e.pattern, Literal):
            raise PinqError("the LIKE pattern must be a constant string")
        if e.pattern.value is None:
            return self.null("bool")
        x = self.to_str(self.tr(e.operand))
        v = self.like_match(x, valid_text(str(e.pattern.value)))
        return self.logic_not(v) if e.negated else v
