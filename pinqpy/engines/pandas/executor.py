"""Run plans on pandas, vectorized, and compute the exact aggregates mechanisms need.

Plans are evaluated to a :class:`MaskedFrame`: a DataFrame plus an optional row mask. ``where``
only narrows the mask, so a filtered count or a filtered partition count never copies the
frame; other nodes apply the mask first. Everything is numpy/pandas vectorized: there is no
Python loop over rows.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pandas as pd

from pinqpy.core.grid_sums import grid_group_sums, grid_sum, lattice_group_sums, lattice_sums
from pinqpy.core.lattice import Lattice, SumGrid
from pinqpy.engines.base import Executor, LatticeSums, Read, canonical_key_counts
from pinqpy.engines.buckets import grid_bucket_counts, uniform_grid
from pinqpy.engines.pandas.frames import MaskedFrame, as_float, clip_into, numbers_of, value_of
from pinqpy.engines.pandas.hashing import (
    drop_null_keys,
    drop_unhashable,
    hash_counts,
    rows_per_key,
    unhashable_mask,
)
from pinqpy.engines.pandas.integer_sums import integer_group_sums, integer_sum, integer_total
from pinqpy.engines.pandas.key_positions import (
    counts_per_group,
    group_count,
    group_index,
    has_group_index,
    listed_key_counts,
)
from pinqpy.engines.pandas.runner import PlanRunner
from pinqpy.expr.ast import Expr
from pinqpy.expr.types import series_type
from pinqpy.plan.batch import batch_memo
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import PlanNode, PyFunc
from pinqpy.plan.truncation import TruncatedCount

__all__ = ["PandasExecutor"]


class PandasExecutor(Executor):
    """The default engine: plans over pandas DataFrames."""

    def relation(self, plan: PlanNode) -> MaskedFrame:
        memo = batch_memo()
        if memo is None:
            return PlanRunner(self.catalog).visit(plan)
        # One runner per batch: a relation shared by a query's aggregates is evaluated once.
        runner = memo.get("pandas-runner")
        if runner is None:
            runner = memo["pandas-runner"] = PlanRunner(self.catalog)
        else:
            runner.catalog = runner.catalog.merge(self.catalog)
        return runner.visit(plan)  # type: ignore[no-any-return]

    def _count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        rel = self.relation(plan)
        if grouping is None:
            return np.array([rel.row_count()], dtype=np.int64)
        if len(grouping.columns) == 1 and not has_group_index(rel, grouping):
            # One key column: a hash count of the column, then the keys looked up among its
            # few distinct values, is fastest for every column type (numbers, Arrow and
            # object strings, categoricals). Positions already found for the query's other
            # aggregates are reused instead.
            col = rel.df[grouping.columns[0]]
            got = listed_key_counts(col if rel.mask is None else col[rel.mask], grouping.keys)
            if got is not None:
                return got
        codes = group_index(rel, grouping)
        k = group_count(grouping)
        return counts_per_group(np.where(codes < 0, k, codes), k)

    def _truncated_count(self, t: TruncatedCount) -> int:
        """The row count of the truncation ``t`` describes, as ``Σ min(rows per key, limit)``
        over its child, without choosing rows: :mod:`pinqpy.plan.truncation` derives why the
        released count's distribution is exactly that of counting the chosen rows. Keys
        follow the truncation's own rules (:func:`truncate_per_key`): NULL keys dropped when
        ``t.drop_null`` and otherwise one key, values that cannot be hashed dropped."""
        df = self.relation(t.child).materialize(list(t.columns))
        if t.drop_null:
            df = drop_null_keys(df, t.columns)
        df = drop_unhashable(df, t.columns)
        if len(df) == 0:
            return 0
        return int(np.minimum(rows_per_key(df, t.columns), t.limit).sum())

    def _values(
        self, rel: MaskedFrame, grouping: Grouping | None, value: Expr | PyFunc
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Numeric values, and each row's group position for :func:`counts_per_group`.

        For one group (``grouping`` None): the values of counted rows (not NULL, inside any
        ``where``) and None. Otherwise every row's value, and positions where ``K`` (one past
        the last group) marks a row not counted, so nothing is copied out by a mask.
        """
        vals = numbers_of(rel, value)
        # Integer and boolean columns have no NULL to drop: skip the NaN scan.
        nan = np.isnan(vals) if vals.dtype.kind == "f" else None
        if grouping is None:
            keep = rel.mask
            if nan is not None and nan.any():
                keep = ~nan if keep is None else keep & ~nan
            return (vals if keep is None else vals[keep]), None
        codes = group_index(rel, grouping)
        skip = codes < 0 if nan is None else (codes < 0) | nan
        return vals, np.where(skip, group_count(grouping), codes)

    def _clamped_sum(self, read: Read, grouping: Grouping | None) -> tuple[np.ndarray, np.ndarray]:
        value, lo, hi = read.clamp
        rel = self.relation(read.plan)
        exact = integer_sum(rel, grouping, value, lo, hi)
        if exact is not None:
            return exact
        if grouping is not None:
            grouped = integer_group_sums(rel, grouping, value, lo, hi)
            if grouped is not None:
                return grouped
        # Summed exactly on the SUM's fixed-point grid (pinqpy.core.lattice.SumGrid), in one
        # blocked pass (pinqpy.core.grid_sums): a float sum of 10**8 values can err by the
        # sensitivity itself. The clamp also sends +-inf to the bounds.
        grid = SumGrid.of(lo, hi)
        if grouping is None:
            total, n = grid_sum(grid, numbers_of(rel, value), lo, hi, rel.mask)
            return np.array([grid.total(total)]), np.array([n], dtype=np.int64)
        vals, codes = self._values(rel, grouping, value)
        k = group_count(grouping)
        totals = grid_group_sums(grid, vals, lo, hi, codes, k)
        return np.array([grid.total(t) for t in totals]), counts_per_group(codes, k)

    def _lattice_sums(self, read: Read, grouping: Grouping | None) -> LatticeSums:
        value, lo, hi = read.clamp
        squares = read.kind == "moments"
        lat = Lattice.of(lo, hi)
        rel = self.relation(read.plan)
        if not squares and lat.shift <= 0:
            # Integer values and bounds on a lattice of step 2**shift <= 1: x·2**-shift is an
            # integer, so rounding is the identity and d = (x - lo)·2**-shift exactly; the
            # index sum is that multiple of the exact integer sum of the clamped values.
            got = integer_total(rel, grouping, value, lo, hi)
            if got is not None:
                total, n = got
                return [(total - int(lo) * n) << -lat.shift], [0], np.array([n], dtype=np.int64)
        if grouping is None:
            s1, s2, n = lattice_sums(lat, numbers_of(rel, value), rel.mask, squares)
            return [s1], [s2], np.array([n], dtype=np.int64)
        # Rows not counted (NULL, unlisted keys) have the position k, which is dropped.
        vals, codes = self._values(rel, grouping, value)
        k = group_count(grouping)
        sums, squared = lattice_group_sums(lat, vals, codes, k, squares)
        return sums, squared, counts_per_group(codes, k)

    def buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        cand = np.asarray(candidates, dtype="float64")
        grid = uniform_grid(cand)
        if grid is not None:
            # pinqpy's default grids: each row's bucket by arithmetic, NaN and unlisted keys
            # skipped inside (no filtered copies).
            rel = self.relation(plan)
            raw = as_float(value_of(value, rel.df))
            codes = None if grouping is None and rel.mask is None else group_index(rel, grouping)
            flat = grid_bucket_counts(raw, codes, group_count(grouping), grid)
            return flat[:, 0::2].astype(np.int64), flat[:, 1::2].astype(np.int64)
        vals, codes = self._values(self.relation(plan), grouping, value)
        m = len(cand)
        k = group_count(grouping)
        if codes is None:
            codes = np.zeros(len(vals), dtype=np.int64)
        else:  # drop the rows not counted
            vals, codes = vals[codes < k], codes[codes < k]
        clipped = clip_into(vals, cand[0], cand[-1])
        j = np.searchsorted(cand, clipped, side="left")
        j = np.minimum(j, m - 1)
        equal = cand[j] == clipped
        # Buckets 0..2m-2 alternate: 2j is "== c_j", 2j-1 is "between c_{j-1} and c_j".
        bucket = np.where(equal, 2 * j, 2 * j - 1)
        width = 2 * m - 1
        flat = np.bincount(codes * width + bucket, minlength=k * width).reshape(k, width)
        return flat[:, 0::2].astype(np.int64), flat[:, 1::2].astype(np.int64)

    def key_counts(
        self, plan: PlanNode, columns: tuple[str, ...]
    ) -> tuple[list[Hashable], np.ndarray]:
        rel = self.relation(plan)
        sizes = None
        if len(columns) == 1:
            # One pass: a hash count of the column (categoricals count their codes). A
            # value that cannot be hashed is no key: the general path below drops it.
            col = rel.df[columns[0]]
            col = col if rel.mask is None else col[rel.mask]
            sizes = hash_counts(col, dropna=False)
        if sizes is not None:
            n = sizes.to_numpy(dtype=np.int64)
            # A categorical lists its unused categories too: a key no row holds is never a
            # candidate.
            found = n > 0
            # The index itself: integer keys are made canonical in one numpy pass.
            return canonical_key_counts(sizes.index[found], n[found], [series_type(col)])
        df = drop_unhashable(rel.materialize(list(columns)), columns)
        sizes = df.groupby(list(columns), dropna=False, sort=False).size()
        keys: list[Hashable] = list(sizes.index)
        if len(columns) > 1:
            keys = [tuple(k) for k in keys]  # type: ignore[arg-type]
        # Released as canonical spellings, never as the first row spelt them.
        kinds = [series_type(df[c]) for c in columns]
        return canonical_key_counts(keys, sizes.to_numpy(dtype=np.int64), kinds)

    def candidate_counts(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: tuple[Hashable, ...],
    ) -> np.ndarray:
        rel = self.relation(plan)
        codes = group_index(rel, grouping)
        col = value_of(value, rel.df)
        bad = unhashable_mask(col)  # a value that cannot be hashed is no candidate
        if bad is not None:
            col = col.where(~bad, None)
        which = pd.Index(list(candidates)).get_indexer(col).astype(np.int64, copy=False)
        if bad is not None:
            which[bad] = -1
        ok = (codes >= 0) & (which >= 0)
        n = len(candidates)
        k = group_count(grouping)
        flat = np.bincount(codes[ok] * n + which[ok], minlength=k * n)
        return flat.reshape(k, n).astype(np.int64)

    def rows(self, plan: PlanNode) -> pd.DataFrame:
        """The plan's rows. For tests of stability only; never reachable from the public API."""
        return self.relation(plan).materialize()
