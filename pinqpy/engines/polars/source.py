"""User data as Polars plan sources: Polars DataFrames and LazyFrames, pandas DataFrames, and
parquet and CSV files scanned lazily.

Wrapping reads a frame's schema (``collect_schema``: no rows, a scan reads only a parquet
footer or a CSV file's first rows) and nothing else, unless ``schema=`` declares types: then
one scan checks that every declared value converts.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd
import polars as pl

from pinqpy.engines.polars.types import (
    declared_casts,
    normalize,
    polars_schema,
    refuse_objects,
)
from pinqpy.engines.sources import PolarsTable
from pinqpy.errors import PinqError
from pinqpy.expr.types import ColumnType, check_declared

__all__ = ["from_pandas", "scan_file", "wrap_frame"]

#: CSV column types are inferred from this many rows when the file is wrapped.
CSV_INFER_ROWS = 10_000

# Converts a pandas DataFrame's declared columns (the conversion of
# pinqpy.engines.wrapping.declared, which reads Python objects as pandas does).
DeclarePandas = Callable[[pd.DataFrame, dict[str, ColumnType]], pd.DataFrame]


def _schema(frame: pl.LazyFrame, what: str) -> tuple[tuple[str, Any], ...]:
    try:
        return tuple(frame.collect_schema().items())
    except Exception as exc:  # Polars' message may quote a value of the data
        raise PinqError(f"Polars cannot read {what} ({type(exc).__name__})") from None


def _declare(
    frame: pl.LazyFrame, columns: tuple[tuple[str, Any], ...], declared: Mapping[str, ColumnType]
) -> pl.LazyFrame:
    """``frame`` with the declared columns cast, checked by one scan: a value that does not
    convert is refused (the message names the column and type, never a value)."""
    casts = declared_casts(columns, declared)
    dtypes = dict(columns)

    def read(c: str) -> pl.Expr:
        x = normalize(pl.col(c), dtypes[c])
        return pl.col(c) if x is None else x

    bad = [
        (read(c).is_not_null() & cast.is_null()).sum().alias(c) for c, cast in casts.items()
    ]
    try:
        counts = frame.select(bad).collect().row(0)
    except Exception as exc:
        raise PinqError(f"Polars cannot check the declared types ({type(exc).__name__})") from None
    for (col, ctype), n in zip(declared.items(), counts, strict=True):
        if n:
            raise PinqError(
                f"column {col!r} does not convert to the declared type {ctype}; fix the "
                "declaration (schema=) or the data (nothing was charged)"
            )
    return frame.with_columns(list(casts.values()))


def _objects_declared(
    frame: pl.LazyFrame,
    columns: tuple[tuple[str, Any], ...],
    declared: dict[str, ColumnType],
    declare_pandas: DeclarePandas,
) -> pl.LazyFrame:
    """Declared Object columns (Python objects: only an in-memory frame holds them) converted
    as pandas converts them, once, here; they are read for that alone."""
    objects = [c for c, t in columns if isinstance(t, pl.Object) and c in declared]
    if not objects:
        return frame
    try:
        values = frame.select(objects).collect()
        as_pandas = pd.DataFrame({c: pd.Series(values[c].to_list(), dtype=object) for c in objects})
    except Exception as exc:
        raise PinqError(f"Polars cannot read the Object columns ({type(exc).__name__})") from None
    converted = declare_pandas(as_pandas, {c: declared[c] for c in objects})
    for c in objects:
        declared.pop(c)
    fixed = from_pandas(converted)
    return pl.concat([frame.drop(objects), fixed.lazy()], how="horizontal").select(
        [c for c, _ in columns]
    )


def wrap_frame(
    data: pl.DataFrame | pl.LazyFrame, schema: object, declare_pandas: DeclarePandas
) -> tuple[PolarsTable, dict[str, ColumnType], dict[str, ColumnType]]:
    """A Polars frame as a plan source: the table, its column types and the declared ones."""
    frame = data.lazy()
    columns = _schema(frame, "this frame")
    names = [c for c, _ in columns]
    declared = check_declared(schema, names)
    refuse_objects(columns, declared)
    all_declared = dict(declared)
    frame = _objects_declared(frame, columns, declared, declare_pandas)
    if all_declared != declared:
        columns = _schema(frame, "this frame")
    if declared:
        frame = _declare(frame, columns, declared)
        columns = _schema(frame, "this frame")
    return PolarsTable(frame, columns), polars_schema(columns), all_declared


def from_pandas(df: pd.DataFrame) -> pl.DataFrame:
    """A pandas DataFrame as a Polars one (its values kept: NaN becomes NULL, as pandas reads
    it; a column of lists a List column). A column Polars cannot hold is refused by name."""
    try:
        return pl.from_pandas(df, include_index=False)
    except Exception:
        pass
    for c in df.columns:
        try:
            pl.from_pandas(df[[c]], include_index=False)
        except ImportError:
            raise PinqError(
                "the Polars engine converts pandas DataFrames with pyarrow: pip install "
                "'pinqpy[polars]'"
            ) from None
        except Exception as exc:  # the message may quote a value
            raise PinqError(
                f"cannot convert column {c!r} for the Polars engine ({type(exc).__name__}); "
                "give it one type (a list column: lists of one item type)"
            ) from None
    raise PinqError("cannot convert this DataFrame for the Polars engine")


# Scans of plain parquet files wrapped before, by (path, size, mtime): at most 64.
_SCANS: dict[tuple[str, int, int], tuple[pl.LazyFrame, tuple[tuple[str, Any], ...]]] = {}
_SCANS_LOCK = threading.Lock()


def _stamp(path: str) -> tuple[str, int, int] | None:
    """(path, size, mtime) of a plain local file, else None (a glob, directory or URL)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (os.path.abspath(path), st.st_size, st.st_mtime_ns) if os.path.isfile(path) else None


def _parquet_scan(path: str, what: str) -> tuple[pl.LazyFrame, tuple[tuple[str, Any], ...]]:
    """``pl.scan_parquet(path)`` and its columns; for a plain file unchanged since it was last
    wrapped, that same scan, which keeps the file's metadata once read: a frame wrapped anew
    for each query reads no footer twice, as a hand-written query reusing its scan would.
    A file changed since (size or modification time) is scanned afresh."""
    stamp = _stamp(path)
    with _SCANS_LOCK:
        hit = _SCANS.get(stamp) if stamp is not None else None
    if hit is not None:
        return hit
    frame = pl.scan_parquet(path)
    got = (frame, _schema(frame, what))
    if stamp is not None:
        with _SCANS_LOCK:
            if len(_SCANS) >= 64:
                _SCANS.pop(next(iter(_SCANS)))
            _SCANS[stamp] = got
    return got


def scan_file(
    path: str, kind: str, sep: str, schema: object
) -> tuple[PolarsTable, dict[str, ColumnType], dict[str, ColumnType]]:
    """A parquet or CSV file (a path, directory or glob) scanned lazily: each query reads it
    where it lies. A CSV file's types are inferred from its first rows now; declared columns
    are read as text and converted. A later value that does not parse as its column's
    inferred type reads as NULL (as any fault does), never as an error."""
    what = f"the {kind} file {path!r}"
    try:
        if kind == "parquet":
            frame, columns = _parquet_scan(path, what)
        else:
            first = pl.scan_csv(path, separator=sep, n_rows=0).collect_schema().names()
            declared = check_declared(schema, first)
            inferred = pl.scan_csv(
                path,
                separator=sep,
                infer_schema_length=CSV_INFER_ROWS,
                ignore_errors=True,
                schema_overrides={c: pl.String for c in declared} or None,
            )
            # The types inferred now are the frame's: a query reads the file with them and
            # infers nothing (a file changed since would otherwise change them).
            types = dict(_schema(inferred, what))
            frame = pl.scan_csv(path, separator=sep, schema=types, ignore_errors=True)
            columns = _schema(frame, what)
    except PinqError:
        raise
    except Exception as exc:
        raise PinqError(f"Polars cannot read {what} ({type(exc).__name__})") from None
    declared = check_declared(schema, [c for c, _ in columns])
    if declared:
        frame = _declare(frame, columns, declared)
        columns = _schema(frame, what)
    return PolarsTable(frame, columns), polars_schema(columns), declared
