"""The Spark DataFrames of an executor's sources and their temporary views: a pandas
DataFrame converted once per DataFrame object, a view made once per Spark DataFrame and
dropped once that DataFrame is gone."""

from __future__ import annotations

import contextlib
import itertools
import uuid
import weakref
from typing import TYPE_CHECKING, Any

import pandas as pd

from pinqpy.engines.spark.call import Call
from pinqpy.engines.spark.dialect import SPARK
from pinqpy.engines.spark.session import guard, is_spark_dataframe
from pinqpy.engines.spark.types import to_spark
from pinqpy.errors import PinqError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SourceViews"]


def _forget_view(views: dict[int, tuple[Any, str]], dead: list[str], key: int, name: str) -> None:
    hit = views.get(key)
    if hit is not None and hit[1] == SPARK.ident(name):
        del views[key]
    dead.append(name)


class SourceViews:
    """The sources of one executor (and its bound twins, which share this object) in
    ``spark``, and the names of its temporary views."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.prefix = f"__pinq_{uuid.uuid4().hex[:12]}_"
        self._names = itertools.count()
        self._converted: dict[int, tuple[weakref.ref[Any], DataFrame]] = {}
        self._views: dict[int, tuple[weakref.ref[Any], str]] = {}
        self._dead_views: list[str] = []

    def new_name(self, tag: str = "") -> str:
        """A view name no other view of this executor has."""
        return f"{self.prefix}{tag}{next(self._names)}"

    def frame(self, data: Any) -> tuple[DataFrame, bool]:
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

    def view(self, df: DataFrame, call: Call) -> str:
        """A temporary view of a source, made once and kept while the DataFrame lives (making
        one costs Spark an analysis)."""
        key = id(df)
        hit = self._views.get(key)
        if hit is not None and hit[0]() is df:
            return hit[1]
        name = self.new_name()
        call.run(lambda: df.createOrReplaceTempView(name))
        self._views[key] = (weakref.ref(df), SPARK.ident(name))
        # Dropped by the next call: a finalizer may run in the middle of a py4j exchange. It
        # holds the shared containers, not this object.
        fin = weakref.finalize(df, _forget_view, self._views, self._dead_views, key, name)
        fin.atexit = False
        return SPARK.ident(name)

    def drop_dead(self) -> None:
        """Drop the views of sources that are gone."""
        while self._dead_views:
            name = self._dead_views.pop()
            with contextlib.suppress(Exception):
                guard("dropping a view", lambda n=name: self.spark.catalog.dropTempView(n))
