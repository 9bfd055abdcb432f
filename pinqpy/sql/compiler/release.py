"""The outer release: a statement becomes prepared measurements, nothing charged yet.

This module runs the passes in order and splits the budget. A FROM clause becomes a
:class:`~pinqpy.pipeline.relation.Relation` built with the same checked transformations as
``PrivateFrame``'s methods, and the outermost SELECT becomes a list of prepared aggregations
(:mod:`pinqpy.pipeline.prepare`) charged in one transaction, exactly as ``frame.count(...)``
would be.

Budget semantics (SQL.md): the query's epsilon is the *total* it charges. With ``m`` noisy
measurements (distinct aggregate calls in SELECT, HAVING and ORDER BY) over a FROM clause of
stability ``s`` (the largest over the budgets it draws on), each measurement gets
``epsilon / (m·s)``, so each budget is charged at most ``epsilon`` and the one of largest
stability exactly ``epsilon``. The outermost GROUP BY is a partition (parallel composition):
every group gets all ``m`` measurements and the budget pays once.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pinqpy.errors import PrivacyError
from pinqpy.expr.ast import Call, Expr, canonical_aggregate
from pinqpy.expr.check import constant_value
from pinqpy.noise.keyselect import KeySelectionMechanism
from pinqpy.pipeline.prepare import Prepared
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.meta import internal_names
from pinqpy.plan.stability import INF
from pinqpy.sql import ast as q
from pinqpy.sql.compiler.aggregates import Share, prepare
from pinqpy.sql.compiler.clauses import where
from pinqpy.sql.compiler.context import Catalog, Context, Scratch
from pinqpy.sql.compiler.contributions import (
    Contributions,
    bound_rows,
    contributions,
    query_unit,
)
from pinqpy.sql.compiler.keys import GroupKeys, Selection, group_by, groups, keys_only
from pinqpy.sql.compiler.options import check_options, query_budget
from pinqpy.sql.compiler.outputs import outer_select, outputs
from pinqpy.sql.compiler.scopes import Scope, group_keys
from pinqpy.sql.compiler.subqueries import from_clause

__all__ = ["CompiledRelease", "Measurement", "compile_release", "release"]


@dataclass(frozen=True)
class Measurement:
    """One noisy aggregate of the release."""

    call: Call
    prepared: Prepared
    label: str


@dataclass(frozen=True)
class CompiledRelease:
    """Everything needed to charge, run and shape a query's answer (nothing charged yet)."""

    frame: Relation
    measurements: tuple[Measurement, ...]
    grouping: Grouping | None
    target: tuple[Grouping, dict[object, Any]] | None
    key_names: tuple[str, ...]
    outputs: tuple[tuple[str, Expr], ...]  # output name -> expression over keys and __m{i}
    having: Expr | None
    order_by: tuple[q.OrderItem, ...] | None
    limit: int | None
    epsilon: Fraction
    delta: Fraction
    stability: Fraction
    per_measurement_epsilon: Fraction
    group_desc: str
    # Private key selection (no public keys, delta > 0): (frame, key columns, mechanism) and
    # the lineage the per-group aggregates are charged through; keys are chosen at run time.
    key_selection: tuple[Relation, tuple[str, ...], KeySelectionMechanism] | None = None
    target_lineage: dict[object, Any] | None = None
    # Where the charge or the noise differs from what BigQuery would do (EXPLAIN lists them).
    notes: tuple[str, ...] = ()
    # The measurement (a COUNT(*) of the release frame) whose released values are the key
    # selection's noisy counts; it is not charged or measured separately.
    selection_index: int | None = None
    # SELECT releases only the GROUP BY keys: the selection's noisy counts are not output.
    keys_only: bool = False
    # SELECT DISTINCT over noisy results: duplicate released rows are dropped (before LIMIT).
    distinct: bool = False


def compile_release(
    catalog: Catalog, statement: q.Query, text: str, epsilon: object, delta: object
) -> CompiledRelease:
    """The release of a parsed query: its options and budget checked, then the passes."""
    options = dict(statement.options)
    check_options(text, options)
    eps, dlt = query_budget(text, epsilon, delta, options)
    # The compiler names its scratch columns with the reserved prefix, which the query text
    # itself may not use (the parser refuses such aliases), so they never meet a user's.
    with internal_names():
        return release(Context(catalog, text), statement, eps, dlt, options)


@dataclass(frozen=True)
class _Read:
    """What the release reads: the outer SELECT (GROUP BY ordinals and aliases replaced),
    the names of its FROM clause, its GROUP BY keys over the rows (privacy unit, WHERE and
    row bound applied: ``keys.frame``) and the notes so far."""

    select: q.Select
    scope: Scope
    keys: GroupKeys
    notes: tuple[str, ...]


@dataclass(frozen=True)
class _Split:
    """How the query's budget is split over its measurements."""

    stability: Fraction
    eps_each: Fraction
    delta_each: Fraction | None
    gaussian: bool
    selection_index: int | None


def release(
    ctx: Context, s: q.Query, epsilon: Fraction, delta: Fraction, options: Mapping[str, object]
) -> CompiledRelease:
    """The passes, in order, over the outermost query."""
    outer = outer_select(ctx, s)
    read = _read(ctx, outer.select, delta, options, outer.notes)
    keys, select = read.keys, read.select
    outs = outputs(ctx, read.scope, select, keys.frame, keys.exprs)
    only_keys = not outs.calls
    calls = outs.calls or (keys_only(keys, options),)
    grouped = bool(select.group_by)
    per = contributions(ctx, keys.frame, calls, keys.cols, options, grouped, keys.scratch)
    notes = read.notes + per.notes
    if only_keys:  # the hidden selection count is not released: no note about its value
        hidden = calls[0].to_sql()
        notes = tuple(note for note in notes if not note.startswith(hidden))
    frame = per.frame
    split = _split(frame, calls, per.computed, keys, epsilon, delta, options)
    selection = Selection(
        split.eps_each, delta, split.gaussian, split.selection_index, split.delta_each
    )
    parts = groups(ctx, keys, frame, select.group_by, selection, options)
    share = Share(split.eps_each, split.delta_each, options.get("quantile_ci") is True)
    return CompiledRelease(
        frame=frame,
        measurements=_measurements(ctx, calls, per, keys.cols, share),
        grouping=parts.grouping,
        target=parts.target,
        key_names=keys.cols,
        outputs=outs.outputs,
        having=outs.having,
        order_by=outs.order_by,
        limit=select.limit,
        epsilon=epsilon,
        delta=delta if split.gaussian else Fraction(0),
        stability=split.stability,
        per_measurement_epsilon=split.eps_each,
        group_desc=parts.group_desc,
        key_selection=parts.key_selection,
        target_lineage=parts.target_lineage,
        notes=notes + parts.notes,
        selection_index=split.selection_index,
        keys_only=only_keys,
        distinct=outer.distinct,
    )


def _read(
    ctx: Context,
    s: q.Select,
    delta: Fraction,
    options: Mapping[str, object],
    notes: tuple[str, ...],
) -> _Read:
    """The FROM clause, read with the query's privacy unit, WHERE, row bound and keys."""
    compiled = from_clause(ctx, s.from_, Scratch())
    scope = compiled.scope
    if scope.frame is None:
        raise PrivacyError(
            "this query reads only public tables; there is nothing private to release"
        )
    unit = query_unit(ctx, scope, scope.frame, options)
    frame = where(ctx, scope, s, unit.frame)
    s = dataclasses.replace(s, group_by=group_keys(ctx, scope, s))
    frame = bound_rows(frame, options)
    keys = group_by(ctx, scope, s.group_by, frame, delta, compiled.scratch)
    return _Read(s, scope, keys, notes + unit.notes)


def _split(
    frame: Relation,
    calls: tuple[Call, ...],
    computed: Mapping[Call, Call],
    keys: GroupKeys,
    epsilon: Fraction,
    delta: Fraction,
    options: Mapping[str, object],
) -> _Split:
    """Each measurement's share of epsilon (and delta), over the frame's stability."""
    worst = max(frame.stabilities().values())
    if worst == INF:
        unit = frame.privacy_unit
        hint = (
            f"register it with max_rows=k (at most k rows per {unit!r}), write OPTIONS "
            f"(max_rows_contributed = k), or GROUP BY {unit!r} in a subquery"
            if unit
            else "bound each person's rows (register the table with max_rows=k)"
        )
        raise PrivacyError(
            f"FROM: a user-level table's contributions are unbounded, so one person could "
            f"change any number of rows; {hint}"
        )
    s_frac = Fraction(worst)
    gaussian = str(options.get("noise", "laplace")).lower() == "gaussian"
    if gaussian and delta == 0:
        raise PrivacyError("OPTIONS (noise = 'gaussian') needs delta > 0")
    if gaussian and s_frac != 1:
        raise PrivacyError(
            "Gaussian noise in SQL needs a FROM clause of stability 1; use Laplace "
            "(the default) or bound the query's stability"
        )
    # COUNT(*) of a whole table whose row count is public is released free and exactly:
    # the query's epsilon is split among the other measurements only.
    public = sum(1 for c in calls if _public_count(computed[c], frame, keys.cols))
    m = max(len(calls) - public, 1)
    selection_index = _selection_count(calls, computed) if keys.private else None
    # Key selection, when needed, is one more measurement of the split -- unless the
    # query asks for COUNT(*), whose noisy counts are then the selection's (one step).
    extra = 1 if (keys.private and selection_index is None) else 0
    eps_each = epsilon / ((m + extra) * s_frac)
    delta_for_noise = delta / 2 if (gaussian and keys.private) else delta
    delta_each = (delta_for_noise / m) if gaussian else None
    return _Split(s_frac, eps_each, delta_each, gaussian, selection_index)


def _measurements(
    ctx: Context,
    calls: tuple[Call, ...],
    per: Contributions,
    key_cols: tuple[str, ...],
    share: Share,
) -> tuple[Measurement, ...]:
    """Each call's prepared measurement over the relation the release reads."""
    out = []
    scratch = per.scratch
    for c in calls:
        prepared, scratch = prepare(ctx, per.computed[c], per.frame, key_cols, share, scratch)
        out.append(Measurement(c, prepared, c.to_sql()))
    return tuple(out)


def _public_count(call: Call, frame: Relation, key_cols: tuple[str, ...]) -> bool:
    """Whether ``call`` is a COUNT(*) of the whole frame over a public row count (released
    exactly, charged nothing: :func:`~pinqpy.pipeline.prepare.prepare_count`)."""
    return (
        not key_cols
        and canonical_aggregate(call.name) == "COUNT"
        and call.star
        and not call.distinct
        and frame.meta.size is not None
    )


def _selection_count(calls: tuple[Call, ...], prepared: Mapping[Call, Call]) -> int | None:
    """The index of the measured call whose exact value per key is the key selection's count
    (the rows of the released relation with that key), if the query asks for one.

    The selection counts the rows of the relation the aggregates read, so a call qualifies
    when the aggregate computed on that relation (``prepared``) is exactly that count:

    * ``COUNT(*)`` of its rows (a plain COUNT(*); under BigQuery's per-unit semantics,
      ``COUNT(DISTINCT unit)``, the count of the unit's rows per group);
    * under per-unit semantics, a ``COUNT(*)`` whose per-unit count is clamped to ``[lo, 1]``:
      every unit that has a row in a group counts at least 1 there, so each clamped count is
      exactly 1 and their sum is the count of per-unit rows. With any other upper bound
      (``contribution_bounds_per_group => (0, 5)``, or the ``(0, k)`` derived from
      ``max_rows_contributed = k``) it is a sum of counts up to that bound, not the
      selection's count of units, and is measured on its own.
    """
    for i, c in enumerate(calls):
        p = prepared[c]
        if p.name == "COUNT" and p.star and not p.distinct:
            return i
        if (
            c.name == "COUNT"
            and c.star
            and not c.distinct
            and p.name == "SUM"
            and len(p.args) == 3
            and _constant_number(p.args[2]) == 1
            and (_constant_number(p.args[1]) is not None)
        ):
            return i
    return None


def _constant_number(e: Expr) -> float | None:
    """A numeric literal's value, else None."""
    v = constant_value(e)
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return float(v)
    return None
