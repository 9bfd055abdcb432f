"""Public metadata that travels with a frame: schema, declared bounds and keys, privacy unit.

None of it is read off the private data except the schema (column names and types), which
pinqpy treats as public, like PINQ and every SQL DP system.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from ._expr.types import ColumnType
from .errors import PinqError

__all__ = ["FrameMeta", "check_bounds", "check_keys"]


@dataclass(frozen=True)
class FrameMeta:
    """What is known about a frame's rows without reading them.

    ``privacy_unit`` is set only while every row's unit column names the unit that owns the
    row (so ``bound_contributions`` and ``groupby(unit)`` are sound). ``unique_on`` lists
    column sets on which the frame is known to have at most one row per value.
    """

    schema: dict[str, ColumnType]
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    keys: dict[str, tuple[Hashable, ...]] = field(default_factory=dict)
    privacy_unit: str | None = None
    unique_on: frozenset[frozenset[str]] = frozenset()
    allow_callables: bool = True

    @property
    def columns(self) -> list[str]:
        return list(self.schema)

    def restrict(self, columns: Iterable[str]) -> FrameMeta:
        """Metadata for a frame that keeps only ``columns`` (in that order)."""
        cols = list(columns)
        keep = set(cols)
        return replace(
            self,
            schema={c: self.schema[c] for c in cols},
            bounds={c: b for c, b in self.bounds.items() if c in keep},
            keys={c: k for c, k in self.keys.items() if c in keep},
            privacy_unit=self.privacy_unit if self.privacy_unit in keep else None,
            unique_on=frozenset(u for u in self.unique_on if u <= keep),
        )


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
    """Validate public keys for ``columns``: a non-empty list of unique values (tuples for
    several columns) whose types match the columns'."""
    if isinstance(keys, str | bytes) or not isinstance(keys, Iterable):
        raise PinqError(
            "keys must be a list of values (tuples when partitioning by several columns)"
        )
    out = tuple(keys)
    if not out:
        raise PinqError("keys must not be empty")
    for k in out:
        parts = k if len(columns) > 1 else (k,)
        if len(columns) > 1 and (not isinstance(k, tuple) or len(k) != len(columns)):
            raise PinqError(
                f"each key must be a tuple of {len(columns)} values, one for each of "
                + ", ".join(columns)
            )
        for col, v in zip(columns, parts, strict=True):
            _check_key_type(v, col, schema.get(col, "any"))
    try:
        distinct = len(set(out))
    except TypeError:
        raise PinqError("keys must be hashable values") from None
    if distinct != len(out):
        raise PinqError("keys must not repeat")
    return out


def _check_key_type(value: object, column: str, ctype: ColumnType) -> None:
    if value is None:
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

            if (ctype in ("int", "float") and isinstance(value, np.integer | np.floating)) or (
                ctype == "bool" and isinstance(value, np.bool_)
            ):
                ok = True
        except ImportError:  # pragma: no cover
            pass
    if not ok:
        raise PinqError(
            f"key of type {type(value).__name__} does not match column {column!r} of type {ctype}"
        )
