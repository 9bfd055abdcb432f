"""Parquet and CSV files (a path, directory or glob) as a plan source on each engine, the
types of a CSV file's columns inferred by the engine that reads it."""

from __future__ import annotations

import glob
import os
from typing import Any

import pandas as pd

from pinqpy.engines.wrapping.duckdb_source import (
    duckdb_declare,
    duckdb_parquet,
    duckdb_read,
    duckdb_view,
    own_duckdb,
)
from pinqpy.engines.wrapping.frames import wrap_data
from pinqpy.engines.wrapping.postgres_source import postgres_wrap
from pinqpy.engines.wrapping.spark_source import (
    spark_declare,
    spark_parquet,
    spark_session,
    spark_wrapped,
)
from pinqpy.engines.wrapping.wrapped import (
    Wrapped,
    check_columns,
    check_engine,
    import_polars,
    import_spark,
)
from pinqpy.errors import PinqError
from pinqpy.expr.types import check_declared

__all__ = ["pandas_parquet", "read_file"]


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
    engine = check_engine(engine)
    if engine == "postgres":
        # Read by pandas (types inferred or declared there), then copied into a temporary
        # table; a table already in the database is read where it lies with from_sql.
        got = _read_file(path, kind, "pandas", None, sep, schema)
        pg = postgres_wrap(got.data, connection, None)
        return Wrapped(pg.engine, pg.data, pg.schema, got.type_source)
    text = _check_path(path, kind)
    if "://" not in text:
        # Files read by name in each query must not depend on the directory at query time.
        text = os.path.abspath(text)
    if engine == "duckdb":
        con = connection if connection is not None else own_duckdb()
        return _read_duckdb(con, text, kind, sep, schema)
    if connection is not None:
        raise PinqError("connection= is a DuckDB connection; it needs engine='duckdb'")
    if engine == "polars":
        import_polars()
        from pinqpy.engines.polars.source import scan_file

        table, types, declared = scan_file(text, kind, sep, schema)
        check_columns([c for c, _ in table.columns])
        return Wrapped("polars", table, types).with_sources(
            declared, "inferred" if kind == "csv" else "engine"
        )
    if engine == "spark":
        return _read_spark(text, kind, sep, schema)
    return _read_pandas(text, kind, sep, schema)


def _read_duckdb(con: Any, text: str, kind: str, sep: str, schema: object) -> Wrapped:
    """A file read by DuckDB in ``con`` (see :func:`read_file`)."""
    what = f"the {kind} file {text!r}"
    if kind == "parquet":
        if schema is None:
            return duckdb_parquet(con, text)
        from pinqpy.engines.duckdb.parquet import parquet_scan

        source = parquet_scan(con, text)
        rel = duckdb_declare(duckdb_read(con, f"SELECT * FROM {source}", what), schema)
        return duckdb_view(con, lambda c: rel[0], what).with_sources(rel[1], "engine")
    if schema is None:
        return duckdb_view(con, lambda c: c.read_csv(text, sep=sep), what)
    # Declared columns are read as their text (no inference) and cast from it.
    first = duckdb_read(con, None, what, lambda: con.read_csv(text, sep=sep))
    declared = check_declared(schema, [str(c) for c in first.columns])
    as_text = {c: "VARCHAR" for c in declared}
    rel = duckdb_declare(
        duckdb_read(con, None, what, lambda: con.read_csv(text, sep=sep, dtype=as_text)),
        declared,
    )
    return duckdb_view(con, lambda c: rel[0], what).with_sources(declared, "inferred")


def _read_spark(text: str, kind: str, sep: str, schema: object) -> Wrapped:
    """A file read by Spark in the local session (see :func:`read_file`)."""
    spark = spark_session()
    # Reading a file by name in SQL is on unless the session turned it off.
    by_name = str(spark.conf.get("spark.sql.runSQLOnFiles", "true")).lower() == "true"
    if kind == "parquet" and by_name and schema is None:
        return spark_parquet(spark, text)
    try:
        if kind == "parquet":
            frame = spark.read.parquet(text)
        else:
            frame = spark.read.csv(text, header=True, inferSchema=True, sep=sep)
            if schema is not None:
                # Declared columns are read as their text (no inference) and cast.
                declared = check_declared(schema, list(frame.columns))
                T = import_spark().types
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
    frame, declared = spark_declare(frame, schema)
    return spark_wrapped(frame).with_sources(
        declared, "inferred" if kind == "csv" else "engine"
    )


def _read_pandas(text: str, kind: str, sep: str, schema: object) -> Wrapped:
    """A file read by pandas (see :func:`read_file`)."""
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
    got = wrap_data(df, "pandas", None, schema)
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
