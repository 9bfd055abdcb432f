"""Plots of what is public: released values with their intervals, a budget's spending, and
the error a query would have at each epsilon (matplotlib, from the ``notebook`` extra).

Each function draws on ``ax`` (a new figure's axes when None) and returns the axes, so a
notebook shows the figure and a script can save it (``ax.figure.savefig("x.png")``).
matplotlib is imported only here, when a plot is asked for; without it the error says which
extra to install. Nothing here reads data: the values drawn are released answers, their
intervals computed from the noise, charges a budget already recorded, or previews.

* :func:`release_plot`: a NoisySeries or NoisyFrame column as bars with error bars for its
  ``level`` intervals. A count's interval is clipped at 0 (no count is negative, so the part
  below 0 says nothing); a released value below 0 is drawn as it was released.
* :func:`spending_plot`: a budget's charges in the order they were made, as bars, with the
  running total spent as a line and the budget's total as a dashed line.
* :func:`curve_plot`: expected error and interval half-width against epsilon.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pinqpy.errors import PinqError

__all__ = ["curve_plot", "noisy_plot", "release_plot", "require_matplotlib", "spending_plot"]

_BAR = "#4c78a8"
_SPENT = "#e07b39"


def require_matplotlib() -> Any:
    """``matplotlib.pyplot``, or a PinqError naming the extra to install."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise PinqError(
            "plots need matplotlib: pip install matplotlib (it comes with the notebook extra, "
            "pinqpy[notebook])"
        ) from None
    return plt


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    plt = require_matplotlib()
    _fig, new = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    return new


def release_plot(
    labels: Sequence[object],
    values: Sequence[float],
    low: Sequence[float] | None,
    high: Sequence[float] | None,
    *,
    count: bool,
    title: str,
    ylabel: str,
    xlabel: str = "",
    level: float = 0.95,
    ax: Any = None,
) -> Any:
    """Bars of released ``values`` by ``labels`` with error bars from ``low`` to ``high``
    (None: no interval, as for a quantile released without one); ``count`` clips the
    intervals at 0."""
    ax = _axes(ax)
    x = np.arange(len(values))
    v = np.asarray(values, dtype=np.float64)
    ax.bar(x, v, color=_BAR, label="released (noisy)")
    if low is not None and high is not None:
        lo = np.asarray(low, dtype=np.float64)
        hi = np.asarray(high, dtype=np.float64)
        if count:
            lo, hi = np.maximum(lo, 0.0), np.maximum(hi, 0.0)
        below = np.maximum(v - lo, 0.0)
        above = np.maximum(hi - v, 0.0)
        ax.errorbar(
            x, v, yerr=np.vstack([below, above]), fmt="none", ecolor="black", capsize=4,
            label=f"{level * 100:g}% interval" + (" (clipped at 0)" if count else ""),
        )  # fmt: skip
    ax.set_xticks(x)
    ax.set_xticklabels([str(k) for k in labels])
    ax.set_ylabel(ylabel)
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    return ax


def spending_plot(
    charges: Sequence[float],
    spent_after: Sequence[float],
    total: float,
    *,
    labels: Sequence[str] = (),
    title: str = "budget",
    unit: str = "epsilon",
    ax: Any = None,
) -> Any:
    """Bars of what each charge spent (query 1, 2, ...), the running total spent as a line,
    and the budget's ``total`` as a dashed line."""
    ax = _axes(ax)
    x = np.arange(1, len(charges) + 1)
    ax.bar(x, np.asarray(charges, dtype=np.float64), color=_BAR, label=f"{unit} per query")
    ax.step(x, np.asarray(spent_after, dtype=np.float64), where="mid", color=_SPENT,
            label="spent so far")  # fmt: skip
    ax.axhline(float(total), color="black", linestyle="--", label=f"total {total:g}")
    ax.set_xlabel("query, in the order charged")
    ax.set_ylabel(unit)
    ax.set_title(title)
    if len(x):
        ax.set_xticks(x)
        if labels and len(x) <= 12:
            ax.set_xticklabels([_short(t) for t in labels], rotation=30, ha="right")
    ax.set_ylim(0, max(float(total), *(float(s) for s in spent_after), 1e-12) * 1.1)
    ax.legend(loc="best", fontsize="small")
    return ax


def _short(label: str, width: int = 24) -> str:
    text = " ".join(str(label).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def curve_plot(
    epsilons: Sequence[float],
    expected: Sequence[float | None],
    half_widths: Sequence[float],
    *,
    title: str,
    ylabel: str,
    level: float = 0.95,
    ax: Any = None,
) -> Any:
    """The expected error and the ``level`` half-width against epsilon, both axes log."""
    ax = _axes(ax)
    eps = np.asarray(epsilons, dtype=np.float64)
    ax.plot(eps, np.asarray(half_widths, dtype=np.float64), marker="o",
            label=f"{level * 100:g}% interval half-width")  # fmt: skip
    if all(e is not None for e in expected):
        ax.plot(eps, np.asarray(expected, dtype=np.float64), marker="s", linestyle="--",
                label="expected error")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    return ax


def _series_parts(series: Any, level: float) -> tuple[Any, Any, Any, str]:
    """``(values, low, high, note)`` of a released Series (no interval: low/high None)."""
    acc = series._acc()
    values = series.to_numpy()
    if not acc.has_interval:
        ranks = acc.rank_error(level)
        at = f"{level * 100:g}%"
        note = f" (within {ranks:.4g} ranks at {at}; no value interval)" if ranks else ""
        return values, None, None, note
    ci = series.ci(level)
    return values, ci["low"].to_numpy(), ci["high"].to_numpy(), ""


def noisy_plot(result: Any, *, y: object = None, x: object = None, level: float = 0.95,
               title: str | None = None, ax: Any = None) -> Any:  # fmt: skip
    """``result.plot()`` of a NoisySeries (one bar per key) or a NoisyFrame (the noisy
    column ``y``, or its only one; bars labelled by the other columns, or by ``x``)."""
    if hasattr(result, "_acc"):  # a NoisySeries
        series, labels = result, [_key_text(k) for k in result.index]
        name = str(result.name) if result.name is not None else "value"
        xlabel = ", ".join(str(n) for n in result.index.names if n is not None)
    else:
        noisy = [c for c in result.accuracy if c in result.columns]
        if y is None:
            if len(noisy) != 1:
                raise PinqError(
                    f"this result has {len(noisy)} noisy columns: choose one with y= "
                    f"({', '.join(map(repr, noisy))})"
                )
            y = noisy[0]
        if y not in noisy:
            raise PinqError(f"y={y!r} is not a noisy column of this result ({', '.join(noisy)})")
        series, name = result[y], str(y)
        keys = [x] if x is not None else [c for c in result.columns if c not in result.accuracy]
        xlabel = ", ".join(map(str, keys))
        labels = [_key_text(tuple(r)) for r in result[keys].itertuples(index=False)] if keys \
            else [str(i) for i in result.index]  # fmt: skip
    values, low, high, note = _series_parts(series, level)
    count = bool(series._acc().integer)
    return release_plot(
        labels, values, low, high, count=count, level=level, ax=ax,
        title=title or f"{name}: noisy, epsilon {series._acc().epsilon}{note}",
        ylabel=name + (" (count)" if count else ""), xlabel=xlabel,
    )  # fmt: skip


def _key_text(key: object) -> str:
    if isinstance(key, tuple):
        return ", ".join(str(k) for k in key) if len(key) != 1 else str(key[0])
    return str(key)
