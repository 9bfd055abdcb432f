"""Answering one statement with the per-query epsilon and delta the command line or the
shell set, unless the statement's own OPTIONS set them."""

from __future__ import annotations

from typing import Any, Protocol

from pinqpy.sql import ast as q
from pinqpy.sql.parser import parse_statement

__all__ = ["run_statement", "summarize_statement"]


class _Answers(Protocol):
    """A session's ``sql`` (see the session protocol in :mod:`pinqpy.interfaces.shell`)."""

    def sql(self, query: str, epsilon: Any = None, delta: Any = None) -> Any: ...


def _query_options(text: str) -> set[str]:
    """The OPTIONS (...) names a statement sets itself (empty if it does not parse)."""
    try:
        statement = parse_statement(text, positions=False)
    except Exception:
        return set()
    if isinstance(statement, q.Explain):
        statement = statement.query
    return {name for name, _ in getattr(statement, "options", ())}


def run_statement(session: _Answers, text: str, epsilon: object, delta: object) -> object:
    """``session.sql`` with a default epsilon and delta that a query's OPTIONS override."""
    options = _query_options(text)
    return session.sql(
        text,
        epsilon=None if "epsilon" in options else epsilon,
        delta=None if "delta" in options else (delta or None),
    )


def summarize_statement(session: Any, text: str, epsilon: object, delta: object) -> object:
    """``session.summarize`` of one SELECT with the same defaults as :func:`run_statement`."""
    options = _query_options(text)
    return session.summarize(
        text,
        epsilon=None if "epsilon" in options else epsilon,
        delta=None if "delta" in options else (delta or None),
    )
