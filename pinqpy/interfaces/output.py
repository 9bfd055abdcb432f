"""Printing answers: a result table as aligned text or Markdown (noisy cells read ``value ±
half-width``, or ``value [low, high]`` where the interval is not centred on the value), CSV or
JSON (each noisy column followed by its interval)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import pandas as pd

from pinqpy.errors import PinqError
from pinqpy.interfaces.errors import CliError

__all__ = [
    "FORMATS",
    "format_result",
    "interval_kinds",
    "render_markdown",
    "render_table",
    "summary_text",
    "symmetric",
]

FORMATS = ("table", "csv", "json", "markdown")


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


def symmetric(value: float, low: float, high: float, places: int | None = None) -> bool:
    """Whether ``[low, high]`` is centred on ``value``, so that ``value ± half-width`` says
    exactly the interval: up to float rounding, or, given ``places``, as printed with that
    many decimals (the distances down and up read the same).

    An interval clipped to a column's bounds (a mean near 0 of a column bounded below by 0),
    a ratio's interval (a mean is a noisy sum over a noisy count) or a quantile's interval
    (built from ranks, not from a distance to the answer) can be lopsided: ``value ±
    half-width`` would then claim values outside the interval on one side and hide some inside
    it on the other, so those are printed as ``value [low, high]``.

    >>> symmetric(10.0, 7.0, 13.0), symmetric(7945.0, 0.0, 78437.0), symmetric(0.3, 0.1, 0.5)
    (True, False, True)
    >>> symmetric(44.1, 42.81, 45.36), symmetric(44.1, 42.81, 45.36, places=1)
    (False, True)
    """
    down, up = value - low, high - value
    if math.isinf(down) or math.isinf(up):
        return down == up
    if places is not None and _fmt_number(down, places) == _fmt_number(up, places):
        return True
    return math.isclose(down, up, rel_tol=1e-9, abs_tol=1e-9 * max(1.0, abs(value)))


def _noisy_cells(series: pd.Series, ci: pd.DataFrame) -> tuple[list[str], set[str]]:
    """A noisy column's cells, ``value ± half-width`` where the interval is symmetric about
    the value and ``value [low, high]`` where it is not; and which of the two (``"±"``,
    ``"[]"``) it used."""
    values: list[str] = []
    suffixes: list[tuple[str, str]] = []  # ("±", half) or ("[]", "[low, high]")
    for value, low_, high_ in zip(series.tolist(), ci["low"], ci["high"], strict=True):
        if value is None or pd.isna(value):
            values.append("NULL")
            suffixes.append(("", ""))
            continue
        value, low, high = float(value), float(low_), float(high_)
        half = (high - low) / 2
        # Integers (a discrete mechanism's count and interval) show no decimals.
        integral = value.is_integer() and (
            math.isnan(half) or (low.is_integer() and high.is_integer())
        )
        places = 0 if integral else _decimals(half)
        values.append(_fmt_number(value, places))
        if math.isnan(half):
            suffixes.append(("", ""))
        elif symmetric(value, low, high, places):
            suffixes.append(("±", _fmt_number(max(high - value, value - low), places)))
        else:
            suffixes.append(("[]", f"[{_fmt_number(low, places)}, {_fmt_number(high, places)}]"))
    vw = max((len(v) for v in values), default=0)
    ew = max((len(e) for k, e in suffixes if k == "±"), default=0)
    cells = []
    for v, (kind, text) in zip(values, suffixes, strict=True):
        if kind == "±":
            cells.append(f"{v:>{vw}} ± {text:>{ew}}")
        elif kind == "[]":
            cells.append(f"{v:>{vw}} {text}")
        else:
            cells.append(f"{v:>{vw}}")
    return cells, {kind for kind, _ in suffixes if kind}


def _cells(
    frame: pd.DataFrame, level: float
) -> tuple[list[str], list[list[str]], list[bool], set[str]]:
    """Headers, each column's cells as text, which columns align right (numbers), and how
    the noisy cells' intervals were printed (``"±"``, ``"[]"``)."""
    cis = _intervals(frame, level)
    headers = [str(c) for c in frame.columns]
    columns: list[list[str]] = []
    right: list[bool] = []
    kinds: set[str] = set()
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
        cells, used = _noisy_cells(series, ci)
        columns.append(cells)
        kinds |= used
    return headers, columns, right, kinds


def interval_kinds(frame: pd.DataFrame, level: float = 0.95) -> set[str]:
    """How :func:`render_table` prints the noisy cells' intervals: ``"±"`` (``value ±
    half-width``) and/or ``"[]"`` (``value [low, high]``)."""
    return _cells(frame, level)[3]


def render_table(frame: pd.DataFrame, level: float = 0.95) -> str:
    """An aligned text table; a noisy column's cells read ``value ± half-width`` where the
    ``level`` interval is symmetric about the value, else ``value [low, high]``
    (see :func:`symmetric`).

    >>> print(render_table(pd.DataFrame({"state": ["CA", "NY"], "n": [12.5, 3.0]})))
    state     n
    -----  ----
    CA     12.5
    NY        3
    """
    headers, columns, right, _ = _cells(frame, level)
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


def render_markdown(frame: pd.DataFrame, level: float = 0.95) -> str:
    """A Markdown (GitHub) pipe table with the same cells as :func:`render_table`.

    >>> print(render_markdown(pd.DataFrame({"state": ["CA"], "n": [3]})))
    | state | n |
    | --- | ---: |
    | CA | 3 |
    """
    headers, columns, right, _ = _cells(frame, level)

    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.strip().replace("|", "\\|") for c in cells) + " |"

    lines = [row(headers), "| " + " | ".join("---:" if r else "---" for r in right) + " |"]
    lines += [row(r) for r in zip(*columns, strict=True)] if columns else []
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
    """A statement's answer as text: ``table`` (aligned; a noisy cell reads ``value ±
    half-width`` of its ``level`` interval, or ``value [low, high]`` where the interval is
    lopsided), ``markdown`` (a pipe table of the same cells), ``csv`` or ``json`` (records;
    each noisy column followed by its interval as ``<col>_ci_low`` and ``<col>_ci_high``).
    EXPLAIN text is printed as it is (in a fenced block for ``markdown``).

    >>> print(format_result(pd.DataFrame({"a": [1]}), "json"))
    [{"a": 1}]
    """
    if not isinstance(result, pd.DataFrame):
        text = str(result)
        if fmt == "json":
            return json.dumps({"explain": text})
        if fmt == "markdown":
            return "```text\n" + text.rstrip("\n") + "\n```"
        return text.rstrip("\n")
    if fmt == "table":
        return render_table(result, level)
    if fmt == "markdown":
        return render_markdown(result, level)
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


def summary_text(table: pd.DataFrame) -> pd.DataFrame:
    """A summary table (:mod:`pinqpy.results.summary`) as the shell prints it: the columns a
    reader needs, the figures with at most 4 significant digits (a figure that needs a row
    count reads ``needs n``)."""
    from pinqpy.results.format import sig

    half = next(c for c in table.columns if str(c).endswith("_half_width"))
    shown = pd.DataFrame(
        {
            "measurement": table["measurement"],
            "mechanism": table["mechanism"],
            "epsilon": table["epsilon"],
            "expected error": [_figure(x, sig) for x in table["expected_error"]],
            f"± ({half[2:-11]}%)": [_figure(x, sig) for x in table[half]],
            "unit": table["unit"],
        }
    )
    if table["query"].nunique() > 1:
        shown.insert(0, "query", table["query"])
    if (table["delta"] > 0).any():
        shown.insert(shown.columns.get_loc("epsilon") + 1, "delta", table["delta"])
    if table["rho"].notna().any():
        rho = [_figure(x, sig) for x in table["rho"]]
        shown.insert(shown.columns.get_loc("epsilon") + 1, "rho", rho)
    return shown


def _figure(x: object, sig: object) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "needs n"
    return sig(float(x))  # type: ignore[operator, arg-type]
