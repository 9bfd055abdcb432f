"""Run plans inside Apache Spark and return only the small exact aggregates mechanisms need.

A plan becomes one Spark SQL query: a common table expression per plan node over a temporary
view per source (made once, dropped when the source DataFrame is gone), with each node's
column kinds worked out in Python, so Spark analyses a query once, when it runs, and only the
final aggregate is collected: one Spark action per executor call. The calls of one query (the
check before the charge, then each aggregate) share one translation
(:func:`~pinqpy.engines.base.batch_memo`). Expressions are translated from the AST into Spark SQL
that follows :mod:`pinqpy.expr.pandas_eval`, whatever the session's ANSI setting:

* NULL propagates; a fault that depends on the data (division by zero, integer overflow, a
  bad CAST, the logarithm of a negative, a non-finite float) gives NULL, never an error.
* ``/`` is float division; FLOOR, CEIL and ROUND(x) give integers (NULL beyond the int64
  range); ROUND halves go away from zero; LOG is base 10; LEAST/GREATEST skip NULLs.
* Floats are doubles with NaN read as NULL; integers are 64-bit; keys match NULL to NULL.
* Truncation (``bound_contributions`` and bounded joins) keeps, per key, the rows of lowest
  salted 64-bit hash of the whole row, as the pandas engine does with its own hash.

pandas DataFrames (sources and public tables) are converted with :func:`to_spark`, once per
DataFrame object and executor.

Differences from the pandas engine, all at the edges:

* Floats as text follow Python's ``repr`` (``1e+20``, ``0.0001``, shortest digits); beyond
  2^53, or below the normal range, the last digit can differ (Java rounds twice).
* Datetimes as text are always ``yyyy-MM-dd HH:mm:ss`` (pandas drops the time of a column of
  whole dates and adds fractions when a row has them). Timestamps have microsecond precision.
  Text parsed as a timestamp follows Spark's ISO-8601 reader.
* A datetime is not a number: aggregating one gives NULL (pandas reads nanoseconds).
* Object columns of mixed types are read as their text, so they match text keys only.
* Spark resolves column names regardless of case, so names that differ only in case cannot
  be told apart.

Not supported (a :class:`~pinqpy.errors.PinqError` says so): Python callables
(:class:`~pinqpy.plan.nodes.PyFunc`), which cannot run inside the engine, SUBSTR with a start or
length that is not a literal integer, and map-typed columns in truncation keys.

Errors raised by Spark are reported by kind only: their text may quote private values.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import re
import sys
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pinqpy.core.lattice import Lattice, SumGrid
from pinqpy.engines.base import (
    NO_MATCH,
    Executor,
    Grouping,
    LatticeSums,
    Read,
    batch_memo,
    canonical_key_counts,
    column_key,
    column_key_rows,
    prefetched,
)
from pinqpy.engines.buckets import bucket_query, uniform_grid
from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import (
    AGGREGATE_FUNCTIONS,
    Between,
    Binary,
    Call,
    Case,
    Cast,
    Column,
    Expr,
    InList,
    IsNull,
    Like,
    Literal,
    Unary,
)
from pinqpy.expr.check import resolve_column
from pinqpy.expr.types import CAST_TYPES, ColumnType, valid_text
from pinqpy.noise import source as _noise
from pinqpy.plan.nodes import (
    BoundContributions,
    Distinct,
    Explode,
    GroupBy,
    Join,
    PartSource,
    PlanNode,
    PlanVisitor,
    PublicJoin,
    PyFunc,
    Select,
    SetOp,
    Source,
    Where,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "SparkExecutor",
    "is_spark_dataframe",
    "local_session",
    "spark_fields_schema",
    "spark_schema",
    "to_spark",
]

_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1
_NUMERIC = frozenset({"int", "float", "bool"})
_TRUE_WORDS = ("true", "t", "yes", "y", "1", "on")
_FALSE_WORDS = ("false", "f", "no", "n", "0", "off")
_GI = "__pinq_g"
_INSTALL = "the Spark engine needs pyspark (and Java 17+): pip install 'pinqpy[spark]'"

# Python's str.strip() whitespace, as a Java regex class (Spark's trim only removes spaces).
_WS = r"[\t\n\x0B\f\r\x1C-\x1F \x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]"
_INT_TEXT = rf"^{_WS}*([+-]?[0-9]+){_WS}*$"
_NUM = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
# Only what pandas.to_numeric reads: Java would also take "1d" or "0x1p3".
_FLOAT_TEXT = rf"^{_WS}*([+-]?{_NUM}){_WS}*$"
_FLOAT_OR_INF_TEXT = rf"^{_WS}*([+-]?(?:{_NUM}|(?i:inf|infinity))){_WS}*$"
# Java's %e format: "-1.2345e+07".
_SCI_TEXT = r"^-?([0-9])\.([0-9]+)e([+-][0-9]+)$"
_TWO63 = "9.223372036854775808E18D"


# -- pyspark, imported only when used -----------------------------------------------------------
def _pyspark_sql() -> Any:
    try:
        import pyspark.sql
    except ImportError:
        raise PinqError(_INSTALL) from None
    return pyspark.sql


def _types() -> Any:
    _pyspark_sql()
    import pyspark.sql.types

    return pyspark.sql.types


def is_spark_dataframe(obj: object) -> bool:
    """Whether ``obj`` is a Spark DataFrame (classic or Connect), without importing pyspark."""
    if "pyspark" not in sys.modules:
        return False
    mod = sys.modules.get("pyspark.sql.dataframe")
    if mod is not None and isinstance(obj, mod.DataFrame):
        return True
    return any(
        c.__name__ == "DataFrame" and c.__module__.startswith("pyspark.sql")
        for c in type(obj).__mro__
    )


def local_session() -> SparkSession:
    """The active Spark session, or else a local one made for pinqpy (reused afterwards)."""
    sql = _pyspark_sql()
    with contextlib.suppress(Exception):  # no active or default session yet
        active = sql.SparkSession.active()
        if active is not None:
            return active  # type: ignore[no-any-return]
    builder = (
        sql.SparkSession.builder.master("local[2]")
        .appName("pinqpy")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # no private data is involved yet: keep the cause
        raise PinqError(
            f"could not start a local Spark session ({type(exc).__name__}); Spark needs Java 17 "
            "or later"
        ) from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark  # type: ignore[no-any-return]


# -- types -------------------------------------------------------------------------------------
def _kind_of(data_type: Any) -> str:
    """The pandas_eval kind of a Spark type ("other" for arrays, maps, structs, binary)."""
    name = type(data_type).__name__
    if name in ("LongType", "IntegerType", "ShortType", "ByteType"):
        return "int"
    if name in ("DoubleType", "FloatType", "DecimalType"):
        return "float"
    if name in ("StringType", "CharType", "VarcharType"):
        return "str"
    if name == "BooleanType":
        return "bool"
    if name in ("TimestampType", "TimestampNTZType", "DateType"):
        return "datetime"
    if name == "NullType":
        return "null"
    return "other"


def spark_schema(df: DataFrame) -> dict[str, ColumnType]:
    """pinqpy column types of a Spark DataFrame's columns (arrays, maps, structs: "any")."""
    return spark_fields_schema(df.schema)


def spark_fields_schema(schema: Any) -> dict[str, ColumnType]:
    """pinqpy column types of a Spark schema (a StructType)."""
    out: dict[str, ColumnType] = {}
    for f in schema.fields:
        kind = _kind_of(f.dataType)
        out[f.name] = "any" if kind in ("other", "null") else kind  # type: ignore[assignment]
    return out


# -- pandas -> Spark ---------------------------------------------------------------------------
def _session_tz(spark: SparkSession) -> str:
    return str(spark.conf.get("spark.sql.session.timeZone")) or "UTC"


def _is_missing(v: object) -> bool:
    if v is None:
        return True
    try:
        return bool(pd.isna(v))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False


def _is_listlike(v: object) -> bool:
    return isinstance(v, list | tuple | np.ndarray | set | frozenset)


def _object_kind(values: pd.Series) -> str:
    """The kind pandas_eval reads an object column (or list items) as."""
    inferred = pd.api.types.infer_dtype(values, skipna=True)
    if inferred in ("string", "empty"):
        return "str"
    if inferred == "boolean":
        return "bool"
    if inferred == "integer":
        return "int"
    if inferred in ("floating", "mixed-integer-float", "decimal"):
        return "float"
    if inferred in ("datetime", "datetime64", "date"):
        return "datetime"
    return "text"  # mixed: compared as text, as pandas_eval does


def _arrow_values(values: pd.Series, kind: str, tz: str) -> tuple[Any, Any]:
    """(pyarrow array, Spark type) of a column read as ``kind``; NULL/NaN become nulls."""
    import pyarrow as pa

    T = _types()
    s = values.reset_index(drop=True)
    if kind == "int":
        if s.dtype == object:
            try:
                arr = pd.array(s.to_numpy(), dtype="Int64")
            except (OverflowError, ValueError, TypeError):
                return _arrow_values(s, "float", tz)
            s = pd.Series(arr)
        mask = s.isna().to_numpy()
        if pd.api.types.is_unsigned_integer_dtype(s.dtype):
            raw = s.to_numpy(dtype=np.uint64, na_value=0)
            mask = mask | (raw > np.uint64(_I64_MAX))  # beyond int64: NULL, as pandas_eval
            data = np.where(mask, 0, raw).astype(np.int64)
        else:
            data = s.to_numpy(dtype=np.int64, na_value=0)
        return pa.array(data, pa.int64(), mask=mask), T.LongType()
    if kind == "float":
        if s.dtype == object:
            s = pd.to_numeric(s, errors="coerce")
        data = s.to_numpy(dtype=np.float64, na_value=np.nan)
        return pa.array(data, pa.float64(), mask=np.isnan(data)), T.DoubleType()
    if kind == "bool":
        mask = s.isna().to_numpy()
        data = s.where(~mask, False).astype(bool).to_numpy()
        return pa.array(data, pa.bool_(), mask=mask), T.BooleanType()
    if kind == "datetime":
        if isinstance(s.dtype, pd.DatetimeTZDtype):
            s = s.dt.tz_convert("UTC").dt.tz_localize(None)
        elif not pd.api.types.is_datetime64_dtype(s.dtype):
            s = pd.to_datetime(s, errors="coerce", utc=True).dt.tz_convert(None)
        # Naive pandas times are wall times; Spark timestamps are instants shown in the
        # session's zone, so read them in that zone.
        # An ambiguous wall time (a DST fold) reads as standard time: it shows the same.
        fold = np.zeros(len(s), dtype=bool)
        local = s.dt.tz_localize(tz, ambiguous=fold, nonexistent="shift_forward")
        utc = local.dt.tz_convert("UTC").dt.floor("us")
        return pa.array(utc, pa.timestamp("us", tz="UTC"), from_pandas=True), T.TimestampType()
    if kind == "timedelta":
        secs = s.dt.total_seconds().to_numpy(dtype=np.float64, na_value=np.nan)
        return pa.array(secs, pa.float64(), mask=np.isnan(secs)), T.DoubleType()
    # Text: pandas "str"/"string" columns, and object columns read as text (str(v)).
    objs = s.to_numpy(dtype=object)
    texts = [None if _is_missing(v) else v if isinstance(v, str) else str(v) for v in objs]
    return pa.array(texts, pa.string()), T.StringType()


def _arrow_lists(values: pd.Series, tz: str) -> tuple[Any, Any]:
    """A column of lists as an array column; a scalar becomes a one-item list (explode reads
    it as itself) and a missing value a NULL list."""
    import pyarrow as pa

    T = _types()
    rows: list[list[Any] | None] = []
    for v in values.to_numpy(dtype=object):
        if _is_listlike(v):
            rows.append(list(v))
        elif _is_missing(v):
            rows.append(None)
        else:
            rows.append([v])
    flat = pd.Series([x for r in rows if r is not None for x in r], dtype=object)
    kind = _object_kind(flat)
    if kind in ("datetime", "text"):
        kind = "text"
    items, elem_type = _arrow_values(flat, kind, tz)
    offsets = [0]
    valid = []
    for r in rows:
        offsets.append(offsets[-1] + (len(r) if r is not None else 0))
        valid.append(r is not None)
    mask = pa.array([not ok for ok in valid], pa.bool_())
    arr = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), items, mask=mask)
    return arr, T.ArrayType(elem_type, True)


def _arrow_column(s: pd.Series, tz: str) -> tuple[Any, Any]:
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        s = s.astype(object)
        dtype = s.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return _arrow_values(s, "bool", tz)
    if pd.api.types.is_integer_dtype(dtype):
        return _arrow_values(s, "int", tz)
    if pd.api.types.is_float_dtype(dtype):
        return _arrow_values(s, "float", tz)
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return _arrow_values(s, "datetime", tz)
    if pd.api.types.is_timedelta64_dtype(dtype):
        return _arrow_values(s, "timedelta", tz)
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        if any(_is_listlike(v) for v in s.to_numpy(dtype=object)):
            return _arrow_lists(s, tz)
        return _arrow_values(s, _object_kind(s), tz)
    return _arrow_values(s, "text", tz)


def to_spark(spark: SparkSession, df: pd.DataFrame) -> DataFrame:
    """A pandas DataFrame as a Spark DataFrame with an explicit schema, values kept exactly.

    int -> bigint, float -> double (NaN -> NULL), nullable Int64/boolean/string dtypes keep
    their NULLs, object columns by their values (str, bool, int, float, datetime; lists ->
    arrays of their items' type; mixed -> their text), datetime64 -> timestamp (naive times
    read in the session's time zone), timedelta -> seconds as double.
    """
    T = _types()
    try:
        import pyarrow as pa
    except ImportError:
        raise PinqError(
            "the Spark engine converts pandas DataFrames with pyarrow: pip install pyarrow"
        ) from None
    names = [str(c) for c in df.columns]
    if len(set(names)) != len(names):
        raise PinqError("column names must be unique")
    tz = _session_tz(spark)
    arrays, fields = [], []
    for i, name in enumerate(names):
        try:
            arr, data_type = _arrow_column(df.iloc[:, i], tz)
        except PinqError:
            raise
        except Exception as exc:  # pyarrow / pandas: the message may quote a value
            raise PinqError(
                f"cannot convert column {name!r} for the Spark engine ({type(exc).__name__})"
            ) from None
        arrays.append(arr)
        fields.append(T.StructField(name, data_type, True))
    table = pa.Table.from_arrays(arrays, names=names)
    return _guard(
        "converting a pandas DataFrame",
        lambda: spark.createDataFrame(table, schema=T.StructType(fields)),
    )


# -- engine errors -----------------------------------------------------------------------------
def _engine_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = []
    with contextlib.suppress(ImportError):
        from pyspark.errors import PySparkException

        errors.append(PySparkException)
    with contextlib.suppress(ImportError):
        from py4j.protocol import Py4JError

        errors.append(Py4JError)
    return tuple(errors)


@contextlib.contextmanager
def _quiet_query_logs() -> Iterator[None]:
    """PySpark logs every SQL error with its message, which may quote private values."""
    loggers = []
    with contextlib.suppress(ImportError):
        from pyspark.logger import PySparkLogger

        for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
            lg = PySparkLogger.getLogger(name)
            loggers.append((lg, lg.disabled))
            lg.disabled = True
    try:
        yield
    finally:
        for lg, was in loggers:
            lg.disabled = was


def _guard(what: str, fn: Callable[[], Any]) -> Any:
    """Run a Spark call; its errors become PinqErrors that quote no data."""
    with _quiet_query_logs():
        try:
            return fn()
        except PinqError:
            raise
        except _engine_errors() as exc:
            raise PinqError(
                f"the Spark engine failed while {what} ({type(exc).__name__}); details are "
                "hidden because they may contain private values"
            ) from None


# -- SQL text ----------------------------------------------------------------------------------
def _ident(name: str) -> str:
    """A column or view name as a Spark identifier (always quoted)."""
    return "`" + name.replace("`", "``") + "`"


def _str_lit(text: str) -> str:
    # Whether Spark unescapes backslashes in literals is a session setting
    # (spark.sql.parser.escapedStringLiterals): text without quotes, backslashes or control
    # characters reads the same either way, and anything else is spelled in hex.
    text = valid_text(text)
    if all(ch not in "'\\" and ch.isprintable() for ch in text):
        return f"'{text}'"
    return f"decode(unhex('{text.encode('utf-8').hex()}'), 'UTF-8')"


def _int_lit(v: int) -> str:
    return f"{v}L" if v >= 0 else f"({v}L)"


def _float_lit(v: float) -> str:
    if math.isnan(v):
        return "CAST(NULL AS DOUBLE)"
    if math.isinf(v):
        return f"CAST('{'-' if v < 0 else ''}Infinity' AS DOUBLE)"
    # A double literal reads its digits as Java's Double.parseDouble does, so repr's shortest
    # digits give back exactly v (and parse faster than a CAST of text).
    text = repr(abs(v)) + "D"
    return f"(-{text})" if math.copysign(1.0, v) < 0 else text


# Spark strings hold fewer than 2**31 characters and substring takes INT positions: a start
# or length beyond that is clamped to it, which changes no result (and never fails a cast).
_MAX_STRING = 2**31 - 1


@dataclass(frozen=True)
class _S:
    """Translated SQL text and the kind of value it yields (as in pandas_eval).

    ``raw``, for some floats, is the same value before non-finite results were made NULL:
    ``+``, ``-`` and ``*`` of a non-finite operand are non-finite too, so they may use it and
    let the one check on their own result stand for the skipped ones (fewer nested lets).
    """

    sql: str
    kind: str
    raw: str | None = None


_NULL = {
    "int": "CAST(NULL AS BIGINT)",
    "float": "CAST(NULL AS DOUBLE)",
    "bool": "CAST(NULL AS BOOLEAN)",
    "str": "CAST(NULL AS STRING)",
    "datetime": "CAST(NULL AS TIMESTAMP)",
    "null": "NULL",
}


def _null(kind: str) -> _S:
    return _S(_NULL.get(kind, "NULL"), kind)


_SIMPLE = re.compile(
    r"`(?:[^`]|``)*`|\(?-?\d+L\)?|\(?-?[\d.]+(?:e[+-]?\d+)?D\)?|TRUE|FALSE|NULL"
    r"|CAST\(NULL AS \w+\)|CAST\('-?Infinity' AS DOUBLE\)"
)
_LET_REF = re.compile(r"`__pinq_l(\d+)`")


class _Lets:
    """Sub-expressions computed once, in projections below the query that uses them.

    SQL has no ``let``: a value needed twice (``x`` in ``x BETWEEN a AND b``, a float checked
    for being finite) would otherwise be written, and evaluated, twice -- exponentially often
    when nested. Every translated expression is fault-free, so computing one for every row
    (instead of only where a CASE would reach it) is safe.
    """

    def __init__(self) -> None:
        self.items: list[tuple[str, str, int]] = []  # name, SQL, projection level

    def bind(self, v: _S) -> _S:
        if _SIMPLE.fullmatch(v.sql):
            return v
        level = 1 + max((self.items[i][2] for i in self._refs(v.sql)), default=0)
        name = f"__pinq_l{len(self.items)}"
        self.items.append((name, v.sql, level))
        return _S(_ident(name), v.kind)

    def _refs(self, sql: str) -> list[int]:
        return [int(i) for i in _LET_REF.findall(sql) if int(i) < len(self.items)]

    def source(self, child: str, uses: Sequence[str]) -> str:
        """``child`` with the bound values that ``uses`` need (directly or through other
        bound values) added as columns, as a FROM item. Values bound but no longer used (a
        finite check that a sum skipped) are left out."""
        need: set[int] = set()
        stack = [i for sql in uses for i in self._refs(sql)]
        while stack:
            i = stack.pop()
            if i not in need:
                need.add(i)
                stack.extend(self._refs(self.items[i][1]))
        out = child
        top = max((self.items[i][2] for i in need), default=0)
        for lv in range(1, top + 1):
            cols = ", ".join(
                f"{sql} AS {_ident(n)}"
                for i, (n, sql, level) in enumerate(self.items)
                if level == lv and i in need
            )
            if cols:
                out = f"(SELECT *, {cols} FROM {out}) AS __pinq_s{lv}"
        return out


def _like_pattern(pattern: str) -> str:
    """A LIKE pattern in pinqpy's reading (``\\x`` is a literal x) for Spark's LIKE with the
    escape character ``!``, which may only precede ``%``, ``_`` and itself."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            ch = pattern[i + 1]
            i += 1
        elif ch in "%_":
            out.append(ch)
            i += 1
            continue
        out.append("!" + ch if ch in "%_!" else ch)
        i += 1
    return "".join(out)


def _like_pieces(pattern: str) -> list[list[str | None]]:
    """A LIKE pattern (``\\x`` is a literal x) split at each ``%``: each piece a list of its
    characters, None for ``_``."""
    pieces: list[list[str | None]] = [[]]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            pieces[-1].append(pattern[i + 1])
            i += 2
            continue
        if ch == "%":
            pieces.append([])
        else:
            pieces[-1].append(None if ch == "_" else ch)
        i += 1
    return pieces


def _piece_text(piece: list[str | None]) -> str:
    """One piece back as pinqpy LIKE text (``_`` for None, other characters escaped)."""
    return "".join("_" if c is None else "\\" + c for c in piece)


class _ExprSql:
    """Translates one expression over a relation with known column kinds."""

    def __init__(self, kinds: dict[str, str], lets: _Lets) -> None:
        self.kinds = kinds
        self.lets = lets
        self.unchecked = False  # whether only Spark can tell if the SQL is valid
        # Sub-expressions written more than once (k-means' distances) are translated once
        # and computed once, as lets.
        self._uses: Counter[Expr] = Counter()
        self._done: dict[Expr, _S] = {}
        self._depth = 0

    def bind(self, v: _S) -> _S:
        return self.lets.bind(v)

    def finite(self, sql: str) -> _S:
        """A DOUBLE with every non-finite value (overflow, 0/0, ...) made NULL."""
        x = self.bind(_S(sql, "float")).sql
        # NaN compares greater than infinity in Spark, so this drops it too.
        return _S(
            f"(CASE WHEN abs({x}) < CAST('Infinity' AS DOUBLE) THEN {x} END)", "float", raw=sql
        )

    # -- leaves ---------------------------------------------------------------------------
    def tr(self, e: Expr) -> _S:
        if isinstance(e, Literal):
            return self.literal(e.value)
        if isinstance(e, Column):
            return self.column(e)
        if self._depth == 0:
            self._uses.update(n for n in e.walk() if not isinstance(n, Literal | Column))
        hit = self._done.get(e)
        if hit is not None:
            return hit
        self._depth += 1
        try:
            v = self.node(e)
        finally:
            self._depth -= 1
        if self._uses[e] > 1 and not _SIMPLE.fullmatch(v.sql):
            v = _S(self.bind(v).sql, v.kind, v.raw)
        self._done[e] = v
        return v

    def node(self, e: Expr) -> _S:
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Unary):
            return self.unary(e)
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Case):
            return self.case(e)
        if isinstance(e, Cast):
            return self.cast(self.tr(e.operand), e.type_name)
        if isinstance(e, InList):
            return self.in_list(e)
        if isinstance(e, Between):
            x = self.bind(self.tr(e.operand))
            v = self.logic(
                "AND", self.compare(">=", x, self.tr(e.low)), self.compare("<=", x, self.tr(e.high))
            )
            return self.logic_not(v) if e.negated else v
        if isinstance(e, Like):
            return self.like(e)
        if isinstance(e, IsNull):
            x = self.tr(e.operand)
            return _S(f"(({x.sql}) IS {'NOT ' if e.negated else ''}NULL)", "bool")
        raise PinqError(f"the Spark engine cannot translate a {type(e).__name__} node")

    def literal(self, v: object) -> _S:
        if v is None:
            return _S("NULL", "null")
        if isinstance(v, bool):
            return _S("TRUE" if v else "FALSE", "bool")
        if isinstance(v, int):
            if _I64_MIN <= v <= _I64_MAX:
                return _S(_int_lit(v), "int")
            return _S(_float_lit(float(v)), "float")
        if isinstance(v, float):
            return _null("float") if math.isnan(v) else _S(_float_lit(v), "float")
        if isinstance(v, str):
            return _S(_str_lit(v), "str")
        raise PinqError(f"unsupported literal of type {type(v).__name__}")

    def column(self, e: Column) -> _S:
        key = resolve_column(e, self.kinds)
        if key is None:
            raise PinqSyntaxError(f"unknown column '{e.name}'")
        return _S(_ident(key), self.kinds[key])

    # -- coercions ------------------------------------------------------------------------
    def as_double(self, v: _S) -> str:
        if v.kind in _NUMERIC:
            return f"CAST({v.sql} AS DOUBLE)"
        if v.kind == "str":
            return self.cast(v, "DOUBLE").sql
        return _NULL["float"]

    def numeric(self, v: _S) -> _S:
        if v.kind in ("int", "float", "null"):
            return v
        if v.kind == "bool":
            return _S(f"CAST({v.sql} AS BIGINT)", "int")
        if v.kind == "str":
            return self.cast(v, "DOUBLE")
        return _null("float")

    def to_str(self, v: _S) -> _S:
        if v.kind == "str":
            return v
        if v.kind in ("null", "other"):
            return _null("str")
        if v.kind == "datetime":
            return _S(f"date_format({v.sql}, 'yyyy-MM-dd HH:mm:ss')", "str")
        if v.kind == "float":
            return self.float_text(v.sql)
        return _S(f"CAST({v.sql} AS STRING)", "str")  # 'true'/'false' for booleans

    def float_text(self, sql: str) -> _S:
        """A double as Python's repr writes it: its shortest digits that read back as the same
        double (Java's own text is not always the shortest), fixed or scientific like repr."""
        x = self.bind(_S(sql, "float")).sql
        r15 = self.bind(_S(f"format_string('%.14e', {x})", "str")).sql
        r16 = self.bind(_S(f"format_string('%.15e', {x})", "str")).sql
        # Any double whose shortest form has at most 15 digits reads back from 15 digits.
        sci = self.bind(
            _S(
                f"(CASE WHEN try_cast({r15} AS DOUBLE) = {x} THEN {r15} "
                f"WHEN try_cast({r16} AS DOUBLE) = {x} THEN {r16} "
                f"ELSE format_string('%.16e', {x}) END)",
                "str",
            )
        ).sql
        pat = _str_lit(_SCI_TEXT)
        digits = self.bind(
            _S(
                f"trim(TRAILING '0' FROM concat(regexp_extract({sci}, {pat}, 1), "
                f"regexp_extract({sci}, {pat}, 2)))",
                "str",
            )
        ).sql
        # The value is 0.<digits> * 10^point.
        point = self.bind(
            _S(f"(coalesce(try_cast(regexp_extract({sci}, {pat}, 3) AS INT), 0) + 1)", "int")
        ).sql
        n = f"char_length({digits})"
        fixed = (
            f"CASE WHEN {point} <= 0 THEN concat('0.', repeat('0', -{point}), {digits}) "
            f"WHEN {point} >= {n} THEN concat({digits}, repeat('0', {point} - {n}), '.0') "
            f"ELSE concat(substring({digits}, 1, {point}), '.', substring({digits}, {point} + 1)) "
            "END"
        )
        e = f"({point} - 1)"
        scientific = (
            f"concat(substring({digits}, 1, 1), IF({n} > 1, concat('.', substring({digits}, 2)), "
            f"''), 'e', IF({e} < 0, '-', '+'), IF(abs({e}) < 10, '0', ''), "
            f"CAST(abs({e}) AS STRING))"
        )
        body = (
            f"CASE WHEN {digits} = '' THEN '0.0' WHEN {e} >= -4 AND {e} < 16 THEN {fixed} "
            f"ELSE {scientific} END"
        )
        return _S(
            # format_string writes NULL as 'null'.
            f"(CASE WHEN {x} IS NULL THEN CAST(NULL AS STRING) WHEN isnan({x}) THEN 'nan' "
            f"WHEN {x} = CAST('Infinity' AS DOUBLE) THEN 'inf' "
            f"WHEN {x} = CAST('-Infinity' AS DOUBLE) THEN '-inf' "
            f"ELSE concat(IF({sci} LIKE '-%', '-', ''), {body}) END)",
            "str",
        )

    def to_kind(self, v: _S, kind: str) -> _S:
        if v.kind == kind:
            return v
        if v.kind == "null":
            return _null(kind)
        if kind == "float":
            return _S(self.as_double(v), "float")
        if kind == "int" and v.kind == "bool":
            return _S(f"CAST({v.sql} AS BIGINT)", "int")
        if kind == "str":
            return self.to_str(v)
        if kind == "null":
            return _null("null")
        return self.cast(v, {"int": "BIGINT", "bool": "BOOLEAN", "datetime": "TIMESTAMP"}[kind])

    def boolean(self, v: _S) -> _S:
        if v.kind == "bool":
            return v
        if v.kind == "null":
            return _null("bool")
        return self.cast(v, "BOOLEAN")

    def result_kind(self, vs: Sequence[_S]) -> str:
        kinds = {v.kind for v in vs if v.kind != "null"}
        if not kinds:
            return "null"
        if kinds <= _NUMERIC:
            return "float" if "float" in kinds else "int" if "int" in kinds else "bool"
        if len(kinds) == 1:
            kind = next(iter(kinds))
            # Values of types pinqpy does not model (arrays, maps) may not combine.
            self.unchecked |= kind == "other"
            return kind
        return "str"

    # -- arithmetic -----------------------------------------------------------------------
    def binary(self, e: Binary) -> _S:
        op = e.op
        if op in ("AND", "OR"):
            return self.logic(op, self.tr(e.left), self.tr(e.right))
        a, b = self.tr(e.left), self.tr(e.right)
        if op in ("=", "<>", "<", "<=", ">", ">="):
            return self.compare(op, a, b)
        if op == "||":
            a, b = self.to_str(a), self.to_str(b)
            return _S(f"concat({a.sql}, {b.sql})", "str")
        return self.arith(op, a, b)

    def arith(self, op: str, a: _S, b: _S) -> _S:
        a, b = self.numeric(a), self.numeric(b)
        if a.kind == "null" or b.kind == "null":
            ints = {a.kind, b.kind} - {"null"} == {"int"} and op != "/"
            return _null("int" if ints else "float")
        if a.kind == "int" and b.kind == "int" and op != "/":
            # The try_ forms give NULL on overflow and on % 0, whatever the ANSI setting.
            fn = {"+": "try_add", "-": "try_subtract", "*": "try_multiply", "%": "try_mod"}[op]
            return _S(f"{fn}({a.sql}, {b.sql})", "int")
        if op in ("+", "-", "*"):
            # A non-finite operand gives a non-finite result: the result's check covers it.
            x = a.raw if a.raw is not None else self.as_double(a)
            y = b.raw if b.raw is not None else self.as_double(b)
        else:
            x, y = self.as_double(a), self.as_double(b)
        if op == "/":
            return self.finite(f"try_divide({x}, {y})")
        if op == "%":
            return self.finite(f"try_mod({x}, {y})")
        return self.finite(f"({x} {op} {y})")

    def unary(self, e: Unary) -> _S:
        v = self.tr(e.operand)
        if e.op == "NOT":
            return self.logic_not(v)
        if v.kind == "null":
            return _null("float")
        v = self.numeric(v)
        if v.kind == "int":
            return _S(f"try_subtract(0L, {v.sql})", "int")
        return _S(f"(-({v.sql}))", v.kind)

    # -- comparison and logic -------------------------------------------------------------
    def compare(self, op: str, a: _S, b: _S) -> _S:
        if "null" in (a.kind, b.kind):
            return _null("bool")
        if a.kind in _NUMERIC and b.kind in _NUMERIC:
            if a.kind != b.kind and "bool" in (a.kind, b.kind):
                a, b = _S(self.as_double(a), "float"), _S(self.as_double(b), "float")
        elif a.kind == b.kind and a.kind in ("str", "datetime"):
            pass
        elif {a.kind, b.kind} == {"datetime", "str"}:
            a = self.cast(a, "TIMESTAMP") if a.kind == "str" else a
            b = self.cast(b, "TIMESTAMP") if b.kind == "str" else b
        elif a.kind in _NUMERIC and b.kind == "str":
            b = self.numeric(b)
        elif b.kind in _NUMERIC and a.kind == "str":
            a = self.numeric(a)
        else:
            return _null("bool")
        return _S(f"({a.sql} {op} {b.sql})", "bool")

    def logic(self, op: str, a: _S, b: _S) -> _S:
        a, b = self.boolean(a), self.boolean(b)
        return _S(f"({a.sql} {op} {b.sql})", "bool")

    def logic_not(self, v: _S) -> _S:
        return _S(f"(NOT {self.boolean(v).sql})", "bool")

    def in_list(self, e: InList) -> _S:
        if not e.items:
            return _S("TRUE" if e.negated else "FALSE", "bool")
        x = self.tr(e.operand)
        if len(e.items) > 1:
            x = self.bind(x)
        parts = [self.compare("=", x, self.tr(i)).sql for i in e.items]
        v = _S("(" + " OR ".join(parts) + ")", "bool")
        return self.logic_not(v) if e.negated else v

    def like(self, e: Like) -> _S:
        if not isinstance(e.pattern, Literal):
            raise PinqError("the LIKE pattern must be a constant string")
        if e.pattern.value is None:
            return _null("bool")
        x = self.to_str(self.tr(e.operand))
        text = valid_text(str(e.pattern.value))
        pieces = _like_pieces(text)
        if len(pieces) > 2:
            v = self.like_pieces(x, pieces)
        else:  # at most one %: Java's regex does not backtrack beyond one .*
            v = _S(f"({x.sql} LIKE {_str_lit(_like_pattern(text))} ESCAPE '!')", "bool")
        return self.logic_not(v) if e.negated else v

    def like_pieces(self, x: _S, pieces: list[list[str | None]]) -> _S:
        """LIKE with several %, without Spark's LIKE: that compiles to a Java regex with a .*
        per %, which backtracks (time polynomial of the degree of the number of % in a
        string's length). Instead the first piece must start the text, the last end it, and
        each middle piece is found leftmost after the one before (leftmost never loses a
        match): ``locate`` for literal pieces, and for pieces with ``_`` a lazy regex with no
        other repetition. Each step is linear in the text's length."""
        x = self.bind(x)
        length = self.bind(_S(f"char_length({x.sql})", "int")).sql
        first, last = pieces[0], pieces[-1]
        conds = [f"({length} >= {sum(len(p) for p in pieces)})"]
        if first:
            pattern = _like_pattern(_piece_text(first)) + "%"
            conds.append(f"({x.sql} LIKE {_str_lit(pattern)} ESCAPE '!')")
        if last:
            pattern = "%" + _like_pattern(_piece_text(last))
            conds.append(f"({x.sql} LIKE {_str_lit(pattern)} ESCAPE '!')")
        start = str(len(first) + 1)  # 1-based; 0 once a piece was not found
        for piece in pieces[1:-1]:
            if not piece:
                continue
            if None not in piece:
                lit = _str_lit("".join(c for c in piece if c is not None))
                pos = f"locate({lit}, {x.sql}, {start})"  # 0 when start is 0
            else:
                regex = (
                    "(?s)^.*?(?:"
                    + "".join("." if c is None else f"\\x{{{ord(c):x}}}" for c in piece)
                    + ")"
                )
                found = self.bind(
                    _S(
                        f"(CASE WHEN {start} > 0 THEN "
                        f"regexp_extract(substring({x.sql}, {start}), {_str_lit(regex)}, 0) END)",
                        "str",
                    )
                ).sql
                pos = (
                    f"(CASE WHEN char_length({found}) > 0 THEN "
                    f"{start} + char_length({found}) - {len(piece)} ELSE 0 END)"
                )
            p = self.bind(_S(pos, "int")).sql
            start = self.bind(_S(f"(({p}) + {len(piece)}) * sign({p})", "int")).sql
        conds.append(f"({start} > 0)")
        conds.append(f"({start} - 1 <= {length} - {len(last)})")
        # (Spark's locate reads a NULL text as no match: NULL in, NULL out, as LIKE gives.)
        return _S(f"(CASE WHEN {x.sql} IS NOT NULL THEN {' AND '.join(conds)} END)", "bool")

    # -- CASE and functions ---------------------------------------------------------------
    def case(self, e: Case) -> _S:
        conds = [self.boolean(self.tr(c)).sql for c, _ in e.whens]
        results = [self.tr(r) for _, r in e.whens]
        results.append(self.tr(e.else_) if e.else_ is not None else _S("NULL", "null"))
        kind = self.result_kind(results)
        rs = [self.to_kind(r, kind) for r in results]
        body = " ".join(f"WHEN {c} THEN {r.sql}" for c, r in zip(conds, rs[:-1], strict=True))
        return _S(f"(CASE {body} ELSE {rs[-1].sql} END)", kind)

    def call(self, e: Call) -> _S:
        name = e.name.upper()
        if name in AGGREGATE_FUNCTIONS:
            raise PinqError(
                f"the aggregate {name} cannot be evaluated row by row; "
                "aggregates belong in an aggregation"
            )
        if name in ("SUBSTR", "SUBSTRING"):
            return self.substr(e)
        if name in ("POWER", "POW") and len(e.args) == 2 and _positive_number(e.args[1]):
            # A non-finite base to a positive power is non-finite: the result's check covers
            # the base's (so sums of squares need no lets per term).
            base = self.numeric(self.tr(e.args[0]))
            x = base.raw if base.raw is not None else self.as_double(base)
            y = self.as_double(self.numeric(self.tr(e.args[1])))
            return self.finite(f"pow({x}, {y})")
        fn = _FUNCTIONS.get(name)
        if fn is None:
            raise PinqSyntaxError(f"unknown function '{e.name}'")
        return fn(self, [self.tr(a) for a in e.args])

    def math1(self, v: _S, fn: str) -> _S:
        return self.finite(f"{fn}({self.as_double(self.numeric(v))})")

    def to_int_fn(self, v: _S, how: str) -> _S:
        """FLOOR/CEIL/ROUND to an integer; NULL outside the int64 range (Spark would raise)."""
        v = self.numeric(v)
        if v.kind in ("int", "null"):
            return v if v.kind == "int" else _null("int")
        x = self.bind(v).sql
        if how == "round":  # halves away from zero, as pandas_eval
            body = f"CAST(signum({x}) AS BIGINT) * floor(abs({x}) + 0.5D)"
            low = f"{x} > -{_TWO63}"
        else:
            body = f"{how}({x})"
            low = f"{x} >= -{_TWO63}"
        return _S(f"(CASE WHEN {low} AND {x} < {_TWO63} THEN {body} END)", "int")

    def str_fn(self, v: _S, template: str) -> _S:
        return _S(template.format(self.to_str(v).sql), "str")

    def extreme(self, vs: list[_S], least: bool) -> _S:
        kind = self.result_kind(vs)
        args = [self.to_kind(v, kind).sql for v in vs]
        if len(args) == 1:
            return _S(args[0], kind)
        return _S(f"{'least' if least else 'greatest'}({', '.join(args)})", kind)

    def substr(self, e: Call) -> _S:
        consts: list[int | None] = []
        for a in e.args[1:]:
            if isinstance(a, Literal) and (a.value is None or isinstance(a.value, int)):
                consts.append(None if a.value is None else int(a.value))
            else:
                raise PinqError(
                    "the Spark engine needs the start and length of SUBSTR to be literal integers"
                )
        if any(c is None for c in consts):
            return _null("str")
        x = self.to_str(self.tr(e.args[0]))
        begin = max(int(consts[0]) - 1, 0)  # type: ignore[arg-type]
        if len(consts) == 2:
            length = int(consts[1])  # type: ignore[arg-type]
            if length < 0:
                return _null("str")
            end = max(int(consts[0]) - 1 + length, 0)  # type: ignore[arg-type]
            count = min(max(end - begin, 0), _MAX_STRING)
            return _S(f"substring({x.sql}, {min(begin + 1, _MAX_STRING)}, {count})", "str")
        return _S(f"substring({x.sql}, {min(begin + 1, _MAX_STRING)})", "str")

    # -- CAST -----------------------------------------------------------------------------
    def cast(self, v: _S, type_name: str) -> _S:
        upper = type_name.upper()
        target = CAST_TYPES.get(upper)
        if target is None:
            raise PinqSyntaxError(f"unknown type '{type_name}' in CAST")
        if v.kind in ("null", "other"):
            return _null(target)
        s = v.sql
        if target == "int":
            if v.kind == "int":
                return v
            if v.kind == "bool":
                return _S(f"CAST({s} AS BIGINT)", "int")
            if v.kind == "float":
                return self.to_int_fn(v, "round")
            if v.kind == "str":
                # Only an optionally signed run of digits counts (a regexp miss is '').
                return _S(
                    f"try_cast(regexp_extract({s}, {_str_lit(_INT_TEXT)}, 1) AS BIGINT)", "int"
                )
            return _null("int")
        if target == "float":
            if v.kind == "str":
                return self.finite(
                    f"try_cast(regexp_extract({s}, {_str_lit(_FLOAT_TEXT)}, 1) AS DOUBLE)"
                )
            if v.kind == "datetime":
                return _null("float")
            return _S(f"CAST({s} AS DOUBLE)", "float")
        if target == "str":
            return self.to_str(v)
        if target == "bool":
            if v.kind == "bool":
                return v
            if v.kind in ("int", "float"):
                return _S(f"({s} <> 0)", "bool")
            if v.kind == "str":
                words = [(w, "TRUE") for w in _TRUE_WORDS] + [(w, "FALSE") for w in _FALSE_WORDS]
                table = ", ".join(f"{_str_lit(w)}, {b}" for w, b in words)
                stripped = f"regexp_replace({s}, {_str_lit(f'^{_WS}+|{_WS}+$')}, '')"
                return _S(f"try_element_at(map({table}), lower({stripped}))", "bool")
            return _null("bool")
        # datetime
        if v.kind == "datetime":
            out = s
        elif v.kind == "str":
            out = f"try_cast({s} AS TIMESTAMP)"
        else:
            return _null("datetime")
        if upper == "DATE":
            out = f"date_trunc('DAY', {out})"
        return _S(out, "datetime")


def _positive_number(e: Expr) -> bool:
    v = e.value if isinstance(e, Literal) else None
    return type(v) in (int, float) and math.isfinite(v) and v > 0  # type: ignore[arg-type]


def _round_fn(t: _ExprSql, a: list[_S]) -> _S:
    if len(a) == 1:
        return t.to_int_fn(a[0], "round")
    x = t.as_double(t.numeric(a[0]))
    d = t.bind(_S(t.as_double(t.numeric(a[1])), "float")).sql
    # 10^trunc(d); a non-finite d gives NaN, and so NULL.
    scale = t.bind(_S(f"pow(10.0D, {d} - try_mod({d}, 1.0D))", "float")).sql
    w = t.bind(_S(f"({x} * {scale})", "float")).sql
    # floor(|w| + 0.5) as numpy computes it; beyond 2^63 w is already whole.
    rounded = (
        f"(CASE WHEN abs({w}) < 9.0E18D THEN signum({w}) * floor(abs({w}) + 0.5D) ELSE {w} END)"
    )
    return t.finite(f"try_divide({rounded}, {scale})")


def _abs_fn(t: _ExprSql, a: list[_S]) -> _S:
    v = t.numeric(a[0])
    if v.kind == "int":
        return _S(f"abs(nullif({v.sql}, {_int_lit(_I64_MIN)}))", "int")
    if v.kind == "null":
        return _null("float")
    return _S(f"abs({v.sql})", "float")


def _sign_fn(t: _ExprSql, a: list[_S]) -> _S:
    v = t.numeric(a[0])
    if v.kind == "null":
        return _null("float")
    if v.kind == "int":
        return _S(f"CAST(signum({v.sql}) AS BIGINT)", "int")
    return _S(f"signum({v.sql})", "float")


def _power_fn(t: _ExprSql, a: list[_S]) -> _S:
    x, y = t.as_double(t.numeric(a[0])), t.as_double(t.numeric(a[1]))
    return t.finite(f"pow({x}, {y})")


def _coalesce_fn(t: _ExprSql, a: list[_S]) -> _S:
    kind = t.result_kind(a)
    return _S("coalesce(" + ", ".join(t.to_kind(v, kind).sql for v in a) + ")", kind)


def _nullif_fn(t: _ExprSql, a: list[_S]) -> _S:
    x = t.bind(a[0])
    same = t.compare("=", x, a[1]).sql
    return _S(f"(CASE WHEN {same} THEN {_null(x.kind).sql} ELSE {x.sql} END)", x.kind)


def _if_fn(t: _ExprSql, a: list[_S]) -> _S:
    cond = t.boolean(a[0]).sql
    kind = t.result_kind(a[1:])
    x, y = t.to_kind(a[1], kind), t.to_kind(a[2], kind)
    return _S(f"(CASE WHEN {cond} THEN {x.sql} ELSE {y.sql} END)", kind)


def _length_fn(t: _ExprSql, a: list[_S]) -> _S:
    return _S(f"CAST(char_length({t.to_str(a[0]).sql}) AS BIGINT)", "int")


def _concat_fn(t: _ExprSql, a: list[_S]) -> _S:
    # CONCAT skips NULLs (as concat_ws does); with no non-NULL argument the result is ''.
    return _S("concat_ws('', " + ", ".join(t.to_str(v).sql for v in a) + ")", "str")


_FUNCTIONS: dict[str, Callable[[_ExprSql, list[_S]], _S]] = {
    "ABS": _abs_fn,
    "SIGN": _sign_fn,
    "FLOOR": lambda t, a: t.to_int_fn(a[0], "floor"),
    "CEIL": lambda t, a: t.to_int_fn(a[0], "ceil"),
    "CEILING": lambda t, a: t.to_int_fn(a[0], "ceil"),
    "ROUND": _round_fn,
    "SQRT": lambda t, a: t.math1(a[0], "sqrt"),
    "LN": lambda t, a: t.math1(a[0], "ln"),
    "LOG": lambda t, a: t.math1(a[0], "log10"),
    "LOG10": lambda t, a: t.math1(a[0], "log10"),
    "EXP": lambda t, a: t.math1(a[0], "exp"),
    "POWER": _power_fn,
    "POW": _power_fn,
    "LEAST": lambda t, a: t.extreme(a, True),
    "GREATEST": lambda t, a: t.extreme(a, False),
    "COALESCE": _coalesce_fn,
    "NULLIF": _nullif_fn,
    "IF": _if_fn,
    "IIF": _if_fn,
    "LOWER": lambda t, a: t.str_fn(a[0], "lower({})"),
    "UPPER": lambda t, a: t.str_fn(a[0], "upper({})"),
    "TRIM": lambda t, a: t.str_fn(a[0], "trim(BOTH ' ' FROM {})"),
    "LTRIM": lambda t, a: t.str_fn(a[0], "trim(LEADING ' ' FROM {})"),
    "RTRIM": lambda t, a: t.str_fn(a[0], "trim(TRAILING ' ' FROM {})"),
    "LENGTH": _length_fn,
    "CONCAT": _concat_fn,
}


def _no_callable(value: object, what: str) -> None:
    if isinstance(value, PyFunc):
        raise PinqError(
            f"the Spark engine cannot run the Python callable {value.name} in {what}; use an "
            "expression string, or the pandas engine"
        )


def _typed(v: _S) -> str:
    """An untyped NULL gets a type (DOUBLE, as pandas stores an all-NULL column)."""
    return _NULL["float"] if v.kind == "null" else v.sql


def _numeric_value(v: _S) -> str:
    """Values as DOUBLE with NULL for anything that is not a number (as pandas' _numeric,
    which keeps infinities)."""
    if v.kind in _NUMERIC:
        return f"CAST({v.sql} AS DOUBLE)"
    if v.kind == "str":
        return f"try_cast(regexp_extract({v.sql}, {_str_lit(_FLOAT_OR_INF_TEXT)}, 1) AS DOUBLE)"
    return _NULL["float"]


def _aggregate(t: _ExprSql, call: Call) -> str:
    func = call.name.upper()
    if call.star:
        return "COUNT(*)"
    arg = t.tr(call.args[0])
    if func == "COUNT":
        return f"COUNT({'DISTINCT ' if call.distinct else ''}{_typed(arg)})"
    x = _numeric_value(arg)
    sql_fn = {
        "SUM": "sum",
        "AVG": "avg",
        "MIN": "min",
        "MAX": "max",
        "MEDIAN": "median",
        "VARIANCE": "var_samp",
        "STDDEV": "stddev_samp",
    }.get(func)
    if sql_fn is None:
        raise PinqError(f"{func} cannot be used inside groupby().agg()")
    if func == "SUM":
        return f"coalesce(sum({x}), 0.0D)"  # pandas: the sum of no values is 0
    return f"CAST({sql_fn}({x}) AS DOUBLE)"


def _normalized(q: str, data_type: Any) -> str:
    """A source column in the engine's value model: bigint, double without NaN, timestamp."""
    name = type(data_type).__name__
    if name in ("ByteType", "ShortType", "IntegerType"):
        return f"CAST({q} AS BIGINT)"
    if name == "DoubleType":
        return f"nanvl({q}, CAST(NULL AS DOUBLE))"
    if name == "FloatType":
        return f"nanvl(CAST({q} AS DOUBLE), CAST(NULL AS DOUBLE))"
    if name == "DecimalType":
        return f"CAST({q} AS DOUBLE)"
    if name in ("DateType", "TimestampNTZType"):
        return f"CAST({q} AS TIMESTAMP)"
    if name in ("CharType", "VarcharType", "NullType"):
        return f"CAST({q} AS STRING)"
    return q


# -- public keys and candidates -----------------------------------------------------------------
def _value_kind(v: object) -> str | None:
    """The kind of a public key or candidate value (None for NULL / NaN)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, bool | np.bool_):
        return "bool"
    if isinstance(v, int | np.integer):
        return "int"
    if isinstance(v, float | np.floating):
        return "float" if not math.isnan(float(v)) else None
    if isinstance(v, str):
        return "str"
    if isinstance(v, pd.Timestamp | np.datetime64):
        return "datetime" if not pd.isna(v) else None
    try:
        if v != v:  # pd.NA, NaT
            return None
    except (TypeError, ValueError):
        return None
    return "other"


def _compatible(col_kind: str, key_kind: str) -> bool:
    if col_kind in ("int", "float") and key_kind in ("int", "float"):
        return True
    return col_kind == key_kind


def _naive(v: object) -> pd.Timestamp:
    ts = pd.Timestamp(v)  # type: ignore[arg-type]
    return ts.tz_convert("UTC").tz_localize(None) if ts.tzinfo is not None else ts


def _key_literal(v: object, kind: str, tz: str) -> str:
    if kind == "bool":
        return "TRUE" if v else "FALSE"
    if kind == "int":
        return _int_lit(int(v))  # type: ignore[call-overload]
    if kind == "float":
        return _float_lit(float(v))  # type: ignore[arg-type]
    if kind == "str":
        return _str_lit(str(v))
    return f"timestamp_micros({_int_lit(_micros([v], tz)[0])})"  # type: ignore[arg-type]


def _key_match(col_sql: str, col_kind: str, key: object, tz: str) -> str:
    """SQL true exactly where the column equals a public key under the column's type (a
    NULL-like key matches NULL)."""
    v = column_key(key, col_kind)
    if v is None:
        return f"({col_sql} IS NULL)"
    if v is NO_MATCH:
        return "FALSE"
    return f"({col_sql} = {_key_literal(v, col_kind, tz)})"


def _micros(values: Sequence[Any], tz: str) -> list[int | None]:
    """Timestamps as microseconds since the epoch, read exactly as :func:`to_spark` reads a
    column of them (naive wall times in the session's zone)."""
    import pyarrow as pa

    stamps = pd.Series(pd.to_datetime([pd.NaT if v is None else _naive(v) for v in values]))
    arr, _ = _arrow_values(stamps, "datetime", tz)
    return arr.cast(pa.int64()).to_pylist()  # type: ignore[no-any-return]


def _key_column(values: Sequence[Any], kind: str, tz: str) -> list[str]:
    """One key column as SQL literals typed like the plan's column it is matched against
    (``None`` is NULL): the values and types :func:`_key_arrow` gives."""
    if kind in ("int", "float"):
        if kind == "int" and all(v is None or _value_kind(v) == "int" for v in values):
            return [_NULL["int"] if v is None else _int_lit(int(v)) for v in values]
        return [_NULL["float"] if v is None else _float_lit(float(v)) for v in values]
    if kind == "bool":
        return [_NULL["bool"] if v is None else "TRUE" if v else "FALSE" for v in values]
    if kind == "datetime":
        return [
            _NULL["datetime"] if m is None else f"timestamp_micros({_int_lit(m)})"
            for m in _micros(values, tz)
        ]
    return [
        _NULL["str"] if v is None else _str_lit(v if isinstance(v, str) else str(v)) for v in values
    ]


def _key_type(values: Sequence[Any], kind: str) -> str:
    """The SQL type of a key column made by :func:`_key_column`."""
    if kind in ("int", "float"):
        ints = all(v is None or _value_kind(v) == "int" for v in values)
        return "BIGINT" if kind == "int" and ints else "DOUBLE"
    return {"bool": "BOOLEAN", "datetime": "TIMESTAMP"}.get(kind, "STRING")


def _key_value(v: Any, sql_type: str) -> Any:
    """A key as Spark returns a value of ``sql_type`` equal to it (None for NULL)."""
    if v is None:
        return None
    if sql_type == "BIGINT":
        return int(v)
    if sql_type == "DOUBLE":
        return float(v)
    if sql_type == "BOOLEAN":
        return bool(v)
    return v if isinstance(v, str) else str(v)


def _key_arrow(values: Sequence[Any], kind: str, tz: str) -> tuple[Any, Any]:
    """One key column typed like the plan's column it is matched against."""
    if kind in ("int", "float"):
        ints = all(v is None or _value_kind(v) == "int" for v in values)
        if kind == "int" and ints:
            return _arrow_values(pd.Series(pd.array(values, dtype="Int64")), "int", tz)
        floats = [np.nan if v is None else float(v) for v in values]
        return _arrow_values(pd.Series(floats, dtype="float64"), "float", tz)
    if kind == "bool":
        return _arrow_values(pd.Series(pd.array(values, dtype="boolean")), "bool", tz)
    if kind == "datetime":
        stamps = [pd.NaT if v is None else _naive(v) for v in values]
        return _arrow_values(pd.Series(pd.to_datetime(stamps)), "datetime", tz)
    return _arrow_values(pd.Series(values, dtype=object), "text", tz)


# -- plans -------------------------------------------------------------------------------------
# Key and candidate tables up to this many rows are written into the query (VALUES), which
# costs Spark nothing extra; larger ones are sent as a DataFrame.
_INLINE_ROWS = 1000
# The reads one Spark job can compute together, by the name of their request.
_REQUESTS = {"count": "count", "sum": "clamped_sum", "mean": "lattice", "moments": "lattice2"}


def _normalized_type(data_type: Any) -> Any:
    """The Spark type of :func:`_normalized` applied to a column of ``data_type``."""
    T = _types()
    name = type(data_type).__name__
    if name in ("ByteType", "ShortType", "IntegerType"):
        return T.LongType()
    if name in ("FloatType", "DecimalType"):
        return T.DoubleType()
    if name in ("DateType", "TimestampNTZType"):
        return T.TimestampType()
    if name in ("CharType", "VarcharType", "NullType"):
        return T.StringType()
    return data_type


@dataclass(frozen=True)
class _Col:
    """A column of a translated relation; ``dtype`` is its Spark type where pinqpy needs it
    (arrays, maps, structs: kind "other"), None when not known."""

    name: str
    kind: str
    dtype: Any = None


@dataclass(frozen=True)
class _Rel:
    """A translated plan node: the name to read it by (a common table expression or a source
    view) and its columns. ``sure`` is false when only Spark can tell whether its SQL is
    valid (values of types pinqpy does not model, such as maps in a DISTINCT)."""

    name: str
    cols: tuple[_Col, ...]
    sure: bool = True

    @property
    def kinds(self) -> dict[str, str]:
        return {c.name: c.kind for c in self.cols}

    def names(self) -> list[str]:
        return [c.name for c in self.cols]

    def col_list(self) -> str:
        return ", ".join(_ident(c.name) for c in self.cols)


def _col_of(v: _S, name: str, child: _Rel) -> _Col:
    """The column an expression makes (an untyped NULL is stored as DOUBLE, see _typed)."""
    if v.kind == "other":
        # Only a column reference keeps a type pinqpy does not model (see _ExprSql.column).
        src = next((c for c in child.cols if _ident(c.name) == v.sql), None)
        return _Col(name, "other", src.dtype if src is not None else None)
    return _Col(name, "float" if v.kind == "null" else v.kind)


def _public_nulls(data: Any, on: Sequence[str]) -> list[bool] | None:
    """Which key columns of a public table hold a NULL (None: not known). Public rows may
    be read freely."""
    if not isinstance(data, pd.DataFrame):
        return None
    try:
        return [bool(data[c].isna().any()) for c in on]
    except (KeyError, TypeError, ValueError):
        return None


def _values_table(names: Sequence[str], columns: Sequence[Sequence[str]]) -> str:
    """A small table written as a VALUES list, as a FROM item."""
    rows = ", ".join("(" + ", ".join(r) + ")" for r in zip(*columns, strict=True))
    cols = ", ".join(_ident(n) for n in names)
    return f"(SELECT * FROM VALUES {rows} AS __pinq_t({cols}))"


class _Call:
    """One executor call: what it is doing (for error messages) and the temporary views it
    makes for large key tables, dropped when it ends."""

    def __init__(self, ex: SparkExecutor, what: str) -> None:
        self.ex = ex
        self.what = what
        self.views: list[str] = []

    def run(self, fn: Callable[[], Any]) -> Any:
        return _guard(self.what, fn)

    def sql(self, text: str) -> DataFrame:
        """Spark's analysis of a query (reads no rows)."""
        return self.run(lambda: self.ex.spark.sql(text))  # type: ignore[no-any-return]

    def collect(self, text: str) -> list[tuple[Any, ...]]:
        rows = self.run(lambda: self.ex.spark.sql(text).collect())
        return [tuple(r) for r in rows]

    def table(self, columns: Sequence[str], arrays: Sequence[tuple[Any, Any]]) -> str:
        """A typed table (keys, candidates) as a view."""
        import pyarrow as pa

        T = _types()
        fields = [T.StructField(c, t, True) for c, (_, t) in zip(columns, arrays, strict=True)]
        table = pa.Table.from_arrays([a for a, _ in arrays], names=list(columns))
        df = self.run(lambda: self.ex.spark.createDataFrame(table, schema=T.StructType(fields)))
        name = f"{self.ex._prefix}t{next(self.ex._names)}"
        self.run(lambda: df.createOrReplaceTempView(name))
        self.views.append(name)
        return _ident(name)

    def close(self) -> None:
        for name in self.views:
            with contextlib.suppress(Exception):
                _guard(self.what, lambda n=name: self.ex.spark.catalog.dropTempView(n))
        self.views.clear()


class _PlanSql(PlanVisitor[_Rel]):
    """Turns plans into SQL: one common table expression per node, whose columns and their
    kinds are worked out here (as Spark would), so that a query costs Spark one analysis,
    when it runs, instead of one per node. A node shared by several parents (``f.concat(f)``)
    is one expression.

    One translator serves all the calls of one query (:func:`~pinqpy.engines.base.batch_memo`):
    the check before the charge and every aggregate share the translation, and so the
    truncation salts.
    """

    def __init__(self, ex: SparkExecutor) -> None:
        self.ex = ex
        self.call = _Call(ex, "translating a query")
        # CTE name -> (its query, the CTE names it reads), in the order of definition.
        self.ctes: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._memo: dict[int, tuple[PlanNode, _Rel]] = {}
        self._values: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}
        self._typed: dict[str, _Rel] = {}

    # -- bookkeeping ----------------------------------------------------------------------
    def add(self, sql: str, cols: Sequence[_Col], reads: Sequence[_Rel], sure: bool = True) -> _Rel:
        name = _ident(f"__pinq_n{len(self.ctes)}")
        self.ctes[name] = (sql, tuple(r.name for r in reads if r.name in self.ctes))
        sure = sure and all(r.sure for r in reads) and all(c.kind != "other" for c in cols)
        return _Rel(name, tuple(cols), sure)

    def query(self, text: str, *reads: _Rel) -> str:
        """``text`` (a SELECT over ``reads``) with the definitions it needs."""
        need: set[str] = set()
        stack = [r.name for r in reads if r.name in self.ctes]
        while stack:
            n = stack.pop()
            if n not in need:
                need.add(n)
                stack.extend(self.ctes[n][1])
        defs = [f"{n} AS ({sql})" for n, (sql, _) in self.ctes.items() if n in need]
        return f"WITH {', '.join(defs)} {text}" if defs else text

    def analysed(self, rel: _Rel) -> list[Any]:
        """Spark's own fields of ``rel`` (one analysis), for what pinqpy does not model."""
        df = self.call.sql(self.query(f"SELECT * FROM {rel.name}", rel))
        return list(self.call.run(lambda: df.schema).fields)

    def typed(self, rel: _Rel) -> _Rel:
        """``rel`` with the Spark type of every column known."""
        if all(c.kind != "other" or c.dtype is not None for c in rel.cols):
            return rel
        hit = self._typed.get(rel.name)
        if hit is None:
            fields = self.analysed(rel)
            cols = tuple(_Col(f.name, _kind_of(f.dataType), f.dataType) for f in fields)
            hit = self._typed[rel.name] = _Rel(rel.name, cols, rel.sure)
        return hit

    def visit(self, node: PlanNode) -> _Rel:
        hit = self._memo.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        rel = node.accept(self)
        self._memo[id(node)] = (node, rel)
        return rel

    def translator(self, rel: _Rel) -> tuple[_ExprSql, _Lets]:
        lets = _Lets()
        return _ExprSql(rel.kinds, lets), lets

    def expr(self, e: Expr | PyFunc, t: _ExprSql, what: str) -> _S:
        _no_callable(e, what)
        assert isinstance(e, Expr)
        return t.tr(e)

    def values(
        self, rel: _Rel, values: Sequence[Expr | PyFunc], numeric: bool
    ) -> tuple[str, list[str], list[str], bool]:
        """Aggregated values over ``rel``: (FROM item with their lets, their SQL, their kinds,
        whether only Spark can vouch for them). Translated once per query."""
        key = (rel.name, tuple(id(v) for v in values), numeric)
        hit = self._values.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], values, strict=True)):
            return hit[1]
        t, lets = self.translator(rel)
        vs = [self.expr(v, t, "an aggregation") for v in values]
        sqls = [_numeric_value(v) if numeric else _typed(v) for v in vs]
        kinds = [v.kind for v in vs]
        out = (lets.source(rel.name, sqls), sqls, kinds, t.unchecked or "other" in kinds)
        self._values[key] = (tuple(values), out)
        return out

    def source(self, data: Any) -> _Rel:
        """A source in the engine's value model (bigint, double without NaN, ...)."""
        from pinqpy.engines.registry import SparkFile

        if isinstance(data, SparkFile):
            # A file read by name: always one CTE over it, whose name is an identifier.
            fields = data.schema.fields
            cols = [
                _Col(f.name, _kind_of(_normalized_type(f.dataType)), _normalized_type(f.dataType))
                for f in fields
            ]
            # A shorter query is parsed and analysed faster: no list when no column changes
            # (Spark has no SELECT * REPLACE, so one change lists them all).
            items = [
                f"{_normalized(_ident(f.name), f.dataType)} AS {_ident(f.name)}" for f in fields
            ]
            plain = all(_normalized("", f.dataType) == "" for f in fields)
            listed = "*" if plain or not items else ", ".join(items)
            return self.add(f"SELECT {listed} FROM {data.source}", cols, [])
        df, clean = self.ex._frame(data)
        view = self.ex._view(df, self.call)
        fields = self.call.run(lambda: df.schema).fields
        items = [f"{_normalized(_ident(f.name), f.dataType)} AS {_ident(f.name)}" for f in fields]
        if clean or all(_normalized("", f.dataType) == "" for f in fields):
            # Already in the value model (bigint, double without NaN, ...): read the view.
            return _Rel(view, tuple(_Col(f.name, _kind_of(f.dataType), f.dataType) for f in fields))
        cols = []
        for f in fields:
            dt = _normalized_type(f.dataType)
            cols.append(_Col(f.name, _kind_of(dt), dt))
        rel = _Rel(view, ())
        return self.add(f"SELECT {', '.join(items) or '*'} FROM {view}", cols, [rel])

    # -- nodes ----------------------------------------------------------------------------
    def visit_source(self, node: Source) -> _Rel:
        return self.source(self.ex.catalog.data(node.table))

    def visit_part_source(self, node: PartSource) -> _Rel:
        parent = self.visit(node.partition.parent)
        kinds = parent.kinds
        key = node.key if len(node.partition.key_columns) > 1 else (node.key,)
        tz = _session_tz(self.ex.spark)
        conds = [
            _key_match(_ident(c), kinds[c], k, tz)
            for c, k in zip(node.partition.key_columns, key, strict=True)  # type: ignore[arg-type]
        ]
        sql = f"SELECT {parent.col_list()} FROM {parent.name} WHERE {' AND '.join(conds)}"
        return self.add(sql, parent.cols, [parent])

    def visit_where(self, node: Where) -> _Rel:
        child = self.visit(node.child)
        _no_callable(node.predicate, "where")
        t, lets = self.translator(child)
        pred = t.boolean(t.tr(node.predicate)).sql  # type: ignore[arg-type]
        src = lets.source(child.name, [pred])
        sql = f"SELECT {child.col_list()} FROM {src} WHERE {pred}"
        return self.add(sql, child.cols, [child], not t.unchecked)

    def visit_select(self, node: Select) -> _Rel:
        child = self.visit(node.child)
        t, lets = self.translator(child)
        outs = [(n, self.expr(e, t, "select")) for n, e in node.outputs]
        items = {n: f"{_typed(v)} AS {_ident(n)}" for n, v in outs}
        made = {n: _col_of(v, n, child) for n, v in outs}
        if node.keep_all:
            # pandas assign replaces an existing column in place, appends new ones.
            names = child.names() + [n for n in items if n not in child.kinds]
            sqls = [items.get(n, _ident(n)) for n in names]
            old = {c.name: c for c in child.cols}
            cols = [made[n] if n in made else old[n] for n in names]
        else:
            sqls, cols = list(items.values()), list(made.values())
        src = lets.source(child.name, sqls)
        if not sqls:
            sqls, cols = ["1 AS __pinq_empty"], [_Col("__pinq_empty", "int")]
        sql = f"SELECT {', '.join(sqls)} FROM {src}"
        return self.add(sql, cols, [child], not t.unchecked)

    def visit_distinct(self, node: Distinct) -> _Rel:
        child = self.visit(node.child)
        kinds = {c.name: c for c in child.cols}
        cols = [kinds[c] for c in node.columns]
        sql = f"SELECT DISTINCT {', '.join(_ident(c) for c in node.columns)} FROM {child.name}"
        return self.add(sql, cols, [child])

    def visit_explode(self, node: Explode) -> _Rel:
        child = self.visit(node.child)
        col = next(c for c in child.cols if c.name == node.column)
        if col.kind == "other" and col.dtype is None:
            child = self.typed(child)
            col = next(c for c in child.cols if c.name == node.column)
        q = _ident(node.column)
        if col.kind != "other" or type(col.dtype).__name__ != "ArrayType":
            # A scalar explodes to itself; NULL carries nothing.
            sql = f"SELECT {child.col_list()} FROM {child.name} WHERE {q} IS NOT NULL"
            return self.add(sql, child.cols, [child])
        # Items in the engine's value model (so NaN is NULL), NULL items dropped, then cut.
        elem = col.dtype.elementType
        item = _normalized("__pinq_x", elem)
        items = (
            f"slice(filter(transform({q}, __pinq_x -> {item}), __pinq_x -> __pinq_x IS NOT NULL)"
            f", 1, {max(int(node.max_items), 0)})"
        )
        sqls = [
            f"explode({items}) AS {q}" if c.name == node.column else _ident(c.name)
            for c in child.cols
        ]
        out_type = _normalized_type(elem)
        cols = [
            _Col(c.name, _kind_of(out_type), out_type) if c.name == node.column else c
            for c in child.cols
        ]
        return self.add(f"SELECT {', '.join(sqls)} FROM {child.name}", cols, [child])

    def visit_group_by(self, node: GroupBy) -> _Rel:
        child = self.visit(node.child)
        t, lets = self.translator(child)
        by_name = {c.name: c for c in child.cols}
        keys = [_ident(k) for k in node.keys]
        items = list(keys)
        cols = [by_name[k] for k in node.keys]
        for name, call in node.aggs:
            items.append(f"{_aggregate(t, call)} AS {_ident(name)}")
            counts = call.star or call.name.upper() == "COUNT"
            cols.append(_Col(name, "int" if counts else "float"))
        src = lets.source(child.name, items)
        # Grouped by exactly the unit, a row whose unit is NULL belongs to no known person.
        keep = ""
        if node.by_unit:
            keep = " WHERE " + " AND ".join(f"{k} IS NOT NULL" for k in keys)
        sql = f"SELECT {', '.join(items)} FROM {src}{keep} GROUP BY {', '.join(keys)}"
        return self.add(sql, cols, [child], not t.unchecked)

    def truncate(
        self, child: _Rel, columns: Sequence[str], limit: int, drop_null: bool = False
    ) -> _Rel:
        """The ``limit`` rows of lowest salted-hash priority per key of ``columns`` (with
        ``drop_null``, rows whose key is NULL are dropped first).

        Spark's ``xxhash64`` hashes each value with the hash so far as its seed, so the salt
        hashed first keys every later value nonlinearly, numbers included: which rows are kept
        changes with every salt."""
        salt = _str_lit(_noise.current_source().bytes(8).hex())
        child = self.typed(child)
        # A row's priority depends only on its own values and the salt (maps cannot be hashed).
        hashed = [_ident(c.name) for c in child.cols if type(c.dtype).__name__ != "MapType"]
        prio = f"xxhash64({', '.join([salt, *hashed])})"
        part = ", ".join(_ident(c) for c in columns)
        keep = ""
        if drop_null:
            keep = " WHERE " + " AND ".join(f"{_ident(c)} IS NOT NULL" for c in columns)
        inner = (
            f"SELECT *, row_number() OVER (PARTITION BY {part} ORDER BY {prio}) AS __pinq_rank "
            f"FROM {child.name}{keep}"
        )
        sql = f"SELECT {child.col_list()} FROM ({inner}) AS t WHERE __pinq_rank <= {int(limit)}"
        return self.add(sql, child.cols, [child])

    def merge(
        self,
        left: _Rel,
        right: _Rel,
        on: Sequence[str],
        how: str,
        suffix: str,
        nulls: Sequence[bool] | None = None,
    ) -> _Rel:
        """Join on ``on``, NULL matching NULL as in pandas. ``nulls`` says which key columns of
        ``right`` may hold NULL (None: any): a plain equality joins the others, which Spark
        does with a much faster hash join than a NULL-safe one."""
        lnames = set(left.names())
        items = [f"l.{_ident(c)}" for c in left.names()]
        cols = list(left.cols)
        for c in right.cols:
            if c.name in on:
                continue
            out = c.name + suffix if c.name in lnames else c.name
            items.append(f"r.{_ident(c.name)} AS {_ident(out)}")
            cols.append(_Col(out, c.kind, c.dtype))
        safe = nulls if nulls is not None else [True] * len(on)
        cond = " AND ".join(
            f"l.{_ident(c)} {'<=>' if n else '='} r.{_ident(c)}"
            for c, n in zip(on, safe, strict=True)
        )
        join = "JOIN" if how == "inner" else "LEFT JOIN"
        sql = f"SELECT {', '.join(items)} FROM {left.name} AS l {join} {right.name} AS r ON {cond}"
        return self.add(sql, cols, [left, right])

    def visit_join(self, node: Join) -> _Rel:
        left = self.visit(node.left)
        right = self.visit(node.right)
        if node.bounds is not None:
            left = self.truncate(left, node.on, node.bounds[0])
            right = self.truncate(right, node.on, node.bounds[1])
        return self.merge(left, right, node.on, "inner", "_right")

    def visit_public_join(self, node: PublicJoin) -> _Rel:
        child = self.visit(node.child)
        public = self.ex.catalog.public_data(node.public)
        pub = self.source(public)
        nulls = _public_nulls(public, node.on)
        return self.merge(child, pub, node.on, node.how, "_public", nulls)

    def visit_set_op(self, node: SetOp) -> _Rel:
        left = self.visit(node.left)
        right = self.visit(node.right)
        # The frames have the same columns in the same order: line them up by name anyway.
        cols = left.col_list()
        op = {
            "concat": "UNION ALL",
            "union": "UNION",
            "intersect": "INTERSECT",
            "difference": "EXCEPT",
        }[node.kind]
        sql = f"SELECT {cols} FROM {left.name} {op} SELECT {cols} FROM {right.name}"
        rkinds = right.kinds
        out: list[_Col] = []
        for c in left.cols:
            k = rkinds.get(c.name)
            if k == c.kind and c.kind != "other":
                out.append(c)
            elif {k, c.kind} == {"int", "float"}:
                out.append(_Col(c.name, "float"))
            else:  # Spark finds the common type
                rel = self.add(sql, left.cols, [left, right], sure=False)
                fields = self.analysed(rel)
                cols_ = tuple(_Col(f.name, _kind_of(f.dataType), f.dataType) for f in fields)
                return _Rel(rel.name, cols_, False)
        return self.add(sql, out, [left, right])

    def visit_bound_contributions(self, node: BoundContributions) -> _Rel:
        # A row whose unit is NULL belongs to no known person: it is dropped.
        return self.truncate(self.visit(node.child), (node.unit,), node.max_rows, drop_null=True)


# -- the executor ------------------------------------------------------------------------------
@dataclass
class _Base:
    """Rows of a plan in listed groups, over ``rel``: a query with the columns ``group`` that
    tell a row's group, then one ``__pinq_v<i>`` per value, of kinds ``kinds``.

    ``group`` is ``__pinq_gi``, the group's position, or the key columns themselves, whose
    values ``positions`` maps to positions; no columns for a single group (the query then
    has a column ``__pinq_gi`` of 0s).
    """

    sql: str
    kinds: list[str]
    rel: _Rel
    group: list[str] = field(default_factory=list)
    positions: dict[tuple[Any, ...], list[int]] | None = None

    @property
    def carry(self) -> list[str]:
        """The columns a query over this one keeps to be grouped the same way."""
        return self.group or ["__pinq_gi"]


def _forget_view(views: dict[int, tuple[Any, str]], dead: list[str], key: int, name: str) -> None:
    hit = views.get(key)
    if hit is not None and hit[1] == _ident(name):
        del views[key]
    dead.append(name)


class SparkExecutor(Executor):
    """Plans run inside Spark; only aggregates come back.

    Sources are Spark DataFrames of ``spark`` or pandas DataFrames (converted once per
    DataFrame object). ``spark`` defaults to :func:`local_session`.
    """

    def __init__(self, spark: SparkSession | None = None) -> None:
        _pyspark_sql()
        self.spark = spark if spark is not None else local_session()
        self._prefix = f"__pinq_{uuid.uuid4().hex[:12]}_"
        self._names = itertools.count()
        self._converted: dict[int, tuple[weakref.ref[Any], DataFrame]] = {}
        self._views: dict[int, tuple[weakref.ref[Any], str]] = {}
        self._dead_views: list[str] = []

    # -- engine plumbing ------------------------------------------------------------------
    def _frame(self, data: Any) -> tuple[DataFrame, bool]:
        """A source's Spark DataFrame, and whether it is already in the engine's value model
        (a pandas DataFrame is converted once, by :func:`to_spark`, which makes it so)."""
        if is_spark_dataframe(data):
            return data, False
        if not isinstance(data, pd.DataFrame):
            raise PinqError(
                f"the Spark engine reads Spark and pandas DataFrames, not {type(data).__name__}"
            )
        key = id(data)
        hit = self._converted.get(key)
        if hit is not None and hit[0]() is data:
            return hit[1], True
        df = to_spark(self.spark, data)
        self._converted[key] = (weakref.ref(data), df)
        weakref.finalize(data, self._converted.pop, key, None)
        return df, True

    def _view(self, df: DataFrame, call: _Call) -> str:
        """A temporary view of a source, made once and kept while the DataFrame lives (making
        one costs Spark an analysis)."""
        key = id(df)
        hit = self._views.get(key)
        if hit is not None and hit[0]() is df:
            return hit[1]
        name = f"{self._prefix}{next(self._names)}"
        call.run(lambda: df.createOrReplaceTempView(name))
        self._views[key] = (weakref.ref(df), _ident(name))
        # Dropped by the next call: a finalizer may run in the middle of a py4j exchange. It
        # holds the shared containers, not this executor (a bound one holds its catalog).
        fin = weakref.finalize(df, _forget_view, self._views, self._dead_views, key, name)
        fin.atexit = False
        return _ident(name)

    def _drop_dead_views(self) -> None:
        while self._dead_views:
            name = self._dead_views.pop()
            with contextlib.suppress(Exception):
                _guard("dropping a view", lambda n=name: self.spark.catalog.dropTempView(n))

    @contextlib.contextmanager
    def _call(self, what: str) -> Iterator[tuple[_Call, _PlanSql]]:
        """One executor call and the query's translator (shared within a batch)."""
        self._drop_dead_views()
        call = _Call(self, what)
        memo = batch_memo()
        p: _PlanSql | None = None
        if memo is not None:
            hit = memo.get(("spark", id(self)))
            if hit is not None and hit[0] is self:
                p = hit[1]
        if p is None:
            p = _PlanSql(self)
            if memo is not None:
                memo[("spark", id(self))] = (self, p)
        p.call = call
        try:
            yield call, p
        finally:
            call.close()

    def _base(
        self,
        call: _Call,
        p: _PlanSql,
        plan: PlanNode,
        grouping: Grouping | None,
        values: Sequence[Expr | PyFunc],
        numeric: bool = True,
    ) -> _Base | None:
        """The plan's rows in listed groups with their values (DOUBLEs when ``numeric``);
        None when no listed key can match."""
        rel = p.visit(plan)
        src, sqls, kinds = rel.name, [], []
        if values:
            src, sqls, kinds, _ = p.values(rel, values, numeric)
        vs = [f"{v} AS __pinq_v{i}" for i, v in enumerate(sqls)]
        vcols = [f"__pinq_v{i}" for i in range(len(vs))]
        if grouping is None:
            return _Base(f"SELECT {', '.join(['0L AS __pinq_gi', *vs])} FROM {src}", kinds, rel)
        cols = list(grouping.columns)
        missing = [c for c in cols if c not in rel.kinds]
        if missing:
            raise PinqSyntaxError(f"unknown column '{missing[0]}'")
        col_kinds = [rel.kinds[c] for c in cols]
        rows = [(i, list(v)) for i, v in column_key_rows(col_kinds, grouping.keys, len(cols) == 1)]
        if not rows:
            return None
        tz = _session_tz(self.spark)
        nulls = [any(vals[j] is None for _, vals in rows) for j in range(len(cols))]
        columns = [[vals[j] for _, vals in rows] for j in range(len(cols))]
        if (
            len(rows) <= _INLINE_ROWS
            and all(k in ("int", "float", "str", "bool") for k in col_kinds)
            and (len(cols) == 1 or not any(nulls))
        ):
            # Few keys of plain types: keep the rows whose key is listed (a hash lookup in
            # Spark, and no join) and group by the key itself; each key's position is found
            # here, by the value Spark compared.
            types = [_key_type(col, kind) for col, kind in zip(columns, col_kinds, strict=True)]
            keys = [f"__pinq_k{j}" for j in range(len(cols))]
            items = [
                f"CAST({_ident(c)} AS {t}) AS {k}"
                for c, t, k in zip(cols, types, keys, strict=True)
            ]
            lits = [
                _key_column(col, kind, tz) for col, kind in zip(columns, col_kinds, strict=True)
            ]
            listed = [i for i, (_, vals) in enumerate(rows) if not any(v is None for v in vals)]
            conds = []
            if listed:
                lhs = keys[0] if len(keys) == 1 else f"({', '.join(keys)})"
                tuples = [
                    lits[0][i] if len(keys) == 1 else f"({', '.join(col[i] for col in lits)})"
                    for i in listed
                ]
                conds.append(f"{lhs} IN ({', '.join(tuples)})")
            if nulls[0] and len(keys) == 1:
                conds.append(f"{keys[0]} IS NULL")
            positions: dict[tuple[Any, ...], list[int]] = {}
            for pos, vals in rows:
                key = tuple(_key_value(v, t) for v, t in zip(vals, types, strict=True))
                positions.setdefault(key, []).append(pos)
            inner = f"SELECT {', '.join(items + vs)} FROM {src}"
            return _Base(
                f"SELECT {', '.join(keys + vcols)} FROM ({inner}) AS r WHERE {' OR '.join(conds)}",
                kinds,
                rel,
                keys,
                positions,
            )
        if len(rows) <= _INLINE_ROWS:
            lits = [[_int_lit(i) for i, _ in rows]]
            lits += [
                _key_column(col, kind, tz) for col, kind in zip(columns, col_kinds, strict=True)
            ]
            table = _values_table([_GI, *cols], lits)
        else:
            arrays = [_arrow_values(pd.Series([i for i, _ in rows], dtype="int64"), "int", tz)]
            for col, kind in zip(columns, col_kinds, strict=True):
                arrays.append(_key_arrow(col, kind, tz))
            table = call.table([_GI, *cols], arrays)
        idents = [_ident(c) for c in cols]
        inner = f"SELECT {', '.join(idents + vs)} FROM {src}"
        cond = " AND ".join(
            f"r.{c} {'<=>' if n else '='} g.{c}" for c, n in zip(idents, nulls, strict=True)
        )
        items = ", ".join([f"g.{_GI} AS __pinq_gi", *(f"r.{v}" for v in vcols)])
        return _Base(
            f"SELECT /*+ BROADCAST(g) */ {items} FROM ({inner}) AS r JOIN {table} AS g ON {cond}",
            kinds,
            rel,
            ["__pinq_gi"],
        )

    def _per_group(
        self, call: _Call, p: _PlanSql, base: _Base, rows: str, aggs: str, by: str = ""
    ) -> list[tuple[Any, ...]]:
        """``aggs`` per group (and per value of the columns ``by``) over ``rows``, a query over
        ``base``'s columns: one Spark action. Each result row starts with the group's
        position; a single group is not grouped at all (its position is 0)."""
        if not base.group:
            if by:
                text = f"SELECT 0L, {by}, {aggs} FROM ({rows}) AS x GROUP BY {by}"
            else:
                text = f"SELECT 0L, {aggs} FROM ({rows}) AS x"
            return call.collect(p.query(text, base.rel))
        keys = ", ".join([*base.group, by] if by else base.group)
        text = f"SELECT {keys}, {aggs} FROM ({rows}) AS x GROUP BY {keys}"
        found = call.collect(p.query(text, base.rel))
        if base.positions is None:
            return found
        n = len(base.group)
        return [(gi, *r[n:]) for r in found for gi in base.positions.get(tuple(r[:n]), ())]

    def rows(self, plan: PlanNode) -> pd.DataFrame:
        """The plan's rows. For tests of stability only; never reachable from the public API."""
        with self._call("reading rows") as (call, p):
            rel = p.visit(plan)
            kinds = rel.kinds
            columns = list(kinds)
            items = [
                f"CAST({_ident(c)} AS TIMESTAMP_NTZ) AS {_ident(c)}"
                if kinds[c] == "datetime"
                else _ident(c)
                for c in columns
            ]
            rows = call.collect(p.query(f"SELECT {', '.join(items)} FROM {rel.name}", rel))
        return pd.DataFrame(rows, columns=columns)

    # -- the Executor interface -----------------------------------------------------------
    def validate(
        self, plan: PlanNode, value: Expr | PyFunc | None = None, numeric: bool = False
    ) -> None:
        # Callables, unknown columns and types that cannot be aggregated are found by the
        # translation itself, before anything is charged. Where the SQL's validity depends on
        # types pinqpy does not model, Spark analyses the query (it reads no rows).
        with self._call("checking a query") as (call, p):
            rel = p.visit(plan)
            src, vsql, sure = rel.name, _NULL["float"], rel.sure
            if value is not None:
                src, sqls, kinds, unsure = p.values(rel, [value], numeric)
                vsql, kind, sure = sqls[0], kinds[0], sure and not unsure
                if numeric and kind == "other":
                    what = (
                        f"column {value.name!r}" if isinstance(value, Column) else "this expression"
                    )
                    raise PinqError(
                        f"the Spark engine cannot aggregate {what} as a number; select or CAST "
                        "a numeric value instead"
                    )
            if not sure:
                call.sql(p.query(f"SELECT {vsql} AS __pinq_v FROM {src}", rel))

    def count(self, plan: PlanNode, grouping: Grouping | None) -> np.ndarray:
        hit = prefetched("count", plan, grouping)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        counts: np.ndarray = self._aggregates("counting rows", plan, grouping, [("count",)])[0]
        return counts

    def clamped_sum(
        self, plan: PlanNode, grouping: Grouping | None, value: Expr | PyFunc, lo: float, hi: float
    ) -> tuple[np.ndarray, np.ndarray]:
        hit = prefetched("sum", plan, grouping, value, lo, hi)
        if hit is not None:
            return hit  # type: ignore[no-any-return]
        request = ("clamped_sum", value, lo, hi)
        out: tuple[np.ndarray, np.ndarray] = self._aggregates(
            "summing values", plan, grouping, [request]
        )[0]
        return out

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
        request = ("lattice2" if squares else "lattice", value, lo, hi)
        out: LatticeSums = self._aggregates("summing values", plan, grouping, [request])[0]
        return out

    def read_together(
        self, plan: PlanNode, grouping: Grouping | None, reads: Sequence[Read]
    ) -> list[Any]:
        """Several counts and clamped sums or moments of one plan in the same groups, by one
        Spark job (a SQL query's ``COUNT(*)`` and ``AVG(x)`` would otherwise scan and join
        twice)."""
        requests = [
            (_REQUESTS[r.kind],) if r.kind == "count" else (_REQUESTS[r.kind], r.value, r.lo, r.hi)
            for r in reads
        ]
        return self._aggregates("computing aggregates", plan, grouping, requests)

    def _aggregates(
        self,
        what: str,
        plan: PlanNode,
        grouping: Grouping | None,
        requests: Sequence[tuple[Any, ...]],
    ) -> list[Any]:
        if not requests:
            return []
        k = 1 if grouping is None else len(grouping.keys)
        values: list[Expr | PyFunc] = []
        for r in requests:
            if r[0] not in ("count", "clamped_sum", "lattice", "lattice2"):
                raise PinqError(f"unknown aggregate {r[0]!r}")
            if r[0] != "count" and not any(r[1] is v for v in values):
                values.append(r[1])
        # Per request: the SQL of its clamped values (None for a count), then its aggregates.
        clamps: list[str] = []
        aggs: list[str] = []
        for r in requests:
            if r[0] == "count":
                aggs.append("COUNT(*)")
                continue
            i = next(j for j, v in enumerate(values) if v is r[1])
            lo_s, hi_s = _float_lit(float(r[2])), _float_lit(float(r[3]))
            # NULL values are not counted (and least/greatest would turn them into a bound).
            c = f"__pinq_c{len(clamps)}"
            clamps.append(
                f"CASE WHEN __pinq_v{i} IS NOT NULL THEN "
                f"least(greatest(__pinq_v{i}, {lo_s}), {hi_s}) END AS {c}"
            )
            if r[0] == "clamped_sum":
                # Exactly on the SUM's fixed-point grid (SumGrid): truncated toward zero to
                # multiples of q (CAST to BIGINT truncates; never larger in magnitude, so the
                # sensitivity stays max(|lo|, |hi|)), summed as DECIMAL(38, 0), scaled by q as
                # a double. A float sum of 10**8 doubles can err by the sensitivity itself.
                grid = SumGrid.of(float(r[2]), float(r[3]))
                units = f"CAST(CAST({grid.sql(c, _float_lit)} AS BIGINT) AS DECIMAL(38, 0))"
                total = f"CAST(sum({units}) AS DOUBLE) * {_float_lit(grid.step_float)}"
                top = _float_lit(sys.float_info.max)
                total = f"least(greatest({total}, -{top}), {top})"
                aggs.extend([total, "0.0D", f"COUNT({c})"])
                continue
            # Exact lattice-index sums (pinqpy.core.lattice): d in [0, 2**21] computed in doubles
            # as numpy does (bround is half-to-even), summed as BIGINT (exact below 2**42
            # rows) and d² as DECIMAL(38, 0) (exact below 10**38 / 2**42 rows); never a float.
            lat = Lattice.of(float(r[2]), float(r[3]))
            d = f"CAST({lat.sql(c, _float_lit, 'bround')} AS BIGINT)"
            squares = f"sum(CAST({d} * {d} AS DECIMAL(38, 0)))" if r[0] == "lattice2" else "0"
            aggs.extend([f"sum({d})", squares, f"COUNT({c})"])
        counts = [np.zeros(k, dtype=np.int64) for _ in requests]
        sums = [np.zeros(k) for _ in requests]
        isums: list[list[int]] = [[0] * k for _ in requests]
        isumsq: list[list[int]] = [[0] * k for _ in requests]
        with self._call(what) as (call, p):
            base = self._base(call, p, plan, grouping, values)
            if base is not None:
                rows_sql = f"SELECT {', '.join([*base.carry, *clamps])} FROM ({base.sql}) AS b"
                rows = self._per_group(call, p, base, rows_sql, ", ".join(aggs))
            else:
                rows = []
        for row in rows:
            gi, at = int(row[0]), 1
            for j, r in enumerate(requests):
                if r[0] == "count":
                    counts[j][gi] = int(row[at])
                    at += 1
                    continue
                s_, s2, n = row[at : at + 3]
                at += 3
                if not n:  # a single group with no values sums to NULL
                    continue
                counts[j][gi] = int(n)
                if r[0] == "clamped_sum":
                    sums[j][gi] = float(s_)
                else:  # Python ints from BIGINT and Decimal: exact
                    isums[j][gi], isumsq[j][gi] = int(s_), int(s2)
        out: list[Any] = []
        for j, r in enumerate(requests):
            if r[0] == "count":
                out.append(counts[j])
            elif r[0] == "clamped_sum":
                out.append((sums[j], counts[j]))
            else:
                out.append((isums[j], isumsq[j], counts[j]))
        return out

    def buckets(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        # +0.0 makes -0.0 equal to 0.0 for the searches below, as numpy's comparisons do.
        cand = np.asarray(candidates, dtype="float64") + 0.0
        m = len(cand)
        k = 1 if grouping is None else len(grouping.keys)
        flat = np.zeros((k, 2 * m - 1), dtype=np.int64)
        with self._call("counting values between quantile candidates") as (call, p):
            base = self._base(call, p, plan, grouping, [value])
            if base is None:
                return flat[:, 0::2], flat[:, 1::2]
            group = ", ".join(base.carry)
            values = f"SELECT {group}, __pinq_v0 + 0.0D AS __pinq_v FROM ({base.sql}) AS b "
            values += "WHERE __pinq_v0 IS NOT NULL"
            grid = uniform_grid(cand)
            if grid is not None:
                # pinqpy's default grids: each value's bucket by arithmetic (see _buckets).
                bucketed = bucket_query(values, group, "__pinq_v", "bk", grid, _float_lit)
            else:
                bucketed = self._searched(call, values, group, cand)
            rows = self._per_group(call, p, base, bucketed, "COUNT(*)", by="bk")
        for gi, b, n in rows:
            flat[int(gi), int(b)] += int(n)
        return flat[:, 0::2].astype(np.int64), flat[:, 1::2].astype(np.int64)

    def _searched(self, call: _Call, values: str, group: str, cand: np.ndarray) -> str:
        """Buckets of ``values`` by binary search over any sorted candidates: columns
        ``group`` and ``bk``."""
        m = len(cand)
        steps = max(m.bit_length(), 1)
        lo_s, hi_s = _float_lit(float(cand[0])), _float_lit(float(cand[-1]))
        if m <= _INLINE_ROWS:
            grid = f"(SELECT array({', '.join(_float_lit(float(c)) for c in cand)}) AS __pinq_a)"
        else:
            T = _types()
            import pyarrow as pa

            grid = call.table(
                ["__pinq_a"],
                [(pa.array([cand.tolist()], pa.list_(pa.float64())), T.ArrayType(T.DoubleType()))],
            )
        # n = #{candidates < c} by binary search over the sorted candidates (numpy's
        # searchsorted(side="left")); c == a[n] goes to eq[n] (bucket 2n), otherwise it
        # lies between a[n-1] and a[n] (bucket 2n - 1).
        step = f"shiftleft(1, {steps - 1} - i)"
        search = (
            f"aggregate(sequence(0, {steps - 1}), 0, (acc, i) -> "
            f"IF(try_element_at(a, acc + {step}) < c, acc + {step}, acc))"
        )
        clamped = (
            f"SELECT {group}, least(greatest(__pinq_v, {lo_s}), {hi_s}) AS c FROM ({values}) AS v"
        )
        searched = (
            f"SELECT /*+ BROADCAST(cb) */ {group}, c, cb.__pinq_a AS a, {search} AS n "
            f"FROM ({clamped}) AS x CROSS JOIN {grid} AS cb"
        )
        return (
            f"SELECT {group}, IF(try_element_at(a, n + 1) = c, 2 * n, 2 * n - 1) AS bk "
            f"FROM ({searched}) AS s"
        )

    def key_counts(
        self, plan: PlanNode, columns: tuple[str, ...]
    ) -> tuple[list[Hashable], np.ndarray]:
        with self._call("counting keys") as (call, p):
            rel = p.visit(plan)
            kinds = rel.kinds
            # Timestamps come back as wall times (collect would use Python's local zone).
            items = [
                f"CAST({_ident(c)} AS TIMESTAMP_NTZ)" if kinds.get(c) == "datetime" else _ident(c)
                for c in columns
            ]
            group = ", ".join(_ident(c) for c in columns)
            text = f"SELECT {', '.join(items)}, COUNT(*) FROM {rel.name} GROUP BY {group}"
            rows = call.collect(p.query(text, rel))

        def restore(v: Any, c: str) -> Any:
            if v is not None and kinds.get(c) == "datetime":
                return pd.Timestamp(v)
            return v

        keyed = [
            (tuple(restore(v, c) for v, c in zip(r[:-1], columns, strict=True)), r[-1])
            for r in rows
        ]
        keys: list[Hashable] = [kv[0][0] if len(columns) == 1 else kv[0] for kv in keyed]
        # Released as canonical spellings, in an order of the keys alone (NULL last).
        counts = np.array([int(kv[1]) for kv in keyed], dtype=np.int64)
        return canonical_key_counts(keys, counts, [kinds[c] for c in columns])

    def candidate_counts(
        self,
        plan: PlanNode,
        grouping: Grouping | None,
        value: Expr | PyFunc,
        candidates: tuple[Hashable, ...],
    ) -> np.ndarray:
        n = len(candidates)
        k = 1 if grouping is None else len(grouping.keys)
        out = np.zeros((k, n), dtype=np.int64)
        with self._call("counting candidates") as (call, p):
            base = self._base(call, p, plan, grouping, [value], numeric=False)
            if base is None or base.kinds[0] in ("null", "other"):
                return out
            kind = base.kinds[0]
            # First position of each candidate value, as Index.get_indexer finds it.
            seen: set[Any] = set()
            uniq: list[tuple[int, Any]] = []
            for j, c in enumerate(candidates):
                ck = _value_kind(c)
                if ck is not None and not _compatible(kind, ck):
                    continue
                # Equal numbers are one candidate (1 and 1.0), as in a pandas Index.
                family = "num" if ck in ("int", "float") else ck
                marker = (family, c) if ck is not None else (None, None)
                try:
                    if marker in seen:
                        continue
                    seen.add(marker)
                except TypeError:
                    pass
                uniq.append((j, None if ck is None else c))
            if not uniq:
                return out
            tz = _session_tz(self.spark)
            if len(uniq) <= _INLINE_ROWS:
                table = _values_table(
                    [_GI, "__pinq_c"],
                    [
                        [_int_lit(j) for j, _ in uniq],
                        _key_column([c for _, c in uniq], kind, tz),
                    ],
                )
            else:
                table = call.table(
                    [_GI, "__pinq_c"],
                    [
                        _arrow_values(pd.Series([j for j, _ in uniq], dtype="int64"), "int", tz),
                        _key_arrow([c for _, c in uniq], kind, tz),
                    ],
                )
            eq = "<=>" if any(c is None for _, c in uniq) else "="
            carry = ", ".join(f"b.{c}" for c in base.carry)
            joined = (
                f"SELECT /*+ BROADCAST(cnd) */ {carry}, cnd.{_GI} AS __pinq_j "
                f"FROM ({base.sql}) AS b JOIN {table} AS cnd ON b.__pinq_v0 {eq} cnd.__pinq_c"
            )
            rows = self._per_group(call, p, base, joined, "COUNT(*)", by="__pinq_j")
        for gi, j, c in rows:
            out[int(gi), int(j)] = int(c)
        return out
