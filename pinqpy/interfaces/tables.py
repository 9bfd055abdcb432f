"""Turning the command line's table arguments into registered tables of a Session.

Each ``NAME=PATH`` argument loads one file as a private table with its own budget of
``--epsilon`` (and ``--delta``); ``--public NAME=PATH`` loads a public table. The budgets
are kept in a ledger (see :func:`ledger_path` and :func:`ledger_budget_name`), so a budget
goes on where the last run left it. Metadata flags apply to every private table that has the
column they name::

    pinqpy query people=people.csv --epsilon 1 --bounds age=0:100 --keys sex=0,1 \\
        "SELECT sex, AVG(age) FROM people GROUP BY sex"

>>> parse_bounds("age=0:100")
('age', (0, 100))
>>> parse_assignment("visits=user_id", "--privacy-unit")
('visits', 'user_id')
>>> parse_assignment("user_id", "--privacy-unit")
(None, 'user_id')

``--demo-data`` adds the bundled PUMS sample as the private table ``pums`` (see
:func:`demo_spec`), so every example runs without a file of one's own.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pandas as pd

from pinqpy.accounting.budget import Budget
from pinqpy.accounting.ledger import Ledger
from pinqpy.api.session import Session
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, PUMS_PATH
from pinqpy.engines.inferred import inferred_types, inferred_types_message
from pinqpy.engines.registry import Wrapped
from pinqpy.errors import PinqError
from pinqpy.expr.types import COLUMN_TYPES
from pinqpy.interfaces.errors import CliError, one_line
from pinqpy.interfaces.files import declare_types, open_table, read_table
from pinqpy.interfaces.state_dir import STATE_ENV, default_ledger_path, ensure_dir

__all__ = [
    "DEMO_EPSILON",
    "DEMO_TABLE",
    "LoadedSession",
    "TableSpec",
    "demo_spec",
    "ledger_budget_name",
    "ledger_path",
    "load_session",
    "parse_assignment",
    "parse_bounds",
    "parse_keys",
    "parse_schema",
    "parse_table_spec",
]

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

DEMO_TABLE = "pums"  # the name ``pinqpy serve --demo`` gives the same sample
DEMO_EPSILON = 1.0
_INT_RE = re.compile(r"[+-]?\d+")


# -- parsing the table arguments --------------------------------------------------------------


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


def demo_spec() -> TableSpec:
    """``--demo-data``: the bundled PUMS sample (:data:`pinqpy.demo.PUMS_PATH`) as the table
    ``pums``, registered with the demo's public bounds (age 0-100, income 0-500,000) and keys
    (sex, married, race, educ) unless ``--bounds`` / ``--keys`` say otherwise.

    >>> demo_spec().name
    'pums'
    """
    return TableSpec(DEMO_TABLE, Path(PUMS_PATH))


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


# -- building the session ---------------------------------------------------------------------


@dataclass
class LoadedSession:
    """The session the command built, each private table's own budget, and the ledger file
    the budgets are kept in (None with ``--no-ledger``)."""

    session: Session
    budgets: dict[str, Budget] = field(default_factory=dict)
    columns: dict[str, list[str]] = field(default_factory=dict)
    public: list[str] = field(default_factory=list)
    ledger: Path | None = None
    #: Warnings for the curator, one line each (a table whose types were inferred).
    warnings: list[str] = field(default_factory=list)


def ledger_path(args: argparse.Namespace) -> Path | None:
    """The ledger file the command keeps its budgets in: ``--ledger PATH``, else ``ledger.db``
    in the user's state directory (created, mode 0700; see :mod:`pinqpy.interfaces.state_dir`),
    or None with ``--no-ledger``.

    Keeping budgets is the default because a budget that starts afresh on every run is no
    budget: each run could spend it again on the same question, and averaging k independent
    Laplace answers shrinks the noise by a factor of sqrt(k), so the released values converge
    on the true one. With a ledger the k-th identical query is answered from the ledger's
    cache (the same value, at no charge) and new queries draw down what is left.

    The one exception is ``--demo-data`` alone (no files of one's own, no ``--ledger``): the
    bundled sample is public data (a public-use Census extract, shipped inside the package),
    so there is no one to protect and a ledger would only make the documentation's examples
    stop working after a few runs; its budget starts afresh on every run, and the shell's
    banner says so. Given with files of one's own, the ledger is kept as usual (for them and
    the sample).
    """
    if getattr(args, "no_ledger", False):
        return None
    given = getattr(args, "ledger", None)
    if given:
        return Path(given).expanduser()
    if getattr(args, "demo_data", False) and not args.tables:
        return None
    path = default_ledger_path()
    try:
        ensure_dir(path.parent)
    except OSError as err:
        raise CliError(
            f"cannot create the folder {str(path.parent)!r} for the budget ledger "
            f"({err.strerror or err}); set {STATE_ENV}, or choose a file with --ledger PATH",
        ) from None
    return path


def ledger_budget_name(spec: TableSpec) -> str:
    """The name of a private table's budget in the ledger: ``NAME@RESOLVED_PATH``.

    Running the same command again finds the same budget and goes on spending it; two
    different files that happen to share a name (``people=a/people.csv`` and
    ``people=b/people.csv``) keep separate budgets. The name covers the table name too, as
    every ``NAME=PATH`` argument has a budget of its own within one run; so a file loaded
    under a new name starts a new budget. That is the curator's choice to make (the ledger
    guards against reruns forgetting, not against its own user), and the audit trail
    (``SHOW LEDGER``) shows every budget a file was given.

    >>> name = ledger_budget_name(TableSpec("people", Path("people.csv")))
    >>> name == f"people@{Path.cwd().resolve() / 'people.csv'}"
    True
    """
    return f"{spec.name}@{spec.path.expanduser().resolve()}"


def _open_ledger(path: Path) -> Ledger:
    try:
        return Ledger(path)
    except PinqError as err:
        raise CliError(f"ledger {str(path)!r}: {one_line(err)}") from None
    except OSError as err:  # pragma: no cover - sqlite reports most of these itself
        raise CliError(f"ledger {str(path)!r}: {err.strerror or err}") from None


def _budget(
    args: argparse.Namespace, spec: TableSpec, ledger: Ledger | None, path: Path | None
) -> Budget:
    """The budget of one private table, opened in the ledger when one is kept.

    A ledger never lets a budget's total change silently (:meth:`Ledger.open_budget`): a
    rerun with another ``--epsilon`` or ``--delta`` is refused with what to do instead.
    """
    epsilon, delta = args.epsilon, args.delta or 0
    try:
        requested = Budget(epsilon, delta).total
    except PinqError as err:
        raise CliError(f"--epsilon/--delta: {one_line(err)}", 2) from None
    if ledger is None:
        return Budget(epsilon, delta, name=spec.name)
    name = ledger_budget_name(spec)
    if not _has_budget(ledger, name) and _has_budget(ledger, spec.name):
        # A ledger written before budgets were named after their files keeps the table's
        # budget under its bare name: go on spending that one rather than start afresh.
        name = spec.name
    try:
        return Budget(epsilon, delta, ledger=ledger, name=name)
    except PinqError as err:
        try:
            stored = ledger.total(name)
        except PinqError:
            stored = None
        if stored is None or stored == requested:
            raise CliError(f"ledger {str(path)!r}: {one_line(err)}") from None
    total = f"epsilon {_spelled(stored.epsilon)}"
    flags = f"--epsilon {_spelled(stored.epsilon)}"
    if stored.delta:
        total += f", delta {_spelled(stored.delta)}"
        flags += f" --delta {_spelled(stored.delta)}"
    raise CliError(
        f"the ledger {str(path)!r} already keeps a budget for table {spec.name} "
        f"({spec.path.expanduser().resolve()}) with a total of {total}: run with {flags} "
        "to go on spending it, or keep a separate budget in another file with --ledger PATH",
        2,
    )


def _has_budget(ledger: Ledger, name: str) -> bool:
    try:
        ledger.total(name)
    except PinqError:
        return False
    return True


def _spelled(value: object) -> str:
    """A stored total as a flag value that reads back as the same number.

    >>> from fractions import Fraction
    >>> _spelled(Fraction(1)), _spelled(Fraction(1, 10)), _spelled(Fraction(1, 10**6))
    ('1', '0.1', '1e-06')
    """
    text = repr(float(value))  # type: ignore[arg-type]
    return text[:-2] if text.endswith(".0") else text


def load_session(args: argparse.Namespace, stream: IO[str] | None = None) -> LoadedSession:
    """Load every file named on the command line and register it with its metadata."""
    private = [parse_table_spec(t) for t in args.tables]
    demo = bool(getattr(args, "demo_data", False))
    if demo:
        private.append(demo_spec())
    public = [parse_table_spec(t, "--public") for t in args.public or []]
    names = [s.name for s in [*private, *public]]
    for n in names:
        if names.count(n) > 1:
            also = " (--demo-data names its table pums)" if demo and n == DEMO_TABLE else ""
            raise CliError(f"table name {n!r} is given twice{also}", 2)
    bounds = [parse_bounds(b) for b in args.bounds or []]
    keys = [parse_keys(k) for k in args.keys or []]
    units = [parse_assignment(u, "--privacy-unit") for u in args.privacy_unit or []]
    max_rows = [parse_assignment(m, "--max-rows") for m in args.max_rows or []]
    schema_texts = getattr(args, "schema", None) or []
    declared = [parse_schema(t) for t in schema_texts]

    engine = getattr(args, "engine", "pandas") or "pandas"
    frames = _open_private(private, engine, schema_texts, declared, stream)
    public_frames = {s.name: read_table(s.path, name=s.name, stream=stream) for s in public}
    meta = _metadata(args, frames, bounds, keys, units, max_rows)
    if demo:  # the demo's public facts, unless a flag said otherwise
        meta[DEMO_TABLE]["bounds"] = {**PUMS_BOUNDS, **meta[DEMO_TABLE]["bounds"]}
        meta[DEMO_TABLE]["keys"] = {**PUMS_KEYS, **meta[DEMO_TABLE]["keys"]}

    path = ledger_path(args)
    ledger = None if path is None else _open_ledger(path)
    loaded = LoadedSession(Session(), ledger=path)
    loaded.warnings += _inferred_warnings(private, frames, demo)
    for spec in private:
        n, df = spec.name, frames[spec.name]
        budget = _budget(args, spec, ledger, path)
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


def _inferred_warnings(
    private: Sequence[TableSpec], frames: Mapping[str, Any], demo: bool
) -> list[str]:
    """One warning per table whose column types were inferred from its file's rows, with
    the ``--schema`` flags that declare them (the bundled demo sample's are pinqpy's own)."""
    out = []
    for spec in private:
        types = inferred_types(frames[spec.name]) if isinstance(frames[spec.name], Wrapped) else {}
        if not types or (demo and spec.name == DEMO_TABLE):
            continue
        flags = " ".join(f"--schema {c}={t}" for c, t in types.items())
        out.append(inferred_types_message(f"table {spec.name} ({spec.path})", flags))
    return out


def _open_private(
    private: Sequence[TableSpec],
    engine: str,
    schema_texts: Sequence[str],
    declared: Sequence[tuple[str, str]],
    stream: IO[str] | None,
) -> dict[str, Any]:
    """The private tables by name, read (pandas) or opened (DuckDB, Spark), with the declared
    types (``--schema`` arguments, parsed as (column, type)) of the columns each has."""
    declared_columns = [c for c, _ in declared]
    if engine == "pandas":
        frames: dict[str, Any] = {
            s.name: read_table(s.path, name=s.name, stream=stream, text_columns=declared_columns)
            for s in private
        }
    else:
        frames = {s.name: open_table(s.path, engine, name=s.name) for s in private}
    for text, (column, _) in zip(schema_texts, declared, strict=True):
        if not any(column in _columns(t) for t in frames.values()):
            raise CliError(f"--schema {text}: no private table has a column {column!r}", 2)
    for spec in private:
        # Declared types are converted (or cast) once, as the table is opened; the others
        # are inferred from the file (DESCRIBE shows which).
        mine = {c: t for c, t in declared if c in _columns(frames[spec.name])}
        frames[spec.name] = declare_types(
            frames[spec.name], spec.path, engine, mine, name=spec.name
        )
    return frames


def _metadata(
    args: argparse.Namespace,
    frames: Mapping[str, Any],
    bounds: Sequence[tuple[str, tuple[int | float, int | float]]],
    keys: Sequence[tuple[str, list[str]]],
    units: Sequence[tuple[str | None, str]],
    max_rows: Sequence[tuple[str | None, str]],
) -> dict[str, dict[str, Any]]:
    """Each private table's ``register`` keywords (bounds, keys, privacy unit, max rows) from
    the parsed flags; a flag naming a column applies to every table that has it."""

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
    return meta


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
