"""The logical plan: immutable nodes that describe a query, apart from any engine.

A :class:`~pinqpy.PrivateFrame` wraps one of these nodes. Transformations only build new
nodes; nothing here reads data, imports pandas or charges a budget. Executors (pandas now,
others later) and the stability rules are visitors over the same nodes.

Nodes are pure data: a table, a public snapshot or a privacy agent is named, and found through
a :class:`~pinqpy.plan.catalog.Catalog`, so a plan can be written out as JSON
(:mod:`pinqpy.plan.serialize`). Only a :class:`PyFunc` holds Python code, and cannot be.

Every node kind must be handled by :class:`PlanVisitor`, whose methods are all abstract: a
visitor that lacks one cannot be instantiated, and a node class whose visitor method does not
exist is rejected when the class is defined. Since :class:`~pinqpy.plan.stability.StabilityVisitor`
is a concrete visitor, a node kind without a stability rule cannot exist.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Literal, TypeVar

from pinqpy.expr.ast import Call, Expr

__all__ = [
    "BoundContributions",
    "BoundDegree",
    "BoundGroups",
    "Distinct",
    "Explode",
    "GroupBy",
    "Join",
    "PartSource",
    "PartitionRef",
    "PlanNode",
    "PlanVisitor",
    "PublicJoin",
    "PublicTable",
    "PyFunc",
    "Select",
    "SetOp",
    "Source",
    "TableRef",
    "Where",
    "walk",
]

T = TypeVar("T")


@dataclass(frozen=True)
class TableRef:
    """A private table, by its public facts only: the data and the budget it draws on are
    found through a :class:`~pinqpy.plan.catalog.Catalog` under ``id`` and ``agent``.

    ``id`` is unique per registration, and tables are compared by it alone: two
    registrations of the same DataFrame are two tables.
    """

    id: str
    name: str = field(compare=False)
    columns: tuple[str, ...] = field(compare=False)
    # The name of the privacy agent (a Budget) its units belong to, in the catalog.
    agent: str = field(compare=False)
    privacy_unit: str | None = field(default=None, compare=False)
    # The curator's declarations, fixed when the table is wrapped (see pinqpy.plan.facts).
    schema: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    bounds: Mapping[str, tuple[float, float]] = field(
        default_factory=dict, repr=False, compare=False
    )
    keys: Mapping[str, tuple[Hashable, ...]] = field(
        default_factory=dict, repr=False, compare=False
    )
    allow_callables: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class PublicTable:
    """A public table used in joins; its rows may be read freely (they are not private).

    Its rows are pinqpy's own snapshot, taken when the table entered the plan and kept in
    the :class:`~pinqpy.plan.catalog.Catalog` under ``id`` (compared by it alone): everything
    checked about it (its key multiplicity, its schema) and everything an executor reads
    come from that snapshot, so editing the analyst's DataFrame afterwards changes nothing.
    """

    id: str
    name: str = field(compare=False)
    columns: tuple[str, ...] = field(compare=False)
    schema: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, eq=False)
class PyFunc:
    """An analyst's Python callable standing in for an expression (trusted code, PINQ parity)."""

    fn: Callable[..., Any]
    name: str


Predicate = Expr | PyFunc


class PlanNode(ABC):
    """Base of every plan node. Subclasses name their visitor method in ``_visit``."""

    _visit: ClassVar[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = "visit_" + re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()
        cls._visit = name
        registry = globals().get("PlanVisitor")
        # Nodes defined before PlanVisitor are checked at the bottom of this module.
        if registry is not None and name not in registry.__abstractmethods__:
            raise TypeError(
                f"plan node {cls.__name__} has no abstract {name} on PlanVisitor, so it would "
                "have no stability rule"
            )

    def accept(self, visitor: PlanVisitor[T]) -> T:
        return getattr(visitor, self._visit)(self)

    @property
    @abstractmethod
    def children(self) -> tuple[PlanNode, ...]: ...


@dataclass(frozen=True, eq=False)
class Source(PlanNode):
    table: TableRef

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class PartitionRef:
    """One ``partition(...)`` call: the parent plan, its key columns and public keys."""

    parent: PlanNode
    key_columns: tuple[str, ...]
    keys: tuple[Hashable, ...]
    # The name of the partition's agent in the catalog.
    agent: str


@dataclass(frozen=True, eq=False)
class PartSource(PlanNode):
    """The rows of ``partition.parent`` whose key equals ``key``; a source for its agent
    (named ``agent`` in the catalog)."""

    partition: PartitionRef
    key: Hashable
    agent: str

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.partition.parent,)


@dataclass(frozen=True, eq=False)
class Where(PlanNode):
    child: PlanNode
    predicate: Predicate

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class Select(PlanNode):
    """``select`` (``keep_all=False``: only ``outputs``) or ``assign`` (keep every column)."""

    child: PlanNode
    outputs: tuple[tuple[str, Expr | PyFunc], ...]
    keep_all: bool

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class Distinct(PlanNode):
    child: PlanNode
    columns: tuple[str, ...]

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class Explode(PlanNode):
    child: PlanNode
    column: str
    max_items: int

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class GroupBy(PlanNode):
    """PINQ's GroupBy: one row per group with exact aggregates.

    ``by_unit`` is true when the keys are exactly the frame's privacy unit, so each group is
    one unit's rows (stability 1 instead of 2).
    """

    child: PlanNode
    keys: tuple[str, ...]
    aggs: tuple[tuple[str, Call], ...]
    by_unit: bool = False

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class Join(PlanNode):
    """Join of two private frames, each side truncated to ``bounds`` rows per key.

    ``bounds`` is None only when both sides are known unique on ``on``.
    """

    left: PlanNode
    right: PlanNode
    on: tuple[str, ...]
    bounds: tuple[int, int] | None

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.left, self.right)


@dataclass(frozen=True, eq=False)
class PublicJoin(PlanNode):
    """Join with a public table; ``multiplicity`` is its largest number of rows per key."""

    child: PlanNode
    public: PublicTable
    on: tuple[str, ...]
    how: Literal["inner", "left"]
    multiplicity: int

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class SetOp(PlanNode):
    """``concat`` keeps duplicates (UNION ALL); the others have set semantics."""

    kind: Literal["concat", "union", "intersect", "difference"]
    left: PlanNode
    right: PlanNode

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.left, self.right)


@dataclass(frozen=True, eq=False)
class BoundContributions(PlanNode):
    """Keep at most ``max_rows`` rows per privacy unit (column ``unit``), chosen at random."""

    child: PlanNode
    unit: str
    max_rows: int

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class BoundGroups(PlanNode):
    """Per privacy unit (column ``unit``): at most ``max_groups`` distinct values of ``by``,
    chosen at random, and at most ``max_rows_per_group`` rows of each (all when None), chosen
    at random. Rows whose unit is NULL are dropped; a NULL ``by`` value is one group."""

    child: PlanNode
    unit: str
    by: tuple[str, ...]
    max_groups: int
    max_rows_per_group: int | None

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


@dataclass(frozen=True, eq=False)
class BoundDegree(PlanNode):
    """PINQ's per-key degree cap: at most ``max_rows`` rows per value of ``columns``, chosen at
    random (a NULL value is one key)."""

    child: PlanNode
    columns: tuple[str, ...]
    max_rows: int

    @property
    def children(self) -> tuple[PlanNode, ...]:
        return (self.child,)


class PlanVisitor(ABC, Generic[T]):
    """A function over plans with one case per node kind; every case is required."""

    def visit(self, node: PlanNode) -> T:
        return node.accept(self)

    @abstractmethod
    def visit_source(self, node: Source) -> T: ...

    @abstractmethod
    def visit_part_source(self, node: PartSource) -> T: ...

    @abstractmethod
    def visit_where(self, node: Where) -> T: ...

    @abstractmethod
    def visit_select(self, node: Select) -> T: ...

    @abstractmethod
    def visit_distinct(self, node: Distinct) -> T: ...

    @abstractmethod
    def visit_explode(self, node: Explode) -> T: ...

    @abstractmethod
    def visit_group_by(self, node: GroupBy) -> T: ...

    @abstractmethod
    def visit_join(self, node: Join) -> T: ...

    @abstractmethod
    def visit_public_join(self, node: PublicJoin) -> T: ...

    @abstractmethod
    def visit_set_op(self, node: SetOp) -> T: ...

    @abstractmethod
    def visit_bound_contributions(self, node: BoundContributions) -> T: ...

    @abstractmethod
    def visit_bound_groups(self, node: BoundGroups) -> T: ...

    @abstractmethod
    def visit_bound_degree(self, node: BoundDegree) -> T: ...


def node_kinds() -> list[type[PlanNode]]:
    """Every concrete plan node class (used by tests that check each has its rules)."""
    out: list[type[PlanNode]] = []
    stack = list(PlanNode.__subclasses__())
    while stack:
        cls = stack.pop()
        out.append(cls)
        stack.extend(cls.__subclasses__())
    return out


for _cls in node_kinds():
    if _cls._visit not in PlanVisitor.__abstractmethods__:  # pragma: no cover - import guard
        raise TypeError(f"plan node {_cls.__name__} has no visitor method {_cls._visit}")


def walk(plan: PlanNode) -> Iterator[PlanNode]:
    """Every node of ``plan`` once, parents before children (a node the plan uses twice, as
    in ``f.concat(f)``, is yielded once); a part's partitioned plan is among its children."""
    stack = [plan]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(node.children)
