"""Aggregates per listed group in one DuckDB query: the rows grouped by their key columns'
values and matched to the listed keys, or joined to a table of the keys; several reads of one
plan fused into one scan."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from pinqpy.engines.base import Read, column_key_rows
from pinqpy.engines.duckdb.aggregates import (
    aggregated_value,
    count_rows,
    integral,
    lattice_aggs,
    lattice_rows,
    sum_aggs,
    sum_rows,
)
from pinqpy.engines.duckdb.connection import DuckDBConnection
from pinqpy.engines.duckdb.dialect import DUCKDB
from pinqpy.engines.duckdb.plansql import PlanSql, is_enum, value_literal
from pinqpy.engines.duckdb.tables import GI, INLINE_ROWS
from pinqpy.engines.sqlgen.expressions import Lets
from pinqpy.expr.ast import Expr
from pinqpy.plan.batch import batch_memo
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import PlanNode, PyFunc

__all__ = ["GroupedQueries"]

# Key columns grouped before they are matched to the listed keys (DuckDBExecutor._keyed):
# the kinds whose key tables have the column's own type.
_PLAIN_KEYS = {"str": "VARCHAR", "int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN"}


class GroupedQueries(DuckDBConnection):
    """The executor's grouped queries over one connection (see the module docstring)."""

    def _translation(self) -> PlanSql:
        """The current batch's translator (so a check's translation serves the reads)."""
        memo = batch_memo()
        if memo is None:
            return PlanSql(self)
        slot = ("duckdb-plans", id(self))
        hit = memo.get(slot)
        if hit is None or hit[0] is not self:
            hit = memo[slot] = (self, PlanSql(self))
        return hit[1]  # type: ignore[no-any-return]

    def _grouped(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc | None,
        aggs: Callable[[str, str], list[str]],
        extra: Callable[[str, str], tuple[str, str, str]] | None = None,
        as_stored: bool = False,
        ints: bool = False,
        staged: Callable[[str, str], str] | None = None,
        counts: bool = False,
    ) -> tuple[list[Any], int]:
        """Run ``aggs(v, kind)`` per listed group; rows are (group position, [extra key,]
        aggs...). With ``counts`` (a ``staged`` or ``extra`` query of integers), the result is
        instead its columns as int64 arrays (:meth:`_fetch_counts`), [] when no key matches.

        ``v`` is the SQL of ``value`` as pandas' numeric view, a DOUBLE of kind "float"
        whose NULLs are left out; with ``ints``, an integer value stays BIGINT (kind "int").
        With ``as_stored`` it is the value as translated, NULLs included. ``extra`` may add a
        join (FROM suffix, select item, group item) given ``v`` and its kind.
        """
        p = self._translation()
        rel = p.visit(plan)
        k = 1 if grouping is None else len(grouping.keys)
        lets = Lets(DUCKDB)
        kind, keep = "null", ""
        if value is None:
            src = f"{rel} AS r"
        else:
            v = aggregated_value(p, rel, value, lets, ints=ints, as_stored=as_stored)
            kind = v.kind
            if v.nan_col is not None:
                keep = f" WHERE NOT isnan(r.{v.nan_col})"
            elif not as_stored:
                keep = f" WHERE r.{v.stored or '__pinq_v'} IS NOT NULL"
            src = f"(SELECT *, {v.sql} AS __pinq_v FROM {lets.source(rel, [v.sql])}) AS r"
        with contextlib.ExitStack() as stack:
            gi = "0"
            if grouping is not None and staged is None and extra is None:
                keyed = self._keyed(p, rel, grouping, src, keep, aggs("r.__pinq_v", kind), stack)
                if keyed is not None:
                    return keyed, k
            if grouping is not None:
                join = self._group_join(p, rel, grouping, stack)
                if join is None:
                    return [], k
                src += join
                gi = f"g.{GI}"
            if staged is not None:
                inner = f"SELECT {gi} AS __pinq_gi, r.__pinq_v AS __pinq_v FROM {src}{keep}"
                # One group: grouped by the bucket alone (a constant key costs a hash).
                head, by = ("0", "__pinq_b") if grouping is None else ("__pinq_gi", "ALL")
                sql = (
                    f"SELECT {head}, __pinq_b, COUNT(*) FROM ({staged(inner, kind)}) GROUP BY {by}"
                )
                return self._read(p.query(sql, rel), counts), k
            items = [f"{gi} AS __pinq_gi"]
            groups = ["__pinq_gi"]
            if extra is not None:
                join, item, group = extra("r.__pinq_v", kind)
                src += join
                items.append(item)
                groups.append(group)
            items += aggs("r.__pinq_v", kind)
            # One group: a plain aggregate (a GROUP BY on a constant keeps DuckDB from using
            # its fast paths, ten times slower for a filtered count).
            group_by = (
                "" if len(groups) == 1 and grouping is None else f" GROUP BY {', '.join(groups)}"
            )
            sql = f"SELECT {', '.join(items)} FROM {src}{keep}{group_by}"
            return self._read(p.query(sql, rel), counts), k

    def _read(self, sql: str, counts: bool) -> list[Any]:
        return self._fetch_counts(sql) if counts else self._fetch(sql)

    def _keyed(
        self,
        p: PlanSql,
        rel: str,
        grouping: Grouping,
        src: str,
        keep: str,
        aggs: Sequence[str],
        stack: contextlib.ExitStack,
    ) -> list[tuple[Any, ...]] | None:
        """The rows (key position, aggs...) of ``aggs`` per listed key over the rows ``src``
        (``keep``: its WHERE clause or ""), computed as DuckDB computes a plain GROUP BY: the
        rows are grouped by the key columns' values, and the few groups are matched to the
        listed keys. [] when no key can match; None when the keys are too many or of types
        this does not handle (the caller then joins every row to the keys).

        The rows are first filtered by each column's listed values (``IN``, and ``IS NULL``
        where a key is NULL), which drops only rows no key can match (a column's collation
        only widens ``IN``), so that the groups are few whatever the column's other values.
        Each group is one exact value: text is grouped ``COLLATE "binary"`` (an enum by its
        codes, each one text), numbers and booleans by their values. A key, spelt as the
        column spells it (``column_key_rows``: keys equal under the column's type were merged
        into the first), then gets the rows of the group equal to it, so a row counts for a
        key exactly when it equals the key, as in the per-row join, and no row counts twice.

        The groups are matched in Python (:meth:`_match_groups`) when they can be few: a join
        to the key table inside DuckDB costs a millisecond or two more per query. Else, and if
        two groups ever met one key, they are joined to the keys in DuckDB, on the same
        equality (``IS NOT DISTINCT FROM``, keys typed as the columns: VARCHAR, BIGINT, DOUBLE,
        BOOLEAN)."""
        cols = list(grouping.columns)
        types = dict(p.schema(rel))
        kinds = p.kinds(rel)
        ckinds = [kinds[c] for c in cols]
        stored = p.nan(rel)
        enums = {c for c in cols if c in stored and is_enum(types[c])}
        if any(c not in enums and types[c].upper() != _PLAIN_KEYS.get(kinds[c]) for c in cols):
            return None
        rows = [(i, *vals) for i, vals in column_key_rows(ckinds, grouping.keys, len(cols) == 1)]
        if not rows:
            return []
        if len(rows) > INLINE_ROWS:
            return None
        # An enum is grouped by its codes and read as text on the groups (Python's str, or
        # a cast in the join).
        values = [f"r.{DUCKDB.ident(c)}" if c in enums else p.value(rel, c, "r.") for c in cols]
        conds = []
        groups = 1  # at most this many groups pass the filter
        for j, (v, kind) in enumerate(zip(values, ckinds, strict=True)):
            listed = {r[j + 1] for r in rows}
            groups *= len(listed)
            ors = []
            if listed - {None}:
                lits = sorted(value_literal(x, kind) for x in listed - {None})
                ors.append(f"{v} IN ({', '.join(lits)})")
            if None in listed:
                ors.append(f"{v} IS NULL")
            conds.append("(" + " OR ".join(ors) + ")")
        where = (keep + " AND " if keep else " WHERE ") + " AND ".join(conds)
        ks = [f"__pinq_k{j}" for j in range(len(cols))]
        named = [f"{a} AS __pinq_a{i}" for i, a in enumerate(aggs)]
        exact = [
            f'({v} COLLATE "binary")' if kind == "str" and c not in enums else v
            for v, kind, c in zip(values, ckinds, cols, strict=True)
        ]
        keyed = [f"{v} AS {kk}" for v, kk in zip(exact, ks, strict=True)]
        inner = f"SELECT {', '.join(keyed + named)} FROM {src}{where} GROUP BY {', '.join(ks)}"
        if groups <= INLINE_ROWS:
            found = self._match_groups(self._fetch(p.query(inner, rel)), rows, len(cols))
            if found is not None:
                return found
        keys = stack.enter_context(self._rows([GI, *cols], ["int", *ckinds], rows))
        on = " AND ".join(
            f"{f'CAST(a.{kk} AS VARCHAR)' if c in enums else f'a.{kk}'} "
            f"IS NOT DISTINCT FROM g.{DUCKDB.ident(c)}"
            for kk, c in zip(ks, cols, strict=True)
        )
        outs = ", ".join(f"a.__pinq_a{i}" for i in range(len(aggs)))
        sql = f"SELECT g.{GI} AS __pinq_gi, {outs} FROM ({inner}) AS a JOIN {keys} AS g ON {on}"
        return self._fetch(p.query(sql, rel))

    @staticmethod
    def _match_groups(
        groups: Sequence[tuple[Any, ...]], keys: Sequence[tuple[Any, ...]], width: int
    ) -> list[tuple[Any, ...]] | None:
        """The groups (key values..., aggs...) that equal a listed key (position, values...),
        as (position, aggs...); None if two groups equal one key (then DuckDB joins them).

        The values come from VARCHAR (or an enum), BIGINT, DOUBLE and BOOLEAN columns as
        Python ``str``, ``int``, ``float`` and ``bool`` (NULL as None), exactly, and the keys
        are spelt as such columns spell them (``column_key``); Python's equality on those is
        DuckDB's on the columns' binary equality (text by its characters; ``-0.0`` equals
        ``0.0``; a NaN, never a key, equals no key), which is what the join tests. Group
        values never leave this method: only the aggregates of matched groups do."""
        at = {tuple(k[1:]): k[0] for k in keys}
        out: list[tuple[Any, ...]] = []
        seen: set[int] = set()
        for g in groups:
            i = at.get(tuple(g[:width]))
            if i is None:
                continue
            if i in seen:
                return None
            seen.add(i)
            out.append((i, *g[width:]))
        return out

    def _group_join(
        self, p: PlanSql, rel: str, grouping: Grouping, stack: contextlib.ExitStack
    ) -> str | None:
        """A JOIN of the rows ``r`` against the listed keys ``g`` (so each row gets its key's
        position ``g.__pinq_g``), or None when no key can match the columns' types."""
        kinds = p.kinds(rel)
        cols = list(grouping.columns)
        ckinds = [kinds[c] for c in cols]
        rows = [(i, *vals) for i, vals in column_key_rows(ckinds, grouping.keys, len(cols) == 1)]
        if not rows:
            return None
        keys = stack.enter_context(self._rows([GI, *cols], ["int", *ckinds], rows))
        cond = " AND ".join(
            f"{p.value(rel, c, 'r.')} IS NOT DISTINCT FROM g.{DUCKDB.ident(c)}" for c in cols
        )
        return f" JOIN {keys} AS g ON {cond}"

    def read_together(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read]
    ) -> list[Any]:
        """One query for ``reads`` (counts, clamped sums and moments of ``plan``).

        NaN in a stored float column is skipped as NULL is. A FILTER on every value's
        aggregates would cost a third of the scan, so the query first counts the NaN instead
        (cheap), and runs again with the FILTERs only if there are any."""
        rows, k, nans = self._fused_query(plan, grouping, reads, filtered=False)
        if nans:
            rows, k, _ = self._fused_query(plan, grouping, reads, filtered=True)
        out: list[Any] = []
        at = 1
        for r in reads:
            w = 1 if r.kind == "count" else 2 if r.kind == "sum" else 3
            part = [(row[0], *row[at : at + w]) for row in rows]
            at += w
            decode = {
                "count": count_rows,
                "sum": sum_rows,
                "mean": lattice_rows,
                "moments": lattice_rows,
            }[r.kind]
            out.append(decode(part, k))
        return out

    def _fused_query(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read], filtered: bool
    ) -> tuple[list[tuple[Any, ...]], int, bool]:
        """Rows (group position, each read's aggregates...) and whether a value skipped as
        NaN occurred (then unfiltered results are wrong and are not used)."""
        p = self._translation()
        rel = p.visit(plan)
        k = 1 if grouping is None else len(grouping.keys)
        lets = Lets(DUCKDB)
        items: list[str] = []
        nan_items: list[str] = []
        sqls: list[tuple[int, str]] = []
        for i, r in enumerate(reads):
            if r.kind == "count":
                items.append("COUNT(*)")
                continue
            ints = integral(r.lo) and integral(r.hi)
            v = aggregated_value(p, rel, r.value, lets, ints=ints)  # type: ignore[arg-type]
            sqls.append((i, v.sql))
            when = ""
            if v.nan_col is not None:
                if filtered:
                    when = f" FILTER (WHERE NOT isnan(r.{v.nan_col}))"
                else:
                    nan_items.append(f"COUNT_IF(isnan(r.{v.nan_col}))")
            if r.kind == "sum":
                items += sum_aggs(f"r.__pinq_v{i}", v.kind, r.lo, r.hi, when)
            else:
                squares = r.kind == "moments"
                items += lattice_aggs(f"r.__pinq_v{i}", v.kind, r.lo, r.hi, when, squares)
        src = f"{rel} AS r"
        if sqls:
            cols = ", ".join(f"{v} AS __pinq_v{i}" for i, v in sqls)
            src = f"(SELECT *, {cols} FROM {lets.source(rel, [v for _, v in sqls])}) AS r"
        with contextlib.ExitStack() as stack:
            gi, join, group_by = "0", "", ""
            if grouping is not None:
                listed = [*items, *nan_items]
                keyed = self._keyed(p, rel, grouping, src, "", listed, stack)
                if keyed is not None:
                    n = 1 + len(items)
                    nans = any(any(row[n:]) for row in keyed)
                    return [row[:n] for row in keyed], k, nans
                join = self._group_join(p, rel, grouping, stack)  # type: ignore[assignment]
                gi, group_by = f"g.{GI}", " GROUP BY __pinq_gi"
            if join is None:
                return [], k, False
            listed = ", ".join([*items, *nan_items])
            sql = f"SELECT {gi} AS __pinq_gi, {listed} FROM {src}{join}{group_by}"
            rows = self._fetch(p.query(sql, rel))
        n = 1 + len(items)
        nans = any(any(row[n:]) for row in rows)
        return [row[:n] for row in rows], k, nans
