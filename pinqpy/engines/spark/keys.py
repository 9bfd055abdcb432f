"""Public keys and candidates in Spark SQL: each column's literals or a typed table (as a
VALUES list up to :data:`INLINE_ROWS` rows, otherwise a view), typed like the plan's column
they are matched against, and key values read back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.engines.spark.call import Call
from pinqpy.engines.spark.dialect import SPARK
from pinqpy.engines.spark.types import arrow_values, micros, naive
from pinqpy.engines.sqlgen.keycounts import KeyColumn
from pinqpy.engines.sqlgen.plans import compatible, key_literal, value_kind

__all__ = [
    "GI",
    "INLINE_ROWS",
    "distinct_candidates",
    "key_arrow",
    "key_column",
    "key_type",
    "key_value",
    "picks",
    "restored",
    "spark_key_literal",
    "split_column",
    "values_table",
]

#: The column of a key table holding each key's position.
GI = "__pinq_g"
# Key and candidate tables up to this many rows are written into the query (VALUES), which
# costs Spark nothing extra; larger ones are sent as a DataFrame.
INLINE_ROWS = 1000


def spark_key_literal(v: object, kind: str, tz: str) -> str:
    """A public key as a literal of the kind of the column it is matched against (timestamps
    as wall times of the session's zone ``tz``)."""

    def stamp(t: object) -> str:
        return f"timestamp_micros({SPARK.int_lit(micros([t], tz)[0])})"  # type: ignore[arg-type]

    return key_literal(SPARK, v, kind, stamp)


def key_column(values: Sequence[Any], kind: str, tz: str) -> list[str]:
    """One key column as SQL literals typed like the plan's column it is matched against
    (``None`` is NULL): the values and types :func:`key_arrow` gives."""
    if kind in ("int", "float"):
        if kind == "int" and all(v is None or value_kind(v) == "int" for v in values):
            return [SPARK.null("int") if v is None else SPARK.int_lit(int(v)) for v in values]
        return [SPARK.null("float") if v is None else SPARK.float_lit(float(v)) for v in values]
    if kind == "bool":
        return [SPARK.null("bool") if v is None else "TRUE" if v else "FALSE" for v in values]
    if kind == "datetime":
        return [
            SPARK.null("datetime") if m is None else f"timestamp_micros({SPARK.int_lit(m)})"
            for m in micros(values, tz)
        ]
    return [
        SPARK.null("str") if v is None else SPARK.str_lit(v if isinstance(v, str) else str(v))
        for v in values
    ]


def key_type(values: Sequence[Any], kind: str) -> str:
    """The SQL type of a key column made by :func:`key_column`."""
    if kind in ("int", "float"):
        ints = all(v is None or value_kind(v) == "int" for v in values)
        return "BIGINT" if kind == "int" and ints else "DOUBLE"
    return {"bool": "BOOLEAN", "datetime": "TIMESTAMP"}.get(kind, "STRING")


def key_value(v: Any, sql_type: str) -> Any:
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


def key_arrow(values: Sequence[Any], kind: str, tz: str) -> tuple[Any, Any]:
    """One key column typed like the plan's column it is matched against."""
    if kind in ("int", "float"):
        ints = all(v is None or value_kind(v) == "int" for v in values)
        if kind == "int" and ints:
            return arrow_values(pd.Series(pd.array(values, dtype="Int64")), "int", tz)
        floats = [np.nan if v is None else float(v) for v in values]
        return arrow_values(pd.Series(floats, dtype="float64"), "float", tz)
    if kind == "bool":
        return arrow_values(pd.Series(pd.array(values, dtype="boolean")), "bool", tz)
    if kind == "datetime":
        stamps = [pd.NaT if v is None else naive(v) for v in values]
        return arrow_values(pd.Series(pd.to_datetime(stamps)), "datetime", tz)
    return arrow_values(pd.Series(values, dtype=object), "text", tz)


def distinct_candidates(candidates: Sequence[Any], kind: str) -> list[tuple[int, Any]]:
    """The candidates a column of ``kind`` can equal, each value at its first position (as
    Index.get_indexer finds it), with ``None`` for any missing value."""
    seen: set[Any] = set()
    uniq: list[tuple[int, Any]] = []
    for j, c in enumerate(candidates):
        ck = value_kind(c)
        if ck is not None and not compatible(kind, ck):
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
    return uniq


def values_table(names: Sequence[str], columns: Sequence[Sequence[str]]) -> str:
    """A small table written as a VALUES list, as a FROM item."""
    rows = ", ".join("(" + ", ".join(r) + ")" for r in zip(*columns, strict=True))
    cols = ", ".join(SPARK.ident(n) for n in names)
    return f"(SELECT * FROM VALUES {rows} AS __pinq_t({cols}))"


def split_column(name: str, kind: str, utf8_test: bool) -> KeyColumn | None:
    """How key selection groups a Spark column in the engine (keycounts docstring), or None
    for a kind whose groups are not read one to one. Timestamps are grouped by the wall
    time they are read as (two instants of an autumn clock change read alike); text that is
    not valid UTF-8 reads with U+FFFD for its bad bytes, so it and any text holding U+FFFD
    are loose. Spark before 4.0 has no ``is_valid_utf8`` (``utf8_test`` false): text is
    then read whole."""
    q = SPARK.ident(name)
    if kind in ("int", "bool"):
        return KeyColumn(q)
    if kind == "float":
        return KeyColumn(f"(CASE WHEN isnan({q}) THEN NULL ELSE {q} END)")
    if kind == "datetime":
        return KeyColumn(f"CAST({q} AS TIMESTAMP_NTZ)")
    if kind == "str" and utf8_test:
        bad = f"NOT is_valid_utf8({{0}}) OR instr({{0}}, {SPARK.str_lit(chr(0xFFFD))}) > 0"
        return KeyColumn(q, loose=bad)
    return None


def restored(values: Sequence[Any], kinds: Sequence[str]) -> tuple[Any, ...]:
    """Key values as collected, timestamps (read as wall times) as pandas Timestamps."""
    return tuple(
        pd.Timestamp(v) if v is not None and k == "datetime" else v
        for v, k in zip(values, kinds, strict=True)
    )


def picks(call: Call, picked: Sequence[tuple[int, int, int]]) -> str:
    """The drawn (count, position) pairs as a FROM item (``__pinq_c``, ``__pinq_r``)."""
    cs = [c for c, _, _ in picked]
    rs = [r for _, r, _ in picked]
    if len(picked) <= INLINE_ROWS:
        lits = [[SPARK.int_lit(c) for c in cs], [SPARK.int_lit(r) for r in rs]]
        return values_table(["__pinq_c", "__pinq_r"], lits)
    tz = "UTC"
    arrays = [arrow_values(pd.Series(v, dtype="int64"), "int", tz) for v in (cs, rs)]
    return call.table(["__pinq_c", "__pinq_r"], arrays)
