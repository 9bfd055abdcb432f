"""Run plans inside DuckDB and return only the small exact aggregates mechanisms need.

Each plan node becomes one common table expression (CTE); expressions are translated from the
AST into DuckDB SQL that follows :mod:`pinqpy.expr.pandas_eval`: NULL propagates, a fault that
depends on the data (division by zero, overflow, a bad CAST, the logarithm of a negative) gives
NULL and never an error, ``/`` is float division, FLOOR/CEIL/ROUND(x) give integers, LOG is
base 10, LEAST/GREATEST skip NULLs.

Only aggregates leave the engine: per-group counts, clamped sums, bucket counts and candidate
counts (a keyed aggregate also returns each group's key values, only to match them to the
listed keys; they are never released). Noise is added afterwards in Python, as for every
engine.

Not supported (a :class:`~pinqpy.errors.PinqError` says so): Python callables
(:class:`~pinqpy.plan.nodes.PyFunc`), which cannot run inside the engine, and SUBSTR with start or
length that are not literal integers.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import weakref
from collections.abc import Callable, Hashable, Iterator, Sequence
from fractions import Fraction
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from pinqpy.core.lattice import Lattice, SumGrid
from pinqpy.engines.base import (
    Executor,
    LatticeSums,
    Read,
    canonical_key_counts,
    column_key_rows,
    prefetched,
)
from pinqpy.engines.buckets import Grid, bucket_query, uniform_grid
from pinqpy.engines.duckdb.dialect import DUCKDB
from pinqpy.engines.duckdb.parquet import see_parquet_nan
from pinqpy.engines.duckdb.types import kind_of_type
from pinqpy.engines.sources import DuckDBTable, create_hidden_view, drop_pending_views
from pinqpy.engines.sqlgen.expressions import (
    NUMERIC,
    Lets,
    S,
    numeric_value,
    typed,
)
from pinqpy.engines.sqlgen.plans import (
    Col,
    CtePlanSql,
    check_case_distinct,
    compatible,
    key_literal,
    value_kind,
)
from pinqpy.errors import PinqError
from pinqpy.expr.ast import Column, Expr
from pinqpy.plan.batch import batch_memo
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import (
    PlanNode,
    PyFunc,
    Source,
)
from pinqpy.plan.truncation import truncated_count

__all__ = ["DuckDBExecutor"]

_GI = "__pinq_g"


# -- plans ------------------------------------------------------------------------------------
class _PlanSql(CtePlanSql[str]):
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

    def __init__(self, ex: DuckDBExecutor) -> None:
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
        return _key_literal(v, kind)

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
        if _is_enum(col.dtype):
            return f"CAST({q} AS VARCHAR)"
        return super().stored_read(col, q)

    def read_col(self, col: Col) -> Col:
        if _is_enum(col.dtype):
            return Col(col.name, "str", "VARCHAR")
        return super().read_col(col)

    def concat_ready(self, rel: str) -> str:
        # Enums of different values do not concatenate: the text does.
        return self.normalized(rel, [c.name for c in self.columns(rel) if _is_enum(c.dtype)])

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


def _is_enum(dtype: object) -> bool:
    return isinstance(dtype, str) and dtype.upper().startswith("ENUM")


def _key_literal(v: object, kind: str) -> str:
    def stamp(t: object) -> str:
        return f"CAST({DUCKDB.str_lit(str(pd.Timestamp(t)))} AS TIMESTAMP)"  # type: ignore[arg-type]

    return key_literal(DUCKDB, v, kind, stamp)


def _key_rows(
    kinds: Sequence[str], keys: Sequence[Hashable], single: bool
) -> list[tuple[Any, ...]]:
    """The listed keys as rows (position in the list, values...); keys that can never match
    a column's values are left out (they count 0)."""
    rows: list[tuple[Any, ...]] = []
    for i, key in enumerate(keys):
        parts = (key,) if single else tuple(key)  # type: ignore[arg-type]
        ok = True
        vals: list[Any] = []
        for kind, v in zip(kinds, parts, strict=True):
            vk = value_kind(v)
            if vk is None:
                vals.append(None)
            elif compatible(kind, vk):
                vals.append(v)
            else:
                ok = False
                break
        if ok:
            rows.append((i, *vals))
    return rows


def _table_type(kind: str, vals: Sequence[Any]) -> str:
    """The DuckDB type of a key table's column of a plan column's kind, given its values."""
    if kind in ("int", "float"):
        ints = kind == "int" and all(v is None or value_kind(v) == "int" for v in vals)
        return "BIGINT" if ints else "DOUBLE"
    return {"bool": "BOOLEAN", "datetime": "TIMESTAMP", "str": "VARCHAR"}.get(kind, "")


def _rows_frame(
    columns: Sequence[str], kinds: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> pd.DataFrame:
    """Rows of public values as a DataFrame typed like the plan's columns, to register."""
    data: dict[str, Any] = {}
    for j, (c, kind) in enumerate(zip(columns, kinds, strict=True)):
        vals = [r[j] for r in rows]
        sql_type = _table_type(kind, vals)
        if sql_type == "BIGINT":
            data[c] = pd.array(vals, dtype="Int64")
        elif sql_type == "DOUBLE":
            data[c] = np.array([np.nan if v is None else float(v) for v in vals])
        elif sql_type == "BOOLEAN":
            data[c] = pd.array(vals, dtype="boolean")
        elif sql_type == "TIMESTAMP":
            data[c] = pd.to_datetime(pd.Series(vals, dtype=object))
        else:
            data[c] = pd.Series(vals, dtype=object)
    return pd.DataFrame(data)


_INLINE_ROWS = 5000
# Key columns grouped before they are matched to the listed keys (DuckDBExecutor._keyed):
# the kinds whose key tables have the column's own type.
_PLAIN_KEYS = {"str": "VARCHAR", "int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN"}


def _rows_sql(
    columns: Sequence[str], kinds: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> str | None:
    """Rows of public values as a FROM item written into the query (typed lists unnested
    side by side), or None when too many or of a type not written here (then register
    :func:`_rows_frame`). Typed as :func:`_rows_frame` types them."""
    if len(rows) > _INLINE_ROWS:
        return None
    cols = []
    for j, (c, kind) in enumerate(zip(columns, kinds, strict=True)):
        vals = [r[j] for r in rows]
        sql_type = _table_type(kind, vals)
        if sql_type == "BIGINT":
            items = ["NULL" if v is None else str(int(v)) for v in vals]
        elif sql_type == "DOUBLE":
            # As text, which DuckDB reads exactly (as every float literal here).
            items = ["NULL" if v is None else DUCKDB.str_lit(repr(float(v))) for v in vals]
        elif sql_type == "BOOLEAN":
            items = ["NULL" if v is None else ("TRUE" if v else "FALSE") for v in vals]
        elif sql_type == "VARCHAR" and kind == "str":
            items = ["NULL" if v is None else DUCKDB.str_lit(str(v)) for v in vals]
        else:
            return None
        cols.append(f"unnest(CAST([{', '.join(items)}] AS {sql_type}[])) AS {DUCKDB.ident(c)}")
    return f"(SELECT {', '.join(cols)})"


def _int_bucket_query(rows: str, grid: Grid) -> str:
    """:func:`~pinqpy.engines.buckets.bucket_query` for integer values (``__pinq_v``) on a grid of
    integers, where integer arithmetic is exact and needs no correction step. The grid's
    points are exact doubles (below 2**53), so a value's bucket is the one pandas finds."""
    start, step, stop = (_key_literal(int(x), "int") for x in (grid.start, grid.step, grid.stop))
    d = f"LEAST(GREATEST(__pinq_v, {start}), {stop}) - {start}"
    return (
        f"SELECT __pinq_gi, 2 * (__d // {step}) + CAST(__d % {step} <> 0 AS BIGINT) AS __pinq_b "
        f"FROM (SELECT __pinq_gi, {d} AS __d FROM ({rows}) s0) s1"
    )


def _sum_aggs(v: str, kind: str, lo: float, hi: float, when: str = "") -> list[str]:
    """The clamped sum of ``v`` and its count of non-NULL values (over the rows ``when``
    admits: a FILTER clause or ""), exact before its conversion to a double.

    Integers clamped to integer bounds are summed exactly as integers: the float sum pandas
    computes is the same number while it is exact (below 2**53) and its rounding otherwise;
    DuckDB sums integers faster than doubles."""
    if kind == "int":
        lo_s, hi_s = _key_literal(int(lo), "int"), _key_literal(int(hi), "int")
        return [f"SUM(LEAST(GREATEST({v}, {lo_s}), {hi_s})){when}", f"COUNT({v}){when}"]
    # Other values are summed exactly on the SUM's fixed-point grid (SumGrid): truncated
    # toward zero to multiples of q (never larger in magnitude, so the sensitivity stays
    # max(|lo|, |hi|)), summed as BIGINT into HUGEINT, then scaled by q as a double. A float
    # SUM of 10**8 doubles can err by the sensitivity itself.
    grid = SumGrid.of(lo, hi)
    c = f"LEAST(GREATEST({v}, {_float_literal(lo)}), {_float_literal(hi)})"
    k = f"CAST(TRUNC({grid.sql(c, _float_literal)}) AS BIGINT)"
    total = f"CAST(SUM({k}){when} AS DOUBLE) * {_float_literal(grid.step_float)}"
    top = _float_literal(sys.float_info.max)
    bottom = _float_literal(-sys.float_info.max)
    # (DuckDB's LEAST and GREATEST skip NULLs: COALESCE first.)
    return [f"LEAST(GREATEST(COALESCE({total}, 0.0), {bottom}), {top})", f"COUNT({v}){when}"]


def _float_literal(x: float) -> str:
    return _key_literal(float(x), "float")


def _lattice_aggs(
    v: str, kind: str, lo: float, hi: float, when: str = "", squares: bool = False
) -> list[str]:
    """Exact ``Σd`` (and ``Σd²`` with ``squares``, else 0) of the lattice indices of ``v``
    clamped into [lo, hi] (:class:`~pinqpy.core.lattice.Lattice`), and its count of non-NULL
    values. ``d`` is computed in doubles exactly as numpy computes it (``ROUND_EVEN`` is
    half-to-even, as ``np.rint``), cast to BIGINT (it lies in ``[0, 2**21]``) and summed:
    DuckDB sums BIGINT into HUGEINT, 128 bits, so ``Σd < n·2**21`` and ``Σd² < n·2**42``
    are exact and cannot overflow."""
    lat = Lattice.of(lo, hi)
    if (
        kind == "int"
        and not squares
        and lat.shift <= 0
        and float(lo).is_integer()
        and float(hi).is_integer()
    ):
        # Integers on a lattice of step 2**shift <= 1: x·2**-shift is an integer, rounding
        # is the identity, and d = (x - lo)·2**-shift; so Σd is that multiple of the exact
        # integer (HUGEINT) sum of the clamped values, as on pandas.
        lo_s, hi_s = _key_literal(int(lo), "int"), _key_literal(int(hi), "int")
        total = f"CAST(COALESCE(SUM(LEAST(GREATEST({v}, {lo_s}), {hi_s})){when}, 0) AS HUGEINT)"
        n = f"COUNT({v}){when}"
        scale = 1 << -lat.shift
        return [f"({total} - CAST({lo_s} AS HUGEINT) * {n}) * CAST({scale} AS HUGEINT)", "0", n]
    c = f"LEAST(GREATEST({v}, {_float_literal(lo)}), {_float_literal(hi)})"
    if max(abs(Fraction(lo)), abs(Fraction(hi))) / lat.step < 2**62:
        # DuckDB casts a double to BIGINT rounding half to even, as np.rint does, so while
        # every scaled value fits the cast is the rounding (about twice as fast as
        # ROUND_EVEN). The lattice's last clamp into [0, K] is the identity for values
        # clamped into [lo, hi] (pinqpy.core.grid_sums), so it is left out; a NULL, which
        # LEAST and GREATEST send to lo, has d = 0 and adds nothing.
        t = c
        for f in lat.factors:
            t = f"({t}) * {_float_literal(f)}"
        d = f"(CAST({t} AS BIGINT) - {int(lat.base)})"
    else:
        d = f"CAST({lat.sql(c, _float_literal, 'ROUND_EVEN')} AS BIGINT)"
    sq = f"COALESCE(SUM({d} * {d}){when}, 0)" if squares else "0"
    return [f"COALESCE(SUM({d}){when}, 0)", sq, f"COUNT({v}){when}"]


def _count_rows(rows: Sequence[tuple[Any, ...]], k: int) -> np.ndarray:
    out = np.zeros(k, dtype=np.int64)
    for gi, n in rows:
        out[int(gi)] = int(n)
    return out


def _sum_rows(rows: Sequence[tuple[Any, ...]], k: int) -> tuple[np.ndarray, np.ndarray]:
    sums, counts = np.zeros(k), np.zeros(k, dtype=np.int64)
    for gi, total, n in rows:
        sums[int(gi)], counts[int(gi)] = float(total or 0), int(n)
    return sums, counts


def _lattice_rows(rows: Sequence[tuple[Any, ...]], k: int) -> LatticeSums:
    """Exact integer sums per group (HUGEINT arrives as a Python int)."""
    sums, sumsq, counts = [0] * k, [0] * k, np.zeros(k, dtype=np.int64)
    for gi, total, total2, n in rows:
        sums[int(gi)], sumsq[int(gi)], counts[int(gi)] = int(total), int(total2), int(n)
    return sums, sumsq, counts


class _Value(NamedTuple):
    """An aggregated value's SQL and kind. ``nan_col``: a stored float column, whose NaN is
    skipped as NULL is (the value is the column, not rewritten). ``stored``: a stored numeric
    column whose NULLs are the value's, so DuckDB can test them from the file's statistics
    (a computed value must be tested on every row)."""

    sql: str
    kind: str
    nan_col: str | None = None
    stored: str | None = None


def _value(
    p: _PlanSql,
    rel: str,
    value: Expr | PyFunc,
    lets: Lets,
    *,
    ints: bool = False,
    as_stored: bool = False,
) -> _Value:
    """``value`` as pandas' numeric view: a DOUBLE of kind "float" (with ``ints``, an integer
    value stays BIGINT of kind "int"); with ``as_stored``, the value as translated."""
    if (
        isinstance(value, Column)
        and not as_stored
        and value.name in p.nan(rel)
        and p.kinds(rel)[value.name] == "float"
    ):
        col = DUCKDB.ident(value.name)
        return _Value(col, "float", nan_col=col)
    v = p.value_expr(value, rel, lets, "an aggregation")
    if as_stored:
        return _Value("NULL" if v.kind == "null" else v.sql, v.kind)
    stored = DUCKDB.ident(value.name) if isinstance(value, Column) and v.kind in NUMERIC else None
    if ints and v.kind in ("int", "bool"):
        return _Value(v.sql if v.kind == "int" else f"CAST({v.sql} AS BIGINT)", "int", None, stored)
    return _Value(numeric_value(DUCKDB, v), "float", None, stored)


def _integral(x: float) -> bool:
    """An integer that a double holds exactly."""
    return float(x).is_integer() and abs(x) <= 2**53


class DuckDBExecutor(Executor):
    """Plans run inside DuckDB; only aggregates come back.

    Sources are pandas DataFrames (registered with the connection) or DuckDB relations of
    the same connection. ``connection`` defaults to a new in-memory database.

    Within one :func:`~pinqpy.plan.batch.batch` (one query's checks and reads) a plan is
    translated once: the check before the charge translates it, and the reads run the same
    SQL, with the same truncation salt, so a query's aggregates all see the same rows.
    """

    def __init__(self, connection: Any = None) -> None:
        import duckdb

        self._duckdb = duckdb
        self.con = connection if connection is not None else duckdb.connect()
        # A scan of a parquet file pinqpy did not write must not fold NaN tests away.
        self._run(see_parquet_nan)
        self._registered: dict[int, tuple[Any, str]] = {}
        self._schemas: dict[int, tuple[Any, list[tuple[str, str]]]] = {}
        self._view_schemas: weakref.WeakKeyDictionary[Any, list[tuple[str, str]]] = (
            weakref.WeakKeyDictionary()
        )
        self._names = itertools.count()

    # -- engine plumbing ------------------------------------------------------------------
    def _run(self, fn: Callable[[Any], Any]) -> Any:
        """Run a DuckDB call; its errors become PinqErrors that quote no data."""
        drop_pending_views()
        try:
            return fn(self.con)
        except PinqError:
            raise
        except self._duckdb.Error as exc:
            raise PinqError(
                f"the DuckDB engine failed ({type(exc).__name__}); details are hidden because "
                "they may contain private values"
            ) from None

    def _table(self, data: Any) -> str:
        """The name under which ``data`` (a DataFrame or relation) is registered."""
        if isinstance(data, DuckDBTable):
            return data.source
        hit = self._registered.get(id(data))
        if hit is not None and hit[0] is data:
            return hit[1]
        name = f"__pinq_t{next(self._names)}"
        if isinstance(data, pd.DataFrame):
            rel = self._run(lambda c: c.from_df(data))
        elif isinstance(data, self._duckdb.DuckDBPyRelation):
            rel = data
        else:
            raise PinqError(
                f"the DuckDB engine reads pandas DataFrames and DuckDB relations, not "
                f"{type(data).__name__}"
            )
        # In pinqpy's own schema, so the user's SHOW TABLES does not list it.
        source = self._run(
            lambda c: create_hidden_view(c, lambda n: rel.create_view(n, replace=True), name)
        )
        self._registered[id(data)] = (data, source)
        return source  # type: ignore[no-any-return]

    def _table_schema(self, data: Any) -> list[tuple[str, str]]:
        """(column, DuckDB type) of a source or public table, bound once per table (tables
        must not change while frames over them are in use)."""
        if isinstance(data, DuckDBTable):
            if data.columns:
                return list(data.columns)
            schema = self._view_schemas.get(data)
            if schema is None:
                schema = self._bind(f"SELECT * FROM {data.source}")
                self._view_schemas[data] = schema
            return schema
        hit = self._schemas.get(id(data))
        if hit is None or hit[0] is not data:
            hit = (data, self._bind(f"SELECT * FROM {self._table(data)}"))
            self._schemas[id(data)] = hit
        return hit[1]

    def _bind(self, sql: str) -> list[tuple[str, str]]:
        """The (column, DuckDB type) of a query, from binding it (no data is read)."""
        rel = self._run(lambda c: c.sql(sql))
        return [(str(c), str(t)) for c, t in zip(rel.columns, rel.types, strict=True)]

    def _fetch(self, sql: str) -> list[tuple[Any, ...]]:
        """Run a query and read its rows."""

        # execute binds once, where a relation (con.sql) binds on its own first. Views of
        # dropped frames are dropped between reads (drop_pending_views), never during one.
        return self._run(lambda c: c.execute(sql).fetchall())  # type: ignore[no-any-return]

    def _translation(self) -> _PlanSql:
        """The current batch's translator (so a check's translation serves the reads)."""
        memo = batch_memo()
        if memo is None:
            return _PlanSql(self)
        slot = ("duckdb-plans", id(self))
        hit = memo.get(slot)
        if hit is None or hit[0] is not self:
            hit = memo[slot] = (self, _PlanSql(self))
        return hit[1]  # type: ignore[no-any-return]

    @contextlib.contextmanager
    def _rows(
        self, columns: Sequence[str], kinds: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> Iterator[str]:
        """A table of public values (keys, candidates) as a FROM item: written into the query
        when small, else registered for the duration."""
        inline = _rows_sql(columns, kinds, rows)
        if inline is not None:
            yield inline
            return
        frame = _rows_frame(columns, kinds, rows)
        name = self._table(frame)
        try:
            yield name
        finally:
            self._unregister(frame)

    def _grouped(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc | None,
        aggs: Callable[[str, str], list[str]],
        extra: Callable[[str, str], tuple[str, str, str]] | None = None,
        as_stored: bool = False,
        ints: bool = False,
        staged: Callable[[str, str], str] | None = None,
    ) -> tuple[list[tuple[Any, ...]], int]:
        """Run ``aggs(v, kind)`` per listed group; rows are (group position, [extra key,]
        aggs...).

        ``v`` is the SQL of ``value`` as pandas' numeric view, a DOUBLE of kind "float"
        whose NULLs are left out; with ``ints``, an integer value stays BIGINT (kind "int").
        With ``as_stored`` it is the value as translated, NULLs included. ``extra`` may add a
        join (FROM suffix, select item, group item) given ``v`` and its kind.
        """
        p = self._translation()
        rel = p.visit(plan)
        k = 1 if grouping is None else len(grouping.keys)
        lets = Lets(DUCKDB)
        kind, keep = "null", ""
        if value is None:
            src = f"{rel} AS r"
        else:
            v = _value(p, rel, value, lets, ints=ints, as_stored=as_stored)
            kind = v.kind
            if v.nan_col is not None:
                keep = f" WHERE NOT isnan(r.{v.nan_col})"
            elif not as_stored:
                keep = f" WHERE r.{v.stored or '__pinq_v'} IS NOT NULL"
            src = f"(SELECT *, {v.sql} AS __pinq_v FROM {lets.source(rel, [v.sql])}) AS r"
        with contextlib.ExitStack() as stack:
            gi = "0"
            if grouping is not None and staged is None and extra is None:
                keyed = self._keyed(p, rel, grouping, src, keep, aggs("r.__pinq_v", kind), stack)
                if keyed is not None:
                    return keyed, k
            if grouping is not None:
                join = self._group_join(p, rel, grouping, stack)
                if join is None:
                    return [], k
                src += join
                gi = f"g.{_GI}"
            if staged is not None:
                inner = f"SELECT {gi} AS __pinq_gi, r.__pinq_v AS __pinq_v FROM {src}{keep}"
                # One group: grouped by the bucket alone (a constant key costs a hash).
                head, by = ("0", "__pinq_b") if grouping is None else ("__pinq_gi", "ALL")
                sql = (
                    f"SELECT {head}, __pinq_b, COUNT(*) FROM ({staged(inner, kind)}) GROUP BY {by}"
                )
                return self._fetch(p.query(sql, rel)), k
            items = [f"{gi} AS __pinq_gi"]
            groups = ["__pinq_gi"]
            if extra is not None:
                join, item, group = extra("r.__pinq_v", kind)
                src += join
                items.append(item)
                groups.append(group)
            items += aggs("r.__pinq_v", kind)
            # One group: a plain aggregate (a GROUP BY on a constant keeps DuckDB from using
            # its fast paths, ten times slower for a filtered count).
            group_by = (
                "" if len(groups) == 1 and grouping is None else f" GROUP BY {', '.join(groups)}"
            )
            sql = f"SELECT {', '.join(items)} FROM {src}{keep}{group_by}"
            return self._fetch(p.query(sql, rel)), k

    def _keyed(
        self,
        p: _PlanSql,
        rel: str,
        grouping: Grouping,
        src: str,
        keep: str,
        aggs: Sequence[str],
        stack: contextlib.ExitStack,
    ) -> list[tuple[Any, ...]] | None:
        """The rows (key position, aggs...) of ``aggs`` per listed key over the rows ``src``
        (``keep``: its WHERE clause or ""), computed as DuckDB computes a plain GROUP BY: the
        rows are grouped by the key columns' values, and the few groups are matched to the
        listed keys. [] when no key can match; None when the keys are too many or of types
        this does not handle (the caller then joins every row to the keys).

        The rows are first filtered by each column's listed values (``IN``, and ``IS NULL``
        where a key is NULL), which drops only rows no key can match (a column's collation
        only widens ``IN``), so that the groups are few whatever the column's other values.
        Each group is one exact value: text is grouped ``COLLATE "binary"`` (an enum by its
        codes, each one text), numbers and booleans by their values. A key, spelt as the
        column spells it (``column_key_rows``: keys equal under the column's type were merged
        into the first), then gets the rows of the group equal to it, so a row counts for a
        key exactly when it equals the key, as in the per-row join, and no row counts twice.

        The groups are matched in Python (:meth:`_match_groups`) when they can be few: a join
        to the key table inside DuckDB costs a millisecond or two more per query. Else, and if
        two groups ever met one key, they are joined to the keys in DuckDB, on the same
        equality (``IS NOT DISTINCT FROM``, keys typed as the columns: VARCHAR, BIGINT, DOUBLE,
        BOOLEAN)."""
        cols = list(grouping.columns)
        types = dict(p.schema(rel))
        kinds = p.kinds(rel)
        ckinds = [kinds[c] for c in cols]
        stored = p.nan(rel)
        enums = {c for c in cols if c in stored and _is_enum(types[c])}
        if any(c not in enums and types[c].upper() != _PLAIN_KEYS.get(kinds[c]) for c in cols):
            return None
        rows = [(i, *vals) for i, vals in column_key_rows(ckinds, grouping.keys, len(cols) == 1)]
        if not rows:
            return []
        if len(rows) > _INLINE_ROWS:
            return None
        # An enum is grouped by its codes and read as text on the groups (Python's str, or
        # a cast in the join).
        values = [f"r.{DUCKDB.ident(c)}" if c in enums else p.value(rel, c, "r.") for c in cols]
        conds = []
        groups = 1  # at most this many groups pass the filter
        for j, (v, kind) in enumerate(zip(values, ckinds, strict=True)):
            listed = {r[j + 1] for r in rows}
            groups *= len(listed)
            ors = []
            if listed - {None}:
                lits = sorted(_key_literal(x, kind) for x in listed - {None})
                ors.append(f"{v} IN ({', '.join(lits)})")
            if None in listed:
                ors.append(f"{v} IS NULL")
            conds.append("(" + " OR ".join(ors) + ")")
        where = (keep + " AND " if keep else " WHERE ") + " AND ".join(conds)
        ks = [f"__pinq_k{j}" for j in range(len(cols))]
        named = [f"{a} AS __pinq_a{i}" for i, a in enumerate(aggs)]
        exact = [
            f'({v} COLLATE "binary")' if kind == "str" and c not in enums else v
            for v, kind, c in zip(values, ckinds, cols, strict=True)
        ]
        keyed = [f"{v} AS {kk}" for v, kk in zip(exact, ks, strict=True)]
        inner = f"SELECT {', '.join(keyed + named)} FROM {src}{where} GROUP BY {', '.join(ks)}"
        if groups <= _INLINE_ROWS:
            found = self._match_groups(self._fetch(p.query(inner, rel)), rows, len(cols))
            if found is not None:
                return found
        keys = stack.enter_context(self._rows([_GI, *cols], ["int", *ckinds], rows))
        on = " AND ".join(
            f"{f'CAST(a.{kk} AS VARCHAR)' if c in enums else f'a.{kk}'} "
            f"IS NOT DISTINCT FROM g.{DUCKDB.ident(c)}"
            for kk, c in zip(ks, cols, strict=True)
        )
        outs = ", ".join(f"a.__pinq_a{i}" for i in range(len(aggs)))
        sql = f"SELECT g.{_GI} AS __pinq_gi, {outs} FROM ({inner}) AS a JOIN {keys} AS g ON {on}"
        return self._fetch(p.query(sql, rel))

    @staticmethod
    def _match_groups(
        groups: Sequence[tuple[Any, ...]], keys: Sequence[tuple[Any, ...]], width: int
    ) -> list[tuple[Any, ...]] | None:
        """The groups (key values..., aggs...) that equal a listed key (position, values...),
        as (position, aggs...); None if two groups equal one key (then DuckDB joins them).

        The values come from VARCHAR (or an enum), BIGINT, DOUBLE and BOOLEAN columns as
        Python ``str``, ``int``, ``float`` and ``bool`` (NULL as None), exactly, and the keys
        are spelt as such columns spell them (``column_key``); Python's equality on those is
        DuckDB's on the columns' binary equality (text by its characters; ``-0.0`` equals
        ``0.0``; a NaN, never a key, equals no key), which is what the join tests. Group
        values never leave this method: only the aggregates of matched groups do."""
        at = {tuple(k[1:]): k[0] for k in keys}
        out: list[tuple[Any, ...]] = []
        seen: set[int] = set()
        for g in groups:
            i = at.get(tuple(g[:width]))
            if i is None:
                continue
            if i in seen:
                return None
            seen.add(i)
            out.append((i, *g[width:]))
        return out

    def _group_join(
        self, p: _PlanSql, rel: str, grouping: Grouping, stack: contextlib.ExitStack
    ) -> str | None:
        """A JOIN of the rows ``r`` against the listed keys ``g`` (so each row gets its key's
        position ``g.__pinq_g``), or None when no key can match the columns' types."""
        kinds = p.kinds(rel)
        cols = list(grouping.columns)
        ckinds = [kinds[c] for c in cols]
        rows = [(i, *vals) for i, vals in column_key_rows(ckinds, grouping.keys, len(cols) == 1)]
        if not rows:
            return None
        keys = stack.enter_context(self._rows([_GI, *cols], ["int", *ckinds], rows))
        cond = " AND ".join(
            f"{p.value(rel, c, 'r.')} IS NOT DISTINCT FROM g.{DUCKDB.ident(c)}" for c in cols
        )
        return f" JOIN {keys} AS g ON {cond}"

    def read_together(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read]
    ) -> list[Any]:
        """One query for ``reads`` (counts, clamped sums and moments of ``plan``).

        NaN in a stored float column is skipped as NULL is. A FILTER on every value's
        aggregates would cost a third of the scan, so the query first counts the NaN instead
        (cheap), and runs again with the FILTERs only if there are any."""
        rows, k, nans = self._fused_query(plan, grouping, reads, filtered=False)
        if nans:
            rows, k, _ = self._fused_query(plan, grouping, reads, filtered=True)
        out: list[Any] = []
        at = 1
        for r in reads:
            w = 1 if r.kind == "count" else 2 if r.kind == "sum" else 3
            part = [(row[0], *row[at : at + w]) for row in rows]
            at += w
            decode = {
                "count": _count_rows,
                "sum": _sum_rows,
                "mean": _lattice_rows,
                "moments": _lattice_rows,
            }[r.kind]
            out.append(decode(part, k))
        return out

    def _fused_query(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read], filtered: bool
    ) -> tuple[list[tuple[Any, ...]], int, bool]:
        """Rows (group position, each read's aggregates...) and whether a value skipped as
        NaN occurred (then unfiltered results are wrong and are not used)."""
        p = self._translation()
        rel = p.visit(plan)
        k = 1 if grouping is None else len(grouping.keys)
        lets = Lets(DUCKDB)
        items: list[str] = []
        nan_items: list[str] = []
        sqls: list[tuple[int, str]] = []
        for i, r in enumerate(reads):
            if r.kind == "count":
                items.append("COUNT(*)")
                continue
            ints = _integral(r.lo) and _integral(r.hi)
            v = _value(p, rel, r.value, lets, ints=ints)  # type: ignore[arg-type]
            sqls.append((i, v.sql))
            when = ""
            if v.nan_col is not None:
                if filtered:
                    when = f" FILTER (WHERE NOT isnan(r.{v.nan_col}))"
                else:
                    nan_items.append(f"COUNT_IF(isnan(r.{v.nan_col}))")
            if r.kind == "sum":
                items += _sum_aggs(f"r.__pinq_v{i}", v.kind, r.lo, r.hi, when)
            else:
                squares = r.kind == "moments"
                items += _lattice_aggs(f"r.__pinq_v{i}", v.kind, r.lo, r.hi, when, squares)
        src = f"{rel} AS r"
        if sqls:
            cols = ", ".join(f"{v} AS __pinq_v{i}" for i, v in sqls)
            src = f"(SELECT *, {cols} FROM {lets.source(rel, [v for _, v in sqls])}) AS r"
        with contextlib.ExitStack() as stack:
            gi, join, group_by = "0", "", ""
            if grouping is not None:
                listed = [*items, *nan_items]
                keyed = self._keyed(p, rel, grouping, src, "", listed, stack)
                if keyed is not None:
                    n = 1 + len(items)
                    nans = any(any(row[n:]) for row in keyed)
                    return [row[:n] for row in keyed], k, nans
                join = self._group_join(p, rel, grouping, stack)  # type: ignore[assignment]
                gi, group_by = f"g.{_GI}", " GROUP BY __pinq_gi"
            if join is None:
                return [], k, False
            listed = ", ".join([*items, *nan_items])
            sql = f"SELECT {gi} AS __pinq_gi, {listed} FROM {src}{join}{group_by}"
            rows = self._fetch(p.query(sql, rel))
        n = 1 + len(items)
        nans = any(any(row[n:]) for row in rows)
        return [row[:n] for row in rows], k, nans

    def _unregister(self, data: pd.DataFrame) -> None:
        hit = self._registered.pop(id(data), None)
        self._schemas.pop(id(data), None)
        if hit is not None:
            name = hit[1][1:-1]
            self._run(lambda c: c.unregister(name))

    def rows(self, plan: PlanNode) -> pd.DataFrame:
        """The plan's rows. For tests of stability only; never reachable from the public API."""
        p = self._translation()
        rel = p.normalized(p.visit(plan))
        return self._run(lambda c: c.sql(p.query(f"SELECT * FROM {rel}", rel)).df())

    # -- the Executor interface -----------------------------------------------------------
    def validate(
        self, plan: PlanNode, value: Expr | PyFunc | None = None, numeric: bool = False
    ) -> None:
        check_case_distinct(plan, "DuckDB")
        # Translating finds callables, unknown columns and unaggregatable types, before the
        # charge. It derives each node's types, except where DuckDB decides them (set
        # operations, lists) or alone can tell whether values combine (lists, structs):
        # there DuckDB binds the SQL now (resolving types, reading no rows), so whatever it
        # would refuse is refused before the charge too.
        p = self._translation()
        rel = p.visit(plan)
        lets = Lets(DUCKDB)
        vsql = "NULL"
        if value is not None:
            v = p.value_expr(value, rel, lets, "an aggregation")
            if numeric and v.kind == "other":
                what = f"column {value.name!r}" if isinstance(value, Column) else value.to_sql()
                types = dict(p.schema(rel))
                shown = types.get(value.name, "") if isinstance(value, Column) else ""
                raise PinqError(
                    f"the DuckDB engine cannot aggregate {what}"
                    + (f" of type {shown}" if shown else "")
                    + " as a number; select or CAST a numeric value instead"
                )
            vsql = typed(DUCKDB, v)
        p.schema(rel)
        if p.unchecked:
            self._bind(p.query(f"SELECT {vsql} FROM {lets.source(rel, [vsql])}", rel))

    def count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        hit = prefetched("count", plan, grouping)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        tc = truncated_count(plan) if grouping is None else None
        if tc is not None:
            # Without choosing rows: the same released distribution (see
            # pinqpy.plan.truncation and CtePlanSql.truncated_count).
            p = self._translation()
            return np.array([int(self._fetch(p.truncated_count(tc))[0][0])], dtype=np.int64)
        rows, k = self._grouped(plan, grouping, None, lambda v, kind: ["COUNT(*)"])
        return _count_rows(rows, k)

    def clamped_sum(
        self, plan: PlanNode, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
    ) -> tuple[np.ndarray, np.ndarray]:
        hit = prefetched("sum", plan, grouping, value, lo, hi)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        rows, k = self._grouped(
            plan,
            grouping,
            value,
            lambda v, kind: _sum_aggs(v, kind, lo, hi),
            ints=_integral(lo) and _integral(hi),
        )
        return _sum_rows(rows, k)

    def lattice_sums(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        lo: float,
        hi: float,
        squares: bool = False,
    ) -> LatticeSums:
        hit = prefetched("moments" if squares else "mean", plan, grouping, value, lo, hi)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        # An integer value stays BIGINT for integer bounds: _lattice_aggs then sums it as an
        # integer where that is exact (and converts it as a DOUBLE would be otherwise).
        rows, k = self._grouped(
            plan,
            grouping,
            value,
            lambda v, kind: _lattice_aggs(v, kind, lo, hi, "", squares),
            ints=_integral(lo) and _integral(hi),
        )
        return _lattice_rows(rows, k)

    def buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        cand = np.asarray(candidates, dtype="float64")
        m = len(cand)
        grid = uniform_grid(cand)
        if grid is not None:
            return self._grid_buckets(plan, grouping, value, grid)
        # One interval [c, next distinct c) per distinct candidate, at its first position j:
        # x == c goes to eq[j]; c < x < next goes to gap[j2 - 1], j2 the next one's first
        # position (as numpy's searchsorted(side="left") assigns them).
        firsts = [j for j in range(m) if j == 0 or cand[j] != cand[j - 1]]
        rows = []
        for i, j in enumerate(firsts):
            j2 = firsts[i + 1] if i + 1 < len(firsts) else None
            hi = float(cand[j2]) if j2 is not None else None
            rows.append((float(cand[j]), hi, 2 * j, (2 * j2 - 1) if j2 is not None else -1))
        lo_s = _key_literal(float(cand[0]), "float")
        hi_s = _key_literal(float(cand[-1]), "float")
        names = ["__pinq_lo", "__pinq_hi", "__pinq_eq", "__pinq_gap"]
        with self._rows(names, ["float", "float", "int", "int"], rows) as table:

            def extra(v: str, kind: str) -> tuple[str, str, str]:
                c = f"LEAST(GREATEST({v}, {lo_s}), {hi_s})"
                join = (
                    f" JOIN {table} AS b ON {c} >= b.__pinq_lo AND "
                    f"(b.__pinq_hi IS NULL OR {c} < b.__pinq_hi)"
                )
                item = (
                    f"CASE WHEN {c} = b.__pinq_lo THEN b.__pinq_eq ELSE b.__pinq_gap END "
                    "AS __pinq_b"
                )
                return join, item, "__pinq_b"

            rows_out, k = self._grouped(
                plan, grouping, value, lambda v, kind: [f"COUNT({v})"], extra=extra
            )
        width = 2 * m - 1
        flat = np.zeros((k, width), dtype=np.int64)
        for gi, b, n in rows_out:
            flat[int(gi), int(b)] += int(n)
        return flat[:, 0::2].astype(np.int64), flat[:, 1::2].astype(np.int64)

    def _grid_buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        grid: Grid,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Buckets on an exact arithmetic grid, without a join (see
        :mod:`pinqpy.engines.buckets`)."""

        def staged(inner: str, kind: str) -> str:
            if kind == "int":
                return _int_bucket_query(inner, grid)
            lit = lambda x: _key_literal(x, "float")  # noqa: E731
            return bucket_query(inner, "__pinq_gi", "__pinq_v", "__pinq_b", grid, lit)

        ints = _integral(grid.start) and _integral(grid.step) and _integral(grid.stop)
        rows, k = self._grouped(plan, grouping, value, lambda v, kind: [], ints=ints, staged=staged)
        flat = np.zeros((k, 2 * grid.size - 1), dtype=np.int64)
        for gi, b, n in rows:
            flat[int(gi), int(b)] += int(n)
        return flat[:, 0::2], flat[:, 1::2]

    def key_counts(
        self, plan: PlanNode, columns: tuple[str, ...]
    ) -> tuple[list[Hashable], np.ndarray]:
        p = self._translation()
        rel = p.visit(plan)
        # One GROUP BY of the values as stored (an enum by its codes, a float with its NaN);
        # the few groups are read as pinqpy reads them afterwards, and groups that read
        # alike (NaN and NULL) are merged by canonical_key_counts, which also orders them.
        ks = [f"__pinq_k{j}" for j in range(len(columns))]
        grouped = ", ".join(f"{DUCKDB.ident(c)} AS {k}" for c, k in zip(columns, ks, strict=True))
        inner = f"SELECT {grouped}, COUNT(*) AS __pinq_n FROM {rel} GROUP BY ALL"
        by_name = {c.name: c for c in p.columns(rel)}
        reads = ", ".join(
            p.stored_read(by_name[c], k) if by_name[c].nan else k
            for c, k in zip(columns, ks, strict=True)
        )
        rows = self._fetch(p.query(f"SELECT {reads}, __pinq_n FROM ({inner}) AS __pinq_c", rel))
        if len(columns) == 1:
            keys: list[Hashable] = [r[0] for r in rows]
        else:
            keys = [tuple(r[:-1]) for r in rows]
        # Released as canonical spellings (-0.0 groups with 0.0 and comes back as either).
        kinds = p.kinds(rel)
        counts = np.array([int(r[-1]) for r in rows], dtype=np.int64)
        return canonical_key_counts(keys, counts, [kinds[c] for c in columns])

    def candidate_counts(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: tuple[Hashable, ...],
    ) -> np.ndarray:
        n = len(candidates)
        with contextlib.ExitStack() as stack:

            def extra(v: str, kind: str) -> tuple[str, str, str]:
                # First position of each candidate value, as Index.get_indexer finds it.
                seen: set[Any] = set()
                uniq: list[tuple[int, Any]] = []
                for j, c in enumerate(candidates):
                    ck = value_kind(c)
                    marker = (ck, c) if ck is not None else (None, None)
                    if ck is not None and not compatible(kind, ck):
                        continue
                    try:
                        if marker in seen:
                            continue
                        seen.add(marker)
                    except TypeError:
                        pass
                    uniq.append((j, c))
                rows: list[tuple[Any, ...]] = []
                ckind = kind
                if kind in ("null", "other"):
                    ckind = "float"  # no candidate matches; an empty table of some type
                else:
                    found = _key_rows([kind], [c for _, c in uniq], single=True)
                    rows = [(uniq[i][0], c) for i, c in found]
                cols = [_GI, "__pinq_c"]
                table = stack.enter_context(self._rows(cols, ["int", ckind], rows))
                join = f" JOIN {table} AS cnd ON {v} IS NOT DISTINCT FROM cnd.__pinq_c"
                return join, f"cnd.{_GI} AS __pinq_j", "__pinq_j"

            rows, k = self._grouped(
                plan, grouping, value, lambda v, kind: ["COUNT(*)"], extra=extra, as_stored=True
            )
        out = np.zeros((k, n), dtype=np.int64)
        for gi, j, c in rows:
            out[int(gi), int(j)] = int(c)
        return out
