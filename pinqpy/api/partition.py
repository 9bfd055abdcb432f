"""Partition: PINQ's parallel composition over public keys.

``frame.partition("state", keys=[...])`` returns a :class:`Partition`, a read-only mapping
from each key to a :class:`~pinqpy.PrivateFrame` of the rows with that key. Because the parts
are disjoint, one privacy unit of the partitioned frame lands in at most ``k`` rows of the
parts together (``k`` its stability), so the parent budget is charged the *largest* total any
one part has spent, times ``k``, not the sum (McSherry 2009, Theorem 4).

>>> import pandas as pd, pinqpy as pq
>>> df = pd.DataFrame({"state": ["CA", "NY", "CA", "TX"], "income": [10, 20, 30, 40]})
>>> budget = pq.Budget(epsilon=1.0)
>>> parts = pq.PrivateFrame(df, budget).partition("state", keys=["CA", "NY", "TX"])
>>> _ = parts["CA"].count(epsilon=0.3)
>>> _ = parts["NY"].count(epsilon=0.5)
>>> budget.spent.epsilon == 0.5
True
>>> counts = parts.count(epsilon=0.1)      # a pandas Series indexed by key
>>> list(counts.index)
['CA', 'NY', 'TX']
>>> budget.spent.epsilon == 0.6
True
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pinqpy.accounting.agents import AllParts, PartAgent
from pinqpy.engines.base import Grouping
from pinqpy.errors import PinqError
from pinqpy.plan.catalog import Catalog, agent_name
from pinqpy.plan.meta import check_keys
from pinqpy.plan.nodes import PartitionRef, PartSource
from pinqpy.results.values import NoisySeries

if TYPE_CHECKING:
    from pinqpy.api.frame import ExprLike, PrivateFrame

__all__ = ["Partition"]


class Partition(Mapping[Hashable, "PrivateFrame"]):
    """Parts of a frame by public keys; aggregations over every part return a Series.

    Lazy like every transformation: nothing is read until a part is aggregated. Rows whose
    key is not listed are dropped; a key with no rows is an empty part. Indexing an unknown
    key raises ``KeyError``. The per-key aggregations (``count``, ``sum``, ``mean``,
    ``median``, ``quantile``) charge once, ``epsilon × stability``, for all parts together.
    """

    def __init__(self, frame: PrivateFrame, ref: PartitionRef, catalog: Catalog):
        self._frame = frame
        self._ref = ref
        self._catalog = catalog  # the frame's, with the partition's agent
        self._keyset = frozenset(ref.keys)
        self._parts: dict[Hashable, PrivateFrame] = {}

    @property
    def columns(self) -> tuple[str, ...]:
        """The key columns."""
        return self._ref.key_columns

    def __getitem__(self, key: Hashable) -> PrivateFrame:
        key = self._canonical(key)
        if key not in self._keyset:
            raise KeyError(key)
        part = self._parts.get(key)
        if part is None:
            from pinqpy.api.frame import PrivateFrame

            agent = PartAgent(self._catalog.agent(self._ref.agent), key)
            node = PartSource(self._ref, key, agent_name(agent))
            part = PrivateFrame._derive(node, self._catalog.with_agent(node.agent, agent))
            self._parts[key] = part
        return part

    def _canonical(self, key: Hashable) -> Hashable:
        """The key as the partition spells it (every NULL-like is None, -0.0 is 0.0)."""
        try:
            return check_keys([key], self._ref.key_columns, self._frame.schema)[0]
        except PinqError:
            return key

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._ref.keys)

    def __len__(self) -> int:
        return len(self._ref.keys)

    def __repr__(self) -> str:
        cols = ", ".join(self._ref.key_columns)
        return f"Partition(by [{cols}], {len(self)} public keys, parent={self._frame!r})"

    # -- per-key aggregations -------------------------------------------------------------
    def _target(self) -> tuple[Grouping, dict[object, Any]]:
        return (
            Grouping(self._ref.key_columns, self._ref.keys),
            {AllParts(self._catalog.agent(self._ref.agent)): Fraction(1)},
        )

    def _index(self) -> pd.Index:
        if len(self._ref.key_columns) == 1:
            return pd.Index(list(self._ref.keys), name=self._ref.key_columns[0])
        return pd.MultiIndex.from_tuples(list(self._ref.keys), names=list(self._ref.key_columns))

    def _series(self, released: tuple[Any, Any]) -> NoisySeries:
        _values, acc = released
        return NoisySeries.from_release(acc, index=self._index())

    def count(self, epsilon: float, *, delta: float | None = None) -> NoisySeries:
        """A noisy count per key (one charge for all parts)."""
        return self._series(self._frame._count(epsilon, delta, self._target()))

    def sum(
        self,
        column: ExprLike,
        epsilon: float,
        bounds: tuple[float, float] | None = None,
        *,
        delta: float | None = None,
    ) -> NoisySeries:
        """A noisy clamped sum per key; see :meth:`PrivateFrame.sum`."""
        return self._series(self._frame._sum(column, epsilon, bounds, delta, self._target()))

    def mean(
        self,
        column: ExprLike,
        epsilon: float,
        bounds: tuple[float, float] | None = None,
        *,
        delta: float | None = None,
    ) -> NoisySeries:
        """A noisy clamped mean per key; see :meth:`PrivateFrame.mean`."""
        return self._series(self._frame._mean(column, epsilon, bounds, delta, self._target()))

    def median(
        self,
        column: ExprLike,
        epsilon: float,
        bounds: tuple[float, float] | None = None,
        *,
        candidates: Iterable[float] | None = None,
    ) -> NoisySeries:
        """A noisy median per key; see :meth:`PrivateFrame.quantile`."""
        return self.quantile(column, 0.5, epsilon, bounds, candidates=candidates)

    def quantile(
        self,
        column: ExprLike,
        q: float,
        epsilon: float,
        bounds: tuple[float, float] | None = None,
        *,
        candidates: Iterable[float] | None = None,
    ) -> NoisySeries:
        """A noisy ``q``-quantile per key; see :meth:`PrivateFrame.quantile`."""
        return self._series(
            self._frame._quantile(column, q, epsilon, bounds, candidates, self._target())
        )

    def argmax(self, column: ExprLike, candidates: Iterable[Hashable], epsilon: float) -> pd.Series:
        """Per key, the most frequent public candidate of ``column`` (report-noisy-max)."""
        cands, (idx, _acc) = self._frame._argmax(column, candidates, epsilon, self._target())
        labels = [cands[int(i)] for i in np.asarray(idx)]
        return pd.Series(labels, index=self._index(), dtype=object)
