"""Parquet scans in DuckDB that see every NaN.

A parquet file's statistics leave NaN out of a float column's min and max, as the format
asks, and record no count of them (most writers: pyarrow, Spark). DuckDB, unless told
otherwise, reads such statistics as "no NaN here" and folds a NaN test on the column to
false: ``isnan(pid)`` is false on every row and ``CASE WHEN isnan(pid) THEN NULL ELSE pid
END`` is ``pid``. pinqpy reads a stored float NaN as NULL through exactly that test, so a NaN
privacy unit would stay a NaN, and all the NaN-id rows would be one shared "person" that
``bound_contributions`` keeps: one more NaN-id person could then move a bounded sum by twice
its sensitivity.

So every parquet scan pinqpy writes says the file may hold NaN (``can_have_nan = true``), and
every DuckDB connection pinqpy queries through is set to assume it for the scans it did not
write (``parquet_can_have_nan``: a curator's own relation over a file, or a view in their
database). Row-group pruning on float columns is a little weaker for it; answers are right.
A DuckDB without the option does not fold NaN tests from parquet statistics.
"""

from __future__ import annotations

from typing import Any

__all__ = ["parquet_scan", "see_parquet_nan"]

_SETTING = "parquet_can_have_nan"
_KNOWN: list[bool] = []  # whether this process's DuckDB has the setting, once asked


def _has_setting(connection: Any) -> bool:
    if not _KNOWN:
        rows = connection.execute(
            "SELECT count(*) FROM duckdb_settings() WHERE name = ?", [_SETTING]
        ).fetchall()
        _KNOWN.append(bool(rows[0][0]))
    return _KNOWN[0]


def parquet_scan(connection: Any, path: str) -> str:
    """A scan of the parquet file(s) ``path`` that assumes a float column may hold NaN."""
    quoted = "'" + path.replace("'", "''") + "'"
    if _has_setting(connection):
        return f"read_parquet({quoted}, can_have_nan = true)"
    return f"read_parquet({quoted})"


def see_parquet_nan(connection: Any) -> None:
    """Make every parquet scan ``connection`` binds from now on assume NaN may be there."""
    if _has_setting(connection):
        connection.execute(f"SET GLOBAL {_SETTING} = true")
