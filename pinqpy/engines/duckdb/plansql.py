"""Plans as DuckDB SQL: each plan node becomes one common table expression (CTE) over the
connection's tables, with its schema derived where the translation fixes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from pinqpy.engines.duckdb.connection import DuckDBConnection
from pinqpy.engines.duckdb.dialect import DUCKDB
from pinqpy.engines.duckdb.types import kind_of_type
from pinqpy.engines.sqlgen.expressions import Lets, S
from pinqpy.engines.sqlgen.keycounts import KeyColumn
from pinqpy.engines.sqlgen.plans import Col, CtePlanSql, key_literal
from pinqpy.expr.ast import Expr
from pinqpy.plan.nodes import PyFunc, Source

__all__ = ["PlanSql", "is_enum", "split_column", "value_literal"]


# -- plans ------------------------------------------------------------------------------------
class PlanSql(CtePlanSql[str]):
    """Turns a plan into CTEs over one connection; each visit returns the node's CTE name.

    A node shared by several parents (``f.concat(f)``) becomes one CTE. Each CTE's schema
    is derived here where it follows from the translation, so binding a query is needed only
    for sources and the few nodes whose types DuckDB decides (set operations, lists).

    Floating-point columns are read as they are stored: a NaN in them means NULL, and a CTE
    lists such columns in ``nan``. Expressions read them as NULL; nodes that compare or
    group whole values normalize them; plain filters and projections pass them through, so
    an aggregate of a stored column pays for no normalization (it skips NaN instead).
    ENUM columns are kept as stored too and read as their text (VARCHAR) the same way, so a
    GROUP BY or a filter on one works on its codes and only the few groups are converted.
    """

    d = DUCKDB

    def __init__(self, ex: DuckDBConnection) -> None:
        super().__init__()
        self.ex = ex
        self._schemas: dict[str, list[tuple[str, str]]] = {}
        self._nan: dict[str, frozenset[str]] = {}

    # -- bookkeeping ----------------------------------------------------------------------
    def add(self, sql: str, cols: Sequence[Col | None], reads: Sequence[str], sure: bool) -> str:
        # ``sure`` needs no record: the translators say whether anything is unchecked.
        schema: list[tuple[str, str]] | None = None
        if cols and all(c is not None and c.dtype is not None for c in cols):
            schema = [(c.name, c.dtype) for c in cols]  # type: ignore[union-attr]
        nan = frozenset(c.name for c in cols if c is not None and c.nan)
        return self._add(sql, schema, nan, reads)

    def _add(
        self,
        sql: str,
        schema: list[tuple[str, str]] | None = None,
        nan: frozenset[str] = frozenset(),
        reads: Sequence[str] = (),
    ) -> str:
        name = self.cte(sql, reads)
        if schema is not None:
            self._schemas[name] = schema
        if nan:
            self._nan[name] = nan
        return name

    def schema(self, name: str) -> list[tuple[str, str]]:
        """(column, DuckDB type) of a CTE; where not derived, found by binding (reads no data)."""
        hit = self._schemas.get(name)
        if hit is None:
            hit = self.ex._bind(self.query(f"SELECT * FROM {name}", name))
            self._schemas[name] = hit
        return hit

    def kinds(self, name: str) -> dict[str, str]:
        return {c: kind_of_type(t) for c, t in self.schema(name)}

    def nan(self, name: str) -> frozenset[str]:
        return self._nan.get(name, frozenset())

    def name(self, rel: str) -> str:
        return rel

    def columns(self, rel: str) -> list[Col]:
        nan = self.nan(rel)
        return [Col(c, kind_of_type(t), t, c in nan) for c, t in self.schema(rel)]

    def key_literal(self, v: object, kind: str) -> str:
        return value_literal(v, kind)

    def value_expr(self, e: Expr | PyFunc, rel: str, lets: Lets, what: str) -> S:
        """``e`` over ``rel``, its bound values in ``lets``."""
        return self.expr(e, self.translator(rel, lets)[0], what)

    # -- nodes ----------------------------------------------------------------------------
    def visit_source(self, node: Source) -> str:
        data = self.ex.catalog.data(node.table)
        raw = self.ex._table(data)
        # Only the columns that change are listed: a shorter query binds faster, and a
        # filtered count over a file takes a few milliseconds in all.
        casts, schema, nan = [], [], set()
        for c, t in self.ex._table_schema(data):
            q = DUCKDB.ident(c)
            u = t.upper()
            if u in ("INTEGER", "SMALLINT", "TINYINT", "UINTEGER", "USMALLINT", "UTINYINT"):
                casts.append(f"CAST({q} AS BIGINT) AS {q}")
                t = "BIGINT"
            elif u in ("UBIGINT", "HUGEINT", "UHUGEINT"):
                casts.append(f"TRY_CAST({q} AS BIGINT) AS {q}")
                t = "BIGINT"
            elif u in ("FLOAT", "REAL", "DOUBLE") or u.startswith("DECIMAL"):
                if u != "DOUBLE":
                    casts.append(f"CAST({q} AS DOUBLE) AS {q}")
                t = "DOUBLE"
                if not u.startswith("DECIMAL"):
                    nan.add(c)
            elif u.startswith("ENUM"):
                # Kept as stored (grouped and filtered by its codes, several times faster
                # than text) and read as VARCHAR wherever a value is read (stored_read).
                nan.add(c)
            schema.append((c, t))
        if not casts and self._schemas.get(raw, schema) == schema:
            # Read by its own name: a CTE that only renames it would cost DuckDB another
            # projection of every row (a few percent of a filtered count on a million rows).
            # (Two sources read by one name are one table, unless a file changed between
            # their wraps: then each keeps its own CTE and schema, as before.)
            self._schemas[raw] = schema
            if nan:
                self._nan[raw] = frozenset(nan)
            return raw
        return self._add(
            f"SELECT * REPLACE ({', '.join(casts)}) FROM {raw}", schema, frozenset(nan)
        )

    def stored_read(self, col: Col, q: str) -> str:
        """A stored ENUM column is read as its text (VARCHAR), as everywhere else in pinqpy:
        expressions, comparisons, joins and set operations see only strings, never the
        enum's order or codes. A stored float column: NaN as NULL."""
        if is_enum(col.dtype):
            return f"CAST({q} AS VARCHAR)"
        return super().stored_read(col, q)

    def read_col(self, col: Col) -> Col:
        if is_enum(col.dtype):
            return Col(col.name, "str", "VARCHAR")
        return super().read_col(col)

    def concat_ready(self, rel: str) -> str:
        # Enums of different values do not concatenate: the text does.
        return self.normalized(rel, [c.name for c in self.columns(rel) if is_enum(c.dtype)])

    def public(self, data: Any) -> str:
        return self._add(f"SELECT * FROM {self.ex._table(data)}", self.ex._table_schema(data))

    def explode_items(self, col: Col, max_items: int) -> tuple[str, Col | None] | None:
        if not str(col.dtype).endswith("[]"):
            return None
        q = DUCKDB.ident(col.name)
        items = f"list_slice(list_filter({q}, lambda x: x IS NOT NULL), 1, {int(max_items)})"
        return f"unnest({items})", Col(col.name, "other")  # its type: DuckDB decides

    def set_column(self, a: Col, b: Col) -> Col | None:
        # Columns of the same names and types keep them; otherwise DuckDB decides.
        return a if a.dtype == b.dtype else Col(a.name, a.kind)


# DuckDB types whose grouped values Python reads one to one as keys (keycounts docstring).
_EXACT_KEY_TYPES = frozenset(
    {
        "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "UBIGINT", "UINTEGER", "USMALLINT",
        "UTINYINT", "HUGEINT", "UHUGEINT", "BOOLEAN", "VARCHAR", "DATE", "TIMESTAMP",
    }
)


def split_column(col: Col) -> KeyColumn | None:
    """How key selection groups a DuckDB column in the engine, or None where the type is
    not one whose groups are read one to one (``DECIMAL`` reads as a float two decimals may
    share; ``TIMESTAMP_NS`` loses its nanoseconds): such columns read every key."""
    t = str(col.dtype).upper()
    q = DUCKDB.ident(col.name)
    if is_enum(col.dtype):  # grouped by its codes, read as its text
        return KeyColumn(q, "CAST({} AS VARCHAR)")
    if t in ("DOUBLE", "FLOAT", "REAL"):  # NaN and NULL are one key; -0.0 groups with 0.0
        return KeyColumn(f"(CASE WHEN isnan({q}) THEN NULL ELSE {q} END)")
    return KeyColumn(q) if t in _EXACT_KEY_TYPES else None


def is_enum(dtype: object) -> bool:
    return isinstance(dtype, str) and dtype.upper().startswith("ENUM")


def value_literal(v: object, kind: str) -> str:
    def stamp(t: object) -> str:
        return f"CAST({DUCKDB.str_lit(str(pd.Timestamp(t)))} AS TIMESTAMP)"  # type: ignore[arg-type]

    return key_literal(DUCKDB, v, kind, stamp)
