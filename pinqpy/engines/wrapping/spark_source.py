"""Spark data as a plan source: a DataFrame, a table name or a parquet file read by name, its
declared types cast once with one Spark job."""

from __future__ import annotations

import weakref
from typing import Any

from pinqpy.engines.sources import SparkFile
from pinqpy.engines.wrapping.declared import SQL_TYPES, declare_error, refuse_declared_any
from pinqpy.engines.wrapping.file_schemas import file_schema
from pinqpy.engines.wrapping.wrapped import Wrapped, check_columns, import_spark
from pinqpy.errors import PinqError
from pinqpy.expr.types import ColumnType, check_declared

__all__ = ["spark_declare", "spark_parquet", "spark_session", "spark_wrapped"]


def spark_session() -> Any:
    from pinqpy.engines.spark.session import local_session

    import_spark()
    return local_session()


# A parquet file's Spark schema per session, by path, size and modification time (as for
# DuckDB): opening an unchanged file again does not read its footers a second time.
_SPARK_SCHEMAS: weakref.WeakKeyDictionary[Any, dict[tuple[str, int, int], Any]] = (
    weakref.WeakKeyDictionary()
)


def spark_parquet(spark: Any, path: str) -> Wrapped:
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

    schema = file_schema(_SPARK_SCHEMAS, spark, path, read)
    check_columns([f.name for f in schema.fields])
    source = "parquet.`" + path.replace("`", "``") + "`"
    return Wrapped("spark", SparkFile(spark, source, schema), spark_fields_schema(schema))


def spark_wrapped(frame: Any) -> Wrapped:
    from pinqpy.engines.spark.types import spark_schema

    check_columns(list(frame.columns))
    return Wrapped("spark", frame, spark_schema(frame))



def spark_declare(frame: Any, schema: object) -> tuple[Any, dict[str, ColumnType]]:
    """``frame`` with each declared column cast to its type (try_cast), checked once here
    with one Spark job; ``any`` cannot be declared on Spark."""
    declared = check_declared(schema, list(frame.columns))
    if not declared:
        return frame, declared
    from pyspark.sql import functions as F

    refuse_declared_any(declared, "spark")

    def q(c: str) -> str:
        return "`" + c.replace("`", "``") + "`"

    types = {**SQL_TYPES, "str": "STRING"}
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
            raise declare_error(col, ctype)
    return frame.select(
        *[casts[c].alias(c) if c in casts else F.col(q(c)) for c in frame.columns]
    ), declared
