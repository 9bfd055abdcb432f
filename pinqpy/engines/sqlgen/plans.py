"""What the SQL engines' plan translators share: public keys matched in SQL, and the plan
nodes whose translation is the same whatever the engine's relations look like."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np
import pandas as pd

from pinqpy.engines.base import NO_MATCH, column_key
from pinqpy.engines.sqlgen.expressions import Dialect
from pinqpy.plan.nodes import BoundContributions, Join, PlanNode, PlanVisitor

__all__ = ["CtePlanSql", "compatible", "key_literal", "key_match", "value_kind"]

R = TypeVar("R")


def value_kind(v: object) -> str | None:
    """The kind of a public key or candidate value (None for NULL / NaN)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, bool | np.bool_):
        return "bool"
    if isinstance(v, int | np.integer):
        return "int"
    if isinstance(v, float | np.floating):
        return "float" if not math.isnan(float(v)) else None
    if isinstance(v, str):
        return "str"
    if isinstance(v, pd.Timestamp | np.datetime64):
        return "datetime" if not pd.isna(v) else None
    try:
        if v != v:  # pd.NA, NaT
            return None
    except (TypeError, ValueError):
        return None
    return "other"


def compatible(col_kind: str, key_kind: str) -> bool:
    if col_kind in ("int", "float") and key_kind in ("int", "float"):
        return True
    return col_kind == key_kind


def key_literal(d: Dialect, v: object, kind: str, stamp: Callable[[object], str]) -> str:
    """A public key (or a bound) as a literal of a column's kind; ``stamp`` writes a
    timestamp."""
    if kind == "bool":
        return "TRUE" if v else "FALSE"
    if kind == "int":
        return d.int_lit(int(v))  # type: ignore[call-overload]
    if kind == "float":
        return d.float_lit(float(v))  # type: ignore[arg-type]
    if kind == "str":
        return d.str_lit(str(v))
    return stamp(v)


def key_match(
    col_sql: str, col_kind: str, key: object, literal: Callable[[object, str], str]
) -> str:
    """SQL true exactly where the column equals a public key under the column's type (a
    NULL-like key matches NULL); ``literal(value, kind)`` writes the key."""
    v = column_key(key, col_kind)
    if v is None:
        return f"({col_sql} IS NULL)"
    if v is NO_MATCH:
        return "FALSE"
    return f"({col_sql} = {literal(v, col_kind)})"


class CtePlanSql(PlanVisitor[R]):
    """A plan as one common table expression per node, each visit returning the node's
    relation ``R``. A node shared by several parents (``f.concat(f)``) is one expression.

    Engines give :meth:`truncate` and :meth:`merge`; joins and contribution bounds are
    written from them alike.
    """

    def __init__(self) -> None:
        self._memo: dict[int, tuple[PlanNode, R]] = {}

    def visit(self, node: PlanNode) -> R:
        hit = self._memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        rel = node.accept(self)
        self._memo[id(node)] = (node, rel)
        return rel

    def truncate(self, child: R, columns: Sequence[str], limit: int, drop_null: bool = False) -> R:
        """The ``limit`` rows of lowest salted-hash priority per key of ``columns`` (with
        ``drop_null``, rows whose key is NULL are dropped first)."""
        raise NotImplementedError

    def merge(self, left: R, right: R, on: Sequence[str], how: str, suffix: str) -> R:
        """Join on ``on``, NULL matching NULL as in pandas."""
        raise NotImplementedError

    def visit_join(self, node: Join) -> R:
        left = self.visit(node.left)
        right = self.visit(node.right)
        if node.bounds is not None:
            left = self.truncate(left, node.on, node.bounds[0])
            right = self.truncate(right, node.on, node.bounds[1])
        return self.merge(left, right, node.on, "inner", "_right")

    def visit_bound_contributions(self, node: BoundContributions) -> R:
        # A row whose unit is NULL belongs to no known person: it is dropped.
        return self.truncate(self.visit(node.child), (node.unit,), node.max_rows, drop_null=True)
