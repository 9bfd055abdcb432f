"""Released tables as notebook HTML: values and their accuracy in one table.

:func:`noisy_frame_html` (a :class:`~pinqpy.NoisyFrame`, what ``%%pinq`` shows) and
:func:`noisy_series_html` (a :class:`~pinqpy.NoisySeries`) draw one table: the key columns,
then each noisy column's released value next to its ``level`` interval, ``± e`` where the
interval is centred on the value and ``[low, high]`` where it is not. A quantile released
without a value interval shows its error in ranks instead (``± 7.6 ranks``), as the text repr
does. A count's interval is clipped at 0: no count is below 0, so the part of the noise's
interval under 0 excludes nothing (the exact count lies in the clipped interval exactly when
it lies in the unclipped one); ``ci()`` still returns the noise's own interval. Each column
has one number format: as many decimals as two significant digits of its smallest interval
half-width need (none for counts). A column whose values changed since the release shows no
interval. Only released values and public parameters are shown; everything is escaped.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from pinqpy.results.format import _fmt, _same_values
from pinqpy.results.html import (
    _CELL,
    _MUTED,
    _TABLE,
    LEVEL,
    _box,
    _e,
    _level,
    _mechanisms,
    interval_columns,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["keys_html", "noisy_frame_html", "noisy_series_html"]


def _decimals(half_widths: np.ndarray) -> int:
    """Decimals for two significant digits of the smallest positive half-width (0 to 6)."""
    positive = half_widths[np.isfinite(half_widths) & (half_widths > 0)]
    if not positive.size:
        return 0
    return max(0, min(6, 1 - math.floor(math.log10(float(positive.min())))))


def _number(x: float, places: int) -> str:
    if not math.isfinite(x):
        return "NULL" if math.isnan(x) else ("∞" if x > 0 else "-∞")
    return f"{x:,.{places}f}"


def interval_cells(
    values: Any, low: Any, high: Any, *, integer: bool
) -> tuple[list[str], list[str]]:
    """A noisy column's value cells and interval cells, one format for the column; a count's
    (``integer``) interval is clipped at 0."""
    v = np.asarray(values, dtype=np.float64)
    lo = np.asarray(low, dtype=np.float64)
    hi = np.asarray(high, dtype=np.float64)
    if integer:
        lo, hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
    places = 0 if integer else _decimals((hi - lo) / 2)
    shown, spans = [], []
    for x, a, b in zip(v.tolist(), lo.tolist(), hi.tolist(), strict=True):
        shown.append(_number(x, places))
        down, up = _number(x - a, places), _number(b - x, places)
        symmetric = down == up and math.isfinite(x - a)
        spans.append(f"± {down}" if symmetric else f"[{_number(a, places)}, {_number(b, places)}]")
    return shown, spans


def _rank_cells(values: Any, acc: Any, level: float) -> tuple[list[str], list[str]] | None:
    ranks = acc.rank_error(level) if hasattr(acc, "rank_error") else None
    if ranks is None:
        return None
    shown = [_fmt(float(x)) for x in np.asarray(values, dtype=np.float64)]
    return shown, [f"± {_fmt(ranks, 4)} ranks"] * len(shown)


def _plain(values: Any) -> list[str]:
    out = []
    for x in values:
        if isinstance(x, float | np.floating):
            out.append("NULL" if math.isnan(x) else _fmt(float(x)))
        else:
            out.append("NULL" if x is None else str(x))
    return out


def _table(columns: list[tuple[str, list[str], bool]]) -> str:
    """An HTML table of ``(header, cells, numeric)`` columns (numbers align right)."""
    head = "".join(f'<th style="{_CELL}">{_e(h)}</th>' for h, _, _ in columns)
    rows = []
    for i in range(len(columns[0][1]) if columns else 0):
        cells = "".join(
            f'<td style="{_CELL}{";text-align:right" if num else ""}">{_e(c[i])}</td>'
            for _, c, num in columns
        )
        rows.append(f"<tr>{cells}</tr>")
    return (
        f'<table class="pinqpy-release" style="{_TABLE}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _index_columns(index: pd.Index) -> list[tuple[str, list[str], bool]]:
    """The index as key columns, unless it is the plain 0, 1, ... of a SQL answer."""
    import pandas as pd

    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        return []
    names = [n if n is not None else "" for n in index.names]
    if isinstance(index, pd.MultiIndex):
        return [(str(n), _plain(index.get_level_values(i)), False) for i, n in enumerate(names)]
    return [(str(names[0]), _plain(index), False)]


def _noisy_columns(
    name: str, values: Any, acc: Any, ci: Any, level: float
) -> list[tuple[str, list[str], bool]]:
    """A released column and its accuracy column (interval, or rank error)."""
    if ci is not None:
        integer = bool(getattr(acc, "integer", False))
        shown, spans = interval_cells(values, ci[0], ci[1], integer=integer)
        return [(name, shown, True), (f"{name} {_level(level)} interval", spans, True)]
    ranks = _rank_cells(values, acc, level)
    if ranks is None:
        return [(name, _plain(values), True)]
    return [(name, ranks[0], True), (f"{name} rank error ({_level(level)})", ranks[1], True)]


def _head(level: float, clipped: bool, intervals: bool = True) -> str:
    if not intervals:
        what = "a quantile's error is in ranks of the rows: it has no value interval"
    else:
        clip = "; a count's interval is clipped at 0, as no count is negative" if clipped else ""
        what = (
            f"each {_level(level)} interval contains the exact value with probability "
            f"{level:g}, computed from the noise at no charge{clip}"
        )
    return f'<div><b>noisy</b> <span style="{_MUTED}">({what})</span></div>'



def noisy_frame_html(frame: pd.DataFrame, level: float = LEVEL) -> str:
    """A released NoisyFrame as one table: keys, each noisy value beside its accuracy."""
    with_ci = interval_columns(frame)
    store = getattr(frame, "_pq_accuracy", None) or {}
    columns = _index_columns(frame.index)
    shown: dict[str, Any] = {}
    for position, col in enumerate(frame.columns):
        values = frame.iloc[:, position].to_numpy()
        if col in with_ci:
            ci = frame.ci(col, level)  # type: ignore[attr-defined]
            bounds = (ci["low"], ci["high"])
            columns += _noisy_columns(str(col), values, with_ci[col], bounds, level)
            shown[str(col)] = with_ci[col]
        elif col in store and _released(frame, col, store[col]):
            columns += _noisy_columns(str(col), values, store[col][0], None, level)
            shown[str(col)] = store[col][0]
        else:
            numeric = values.dtype.kind in "iuf"
            columns.append((str(col), _plain(values), numeric))
    clipped = any(getattr(a, "integer", False) and a.has_interval for a in shown.values())
    intervals = any(a.has_interval for a in shown.values())
    parts = [_head(level, clipped, intervals) if shown else "", _table(columns)]
    if shown:
        parts.append(_mechanisms(shown))
    return _box("".join(parts), "result")


def _released(frame: pd.DataFrame, col: object, entry: tuple[Any, Any]) -> bool:
    """Whether ``col`` still holds the released values of a rank-error release."""
    acc, index = entry
    if not frame.columns.is_unique or len(index) != len(frame) or not index.equals(frame.index):
        return False
    return _same_values(np.asarray(frame[col].values), acc.values)


def noisy_series_html(series: pd.Series, level: float = LEVEL) -> str:
    """A released NoisySeries as one table: each key, its value and its accuracy."""
    name = str(series.name) if series.name is not None else "value"
    columns = _index_columns(series.index) or [("", _plain(series.index), False)]
    acc = getattr(series, "_pq_accuracy", None)
    values = series.to_numpy()
    try:
        ci = series.ci(level)  # type: ignore[attr-defined]
        bounds: Any = (ci["low"], ci["high"])
    except Exception:  # no value interval (a quantile), or values changed since the release
        bounds = None
    keys = getattr(series, "_pq_keys", None)
    same = keys is not None and len(keys) == len(series) and keys.equals(series.index)
    if acc is None or (bounds is None and not (same and _same_values(values, acc.values))):
        return _box(_table([*columns, (name, _plain(values), True)]), "result")
    columns += _noisy_columns(name, values, acc, bounds, level)
    clipped = bounds is not None and bool(getattr(acc, "integer", False))
    body = _head(level, clipped, bounds is not None) + _table(columns) + _mechanisms({name: acc})
    return _box(body, "result")


def keys_html(keys: Any, level: float = LEVEL) -> str:
    """A private key selection's released keys: how many, and their noisy counts with their
    intervals (the counts' own rendering)."""
    head = (
        f"<div><b>{len(keys)} key(s) chosen privately</b> "
        f'<span style="{_MUTED}">(released with their noisy counts; a key with few rows may '
        "be left out)</span></div>"
    )
    return _box(head + noisy_series_html(keys.counts, level), "result")
