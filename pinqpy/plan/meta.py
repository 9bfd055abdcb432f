"""Public facts about a frame's rows, attached to column identities rather than names.

A stability is decided from a handful of public facts: which column carries the privacy
unit, on which columns a frame is unique, the declared bounds and keys, and the column types.
If such a fact followed a column's *name*, an analyst could move it onto another column
(``assign(uid="visit_id")``) and be charged for a stability that no longer holds. So every
column has an identity (:class:`ColumnId`): a column that passes through a transformation
unchanged keeps it under any name, and every computed column gets a fresh one. Facts are
keyed by identity; names are only how the analyst spells them.

The facts of a plan are derived from the plan itself, in one place
(:mod:`pinqpy.plan.facts`), never assembled by hand; nothing here reads private data.
"""

from __future__ import annotations

import contextvars
import math
from collections.abc import Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from pinqpy.errors import PinqError
from pinqpy.expr.types import ColumnType, valid_text
from pinqpy.plan.keys import NO_MATCH, canonical_key, is_null_key

__all__ = [
    "RESERVED_PREFIX",
    "ColumnId",
    "FrameMeta",
    "PublicSize",
    "UnitDomain",
    "check_bounds",
    "check_column_name",
    "check_keys",
    "internal_names",
]

# Executors name their scratch columns with this prefix; user columns may not start with it.
RESERVED_PREFIX = "__pinq"


@dataclass(frozen=True)
class ColumnId:
    """The identity of a column: where its values were made (a table or a plan node) and the
    name they were made under. Equal only for the very same origin and name."""

    origin: object = field(repr=False)
    name: str


@dataclass(frozen=True)
class UnitDomain:
    """Whose units a privacy-unit column names: the tables of one budget that declare the
    same unit column. By declaring it, the curator says the values identify people alike
    across those tables; units of another budget are other people, whatever their ids.
    ``agent`` is the budget's name in the catalog (one name per budget)."""

    agent: str
    name: str


class PublicSize:
    """A table's row count, declared public by its curator (``public_size=True``), as census
    totals are.

    Only the declaration is known when the table is wrapped; the number itself is read once,
    at its first use (:func:`pinqpy.pipeline.prepare.public_row_count`), and kept in ``n``.
    Being public, it may be released and shown as it is. It is a fact of the table's rows,
    so it holds only for frames with exactly those rows (see :mod:`pinqpy.plan.facts`).
    Compared by identity: one declaration per table.
    """

    __slots__ = ("n", "table")

    def __init__(self, table: object):
        self.table = table
        self.n: int | None = None

    def __repr__(self) -> str:
        return f"PublicSize(n={self.n!r})"


@dataclass(frozen=True)
class FrameMeta:
    """What is known about a frame's rows without reading them.

    ``unit`` is set only while every row's unit column names the unit (of ``unit[1]``) that
    owns the row. ``unique`` lists column-identity sets on which the frame has at most one
    row per value. ``col_bounds`` and ``col_keys`` hold the declared (or derived) bounds and
    public keys per identity. ``size`` is set only while the frame has exactly the rows of
    a table whose row count its curator declared public (:class:`PublicSize`).
    """

    schema: dict[str, ColumnType]
    ids: dict[str, ColumnId]
    col_bounds: dict[ColumnId, tuple[float, float]] = field(default_factory=dict)
    col_keys: dict[ColumnId, tuple[Hashable, ...]] = field(default_factory=dict)
    unit: tuple[ColumnId, UnitDomain] | None = None
    unique: frozenset[frozenset[ColumnId]] = frozenset()
    allow_callables: bool = True
    size: PublicSize | None = None

    def __post_init__(self) -> None:
        # Facts of identities that are no longer columns are dropped, so no later step can
        # pick them up again under a name.
        present = set(self.ids.values())
        object.__setattr__(
            self, "col_bounds", {i: b for i, b in self.col_bounds.items() if i in present}
        )
        object.__setattr__(
            self, "col_keys", {i: k for i, k in self.col_keys.items() if i in present}
        )
        if self.unit is not None and self.unit[0] not in present:
            object.__setattr__(self, "unit", None)
        object.__setattr__(self, "unique", frozenset(u for u in self.unique if u <= present))

    @property
    def columns(self) -> list[str]:
        return list(self.schema)

    @property
    def bounds(self) -> dict[str, tuple[float, float]]:
        """Bounds by column name."""
        return {n: self.col_bounds[i] for n, i in self.ids.items() if i in self.col_bounds}

    @property
    def keys(self) -> dict[str, tuple[Hashable, ...]]:
        """Public keys by column name."""
        return {n: self.col_keys[i] for n, i in self.ids.items() if i in self.col_keys}

    @property
    def privacy_unit(self) -> str | None:
        """The name of the column that carries the privacy unit, if one still does."""
        if self.unit is None:
            return None
        return next((n for n, i in self.ids.items() if i == self.unit[0]), None)

    def unique_on(self, columns: Iterable[str]) -> bool:
        """Whether the frame has at most one row per value of ``columns``."""
        have = {self.ids[c] for c in columns if c in self.ids}
        return any(u <= have for u in self.unique)


_INTERNAL_NAMES: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "pinqpy_internal_names", default=False
)


@contextmanager
def internal_names() -> Iterator[None]:
    """While active, computed columns may use the reserved prefix: the SQL compiler names its
    scratch columns so, after refusing the prefix in the query text."""
    token = _INTERNAL_NAMES.set(True)
    try:
        yield
    finally:
        _INTERNAL_NAMES.reset(token)


def check_column_name(name: object, *, internal_ok: bool = False) -> str:
    """A column name a user may give: a string not starting with the reserved prefix
    (``internal_ok``: unless pinqpy itself is naming a computed column)."""
    if not isinstance(name, str):
        raise PinqError(f"column names must be strings, not {type(name).__name__}")
    if name.lower().startswith(RESERVED_PREFIX) and not (internal_ok and _INTERNAL_NAMES.get()):
        raise PinqError(
            f"column name {name!r} starts with {RESERVED_PREFIX!r}, which pinqpy reserves for "
            "its own working columns; rename the column"
        )
    return name


def check_bounds(bounds: object, what: str) -> tuple[float, float]:
    """A (lo, hi) pair of finite numbers with lo <= hi, or a clear error."""
    try:
        lo, hi = bounds  # type: ignore[misc]
        lo_f, hi_f = float(lo), float(hi)
    except (TypeError, ValueError):
        raise PinqError(f"bounds for {what} must be a pair (lo, hi) of numbers") from None
    if not (math.isfinite(lo_f) and math.isfinite(hi_f)):
        raise PinqError(f"bounds for {what} must be finite numbers")
    if lo_f > hi_f:
        raise PinqError(f"bounds for {what} have lo > hi; give them as (lo, hi) with lo <= hi")
    return (lo_f, hi_f)


_COMPATIBLE: dict[ColumnType, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "str": (str,),
    "bool": (bool,),
}


def check_keys(
    keys: object, columns: tuple[str, ...], schema: Mapping[str, ColumnType]
) -> tuple[Hashable, ...]:
    """Validate public keys for ``columns``: a non-empty list of values (tuples for several
    columns) whose types match the columns', returned in canonical spelling.

    Keys are compared the way the executors match rows: all NULL-likes are one key, and
    ``1``, ``1.0`` (and ``True``) are one number. Keys that repeat under that equality are
    refused, since two parts holding the same rows would be charged as one.
    """
    if isinstance(keys, str | bytes) or not isinstance(keys, Iterable):
        raise PinqError(
            "keys must be a list of values (tuples when partitioning by several columns)"
        )
    keys = list(keys)
    out = _plain_keys(keys, schema.get(columns[0], "any")) if len(columns) == 1 else None
    if out is None:
        out = _checked_keys(keys, columns, schema)
    if not out:
        raise PinqError("keys must not be empty")
    try:
        distinct = len(set(out))
    except TypeError:
        raise PinqError("keys must be hashable values") from None
    if distinct != len(out):
        raise PinqError(
            "keys must not repeat (all NULL-like values, None, NaN, pd.NA and NaT, are one key, "
            "and 1, 1.0 and True are one number)"
        )
    return tuple(out)


def _plain_keys(keys: list[object], ctype: ColumnType) -> list[Hashable] | None:
    """The canonical spelling of the usual keys, exact ``str`` keys of a text column or exact
    ``int`` keys of an integer one, without a call per key (a few µs each; 50 keys a
    partition); None for any other list. The same values as :func:`canonical_key` gives
    (``valid_text`` for text, the int itself for an int)."""
    if ctype == "str" and all(type(k) is str for k in keys):
        return [valid_text(k) for k in keys]  # type: ignore[arg-type]
    if ctype == "int" and all(type(k) is int for k in keys):
        return keys  # type: ignore[return-value]
    return None


def _checked_keys(
    keys: list[object], columns: tuple[str, ...], schema: Mapping[str, ColumnType]
) -> list[Hashable]:
    out: list[Hashable] = []
    for k in keys:
        parts = k if len(columns) > 1 else (k,)
        if len(columns) > 1 and (not isinstance(k, tuple) or len(k) != len(columns)):
            raise PinqError(
                f"each key must be a tuple of {len(columns)} values, one for each of "
                + ", ".join(columns)
            )
        canon = []
        for col, v in zip(columns, parts, strict=True):
            ctype = schema.get(col, "any")
            _check_key_type(v, col, ctype)
            key = canonical_key(v, ctype)
            if key is NO_MATCH:
                raise PinqError(
                    f"key of type {type(v).__name__} does not match column {col!r} of type {ctype}"
                )
            canon.append(key)
        out.append(tuple(canon) if len(columns) > 1 else canon[0])
    return out


def _check_key_type(value: object, column: str, ctype: ColumnType) -> None:
    if is_null_key(value):
        return
    kinds = _COMPATIBLE.get(ctype)
    if kinds is None:
        return
    ok = isinstance(value, kinds) and not (ctype != "bool" and isinstance(value, bool))
    if ctype == "int" and isinstance(value, float) and float(value).is_integer():
        ok = True
    if not ok:
        try:
            import numpy as np

            if (
                ctype in ("int", "float")
                and isinstance(value, np.integer | np.floating)
                and not (ctype == "int" and isinstance(value, np.floating) and value % 1 != 0)
            ) or (ctype == "bool" and isinstance(value, np.bool_)):
                ok = True
        except ImportError:  # pragma: no cover
            pass
    if not ok:
        raise PinqError(
            f"key of type {type(value).__name__} does not match column {column!r} of type {ctype}"
        )
