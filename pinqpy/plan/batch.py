"""One query's scope: work that the checks and reads of one query share.

A query's canonical text, an evaluated plan node or a translation may be needed by several of
its aggregates; inside :func:`batch` they are kept once, in :func:`batch_memo`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

__all__ = ["batch", "batch_memo"]

_BATCH: ContextVar[dict[Any, Any] | None] = ContextVar("pinqpy_batch", default=None)


@contextmanager
def batch() -> Iterator[None]:
    """One query's checks and reads: within it, executors may keep work they would otherwise
    repeat (an evaluated plan node, a translation) in :func:`batch_memo`.

    A SQL query asks for several aggregates of one relation (``COUNT(*)`` and ``AVG(x)`` of
    the same join); without this each would evaluate the join again, and with it every
    aggregate of one query sees the same truncation of a person's rows. Nested scopes join
    the outer one; the memo is dropped when the outermost scope ends.
    """
    if _BATCH.get() is not None:
        yield
        return
    token = _BATCH.set({})
    try:
        yield
    finally:
        _BATCH.reset(token)


def batch_memo() -> dict[Any, Any] | None:
    """The current :func:`batch`'s memo, or None outside one. Plan nodes hash by value (deep
    and slow), so key entries by ``id(node)`` and keep the node in the value to check it."""
    return _BATCH.get()
