"""Engines: which executor runs a plan, and how user data becomes a plan source.

pinqpy runs one plan on three engines:

========  ==========================================================  ==========================
engine    data a PrivateFrame accepts                                 executor
========  ==========================================================  ==========================
pandas    a pandas DataFrame (the default)                            in-process pandas/numpy
duckdb    a DuckDB relation, a DuckDB table name, a parquet or CSV    SQL inside DuckDB
          path, or a pandas DataFrame with ``engine="duckdb"``
spark     a Spark DataFrame, a Spark table name, a parquet or CSV     Spark SQL
          path, or a pandas DataFrame with ``engine="spark"``
========  ==========================================================  ==========================

The engine decides only *where* exact aggregates are computed. Stabilities and charges come
from the plan, which is the same whatever runs it, and noise is added in Python afterwards by
the same mechanisms, so the engine cannot change what is charged or how it is released.

A frame's engine is fixed when it is wrapped. Frames on different engines (or on different
DuckDB connections or Spark sessions) cannot be joined or concatenated; public tables are
pandas DataFrames and every engine reads them. DuckDB and Spark are imported only when used,
and a missing one is reported with the pip extra that installs it.

Data in DuckDB or Spark is read where it lies: nothing is copied into Python. As with a
pandas DataFrame, the curator should not change a table while frames over it are in use
(answers are cached per wrapped table).

Column types are fixed when a table is wrapped, from the engine's column types (a pandas
dtype, a DuckDB or Spark type), never from the values a query reads. A pandas ``object``
column is ``any`` (see :data:`pinqpy.expr.types.ANY_RULE`); DuckDB and Spark cannot hold a
column of Python objects of mixed kinds, so there it must be declared. ``schema=`` declares
types: each declared column is converted (pandas) or cast (DuckDB, Spark) once, here, and a
value that does not convert is refused before anything is charged. A CSV file's types are
inferred from the file by the engine that reads it, once, when it is wrapped.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.engines.base import Executor
from pinqpy.engines.pandas.executor import PandasExecutor
from pinqpy.engines.sources import (
    DuckDBTable,
    SharedView,
    SparkFile,
    create_hidden_view,
    drop_pending_views,
    drop_view_when_gone,
)
from pinqpy.engines.text import clean_text
from pinqpy.errors import PinqError
from pinqpy.expr.types import ColumnType, check_declared, schema_from_pandas
from pinqpy.plan.catalog import Catalog
from pinqpy.plan.nodes import PlanNode, Source, walk

__all__ = [
    "ENGINES",
    "Wrapped",
    "default_engine",
    "engine_name",
    "executor_for",
    "pandas_parquet",
    "public_frame",
    "read_file",
    "same_engine",
    "set_default_engine",
    "wrap",
]

ENGINES = ("pandas", "duckdb", "spark")

_PANDAS = PandasExecutor()
_DUCKDB: dict[int, tuple[Any, Executor]] = {}
_SPARK: dict[int, tuple[Any, Executor]] = {}
_VIEWS = itertools.count()
_OWN_DUCKDB: list[Any] = []
# Where a pandas DataFrame given without engine= runs; pinqpy.testing.engine switches it so
# one test suite runs on every engine.
_DEFAULT = ["pandas"]


def default_engine() -> str:
    return _DEFAULT[0]


def set_default_engine(engine: str) -> str:
    """Set where DataFrames given without ``engine=`` run; returns the previous setting."""
    previous = _DEFAULT[0]
    _DEFAULT[0] = _check_engine(engine)
    return previous


@dataclass(frozen=True)
class Wrapped:
    """User data made ready for a plan source."""

    engine: str
    data: Any
    schema: dict[str, ColumnType]
    # Where each column's type came from: "declared" (schema=), "inferred" (from a CSV
    # file's text when it was read) or "engine" (the engine's own column type).
    type_source: dict[str, str] = field(default_factory=dict)

    def with_sources(self, declared: dict[str, ColumnType], default: str) -> Wrapped:
        sources = {c: "declared" if c in declared else default for c in self.schema}
        return Wrapped(self.engine, self.data, self.schema, sources)


# -- importing engines ---------------------------------------------------------------------
def _import_duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise PinqError(
            "the DuckDB engine needs the duckdb package: pip install 'pinqpy[duckdb]'"
        ) from None
    return duckdb


def _import_spark() -> Any:
    try:
        import pyspark.sql
    except ImportError:
        raise PinqError(
            "the Spark engine needs pyspark (and Java 17+): pip install 'pinqpy[spark]'"
        ) from None
    return pyspark.sql


def _is_duckdb_relation(data: object) -> bool:
    mod = sys.modules.get("duckdb")
    return mod is not None and isinstance(data, mod.DuckDBPyRelation)


def _is_spark_frame(data: object) -> bool:
    from pinqpy.engines.spark.session import is_spark_dataframe  # imports no pyspark

    return is_spark_dataframe(data)


def _check_engine(engine: object) -> str:
    if engine not in ENGINES:
        raise PinqError(f"engine must be one of {', '.join(map(repr, ENGINES))}, not {engine!r}")
    return str(engine)


# -- wrapping user data ----------------------------------------------------------------------
def _check_columns(columns: list[Any]) -> None:
    if any(not isinstance(c, str) for c in columns):
        raise PinqError("every column name must be a string")
    if len(set(columns)) != len(columns):
        raise PinqError("column names must be unique")


def _own_duckdb() -> Any:
    """pinqpy's own in-memory DuckDB connection, for data handed over without one."""
    if not _OWN_DUCKDB:
        _OWN_DUCKDB.append(_import_duckdb().connect())
    return _OWN_DUCKDB[0]


# DuckDB connections pinqpy has been handed (connection=...), so that a relation of one of them
# is found later without it.
_KNOWN_CONNECTIONS: weakref.WeakSet[Any] = weakref.WeakSet()
_PROBE = itertools.count()


def relation_connection(relation: Any) -> Any:
    """The connection a DuckDB relation belongs to, among the ones pinqpy knows: DuckDB's
    default connection, pinqpy's own, and every connection passed as ``connection=`` before.

    A relation does not expose its connection in DuckDB's Python API, but it runs queries in
    it (``relation.query``): each candidate connection gets its own value of a session
    variable, and the relation reads which one it sees. This reads no table and no row; the
    variable is reset afterwards."""
    duckdb = _import_duckdb()
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


def _duckdb_view(
    connection: Any, make: Any, what: str, *, foreign: bool = False, shared: bool = False
) -> Wrapped:
    """A view named by pinqpy over ``make(connection)``, with its schema (binding reads no
    data). ``foreign``: ``make`` returns the user's relation, which may belong to another
    connection. ``shared``: the view is held by a :class:`SharedView` (the table's ``keep``),
    dropped once that is gone, rather than with this table."""
    from pinqpy.engines.duckdb.types import duckdb_schema

    duckdb = _import_duckdb()
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
    _check_columns(columns)
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


def _duckdb_table(connection: Any, quoted: str, what: str) -> Wrapped:
    """A DuckDB table (or view) named ``quoted``, read through a view of pinqpy's, as
    :func:`_duckdb_view` makes one; but the view for a name is made once per connection and
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

    duckdb = _import_duckdb()
    drop_pending_views()
    try:
        with _TABLE_VIEWS_LOCK:
            views = _TABLE_VIEWS.setdefault(connection, OrderedDict())
            hit = views.get(quoted)
    except TypeError:  # a connection that cannot be weakly referenced: a view per wrap
        return _duckdb_view(connection, lambda c: c.sql(f"SELECT * FROM {quoted}"), what)
    version = _catalog_version(connection)
    if hit is None or version is None or hit.version != version:
        try:
            rel = connection.sql(f"SELECT * FROM {quoted}")
            columns = tuple((str(c), str(t)) for c, t in zip(rel.columns, rel.types, strict=True))
            database = connection.execute("SELECT current_database()").fetchall()[0][0]
        except duckdb.Error:  # reported as a fresh wrap reports it
            with _TABLE_VIEWS_LOCK:
                views.pop(quoted, None)
            return _duckdb_view(connection, lambda c: c.sql(f"SELECT * FROM {quoted}"), what)
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
            got = _duckdb_view(connection, lambda c: rel, what, shared=True)
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


def _file_stamp(path: str) -> tuple[str, int, int] | None:
    """(path, size, mtime) of a plain local file, else None (a glob, directory or URL)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not os.path.isfile(path):
        return None
    return (os.path.abspath(path), st.st_size, st.st_mtime_ns)


def _file_schema(
    cache: weakref.WeakKeyDictionary[Any, dict[tuple[str, int, int], Any]],
    owner: Any,
    path: str,
    read: Callable[[], Any],
) -> Any:
    """``read()``, a file's schema as ``owner`` (a connection or session) reads it, kept
    while the file is unchanged (at most 64 files per owner)."""
    stamp = _file_stamp(path)
    known = cache.setdefault(owner, {})
    hit = known.get(stamp) if stamp is not None else None
    if hit is not None:
        return hit
    found = read()
    if stamp is not None:
        if len(known) >= 64:
            known.pop(next(iter(known)))
        known[stamp] = found
    return found


def _duckdb_parquet(connection: Any, path: str) -> Wrapped:
    """A parquet file (path, directory or glob) read by name in every query, as a query
    written by hand would: no view to make or drop, and one bind here for the schema (none
    for a file opened before and unchanged since)."""
    from pinqpy.engines.duckdb.parquet import parquet_scan
    from pinqpy.engines.duckdb.types import duckdb_schema

    duckdb = _import_duckdb()
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

    columns, types = _file_schema(_PARQUET_SCHEMAS, connection, path, bind)
    _check_columns(columns)
    table = DuckDBTable(connection, source, tuple(zip(columns, types, strict=True)))
    return Wrapped("duckdb", table, duckdb_schema(columns, types))


def _spark_session() -> Any:
    from pinqpy.engines.spark.session import local_session

    _import_spark()
    return local_session()


# A parquet file's Spark schema per session, by path, size and modification time (as for
# DuckDB): opening an unchanged file again does not read its footers a second time.
_SPARK_SCHEMAS: weakref.WeakKeyDictionary[Any, dict[tuple[str, int, int], Any]] = (
    weakref.WeakKeyDictionary()
)


def _spark_parquet(spark: Any, path: str) -> Wrapped:
    """A parquet file (path, directory or glob) that each query reads by name: no DataFrame
    or temporary view to make, and the footers read here only for a file not seen before."""
    from pinqpy.engines.spark.types import spark_fields_schema

    def read() -> Any:
        try:
            return spark.read.parquet(path).schema
        except Exception as exc:
            raise PinqError(
                f"Spark cannot read the parquet file {path!r} ({type(exc).__name__})"
            ) from None

    schema = _file_schema(_SPARK_SCHEMAS, spark, path, read)
    _check_columns([f.name for f in schema.fields])
    source = "parquet.`" + path.replace("`", "``") + "`"
    return Wrapped("spark", SparkFile(spark, source, schema), spark_fields_schema(schema))


def _spark_wrapped(frame: Any) -> Wrapped:
    from pinqpy.engines.spark.types import spark_schema

    _check_columns(list(frame.columns))
    return Wrapped("spark", frame, spark_schema(frame))


def wrap(
    data: object, engine: str | None, connection: Any = None, schema: object = None
) -> Wrapped:
    """Make ``data`` a plan source on ``engine`` (None: the engine the data belongs to), with
    the column types declared in ``schema`` ({column: type}) converted or cast here."""
    if isinstance(data, Wrapped):  # already opened by read_file
        if schema is not None:
            raise PinqError("schema= is given where the file is read")
        return data
    wrapped = _wrap(data, engine, connection, schema)
    return wrapped if wrapped.type_source else wrapped.with_sources({}, "engine")


def _wrap(data: object, engine: str | None, connection: Any, schema: object) -> Wrapped:
    if engine is not None:
        engine = _check_engine(engine)
    if connection is not None and engine not in (None, "duckdb"):
        raise PinqError("connection= is a DuckDB connection; it needs engine='duckdb'")
    if connection is not None:
        with contextlib.suppress(TypeError):  # an object that cannot be weakly referenced
            _KNOWN_CONNECTIONS.add(connection)
    if isinstance(data, pd.DataFrame):
        _check_columns(list(data.columns))
        declared = check_declared(schema, list(data.columns))
        data = declare_pandas(clean_text(data), declared)
        if engine is None:
            engine = "duckdb" if connection is not None else _DEFAULT[0]
        if engine == "pandas":
            if connection is not None:
                raise PinqError("connection= is a DuckDB connection; it needs engine='duckdb'")
            return Wrapped("pandas", data, schema_from_pandas(data)).with_sources(
                declared, "engine"
            )
        _refuse_objects(data, engine)
        if engine == "duckdb":
            con = connection if connection is not None else _own_duckdb()
            df = data
            got = _duckdb_view(con, lambda c: c.from_df(df), "the DataFrame")
            return got.with_sources(declared, "engine")
        from pinqpy.engines.spark.types import to_spark

        got = _spark_wrapped(to_spark(_spark_session(), data))
        return got.with_sources(declared, "engine")
    if _is_duckdb_relation(data):
        if engine not in (None, "duckdb"):
            raise PinqError(f"a DuckDB relation runs on the duckdb engine, not {engine!r}")
        con = connection if connection is not None else relation_connection(data)
        rel = _duckdb_declare(data, schema)
        return _duckdb_view(con, lambda c: rel[0], "this relation", foreign=True).with_sources(
            rel[1], "engine"
        )
    if _is_spark_frame(data):
        if engine not in (None, "spark"):
            raise PinqError(f"a Spark DataFrame runs on the spark engine, not {engine!r}")
        frame, declared = _spark_declare(data, schema)
        return _spark_wrapped(frame).with_sources(declared, "engine")
    if isinstance(data, str):
        if engine == "duckdb" or (engine is None and connection is not None):
            con = connection if connection is not None else _import_duckdb().default_connection()
            quoted = ".".join('"' + p.replace('"', '""') + '"' for p in data.split("."))
            table = f"the table {data!r}"
            if schema is None:
                return _duckdb_table(con, quoted, table)
            try:
                rel = _duckdb_declare(con.sql(f"SELECT * FROM {quoted}"), schema)
            except _import_duckdb().Error:
                rel = None
            if rel is None:
                return _duckdb_view(con, lambda c: c.sql(f"SELECT * FROM {quoted}"), table)
            got = _duckdb_view(con, lambda c: rel[0], table)
            return got.with_sources(rel[1], "engine")
        if engine == "spark":
            spark = _spark_session()
            try:
                frame = spark.table(data)
            except Exception:
                raise PinqError(f"Spark has no table named {data!r}") from None
            frame, declared = _spark_declare(frame, schema)
            return _spark_wrapped(frame).with_sources(declared, "engine")
        raise PinqError(
            "a table name needs engine='duckdb' (with connection=...) or engine='spark'; "
            "for a file use PrivateFrame.from_parquet or from_csv"
        )
    raise PinqError(
        "PrivateFrame takes a pandas DataFrame, a DuckDB relation or table name, or a Spark "
        f"DataFrame, not {type(data).__name__}"
    )


def _check_path(path: object, kind: str) -> str:
    if not isinstance(path, str | os.PathLike):
        raise PinqError(f"from_{kind} needs a file path, not {type(path).__name__}")
    text = os.fspath(path)
    if "://" in text:  # remote storage: the engine checks it
        return text
    if glob.has_magic(text):
        if not glob.glob(text):
            raise PinqError(f"no {kind} file matches {text!r}")
    elif not os.path.exists(text):
        raise PinqError(f"{kind} file {text!r} does not exist")
    return text


def read_file(
    path: object,
    kind: str,
    engine: str,
    connection: Any = None,
    sep: str = ",",
    schema: object = None,
) -> Wrapped:
    """A parquet or CSV file (a path, directory or glob) as a plan source on ``engine``, with
    the column types declared in ``schema`` converted or cast here. A CSV file's other
    columns have the types the engine infers from the file now (``type_source``
    "inferred")."""
    got = _read_file(path, kind, engine, connection, sep, schema)
    if got.type_source:
        return got
    return got.with_sources({}, "inferred" if kind == "csv" else "engine")


def _read_file(
    path: object, kind: str, engine: str, connection: Any, sep: str, schema: object
) -> Wrapped:
    engine = _check_engine(engine)
    text = _check_path(path, kind)
    if "://" not in text:
        # Files read by name in each query must not depend on the directory at query time.
        text = os.path.abspath(text)
    if engine == "duckdb":
        con = connection if connection is not None else _own_duckdb()
        what = f"the {kind} file {text!r}"
        if kind == "parquet":
            if schema is None:
                return _duckdb_parquet(con, text)
            from pinqpy.engines.duckdb.parquet import parquet_scan

            source = parquet_scan(con, text)
            rel = _duckdb_declare(_duckdb_read(con, f"SELECT * FROM {source}", what), schema)
            return _duckdb_view(con, lambda c: rel[0], what).with_sources(rel[1], "engine")
        if schema is None:
            return _duckdb_view(con, lambda c: c.read_csv(text, sep=sep), what)
        # Declared columns are read as their text (no inference) and cast from it.
        first = _duckdb_read(con, None, what, lambda: con.read_csv(text, sep=sep))
        declared = check_declared(schema, [str(c) for c in first.columns])
        as_text = {c: "VARCHAR" for c in declared}
        rel = _duckdb_declare(
            _duckdb_read(con, None, what, lambda: con.read_csv(text, sep=sep, dtype=as_text)),
            declared,
        )
        return _duckdb_view(con, lambda c: rel[0], what).with_sources(declared, "inferred")
    if connection is not None:
        raise PinqError("connection= is a DuckDB connection; it needs engine='duckdb'")
    if engine == "spark":
        spark = _spark_session()
        # Reading a file by name in SQL is on unless the session turned it off.
        by_name = str(spark.conf.get("spark.sql.runSQLOnFiles", "true")).lower() == "true"
        if kind == "parquet" and by_name and schema is None:
            return _spark_parquet(spark, text)
        try:
            if kind == "parquet":
                frame = spark.read.parquet(text)
            else:
                frame = spark.read.csv(text, header=True, inferSchema=True, sep=sep)
                if schema is not None:
                    # Declared columns are read as their text (no inference) and cast.
                    declared = check_declared(schema, list(frame.columns))
                    T = _import_spark().types
                    fields = [
                        T.StructField(f.name, T.StringType(), True) if f.name in declared else f
                        for f in frame.schema.fields
                    ]
                    frame = spark.read.csv(text, header=True, schema=T.StructType(fields), sep=sep)
        except PinqError:
            raise
        except Exception as exc:
            raise PinqError(
                f"Spark cannot read the {kind} file {text!r} ({type(exc).__name__})"
            ) from None
        frame, declared = _spark_declare(frame, schema)
        return _spark_wrapped(frame).with_sources(
            declared, "inferred" if kind == "csv" else "engine"
        )
    try:
        if kind == "parquet":
            df = pandas_parquet(text)
        else:
            columns = pd.read_csv(text, sep=sep, nrows=0).columns
            declared = check_declared(schema, [str(c) for c in columns])
            # Declared columns are read as their text (no inference) and converted.
            df = pd.read_csv(text, sep=sep, dtype={c: "str" for c in declared} or None)
    except ImportError:
        raise PinqError(
            "pandas reads parquet with pyarrow: pip install pyarrow (or use engine='duckdb')"
        ) from None
    except PinqError:
        raise
    except Exception as exc:
        raise PinqError(
            f"pandas cannot read the {kind} file {text!r} ({type(exc).__name__})"
        ) from None
    got = _wrap(df, "pandas", None, schema)
    default = "inferred" if kind == "csv" else "engine"
    sources = {c: "declared" if s == "declared" else default for c, s in got.type_source.items()}
    return Wrapped(got.engine, got.data, got.schema, sources)


def pandas_parquet(path: str) -> pd.DataFrame:
    """A parquet file (or directory) read by pandas, its integer columns kept integers: one
    that holds a NULL becomes a nullable integer (``Int64``), where pandas alone would make
    it float64. A column's type is a public fact that must follow the file's schema, never
    its values: as float64 it would say whether a NULL is there, and a float id (the privacy
    unit, a key) hashes apart from the integer it was, so truncations would choose other
    rows than on the other engines, which read the file's own types."""
    df = pd.read_parquet(path)
    try:
        import pyarrow as pa
        import pyarrow.dataset as pads
    except ImportError:  # read by fastparquet, which has its own nullable types
        return df
    files = pads.dataset(path, format="parquet")
    widened = [
        f.name
        for f in files.schema
        if pa.types.is_integer(f.type) and f.name in df.columns and df[f.name].dtype.kind == "f"
    ]
    if widened:
        table = files.to_table(columns=widened)
        for name in widened:
            col = table.column(name).to_pandas(
                types_mapper=lambda t: pd.UInt64Dtype() if t == pa.uint64() else pd.Int64Dtype()
            )
            df[name] = col.array
    return df


# -- declared types ------------------------------------------------------------------------------
_SQL_TYPES = {
    "int": "BIGINT",
    "float": "DOUBLE",
    "str": "VARCHAR",
    "bool": "BOOLEAN",
    "datetime": "TIMESTAMP",
}


def _declare_error(col: str, ctype: str, how: str = "") -> PinqError:
    # The message names the column and type only, never a value (values are private).
    return PinqError(
        f"column {col!r} does not convert to the declared type {ctype}{how}; fix the "
        "declaration (schema=) or the data (nothing was charged)"
    )


def _to_declared(s: pd.Series, ctype: str) -> pd.Series:
    from pinqpy.expr.pandas_eval.values import _any_text

    if ctype == "any":
        return s.astype(object)
    if ctype == "str":
        if pd.api.types.is_string_dtype(s.dtype) and s.dtype != object:
            return s
        text = [_any_text(x) for x in s.to_numpy(dtype=object)]
        return pd.Series(text, index=s.index, dtype="str")
    if ctype == "datetime":
        if pd.api.types.is_datetime64_any_dtype(s.dtype):
            return s
        if s.dtype != object and not pd.api.types.is_string_dtype(s.dtype):
            raise TypeError
        return pd.to_datetime(s, errors="raise", format="ISO8601")
    if pd.api.types.is_datetime64_any_dtype(s.dtype):
        raise TypeError
    if ctype == "bool":
        if pd.api.types.is_bool_dtype(s.dtype):
            return s
        return pd.Series(pd.array(s.to_numpy(dtype=object), dtype="boolean"), index=s.index)
    if s.dtype == object or pd.api.types.is_string_dtype(s.dtype):
        objs = s.to_numpy(dtype=object)
        strs = [x.strip() if isinstance(x, str) else x for x in objs]  # bools are 0 and 1
        num = pd.to_numeric(pd.Series(strs, index=s.index, dtype=object), errors="raise")
    else:
        num = s
    if ctype == "float":
        return num.astype("float64")
    if pd.api.types.is_integer_dtype(num.dtype):
        return num
    return pd.Series(pd.array(num.to_numpy(), dtype="Int64"), index=s.index)


def declare_pandas(df: pd.DataFrame, declared: dict[str, ColumnType]) -> pd.DataFrame:
    """``df`` with each declared column converted to its type (a new frame; ``df`` is left
    as it is); a column that does not convert is refused, naming no value."""
    if not declared:
        return df
    out = {}
    for col, ctype in declared.items():
        try:
            out[col] = _to_declared(df[col], ctype)
        except Exception:
            raise _declare_error(col, ctype) from None
    return df.assign(**out)


def _holds_scalars(s: pd.Series) -> bool:
    """Whether an object column holds a value that is neither missing nor a list (a column
    of lists is one type on every engine: explode reads it). Each distinct type is looked
    at once; the values that are not containers are tested for NULL in one pass."""
    objs = s.to_numpy(dtype=object)
    codes, types = pd.factorize(np.frompyfunc(type, 1, 1)(objs))
    sets = list | tuple | set | frozenset
    lists = [issubclass(t, sets) or t.__name__ == "ndarray" for t in types]
    others = objs[~np.array([*lists, True], dtype=bool)[codes]]
    return len(others) > 0 and not bool(pd.isna(others).all())


def _refuse_objects(df: pd.DataFrame, engine: str) -> None:
    """DuckDB and Spark columns have one type each, so a column of Python objects (type
    ``any``) cannot go there, except a column of lists (explode reads it)."""
    for i, col in enumerate(df.columns):
        s = df.iloc[:, i]
        if s.dtype == object and _holds_scalars(s):
            raise PinqError(
                f"column {col!r} holds Python objects (dtype object), which pinqpy reads as "
                f"type any; the {engine} engine needs one type per column: declare it "
                f"(schema={{{col!r}: 'str'}}, or 'int', 'float', 'bool', 'datetime') or convert "
                "the column first"
            )


def _duckdb_read(con: Any, sql: str | None, what: str, make: Any = None) -> Any:
    duckdb = _import_duckdb()
    try:
        return con.sql(sql) if sql is not None else make()
    except duckdb.Error as exc:
        raise PinqError(f"DuckDB cannot read {what} ({type(exc).__name__})") from None


def _duckdb_declare(rel: Any, schema: object) -> tuple[Any, dict[str, ColumnType]]:
    """``rel`` with each declared column cast to its type, checked once here with one scan
    (a value that does not cast is refused); ``any`` cannot be declared on DuckDB."""
    columns = [str(c) for c in rel.columns]
    declared = check_declared(schema, columns)
    if not declared:
        return rel, declared
    duckdb = _import_duckdb()
    _refuse_declared_any(declared, "duckdb")

    def q(c: str) -> str:
        return '"' + c.replace('"', '""') + '"'

    casts = {c: f"TRY_CAST({q(c)} AS {_SQL_TYPES[t]})" for c, t in declared.items()}
    bad = [f"count(*) FILTER ({q(c)} IS NOT NULL AND {e} IS NULL)" for c, e in casts.items()]
    try:
        counts = rel.aggregate(", ".join(bad)).fetchall()[0]
    except duckdb.Error as exc:
        raise PinqError(f"DuckDB cannot check the declared types ({type(exc).__name__})") from None
    for (col, ctype), n in zip(declared.items(), counts, strict=True):
        if n:
            raise _declare_error(col, ctype)
    select = ", ".join(f"{casts[c]} AS {q(c)}" if c in casts else q(c) for c in columns)
    return rel.project(select), declared


def _refuse_declared_any(declared: dict[str, ColumnType], engine: str) -> None:
    """An SQL engine holds one type per column, so ``any`` cannot be declared there."""
    for col, ctype in declared.items():
        if ctype == "any":
            raise PinqError(
                f"column {col!r} cannot be declared any on the {engine} engine; declare a type"
            )


def _spark_declare(frame: Any, schema: object) -> tuple[Any, dict[str, ColumnType]]:
    """``frame`` with each declared column cast to its type (try_cast), checked once here
    with one Spark job; ``any`` cannot be declared on Spark."""
    declared = check_declared(schema, list(frame.columns))
    if not declared:
        return frame, declared
    from pyspark.sql import functions as F

    _refuse_declared_any(declared, "spark")

    def q(c: str) -> str:
        return "`" + c.replace("`", "``") + "`"

    types = {**_SQL_TYPES, "str": "STRING"}
    casts = {c: F.expr(f"try_cast({q(c)} AS {types[t]})") for c, t in declared.items()}
    checks = [
        F.sum(F.when(F.col(q(c)).isNotNull() & e.isNull(), 1).otherwise(0)).alias(f"b{i}")
        for i, (c, e) in enumerate(casts.items())
    ]
    try:
        row = frame.agg(*checks).collect()[0]
    except Exception as exc:
        raise PinqError(f"Spark cannot check the declared types ({type(exc).__name__})") from None
    for i, (col, ctype) in enumerate(declared.items()):
        if row[f"b{i}"]:
            raise _declare_error(col, ctype)
    return frame.select(
        *[casts[c].alias(c) if c in casts else F.col(q(c)) for c in frame.columns]
    ), declared


def public_frame(data: object) -> pd.DataFrame:
    """A public table as pandas (DuckDB relations and Spark DataFrames are read in full)."""
    if isinstance(data, pd.DataFrame):
        return clean_text(data)
    if _is_duckdb_relation(data):
        return data.df()  # type: ignore[attr-defined]
    if _is_spark_frame(data):
        return data.toPandas()  # type: ignore[attr-defined]
    raise PinqError(
        "a public table is a pandas DataFrame, a DuckDB relation or a Spark DataFrame, not "
        f"{type(data).__name__}"
    )


# Where each wrapped table's column types came from, for DESCRIBE (by plan source table).
_TYPE_SOURCES: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()


def note_type_sources(table: Any, wrapped: Wrapped) -> None:
    _TYPE_SOURCES[table] = dict(wrapped.type_source)


def type_sources(plan: PlanNode) -> dict[str, str]:
    """Column -> where its type came from ("declared", "inferred", "engine") for the columns
    of a plan's source tables (a column of several tables: the first found)."""
    out: dict[str, str] = {}
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, Source):
            for col, src in _TYPE_SOURCES.get(node.table, {}).items():
                out.setdefault(col, src)
        stack.extend(node.children)
    return out


# -- choosing the executor -------------------------------------------------------------------
def _sources(plan: PlanNode, catalog: Catalog) -> Iterator[Any]:
    for node in walk(plan):
        if isinstance(node, Source):
            yield catalog.data(node.table)


def _home(data: Any) -> tuple[str, Any]:
    """The engine of one source and the engine instance it lives in."""
    if isinstance(data, pd.DataFrame):
        return "pandas", None
    if isinstance(data, DuckDBTable):
        return "duckdb", data.connection
    if isinstance(data, SparkFile):
        return "spark", data.session
    return "spark", data.sparkSession


def _home_of(plan: PlanNode, catalog: Catalog) -> tuple[str, Any]:
    homes = {(e, id(h)): (e, h) for e, h in map(_home, _sources(plan, catalog))}
    if len(homes) != 1:  # joins check this, so only a hand-built plan gets here
        raise PinqError("a plan must read tables of one engine")
    return next(iter(homes.values()))


def engine_name(plan: PlanNode, catalog: Catalog) -> str:
    """``"pandas"``, ``"duckdb"`` or ``"spark"``."""
    return _home_of(plan, catalog)[0]


def same_engine(left: PlanNode, right: PlanNode, what: str, catalog: Catalog) -> None:
    """Refuse to combine frames that live in different engines (or engine instances);
    ``catalog`` names the tables of both."""
    (le, lh), (re_, rh) = _home_of(left, catalog), _home_of(right, catalog)
    if le != re_:
        raise PinqError(
            f"{what} needs both frames on one engine, but one is on {le} and the other on "
            f"{re_}; wrap both tables with the same engine"
        )
    if lh is not rh:
        where = "DuckDB connection" if le == "duckdb" else "Spark session"
        raise PinqError(f"{what} needs both frames in the same {where}")


def executor_for(plan: PlanNode, catalog: Catalog) -> Executor:
    """The executor that runs ``plan``, reading its tables through ``catalog`` (one per
    DuckDB connection or Spark session, bound once per catalog: reads of one catalog's
    plans share an executor, so an engine can make them together)."""
    engine, home = _home_of(plan, catalog)
    if engine == "pandas":
        return _bound(_PANDAS, catalog)
    cache = _DUCKDB if engine == "duckdb" else _SPARK
    hit = cache.get(id(home))
    if hit is None or hit[0] is not home:
        if engine == "duckdb":
            from pinqpy.engines.duckdb.executor import DuckDBExecutor

            hit = (home, DuckDBExecutor(home))
        else:
            from pinqpy.engines.spark.executor import SparkExecutor

            hit = (home, SparkExecutor(home))
        cache[id(home)] = hit
    return _bound(hit[1], catalog)


def _bound(executor: Executor, catalog: Catalog) -> Executor:
    """``executor`` bound to ``catalog``, made once per catalog (kept by the catalog)."""
    hit = catalog.executors.get(id(executor))
    if hit is None or hit[0] is not executor:
        hit = catalog.executors[id(executor)] = (executor, executor.bound(catalog))
    return hit[1]  # type: ignore[no-any-return]
