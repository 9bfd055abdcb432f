"""How an accuracy preview reads: one line in a REPL, a small table in a notebook.

:func:`preview_line` is the repr of :class:`~pinqpy.results.accuracy.AccuracyPreview`: the
aggregation and its epsilon, the error at the preview's level with its unit (``/n`` for a
mean whose row count is not known), the expected error, and what it would charge, e.g.
``AccuracyPreview(count at epsilon 0.1: ± 30 rows at 95%, expected 10; would charge epsilon
0.1)``. :func:`preview_html` shows the same with the mechanism, the noise scale and the note
that says what the figure assumes. Numbers have at most 4 significant digits
(:func:`~pinqpy.results.format.sig`). Budgets are never spelt out (only what each would be
charged), and nothing here reads data: a preview holds public parameters only.
"""

from __future__ import annotations

import html
from typing import Any

from pinqpy.results.format import sig

__all__ = [
    "charge_text",
    "error_text",
    "expected_text",
    "preview_html",
    "preview_line",
    "rows_text",
    "scale_text",
]


def _unit(preview: Any) -> str:
    unit = preview.unit or ("rows" if preview.aggregation == "count" else "")
    return f" {unit}" if unit else ""


def _needs_n(preview: Any) -> bool:
    return preview.error_times_n is not None and preview.n is None


def error_text(preview: Any) -> str:
    """``± 30 rows``, ``± 409.7/n``, ``± 0.4097``: the error at the preview's level."""
    if _needs_n(preview):
        return f"± {sig(preview.error_times_n)}/n"
    return f"± {sig(preview.error)}{_unit(preview)}"


def rows_text(preview: Any) -> str:
    """`` for n = 1000`` when the figure is for a row count (given or public), else ``""``."""
    n = preview.n
    if n is None:
        return " for n rows" if _needs_n(preview) else ""
    return f" for n = {int(n) if float(n).is_integer() else sig(n)}"


def expected_text(preview: Any) -> str | None:
    """The expected absolute error in the same units, or None when unknown."""
    if _needs_n(preview):
        times_n = getattr(preview, "expected_times_n", None)
        return None if times_n is None else f"{sig(times_n)}/n"
    expected = getattr(preview, "expected", None)
    return None if expected is None else f"{sig(expected)}{_unit(preview)}"


def scale_text(scale: object) -> str:
    """A noise scale, or several by name (a mean's ``sum 1.5e+07, count 60``)."""
    if isinstance(scale, dict):
        return ", ".join(f"{name} {sig(v)}" for name, v in scale.items())
    return "" if scale is None else sig(float(scale))  # type: ignore[arg-type]


def charge_text(preview: Any) -> str:
    """``epsilon 0.1`` for one budget (or the same for each), else one figure per budget."""
    costs = [_cost(c) for c in preview.charge.values() if c.epsilon or c.delta]
    if not costs:
        return "nothing"
    if len(set(costs)) == 1:
        each = f" to each of its {len(costs)} budgets" if len(costs) > 1 else ""
        return costs[0] + each
    return "; ".join(f"{c} to budget {i}" for i, c in enumerate(costs, 1))


def _cost(cost: Any) -> str:
    eps = getattr(cost, "epsilon", cost)
    delta = getattr(cost, "delta", 0)
    text = f"epsilon {eps}"
    return text + (f", delta {sig(float(delta))}" if delta else "")


def _level(preview: Any) -> str:
    return f"{float(preview.level) * 100:g}%"


def preview_line(preview: Any) -> str:
    """The one-line repr of an accuracy preview."""
    what = f"{preview.aggregation} at epsilon {preview.epsilon}"
    figure = f"{error_text(preview)} at {_level(preview)}{rows_text(preview)}"
    expected = expected_text(preview)
    if expected is not None:
        figure += f", expected {expected}"
    if preview.threshold is not None:
        figure = f"threshold {preview.threshold} rows; a released count {figure}"
    return f"AccuracyPreview({what}: {figure}; would charge {charge_text(preview)})"


def preview_html(preview: Any) -> str:
    """A small table of the preview: what, mechanism, error, expected, noise, charge, note."""
    rows = [
        ("aggregation", f"{preview.aggregation} at epsilon {preview.epsilon}"),
        ("mechanism", preview.mechanism),
        (f"error ({_level(preview)})", error_text(preview) + rows_text(preview)),
        ("expected error", expected_text(preview) or ""),
        ("noise scale", scale_text(preview.noise_scale)),
        ("would charge", charge_text(preview)),
        ("assumes", preview.note),
        ("neighbours", getattr(preview, "neighbours", "")),
    ]
    if preview.threshold is not None:
        rows.insert(2, ("threshold", f"{preview.threshold} rows"))
    cell = "padding:1px 8px;text-align:left;border-bottom:1px solid rgba(127,127,127,0.25)"
    body = "".join(
        f'<tr><th style="{cell}">{html.escape(k)}</th>'
        f'<td style="{cell}">{html.escape(str(v))}</td></tr>'
        for k, v in rows
        if v
    )
    return (
        '<div class="pinqpy-preview"><b>accuracy preview</b> <span style="opacity:0.7">'
        "(nothing read, nothing charged)</span>"
        f'<table style="border-collapse:collapse;font-size:12px">{body}</table></div>'
    )
