"""Run plans inside DuckDB and return only the small exact aggregates mechanisms need.

Each plan node becomes one common table expression (CTE); expressions are translated from the
AST into DuckDB SQL that follows :mod:`pinqpy.expr.pandas_eval`: NULL propagates, a fault that
depends on the data (division by zero, overflow, a bad CAST, the logarithm of a negative) gives
NULL and never an error, ``/`` is float division, FLOOR/CEIL/ROUND(x) give integers, LOG is
base 10, LEAST/GREATEST skip NULLs.

Only aggregates leave the engine: per-group counts, clamped sums, bucket counts and candidate
counts (a keyed aggregate also returns each group's key values, only to match them to the
listed keys; they are never released). Noise is added afterwards in Python, as for every
engine.

Not supported (a :class:`~pinqpy.errors.PinqError` says so): Python callables
(:class:`~pinqpy.plan.nodes.PyFunc`), which cannot run inside the engine, and SUBSTR with start or
length that are not literal integers.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.engines.base import (
    KeySplit,
    LatticeSums,
    LightDraw,
    Read,
    canonical_key_counts,
    canonical_light_keys,
)
from pinqpy.engines.buckets import Grid, bucket_query, uniform_grid
from pinqpy.engines.duckdb.aggregates import (
    bucket_counts,
    count_rows,
    int_bucket_query,
    integral,
    lattice_aggs,
    lattice_rows,
    sum_aggs,
    sum_rows,
)
from pinqpy.engines.duckdb.dialect import DUCKDB
from pinqpy.engines.duckdb.grouped import GroupedQueries
from pinqpy.engines.duckdb.plansql import split_column, value_literal
from pinqpy.engines.duckdb.tables import GI, key_rows
from pinqpy.engines.sqlgen.expressions import Lets, typed
from pinqpy.engines.sqlgen.keycounts import grouped_sql, picked_sql, split_sql
from pinqpy.engines.sqlgen.plans import check_case_distinct, compatible, value_kind
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Column, Expr
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import PlanNode, PyFunc
from pinqpy.plan.truncation import TruncatedCount

__all__ = ["DuckDBExecutor"]


class DuckDBExecutor(GroupedQueries):
    """Plans run inside DuckDB; only aggregates come back.

    Sources are pandas DataFrames (registered with the connection) or DuckDB relations of
    the same connection. ``connection`` defaults to a new in-memory database.

    Within one :func:`~pinqpy.plan.batch.batch` (one query's checks and reads) a plan is
    translated once: the check before the charge translates it, and the reads run the same
    SQL, with the same truncation salt, so a query's aggregates all see the same rows.
    """

    def rows(self, plan: PlanNode) -> pd.DataFrame:
        """The plan's rows. For tests of stability only; never reachable from the public API."""
        p = self._translation()
        rel = p.normalized(p.visit(plan))
        return self._run(lambda c: c.sql(p.query(f"SELECT * FROM {rel}", rel)).df())

    # -- the Executor interface -----------------------------------------------------------
    def validate(
        self, plan: PlanNode, value: Expr | PyFunc | None = None, numeric: bool = False
    ) -> None:
        check_case_distinct(plan, "DuckDB")
        # Translating finds callables, unknown columns and unaggregatable types, before the
        # charge. It derives each node's types, except where DuckDB decides them (set
        # operations, lists) or alone can tell whether values combine (lists, structs):
        # there DuckDB binds the SQL now (resolving types, reading no rows), so whatever it
        # would refuse is refused before the charge too.
        p = self._translation()
        rel = p.visit(plan)
        lets = Lets(DUCKDB)
        vsql = "NULL"
        if value is not None:
            v = p.value_expr(value, rel, lets, "an aggregation")
            if numeric and v.kind == "other":
                what = f"column {value.name!r}" if isinstance(value, Column) else value.to_sql()
                types = dict(p.schema(rel))
                shown = types.get(value.name, "") if isinstance(value, Column) else ""
                raise PinqError(
                    f"the DuckDB engine cannot aggregate {what}"
                    + (f" of type {shown}" if shown else "")
                    + " as a number; select or CAST a numeric value instead"
                )
            vsql = typed(DUCKDB, v)
        p.schema(rel)
        if p.unchecked:
            self._bind(p.query(f"SELECT {vsql} FROM {lets.source(rel, [vsql])}", rel))

    def _truncated_count(self, tc: TruncatedCount) -> int:
        return int(self._fetch(self._translation().truncated_count(tc))[0][0])

    def _count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        rows, k = self._grouped(plan, grouping, None, lambda v, kind: ["COUNT(*)"])
        return count_rows(rows, k)

    def _clamped_sum(self, read: Read, grouping: Grouping | None) -> tuple[np.ndarray, np.ndarray]:
        plan, (value, lo, hi) = read.plan, read.clamp
        rows, k = self._grouped(
            plan,
            grouping,
            value,
            lambda v, kind: sum_aggs(v, kind, lo, hi),
            ints=integral(lo) and integral(hi),
        )
        return sum_rows(rows, k)

    def _lattice_sums(self, read: Read, grouping: Grouping | None) -> LatticeSums:
        plan, (value, lo, hi), squares = read.plan, read.clamp, read.kind == "moments"
        # An integer value stays BIGINT for integer bounds: lattice_aggs then sums it as an
        # integer where that is exact (and converts it as a DOUBLE would be otherwise).
        rows, k = self._grouped(
            plan,
            grouping,
            value,
            lambda v, kind: lattice_aggs(v, kind, lo, hi, "", squares),
            ints=integral(lo) and integral(hi),
        )
        return lattice_rows(rows, k)

    def buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        cand = np.asarray(candidates, dtype="float64")
        m = len(cand)
        grid = uniform_grid(cand)
        if grid is not None:
            return self._grid_buckets(plan, grouping, value, grid)
        # One interval [c, next distinct c) per distinct candidate, at its first position j:
        # x == c goes to eq[j]; c < x < next goes to gap[j2 - 1], j2 the next one's first
        # position (as numpy's searchsorted(side="left") assigns them).
        firsts = [j for j in range(m) if j == 0 or cand[j] != cand[j - 1]]
        rows = []
        for i, j in enumerate(firsts):
            j2 = firsts[i + 1] if i + 1 < len(firsts) else None
            hi = float(cand[j2]) if j2 is not None else None
            rows.append((float(cand[j]), hi, 2 * j, (2 * j2 - 1) if j2 is not None else -1))
        lo_s = value_literal(float(cand[0]), "float")
        hi_s = value_literal(float(cand[-1]), "float")
        names = ["__pinq_lo", "__pinq_hi", "__pinq_eq", "__pinq_gap"]
        with self._rows(names, ["float", "float", "int", "int"], rows) as table:

            def extra(v: str, kind: str) -> tuple[str, str, str]:
                c = f"LEAST(GREATEST({v}, {lo_s}), {hi_s})"
                join = (
                    f" JOIN {table} AS b ON {c} >= b.__pinq_lo AND "
                    f"(b.__pinq_hi IS NULL OR {c} < b.__pinq_hi)"
                )
                item = (
                    f"CASE WHEN {c} = b.__pinq_lo THEN b.__pinq_eq ELSE b.__pinq_gap END "
                    "AS __pinq_b"
                )
                return join, item, "__pinq_b"

            cols, k = self._grouped(
                plan, grouping, value, lambda v, kind: [f"COUNT({v})"], extra=extra, counts=True
            )
        flat = bucket_counts(cols, k, 2 * m - 1)
        return flat[:, 0::2].astype(np.int64), flat[:, 1::2].astype(np.int64)

    def _grid_buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        grid: Grid,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Buckets on an exact arithmetic grid, without a join (see
        :mod:`pinqpy.engines.buckets`)."""

        def staged(inner: str, kind: str) -> str:
            if kind == "int":
                return int_bucket_query(inner, grid)
            lit = lambda x: value_literal(x, "float")  # noqa: E731
            return bucket_query(inner, "__pinq_gi", "__pinq_v", "__pinq_b", grid, lit)

        ints = integral(grid.start) and integral(grid.step) and integral(grid.stop)
        cols, k = self._grouped(
            plan, grouping, value, lambda v, kind: [], ints=ints, staged=staged, counts=True
        )
        flat = bucket_counts(cols, k, 2 * grid.size - 1)
        return flat[:, 0::2], flat[:, 1::2]

    def key_counts(
        self, plan: PlanNode, columns: tuple[str, ...]
    ) -> tuple[list[Hashable], np.ndarray]:
        p = self._translation()
        rel = p.visit(plan)
        # One GROUP BY of the values as stored (an enum by its codes, a float with its NaN);
        # the few groups are read as pinqpy reads them afterwards, and groups that read
        # alike (NaN and NULL) are merged by canonical_key_counts, which also orders them.
        ks = [f"__pinq_k{j}" for j in range(len(columns))]
        grouped = ", ".join(f"{DUCKDB.ident(c)} AS {k}" for c, k in zip(columns, ks, strict=True))
        inner = f"SELECT {grouped}, COUNT(*) AS __pinq_n FROM {rel} GROUP BY ALL"
        by_name = {c.name: c for c in p.columns(rel)}
        reads = ", ".join(
            p.stored_read(by_name[c], k) if by_name[c].nan else k
            for c, k in zip(columns, ks, strict=True)
        )
        rows = self._fetch(p.query(f"SELECT {reads}, __pinq_n FROM ({inner}) AS __pinq_c", rel))
        if len(columns) == 1:
            keys: list[Hashable] = [r[0] for r in rows]
        else:
            keys = [tuple(r[:-1]) for r in rows]
        # Released as canonical spellings (-0.0 groups with 0.0 and comes back as either).
        kinds = p.kinds(rel)
        counts = np.array([int(r[-1]) for r in rows], dtype=np.int64)
        return canonical_key_counts(keys, counts, [kinds[c] for c in columns])

    def split_key_counts(
        self, plan: PlanNode, columns: tuple[str, ...], heavy_from: int, draw: LightDraw
    ) -> KeySplit:
        """Split in DuckDB (:mod:`pinqpy.engines.sqlgen.keycounts`): one query reads the
        heavy keys and how many light keys have each count, a second only the light keys
        ``draw`` picks. Columns of a type not vetted there read every key."""
        p = self._translation()
        rel = p.visit(plan)
        by_name = {c.name: c for c in p.columns(rel)}
        specs = [split_column(by_name[c]) for c in columns]
        if any(s is None for s in specs):
            return super().split_key_counts(plan, columns, heavy_from, draw)
        cols = [s for s in specs if s is not None]
        g = p.cte(grouped_sql(rel, cols), [rel])
        rows = self._fetch(p.query(split_sql(g, cols, heavy_from), g))
        kinds = [p.kinds(rel)[c] for c in columns]
        d = len(columns)
        heavy = [r for r in rows if r[0] == 0]
        classes = [(int(r[d + 1]), int(r[d + 2])) for r in rows if r[0] == 1]
        del rows
        keys, counts = canonical_key_counts(
            [r[1] if d == 1 else tuple(r[1 : d + 1]) for r in heavy],
            np.array([int(r[d + 1]) for r in heavy], dtype=np.int64),
            kinds,
        )
        picked = draw(classes)
        if not picked:
            return KeySplit(keys, counts, [], np.zeros(0, dtype=np.int64))
        noisy = {(c, r): y for c, r, y in picked}
        where = [(c, r) for c, r, _ in picked]
        with self._rows(["__pinq_c", "__pinq_r"], ["int", "int"], where) as table:
            found = self._fetch(p.query(picked_sql(g, cols, heavy_from, table), g))
        light, values = canonical_light_keys(
            [r[0] if d == 1 else tuple(r[:d]) for r in found],
            [noisy[(int(r[d]), int(r[d + 1]))] for r in found],
            kinds,
        )
        return KeySplit(keys, counts, light, values)

    def candidate_counts(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: tuple[Hashable, ...],
    ) -> np.ndarray:
        n = len(candidates)
        with contextlib.ExitStack() as stack:

            def extra(v: str, kind: str) -> tuple[str, str, str]:
                # First position of each candidate value, as Index.get_indexer finds it.
                seen: set[Any] = set()
                uniq: list[tuple[int, Any]] = []
                for j, c in enumerate(candidates):
                    ck = value_kind(c)
                    marker = (ck, c) if ck is not None else (None, None)
                    if ck is not None and not compatible(kind, ck):
                        continue
                    try:
                        if marker in seen:
                            continue
                        seen.add(marker)
                    except TypeError:
                        pass
                    uniq.append((j, c))
                rows: list[tuple[Any, ...]] = []
                ckind = kind
                if kind in ("null", "other"):
                    ckind = "float"  # no candidate matches; an empty table of some type
                else:
                    found = key_rows([kind], [c for _, c in uniq], single=True)
                    rows = [(uniq[i][0], c) for i, c in found]
                cols = [GI, "__pinq_c"]
                table = stack.enter_context(self._rows(cols, ["int", ckind], rows))
                join = f" JOIN {table} AS cnd ON {v} IS NOT DISTINCT FROM cnd.__pinq_c"
                return join, f"cnd.{GI} AS __pinq_j", "__pinq_j"

            rows, k = self._grouped(
                plan, grouping, value, lambda v, kind: ["COUNT(*)"], extra=extra, as_stored=True
            )
        out = np.zeros((k, n), dtype=np.int64)
        for gi, j, c in rows:
            out[int(gi), int(j)] = int(c)
        return out
