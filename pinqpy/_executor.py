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
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ._expr.ast import Expr
from ._plan import PlanNode, PyFunc

__all__ = ["Executor", "Grouping"]


@dataclass(frozen=True)
class Grouping:
    """Public keys to group by: ``keys[i]`` is a scalar for one column, a tuple for several."""

    columns: tuple[str, ...]
    keys: tuple[Hashable, ...]


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
