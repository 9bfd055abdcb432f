"""``summarize`` and ``accuracy_curve`` of a private table: its accuracy previews, many at once
or across epsilons, before anything is spent.

Both are built on the table's own ``accuracy(...)`` (a frame's, a partition's, or a remote
frame's, which the server answers), so they read no data and charge nothing, and say what
``accuracy`` says. A plan names one aggregation:

* ``"count"``: its name alone;
* ``("mean", "income")``, ``("quantile", "age", {"q": 0.9})``: name, column, options;
* ``{"aggregation": "mean", "column": "income", "n": 500}``: the same as a mapping.

Options are ``accuracy``'s: ``epsilon``, ``delta``, ``bounds``, ``q``, ``n`` and (a frame's
key selections) ``max_groups``. The keyword arguments of :func:`summarize_plans` are every
plan's defaults; a plan's own options win. ``n`` goes only to the aggregations whose error
depends on it (means, medians, quantiles).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pinqpy.errors import PinqError
from pinqpy.results.format import sig
from pinqpy.results.plots import curve_plot
from pinqpy.results.summary import from_preview, summary_frame

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["accuracy_curve", "parse_plan", "summarize_plans"]

_OPTIONS = ("epsilon", "delta", "bounds", "q", "n", "max_groups")
_NEEDS_ROWS = ("mean", "median", "quantile")


def parse_plan(plan: object) -> tuple[str, object, dict[str, Any]]:
    """``(aggregation, column, options)`` of one plan (see the module documentation)."""
    if isinstance(plan, str):
        return plan, None, {}
    if isinstance(plan, Mapping):
        rest = dict(plan)
        kind = rest.pop("aggregation", rest.pop("kind", None))
        column = rest.pop("column", None)
        if not isinstance(kind, str):
            raise PinqError("a plan mapping needs its 'aggregation', e.g. {'aggregation': 'count'}")
        return kind, column, _options(rest)
    if isinstance(plan, tuple | list) and plan and isinstance(plan[0], str):
        if len(plan) > 3 or (len(plan) == 3 and not isinstance(plan[2], Mapping)):
            raise PinqError("a plan tuple is (aggregation, column) or (aggregation, column, {...})")
        options = _options(dict(plan[2])) if len(plan) == 3 else {}
        return plan[0], plan[1] if len(plan) > 1 else None, options
    raise PinqError(
        "each plan is an aggregation's name ('count'), a tuple ('mean', 'income') or "
        "('quantile', 'age', {'q': 0.9}), or a mapping {'aggregation': ..., 'column': ...}"
    )


def _options(given: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(_OPTIONS))
    if unknown:
        raise PinqError(f"unknown plan option {unknown[0]!r}; a plan takes {', '.join(_OPTIONS)}")
    return given


def _column_name(column: object) -> str | None:
    if column is None or isinstance(column, str):
        return column
    to_sql = getattr(column, "to_sql", None)
    return str(to_sql()) if callable(to_sql) else str(column)


def _label(kind: str, column: str | None, options: Mapping[str, Any]) -> str:
    inner = [column] if column else []
    if "q" in options and kind == "quantile":
        inner.append(f"q={options['q']:g}")
    return f"{kind}({', '.join(inner)})" if inner else kind


def _preview(table: Any, kind: str, column: object, options: dict[str, Any], level: float) -> Any:
    if options.get("epsilon") is None:
        raise PinqError(
            f"{kind}: a plan needs an epsilon: pass epsilon= to summarize() or in the plan"
        )
    given = {k: v for k, v in options.items() if v is not None}
    if kind.lower() not in _NEEDS_ROWS:
        given.pop("n", None)
    return table.accuracy(kind, column, level=level, **given)


def summarize_plans(
    table: Any,
    plans: Sequence[object],
    *,
    epsilon: float | None = None,
    delta: float | None = None,
    n: float | None = None,
    level: float = 0.95,
    per_part: bool = False,
) -> pd.DataFrame:
    """The summary DataFrame (:mod:`pinqpy.results.summary`) of ``plans`` on ``table``."""
    if not plans:
        raise PinqError("summarize() needs at least one plan, e.g. summarize('count', epsilon=0.1)")
    defaults = {"epsilon": epsilon, "delta": delta, "n": n}
    rows = []
    for plan in plans:
        kind, column, own = parse_plan(plan)
        options = {**defaults, **own}
        name = _column_name(column)
        label = _label(kind, name, options) + (" per part" if per_part else "")
        preview = _preview(table, kind, column, options, level)
        rows.append(from_preview(label, _label(kind, name, options), name, preview))
    return summary_frame(rows, level)


def accuracy_curve(
    table: Any,
    aggregation: str,
    column: object = None,
    *,
    epsilons: Iterable[float],
    level: float = 0.95,
    ax: Any = None,
    **options: Any,
) -> Any:
    """The expected error and the ``level`` half-width of ``aggregation`` against
    ``epsilons`` (a matplotlib Axes); nothing read, nothing charged."""
    eps = [float(e) for e in epsilons]
    if not eps:
        raise PinqError("accuracy_curve() needs epsilons=[...], e.g. [0.05, 0.1, 0.5, 1]")
    previews = [_preview(table, aggregation, column, {**options, "epsilon": e}, level) for e in eps]
    first = previews[0]
    if first.error_times_n is not None and first.n is None:
        raise PinqError(
            f"accuracy_curve({aggregation!r}): its error is about C/n (C = "
            f"{sig(first.error_times_n)} at epsilon {eps[0]:g}); pass n= (a guessed or public "
            "row count) for a curve in the column's units"
        )
    name = _column_name(column)
    unit = first.unit or ("rows" if aggregation in ("count", "histogram") else name or "value")
    rows = f", n = {sig(first.n)}" if first.n is not None else ""
    return curve_plot(
        eps,
        [p.expected for p in previews],
        [p.error for p in previews],
        title=f"{_label(aggregation, name, options)}: error against epsilon{rows}",
        ylabel=f"error ({unit})",
        level=level,
        ax=ax,
    )
