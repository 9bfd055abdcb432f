"""An executor for any SQL engine whose column types pinqpy can track itself: every exact
aggregate is one ``SELECT`` built from the plan's SQL (:class:`RelSql`), the dialect's
spellings, and what the engine's source adapter gives (how a query runs, how a source is
read). Only the aggregates come back.

An engine subclasses :class:`RelSql` (reading its sources) and :class:`SqlExecutor`
(running a query); everything else is here:

* **Groups** of public keys (:mod:`pinqpy.engines.sqlgen.groups`): the rows filtered by
  the listed values and grouped by their own, each group matched to its key in Python, or
  joined to the listed keys; either way no row counts for two keys.
* **Counts, clamped sums and lattice sums** of one plan in the same groups are one
  statement (a SQL query's ``COUNT(*)`` and ``AVG(x)`` read together). A clamped sum of
  integers with integer bounds is a sum of the BIGINT values; any other sum is a sum of
  :class:`~pinqpy.core.lattice.SumGrid` units, and means and variances are sums of
  :class:`~pinqpy.core.lattice.Lattice` indices, all integers summed by the dialect's exact
  :meth:`exact_sum` (PostgreSQL: ``SUM`` of ``BIGINT`` is ``NUMERIC``), so nothing rounds.
  A NULL is clamped to ``lo`` like any value; a sum takes its terms back out by the count
  of NULLs, and a lattice index of ``lo`` is 0.
* **Quantile buckets** of integers on a uniform grid of integers are one integer
  expression per row (``2·(d / step)``, plus one where ``d % step <> 0``, for the clamped
  value's offset ``d`` from the grid's start): exact, and a ``GROUP BY`` of one small
  integer. Other buckets are found by ``width_bucket`` over the sorted distinct candidates
  (the number of candidates at or below the clamped value, by binary search), and whether
  the value equals that candidate.
* **Key counts** are a ``GROUP BY`` of the key columns, canonicalised in Python
  (:func:`~pinqpy.engines.base.canonical_key_counts`); **candidate counts** a join to the
  candidates.

Within one :func:`~pinqpy.plan.batch.batch` a plan is translated once, so the check before
the charge and every read share the same SQL and truncation salts.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.core.lattice import Lattice, SumGrid
from pinqpy.engines.base import (
    Executor,
    LatticeSums,
    Read,
    canonical_key_counts,
)
from pinqpy.engines.buckets import Grid, uniform_grid
from pinqpy.engines.sqlgen.dialect import Dialect
from pinqpy.engines.sqlgen.expressions import numeric_value, typed
from pinqpy.engines.sqlgen.groups import Groups, group_by, key_columns, key_rows
from pinqpy.engines.sqlgen.plans import Col, CtePlanSql, compatible, value_kind
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Column, Expr
from pinqpy.plan.batch import batch_memo
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import PlanNode, PyFunc
from pinqpy.plan.truncation import TruncatedCount

__all__ = ["Rel", "RelSql", "SqlExecutor"]


@dataclass(frozen=True)
class Rel:
    """A translated plan node: the name a query reads it by and its columns."""

    name: str
    cols: tuple[Col, ...]


class RelSql(CtePlanSql[Rel]):
    """Plans as common table expressions whose columns' kinds and types are all derived
    here (an engine's :meth:`set_column` and :meth:`explode_items` decide every column)."""

    def __init__(self, ex: SqlExecutor) -> None:
        super().__init__()
        self.ex = ex
        self.d = ex.dialect

    def name(self, rel: Rel) -> str:
        return rel.name

    def columns(self, rel: Rel) -> list[Col]:
        return list(rel.cols)

    def add(self, sql: str, cols: Sequence[Col | None], reads: Sequence[Rel], sure: bool) -> Rel:
        if any(c is None for c in cols):
            raise PinqError(f"the {self.d.name} engine cannot tell a column's type here")
        return Rel(self.cte(sql, reads), tuple(cols))  # type: ignore[arg-type]


# -- exact sums -----------------------------------------------------------------------------
def _integral(x: float) -> bool:
    return float(x).is_integer() and abs(x) <= 2**53


def _int_grid_query(d: Dialect, g: Groups, grid: Grid) -> str:
    """Each group's count per bucket of the BIGINT ``__pinq_v0`` on a uniform grid of
    integers: ``2j`` for a value equal to point ``j``, ``2j + 1`` for one strictly between
    points ``j`` and ``j + 1`` (values clamped into the grid first), the buckets the binary
    search finds. Integer arithmetic is exact: the points are integers of magnitude at most
    ``2**53``, so the offset ``d = c - start`` is in ``[0, 2**54]`` and ``2j + 1`` below
    ``2**56``, far inside BIGINT; and ``d >= 0``, so its quotient rounds down."""
    start, step, stop = (d.int_lit(int(x)) for x in (grid.start, grid.step, grid.stop))
    off = f"LEAST(GREATEST(__pinq_v0, {start}), {stop}) - {start}"
    inner = f"SELECT {g.head}, {off} AS __pinq_d FROM {g.src} WHERE __pinq_v0 IS NOT NULL"
    bucket = (
        f"2 * {d.int_quotient('__pinq_d', step)} "
        f"+ CASE WHEN __pinq_d % {step} = 0 THEN 0 ELSE 1 END"
    )
    return (
        f"SELECT {g.head}, {bucket} AS __pinq_b, COUNT(*) FROM ({inner}) AS w"
        f"{g.group('__pinq_b')}"
    )


def _clamped(d: Dialect, v: str, lo: float, hi: float, ints: bool) -> str:
    """``v`` clamped into ``[lo, hi]``; a NULL becomes ``lo`` (LEAST and GREATEST skip it),
    which the decoding takes back out (:func:`_decode`): a test for NULL on every row would
    cost more than the count of NULLs."""
    if ints:
        lo_s, hi_s = d.int_lit(int(lo)), d.int_lit(int(hi))
    else:
        lo_s, hi_s = d.float_lit(float(lo)), d.float_lit(float(hi))
    return f"LEAST(GREATEST({v}, {lo_s}), {hi_s})"


@dataclass(frozen=True)
class _Base:
    """Rows in their groups, the kinds of the values read, the relation read, and how to
    make the groups again as a join (None for one group)."""

    groups: Groups
    kinds: list[str]
    rel: Rel
    again: Any = None


@dataclass(frozen=True)
class _Agg:
    """The SQL items of one read and how to decode them (their number: ``width``)."""

    kind: str
    items: tuple[str, ...]
    lo: float = 0.0
    hi: float = 0.0
    ints: bool = False

    @property
    def width(self) -> int:
        return len(self.items)


class SqlExecutor(Executor):
    """Plans run as one SQL statement per aggregate (module docstring). An engine gives
    :attr:`dialect`, :meth:`translation` (its :class:`RelSql`) and :meth:`fetch`."""

    dialect: Dialect

    def translation(self) -> RelSql:
        raise NotImplementedError

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def exact_sum(self, sql: str) -> str:
        """The exact sum of the BIGINTs ``sql`` (never overflowing), 0 when there are none."""
        return f"COALESCE(SUM(CAST({sql} AS DECIMAL(38, 0))), 0)"

    def scaled(self, x: str, factors: Sequence[float], shift: int) -> str:
        """``x·2**-shift`` (by ``factors``) of a clamped double, for a value to be rounded or
        truncated to an integer: a value whose scaled magnitude is below 1/8 may be 0."""
        for f in factors:
            x = f"({x}) * {self.dialect.float_lit(f)}"
        return x

    def _batched(self, slot: str, make: Any) -> Any:
        memo = batch_memo()
        if memo is None:
            return make()
        key = (slot, id(self))
        hit = memo.get(key)
        if hit is None or hit[0] is not self:
            hit = memo[key] = (self, make())
        return hit[1]

    # -- groups -----------------------------------------------------------------------------
    def _base(
        self,
        p: RelSql,
        rel: Rel,
        grouping: Grouping | None,
        values: Sequence[Expr | PyFunc],
        numeric: bool,
        ints: bool = False,
    ) -> _Base | None:
        """The rows in their groups (:mod:`pinqpy.engines.sqlgen.groups`), with ``__pinq_v<i>``
        per value (doubles, NULL for non-numbers, when ``numeric``; integers as BIGINT when
        ``ints`` too). None when no listed key can match."""
        d = self.dialect
        t, lets = p.translator(rel)
        vs = [p.expr(v, t, "an aggregation") for v in values]
        sqls = [
            typed(d, v) if not numeric or (ints and v.kind == "int") else numeric_value(d, v)
            for v in vs
        ]
        kinds = [v.kind for v in vs]
        items = "".join(f", {s} AS __pinq_v{i}" for i, s in enumerate(sqls))
        src = lets.source(rel.name, sqls)
        if grouping is None:
            one = Groups(f"(SELECT 0 AS __pinq_gi{items} FROM {src}) AS b", "0", 1)
            return _Base(one, kinds, rel)
        cols = key_columns(rel.cols, grouping)
        ckinds = [c.kind for c in cols]
        rows = key_rows(ckinds, grouping)
        if not rows:
            return None
        keyed = [p.value(rel, c.name, "r.") for c in cols]

        def groups(joined: bool) -> Groups:
            return group_by(d, p.key_literal, keyed, ckinds, rows, (items, src), joined)

        return _Base(groups(False), kinds, rel, groups)

    def _grouped(self, p: RelSql, base: _Base, query: Any) -> list[tuple[Any, ...]]:
        """The rows of ``query(groups)`` as (position, rest...): matched in Python, or joined
        in SQL when two groups met one key."""
        got = base.groups.positions(self.fetch(p.query(query(base.groups), base.rel)))
        if got is None and base.again is not None:
            joined = base.again(True)
            got = joined.positions(self.fetch(p.query(query(joined), base.rel)))
        assert got is not None
        return got

    # -- counts and sums --------------------------------------------------------------------
    def _agg(self, r: Read, i: int, kind: str) -> _Agg:
        """The aggregates of read ``r`` over the value ``__pinq_v<i>`` of ``kind``."""
        if r.kind == "count":
            return _Agg("count", ("COUNT(*)",))
        d = self.dialect
        v = f"__pinq_v{i}"
        ints = kind == "int" and r.kind == "sum" and _integral(r.lo) and _integral(r.hi)
        # Integers are read as BIGINT (an integer sum is exact); any other use is of doubles.
        c = _clamped(d, v if ints or kind != "int" else d.to_double(v, "int"), r.lo, r.hi, ints)
        counts = (f"COUNT({v})", "COUNT(*)")
        if r.kind == "sum":
            if _lo_term(r.lo, r.hi, ints) == 0:
                counts = counts[:1]  # a NULL read as lo added nothing: no rows to count
            if ints:
                return _Agg("sum", (self.exact_sum(c), *counts), r.lo, r.hi, True)
            grid = SumGrid.of(r.lo, r.hi)
            units = f"CAST(trunc({self.scaled(c, grid.factors, grid.shift)}) AS BIGINT)"
            return _Agg("sum", (self.exact_sum(units), *counts), r.lo, r.hi)
        # The lattice index d = R(x·2**-shift) - B of a value clamped into [lo, hi] is in
        # [0, K] (pinqpy.core.lattice: its last clamp is the identity here), and d(lo) = 0,
        # so a NULL read as lo adds nothing.
        lat = Lattice.of(r.lo, r.hi)
        t = self.scaled(c, lat.factors, lat.shift)
        idx = f"CAST(round({t}) - {d.float_lit(lat.base)} AS BIGINT)"
        squares = self.exact_sum(f"{idx} * {idx}") if r.kind == "moments" else "0"
        return _Agg(r.kind, (self.exact_sum(idx), squares, counts[0]), r.lo, r.hi)

    def _aggregates(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read]
    ) -> list[Any]:
        """Each read's result, from one statement."""
        k = 1 if grouping is None else len(grouping.keys)
        values: list[Expr | PyFunc] = []
        for r in reads:
            if r.kind != "count" and not any(r.value is v for v in values):
                values.append(r.value)  # type: ignore[arg-type]
        p = self.translation()
        base = self._base(p, p.visit(plan), grouping, values, numeric=True, ints=True)
        rows: list[tuple[Any, ...]] = []
        aggs: list[_Agg] = []
        if base is not None:
            kinds = base.kinds
            for r in reads:
                i = next((j for j, v in enumerate(values) if v is r.value), 0)
                aggs.append(self._agg(r, i, kinds[i] if kinds else "null"))
            items = ", ".join(item for a in aggs for item in a.items)
            rows = self._grouped(p, base, lambda g: f"SELECT {g.head}, {items} FROM {g.src}{g.by}")
        else:
            aggs = [self._agg(r, 0, "null") for r in reads]
        return _decode(aggs, rows, k)

    # -- the Executor interface ---------------------------------------------------------------
    def validate(
        self, plan: PlanNode, value: Expr | PyFunc | None = None, numeric: bool = False
    ) -> None:
        p = self.translation()
        rel = p.visit(plan)
        vsql = "1"
        if value is not None:
            t, lets = p.translator(rel)
            v = p.expr(value, t, "an aggregation")
            if numeric and v.kind == "other":
                what = f"column {value.name!r}" if isinstance(value, Column) else value.to_sql()
                raise PinqError(
                    f"the {self.dialect.name} engine cannot aggregate {what} as a number; "
                    "select or CAST a numeric value instead"
                )
            vsql = typed(self.dialect, v)
            src = lets.source(rel.name, [vsql])
        else:
            src = rel.name
        if p.unchecked:
            # Lists combined in an expression: whether their types agree only the engine
            # can tell, so it is asked before the charge.
            self.check(p.query(f"SELECT {vsql} FROM {src}", rel))

    def check(self, sql: str) -> None:
        """Refuse ``sql`` before the charge unless the engine can run it (its types agree);
        runs nothing on the data."""

    def read_together(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read]
    ) -> list[Any]:
        return self._aggregates(plan, grouping, reads)

    def _truncated_count(self, tc: TruncatedCount) -> int:
        return int(self.fetch(self.translation().truncated_count(tc))[0][0])

    def _count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        out: np.ndarray = self._aggregates(plan, grouping, [Read(self, plan, "count")])[0]
        return out

    def _clamped_sum(self, read: Read, grouping: Grouping | None) -> tuple[np.ndarray, np.ndarray]:
        out: tuple[np.ndarray, np.ndarray] = self._aggregates(read.plan, grouping, [read])[0]
        return out

    def _lattice_sums(self, read: Read, grouping: Grouping | None) -> LatticeSums:
        out: LatticeSums = self._aggregates(read.plan, grouping, [read])[0]
        return out

    def buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        # +0.0 makes -0.0 equal to 0.0, as numpy's comparisons do.
        cand = np.asarray(candidates, dtype="float64") + 0.0
        m = len(cand)
        k = 1 if grouping is None else len(grouping.keys)
        flat = np.zeros((k, 2 * m - 1), dtype=np.int64)
        # The distinct candidates u_0 < ... and each one's first position (numpy's
        # searchsorted(side="left") puts a value equal to c at c's first position).
        firsts = [j for j in range(m) if j == 0 or cand[j] != cand[j - 1]]
        d = self.dialect
        p = self.translation()
        grid = uniform_grid(cand)
        ints = grid is not None and all(_integral(x) for x in (grid.start, grid.step, grid.stop))
        base = self._base(p, p.visit(plan), grouping, [value], numeric=True, ints=ints)
        if base is None:
            return flat[:, 0::2], flat[:, 1::2]
        if grid is not None and ints and base.kinds[0] == "int":
            for gi, b, n in self._grouped(p, base, lambda g: _int_grid_query(d, g, grid)):
                flat[int(gi), int(b)] += int(n)
            return flat[:, 0::2], flat[:, 1::2]
        arr = f"ARRAY[{', '.join(d.float_lit(float(cand[j])) for j in firsts)}]"
        c = (
            f"LEAST(GREATEST(__pinq_v0, {d.float_lit(float(cand[0]))}), "
            f"{d.float_lit(float(cand[-1]))})"
        )

        def query(g: Groups) -> str:
            inner = (
                f"SELECT {g.head}, width_bucket({c}, {arr}) AS __pinq_j, {c} AS __pinq_c "
                f"FROM {g.src} WHERE __pinq_v0 IS NOT NULL"
            )
            return (
                f"SELECT {g.head}, __pinq_j, __pinq_c = ({arr})[__pinq_j], COUNT(*) "
                f"FROM ({inner}) AS w{g.group('__pinq_j', '3')}"
            )

        for gi, j, equal, n in self._grouped(p, base, query):
            u = int(j) - 1  # u_u <= value < u_{u+1}
            if equal:
                flat[int(gi), 2 * firsts[u]] += int(n)
            else:
                flat[int(gi), 2 * firsts[u + 1] - 1] += int(n)
        return flat[:, 0::2], flat[:, 1::2]

    def key_counts(
        self, plan: PlanNode, columns: tuple[str, ...]
    ) -> tuple[list[Hashable], np.ndarray]:
        p = self.translation()
        rel = p.visit(plan)
        kinds = {c.name: c.kind for c in rel.cols}
        items = [f"{p.value(rel, c)} AS __pinq_k{j}" for j, c in enumerate(columns)]
        ks = ", ".join(f"__pinq_k{j}" for j in range(len(columns)))
        inner = f"SELECT {', '.join(items)} FROM {rel.name}"
        sql = f"SELECT {ks}, COUNT(*) FROM ({inner}) AS k GROUP BY {ks}"
        rows = self.fetch(p.query(sql, rel))
        keyed = [
            tuple(_key_value(v, kinds[c]) for v, c in zip(r[:-1], columns, strict=True))
            for r in rows
        ]
        keys: list[Hashable] = [kv[0] if len(columns) == 1 else kv for kv in keyed]
        counts = np.array([int(r[-1]) for r in rows], dtype=np.int64)
        return canonical_key_counts(keys, counts, [kinds[c] for c in columns])

    def candidate_counts(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: tuple[Hashable, ...],
    ) -> np.ndarray:
        n = len(candidates)
        k = 1 if grouping is None else len(grouping.keys)
        out = np.zeros((k, n), dtype=np.int64)
        p = self.translation()
        base = self._base(p, p.visit(plan), grouping, [value], numeric=False)
        if base is None or base.kinds[0] in ("null", "other"):
            return out
        kind = base.kinds[0]
        uniq = _first_candidates(candidates, kind)
        if not uniq:
            return out
        d = self.dialect
        values = ", ".join(
            f"({j}, {d.null(kind) if c is None else p.key_literal(c, kind)})" for j, c in uniq
        )
        on = d.join_equal("b.__pinq_v0", "cnd.__pinq_c", kind)

        def query(g: Groups) -> str:
            return (
                f"SELECT {g.select('b.')}, cnd.__pinq_j, COUNT(*) FROM {g.src} "
                f"JOIN (VALUES {values}) AS cnd(__pinq_j, __pinq_c) ON {on}"
                f"{g.group('cnd.__pinq_j', qual='b.')}"
            )

        for gi, j, c in self._grouped(p, base, query):
            out[int(gi), int(j)] = int(c)
        return out

    def rows(self, plan: PlanNode) -> pd.DataFrame:
        """The plan's rows. For tests of stability only; never reachable from the public API."""
        p = self.translation()
        rel = p.normalized(p.visit(plan))
        rows = self.fetch(p.query(f"SELECT * FROM {rel.name}", rel))
        data = {c.name: _column(c.kind, [r[i] for r in rows]) for i, c in enumerate(rel.cols)}
        return pd.DataFrame(data, columns=[c.name for c in rel.cols])


def _first_candidates(candidates: Sequence[Hashable], kind: str) -> list[tuple[int, Any]]:
    """The first position of each candidate value a column of ``kind`` can hold, as
    Index.get_indexer finds it (equal numbers are one candidate; NULL-like ones are one)."""
    seen: set[Any] = set()
    uniq: list[tuple[int, Any]] = []
    for j, c in enumerate(candidates):
        ck = value_kind(c)
        if ck is not None and not compatible(kind, ck):
            continue
        family = "num" if ck in ("int", "float") else ck
        marker = (family, c) if ck is not None else (None, None)
        try:
            if marker in seen:
                continue
            seen.add(marker)
        except TypeError:
            pass
        if ck is None:
            uniq.append((j, None))
        elif kind == "int" and ck == "float":
            if float(c).is_integer() and abs(float(c)) < 2**63:  # type: ignore[arg-type]
                uniq.append((j, int(c)))  # type: ignore[call-overload]
        elif kind == "float":
            uniq.append((j, float(c)))  # type: ignore[arg-type]
        else:
            uniq.append((j, c))
    return uniq


def _key_value(v: Any, kind: str) -> Any:
    if v is not None and kind == "datetime":
        return pd.Timestamp(v)
    if v is not None and kind == "float":
        return float(v)
    return v


def _column(kind: str, vals: list[Any]) -> Any:
    if kind == "int":
        return pd.array(vals, dtype="Int64") if None in vals else np.array(vals, dtype=np.int64)
    if kind == "float":
        return np.array([np.nan if v is None else float(v) for v in vals], dtype=np.float64)
    if kind == "bool":
        return pd.array(vals, dtype="boolean")
    if kind == "datetime":
        return pd.to_datetime(pd.Series(vals, dtype=object))
    return pd.Series(vals, dtype=object)


def _lo_term(lo: float, hi: float, ints: bool) -> int:
    """What a NULL, clamped to ``lo``, adds to an exact sum: ``lo`` itself, or its grid
    units."""
    return int(lo) if ints else int(SumGrid.of(lo, hi).indices(np.array([float(lo)]))[0])


def _decode(aggs: Sequence[_Agg], rows: Sequence[tuple[Any, ...]], k: int) -> list[Any]:
    """Each read's result (as the read methods return it) from rows (group, items...)."""
    out: list[Any] = []
    at = 1
    for a in aggs:
        part = [(int(r[0]), r[at : at + a.width]) for r in rows]
        at += a.width
        counts = np.zeros(k, dtype=np.int64)
        if a.kind == "count":
            for gi, (n,) in part:
                counts[gi] = int(n)
            out.append(counts)
            continue
        if a.kind == "sum":
            sums = np.zeros(k)
            grid = SumGrid.of(a.lo, a.hi)
            # Each NULL was summed as lo's own term (_clamped): taken back out.
            at_lo = _lo_term(a.lo, a.hi, a.ints)
            for gi, (total, n, *rows_in) in part:
                counts[gi] = int(n)
                exact = int(total) - (int(rows_in[0]) - int(n)) * at_lo if rows_in else int(total)
                sums[gi] = float(exact) if a.ints else grid.total(exact)
            out.append((sums, counts))
            continue
        s1, s2 = [0] * k, [0] * k
        for gi, (t1, t2, n) in part:
            s1[gi], s2[gi], counts[gi] = int(t1), int(t2), int(n)
        out.append((s1, s2, counts))
    return out
