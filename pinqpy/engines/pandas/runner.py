"""Evaluate a plan's nodes on pandas to a :class:`~pinqpy.engines.pandas.frames.MaskedFrame`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pinqpy.engines.pandas.frames import MaskedFrame, as_float, row_mask, value_of
from pinqpy.engines.pandas.hashing import (
    drop_null_keys,
    drop_unhashable,
    first_rows,
    hashable_frame,
    hashable_series,
    unhashable_rows,
)
from pinqpy.engines.pandas.key_positions import group_index
from pinqpy.engines.pandas.truncation import bound_groups, truncate_per_key, truncation_mask
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Expr
from pinqpy.expr.pandas_eval import evaluate
from pinqpy.plan import salts
from pinqpy.plan.catalog import Catalog
from pinqpy.plan.facts import on_unit
from pinqpy.plan.grouping import Grouping
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
    Select,
    SetOp,
    Source,
    Where,
)

__all__ = ["PlanRunner"]


_SQL_AGGS = {"SUM": "sum", "AVG": "mean", "MIN": "min", "MAX": "max", "MEDIAN": "median"}


def _is_null_item(v: object) -> bool:
    if v is None:
        return True
    try:
        return bool(pd.isna(v))  # type: ignore[arg-type]
    except Exception:  # a list-like item: not NULL
        return False


def _first_items(x: object, k: int) -> object:
    """A list-like's first ``k`` non-NULL items as a list (what explode keeps of it); any
    other value as it is (a scalar explodes to itself)."""
    if isinstance(x, str | bytes) or not pd.api.types.is_list_like(x):
        return x
    out = []
    try:
        for v in x:  # type: ignore[attr-defined]
            if not _is_null_item(v):
                out.append(v)
                if len(out) >= k:
                    break
    except Exception:  # not iterable after all: explode reads it as a scalar
        return x
    return out


class PlanRunner(PlanVisitor[MaskedFrame]):
    """Evaluates one plan; a node shared by several parents (``f.concat(f)``) runs once per
    salt scope (:mod:`pinqpy.plan.salts`: under a partition its random nodes draw the
    partition's salts)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog  # where the plan's tables are found
        self._memo: dict[tuple[str | None, int], tuple[PlanNode, MaskedFrame]] = {}

    def visit(self, node: PlanNode) -> MaskedFrame:
        slot = (salts.scope_token(), id(node))
        hit = self._memo.get(slot)
        if hit is not None and hit[0] is node:
            return hit[1]
        with salts.drawing(node, self.catalog):
            rel = node.accept(self)
        self._memo[slot] = (node, rel)
        return rel

    def visit_source(self, node: Source) -> MaskedFrame:
        return MaskedFrame(self.catalog.data(node.table))

    def visit_part_source(self, node: PartSource) -> MaskedFrame:
        rel = self.visit(node.partition.parent)
        codes = group_index(rel, Grouping(node.partition.key_columns, (node.key,)))
        return MaskedFrame(rel.df, codes == 0)

    def visit_where(self, node: Where) -> MaskedFrame:
        rel = self.visit(node.child)
        m = row_mask(node.predicate, rel.df)
        return MaskedFrame(rel.df, m if rel.mask is None else (rel.mask & m))

    def visit_select(self, node: Select) -> MaskedFrame:
        child = self.visit(node.child)
        used = None
        if not node.keep_all and all(isinstance(e, Expr) for _, e in node.outputs):
            # Copy out of a where's mask only the columns the outputs read.
            names = set().union(*(e.columns() for _, e in node.outputs))  # type: ignore[union-attr]
            used = [c for c in child.df.columns if c in names]
        df = child.materialize(used)
        new = {name: value_of(e, df) for name, e in node.outputs}
        if node.keep_all:
            return MaskedFrame(df.assign(**new))
        return MaskedFrame(pd.DataFrame(new, index=df.index))

    def visit_distinct(self, node: Distinct) -> MaskedFrame:
        df = self.visit(node.child).materialize()[list(node.columns)]
        if on_unit(node.child, node.columns):  # the unit's ids: a NULL id is no one's
            df = drop_null_keys(df, node.columns)
        return MaskedFrame(df.loc[first_rows(df)].reset_index(drop=True))

    def visit_explode(self, node: Explode) -> MaskedFrame:
        df = self.visit(node.child).materialize().reset_index(drop=True)
        col = df[node.column]
        if col.dtype == object:
            # Cut each list to its first max_items non-NULL items before expanding it, so a
            # long list costs a scan of its items, not a row per item.
            k = node.max_items
            cut = np.empty(len(col), dtype=object)
            cut[:] = [_first_items(x, k) for x in col.to_numpy(dtype=object)]
            df = df.assign(**{node.column: pd.Series(cut, index=df.index, dtype=object)})
        out = df.explode(node.column)
        # An empty list explodes to one NULL row; NULL items carry nothing, so both go.
        out = out[out[node.column].notna()]
        rank = out.groupby(level=0, sort=False).cumcount().to_numpy()
        out = out[rank < node.max_items]
        return MaskedFrame(out.reset_index(drop=True))

    def visit_group_by(self, node: GroupBy) -> MaskedFrame:
        df = self.visit(node.child).materialize()
        if node.by_unit:  # a row whose unit is NULL belongs to no known person
            df = drop_null_keys(df, node.keys)
        df = drop_unhashable(df, node.keys)  # a value that cannot be a key forms no group
        keys = list(node.keys)
        work = df[keys].copy()
        named: dict[str, tuple[str, str]] = {}
        for i, (name, call) in enumerate(node.aggs):
            tmp = f"__pinq_agg_{i}"
            func = call.name
            if call.star:
                work[tmp] = 1
                named[name] = (tmp, "size")
                continue
            arg = evaluate(call.args[0], df)
            if func == "COUNT":
                work[tmp] = hashable_series(arg).to_numpy()
                named[name] = (tmp, "nunique" if call.distinct else "count")
            elif func in ("VARIANCE", "STDDEV"):
                work[tmp] = as_float(arg)
                named[name] = (tmp, "var" if func == "VARIANCE" else "std")
            elif func in _SQL_AGGS:
                work[tmp] = as_float(arg)
                named[name] = (tmp, _SQL_AGGS[func])
            else:
                raise PinqError(f"{func} cannot be used inside groupby().agg()")
        grouped = work.groupby(keys, dropna=False, sort=False)
        out = grouped.agg(**named).reset_index() if named else grouped.size().reset_index()
        if not named:
            out = out[keys]
        return MaskedFrame(out)

    def visit_join(self, node: Join) -> MaskedFrame:
        left = self.visit(node.left).materialize()
        right = self.visit(node.right).materialize()
        # A key that cannot be hashed matches nothing.
        left, right = drop_unhashable(left, node.on), drop_unhashable(right, node.on)
        if node.bounds is not None:
            left = truncate_per_key(left, node.on, node.bounds[0])
            right = truncate_per_key(right, node.on, node.bounds[1])
        out = left.merge(right, on=list(node.on), how="inner", suffixes=("", "_right"))
        return MaskedFrame(out)

    def visit_public_join(self, node: PublicJoin) -> MaskedFrame:
        df = self.visit(node.child).materialize()
        public = self.catalog.public_data(node.public)
        bad = unhashable_rows(df, node.on)  # a key that cannot be hashed matches nothing
        rest = None
        if bad is not None:
            df, rest = df.loc[~bad], df.loc[bad]
        out = df.merge(public, on=list(node.on), how=node.how, suffixes=("", "_public"))
        if rest is not None and node.how == "left":
            unmatched = rest.merge(
                public.iloc[:0], on=list(node.on), how="left", suffixes=("", "_public")
            )
            out = pd.concat([out, unmatched], ignore_index=True)
        return MaskedFrame(out.reset_index(drop=True))

    def visit_set_op(self, node: SetOp) -> MaskedFrame:
        left = self.visit(node.left).materialize()
        right = self.visit(node.right).materialize()
        if node.kind == "concat":
            return MaskedFrame(pd.concat([left, right], ignore_index=True))
        if node.kind == "union":
            both = pd.concat([left, right], ignore_index=True)
            return MaskedFrame(both.loc[first_rows(both)].reset_index(drop=True))
        lu = left.loc[first_rows(left)].reset_index(drop=True)
        ru = right.loc[first_rows(right)]
        cols = list(left.columns)
        # Compared through hashable stand-ins; the rows kept are the left side's own.
        hl, hr = hashable_frame(lu, cols), hashable_frame(ru, cols)
        merged = hl.merge(hr, on=cols, how="left", indicator="__pinq_side")
        in_right = (merged["__pinq_side"] == "both").to_numpy()
        keep = in_right if node.kind == "intersect" else ~in_right
        return MaskedFrame(lu.loc[keep].reset_index(drop=True))

    def visit_bound_contributions(self, node: BoundContributions) -> MaskedFrame:
        # A row whose unit is NULL belongs to no known person: it is dropped.
        df = self.visit(node.child).materialize()
        return MaskedFrame(df, truncation_mask(df, (node.unit,), node.max_rows, drop_null=True))

    def visit_bound_groups(self, node: BoundGroups) -> MaskedFrame:
        # As bound_contributions: a row whose unit is NULL belongs to no known person.
        df = drop_null_keys(self.visit(node.child).materialize(), (node.unit,))
        return MaskedFrame(
            bound_groups(df, node.unit, node.by, node.max_groups, node.max_rows_per_group)
        )

    def visit_bound_degree(self, node: BoundDegree) -> MaskedFrame:
        # A NULL key is one key, as in a bounded join's truncation; but a cap on exactly the
        # unit drops the rows of no known person, as bound_contributions does.
        df = self.visit(node.child).materialize()
        drop = on_unit(node.child, node.columns)
        return MaskedFrame(df, truncation_mask(df, node.columns, node.max_rows, drop_null=drop))
