"""What the notebook HTML of a private frame and of a session shows, read off their public
facts (:mod:`pinqpy.results.panels`; :mod:`pinqpy.results.html` renders it).

A frame's description holds its schema, the declared bounds and key counts, its privacy unit
and its stability to each budget; a session's, its tables' names and schemas and the budgets
behind them. Nothing here reads the data: no row, value or row count reaches the HTML.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, Protocol

import pandas as pd

from pinqpy.accounting.budget import budget_panel
from pinqpy.results.panels import BudgetPanel, ColumnFacts, FramePanel, SessionPanel

__all__ = ["frame_panel", "session_panel"]


class _Frame(Protocol):
    """The public metadata of a :class:`~pinqpy.PrivateFrame` that its HTML shows."""

    @property
    def schema(self) -> Mapping[str, str]: ...
    @property
    def bounds(self) -> Mapping[str, tuple[float, float]]: ...
    @property
    def keys(self) -> Mapping[str, tuple[Hashable, ...]]: ...
    @property
    def privacy_unit(self) -> str | None: ...
    @property
    def stabilities(self) -> Mapping[Any, object]: ...


def _stabilities(frame: _Frame) -> dict[Any, object]:
    try:
        return dict(frame.stabilities)
    except Exception:  # a repr must never fail
        return {}


def frame_panel(frame: _Frame) -> FramePanel:
    """The description of ``frame`` its HTML shows."""
    stabilities = _stabilities(frame)
    return _described(frame, stabilities, {b: budget_panel(b) for b in stabilities})


def session_panel(
    private: Mapping[str, _Frame], public: Mapping[str, pd.DataFrame]
) -> SessionPanel:
    """The description of a session with these ``private`` frames and ``public`` tables (by
    name) its HTML shows: each budget once, with the tables that draw on it."""
    stabilities = {name: _stabilities(frame) for name, frame in private.items()}
    panels: dict[Any, BudgetPanel] = {}
    names: dict[Any, list[str]] = {}
    for name, stabs in stabilities.items():
        for budget in stabs:
            if budget not in panels:
                panels[budget] = budget_panel(budget)
            names.setdefault(budget, []).append(name)
    return SessionPanel(
        private=tuple(
            (name, _described(frame, stabilities[name], panels)) for name, frame in private.items()
        ),
        public=tuple((name, tuple(str(c) for c in df.columns)) for name, df in public.items()),
        budgets=tuple((panels[b], tuple(tables)) for b, tables in names.items()),
    )


def _described(
    frame: _Frame, stabilities: Mapping[Any, object], panels: Mapping[Any, BudgetPanel]
) -> FramePanel:
    bounds, keys = frame.bounds, frame.keys
    columns = tuple(
        ColumnFacts(
            col,
            str(ctype),
            bounds.get(col),
            None if keys.get(col) is None else len(keys[col]),
        )
        for col, ctype in frame.schema.items()
    )
    return FramePanel(
        columns, frame.privacy_unit, tuple((k, panels[b]) for b, k in stabilities.items())
    )
