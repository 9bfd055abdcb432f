"""The outer GROUP BY and its keys: public, or selected privately.

:func:`group_by` takes the outer SELECT's GROUP BY over the FROM clause's relation and
returns each key's expression, its column (a computed key gets a scratch column) and its
public values when they are known without reading the data: an inline list (``GROUP BY x
IN (...)``), a public table joined in, or keys and bounds declared on the table. A key with
none is selected privately at run time (noisy thresholding, which needs a delta).

:func:`groups` takes those keys and the release's per-measurement budget and returns the
partition the aggregates are measured on: a :class:`~pinqpy.plan.grouping.Grouping` of the
public key combinations, or the key-selection mechanism that chooses them
(:mod:`pinqpy.noise.keyselect`). Either way the outer GROUP BY is parallel composition: the
budget pays once for all groups.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pinqpy.accounting.agents import AllParts
from pinqpy.errors import PinqError, PrivacyError
from pinqpy.expr.ast import Call, Column, Expr, Literal, NamedArg
from pinqpy.expr.bounds import derive_keys
from pinqpy.expr.check import _NOT_CONSTANT, constant_value
from pinqpy.noise.keyselect import KeySelectionMechanism
from pinqpy.pipeline.relation import Relation
from pinqpy.pipeline.run import key_structure
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.meta import check_keys
from pinqpy.sql import ast as q
from pinqpy.sql.bigquery import PER_GROUP
from pinqpy.sql.compiler.clauses import check
from pinqpy.sql.compiler.context import Context, Scratch
from pinqpy.sql.compiler.scopes import Scope, resolve

__all__ = ["MAX_GROUPS", "GroupKeys", "Groups", "group_by", "groups", "keys_only"]

MAX_GROUPS = 1_000_000


@dataclass(frozen=True)
class GroupKeys:
    """The outer GROUP BY: each key's expression, its column in ``frame`` (computed keys
    assigned), its public values (None: selected privately), and the scratch after."""

    exprs: tuple[Expr, ...]
    cols: tuple[str, ...]
    lists: tuple[list[Hashable] | None, ...]
    frame: Relation
    scratch: Scratch

    @property
    def private(self) -> bool:
        """Whether some key has no public values (the keys are selected privately)."""
        return any(k is None for k in self.lists)


@dataclass(frozen=True)
class Groups:
    """The partition the release measures on (nothing of it when there is no GROUP BY).

    ``target`` is the public keys' grouping with the lineage the per-group aggregates are
    charged through; ``key_selection`` is (frame, key columns, mechanism) when the keys
    are chosen privately at run time."""

    grouping: Grouping | None = None
    target: tuple[Grouping, dict[object, Any]] | None = None
    group_desc: str = ""
    key_selection: tuple[Relation, tuple[str, ...], KeySelectionMechanism] | None = None
    target_lineage: dict[object, Any] | None = None
    notes: tuple[str, ...] = ()


def group_by(
    ctx: Context,
    scope: Scope,
    group_keys: tuple[q.GroupKey, ...] | None,
    frame: Relation,
    delta: Fraction,
    scratch: Scratch,
) -> GroupKeys:
    """The outer GROUP BY's keys over ``frame``, public keys found where they are known."""
    exprs: list[Expr] = []
    cols: list[str] = []
    lists: list[list[Hashable] | None] = []
    assigns: dict[str, Expr] = {}
    for gk in group_keys or ():
        e = resolve(ctx, scope, gk.expr)
        check(ctx, e, frame)
        if isinstance(e, Column):
            col = e.name
        else:
            col, scratch = scratch.take("g")
            assigns[col] = e
        exprs.append(e)
        cols.append(col)
        lists.append(_public_keys(ctx, scope, gk, e, frame, delta))
    if assigns:
        frame = frame.assign(assigns)
    return GroupKeys(tuple(exprs), tuple(cols), tuple(lists), frame, scratch)


def _public_keys(
    ctx: Context, scope: Scope, gk: q.GroupKey, e: Expr, frame: Relation, delta: Fraction
) -> list[Hashable] | None:
    """A key's public values, or None when they are to be selected privately."""
    if gk.keys is not None:
        values = []
        for k in gk.keys:
            v = constant_value(k)
            if v is _NOT_CONSTANT:
                raise ctx.syntax("GROUP BY ... IN (...) needs constant keys", k.pos)
            values.append(v)
        return values
    if isinstance(e, Column) and e.name in scope.public_values:
        table, column = scope.public_values[e.name]
        return table[column].drop_duplicates().tolist()
    found = derive_keys(e, frame.keys, frame.bounds, frame.schema)
    if found is not None:
        return list(found)
    if delta > 0:
        return None  # selected privately at run time (noisy thresholding spends delta)
    fix = (
        "declare keys on the table, join a public table of keys, or give the query a "
        "delta (delta= or OPTIONS (delta = 1e-6))"
    )
    col = e.name if isinstance(e, Column) else "COLUMN"
    raise PrivacyError(
        f"GROUP BY {e.to_sql()}: its keys are not public, and reading them off the data "
        "would reveal who is in it. Give the keys inline (GROUP BY "
        f"{e.to_sql()} IN ('a', 'b')), {fix} so that keys are selected privately",
        hints={
            "python": fix,
            "magic": "declare keys on the table, join a public table of keys, or give "
            "the query a delta (-d 1e-6 or OPTIONS (delta = 1e-6))",
            "shell": f"start the shell with --keys {col}=K1,K2,..., join a public table "
            "of keys (--public NAME=PATH), or give the query a delta (.delta 1e-6 or "
            "OPTIONS (delta = 1e-6), with a delta budget: --delta D)",
            "cli": f"pass --keys {col}=K1,K2,..., join a public table of keys (--public "
            "NAME=PATH), or give the query a delta (--delta-per-query 1e-6 or OPTIONS "
            "(delta = 1e-6), with a delta budget: --delta D)",
        },
    )


def keys_only(keys: GroupKeys, options: Mapping[str, object]) -> Call:
    """The measurement of a query that releases only its GROUP BY keys.

    ``SELECT educ FROM t GROUP BY educ`` (SmartNoise's tests and documentation write it)
    asks which keys occur. When the keys are not public, that set is itself private and
    is released by pinqpy's private key selection: a noisy COUNT(*) per key, thresholded.
    The selection is the query's one measurement, charged the query's epsilon (and delta);
    the noisy counts are not output -- dropping them is post-processing. When every key is
    public, the answer is known without reading the data, so nothing private is asked and
    the query is refused rather than charged for nothing: pinqpy releases every public
    key whether or not it occurs, so the keys alone would say nothing about the rows.
    """
    if not keys.exprs:
        raise PrivacyError(
            "the query releases no aggregate: the outermost SELECT needs at least one "
            "noisy aggregate such as COUNT(*)"
        )
    keys_text = ", ".join(e.to_sql() for e in keys.exprs)
    if not keys.private:
        raise PrivacyError(
            f"the query releases only the values of {keys_text} (its GROUP BY or SELECT "
            "DISTINCT keys), and they are public (declared keys, an IN list, a public "
            "table or bounds): pinqpy releases every public key, whether it occurs or "
            "not, so the keys alone say nothing; add an aggregate such as COUNT(*) (and "
            "HAVING COUNT(*) > t to keep the keys that occur)"
        )
    if "privacy_unit_column" in options or "max_groups_contributed" in options:
        # BigQuery's meaning: a group is kept by a noisy count of its units, each unit
        # counted once in each of the (at most max_groups_contributed) groups it keeps.
        once = NamedArg(PER_GROUP, (Literal(0), Literal(1)), pair=True)
        return Call("COUNT", (once,), star=True)
    return Call("COUNT", (), star=True)


@dataclass(frozen=True)
class Selection:
    """What a private key selection is given: the per-measurement budget and how the
    selection's counts are released (see :func:`key_selection_mechanism`)."""

    eps_each: Fraction
    delta: Fraction
    gaussian: bool
    selection_index: int | None
    delta_each: Fraction | None


def groups(
    ctx: Context,
    keys: GroupKeys,
    frame: Relation,
    group_keys: tuple[q.GroupKey, ...] | None,
    selection: Selection,
    options: Mapping[str, object],
) -> Groups:
    """The partition of the release: public keys' grouping, or the private selection."""
    if not keys.cols:
        return Groups()
    target_lineage = {AllParts(frame.partition_agent(keys.cols)): Fraction(1)}
    keys_text = ", ".join(e.to_sql() for e in keys.exprs)
    if keys.private:
        structure = key_structure(frame, keys.cols)
        mech = key_selection_mechanism(selection, structure)
        notes: tuple[str, ...] = ()
        if "privacy_unit_column" in options:
            notes = (
                "groups: BigQuery keeps a group when a noisy count of its units passes "
                "a threshold; pinqpy selects keys privately from the rows it reads "
                "(one per unit and group when contributions are totalled per unit)",
            )
        return Groups(
            group_desc=f"GROUP BY {keys_text} (keys selected privately: {mech.describe()})",
            key_selection=(frame, keys.cols, mech),
            target_lineage=target_lineage,
            notes=notes,
        )
    grouping = _public_grouping(ctx, keys, frame, group_keys)
    notes = ()
    if "privacy_unit_column" in options:
        notes = (
            f"groups: the keys of {keys_text} are public, so every group is released "
            "(BigQuery would drop the groups with few units)",
        )
    return Groups(
        grouping=grouping,
        target=(grouping, target_lineage),
        group_desc=f"GROUP BY {keys_text} ({len(grouping.keys)} public keys)",
        target_lineage=target_lineage,
        notes=notes,
    )


def _public_grouping(
    ctx: Context, keys: GroupKeys, frame: Relation, group_keys: tuple[q.GroupKey, ...] | None
) -> Grouping:
    """Every combination of the public keys, checked against the key columns' types."""
    lists = keys.lists
    combos = list(itertools.product(*lists)) if len(lists) > 1 else lists[0]
    assert combos is not None
    if len(combos) > MAX_GROUPS:
        raise PrivacyError(
            f"GROUP BY has {len(combos):,} key combinations; at most {MAX_GROUPS:,}"
        )
    try:
        keys_t = check_keys(combos, keys.cols, frame.schema)
    except PinqError as err:
        at = next((gk.keys[0].pos for gk in (group_keys or ()) if gk.keys), None)
        raise ctx.syntax(str(err), at) from None
    return Grouping(keys.cols, keys_t)


def key_selection_mechanism(
    selection: Selection, structure: tuple[int, int]
) -> KeySelectionMechanism:
    """The private key selection of a GROUP BY (:mod:`pinqpy.noise.keyselect`).

    Noise of a count at ``eps_each`` per row, threshold for a unit of the FROM clause with
    ``structure = (G, k)`` (:func:`pinqpy.pipeline.run.key_structure`: at most ``G`` keys of
    at most ``k`` rows; ``G = k = ceil(s)`` for stability ``s`` with no more known), so the
    charge at stability ``s`` is ``(s·eps_each, delta)`` for the Laplace: one measurement's
    epsilon share and the whole delta. With ``noise = 'gaussian'`` (stability 1) half of
    delta is the threshold's, and the other half is split over the Gaussian measurements;
    when the selection is the query's COUNT(*) its noise is that COUNT(*)'s discrete Gaussian
    (its ``delta_each``), so the total stays ``delta``. Without a COUNT(*) the selection keeps
    Laplace noise (its counts are not released).

    A query with COUNT(*) releases the selection's noisy counts as that COUNT(*): a
    post-processing of the selection, so the split has ``m`` measurements, not ``m + 1``.
    Other aggregates (SUM, AVG, ...) are measured on the released keys with their own share.
    AVG keeps its own count: the mean mechanism's guarantees (its split of epsilon between a
    sum and an independent, unbiased count; its clamping into the bounds and its intervals)
    assume that count's noise, while a selection count is biased upward near the threshold
    (it passed because its noise was high) and carries the per-query share, not half of the
    AVG's; using it would change what the mean's intervals state.
    """
    g, k = structure
    eps_each, delta = selection.eps_each, selection.delta
    if selection.gaussian:
        noise_delta = selection.delta_each if selection.selection_index is not None else None
        return KeySelectionMechanism(
            eps_each, delta / 2, max_groups=g, max_rows=k, noise_delta=noise_delta
        )
    return KeySelectionMechanism(eps_each, delta, max_groups=g, max_rows=k)
