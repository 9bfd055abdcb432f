"""The ``pinqpy`` command line: ``pinqpy shell`` and ``pinqpy query`` over CSV/parquet files.

Each ``NAME=PATH`` argument loads one file as a private table with its own budget of
``--epsilon`` (and ``--delta``); ``--public NAME=PATH`` loads a public table. Metadata flags
apply to every private table that has the column they name::

    pinqpy query people=people.csv --epsilon 1 --bounds age=0:100 --keys sex=0,1 \\
        "SELECT sex, AVG(age) FROM people GROUP BY sex"

A user error (a bad file, flag, column or query) is one line on standard error and a
non-zero exit status (2 for a bad command line, 1 otherwise), never a traceback.

>>> parse_bounds("age=0:100")
('age', (0, 100))
>>> parse_assignment("visits=user_id", "--privacy-unit")
('visits', 'user_id')
>>> parse_assignment("user_id", "--privacy-unit")
(None, 'user_id')
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import math
import os
import re
import sys
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, NoReturn

import pandas as pd

from pinqpy._version import __version__
from pinqpy.accounting.budget import Budget
from pinqpy.api.session import Session
from pinqpy.errors import PinqError, PinqSyntaxError

__all__ = [
    "CliError",
    "LoadedSession",
    "build_parser",
    "format_result",
    "load_session",
    "main",
    "one_line",
    "parse_assignment",
    "parse_bounds",
    "parse_keys",
    "parse_table_spec",
    "read_table",
    "run_statement",
]

#: Files at least this large (in bytes) show a progress line while loading; the environment
#: variable ``PINQPY_PROGRESS_BYTES`` overrides it.
PROGRESS_MIN_BYTES = 16 * 2**20

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT_RE = re.compile(r"[+-]?\d+")
_COMPRESSION = {".gz": "gzip", ".bz2": "bz2", ".zip": "zip", ".xz": "xz", ".zst": "zstd"}
_TEXT_SUFFIXES = {".csv": ",", ".txt": ",", ".tsv": "\t", ".tab": "\t"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}

COMMANDS = {
    "demo": "a short private query session over the bundled PUMS sample",
    "shell": "an interactive SQL shell over private CSV/parquet files",
    "query": "answer one SQL query over private CSV/parquet files",
}

USAGE = (
    "usage: pinqpy {demo,shell,query} ...\n\n"
    + "\n".join(f"  {name:<7} {text}" for name, text in COMMANDS.items())
    + "\n\nexamples:\n"
    "  pinqpy demo\n"
    "  pinqpy shell people=people.csv --epsilon 1 --bounds age=0:100 --keys sex=0,1\n"
    '  pinqpy query people=people.csv --epsilon 1 "SELECT COUNT(*) FROM people"\n\n'
    "Run pinqpy shell --help or pinqpy query --help for every option."
)


class CliError(Exception):
    """A user error the command reports as one line, with its exit status."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


# -- parsing the command line -----------------------------------------------------------------


@dataclass(frozen=True)
class TableSpec:
    """One ``NAME=PATH`` argument."""

    name: str
    path: Path


def parse_table_spec(text: str, flag: str = "table") -> TableSpec:
    """``NAME=PATH``, or a bare ``PATH`` named after its file (``data/people.csv`` -> people).

    >>> parse_table_spec("people=data/p.csv")
    TableSpec(name='people', path=PosixPath('data/p.csv'))
    >>> parse_table_spec("data/visits.csv.gz").name
    'visits'
    """
    name, sep, path = text.partition("=")
    if sep and _NAME_RE.fullmatch(name) and path:
        return TableSpec(name, Path(path))
    if sep and not path:
        raise CliError(f"{flag} {text!r}: expected NAME=PATH", 2)
    stem = Path(text).name.split(".")[0]
    stem = re.sub(r"\W", "_", stem)
    if not stem or not _NAME_RE.fullmatch(stem):
        raise CliError(f"{flag} {text!r}: expected NAME=PATH (a name for the table)", 2)
    return TableSpec(stem, Path(text))


def parse_assignment(text: str, flag: str) -> tuple[str | None, str]:
    """``TARGET=VALUE`` or a bare ``VALUE`` (target None)."""
    target, sep, value = text.partition("=")
    if not sep:
        if not text:
            raise CliError(f"{flag}: empty value", 2)
        return None, text
    if not target or not value:
        raise CliError(f"{flag} {text!r}: expected NAME=VALUE", 2)
    return target, value


def _number(text: str) -> int | float:
    """An int when it looks like one, else a float (ValueError if neither)."""
    text = text.strip()
    if _INT_RE.fullmatch(text):
        return int(text)
    value = float(text)
    if math.isnan(value):
        raise ValueError(text)
    return value


def parse_bounds(text: str) -> tuple[str, tuple[int | float, int | float]]:
    """``COLUMN=LO:HI`` -> (column, (lo, hi)); integers stay integers.

    >>> parse_bounds("income=0:5e5")
    ('income', (0, 500000.0))
    """
    column, value = parse_assignment(text, "--bounds")
    lo_text, sep, hi_text = (value or "").partition(":")
    if column is None or not sep:
        raise CliError(f"--bounds {text!r}: expected COLUMN=LO:HI, e.g. age=0:100", 2)
    try:
        lo, hi = _number(lo_text), _number(hi_text)
    except ValueError:
        raise CliError(f"--bounds {text!r}: LO and HI must be numbers", 2) from None
    if lo > hi:
        raise CliError(f"--bounds {text!r}: LO is greater than HI", 2)
    return column, (lo, hi)


def parse_keys(text: str) -> tuple[str, list[str]]:
    """``COLUMN=A,B,...`` -> (column, the keys as text); see :func:`_convert_keys`.

    >>> parse_keys("state=CA,NY")
    ('state', ['CA', 'NY'])
    """
    column, value = parse_assignment(text, "--keys")
    keys = [k.strip() for k in value.split(",")] if column is not None else []
    if column is None or not keys or any(k == "" for k in keys):
        raise CliError(f"--keys {text!r}: expected COLUMN=KEY,KEY,..., e.g. state=CA,NY", 2)
    return column, keys


def parse_schema(text: str) -> tuple[str, str]:
    """``COLUMN=TYPE`` -> (column, type), a declared column type.

    >>> parse_schema("code=str")
    ('code', 'str')
    """
    from pinqpy.expr.types import COLUMN_TYPES

    column, value = parse_assignment(text, "--schema")
    ctype = value.strip().lower()
    if column is None or ctype not in COLUMN_TYPES:
        raise CliError(
            f"--schema {text!r}: expected COLUMN=TYPE with TYPE one of " + ", ".join(COLUMN_TYPES),
            2,
        )
    return column, ctype


def _convert_keys(keys: Sequence[str], dtype: Any, flag: str) -> list[Hashable]:
    """Keys as the column's type: numbers for a numeric column (ints when they look like
    ints), booleans for a boolean column, text otherwise.

    >>> _convert_keys(["1", "2.5"], pd.Series([1.0]).dtype, "--keys")
    [1, 2.5]
    >>> _convert_keys(["01", "CA"], pd.Series(["x"]).dtype, "--keys")
    ['01', 'CA']
    """
    if pd.api.types.is_bool_dtype(dtype):
        truth = {"true": True, "1": True, "false": False, "0": False}
        try:
            return [truth[k.lower()] for k in keys]
        except KeyError:
            raise CliError(f"{flag}: keys of a boolean column are true/false", 2) from None
    if pd.api.types.is_numeric_dtype(dtype):
        try:
            return [_number(k) for k in keys]
        except ValueError:
            raise CliError(
                f"{flag}: the column is numeric, so its keys must be numbers", 2
            ) from None
    return list(keys)


# -- loading files ----------------------------------------------------------------------------


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
            "pinqpy reads .csv, .tsv (optionally .gz/.bz2/.zip/.xz) and .parquet"
        )
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


def open_table(
    path: Path | str, engine: str, *, name: str | None = None, schema: Any = None
) -> Any:
    """A CSV or parquet file opened by DuckDB or Spark where it lies (nothing is loaded into
    Python); ``.columns`` lists its columns. Problems are a :class:`CliError`."""
    from pinqpy.engines.registry import read_file

    path = Path(path)
    label = f"{name}: {path}" if name else str(path)
    if path.is_dir():
        raise CliError(f"{label}: is a directory, not a file")
    if not path.exists():
        raise CliError(f"{label}: no such file")
    suffixes = [s.lower() for s in path.suffixes]
    compressed = bool(suffixes) and suffixes[-1] in _COMPRESSION
    kind = suffixes[-2] if compressed and len(suffixes) >= 2 else (suffixes or [""])[-1]
    if kind in _PARQUET_SUFFIXES:
        fmt, sep = "parquet", ","
    elif kind in _TEXT_SUFFIXES:
        fmt, sep = "csv", _TEXT_SUFFIXES[kind]
    else:
        raise CliError(
            f"{label}: unknown file type {kind or '(no extension)'!r}; "
            "pinqpy reads .csv, .tsv (optionally compressed) and .parquet"
        )
    try:
        return read_file(str(path), fmt, engine, sep=sep, schema=schema)
    except PinqError as err:
        raise CliError(f"{label}: {one_line(err)}") from None


def _declare(table: Any, spec: Any, engine: str, declared: dict[str, str]) -> Any:
    """A table opened from a file, with its declared column types, as a plan source."""
    from pinqpy.engines.registry import Wrapped, wrap

    if engine != "pandas":
        if not declared:
            return table
        return open_table(spec.path, engine, name=spec.name, schema=declared)
    try:
        got = wrap(table, "pandas", None, declared)
    except PinqError as err:
        raise CliError(f"table {spec.name}: {one_line(err)}", 2) from None
    text = Path(spec.path).suffix.lower() not in _PARQUET_SUFFIXES
    sources = {
        c: "declared" if c in declared else "inferred" if text else "engine" for c in got.schema
    }
    return Wrapped(got.engine, got.data, got.schema, sources)


def _columns(table: Any) -> list[str]:
    if isinstance(table, pd.DataFrame):
        return [str(c) for c in table.columns]
    return list(table.schema)


def _dtype(table: Any, column: str) -> Any:
    """The pandas dtype of a column, or its stand-in for a table opened by an engine."""
    if isinstance(table, pd.DataFrame):
        return table[column].dtype
    kind = table.schema.get(column)
    return {"int": "int64", "float": "float64", "bool": "bool"}.get(kind, "object")


def _read_parquet(path: Path, label: str) -> pd.DataFrame:
    if (
        importlib.util.find_spec("pyarrow") is None
        and importlib.util.find_spec("fastparquet") is None
    ):
        raise CliError(f"{label}: reading parquet files needs pyarrow (pip install pyarrow)")
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as err:
        raise CliError(f"{label}: not a readable parquet file ({type(err).__name__})") from None


# -- building the session ---------------------------------------------------------------------


@dataclass
class LoadedSession:
    """The session the command built, and each private table's own budget."""

    session: Session
    budgets: dict[str, Budget] = field(default_factory=dict)
    columns: dict[str, list[str]] = field(default_factory=dict)
    public: list[str] = field(default_factory=list)


def load_session(args: argparse.Namespace, stream: IO[str] | None = None) -> LoadedSession:
    """Load every file named on the command line and register it with its metadata."""
    private = [parse_table_spec(t) for t in args.tables]
    public = [parse_table_spec(t, "--public") for t in args.public or []]
    names = [s.name for s in [*private, *public]]
    for n in names:
        if names.count(n) > 1:
            raise CliError(f"table name {n!r} is given twice", 2)
    bounds = [parse_bounds(b) for b in args.bounds or []]
    keys = [parse_keys(k) for k in args.keys or []]
    units = [parse_assignment(u, "--privacy-unit") for u in args.privacy_unit or []]
    max_rows = [parse_assignment(m, "--max-rows") for m in args.max_rows or []]
    declared = [parse_schema(t) for t in getattr(args, "schema", None) or []]
    declared_columns = [c for c, _ in declared]

    engine = getattr(args, "engine", "pandas") or "pandas"
    if engine == "pandas":
        frames: dict[str, Any] = {
            s.name: read_table(s.path, name=s.name, stream=stream, text_columns=declared_columns)
            for s in private
        }
    else:
        frames = {s.name: open_table(s.path, engine, name=s.name) for s in private}
    for text, (column, _) in zip(getattr(args, "schema", None) or [], declared, strict=True):
        if not any(column in _columns(t) for t in frames.values()):
            raise CliError(f"--schema {text}: no private table has a column {column!r}", 2)
    for spec in private:
        # Declared types are converted (or cast) once, as the table is opened; the others
        # are inferred from the file (DESCRIBE shows which).
        mine = {c: t for c, t in declared if c in _columns(frames[spec.name])}
        frames[spec.name] = _declare(frames[spec.name], spec, engine, mine)
    public_frames = {s.name: read_table(s.path, name=s.name, stream=stream) for s in public}

    def having(column: str, flag: str, text: str) -> list[str]:
        found = [n for n, df in frames.items() if column in _columns(df)]
        if not found:
            raise CliError(f"{flag} {text}: no private table has a column {column!r}", 2)
        return found

    meta: dict[str, dict[str, Any]] = {n: {"bounds": {}, "keys": {}} for n in frames}
    for text, (column, b) in zip(args.bounds or [], bounds, strict=True):
        for n in having(column, "--bounds", text):
            meta[n]["bounds"][column] = b
    for text, (column, ks) in zip(args.keys or [], keys, strict=True):
        for n in having(column, "--keys", text):
            meta[n]["keys"][column] = _convert_keys(ks, _dtype(frames[n], column), f"--keys {text}")
    for text, (table, column) in zip(args.privacy_unit or [], units, strict=True):
        if table is None:
            targets = having(column, "--privacy-unit", text)
        elif table not in frames:
            raise CliError(f"--privacy-unit {text}: no private table named {table!r}", 2)
        elif column not in _columns(frames[table]):
            raise CliError(f"--privacy-unit {text}: {table} has no column {column!r}", 2)
        else:
            targets = [table]
        for n in targets:
            meta[n]["privacy_unit"] = column
    for text, (table, value) in zip(args.max_rows or [], max_rows, strict=True):
        if not _INT_RE.fullmatch(value) or int(value) < 1:
            raise CliError(f"--max-rows {text}: expected a positive whole number", 2)
        if table is None:
            targets = [n for n in frames if "privacy_unit" in meta[n]]
            if not targets:
                raise CliError(f"--max-rows {text}: give --privacy-unit TABLE=COLUMN first", 2)
        elif table not in frames:
            raise CliError(f"--max-rows {text}: no private table named {table!r}", 2)
        else:
            targets = [table]
        for n in targets:
            meta[n]["max_rows"] = int(value)

    loaded = LoadedSession(Session())
    for n, df in frames.items():
        try:
            budget = Budget(args.epsilon, args.delta or 0, ledger=args.ledger, name=n)
        except PinqError as err:
            raise CliError(f"--epsilon/--delta: {one_line(err)}", 2) from None
        try:
            loaded.session.register(n, df, budget=budget, **meta[n])
        except PinqError as err:
            raise CliError(f"table {n}: {one_line(err)}", 2) from None
        loaded.budgets[n] = budget
        loaded.columns[n] = [str(c) for c in _columns(df)]
    for n, df in public_frames.items():
        try:
            loaded.session.register_public(n, df)
        except PinqError as err:
            raise CliError(f"public table {n}: {one_line(err)}", 2) from None
        loaded.columns[n] = [str(c) for c in df.columns]
        loaded.public.append(n)
    return loaded


# -- answering --------------------------------------------------------------------------------


def _query_options(text: str) -> set[str]:
    """The OPTIONS (...) names a statement sets itself (empty if it does not parse)."""
    try:
        from pinqpy.sql import ast as q
        from pinqpy.sql.parser import parse_statement

        statement = parse_statement(text, positions=False)
    except Exception:
        return set()
    if isinstance(statement, q.Explain):
        statement = statement.query
    return {name for name, _ in getattr(statement, "options", ())}


def run_statement(session: Session, text: str, epsilon: object, delta: object) -> object:
    """``session.sql`` with a default epsilon and delta that a query's OPTIONS override."""
    options = _query_options(text)
    return session.sql(
        text,
        epsilon=None if "epsilon" in options else epsilon,
        delta=None if "delta" in options else (delta or None),
    )


def one_line(err: BaseException) -> str:
    """An error's message on one line (a syntax error keeps its line and column)."""
    if isinstance(err, PinqSyntaxError):
        text = str(err).splitlines()[0] if str(err) else err.message
        if err.expected and len(err.expected) <= 8:
            text += "; expected one of: " + ", ".join(sorted(err.expected))
        return text
    return " ".join(str(err).split()) or type(err).__name__


def _fmt_number(value: float, decimals: int | None = None) -> str:
    if decimals is not None:
        return f"{value:.{decimals}f}"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def _fmt_cell(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "NULL"
    try:
        if pd.isna(value):  # type: ignore[arg-type]
            return "NULL"
    except (TypeError, ValueError):
        pass
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return _fmt_number(value)
    return str(value)


def _decimals(half: float) -> int:
    """Enough decimals to show two significant digits of the error."""
    if not half > 0 or math.isinf(half):
        return 0
    return max(0, min(6, 1 - math.floor(math.log10(half))))


def _intervals(result: pd.DataFrame, level: float) -> dict[str, pd.DataFrame]:
    accuracy = getattr(result, "accuracy", None)
    if not accuracy:
        return {}
    out = {}
    for column in accuracy:
        if column not in result.columns:
            continue
        try:
            out[column] = result.ci(column, level)  # type: ignore[attr-defined]
        except PinqError:
            continue
    return out


def render_table(frame: pd.DataFrame, level: float = 0.95) -> str:
    """An aligned text table; a noisy column's cells read ``value ± half-width``.

    >>> print(render_table(pd.DataFrame({"state": ["CA", "NY"], "n": [12.5, 3.0]})))
    state     n
    -----  ----
    CA     12.5
    NY        3
    """
    cis = _intervals(frame, level)
    headers = [str(c) for c in frame.columns]
    columns: list[list[str]] = []
    right: list[bool] = []
    for position, column in enumerate(frame.columns):
        series = frame.iloc[:, position]
        numeric = pd.api.types.is_numeric_dtype(series.dtype) and not pd.api.types.is_bool_dtype(
            series.dtype
        )
        right.append(numeric)
        ci = cis.get(column) if isinstance(column, str) else None
        if ci is None:
            columns.append([_fmt_cell(v) for v in series.tolist()])
            continue
        values: list[str] = []
        errors: list[str] = []
        for value, low, high in zip(series.tolist(), ci["low"], ci["high"], strict=True):
            half = (float(high) - float(low)) / 2
            if value is None or pd.isna(value):
                values.append("NULL")
                errors.append("")
                continue
            # Integers (a discrete mechanism's count and interval) show no decimals.
            integral = float(value).is_integer() and (math.isnan(half) or half.is_integer())
            places = 0 if integral else _decimals(half)
            values.append(_fmt_number(float(value), places))
            errors.append("" if math.isnan(half) else _fmt_number(half, places))
        vw = max(len(v) for v in values) if values else 0
        ew = max(len(e) for e in errors) if errors else 0
        columns.append(
            [
                f"{v:>{vw}} ± {e:>{ew}}" if e else f"{v:>{vw}}   {'':>{ew}}".rstrip()
                for v, e in zip(values, errors, strict=True)
            ]
        )
    widths = [
        max([len(h), *(len(c) for c in cells)]) for h, cells in zip(headers, columns, strict=True)
    ]

    def line(cells: Sequence[str]) -> str:
        parts = [
            f"{c:>{w}}" if r else f"{c:<{w}}" for c, w, r in zip(cells, widths, right, strict=True)
        ]
        return "  ".join(parts).rstrip()

    lines = [line(headers), "  ".join("-" * w for w in widths)]
    lines += [line(row) for row in zip(*columns, strict=True)] if columns else []
    return "\n".join(lines)


def _jsonable(value: object) -> object:
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        value = value.item()  # type: ignore[union-attr]
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, int | float | str | bool):
        return value
    try:
        if pd.isna(value):  # type: ignore[arg-type]
            return None
    except (TypeError, ValueError):
        pass
    return str(value)


def _with_intervals(result: pd.DataFrame, level: float) -> pd.DataFrame:
    """The result with ``<col>_ci_low`` / ``<col>_ci_high`` after each noisy column."""
    cis = _intervals(result, level)
    out = pd.DataFrame(index=result.index)
    for position, column in enumerate(result.columns):
        out[column] = result.iloc[:, position].to_numpy()
        if column in cis:
            out[f"{column}_ci_low"] = cis[column]["low"].to_numpy()
            out[f"{column}_ci_high"] = cis[column]["high"].to_numpy()
    return out


def format_result(result: object, fmt: str = "table", level: float = 0.95) -> str:
    """A statement's answer as text: ``table`` (aligned, ± the half-width of the ``level``
    interval), ``csv`` or ``json`` (records; each noisy column followed by its interval as
    ``<col>_ci_low`` and ``<col>_ci_high``). EXPLAIN text is printed as it is.

    >>> print(format_result(pd.DataFrame({"a": [1]}), "json"))
    [{"a": 1}]
    """
    if not isinstance(result, pd.DataFrame):
        text = str(result)
        return json.dumps({"explain": text}) if fmt == "json" else text.rstrip("\n")
    if fmt == "table":
        return render_table(result, level)
    frame = _with_intervals(result, level)
    if fmt == "csv":
        return frame.to_csv(index=False).rstrip("\n")
    if fmt == "json":
        records = [
            {str(k): _jsonable(v) for k, v in zip(frame.columns, row, strict=True)}
            for row in frame.itertuples(index=False, name=None)
        ]
        return json.dumps(records)
    raise CliError(f"unknown format {fmt!r}", 2)


# -- the command line -------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive(kind: str) -> Callable[[str], float]:
    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{kind} must be a number, not {text!r}") from None
        if not value > 0 or math.isinf(value):
            raise argparse.ArgumentTypeError(f"{kind} must be a positive number, not {text!r}")
        return value

    return convert


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"delta must be a number, not {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"delta must be at least 0 and below 1, not {text!r}")
    return value


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--epsilon",
        type=_positive("--epsilon"),
        required=True,
        metavar="EPS",
        help="each private table's privacy budget (its own, not shared)",
    )
    parser.add_argument(
        "--delta",
        type=_probability,
        default=0.0,
        metavar="DELTA",
        help="each private table's delta budget (default 0)",
    )
    parser.add_argument(
        "--bounds",
        action="append",
        metavar="COL=LO:HI",
        help="public bounds of a column, for every private table that has it (repeatable)",
    )
    parser.add_argument(
        "--keys",
        action="append",
        metavar="COL=K1,K2,...",
        help="public GROUP BY keys of a column (numbers for a numeric column; repeatable)",
    )
    parser.add_argument(
        "--schema",
        action="append",
        metavar="COL=TYPE",
        help="declare a column's type (int, float, str, bool, datetime, any) instead of "
        "inferring it from the file, for every private table that has it (repeatable)",
    )
    parser.add_argument(
        "--privacy-unit",
        action="append",
        metavar="[TABLE=]COL",
        help="all rows with the same COL are one person (repeatable)",
    )
    parser.add_argument(
        "--max-rows",
        action="append",
        metavar="[TABLE=]K",
        help="keep at most K rows per person of a table with a privacy unit (repeatable)",
    )
    parser.add_argument(
        "--public",
        action="append",
        metavar="NAME=PATH",
        help="a public table (joins, GROUP BY keys); charges nothing (repeatable)",
    )
    parser.add_argument(
        "--engine",
        choices=("pandas", "duckdb", "spark"),
        default="pandas",
        help="where private tables are read and aggregated (default: pandas, in memory; "
        "duckdb and spark read the files where they lie)",
    )
    parser.add_argument(
        "--ledger",
        metavar="PATH",
        help="keep the budgets in this SQLite ledger, so spending carries over between runs",
    )
    parser.add_argument(
        "--delta-per-query",
        type=_probability,
        default=None,
        metavar="DELTA",
        help="the delta each query may spend (see --epsilon-per-query for the default)",
    )


_EPILOG = (
    "Files: .csv, .tsv (optionally compressed) and .parquet (with pyarrow). A file larger than "
    "16 MB shows a progress line on standard error (PINQPY_PROGRESS_BYTES sets the size)."
)


def build_parser(command: str) -> argparse.ArgumentParser:
    """The argument parser of one command (``shell`` or ``query``)."""
    if command == "shell":
        parser = _Parser(
            prog="pinqpy shell",
            description=(
                "An interactive SQL shell over private files. With standard input not a "
                "terminal, it reads statements separated by ';' and exits non-zero if any "
                "failed."
            ),
            epilog=_EPILOG + " History is kept in $PINQPY_HISTORY (default ~/.pinqpy_history).",
        )
        parser.add_argument(
            "tables", nargs="+", metavar="NAME=PATH", help="a private table to load"
        )
        _add_common(parser)
        parser.add_argument(
            "--epsilon-per-query",
            type=_positive("--epsilon-per-query"),
            default=None,
            metavar="EPS",
            help="the epsilon each query spends unless it says otherwise (default: a tenth "
            "of --epsilon; .epsilon changes it)",
        )
        return parser
    if command == "query":
        parser = _Parser(
            prog="pinqpy query",
            description="Answer one SQL statement over private files.",
            epilog=_EPILOG,
        )
        parser.add_argument(
            "tables", nargs="+", metavar="NAME=PATH", help="a private table to load"
        )
        parser.add_argument("sql", metavar="QUERY", help="the SQL statement ('-': read stdin)")
        _add_common(parser)
        parser.add_argument(
            "--epsilon-per-query",
            type=_positive("--epsilon-per-query"),
            default=None,
            metavar="EPS",
            help="the epsilon the query spends unless it says otherwise (default: --epsilon)",
        )
        parser.add_argument(
            "--format",
            choices=("table", "csv", "json"),
            default="table",
            help="output format (default: table); csv and json add <col>_ci_low/_ci_high",
        )
        return parser
    raise CliError(f"unknown command {command!r}", 2)


def _query(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.sql == "-" else args.sql
    if not text.strip():
        raise CliError("the query is empty", 2)
    loaded = load_session(args)
    epsilon = args.epsilon_per_query if args.epsilon_per_query is not None else args.epsilon
    delta = args.delta_per_query if args.delta_per_query is not None else args.delta
    try:
        result = run_statement(loaded.session, text, epsilon, delta)
    except PinqError as err:
        raise CliError(one_line(err)) from None
    print(format_result(result, args.format))
    return 0


def _shell(args: argparse.Namespace) -> int:
    from pinqpy.interfaces.shell import Shell

    loaded = load_session(args)
    epsilon = args.epsilon_per_query
    if epsilon is None:
        epsilon = _tenth(args.epsilon)
    delta = args.delta_per_query if args.delta_per_query is not None else _tenth(args.delta)
    shell = Shell(loaded, epsilon=epsilon, delta=delta)
    if sys.stdin.isatty():
        return shell.interact()
    return shell.run_script(sys.stdin.read())


def _tenth(value: float) -> float:
    """A tenth of ``value``, spelled as a short decimal (0.7 -> 0.07, not 0.06999...).

    >>> _tenth(0.7)
    0.07
    """
    return float(Decimal(repr(value)) / 10)


def _dispatch(argv: Sequence[str]) -> int:
    if not argv:
        raise CliError("choose a command: demo, shell or query (see pinqpy --help)", 2)
    command, rest = argv[0], list(argv[1:])
    if command in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if command in ("-V", "--version"):
        print(f"pinqpy {__version__}")
        return 0
    if command == "demo":
        if rest and rest[0] in ("-h", "--help"):
            print(f"usage: pinqpy demo\n\n{COMMANDS['demo']}")
            return 0
        if rest:
            raise CliError(f"demo takes no arguments, got {' '.join(rest)!r}", 2)
        from pinqpy.demo import main as demo

        return demo()
    if command not in COMMANDS:
        raise CliError(f"unknown command {command!r}; choose demo, shell or query", 2)
    args = build_parser(command).parse_intermixed_args(rest)
    return _shell(args) if command == "shell" else _query(args)


def _tolerate_narrow_encodings() -> None:
    """Let output that cannot encode ``±`` (an ASCII terminal) degrade instead of failing."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            "±".encode(encoding)
        except (UnicodeEncodeError, LookupError):
            with contextlib.suppress(AttributeError, ValueError):
                stream.reconfigure(errors="replace")  # type: ignore[union-attr]


def main(argv: Iterable[str] | None = None) -> int:
    """Run the ``pinqpy`` command; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    _tolerate_narrow_encodings()
    try:
        return _dispatch(args)
    except CliError as err:
        print(f"pinqpy: error: {err}", file=sys.stderr)
        return err.status
    except PinqError as err:
        print(f"pinqpy: error: {one_line(err)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pinqpy: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``pinqpy query ... | head``): stop quietly.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 1
    except Exception as err:
        if os.environ.get("PINQPY_DEBUG"):
            raise
        # The message may quote private values, so only the error's type is shown.
        print(
            f"pinqpy: internal error ({type(err).__name__}); set PINQPY_DEBUG=1 for details",
            file=sys.stderr,
        )
        return 1
