"""The Spark session pinqpy runs in, pyspark imported only when used, and Spark's errors
reported without the private values their text may quote."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from pinqpy.errors import PinqError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["guard", "is_spark_dataframe", "local_session", "pyspark_sql", "spark_types"]

_INSTALL = "the Spark engine needs pyspark (and Java 17+): pip install 'pinqpy[spark]'"


def pyspark_sql() -> Any:
    try:
        import pyspark.sql
    except ImportError:
        raise PinqError(_INSTALL) from None
    return pyspark.sql


def spark_types() -> Any:
    pyspark_sql()
    import pyspark.sql.types

    return pyspark.sql.types


def is_spark_dataframe(obj: object) -> bool:
    """Whether ``obj`` is a Spark DataFrame (classic or Connect), without importing pyspark."""
    if "pyspark" not in sys.modules:
        return False
    mod = sys.modules.get("pyspark.sql.dataframe")
    if mod is not None and isinstance(obj, mod.DataFrame):
        return True
    return any(
        c.__name__ == "DataFrame" and c.__module__.startswith("pyspark.sql")
        for c in type(obj).__mro__
    )


def local_session() -> SparkSession:
    """The active Spark session, or else a local one made for pinqpy (reused afterwards)."""
    sql = pyspark_sql()
    with contextlib.suppress(Exception):  # no active or default session yet
        active = sql.SparkSession.active()
        if active is not None:
            return active  # type: ignore[no-any-return]
    builder = (
        sql.SparkSession.builder.master("local[2]")
        .appName("pinqpy")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # Two shuffle partitions leave adaptive execution nothing to coalesce, and its
        # re-planning costs each of pinqpy's short jobs about a sixth of its time.
        .config("spark.sql.adaptive.enabled", "false")
        # A pandas frame becomes a LocalRelation, and this rule evaluates a query's whole
        # projection over it inside the optimizer, row by row and interpreted: seconds for a
        # long expression over tens of thousands of rows (k-means' nearest centre), where a
        # compiled job takes a fraction. Small queries cost the same either way.
        .config(
            "spark.sql.optimizer.excludedRules",
            "org.apache.spark.sql.catalyst.optimizer.ConvertToLocalRelation",
        )
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # no private data is involved yet: keep the cause
        raise PinqError(
            f"could not start a local Spark session ({type(exc).__name__}); Spark needs Java 17 "
            "or later"
        ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark  # type: ignore[no-any-return]


# -- engine errors -----------------------------------------------------------------------------
def _engine_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = []
    with contextlib.suppress(ImportError):
        from pyspark.errors import PySparkException

        errors.append(PySparkException)
    with contextlib.suppress(ImportError):
        from py4j.protocol import Py4JError

        errors.append(Py4JError)
    return tuple(errors)


@contextlib.contextmanager
def _quiet_query_logs() -> Iterator[None]:
    """PySpark logs every SQL error with its message, which may quote private values."""
    loggers = []
    with contextlib.suppress(ImportError):
        from pyspark.logger import PySparkLogger

        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            lg = PySparkLogger.getLogger(name)
            loggers.append((lg, lg.disabled))
            lg.disabled = True
    try:
        yield
    finally:
        for lg, was in loggers:
            lg.disabled = was


def guard(what: str, fn: Callable[[], Any]) -> Any:
    """Run a Spark call; its errors become PinqErrors that quote no data."""
    with _quiet_query_logs():
        try:
            return fn()
        except PinqError:
            raise
        except _engine_errors() as exc:
            raise PinqError(
                f"the Spark engine failed while {what} ({type(exc).__name__}); details are "
                "hidden because they may contain private values"
            ) from None
