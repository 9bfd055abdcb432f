"""PrivateFrame: PINQ's PINQueryable over a pandas DataFrame.

A :class:`PrivateFrame` is a privacy-protected view of a table. The analyst transforms it
with stable transformations (lazy: they build plan nodes and read nothing) and learns about it
only through noisy aggregations, each of which charges ``epsilon × stability`` to the budgets
the frame draws on before any data is read.

The frame is the user's spelling of the query pipeline: its transformations are the checked
ones of :class:`pinqpy.pipeline.relation.Relation`, and its aggregations are prepared by
:mod:`pinqpy.pipeline.prepare` and run by :mod:`pinqpy.pipeline.run`, as SQL's are.

>>> import pandas as pd, pinqpy as pq
>>> df = pd.DataFrame({"age": [23, 35, 47, 51, 62], "sex": ["F", "M", "F", "F", "M"]})
>>> budget = pq.Budget(epsilon=1.0)
>>> people = pq.PrivateFrame(df, budget, bounds={"age": (0, 100)})
>>> adults = people.where("age >= 30")
>>> adults.stability
1
>>> n = adults.count(epsilon=0.1)          # noisy, about 4
>>> budget.spent.epsilon == 0.1
True
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Hashable, Iterable, Iterator, Mapping
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import pandas as pd

from pinqpy.accounting.budget import Budget
from pinqpy.api.aggregations import Aggregations
from pinqpy.api.expressions import Expression, ExprLike, unwrap
from pinqpy.api.habits import FRAME_HABITS, GROUPED_HABITS, habit_error
from pinqpy.api.keyed import KeyedReleases
from pinqpy.api.metadata import FrameMetadata, stability_value
from pinqpy.api.panels import frame_panel
from pinqpy.api.partition import Partition
from pinqpy.engines.inferred import inferred_types, inferred_types_message
from pinqpy.engines.registry import Wrapped, read_file, wrap
from pinqpy.errors import InferredTypesWarning, PandasHabitTypeError, PinqError, PrivacyError
from pinqpy.pipeline import prepare, run
from pinqpy.pipeline.relation import Relation, positive_int
from pinqpy.plan.nodes import PlanNode
from pinqpy.results.html import frame_html
from pinqpy.results.labels import NoisyLabel
from pinqpy.results.values import NoisyValue

__all__ = ["GroupedFrame", "PrivateFrame"]


# The public metadata, explain and accuracy (pinqpy.api.metadata), the releases over keys
# (pinqpy.api.keyed) and the noisy aggregations (pinqpy.api.aggregations) are bases.
class PrivateFrame(FrameMetadata, KeyedReleases, Aggregations[NoisyValue, NoisyLabel]):
    """A private table that can be transformed freely and read only through noisy aggregates.

    Parameters
    ----------
    data:
        A pandas DataFrame (or a DuckDB relation, a Spark DataFrame, a Polars DataFrame or
        LazyFrame: see ``engine``). pinqpy does not copy it; the curator should not modify it
        after wrapping.
    budget:
        The :class:`~pinqpy.Budget` every aggregation on this frame and its descendants is
        charged to.
    privacy_unit:
        ``None`` (each row is one person) or the name of a column identifying the person who
        owns each row. A user-level frame has infinite stability until
        :meth:`bound_contributions` (or ``groupby(privacy_unit)``) bounds it.
    bounds:
        Public bounds per column, ``{"age": (0, 100)}``, used when an aggregation is given none.
    keys:
        Public key lists per column, used by :meth:`partition` when it is given none.
    allow_callables:
        ``True`` lets Python callables stand in for expressions. They run the analyst's own
        code on the private rows (a callable that raises on purpose would leak a bit at any
        epsilon), so it is the curator's choice, off by default.
    public_size:
        ``True`` declares the table's row count public (as census totals are). pinqpy reads
        it once, at its first use; :meth:`count` then releases it exactly and free, and
        :meth:`mean` divides by it. It holds only while the rows are the table's own (through
        select/assign/rename, not where, joins, groupby, distinct, bound_* or partitions).
        It also changes the neighbour relation to one row changed (one person's rows
        replaced, on a user-level table): one row removed and one added, so every frame over
        the table, derived ones too, is charged at twice its stability, and aggregations of
        the table's own rows calibrate to one changed row (see the README). Only the curator
        sets it, here; a derived frame cannot.
    schema:
        Declared column types, ``{"code": "str"}`` (``int``, ``float``, ``str``, ``bool``,
        ``datetime``, ``any``). Each declared column is converted (pandas) or cast (DuckDB,
        Spark) when the frame is made; a value that does not convert is refused then. Other
        columns take the engine's type; a pandas ``object`` column is ``any``, whose values
        are each read as their own type (see the README).

    Notes
    -----
    A PrivateFrame has no ``len()``, no iteration and no ``head()``; its repr shows the
    schema, the stability and the budget only.
    """

    __slots__ = ("_rel",)

    def __init__(
        self,
        data: Any,
        budget: Budget,
        *,
        privacy_unit: str | None = None,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        keys: Mapping[str, Iterable[Hashable]] | None = None,
        allow_callables: bool = False,
        name: str = "table",
        engine: Literal["pandas", "duckdb", "spark", "polars", "postgres"] | None = None,
        connection: Any = None,
        schema: Mapping[str, str] | None = None,
        public_size: bool = False,
    ):
        if not isinstance(budget, Budget):
            raise PinqError("PrivateFrame needs a pq.Budget as its budget")
        self._rel = Relation.table(
            wrap(data, engine, connection, schema),
            budget,
            privacy_unit,
            bounds,
            keys,
            allow_callables,
            name,
            public_size,
        )

    @classmethod
    def from_sql(
        cls,
        connection: Any,
        table: str,
        budget: Budget,
        *,
        privacy_unit: str | None = None,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        keys: Mapping[str, Iterable[Hashable]] | None = None,
        name: str | None = None,
        public_size: bool = False,
    ) -> PrivateFrame:
        """A private frame over a PostgreSQL table or view, read where it lies: every
        aggregate is one SQL statement in the database, and only the exact aggregates come
        back (noise is added here).

        ``connection`` is a psycopg 3 connection or a connection string
        (``"postgresql://user@host/db"``, for which pinqpy opens and keeps one connection);
        ``table`` is spelt as PostgreSQL reads it (``"schema.table"``, unquoted parts in
        lower case). Column types come from the catalog; a column of a type pinqpy does not
        read is refused now. The other arguments are those of :class:`PrivateFrame`;
        ``name`` defaults to the table's name. The same as
        ``PrivateFrame(table, budget, connection=connection)``.
        """
        if not isinstance(budget, Budget):
            raise PinqError("PrivateFrame needs a pq.Budget as its budget")
        if not isinstance(table, str):
            raise PinqError(f"from_sql needs a table name, not {type(table).__name__}")
        wrapped = wrap(table, "postgres", connection)
        if name is None:
            stem = table.rsplit(".", 1)[-1].strip('"')
            name = stem if stem.isidentifier() else "table"
        rel = Relation.table(wrapped, budget, privacy_unit, bounds, keys, False, name, public_size)
        return cls._wrap(rel)

    @classmethod
    def from_parquet(
        cls,
        path: str | os.PathLike[str],
        budget: Budget,
        *,
        engine: Literal["pandas", "duckdb", "spark", "polars", "postgres"] = "pandas",
        connection: Any = None,
        privacy_unit: str | None = None,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        keys: Mapping[str, Iterable[Hashable]] | None = None,
        allow_callables: bool = False,
        name: str | None = None,
        schema: Mapping[str, str] | None = None,
        public_size: bool = False,
    ) -> PrivateFrame:
        """A private frame over a parquet file, directory or glob, read by ``engine``.

        ``engine="duckdb"``, ``"spark"`` and ``"polars"`` (a lazy scan) read the file where
        it lies, so it need not fit in memory; ``"pandas"`` loads it (with pyarrow). The other
        arguments are those of :class:`PrivateFrame`; ``name`` defaults to the file's stem.

        >>> import pinqpy as pq
        >>> pq.PrivateFrame.from_parquet("no/such.parquet", pq.Budget(1.0), engine="duckdb")
        Traceback (most recent call last):
        ...
        pinqpy.errors.PinqError: parquet file 'no/such.parquet' does not exist
        """
        return cls._from_file(
            path,
            "parquet",
            budget,
            engine,
            connection,
            privacy_unit,
            bounds,
            keys,
            allow_callables,
            name,
            schema,
            public_size,
        )

    @classmethod
    def from_csv(
        cls,
        path: str | os.PathLike[str],
        budget: Budget,
        *,
        engine: Literal["pandas", "duckdb", "spark", "polars", "postgres"] = "pandas",
        connection: Any = None,
        privacy_unit: str | None = None,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        keys: Mapping[str, Iterable[Hashable]] | None = None,
        allow_callables: bool = False,
        name: str | None = None,
        schema: Mapping[str, str] | None = None,
        public_size: bool = False,
    ) -> PrivateFrame:
        """A private frame over a CSV file (with a header row), read by ``engine``.

        Column types are inferred from the file, once, by the engine that reads it (DESCRIBE
        shows them as ``inferred``), and an :class:`~pinqpy.errors.InferredTypesWarning`
        says so, with the ``schema=`` that declares them: inferred types are public facts
        that follow the rows. ``schema={"code": "str"}`` declares a column's type instead,
        reading it as text and converting it. Arguments are those of :meth:`from_parquet`.

        >>> import pinqpy as pq
        >>> from pinqpy.demo import PUMS_PATH
        >>> people = pq.PrivateFrame.from_csv(PUMS_PATH, pq.Budget(1.0), engine="duckdb")
        >>> people.engine, people.schema["age"]
        ('duckdb', 'int')
        """
        return cls._from_file(
            path,
            "csv",
            budget,
            engine,
            connection,
            privacy_unit,
            bounds,
            keys,
            allow_callables,
            name,
            schema,
            public_size,
        )

    @classmethod
    def _from_file(
        cls,
        path: Any,
        kind: str,
        budget: Budget,
        engine: str,
        connection: Any,
        privacy_unit: str | None,
        bounds: Mapping[str, tuple[float, float]] | None,
        keys: Mapping[str, Iterable[Hashable]] | None,
        allow_callables: bool,
        name: str | None,
        schema: Mapping[str, str] | None = None,
        public_size: bool = False,
    ) -> PrivateFrame:
        if not isinstance(budget, Budget):
            raise PinqError("PrivateFrame needs a pq.Budget as its budget")
        wrapped = read_file(path, kind, engine, connection, schema=schema)
        _warn_inferred(wrapped, path)
        if name is None:
            stem = os.path.basename(os.fspath(path).rstrip("/")).split(".")[0]
            name = stem if stem.isidentifier() else "table"
        rel = Relation.table(
            wrapped, budget, privacy_unit, bounds, keys, allow_callables, name, public_size
        )
        return cls._wrap(rel)

    @classmethod
    def _wrap(cls, rel: Relation) -> PrivateFrame:
        """A frame over ``rel`` (the pipeline's relation: a plan, its catalog and its public
        facts)."""
        frame = object.__new__(cls)
        frame._rel = rel
        return frame

    @property
    def _plan(self) -> PlanNode:
        return self._rel.plan

    # -- no leaks -------------------------------------------------------------------------
    def _repr_html_(self) -> str:
        return frame_html(frame_panel(self))

    def __repr__(self) -> str:
        cols = ", ".join(f"{c}: {t}" for c, t in self._rel.meta.schema.items())
        try:
            lin = self._rel.stabilities()
            parts = [f"stability={_fmt(k)}, budget={b!r}" for b, k in lin.items()]
        except Exception:  # pragma: no cover - repr must never fail
            parts = []
        unit = f", privacy_unit={self._rel.privacy_unit!r}" if self._rel.privacy_unit else ""
        return f"PrivateFrame([{cols}]{unit}, " + "; ".join(parts) + ")"

    def __getattr__(self, name: str) -> Any:
        # Only names normal lookup did not find: answer pandas habits with a pointer.
        columns = self._rel.columns if not name.startswith("_") else ()
        habit_error(type(self).__name__, name, FRAME_HABITS, columns)

    def __len__(self) -> int:
        raise PandasHabitTypeError(
            "a PrivateFrame has no length: the row count is private; use .count(epsilon=...) "
            "for a noisy count"
        )

    def __bool__(self) -> bool:
        return True

    def __iter__(self) -> Iterator[Any]:
        raise PandasHabitTypeError(
            "a PrivateFrame cannot be iterated: its rows are private; use noisy aggregations"
        )

    def head(self, *args: object, **kwargs: object) -> None:
        raise PrivacyError(
            "a PrivateFrame cannot show rows: they are private; use noisy aggregations such "
            "as .count(), .mean() or .partition(...).count()"
        )

    tail = sample = head

    def __getitem__(self, item: object) -> None:
        raise PandasHabitTypeError(
            "a PrivateFrame cannot be indexed; use .select(...) to keep columns and "
            ".where(...) to filter rows (in expressions a column is its name: 'age >= 65')"
        )

    def __reduce__(self) -> None:  # pickling would carry the private rows
        raise PrivacyError("a PrivateFrame cannot be pickled: it holds private data")

    def __copy__(self) -> PrivateFrame:
        return self

    def __deepcopy__(self, memo: object) -> PrivateFrame:
        return self

    # -- stable transformations -----------------------------------------------------------
    def where(self, condition: ExprLike) -> PrivateFrame:
        """Keep the rows where ``condition`` is true (NULL counts as false). Stability 1."""
        return self._wrap(self._rel.where(unwrap(condition)))

    filter = where

    def select(self, *columns: str, **exprs: ExprLike) -> PrivateFrame:
        """Keep ``columns`` and add computed ones (``decade="FLOOR(age / 10)"``). Stability 1."""
        return self._wrap(self._rel.select(columns, {n: unwrap(v) for n, v in exprs.items()}))

    def assign(self, **exprs: ExprLike) -> PrivateFrame:
        """Keep every column and add or replace computed ones. Stability 1."""
        return self._wrap(self._rel.assign({n: unwrap(v) for n, v in exprs.items()}))

    def distinct(self, *columns: str) -> PrivateFrame:
        """One row per distinct combination of ``columns`` (all when none). Stability 1."""
        return self._wrap(self._rel.distinct(columns))

    def explode(self, column: str, max_items: int) -> PrivateFrame:
        """PINQ's SelectMany: one row per item of the list in ``column``, at most
        ``max_items`` per input row (longer lists are cut). Stability ``max_items``."""
        return self._wrap(self._rel.explode(column, max_items))

    def groupby(self, *keys: str | list[str]) -> GroupedFrame:
        """PINQ's GroupBy; finish with ``.agg(name="AGG(expr)", ...)``. Stability 2 (1 when the
        keys are exactly the frame's privacy unit)."""
        flat: list[str] = []
        for k in keys:
            flat.extend([k] if isinstance(k, str) else list(k))
        return GroupedFrame(self, self._rel.group_keys(flat))

    def join(
        self,
        other: PrivateFrame | pd.DataFrame,
        on: str | Iterable[str],
        max_rows_per_key: tuple[int, int] | None = None,
        *,
        how: Literal["inner", "left"] = "inner",
        name: str = "public",
    ) -> PrivateFrame:
        """Join with another private frame or a public pandas DataFrame.

        - Private frame: each side is cut to at most ``max_rows_per_key = (b_left, b_right)``
          rows per key (at random), then inner-joined; stability ``2·b_right`` for the left
          input and ``2·b_left`` for the right. Without the bounds, both sides must be known
          unique on the key (e.g. each is a ``groupby`` on it): stability 1 per side.
        - Public DataFrame: stability is the largest number of rows any key has in the
          public table (1 when its key is unique). ``how="left"`` keeps unmatched rows.

        Colliding column names from the right side get a ``_right`` (``_public``) suffix.
        ``name`` labels a public table in EXPLAIN.
        """
        on_cols = self._rel.join_keys(on)
        if isinstance(other, pd.DataFrame):
            return self._wrap(self._rel.public_join(other, on_cols, how, name))
        if not isinstance(other, PrivateFrame):
            raise PinqError("join needs a PrivateFrame or a public pandas DataFrame")
        return self._wrap(self._rel.join(other._rel, on_cols, max_rows_per_key, how))

    def _set_op(
        self, other: PrivateFrame, kind: Literal["concat", "union", "intersect", "difference"]
    ) -> PrivateFrame:
        if not isinstance(other, PrivateFrame):
            raise PinqError(f"{kind} needs another PrivateFrame")
        return self._wrap(self._rel.set_op(other._rel, kind))

    def concat(self, other: PrivateFrame) -> PrivateFrame:
        """All rows of both frames, duplicates kept (UNION ALL). Stability 1 per input."""
        return self._set_op(other, "concat")

    def union(self, other: PrivateFrame) -> PrivateFrame:
        """Distinct rows in either frame (UNION). Stability 1 per input."""
        return self._set_op(other, "union")

    def intersect(self, other: PrivateFrame) -> PrivateFrame:
        """Distinct rows in both frames (INTERSECT). Stability 1 per input."""
        return self._set_op(other, "intersect")

    def difference(self, other: PrivateFrame) -> PrivateFrame:
        """Distinct rows of this frame not in ``other`` (EXCEPT). Stability 1 per input."""
        return self._set_op(other, "difference")

    def bound_contributions(
        self,
        max_rows: int | None = None,
        *,
        max_groups: int | None = None,
        max_rows_per_group: int | None = None,
        by: str | list[str] | None = None,
    ) -> PrivateFrame:
        """Keep at most ``max_rows`` rows per privacy unit, chosen at random.

        Turns a user-level frame (infinite stability) into one of stability ``max_rows``.
        Rows whose privacy unit is NULL (None, NaN, NA) belong to no known person and are
        dropped; a ``groupby`` on exactly the privacy unit drops them too.

        The unit must still be the column the table declared, unchanged (a rename is fine):
        after ``assign(uid=...)`` or a combination with another budget's table, no column
        identifies this budget's people, and this is refused (see :mod:`pinqpy.plan.facts`).
        Rows of other budgets that the frame draws on (if any) can each move at most two
        kept rows of their unit (themselves and one they displace), so their stability
        doubles.

        With ``max_groups=G`` and ``by=``: keep, per privacy unit, at most ``G`` distinct
        values of the ``by`` column(s), chosen at random, and with ``max_rows_per_group=k`` at
        most ``k`` rows of each kept group, chosen at random; ``max_rows`` may be added as an
        overall cap (applied after). A NULL ``by`` value is one group; ``by`` may not be the
        unit itself. The stability is ``min(G·k, max_rows)`` (infinite with neither ``k`` nor
        ``max_rows``; ``2·k + 2`` for rows of other budgets, which can evict a whole group).
        A :meth:`partition` (or a SQL GROUP BY) on exactly the ``by`` columns then charges
        the parent as ``G`` parts at stability ``k``: ``G·k·epsilon`` under Laplace noise,
        and under Gaussian noise the L2 sensitivity ``sqrt(G)·k`` (``G·k²·rho`` in zCDP
        terms) instead of ``G·k``.

        >>> import pandas as pd, pinqpy as pq
        >>> df = pd.DataFrame({"uid": [1, 1, 1, 2], "city": ["A", "B", "C", "A"]})
        >>> f = pq.PrivateFrame(df, pq.Budget(1.0), privacy_unit="uid")
        >>> b = f.bound_contributions(max_groups=2, max_rows_per_group=1, by="city")
        >>> b.stability
        2
        """
        grouped = max_groups is not None or max_rows_per_group is not None or by is not None
        if not grouped:
            if max_rows is None:
                raise PinqError(
                    "bound_contributions needs max_rows=k, or max_groups=G with by=... "
                    "(and max_rows_per_group=k)"
                )
            return self._wrap(self._rel.bound_contributions(max_rows))
        if max_groups is None:
            raise PinqError(
                "bound_contributions: by= and max_rows_per_group= go with max_groups=G, the "
                "number of distinct by values kept per person"
            )
        if by is None:
            raise PinqError(
                "bound_contributions: max_groups needs by=, the column(s) whose distinct "
                "values are counted per person"
            )
        if isinstance(by, str):
            cols: tuple[str, ...] = (by,)
        elif isinstance(by, list | tuple):
            cols = tuple(by)
        else:
            raise PinqError("by must be a column name or a list of column names")
        rel = self._rel
        if max_rows is not None:
            # Checked before any node is built, so a bad value is reported first.
            positive_int(max_rows, "max_rows")
        rel = rel.bound_groups(cols, max_groups, max_rows_per_group)
        if max_rows is not None:
            rel = rel.bound_contributions(max_rows)
        return self._wrap(rel)

    def bound_degree(self, column: str | list[str], max_rows: int) -> PrivateFrame:
        """PINQ's BoundDegree: keep at most ``max_rows`` rows per value of ``column`` (or of
        several columns), chosen at random; a NULL value is one key.

        Meant for record-level tables, for instance the edges of a graph: after
        ``edges.bound_degree("src", d)`` every node has out-degree at most ``d``. Stability 2:
        one added edge can join its key's kept rows and evict another one. On a user-level
        frame the privacy unit survives only when ``column`` includes it (otherwise one
        person's rows could evict another's).

        >>> import pandas as pd, pinqpy as pq
        >>> edges = pd.DataFrame({"src": [1, 1, 1, 2], "dst": [2, 3, 4, 1]})
        >>> f = pq.PrivateFrame(edges, pq.Budget(1.0)).bound_degree("src", 2)
        >>> f.stability
        2
        """
        if isinstance(column, str):
            cols: tuple[str, ...] = (column,)
        elif isinstance(column, list | tuple):
            cols = tuple(column)
        else:
            raise PinqError("bound_degree's column must be a column name or a list of names")
        return self._wrap(self._rel.bound_degree(cols, max_rows))

    def partition(
        self, columns: str | Iterable[str], keys: Iterable[Hashable] | None = None
    ) -> Partition[PrivateFrame]:
        """Split into parts by public ``keys`` (parallel composition); see :class:`Partition`."""
        ref, rel = self._rel.partition(columns, keys)
        return Partition(self, rel, ref, PrivateFrame._wrap)

    # -- noisy aggregations (count, sum, mean, ...: pinqpy.api.aggregations) ------------
    _whole = True  # the whole frame: its public row count, if declared, may serve

    def _release(self, prepared: prepare.Prepared) -> NoisyValue:
        _values, acc = run.run_one(prepared, None)
        return NoisyValue.from_release(acc)

    def _choose(self, prepared: prepare.Prepared) -> NoisyLabel:
        idx, acc = run.run_one(prepared, None)
        return NoisyLabel(prepared.candidates[int(np.asarray(idx)[0])], acc)


class GroupedFrame:
    """The pending result of :meth:`PrivateFrame.groupby`; call :meth:`agg` to finish it."""

    __slots__ = ("_frame", "_keys")

    def __init__(self, frame: PrivateFrame, keys: tuple[str, ...]):
        self._frame = frame
        self._keys = keys

    def agg(self, **aggs: str | Expression) -> PrivateFrame:
        """One row per group with exact per-group values (``n="COUNT(*)"``,
        ``total="SUM(amount)"``) that later queries may filter on and aggregate noisily.

        Stability 2: one changed input row changes one group's row (old row out, new row
        in). Grouping a user-level frame by exactly its privacy unit has stability 1.
        """
        calls = {n: unwrap(v) for n, v in aggs.items()}
        return PrivateFrame._wrap(self._frame._rel.aggregate(self._keys, calls))

    def __repr__(self) -> str:
        return f"GroupedFrame(keys={list(self._keys)}); call .agg(name='COUNT(*)', ...)"

    def __getattr__(self, name: str) -> Any:
        keys = self._keys if not name.startswith("_") else ()
        habit_error(type(self).__name__, name, GROUPED_HABITS, keys=keys)


# -- helpers ---------------------------------------------------------------------------------
def _warn_inferred(wrapped: Wrapped, path: Any) -> None:
    """Warn the curator (once per table, as it is loaded) that column types were inferred
    from a file's rows, and how to declare them (:mod:`pinqpy.engines.inferred`)."""
    types = inferred_types(wrapped)
    if types:
        where = f"from_csv({os.fspath(path)!r})"
        message = inferred_types_message(where, f"schema={types!r}")
        # Level 4: the curator's call of from_csv (through _from_file).
        warnings.warn(InferredTypesWarning(message), stacklevel=4)


def _fmt(k: Fraction | float) -> str:
    v = stability_value(k)
    return "inf" if v == math.inf else str(v)
