"""PostgreSQL data as a plan source: a table or view read where it lies, or a DataFrame copied
into a temporary table of the connection."""

from __future__ import annotations

import weakref
from typing import Any

import pandas as pd

from pinqpy.engines.sources import PostgresTable
from pinqpy.engines.text import clean_text
from pinqpy.engines.wrapping.declared import declare_pandas, refuse_declared_any, refuse_objects
from pinqpy.engines.wrapping.wrapped import Wrapped, check_columns, default_connection
from pinqpy.errors import PinqError
from pinqpy.expr.types import check_declared

__all__ = ["is_postgres", "postgres_wrap"]


def is_postgres(connection: object) -> bool:
    from pinqpy.engines.postgres.connection import is_psycopg_connection

    return isinstance(connection, str) or is_psycopg_connection(connection)


def postgres_wrap(data: object, connection: Any, schema: object) -> Wrapped:
    """A PostgreSQL table or view by name, read where it lies, or a DataFrame copied into a
    temporary table of the connection (the test hook's default connection when none is
    given). Column types come from the catalog; declared types are not cast here."""
    from pinqpy.engines.postgres.connection import link_for
    from pinqpy.engines.postgres.executor import frame_types
    from pinqpy.engines.postgres.types import postgres_schema

    if schema is not None and not isinstance(data, pd.DataFrame):
        raise PinqError(
            "schema= cannot be declared for a PostgreSQL table; wrap a view that casts the "
            "columns instead"
        )
    if connection is None:
        connection = default_connection()
    if connection is None:
        raise PinqError(
            "the postgres engine needs connection=: a psycopg 3 connection or a connection "
            "string ('postgresql://...')"
        )
    link = link_for(connection)
    if isinstance(data, str):
        source, columns = link.table(data)
        check_columns([c for c, _ in columns])
        table = PostgresTable(link, source, columns)
        names = [c for c, _ in columns]
        return Wrapped("postgres", table, postgres_schema(data, names, [t for _, t in columns]))
    if isinstance(data, pd.DataFrame):
        check_columns(list(data.columns))
        declared = check_declared(schema, list(data.columns))
        refuse_declared_any(declared, "postgres")
        df = declare_pandas(clean_text(data), declared)
        refuse_objects(df, "postgres")
        _refuse_nul(df)
        types = frame_types(df)
        source = link.load(df, types)
        table = PostgresTable(link, source, tuple(zip(map(str, df.columns), types, strict=True)))
        weakref.finalize(table, link.drop_later, source)
        got = Wrapped("postgres", table, postgres_schema("the DataFrame", list(df.columns), types))
        return got.with_sources(declared, "engine")
    raise PinqError(
        "the postgres engine takes a table or view name (with connection=) or a pandas "
        f"DataFrame, not {type(data).__name__}"
    )


def _refuse_nul(df: pd.DataFrame) -> None:
    """PostgreSQL text cannot hold the character U+0000: refuse it when the table is wrapped."""
    for c in df.columns:
        s = df[c]
        if s.dtype == object or pd.api.types.is_string_dtype(s.dtype):
            text = s.dropna()
            if len(text) and text.astype(str).str.contains("\x00", regex=False).any():
                raise PinqError(
                    f"column {c!r} holds the character U+0000, which PostgreSQL text cannot "
                    "hold; remove it first (nothing was charged)"
                )
