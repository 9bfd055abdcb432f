"""Printing answers: a result table as aligned text (noisy cells read ``value ± half-width``),
CSV or JSON (each noisy column followed by its interval)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pandas as pd

from pinqpy.errors import PinqError
from pinqpy.interfaces.errors import CliError

__all__ = ["format_result", "render_table"]


def _fmt_number(value: float, decimals: int | None = None) -> str:
    if decimals is not None:
        return f"{value:.{decimals}f}"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def _fmt_cell(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NULL"
    try:
        if pd.isna(value):  # type: ignore[arg-type]
            return "NULL"
    except (TypeError, ValueError):
        pass
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return _fmt_number(value)
    return str(value)


def _decimals(half: float) -> int:
    """Enough decimals to show two significant digits of the error."""
    if not half > 0 or math.isinf(half):
        return 0
    return max(0, min(6, 1 - math.floor(math.log10(half))))


def _intervals(result: pd.DataFrame, level: float) -> dict[str, pd.DataFrame]:
    accuracy = getattr(result, "accuracy", None)
    if not accuracy:
        return {}
    out = {}
    for column in accuracy:
        if column not in result.columns:
            continue
        try:
            out[column] = result.ci(column, level)  # type: ignore[attr-defined]
        except PinqError:
            continue
    return out


def render_table(frame: pd.DataFrame, level: float = 0.95) -> str:
    """An aligned text table; a noisy column's cells read ``value ± half-width``.

    >>> print(render_table(pd.DataFrame({"state": ["CA", "NY"], "n": [12.5, 3.0]})))
    state     n
    -----  ----
    CA     12.5
    NY        3
    """
    cis = _intervals(frame, level)
    headers = [str(c) for c in frame.columns]
    columns: list[list[str]] = []
    right: list[bool] = []
    for position, column in enumerate(frame.columns):
        series = frame.iloc[:, position]
        numeric = pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(
            series.dtype
        )
        right.append(numeric)
        ci = cis.get(column) if isinstance(column, str) else None
        if ci is None:
            columns.append([_fmt_cell(v) for v in series.tolist()])
            continue
        values: list[str] = []
        errors: list[str] = []
        for value, low, high in zip(series.tolist(), ci["low"], ci["high"], strict=True):
            half = (float(high) - float(low)) / 2
            if value is None or pd.isna(value):
                values.append("NULL")
                errors.append("")
                continue
            # Integers (a discrete mechanism's count and interval) show no decimals.
            integral = float(value).is_integer() and (math.isnan(half) or half.is_integer())
            places = 0 if integral else _decimals(half)
            values.append(_fmt_number(float(value), places))
            errors.append("" if math.isnan(half) else _fmt_number(half, places))
        vw = max(len(v) for v in values) if values else 0
        ew = max(len(e) for e in errors) if errors else 0
        columns.append(
            [
                f"{v:>{vw}} ± {e:>{ew}}" if e else f"{v:>{vw}}   {'':>{ew}}".rstrip()
                for v, e in zip(values, errors, strict=True)
            ]
        )
    widths = [
        max([len(h), *(len(c) for c in cells)]) for h, cells in zip(headers, columns, strict=True)
    ]

    def line(cells: Sequence[str]) -> str:
        parts = [
            f"{c:>{w}}" if r else f"{c:<{w}}" for c, w, r in zip(cells, widths, right, strict=True)
        ]
        return "  ".join(parts).rstrip()

    lines = [line(headers), "  ".join("-" * w for w in widths)]
    lines += [line(row) for row in zip(*columns, strict=True)] if columns else []
    return "\n".join(lines)


def _jsonable(value: object) -> object:
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()  # type: ignore[union-attr]
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, int | float | str | bool):
        return value
    try:
        if pd.isna(value):  # type: ignore[arg-type]
            return None
    except (TypeError, ValueError):
        pass
    return str(value)


def _with_intervals(result: pd.DataFrame, level: float) -> pd.DataFrame:
    """The result with ``<col>_ci_low`` / ``<col>_ci_high`` after each noisy column."""
    cis = _intervals(result, level)
    out = pd.DataFrame(index=result.index)
    for position, column in enumerate(result.columns):
        out[column] = result.iloc[:, position].to_numpy()
        if column in cis:
            out[f"{column}_ci_low"] = cis[column]["low"].to_numpy()
            out[f"{column}_ci_high"] = cis[column]["high"].to_numpy()
    return out


def format_result(result: object, fmt: str = "table", level: float = 0.95) -> str:
    """A statement's answer as text: ``table`` (aligned, ± the half-width of the ``level``
    interval), ``csv`` or ``json`` (records; each noisy column followed by its interval as
    ``<col>_ci_low`` and ``<col>_ci_high``). EXPLAIN text is printed as it is.

    >>> print(format_result(pd.DataFrame({"a": [1]}), "json"))
    [{"a": 1}]
    """
    if not isinstance(result, pd.DataFrame):
        text = str(result)
        return json.dumps({"explain": text}) if fmt == "json" else text.rstrip("\n")
    if fmt == "table":
        return render_table(result, level)
    frame = _with_intervals(result, level)
    if fmt == "csv":
        return frame.to_csv(index=False).rstrip("\n")
    if fmt == "json":
        records = [
            {str(k): _jsonable(v) for k, v in zip(frame.columns, row, strict=True)}
            for row in frame.itertuples(index=False, name=None)
        ]
        return json.dumps(records)
    raise CliError(f"unknown format {fmt!r}", 2)
