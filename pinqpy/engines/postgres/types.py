"""PostgreSQL column types as pinqpy reads them, decided from the catalog when a table is
wrapped (never from its values).

=====================================================  ==========  ==========================
PostgreSQL type                                        pinqpy      read as
=====================================================  ==========  ==========================
``smallint``, ``integer``, ``bigint``                  int         ``bigint``
``real``, ``double precision``                         float       ``double precision``, NaN
                                                                   as NULL
``numeric`` / ``decimal``                              float       ``double precision``
                                                                   (beyond its range: ±inf)
``boolean``                                            bool        as is
``text``, ``character varying``, ``character``,        str         ``text`` (``character``
``name``, ``uuid``, enum types                                     without its padding)
``timestamp``, ``timestamp with time zone``, ``date``  datetime    ``timestamp`` (with time
                                                                   zone: in UTC); ±infinity
                                                                   as NULL
=====================================================  ==========  ==========================

An array of any of these types (``integer[]``, ``text[]``, ...) is a list
(:mod:`~pinqpy.engines.postgres.arrays`: schema type ``any``, read by ``explode``). Any other
type (``json``, ``bytea``, ``interval``, ``time``, arrays of those, ...) is refused when the
table is wrapped: the error names the column and suggests a view that casts it.
"""

from __future__ import annotations

from collections.abc import Sequence

from pinqpy.errors import PinqError
from pinqpy.expr.types import ColumnType

__all__ = ["KINDS", "column_read", "item_type", "kind_of", "postgres_schema"]

#: The catalog's type names (``format_type``, without modifiers) and their pinqpy kinds.
KINDS: dict[str, str] = {
    "smallint": "int",
    "integer": "int",
    "bigint": "int",
    "real": "float",
    "double precision": "float",
    "numeric": "float",
    "boolean": "bool",
    "text": "str",
    "character varying": "str",
    "character": "str",
    "name": "str",
    "uuid": "str",
    "enum": "str",
    "timestamp without time zone": "datetime",
    "timestamp with time zone": "datetime",
    "date": "datetime",
}

_F8 = "DOUBLE PRECISION"
# The exact decimals beyond which a numeric rounds to an infinity, and at or below which to
# zero, as a double (PostgreSQL's cast raises on both).
_OVERFLOW = str(2**1024 - 2**970)
# (2**-1075 is 5**1075 / 10**1075; as a float it would be 0.)
_UNDERFLOW = "0." + str(5**1075).rjust(1075, "0")


def base_type(type_name: str) -> str:
    """A catalog type name without its modifiers (``character varying(10)`` → ``character
    varying``, ``numeric(10,2)`` → ``numeric``, ``timestamp(3) without time zone`` →
    ``timestamp without time zone``)."""
    out, depth = [], 0
    for ch in type_name:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = " ".join("".join(out).split())
    return {"timestamp": "timestamp without time zone"}.get(name, name)


def item_type(type_name: str) -> str | None:
    """The item type of an array type pinqpy reads (``integer[]`` -> ``integer``), None for
    any other type."""
    t = base_type(type_name)
    if not t.endswith("[]"):
        return None
    item = base_type(t[:-2])
    return item if item in KINDS else None


def kind_of(type_name: str) -> str | None:
    """The pinqpy kind of a catalog type (``other`` for a list), or None for a type pinqpy
    does not read."""
    if item_type(type_name) is not None:
        return "other"
    return KINDS.get(base_type(type_name))


def column_read(q: str, type_name: str) -> tuple[str, bool]:
    """How a stored column (quoted ``q``) of ``type_name`` is read as its kind's type, and
    whether the read is a conversion that plans apply only where a value is read (a double's
    NaN, read as NULL); the other conversions are made once, in the source's projection."""
    t = base_type(type_name)
    if t in ("smallint", "integer"):
        return f"CAST({q} AS BIGINT)", False
    if t == "real":
        return f"CAST({q} AS {_F8})", True
    if t == "double precision":
        return q, True
    if t == "numeric":
        # A numeric beyond the doubles' range becomes an infinity, as Python's float() of a
        # Decimal does (PostgreSQL's cast raises); a numeric NaN is a double NaN.
        big = _OVERFLOW
        return (
            f"(CASE WHEN abs({q}) >= {big} THEN sign({q}) * CAST('Infinity' AS {_F8}) "
            f"WHEN abs({q}) <= {_UNDERFLOW} THEN CAST(0 AS {_F8}) ELSE CAST({q} AS {_F8}) END)",
            True,
        )
    if t in ("character", "name", "uuid", "enum"):
        return f"CAST({q} AS TEXT)", False
    if t == "timestamp with time zone":
        return f"(CASE WHEN isfinite({q}) THEN ({q} AT TIME ZONE 'UTC') END)", False
    if t == "date":
        return f"(CASE WHEN isfinite({q}) THEN CAST({q} AS TIMESTAMP) END)", False
    if t == "timestamp without time zone":
        return f"(CASE WHEN isfinite({q}) THEN {q} END)", False
    return q, False


def postgres_schema(
    table: str, columns: Sequence[str], types: Sequence[str]
) -> dict[str, ColumnType]:
    """pinqpy column types of a PostgreSQL table; a column of a type pinqpy does not read is
    refused, before anything is charged."""
    out: dict[str, ColumnType] = {}
    for c, t in zip(columns, types, strict=True):
        kind = kind_of(t)
        if kind is None:
            raise PinqError(
                f"column {c!r} of {table} has the PostgreSQL type {t}, which pinqpy does not "
                "read (it reads integers, reals, numeric, boolean, text, uuid, enums, dates "
                "and timestamps, and arrays of them); wrap a view that casts it, e.g. "
                "CREATE VIEW v AS SELECT "
                f"CAST({c} AS text) AS {c}, ... FROM {table}"
            )
        out[c] = "any" if kind == "other" else kind  # type: ignore[assignment]
    return out
