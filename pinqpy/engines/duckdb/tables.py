"""Tables of public values (listed keys, candidates, picked key classes) for DuckDB queries:
written into the query as typed lists when small, else a DataFrame to register."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.engines.duckdb.dialect import DUCKDB
from pinqpy.engines.sqlgen.plans import compatible, value_kind

__all__ = ["GI", "INLINE_ROWS", "key_rows", "rows_frame", "rows_sql"]

# A key table's column of positions (of the listed keys or candidates).
GI = "__pinq_g"
# Rows of public values written into a query; more are registered as a table.
INLINE_ROWS = 5000


def key_rows(kinds: Sequence[str], keys: Sequence[Hashable], single: bool) -> list[tuple[Any, ...]]:
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


def rows_frame(
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


def rows_sql(
    columns: Sequence[str], kinds: Sequence[str], rows: Sequence[tuple[Any, ...]]
) -> str | None:
    """Rows of public values as a FROM item written into the query (typed lists unnested
    side by side), or None when too many or of a type not written here (then register
    :func:`rows_frame`). Typed as :func:`rows_frame` types them."""
    if len(rows) > INLINE_ROWS:
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
