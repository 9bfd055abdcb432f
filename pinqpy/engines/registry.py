"""Engines: which executor runs a plan, and how user data becomes a plan source.

pinqpy runs one plan on five engines:

========  ==========================================================  ==========================
engine    data a PrivateFrame accepts                                 executor
========  ==========================================================  ==========================
pandas    a pandas DataFrame (the default)                            in-process pandas/numpy
duckdb    a DuckDB relation, a DuckDB table name, a parquet or CSV    SQL inside DuckDB
          path, or a pandas DataFrame with ``engine="duckdb"``
spark     a Spark DataFrame, a Spark table name, a parquet or CSV     Spark SQL
          path, or a pandas DataFrame with ``engine="spark"``
polars    a Polars DataFrame or LazyFrame, a parquet or CSV path      Polars lazy queries
          (scanned lazily), or a pandas DataFrame with
          ``engine="polars"``
postgres  a table or view name with ``connection=`` a psycopg 3       SQL inside PostgreSQL
          connection or a connection string, or a pandas DataFrame
          with ``engine="postgres"`` (copied into a temporary table)
========  ==========================================================  ==========================

The engine decides only *where* exact aggregates are computed. Stabilities and charges come
from the plan, which is the same whatever runs it, and noise is added in Python afterwards by
the same mechanisms, so the engine cannot change what is charged or how it is released.

A frame's engine is fixed when it is wrapped. Frames on different engines (or on different
DuckDB connections or Spark sessions) cannot be joined or concatenated; public tables are
pandas DataFrames and every engine reads them.

This module chooses the executor that runs a plan (one per engine instance, bound once per
catalog), and it is where the rest of pinqpy finds the engines' public names. Wrapping user
data (:func:`wrap`, :func:`read_file`) is :mod:`pinqpy.engines.wrapping`'s job.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd

from pinqpy.engines.base import Executor
from pinqpy.engines.pandas.executor import PandasExecutor
from pinqpy.engines.sources import DuckDBTable, PolarsTable, PostgresTable, SparkFile
from pinqpy.engines.wrapping.files import pandas_parquet, read_file
from pinqpy.engines.wrapping.frames import public_frame, wrap
from pinqpy.engines.wrapping.wrapped import (
    ENGINES,
    Wrapped,
    default_engine,
    set_default_engine,
)
from pinqpy.errors import PinqError
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

_PANDAS = PandasExecutor()
_DUCKDB: dict[int, tuple[Any, Executor]] = {}
_SPARK: dict[int, tuple[Any, Executor]] = {}
_POLARS: list[Executor] = []  # one executor: Polars has no connection or session
_POSTGRES: dict[int, tuple[Any, Executor]] = {}


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
    if isinstance(data, PolarsTable):
        return "polars", None
    if isinstance(data, PostgresTable):
        return "postgres", data.link
    return "spark", data.sparkSession


def _home_of(plan: PlanNode, catalog: Catalog) -> tuple[str, Any]:
    homes = {(e, id(h)): (e, h) for e, h in map(_home, _sources(plan, catalog))}
    if len(homes) != 1:  # joins check this, so only a hand-built plan gets here
        raise PinqError("a plan must read tables of one engine")
    return next(iter(homes.values()))


def engine_name(plan: PlanNode, catalog: Catalog) -> str:
    """``"pandas"``, ``"duckdb"``, ``"spark"``, ``"polars"`` or ``"postgres"``."""
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
        where = {
            "duckdb": "DuckDB connection",
            "spark": "Spark session",
            "postgres": "PostgreSQL connection",
        }.get(le, "engine instance")
        raise PinqError(f"{what} needs both frames in the same {where}")


def executor_for(plan: PlanNode, catalog: Catalog) -> Executor:
    """The executor that runs ``plan``, reading its tables through ``catalog`` (one per
    DuckDB connection or Spark session, bound once per catalog: reads of one catalog's
    plans share an executor, so an engine can make them together)."""
    engine, home = _home_of(plan, catalog)
    if engine == "pandas":
        return _bound(_PANDAS, catalog)
    if engine == "polars":
        if not _POLARS:
            from pinqpy.engines.polars.executor import PolarsExecutor

            _POLARS.append(PolarsExecutor())
        return _bound(_POLARS[0], catalog)
    cache = {"duckdb": _DUCKDB, "spark": _SPARK, "postgres": _POSTGRES}[engine]
    hit = cache.get(id(home))
    if hit is None or hit[0] is not home:
        if engine == "duckdb":
            from pinqpy.engines.duckdb.executor import DuckDBExecutor

            hit = (home, DuckDBExecutor(home))
        elif engine == "postgres":
            from pinqpy.engines.postgres.executor import PostgresExecutor

            hit = (home, PostgresExecutor(home))
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
