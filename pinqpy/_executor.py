"""What an engine must provide: the exact aggregates that mechanisms turn into noisy answers.

An executor runs a plan inside its engine and returns only small exact aggregates: per-group
counts, clamped sums, bucket counts for quantiles, candidate counts for argmax. Noise is added
afterwards in Python by :mod:`pinqpy._mechanisms`, identically for every engine. An executor
is called only after the query's charge has been accepted.

``grouping`` is ``None`` for a single group (arrays of length 1) or a :class:`Grouping` of
public keys, in which case rows whose key is not listed are ignored and a key with no rows
gets zeros.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ._expr.ast import Expr
from ._plan import PlanNode, PyFunc

__all__ = ["Executor", "Grouping", "Read", "batch", "batch_memo", "prefetched"]

_BATCH: ContextVar[dict[Any, Any] | None] = ContextVar("pinqpy_batch", default=None)


@contextmanager
def batch() -> Iterator[None]:
    """One query's checks and reads: within it, executors may keep work they would otherwise
    repeat (an evaluated plan node, a translation) in :func:`batch_memo`.

    A SQL query asks for several aggregates of one relation (``COUNT(*)`` and ``AVG(x)`` of
    the same join); without this each would evaluate the join again, and with it every
    aggregate of one query sees the same truncation of a person's rows. Nested scopes join
    the outer one; the memo is dropped when the outermost scope ends.
    """
    if _BATCH.get() is not None:
        yield
        return
    token = _BATCH.set({})
    try:
        yield
    finally:
        _BATCH.reset(token)


def batch_memo() -> dict[Any, Any] | None:
    """The current :func:`batch`'s memo, or None outside one. Plan nodes hash by value (deep
    and slow), so key entries by ``id(node)`` and keep the node in the value to check it."""
    return _BATCH.get()


@dataclass(frozen=True)
class Grouping:
    """Public keys to group by: ``keys[i]`` is a scalar for one column, a tuple for several."""

    columns: tuple[str, ...]
    keys: tuple[Hashable, ...]


@dataclass(frozen=True, eq=False)
class Read:
    """One exact aggregate a query will read, described so that an engine can compute several
    of them together (:meth:`Executor.prefetch`): ``kind`` is "count" (:meth:`Executor.count`),
    "sum" (:meth:`Executor.clamped_sum`) or "moments" (:meth:`Executor.clamped_moments`).
    Compared by identity, as the objects are the ones the read itself will pass."""

    executor: Executor
    plan: PlanNode
    kind: str
    value: Expr | PyFunc | None = None
    lo: float = 0.0
    hi: float = 0.0


def _read_slot(
    kind: str, plan: PlanNode, grouping: Grouping | None, value: object, lo: float, hi: float
) -> tuple[Any, ...]:
    return ("read", kind, id(plan), id(grouping), id(value), lo, hi)


def _store_read(read: Read, grouping: Grouping | None, result: Any) -> None:
    """Keep a prefetched result for the rest of the batch (a no-op outside one)."""
    memo = _BATCH.get()
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
    memo = _BATCH.get()
    if memo is None:
        return None
    hit = memo.get(_read_slot(kind, plan, grouping, value, lo, hi))
    if hit is None or hit[0] is not plan or hit[1] is not grouping or hit[2] is not value:
        return None
    return hit[3]


class Executor(ABC):
    """Exact aggregates over a plan, computed inside one engine."""

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

    @abstractmethod
    def count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        """Rows per group, shape (K,)."""

    @abstractmethod
    def clamped_sum(
        self, plan: PlanNode, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per group: the sum of non-NULL values clamped into [lo, hi], and how many there were."""

    @abstractmethod
    def clamped_moments(
        self, plan: PlanNode, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per group: sum and sum of squares of non-NULL values clamped into [lo, hi], and
        their count."""

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

    @abstractmethod
    def candidate_counts(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: tuple[Hashable, ...],
    ) -> np.ndarray:
        """Per group, how many rows have each candidate value; shape (K, len(candidates))."""
