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
from pinqpy.api.panels import frame_panel
from pinqpy.api.partition import Partition
from pinqpy.api.previews import preview
from pinqpy.engines.inferred import inferred_types, inferred_types_message
from pinqpy.engines.registry import Wrapped, read_file, wrap
from pinqpy.errors import InferredTypesWarning, PandasHabitTypeError, PinqError, PrivacyError
from pinqpy.expr.types import ColumnType
from pinqpy.pipeline import prepare, run
from pinqpy.pipeline.relation import Relation, positive_int
from pinqpy.plan.nodes import PlanNode
from pinqpy.plan.stability import INF
from pinqpy.results.accuracy import AccuracyPreview
from pinqpy.results.html import frame_html
from pinqpy.results.labels import NoisyLabel
from pinqpy.results.marginals import Marginals
from pinqpy.results.tables import NoisySeries
from pinqpy.results.values import NoisyValue
from pinqpy.sql.explain import Explanation

__all__ = ["GroupedFrame", "PrivateFrame"]


def _stability_value(k: Fraction | float) -> int | Fraction | float:
    if k == INF:
        return math.inf
    k = Fraction(k)
    return int(k) if k.denominator == 1 else k


class PrivateFrame(Aggregations[NoisyValue, NoisyLabel]):
    """A private table that can be transformed freely and read only through noisy aggregates.

    Parameters
    ----------
    data:
        A pandas DataFrame. pinqpy does not copy it; the curator should not modify it after
        wrapping.
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
        engine: Literal["pandas", "duckdb", "spark"] | None = None,
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
    def from_parquet(
        cls,
        path: str | os.PathLike[str],
        budget: Budget,
        *,
        engine: Literal["pandas", "duckdb", "spark"] = "pandas",
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

        ``engine="duckdb"`` and ``engine="spark"`` read the file where it lies, so it need not
        fit in memory; ``"pandas"`` loads it (with pyarrow). The other arguments are those of
        :class:`PrivateFrame`; ``name`` defaults to the file's stem.

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
        engine: Literal["pandas", "duckdb", "spark"] = "pandas",
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

    # -- public metadata ------------------------------------------------------------------
    @property
    def columns(self) -> list[str]:
        """The column names (the schema is public)."""
        return self._rel.columns

    @property
    def schema(self) -> dict[str, ColumnType]:
        """Column name -> type (``int``, ``float``, ``str``, ``bool``, ``datetime``, ``any``)."""
        return dict(self._rel.meta.schema)

    @property
    def bounds(self) -> dict[str, tuple[float, float]]:
        """Declared public bounds that still hold for this frame's columns."""
        return dict(self._rel.meta.bounds)

    @property
    def keys(self) -> dict[str, tuple[Hashable, ...]]:
        """Declared public keys per column."""
        return dict(self._rel.meta.keys)

    @property
    def engine(self) -> str:
        """Where exact aggregates are computed: ``"pandas"``, ``"duckdb"`` or ``"spark"``."""
        return self._rel.engine

    @property
    def privacy_unit(self) -> str | None:
        """The column naming each row's owner, while it is still tracked."""
        return self._rel.privacy_unit

    @property
    def stabilities(self) -> dict[Budget, int | Fraction | float]:
        """``{budget: multiplier}`` for every budget the frame draws on.

        The multiplier is how many of this frame's rows one privacy unit of that budget's
        table can change; a query of epsilon on this frame costs that budget at most
        ``epsilon × multiplier``. Over a table whose row count is public (``public_size``)
        neighbours differ in one changed row, one row removed and one added, so the
        multiplier is twice what it would be (2 for the table itself).
        """
        return {b: _stability_value(k) for b, k in self._rel.stabilities().items()}

    @property
    def stability(self) -> int | Fraction | float:
        """The multiplier from this frame to its budget (see :attr:`stabilities`)."""
        st = self.stabilities
        if len(st) != 1:
            raise PinqError(
                f"this frame draws on {len(st)} budgets, so it has one stability per budget; "
                "use .stabilities"
            )
        return next(iter(st.values()))

    @property
    def budgets(self) -> list[Budget]:
        return list(self.stabilities)

    def explain(self, epsilon: float | None = None) -> Explanation:
        """Each step of this frame's plan with its stability, the steps that multiply a
        query's charge and why, and (with ``epsilon``) what one query at that epsilon would
        charge each budget. Reads no data and charges nothing; ``print()`` it.

        A query of ``epsilon`` on a frame of stability ``k`` charges ``epsilon × k`` (Laplace
        noise; Gaussian noise and zCDP budgets account ``k`` as group privacy does), so the
        multiplying steps are where a query's cost comes from: a public join whose key
        repeats, a groupby (2), an explode, a bound of ``k`` rows per person. A frame over a
        table whose row count is public says so ("Neighbours: one row changed, n public"):
        its stabilities count a changed row twice (one row removed, one added).

        >>> import pandas as pd, pinqpy as pq
        >>> f = pq.PrivateFrame(pd.DataFrame({"g": [1, 2]}), pq.Budget(1), name="people")
        >>> print(f.groupby("g").agg(n="COUNT(*)").explain(epsilon=0.1))
        GroupBy g: COUNT(*) AS n                                         stability 2
          Scan people                                                    stability 1
        <BLANKLINE>
        Multiplies the charge: groupby g: a changed row alters two groups (stability 1 -> 2)
        A query at epsilon 0.1 charges epsilon 0.1 x stability 2 = Cost(epsilon=0.2) to people
        """
        from pinqpy.accounting.agents import flatten
        from pinqpy.accounting.cost import Cost
        from pinqpy.pipeline.neighbours import changed_row_note, changed_row_reasons
        from pinqpy.plan.describe import StepDescriber, multipliers, stability_text

        rel = self._rel
        describe = StepDescriber()
        lines: list[str] = []

        def tree(node: PlanNode, depth: int) -> None:
            ks = flatten(rel.catalog.lineage(node)).values()
            stab = ", ".join(sorted({stability_text(k) for k in ks}))
            lines.append(f"{'  ' * depth + describe.visit(node):<64} stability {stab}")
            for child in node.children:
                tree(child, depth + 1)

        tree(rel.plan, 0)
        neighbours = changed_row_note(rel)
        if neighbours is not None:
            lines += ["", neighbours]
        reasons = [step.reason for step in multipliers(rel.plan)] + changed_row_reasons(rel)
        lines.append("")
        if reasons:
            lines += [f"Multiplies the charge: {reason}" for reason in reasons]
        else:
            lines.append("No step multiplies the charge.")
        charges: dict[str, object] = {}
        if epsilon is not None:
            eps = Cost(epsilon).epsilon
            for budget, k in rel.stabilities().items():
                name = budget.name or _tables_on(rel, budget) or "budget"
                if k == INF:
                    lines.append(
                        f"A query is refused on {name}: its stability is unbounded "
                        "(bound_contributions first)"
                    )
                    continue
                cost = Cost(eps * k)
                charges[name] = cost
                lines.append(
                    f"A query at epsilon {eps} charges epsilon {eps} x stability "
                    f"{stability_text(k)} = {cost!r} to {name}"
                )
        out = Explanation("\n".join(lines))
        out.charges = charges
        return out

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

    def marginals(
        self,
        marginals: Iterable[str | tuple[str, ...]],
        epsilon: float | None = None,
        *,
        delta: float | None = None,
        rho: float | None = None,
        keys: Mapping[str, Iterable[Hashable]] | None = None,
        cuts: Mapping[str, Iterable[float | None]] | None = None,
        explain: bool = False,
    ) -> Marginals | Explanation:
        """Noisy counts of several marginals over a public domain, in one charge: a
        :class:`~pinqpy.Marginals`, from which ``.table(...)`` estimates any table over the
        measured columns (consistent, non-negative) and ``.sample(n)`` draws synthetic rows.

        Each marginal (a tuple of columns) is exactly ``partition(columns, keys).count(...)``
        over every cell of its domain: ``epsilon`` (Laplace) or ``epsilon`` and ``delta``
        (Gaussian) or ``rho`` (discrete Gaussian of variance ``1/(2·rho)``, a zCDP charge) is
        **per marginal**, so ``m`` marginals charge ``m × epsilon × stability`` (``m ×
        stability² × rho``). Each column's cells are public: ``keys={col: [...]}``, the
        declared keys, or ``cuts={col: [20, 40, 60]}`` for numeric columns (intervals closed
        on the left; add ``None`` to the list for a cell of NULLs). A value outside its
        column's cells, and a NULL without a declared cell, is dropped from the marginals
        over that column on every engine. A column with no public domain is refused before
        any charge. ``explain=True`` returns what would be measured and charged, charging
        nothing. See :mod:`pinqpy.pipeline.marginals`.

        >>> import pandas as pd, pinqpy as pq
        >>> df = pd.DataFrame({"age": [23, 35, 47, 71], "sex": [1, 2, 2, 1]})
        >>> people = pq.PrivateFrame(df, pq.Budget(1.0), keys={"sex": [1, 2]})
        >>> m = people.marginals([("age", "sex")], epsilon=0.5, cuts={"age": [30, 60]})
        >>> " | ".join(m.domain["age"])
        '(-inf, 30) | [30, 60) | [60, inf)'
        """
        from pinqpy.api.marginals import measure_marginals

        return measure_marginals(
            self._rel, marginals, epsilon=epsilon, delta=delta, rho=rho, keys=keys,
            cuts=cuts, explain=explain,
        )

    def synthesize(
        self,
        epsilon: float | None = None,
        *,
        columns: Iterable[str],
        rho: float | None = None,
        delta: float | None = None,
        keys: Mapping[str, Iterable[Hashable]] | None = None,
        cuts: Mapping[str, Iterable[float | None]] | None = None,
        max_degree: int = 2,
        explain: bool = False,
    ) -> Marginals | Explanation:
        """Choose and measure marginals for synthetic data (MST): every 1-way marginal of
        ``columns``, then ``d - 1`` pairs chosen privately (a spanning tree of the pairs the
        1-way marginals explain worst), measured; returns a :class:`~pinqpy.Marginals`.

        ``epsilon`` (Laplace) or ``rho`` (zCDP) is the **total**, split in thirds between
        the 1-way marginals, the choices and the chosen pairs (derivation and the scores'
        sensitivity in :mod:`pinqpy.pipeline.synthesize`), and charged times the stability
        in one transaction before any data is read. Domains as for :meth:`marginals`.
        ``explain=True`` returns the split and the charge, charging nothing.
        """
        from pinqpy.api.marginals import synthesize

        return synthesize(
            self._rel, columns, epsilon=epsilon, rho=rho, delta=delta, keys=keys, cuts=cuts,
            max_degree=max_degree, explain=explain,
        )

    def select_keys(
        self,
        columns: str | Iterable[str],
        epsilon: float,
        delta: float,
        *,
        max_groups: int | None = None,
    ) -> list[Hashable]:
        """Choose which keys of ``columns`` to release when none are public (noisy thresholding).

        Each key's row count gets discrete Laplace noise of scale ``1/epsilon`` and the keys
        whose noisy count reaches an integer threshold are returned (sorted), so a key that
        one unit alone holds is released with probability at most ``delta``; see
        :mod:`pinqpy.noise.keyselect`. Charges ``epsilon`` times the stability, and ``delta``.
        On a user-level frame, ``max_groups=G`` first limits every person to G distinct keys
        (the count is then of people, and the stability G). Use the keys with
        :meth:`partition`.

        The returned list also carries ``.counts``: the noisy counts that passed the
        threshold, a :class:`~pinqpy.NoisySeries` indexed by key with its accuracy. They are
        the selection's own noise (post-processing, no extra charge); :meth:`histogram`
        returns them directly.

        >>> import pandas as pd, pinqpy as pq
        >>> df = pd.DataFrame({"city": ["Oslo"] * 500 + ["Bergen"] * 300 + ["Hamar"]})
        >>> people = pq.PrivateFrame(df, pq.Budget(epsilon=1, delta=1e-6))
        >>> with pq.testing.seed(3):
        ...     keys = people.select_keys("city", epsilon=0.5, delta=1e-7)
        >>> list(keys), keys.counts.index.tolist()
        (['Bergen', 'Oslo'], ['Bergen', 'Oslo'])
        """
        return run.select_keys(self._rel, columns, epsilon, delta, max_groups)

    def histogram(
        self,
        columns: str | Iterable[str],
        epsilon: float,
        *,
        delta: float | None = None,
        keys: Iterable[Hashable] | None = None,
        max_groups: int | None = None,
    ) -> NoisySeries:
        """A noisy row count per key of ``columns``.

        * **Public keys** (``keys=`` given, or declared for every column): exactly
          ``partition(columns, keys).count(epsilon)``: every listed key, discrete Laplace noise
          of scale ``1/epsilon`` (sensitivity 1 per row), parallel composition, charged
          ``epsilon`` times the stability. ``delta`` is not used (nothing of it is charged).
        * **Unknown keys** (needs ``delta > 0``): the one-step thresholded release of
          :mod:`pinqpy.noise.keyselect`: each key that occurs gets the same discrete Laplace
          noise of scale ``1/epsilon``, and the keys whose noisy count reaches the threshold
          are returned with those noisy counts, sorted by key. A key that one unit alone holds
          (at most G keys of at most k rows per unit) is released with probability at most
          ``delta`` in all; the noisy counts cost what the public-key count costs. Charged
          ``epsilon`` times the stability, and ``delta``: the same epsilon as with public
          keys, with no budget spent on choosing keys separately.

        ``max_groups=G`` (user-level frames) first keeps at most G distinct keys per person
        and counts people; the stability is then G.

        >>> import pandas as pd, pinqpy as pq
        >>> df = pd.DataFrame({"city": ["Oslo"] * 500 + ["Bergen"] * 300 + ["Hamar"]})
        >>> budget = pq.Budget(epsilon=1, delta=1e-6)
        >>> people = pq.PrivateFrame(df, budget)
        >>> with pq.testing.seed(3):
        ...     h = people.histogram("city", epsilon=1, delta=1e-6)
        >>> h.index.tolist(), budget.spent == pq.Cost(1, 1e-6)
        (['Bergen', 'Oslo'], True)
        """
        try:
            cols = (columns,) if isinstance(columns, str) else tuple(columns)
        except TypeError:
            raise PinqError("histogram takes a column name or a list of column names") from None
        cols = tuple(self._rel.check_columns(cols))
        base = self
        unit = self.privacy_unit
        if max_groups is not None and unit is None:
            raise PrivacyError(
                "max_groups limits each person's keys on a user-level frame; this frame "
                "has no privacy unit (each row is one person already)"
            )
        declared = all(c in self.keys for c in cols)
        if keys is not None or declared:
            if max_groups is not None:
                base = self._wrap(
                    self._rel.distinct(dict.fromkeys([unit, *cols])).bound_contributions(max_groups)
                )
            parts = base.partition(list(cols) if len(cols) > 1 else cols[0], keys)
            return parts.count(epsilon)
        if delta is None or (not isinstance(delta, bool) and delta == 0):
            raise PrivacyError(
                f"histogram of {', '.join(map(repr, cols))}: its keys are not public, and "
                "reading them off the data would reveal who is in it. Pass keys=[...], declare "
                "keys on the frame, or give a delta (delta=1e-6) so that keys are selected "
                "privately"
            )
        selected = run.select_keys(self._rel, cols, epsilon, delta, max_groups, label="histogram")
        return selected.counts

    def accuracy(
        self,
        aggregation: str,
        column: ExprLike | str | Iterable[str] | None = None,
        *,
        epsilon: float,
        level: float = 0.95,
        bounds: tuple[float, float] | None = None,
        delta: float | None = None,
        q: float = 0.5,
        n: float | None = None,
        max_groups: int | None = None,
    ) -> AccuracyPreview:
        """How accurate an aggregation would be at ``epsilon``, without reading data or spending.

        ``aggregation`` is one of ``count``, ``sum``, ``mean``, ``median``, ``quantile``,
        ``variance``, ``stddev``, ``histogram``, ``select_keys``. The error is stated in the
        answer's own units, with the assumption behind it in ``.note`` (see
        :class:`~pinqpy.results.accuracy.AccuracyPreview`):

        * a **mean**'s error depends on the number of rows ``n``: pass ``n=`` (a guess, or a
          public count) for a figure in the column's units (first order, for any mean within
          the bounds). On a frame with a public row count (``public_size=True``) that count is
          used, and the note says so. Without either, the preview says which ``C`` the error
          ``C/n`` has;
        * a **median/quantile**'s error is in rows of rank; with ``n=`` it is also stated in
          values, assuming the values spread evenly over the bounds;
        * **histogram / select_keys** (``column`` the key column or columns, ``delta=`` and
          ``max_groups=`` as for :meth:`select_keys`): the threshold (a key needs about that
          many rows to be released with probability 1/2, ``.threshold``) and the error of the
          released counts. A histogram over public keys is a count per key.

        EXPLAIN shows the same figures for SQL.

        >>> import pandas as pd, pinqpy as pq
        >>> f = pq.PrivateFrame(pd.DataFrame({"age": [30]}), pq.Budget(epsilon=1))
        >>> f.accuracy("count", epsilon=0.1).error  # discrete Laplace(10): an integer bound
        30.0
        >>> round(f.accuracy("mean", "age", epsilon=1, bounds=(0, 100), n=1000).error, 2)
        0.41
        """
        return preview(
            self._rel,
            aggregation,
            unwrap(column),  # type: ignore[arg-type]
            epsilon=epsilon,
            level=level,
            bounds=bounds,
            delta=delta,
            q=q,
            n=n,
            max_groups=max_groups,
            declared_keys=tuple(self.keys),
        )

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
    v = _stability_value(k)
    return "inf" if v == math.inf else str(v)


def _tables_on(rel: Relation, budget: Budget) -> str:
    """The names of the tables of ``rel`` that draw on ``budget`` (a budget has no name of
    its own unless given one)."""
    from pinqpy.plan.nodes import Source

    names: list[str] = []
    stack = [rel.plan]
    while stack:
        node = stack.pop()
        if isinstance(node, Source) and rel.catalog.root_agent(node.table.agent) is budget:
            names.append(node.table.name)
        stack.extend(node.children)
    return ", ".join(dict.fromkeys(names))

