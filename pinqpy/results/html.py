"""Rich HTML reprs for Jupyter: schema, stability, budget bars and charges -- never data.

Each function returns a self-contained HTML fragment (inline CSS, no JavaScript) that the
classes expose as ``_repr_html_``:

* :func:`frame_html` -- a private frame: its schema with the declared public bounds and key
  counts, its privacy unit, and for every budget it draws on the stability and the budget's
  bar. It never reads the data: no row count, no value.
* :func:`budget_html` -- a budget: total, a bar of spent and remaining epsilon (and delta
  when the budget has one), and the charges so far.
* :func:`session_html` -- a SQL session: its private tables (schema, stability, budget) and
  public tables (columns only), then each budget as above.
* :func:`result_html` -- a released result (:class:`~pinqpy.NoisyFrame`,
  :class:`~pinqpy.NoisySeries`, :class:`~pinqpy.NoisyValue`, :class:`~pinqpy.NoisyLabel`), an
  EXPLAIN text or a plain DataFrame: the released values, which are public, with their
  confidence intervals (released tables are drawn by :mod:`pinqpy.results.release_html`).

The first three take a plain description (:mod:`pinqpy.results.panels`) that the budget, the
frame and the session build of themselves, so this module knows none of those classes. Every
piece of text is HTML-escaped. This module imports no result class either (each renders itself
through :mod:`pinqpy.results.release_html` or :func:`noisy_scalar_html`, see
:func:`result_html`), so the classes can import it.

>>> from fractions import Fraction
>>> from pinqpy.results.panels import Amount, BudgetPanel
>>> total, spent = Amount(Fraction(1), Fraction(0)), Amount(Fraction(1, 4), Fraction(0))
>>> left = Amount(Fraction(3, 4), Fraction(0))
>>> panel = BudgetPanel(None, "approx", False, total, spent, left, ((spent, "a count"),))
>>> html = budget_html(panel)
>>> "spent ε 0.25" in html and "remaining ε 0.75" in html and "a count" in html
True
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from pinqpy.results.format import _fmt, _same_values, interval_text
from pinqpy.results.panels import BudgetPanel, FramePanel, SessionPanel

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "budget_html",
    "frame_html",
    "interval_columns",
    "noisy_scalar_html",
    "result_html",
    "session_html",
]

#: How many charges a budget lists (the most recent ones); older ones are summarised.
MAX_CHARGES = 20
#: The confidence level of the intervals shown next to results.
LEVEL = 0.95

_SPENT = "#e07b39"
_LEFT = "#4caf50"
_BOX = (
    "font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:13px;"
    "line-height:1.4;max-width:46em"
)
_TABLE = "border-collapse:collapse;margin:2px 0 6px 0;font-size:12px"
_CELL = "padding:1px 8px;text-align:left;border-bottom:1px solid rgba(127,127,127,0.25)"
_MUTED = "opacity:0.7"


# -- small pieces ----------------------------------------------------------------------------
def _e(value: object) -> str:
    """Escaped text of ``value``."""
    return html.escape(str(value), quote=True)


def _num(x: object) -> str:
    """An exact budget number as pinqpy spells it (``0.25``, ``1/3``), else a short float."""
    if isinstance(x, Fraction):
        from pinqpy.core.exact import Exact

        return repr(Exact.of(x))
    return _short(float(x))  # type: ignore[arg-type]


def _short(x: float) -> str:
    if not math.isfinite(x):
        return "∞" if x > 0 else ("-∞" if x < 0 else "NaN")
    return _fmt(x)


def _stability(k: object) -> str:
    try:
        if float(k) == math.inf:  # type: ignore[arg-type]
            return "∞"
    except (TypeError, ValueError):
        return _e(k)
    if isinstance(k, Fraction):
        from pinqpy.core.exact import Exact

        return repr(Exact.of(k))
    return _e(k)


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], *, escape: bool = True) -> str:
    """A small table; cells are escaped unless ``escape`` is False (already HTML)."""
    th = "".join(f'<th style="{_CELL}">{_e(h)}</th>' for h in header)
    body = []
    for row in rows:
        cells = "".join(f'<td style="{_CELL}">{_e(c) if escape else c}</td>' for c in row)
        body.append(f"<tr>{cells}</tr>")
    return (
        f'<table style="{_TABLE}"><thead><tr>{th}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _title(kind: str, extra: str = "") -> str:
    more = f' <span style="{_MUTED}">{_e(extra)}</span>' if extra else ""
    return f"<div><b>{_e(kind)}</b>{more}</div>"


def _bar(name: str, spent: Fraction, total: Fraction, remaining: Fraction) -> str:
    """A bar of ``spent`` (orange) and ``remaining`` (green) out of ``total``, in CSS only."""
    frac = 0.0 if total <= 0 else min(max(float(spent / total), 0.0), 1.0)
    left = 0.0 if total <= 0 else min(max(float(remaining / total), 0.0), 1.0 - frac)
    pct_spent, pct_left = 100.0 * frac, 100.0 * left
    label = (
        f"spent {name} {_num(spent)} of {_num(total)} ({pct_spent:.0f}%) · "
        f"remaining {name} {_num(remaining)}"
    )
    bar = (
        f'<div role="progressbar" aria-label="{_e(name)} spent" aria-valuemin="0" '
        f'aria-valuemax="{_e(_num(total))}" aria-valuenow="{_e(_num(spent))}" '
        f'title="{_e(label)}" style="display:flex;width:16em;height:0.8em;'
        f'border:1px solid rgba(127,127,127,0.6);border-radius:3px;overflow:hidden">'
        f'<div style="width:{pct_spent:.2f}%;background:{_SPENT}"></div>'
        f'<div style="width:{pct_left:.2f}%;background:{_LEFT}"></div></div>'
    )
    return (
        '<div style="display:flex;align-items:center;gap:0.6em;margin:2px 0">'
        f"{bar}<span>{_e(label)}</span></div>"
    )


def _budget_label(budget: BudgetPanel) -> tuple[str, str]:
    """``("Budget 'name'", "accounting=..., kept in a ledger")`` (plain text)."""
    name = f" {budget.name!r}" if budget.name else ""
    model = f"accounting={budget.accounting}"
    ledger = ", kept in a ledger" if budget.in_ledger else ""
    return f"Budget{name}", f"{model}{ledger}"


def _budget_body(budget: BudgetPanel) -> str:
    """The bars and the charges of one budget."""
    total, spent, remaining = budget.total, budget.spent, budget.remaining
    parts = [_bar("ε", spent.epsilon, total.epsilon, remaining.epsilon)]
    if total.delta > 0 or spent.delta > 0:
        parts.append(_bar("δ", spent.delta, total.delta, remaining.delta))
    charges = budget.charges
    if not charges:
        parts.append(f'<div style="{_MUTED}">no charges yet</div>')
    else:
        shown = charges[-MAX_CHARGES:]
        first = len(charges) - len(shown)
        show_delta = any(c.delta > 0 for c, _ in charges)
        header = ["#", "epsilon", *(["delta"] if show_delta else []), "query"]
        rows = [
            [
                str(first + i + 1),
                _num(cost.epsilon),
                *([_num(cost.delta)] if show_delta else []),
                label,
            ]
            for i, (cost, label) in enumerate(shown)
        ]
        note = f'<div style="{_MUTED}">… {first} earlier charge(s) not shown</div>' if first else ""
        parts.append(f"<div>charges ({len(charges)}):</div>{note}{_table(header, rows)}")
    return "".join(parts)


def _box(inner: str, cls: str) -> str:
    return f'<div class="pinqpy-{cls}" style="{_BOX}">{inner}</div>'


# -- public renderers ------------------------------------------------------------------------
def budget_html(budget: BudgetPanel) -> str:
    """HTML for a budget: total, bars of spent and remaining, and the charges so far."""
    kind, extra = _budget_label(budget)
    total = budget.total
    spec = f"epsilon={_num(total.epsilon)}"
    if total.delta > 0:
        spec += f", delta={_num(total.delta)}"
    return _box(_title(kind, f"{spec}, {extra}") + _budget_body(budget), "budget")


def _schema_rows(frame: FramePanel) -> list[list[str]]:
    rows = []
    for col in frame.columns:
        b = col.bounds
        note = "privacy unit" if col.name == frame.privacy_unit else ""
        rows.append(
            [
                col.name,
                col.type,
                "" if b is None else f"[{_short(float(b[0]))}, {_short(float(b[1]))}]",
                "" if col.keys is None else f"{col.keys} public keys",
                note,
            ]
        )
    return rows


def frame_html(frame: FramePanel) -> str:
    """HTML for a private frame: schema, stability and budgets. Reads no data."""
    unit = frame.privacy_unit
    extra = f"one person = all rows with the same {unit!r}" if unit else "one person = one row"
    parts = [
        _title("PrivateFrame", extra),
        _table(["column", "type", "bounds", "keys", ""], _schema_rows(frame)),
    ]
    for k, budget in frame.stabilities:
        stab = _stability(k)
        hint = ""
        if stab == "∞":
            hint = (
                f' <span style="{_MUTED}">(unbounded contributions: use '
                "bound_contributions(max_rows=k) before aggregating)</span>"
            )
        kind, more = _budget_label(budget)
        parts.append(
            f"<div>stability <b>{stab}</b>{hint} to {_e(kind)} "
            f'<span style="{_MUTED}">(a query of epsilon here costs {stab} × epsilon; '
            f"{_e(more)})</span></div>"
        )
        parts.append(_budget_body(budget))
    return _box("".join(parts), "frame")


def session_html(session: SessionPanel) -> str:
    """HTML for a SQL session: its tables (schema only) and each budget with its charges."""
    private, public = session.private, session.public
    parts = [_title("Session", f"{len(private)} private, {len(public)} public table(s)")]
    if private:
        rows = [
            [
                name,
                ", ".join(f"{c.name}: {c.type}" for c in frame.columns),
                frame.privacy_unit or "",
                ", ".join(_stability(k) for k, _ in frame.stabilities),
            ]
            for name, frame in private
        ]
        parts.append(_table(["private table", "columns", "privacy unit", "stability"], rows))
    if public:
        rows = [[name, ", ".join(columns)] for name, columns in public]
        parts.append(_table(["public table", "columns"], rows))
    if not private and not public:
        parts.append(f'<div style="{_MUTED}">no tables registered</div>')
    for budget, names in session.budgets:
        kind, extra = _budget_label(budget)
        parts.append(
            f'<div style="margin-top:4px"><b>{_e(kind)}</b> of {_e(", ".join(names))} '
            f'<span style="{_MUTED}">({_e(extra)})</span></div>'
        )
        parts.append(_budget_body(budget))
    return _box("".join(parts), "session")


# -- results ----------------------------------------------------------------------------------
def _pandas_html(df: pd.DataFrame) -> str:
    """pandas' own notebook HTML for ``df`` (as a plain DataFrame: no recursion)."""
    import pandas as pd

    plain = pd.DataFrame(df, copy=False)
    out = pd.DataFrame._repr_html_(plain)
    return out if out is not None else plain.to_html()


def interval_columns(frame: pd.DataFrame) -> dict[str, Any]:
    """The noisy columns of a NoisyFrame whose values are still the released ones.

    Maps each such column to its accuracy. A column that was recomputed (``r["n"] * 2``
    stored back) or whose rows are not all part of the release is left out, so no interval
    is ever shown for numbers the mechanism did not release.
    """
    import numpy as np

    store = getattr(frame, "_pq_accuracy", None) or {}
    out: dict[str, Any] = {}
    for col, (acc, index) in store.items():
        if col not in frame.columns or not frame.columns.is_unique:
            continue
        try:
            positions = index.get_indexer(frame.index)
            if (positions < 0).any():
                continue
            if not _same_values(np.asarray(frame[col].values), acc.values[positions]):
                continue
        except Exception:
            continue
        if not acc.has_interval:  # a quantile released without one: no interval to show
            continue
        out[col] = acc
    return out


def _mechanisms(accuracies: dict[str, Any]) -> str:
    items = [
        f"{_e(col)}: {_e(acc.mechanism)}, epsilon {_e(acc.epsilon)}"
        + (f", delta {_e(acc.delta)}" if acc.delta > 0 else "")
        for col, acc in accuracies.items()
    ]
    return f'<div style="{_MUTED};font-size:11px">{"; ".join(items)}</div>'


def _level(level: float) -> str:
    return f"{level * 100:g}%"


def noisy_scalar_html(value: Any, level: float = LEVEL, *, label: bool = False) -> str:
    """A released NoisyValue, or an argmax's NoisyLabel (``label``), with its interval."""
    ranks = value.accuracy.rank_error(level)
    low, high = value.ci(level) if ranks is None else (0.0, 0.0)
    if ranks is not None:
        shown = _e(_short(float(value)))
        note = (
            f"within {_short(ranks)} ranks of the exact quantile with probability {level:g} "
            "(no value interval was paid for)"
        )
    elif label:
        shown = _e(str(value))  # the candidate's own spelling, whatever its type
        note = (
            f"with probability {level:g} its exact count is at most {_short(high)} below the "
            "largest count"
        )
    else:
        shown = _e(_short(float(value)))
        integer = isinstance(value, int) and isinstance(low, int)
        note = f"{_level(level)} interval {interval_text(low, high, value, integer)}"
    acc = value.accuracy
    mech = f"{acc.mechanism}, epsilon {acc.epsilon}" + (
        f", delta {acc.delta}" if acc.delta > 0 else ""
    )
    inner = (
        f"<div><b>{shown}</b> <span>{_e(note)}</span></div>"
        f'<div style="{_MUTED};font-size:11px">{_e(mech)}</div>'
    )
    return _box(inner, "result")


def result_html(result: object, level: float = LEVEL) -> str:
    """HTML for what a query released: the (public) values with their ``level`` intervals.

    Handles NoisyFrame, NoisySeries, NoisyValue, NoisyLabel, an EXPLAIN text (shown
    preformatted) and a plain DataFrame (SHOW TABLES, DESCRIBE, SHOW BUDGET).
    """
    import pandas as pd

    # NoisyFrame, NoisySeries, NoisyValue and NoisyLabel render themselves with the functions
    # above; looked up on the class, so a DataFrame column cannot stand in for it.
    own = getattr(type(result), "_result_html", None)
    if own is not None:
        return own(result, level)  # type: ignore[no-any-return]
    if isinstance(result, pd.DataFrame):
        return _pandas_html(result)
    if isinstance(result, pd.Series):
        return _pandas_html(result.to_frame())
    if isinstance(result, str):
        return f'<pre class="pinqpy-explain" style="font-size:12px">{_e(result)}</pre>'
    return f"<pre>{_e(repr(result))}</pre>"
