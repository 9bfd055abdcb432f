"""Run plans on pandas, vectorized, and compute the exact aggregates mechanisms need.

Plans are evaluated to a :class:`_Relation`: a DataFrame plus an optional row mask. ``where``
only narrows the mask, so a filtered count or a filtered partition count never copies the
frame; other nodes apply the mask first. Everything is numpy/pandas vectorized: there is no
Python loop over rows.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.core.grid_sums import grid_group_sums, grid_sum, lattice_group_sums, lattice_sums
from pinqpy.core.lattice import Lattice, SumGrid
from pinqpy.engines.base import (
    NO_MATCH,
    Executor,
    LatticeSums,
    canonical_key,
    canonical_key_counts,
    is_hashable,
)
from pinqpy.engines.buckets import grid_bucket_counts, uniform_grid
from pinqpy.engines.pandas.priorities import RowPriorities, keep_lowest, row_hashes
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Column, Expr
from pinqpy.expr.pandas_eval import evaluate, predicate_mask
from pinqpy.expr.types import series_type
from pinqpy.plan import salts
from pinqpy.plan.batch import batch_memo
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
    PyFunc,
    Select,
    SetOp,
    Source,
    Where,
)
from pinqpy.plan.truncation import TruncatedCount, truncated_count

__all__ = ["PandasExecutor"]


@dataclass
class _Relation:
    df: pd.DataFrame
    mask: np.ndarray | None = None

    def materialize(self, columns: list[str] | None = None) -> pd.DataFrame:
        """The rows (of only ``columns``, if given) as a frame of their own."""
        df = self.df if columns is None else self.df[columns]
        if self.mask is None:
            return df
        return df.loc[self.mask].reset_index(drop=True)

    def row_count(self) -> int:
        return int(np.count_nonzero(self.mask)) if self.mask is not None else len(self.df)


def _call(fn: PyFunc, df: pd.DataFrame) -> pd.Series:
    """Run an analyst's callable; its failures are reported without their (data) messages."""
    try:
        out = fn.fn(df)
    except Exception as exc:  # the message may quote data values
        raise PinqError(
            f"the callable {fn.name} raised {type(exc).__name__}; pinqpy hides its message "
            "because it may contain private values"
        ) from None
    if isinstance(out, pd.Series):
        if len(out) != len(df):
            raise PinqError(f"the callable {fn.name} must return one value per row")
        return pd.Series(out.to_numpy(), index=df.index)
    arr = np.asarray(out)
    if arr.ndim == 0:
        return pd.Series(np.repeat(arr, len(df)), index=df.index)
    if arr.shape[0] != len(df):
        raise PinqError(f"the callable {fn.name} must return one value per row")
    return pd.Series(arr, index=df.index)


def _value(value: Expr | PyFunc, df: pd.DataFrame) -> pd.Series:
    return _call(value, df) if isinstance(value, PyFunc) else evaluate(value, df)


def _mask(pred: Expr | PyFunc, df: pd.DataFrame) -> np.ndarray:
    if isinstance(pred, PyFunc):
        s = _call(pred, df)
        if not pd.api.types.is_bool_dtype(s.dtype):
            try:
                s = s.astype("boolean")
            except (TypeError, ValueError):
                raise PinqError(
                    f"the callable {pred.name} given to where must return true or false for "
                    "each row"
                ) from None
        # NULL (NaN/NA) is not TRUE, as in SQL.
        return s.fillna(False).to_numpy(dtype=bool, na_value=False)
    return predicate_mask(pred, df)


def _numeric(series: pd.Series) -> np.ndarray:
    """Values as float64 with NULL as NaN; a value that is not a number counts as NULL."""
    if pd.api.types.is_bool_dtype(series.dtype):
        return series.astype("float64").to_numpy(na_value=np.nan)
    if pd.api.types.is_numeric_dtype(series.dtype):
        return series.to_numpy(dtype="float64", na_value=np.nan)
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


def _numbers(rel: _Relation, value: Expr | PyFunc) -> np.ndarray:
    """Every row's value of ``value`` as numbers (NULL as NaN), for the grid sums.

    A stored numpy column of floats, integers or booleans is handed over as it is stored,
    without a copy: the grid sums read it block by block and convert each value to float64
    exactly as :func:`_numeric` would. Any other value is evaluated and converted."""
    if isinstance(value, Column) and value.name in rel.df.columns:
        series = rel.df[value.name]
        dtype = getattr(series, "dtype", None)  # (a frame, for a name used twice)
        if isinstance(dtype, np.dtype) and dtype.kind in "fiub":
            return series.to_numpy()
    return _numeric(_value(value, rel.df))


def _clip(values: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``np.clip`` into a new array (NaN stays NaN, +-inf go to the bounds), several times
    faster: ``np.clip`` on floats takes a slow path to handle NaN."""
    out = np.maximum(values, lo)
    return np.minimum(out, hi, out=out)


def _stored_int64(rel: _Relation, value: Expr | PyFunc, lo: float, hi: float) -> pd.Series | None:
    """The stored int64 column ``value`` names, when the bounds are integers too (the exact
    integer sums below apply); otherwise None."""
    if not isinstance(value, Column) or value.name not in rel.df.columns:
        return None
    if not (float(lo).is_integer() and float(hi).is_integer()):
        return None
    series = rel.df[value.name]
    return series if series.dtype == np.dtype("int64") else None


def _integer_total(
    rel: _Relation, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
) -> tuple[int, int] | None:
    """One group's clamped sum of a stored int64 column with integer bounds, as an exact
    Python int, and the row count; None when it does not apply.

    While ``n * max(|lo|, |hi|) < 2**63`` no partial sum overflows ``int64``, so the sum,
    taken without a float copy of the column, is exact."""
    series = _stored_int64(rel, value, lo, hi)
    if grouping is not None or series is None:
        return None
    vals = series.to_numpy()
    if rel.mask is not None:
        vals = vals[rel.mask]
    if max(len(vals), 1) * max(abs(lo), abs(hi)) >= 2**63:
        return None
    return int(_clip(vals, int(lo), int(hi)).sum()), len(vals)


def _integer_sum(
    rel: _Relation, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`_integer_total` as a SUM's (sums, counts), the total correctly rounded."""
    got = _integer_total(rel, grouping, value, lo, hi)
    if got is None:
        return None
    return np.array([float(got[0])]), np.array([got[1]], dtype=np.int64)


def _integer_group_sums(
    rel: _Relation, grouping: Grouping, value: Expr | PyFunc, lo: float, hi: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per group: the clamped sum of a stored int64 column with integer bounds, and the row
    count; None when it does not apply.

    Every partial sum of ``n`` clamped values is an integer of magnitude at most
    ``n * max(|lo|, |hi|)``; below ``2**53`` the float64 accumulator of ``np.bincount``
    holds each one exactly, so the sums are exact with no fixed-point grid."""
    series = _stored_int64(rel, value, lo, hi)
    if series is None or max(len(series), 1) * max(abs(lo), abs(hi)) >= 2**53:
        return None
    k = _n_groups(grouping)
    codes = _group_index(rel, grouping)
    codes = np.where(codes < 0, k, codes)
    clipped = _clip(series.to_numpy(), int(lo), int(hi))
    sums = np.bincount(codes, weights=clipped, minlength=k + 1)[:k]
    return sums, _per_group(codes, k)


# -- values that cannot be keys -----------------------------------------------------------
# An ``object`` column may hold unhashable values (lists, dicts, sets, arrays). pandas' hash
# tables refuse them, so every hashing step reads such a column through these helpers: a
# value that cannot be a key matches no key, forms no group and joins nothing, and rows are
# compared (distinct, set operations) through a hashable stand-in equal only to stand-ins of
# equal content. Which rows hold such values never decides whether the read succeeds.
# What pandas' type inference calls an object array of only these values (NULLs skipped):
# each kind is a hashable scalar type, so no value needs to be tried one by one.
_SCALAR_KINDS = frozenset(
    {"string", "bytes", "integer", "floating", "mixed-integer-float", "boolean", "datetime64"}
    | {"datetime", "date", "timedelta64", "timedelta", "time", "period", "empty"}
)


def _unhashable(s: pd.Series) -> np.ndarray | None:
    """Where an object column holds a value that cannot be hashed, or None (typed columns and
    columns of hashable values)."""
    if s.dtype != object or len(s) == 0:
        return None
    if pd.api.types.infer_dtype(s.to_numpy(dtype=object), skipna=True) in _SCALAR_KINDS:
        return None  # one typed pass at C speed: strings, numbers and the like all hash
    bad = np.fromiter((not is_hashable(x) for x in s.to_numpy(dtype=object)), bool, len(s))
    return bad if bad.any() else None


def _all_hashable(uniques: Any) -> bool:
    """Whether every distinct value pandas found in a column can be hashed. pandas' hash
    tables accept some values Python cannot hash (equal lists form one entry), but such a
    value only ever shares an entry with values equal to it, so its entry's representative
    cannot be hashed either: checking the few distinct values finds them all."""
    if not isinstance(uniques, np.ndarray) or uniques.dtype != object:
        return True
    return all(is_hashable(u) for u in uniques)


def _hash_counts(col: pd.Series, dropna: bool) -> pd.Series | None:
    """``col.value_counts`` (unsorted), or None when the column holds a value that cannot be
    hashed (the caller then takes a path that drops such values)."""
    try:
        sizes = col.value_counts(sort=False, dropna=dropna)
    except (TypeError, ValueError):
        return None
    return sizes if _all_hashable(sizes.index.to_numpy()) else None


def _unhashable_rows(df: pd.DataFrame, columns: Any) -> np.ndarray | None:
    out: np.ndarray | None = None
    for c in columns:
        bad = _unhashable(df[c])
        if bad is not None:
            out = bad if out is None else out | bad
    return out


def _drop_unhashable(df: pd.DataFrame, columns: Any) -> pd.DataFrame:
    """The rows none of whose ``columns`` holds a value that cannot be a key."""
    bad = _unhashable_rows(df, columns)
    return df if bad is None else df.loc[~bad].reset_index(drop=True)


class _Frozen:
    """A hashable stand-in for an unhashable value, equal to stand-ins of equal content."""

    __slots__ = ("key",)

    def __init__(self, x: object) -> None:
        self.key = _freeze(x)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Frozen) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)


def _freeze(x: object, depth: int = 0) -> Hashable:
    if is_hashable(x):
        return (0, x)
    if depth > _FREEZE_DEPTH:  # nested too deeply to compare by content: equal to itself
        return (4, type(x).__name__, id(x))
    d = depth + 1
    if isinstance(x, list | tuple):
        return (1, type(x).__name__, tuple(_freeze(v, d) for v in x))
    if isinstance(x, np.ndarray):
        return (1, "ndarray", tuple(_freeze(v, d) for v in x.tolist()))
    if isinstance(x, set):
        return (2, frozenset(_freeze(v, d) for v in x))
    if isinstance(x, dict):
        return (3, frozenset((_freeze(k, d), _freeze(v, d)) for k, v in x.items()))
    return (4, type(x).__name__, id(x))  # no content to compare: equal only to itself


_FREEZE_DEPTH = 20


def _hashable_series(s: pd.Series) -> pd.Series:
    """``s`` with every unhashable value replaced by its :class:`_Frozen` stand-in and, in a
    column of objects, every NULL-like value (None, NaN, ``pd.NA``, ``NaT``) by None: whole
    values are compared as the SQL engines compare them, where NULL is one value."""
    bad = _unhashable(s)
    na = s.isna().to_numpy() if s.dtype == object else None
    if bad is None and (na is None or not na.any()):
        return s
    objs = s.to_numpy(dtype=object).copy()
    if bad is not None:
        objs[bad] = [_Frozen(x) for x in objs[bad]]
    if na is not None:
        objs[na] = None
    return pd.Series(objs, index=s.index, dtype=object)


def _hashable_frame(df: pd.DataFrame, columns: Any = None) -> pd.DataFrame:
    """``df[columns]`` with every unhashable value replaced by its :class:`_Frozen` stand-in
    (the frame itself when there is none)."""
    cols = list(df.columns if columns is None else columns)
    out = df[cols]
    fixed = {}
    for i in range(len(cols)):
        s = out.iloc[:, i]
        h = _hashable_series(s)
        if h is not s:
            fixed[i] = h
    if not fixed:
        return out
    out = out.copy()
    for i, h in fixed.items():
        out.isetitem(i, h)
    return out


def _first_rows(df: pd.DataFrame) -> np.ndarray:
    """Whether each row is the first of its equal rows (unhashable values compared by
    content)."""
    return ~_hashable_frame(df).duplicated().to_numpy()


def _codes(df: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """Dense integer codes per distinct key (NULL keys form their own group)."""
    col = df[columns[0]]
    if (
        len(columns) == 1
        and len(col)
        and isinstance(col.dtype, np.dtype)
        and col.dtype.kind in "iu"
    ):
        # Integer ids (the usual privacy unit) in a range not much wider than the rows: each
        # id's rank among the ids present, with no hash table at all.
        v = col.to_numpy()
        lo, hi = int(v.min()), int(v.max())
        if hi - lo <= 4 * len(v) + 1024:
            offset = (v - lo).astype(np.intp, copy=False)
            present = np.zeros(hi - lo + 1, dtype=bool)
            present[offset] = True
            return (np.cumsum(present) - 1)[offset]
    codes, _ = pd.factorize(df[columns[0]], use_na_sentinel=False)
    # Several columns: pair the codes column by column (each pairing < n², so int64 holds it)
    # and re-factorize; a MultiIndex of tuples takes about ten times as long.
    for col in columns[1:]:
        nxt, uniques = pd.factorize(df[col], use_na_sentinel=False)
        codes, _ = pd.factorize(codes.astype(np.int64) * len(uniques) + nxt)
    return codes


def _rows_per_key(df: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """How many rows each distinct key of ``columns`` has (in no particular order), grouped
    as :func:`_codes` groups them."""
    return np.bincount(_codes(df, columns))


def _drop_null_keys(df: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """The rows none of whose ``columns`` is NULL-like (None, NaN, NA, NaT)."""
    keep = df[list(columns)].notna().all(axis=1).to_numpy()
    bad = _unhashable_rows(df, columns)
    if bad is not None:  # a value that cannot be a key identifies no one either
        keep = keep & ~bad
    return df if keep.all() else df.loc[keep].reset_index(drop=True)


def _truncation_mask(
    df: pd.DataFrame, columns: tuple[str, ...], limit: int, drop_null: bool
) -> np.ndarray:
    """Which rows a truncation to ``limit`` rows per key of ``columns`` keeps: per key, the
    rows of lowest priority (:mod:`.priorities`). Rows whose key cannot be hashed are no key's, and
    with ``drop_null`` rows whose key is NULL belong to no one: neither is kept.

    A mask instead of a copy: the kept rows are read later only in the columns a query
    uses. The priorities are those of the eligible rows alone (a row's priority depends on
    its own values and the salt only), so the rows kept are the same either way."""
    ok = np.ones(len(df), dtype=bool)
    if drop_null:
        ok &= df[list(columns)].notna().all(axis=1).to_numpy()
    bad = _unhashable_rows(df, columns)
    if bad is not None:
        ok &= ~bad
    mask = np.zeros(len(df), dtype=bool)
    if not ok.any():
        return mask
    if ok.all():
        keep = keep_lowest(_codes(df, columns), RowPriorities(df), limit)
    else:
        rows = np.flatnonzero(ok)
        keep = rows[
            keep_lowest(_codes(df.take(rows), columns), RowPriorities(df.take(rows)), limit)
        ]
    mask[keep] = True
    return mask


def _truncate_per_key(df: pd.DataFrame, columns: tuple[str, ...], limit: int) -> pd.DataFrame:
    """The rows of :func:`_truncation_mask` (a NULL key is one key), as a frame."""
    mask = _truncation_mask(df, columns, limit, drop_null=False)
    return df.loc[mask].reset_index(drop=True)


def _bound_groups(
    df: pd.DataFrame, unit: str, by: tuple[str, ...], max_groups: int, per_group: int | None
) -> pd.DataFrame:
    """Per ``unit``: the ``max_groups`` values of ``by`` of lowest salted-hash priority, then
    the ``per_group`` rows of lowest priority of each (all when None).

    A group's priority is the smallest salted hash of its rows' ``(unit, by)`` values (all
    equal but for the spelling of NULL), so it depends on the unit's own rows and the salt
    alone, as the truncation of :func:`_truncate_per_key` does for rows.
    """
    pairs = (unit, *by)
    df = _drop_unhashable(df, pairs)
    if len(df) == 0:
        return df
    codes = _codes(df, pairs)
    n_groups = int(codes.max()) + 1
    group_prio = np.full(n_groups, np.iinfo(np.uint64).max, dtype=np.uint64)
    # Every row of a group has the same (unit, by) values, so the same hash of them.
    np.minimum.at(group_prio, codes, row_hashes(df[list(pairs)]))
    group_unit = np.empty(n_groups, dtype=np.int64)
    group_unit[codes] = _codes(df, (unit,))
    kept = np.zeros(n_groups, dtype=bool)
    kept[keep_lowest(group_unit, group_prio, max_groups)] = True
    rows = kept[codes]
    if not rows.all():
        df, codes = df.loc[rows].reset_index(drop=True), codes[rows]
    if per_group is None or len(df) == 0:
        return df
    keep = keep_lowest(codes, RowPriorities(df), per_group)
    return df.take(keep).reset_index(drop=True)


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


class _PlanRunner(PlanVisitor[_Relation]):
    """Evaluates one plan; a node shared by several parents (``f.concat(f)``) runs once per
    salt scope (:mod:`pinqpy.plan.salts`: under a partition its random nodes draw the
    partition's salts)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog  # where the plan's tables are found
        self._memo: dict[tuple[str | None, int], tuple[PlanNode, _Relation]] = {}

    def visit(self, node: PlanNode) -> _Relation:
        slot = (salts.scope_token(), id(node))
        hit = self._memo.get(slot)
        if hit is not None and hit[0] is node:
            return hit[1]
        with salts.drawing(node, self.catalog):
            rel = node.accept(self)
        self._memo[slot] = (node, rel)
        return rel

    def visit_source(self, node: Source) -> _Relation:
        return _Relation(self.catalog.data(node.table))

    def visit_part_source(self, node: PartSource) -> _Relation:
        rel = self.visit(node.partition.parent)
        codes = _group_index(rel, Grouping(node.partition.key_columns, (node.key,)))
        return _Relation(rel.df, codes == 0)

    def visit_where(self, node: Where) -> _Relation:
        rel = self.visit(node.child)
        m = _mask(node.predicate, rel.df)
        return _Relation(rel.df, m if rel.mask is None else (rel.mask & m))

    def visit_select(self, node: Select) -> _Relation:
        child = self.visit(node.child)
        used = None
        if not node.keep_all and all(isinstance(e, Expr) for _, e in node.outputs):
            # Copy out of a where's mask only the columns the outputs read.
            names = set().union(*(e.columns() for _, e in node.outputs))  # type: ignore[union-attr]
            used = [c for c in child.df.columns if c in names]
        df = child.materialize(used)
        new = {name: _value(e, df) for name, e in node.outputs}
        if node.keep_all:
            return _Relation(df.assign(**new))
        return _Relation(pd.DataFrame(new, index=df.index))

    def visit_distinct(self, node: Distinct) -> _Relation:
        df = self.visit(node.child).materialize()[list(node.columns)]
        if on_unit(node.child, node.columns):  # the unit's ids: a NULL id is no one's
            df = _drop_null_keys(df, node.columns)
        return _Relation(df.loc[_first_rows(df)].reset_index(drop=True))

    def visit_explode(self, node: Explode) -> _Relation:
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
        return _Relation(out.reset_index(drop=True))

    def visit_group_by(self, node: GroupBy) -> _Relation:
        df = self.visit(node.child).materialize()
        if node.by_unit:  # a row whose unit is NULL belongs to no known person
            df = _drop_null_keys(df, node.keys)
        df = _drop_unhashable(df, node.keys)  # a value that cannot be a key forms no group
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
                work[tmp] = _hashable_series(arg).to_numpy()
                named[name] = (tmp, "nunique" if call.distinct else "count")
            elif func in ("VARIANCE", "STDDEV"):
                work[tmp] = _numeric(arg)
                named[name] = (tmp, "var" if func == "VARIANCE" else "std")
            elif func in _SQL_AGGS:
                work[tmp] = _numeric(arg)
                named[name] = (tmp, _SQL_AGGS[func])
            else:
                raise PinqError(f"{func} cannot be used inside groupby().agg()")
        grouped = work.groupby(keys, dropna=False, sort=False)
        out = grouped.agg(**named).reset_index() if named else grouped.size().reset_index()
        if not named:
            out = out[keys]
        return _Relation(out)

    def visit_join(self, node: Join) -> _Relation:
        left = self.visit(node.left).materialize()
        right = self.visit(node.right).materialize()
        # A key that cannot be hashed matches nothing.
        left, right = _drop_unhashable(left, node.on), _drop_unhashable(right, node.on)
        if node.bounds is not None:
            left = _truncate_per_key(left, node.on, node.bounds[0])
            right = _truncate_per_key(right, node.on, node.bounds[1])
        out = left.merge(right, on=list(node.on), how="inner", suffixes=("", "_right"))
        return _Relation(out)

    def visit_public_join(self, node: PublicJoin) -> _Relation:
        df = self.visit(node.child).materialize()
        public = self.catalog.public_data(node.public)
        bad = _unhashable_rows(df, node.on)  # a key that cannot be hashed matches nothing
        rest = None
        if bad is not None:
            df, rest = df.loc[~bad], df.loc[bad]
        out = df.merge(public, on=list(node.on), how=node.how, suffixes=("", "_public"))
        if rest is not None and node.how == "left":
            unmatched = rest.merge(
                public.iloc[:0], on=list(node.on), how="left", suffixes=("", "_public")
            )
            out = pd.concat([out, unmatched], ignore_index=True)
        return _Relation(out.reset_index(drop=True))

    def visit_set_op(self, node: SetOp) -> _Relation:
        left = self.visit(node.left).materialize()
        right = self.visit(node.right).materialize()
        if node.kind == "concat":
            return _Relation(pd.concat([left, right], ignore_index=True))
        if node.kind == "union":
            both = pd.concat([left, right], ignore_index=True)
            return _Relation(both.loc[_first_rows(both)].reset_index(drop=True))
        lu = left.loc[_first_rows(left)].reset_index(drop=True)
        ru = right.loc[_first_rows(right)]
        cols = list(left.columns)
        # Compared through hashable stand-ins; the rows kept are the left side's own.
        hl, hr = _hashable_frame(lu, cols), _hashable_frame(ru, cols)
        merged = hl.merge(hr, on=cols, how="left", indicator="__pinq_side")
        in_right = (merged["__pinq_side"] == "both").to_numpy()
        keep = in_right if node.kind == "intersect" else ~in_right
        return _Relation(lu.loc[keep].reset_index(drop=True))

    def visit_bound_contributions(self, node: BoundContributions) -> _Relation:
        # A row whose unit is NULL belongs to no known person: it is dropped.
        df = self.visit(node.child).materialize()
        return _Relation(df, _truncation_mask(df, (node.unit,), node.max_rows, drop_null=True))

    def visit_bound_groups(self, node: BoundGroups) -> _Relation:
        # As bound_contributions: a row whose unit is NULL belongs to no known person.
        df = _drop_null_keys(self.visit(node.child).materialize(), (node.unit,))
        return _Relation(
            _bound_groups(df, node.unit, node.by, node.max_groups, node.max_rows_per_group)
        )

    def visit_bound_degree(self, node: BoundDegree) -> _Relation:
        # A NULL key is one key, as in a bounded join's truncation; but a cap on exactly the
        # unit drops the rows of no known person, as bound_contributions does.
        df = self.visit(node.child).materialize()
        drop = on_unit(node.child, node.columns)
        return _Relation(df, _truncation_mask(df, node.columns, node.max_rows, drop_null=drop))


def _has_group_index(rel: _Relation, grouping: Grouping) -> bool:
    memo = batch_memo()
    return memo is not None and ("pandas-codes", id(rel), grouping) in memo


def _group_index(rel: _Relation, grouping: Grouping | None) -> np.ndarray:
    """Per row: the position of its key in ``grouping.keys``, or -1 (not counted).

    Kept in the current batch, so a query's aggregates over one grouping look keys up once.
    """
    memo = batch_memo()
    slot = ("pandas-codes", id(rel), grouping)
    if memo is not None and slot in memo:
        return memo[slot][1]  # type: ignore[no-any-return]
    n = len(rel.df)
    if grouping is None:
        codes = np.zeros(n, dtype=np.int64)
    elif len(grouping.columns) == 1:
        codes = _key_positions(rel.df[grouping.columns[0]], grouping.keys)
    else:
        codes = _multi_key_positions(rel.df, grouping)
    if rel.mask is not None:
        codes = np.where(rel.mask, codes, -1)
    if memo is not None:
        memo[slot] = (rel, codes)  # holding rel keeps its id from being reused
    return codes


def _canonical_keys(keys: tuple[Hashable, ...], kind: str) -> tuple[dict[Any, int], int]:
    """The listed keys in their canonical spelling for a column of ``kind``: the non-NULL ones
    mapped to their first position in ``keys``, and the position of the NULL key (-1 if
    none). Keys no value of the column can equal are left out."""
    plain: dict[Any, int] = {}
    null_at = -1
    for i, key in enumerate(keys):
        c = canonical_key(key, kind)
        if c is None:
            null_at = i if null_at < 0 else null_at
        elif c is not NO_MATCH:
            plain.setdefault(c, i)
    return plain, null_at


# Column kinds whose values pandas looks up in an index of the canonical keys exactly as the
# canonical keys compare (-0.0 finds 0.0); other columns look each distinct value up.
_INDEXED_KINDS = frozenset({"int", "float", "bool", "str", "datetime"})


def _unique_positions(uniques: Any, kind: str, plain: dict[Any, int], obj: bool) -> np.ndarray:
    """Per distinct value of a column (NULL excluded): its key's position, or -1."""
    if obj or kind not in _INDEXED_KINDS:
        # Untyped (object) values compare as Python does (1 == 1.0 == True): canonical
        # spellings are looked up one distinct value at a time.
        return np.array([plain.get(canonical_key(u, kind), -1) for u in uniques], dtype=np.int64)
    if not plain:
        return np.full(len(uniques), -1, dtype=np.int64)
    where = np.array([*plain.values(), -1], dtype=np.int64)
    return where[pd.Index(list(plain)).get_indexer(uniques)]


def _key_positions(col: pd.Series, keys: tuple[Hashable, ...]) -> np.ndarray:
    """Per value of ``col``: its position in ``keys``, or -1. A key matches the values equal
    to it under the column's type (``True`` and ``1.0`` find 1 in an integer column); a NULL
    key (None, NaN, NA, NaT) matches every NULL value, whatever its spelling."""
    kind = series_type(col)
    plain, null_at = _canonical_keys(keys, kind)
    if isinstance(col.dtype, pd.CategoricalDtype):
        # The codes are the factorization already: look each category up once. Code -1
        # (NULL) picks the appended NULL key's position.
        cats = col.dtype.categories
        table = _unique_positions(cats, kind, plain, cats.dtype == object)
        return np.append(table, null_at)[col.cat.codes.to_numpy()]
    if kind == "str" and _is_arrow_text(col.dtype):
        return _arrow_key_positions(col, plain, null_at)
    # Look up each distinct value once: much faster than a lookup per row (string columns
    # above all), with the same matching, since every row shares its distinct value's answer.
    try:
        row_codes, uniques = pd.factorize(col)  # every NULL-like value is code -1
    except (TypeError, ValueError):
        uniques = None
    if uniques is None or not _all_hashable(uniques):
        bad = _unhashable(col)
        if bad is not None:  # a value that cannot be hashed matches no key, not even NULL
            return np.where(bad, -1, _key_positions(col.where(~bad, None), keys))
        row_codes, uniques = pd.factorize(col)
    table = _unique_positions(uniques, kind, plain, col.dtype == object)
    return np.append(table, null_at)[row_codes]


def _is_arrow_text(dtype: Any) -> bool:
    """Text stored as Arrow strings: pandas 3's default ``str`` or ``string[pyarrow]``."""
    return isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow"


def _arrow_key_positions(col: pd.Series, plain: dict[Any, int], null_at: int) -> np.ndarray:
    """:func:`_key_positions` for Arrow text: Arrow looks every row up among the listed
    (canonical, exact) strings, which is faster than factorizing the column first."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = np.full(len(col), -1, dtype=np.int64)
    if plain:
        text = col.array.__arrow_array__()
        found = pc.index_in(text, value_set=pa.array(list(plain), type=text.type))
        # Unlisted and NULL values find nothing (NULL); they take the slot past the keys.
        where = np.array([*plain.values(), -1], dtype=np.int64)
        out = where[pc.fill_null(found, len(plain)).to_numpy()]
    if null_at >= 0:
        out[col.isna().to_numpy()] = null_at
    return out


def _multi_key_positions(df: pd.DataFrame, grouping: Grouping) -> np.ndarray:
    """:func:`_key_positions` for keys of several columns: each column's values are matched
    against that column's key values, then the rows' tuples of matches against the keys'."""
    n_keys = len(grouping.keys)
    key_codes = np.zeros((n_keys, len(grouping.columns)), dtype=np.int64)
    usable = np.ones(n_keys, dtype=bool)
    row_codes = []
    for j, c in enumerate(grouping.columns):
        col = df[c]
        kind = series_type(col)
        level: dict[Any, int] = {}
        for i, key in enumerate(grouping.keys):
            v = canonical_key(key[j], kind)  # type: ignore[index]
            if v is NO_MATCH:
                usable[i] = False
                continue
            key_codes[i, j] = level.setdefault(v, len(level))
        row_codes.append(_key_positions(col, tuple(level)))
    first: dict[tuple[int, ...], int] = {}
    for i in np.flatnonzero(usable):
        first.setdefault(tuple(key_codes[i].tolist()), int(i))
    if not first:
        return np.full(len(df), -1, dtype=np.int64)
    index = pd.MultiIndex.from_tuples(list(first))
    rows = pd.MultiIndex.from_arrays(row_codes)
    where = np.array([*first.values(), -1], dtype=np.int64)
    out = where[index.get_indexer(rows)]
    unmatched = np.zeros(len(df), dtype=bool)
    for codes in row_codes:
        unmatched |= codes < 0
    out[unmatched] = -1
    return out


def _key_counts(col: pd.Series, keys: tuple[Hashable, ...]) -> np.ndarray | None:
    """How many values of ``col`` equal each key (a NULL key counts NULL values), from one
    hash count of the column and a lookup of its few distinct values among the keys: the
    work of ``value_counts``, with no per-row key positions. Matching is that of
    :func:`_key_positions` (each distinct value answers for all its rows). None when the
    column holds a value that cannot be hashed (the caller then takes the positions path)."""
    kind = series_type(col)
    plain, null_at = _canonical_keys(keys, kind)
    out = np.zeros(len(keys), dtype=np.int64)
    if plain:
        sizes = _hash_counts(col, dropna=True)  # NULL excluded
        if sizes is None:
            return None
        pos = _unique_positions(sizes.index, kind, plain, col.dtype == object)
        hit = pos >= 0
        # Several distinct values can find one key (1 and 1.0 in an untyped column).
        np.add.at(out, pos[hit], sizes.to_numpy(dtype=np.int64)[hit])
    if null_at >= 0:
        out[null_at] = int(col.isna().sum())
    return out


def _n_groups(grouping: Grouping | None) -> int:
    return 1 if grouping is None else len(grouping.keys)


def _per_group(codes: np.ndarray, k: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Row counts (or sums of ``weights``) per group position; position ``k`` is dropped."""
    out = np.bincount(codes, weights=weights, minlength=k + 1)[:k]
    return out if weights is not None else out.astype(np.int64)


class PandasExecutor(Executor):
    """The default engine: plans over pandas DataFrames."""

    def relation(self, plan: PlanNode) -> _Relation:
        memo = batch_memo()
        if memo is None:
            return _PlanRunner(self.catalog).visit(plan)
        # One runner per batch: a relation shared by a query's aggregates is evaluated once.
        runner = memo.get("pandas-runner")
        if runner is None:
            runner = memo["pandas-runner"] = _PlanRunner(self.catalog)
        else:
            runner.catalog = runner.catalog.merge(self.catalog)
        return runner.visit(plan)  # type: ignore[no-any-return]

    def count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        if grouping is None:
            shortcut = truncated_count(plan)
            if shortcut is not None:
                return np.array([self._truncated_count(shortcut)], dtype=np.int64)
        rel = self.relation(plan)
        if grouping is None:
            return np.array([rel.row_count()], dtype=np.int64)
        if len(grouping.columns) == 1 and not _has_group_index(rel, grouping):
            # One key column: a hash count of the column, then the keys looked up among its
            # few distinct values, is fastest for every column type (numbers, Arrow and
            # object strings, categoricals). Positions already found for the query's other
            # aggregates are reused instead.
            col = rel.df[grouping.columns[0]]
            got = _key_counts(col if rel.mask is None else col[rel.mask], grouping.keys)
            if got is not None:
                return got
        codes = _group_index(rel, grouping)
        k = _n_groups(grouping)
        return _per_group(np.where(codes < 0, k, codes), k)

    def _truncated_count(self, t: TruncatedCount) -> int:
        """The row count of the truncation ``t`` describes, as ``Σ min(rows per key, limit)``
        over its child, without choosing rows: :mod:`pinqpy.plan.truncation` derives why the
        released count's distribution is exactly that of counting the chosen rows. Keys
        follow the truncation's own rules (:func:`_truncate_per_key`): NULL keys dropped when
        ``t.drop_null`` and otherwise one key, values that cannot be hashed dropped."""
        df = self.relation(t.child).materialize(list(t.columns))
        if t.drop_null:
            df = _drop_null_keys(df, t.columns)
        df = _drop_unhashable(df, t.columns)
        if len(df) == 0:
            return 0
        return int(np.minimum(_rows_per_key(df, t.columns), t.limit).sum())

    def _values(
        self, rel: _Relation, grouping: Grouping | None, value: Expr | PyFunc
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Numeric values, and each row's group position for :func:`_per_group`.

        For one group (``grouping`` None): the values of counted rows (not NULL, inside any
        ``where``) and None. Otherwise every row's value, and positions where ``K`` (one past
        the last group) marks a row not counted, so nothing is copied out by a mask.
        """
        vals = _numbers(rel, value)
        # Integer and boolean columns have no NULL to drop: skip the NaN scan.
        nan = np.isnan(vals) if vals.dtype.kind == "f" else None
        if grouping is None:
            keep = rel.mask
            if nan is not None and nan.any():
                keep = ~nan if keep is None else keep & ~nan
            return (vals if keep is None else vals[keep]), None
        codes = _group_index(rel, grouping)
        skip = codes < 0 if nan is None else (codes < 0) | nan
        return vals, np.where(skip, _n_groups(grouping), codes)

    def clamped_sum(
        self, plan: PlanNode, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
    ) -> tuple[np.ndarray, np.ndarray]:
        rel = self.relation(plan)
        exact = _integer_sum(rel, grouping, value, lo, hi)
        if exact is not None:
            return exact
        if grouping is not None:
            grouped = _integer_group_sums(rel, grouping, value, lo, hi)
            if grouped is not None:
                return grouped
        # Summed exactly on the SUM's fixed-point grid (pinqpy.core.lattice.SumGrid), in one
        # blocked pass (pinqpy.core.grid_sums): a float sum of 10**8 values can err by the
        # sensitivity itself. The clamp also sends +-inf to the bounds.
        grid = SumGrid.of(lo, hi)
        if grouping is None:
            total, n = grid_sum(grid, _numbers(rel, value), lo, hi, rel.mask)
            return np.array([grid.total(total)]), np.array([n], dtype=np.int64)
        vals, codes = self._values(rel, grouping, value)
        k = _n_groups(grouping)
        totals = grid_group_sums(grid, vals, lo, hi, codes, k)
        return np.array([grid.total(t) for t in totals]), _per_group(codes, k)

    def lattice_sums(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        lo: float,
        hi: float,
        squares: bool = False,
    ) -> LatticeSums:
        lat = Lattice.of(lo, hi)
        rel = self.relation(plan)
        if not squares and lat.shift <= 0:
            # Integer values and bounds on a lattice of step 2**shift <= 1: x·2**-shift is an
            # integer, so rounding is the identity and d = (x - lo)·2**-shift exactly; the
            # index sum is that multiple of the exact integer sum of the clamped values.
            got = _integer_total(rel, grouping, value, lo, hi)
            if got is not None:
                total, n = got
                return [(total - int(lo) * n) << -lat.shift], [0], np.array([n], dtype=np.int64)
        if grouping is None:
            s1, s2, n = lattice_sums(lat, _numbers(rel, value), rel.mask, squares)
            return [s1], [s2], np.array([n], dtype=np.int64)
        # Rows not counted (NULL, unlisted keys) have the position k, which is dropped.
        vals, codes = self._values(rel, grouping, value)
        k = _n_groups(grouping)
        sums, squared = lattice_group_sums(lat, vals, codes, k, squares)
        return sums, squared, _per_group(codes, k)

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
            raw = _numeric(_value(value, rel.df))
            codes = None if grouping is None and rel.mask is None else _group_index(rel, grouping)
            flat = grid_bucket_counts(raw, codes, _n_groups(grouping), grid)
            return flat[:, 0::2].astype(np.int64), flat[:, 1::2].astype(np.int64)
        vals, codes = self._values(self.relation(plan), grouping, value)
        m = len(cand)
        k = _n_groups(grouping)
        if codes is None:
            codes = np.zeros(len(vals), dtype=np.int64)
        else:  # drop the rows not counted
            vals, codes = vals[codes < k], codes[codes < k]
        clipped = _clip(vals, cand[0], cand[-1])
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
            sizes = _hash_counts(col, dropna=False)
        if sizes is not None:
            n = sizes.to_numpy(dtype=np.int64)
            # A categorical lists its unused categories too: a key no row holds is never a
            # candidate.
            found = n > 0
            return canonical_key_counts(list(sizes.index[found]), n[found], [series_type(col)])
        df = _drop_unhashable(rel.materialize(list(columns)), columns)
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
        codes = _group_index(rel, grouping)
        col = _value(value, rel.df)
        bad = _unhashable(col)  # a value that cannot be hashed is no candidate
        if bad is not None:
            col = col.where(~bad, None)
        which = pd.Index(list(candidates)).get_indexer(col).astype(np.int64, copy=False)
        if bad is not None:
            which[bad] = -1
        ok = (codes >= 0) & (which >= 0)
        n = len(candidates)
        k = _n_groups(grouping)
        flat = np.bincount(codes[ok] * n + which[ok], minlength=k * n)
        return flat.reshape(k, n).astype(np.int64)

    def rows(self, plan: PlanNode) -> pd.DataFrame:
        """The plan's rows. For tests of stability only; never reachable from the public API."""
        return self.relation(plan).materialize()
