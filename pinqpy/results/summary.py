"""An overview of planned measurements: one row each, before anything is spent.

``frame.summarize(...)``, ``partition.summarize(...)`` and ``session.summarize(queries...)``
return the DataFrame :func:`summary_frame` builds from :class:`PlannedMeasurement` rows, one
per noisy measurement a query or call would make. Columns:

``query``
    the call (``mean(income)``) or the SQL query, for each of its measurements;
``measurement``
    the aggregate (``AVG(income)``, ``count``);
``mechanism``
    the mechanism and its parameters;
``epsilon``, ``delta``, ``rho``
    what the measurement is calibrated to (before any stability multiplier); ``rho`` is its
    zCDP cost where a budget it draws on accounts in zCDP, else NaN;
``noise_scale``
    the noise's scale (several by name for a mean: ``sum ..., count ...``);
``expected_error``, ``ci95_half_width``
    the expected absolute error and the half-width of the 95% interval (or of the level
    asked for: ``ci90_half_width``...), in ``unit``;
``unit``
    the units of both: ``rows`` for a count, the column's units (``income``), ``ranks`` for a
    quantile without a row count;
``n``
    the row count the figures are for (given as ``n=``, or public), else NaN;
``needs_n``
    True where a figure in the column's units needs a row count that was not given (a mean:
    its figures are then NaN and the note gives them per ``n``; a quantile: in ranks);
``note``
    what the figure assumes.

Nothing here reads data: every figure comes from public parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pinqpy.results.format import sig
from pinqpy.results.preview_text import scale_text

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PlannedMeasurement", "from_preview", "summary_frame"]

_NAN = math.nan


@dataclass(frozen=True)
class PlannedMeasurement:
    """One row of a summary (see the module documentation)."""

    query: str
    measurement: str
    mechanism: str
    epsilon: float
    delta: float
    rho: float | None
    noise_scale: str
    expected_error: float | None
    half_width: float | None
    unit: str
    n: float | None
    needs_n: bool
    note: str


def _unit(aggregation: str, unit: str, column: str | None) -> str:
    if unit:
        return unit
    if aggregation in ("count", "histogram", "select_keys"):
        return "rows"
    if aggregation == "variance":
        return f"{column or 'the column'}'s units squared"
    return column or "the column's units"


def from_preview(
    query: str, measurement: str, column: str | None, preview: Any
) -> PlannedMeasurement:
    """The row of an accuracy preview (:class:`~pinqpy.results.accuracy.AccuracyPreview`)."""
    needs = preview.error_times_n is not None and preview.n is None
    quantile = preview.rank_error is not None or preview.unit == "ranks"
    note = preview.note
    if needs:
        expected = getattr(preview, "expected_times_n", None)
        known = f", expected {sig(expected)}/n" if expected is not None else ""
        units = _unit(preview.aggregation, "", column)
        note = (
            f"± {sig(preview.error_times_n)}/n at {preview.level:g}{known} for n rows; pass "
            f"n= for figures in {units}"
        )
    return PlannedMeasurement(
        query=query,
        measurement=measurement,
        mechanism=preview.mechanism,
        epsilon=float(preview.epsilon),
        delta=float(getattr(preview, "delta", 0.0) or 0.0),
        rho=getattr(preview, "rho", None),
        noise_scale=scale_text(preview.noise_scale),
        expected_error=None if needs else getattr(preview, "expected", None),
        half_width=None if needs else float(preview.error),
        unit=_unit(preview.aggregation, preview.unit, column),
        n=preview.n,
        needs_n=needs or (quantile and preview.n is None),
        note=note,
    )


def _num(x: float | None) -> float:
    return _NAN if x is None else float(x)


def summary_frame(rows: list[PlannedMeasurement], level: float = 0.95) -> pd.DataFrame:
    """The summary DataFrame of ``rows``, its interval column named for ``level``."""
    import pandas as pd

    half = f"ci{level * 100:g}_half_width".replace(".", "_")
    columns = [
        "query", "measurement", "mechanism", "epsilon", "delta", "rho", "noise_scale",
        "expected_error", half, "unit", "n", "needs_n", "note",
    ]  # fmt: skip
    return pd.DataFrame([_record(r, half) for r in rows], columns=columns)


def _record(r: PlannedMeasurement, half: str) -> dict[str, object]:
    return {
        "query": r.query, "measurement": r.measurement, "mechanism": r.mechanism,
        "epsilon": r.epsilon, "delta": r.delta, "rho": _num(r.rho),
        "noise_scale": r.noise_scale, "expected_error": _num(r.expected_error),
        half: _num(r.half_width), "unit": r.unit, "n": _num(r.n), "needs_n": r.needs_n,
        "note": r.note,
    }  # fmt: skip
