"""The engine handles a plan source holds for DuckDB, Spark, Polars and PostgreSQL data.

:mod:`pinqpy.engines.wrapping` makes them when it wraps user data; the executors read them.
Both import them from here, so the executors never import the wrapping code.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "HIDDEN_SCHEMA",
    "DuckDBTable",
    "PolarsTable",
    "PostgresTable",
    "SharedView",
    "SparkFile",
    "create_hidden_view",
    "drop_pending_views",
    "drop_view_when_gone",
]

#: The schema pinqpy keeps its views in, in the database a connection is using: SHOW TABLES
#: lists the tables of the schemas on the search path only, so the user's own listing shows
#: none of pinqpy's views (SHOW ALL TABLES and duckdb_views() still do).
HIDDEN_SCHEMA = "__pinqpy"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def create_hidden_view(connection: Any, create: Callable[[str], None], name: str) -> str:
    """Make the view ``name`` on ``connection`` by ``create(name)`` (a relation's
    ``create_view``, which makes it in the connection's current schema) inside
    :data:`HIDDEN_SCHEMA`, and return the FROM item that reads it (database, schema and
    name, quoted). The connection's current schema is restored at once. A database that
    cannot take a schema (a read-only file) gets the view in its current schema."""
    try:
        db, schema = connection.execute("SELECT current_database(), current_schema()").fetchone()
        connection.execute(f"CREATE SCHEMA IF NOT EXISTS {_q(db)}.{_q(HIDDEN_SCHEMA)}")
    except Exception:  # read-only or otherwise unable: the view goes where it always went
        create(name)
        return _q(name)
    connection.execute(f"USE {_q(db)}.{_q(HIDDEN_SCHEMA)}")
    try:
        create(name)
    finally:
        connection.execute(f"USE {_q(db)}.{_q(schema)}")
    return f"{_q(db)}.{_q(HIDDEN_SCHEMA)}.{_q(name)}"


@dataclass(frozen=True, eq=False)
class DuckDBTable:
    """A DuckDB source: the connection it lives in, the FROM item that reads it there (a view
    pinqpy made, or a file scan such as ``read_parquet('...')``), and its (column, DuckDB
    type) pairs from when it was wrapped."""

    connection: Any = field(repr=False)
    source: str
    columns: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # What keeps the view alive (a SharedView read by several tables), or None.
    keep: Any = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class PostgresTable:
    """A PostgreSQL source: the link (:class:`~pinqpy.engines.postgres.connection.PostgresLink`)
    it is read through, the FROM item that reads it there (a schema-qualified table or view,
    or a temporary table pinqpy loaded a DataFrame into), and its (column, catalog type)
    pairs from when it was wrapped."""

    link: Any = field(repr=False)
    source: str
    columns: tuple[tuple[str, str], ...] = field(default=(), repr=False)


@dataclass(frozen=True, eq=False)
class SparkFile:
    """A parquet file that Spark reads by name in each query (``parquet.`path```), as a query
    written by hand reads it, with its schema (a Spark StructType) from when it was opened."""

    session: Any = field(repr=False)
    source: str
    schema: Any = field(repr=False)


@dataclass(frozen=True, eq=False)
class PolarsTable:
    """A Polars source: a LazyFrame (over the user's DataFrame or LazyFrame, or a file scan,
    read where it lies) and its (column, Polars type) pairs from when it was wrapped."""

    frame: Any = field(repr=False)
    columns: tuple[tuple[str, Any], ...] = field(default=(), repr=False)


# Views of frames that are gone, dropped the next time pinqpy uses DuckDB. A finalizer runs
# whenever the garbage collector does, and a statement run then on the connection would
# discard a result being read on it (pinqpy's own or the user's).
_PENDING_DROPS: list[tuple[Any, str]] = []


def drop_view_when_gone(owner: object, connection: Any, view: str) -> None:
    """Drop ``view`` (a quoted FROM item, as :func:`create_hidden_view` returns) on
    ``connection`` once ``owner`` no longer exists (at the next use)."""
    weakref.finalize(owner, _PENDING_DROPS.append, (connection, view))


class SharedView:
    """A view pinqpy made that several :class:`DuckDBTable` handles read (each holds it in
    ``keep``): dropped at the next use of DuckDB once none of them, and no cache, holds it.

    Only the view's name is kept: the finalizer holds the connection weakly, so a cache of
    shared views never keeps a connection alive (a connection that is gone has no view to
    drop)."""

    __slots__ = ("__weakref__", "source")

    def __init__(self, connection: Any, source: str) -> None:
        self.source = source
        try:
            ref: Callable[[], Any] = weakref.ref(connection)
        except TypeError:  # an object that cannot be weakly referenced: held as before
            ref = lambda: connection  # noqa: E731
        weakref.finalize(self, _drop_later, ref, source)


def _drop_later(ref: Callable[[], Any], view: str) -> None:
    connection = ref()
    if connection is not None:
        _PENDING_DROPS.append((connection, view))


def drop_pending_views() -> None:
    """Drop the views of DuckDB frames that no longer exist."""
    while _PENDING_DROPS:
        connection, view = _PENDING_DROPS.pop()
        with contextlib.suppress(Exception):  # a closed connection has nothing left to drop
            connection.execute(f"DROP VIEW IF EXISTS {view}")
