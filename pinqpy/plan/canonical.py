"""A canonical text for a plan: the identity of a question, for the answer cache and the ledger.

Two plans that ask the same question over the same tables get the same text, whatever the
order in which they were written out or the spelling of their expressions (expressions are
rendered by ``to_sql``, which normalises case, spacing and parentheses). A plan with a Python
callable has no canonical form: its meaning cannot be compared, so it is never cached.

Tables are named by ``table_identity``: in memory, the table's id, unique per registration (so
re-registering new data never returns an old answer); for a persistent ledger, a fingerprint of
the data computed once per table (which the ledger only ever stores inside an HMAC under its own
secret).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable

from pinqpy.expr.ast import Expr
from pinqpy.plan.batch import batch_memo
from pinqpy.plan.catalog import Catalog
from pinqpy.plan.nodes import (
    BoundContributions,
    BoundDegree,
    BoundGroups,
    Distinct,
    Explode,
    GroupBy,
    Join,
    PartSource,
    PlanNode,
    PlanVisitor,
    PublicJoin,
    PyFunc,
    Select,
    SetOp,
    Source,
    TableRef,
    Where,
)

__all__ = ["NotCanonical", "canonical_plan", "digest"]


class NotCanonical(Exception):
    """The plan holds a Python callable, so it has no canonical form."""


def _e(x: Expr | PyFunc) -> str:
    if isinstance(x, PyFunc):
        raise NotCanonical
    return x.to_sql()


class _Canonical(PlanVisitor[str]):
    def __init__(self, table_identity: Callable[[TableRef], str], catalog: Catalog):
        self.table_identity = table_identity
        self.catalog = catalog

    def visit_source(self, node: Source) -> str:
        unit = f",unit={node.table.privacy_unit}" if node.table.privacy_unit else ""
        return f"table({self.table_identity(node.table)}{unit})"

    def visit_part_source(self, node: PartSource) -> str:
        cols = ",".join(node.partition.key_columns)
        return f"part({self.visit(node.partition.parent)};{cols}={node.key!r})"

    def visit_where(self, node: Where) -> str:
        return f"where({self.visit(node.child)};{_e(node.predicate)})"

    def visit_select(self, node: Select) -> str:
        items = ",".join(f"{n}={_e(e)}" for n, e in node.outputs)
        kind = "assign" if node.keep_all else "select"
        return f"{kind}({self.visit(node.child)};{items})"

    def visit_distinct(self, node: Distinct) -> str:
        return f"distinct({self.visit(node.child)};{','.join(node.columns)})"

    def visit_explode(self, node: Explode) -> str:
        return f"explode({self.visit(node.child)};{node.column},{node.max_items})"

    def visit_group_by(self, node: GroupBy) -> str:
        aggs = ",".join(f"{n}={c.to_sql()}" for n, c in node.aggs)
        return f"groupby({self.visit(node.child)};{','.join(node.keys)};{aggs})"

    def visit_join(self, node: Join) -> str:
        return (
            f"join({self.visit(node.left)};{self.visit(node.right)};"
            f"{','.join(node.on)};{node.bounds})"
        )

    def visit_public_join(self, node: PublicJoin) -> str:
        h = _public_hash(self.catalog.public_data(node.public))
        return f"publicjoin({self.visit(node.child)};public:{h:x};{','.join(node.on)};{node.how})"

    def visit_set_op(self, node: SetOp) -> str:
        return f"{node.kind}({self.visit(node.left)};{self.visit(node.right)})"

    def visit_bound_contributions(self, node: BoundContributions) -> str:
        return f"bound({self.visit(node.child)};{node.unit},{node.max_rows})"

    def visit_bound_groups(self, node: BoundGroups) -> str:
        return (
            f"boundgroups({self.visit(node.child)};{node.unit!r};{node.by!r};"
            f"{node.max_groups},{node.max_rows_per_group})"
        )

    def visit_bound_degree(self, node: BoundDegree) -> str:
        return f"bounddegree({self.visit(node.child)};{node.columns!r};{node.max_rows})"


def _public_hash(data: object) -> int:
    """A hash of a public table's contents, hashed once per query (a batch): the contents
    are part of the question, and the table may have changed since the last query."""
    memo = batch_memo()
    slot = ("public-hash", id(data))
    hit = None if memo is None else memo.get(slot)
    if hit is not None and hit[0] is data:
        return hit[1]  # type: ignore[no-any-return]
    try:
        import pandas as pd

        h = int(pd.util.hash_pandas_object(data, index=False).sum()) & (2**64 - 1)
    except Exception:
        raise NotCanonical from None
    if memo is not None:
        memo[slot] = (data, h)
    return h


def canonical_plan(
    plan: PlanNode, table_identity: Callable[[TableRef], str], catalog: Catalog
) -> str:
    """The canonical text of ``plan`` (public tables' rows found in ``catalog``); raises
    :class:`NotCanonical` for callables."""
    return _Canonical(table_identity, catalog).visit(plan)


# Drawn once per process: in-memory cache keys are HMACs under it, so nothing outside this
# process can recompute one.
_PROCESS_SECRET = secrets.token_bytes(32)


def digest(text: str) -> str:
    """An HMAC of a canonical text under a per-process secret (an in-memory cache key)."""
    data = text.encode("utf-8", "surrogatepass")  # a name in a query may hold a lone surrogate
    return hmac.new(_PROCESS_SECRET, data, hashlib.sha256).hexdigest()
