"""A plan's rows in the listed groups of a partition, with the values to aggregate, and
aggregates per group: a key listed in the query for a few keys of plain types (Spark looks
it up in a hash set, no join), otherwise a broadcast join with a table of the keys."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pinqpy.engines.base import column_key_rows
from pinqpy.engines.spark.call import Call
from pinqpy.engines.spark.dialect import SPARK
from pinqpy.engines.spark.keys import (
    GI,
    INLINE_ROWS,
    key_arrow,
    key_column,
    key_type,
    key_value,
    values_table,
)
from pinqpy.engines.spark.plans import PlanSql, Rel
from pinqpy.engines.spark.types import arrow_values, session_tz
from pinqpy.errors import PinqSyntaxError
from pinqpy.expr.ast import Expr
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import PlanNode, PyFunc

__all__ = ["Base", "grouped_rows", "per_group"]


@dataclass
class Base:
    """Rows of a plan in listed groups, over ``rel``: a query with the columns ``group`` that
    tell a row's group, then one ``__pinq_v<i>`` per value, of kinds ``kinds``.

    ``group`` is ``__pinq_gi``, the group's position, or the key columns themselves, whose
    values ``positions`` maps to positions; no columns for a single group (the query then
    has a column ``__pinq_gi`` of 0s).
    """

    sql: str
    kinds: list[str]
    rel: Rel
    group: list[str] = field(default_factory=list)
    positions: dict[tuple[Any, ...], list[int]] | None = None

    @property
    def carry(self) -> list[str]:
        """The columns a query over this one keeps to be grouped the same way."""
        return self.group or ["__pinq_gi"]


@dataclass(frozen=True)
class _Keys:
    """The listed keys of a grouping over columns ``cols`` of kinds ``kinds``: ``rows`` of
    (position, values), ``columns`` the values column by column, ``nulls`` whether a column
    holds a NULL key."""

    cols: list[str]
    kinds: list[str]
    rows: list[tuple[int, list[Any]]]
    columns: list[list[Any]]
    nulls: list[bool]
    tz: str


def grouped_rows(
    call: Call,
    p: PlanSql,
    plan: PlanNode,
    grouping: Grouping | None,
    values: Sequence[Expr | PyFunc],
    numeric: bool = True,
    ints: bool = False,
) -> Base | None:
    """The plan's rows in listed groups with their values (DOUBLEs when ``numeric``, except
    values of kind int with ``ints``, which stay BIGINT); None when no listed key can match."""
    rel = p.visit(plan)
    src, sqls, kinds = rel.name, [], []
    if values:
        src, sqls, kinds, _ = p.values(rel, values, numeric, ints)
    vs = [f"{v} AS __pinq_v{i}" for i, v in enumerate(sqls)]
    if grouping is None:
        return Base(f"SELECT {', '.join(['0L AS __pinq_gi', *vs])} FROM {src}", kinds, rel)
    cols = list(grouping.columns)
    missing = [c for c in cols if c not in rel.kinds]
    if missing:
        raise PinqSyntaxError(f"unknown column '{missing[0]}'")
    col_kinds = [rel.kinds[c] for c in cols]
    rows = [(i, list(v)) for i, v in column_key_rows(col_kinds, grouping.keys, len(cols) == 1)]
    if not rows:
        return None
    nulls = [any(vals[j] is None for _, vals in rows) for j in range(len(cols))]
    columns = [[vals[j] for _, vals in rows] for j in range(len(cols))]
    keys = _Keys(cols, col_kinds, rows, columns, nulls, session_tz(p.views.spark))
    if (
        len(rows) <= INLINE_ROWS
        and all(k in ("int", "float", "str", "bool") for k in col_kinds)
        and (len(cols) == 1 or not any(nulls))
    ):
        return _listed(keys, src, vs, kinds, rel)
    return _joined(call, keys, src, vs, kinds, rel)


def _listed(keys: _Keys, src: str, vs: list[str], kinds: list[str], rel: Rel) -> Base:
    """Few keys of plain types: keep the rows whose key is listed (a hash lookup in Spark,
    and no join) and group by the key itself; each key's position is found here, by the
    value Spark compared."""
    cols, rows = keys.cols, keys.rows
    types = [key_type(col, kind) for col, kind in zip(keys.columns, keys.kinds, strict=True)]
    names = [f"__pinq_k{j}" for j in range(len(cols))]
    items = [
        f"CAST({SPARK.ident(c)} AS {t}) AS {k}" for c, t, k in zip(cols, types, names, strict=True)
    ]
    lits = [
        key_column(col, kind, keys.tz) for col, kind in zip(keys.columns, keys.kinds, strict=True)
    ]
    listed = [i for i, (_, vals) in enumerate(rows) if not any(v is None for v in vals)]
    conds = []
    if listed:
        lhs = names[0] if len(names) == 1 else f"({', '.join(names)})"
        tuples = [
            lits[0][i] if len(names) == 1 else f"({', '.join(col[i] for col in lits)})"
            for i in listed
        ]
        conds.append(f"{lhs} IN ({', '.join(tuples)})")
    if keys.nulls[0] and len(names) == 1:
        conds.append(f"{names[0]} IS NULL")
    positions: dict[tuple[Any, ...], list[int]] = {}
    for pos, vals in rows:
        key = tuple(key_value(v, t) for v, t in zip(vals, types, strict=True))
        positions.setdefault(key, []).append(pos)
    vcols = [f"__pinq_v{i}" for i in range(len(vs))]
    inner = f"SELECT {', '.join(items + vs)} FROM {src}"
    return Base(
        f"SELECT {', '.join(names + vcols)} FROM ({inner}) AS r WHERE {' OR '.join(conds)}",
        kinds,
        rel,
        names,
        positions,
    )


def _joined(call: Call, keys: _Keys, src: str, vs: list[str], kinds: list[str], rel: Rel) -> Base:
    """Any keys: the rows joined with a table of the keys and their positions (broadcast)."""
    cols, rows, tz = keys.cols, keys.rows, keys.tz
    if len(rows) <= INLINE_ROWS:
        lits = [[SPARK.int_lit(i) for i, _ in rows]]
        lits += [
            key_column(col, kind, tz) for col, kind in zip(keys.columns, keys.kinds, strict=True)
        ]
        table = values_table([GI, *cols], lits)
    else:
        arrays = [arrow_values(pd.Series([i for i, _ in rows], dtype="int64"), "int", tz)]
        for col, kind in zip(keys.columns, keys.kinds, strict=True):
            arrays.append(key_arrow(col, kind, tz))
        table = call.table([GI, *cols], arrays)
    idents = [SPARK.ident(c) for c in cols]
    inner = f"SELECT {', '.join(idents + vs)} FROM {src}"
    cond = " AND ".join(
        f"r.{c} {'<=>' if n else '='} g.{c}" for c, n in zip(idents, keys.nulls, strict=True)
    )
    vcols = [f"__pinq_v{i}" for i in range(len(vs))]
    items = ", ".join([f"g.{GI} AS __pinq_gi", *(f"r.{v}" for v in vcols)])
    return Base(
        f"SELECT /*+ BROADCAST(g) */ {items} FROM ({inner}) AS r JOIN {table} AS g ON {cond}",
        kinds,
        rel,
        ["__pinq_gi"],
    )


def per_group(
    call: Call, p: PlanSql, base: Base, rows: str, aggs: str, by: str = ""
) -> list[tuple[Any, ...]]:
    """``aggs`` per group (and per value of the columns ``by``) over ``rows``, a query over
    ``base``'s columns: one Spark action. Each result row starts with the group's
    position; a single group is not grouped at all (its position is 0)."""
    if not base.group:
        if by:
            text = f"SELECT 0L, {by}, {aggs} FROM ({rows}) AS x GROUP BY {by}"
        else:
            text = f"SELECT 0L, {aggs} FROM ({rows}) AS x"
        return call.collect(p.query(text, base.rel))
    keys = ", ".join([*base.group, by] if by else base.group)
    text = f"SELECT {keys}, {aggs} FROM ({rows}) AS x GROUP BY {keys}"
    found = call.collect(p.query(text, base.rel))
    if base.positions is None:
        return found
    n = len(base.group)
    return [(gi, *r[n:]) for r in found for gi in base.positions.get(tuple(r[:n]), ())]
