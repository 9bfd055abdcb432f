"""Plain-text reprs of released tables: marked noisy, each value with its interval.

A released Series or SQL answer printed as pandas prints it would look exactly like exact
data. :func:`noisy_series_text` and :func:`noisy_frame_text` (the ``repr``, and so the
``print``, of :class:`~pinqpy.NoisySeries` and :class:`~pinqpy.NoisyFrame`) start with a
header line that says the values are noisy, with the epsilon they were released with, and
show each released value with its ``level`` interval: ``value ± e`` when the interval is
symmetric about the value, ``value [low, high]`` when it is not (a mean's, clipped into its
bounds; a quantile's). A value whose release has no value interval (a quantile released
without ``ci=True``) shows its rank error; values changed since the release show no interval
(the header says so). The values are public (released); nothing here reads data.

>>> import numpy as np
>>> from fractions import Fraction
>>> from pinqpy.results.accuracy import AdditiveAccuracy
>>> from pinqpy.results.noise import DiscreteLaplaceNoise
>>> from pinqpy.results.tables import NoisySeries
>>> acc = AdditiveAccuracy(np.array([512, 488]), DiscreteLaplaceNoise(Fraction(1)), epsilon=1)
>>> print(NoisySeries.from_release(acc, index=["F", "M"], name="n"))
noisy (epsilon 1), 95% intervals:
F    512 ± 3
M    488 ± 3
Name: n, dtype: int64
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pinqpy.results.format import _fmt, interval_cells
from pinqpy.results.html import LEVEL, interval_columns

__all__ = ["noisy_frame_text", "noisy_series_text"]


def _level(level: float) -> str:
    return f"{level * 100:g}%"


def _release(acc: Any) -> str:
    """``epsilon 1`` (and delta when there is one); the mechanism is in ``.mechanism``."""
    delta = f", delta {acc.delta}" if acc.delta > 0 else ""
    return f"epsilon {acc.epsilon}{delta}"


def _frame_release(accs: dict[str, Any]) -> str:
    """``epsilon 0.25 each`` when every noisy column has the same, else ``n: epsilon 0.5;
    a: epsilon 0.25``."""
    texts = {col: _release(acc) for col, acc in accs.items()}
    if len(set(texts.values())) == 1 and len(texts) > 1:
        return f"{next(iter(texts.values()))} each"
    return "; ".join(f"{col}: {t}" if len(texts) > 1 else t for col, t in texts.items())


def _rank_cells(values: Any, acc: Any, level: float) -> list[str] | None:
    """``42.0 (± 7.611 ranks)`` per value, for a quantile released without a value interval
    (its error is in rows of rank, either way)."""
    ranks = acc.rank_error(level) if hasattr(acc, "rank_error") else None
    if ranks is None:
        return None
    return [f"{_fmt(float(v))} (± {_fmt(ranks, 4)} ranks)" for v in np.asarray(values)]


def noisy_series_text(series: Any, level: float = LEVEL) -> str:
    """A NoisySeries as text: a header marking it noisy, then each value with its interval."""
    import pandas as pd

    plain = pd.Series(series, copy=False)
    acc = getattr(series, "_pq_accuracy", None)
    cells: list[str] | None = None
    if acc is not None:
        try:
            ci = series.ci(level)
            cells = interval_cells(plain.to_numpy(), ci["low"], ci["high"], acc)
            head = f"noisy ({_release(acc)}), {_level(level)} intervals:"
        except Exception:  # values changed since the release, or no value interval
            keys = getattr(series, "_pq_keys", None)
            ranks = _rank_cells(plain.to_numpy(), acc, level)
            same = keys is not None and len(keys) == len(plain) and keys.equals(plain.index)
            if ranks is not None and same:
                cells = ranks
                head = f"noisy ({_release(acc)}), {_level(level)} rank errors, no value interval:"
            else:
                head = "noisy (computed from released values; no interval of its own):"
    else:
        head = "noisy (computed from released values; no interval of its own):"
    if cells is None:
        return f"{head}\n{pd.Series.__repr__(plain)}"
    shown = pd.Series(cells, index=plain.index, name=plain.name, dtype=object)
    body = shown.to_string(
        name=False,
        dtype=False,
        length=False,
        max_rows=pd.get_option("display.max_rows"),
        min_rows=pd.get_option("display.min_rows"),
    )
    foot = []
    if plain.name is not None:
        foot.append(f"Name: {plain.name}")
    if len(plain) > (pd.get_option("display.max_rows") or len(plain) + 1):
        foot.append(f"Length: {len(plain)}")
    foot.append(f"dtype: {plain.dtype}")
    return f"{head}\n{body}\n{', '.join(foot)}"


def noisy_frame_text(frame: Any, level: float = LEVEL) -> str:
    """A NoisyFrame as text: a header marking it noisy, then the frame with each noisy
    column's values shown with their intervals."""
    import pandas as pd

    plain = pd.DataFrame(frame, copy=False)
    cols = interval_columns(frame)
    store = getattr(frame, "_pq_accuracy", None) or {}
    shown = plain.copy() if cols else plain
    released: dict[str, Any] = {}
    for col, acc in cols.items():
        ci = frame.ci(col, level)
        shown[col] = pd.Series(
            interval_cells(plain[col].to_numpy(), ci["low"], ci["high"], acc),
            index=plain.index,
            dtype=object,
        )
        released[str(col)] = acc
    for col, (acc, _index) in store.items():  # quantiles released without a value interval
        if col in cols or col not in plain.columns or not plain.columns.is_unique:
            continue
        ranks = _rank_cells(plain[col].to_numpy(), acc, level)
        if ranks is not None and len(_index) == len(plain) and _index.equals(plain.index):
            if shown is plain:
                shown = plain.copy()
            shown[col] = pd.Series(ranks, index=plain.index, dtype=object)
            released[str(col)] = acc
    if released:
        head = f"noisy ({_frame_release(released)}), {_level(level)} intervals:"
    else:
        head = "noisy (computed from released values; no column has an interval of its own):"
    text = pd.DataFrame.__repr__(shown)
    return f"{head}\n{text}"
