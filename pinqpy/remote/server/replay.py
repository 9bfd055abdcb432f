"""Replay: an analyst's plan, sent as JSON data, rebuilt against the server's own catalog.

The client builds its plan with the same API an analyst uses locally and sends it as pure data
(:func:`pinqpy.plan.serialize.plan_to_data`). The server believes none of it but its shape.
:class:`Replayer` walks the decoded nodes, children first, and calls the checked
transformation of :class:`~pinqpy.pipeline.relation.Relation` for each one, exactly as the
local API does, so every check runs again against the server's facts and every derived field
is recomputed:

* a ``Source`` is found by its table **name** among the tables granted to this analyst, and
  becomes the server's own relation for it (its data, its budget, the curator's declarations).
  The client's table id, agent name, schema, bounds, keys, privacy unit and
  ``allow_callables`` are never read, and a public row count (``public_size``) is the
  curator's alone: it has no field in a plan, so an analyst cannot send or change it. A
  table that is not granted is reported exactly like one that does not exist
  (:class:`TableNotFound`), so grants cannot be probed;
* ``GroupBy.by_unit``, ``PublicJoin.multiplicity``, ``BoundContributions.unit`` and
  ``BoundGroups.unit`` are recomputed by the relation's methods; the client's values are
  never read. No stability is ever sent: stabilities are derived from the rebuilt plan
  (:mod:`pinqpy.plan.stability`);
* a public table's rows are those the request carries, snapshotted again by
  :meth:`~pinqpy.pipeline.relation.Relation.public_join`, which recomputes its key
  multiplicity; the client's declared schema is ignored;
* a ``PartitionRef`` is rebuilt by :meth:`~pinqpy.pipeline.relation.Relation.partition`, and
  its agent comes from the analyst's :class:`PartitionRegistry` (see there), so that
  ``parts["CA"].count(...)`` and then ``parts["NY"].count(...)``, sent as two requests,
  charge the larger of the two, as locally.

Rebuilding is memoised per decoded node, so a node the plan uses twice (``f.concat(f)``, the
parts of one partition) is rebuilt once and stays one node: the column identities the facts
are keyed by (:mod:`pinqpy.plan.meta`) come out as they would locally, and so do the
stabilities and the canonical text.

Nothing here reads a row or charges a budget: a plan that fails any check is refused before
the pipeline is reached. A Python callable has no JSON form (the reader refuses unknown
fields and expression kinds), so no analyst code can reach the server. The plan's size is
bounded first (:class:`~pinqpy.remote.server.config.Limits`): its node count and nesting are
read off the raw data before anything is decoded.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pandas as pd

from pinqpy.accounting.agents import PartitionAgent, Scaled
from pinqpy.errors import PinqError
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.canonical import NotCanonical, canonical_plan
from pinqpy.plan.catalog import agent_name
from pinqpy.plan.meta import check_keys
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
    PlanVisitor,
    PublicJoin,
    Select,
    SetOp,
    Source,
    Where,
)
from pinqpy.plan.serialize import plan_from_data
from pinqpy.remote.protocol import decode_frame
from pinqpy.remote.server.config import Limits

__all__ = [
    "DECODING_ERRORS",
    "LimitExceeded",
    "PartitionRegistry",
    "Replayer",
    "TableNotFound",
    "check_depth",
    "decoding",
    "public_tables",
]

# The fields through which a plan node names another, by its position in the node list.
_LINKS = ("child", "left", "right", "parent", "partition")


class TableNotFound(PinqError):
    """A table the analyst may not query: unknown and not granted read alike."""


class LimitExceeded(PinqError):
    """A request over one of the server's limits (its size, plan size, key counts)."""


#: What a reader of JSON data may raise on a shape it did not expect (a dict where text
#: belongs, say): the request is malformed, never the server at fault.
DECODING_ERRORS = (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError)


@contextlib.contextmanager
def decoding(what: str) -> Iterator[None]:
    """Report any failure to read the request's ``what`` as a malformed request."""
    try:
        yield
    except PinqError:
        raise
    except DECODING_ERRORS:
        raise PinqError(f"the request's {what} is malformed") from None


def check_depth(data: Any, limit: int, what: str = "the request") -> None:
    """Refuse JSON data nested deeper than ``limit`` (iteratively: no recursion to exhaust).

    Every later step (decoding, checking, canonical text) recurses over expressions, so the
    nesting is bounded before any of them runs."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise LimitExceeded(f"{what} nests more deeply than this server accepts ({limit})")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


class PartitionRegistry:
    """One analyst's partition agents, by the server-computed identity of the partition.

    Locally, the parts of one ``partition(...)`` call share one
    :class:`~pinqpy.accounting.agents.PartitionAgent`, which charges the parent the largest
    total any part has spent (parallel composition: the parts are disjoint, so one privacy
    unit's rows lie in at most ``k`` rows of all parts together). A remote analyst sends each
    part's query as its own request, so the server keeps the agent here, under the canonical
    text (:mod:`pinqpy.plan.canonical`, tables by the server's own ids) of the partitioned
    plan, its key columns and its keys: the same partition, asked again, draws on the same
    agent. The text is the server's, from the replayed plan, so a client cannot name another
    partition's agent. A plan without canonical text gets a fresh agent (charged in full).

    The key also holds the name the client gave the partition (its ``PartitionRef.agent``),
    so two ``partition(...)`` calls are two partitions, charged as locally. A forged name can
    only pick among this analyst's partitions of the very same rows by the very same keys
    (where sharing one agent is parallel composition over one split) or make a new one
    (charged afresh): never less than a partition's own rule.

    **What it keeps is bounded**, however many partitions an analyst makes: at most
    ``capacity`` agents (the config's ``partitions_in_memory``), whose partitions list at
    most ``keys`` keys in all (``partition_keys_in_memory``). An agent keeps a running total
    for each of its keys that a query charged alone, so its memory grows with its key count
    (about half a kilobyte a key), and it keeps the agents of the partitions it was cut from
    alive: an agent weighs its own keys plus what its ancestors weigh (an ancestor
    shared by several agents counted for each, so the bound errs high). Beyond either bound
    the least recently used agents are dropped (the newest is always kept). A dropped
    agent's partition gets a fresh agent the next time, with fresh salts, which charges the
    parent anew: two agents of one partition cost what two partitions cost, more than needed,
    never less.
    """

    def __init__(self, capacity: int = 1000, keys: int = 100_000):
        self.capacity = capacity
        self.keys = keys
        self._agents: OrderedDict[str, tuple[PartitionAgent, int]] = OrderedDict()
        # What each agent weighs, while it lives (kept alive by a descendant, say).
        self._weights: weakref.WeakKeyDictionary[PartitionAgent, int] = (
            weakref.WeakKeyDictionary()
        )
        self._weight = 0
        self._lock = threading.Lock()

    def agent(self, identity: str, fresh: PartitionAgent, n_keys: int) -> PartitionAgent:
        """The agent kept under ``identity``, or ``fresh`` (kept from now on), the agent of
        a partition listing ``n_keys`` keys."""
        with self._lock:
            have = self._agents.get(identity)
            if have is not None:
                self._agents.move_to_end(identity)
                return have[0]
            w = n_keys + sum(self._weights.get(a, 0) for a in _ancestors(fresh))
            self._weights[fresh] = w
            self._agents[identity] = (fresh, w)
            self._weight += w
            while len(self._agents) > 1 and (
                len(self._agents) > self.capacity or self._weight > self.keys
            ):
                _, (_, dropped) = self._agents.popitem(last=False)
                self._weight -= dropped
            return fresh

    def __len__(self) -> int:
        return len(self._agents)

    @property
    def weight(self) -> int:
        """What the kept agents weigh together (see the class docstring)."""
        return self._weight


def _ancestors(agent: PartitionAgent) -> set[PartitionAgent]:
    """The partition agents ``agent``'s parent draws on, at any depth."""
    out: set[PartitionAgent] = set()
    stack = list(agent.parent_lineage)
    while stack:
        a = stack.pop()
        while isinstance(a, Scaled):
            a = a.agent
        inner = getattr(a, "partition", None)
        if isinstance(inner, PartitionAgent) and inner not in out:
            out.add(inner)
            stack.extend(inner.parent_lineage)
    return out


class Replayer(PlanVisitor[Relation]):
    """Rebuilds one request's plan against one analyst's tables.

    ``tables`` maps each granted table's name to the server's relation for it; ``public``
    maps public table ids to the rows the request carries.
    """

    def __init__(
        self,
        tables: Mapping[str, Relation],
        registry: PartitionRegistry,
        limits: Limits,
        public: Mapping[str, pd.DataFrame] | None = None,
    ):
        self.tables = tables
        self.registry = registry
        self.limits = limits
        self.public = dict(public or {})
        self._memo: dict[int, tuple[object, Any]] = {}

    # -- entry points --------------------------------------------------------------------
    def relation(self, data: Any) -> Relation:
        """The checked relation of a plan's JSON data."""
        self.check_size(data)
        with decoding("plan"):
            plan = plan_from_data(data)
        return self.visit(plan)

    def check_size(self, data: Any) -> None:
        """Refuse a plan with too many nodes or nested too deeply, before decoding it."""
        nodes = data.get("nodes") if isinstance(data, dict) else None
        if not isinstance(nodes, list):
            return  # the reader reports the malformed plan
        lim = self.limits
        if len(nodes) > lim.max_plan_nodes:
            raise LimitExceeded(
                f"the plan has {len(nodes)} nodes; this server accepts at most {lim.max_plan_nodes}"
            )
        depth: list[int] = []
        for node in nodes:
            d = 1
            if isinstance(node, dict):
                for link in _LINKS:
                    i = node.get(link)
                    if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(depth):
                        d = max(d, depth[i] + 1)
            if d > lim.max_plan_depth:
                raise LimitExceeded(
                    f"the plan nests more than {lim.max_plan_depth} steps deep, the most this "
                    "server accepts"
                )
            depth.append(d)

    def partition(
        self, parent: Relation, columns: object, keys: object, name: object = None
    ) -> tuple[PartitionRef, Relation]:
        """``parent.partition(columns, keys)`` with the agent kept in the registry."""
        if isinstance(columns, list):
            columns = tuple(columns)
        if not (
            isinstance(columns, str)
            or (isinstance(columns, tuple) and all(isinstance(c, str) for c in columns))
        ):
            raise PinqError("partition columns must be a column name or a list of them")
        if keys is not None:
            if not isinstance(keys, list | tuple):
                raise PinqError("partition keys must be a list")
            self.check_keys_count(len(keys), "partition keys")
        ref, rel = parent.partition(columns, keys)  # type: ignore[arg-type]
        self.check_keys_count(len(ref.keys), "partition keys")
        fresh = rel.catalog.agent(ref.agent)
        try:
            parent_text = canonical_plan(parent.plan, lambda t: t.id, parent.catalog)
        except NotCanonical:
            return ref, rel
        if name is not None and not isinstance(name, str):
            raise PinqError("a partition's id must be text")
        text = f"{parent_text}|{ref.key_columns!r}|{ref.keys!r}|{name!r}"
        # Kept by its hash: the text of a partition with many keys is long.
        identity = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        agent = self.registry.agent(identity, fresh, len(ref.keys))
        if agent is fresh:
            return ref, rel
        kept = PartitionRef(parent.plan, ref.key_columns, ref.keys, agent_name(agent))
        return kept, Relation(parent.plan, parent.catalog.with_agent(kept.agent, agent))

    def check_keys_count(self, n: int, what: str) -> None:
        if n > self.limits.max_keys:
            raise LimitExceeded(
                f"the request has {n} {what}; this server accepts at most {self.limits.max_keys}"
            )

    # -- memo ----------------------------------------------------------------------------
    def _once(self, obj: object, make: Callable[[], Any]) -> Any:
        hit = self._memo.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        out = make()
        self._memo[id(obj)] = (obj, out)
        return out

    def visit(self, node: PlanNode) -> Relation:
        if not isinstance(node, PlanNode):
            raise PinqError("a plan's root must be a plan node")
        return self._once(node, lambda: node.accept(self))  # type: ignore[no-any-return]

    # -- node kinds ----------------------------------------------------------------------
    def visit_source(self, node: Source) -> Relation:
        name = node.table.name
        rel = self.tables.get(name)
        if rel is None:
            raise TableNotFound(f"no private table named {name!r}")
        return rel

    def _partition_of(self, ref: PartitionRef) -> tuple[PartitionRef, Relation]:
        def make() -> tuple[PartitionRef, Relation]:
            parent = self.visit(ref.parent)
            return self.partition(parent, ref.key_columns, list(ref.keys), ref.agent)

        return self._once(ref, make)  # type: ignore[no-any-return]

    def visit_part_source(self, node: PartSource) -> Relation:
        ref, rel = self._partition_of(node.partition)
        try:
            key = check_keys([node.key], ref.key_columns, rel.schema)[0]
        except PinqError:
            key = node.key
        try:
            listed = key in frozenset(ref.keys)
        except TypeError:  # an unhashable key (the JSON form allows a mapping)
            listed = False
        if not listed:
            raise PinqError("a part's key is not one of its partition's keys")
        memo_key = ("part", id(ref), key)
        hit = self._memo.get(memo_key)  # type: ignore[call-overload]
        if hit is not None and hit[0] is ref:
            return hit[1]  # type: ignore[no-any-return]
        part = rel.part(ref, key)
        self._memo[memo_key] = (ref, part)  # type: ignore[index]
        return part

    def visit_where(self, node: Where) -> Relation:
        return self.visit(node.child).where(node.predicate)

    def visit_select(self, node: Select) -> Relation:
        rel = self.visit(node.child)
        names = [n for n, _ in node.outputs]
        if len(set(names)) != len(names):
            raise PinqError("select would produce two columns with the same name")
        if node.keep_all:
            return rel.assign(dict(node.outputs))
        # A kept column is the output (name, Column(name)), which select checks like any
        # expression; one call keeps the outputs' order.
        return rel.select([], dict(node.outputs))

    def visit_distinct(self, node: Distinct) -> Relation:
        return self.visit(node.child).distinct(node.columns)

    def visit_explode(self, node: Explode) -> Relation:
        return self.visit(node.child).explode(node.column, node.max_items)

    def visit_group_by(self, node: GroupBy) -> Relation:
        rel = self.visit(node.child)
        names = [n for n, _ in node.aggs]
        if len(set(names)) != len(names):
            raise PinqError("groupby().agg() would produce two columns with the same name")
        return rel.aggregate(rel.group_keys(node.keys), dict(node.aggs))

    def visit_join(self, node: Join) -> Relation:
        left, right = self.visit(node.left), self.visit(node.right)
        return left.join(right, left.join_keys(node.on), node.bounds)

    def visit_public_join(self, node: PublicJoin) -> Relation:
        rel = self.visit(node.child)
        rows = self.public.get(node.public.id)
        if rows is None:
            raise PinqError(
                f"the plan joins the public table {node.public.name!r}, whose rows the request "
                "does not carry"
            )
        if len(rows) > self.limits.max_public_rows:
            raise LimitExceeded(
                f"the public table {node.public.name!r} has {len(rows)} rows; this server "
                f"accepts at most {self.limits.max_public_rows}"
            )
        return rel.public_join(rows, rel.join_keys(node.on), node.how, node.public.name)

    def visit_set_op(self, node: SetOp) -> Relation:
        return self.visit(node.left).set_op(self.visit(node.right), node.kind)

    def visit_bound_contributions(self, node: BoundContributions) -> Relation:
        return self.visit(node.child).bound_contributions(node.max_rows)

    def visit_bound_groups(self, node: BoundGroups) -> Relation:
        return self.visit(node.child).bound_groups(
            node.by, node.max_groups, node.max_rows_per_group
        )

    def visit_bound_degree(self, node: BoundDegree) -> Relation:
        return self.visit(node.child).bound_degree(node.columns, node.max_rows)


def public_tables(data: Any, limits: Limits) -> dict[str, pd.DataFrame]:
    """A request's public tables, ``{id: rows}``, each within the row limit."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PinqError("public must be an object of public tables by id")
    out = {}
    for pid, table in data.items():
        with decoding("public table"):
            frame = decode_frame(table)
        if len(frame) > limits.max_public_rows:
            raise LimitExceeded(
                f"a public table has {len(frame)} rows; this server accepts at most "
                f"{limits.max_public_rows}"
            )
        out[str(pid)] = frame
    return out
