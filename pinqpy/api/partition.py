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

from collections.abc import Callable, Hashable, Iterator, Mapping
from fractions import Fraction
from typing import Any, Generic, TypeVar

import numpy as np
import pandas as pd

from pinqpy.accounting.agents import AllParts
from pinqpy.api.aggregations import Aggregations
from pinqpy.api.expressions import ExprLike, unwrap
from pinqpy.api.habits import PARTITION_HABITS, habit_error
from pinqpy.api.previews import preview
from pinqpy.errors import PinqError
from pinqpy.pipeline import prepare, run
from pinqpy.pipeline.relation import Relation
from pinqpy.plan import salts
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.meta import check_keys
from pinqpy.plan.nodes import PartitionRef
from pinqpy.results.accuracy import AccuracyPreview
from pinqpy.results.tables import NoisySeries

__all__ = ["Partition"]

#: The type of the parts (the caller's frame type).
F = TypeVar("F")


class Partition(Aggregations[NoisySeries, pd.Series], Mapping[Hashable, F], Generic[F]):
    """Parts of a frame by public keys; aggregations over every part return a Series.

    Lazy like every transformation: nothing is read until a part is aggregated. Rows whose
    key is not listed are dropped; a key with no rows is an empty part. Indexing an unknown
    key raises ``KeyError``. The per-key aggregations (``count``, ``sum``, ``mean``,
    ``variance``, ``std``, ``median``, ``quantile``, ``argmax``) are a frame's, with the same
    arguments and mechanisms, run on every part at once: each returns one answer per key (a
    :class:`~pinqpy.NoisySeries` indexed by key; ``argmax`` a Series of labels) and charges
    once, ``epsilon × stability``, for all parts together.
    """

    def __init__(
        self, frame: object, rel: Relation, ref: PartitionRef, wrap: Callable[[Relation], F]
    ):
        self._frame = frame  # the partitioned frame, for the repr
        self._rel = rel  # its relation, naming the partition's agent: per-key aggregates run on it
        self._ref = ref
        self._wrap = wrap  # a part's relation -> its frame
        self._keyset = frozenset(ref.keys)
        self._parts: dict[Hashable, F] = {}

    @property
    def columns(self) -> tuple[str, ...]:
        """The key columns."""
        return self._ref.key_columns

    def __getitem__(self, key: Hashable) -> F:
        key = self._canonical(key)
        if key not in self._keyset:
            raise KeyError(key)
        part = self._parts.get(key)
        if part is None:
            part = self._wrap(self._rel.part(self._ref, key))
            self._parts[key] = part
        return part

    def _canonical(self, key: Hashable) -> Hashable:
        """The key as the partition spells it (every NULL-like is None, -0.0 is 0.0)."""
        try:
            return check_keys([key], self._ref.key_columns, self._rel.schema)[0]
        except PinqError:
            return key

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._ref.keys)

    def __len__(self) -> int:
        return len(self._ref.keys)

    def __repr__(self) -> str:
        cols = ", ".join(self._ref.key_columns)
        return f"Partition(by [{cols}], {len(self)} public keys, parent={self._frame!r})"

    def __getattr__(self, name: str) -> Any:
        habit_error(type(self).__name__, name, PARTITION_HABITS)

    # -- per-key aggregations -------------------------------------------------------------
    def _target(self) -> run.Target:
        return (
            Grouping(self._ref.key_columns, self._ref.keys),
            {AllParts(self._rel.catalog.agent(self._ref.agent)): Fraction(1)},
        )

    def _index(self) -> pd.Index:
        if len(self._ref.key_columns) == 1:
            return pd.Index(list(self._ref.keys), name=self._ref.key_columns[0])
        return pd.MultiIndex.from_tuples(list(self._ref.keys), names=list(self._ref.key_columns))

    _whole = False  # each part: a part's row count is never public

    def _read(self, prepared: prepare.Prepared) -> tuple[Any, Any]:
        """One read of every part at once, drawing the partition's salts (as a read of one
        part does: :mod:`pinqpy.plan.salts`)."""
        name = self._ref.agent
        with salts.through(name, self._rel.catalog.agent(name)):
            return run.run_one(prepared, self._target())

    def _release(self, prepared: prepare.Prepared) -> NoisySeries:
        _values, acc = self._read(prepared)
        return NoisySeries.from_release(acc, index=self._index())

    def _choose(self, prepared: prepare.Prepared) -> pd.Series:
        idx, _acc = self._read(prepared)
        labels = [prepared.candidates[int(i)] for i in np.asarray(idx)]
        return pd.Series(labels, index=self._index(), dtype=object)

    def accuracy(
        self,
        kind: str,
        column: ExprLike | None = None,
        *,
        epsilon: float,
        level: float = 0.95,
        bounds: tuple[float, float] | None = None,
        delta: float | None = None,
        q: float = 0.5,
        n: float | None = None,
    ) -> AccuracyPreview:
        """How accurate ``kind`` (``count``, ``sum``, ``mean``, ``median``, ``quantile``,
        ``variance``, ``stddev``) would be in **each part** at ``epsilon``: reads nothing,
        charges nothing. As :meth:`PrivateFrame.accuracy <pinqpy.PrivateFrame.accuracy>`,
        except that ``n`` is the rows of a part (a guess: a part's size is never public,
        even when the frame's is) and ``charge`` is the one charge for all parts together
        (parallel composition: ``epsilon × stability`` to the partitioned frame's budgets).

        >>> import pandas as pd, pinqpy as pq
        >>> df = pd.DataFrame({"state": ["CA", "NY"], "age": [30, 40]})
        >>> parts = pq.PrivateFrame(df, pq.Budget(1), bounds={"age": (0, 100)}).partition(
        ...     "state", keys=["CA", "NY"])
        >>> round(parts.accuracy("mean", "age", epsilon=1, n=500).error, 2)
        0.82
        """
        if isinstance(kind, str) and kind.lower() in ("histogram", "select_keys"):
            raise PinqError(
                f"accuracy({kind!r}) previews a key selection of a frame; a partition's keys "
                "are public already (use accuracy('count') for each part's count)"
            )
        return preview(
            self._rel,
            kind,
            unwrap(column),
            epsilon=epsilon,
            level=level,
            bounds=bounds,
            delta=delta,
            q=q,
            n=n,
            whole=False,
        )
