"""Spark types as pinqpy reads them, and pandas DataFrames converted to Spark ones with
their values kept exactly (the engine's value model: bigint, double without NaN, timestamp)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pinqpy.engines.spark.session import guard, spark_types
from pinqpy.engines.sqlgen.dialect import I64_MAX
from pinqpy.errors import PinqError
from pinqpy.expr.types import ColumnType

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "arrow_values",
    "kind_of",
    "micros",
    "naive",
    "normalized",
    "normalized_type",
    "session_tz",
    "spark_fields_schema",
    "spark_schema",
    "to_spark",
]


# -- types -------------------------------------------------------------------------------------
def kind_of(data_type: Any) -> str:
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
        kind = kind_of(f.dataType)
        out[f.name] = "any" if kind in ("other", "null") else kind  # type: ignore[assignment]
    return out


# -- pandas -> Spark ---------------------------------------------------------------------------
def session_tz(spark: SparkSession) -> str:
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


def arrow_values(values: pd.Series, kind: str, tz: str) -> tuple[Any, Any]:
    """(pyarrow array, Spark type) of a column read as ``kind``; NULL/NaN become nulls."""
    import pyarrow as pa

    T = spark_types()
    s = values.reset_index(drop=True)
    if kind == "int":
        if s.dtype == object:
            try:
                arr = pd.array(s.to_numpy(), dtype="Int64")
            except (OverflowError, ValueError, TypeError):
                return arrow_values(s, "float", tz)
            s = pd.Series(arr)
        mask = s.isna().to_numpy()
        if pd.api.types.is_unsigned_integer_dtype(s.dtype):
            raw = s.to_numpy(dtype=np.uint64, na_value=0)
            mask = mask | (raw > np.uint64(I64_MAX))  # beyond int64: NULL, as pandas_eval
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

    T = spark_types()
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
    items, elem_type = arrow_values(flat, kind, tz)
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
        return arrow_values(s, "bool", tz)
    if pd.api.types.is_integer_dtype(dtype):
        return arrow_values(s, "int", tz)
    if pd.api.types.is_float_dtype(dtype):
        return arrow_values(s, "float", tz)
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return arrow_values(s, "datetime", tz)
    if pd.api.types.is_timedelta64_dtype(dtype):
        return arrow_values(s, "timedelta", tz)
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        if any(_is_listlike(v) for v in s.to_numpy(dtype=object)):
            return _arrow_lists(s, tz)
        return arrow_values(s, _object_kind(s), tz)
    return arrow_values(s, "text", tz)


def to_spark(spark: SparkSession, df: pd.DataFrame) -> DataFrame:
    """A pandas DataFrame as a Spark DataFrame with an explicit schema, values kept exactly.

    int -> bigint, float -> double (NaN -> NULL), nullable Int64/boolean/string dtypes keep
    their NULLs, object columns by their values (str, bool, int, float, datetime; lists ->
    arrays of their items' type; mixed -> their text), datetime64 -> timestamp (naive times
    read in the session's time zone), timedelta -> seconds as double.
    """
    T = spark_types()
    try:
        import pyarrow as pa
    except ImportError:
        raise PinqError(
            "the Spark engine converts pandas DataFrames with pyarrow: pip install pyarrow"
        ) from None
    names = [str(c) for c in df.columns]
    if len(set(names)) != len(names):
        raise PinqError("column names must be unique")
    tz = session_tz(spark)
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
    return guard(
        "converting a pandas DataFrame",
        lambda: spark.createDataFrame(table, schema=T.StructType(fields)),
    )


def normalized(q: str, data_type: Any) -> str:
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


def normalized_type(data_type: Any) -> Any:
    """The Spark type of :func:`normalized` applied to a column of ``data_type``."""
    T = spark_types()
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


def naive(v: object) -> pd.Timestamp:
    ts = pd.Timestamp(v)  # type: ignore[arg-type]
    return ts.tz_convert("UTC").tz_localize(None) if ts.tzinfo is not None else ts


def micros(values: Sequence[Any], tz: str) -> list[int | None]:
    """Timestamps as microseconds since the epoch, read exactly as :func:`to_spark` reads a
    column of them (naive wall times in the session's zone)."""
    import pyarrow as pa

    stamps = pd.Series(pd.to_datetime([pd.NaT if v is None else naive(v) for v in values]))
    arr, _ = arrow_values(stamps, "datetime", tz)
    return arr.cast(pa.int64()).to_pylist()  # type: ignore[no-any-return]
