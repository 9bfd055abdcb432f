"""Run plans inside Apache Spark and return only the small exact aggregates mechanisms need.

A plan becomes one Spark SQL query: a common table expression per plan node over a temporary
view per source (made once, dropped when the source DataFrame is gone), with each node's
column kinds worked out in Python, so Spark analyses a query once, when it runs, and only the
final aggregate is collected: one Spark action per executor call. The calls of one query (the
check before the charge, then each aggregate) share one translation
(:func:`~pinqpy.plan.batch.batch_memo`). Expressions are translated from the AST into Spark SQL
that follows :mod:`pinqpy.expr.pandas_eval`, whatever the session's ANSI setting:

* NULL propagates; a fault that depends on the data (division by zero, integer overflow, a
  bad CAST, the logarithm of a negative, a non-finite float) gives NULL, never an error.
* ``/`` is float division; FLOOR, CEIL and ROUND(x) give integers (NULL beyond the int64
  range); ROUND halves go away from zero; LOG is base 10; LEAST/GREATEST skip NULLs.
* Floats are doubles with NaN read as NULL; integers are 64-bit; keys match NULL to NULL.
* Truncation (``bound_contributions`` and bounded joins) keeps, per key, the rows of lowest
  salted 64-bit hash of the whole row, as the pandas engine does with its own hash.

pandas DataFrames (sources and public tables) are converted with :func:`to_spark`, once per
DataFrame object and executor.

Differences from the pandas engine, all at the edges:

* Floats as text follow Python's ``repr`` (``1e+20``, ``0.0001``, shortest digits); beyond
  2^53, or below the normal range, the last digit can differ (Java rounds twice).
* Datetimes as text are always ``yyyy-MM-dd HH:mm:ss`` (pandas drops the time of a column of
  whole dates and adds fractions when a row has them). Timestamps have microsecond precision.
  Text parsed as a timestamp follows Spark's ISO-8601 reader.
* A datetime is not a number: aggregating one gives NULL (pandas reads nanoseconds).
* Object columns of mixed types are read as their text, so they match text keys only.
* Spark resolves column names regardless of case, so names that differ only in case cannot
  be told apart.

Not supported (a :class:`~pinqpy.errors.PinqError` says so): Python callables
(:class:`~pinqpy.plan.nodes.PyFunc`), which cannot run inside the engine, SUBSTR with a start or
length that is not a literal integer, and map-typed columns in truncation keys.

Errors raised by Spark are reported by kind only: their text may quote private values.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pinqpy.engines.base import (
    Executor,
    KeySplit,
    LatticeSums,
    LightDraw,
    Read,
    canonical_key_counts,
    canonical_light_keys,
)
from pinqpy.engines.buckets import bucket_query, uniform_grid
from pinqpy.engines.spark.call import Call
from pinqpy.engines.spark.dialect import SPARK
from pinqpy.engines.spark.groups import grouped_rows, per_group
from pinqpy.engines.spark.keys import (
    GI,
    INLINE_ROWS,
    distinct_candidates,
    key_arrow,
    key_column,
    picks,
    restored,
    split_column,
    values_table,
)
from pinqpy.engines.spark.plans import PlanSql
from pinqpy.engines.spark.session import local_session, pyspark_sql, spark_types
from pinqpy.engines.spark.sums import (
    REQUESTS,
    request_columns,
    request_results,
    request_values,
)
from pinqpy.engines.spark.types import arrow_values, session_tz
from pinqpy.engines.spark.views import SourceViews
from pinqpy.engines.sqlgen.keycounts import grouped_sql, picked_sql, split_sql
from pinqpy.engines.sqlgen.plans import Col, check_case_distinct
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Column, Expr
from pinqpy.plan.batch import batch_memo
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import PlanNode, PyFunc
from pinqpy.plan.truncation import TruncatedCount

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkExecutor"]


class SparkExecutor(Executor):
    """Plans run inside Spark; only aggregates come back.

    Sources are Spark DataFrames of ``spark`` or pandas DataFrames (converted once per
    DataFrame object). ``spark`` defaults to :func:`local_session`.
    """

    def __init__(self, spark: SparkSession | None = None) -> None:
        pyspark_sql()
        self.spark = spark if spark is not None else local_session()
        self._sources = SourceViews(self.spark)

    # -- engine plumbing ------------------------------------------------------------------
    @contextlib.contextmanager
    def _call(self, what: str) -> Iterator[tuple[Call, PlanSql]]:
        """One executor call and the query's translator (shared within a batch)."""
        self._sources.drop_dead()
        call = Call(self.spark, what, self._sources.new_name)
        memo = batch_memo()
        p: PlanSql | None = None
        if memo is not None:
            hit = memo.get(("spark", id(self)))
            if hit is not None and hit[0] is self:
                p = hit[1]
        if p is None:
            p = PlanSql(self, self._sources)
            if memo is not None:
                memo[("spark", id(self))] = (self, p)
        p.call = call
        try:
            yield call, p
        finally:
            call.close()

    def rows(self, plan: PlanNode) -> pd.DataFrame:
        """The plan's rows. For tests of stability only; never reachable from the public API."""
        with self._call("reading rows") as (call, p):
            rel = p.visit(plan)
            kinds = rel.kinds
            columns = list(kinds)
            items = [
                f"CAST({SPARK.ident(c)} AS TIMESTAMP_NTZ) AS {SPARK.ident(c)}"
                if kinds[c] == "datetime"
                else SPARK.ident(c)
                for c in columns
            ]
            rows = call.collect(p.query(f"SELECT {', '.join(items)} FROM {rel.name}", rel))
        return pd.DataFrame(rows, columns=columns)

    # -- the Executor interface -----------------------------------------------------------
    def validate(
        self, plan: PlanNode, value: Expr | PyFunc | None = None, numeric: bool = False
    ) -> None:
        check_case_distinct(plan, "Spark")
        # Callables, unknown columns and types that cannot be aggregated are found by the
        # translation itself, before anything is charged. Where the SQL's validity depends on
        # types pinqpy does not model, Spark analyses the query (it reads no rows).
        with self._call("checking a query") as (call, p):
            rel = p.visit(plan)
            src, vsql, sure = rel.name, SPARK.null("float"), rel.sure
            if value is not None:
                src, sqls, kinds, unsure = p.values(rel, [value], numeric)
                vsql, kind, sure = sqls[0], kinds[0], sure and not unsure
                if numeric and kind == "other":
                    what = f"column {value.name!r}" if isinstance(value, Column) else value.to_sql()
                    raise PinqError(
                        f"the Spark engine cannot aggregate {what} as a number; select or CAST "
                        "a numeric value instead"
                    )
            if not sure:
                call.sql(p.query(f"SELECT {vsql} AS __pinq_v FROM {src}", rel))

    def _truncated_count(self, tc: TruncatedCount) -> int:
        with self._call("counting rows") as (call, p):
            return int(call.collect(p.truncated_count(tc))[0][0])

    def _count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        counts: np.ndarray = self._aggregates("counting rows", plan, grouping, [("count",)])[0]
        return counts

    def _clamped_sum(self, read: Read, grouping: Grouping | None) -> tuple[np.ndarray, np.ndarray]:
        plan, (value, lo, hi) = read.plan, read.clamp
        request = ("clamped_sum", value, lo, hi)
        out: tuple[np.ndarray, np.ndarray] = self._aggregates(
            "summing values", plan, grouping, [request]
        )[0]
        return out

    def _lattice_sums(self, read: Read, grouping: Grouping | None) -> LatticeSums:
        plan, (value, lo, hi), squares = read.plan, read.clamp, read.kind == "moments"
        request = ("lattice2" if squares else "lattice", value, lo, hi)
        out: LatticeSums = self._aggregates("summing values", plan, grouping, [request])[0]
        return out

    def read_together(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read]
    ) -> list[Any]:
        """Several counts and clamped sums or moments of one plan in the same groups, by one
        Spark job (a SQL query's ``COUNT(*)`` and ``AVG(x)`` would otherwise scan and join
        twice)."""
        requests = [
            (REQUESTS[r.kind],) if r.kind == "count" else (REQUESTS[r.kind], r.value, r.lo, r.hi)
            for r in reads
        ]
        return self._aggregates("computing aggregates", plan, grouping, requests)

    def _aggregates(
        self,
        what: str,
        plan: PlanNode,
        grouping: Grouping | None,
        requests: Sequence[tuple[Any, ...]],
    ) -> list[Any]:
        if not requests:
            return []
        values = request_values(requests)
        out = self._aggregated(what, plan, grouping, requests, values, True)
        if out is None:
            # An integer sum's part overflowed int64 (try_sum gave NULL; possible only past
            # 2**42 rows, pinqpy.engines.spark.sums): all on the grid instead.
            out = self._aggregated(what, plan, grouping, requests, values, False)
        assert out is not None
        return out

    def _aggregated(
        self,
        what: str,
        plan: PlanNode,
        grouping: Grouping | None,
        requests: Sequence[tuple[Any, ...]],
        values: list[Expr | PyFunc],
        ints: bool,
    ) -> list[Any] | None:
        """The requests' results by one Spark job: with ``ints``, those of integer values
        summed in integers where they can be (None if such a sum overflowed)."""
        k = 1 if grouping is None else len(grouping.keys)
        with self._call(what) as (call, p):
            base = grouped_rows(call, p, plan, grouping, values, ints=ints)
            if base is None:
                return request_results(requests, [False] * len(requests), [], k)
            bigint = [ints and kind == "int" for kind in base.kinds]
            units, aggs, on_ints = request_columns(requests, values, bigint)
            rows_sql = f"SELECT {', '.join([*base.carry, *units])} FROM ({base.sql}) AS b"
            rows = per_group(call, p, base, rows_sql, ", ".join(aggs))
        return request_results(requests, on_ints, rows, k)

    def buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        # +0.0 makes -0.0 equal to 0.0 for the searches below, as numpy's comparisons do.
        cand = np.asarray(candidates, dtype="float64") + 0.0
        m = len(cand)
        k = 1 if grouping is None else len(grouping.keys)
        flat = np.zeros((k, 2 * m - 1), dtype=np.int64)
        with self._call("counting values between quantile candidates") as (call, p):
            base = grouped_rows(call, p, plan, grouping, [value])
            if base is None:
                return flat[:, 0::2], flat[:, 1::2]
            group = ", ".join(base.carry)
            values = f"SELECT {group}, __pinq_v0 + 0.0D AS __pinq_v FROM ({base.sql}) AS b "
            values += "WHERE __pinq_v0 IS NOT NULL"
            grid = uniform_grid(cand)
            if grid is not None:
                # pinqpy's default grids: each value's bucket by arithmetic (see _buckets).
                bucketed = bucket_query(values, group, "__pinq_v", "bk", grid, SPARK.float_lit)
            else:
                bucketed = self._searched(call, values, group, cand)
            rows = per_group(call, p, base, bucketed, "COUNT(*)", by="bk")
        for gi, b, n in rows:
            flat[int(gi), int(b)] += int(n)
        return flat[:, 0::2].astype(np.int64), flat[:, 1::2].astype(np.int64)

    def _searched(self, call: Call, values: str, group: str, cand: np.ndarray) -> str:
        """Buckets of ``values`` by binary search over any sorted candidates: columns
        ``group`` and ``bk``."""
        m = len(cand)
        steps = max(m.bit_length(), 1)
        lo_s, hi_s = SPARK.float_lit(float(cand[0])), SPARK.float_lit(float(cand[-1]))
        if m <= INLINE_ROWS:
            grid = (
                f"(SELECT array({', '.join(SPARK.float_lit(float(c)) for c in cand)}) AS __pinq_a)"
            )
        else:
            T = spark_types()
            import pyarrow as pa

            grid = call.table(
                ["__pinq_a"],
                [(pa.array([cand.tolist()], pa.list_(pa.float64())), T.ArrayType(T.DoubleType()))],
            )
        # n = #{candidates < c} by binary search over the sorted candidates (numpy's
        # searchsorted(side="left")); c == a[n] goes to eq[n] (bucket 2n), otherwise it
        # lies between a[n-1] and a[n] (bucket 2n - 1).
        step = f"shiftleft(1, {steps - 1} - i)"
        search = (
            f"aggregate(sequence(0, {steps - 1}), 0, (acc, i) -> "
            f"IF(try_element_at(a, acc + {step}) < c, acc + {step}, acc))"
        )
        clamped = (
            f"SELECT {group}, least(greatest(__pinq_v, {lo_s}), {hi_s}) AS c FROM ({values}) AS v"
        )
        searched = (
            f"SELECT /*+ BROADCAST(cb) */ {group}, c, cb.__pinq_a AS a, {search} AS n "
            f"FROM ({clamped}) AS x CROSS JOIN {grid} AS cb"
        )
        return (
            f"SELECT {group}, IF(try_element_at(a, n + 1) = c, 2 * n, 2 * n - 1) AS bk "
            f"FROM ({searched}) AS s"
        )

    def key_counts(
        self, plan: PlanNode, columns: tuple[str, ...]
    ) -> tuple[list[Hashable], np.ndarray]:
        with self._call("counting keys") as (call, p):
            rel = p.visit(plan)
            kinds = rel.kinds
            # Timestamps come back as wall times (collect would use Python's local zone).
            items = [
                f"CAST({SPARK.ident(c)} AS TIMESTAMP_NTZ)"
                if kinds.get(c) == "datetime"
                else SPARK.ident(c)
                for c in columns
            ]
            group = ", ".join(SPARK.ident(c) for c in columns)
            text = f"SELECT {', '.join(items)}, COUNT(*) FROM {rel.name} GROUP BY {group}"
            rows = call.collect(p.query(text, rel))

        def restore(v: Any, c: str) -> Any:
            if v is not None and kinds.get(c) == "datetime":
                return pd.Timestamp(v)
            return v

        keyed = [
            (tuple(restore(v, c) for v, c in zip(r[:-1], columns, strict=True)), r[-1])
            for r in rows
        ]
        keys: list[Hashable] = [kv[0][0] if len(columns) == 1 else kv[0] for kv in keyed]
        # Released as canonical spellings, in an order of the keys alone (NULL last).
        counts = np.array([int(kv[1]) for kv in keyed], dtype=np.int64)
        return canonical_key_counts(keys, counts, [kinds[c] for c in columns])

    def split_key_counts(
        self, plan: PlanNode, columns: tuple[str, ...], heavy_from: int, draw: LightDraw
    ) -> KeySplit:
        """Split in Spark (:mod:`pinqpy.engines.sqlgen.keycounts`): one job reads the heavy
        keys and how many light keys have each count, a second only the light keys ``draw``
        picks. Columns of a kind not vetted there read every key."""
        d = len(columns)
        with self._call("counting keys") as (call, p):
            rel = p.visit(plan)
            kinds = [rel.kinds.get(c, "other") for c in columns]
            utf8 = int(str(self.spark.version).split(".")[0]) >= 4
            specs = [split_column(c, k, utf8) for c, k in zip(columns, kinds, strict=True)]
            cols = [s for s in specs if s is not None]
            if len(cols) == d:
                made = [Col(f"__pinq_k{j}", k) for j, k in enumerate(kinds)]
                g = p.add(grouped_sql(rel.name, cols), [*made, Col("__pinq_n", "int")], [rel])
                rows = call.collect(p.query(split_sql(g.name, cols, heavy_from), g))
                heavy = [restored(r[1 : d + 1], kinds) for r in rows if r[0] == 0]
                counts = np.array([int(r[d + 1]) for r in rows if r[0] == 0], dtype=np.int64)
                classes = [(int(r[d + 1]), int(r[d + 2])) for r in rows if r[0] == 1]
                del rows
                single = [k[0] for k in heavy] if d == 1 else heavy
                keys, counts = canonical_key_counts(single, counts, kinds)
                picked = draw(classes)
                found = []
                if picked:
                    text = picked_sql(g.name, cols, heavy_from, picks(call, picked))
                    found = call.collect(p.query(text, g))
        if len(cols) < d:
            return super().split_key_counts(plan, columns, heavy_from, draw)
        noisy = {(c, r): y for c, r, y in picked}
        read = [restored(r[:d], kinds) for r in found]
        light, values = canonical_light_keys(
            read if d > 1 else [k[0] for k in read],
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
        k = 1 if grouping is None else len(grouping.keys)
        out = np.zeros((k, n), dtype=np.int64)
        with self._call("counting candidates") as (call, p):
            base = grouped_rows(call, p, plan, grouping, [value], numeric=False)
            if base is None or base.kinds[0] in ("null", "other"):
                return out
            kind = base.kinds[0]
            uniq = distinct_candidates(candidates, kind)
            if not uniq:
                return out
            tz = session_tz(self.spark)
            if len(uniq) <= INLINE_ROWS:
                table = values_table(
                    [GI, "__pinq_c"],
                    [
                        [SPARK.int_lit(j) for j, _ in uniq],
                        key_column([c for _, c in uniq], kind, tz),
                    ],
                )
            else:
                table = call.table(
                    [GI, "__pinq_c"],
                    [
                        arrow_values(pd.Series([j for j, _ in uniq], dtype="int64"), "int", tz),
                        key_arrow([c for _, c in uniq], kind, tz),
                    ],
                )
            eq = "<=>" if any(c is None for _, c in uniq) else "="
            carry = ", ".join(f"b.{c}" for c in base.carry)
            joined = (
                f"SELECT /*+ BROADCAST(cnd) */ {carry}, cnd.{GI} AS __pinq_j "
                f"FROM ({base.sql}) AS b JOIN {table} AS cnd ON b.__pinq_v0 {eq} cnd.__pinq_c"
            )
            rows = per_group(call, p, base, joined, "COUNT(*)", by="__pinq_j")
        for gi, j, c in rows:
            out[int(gi), int(j)] = int(c)
        return out
