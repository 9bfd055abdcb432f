"""DuckDB data as a plan source: a relation, a table name, a DataFrame or a parquet or CSV
file, read where it lies through a view of pinqpy's (or by name), its declared types cast."""

from __future__ import annotations

import contextlib
import itertools
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from pinqpy.engines.sources import (
    DuckDBTable,
    SharedView,
    create_hidden_view,
    drop_pending_views,
    drop_view_when_gone,
)
from pinqpy.engines.wrapping.declared import SQL_TYPES, declare_error, refuse_declared_any
from pinqpy.engines.wrapping.file_schemas import file_schema
from pinqpy.engines.wrapping.wrapped import Wrapped, check_columns, import_duckdb
from pinqpy.errors import PinqError
from pinqpy.expr.types import ColumnType, check_declared

__all__ = [
    "duckdb_declare",
    "duckdb_parquet",
    "duckdb_read",
    "duckdb_table",
    "duckdb_view",
    "note_connection",
    "own_duckdb",
    "relation_connection",
]

_VIEWS = itertools.count()
_OWN_DUCKDB: list[Any] = []

def own_duckdb() -> Any:
    """pinqpy's own in-memory DuckDB connection, for data handed over without one."""
    if not _OWN_DUCKDB:
        _OWN_DUCKDB.append(import_duckdb().connect())
    return _OWN_DUCKDB[0]


# DuckDB connections pinqpy has been handed (connection=...), so that a relation of one of them
# is found later without it.
_KNOWN_CONNECTIONS: weakref.WeakSet[Any] = weakref.WeakSet()
_PROBE = itertools.count()


def note_connection(connection: Any) -> None:
    """Remember a connection passed as ``connection=``: its relations are found later."""
    with contextlib.suppress(TypeError):  # an object that cannot be weakly referenced
        _KNOWN_CONNECTIONS.add(connection)


def relation_connection(relation: Any) -> Any:
    """The connection a DuckDB relation belongs to, among the ones pinqpy knows: DuckDB's
    default connection, pinqpy's own, and every connection passed as ``connection=`` before.

    A relation does not expose its connection in DuckDB's Python API, but it runs queries in
    it (``relation.query``): each candidate connection gets its own value of a session
    variable, and the relation reads which one it sees. This reads no table and no row; the
    variable is reset afterwards."""
    duckdb = import_duckdb()
    candidates = [duckdb.default_connection(), *_OWN_DUCKDB, *_KNOWN_CONNECTIONS]
    token = f"pinq_probe_{next(_PROBE)}"
    marked = []
    try:
        for i, con in enumerate(candidates):
            with contextlib.suppress(duckdb.Error):
                con.execute(f"SET VARIABLE {token} = {i}")
                marked.append(con)
        try:
            rows = relation.query("__pinq_probe", f"SELECT getvariable('{token}')").fetchall()
        except duckdb.Error:
            rows = []
        seen = rows[0] if rows else None
    finally:
        for con in marked:
            with contextlib.suppress(duckdb.Error):
                con.execute(f"RESET VARIABLE {token}")
    if seen is None or seen[0] is None:
        raise PinqError(
            "pinqpy cannot tell which DuckDB connection this relation belongs to (a relation "
            "does not name its connection); pass the connection it belongs to as "
            "connection=con, once: later relations of that connection are found without it"
        )
    return candidates[int(seen[0])]


def duckdb_view(
    connection: Any, make: Any, what: str, *, foreign: bool = False, shared: bool = False
) -> Wrapped:
    """A view named by pinqpy over ``make(connection)``, with its schema (binding reads no
    data). ``foreign``: ``make`` returns the user's relation, which may belong to another
    connection. ``shared``: the view is held by a :class:`SharedView` (the table's ``keep``),
    dropped once that is gone, rather than with this table."""
    from pinqpy.engines.duckdb.types import duckdb_schema

    duckdb = import_duckdb()
    drop_pending_views()
    view = f"__pinq_src{next(_VIEWS)}"
    try:
        rel = make(connection)
        source = create_hidden_view(
            connection, lambda name: rel.create_view(name, replace=True), view
        )
        # The relation is bound already: its columns are the view's (no second bind).
        columns = [str(c) for c in rel.columns]
        types = [str(t) for t in rel.types]
        if foreign:
            # A relation makes its view in its own connection, which may not be this one.
            found = connection.sql(
                f"SELECT count(*) FROM duckdb_views() WHERE view_name = '{view}'"
            ).fetchall()
            if found[0][0] == 0:
                raise duckdb.CatalogException("view not in this connection")
    except duckdb.CatalogException:
        raise PinqError(
            f"{what} is not in this DuckDB connection; pass the connection it belongs to as "
            "connection=..."
        ) from None
    except duckdb.Error as exc:
        raise PinqError(f"DuckDB cannot read {what} ({type(exc).__name__})") from None
    check_columns(columns)
    pairs = tuple(zip(columns, types, strict=True))
    if shared:
        table = DuckDBTable(connection, source, pairs, keep=SharedView(connection, source))
    else:
        table = DuckDBTable(connection, source, pairs)
        # The view keeps its source (a DataFrame, a relation) alive; drop it after the frame.
        drop_view_when_gone(table, connection, source)
    return Wrapped("duckdb", table, duckdb_schema(columns, types))


@dataclass(frozen=True)
class _TableView:
    """A view pinqpy made over a table name, and what wrapping the name read last."""

    database: str
    view: SharedView
    columns: tuple[tuple[str, str], ...]
    version: int | None  # the connection's catalog version before that wrap read anything


# Per connection, the view over each table name wrapped lately (at most _TABLE_VIEWS_KEPT):
# wrapping a name again reuses it, instead of making a view (and dropping one) per wrap.
_TABLE_VIEWS: weakref.WeakKeyDictionary[Any, OrderedDict[str, _TableView]] = (
    weakref.WeakKeyDictionary()
)
_TABLE_VIEWS_KEPT = 32
_TABLE_VIEWS_LOCK = threading.Lock()  # for the cache only, never held while DuckDB runs


def _catalog_version(connection: Any) -> int | None:
    """DuckDB's count of the statements that may change what a name binds to (any DDL, USE,
    SET, ATTACH, a write or a rollback, on any connection to the database), or None where the
    Python API does not give it (then every wrap binds the table again)."""
    read = getattr(connection, "_catalog_version", None)
    if read is None:
        return None
    try:
        version = read()
    except Exception:  # a closed connection: the full path reports it
        return None
    return version if isinstance(version, int) else None


def duckdb_table(connection: Any, quoted: str, what: str) -> Wrapped:
    """A DuckDB table (or view) named ``quoted``, read through a view of pinqpy's, as
    :func:`duckdb_view` makes one; but the view for a name is made once per connection and
    database and shared by every frame wrapped over that name (it holds no data: it reads the
    table by its name in each query, exactly as a new view would).

    What the wrap reads is the same as a fresh wrap's: the table's columns and types, bound
    now. They are bound again unless DuckDB's catalog version shows that nothing that could
    change them (or the current database, or the view) has happened since the last wrap; so
    a table replaced or altered since is bound anew and, if its types changed, gets a new
    view, while the frames wrapped before keep theirs. A view's definition never changes,
    and each frame still has its own table id (its own answers).

    As before, a frame over a table name reads the table as it is when a query runs: the
    curator must not change a table while frames over it are in use."""
    from pinqpy.engines.duckdb.types import duckdb_schema

    duckdb = import_duckdb()
    drop_pending_views()
    try:
        with _TABLE_VIEWS_LOCK:
            views = _TABLE_VIEWS.setdefault(connection, OrderedDict())
            hit = views.get(quoted)
    except TypeError:  # a connection that cannot be weakly referenced: a view per wrap
        return duckdb_view(connection, lambda c: c.sql(f"SELECT * FROM {quoted}"), what)
    version = _catalog_version(connection)
    if hit is None or version is None or hit.version != version:
        try:
            rel = connection.sql(f"SELECT * FROM {quoted}")
            columns = tuple((str(c), str(t)) for c, t in zip(rel.columns, rel.types, strict=True))
            database = connection.execute("SELECT current_database()").fetchall()[0][0]
        except duckdb.Error:  # reported as a fresh wrap reports it
            with _TABLE_VIEWS_LOCK:
                views.pop(quoted, None)
            return duckdb_view(connection, lambda c: c.sql(f"SELECT * FROM {quoted}"), what)
        if hit is not None and not (hit.database == database and hit.columns == columns):
            hit = None
        if hit is not None:
            try:  # the view may have been dropped (a DROP SCHEMA, a rolled back transaction)
                seen = connection.sql(f"SELECT * FROM {hit.view.source}")
                same = [(str(c), str(t)) for c, t in zip(seen.columns, seen.types, strict=True)]
            except duckdb.Error:
                same = None
            if same != list(columns):
                hit = None
        if hit is None:
            got = duckdb_view(connection, lambda c: rel, what, shared=True)
            view = got.data.keep
            hit = _TableView(database, view, columns, version)
        else:
            hit = _TableView(database, hit.view, columns, version)
        with _TABLE_VIEWS_LOCK:
            views[quoted] = hit
            views.move_to_end(quoted)
            while len(views) > _TABLE_VIEWS_KEPT:
                views.popitem(last=False)
    names = [c for c, _ in hit.columns]
    table = DuckDBTable(connection, hit.view.source, hit.columns, keep=hit.view)
    return Wrapped("duckdb", table, duckdb_schema(names, [t for _, t in hit.columns]))


# The schema of a parquet file as a connection binds it, by the file's path, size and
# modification time: opening an unchanged file again costs no second bind (DuckDB reads the
# footer of the file for one, a millisecond, as long as many queries take).
_PARQUET_SCHEMAS: weakref.WeakKeyDictionary[Any, dict[tuple[str, int, int], Any]] = (
    weakref.WeakKeyDictionary()
)



def duckdb_parquet(connection: Any, path: str) -> Wrapped:
    """A parquet file (path, directory or glob) read by name in every query, as a query
    written by hand would: no view to make or drop, and one bind here for the schema (none
    for a file opened before and unchanged since)."""
    from pinqpy.engines.duckdb.parquet import parquet_scan
    from pinqpy.engines.duckdb.types import duckdb_schema

    duckdb = import_duckdb()
    drop_pending_views()
    source = parquet_scan(connection, path)

    def bind() -> tuple[list[str], list[str]]:
        try:
            rel = connection.sql(f"SELECT * FROM {source}")
            return [str(c) for c in rel.columns], [str(t) for t in rel.types]
        except duckdb.Error as exc:
            raise PinqError(
                f"DuckDB cannot read the parquet file {path!r} ({type(exc).__name__})"
            ) from None

    columns, types = file_schema(_PARQUET_SCHEMAS, connection, path, bind)
    check_columns(columns)
    table = DuckDBTable(connection, source, tuple(zip(columns, types, strict=True)))
    return Wrapped("duckdb", table, duckdb_schema(columns, types))



def duckdb_read(con: Any, sql: str | None, what: str, make: Any = None) -> Any:
    duckdb = import_duckdb()
    try:
        return con.sql(sql) if sql is not None else make()
    except duckdb.Error as exc:
        raise PinqError(f"DuckDB cannot read {what} ({type(exc).__name__})") from None


def duckdb_declare(rel: Any, schema: object) -> tuple[Any, dict[str, ColumnType]]:
    """``rel`` with each declared column cast to its type, checked once here with one scan
    (a value that does not cast is refused); ``any`` cannot be declared on DuckDB."""
    columns = [str(c) for c in rel.columns]
    declared = check_declared(schema, columns)
    if not declared:
        return rel, declared
    duckdb = import_duckdb()
    refuse_declared_any(declared, "duckdb")

    def q(c: str) -> str:
        return '"' + c.replace('"', '""') + '"'

    casts = {c: f"TRY_CAST({q(c)} AS {SQL_TYPES[t]})" for c, t in declared.items()}
    bad = [f"count(*) FILTER ({q(c)} IS NOT NULL AND {e} IS NULL)" for c, e in casts.items()]
    try:
        counts = rel.aggregate(", ".join(bad)).fetchall()[0]
    except duckdb.Error as exc:
        raise PinqError(f"DuckDB cannot check the declared types ({type(exc).__name__})") from None
    for (col, ctype), n in zip(declared.items(), counts, strict=True):
        if n:
            raise declare_error(col, ctype)
    select = ", ".join(f"{casts[c]} AS {q(c)}" if c in casts else q(c) for c in columns)
    return rel.project(select), declared
