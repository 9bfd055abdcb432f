"""The planned measurements of compiled SQL queries, as rows of a summary table.

:func:`release_rows` turns a compiled release (what EXPLAIN shows, nothing charged, nothing
read) into one :class:`~pinqpy.results.summary.PlannedMeasurement` per noisy measurement: its
mechanism, epsilon, delta and (under zCDP) rho, noise scale, and its expected error and
interval half-width in the column's units, by the figures EXPLAIN states
(:func:`~pinqpy.results.accuracy.mean_figure`, :func:`~pinqpy.results.accuracy.quantile_figure`;
``n`` the row count a grouped query's figures are per group). A GROUP BY key selection is a
row too; a public row count is a row that charges nothing.
"""

from __future__ import annotations

from typing import Any

from pinqpy.accounting.charges import usage_of
from pinqpy.noise.mechanisms import (
    MeanMechanism,
    PublicCountMechanism,
    PublicSizeMeanMechanism,
    QuantileMechanism,
)
from pinqpy.results.accuracy import mean_figure, quantile_figure
from pinqpy.results.format import sig
from pinqpy.results.preview_text import scale_text
from pinqpy.results.summary import PlannedMeasurement
from pinqpy.sql.compiler import CompiledRelease
from pinqpy.sql.explain import _column_of

__all__ = ["release_rows"]


def _scales(m: Any) -> float | dict[str, float] | None:
    if getattr(m, "noise_scale", None) is not None:
        return float(m.noise_scale)
    named = {
        name: float(getattr(m, f"{name}_noise").scale)
        for name in ("count", "sum", "sq")
        if getattr(m, f"{name}_noise", None) is not None
    }
    return named or None


def _figures(
    m: Any, label: str, n: float | None, level: float
) -> tuple[float | None, float | None, str, float | None, bool, str, Any]:
    """``(expected, half_width, unit, n, needs_n, note, noise scale)`` of a measurement."""
    column = _column_of(label)
    units = column or "the column's units"
    if isinstance(m, MeanMechanism | PublicSizeMeanMechanism):
        fig = mean_figure(m, level=level, n=n, column=column)
        if fig.n is None:
            note = (
                f"± {sig(fig.error_times_n)}/n at {level:g}, expected "
                f"{sig(fig.expected_times_n)}/n for n rows; OPTIONS (n = ...) or n= gives "
                f"figures in {units}"
            )
            return None, None, units, None, True, note, fig.noise_scale
        return fig.expected, fig.error, units, fig.n, False, fig.note, fig.noise_scale
    if isinstance(m, QuantileMechanism):
        fig = quantile_figure(m, level=level, n=n, column=column)
        unit = "ranks" if fig.n is None else units
        return fig.expected, fig.error, unit, fig.n, fig.n is None, fig.note, fig.noise_scale
    if isinstance(m, PublicCountMechanism):
        free = "the row count is public: released exactly, free"
        return 0.0, 0.0, "rows", None, False, free, 0.0
    unit = "rows" if label.upper().startswith("COUNT") else units
    expected, half = float(m.expected_error()), float(m.accuracy(level))
    return expected, half, unit, None, False, "", _scales(m)


def _row(
    query: str, label: str, m: Any, n: float | None, level: float, zcdp: bool, note: str = ""
) -> PlannedMeasurement:
    expected, half, unit, rows, needs, why, scale = _figures(m, label, n, level)
    rho = usage_of(m.charge, 1).rho if zcdp else None
    return PlannedMeasurement(
        query=query,
        measurement=label,
        mechanism=m.describe(),
        epsilon=float(m.epsilon),
        delta=float(getattr(m, "delta", 0) or 0),
        rho=None if rho is None else float(rho),
        noise_scale=scale_text(scale),
        expected_error=expected,
        half_width=half,
        unit=unit,
        n=rows,
        needs_n=needs,
        note="; ".join(t for t in (note, why) if t),
    )


def release_rows(
    rel: CompiledRelease, query: str, n: float | None = None, level: float = 0.95
) -> list[PlannedMeasurement]:
    """One row per noisy measurement of ``rel`` (the key selection's included)."""
    text = " ".join(query.split())
    zcdp = any(getattr(b, "accounting", None) == "zcdp" for b in rel.frame.stabilities())
    rows = []
    chosen = "the GROUP BY key selection"
    for i, meas in enumerate(rel.measurements):
        if i == rel.selection_index and rel.key_selection is not None:
            rows.append(_row(text, meas.label, rel.key_selection[2], None, level, zcdp, chosen))
            continue
        rows.append(_row(text, meas.label, meas.prepared.mechanism, n, level, zcdp))
    if rel.key_selection is not None and rel.selection_index is None:
        sel = rel.key_selection[2]
        rows.append(_row(text, "(GROUP BY key selection)", sel, None, level, zcdp, chosen))
    return rows
