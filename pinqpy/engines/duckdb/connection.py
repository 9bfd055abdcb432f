"""One DuckDB connection as pinqpy uses it: its calls with errors that quote no data, the
tables registered for user data and public values, and their schemas found by binding."""

from __future__ import annotations

import contextlib
import itertools
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.engines.base import Executor
from pinqpy.engines.duckdb.parquet import see_parquet_nan
from pinqpy.engines.duckdb.tables import rows_frame, rows_sql
from pinqpy.engines.sources import DuckDBTable, create_hidden_view, drop_pending_views
from pinqpy.errors import PinqError

__all__ = ["DuckDBConnection"]


class DuckDBConnection(Executor):
    """The engine plumbing of :class:`~pinqpy.engines.duckdb.executor.DuckDBExecutor`.

    Sources are pandas DataFrames (registered with the connection) or DuckDB relations of
    the same connection. ``connection`` defaults to a new in-memory database.
    """

    def __init__(self, connection: Any = None) -> None:
        import duckdb

        self._duckdb = duckdb
        self.con = connection if connection is not None else duckdb.connect()
        # A scan of a parquet file pinqpy did not write must not fold NaN tests away.
        self._run(see_parquet_nan)
        self._registered: dict[int, tuple[Any, str]] = {}
        self._schemas: dict[int, tuple[Any, list[tuple[str, str]]]] = {}
        self._view_schemas: weakref.WeakKeyDictionary[Any, list[tuple[str, str]]] = (
            weakref.WeakKeyDictionary()
        )
        self._names = itertools.count()

    # -- engine plumbing ------------------------------------------------------------------
    def _run(self, fn: Callable[[Any], Any]) -> Any:
        """Run a DuckDB call; its errors become PinqErrors that quote no data."""
        drop_pending_views()
        try:
            return fn(self.con)
        except PinqError:
            raise
        except self._duckdb.Error as exc:
            raise PinqError(
                f"the DuckDB engine failed ({type(exc).__name__}); details are hidden because "
                "they may contain private values"
            ) from None

    def _table(self, data: Any) -> str:
        """The name under which ``data`` (a DataFrame or relation) is registered."""
        if isinstance(data, DuckDBTable):
            return data.source
        hit = self._registered.get(id(data))
        if hit is not None and hit[0] is data:
            return hit[1]
        name = f"__pinq_t{next(self._names)}"
        if isinstance(data, pd.DataFrame):
            rel = self._run(lambda c: c.from_df(data))
        elif isinstance(data, self._duckdb.DuckDBPyRelation):
            rel = data
        else:
            raise PinqError(
                f"the DuckDB engine reads pandas DataFrames and DuckDB relations, not "
                f"{type(data).__name__}"
            )
        # In pinqpy's own schema, so the user's SHOW TABLES does not list it.
        source = self._run(
            lambda c: create_hidden_view(c, lambda n: rel.create_view(n, replace=True), name)
        )
        self._registered[id(data)] = (data, source)
        return source  # type: ignore[no-any-return]

    def _table_schema(self, data: Any) -> list[tuple[str, str]]:
        """(column, DuckDB type) of a source or public table, bound once per table (tables
        must not change while frames over them are in use)."""
        if isinstance(data, DuckDBTable):
            if data.columns:
                return list(data.columns)
            schema = self._view_schemas.get(data)
            if schema is None:
                schema = self._bind(f"SELECT * FROM {data.source}")
                self._view_schemas[data] = schema
            return schema
        hit = self._schemas.get(id(data))
        if hit is None or hit[0] is not data:
            hit = (data, self._bind(f"SELECT * FROM {self._table(data)}"))
            self._schemas[id(data)] = hit
        return hit[1]

    def _bind(self, sql: str) -> list[tuple[str, str]]:
        """The (column, DuckDB type) of a query, from binding it (no data is read)."""
        rel = self._run(lambda c: c.sql(sql))
        return [(str(c), str(t)) for c, t in zip(rel.columns, rel.types, strict=True)]

    def _fetch(self, sql: str) -> list[tuple[Any, ...]]:
        """Run a query and read its rows."""

        # execute binds once, where a relation (con.sql) binds on its own first. Views of
        # dropped frames are dropped between reads (drop_pending_views), never during one.
        return self._run(lambda c: c.execute(sql).fetchall())  # type: ignore[no-any-return]

    def _fetch_counts(self, sql: str) -> list[np.ndarray]:
        """Run a query of integer columns that are never NULL (positions and counts) and read
        each as one int64 array: a few thousand bucket rows cost a millisecond or two more
        as Python tuples. Any other column is an error of pinqpy's SQL, never of the data."""
        got = self._run(lambda c: c.execute(sql).fetchnumpy())
        out = []
        for col in got.values():
            if np.ma.isMaskedArray(col) and np.ma.getmaskarray(col).any():
                raise PinqError("internal error: a NULL position or count from DuckDB")
            arr = np.asarray(col)
            # A float here would be a HUGEINT read lossily: refuse it rather than round.
            if not np.issubdtype(arr.dtype, np.integer):
                raise PinqError("internal error: a position or count DuckDB read as a float")
            out.append(arr.astype(np.int64, copy=False))
        return out

    @contextlib.contextmanager
    def _rows(
        self, columns: Sequence[str], kinds: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> Iterator[str]:
        """A table of public values (keys, candidates) as a FROM item: written into the query
        when small, else registered for the duration."""
        inline = rows_sql(columns, kinds, rows)
        if inline is not None:
            yield inline
            return
        frame = rows_frame(columns, kinds, rows)
        name = self._table(frame)
        try:
            yield name
        finally:
            self._unregister(frame)

    def _unregister(self, data: pd.DataFrame) -> None:
        hit = self._registered.pop(id(data), None)
        self._schemas.pop(id(data), None)
        if hit is not None:
            name = hit[1][1:-1]
            self._run(lambda c: c.unregister(name))
