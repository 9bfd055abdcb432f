"""Contribution bounds per privacy unit: what one unit may add to the release.

Three steps of the outer query, in this order:

- :func:`query_unit` reads ``OPTIONS (privacy_unit_column = id)``: the FROM clause read as
  one of user-level rows (BigQuery's privacy unit), charged for the group privacy that
  costs on a table registered with one row per person.
- :func:`bound_rows` applies ``max_rows_contributed = k``: at most k rows per unit.
- :func:`contributions` decides how each aggregate reads the rows: as they are, with
  pinqpy's inline per-row bounds ``SUM(x, lo, hi)``; or, under BigQuery's per-unit
  semantics (``privacy_unit_column``, ``max_groups_contributed``,
  ``contribution_bounds_per_group`` or ``COUNT(DISTINCT unit)``), each unit's total per
  group first, clamped, then added up over the units (:func:`per_unit`).

Each takes the relation so far and the query's options, and returns the relation the next
step reads with the lines EXPLAIN lists under "Differences from BigQuery".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from pinqpy.accounting.agents import Scaled
from pinqpy.errors import PrivacyError
from pinqpy.expr.ast import Binary, Call, Case, Column, Expr, Literal
from pinqpy.expr.bounds import derive_bounds
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.catalog import agent_name
from pinqpy.plan.nodes import Source
from pinqpy.plan.stability import INF, lineage_of
from pinqpy.sql.bigquery import PER_GROUP, PER_ROW, ROW_AGGREGATES, Contribution, split_bounds
from pinqpy.sql.compiler.clauses import constant_argument
from pinqpy.sql.compiler.context import Context, Scratch, option_pos
from pinqpy.sql.compiler.scopes import Scope, lookup

__all__ = [
    "Contributions",
    "Unit",
    "bound_rows",
    "clamp",
    "contributions",
    "literal",
    "per_unit",
    "query_unit",
]

#: An aggregate call without its named arguments, and the contribution bound they give.
Spec = tuple[Call, Contribution | None]


@dataclass(frozen=True)
class Unit:
    """The FROM clause with the query's privacy unit, and what that changes from BigQuery."""

    frame: Relation
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Contributions:
    """The relation the release reads, the aggregate each call computes on it, the notes
    for EXPLAIN and the scratch after the per-unit columns' names."""

    frame: Relation
    computed: Mapping[Call, Call]
    notes: tuple[str, ...]
    scratch: Scratch


# -- the privacy unit and its rows ---------------------------------------------------------
def query_unit(
    ctx: Context, scope: Scope, frame: Relation, options: Mapping[str, object]
) -> Unit:
    """The FROM clause with the query's ``privacy_unit_column``, if the query names one.

    A user-level table keeps its own unit; naming another is refused. A row-level table
    read directly becomes user-level on the named column for this query, since each of
    its rows still belongs to exactly one value of that column. The table's budget
    protects rows, not units: a row changed is its unit leaving and coming back with one
    row fewer, two changes of a unit, so a query that is ``s·epsilon``-DP per unit is
    ``2·s·epsilon``-DP per row (group privacy). The view therefore draws on the budget
    at twice its stability (:class:`~pinqpy.accounting.agents.Scaled`), so each
    mechanism is charged its own ``charge.at(2·s)`` (a key selection keeps the delta of
    its threshold: a unit's old and new rows each have at most its G keys, and a key
    only one side has passes with probability at most delta), and EXPLAIN shows the
    doubled stability.
    """
    raw = options.get("privacy_unit_column")
    if "privacy_unit_column" not in options:
        return Unit(frame)
    at = option_pos(ctx.text, "privacy_unit_column", value=True)
    if not isinstance(raw, str):
        raise ctx.syntax("privacy_unit_column names a column: privacy_unit_column = id", at)
    table, _, name = raw.rpartition(".")
    col = lookup(ctx, scope, Column(name, table or None), at)
    if frame.privacy_unit == col:
        return Unit(frame)
    if frame.privacy_unit is not None:
        raise PrivacyError(
            f"OPTIONS privacy_unit_column = {raw}: the FROM clause's privacy unit is "
            f"{frame.privacy_unit!r}, declared when its table was registered; a query can "
            "only name that unit"
        )
    plan = frame.plan
    if not (isinstance(plan, Source) and plan.table.privacy_unit is None):
        raise PrivacyError(
            f"OPTIONS privacy_unit_column = {raw}: the FROM clause no longer carries a "
            "privacy unit (a subquery, join or set operation made its column a computed "
            "one); name the unit of a table read directly, or register the table with "
            "privacy_unit=..."
        )
    budget = frame.catalog.agent(plan.table.agent)
    agent = Scaled(budget, Fraction(2))
    table_ref = dataclasses.replace(plan.table, privacy_unit=col, agent=agent_name(agent))
    note = (
        f"privacy_unit_column = {col}: {plan.table.name} is registered with one row per "
        "person, so pinqpy charges twice the per-unit cost (a changed row is its unit "
        "leaving and coming back)"
    )
    frame = Relation(Source(table_ref), frame.catalog.with_agent(table_ref.agent, agent))
    return Unit(frame, (note,))


def bound_rows(frame: Relation, options: Mapping[str, object]) -> Relation:
    """``frame`` with at most ``max_rows_contributed`` rows per unit, if the option is set."""
    max_rows = options.get("max_rows_contributed")
    if max_rows is None:
        return frame
    if frame.privacy_unit is None:
        raise PrivacyError(
            "OPTIONS max_rows_contributed bounds the rows of each privacy unit, but the "
            "FROM clause has none: name it with privacy_unit_column = <column>"
        )
    return frame.bound_contributions(max_rows)  # type: ignore[arg-type]


def rows_per_unit(frame: Relation) -> Fraction | float:
    """How many rows one unit of the FROM clause can have (its stability per unit)."""
    unit = frame.meta.unit
    if unit is None:
        return INF
    return lineage_of(frame.plan).get(unit[1].agent, INF)


def groups_per_unit(
    options: Mapping[str, object], key_cols: tuple[str, ...]
) -> tuple[int | None, tuple[str, ...]]:
    """``max_groups_contributed``: as given, BigQuery's default 1 when the query names its
    privacy unit, and None (no group bound: a unit with at most k rows meets at most k
    groups) when the option is NULL, when ``max_rows_contributed`` bounds the rows, or
    when the query is pinqpy's own. With the note EXPLAIN gives for the default."""
    if "max_groups_contributed" in options:
        value = options["max_groups_contributed"]
        return (None if value is None else int(value)), ()  # type: ignore[call-overload]
    if "privacy_unit_column" in options and "max_rows_contributed" not in options:
        note = (
            "max_groups_contributed is BigQuery's default 1: each unit keeps one "
            "group of the GROUP BY, chosen at random"
        )
        return 1, ((note,) if key_cols else ())
    return None, ()


# -- how each aggregate reads the rows -----------------------------------------------------
def contributions(
    ctx: Context,
    frame: Relation,
    calls: tuple[Call, ...],
    key_cols: tuple[str, ...],
    options: Mapping[str, object],
    grouped: bool,
    scratch: Scratch,
) -> Contributions:
    """The relation the release reads and, for each call, the aggregate computed on it.

    With a privacy unit and BigQuery's per-unit semantics (a ``privacy_unit_column`` or
    ``max_groups_contributed`` option, a ``contribution_bounds_per_group``, or
    ``COUNT(DISTINCT unit)``), each aggregate is computed per unit and group first,
    clamped, then added up (:func:`_per_unit_release`). Otherwise the rows are read as
    they are, and a per-row bound is pinqpy's inline ``(lo, hi)``. An aggregate of rows
    (PERCENTILE, MEDIAN, VARIANCE, ...) under ``max_groups_contributed = G`` reads
    ``bound_groups(by, G, k)`` with k the rows a unit may have in all (a unit has no more
    rows in one group than in all), which a GROUP BY on ``by`` charges as G parts at
    stability k; without a bound on a unit's rows it is refused.
    """
    specs = {c: split_bounds(c, ctx.text) for c in calls}
    unit = frame.privacy_unit
    plain_calls = {c: _with_row_bounds(ctx, c, *specs[c], unit) for c in calls}
    as_rows = Contributions(frame, plain_calls, (), scratch)
    if unit is None:
        return as_rows
    group_bound = any(b is not None and b.kind == "group" for _, b in specs.values())
    distinct_unit = [c for c, (p, _) in specs.items() if counts_units(p, unit)]
    per_unit_wanted = (
        group_bound
        or bool(distinct_unit)
        or "privacy_unit_column" in options
        or options.get("max_groups_contributed") is not None
    )
    if not per_unit_wanted:
        return as_rows
    rows = [c for c, (p, _) in specs.items() if p.name in ROW_AGGREGATES or p.distinct]
    rows = [c for c in rows if c not in distinct_unit]
    if not rows:
        return _per_unit_release(ctx, frame, calls, specs, key_cols, options, scratch)
    if group_bound or distinct_unit:
        other = next(c for c in calls if c not in rows)
        raise PrivacyError(
            f"{rows[0].to_sql()} is computed over rows and {other.to_sql()} over each "
            "unit's total in a group; pinqpy releases one or the other in a query: split "
            "it in two"
        )
    groups, notes = groups_per_unit(options, key_cols)
    if not grouped or groups is None:
        return dataclasses.replace(as_rows, notes=notes)
    k = rows_per_unit(frame)
    bound_groups = getattr(frame, "bound_groups", None)
    if bound_groups is None or k == INF:
        raise PrivacyError(
            f"{rows[0].to_sql()} with max_groups_contributed: pinqpy computes it over "
            "rows and needs the rows of each unit bounded; write OPTIONS "
            "(max_rows_contributed = k) instead of max_groups_contributed"
        )
    notes += (
        f"{rows[0].to_sql()} is computed over rows: each unit keeps at most {groups} "
        f"group(s) and at most {k} rows in each (its rows in all), chosen at random",
    )
    bounded = bound_groups(tuple(key_cols), groups, int(k))
    return Contributions(bounded, plain_calls, notes, scratch)


def counts_units(call: Call, unit: str | None) -> bool:
    """Whether ``call`` is ``COUNT(DISTINCT unit)``."""
    return (
        call.name == "COUNT"
        and call.distinct
        and len(call.args) == 1
        and isinstance(call.args[0], Column)
        and call.args[0].name == unit
    )


def _with_row_bounds(
    ctx: Context, call: Call, plain: Call, bound: Contribution | None, unit: str | None
) -> Call:
    """``plain`` with a bound that reads rows as they are written inline (lo, hi).

    A per-group bound on a table with one row per person is the same per-row bound: a
    person's total in a group is their one row's value. For COUNT it clamps that row's
    count of 1, which only a bound excluding 1 would change.
    """
    if bound is None or (bound.kind == "group" and unit is not None):
        return plain
    if plain.name == "COUNT":
        if not bound.lo <= 1 <= bound.hi:
            raise ctx.syntax(
                f"{PER_GROUP} of COUNT on a table with one row per person must include 1 "
                "(each person's count in a group is 1)",
                bound.pos,
            )
        return plain
    return Call(plain.name, (*plain.args, literal(bound.lo), literal(bound.hi)), pos=call.pos)


# -- BigQuery's per-unit release -----------------------------------------------------------
def _per_unit_release(
    ctx: Context,
    frame: Relation,
    calls: tuple[Call, ...],
    specs: Mapping[Call, Spec],
    key_cols: tuple[str, ...],
    options: Mapping[str, object],
    scratch: Scratch,
) -> Contributions:
    """BigQuery's semantics with pinqpy's stable transformations.

    1. Group by the unit and the GROUP BY keys: one row per unit and group, holding the
       unit's exact contribution to the group (its row count, its sum, its average).
    2. Keep at most G of each unit's rows, chosen at random (``max_groups_contributed``;
       without it, the k rows a unit may have can meet at most k groups, so G = k keeps
       every row). Every row still carries one unit, so bounding contributions to G rows
       has stability G whatever came before (:mod:`pinqpy.plan.stability`). Without a
       GROUP BY the grouping by the unit alone has stability 1.
    3. Release the clamped sum (or mean) of those contributions per group: a unit adds
       one value within ``contribution_bounds_per_group`` to each of at most G groups.

    ``COUNT(DISTINCT unit)`` is the count of those rows: removing a unit removes exactly
    one row from each of its (at most G) groups, so it needs no row bound at all.
    """
    unit = frame.privacy_unit
    assert unit is not None
    k = rows_per_unit(frame)
    aggs: dict[str, Expr] = {}
    outer: dict[Call, Call] = {}
    notes: tuple[str, ...] = ()
    for c in calls:
        plain, bound = specs[c]
        if counts_units(plain, unit):
            outer[c] = Call("COUNT", (), star=True)
            continue
        if len(plain.args) == 3:  # pinqpy's inline bounds clamp rows
            lo_hi = [constant_argument(ctx, a, plain) for a in plain.args[1:]]
            bound = Contribution("row", float(lo_hi[0]), float(lo_hi[1]), plain.pos)
            plain = Call(plain.name, plain.args[:1], pos=plain.pos)
        inner, outer_name = per_unit(plain, bound)
        lo, hi, why = _unit_bounds(c, plain, bound, frame, k)
        notes += why
        if plain.name == "COUNT":
            notes += (
                f"{c.to_sql()}: a sum of each unit's clamped count, released as a number "
                "(BigQuery rounds it to an integer)",
            )
        name, scratch = scratch.take("u")
        aggs[name] = inner
        outer[c] = Call(outer_name, (Column(name), literal(lo), literal(hi)), pos=c.pos)
    keys = [unit, *[col for col in key_cols if col != unit]]
    per = frame.aggregate(frame.group_keys(keys), aggs)
    if key_cols:
        groups, default = groups_per_unit(options, key_cols)
        notes += default
        if groups is None:
            if k == INF:
                raise PrivacyError(
                    "FROM: a user-level table's contributions are unbounded, so one unit "
                    "could add to any number of groups; give OPTIONS "
                    "(max_groups_contributed = G) or (max_rows_contributed = k)"
                )
            groups = int(k)
        per = per.bound_contributions(groups)
    return Contributions(per, outer, notes, scratch)


def _unit_bounds(
    call: Call, plain: Call, bound: Contribution | None, frame: Relation, k: Fraction | float
) -> tuple[float, float, tuple[str, ...]]:
    """The clamp of a unit's contribution to a group: ``contribution_bounds_per_group``,
    or public bounds it cannot exceed (with the note saying so). BigQuery would otherwise
    choose bounds from the data (spending part of epsilon); pinqpy never reads bounds off
    the data."""
    if bound is not None and bound.kind == "group":
        return bound.lo, bound.hi, ()
    if plain.name == "COUNT":
        lo_hi: tuple[float, float] | None = (0.0, 1.0)
        why = "a count of rows"
    else:
        lo_hi = (bound.lo, bound.hi) if bound is not None else None
        why = f"each row clamped by {PER_ROW}" if lo_hi else "the values' bounds"
        lo_hi = lo_hi or derive_bounds(plain.args[0], frame.bounds)
    if lo_hi is None:
        raise PrivacyError(
            f"{call.to_sql()} needs bounds: write {plain.name}(..., {PER_GROUP} => (lo, "
            "hi)) (each unit's total in a group clamped to [lo, hi]). Bounds are never "
            "read off the data"
        )
    lo, hi = lo_hi
    if plain.name != "AVG":  # a total of up to k rows
        if k == INF:
            raise PrivacyError(
                f"{call.to_sql()} needs {PER_GROUP} => (lo, hi): the rows of a unit are "
                "not bounded, so neither is its total (or give OPTIONS "
                "(max_rows_contributed = k))"
            )
        lo, hi = float(k) * min(lo, 0.0), float(k) * max(hi, 0.0)
        why += f" times {k} rows per unit"
    note = (
        f"{call.to_sql()}: no {PER_GROUP}; BigQuery would pick bounds from the data, "
        f"pinqpy clamps each unit's contribution to the public [{lo:g}, {hi:g}] ({why})"
    )
    return lo, hi, (note,)


def clamp(e: Expr, lo: float, hi: float) -> Expr:
    """``e`` clamped to ``[lo, hi]`` as an expression (a NULL stays NULL)."""
    low, high = literal(lo), literal(hi)
    return Case(((Binary("<", e, low), low), (Binary(">", e, high), high)), e)


def per_unit(call: Call, bound: Contribution | None) -> tuple[Call, str]:
    """The exact per-unit aggregate behind a private ``call`` and the outer aggregate over it.

    BigQuery computes each unit's contribution to a group first (its row count, its sum, its
    average), clamps it with ``contribution_bounds_per_group`` and then adds (or averages)
    the clamped contributions over the units of the group. Returned: the inner aggregate
    (rows of a row bound clamped first) and the outer function name: ``SUM`` for COUNT and
    SUM, ``AVG`` for AVG.
    """
    value = None if call.star else call.args[0]
    if value is not None and bound is not None and bound.kind == "row":
        value = clamp(value, bound.lo, bound.hi)
    if call.name == "COUNT":
        inner = Call("COUNT", (), star=True) if value is None else Call("COUNT", (value,))
        return inner, "SUM"
    assert value is not None
    return Call(call.name, (value,)), "SUM" if call.name == "SUM" else "AVG"


def literal(x: float) -> Literal:
    """A number as a literal, whole numbers as ints (so labels read ``(0, 3)``)."""
    return Literal(int(x) if float(x).is_integer() else float(x))
