"""User data handed over in memory or by name (a DataFrame, relation, frame or table name) as
a plan source on its engine, and a public table read as pandas."""

from __future__ import annotations

from typing import Any

import pandas as pd

from pinqpy.engines.text import clean_text
from pinqpy.engines.wrapping.declared import declare_pandas, refuse_objects
from pinqpy.engines.wrapping.duckdb_source import (
    duckdb_declare,
    duckdb_table,
    duckdb_view,
    note_connection,
    own_duckdb,
    relation_connection,
)
from pinqpy.engines.wrapping.postgres_source import is_postgres, postgres_wrap
from pinqpy.engines.wrapping.spark_source import spark_declare, spark_session, spark_wrapped
from pinqpy.engines.wrapping.wrapped import (
    Wrapped,
    check_columns,
    check_engine,
    default_engine,
    import_duckdb,
    import_polars,
    is_duckdb_relation,
    is_polars_frame,
    is_spark_frame,
)
from pinqpy.errors import PinqError
from pinqpy.expr.types import check_declared, schema_from_pandas

__all__ = ["public_frame", "wrap", "wrap_data"]


def _polars_wrapped(data: Any, schema: object) -> Wrapped:
    """A Polars DataFrame or LazyFrame as a plan source (its types read from its schema)."""
    import_polars()
    from pinqpy.engines.polars.source import wrap_frame

    table, types, declared = wrap_frame(data, schema, declare_pandas)
    check_columns([c for c, _ in table.columns])
    return Wrapped("polars", table, types).with_sources(declared, "engine")



def wrap(
    data: object, engine: str | None, connection: Any = None, schema: object = None
) -> Wrapped:
    """Make ``data`` a plan source on ``engine`` (None: the engine the data belongs to), with
    the column types declared in ``schema`` ({column: type}) converted or cast here."""
    if isinstance(data, Wrapped):  # already opened by read_file
        if schema is not None:
            raise PinqError("schema= is given where the file is read")
        return data
    wrapped = wrap_data(data, engine, connection, schema)
    return wrapped if wrapped.type_source else wrapped.with_sources({}, "engine")


def wrap_data(data: object, engine: str | None, connection: Any, schema: object) -> Wrapped:
    """As :func:`wrap`, without filling in the type sources a wrap left empty."""
    if engine is not None:
        engine = check_engine(engine)
    if engine == "postgres" or (engine is None and is_postgres(connection)):
        return postgres_wrap(data, connection, schema)
    if connection is not None and engine not in (None, "duckdb"):
        raise PinqError("connection= is a DuckDB connection; it needs engine='duckdb'")
    if connection is not None:
        note_connection(connection)
    if isinstance(data, pd.DataFrame):
        return _wrap_pandas(data, engine, connection, schema)
    if is_duckdb_relation(data):
        if engine not in (None, "duckdb"):
            raise PinqError(f"a DuckDB relation runs on the duckdb engine, not {engine!r}")
        con = connection if connection is not None else relation_connection(data)
        rel = duckdb_declare(data, schema)
        return duckdb_view(con, lambda c: rel[0], "this relation", foreign=True).with_sources(
            rel[1], "engine"
        )
    if is_polars_frame(data):
        if engine not in (None, "polars"):
            raise PinqError(f"a Polars frame runs on the polars engine, not {engine!r}")
        return _polars_wrapped(data, schema)
    if is_spark_frame(data):
        if engine not in (None, "spark"):
            raise PinqError(f"a Spark DataFrame runs on the spark engine, not {engine!r}")
        frame, declared = spark_declare(data, schema)
        return spark_wrapped(frame).with_sources(declared, "engine")
    if isinstance(data, str):
        return _wrap_name(data, engine, connection, schema)
    raise PinqError(
        "PrivateFrame takes a pandas DataFrame, a DuckDB relation or table name, a Spark "
        f"DataFrame, or a Polars DataFrame or LazyFrame, not {type(data).__name__}"
    )


def _wrap_pandas(
    data: pd.DataFrame, engine: str | None, connection: Any, schema: object
) -> Wrapped:
    """A pandas DataFrame, its declared columns converted, on ``engine`` (None: the default
    one, or DuckDB with ``connection=``)."""
    check_columns(list(data.columns))
    declared = check_declared(schema, list(data.columns))
    data = declare_pandas(clean_text(data), declared)
    if engine is None:
        engine = "duckdb" if connection is not None else default_engine()
    if engine == "postgres":
        return postgres_wrap(data, connection, schema)
    if engine == "pandas":
        if connection is not None:
            raise PinqError("connection= is a DuckDB connection; it needs engine='duckdb'")
        return Wrapped("pandas", data, schema_from_pandas(data)).with_sources(
            declared, "engine"
        )
    refuse_objects(data, engine)
    if engine == "duckdb":
        con = connection if connection is not None else own_duckdb()
        df = data
        got = duckdb_view(con, lambda c: c.from_df(df), "the DataFrame")
        return got.with_sources(declared, "engine")
    if engine == "polars":
        import_polars()
        from pinqpy.engines.polars.source import from_pandas

        return _polars_wrapped(from_pandas(data), None).with_sources(declared, "engine")
    from pinqpy.engines.spark.types import to_spark

    got = spark_wrapped(to_spark(spark_session(), data))
    return got.with_sources(declared, "engine")


def _wrap_name(data: str, engine: str | None, connection: Any, schema: object) -> Wrapped:
    """A DuckDB or Spark table (or view) by its name."""
    if engine == "duckdb" or (engine is None and connection is not None):
        con = connection if connection is not None else import_duckdb().default_connection()
        quoted = ".".join('"' + p.replace('"', '""') + '"' for p in data.split("."))
        table = f"the table {data!r}"
        if schema is None:
            return duckdb_table(con, quoted, table)
        try:
            rel = duckdb_declare(con.sql(f"SELECT * FROM {quoted}"), schema)
        except import_duckdb().Error:
            rel = None
        if rel is None:
            return duckdb_view(con, lambda c: c.sql(f"SELECT * FROM {quoted}"), table)
        got = duckdb_view(con, lambda c: rel[0], table)
        return got.with_sources(rel[1], "engine")
    if engine == "spark":
        spark = spark_session()
        try:
            frame = spark.table(data)
        except Exception:
            raise PinqError(f"Spark has no table named {data!r}") from None
        frame, declared = spark_declare(frame, schema)
        return spark_wrapped(frame).with_sources(declared, "engine")
    raise PinqError(
        "a table name needs engine='duckdb' (with connection=...) or engine='spark'; "
        "for a file use PrivateFrame.from_parquet or from_csv"
    )


def public_frame(data: object) -> pd.DataFrame:
    """A public table as pandas (DuckDB relations and Spark DataFrames are read in full)."""
    if isinstance(data, pd.DataFrame):
        return clean_text(data)
    if is_duckdb_relation(data):
        return data.df()  # type: ignore[attr-defined]
    if is_spark_frame(data):
        return data.toPandas()  # type: ignore[attr-defined]
    if is_polars_frame(data):
        return data.lazy().collect().to_pandas()  # type: ignore[attr-defined]
    raise PinqError(
        "a public table is a pandas DataFrame, a DuckDB relation, a Spark DataFrame or a "
        f"Polars frame, not {type(data).__name__}"
    )
