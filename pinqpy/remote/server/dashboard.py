"""The curator's dashboard page: who spent what, as HTML with inline SVG (no script).

:func:`dashboard_page` renders a :func:`~pinqpy.remote.server.curator.summary`:

* a table, one row per analyst and table: the budget they draw on, its total, what this
  analyst spent and what the budget spent (all its users: a group's members together),
  what remains, a bar of the budget's share used (this analyst's part dark, the rest of a
  group's lighter), the analyst's charged queries and the time of their last one;
* a plot of spending over time: for each analyst and table, the share of that budget the
  analyst had used, a step at each charge, from the first charge to the time of the page.
  One colour per analyst, one dash pattern per table. Shares, not raw amounts, so that
  budgets of different sizes and accounting models (epsilon, rho) share one axis.

Nothing on the page comes from a query: no text, plan or answer. Every text is escaped.
The page has no script; :data:`CSP` forbids any, with the one style block allowed by its
hash. :func:`login_page` is the form a browser signs in with
(:mod:`pinqpy.remote.server.sessions`).
"""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from fractions import Fraction
from html import escape
from typing import Any

from pinqpy.core.exact import Exact

__all__ = ["CSP", "SECURITY_HEADERS", "dashboard_page", "login_page"]

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; }
th, td { padding: 0.3em 0.7em; border-bottom: 1px solid #ddd; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num, td.used, td.last { white-space: nowrap; }
header { display: flex; gap: 1em; align-items: baseline; }
.note, .muted { color: #666; } .error { color: #a00; }
"""
_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
#: The pages' Content-Security-Policy: nothing but this page's own style block and forms.
CSP = (
    f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
#: The headers of every curator page.
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",  # "no-referrer" would make a form's Origin "null"
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
}
# Okabe and Ito's colour-blind-safe palette, one colour per analyst.
_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
_DASHES = ("", "6 3", "2 3", "8 3 2 3")
_SYMBOL = {"epsilon": "ε", "delta": "δ", "rho": "ρ"}
# The plot names its namespace, so it stands alone as an SVG file or image too.
_SVG_NS = "http://www.w3.org/2000/svg"


def _document(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def login_page(message: str | None = None) -> str:
    """The sign-in form (``message``: why the last try was refused)."""
    said = f'<p class="error" id="message">{escape(message)}</p>' if message else ""
    body = (
        "<h1>pinqpy · the curator's dashboard</h1>"
        f"{said}"
        '<form method="post" action="/curator/login">'
        '<label>Curator token <input type="password" name="token" autocomplete="off" '
        'required autofocus></label> <button type="submit">Sign in</button></form>'
        '<p class="note">The token is the one <code>pinqpy serve CONFIG --curator-token</code> '
        "printed; an analyst's token does not open this page.</p>"
    )
    return _document("pinqpy · sign in", body)


def dashboard_page(summary: dict[str, Any]) -> str:
    """The dashboard of a summary (see the module docstring)."""
    when = _time(summary["generated"])
    rows = summary["rows"]
    body = (
        "<h1>pinqpy · who spent what</h1>"
        f'<header><span class="muted">As of {escape(when)} · pinqpy '
        f'{escape(summary["version"])}</span> <a href="/curator">refresh</a> '
        '<form method="post" action="/curator/logout"><button type="submit">sign out'
        "</button></form></header>"
        "<h2>Budgets</h2>"
        f"{_table(rows)}"
        "<h2>Spending over time</h2>"
        f"{_plot(rows, summary['charges'], summary['generated'])}"
        '<p class="note">Amounts are exact where short; epsilon (ε) and delta (δ), or rho (ρ) '
        "for zCDP budgets. A share is the part of the budget used (the larger of ε's and "
        "δ's). Only charged queries count: an answer repeated from the cache is free. "
        "Group members share one budget per table.</p>"
    )
    return _document("pinqpy · who spent what", body)


# -- the table -------------------------------------------------------------------------------
_HEAD = (
    "Analyst", "Table", "Budget", "Total", "Spent by analyst", "Spent by budget", "Remaining",
    "Used", "Queries", "Last query",
)  # fmt: skip


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return '<p class="muted">The ledger holds no budget yet.</p>'
    head = "".join(f"<th>{h}</th>" for h in _HEAD)
    body = "".join(_table_row(r) for r in rows)
    return f'<table id="budgets"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _table_row(r: dict[str, Any]) -> str:
    analyst = r["analyst"] if r["analyst"] is not None else ""
    shown = escape(analyst) if analyst else '<span class="muted">—</span>'
    if r["group"] is not None:
        shown += f' <span class="muted">(group {escape(r["group"])})</span>'
    if not r["configured"]:
        shown += ' <span class="muted">(not in the config)</span>'
    total = r["total"]
    cells = [
        ("analyst", shown),
        ("table", escape(r["table"] or "")),
        ("budget", f"{escape(r['budget'])} <span class=\"muted\">{escape(r['accounting'])}</span>"),
        ("total num", _amount(total, total)),
        ("analyst-spent num", _amount(r["analyst_spent"], total)),
        ("spent num", _amount(r["spent"], total)),
        ("remaining num", _amount(r["remaining"], total)),
        ("used", _bar(r)),
        ("queries num", str(r["queries"])),
        ("last", escape(_time(r["last_query"])) if r["last_query"] else "—"),
    ]
    tds = "".join(f'<td class="{c}">{v}</td>' for c, v in cells)
    return (
        f'<tr data-analyst="{escape(analyst)}" data-table="{escape(r["table"] or "")}" '
        f'data-budget="{escape(r["budget"])}">{tds}</tr>'
    )


def _amount(amount: dict[str, str], total: dict[str, str]) -> str:
    """``ε 0.3, δ 1e-06`` (δ only where the budget has a delta), or ``ρ 0.0125``."""
    if "rho" in total:
        keys = ["rho"]
    else:
        keys = ["epsilon"] + (["delta"] if Fraction(total["delta"]) > 0 else [])
    return ", ".join(f"{_SYMBOL[k]} {escape(_number(amount[k]))}" for k in keys)


def _number(text: str) -> str:
    """An exact amount, exactly where that is short (``0.1``, ``1/3``), else 4 digits."""
    x = Fraction(text)
    shown = repr(Exact(x))
    return shown if len(shown) <= 10 else f"{float(x):.4g}"


def _bar(r: dict[str, Any]) -> str:
    """The budget's share used: this analyst's part, then the rest of the budget's."""
    width, height = 120, 12
    mine = min(max(r["analyst_share"], 0.0), 1.0)
    everyone = min(max(r["share"], mine), 1.0)
    w_mine, w_all = round(mine * width, 2), round(everyone * width, 2)
    label = f"{everyone:.1%} of the budget used"
    if r["group"] is not None:
        label += f" ({mine:.1%} by {r['analyst']})"
    return (
        f'<svg class="bar" width="{width}" height="{height}" role="img" '
        f'data-share="{everyone:.6f}" data-analyst-share="{mine:.6f}" '
        f'aria-label="{escape(label)}"><title>{escape(label)}</title>'
        f'<rect class="track" width="{width}" height="{height}" fill="#eee"/>'
        f'<rect class="others" width="{w_all}" height="{height}" fill="#a6c8e6"/>'
        f'<rect class="mine" width="{w_mine}" height="{height}" fill="#0072B2"/></svg>'
        f' <span class="share">{everyone:.0%}</span>'
    )


# -- the plot --------------------------------------------------------------------------------
_W, _H = 720, 260
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 12, 36
_LEGEND_ROW, _LEGEND_PER_ROW = 20, 4


def _plot(rows: list[dict[str, Any]], charges: list[dict[str, Any]], generated: str) -> str:
    """Each analyst's share of each budget over time, as an SVG line chart."""
    if not charges:
        return '<p class="muted" id="no-charges">No charge yet.</p>'
    t0 = _seconds(charges[0]["time"])
    t1 = max(_seconds(generated), max(_seconds(c["time"]) for c in charges), t0 + 1.0)
    colour = _colours(rows)
    by_row: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in charges:
        if c["analyst"] is not None:
            by_row.setdefault((c["budget"], c["analyst"]), []).append(c)
    series = []
    for i, r in enumerate(rows):
        mine = by_row.get((r["budget"], r["analyst"]), [])
        if mine:
            series.append((r, mine, colour[r["analyst"]], _DASHES[_table_index(rows, i)]))
    lines = "".join(_series(r, mine, c, d, t0, t1) for r, mine, c, d in series)
    legend = "".join(_legend(i, r, c, d) for i, (r, _, c, d) in enumerate(series))
    height = _H + _LEGEND_ROW * -(-len(series) // _LEGEND_PER_ROW)
    middle = _TOP + (_H - _TOP - _BOTTOM) / 2
    return (
        f'<svg id="spending" xmlns="{_SVG_NS}" width="{_W}" height="{height}" role="img" '
        'font-family="system-ui, sans-serif" aria-labelledby="spending-title">'
        '<title id="spending-title">Share of each budget used over time, per analyst</title>'
        f"{_axes(t0, t1)}{lines}"
        f'<text x="12" y="{middle}" font-size="11" text-anchor="middle" '
        f'transform="rotate(-90 12 {middle})">budget used</text>'
        f'<g id="legend">{legend}</g></svg>'
    )


def _colours(rows: list[dict[str, Any]]) -> dict[str, str]:
    names = list(dict.fromkeys(r["analyst"] for r in rows if r["analyst"] is not None))
    return {n: _COLOURS[i % len(_COLOURS)] for i, n in enumerate(names)}


def _table_index(rows: list[dict[str, Any]], i: int) -> int:
    """Which of its analyst's rows row ``i`` is (its dash pattern)."""
    before = [r for r in rows[:i] if r["analyst"] == rows[i]["analyst"]]
    return len(before) % len(_DASHES)


def _x(t: float, t0: float, t1: float) -> float:
    return round(_LEFT + (t - t0) / (t1 - t0) * (_W - _LEFT - _RIGHT), 1)


def _y(share: float) -> float:
    return round(_H - _BOTTOM - min(max(share, 0.0), 1.0) * (_H - _TOP - _BOTTOM), 1)


def _series(
    r: dict[str, Any], mine: list[dict[str, Any]], colour: str, dash: str, t0: float, t1: float
) -> str:
    """A step line: flat at the share used, up at each charge, on to the page's time. Charges
    within one pixel are one step, so a series has at most two points per pixel."""
    steps: dict[float, float] = {}
    for c in mine:
        steps[_x(_seconds(c["time"]), t0, t1)] = c["share_after"]
    points, level = [], 0.0
    for x, share in steps.items():
        points += [(x, _y(level)), (x, _y(share))]
        level = share
    points.append((_x(t1, t0, t1), _y(level)))
    text = " ".join(f"{x},{y}" for x, y in points)
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<g class="series" data-analyst="{escape(r["analyst"])}" '
        f'data-table="{escape(r["table"] or "")}" data-charges="{len(mine)}">'
        f"<title>{escape(r['analyst'])} · {escape(r['table'] or '')}</title>"
        f'<polyline points="{text}" fill="none" stroke="{colour}" stroke-width="2"{dashed}/>'
        "</g>"
    )


def _axes(t0: float, t1: float) -> str:
    out = []
    for share in (0, 0.25, 0.5, 0.75, 1):
        y = _y(share)
        out.append(
            f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{y}" y2="{y}" stroke="#ddd"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4}" text-anchor="end" font-size="11">'
            f"{share:.0%}</text>"
        )
    for k in range(5):
        t = t0 + (t1 - t0) * k / 4
        x = _x(t, t0, t1)
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        out.append(
            f'<text x="{x}" y="{_H - _BOTTOM + 16}" text-anchor="{anchor}" font-size="11">'
            f"{escape(_tick(t, t1 - t0))}</text>"
        )
    return f'<g class="axes">{"".join(out)}</g>'


def _legend(i: int, r: dict[str, Any], colour: str, dash: str) -> str:
    """Entry ``i`` of the legend under the plot: a stroke like its series, and its name."""
    x = _LEFT + (i % _LEGEND_PER_ROW) * (_W - _LEFT - _RIGHT) / _LEGEND_PER_ROW
    y = _H + _LEGEND_ROW * (i // _LEGEND_PER_ROW) + 4
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<g class="entry"><line x1="{x}" x2="{x + 24}" y1="{y}" y2="{y}" stroke="{colour}" '
        f'stroke-width="2"{dashed}/><text x="{x + 30}" y="{y + 4}" font-size="12">'
        f"{escape(r['analyst'])} · {escape(r['table'] or '')}</text></g>"
    )


# -- times -----------------------------------------------------------------------------------
def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _time(iso: str) -> str:
    """``2025-01-31 12:00:05 UTC``."""
    return datetime.fromisoformat(iso).astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _tick(t: float, span: float) -> str:
    when = datetime.fromtimestamp(t, UTC)
    if span < 120:
        return when.strftime("%H:%M:%S")
    if span < 2 * 86400:
        return when.strftime("%H:%M")
    return when.strftime("%Y-%m-%d")
