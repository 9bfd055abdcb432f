"""Run plans as Polars lazy queries and return only the small exact aggregates mechanisms need.

A plan becomes one LazyFrame (:mod:`.plans`), aggregated by Polars' own engine
(``collect(engine="streaming")``, which streams where Polars streams and falls back to its
in-memory engine elsewhere): no row is converted to pandas and no Python runs per row. Only
aggregates come back: per-group counts, exact clamped and lattice sums (:mod:`.reads`), bucket
counts and candidate counts (a keyed aggregate also returns each group's key values, only to
match them to the listed keys; they are never released). Noise is added afterwards in Python,
as for every engine.

Within one :func:`~pinqpy.plan.batch.batch` (one query's checks and reads) a plan is
translated once: the check before the charge translates it, and the reads run the same
LazyFrame, with the same truncation salt, so a query's aggregates all see the same rows.

Not supported (a :class:`~pinqpy.errors.PinqError` says so, before any charge): Python
callables (:class:`~pinqpy.plan.nodes.PyFunc`), and SUBSTR with a start or length that is not
a literal integer.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import polars as pl

from pinqpy.engines.base import (
    Executor,
    LatticeSums,
    Read,
    canonical_key_counts,
    column_key,
    column_key_rows,
)
from pinqpy.engines.buckets import uniform_grid
from pinqpy.engines.polars.expressions import numeric_value, typed
from pinqpy.engines.polars.plans import PlanPolars, Rel
from pinqpy.engines.polars.reads import (
    bucket_steps,
    integral,
    lattice_aggs,
    lattice_result,
    sum_aggs,
    sum_result,
)
from pinqpy.engines.polars.types import NUMPY_INTS
from pinqpy.engines.sqlgen.plans import compatible, value_kind
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Column, Expr
from pinqpy.plan.batch import batch_memo
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.keys import NO_MATCH, TYPED_KINDS
from pinqpy.plan.nodes import PlanNode, PyFunc
from pinqpy.plan.truncation import TruncatedCount

__all__ = ["PolarsExecutor"]

#: Polars' engine for every query: streaming, which falls back to in-memory where needed.
ENGINE = "streaming"
_EPOCH = _dt.datetime(1970, 1, 1)
_GROUP = "__pinq_k"


def collect(lf: pl.LazyFrame) -> pl.DataFrame:
    """Run a query; Polars' errors become PinqErrors that quote no data."""
    try:
        return lf.collect(engine=ENGINE)
    except PinqError:
        raise
    except (Exception, pl.exceptions.PanicException) as exc:
        raise PinqError(
            f"the Polars engine failed ({type(exc).__name__}); details are hidden because "
            "they may contain private values"
        ) from None


def _epoch(ts: pd.Timestamp, unit: str | None) -> int | None:
    """A naive timestamp as the integer a Datetime column of ``unit`` stores, or None when
    it is finer than the unit (no value of the column equals it)."""
    micros = (ts.to_pydatetime(warn=False) - _EPOCH) // _dt.timedelta(microseconds=1)
    if unit == "ns":
        return micros * 1000 + ts.nanosecond
    return None if ts.nanosecond else micros


def _stored(col: str, kind: str) -> pl.Expr:
    """A key column as its groups are matched in Python: a timestamp as its stored integer
    (Python's datetime would drop nanoseconds), a column no typed key can equal as NULL."""
    if kind == "datetime":
        return pl.col(col).cast(pl.Int64)
    if kind not in TYPED_KINDS:
        return pl.lit(None)
    return pl.col(col)


def _spelt(v: object, kind: str, unit: str | None) -> object:
    """A canonical key value spelt as :func:`_stored` reads the column (NO_MATCH: none)."""
    if v is None or v is NO_MATCH or kind != "datetime":
        return v
    ts = pd.Timestamp(v)  # type: ignore[arg-type]
    if ts.tzinfo is not None:
        ts = ts.tz_convert("UTC").tz_localize(None)
    got = _epoch(ts, unit)
    return NO_MATCH if got is None else got


def _listed_filter(stored: pl.Expr, values: set[Any], kind: str) -> pl.Expr:
    """Rows whose stored key is among ``values`` (None: NULL)."""
    conds = []
    plain = [v for v in values if v is not None]
    if plain and kind in TYPED_KINDS:
        dtype = pl.Int64 if kind == "datetime" else None
        conds.append(stored.is_in(pl.Series(plain, dtype=dtype).implode()))
    if None in values:
        conds.append(stored.is_null())
    return _either(conds) if conds else pl.lit(False)


def _either(conds: Sequence[pl.Expr]) -> pl.Expr:
    out = conds[0]
    for c in conds[1:]:
        out = out | c
    return out


def _both(conds: Sequence[pl.Expr]) -> pl.Expr:
    out = conds[0]
    for c in conds[1:]:
        out = out & c
    return out


class PolarsExecutor(Executor):
    """Plans over Polars frames; only aggregates come back."""

    # -- plumbing -------------------------------------------------------------------------
    def _plans(self) -> PlanPolars:
        """The current batch's translator (so a check's translation serves the reads)."""
        memo = batch_memo()
        if memo is None:
            return PlanPolars(self.catalog)
        slot = ("polars-plans", id(self))
        hit = memo.get(slot)
        if hit is None or hit[0] is not self:
            hit = memo[slot] = (self, PlanPolars(self.catalog))
        return hit[1]  # type: ignore[no-any-return]

    def _value(
        self, p: PlanPolars, rel: Rel, value: Expr | PyFunc, ints: bool
    ) -> tuple[pl.Expr, str, Rel]:
        """``value`` as pandas' numeric view: Float64 of kind "float" (with ``ints``, an
        integer value stays Int64 of kind "int"), and ``rel`` with the working columns it
        reads (the value among them unless it is small: the reads use it several times)."""
        v, rel = p.value(rel, value, "an aggregation")
        if ints and v.kind in ("int", "bool"):
            x, kind = v.expr.cast(pl.Int64), "int"
        else:
            x, kind = numeric_value(v), "float"
        t = p.translator(rel)
        x = t.bind(x)
        return x, kind, (Rel(t.apply(rel.lf)) if t.lets else rel)

    def _grouped(
        self,
        rel: Rel,
        grouping: Grouping | None,
        aggs: Sequence[pl.Expr],
        extra: Sequence[pl.Expr] = (),
        keep: pl.Expr | None = None,
    ) -> list[tuple[Any, ...]]:
        """Rows (group position, extra values..., aggs...) of ``aggs`` per listed group and
        per value of each ``extra`` expression, over the rows ``keep`` admits.

        With public keys, the rows are first filtered by each key column's listed values
        (rows no key can match are dropped, so the groups are few whatever the column's
        other values), grouped by the key columns' values, and the few groups matched to the
        listed keys here. Each group is one value under Polars' equality (text by its
        characters, ``-0.0`` with ``0.0``, a timestamp by its stored integer), and a key is
        spelt as the column spells it (``column_key_rows``: keys equal under the column's
        type were merged into the first), so a row counts for a key exactly when it equals
        it, and no row counts twice."""
        lf = rel.lf if keep is None else rel.lf.filter(keep)
        named = [a.alias(f"__pinq_a{i}") for i, a in enumerate(aggs)]
        ex = [e.alias(f"__pinq_x{i}") for i, e in enumerate(extra)]
        if grouping is None:
            if not ex:
                return [(0, *collect(lf.select(named)).row(0))]
            return [(0, *r) for r in collect(lf.group_by(ex).agg(named)).rows()]
        cols = rel.cols()
        kinds = [cols[c][0] for c in grouping.columns]
        units = [cols[c][1] for c in grouping.columns]
        single = len(grouping.columns) == 1
        rows = []
        for i, vals in column_key_rows(kinds, grouping.keys, single):
            spelt = tuple(_spelt(v, k, u) for v, k, u in zip(vals, kinds, units, strict=True))
            if NO_MATCH not in spelt:
                rows.append((i, spelt))
        if not rows:
            return []
        pairs = list(enumerate(zip(grouping.columns, kinds, strict=True)))
        keys = [_stored(c, k).alias(f"{_GROUP}{j}") for j, (c, k) in pairs]
        conds = [_listed_filter(_stored(c, k), {r[1][j] for r in rows}, k) for j, (c, k) in pairs]
        lf = lf.filter(_both(conds))
        got = collect(lf.group_by([*keys, *ex]).agg(named)).rows()
        at = {spelt: i for i, spelt in rows}
        width = len(keys)
        out = []
        for g in got:
            i = at.get(tuple(g[:width]))
            if i is not None:
                out.append((i, *g[width:]))
        return out

    def rows(self, plan: PlanNode) -> pd.DataFrame:
        """The plan's rows. For tests of stability only; never reachable from the public API."""
        return collect(self._plans().visit(plan).lf).to_pandas()

    # -- the Executor interface -----------------------------------------------------------
    def validate(
        self, plan: PlanNode, value: Expr | PyFunc | None = None, numeric: bool = False
    ) -> None:
        # Translating finds callables, unknown columns and types Polars cannot combine; the
        # schema Polars resolves (reading no rows) shows whatever else it would refuse.
        p = self._plans()
        rel = p.visit(plan)
        rel.resolve()
        if value is None:
            return
        v, rel = p.value(rel, value, "an aggregation")
        if numeric and v.kind == "other":
            what = f"column {value.name!r}" if isinstance(value, Column) else value.to_sql()  # type: ignore[union-attr]
            raise PinqError(
                f"the Polars engine cannot aggregate {what} as a number; select or CAST a "
                "numeric value instead"
            )
        Rel(rel.lf.select(typed(v).alias("__pinq_v"))).resolve()

    def read_together(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read]
    ) -> list[Any]:
        """One query for ``reads`` (counts, clamped sums and moments of ``plan``)."""
        p = self._plans()
        rel = p.visit(plan)
        aggs: list[pl.Expr] = []
        kinds: list[str] = []
        for r in reads:
            if r.kind == "count":
                aggs.append(pl.len())
                kinds.append("")
                continue
            ints = integral(r.lo) and integral(r.hi)
            v, kind, rel = self._value(p, rel, r.value, ints)  # type: ignore[arg-type]
            kinds.append(kind)
            if r.kind == "sum":
                aggs += sum_aggs(v, kind, r.lo, r.hi)
            else:
                squares = r.kind == "moments"
                cols, more = lattice_aggs(v, kind, r.lo, r.hi, squares, f"__pinq_d{len(aggs)}")
                rel, aggs = _with(rel, cols), aggs + more
        k = 1 if grouping is None else len(grouping.keys)
        rows = self._grouped(rel, grouping, aggs)
        out: list[Any] = []
        at = 1
        for r, kind in zip(reads, kinds, strict=True):
            w = 1 if r.kind == "count" else 2 if r.kind == "sum" else 3
            part = [(row[0], *row[at : at + w]) for row in rows]
            at += w
            if r.kind == "count":
                out.append(_counts(part, k))
            elif r.kind == "sum":
                out.append(_sums(part, k, kind, r.lo, r.hi))
            else:
                out.append(_lattice(part, k, kind, r.lo, r.hi, r.kind == "moments"))
        return out

    def _truncated_count(self, tc: TruncatedCount) -> int:
        lf = self._plans().visit(tc.child).lf
        if tc.drop_null:
            lf = lf.filter(pl.all_horizontal([pl.col(c).is_not_null() for c in tc.columns]))
        n = pl.len().cast(pl.Int64).alias("__pinq_n")
        per_key = lf.group_by(list(tc.columns)).agg(n)
        total = per_key.select(pl.min_horizontal(pl.col("__pinq_n"), int(tc.limit)).sum())
        return int(collect(total).item() or 0)

    def _count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        p = self._plans()
        rows = self._grouped(p.visit(plan), grouping, [pl.len()])
        return _counts(rows, 1 if grouping is None else len(grouping.keys))

    def _clamped_sum(self, read: Read, grouping: Grouping | None) -> tuple[np.ndarray, np.ndarray]:
        plan, (value, lo, hi) = read.plan, read.clamp
        p = self._plans()
        rel = p.visit(plan)
        v, kind, rel = self._value(p, rel, value, integral(lo) and integral(hi))
        rows = self._grouped(rel, grouping, sum_aggs(v, kind, lo, hi))
        return _sums(rows, 1 if grouping is None else len(grouping.keys), kind, lo, hi)

    def _lattice_sums(self, read: Read, grouping: Grouping | None) -> LatticeSums:
        plan, (value, lo, hi), squares = read.plan, read.clamp, read.kind == "moments"
        p = self._plans()
        rel = p.visit(plan)
        v, kind, rel = self._value(p, rel, value, integral(lo) and integral(hi))
        cols, aggs = lattice_aggs(v, kind, lo, hi, squares)
        rows = self._grouped(_with(rel, cols), grouping, aggs)
        k = 1 if grouping is None else len(grouping.keys)
        return _lattice(rows, k, kind, lo, hi, squares)

    def buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        cand = np.asarray(candidates, dtype="float64")
        p = self._plans()
        rel = p.visit(plan)
        grid = uniform_grid(cand)
        ints = grid is not None and all(integral(x) for x in (grid.start, grid.step, grid.stop))
        v, kind, rel = self._value(p, rel, value, ints=ints)
        lf = rel.lf.filter(v.is_not_null())
        for step in bucket_steps(v, kind, cand, grid):
            lf = lf.with_columns(step)
        rows = self._grouped(Rel(lf), grouping, [pl.len()], [pl.col("__pinq_b")])
        k = 1 if grouping is None else len(grouping.keys)
        flat = np.zeros((k, 2 * len(cand) - 1), dtype=np.int64)
        for gi, b, n in rows:
            flat[int(gi), int(b)] += int(n)
        return flat[:, 0::2], flat[:, 1::2]

    def key_counts(
        self, plan: PlanNode, columns: tuple[str, ...]
    ) -> tuple[list[Hashable], np.ndarray]:
        rel = self._plans().visit(plan)
        got = collect(rel.lf.group_by(list(columns)).agg(pl.len().alias("__pinq_n")))
        kinds = [rel.cols()[c][0] for c in columns]
        first = got.get_column(columns[0])
        keys: Sequence[Hashable]
        if len(columns) == 1 and first.dtype in NUMPY_INTS and first.null_count() == 0:
            keys = first.to_numpy()  # made canonical in one numpy pass (canonical_key_counts)
        else:
            values = []
            for c, kind in zip(columns, kinds, strict=True):
                s = got.get_column(c)
                # Timestamps through pandas, which keeps nanoseconds (Python's datetime
                # drops them).
                values.append(s.to_pandas().tolist() if kind == "datetime" else s.to_list())
            keys = values[0] if len(columns) == 1 else list(zip(*values, strict=True))
        counts = got.get_column("__pinq_n").to_numpy().astype(np.int64)
        # Released as canonical spellings, in an order that depends on the keys alone.
        return canonical_key_counts(keys, counts, kinds)

    def candidate_counts(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: tuple[Hashable, ...],
    ) -> np.ndarray:
        p = self._plans()
        rel = p.visit(plan)
        v, rel = p.value(rel, value, "an aggregation")
        spelt = _candidate_spellings(candidates, v.kind, v.unit)
        out = np.zeros((1 if grouping is None else len(grouping.keys), len(candidates)), np.int64)
        if not spelt:
            return out
        stored = v.expr.cast(pl.Int64) if v.kind == "datetime" else typed(v)
        keep = _listed_filter(stored, set(spelt), v.kind)
        rows = self._grouped(rel, grouping, [pl.len()], [stored], keep=keep)
        for gi, c, n in rows:
            j = spelt.get(c)
            if j is not None:
                out[int(gi), j] += int(n)
        return out


def _candidate_spellings(
    candidates: Sequence[Hashable], kind: str, unit: str | None
) -> dict[Any, int]:
    """Each distinct candidate a value of ``kind`` can equal, spelt as the value is stored,
    at its first position (as Index.get_indexer finds it); a NULL candidate matches NULL."""
    out: dict[Any, int] = {}
    for j, c in enumerate(candidates):
        ck = value_kind(c)
        if ck is not None and (kind not in TYPED_KINDS or not compatible(kind, ck)):
            continue
        v = _spelt(column_key(c, kind), kind, unit)
        if v is not NO_MATCH:
            out.setdefault(v, j)
    return out


def _counts(rows: Sequence[tuple[Any, ...]], k: int) -> np.ndarray:
    out = np.zeros(k, dtype=np.int64)
    for gi, n in rows:
        out[int(gi)] += int(n)
    return out


def _sums(
    rows: Sequence[tuple[Any, ...]], k: int, kind: str, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray]:
    sums, counts = np.zeros(k), np.zeros(k, dtype=np.int64)
    for gi, total, n in rows:
        sums[int(gi)], counts[int(gi)] = sum_result(kind, lo, hi, total, n)
    return sums, counts


def _with(rel: Rel, columns: list[pl.Expr]) -> Rel:
    """``rel`` with the working ``columns`` added (itself when there are none)."""
    return Rel(rel.lf.with_columns(columns)) if columns else rel


def _lattice(
    rows: Sequence[tuple[Any, ...]], k: int, kind: str, lo: float, hi: float, squares: bool
) -> LatticeSums:
    s1, s2, counts = [0] * k, [0] * k, np.zeros(k, dtype=np.int64)
    for gi, a, b, n in rows:
        s1[int(gi)], s2[int(gi)], counts[int(gi)] = lattice_result(kind, lo, hi, squares, a, b, n)
    return s1, s2, counts
