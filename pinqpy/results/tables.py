"""Released tables: :class:`NoisySeries` (one released value per key of a partition) and
:class:`NoisyFrame` (a SQL answer), pandas objects that keep their accuracy through slicing,
sorting and filtering.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import ClassVar

import numpy as np
import pandas as pd
from pandas.plotting import PlotAccessor

from pinqpy.core.exact import Exact
from pinqpy.errors import PinqError
from pinqpy.results.accuracy import Accuracy
from pinqpy.results.format import _same_values
from pinqpy.results.html import LEVEL, result_html
from pinqpy.results.noise import check_level
from pinqpy.results.plots import noisy_plot
from pinqpy.results.release_html import noisy_frame_html, noisy_series_html
from pinqpy.results.text import noisy_frame_text, noisy_series_text

__all__ = ["NoisyFrame", "NoisyPlot", "NoisySeries"]


class NoisyPlot(PlotAccessor):
    """``result.plot()`` of a released Series or frame: bars of the released values with
    their intervals (:func:`pinqpy.results.plots.noisy_plot`): a count's interval clipped at
    0, a quantile released without an interval drawn without one. Called with pandas'
    arguments (``kind=``, ``result.plot.line()``...) it is pandas' own plot."""

    _OWN = frozenset({"y", "x", "level", "title", "ax"})

    def __call__(self, *args: object, **kwargs: object) -> object:
        if args or not set(kwargs) <= self._OWN:
            return super().__call__(*args, **kwargs)
        return noisy_plot(self._parent, **kwargs)  # type: ignore[arg-type]


class NoisySeries(pd.Series):
    """One released value per key, as a pandas Series that keeps its accuracy.

    Slicing, filtering, sorting and reindexing within the released keys keep the accuracy
    (``_metadata`` plus ``_constructor``). ``ci(level)`` returns a DataFrame with columns
    ``low`` and ``high`` and the Series' own index. The accuracy belongs to the *released*
    values: if the values were changed (``s * 2``, ``s.round()``), ``ci`` refuses rather than
    report an interval for numbers the mechanism never released.

    >>> import numpy as np
    >>> from pinqpy.results.accuracy import AdditiveAccuracy
    >>> from pinqpy.results.noise import LaplaceNoise
    >>> acc = AdditiveAccuracy(np.array([10.0, 20.0, 30.0]), LaplaceNoise(1.0), epsilon=1)
    >>> s = NoisySeries.from_release(acc, index=["a", "b", "c"], name="n")
    >>> s[s > 15].ci(0.5)
             low       high
    b  19.306853  20.693147
    c  29.306853  30.693147

    Its repr says the values are noisy and shows each with its 95% interval:

    >>> s
    noisy (epsilon 1), 95% intervals:
    a    10.0 ± 2.99573
    b    20.0 ± 2.99573
    c    30.0 ± 2.99573
    Name: n, dtype: float64
    """

    def _repr_html_(self) -> str:
        return result_html(self)

    def _result_html(self, level: float = LEVEL) -> str:
        return noisy_series_html(self, level)

    @property
    def plot(self) -> NoisyPlot:  # type: ignore[override]
        """``s.plot()``: one bar per key with its interval (see :class:`NoisyPlot`)."""
        return NoisyPlot(self)

    def __repr__(self) -> str:
        """Marked noisy, each value with its 95% interval (:mod:`pinqpy.results.text`)."""
        try:
            return noisy_series_text(self)
        except Exception:  # a repr must never fail
            return "noisy (no interval could be shown):\n" + pd.Series.__repr__(self)

    _metadata: ClassVar[list[str]] = ["_pq_accuracy", "_pq_keys"]  # type: ignore[misc]

    @property
    def _constructor(self) -> type[NoisySeries]:
        return NoisySeries

    @property
    def _constructor_expanddim(self) -> type[pd.DataFrame]:
        return pd.DataFrame

    @classmethod
    def from_release(
        cls,
        accuracy: Accuracy,
        index: Sequence[Hashable] | pd.Index | None = None,
        name: Hashable | None = None,
    ) -> NoisySeries:
        """The Series of a release over keys ``index`` (in release order)."""
        if not isinstance(accuracy, Accuracy):
            raise TypeError("a NoisySeries needs an Accuracy")
        if index is None:
            idx = pd.RangeIndex(len(accuracy))
        else:  # keep a MultiIndex and index names as given
            idx = index if isinstance(index, pd.Index) else pd.Index(index)
        if len(idx) != len(accuracy):
            raise ValueError("the index must have one label per released key")
        if not idx.is_unique:
            raise ValueError("the keys of a release must be unique")
        s = cls(accuracy.values, index=idx, name=name)
        s._pq_accuracy = accuracy
        s._pq_keys = idx
        return s

    def _acc(self) -> Accuracy:
        acc = getattr(self, "_pq_accuracy", None)
        if acc is None:
            raise PinqError("this Series carries no accuracy (it was not released by pinqpy)")
        return acc

    @property
    def accuracy(self) -> Accuracy:
        return self._acc()

    @property
    def epsilon(self) -> Exact:
        return self._acc().epsilon

    @property
    def delta(self) -> Exact:
        return self._acc().delta

    @property
    def mechanism(self) -> str:
        return self._acc().mechanism

    @property
    def noise_scale(self) -> float | None:
        return self._acc().noise_scale

    def ci(self, level: float = 0.95) -> pd.DataFrame:
        """Per-key ``level`` confidence intervals: a DataFrame with columns ``low``, ``high``."""
        acc = self._acc()
        keys: pd.Index = self._pq_keys
        positions = keys.get_indexer(self.index)
        if (positions < 0).any():
            raise PinqError("ci(): this Series has keys that were not part of the release")
        if not _same_values(np.asarray(self.values), acc.values[positions]):
            raise PinqError(
                "ci() describes the released values, and this Series' values were changed; "
                "take the interval of the released Series and transform it instead"
            )
        low, high = acc.interval(level)
        return pd.DataFrame({"low": low[positions], "high": high[positions]}, index=self.index)


class NoisyFrame(pd.DataFrame):
    """A SQL answer: a pandas DataFrame whose noisy columns keep their accuracy.

    ``ci(column, level)`` gives a DataFrame of ``low``/``high`` for one noisy column, on the
    frame's current index (so it follows row filters); ``ci(level=...)`` without a column
    gives every noisy column side by side. Columns computed from several aggregates
    (``SUM(x) / COUNT(*)``) carry no interval of their own.
    """

    def _repr_html_(self) -> str:
        return result_html(self)

    def _result_html(self, level: float = LEVEL) -> str:
        return noisy_frame_html(self, level)

    @property
    def plot(self) -> NoisyPlot:  # type: ignore[override]
        """``r.plot(y="n")``: one bar per row of the noisy column ``y`` (the only one by
        default), labelled by the other columns, with its interval (:class:`NoisyPlot`)."""
        return NoisyPlot(self)

    def __repr__(self) -> str:
        """Marked noisy, each noisy column's values with their 95% intervals
        (:mod:`pinqpy.results.text`)."""
        try:
            return noisy_frame_text(self)
        except Exception:  # a repr must never fail
            return "noisy (no interval could be shown):\n" + pd.DataFrame.__repr__(self)

    _metadata: ClassVar[list[str]] = ["_pq_accuracy"]  # type: ignore[misc]

    @property
    def _constructor(self) -> type[NoisyFrame]:
        return NoisyFrame

    @classmethod
    def from_release(cls, data: pd.DataFrame, accuracy: dict[str, Accuracy]) -> NoisyFrame:
        out = cls(data)
        out._pq_accuracy = {col: (acc, data.index.copy()) for col, acc in accuracy.items()}
        return out

    def __getitem__(self, key: object) -> object:
        """A noisy column taken alone is a :class:`NoisySeries`: it prints marked noisy with its
        intervals and keeps ``ci()``, rather than passing for exact data."""
        out = super().__getitem__(key)
        store = getattr(self, "_pq_accuracy", {})
        if isinstance(out, pd.Series) and not isinstance(out, NoisySeries):
            try:
                entry = store.get(key)
            except TypeError:  # an unhashable key (a mask, a list) selects no single column
                entry = None
            if entry is not None:
                acc, index = entry
                column = NoisySeries(out)
                column._pq_accuracy = acc
                column._pq_keys = index
                return column
        return out

    @property
    def accuracy(self) -> dict[str, Accuracy]:
        """The accuracy of each noisy column, by column name."""
        return {c: a for c, (a, _) in getattr(self, "_pq_accuracy", {}).items()}

    def ci(self, column: str | None = None, level: float = 0.95) -> pd.DataFrame:
        """``level`` confidence intervals for one noisy column, or for all of them."""
        store = getattr(self, "_pq_accuracy", {})
        if column is None:
            if not store:
                raise PinqError("this result has no noisy column with an interval")
            parts = {c: self.ci(c, level) for c in store if c in self.columns}
            return pd.concat(parts, axis=1)
        if column not in store:
            raise PinqError(
                f"column {column!r} has no interval: only single noisy aggregates carry one"
            )
        acc, index = store[column]
        low, high = acc.interval(check_level(level))
        frame = pd.DataFrame({"low": low, "high": high}, index=index)
        return frame.reindex(self.index)
