"""Plans as SQL for every SQL engine: each plan node translated once (:class:`CtePlanSql`),
over relations whose columns are described alike (:class:`Col`); an engine gives how it holds
and reads its relations, and its :class:`~pinqpy.engines.sqlgen.dialect.Dialect` the
few things its SQL does differently. Also public keys matched in SQL."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from pinqpy.engines.base import NO_MATCH, column_key
from pinqpy.engines.sqlgen.dialect import Dialect, S
from pinqpy.engines.sqlgen.expressions import ExprSql, aggregate, no_callable, typed
from pinqpy.engines.sqlgen.lets import Lets
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Column, Expr
from pinqpy.plan import salts
from pinqpy.plan.facts import facts_of, on_unit
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
    Where,
    walk,
)
from pinqpy.plan.truncation import TruncatedCount

__all__ = [
    "Col",
    "CtePlanSql",
    "check_case_distinct",
    "compatible",
    "key_literal",
    "key_match",
    "public_nulls",
    "value_kind",
]

R = TypeVar("R")


def check_case_distinct(plan: PlanNode, engine: str) -> None:
    """Refuse, before any charge, a plan with two columns whose names differ only in case.

    DuckDB and Spark SQL match column names without regard to case, even quoted ones, so
    such a pair would read one column twice and answer silently wrong. The schema is public,
    so the refusal depends on no data.
    """
    for node in walk(plan):
        seen: dict[str, str] = {}
        for name in facts_of(node).schema:
            other = seen.setdefault(name.casefold(), name)
            if other != name:
                raise PinqError(
                    f"the {engine} engine cannot hold both columns {other!r} and {name!r}: it "
                    "matches column names without regard to case; rename one of them"
                )


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


@dataclass(frozen=True)
class Col:
    """A column of a translated relation: its pinqpy kind, the engine's type where known
    (``dtype``, None when only the engine can tell), and ``nan``, whether it is a stored
    column read through a conversion: a float column whose NaN means NULL (read as NULL by
    expressions, made NULL by nodes that compare or group whole values), or a column of a
    type the engine reads as another (:meth:`CtePlanSql.stored_read`), converted alike."""

    name: str
    kind: str
    dtype: Any = None
    nan: bool = False


class CtePlanSql(PlanVisitor[R]):
    """A plan as one common table expression per node, each visit returning the node's
    relation ``R``. A node shared by several parents (``f.concat(f)``) is one expression.

    Every node is translated here, once for all engines; an engine's translator says how its
    relations are held (:meth:`columns`, :meth:`add`, :meth:`name`), reads its tables
    (:meth:`visit_source`, :meth:`public`) and writes the few things its SQL does differently
    (:meth:`explode_items`, :meth:`set_column`, and the dialect's hash and spellings).
    """

    d: Dialect
    #: The executor this translation serves; its catalog holds the data the plan names.
    ex: Any

    def __init__(self) -> None:
        self._memo: dict[tuple[str | None, int], tuple[PlanNode, R]] = {}
        # CTE name -> (its query, the CTE names it reads), in the order of definition.
        self.ctes: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._translators: list[ExprSql] = []
        self.fenced: set[str] = set()  # CTEs of computed columns (Dialect.let_fence)

    def visit(self, node: PlanNode) -> R:
        # Once per salt scope: under a partition, random nodes draw the partition's salts
        # (pinqpy.plan.salts), so one node read in two scopes is two expressions.
        slot = (salts.scope_token(), id(node))
        hit = self._memo.get(slot)
        if hit is not None and hit[0] is node:
            return hit[1]
        with salts.drawing(node, self.ex.catalog):
            rel = node.accept(self)
        self._memo[slot] = (node, rel)
        return rel

    # -- common table expressions ---------------------------------------------------------
    def cte(self, sql: str, reads: Sequence[R]) -> str:
        """A new common table expression ``sql`` reading ``reads``: its name."""
        name = self.d.ident(f"__pinq_n{len(self.ctes)}")
        names = (self.name(r) for r in reads)
        self.ctes[name] = (sql, tuple(n for n in names if n in self.ctes))
        return name

    def query(self, text: str, *reads: R) -> str:
        """``text`` (a SELECT over ``reads``) with the definitions it needs (only those)."""
        need: set[str] = set()
        stack = [n for n in map(self.name, reads) if n in self.ctes]
        while stack:
            n = stack.pop()
            if n not in need:
                need.add(n)
                stack.extend(self.ctes[n][1])
        # A projection's computed columns are fenced like lets: written out at each use, a
        # chain of them would grow exponentially.
        defs = [
            f"{n} {self.d.cte_as} ({sql}{self.d.let_fence if n in self.fenced else ''})"
            for n, (sql, _) in self.ctes.items()
            if n in need
        ]
        return f"WITH {', '.join(defs)} {text}" if defs else text

    # -- what each engine gives -----------------------------------------------------------
    def name(self, rel: R) -> str:
        """The name a query reads ``rel`` by."""
        raise NotImplementedError

    def columns(self, rel: R) -> list[Col]:
        """The columns of ``rel``: their types as far as they are tracked (DuckDB binds a query
        for those it did not derive; Spark is asked only where :meth:`typed` is needed)."""
        raise NotImplementedError

    def typed(self, rel: R) -> R:
        """``rel`` with the engine's type of every column known."""
        return rel

    def add(self, sql: str, cols: Sequence[Col | None], reads: Sequence[R], sure: bool) -> R:
        """A new expression ``sql`` with columns ``cols`` (None where the engine decides the
        column); ``sure`` is false when only the engine can tell whether the SQL is valid."""
        raise NotImplementedError

    def translator(self, rel: R, lets: Lets | None = None) -> tuple[ExprSql, Lets]:
        """An expression translator over ``rel`` (binding its values in ``lets``, default
        new ones)."""
        lets = lets if lets is not None else Lets(self.d)
        kinds = {c.name: c.kind for c in self.columns(rel)}
        nan = self.nan(rel)
        reads = {c.name: self.stored_read(c, "{}") for c in self.columns(rel) if c.name in nan}
        t = ExprSql(self.d, kinds, lets, nan, reads)
        self._translators.append(t)
        return t, lets

    @property
    def unchecked(self) -> bool:
        """Whether some SQL translated here is valid only if the engine says so."""
        return any(t.unchecked for t in self._translators)

    def key_literal(self, v: object, kind: str) -> str:
        """A public key as a literal of a column's kind."""
        raise NotImplementedError

    def public(self, data: Any) -> R:
        """A public table (of a public join)."""
        raise NotImplementedError

    def nan(self, rel: R) -> frozenset[str]:
        """The columns of ``rel`` whose NaN means NULL."""
        return frozenset(c.name for c in self.columns(rel) if c.nan)

    def stored_read(self, col: Col, q: str) -> str:
        """How a stored column ``col`` (``nan``) is read, ``q`` its SQL: NaN as NULL. An
        engine may keep other columns as stored, read through another conversion."""
        return f"(CASE WHEN isnan({q}) THEN NULL ELSE {q} END)"

    def read_col(self, col: Col) -> Col:
        """The column :meth:`stored_read` makes of a stored column."""
        return replace(col, nan=False)

    def value(self, rel: R, col: str, qual: str = "") -> str:
        """A column of ``rel`` as pinqpy reads it (NaN as NULL)."""
        q = qual + self.d.ident(col)
        if col not in self.nan(rel):
            return q
        return self.stored_read(next(c for c in self.columns(rel) if c.name == col), q)

    def normalized(self, rel: R, columns: Sequence[str] | None = None) -> R:
        """``rel`` with NaN made NULL in ``columns`` (default: all)."""
        nan = self.nan(rel)
        todo = {c for c in (columns if columns is not None else nan) if c in nan}
        if not todo:
            return rel
        cols = self.columns(rel)
        items = [
            f"{self.value(rel, c.name)} AS {self.d.ident(c.name)}"
            if c.name in todo
            else self.d.ident(c.name)
            for c in cols
        ]
        out = [self.read_col(c) if c.name in todo else c for c in cols]
        return self.add(f"SELECT {', '.join(items)} FROM {self.name(rel)}", out, [rel], True)

    def concat_ready(self, rel: R) -> R:
        """``rel`` with the stored columns converted that a concatenation cannot keep (none:
        NaN stays, read as NULL later)."""
        return rel

    def made(self, v: S, name: str, child: Sequence[Col]) -> Col:
        """The column an expression ``v`` of a projection makes."""
        src = next((c for c in child if self.d.ident(c.name) == v.sql), None)
        if src is not None:
            return Col(name, src.kind, src.dtype)
        kind = "float" if v.kind == "null" else v.kind
        return Col(name, kind, self.d.kind_types.get(kind))

    def explode_items(self, col: Col, max_items: int) -> tuple[str, Col | None] | None:
        """For a list column: the SQL of its items, one row each (NULL items dropped, at most
        ``max_items``), and the column they make (None: the engine decides). None for a
        column that is not a list."""
        raise NotImplementedError

    def set_column(self, a: Col, b: Col) -> Col | None:
        """The column of a set operation of columns ``a`` and ``b`` (None: the engine
        decides)."""
        raise NotImplementedError

    def set_sides(self, left: R, right: R) -> tuple[R, R]:
        """The two sides of a set operation as it reads them: an engine whose SQL does not
        find a common type itself converts columns to :meth:`set_column`'s here."""
        return left, right

    # -- shared pieces --------------------------------------------------------------------
    def listed(self, cols: Sequence[Col], qual: str = "") -> str:
        return ", ".join(qual + self.d.ident(c.name) for c in cols)

    def expr(self, e: Expr | PyFunc, t: ExprSql, what: str) -> S:
        no_callable(e, what, self.d.name)
        assert isinstance(e, Expr)
        return t.tr(e)

    # -- nodes ----------------------------------------------------------------------------
    def visit_part_source(self, node: PartSource) -> R:
        parent = self.visit(node.partition.parent)
        cols = self.columns(parent)
        kinds = {c.name: c.kind for c in cols}
        key = node.key if len(node.partition.key_columns) > 1 else (node.key,)
        conds = [
            key_match(self.value(parent, c), kinds[c], k, self.key_literal)
            for c, k in zip(node.partition.key_columns, key, strict=True)  # type: ignore[arg-type]
        ]
        sql = f"SELECT {self.listed(cols)} FROM {self.name(parent)} WHERE {' AND '.join(conds)}"
        return self.add(sql, cols, [parent], True)

    def visit_where(self, node: Where) -> R:
        child = self.visit(node.child)
        cols = self.columns(child)
        no_callable(node.predicate, "where", self.d.name)
        t, lets = self.translator(child)
        pred = t.boolean(t.tr(node.predicate)).sql  # type: ignore[arg-type]
        src = lets.source(self.name(child), [pred])
        sql = f"SELECT {self.listed(cols)} FROM {src} WHERE {pred}"
        return self.add(sql, cols, [child], not t.unchecked)

    def visit_select(self, node: Select) -> R:
        child = self.visit(node.child)
        old = self.columns(child)
        by_name = {c.name: c for c in old}
        t, lets = self.translator(child)
        items: dict[str, str] = {}
        made: dict[str, Col] = {}
        for n, e in node.outputs:
            src = by_name.get(e.name) if isinstance(e, Column) else None
            if src is not None and src.nan:
                # A stored column passes through as stored; its readers skip NaN.
                items[n] = f"{self.d.ident(e.name)} AS {self.d.ident(n)}"  # type: ignore[union-attr]
                made[n] = Col(n, src.kind, src.dtype, True)
                continue
            v = self.expr(e, t, "select")
            items[n] = f"{typed(self.d, v)} AS {self.d.ident(n)}"
            made[n] = self.made(v, n, old)
        if node.keep_all:
            # pandas assign replaces an existing column in place, appends new ones.
            names = [c.name for c in old] + [n for n in items if n not in by_name]
            sqls = [items.get(n, self.d.ident(n)) for n in names]
            cols = [made[n] if n in made else by_name[n] for n in names]
        else:
            sqls, cols = list(items.values()), list(made.values())
        src_sql = lets.source(self.name(child), sqls)
        if not sqls:
            sqls, cols = ["1 AS __pinq_empty"], [Col("__pinq_empty", "int")]
        sql = f"SELECT {', '.join(sqls)} FROM {src_sql}"
        rel = self.add(sql, cols, [child], not t.unchecked)
        self.fenced.add(self.name(rel))
        return rel

    def visit_distinct(self, node: Distinct) -> R:
        child = self.visit(node.child)
        by_name = {c.name: c for c in self.columns(child)}
        items = []
        for c in node.columns:
            v, q = self.value(child, c), self.d.ident(c)
            items.append(q if v == q else f"{v} AS {q}")
        cols = [self.read_col(by_name[c]) if by_name[c].nan else by_name[c] for c in node.columns]
        keep = ""
        if on_unit(node.child, node.columns):
            # The distinct ids of the unit: a NULL id (NaN read as NULL) is no one's.
            keep = f" WHERE {self.value(child, node.columns[0])} IS NOT NULL"
        sql = f"SELECT DISTINCT {', '.join(items)} FROM {self.name(child)}{keep}"
        return self.add(sql, cols, [child], True)

    def visit_explode(self, node: Explode) -> R:
        child = self.visit(node.child)
        col = next(c for c in self.columns(child) if c.name == node.column)
        if col.kind == "other" and col.dtype is None:
            child = self.typed(child)
            col = next(c for c in self.columns(child) if c.name == node.column)
        cols = self.columns(child)
        q = self.d.ident(node.column)
        exploded = self.explode_items(col, node.max_items)
        if exploded is None:
            # A scalar explodes to itself; NULL carries nothing.
            sql = (
                f"SELECT {self.listed(cols)} FROM {self.name(child)} "
                f"WHERE {self.value(child, node.column)} IS NOT NULL"
            )
            return self.add(sql, cols, [child], True)
        items, out = exploded
        sqls = [f"{items} AS {q}" if c.name == node.column else self.d.ident(c.name) for c in cols]
        out_cols = [out if c.name == node.column else c for c in cols]
        sql = f"SELECT {', '.join(sqls)} FROM {self.name(child)}"
        return self.add(sql, out_cols, [child], True)

    def visit_group_by(self, node: GroupBy) -> R:
        child = self.normalized(self.visit(node.child), node.keys)
        by_name = {c.name: c for c in self.columns(child)}
        t, lets = self.translator(child)
        keys = [self.d.ident(k) for k in node.keys]
        items = list(keys)
        cols = [by_name[k] for k in node.keys]
        for name, call in node.aggs:
            items.append(f"{aggregate(t, call)} AS {self.d.ident(name)}")
            kind = "int" if call.star or call.name.upper() == "COUNT" else "float"
            cols.append(Col(name, kind, self.d.kind_types.get(kind)))
        src = lets.source(self.name(child), items)
        # Grouped by exactly the unit, a row whose unit is NULL belongs to no known person.
        keep = ""
        if node.by_unit:
            keep = " WHERE " + " AND ".join(f"{k} IS NOT NULL" for k in keys)
        sql = f"SELECT {', '.join(items)} FROM {src}{keep} GROUP BY {', '.join(keys)}"
        return self.add(sql, cols, [child], not t.unchecked)

    def truncate(self, child: R, columns: Sequence[str], limit: int, drop_null: bool = False) -> R:
        """The ``limit`` rows of lowest salted-hash priority per key of ``columns`` (with
        ``drop_null``, rows whose key is NULL are dropped first). The priority is the
        dialect's :meth:`~pinqpy.engines.sqlgen.dialect.Dialect.row_priority`."""
        child = self.typed(self.normalized(child, columns))
        cols = self.columns(child)
        prio = self.d.row_priority([self.d.hash_input(self.d.ident(c.name), c.dtype) for c in cols])
        part = ", ".join(self.d.ident(c) for c in columns)
        keep = ""
        if drop_null:
            keep = " WHERE " + " AND ".join(f"{self.d.ident(c)} IS NOT NULL" for c in columns)
        # The priority is computed below the window, so the window sorts one column, and
        # columns unused above are pruned before it. The rank is compared as rank - 1 < limit:
        # DuckDB turns "rank <= limit" into a top-n aggregate per key, which is several times
        # slower than this sort with a million keys and runs out of memory with ten million.
        prioritized = f"SELECT *, {prio} AS __pinq_prio FROM {self.name(child)}{keep}"
        inner = (
            f"SELECT *, row_number() OVER (PARTITION BY {part} ORDER BY __pinq_prio) - 1 "
            f"AS __pinq_rank FROM ({prioritized}) AS __pinq_p"
        )
        sql = (
            f"SELECT {self.listed(cols)} FROM ({inner}) AS __pinq_r "
            f"WHERE __pinq_rank < {int(limit)}"
        )
        return self.add(sql, cols, [child], True)

    def truncated_count(self, tc: TruncatedCount) -> str:
        """A query of one row, one column: the row count of the truncation ``tc`` describes,
        ``Σ min(rows per key, limit)``, computed from per-key row counts without choosing
        rows. The count of the materialised truncation is exactly this number whatever rows
        the salt keeps, and its noise does not depend on the data, so the released
        distribution and the charge are those of counting the truncation (derivation:
        :mod:`pinqpy.plan.truncation`). Keys are grouped as :meth:`truncate` partitions them:
        normalized first (NaN is NULL), by the engine's equality of values (a GROUP BY and a
        window's PARTITION BY agree), rows whose key is NULL dropped with ``drop_null`` and
        otherwise one key."""
        child = self.normalized(self.visit(tc.child), tc.columns)
        part = ", ".join(self.d.ident(c) for c in tc.columns)
        keep = ""
        if tc.drop_null:
            keep = " WHERE " + " AND ".join(f"{self.d.ident(c)} IS NOT NULL" for c in tc.columns)
        inner = f"SELECT COUNT(*) AS __pinq_n FROM {self.name(child)}{keep} GROUP BY {part}"
        limit = self.d.int_lit(int(tc.limit))
        return self.query(
            f"SELECT COALESCE(SUM(LEAST(__pinq_n, {limit})), 0) FROM ({inner}) AS __pinq_c",
            child,
        )

    def merge(
        self,
        left: R,
        right: R,
        on: Sequence[str],
        how: str,
        suffix: str,
        nulls: Sequence[bool] | None = None,
    ) -> R:
        """Join on ``on``, NULL matching NULL as in pandas. ``nulls`` says which key columns of
        ``right`` may hold NULL (None: any): a plain equality joins the others, which an
        engine may do with a faster hash join than a NULL-safe one."""
        left, right = self.normalized(left, on), self.normalized(right, on)
        lcols = self.columns(left)
        lnames = {c.name for c in lcols}
        items = [f"l.{self.d.ident(c.name)}" for c in lcols]
        cols = list(lcols)
        for c in self.columns(right):
            if c.name in on:
                continue
            out = c.name + suffix if c.name in lnames else c.name
            items.append(f"r.{self.d.ident(c.name)} AS {self.d.ident(out)}")
            cols.append(replace(c, name=out))
        safe = nulls if nulls is not None else [True] * len(on)
        kinds = {c.name: c.kind for c in lcols}
        cond = " AND ".join(
            self.d.join_equal(f"l.{self.d.ident(c)}", f"r.{self.d.ident(c)}", kinds[c])
            if n
            else f"l.{self.d.ident(c)} = r.{self.d.ident(c)}"
            for c, n in zip(on, safe, strict=True)
        )
        join = "JOIN" if how == "inner" else "LEFT JOIN"
        sql = (
            f"SELECT {', '.join(items)} FROM {self.name(left)} AS l {join} "
            f"{self.name(right)} AS r ON {cond}"
        )
        return self.add(sql, cols, [left, right], True)

    def visit_join(self, node: Join) -> R:
        left = self.visit(node.left)
        right = self.visit(node.right)
        if node.bounds is not None:
            left = self.truncate(left, node.on, node.bounds[0])
            right = self.truncate(right, node.on, node.bounds[1])
        return self.merge(left, right, node.on, "inner", "_right")

    def visit_public_join(self, node: PublicJoin) -> R:
        child = self.visit(node.child)
        data = self.ex.catalog.public_data(node.public)
        nulls = public_nulls(data, node.on)
        return self.merge(child, self.public(data), node.on, node.how, "_public", nulls)

    def visit_bound_contributions(self, node: BoundContributions) -> R:
        # A row whose unit is NULL belongs to no known person: it is dropped.
        return self.truncate(self.visit(node.child), (node.unit,), node.max_rows, drop_null=True)

    def visit_bound_groups(self, node: BoundGroups) -> R:
        """Per unit, the ``max_groups`` groups of lowest salted hash of ``(unit, by)`` (ties,
        which a 64-bit hash makes all but impossible, broken by the ``by`` values so that
        never more are kept), then the ``max_rows_per_group`` rows of lowest row priority of
        each: both priorities depend on the unit's own rows and the salt alone, as in
        :meth:`truncate`. Rows whose unit is NULL are dropped; a NULL ``by`` value (NaN read
        as NULL) is one group."""
        pairs = (node.unit, *node.by)
        child = self.typed(self.normalized(self.visit(node.child), pairs))
        cols = self.columns(child)
        dtypes = {c.name: c.dtype for c in cols}
        d = self.d
        gprio = d.row_priority([d.hash_input(d.ident(c), dtypes.get(c)) for c in pairs])
        prio = d.row_priority([d.hash_input(d.ident(c.name), c.dtype) for c in cols])
        unit = d.ident(node.unit)
        by = ", ".join(d.ident(c) for c in node.by)
        part = ", ".join(d.ident(c) for c in pairs)
        prioritized = (
            f"SELECT *, {gprio} AS __pinq_gprio, {prio} AS __pinq_prio "
            f"FROM {self.name(child)} WHERE {unit} IS NOT NULL"
        )
        ranks = [
            f"dense_rank() OVER (PARTITION BY {unit} ORDER BY __pinq_gprio, {by}) - 1 "
            "AS __pinq_grank"
        ]
        keep = [f"__pinq_grank < {int(node.max_groups)}"]
        if node.max_rows_per_group is not None:
            ranks.append(
                f"row_number() OVER (PARTITION BY {part} ORDER BY __pinq_prio) - 1 AS __pinq_rank"
            )
            keep.append(f"__pinq_rank < {int(node.max_rows_per_group)}")
        inner = f"SELECT *, {', '.join(ranks)} FROM ({prioritized}) AS __pinq_p"
        sql = f"SELECT {self.listed(cols)} FROM ({inner}) AS __pinq_r WHERE {' AND '.join(keep)}"
        return self.add(sql, cols, [child], True)

    def visit_bound_degree(self, node: BoundDegree) -> R:
        # A NULL key is one key, as in a bounded join's truncation; but a cap on exactly the
        # unit drops the rows of no known person, as bound_contributions does.
        drop = on_unit(node.child, node.columns)
        return self.truncate(self.visit(node.child), node.columns, node.max_rows, drop_null=drop)

    def visit_set_op(self, node: SetOp) -> R:
        left = self.visit(node.left)
        right = self.visit(node.right)
        if node.kind != "concat":
            # These compare whole rows: NaN must be NULL first. (Concatenated rows are kept
            # as they are, so NaN may stay; it is read as NULL later.)
            left, right = self.normalized(left), self.normalized(right)
        else:
            left, right = self.concat_ready(left), self.concat_ready(right)
        left, right = self.set_sides(left, right)
        lcols = self.columns(left)
        rcols = {c.name: c for c in self.columns(right)}
        out: list[Col | None] = []
        for c in lcols:
            other = rcols.get(c.name)
            both = None if other is None else self.set_column(c, other)
            out.append(both if both is None else replace(both, nan=c.nan or other.nan))  # type: ignore[union-attr]
        # The frames have the same columns in the same order: line them up by name anyway.
        cols = self.listed(lcols)
        op = {
            "concat": "UNION ALL",
            "union": "UNION",
            "intersect": "INTERSECT",
            "difference": "EXCEPT",
        }[node.kind]
        sql = f"SELECT {cols} FROM {self.name(left)} {op} SELECT {cols} FROM {self.name(right)}"
        return self.add(sql, out, [left, right], True)


def public_nulls(data: Any, on: Sequence[str]) -> list[bool] | None:
    """Which key columns of a public table hold a NULL (None: not known). Public rows may
    be read freely."""
    if not isinstance(data, pd.DataFrame):
        return None
    try:
        return [bool(data[c].isna().any()) for c in on]
    except (KeyError, TypeError, ValueError):
        return None
