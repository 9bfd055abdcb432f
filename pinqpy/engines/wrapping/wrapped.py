"""What every wrap of user data makes and shares: :class:`Wrapped`, the engine names and
defaults, the import of an engine's package, and where each column's type came from."""

from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass, field
from typing import Any

from pinqpy.errors import PinqError
from pinqpy.expr.types import ColumnType
from pinqpy.plan.nodes import PlanNode, Source

__all__ = [
    "ENGINES",
    "Wrapped",
    "check_columns",
    "check_engine",
    "default_connection",
    "default_engine",
    "import_duckdb",
    "import_polars",
    "import_spark",
    "is_duckdb_relation",
    "is_polars_frame",
    "is_spark_frame",
    "note_type_sources",
    "set_default_connection",
    "set_default_engine",
    "type_sources",
]

ENGINES = ("pandas", "duckdb", "spark", "polars", "postgres")
# Where a pandas DataFrame given without engine= runs; pinqpy.testing.engine switches it so
# one test suite runs on every engine.
_DEFAULT = ["pandas"]
# The PostgreSQL connection such DataFrames are copied into when they run on postgres.
_DEFAULT_CONNECTION: list[Any] = [None]


def default_engine() -> str:
    return _DEFAULT[0]


def set_default_engine(engine: str) -> str:
    """Set where DataFrames given without ``engine=`` run; returns the previous setting."""
    previous = _DEFAULT[0]
    _DEFAULT[0] = check_engine(engine)
    return previous


def set_default_connection(connection: Any) -> Any:
    """Set the PostgreSQL connection (or connection string) a DataFrame given without
    ``connection=`` is copied into on the postgres engine; returns the previous one."""
    previous = _DEFAULT_CONNECTION[0]
    _DEFAULT_CONNECTION[0] = connection
    return previous



def default_connection() -> Any:
    """The PostgreSQL connection a DataFrame given without ``connection=`` is copied into."""
    return _DEFAULT_CONNECTION[0]


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
def import_duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise PinqError(
            "the DuckDB engine needs the duckdb package: pip install 'pinqpy[duckdb]'"
        ) from None
    return duckdb


def import_spark() -> Any:
    try:
        import pyspark.sql
    except ImportError:
        raise PinqError(
            "the Spark engine needs pyspark (and Java 17+): pip install 'pinqpy[spark]'"
        ) from None
    return pyspark.sql


def import_polars() -> Any:
    try:
        import polars
    except ImportError:
        raise PinqError(
            "the Polars engine needs the polars package: pip install 'pinqpy[polars]'"
        ) from None
    return polars


def is_polars_frame(data: object) -> bool:
    mod = sys.modules.get("polars")
    return mod is not None and isinstance(data, mod.DataFrame | mod.LazyFrame)



def is_duckdb_relation(data: object) -> bool:
    mod = sys.modules.get("duckdb")
    return mod is not None and isinstance(data, mod.DuckDBPyRelation)


def is_spark_frame(data: object) -> bool:
    from pinqpy.engines.spark.session import is_spark_dataframe  # imports no pyspark

    return is_spark_dataframe(data)


def check_engine(engine: object) -> str:
    if engine not in ENGINES:
        raise PinqError(f"engine must be one of {', '.join(map(repr, ENGINES))}, not {engine!r}")
    return str(engine)


# -- wrapping user data ----------------------------------------------------------------------
def check_columns(columns: list[Any]) -> None:
    if any(not isinstance(c, str) for c in columns):
        raise PinqError("every column name must be a string")
    if len(set(columns)) != len(columns):
        raise PinqError("column names must be unique")


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
