"""PrivateFrame: PINQ's PINQueryable over a pandas DataFrame.

A :class:`PrivateFrame` is a privacy-protected view of a table. The analyst transforms it
with stable transformations (lazy: they build plan nodes and read nothing) and learns about it
only through noisy aggregations, each of which charges ``epsilon × stability`` to the budgets
the frame draws on before any data is read.

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
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from pinqpy.accounting.agents import PartitionAgent, charge_all, flatten
from pinqpy.accounting.budget import Budget, check_delta, check_epsilon
from pinqpy.api.expressions import Expression
from pinqpy.engines.base import Executor, Grouping, Read, batch
from pinqpy.engines.registry import (
    Wrapped,
    engine_name,
    executor_for,
    note_type_sources,
    read_file,
    same_engine,
    wrap,
)
from pinqpy.errors import PinqError, PinqSyntaxError, PrivacyError
from pinqpy.expr.ast import AGGREGATE_FUNCTIONS, Call, Column, Expr
from pinqpy.expr.bounds import derive_bounds
from pinqpy.expr.check import check_expression, parse_and_check
from pinqpy.expr.parser import parse_expression
from pinqpy.expr.types import ColumnType
from pinqpy.noise import mechanisms as mech
from pinqpy.noise.keyselect import KeySelectionMechanism
from pinqpy.pipeline import answers as _answers
from pinqpy.plan.catalog import Catalog, agent_name, new_id
from pinqpy.plan.facts import facts_of
from pinqpy.plan.meta import FrameMeta, check_bounds, check_column_name, check_keys
from pinqpy.plan.nodes import (
    BoundContributions,
    Distinct,
    Explode,
    GroupBy,
    Join,
    PartitionRef,
    PlanNode,
    PublicJoin,
    PyFunc,
    Select,
    SetOp,
    Source,
    TableRef,
    Where,
)
from pinqpy.plan.public import public_table
from pinqpy.plan.stability import INF
from pinqpy.results.html import frame_html
from pinqpy.results.values import AccuracyPreview, NoisyCount, NoisyLabel, NoisyValue

if TYPE_CHECKING:
    from pinqpy.api.partition import Partition

__all__ = ["GroupedFrame", "PrivateFrame"]

ExprLike = str | Expression | Callable[[pd.DataFrame], Any]
_Target = tuple[Grouping, Mapping[object, Any]] | None


def _stability_value(k: Fraction | float) -> int | Fraction | float:
    if k == INF:
        return math.inf
    k = Fraction(k)
    return int(k) if k.denominator == 1 else k


class Prepared:
    """An aggregation ready to run: its mechanism (built from public parameters only) and how
    to read its exact aggregate. Nothing has been charged or read yet."""

    __slots__ = ("candidates", "check", "exact", "frame", "label", "mechanism", "read", "what")

    def __init__(
        self,
        frame: PrivateFrame,
        mechanism: Any,
        exact: Callable[[Grouping | None], Any],
        label: str,
        what: str | None = None,
        check: Callable[[], None] | None = None,
        read: Read | None = None,
    ):
        self.frame = frame
        self.mechanism = mechanism
        self.exact = exact
        self.label = label
        # What is aggregated, for the answer cache; None when it has no canonical form.
        self.what = what
        # The engine's own refusal (callables, unaggregatable types), run before the charge.
        self.check = check
        self.candidates: tuple[Hashable, ...] = ()
        # What ``exact`` reads, so the engine can read a query's aggregates together.
        self.read = read


class PrivateFrame:
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
    schema:
        Declared column types, ``{"code": "str"}`` (``int``, ``float``, ``str``, ``bool``,
        ``datetime``, ``any``). Each declared column is converted (pandas) or cast (DuckDB,
        Spark) when the frame is made; a value that does not convert is refused then. Other
        columns take the engine's type; a pandas ``object`` column is ``any``, whose values
        are each read as their own type (see the README).

    A PrivateFrame has no ``len()``, no iteration and no ``head()``; its repr shows the
    schema, the stability and the budget only.
    """

    __slots__ = ("_catalog", "_meta", "_plan")

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
    ):
        if not isinstance(budget, Budget):
            raise PinqError("PrivateFrame needs a pq.Budget as its budget")
        self._init(
            wrap(data, engine, connection, schema),
            budget,
            privacy_unit,
            bounds,
            keys,
            allow_callables,
            name,
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
    ) -> PrivateFrame:
        """A private frame over a CSV file (with a header row), read by ``engine``.

        Column types are inferred from the file, once, by the engine that reads it (DESCRIBE
        shows them as ``inferred``); ``schema={"code": "str"}`` declares a column's type
        instead, reading it as text and converting it. Arguments are those of
        :meth:`from_parquet`.

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
    ) -> PrivateFrame:
        if not isinstance(budget, Budget):
            raise PinqError("PrivateFrame needs a pq.Budget as its budget")
        wrapped = read_file(path, kind, engine, connection, schema=schema)
        if name is None:
            stem = os.path.basename(os.fspath(path).rstrip("/")).split(".")[0]
            name = stem if stem.isidentifier() else "table"
        frame = object.__new__(cls)
        frame._init(wrapped, budget, privacy_unit, bounds, keys, allow_callables, name)
        return frame

    def _init(
        self,
        wrapped: Wrapped,
        budget: Budget,
        privacy_unit: str | None,
        bounds: Mapping[str, tuple[float, float]] | None,
        keys: Mapping[str, Iterable[Hashable]] | None,
        allow_callables: bool,
        name: str,
    ) -> None:
        schema = wrapped.schema
        if privacy_unit is not None and privacy_unit not in schema:
            raise PinqError(f"privacy_unit names unknown column {privacy_unit!r}")
        meta_bounds = {}
        for col, b in (bounds or {}).items():
            if col not in schema:
                raise PinqError(f"bounds name unknown column {col!r}")
            meta_bounds[col] = check_bounds(b, repr(col))
        meta_keys = {}
        for col, ks in (keys or {}).items():
            if col not in schema:
                raise PinqError(f"keys name unknown column {col!r}")
            meta_keys[col] = check_keys(ks, (col,), schema)
        for col in schema:
            check_column_name(col)
        table = TableRef(
            new_id("table"),
            name,
            tuple(schema),
            agent_name(budget),
            privacy_unit,
            schema=dict(schema),
            bounds=meta_bounds,
            keys=meta_keys,
            allow_callables=bool(allow_callables),
        )
        note_type_sources(table, wrapped)
        self._plan: PlanNode = Source(table)
        self._catalog: Catalog = Catalog().with_table(table, wrapped.data, budget)
        self._meta: FrameMeta = facts_of(self._plan)

    @classmethod
    def _derive(cls, plan: PlanNode, catalog: Catalog) -> PrivateFrame:
        """A frame over ``plan``, whose names ``catalog`` resolves; its public facts are derived
        from the plan (pinqpy.plan.facts)."""
        frame = object.__new__(cls)
        frame._plan = plan
        frame._catalog = catalog
        frame._meta = facts_of(plan)
        return frame

    # -- public metadata ------------------------------------------------------------------
    @property
    def columns(self) -> list[str]:
        """The column names (the schema is public)."""
        return self._meta.columns

    @property
    def schema(self) -> dict[str, ColumnType]:
        """Column name -> type (``int``, ``float``, ``str``, ``bool``, ``datetime``, ``any``)."""
        return dict(self._meta.schema)

    @property
    def bounds(self) -> dict[str, tuple[float, float]]:
        """Declared public bounds that still hold for this frame's columns."""
        return dict(self._meta.bounds)

    @property
    def keys(self) -> dict[str, tuple[Hashable, ...]]:
        """Declared public keys per column."""
        return dict(self._meta.keys)

    @property
    def engine(self) -> str:
        """Where exact aggregates are computed: ``"pandas"``, ``"duckdb"`` or ``"spark"``."""
        return engine_name(self._plan, self._catalog)

    @property
    def privacy_unit(self) -> str | None:
        """The column naming each row's owner, while it is still tracked."""
        return self._meta.privacy_unit

    @property
    def stabilities(self) -> dict[Budget, int | Fraction | float]:
        """``{budget: multiplier}`` for every budget the frame draws on.

        The multiplier is how many of this frame's rows one privacy unit of that budget's
        table can change; a query of epsilon on this frame costs that budget at most
        ``epsilon × multiplier``.
        """
        lineage = self._catalog.lineage(self._plan)
        return {b: _stability_value(k) for b, k in flatten(lineage).items()}

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

    # -- no leaks -------------------------------------------------------------------------
    def _repr_html_(self) -> str:
        return frame_html(self)

    def __repr__(self) -> str:
        cols = ", ".join(f"{c}: {t}" for c, t in self._meta.schema.items())
        try:
            lin = flatten(self._catalog.lineage(self._plan))
            parts = [f"stability={_fmt(k)}, budget={b!r}" for b, k in lin.items()]
        except Exception:  # pragma: no cover - repr must never fail
            parts = []
        unit = f", privacy_unit={self._meta.privacy_unit!r}" if self._meta.privacy_unit else ""
        return f"PrivateFrame([{cols}]{unit}, " + "; ".join(parts) + ")"

    def __len__(self) -> int:
        raise PrivacyError(
            "a PrivateFrame has no length: the row count is private; use .count(epsilon=...) "
            "for a noisy count"
        )

    def __bool__(self) -> bool:
        return True

    def __iter__(self) -> Iterator[Any]:
        raise PrivacyError(
            "a PrivateFrame cannot be iterated: its rows are private; use noisy aggregations"
        )

    def head(self, *args: object, **kwargs: object) -> None:
        raise PrivacyError(
            "a PrivateFrame cannot show rows: they are private; use noisy aggregations such "
            "as .count(), .mean() or .partition(...).count()"
        )

    tail = sample = head

    def __getitem__(self, item: object) -> None:
        raise PrivacyError(
            "a PrivateFrame cannot be indexed; use .select(...) to keep columns and "
            ".where(...) to filter rows"
        )

    def __reduce__(self) -> None:  # pickling would carry the private rows
        raise PrivacyError("a PrivateFrame cannot be pickled: it holds private data")

    def __copy__(self) -> PrivateFrame:
        return self

    def __deepcopy__(self, memo: object) -> PrivateFrame:
        return self

    # -- expressions ----------------------------------------------------------------------
    def _expr(self, value: ExprLike, what: str, *, want_bool: bool = False) -> Expr | PyFunc:
        if callable(value) and not isinstance(value, Expression | str):
            if not self._meta.allow_callables:
                raise PrivacyError(
                    f"{what} must be an expression string or pq.col(...) expression, not a "
                    "Python callable: callables run your own code on the private rows, so they "
                    "are allowed only where the curator created the frame with "
                    "allow_callables=True"
                )
            return PyFunc(value, getattr(value, "__name__", "callable"))
        if isinstance(value, str):
            text = value
            e, ctype = parse_and_check(value, self._meta.schema)
        elif isinstance(value, Expression):
            e, text = value.expr, None
            ctype = check_expression(e, self._meta.schema)
        else:
            raise PinqError(
                f"{what} must be an expression string, a pq.col(...) expression or a callable"
            )
        if want_bool and ctype not in ("bool", "any"):
            if text is not None:
                e = parse_expression(text)  # with positions, for the caret
            raise PinqSyntaxError(
                f"{what} must be a condition (true or false), but it is of type {ctype}",
                text=text,
                line=e.pos.line if (text and e.pos) else None,
                column=e.pos.column if (text and e.pos) else None,
            )
        return e

    def _column_expr(self, column: ExprLike, what: str) -> Expr | PyFunc:
        """A column name or an expression over columns."""
        if isinstance(column, str) and column in self._meta.schema:
            return Column(column)
        return self._expr(column, what)

    def _expr_type(self, e: Expr | PyFunc) -> ColumnType:
        if isinstance(e, PyFunc):
            return "any"
        return check_expression(e, self._meta.schema)

    def _expr_bounds(self, e: Expr | PyFunc) -> tuple[float, float] | None:
        if isinstance(e, PyFunc):
            return None
        return derive_bounds(e, self._meta.bounds)

    # -- stable transformations -----------------------------------------------------------
    def where(self, condition: ExprLike) -> PrivateFrame:
        """Keep the rows where ``condition`` is true (NULL counts as false). Stability 1."""
        pred = self._expr(condition, "where's condition", want_bool=True)
        return self._derive(Where(self._plan, pred), self._catalog)

    filter = where

    def select(self, *columns: str, **exprs: ExprLike) -> PrivateFrame:
        """Keep ``columns`` and add computed ones (``decade="FLOOR(age / 10)"``). Stability 1."""
        outputs: list[tuple[str, Expr | PyFunc]] = []
        for c in columns:
            if not isinstance(c, str) or c not in self._meta.schema:
                raise self._unknown_column(c)
            outputs.append((c, Column(c)))
        for name, value in exprs.items():
            outputs.append((name, self._expr(value, f"select's {name!r}")))
        if not outputs:
            raise PinqError("select needs at least one column or expression")
        names = [n for n, _ in outputs]
        if len(set(names)) != len(names):
            raise PinqError("select would produce two columns with the same name")
        return self._derive(Select(self._plan, tuple(outputs), False), self._catalog)

    def assign(self, **exprs: ExprLike) -> PrivateFrame:
        """Keep every column and add or replace computed ones. Stability 1."""
        if not exprs:
            raise PinqError("assign needs at least one name=expression")
        outputs = [(n, self._expr(v, f"assign's {n!r}")) for n, v in exprs.items()]
        return self._derive(Select(self._plan, tuple(outputs), True), self._catalog)

    def distinct(self, *columns: str) -> PrivateFrame:
        """One row per distinct combination of ``columns`` (all when none). Stability 1."""
        cols = self._check_columns(columns) if columns else tuple(self._meta.schema)
        return self._derive(Distinct(self._plan, tuple(dict.fromkeys(cols))), self._catalog)

    def explode(self, column: str, max_items: int) -> PrivateFrame:
        """PINQ's SelectMany: one row per item of the list in ``column``, at most
        ``max_items`` per input row (longer lists are cut). Stability ``max_items``."""
        (col,) = self._check_columns((column,))
        k = _positive_int(max_items, "max_items")
        return self._derive(Explode(self._plan, col, k), self._catalog)

    def groupby(self, *keys: str | list[str]) -> GroupedFrame:
        """PINQ's GroupBy; finish with ``.agg(name="AGG(expr)", ...)``. Stability 2 (1 when the
        keys are exactly the frame's privacy unit)."""
        flat: list[str] = []
        for k in keys:
            flat.extend([k] if isinstance(k, str) else list(k))
        if not flat:
            raise PinqError("groupby needs at least one key column")
        return GroupedFrame(self, self._check_columns(flat))

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
        on_cols = (on,) if isinstance(on, str) else tuple(on)
        if not on_cols:
            raise PinqError("join needs at least one key column in on=")
        self._check_columns(on_cols)
        if isinstance(other, pd.DataFrame):
            return self._public_join(other, on_cols, how, name)
        if not isinstance(other, PrivateFrame):
            raise PinqError("join needs a PrivateFrame or a public pandas DataFrame")
        catalog = self._catalog.merge(other._catalog)
        same_engine(self._plan, other._plan, "join", catalog)
        if how != "inner":
            raise PinqError("a join of two private frames is an inner join")
        other._check_columns(on_cols)
        for c in on_cols:
            _check_join_types(c, self._meta.schema[c], other._meta.schema[c])
        if max_rows_per_key is None:
            if not (self._meta.unique_on(on_cols) and other._meta.unique_on(on_cols)):
                raise PrivacyError(
                    "a join of two private frames needs max_rows_per_key=(b_left, b_right) "
                    "unless both sides are known to be unique on the key (for example, each "
                    "is a groupby on it)"
                )
            bounds = None
        else:
            try:
                b_left, b_right = max_rows_per_key
            except (TypeError, ValueError):
                raise PinqError("max_rows_per_key must be a pair (b_left, b_right)") from None
            bounds = (_positive_int(b_left, "b_left"), _positive_int(b_right, "b_right"))
        return self._derive(Join(self._plan, other._plan, on_cols, bounds), catalog)

    def _public_join(
        self,
        public: pd.DataFrame,
        on: tuple[str, ...],
        how: Literal["inner", "left"],
        name: str = "public",
    ) -> PrivateFrame:
        if how not in ("inner", "left"):
            raise PinqError("how must be 'inner' or 'left'")
        table, rows = public_table(public, name)
        missing = [c for c in on if c not in table.columns]
        if missing:
            raise PinqError(f"the public table has no column {missing[0]!r}")
        for c in on:
            _check_join_types(c, self._meta.schema[c], table.schema[c])  # type: ignore[index]
        mult = _key_multiplicity(rows, on)
        catalog = self._catalog.with_public(table, rows)
        return self._derive(PublicJoin(self._plan, table, on, how, mult), catalog)

    def _set_op(
        self, other: PrivateFrame, kind: Literal["concat", "union", "intersect", "difference"]
    ) -> PrivateFrame:
        if not isinstance(other, PrivateFrame):
            raise PinqError(f"{kind} needs another PrivateFrame")
        catalog = self._catalog.merge(other._catalog)
        same_engine(self._plan, other._plan, kind, catalog)
        if self.columns != other.columns:
            raise PinqError(
                f"{kind} needs both frames to have the same columns in the same order; use "
                ".select(...) to line them up"
            )
        return self._derive(SetOp(kind, self._plan, other._plan), catalog)

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

    def bound_contributions(self, max_rows: int) -> PrivateFrame:
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
        """
        k = _positive_int(max_rows, "max_rows")
        unit = self._meta.privacy_unit
        if unit is None:
            raise PrivacyError(
                "bound_contributions needs a user-level frame: create the PrivateFrame with "
                "privacy_unit='<id column>' and keep that column unchanged until you bound it "
                "(a column computed from it, one assigned over it, or one combined with "
                "another budget's table no longer identifies that budget's people)"
            )
        return self._derive(BoundContributions(self._plan, unit, k), self._catalog)

    def partition(
        self, columns: str | Iterable[str], keys: Iterable[Hashable] | None = None
    ) -> Partition:
        """Split into parts by public ``keys`` (parallel composition); see :class:`Partition`."""
        from pinqpy.api.partition import Partition

        cols = (columns,) if isinstance(columns, str) else tuple(columns)
        cols = self._check_columns(cols)
        if keys is None:
            declared = [self._meta.keys.get(c) for c in cols]
            if any(d is None for d in declared):
                missing = next(c for c, d in zip(cols, declared, strict=True) if d is None)
                raise PrivacyError(
                    f"partition needs public keys for {missing!r}: pass keys=[...] or declare "
                    f"keys={{{missing!r}: [...]}} on the PrivateFrame; keys are never read off "
                    "the data"
                )
            if len(cols) == 1:
                keys = declared[0]
            else:
                import itertools

                keys = list(itertools.product(*declared))  # type: ignore[arg-type]
        key_tuple = check_keys(keys, cols, self._meta.schema)
        lineage = self._catalog.lineage(self._plan)
        self._require_bounded(lineage, "partition")
        agent = PartitionAgent(lineage)
        ref = PartitionRef(self._plan, cols, key_tuple, agent_name(agent))
        return Partition(self, ref, self._catalog.with_agent(ref.agent, agent))

    def select_keys(
        self,
        columns: str | Iterable[str],
        epsilon: float,
        delta: float,
        *,
        max_groups: int | None = None,
    ) -> list[Hashable]:
        """Choose which keys of ``columns`` to release when none are public (noisy thresholding).

        Each key's row count gets Laplace noise of scale ``1/epsilon`` and the keys whose noisy
        count exceeds ``1 + ln(1/(2·delta))/epsilon`` are returned (sorted), so a key that one
        row alone holds is released with probability at most ``delta``; see
        :mod:`pinqpy.noise.keyselect`. Charges (epsilon, delta) times the stability. On a
        user-level frame, ``max_groups=G`` first limits every person to G distinct keys (the
        count is then of people, and the stability G). Use the keys with :meth:`partition`.

        >>> import pandas as pd, pinqpy as pq
        >>> df = pd.DataFrame({"city": ["Oslo"] * 500 + ["Bergen"] * 300 + ["Hamar"]})
        >>> people = pq.PrivateFrame(df, pq.Budget(epsilon=1, delta=1e-6))
        >>> with pq.testing.seed(3):
        ...     people.select_keys("city", epsilon=0.5, delta=1e-7)
        ['Bergen', 'Oslo']
        """
        cols = (columns,) if isinstance(columns, str) else tuple(columns)
        cols = self._check_columns(cols)
        m = KeySelectionMechanism(_eps(epsilon), check_delta(delta, "delta"))
        unit = self._meta.privacy_unit
        base = self
        if max_groups is not None:
            if unit is None:
                raise PrivacyError(
                    "max_groups limits each person's keys on a user-level frame; this frame "
                    "has no privacy unit (each row is one person already)"
                )
            base = self.distinct(*dict.fromkeys([unit, *cols])).bound_contributions(max_groups)
        lin = base._catalog.lineage(base._plan)
        if any(k == INF for k in flatten(lin).values()):
            raise PrivacyError(
                f"select_keys on a user-level frame needs max_groups=G: each person (by "
                f"{unit!r}) then counts toward at most G keys"
                if unit
                else "select_keys on a frame with unbounded contributions: bound them first"
            )
        ex = executor_for(base._plan, base._catalog)
        ex.validate(base._plan)
        charge_all([(lin, m.charge)], label="select_keys")
        with _reading("select_keys"):
            keys, counts = ex.key_counts(base._plan, cols)
            selected, _ = m.release(keys, counts)
        return selected

    def accuracy(
        self,
        aggregation: str,
        column: ExprLike | None = None,
        *,
        epsilon: float,
        level: float = 0.95,
        bounds: tuple[float, float] | None = None,
        delta: float | None = None,
        q: float = 0.5,
        n: float | None = None,
    ) -> AccuracyPreview:
        """How accurate an aggregation would be at ``epsilon``, without reading data or spending.

        ``aggregation`` is one of ``count``, ``sum``, ``mean``, ``median``, ``quantile``,
        ``variance``, ``stddev``. ``n`` (a guess at the number of rows, public) sharpens the
        bound of a mean. EXPLAIN shows the same figures for SQL.

        >>> import pandas as pd, pinqpy as pq
        >>> f = pq.PrivateFrame(pd.DataFrame({"age": [30]}), pq.Budget(epsilon=1))
        >>> f.accuracy("count", epsilon=0.1).error  # discrete Laplace(10): an integer bound
        30.0
        """
        kind = aggregation.lower()
        if kind == "count":
            prep = self._prep_count(epsilon, delta)
        elif kind in ("sum", "mean"):
            if column is None:
                raise PinqError(f"accuracy({kind!r}) needs a column")
            method = self._prep_sum if kind == "sum" else self._prep_mean
            prep = method(column, epsilon, bounds, delta)
        elif kind in ("median", "quantile"):
            if column is None:
                raise PinqError(f"accuracy({kind!r}) needs a column")
            prep = self._prep_quantile(
                column, 0.5 if kind == "median" else q, epsilon, bounds, None
            )
        elif kind in ("variance", "stddev"):
            if column is None:
                raise PinqError(f"accuracy({kind!r}) needs a column")
            prep = self._prep_variance(column, epsilon, bounds, delta, stddev=kind == "stddev")
        else:
            raise PinqError(
                "accuracy() knows count, sum, mean, median, quantile, variance and stddev"
            )
        m = prep.mechanism
        unit = ""
        if kind == "mean":
            err = m.accuracy(level, n=n)
        elif kind in ("median", "quantile"):
            err, unit = m.accuracy(level), "ranks"
        else:
            err = m.accuracy(level)
        lin = self._catalog.lineage(self._plan)
        self._require_bounded(lin, kind)
        charge = {repr(b): m.charge.at(Fraction(k)) for b, k in flatten(lin).items()}
        return AccuracyPreview(
            kind, m.describe(), m.epsilon, float(level), float(err), unit, m.noise_scale, charge
        )

    # -- noisy aggregations ---------------------------------------------------------------
    def count(self, epsilon: float, *, delta: float | None = None) -> NoisyValue:
        """A noisy row count.

        Sensitivity 1 (adding or removing a row changes the count by 1), so the Laplace
        mechanism adds noise of scale ``1/epsilon``; with ``delta=`` the analytic Gaussian
        mechanism is calibrated to (epsilon, delta). The budget is charged ``epsilon ×
        stability`` (and delta, with group privacy for stability > 1).

        >>> import pandas as pd, pinqpy as pq
        >>> f = pq.PrivateFrame(pd.DataFrame({"x": range(100)}), pq.Budget(epsilon=1))
        >>> with pq.testing.seed(1):
        ...     n = f.count(epsilon=0.5)
        >>> 80 < n < 120
        True
        """
        return _scalar(*self._count(epsilon, delta, None))

    def sum(
        self,
        column: ExprLike,
        epsilon: float,
        bounds: tuple[float, float] | None = None,
        *,
        delta: float | None = None,
    ) -> NoisyValue:
        """A noisy sum of ``column`` with every value clamped into ``bounds``.

        NULLs are ignored; ±inf are clamped like any value. Adding or removing a row changes
        the clamped sum by at most ``max(|lo|, |hi|)``: that is the sensitivity the noise is
        scaled to (Laplace scale ``max(|lo|, |hi|)/epsilon``).
        """
        return _scalar(*self._sum(column, epsilon, bounds, delta, None))

    def mean(
        self,
        column: ExprLike,
        epsilon: float,
        bounds: tuple[float, float] | None = None,
        *,
        delta: float | None = None,
    ) -> NoisyValue:
        """A noisy mean of ``column`` clamped into ``bounds``; exactly epsilon-DP.

        Half of epsilon goes to a sum of ``x - mid`` (sensitivity ``(hi - lo)/2``), half to
        the count (sensitivity 1); the mean is ``mid + sum/count`` clamped into the bounds.
        See :class:`pinqpy.noise.mechanisms.MeanMechanism`. It is never NaN, even for no rows.
        """
        return _scalar(*self._mean(column, epsilon, bounds, delta, None))

    def median(
        self,
        column: ExprLike,
        epsilon: float,
        bounds: tuple[float, float] | None = None,
        *,
        candidates: Iterable[float] | None = None,
    ) -> NoisyValue:
        """A noisy median by the exponential mechanism; see :meth:`quantile`."""
        return self.quantile(column, 0.5, epsilon, bounds, candidates=candidates)

    def quantile(
        self,
        column: ExprLike,
        q: float,
        epsilon: float,
        bounds: tuple[float, float] | None = None,
        *,
        candidates: Iterable[float] | None = None,
    ) -> NoisyValue:
        """A noisy ``q``-quantile of ``column`` within ``bounds``, exactly epsilon-DP.

        The exponential mechanism picks among public candidate values with utility
        ``-|(1-q)·#{x < c} - q·#{x > c}|``, whose sensitivity is ``max(q, 1-q)``; see
        :class:`pinqpy.noise.mechanisms.QuantileMechanism`, which also explains how ``ci()`` is
        given in value space.
        """
        return _scalar(*self._quantile(column, q, epsilon, bounds, candidates, None))

    def argmax(
        self, column: ExprLike, candidates: Iterable[Hashable], epsilon: float
    ) -> NoisyLabel:
        """The most frequent of the public ``candidates`` in ``column``, by report-noisy-max.

        Each row adds 1 to at most one candidate's count, and counts only grow when a row is
        added, so selecting with weights ``exp(epsilon·count)`` is exactly epsilon-DP; pinqpy
        samples it by permute-and-flip with exact coins (see
        :class:`pinqpy.noise.mechanisms.ArgmaxMechanism`).
        """
        cands, (idx, acc) = self._argmax(column, candidates, epsilon, None)
        return NoisyLabel(cands[int(np.asarray(idx)[0])], acc)

    # Shared by the scalar methods above, by Partition's per-key versions and by SQL: each
    # _prep_* validates its arguments and builds the mechanism from public parameters only,
    # returning what to charge and how to read the exact aggregate; _run charges, then reads.
    # ``target`` is None for the whole frame, or (grouping, lineage) for all parts at once.
    def _count(self, epsilon: object, delta: object, target: _Target) -> tuple[Any, Any]:
        return self._run([self._prep_count(epsilon, delta)], target)[0]

    def _sum(
        self, column: ExprLike, epsilon: object, bounds: Any, delta: object, target: _Target
    ) -> tuple[Any, Any]:
        return self._run([self._prep_sum(column, epsilon, bounds, delta)], target)[0]

    def _mean(
        self, column: ExprLike, epsilon: object, bounds: Any, delta: object, target: _Target
    ) -> tuple[Any, Any]:
        return self._run([self._prep_mean(column, epsilon, bounds, delta)], target)[0]

    def _quantile(
        self,
        column: ExprLike,
        q: object,
        epsilon: object,
        bounds: Any,
        candidates: Any,
        target: _Target,
    ) -> tuple[Any, Any]:
        return self._run([self._prep_quantile(column, q, epsilon, bounds, candidates)], target)[0]

    def _argmax(
        self, column: ExprLike, candidates: Any, epsilon: object, target: _Target
    ) -> tuple[tuple[Hashable, ...], tuple[Any, Any]]:
        prep = self._prep_argmax(column, candidates, epsilon)
        return prep.candidates, self._run([prep], target)[0]

    def _prep_count(self, epsilon: object, delta: object) -> Prepared:
        m = mech.CountMechanism(_eps(epsilon), _delta(delta))
        plan = self._plan
        ex = executor_for(plan, self._catalog)
        return Prepared(
            self,
            m,
            lambda g: ex.count(plan, g),
            "count",
            "count()",
            lambda: ex.validate(plan),
            Read(ex, plan, "count"),
        )

    def _prep_sum(self, column: ExprLike, epsilon: object, bounds: Any, delta: object) -> Prepared:
        e, (lo, hi) = self._numeric_arg(column, bounds, "sum")
        m = mech.SumMechanism(_eps(epsilon), lo, hi, _delta(delta))
        plan, ex = self._plan, executor_for(self._plan, self._catalog)
        return Prepared(
            self,
            m,
            lambda g: ex.clamped_sum(plan, g, e, lo, hi)[0],
            "sum",
            _what("sum", e),
            lambda: ex.validate(plan, e, numeric=True),
            Read(ex, plan, "sum", e, lo, hi),
        )

    def _prep_mean(self, column: ExprLike, epsilon: object, bounds: Any, delta: object) -> Prepared:
        e, (lo, hi) = self._numeric_arg(column, bounds, "mean")
        m = mech.MeanMechanism(_eps(epsilon), lo, hi, _delta(delta))
        plan, ex = self._plan, executor_for(self._plan, self._catalog)
        return Prepared(
            self,
            m,
            lambda g: _drop_squares(ex.lattice_sums(plan, g, e, lo, hi)),
            "mean",
            _what("mean", e),
            lambda: ex.validate(plan, e, numeric=True),
            Read(ex, plan, "mean", e, lo, hi),
        )

    def _prep_variance(
        self, column: ExprLike, epsilon: object, bounds: Any, delta: object, *, stddev: bool
    ) -> Prepared:
        what = "stddev" if stddev else "variance"
        e, (lo, hi) = self._numeric_arg(column, bounds, what)
        m = mech.VarianceMechanism(_eps(epsilon), lo, hi, _delta(delta), stddev=stddev)
        plan, ex = self._plan, executor_for(self._plan, self._catalog)
        return Prepared(
            self,
            m,
            lambda g: ex.lattice_sums(plan, g, e, lo, hi, squares=True),
            what,
            _what(what, e),
            lambda: ex.validate(plan, e, numeric=True),
            Read(ex, plan, "moments", e, lo, hi),
        )

    def _prep_quantile(
        self, column: ExprLike, q: object, epsilon: object, bounds: Any, candidates: Any
    ) -> Prepared:
        qq = _quantile_level(q)
        e, (lo, hi) = self._numeric_arg(column, bounds, "quantile")
        cand = None if candidates is None else _candidates(candidates, lo, hi)
        m = mech.QuantileMechanism(_eps(epsilon), qq, lo, hi, cand)
        plan, ex = self._plan, executor_for(self._plan, self._catalog)
        return Prepared(
            self,
            m,
            lambda g: ex.buckets(plan, g, e, m.candidates),
            "quantile",
            _what("quantile", e, _answers.grid_digest(m.candidates), len(m.candidates)),
            lambda: ex.validate(plan, e, numeric=True),
        )

    def _prep_argmax(self, column: ExprLike, candidates: Any, epsilon: object) -> Prepared:
        e = self._column_expr(column, "argmax's column")
        cands = _argmax_candidates(candidates)
        m = mech.ArgmaxMechanism(_eps(epsilon), len(cands))
        plan, ex = self._plan, executor_for(self._plan, self._catalog)
        prep = Prepared(
            self,
            m,
            lambda g: ex.candidate_counts(plan, g, e, cands),
            "argmax",
            _what("argmax", e, repr(cands)),
            lambda: ex.validate(plan, e),
        )
        prep.candidates = cands
        return prep

    # -- aggregation plumbing -------------------------------------------------------------
    def _require_bounded(self, lineage: Mapping[object, Any], what: str) -> None:
        flat = flatten(lineage)
        if any(k == INF for k in flat.values()):
            unit = self._meta.privacy_unit
            how = (
                f"call .bound_contributions(max_rows=k) to keep at most k rows per "
                f"{unit!r}, or .groupby({unit!r}) so each person is one row"
                if unit
                else "bound each person's rows with .bound_contributions(max_rows=k) before "
                "transforming the user-level frame"
            )
            raise PrivacyError(
                f"{what} on a user-level frame whose contributions are unbounded: one person "
                f"could change any number of rows; {how}"
            )

    @staticmethod
    def _run(
        prepared: list[Prepared],
        target: _Target,
        label: str | None = None,
        *,
        charged: bool = False,
    ) -> list[tuple[np.ndarray, Any]]:
        """Check and charge every prepared aggregate in one transaction, then read and release.

        Nothing touches data until the whole charge is accepted; if any budget refuses, none
        is charged. An aggregation asked before (same plan, same source, same mechanism and
        parameters) returns its earlier answer and charges nothing. ``charged=True`` means
        the caller already charged these aggregations (as part of a larger transaction).
        The checks and reads share one executor batch, so aggregates of one relation
        evaluate it once.
        """
        with batch():
            return PrivateFrame._run_batch(prepared, target, label, charged)

    @staticmethod
    def _run_batch(
        prepared: list[Prepared], target: _Target, label: str | None, charged: bool
    ) -> list[tuple[np.ndarray, Any]]:
        grouping = None if target is None else target[0]
        lineages = [
            p.frame._catalog.lineage(p.frame._plan) if target is None else target[1]
            for p in prepared
        ]
        for p, lin in zip(prepared, lineages, strict=True):
            p.frame._require_bounded(lin, p.label)
        # A budget kept in a ledger remembers whole answers across restarts.
        budgets = {b for lin in lineages for b in flatten(lin)}
        ledgered = [b for b in budgets if b._ledger is not None]
        pkey = _answers.persistent_key(prepared, grouping, ledgered) if ledgered else None
        if pkey is not None:
            for b in ledgered:
                stored = b._ledger_answer(pkey)
                if stored is not None:
                    return _answers.decode(stored)
        keys: list[str | None] = []
        hits: dict[int, tuple[np.ndarray, Any]] = {}
        requests = []
        for i, (p, lin) in enumerate(zip(prepared, lineages, strict=True)):
            key = _answers.key(p, grouping)
            keys.append(key)
            hit = _answers.get(key, lin)
            if hit is not None:
                hits[i] = hit
            else:
                if p.check is not None and not charged:
                    p.check()
                requests.append((lin, p.mechanism.charge))
        receipt = None
        if requests and not charged:
            receipt = charge_all(
                requests,
                label=label or ", ".join(p.label for p in prepared),
                plan=_plan_text(prepared),
                cache_key=pkey,
            )
        _prefetch([p for i, p in enumerate(prepared) if i not in hits], grouping)
        out = []
        for i, p in enumerate(prepared):
            if i in hits:
                out.append(hits[i])
                continue
            with _reading(p.label):
                data = p.exact(grouping)
                released = (
                    p.mechanism.release(*data)
                    if isinstance(data, tuple)
                    else p.mechanism.release(data)
                )
            _answers.put(keys[i], lineages[i], released, p.frame._plan)
            out.append(released)
        if receipt is not None and pkey is not None:
            try:
                text = _answers.encode(out)
            except _answers.NotStorable:  # no data form: cached in memory only
                return out
            for ledger, query_id in receipt.queries.items():
                ledger.store_answer(query_id, pkey, text)  # type: ignore[attr-defined]
        return out

    def _numeric_arg(
        self, column: ExprLike, bounds: tuple[float, float] | None, what: str
    ) -> tuple[Expr | PyFunc, tuple[float, float]]:
        e = self._column_expr(column, f"{what}'s column")
        t = self._expr_type(e)
        if t not in ("int", "float", "bool", "any"):
            raise PinqError(f"{what} needs a numeric column or expression, not one of type {t}")
        if bounds is not None:
            return e, check_bounds(bounds, f"{what}")
        b = self._expr_bounds(e)
        if b is None:
            name = e.name if isinstance(e, Column) else "this expression"
            raise PrivacyError(
                f"{what} needs bounds for {name}: pass bounds=(lo, hi), or declare "
                f"bounds={{{name!r}: (lo, hi)}} on the PrivateFrame; bounds are never read off "
                "the data"
            )
        return e, b

    def _check_columns(self, columns: Iterable[object]) -> tuple[str, ...]:
        out = []
        for c in columns:
            if not isinstance(c, str) or c not in self._meta.schema:
                raise self._unknown_column(c)
            out.append(c)
        return tuple(out)

    def _unknown_column(self, name: object) -> PinqError:
        import difflib

        if not isinstance(name, str):
            return PinqError(f"column names must be strings, not {type(name).__name__}")
        hint = difflib.get_close_matches(name, self.columns, n=1)
        extra = f"; did you mean {hint[0]!r}?" if hint else ""
        return PinqSyntaxError(f"unknown column {name!r}{extra}", text=name, line=1, column=1)


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
        frame, meta = self._frame, self._frame._meta
        calls: list[tuple[str, Call]] = []
        for name, value in aggs.items():
            if name in self._keys:
                raise PinqError(f"agg output {name!r} clashes with a group key")
            if isinstance(value, str):
                e, text = parse_expression(value, positions=False), value
            elif isinstance(value, Expression):
                e, text = value.expr, None
            else:
                raise PinqError(f"agg {name!r} must be an aggregate expression string")
            if not (isinstance(e, Call) and e.name in AGGREGATE_FUNCTIONS):
                raise PinqSyntaxError(
                    f"agg {name!r} must be one aggregate call such as COUNT(*) or SUM(x)",
                    text=text,
                    line=1 if text else None,
                    column=1 if text else None,
                )
            if e.name not in ("COUNT", "SUM", "AVG", "MIN", "MAX", "MEDIAN", "VARIANCE", "STDDEV"):
                raise PinqSyntaxError(
                    f"{e.name} is not available inside groupby().agg()",
                    text=text,
                    line=1 if text else None,
                    column=1 if text else None,
                )
            if text is not None:
                e, _ = parse_and_check(text, meta.schema, allow_aggregates=True)
            else:
                check_expression(e, meta.schema, allow_aggregates=True)
            calls.append((name, e))
        unit = meta.privacy_unit
        by_unit = unit is not None and self._keys == (unit,)
        return PrivateFrame._derive(
            GroupBy(frame._plan, self._keys, tuple(calls), by_unit), frame._catalog
        )

    def __repr__(self) -> str:
        return f"GroupedFrame(keys={list(self._keys)}); call .agg(name='COUNT(*)', ...)"


# -- helpers ---------------------------------------------------------------------------------
def _fmt(k: Fraction | float) -> str:
    v = _stability_value(k)
    return "inf" if v == math.inf else str(v)


def _eps(epsilon: object) -> Fraction:
    return check_epsilon(epsilon, "epsilon")


def _delta(delta: object) -> Fraction | None:
    return None if delta is None else check_delta(delta, "delta")


def _positive_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise PinqError(f"{what} must be a positive whole number")
    return int(value)


def _quantile_level(q: object) -> float:
    try:
        qq = float(q)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise PinqError("q must be a number between 0 and 1") from None
    if not 0 <= qq <= 1:
        raise PinqError("q must be between 0 and 1")
    return qq


def _candidates(values: Iterable[float], lo: float, hi: float) -> np.ndarray:
    try:
        arr = np.unique(np.asarray(list(values), dtype="float64"))
    except (TypeError, ValueError):
        raise PinqError("candidates must be numbers") from None
    if len(arr) < 2 or not np.all(np.isfinite(arr)):
        raise PinqError("candidates must be at least two finite numbers")
    if arr[0] < lo or arr[-1] > hi:
        raise PinqError("candidates must lie within the bounds")
    return np.unique(np.concatenate([[lo], arr, [hi]]))


def _plain_value(v: object) -> bool:
    import datetime as dt

    if isinstance(v, tuple):
        return all(_plain_value(x) for x in v)
    return type(v) in (str, int, float, bool) or isinstance(
        v, np.generic | dt.date | dt.datetime | pd.Timestamp
    )


def _argmax_candidates(candidates: Iterable[Hashable]) -> tuple[Hashable, ...]:
    if isinstance(candidates, str) or not isinstance(candidates, Iterable):
        raise PinqError("argmax needs a list of public candidates")
    from pinqpy.plan.keys import is_null_key

    cands = tuple(candidates)
    if not cands:
        raise PinqError("argmax needs at least one candidate")
    for c in cands:  # all refused before any charge: candidates are public
        if is_null_key(c):
            raise PinqError(
                "argmax candidates cannot be NULL or NaN (a NULL equals no value); "
                "filter NULLs out or map them to a value first"
            )
        # Plain values only: an object of the analyst's own class would run its own __eq__
        # against private values while an engine compares them.
        if not _plain_value(c):
            raise PinqError(
                "argmax candidates must be plain hashable values (text, numbers, booleans, "
                f"dates, or tuples of them), not {type(c).__name__}"
            )
    if len(set(cands)) != len(cands):
        raise PinqError("argmax candidates must not repeat")
    return cands


def _plan_text(prepared: list[Prepared]) -> str:
    """The canonical plans and aggregations of a charge, for the ledger's audit trail."""
    from pinqpy.plan.canonical import NotCanonical, canonical_plan

    parts = []
    for p in prepared:
        try:
            plan = canonical_plan(p.frame._plan, lambda t: t.name, p.frame._catalog)
        except NotCanonical:
            plan = "<plan with a Python callable>"
        parts.append(f"{p.what or p.label} over {plan}")
    return "; ".join(parts)


@contextmanager
def _reading(label: str) -> Iterator[None]:
    """Engine failures while reading become a PinqError that quotes nothing: engine messages
    can quote values. The charge stands, since data may have been read.

    No warning escapes a read either: whether numpy or pandas warns (an overflow, an invalid
    value) can depend on the rows, so every warning is silenced while the data is read."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            yield
    except PinqError:
        raise
    except Exception as exc:
        raise PinqError(
            f"the {label} failed while reading the data ({type(exc).__name__}); "
            "its charge was spent and nothing was released"
        ) from None


def _prefetch(prepared: Sequence[Prepared], grouping: Grouping | None) -> None:
    """Offer each engine the reads it is about to make, so it can make several in one pass."""
    by_engine: dict[int, tuple[Executor, list[Read]]] = {}
    for p in prepared:
        if p.read is not None:
            by_engine.setdefault(id(p.read.executor), (p.read.executor, []))[1].append(p.read)
    for ex, reads in by_engine.values():
        if len(reads) > 1:
            with _reading(", ".join(p.label for p in prepared)):
                ex.prefetch(reads, grouping)


def _drop_squares(sums: tuple[Any, Any, Any]) -> tuple[Any, Any]:
    """A mean's read: the lattice-index sums and counts (no squares were computed)."""
    return sums[0], sums[2]


def _what(kind: str, value: Expr | PyFunc, *extra: object) -> str | None:
    """A canonical description of an aggregation's input, or None for a callable."""
    if isinstance(value, PyFunc):
        return None
    return f"{kind}({value.to_sql()}{''.join(f';{x}' for x in extra)})"


def _key_multiplicity(public: pd.DataFrame, on: tuple[str, ...]) -> int:
    """The largest number of rows any key has in a public table (public data: read freely).

    Small tables (the usual lookup table) are counted in plain Python, which avoids pandas'
    fixed cost per groupby; large ones with a groupby.
    """
    if len(public) == 0:
        return 0
    if len(public) <= 5_000:
        from collections import Counter

        from pinqpy.plan.keys import is_null_key

        keys = zip(*(public[c].tolist() for c in on), strict=True)
        # Every NULL-like (NaN, pd.NA, NaT, None) is one key, as engines match them.
        counts = Counter(tuple(None if is_null_key(v) else v for v in k) for k in keys)
        return max(counts.values())
    return int(public.groupby(list(on), dropna=False).size().max())


_NUMERIC = {"int", "float", "bool"}


def _check_join_types(col: str, left: ColumnType, right: ColumnType) -> None:
    if "any" in (left, right) or left == right:
        return
    if left in _NUMERIC and right in _NUMERIC:
        return
    raise PinqError(f"join key {col!r} is {left} on one side and {right} on the other")


def _scalar(values: np.ndarray, acc: Any) -> NoisyValue | NoisyCount:
    return NoisyValue.from_release(acc)
