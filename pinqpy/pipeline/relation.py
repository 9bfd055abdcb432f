"""Relation: a plan and its public facts, grown only by checked stable transformations.

A :class:`Relation` is what every entry point (method chaining, partitions, SQL) transforms
and aggregates. Each transformation checks its arguments against the public facts (schema,
bounds, keys, privacy unit; :mod:`pinqpy.plan.facts`) and returns a new relation over a new
plan node; nothing is read. The stability of each node is derived in
:mod:`pinqpy.plan.stability`.

>>> import pandas as pd, pinqpy as pq
>>> from pinqpy.engines.registry import wrap
>>> rel = Relation.table(wrap(pd.DataFrame({"a": [1, 2]}), None), pq.Budget(1.0))
>>> rel.where("a > 1").columns
['a']
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import pandas as pd

from pinqpy.accounting.agents import ChangedRowView, PartAgent, PartitionAgent, flatten
from pinqpy.accounting.budget import Budget
from pinqpy.core.names import closest
from pinqpy.engines.registry import Wrapped, engine_name, same_engine
from pinqpy.engines.wrapping.wrapped import note_type_sources
from pinqpy.errors import PinqError, PinqSyntaxError, PrivacyError
from pinqpy.expr.ast import AGGREGATE_FUNCTIONS, Call, Column, Expr
from pinqpy.expr.bounds import MAX_DERIVED_KEYS, derive_bounds, derive_keys
from pinqpy.expr.check import check_expression, parse_and_check
from pinqpy.expr.parser import parse_expression
from pinqpy.expr.types import ColumnType
from pinqpy.pipeline.typenotes import note_inferred
from pinqpy.plan.catalog import Catalog, agent_name, new_id
from pinqpy.plan.facts import declare_public_size, facts_of
from pinqpy.plan.keys import is_null_key
from pinqpy.plan.meta import FrameMeta, check_bounds, check_column_name, check_keys
from pinqpy.plan.nodes import (
    BoundContributions,
    BoundDegree,
    BoundGroups,
    Distinct,
    Explode,
    GroupBy,
    Join,
    PartitionRef,
    PartSource,
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
from pinqpy.plan.stability import INF, unit_spread

__all__ = ["ExprInput", "Relation"]

#: An expression as the pipeline takes it: query text, a parsed expression, or (where the
#: curator allows it) a Python callable over the rows.
ExprInput = str | Expr | Callable[[pd.DataFrame], Any]

SetKind = Literal["concat", "union", "intersect", "difference"]


class Relation:
    """A plan, the :class:`~pinqpy.plan.catalog.Catalog` that resolves its names (tables,
    public snapshots, privacy agents), and its public facts
    (:class:`~pinqpy.plan.meta.FrameMeta`, derived from the plan).

    A transformation of two relations merges their catalogs (ids are unique, so they never
    disagree)."""

    __slots__ = ("catalog", "meta", "plan")

    def __init__(self, plan: PlanNode, catalog: Catalog):
        self.plan = plan
        self.catalog = catalog
        self.meta: FrameMeta = facts_of(plan)

    @classmethod
    def table(
        cls,
        wrapped: Wrapped,
        budget: Budget,
        privacy_unit: str | None = None,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        keys: Mapping[str, Iterable[Hashable]] | None = None,
        allow_callables: bool = False,
        name: str = "table",
        public_size: bool = False,
    ) -> Relation:
        """A relation over one private table with its declared public facts (checked here);
        its catalog holds the table's handle and ``budget``. ``public_size=True`` is the
        curator's declaration that the table's row count is public (read once, when first
        used); the table then draws on ``budget`` through a
        :class:`~pinqpy.accounting.agents.ChangedRowView`, since its neighbours differ in one
        changed row (two rows of stability) instead of one row added or removed."""
        if not isinstance(public_size, bool):
            raise PinqError("public_size must be True or False")
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
        agent: Budget | ChangedRowView = (
            ChangedRowView(budget, Fraction(2)) if public_size else budget
        )
        table = TableRef(
            new_id("table"),
            name,
            tuple(schema),
            agent_name(agent),
            privacy_unit,
            schema=dict(schema),
            bounds=meta_bounds,
            keys=meta_keys,
            allow_callables=bool(allow_callables),
        )
        note_type_sources(table, wrapped)
        if public_size:
            declare_public_size(table)
        return cls(Source(table), Catalog().with_table(table, wrapped.data, agent))

    # -- public facts ---------------------------------------------------------------------
    @property
    def columns(self) -> list[str]:
        return self.meta.columns

    @property
    def schema(self) -> Mapping[str, ColumnType]:
        return self.meta.schema

    @property
    def bounds(self) -> Mapping[str, tuple[float, float]]:
        return self.meta.bounds

    @property
    def keys(self) -> Mapping[str, tuple[Hashable, ...]]:
        return self.meta.keys

    @property
    def privacy_unit(self) -> str | None:
        return self.meta.privacy_unit

    @property
    def engine(self) -> str:
        return engine_name(self.plan, self.catalog)

    def lineage(self) -> dict[object, Any]:
        """The agents this relation charges, with their stability multipliers."""
        return self.catalog.lineage(self.plan)

    def stabilities(self) -> dict[Budget, Fraction | float]:
        """``{budget: multiplier}`` for every budget the relation draws on."""
        return flatten(self.lineage())

    def require_bounded(self, lineage: Mapping[object, Any], what: str) -> None:
        """Refuse ``what`` when one person could change unboundedly many rows."""
        flat = flatten(lineage)
        if any(k == INF for k in flat.values()):
            unit = self.meta.privacy_unit
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

    # -- expressions and columns ----------------------------------------------------------
    def expression(self, value: object, what: str, *, want_bool: bool = False) -> Expr | PyFunc:
        """``value`` (text, a parsed expression or a callable) checked against the schema."""
        if isinstance(value, str | Expr):
            e, ctype, text = self._checked(value)
        elif callable(value):
            if not self.meta.allow_callables:
                raise PrivacyError(
                    f"{what} must be an expression string or pq.col(...) expression, not a "
                    "Python callable: callables run your own code on the private rows, so they "
                    "are allowed only where the curator created the frame with "
                    "allow_callables=True"
                )
            return PyFunc(value, getattr(value, "__name__", "callable"))
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

    def _checked(self, value: str | Expr) -> tuple[Expr, ColumnType, str | None]:
        """``value`` parsed (if text) and checked: the expression, its type and its text. A
        type mismatch on a column whose type was inferred from a file says how to declare it."""
        try:
            if isinstance(value, str):
                return (*parse_and_check(value, self.meta.schema), value)
            return value, check_expression(value, self.meta.schema), None
        except PinqError as err:
            noted = note_inferred(err, [self.plan])
            if noted is err:
                raise
        raise noted from None

    def column_expr(self, column: object, what: str) -> Expr | PyFunc:
        """A column name or an expression over columns."""
        if isinstance(column, str) and column in self.meta.schema:
            return Column(column)
        return self.expression(column, what)

    def expr_type(self, e: Expr | PyFunc) -> ColumnType:
        if isinstance(e, PyFunc):
            return "any"
        return check_expression(e, self.meta.schema)

    def expr_bounds(self, e: Expr | PyFunc) -> tuple[float, float] | None:
        if isinstance(e, PyFunc):
            return None
        return derive_bounds(e, self.meta.bounds)

    def check_columns(self, columns: Iterable[object]) -> tuple[str, ...]:
        out = []
        for c in columns:
            if not isinstance(c, str) or c not in self.meta.schema:
                raise self.unknown_column(c)
            out.append(c)
        return tuple(out)

    def unknown_column(self, name: object) -> PinqError:
        if not isinstance(name, str):
            return PinqError(f"column names must be strings, not {type(name).__name__}")
        hint = closest(name, self.columns)
        extra = f"; did you mean {hint!r}?" if hint else ""
        return PinqSyntaxError(f"unknown column {name!r}{extra}", text=name, line=1, column=1)

    # -- stable transformations -----------------------------------------------------------
    def where(self, condition: object) -> Relation:
        """Rows where ``condition`` is true (NULL counts as false). Stability 1."""
        pred = self.expression(condition, "where's condition", want_bool=True)
        return Relation(Where(self.plan, pred), self.catalog)

    def select(self, columns: Iterable[object], exprs: Mapping[str, object]) -> Relation:
        """``columns`` kept and computed ones added. Stability 1."""
        outputs: list[tuple[str, Expr | PyFunc]] = []
        for c in columns:
            if not isinstance(c, str) or c not in self.meta.schema:
                raise self.unknown_column(c)
            outputs.append((c, Column(c)))
        for name, value in exprs.items():
            outputs.append((name, self.expression(value, f"select's {name!r}")))
        if not outputs:
            raise PinqError("select needs at least one column or expression")
        names = [n for n, _ in outputs]
        if len(set(names)) != len(names):
            raise PinqError("select would produce two columns with the same name")
        return Relation(Select(self.plan, tuple(outputs), False), self.catalog)

    def assign(self, exprs: Mapping[str, object]) -> Relation:
        """Every column kept, computed ones added or replaced. Stability 1."""
        if not exprs:
            raise PinqError("assign needs at least one name=expression")
        outputs = [(n, self.expression(v, f"assign's {n!r}")) for n, v in exprs.items()]
        return Relation(Select(self.plan, tuple(outputs), True), self.catalog)

    def distinct(self, columns: Iterable[object] = ()) -> Relation:
        """One row per distinct combination of ``columns`` (all when none). Stability 1."""
        columns = tuple(columns)
        cols = self.check_columns(columns) if columns else tuple(self.meta.schema)
        return Relation(Distinct(self.plan, tuple(dict.fromkeys(cols))), self.catalog)

    def explode(self, column: object, max_items: object) -> Relation:
        """One row per item of a list column, at most ``max_items`` per row. Stability
        ``max_items``."""
        (col,) = self.check_columns((column,))
        k = positive_int(max_items, "max_items")
        return Relation(Explode(self.plan, col, k), self.catalog)

    def group_keys(self, keys: Iterable[object]) -> tuple[str, ...]:
        """The checked key columns of a groupby."""
        flat = list(keys)
        if not flat:
            raise PinqError("groupby needs at least one key column")
        return self.check_columns(flat)

    def aggregate(self, keys: tuple[str, ...], aggs: Mapping[str, object]) -> Relation:
        """One row per group with exact per-group aggregates (``n="COUNT(*)"``).

        Stability 2: one changed input row changes one group's row (old row out, new row
        in). Grouping a user-level relation by exactly its privacy unit has stability 1.
        """
        meta = self.meta
        calls: list[tuple[str, Call]] = []
        for name, value in aggs.items():
            if name in keys:
                raise PinqError(f"agg output {name!r} clashes with a group key")
            if isinstance(value, str):
                e, text = parse_expression(value, positions=False), value
            elif isinstance(value, Expr):
                e, text = value, None
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
        by_unit = unit is not None and keys == (unit,)
        return Relation(GroupBy(self.plan, keys, tuple(calls), by_unit), self.catalog)

    def join_keys(self, on: str | Iterable[str]) -> tuple[str, ...]:
        """The checked key columns of a join (on this side)."""
        on_cols = (on,) if isinstance(on, str) else tuple(on)
        if not on_cols:
            raise PinqError("join needs at least one key column in on=")
        self.check_columns(on_cols)
        return on_cols

    def join(
        self,
        other: Relation,
        on: tuple[str, ...],
        max_rows_per_key: tuple[int, int] | None = None,
        how: str = "inner",
    ) -> Relation:
        """Inner join with another private relation on checked keys ``on``.

        Each side is cut to at most ``max_rows_per_key = (b_left, b_right)`` rows per key (at
        random), then inner-joined; stability ``2·b_right`` for the left input and
        ``2·b_left`` for the right. Without the bounds, both sides must be known unique on
        the key (e.g. each is a ``groupby`` on it): stability 1 per side.
        """
        catalog = self.catalog.merge(other.catalog)
        same_engine(self.plan, other.plan, "join", catalog)
        if how != "inner":
            raise PinqError("a join of two private frames is an inner join")
        other.check_columns(on)
        for c in on:
            _check_join_types(c, self.meta.schema[c], other.meta.schema[c])
        if max_rows_per_key is None:
            if not (self.meta.unique_on(on) and other.meta.unique_on(on)):
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
            bounds = (positive_int(b_left, "b_left"), positive_int(b_right, "b_right"))
        return Relation(Join(self.plan, other.plan, on, bounds), catalog)

    def public_join(
        self,
        public: pd.DataFrame,
        on: tuple[str, ...],
        how: Literal["inner", "left"],
        name: str = "public",
    ) -> Relation:
        """Join with a public table: stability is the largest number of rows any key has in
        it (1 when its key is unique). ``how="left"`` keeps unmatched rows."""
        if how not in ("inner", "left"):
            raise PinqError("how must be 'inner' or 'left'")
        table, rows = public_table(public, name)
        missing = [c for c in on if c not in table.columns]
        if missing:
            raise PinqError(f"the public table has no column {missing[0]!r}")
        for c in on:
            _check_join_types(c, self.meta.schema[c], table.schema[c])  # type: ignore[index]
        mult = _key_multiplicity(rows, on)
        catalog = self.catalog.with_public(table, rows)
        return Relation(PublicJoin(self.plan, table, on, how, mult), catalog)

    def set_op(self, other: Relation, kind: SetKind) -> Relation:
        """``concat`` (UNION ALL), ``union``, ``intersect`` or ``difference`` (EXCEPT).
        Stability 1 per input."""
        catalog = self.catalog.merge(other.catalog)
        same_engine(self.plan, other.plan, kind, catalog)
        if self.columns != other.columns:
            raise PinqError(
                f"{kind} needs both frames to have the same columns in the same order; use "
                ".select(...) to line them up"
            )
        return Relation(SetOp(kind, self.plan, other.plan), catalog)

    def bound_contributions(self, max_rows: object) -> Relation:
        """At most ``max_rows`` rows per privacy unit, chosen at random; refused unless a column
        still carries the declared unit. The user-facing semantics are those of
        :meth:`pinqpy.api.frame.PrivateFrame.bound_contributions`; the stabilities are derived
        in :mod:`pinqpy.plan.stability`."""
        k = positive_int(max_rows, "max_rows")
        unit = self.meta.privacy_unit
        if unit is None:
            raise PrivacyError(
                "bound_contributions needs a user-level frame: create the PrivateFrame with "
                "privacy_unit='<id column>' and keep that column unchanged until you bound it "
                "(a column computed from it, one assigned over it, or one combined with "
                "another budget's table no longer identifies that budget's people)"
            )
        return Relation(BoundContributions(self.plan, unit, k), self.catalog)

    def bound_groups(
        self, by: tuple[str, ...], max_groups: int, max_rows_per_group: int | None
    ) -> Relation:
        """Per privacy unit: at most ``max_groups`` distinct values of the ``by`` columns,
        chosen at random, and at most ``max_rows_per_group`` rows of each kept group (all when
        None), chosen at random. Rows whose unit is NULL are dropped; a NULL ``by`` value is
        a group like any other.

        Stability for the unit's budget ``max_groups·max_rows_per_group`` (infinite without a
        per-group cap: follow with :meth:`bound_contributions`); derived in
        :mod:`pinqpy.plan.stability`. A split or GROUP BY on exactly ``by`` then charges the
        parent as ``max_groups`` parts at stability ``max_rows_per_group``
        (:meth:`partition_agent`).
        """
        g = positive_int(max_groups, "max_groups")
        k = (
            None
            if max_rows_per_group is None
            else positive_int(max_rows_per_group, "max_rows_per_group")
        )
        if isinstance(by, str) or not isinstance(by, tuple | list):
            raise PinqError("by must be a tuple of column names")
        if not by:
            raise PinqError("bounding groups needs at least one by column")
        cols = tuple(dict.fromkeys(self.check_columns(by)))
        unit = self.meta.privacy_unit
        if unit is None:
            raise PrivacyError(
                "bounding the groups per person needs a user-level frame: create the "
                "PrivateFrame with privacy_unit='<id column>' and keep that column unchanged "
                "until you bound it (max_groups= counts the groups of each person; on a "
                "record-level table use bound_degree to cap the rows per key)"
            )
        unit_id = self.meta.ids[unit]
        clash = next((c for c in cols if self.meta.ids[c] == unit_id), None)
        if clash is not None:
            raise PinqError(
                f"by column {clash!r} is the privacy unit: each person is one group of it "
                "already; bound their rows with max_rows= instead"
            )
        return Relation(BoundGroups(self.plan, unit, cols, g, k), self.catalog)

    def bound_degree(self, columns: tuple[str, ...], max_rows: int) -> Relation:
        """PINQ's per-key degree cap: at most ``max_rows`` rows per value of ``columns``,
        chosen at random (a NULL value is one key). Stability 2 per unit of the input's
        stability (a new row can join its key and evict one kept row); derived in
        :mod:`pinqpy.plan.stability`."""
        b = positive_int(max_rows, "max_rows")
        if isinstance(columns, str) or not isinstance(columns, tuple | list):
            raise PinqError("bound_degree's columns must be a tuple of column names")
        if not columns:
            raise PinqError("bound_degree needs at least one key column")
        cols = tuple(dict.fromkeys(self.check_columns(columns)))
        return Relation(BoundDegree(self.plan, cols, b), self.catalog)

    def partition_agent(self, columns: tuple[str, ...]) -> PartitionAgent:
        """The privacy agent of a split of this relation by ``columns`` (a partition, or a
        GROUP BY release): PINQ's largest-part rule, across reads too, since every read through
        one partition draws its fixed salts (:mod:`pinqpy.plan.salts`), and with the spread of
        a group-bounded relation when ``columns`` are exactly its ``by`` columns (see
        :meth:`pinqpy.accounting.agents.PartitionAgent.parent_usage`)."""
        lineage = self.lineage()
        spread = unit_spread(self.plan, tuple(columns))
        per_unit: dict[object, tuple[int, Fraction]] = {}
        if spread is not None:
            agent = self.catalog.agent(spread.agent)
            if lineage.get(agent) == spread.total:
                per_unit[agent] = (spread.max_parts, spread.per_part)
        return PartitionAgent(lineage, max_parts_per_unit=per_unit)

    def public_keys(self, column: str) -> list[Hashable] | None:
        """The public keys of ``column`` from metadata alone, as SQL's GROUP BY takes them
        (:func:`~pinqpy.expr.bounds.derive_keys`): its declared keys; ``[False, True]`` for a
        boolean; ``range(lo, hi + 1)`` for an integer column with declared bounds spanning at
        most :data:`~pinqpy.expr.bounds.MAX_DERIVED_KEYS` values. None when there are none.

        Sound because every key comes from public metadata (declared keys, the schema, the
        curator's bounds), never from the rows: a row whose value lies outside the listed keys
        is dropped by the partition, as with any public key list."""
        meta = self.meta
        found = derive_keys(Column(column), dict(meta.keys), dict(meta.bounds), meta.schema)
        return None if found is None else list(found)

    def partition(
        self, columns: str | Iterable[str], keys: Iterable[Hashable] | None = None
    ) -> tuple[PartitionRef, Relation]:
        """A split by public ``keys`` of ``columns`` (parallel composition), and this relation
        with the partition's agent in its catalog; the parts are that relation's :meth:`part`
        of the returned reference."""
        cols = (columns,) if isinstance(columns, str) else tuple(columns)
        cols = self.check_columns(cols)
        if keys is None:
            declared = [self.public_keys(c) for c in cols]
            if any(d is None for d in declared):
                missing = next(c for c, d in zip(cols, declared, strict=True) if d is None)
                raise PrivacyError(
                    f"partition needs public keys for {missing!r}: pass keys=[...] or declare "
                    f"keys={{{missing!r}: [...]}} on the PrivateFrame (an integer column's "
                    f"declared bounds give its keys when they span at most "
                    f"{MAX_DERIVED_KEYS:,} values); keys are never read off the data"
                )
            one = len(cols) == 1
            combos = math.prod(len(d) for d in declared if d is not None)
            if combos > MAX_PARTITION_KEYS:
                raise PrivacyError(
                    f"partition by {', '.join(map(repr, cols))} has {combos:,} key "
                    f"combinations; at most {MAX_PARTITION_KEYS:,}"
                )
            keys = declared[0] if one else list(itertools.product(*declared))  # type: ignore[arg-type]
        key_tuple = check_keys(keys, cols, self.meta.schema)  # type: ignore[arg-type]
        lineage = self.lineage()
        self.require_bounded(lineage, "partition")
        agent = self.partition_agent(cols)
        ref = PartitionRef(self.plan, cols, key_tuple, agent_name(agent))
        return ref, Relation(self.plan, self.catalog.with_agent(ref.agent, agent))

    def part(self, ref: PartitionRef, key: Hashable) -> Relation:
        """The part with (canonical, listed) ``key`` of a partition ``ref`` of this relation
        (one whose catalog names the partition's agent: :meth:`partition` returns it)."""
        agent = PartAgent(self.catalog.agent(ref.agent), key)
        node = PartSource(ref, key, agent_name(agent))
        return Relation(node, self.catalog.with_agent(node.agent, agent))


#: The most key combinations a partition takes from declared metadata: the limit SQL's GROUP BY
#: sets (pinqpy.sql.compiler.MAX_GROUPS), so both refuse the same splits.
MAX_PARTITION_KEYS = 1_000_000


# -- helpers ---------------------------------------------------------------------------------
def positive_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise PinqError(f"{what} must be a positive whole number")
    return int(value)


def _key_multiplicity(public: pd.DataFrame, on: tuple[str, ...]) -> int:
    """The largest number of rows any key has in a public table (public data: read freely).

    Small tables (the usual lookup table) are counted in plain Python, which avoids pandas'
    fixed cost per groupby; large ones with a groupby.
    """
    if len(public) == 0:
        return 0
    if len(public) <= 5_000:
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
