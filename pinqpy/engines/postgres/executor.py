"""Run plans inside PostgreSQL: the source adapter of the shared SQL executor
(:mod:`pinqpy.engines.sqlgen.executor`), which writes every aggregate as one ``SELECT``.

What is PostgreSQL's own here: how a table is read (each column converted to its kind's
type once, in the source's projection, per :mod:`pinqpy.engines.postgres.types`; a double's
NaN read as NULL where a value is read), public tables copied into temporary tables once
per DataFrame, exact sums as PostgreSQL's ``SUM`` of ``BIGINT`` (a ``NUMERIC``), and the
scaling of doubles to lattice and grid units without an underflow error (PostgreSQL raises
when a product underflows to zero: a value whose scaled magnitude is below 1/8 is 0 before
it is scaled, which changes no rounded or truncated unit).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any

import pandas as pd

from pinqpy.engines.postgres.arrays import explode_sql, list_column_type
from pinqpy.engines.postgres.dialect import POSTGRES
from pinqpy.engines.postgres.types import base_type, column_read, item_type, kind_of
from pinqpy.engines.sources import PostgresTable
from pinqpy.engines.sqlgen.executor import Rel, RelSql, SqlExecutor
from pinqpy.engines.sqlgen.plans import Col, key_literal
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Expr
from pinqpy.expr.types import schema_from_pandas
from pinqpy.plan.nodes import PlanNode, PyFunc, Source

__all__ = ["PostgresExecutor", "frame_types"]

_TYPES = {
    "int": "bigint",
    "float": "double precision",
    "bool": "boolean",
    "str": "text",
    "datetime": "timestamp",
}


def frame_types(df: pd.DataFrame) -> list[str]:
    """The PostgreSQL column types a DataFrame is loaded with (from its dtypes: an object
    column of lists is an array of its items' type, one of mixed values is loaded as
    text)."""
    schema = schema_from_pandas(df)
    out = []
    for i, c in enumerate(df.columns):
        array = list_column_type(df.iloc[:, i]) if schema[c] == "any" else None
        out.append(array or _TYPES.get(schema[c], "text"))
    return out


def _stamp(v: object) -> str:
    return f"CAST({POSTGRES.str_lit(str(pd.Timestamp(v)))} AS TIMESTAMP)"  # type: ignore[arg-type]


class _PlanSql(RelSql):
    d = POSTGRES

    def visit_source(self, node: Source) -> Rel:
        data = self.ex.catalog.data(node.table)
        if not isinstance(data, PostgresTable):
            raise PinqError("the PostgreSQL engine reads tables of a PostgreSQL connection")
        return self.ex.source_rel(self, data)

    def stored_read(self, col: Col, q: str) -> str:
        return POSTGRES.nan_read(q)

    def key_literal(self, v: object, kind: str) -> str:
        return key_literal(POSTGRES, v, kind, _stamp)

    def public(self, data: Any) -> Rel:
        return self.ex.public_rel(self, data)

    def explode_items(self, col: Col, max_items: int) -> tuple[str, Col | None] | None:
        """An array's items (:func:`~pinqpy.engines.postgres.arrays.explode_sql`); any other
        value explodes to itself."""
        item = item_type(col.dtype) if col.kind == "other" and col.dtype else None
        if item is None:
            return None
        sql, out = explode_sql(POSTGRES.ident(col.name), item, max_items)
        return sql, Col(col.name, kind_of(out) or "other", out)

    def set_column(self, a: Col, b: Col) -> Col | None:
        if a.kind == b.kind == "other" and a.dtype != b.dtype:
            return Col(a.name, "other", _common_array(a.dtype, b.dtype))
        if a.kind == b.kind:
            return a
        if {a.kind, b.kind} == {"int", "float"}:
            return Col(a.name, "float", "double precision")
        raise PinqError(
            f"the PostgreSQL engine cannot combine column {a.name!r} of kind {a.kind} with "
            f"one of kind {b.kind}; CAST one side first (nothing was charged)"
        )

    def set_sides(self, left: Rel, right: Rel) -> tuple[Rel, Rel]:
        """Lists of different item types made one array type on both sides (the column
        :meth:`set_column` gives): an array of doubles for numbers, of text otherwise."""
        lcols = {c.name: c for c in left.cols}
        want = {
            c.name: _common_array(lcols[c.name].dtype, c.dtype)
            for c in right.cols
            if c.name in lcols and c.kind == lcols[c.name].kind == "other"
            and c.dtype != lcols[c.name].dtype
        }  # fmt: skip
        if not want:
            return left, right
        return self._cast_arrays(left, want), self._cast_arrays(right, want)

    def _cast_arrays(self, rel: Rel, want: dict[str, str]) -> Rel:
        items, cols = [], []
        for c in rel.cols:
            q = POSTGRES.ident(c.name)
            if c.name in want and c.dtype != want[c.name]:
                items.append(f"CAST({q} AS {want[c.name]}) AS {q}")
                cols.append(Col(c.name, "other", want[c.name]))
            else:
                items.append(q)
                cols.append(c)
        return self.add(f"SELECT {', '.join(items)} FROM {rel.name}", cols, [rel], True)


_NUMBER_ARRAYS = {"smallint[]", "integer[]", "bigint[]", "real[]", "double precision[]"}


def _common_array(a: object, b: object) -> str:
    """The array type both of two list columns' types are cast to in a set operation."""
    if a in _NUMBER_ARRAYS and b in _NUMBER_ARRAYS:
        return "double precision[]"
    return "text[]"


class PostgresExecutor(SqlExecutor):
    """Plans run inside the PostgreSQL database of one link; only aggregates come back."""

    dialect = POSTGRES

    def __init__(self, link: Any) -> None:
        self.link = link
        self._public: dict[int, tuple[weakref.ref[Any], Rel]] = {}

    def translation(self) -> RelSql:
        return self._batched("postgres-plans", lambda: _PlanSql(self))  # type: ignore[no-any-return]

    def fetch(self, sql: str) -> list[tuple[Any, ...]]:
        return self.link.fetch(sql)  # type: ignore[no-any-return]

    def exact_sum(self, sql: str) -> str:
        return f"COALESCE(SUM({sql}), 0)"  # SUM of BIGINT is a NUMERIC: exact

    def scaled(self, x: str, factors: Sequence[float], shift: int) -> str:
        if shift <= 0:  # scaling up cannot underflow (or overflow a clamped value)
            return super().scaled(x, factors, shift)
        tiny = POSTGRES.float_lit(math.ldexp(1.0, shift - 3))
        return (
            f"(CASE WHEN abs({x}) < {tiny} THEN {POSTGRES.float_lit(0.0)} "
            f"ELSE {super().scaled(x, factors, shift)} END)"
        )

    def check(self, sql: str) -> None:
        """``EXPLAIN`` (which plans the query, reading no rows): a query whose types do not
        agree is refused here."""
        try:
            self.link.plan(sql)
        except PinqError:
            raise PinqError(
                "the PostgreSQL engine cannot combine these values (lists of different item "
                "types, say); CAST or select them apart (nothing was charged)"
            ) from None

    def validate(
        self, plan: PlanNode, value: Expr | PyFunc | None = None, numeric: bool = False
    ) -> None:
        why = self.link.usable()
        if why is not None:
            raise PinqError(f"{why} (nothing was charged)")
        super().validate(plan, value, numeric)

    # -- sources ----------------------------------------------------------------------------
    def source_rel(self, p: RelSql, table: PostgresTable) -> Rel:
        """A table read with each column converted to its kind's type (only the columns
        that change are projected; a table that needs none is read by its own name)."""
        if table.link is not self.link:
            raise PinqError("a PostgreSQL query reads the tables of one connection")
        items, cols, changed = [], [], False
        for c, t in table.columns:
            kind = kind_of(t)
            q = POSTGRES.ident(c)
            read, nan = column_read(q, t)
            changed |= read != q
            items.append(q if read == q else f"{read} AS {q}")
            dtype = base_type(t) if kind == "other" else _TYPES.get(kind or "")
            cols.append(Col(c, kind or "other", dtype, nan))
        if not changed:
            return Rel(table.source, tuple(cols))
        return p.add(f"SELECT {', '.join(items)} FROM {table.source}", cols, [], True)

    def public_rel(self, p: RelSql, data: Any) -> Rel:
        """A public table (a pandas DataFrame), copied into a temporary table once."""
        if not isinstance(data, pd.DataFrame):
            raise PinqError("a public table is a pandas DataFrame")
        hit = self._public.get(id(data))
        if hit is not None and hit[0]() is data:
            return hit[1]
        key, original = id(data), data
        types = frame_types(data)
        for c, t in zip(data.columns, types, strict=True):
            if t == "text" and data[c].dtype == object:
                data = data.assign(**{c: data[c].map(_text, na_action="ignore")})
        source = self.link.load(data, types)
        cols = []
        for c, t in zip(data.columns, types, strict=True):
            kind = kind_of(t) or "str"
            cols.append(Col(str(c), kind, t, kind == "float"))
        rel = Rel(source, tuple(cols))
        self._public[key] = (weakref.ref(original), rel)
        weakref.finalize(original, self._public.pop, key, None)
        return rel


def _text(v: object) -> object:
    from pinqpy.expr.pandas_eval.values import _any_text

    return _any_text(v)
