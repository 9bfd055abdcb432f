"""DuckDB column types as pinqpy reads them."""

from __future__ import annotations

from collections.abc import Sequence

from pinqpy.expr.types import ColumnType

__all__ = ["duckdb_schema", "kind_of_type"]


def kind_of_type(type_name: str) -> str:
    """The pandas_eval kind of a DuckDB column type ("other" for lists and the like)."""
    t = type_name.upper()
    if t.endswith("]") or t.startswith(("STRUCT", "MAP", "UNION")):
        return "other"
    if t in ("BIGINT", "INTEGER", "SMALLINT", "TINYINT", "UINTEGER", "USMALLINT", "UTINYINT"):
        return "int"
    if t in ("UBIGINT", "HUGEINT", "UHUGEINT"):
        return "int"
    if t in ("DOUBLE", "FLOAT", "REAL") or t.startswith("DECIMAL"):
        return "float"
    if t == "BOOLEAN":
        return "bool"
    if t in ("VARCHAR", "UUID") or t.startswith("ENUM"):
        return "str"
    if t.startswith(("TIMESTAMP", "DATE")):
        return "datetime"
    return "other"


def duckdb_schema(columns: Sequence[str], types: Sequence[str]) -> dict[str, ColumnType]:
    """pinqpy column types of a DuckDB relation's columns (lists, structs and maps: "any")."""
    out: dict[str, ColumnType] = {}
    for c, t in zip(columns, types, strict=True):
        kind = kind_of_type(t)
        out[c] = "any" if kind == "other" else kind  # type: ignore[assignment]
    return out
