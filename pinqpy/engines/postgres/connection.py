"""The connection pinqpy reads a PostgreSQL database through (psycopg 3), and what it reads
there outside of queries: a table's columns from the catalog, and pandas DataFrames copied
into temporary tables.

**One statement per aggregate.** Every read is one ``SELECT``. On a connection in autocommit
mode that is idle (pinqpy's own, opened from a URL, always is) the whole exchange is one
round trip: ``BEGIN READ ONLY``, the session settings pinqpy's SQL relies on as ``SET
LOCAL``, the ``SELECT``, ``ROLLBACK``, sent as one message. On any other connection (a
transaction of the caller's in progress) it runs inside a savepoint that is rolled back
afterwards, so the caller's transaction and settings are left as they were: three round
trips.

**Settings.** ``SET LOCAL`` makes each read independent of the session's own settings:
no ``statement_timeout`` or ``lock_timeout`` (a read after the charge must not fail on a
timer that depends on the data's size), ``extra_float_digits = 1`` (shortest exact text of
doubles), ISO dates, UTC, standard-conforming string literals, and no JIT compilation
(pinqpy's guarded expressions are large: compiling them took longer than running them, 1.6 s
for a k-means step over 30,000 rows, and a 1e6-row sum was slower with it too).

Errors of the server are reported by their class only: their text may quote private values.
"""

from __future__ import annotations

import itertools
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.errors import PinqError

__all__ = ["PostgresLink", "import_psycopg", "is_psycopg_connection", "link_for"]

_SETTINGS = (
    "SET LOCAL statement_timeout = 0",
    "SET LOCAL lock_timeout = 0",
    "SET LOCAL idle_in_transaction_session_timeout = 0",
    "SET LOCAL extra_float_digits = 1",
    "SET LOCAL standard_conforming_strings = on",
    "SET LOCAL DateStyle = 'ISO, YMD'",
    "SET LOCAL TimeZone = 'UTC'",
    "SET LOCAL jit = off",
)

_CATALOG = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod),
       CASE WHEN t.typcategory = 'A' THEN CAST(et.typtype AS TEXT) || '[]'
            ELSE CAST(t.typtype AS TEXT) END,
       quote_ident(n.nspname) || '.' || quote_ident(c.relname),
       has_column_privilege(c.oid, a.attnum, 'SELECT'),
       COALESCE(co.collisdeterministic, TRUE)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type et ON et.oid = t.typelem
LEFT JOIN pg_collation co ON co.oid = a.attcollation
WHERE c.oid = to_regclass(%s)
ORDER BY a.attnum
"""


def import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise PinqError(
            "the PostgreSQL engine needs psycopg 3: pip install 'pinqpy[postgres]'"
        ) from None
    return psycopg


def is_psycopg_connection(obj: object) -> bool:
    """Whether ``obj`` is a psycopg 3 connection (without importing psycopg)."""
    return any(
        c.__module__.startswith("psycopg") and c.__name__ == "Connection"
        for c in type(obj).__mro__
    )


def _hidden(exc: BaseException, what: str) -> PinqError:
    return PinqError(
        f"the PostgreSQL engine failed {what} ({type(exc).__name__}); details are hidden "
        "because they may contain private values"
    )


class PostgresLink:
    """A psycopg connection as pinqpy uses it: reads, catalog look-ups and temporary tables,
    one at a time (a lock: psycopg serializes a connection's use anyway), with counts of the
    statements run and round trips made (:attr:`statements`, :attr:`round_trips`)."""

    def __init__(self, connection: Any, own: bool) -> None:
        self.connection = connection
        self.own = own  # opened by pinqpy from a URL (closed with the link)
        self.statements = 0
        self.round_trips = 0
        self._lock = threading.RLock()
        self._names = itertools.count()
        self._drops: list[str] = []
        self._psycopg = import_psycopg()
        if self._read_one("SHOW server_encoding")[0][0] != "UTF8":
            raise PinqError(
                "the PostgreSQL engine reads UTF8 databases only (this one's server_encoding "
                "is not UTF8)"
            )

    # -- reads ------------------------------------------------------------------------------
    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        """The rows of one ``SELECT`` (module docstring), errors hidden."""
        with self._lock:
            self._drop_pending()
            try:
                return self._read_one(sql)
            except self._psycopg.Error as exc:
                raise _hidden(exc, "reading") from None

    def plan(self, sql: str) -> None:
        """Plan ``sql`` without running it (``EXPLAIN``), errors hidden."""
        self.fetch(f"EXPLAIN {sql}")

    def _read_one(self, sql: str) -> list[tuple[Any, ...]]:
        conn = self.connection
        idle = conn.info.transaction_status == self._psycopg.pq.TransactionStatus.IDLE
        self.statements += 1
        if conn.autocommit and idle:
            self.round_trips += 1
            text = "; ".join(["BEGIN READ ONLY", *_SETTINGS, sql, "ROLLBACK"])
            try:
                return _rows_of(self._cursor().execute(text))
            except self._psycopg.Error:
                if conn.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE:
                    self.round_trips += 1
                    conn.execute("ROLLBACK")
                raise
        self.round_trips += 3
        with conn.transaction(force_rollback=True):
            return _rows_of(self._cursor().execute("; ".join([*_SETTINGS, sql])))

    def _cursor(self) -> Any:
        """A cursor of the connection that reads a timestamp as a pandas Timestamp of any
        year PostgreSQL holds (:func:`_stamp`); the connection's own loaders are untouched."""
        cur = self.connection.cursor()
        cur.adapters.register_loader("timestamp", _stamp_loader(self._psycopg))
        return cur

    def usable(self) -> str | None:
        """Why this connection cannot run a query now (closed, or its transaction failed),
        or None; reads nothing from the server."""
        conn = self.connection
        if conn.closed:
            return "the PostgreSQL connection is closed"
        if conn.info.transaction_status == self._psycopg.pq.TransactionStatus.INERROR:
            return (
                "the PostgreSQL connection's transaction has failed; roll it back "
                "(connection.rollback()) before querying"
            )
        return None

    # -- the catalog ------------------------------------------------------------------------
    def table(self, name: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        """The FROM item (schema-qualified, quoted) of the table or view ``name`` (spelt as
        PostgreSQL reads it: unquoted parts in lower case) and its (column, type) pairs."""
        with self._lock:
            try:
                rows = self._catalog(name)
            except self._psycopg.Error as exc:
                raise PinqError(
                    f"PostgreSQL cannot look up the table {name!r} ({type(exc).__name__})"
                ) from None
        if not rows:
            raise PinqError(f"PostgreSQL has no table or view named {name!r} on this connection")
        for col, _, _, _, may_read, deterministic in rows:
            if not may_read:
                raise PinqError(f"this PostgreSQL role may not read column {col!r} of {name!r}")
            if not deterministic:
                raise PinqError(
                    f"column {col!r} of {name!r} has a nondeterministic collation; wrap a view "
                    'that reads it COLLATE "default"'
                )
        # An enum (or an array of one) is read as text; the catalog names it by its own name.
        enums = {"e": "enum", "e[]": "enum[]"}
        cols = tuple((c, enums.get(typtype, t)) for c, t, typtype, *_ in rows)
        return rows[0][3], cols

    def _catalog(self, name: str) -> list[tuple[Any, ...]]:
        conn = self.connection
        self.statements += 1
        self.round_trips += 1
        if conn.autocommit:
            return conn.execute(_CATALOG, [name]).fetchall()  # type: ignore[no-any-return]
        with conn.transaction(force_rollback=True):
            return conn.execute(_CATALOG, [name]).fetchall()  # type: ignore[no-any-return]

    # -- temporary tables -------------------------------------------------------------------
    def load(self, df: pd.DataFrame, types: Sequence[str]) -> str:
        """``df`` copied into a new temporary table with columns of ``types``; its name.
        Dropped when the connection closes, or by :meth:`drop`."""
        name = f'"__pinq_t{next(self._names)}"'
        cols = ", ".join(f"{_q(c)} {t}" for c, t in zip(df.columns, types, strict=True))
        with self._lock:
            try:
                with self.connection.transaction():
                    cur = self.connection.cursor()
                    cur.execute(f"CREATE TEMPORARY TABLE {name} ({cols})")
                    with cur.copy(f"COPY {name} FROM STDIN (FORMAT csv, NULL '\\N')") as copy:
                        for chunk in _csv_chunks(df, types):
                            copy.write(chunk)
                    cur.execute(f"ANALYZE {name}")
            except self._psycopg.Error as exc:
                raise _hidden(exc, "loading a DataFrame") from None
        return f"pg_temp.{name}"

    def drop_later(self, source: str) -> None:
        """Drop a temporary table made by :meth:`load` before the next read (a finalizer
        may run in the middle of a statement on this connection, so it only notes it)."""
        self._drops.append(source)

    def _drop_pending(self) -> None:
        conn = self.connection
        while self._drops:
            source = self._drops.pop()
            idle = conn.info.transaction_status == self._psycopg.pq.TransactionStatus.IDLE
            if conn.closed or not conn.autocommit or not idle:
                continue  # the caller's transactions: left to the session's end
            try:
                self.round_trips += 1
                conn.execute(f"DROP TABLE IF EXISTS {source}")
            except self._psycopg.Error:
                pass


_STAMP = re.compile(r"(\d+)-(\d\d)-(\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)( BC)?")
_LOADERS: list[Any] = []


def _stamp(text: str) -> pd.Timestamp | None:
    """A timestamp's ISO text as a Timestamp in microseconds: psycopg's own loader raises on
    a year before 1 or after 9999, which a stored table or a key may hold (year 0 is 1 BC,
    as in pandas and DuckDB); an infinity is NULL."""
    m = _STAMP.fullmatch(text)
    if m is None:
        return None
    year = int(m[1]) if m[5] is None else 1 - int(m[1])
    sign = "-" if year < 0 else ""
    iso = f"{sign}{abs(year):04d}-{m[2]}-{m[3]}T{m[4]}"
    return pd.Timestamp(np.datetime64(iso, "us"))


def _stamp_loader(psycopg: Any) -> Any:
    """The psycopg loader of :func:`_stamp` (made once: psycopg is imported lazily)."""
    if not _LOADERS:

        class StampLoader(psycopg.adapt.Loader):  # type: ignore[misc, name-defined]
            def load(self, data: Any) -> pd.Timestamp | None:
                return _stamp(bytes(data).decode())

        _LOADERS.append(StampLoader)
    return _LOADERS[0]


def _rows_of(cur: Any) -> list[tuple[Any, ...]]:
    """The rows of the one statement of a multi-statement exchange that returns rows."""
    while True:
        if cur.description is not None:
            return cur.fetchall()  # type: ignore[no-any-return]
        if not cur.nextset():
            return []


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


_CHUNK = 50_000


def _csv_chunks(df: pd.DataFrame, types: Sequence[str]) -> Any:
    """``df`` as CSV text in chunks of rows (``\\N`` for NULL, every text quoted, so an
    empty text is not NULL; doubles in their shortest exact digits; lists as array
    literals of the column's array type)."""
    import csv

    from pinqpy.engines.postgres.arrays import array_text

    out = df.copy(deep=False)
    for i, dtype in enumerate(out.dtypes):
        s = out.iloc[:, i]
        if types[i].endswith("[]"):
            out.isetitem(i, array_text(s, types[i]))
        elif pd.api.types.is_bool_dtype(dtype):
            out.isetitem(i, s.map({True: "t", False: "f"}).astype(object))
        elif pd.api.types.is_datetime64_any_dtype(dtype):
            if getattr(dtype, "tz", None) is not None:
                s = s.dt.tz_convert("UTC").dt.tz_localize(None)
            out.isetitem(i, s.dt.strftime("%Y-%m-%d %H:%M:%S.%f").astype(object))
        elif pd.api.types.is_float_dtype(dtype):
            out.isetitem(i, _float_text(s.to_numpy(dtype=np.float64, na_value=np.nan)))
    for start in range(0, max(len(out), 1), _CHUNK):
        part = out.iloc[start : start + _CHUNK]
        if len(part) == 0:
            return
        yield part.to_csv(
            header=False, index=False, na_rep="\\N", quoting=csv.QUOTE_NONNUMERIC
        ).replace('"\\N"', "\\N")


def _float_text(v: np.ndarray) -> np.ndarray:
    """Doubles as the text PostgreSQL reads back exactly (NaN as NULL's ``\\N``)."""
    out = np.empty(len(v), dtype=object)
    out[:] = [
        "\\N" if x != x else ("Infinity" if x > 0 else "-Infinity") if x in (np.inf, -np.inf)
        else repr(float(x))
        for x in v.tolist()
    ]
    return out


# -- links ------------------------------------------------------------------------------------
_LINKS: dict[str, PostgresLink] = {}
_BY_CONNECTION: weakref.WeakKeyDictionary[Any, PostgresLink] = weakref.WeakKeyDictionary()
_LINKS_LOCK = threading.Lock()


def link_for(connection: Any) -> PostgresLink:
    """The link for a psycopg connection (the caller's, used as it is), or for a URL or
    connection string (pinqpy opens one connection per URL, in autocommit mode, and keeps
    it for the process)."""
    psycopg = import_psycopg()
    with _LINKS_LOCK:
        if isinstance(connection, str):
            hit = _LINKS.get(connection)
            if hit is not None and not hit.connection.closed:
                return hit
            try:
                conn = psycopg.connect(connection, autocommit=True)
            except psycopg.Error as exc:
                raise PinqError(
                    f"pinqpy cannot connect to PostgreSQL ({type(exc).__name__}); check the "
                    "connection string, the server and the role"
                ) from None
            link = _LINKS[connection] = PostgresLink(conn, own=True)
            return link
        if not is_psycopg_connection(connection):
            raise PinqError(
                "a PostgreSQL connection is a psycopg 3 connection or a connection string "
                f"('postgresql://...'), not {type(connection).__name__}"
            )
        hit = _BY_CONNECTION.get(connection)
        if hit is None:
            hit = _BY_CONNECTION[connection] = PostgresLink(connection, own=False)
        return hit
