"""Counting truncated rows without choosing them.

:class:`~pinqpy.plan.nodes.BoundContributions` keeps at most ``k`` rows of each privacy unit
and :class:`~pinqpy.plan.nodes.BoundDegree` at most ``k`` rows of each key, both chosen at
random. A row count of the result does not depend on *which* rows were kept, only on how many:

    a unit (key) with ``r`` rows keeps exactly ``min(r, k)`` of them, whatever the salt,

so the truncated relation has exactly ``N = Σ_u min(r_u, k)`` rows, a deterministic function of
the child's rows. A count released over the truncation is ``N + Z`` with ``Z`` the mechanism's
noise, drawn independently of the data and of the truncation's salt. Computing ``N`` directly
from per-unit row counts therefore releases exactly the same distribution as materialising the
truncation and counting it: the random choice only decides which rows, which a count never sees.
The charge is the same too, since stability is a property of the plan, not of how an engine
evaluates it (sensitivity 1 per row of the truncation, ``k`` rows per unit at most).

Only transformations that keep every row and never look at row contents may sit between the
count and the truncation: ``select``/``assign`` (one output row per input row). A ``where``,
``distinct`` or ``explode`` above the truncation depends on which rows were kept, and a grouped
count per key does too; those still materialise the random choice, as do sums and every other
aggregate, whose value depends on the kept rows' contents.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinqpy.plan.facts import on_unit
from pinqpy.plan.nodes import BoundContributions, BoundDegree, PlanNode, Select

__all__ = ["TruncatedCount", "truncated_count"]


@dataclass(frozen=True)
class TruncatedCount:
    """An ungrouped count over a truncation, as ``Σ min(rows per key of columns, limit)`` over
    ``child``. ``drop_null``: rows whose key is NULL are dropped first (a privacy unit that is
    NULL belongs to no known person: :func:`~pinqpy.plan.facts.on_unit`); otherwise a NULL
    key is one key."""

    child: PlanNode
    columns: tuple[str, ...]
    limit: int
    drop_null: bool


def truncated_count(plan: PlanNode) -> TruncatedCount | None:
    """The truncation an ungrouped count of ``plan`` can be computed from without choosing
    rows (see the module's derivation), or None."""
    node = plan
    while isinstance(node, Select):  # one row out per row in: the count is unchanged
        node = node.child
    if isinstance(node, BoundContributions):
        return TruncatedCount(node.child, (node.unit,), node.max_rows, drop_null=True)
    if isinstance(node, BoundDegree):
        # A cap on exactly the unit drops the rows of no known person, as the engines do.
        drop = on_unit(node.child, node.columns)
        return TruncatedCount(node.child, node.columns, node.max_rows, drop_null=drop)
    return None
