"""One Spark executor call: its errors reported by what it was doing, and the temporary views
it makes for large key tables, dropped when it ends."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pinqpy.engines.spark.dialect import SPARK
from pinqpy.engines.spark.session import guard, spark_types

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Call"]


class Call:
    """One executor call: what it is doing (for error messages) and the temporary views it
    makes for large key tables, dropped when it ends. ``new_name`` gives a fresh view name
    (unique to the executor) for a tag."""

    def __init__(self, spark: SparkSession, what: str, new_name: Callable[[str], str]) -> None:
        self.spark = spark
        self.what = what
        self.new_name = new_name
        self.views: list[str] = []

    def run(self, fn: Callable[[], Any]) -> Any:
        return guard(self.what, fn)

    def sql(self, text: str) -> DataFrame:
        """Spark's analysis of a query (reads no rows)."""
        return self.run(lambda: self.spark.sql(text))  # type: ignore[no-any-return]

    def collect(self, text: str) -> list[tuple[Any, ...]]:
        rows = self.run(lambda: self.spark.sql(text).collect())
        return [tuple(r) for r in rows]

    def table(self, columns: Sequence[str], arrays: Sequence[tuple[Any, Any]]) -> str:
        """A typed table (keys, candidates) as a view."""
        import pyarrow as pa

        T = spark_types()
        fields = [T.StructField(c, t, True) for c, (_, t) in zip(columns, arrays, strict=True)]
        table = pa.Table.from_arrays([a for a, _ in arrays], names=list(columns))
        df = self.run(lambda: self.spark.createDataFrame(table, schema=T.StructType(fields)))
        name = self.new_name("t")
        self.run(lambda: df.createOrReplaceTempView(name))
        self.views.append(name)
        return SPARK.ident(name)

    def close(self) -> None:
        for name in self.views:
            with contextlib.suppress(Exception):
                guard(self.what, lambda n=name: self.spark.catalog.dropTempView(n))
        self.views.clear()
