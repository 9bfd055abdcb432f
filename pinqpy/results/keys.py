"""The keys a private key selection released, with the noisy counts released with them."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from pinqpy.results.html import LEVEL, result_html
from pinqpy.results.release_html import keys_html
from pinqpy.results.tables import NoisySeries

__all__ = ["SelectedKeys"]


class SelectedKeys(list):  # type: ignore[type-arg]
    """A list of released keys (sorted) that also carries ``counts``: the noisy counts the
    selection released with them, a :class:`~pinqpy.results.tables.NoisySeries` indexed by
    key with its accuracy. Reading ``counts`` is post-processing: it charges nothing.

    >>> import numpy as np
    >>> from fractions import Fraction
    >>> from pinqpy.results.accuracy import AdditiveAccuracy
    >>> from pinqpy.results.noise import DiscreteLaplaceNoise
    >>> acc = AdditiveAccuracy(np.array([40, 31]), DiscreteLaplaceNoise(Fraction(1)), epsilon=1)
    >>> keys = SelectedKeys(["a", "b"], NoisySeries.from_release(acc, index=["a", "b"]))
    >>> keys == ["a", "b"], keys.counts["b"]
    (True, np.int64(31))

    Its repr says the keys were chosen privately (``list(keys)`` is the plain list):

    >>> keys
    SelectedKeys(['a', 'b']; chosen privately, their noisy counts in .counts)
    """

    def _repr_html_(self) -> str:
        return result_html(self)

    def _result_html(self, level: float = LEVEL) -> str:
        return keys_html(self, level)

    counts: NoisySeries

    def __init__(self, keys: Iterable[Hashable], counts: NoisySeries):
        super().__init__(keys)
        if len(counts) != len(self):
            raise ValueError("counts must have one entry per key")
        self.counts = counts

    def __repr__(self) -> str:
        return (
            f"SelectedKeys({list.__repr__(self)}; chosen privately, their noisy counts in .counts)"
        )
