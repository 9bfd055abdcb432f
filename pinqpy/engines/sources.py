"""The engine handles a plan source holds for DuckDB and Spark data.

The registry makes them when it wraps user data; the executors read them. Both import them
from here, so the executors never import the registry.
"""

from __future__ import annotations

import contextlib
import weakref
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DuckDBTable", "SparkFile", "drop_pending_views", "drop_view_when_gone"]


@dataclass(frozen=True, eq=False)
class DuckDBTable:
    """A DuckDB source: the connection it lives in, the FROM item that reads it there (a view
    pinqpy made, or a file scan such as ``read_parquet('...')``), and its (column, DuckDB
    type) pairs from when it was wrapped."""

    connection: Any = field(repr=False)
    source: str
    columns: tuple[tuple[str, str], ...] = field(default=(), repr=False)


@dataclass(frozen=True, eq=False)
class SparkFile:
    """A parquet file that Spark reads by name in each query (``parquet.`path```), as a query
    written by hand reads it, with its schema (a Spark StructType) from when it was opened."""

    session: Any = field(repr=False)
    source: str
    schema: Any = field(repr=False)


# Views of frames that are gone, dropped the next time pinqpy uses DuckDB. A finalizer runs
# whenever the garbage collector does, and a statement run then on the connection would
# discard a result being read on it (pinqpy's own or the user's).
_PENDING_DROPS: list[tuple[Any, str]] = []


def drop_view_when_gone(owner: object, connection: Any, view: str) -> None:
    """Drop ``view`` on ``connection`` once ``owner`` no longer exists (at the next use)."""
    weakref.finalize(owner, _PENDING_DROPS.append, (connection, view))


def drop_pending_views() -> None:
    """Drop the views of DuckDB frames that no longer exist."""
    while _PENDING_DROPS:
        connection, view = _PENDING_DROPS.pop()
        with contextlib.suppress(Exception):  # a closed connection has nothing left to drop
            connection.execute(f'DROP VIEW IF EXISTS "{view}"')
