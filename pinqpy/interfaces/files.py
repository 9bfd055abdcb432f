"""Reading the files named on the command line: CSV (also ``.tsv``, compressed) and parquet,
into pandas with a progress line for a large file, or opened where they lie by DuckDB or
Spark. Every problem is a :class:`~pinqpy.interfaces.errors.CliError` quoting no data."""

from __future__ import annotations

import importlib.util
import io
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

import pandas as pd

from pinqpy.engines.registry import pandas_parquet, read_file, wrap
from pinqpy.errors import PinqError
from pinqpy.interfaces.errors import CliError, one_line

__all__ = ["PROGRESS_MIN_BYTES", "declare_types", "open_table", "read_table"]

#: Files at least this large (in bytes) show a progress line while loading; the environment
#: variable ``PINQPY_PROGRESS_BYTES`` overrides it.
PROGRESS_MIN_BYTES = 16 * 2**20

_COMPRESSION = {".gz": "gzip", ".bz2": "bz2", ".zip": "zip", ".xz": "xz", ".zst": "zstd"}
_TEXT_SUFFIXES = {".csv": ",", ".txt": ",", ".tsv": "\t", ".tab": "\t"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}


class _ProgressReader(io.RawIOBase):
    """A binary file that draws a progress line on ``stream`` as it is read."""

    def __init__(self, raw: IO[bytes], total: int, label: str, stream: IO[str]):
        super().__init__()
        self._raw = raw
        self._total = max(total, 1)
        self._label = label
        self._stream = stream
        self._done = 0
        self._tty = bool(getattr(stream, "isatty", lambda: False)())
        self._step = 1 if self._tty else 25
        self._shown = -1
        self._draw()

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        data = self._raw.read(-1 if size is None else size)
        self._done += len(data)
        self._draw()
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _draw(self) -> None:
        percent = min(100, self._done * 100 // self._total)
        shown = percent - percent % self._step
        if shown <= self._shown:
            return
        self._shown = shown
        width = 24
        bar = "#" * (width * shown // 100)
        unit, scale = ("MB", 2**20) if self._total >= 2**20 else ("kB", 2**10)
        line = (
            f"{self._label}: {shown:3d}% [{bar:<{width}}] "
            f"{self._done / scale:.1f} of {self._total / scale:.1f} {unit}"
        )
        self._stream.write(("\r" + line) if self._tty else (line + "\n"))
        if self._tty and shown >= 100:
            self._stream.write("\n")
        self._stream.flush()

    def finish(self) -> None:
        """Draw 100% (pandas may stop reading before the last empty read)."""
        self._done = max(self._done, self._total)
        self._draw()


def _progress_threshold() -> int:
    raw = os.environ.get("PINQPY_PROGRESS_BYTES")
    if raw is None:
        return PROGRESS_MIN_BYTES
    try:
        return int(float(raw))
    except ValueError:
        return PROGRESS_MIN_BYTES


def _file_kind(path: Path, name: str | None, compressed: str) -> tuple[str, str, str | None]:
    """``(label, kind, compression)`` of a file pinqpy reads: the label names it in messages,
    the kind is its suffix before any compression suffix (``.csv``, ``.parquet``...).

    A missing file, a directory or a kind pinqpy does not read is a :class:`CliError`
    (``compressed`` says in it which compressions are read).
    """
    label = f"{name}: {path}" if name else str(path)
    if path.is_dir():
        raise CliError(f"{label}: is a directory, not a file")
    if not path.exists():
        raise CliError(f"{label}: no such file")
    suffixes = [s.lower() for s in path.suffixes]
    compression = _COMPRESSION.get(suffixes[-1]) if suffixes else None
    kind = suffixes[-2] if compression and len(suffixes) >= 2 else (suffixes or [""])[-1]
    if kind not in _TEXT_SUFFIXES and kind not in _PARQUET_SUFFIXES:
        raise CliError(
            f"{label}: unknown file type {kind or '(no extension)'!r}; "
            f"pinqpy reads .csv, .tsv {compressed} and .parquet"
        )
    return label, kind, compression


def read_table(
    path: Path | str,
    *,
    name: str | None = None,
    stream: IO[str] | None = None,
    progress_bytes: int | None = None,
    text_columns: Sequence[str] = (),
) -> pd.DataFrame:
    """Read a CSV (also ``.tsv``, compressed ``.gz``/``.bz2``/``.zip``/``.xz``) or parquet file.

    A text file of at least ``progress_bytes`` (default :data:`PROGRESS_MIN_BYTES`, or the
    environment variable ``PINQPY_PROGRESS_BYTES``) draws a progress line on ``stream``
    (standard error). Problems are a :class:`CliError` whose message quotes no data.
    ``text_columns`` of a text file are read as text (their declared type converts them).

    >>> from importlib import resources
    >>> with resources.as_file(resources.files("pinqpy") / "data" / "PUMS.csv") as p:
    ...     list(read_table(p).columns)
    ['age', 'sex', 'educ', 'race', 'income', 'married']
    """
    path = Path(path)
    label, kind, compression = _file_kind(path, name, "(optionally .gz/.bz2/.zip/.xz)")
    try:
        size = path.stat().st_size
        if kind in _PARQUET_SUFFIXES:
            return _read_parquet(path, label)
        threshold = _progress_threshold() if progress_bytes is None else progress_bytes
        with path.open("rb") as raw:
            source: IO[bytes] = raw
            reader = None
            if size >= threshold:
                reader = _ProgressReader(raw, size, f"loading {label}", stream or sys.stderr)
                source = reader  # type: ignore[assignment]
            frame = pd.read_csv(
                source,
                sep=_TEXT_SUFFIXES[kind],
                compression=compression,
                dtype={c: "str" for c in text_columns} or None,
            )
            if reader is not None:
                reader.finish()
            return frame
    except CliError:
        raise
    except FileNotFoundError:
        raise CliError(f"{label}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{label}: is a directory, not a file") from None
    except PermissionError:
        raise CliError(f"{label}: permission denied") from None
    except pd.errors.EmptyDataError:
        raise CliError(f"{label}: the file is empty (no header row)") from None
    except UnicodeDecodeError:
        raise CliError(f"{label}: not UTF-8 text; save it as UTF-8 CSV") from None
    except pd.errors.ParserError as err:
        # pandas' parser messages name line numbers and field counts, never values.
        detail = " ".join(str(err).split())
        raise CliError(f"{label}: not a readable CSV file ({detail})") from None
    except (OSError, ValueError, EOFError) as err:
        raise CliError(f"{label}: cannot read the file ({type(err).__name__})") from None


def _read_parquet(path: Path, label: str) -> pd.DataFrame:
    if (
        importlib.util.find_spec("pyarrow") is None
        and importlib.util.find_spec("fastparquet") is None
    ):
        raise CliError(f"{label}: reading parquet files needs pyarrow (pip install pyarrow)")
    try:
        return pandas_parquet(str(path))
    except (OSError, ValueError) as err:
        raise CliError(f"{label}: not a readable parquet file ({type(err).__name__})") from None


def open_table(
    path: Path | str, engine: str, *, name: str | None = None, schema: Any = None
) -> Any:
    """A CSV or parquet file opened by DuckDB or Spark where it lies (nothing is loaded into
    Python); ``.columns`` lists its columns. Problems are a :class:`CliError`."""
    path = Path(path)
    label, kind, _ = _file_kind(path, name, "(optionally compressed)")
    fmt, sep = ("parquet", ",") if kind in _PARQUET_SUFFIXES else ("csv", _TEXT_SUFFIXES[kind])
    try:
        return read_file(str(path), fmt, engine, sep=sep, schema=schema)
    except PinqError as err:
        raise CliError(f"{label}: {one_line(err)}") from None


def declare_types(
    table: Any, path: Path, engine: str, declared: dict[str, str], *, name: str
) -> Any:
    """A table opened from the file at ``path``, with its declared column types, as a plan
    source (a DataFrame converted here; DuckDB and Spark reopen the file with the types)."""
    if engine != "pandas":
        if not declared:
            return table
        return open_table(path, engine, name=name, schema=declared)
    try:
        got = wrap(table, "pandas", None, declared)
    except PinqError as err:
        raise CliError(f"table {name}: {one_line(err)}", 2) from None
    # The other columns' types were inferred from a text file's contents, or read from a
    # parquet file's own types.
    text = path.suffix.lower() not in _PARQUET_SUFFIXES
    return got.with_sources(declared, "inferred" if text else "engine")
