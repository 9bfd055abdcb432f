"""Public tables enter a plan as pinqpy's own snapshot.

Everything pinqpy checks about a public table (its key multiplicity, which fixes a join's
stability; its schema) and everything an executor reads must be the same rows. The analyst
keeps their DataFrame and may edit it at any time, so the plan names a deep copy taken when
the table entered it (kept in the frame's catalog), and nothing ever reads the analyst's object
again.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from pinqpy.errors import PinqError
from pinqpy.expr.types import schema_from_pandas
from pinqpy.plan.catalog import new_id
from pinqpy.plan.meta import check_column_name
from pinqpy.plan.nodes import PublicTable

__all__ = ["public_table", "snapshot"]


def snapshot(df: pd.DataFrame) -> pd.DataFrame:
    """A private deep copy of a public DataFrame, with string column names that repeat none
    and use no reserved name."""
    if not isinstance(df, pd.DataFrame):
        raise PinqError(f"a public table is a pandas DataFrame, not {type(df).__name__}")
    for c in df.columns:
        check_column_name(c)
    if not df.columns.is_unique:
        dup = next(c for c in df.columns if list(df.columns).count(c) > 1)
        raise PinqError(f"the public table has two columns named {dup!r}; rename one")
    copy = df.copy(deep=True)
    copy.index = pd.RangeIndex(len(copy))
    return copy


def public_table(df: Any, name: str) -> tuple[PublicTable, pd.DataFrame]:
    """The plan's :class:`PublicTable` for ``df``, with the schema read off the snapshot (its
    values are public, so reading them is allowed), and the snapshot, which the frame's
    catalog keeps under the table's id."""
    data = snapshot(df)
    table = PublicTable(
        new_id("public"), name, tuple(data.columns), schema=schema_from_pandas(data)
    )
    return table, data
