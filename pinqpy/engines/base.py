"""What an engine must provide: the exact aggregates that mechanisms turn into noisy answers.

An executor runs a plan inside its engine and returns only small exact aggregates: per-group
counts, clamped sums, bucket counts for quantiles, candidate counts for argmax. Noise is added
afterwards in Python by :mod:`pinqpy.noise.mechanisms`, identically for every engine. An executor
is called only after the query's charge has been accepted.

``grouping`` is ``None`` for a single group (arrays of length 1) or a :class:`Grouping` of
public keys, in which case rows whose key is not listed are ignored and a key with no rows
gets zeros.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import pandas as pd

from pinqpy.expr.ast import Expr
from pinqpy.expr.types import valid_text
from pinqpy.plan.batch import batch_memo
from pinqpy.plan.catalog import Catalog
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.keys import NO_MATCH, TYPED_KINDS, canonical_key, is_null_key
from pinqpy.plan.nodes import PlanNode, PyFunc
from pinqpy.plan.truncation import TruncatedCount, truncated_count

__all__ = [
    "NO_MATCH",
    "Executor",
    "KeySplit",
    "LatticeSums",
    "LightDraw",
    "Read",
    "canonical_key",
    "canonical_key_counts",
    "canonical_light_keys",
    "column_key",
    "column_key_rows",
    "is_hashable",
    "is_null_key",
    "key_sort_key",
    "prefetched",
    "split_in_memory",
]

#: Per group: exact ``Σd``, exact ``Σd²`` (zeros unless asked for), the count (``int64``).
LatticeSums = tuple[list[int], list[int], np.ndarray]


@dataclass(frozen=True, eq=False)
class Read:
    """One exact aggregate a query will read, described so that an engine can compute several
    of them together (:meth:`Executor.prefetch`): ``kind`` is "count" (:meth:`Executor.count`),
    "sum" (:meth:`Executor.clamped_sum`), "mean" or "moments" (:meth:`Executor.lattice_sums`
    without or with squares).
    Compared by identity, as the objects are the ones the read itself will pass."""

    executor: Executor
    plan: PlanNode
    kind: str
    value: Expr | PyFunc | None = None
    lo: float = 0.0
    hi: float = 0.0

    @property
    def clamp(self) -> tuple[Expr | PyFunc, float, float]:
        """A sum's or mean's value and bounds (never asked of a count)."""
        assert self.value is not None, "a count has no value"
        return self.value, self.lo, self.hi


def _read_slot(
    kind: str, plan: PlanNode, grouping: Grouping | None, value: object, lo: float, hi: float
) -> tuple[Any, ...]:
    return ("read", kind, id(plan), id(grouping), id(value), lo, hi)


def _store_read(read: Read, grouping: Grouping | None, result: Any) -> None:
    """Keep a prefetched result for the rest of the batch (a no-op outside one)."""
    memo = batch_memo()
    if memo is not None:
        slot = _read_slot(read.kind, read.plan, grouping, read.value, read.lo, read.hi)
        memo[slot] = (read.plan, grouping, read.value, result)


def prefetched(
    kind: str,
    plan: PlanNode,
    grouping: Grouping | None,
    value: object = None,
    lo: float = 0.0,
    hi: float = 0.0,
) -> Any:
    """The result :func:`_store_read` kept for this read in the current batch, or None."""
    memo = batch_memo()
    if memo is None:
        return None
    hit = memo.get(_read_slot(kind, plan, grouping, value, lo, hi))
    if hit is None or hit[0] is not plan or hit[1] is not grouping or hit[2] is not value:
        return None
    return hit[3]


class Executor(ABC):
    """Exact aggregates over a plan, computed inside one engine.

    Plans name their tables; an executor finds their data in its ``catalog``. The registry
    keeps one executor per engine instance (a DuckDB connection, a Spark session) and hands
    out :meth:`bound` twins of it, one per catalog, that share its state.
    """

    catalog: Catalog = Catalog()

    def bound(self, catalog: Catalog) -> Self:
        """This executor reading tables through ``catalog``: a twin sharing every piece of
        engine state (connection, registered tables, caches), which are containers made
        once in ``__init__``, with its own catalog."""
        twin = copy.copy(self)
        twin.catalog = catalog
        return twin

    def validate(  # noqa: B027 - optional hook, most engines accept everything
        self, plan: PlanNode, value: Expr | PyFunc | None = None, numeric: bool = False
    ) -> None:
        """Raise a PinqError now, before anything is charged, if this engine cannot run
        ``plan`` or aggregate ``value`` (as a number when ``numeric``). Reads no data.

        The pandas engine runs everything the expression checker accepts, so the default
        accepts everything.
        """

    def prefetch(self, reads: Sequence[Read], grouping: Grouping | None) -> None:
        """Called after the charge with the reads a query is about to make, when there are
        several. The reads of each plan, two or more, go to :meth:`read_together`; what it
        computes is kept with :func:`_store_read`, and the read methods return it through
        :func:`prefetched` for the rest of the batch."""
        by_plan: dict[int, list[Read]] = {}
        for r in reads:
            by_plan.setdefault(id(r.plan), []).append(r)
        for rs in by_plan.values():
            if len(rs) < 2:
                continue
            got = self.read_together(rs[0].plan, grouping, rs)
            if got is not None:
                for r, result in zip(rs, got, strict=True):
                    _store_read(r, grouping, result)

    def read_together(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read]
    ) -> list[Any] | None:
        """Each of ``reads`` (all of ``plan``) as its read method would return it, computed
        together (one scan for a SQL query's ``COUNT(*)`` and ``AVG(x)``), or None to read
        them one by one. The default: None (pandas evaluates a plan once per batch anyway)."""
        return None

    def rows(self, plan: PlanNode) -> pd.DataFrame:
        """The plan's rows as pandas. For tests of stability only: never reachable from the
        public API, which releases nothing but noisy aggregates."""
        raise NotImplementedError

    def count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        """Rows per group, shape (K,).

        A count of a truncation (``bound_contributions`` and the like, with no grouping) is
        read as ``Σ min(rows per unit, limit)`` without choosing rows
        (:meth:`_truncated_count`): :mod:`pinqpy.plan.truncation` derives why its released
        distribution is that of counting the chosen rows."""
        hit = prefetched("count", plan, grouping)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        tc = truncated_count(plan) if grouping is None else None
        if tc is not None:
            return np.array([self._truncated_count(tc)], dtype=np.int64)
        return self._count(plan, grouping)

    @abstractmethod
    def _count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        """:meth:`count` when no batch read holds it and it is not a truncation's count."""

    @abstractmethod
    def _truncated_count(self, tc: TruncatedCount) -> int:
        """``Σ min(rows per key, tc.limit)`` over ``tc.child``, keys by the truncation's own
        rules (NULL keys dropped when ``tc.drop_null``)."""

    def clamped_sum(
        self, plan: PlanNode, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per group: the sum of non-NULL values clamped into [lo, hi], and how many there were.

        Summed exactly (integer columns with integer bounds as integers, other values on
        :class:`~pinqpy.core.lattice.SumGrid`'s fixed point, truncated toward zero, which never
        increases a magnitude) and converted to a double once, within 2 ulps: no float
        summation error, which for 10**8 rows can reach the sensitivity itself."""
        hit = prefetched("sum", plan, grouping, value, lo, hi)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        return self._clamped_sum(Read(self, plan, "sum", value, lo, hi), grouping)

    @abstractmethod
    def _clamped_sum(self, read: Read, grouping: Grouping | None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`clamped_sum` of ``read`` (kind "sum") when no batch read holds it."""

    def lattice_sums(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        lo: float,
        hi: float,
        squares: bool = False,
    ) -> LatticeSums:
        """Per group, exactly: ``Σd`` and (with ``squares``, else zeros) ``Σd²`` of the
        lattice indices ``d`` of the non-NULL values clamped into [lo, hi], as Python ints,
        and their count.

        ``d`` is :class:`~pinqpy.core.lattice.Lattice` ``.of(lo, hi)``'s per-row map, computed
        identically by every engine, and the sums are integer sums that cannot round or
        overflow (see :mod:`pinqpy.core.lattice`). Means and variances are built on these only:
        a float sum of values centred afterwards errs by far more than the sensitivity for
        bounds far from zero.
        """
        kind = "moments" if squares else "mean"
        hit = prefetched(kind, plan, grouping, value, lo, hi)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        return self._lattice_sums(Read(self, plan, kind, value, lo, hi), grouping)

    @abstractmethod
    def _lattice_sums(self, read: Read, grouping: Grouping | None) -> LatticeSums:
        """:meth:`lattice_sums` of ``read`` (kind "mean", or "moments" for the squares too)
        when no batch read holds it."""

    @abstractmethod
    def buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per group, values clamped to the candidates' range: ``eq[k, j] = #{x == c_j}`` and
        ``gap[k, j] = #{c_j < x < c_j+1}``; shapes (K, m) and (K, m - 1)."""

    @abstractmethod
    def key_counts(
        self, plan: PlanNode, columns: tuple[str, ...]
    ) -> tuple[list[Hashable], np.ndarray]:
        """The distinct keys of ``columns`` that occur in the plan's rows, and their row
        counts. Private: only for key selection, which releases a noisy subset."""

    def split_key_counts(
        self, plan: PlanNode, columns: tuple[str, ...], heavy_from: int, draw: LightDraw
    ) -> KeySplit:
        """The keys of ``columns`` split at ``heavy_from`` rows (:class:`KeySplit`): the
        light keys' noise is drawn by ``draw`` from how many keys have each count, and only
        the light keys it picks are read. Private: only for key selection. This default
        reads every key (:meth:`key_counts`); the SQL engines split in the engine
        (:mod:`pinqpy.engines.sqlgen.keycounts`), so their memory is bounded by the heavy
        and the picked keys."""
        keys, counts = self.key_counts(plan, columns)
        return split_in_memory(keys, counts, heavy_from, draw)

    @abstractmethod
    def candidate_counts(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: tuple[Hashable, ...],
    ) -> np.ndarray:
        """Per group, how many rows have each candidate value; shape (K, len(candidates))."""


# -- keys -------------------------------------------------------------------------------------
def column_key(v: object, col_kind: str) -> object:
    """A public key value as a SQL engine's column of ``col_kind`` spells it, to match rows
    against: :func:`canonical_key` for the typed kinds; for the others (lists, structs), None
    for a NULL-like key and :data:`NO_MATCH` for any other, as no row can equal it."""
    if col_kind in TYPED_KINDS:
        return canonical_key(v, col_kind)
    return None if is_null_key(v) else NO_MATCH


def _plain_key_rows(
    kind: str, keys: Sequence[Hashable]
) -> list[tuple[int, tuple[Any, ...]]] | None:
    """:func:`column_key_rows` for exact ``str`` keys of a text column or exact ``int`` keys of
    an integer one, all distinct (the usual partition), without a call per key; None for any
    other list. Their spellings are ``valid_text(k)`` and ``k`` (:func:`canonical_key`)."""
    if kind == "str" and all(type(k) is str for k in keys):
        vals = [valid_text(k) for k in keys]  # type: ignore[arg-type]
    elif kind == "int" and all(type(k) is int for k in keys):
        vals = list(keys)
    else:
        return None
    if len(set(vals)) != len(vals):
        return None  # repeats keep only their first: the general path
    return [(i, (v,)) for i, v in enumerate(vals)]


def column_key_rows(
    kinds: Sequence[str], keys: Sequence[Hashable], single: bool
) -> list[tuple[int, tuple[Any, ...]]]:
    """The listed keys of a grouping as (position in the list, values spelt as the columns
    of ``kinds`` spell them, None for NULL); a key no row can match is left out (it counts
    0), as is a key equal to an earlier one under the columns' types (its rows count for the
    first), so that no row is ever counted in two groups."""
    plain = _plain_key_rows(kinds[0], keys) if single else None
    if plain is not None:
        return plain
    rows: list[tuple[int, tuple[Any, ...]]] = []
    seen: set[tuple[Any, ...]] = set()
    for i, key in enumerate(keys):
        parts = (key,) if single else tuple(key)  # type: ignore[arg-type]
        vals = tuple(column_key(v, k) for v, k in zip(parts, kinds, strict=True))
        if any(v is NO_MATCH for v in vals) or vals in seen:
            continue
        seen.add(vals)
        rows.append((i, vals))
    return rows


def _sort_key(v: object) -> tuple[Any, ...]:
    """Orders canonical key values: numbers, then text, then datetimes, then the rest (by
    their text), NULL last; so the order depends on the keys alone, not on the rows."""
    if v is None:
        return (4, 0)
    if isinstance(v, bool | int | float):
        return (0, v)
    if isinstance(v, str):
        return (1, v)
    if isinstance(v, pd.Timestamp):
        # Compared as Timestamps: .value (nanoseconds) overflows beyond 1677 to 2262.
        return (2, v)
    return (3, repr(v))


def is_hashable(v: object) -> bool:
    """Whether ``v`` can be a key (hashing it succeeds; any failure says no)."""
    try:
        hash(v)
    except Exception:
        return False
    return True


def canonical_key_counts(
    keys: Sequence[Hashable], counts: np.ndarray, kinds: Sequence[str]
) -> tuple[list[Hashable], np.ndarray]:
    """The keys an engine found (scalars for one column, tuples for several, columns of
    ``kinds``) in their canonical spelling (:func:`canonical_key`), with the counts of keys
    that are equal under it merged, in an order that depends on the keys alone.

    Every engine's private key selection goes through this, so what is released never
    tells which row came first (``-0.0`` or ``0.0``, ``1`` or ``True``, ``None`` or NaN).

    >>> canonical_key_counts([-0.0, 0.0, float("nan"), None], np.array([1, 2, 3, 4]), ["float"])
    ([0.0, None], array([3, 7]))
    """
    single = len(kinds) == 1
    if single and kinds[0] == "int":
        plain = _plain_int_key_counts(keys, counts)
        if plain is not None:
            return plain
    merged: dict[Any, int] = {}
    for key, n in zip(keys, np.asarray(counts).tolist(), strict=True):
        canon = _canonical_parts(key, kinds)
        if canon is not None:
            merged[canon] = merged.get(canon, 0) + int(n)
    order = sorted(merged, key=key_sort_key)
    out: list[Hashable] = [t[0] if single else t for t in order]
    return out, np.array([merged[t] for t in order], dtype=np.int64)


def _plain_int_key_counts(
    keys: Sequence[Hashable], counts: np.ndarray
) -> tuple[list[Hashable], np.ndarray] | None:
    """:func:`canonical_key_counts` of the keys of an integer column given as a numpy or
    pandas array of integers (no NULL can be among them), without a call per key; None for
    any other keys. An integer's canonical spelling is the Python int of its value, and
    keys sort by value: ``np.unique`` gives both, and merges equal keys."""
    dtype = getattr(keys, "dtype", None)
    # A numpy dtype only: pandas' nullable and Arrow integer types can hold NULL.
    if not isinstance(keys, np.ndarray | pd.Index) or not isinstance(dtype, np.dtype):
        return None
    if dtype.kind not in "iu":
        return None
    values, where = np.unique(np.asarray(keys), return_inverse=True)
    merged = np.zeros(len(values), dtype=np.int64)
    np.add.at(merged, where.ravel(), np.asarray(counts, dtype=np.int64))
    return values.tolist(), merged


def _canonical_parts(key: Hashable, kinds: Sequence[str]) -> tuple[Any, ...] | None:
    """A key's values in their canonical spelling, or None if it is no key."""
    parts = (key,) if len(kinds) == 1 else tuple(key)  # type: ignore[arg-type]
    if not all(is_hashable(v) for v in parts):
        # A value that cannot be hashed (a list) is no key, as the pandas engine drops
        # it: decided per key from its type alone, and never a failure after the charge.
        return None
    canon = tuple(canonical_key(v, k) for v, k in zip(parts, kinds, strict=True))
    # A value of the column cannot fail to match its own column's type; if an engine
    # gave one anyway it is kept as untyped rather than lost.
    return tuple(
        canonical_key(v, "any") if c is NO_MATCH else c for c, v in zip(canon, parts, strict=True)
    )


def key_sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """The order of released keys (canonical values as a tuple): of the keys alone."""
    return tuple(_sort_key(v) for v in key)


def canonical_light_keys(
    keys: Sequence[Hashable], noisy: Sequence[int], kinds: Sequence[str]
) -> tuple[list[Hashable], np.ndarray]:
    """Light keys an engine read (each its own key, never equal to another under the
    columns' types: :mod:`pinqpy.engines.sqlgen.keycounts`) in their canonical spelling,
    with their noisy counts; a key that cannot be hashed is dropped, as everywhere."""
    out: list[Hashable] = []
    values: list[int] = []
    for key, y in zip(keys, noisy, strict=True):
        canon = _canonical_parts(key, kinds)
        if canon is not None:
            out.append(canon[0] if len(kinds) == 1 else canon)
            values.append(int(y))
    return out, np.array(values, dtype=np.int64)


#: Draws the noise of light keys (:mod:`pinqpy.noise.keyselect`): given ``[(count c, how
#: many keys have count c)]`` for the counts below the split, the drawn positions that pass,
#: as ``(c, position from 1 among the keys of count c, noisy count)``.
LightDraw = Callable[[list[tuple[int, int]]], list[tuple[int, int, int]]]


@dataclass(frozen=True)
class KeySplit:
    """Key counts split for key selection: every heavy key (count at least the split, or
    one an engine could not group exactly) with its exact count, to be noised and
    thresholded; and the light keys already drawn to pass, with their noisy counts."""

    heavy_keys: list[Hashable]
    heavy_counts: np.ndarray
    light_keys: list[Hashable]
    light_noisy: np.ndarray


def split_in_memory(
    keys: list[Hashable], counts: np.ndarray, heavy_from: int, draw: LightDraw
) -> KeySplit:
    """:class:`KeySplit` of keys and counts already read (the light keys of each count
    numbered in the order given)."""
    c = np.asarray(counts, dtype=np.int64)
    heavy = c >= heavy_from
    light = np.flatnonzero(~heavy)
    order = light[np.argsort(c[light], kind="stable")]  # by count, then as given
    values, starts, sizes = np.unique(c[order], return_index=True, return_counts=True)
    first = dict(zip(values.tolist(), starts.tolist(), strict=True))
    picked = draw(list(zip(values.tolist(), sizes.tolist(), strict=True)))
    where = [int(order[first[n] + r - 1]) for n, r, _ in picked]
    return KeySplit(
        [k for k, h in zip(keys, heavy, strict=True) if h],
        c[heavy],
        [keys[i] for i in where],
        np.array([y for _, _, y in picked], dtype=np.int64),
    )
