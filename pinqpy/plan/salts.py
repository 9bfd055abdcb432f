"""The salts of the random truncations: fresh on every read, fixed under a partition.

``bound_contributions``, ``bound_groups``, ``bound_degree`` and a join with
``max_rows_per_key`` keep, per key, the rows of lowest *priority*, a salted hash of the row's
own values (:mod:`pinqpy.engines.pandas.priorities`, the SQL dialects' ``row_priority``).
Engines draw those salts from :func:`salt_source` while they evaluate the node.

**Outside a partition** every read draws every salt afresh (the noise source), as it always
did: a read is one ``epsilon·s``-DP release whatever salt it drew.

**Through a partition** the salts are fixed for the partition: every read through its parts
(``parts[k].count(...)``, a nested partition of a part, ``parts.count(...)`` of every part at
once) draws the salts of each random node below the partitioned frame from a stream keyed by
a secret of the partition's agent and by the node's canonical text. So every such read sees
parts of one dataset ``V(D, σ)``, ``σ`` the partition's salts. Derivation of why PINQ's
largest-part rule (McSherry 2009, Theorem 4) then holds across reads, as
:class:`~pinqpy.accounting.agents.PartitionAgent` charges:

1. For every fixed ``σ`` the partitioned frame is a deterministic function ``V(·, σ)`` of the
   data, and ``V(D, σ)`` and ``V(D', σ)`` differ by at most ``s`` rows for neighbours ``D``,
   ``D'`` (``s`` its stability): a row's priority is a function of the row and the salt
   alone, never of other rows or positions, which is exactly the coupling the stability
   rules (:mod:`pinqpy.plan.stability`) are derived for; they hold for every salt.
   The ``s`` changed rows fall anywhere among the parts: ``k_j`` in part ``j``, ``Σ k_j <= s``.
2. For that fixed ``σ`` the reads are PINQ queries on the parts of one dataset: part ``j``'s
   queries compose to its total ``t_j`` over all reads, so a unit loses at most
   ``Σ_j t_j.at(k_j) <= (max_j t_j).at(s)``: ``Usage.at(k)`` grows with the usage, and with
   ``k`` it is convex and zero at 0, hence superadditive, so the rows packed into the largest
   part are the worst case (with a group-bounded split, at most ``G`` parts of ``k`` rows:
   :meth:`~pinqpy.accounting.agents.PartitionAgent.parent_usage`). That is what the agent
   charges the parent; a read of every part at once adds its usage to every part's total.
3. The released transcript's law is the mixture over ``σ`` of the laws for fixed ``σ``; the
   salts are drawn independently of the data, so the mixtures for ``D`` and ``D'`` are over
   the same law of ``σ``. A bound that holds for every ``σ`` (a likelihood ratio, an
   ``(ε, δ)`` inequality, a Rényi divergence, which is jointly quasi-convex) holds for the
   mixture. So the salts need no secrecy for the bound; they are kept secret anyway.

With a fresh draw per read there is no one dataset across reads: one person's kept rows
could lie in part A at one read and in part B at the next, so queries on A and on B would
each pay in full (what partitions of such frames were charged before). A key per partition
agent (never in a plan, a JSON form or a repr, never chosen or
seen by the analyst) makes another partition of the same frame draw its own salts. The
node's label is its canonical text (tables all named alike), so a plan replayed by the server
on another request (new node objects, the same agent:
:class:`pinqpy.remote.server.replay.PartitionRegistry`) draws the same salts, whichever way
it spells a shared node; two nodes of equal text draw equal salts, which step 1 allows (it
holds for every assignment of salts to nodes).

Step 1 also needs the engine to keep the same rows for the same salts on every read: ties of
priority are then rows equal in every value the priority hashes, which are interchangeable.
pandas hashes every value (a list or dict by its contents), DuckDB's ``hash`` every type.
Spark's ``xxhash64`` cannot hash a ``MapType`` column, which its priority leaves out, so rows
that differ only in a map tie and Spark picks among them; that already weakens one read's
stability argument on such tables, and is mended by hashing maps too (issue 28, item 6).
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import uuid
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np

from pinqpy.noise import source as _noise
from pinqpy.plan.canonical import NotCanonical, canonical_plan
from pinqpy.plan.catalog import Catalog
from pinqpy.plan.nodes import (
    BoundContributions,
    BoundDegree,
    BoundGroups,
    Join,
    PartSource,
    PlanNode,
)

__all__ = ["KeyedSource", "drawing", "draws_salts", "salt_source", "scope_token", "through"]


class KeyedSource(_noise.RandomSource):
    """A deterministic stream of random bytes: SHAKE-256 of a secret key and a call counter.
    The same key gives the same draws in the same order; the key is never shown."""

    def __init__(self, key: bytes) -> None:
        self._key = bytes(key)
        self._calls = 0

    def bytes(self, n: int) -> bytes:
        block = hashlib.shake_256(self._key + self._calls.to_bytes(8, "little"))
        self._calls += 1
        return block.digest(int(n))

    def uint64(self, n: int | tuple[int, ...]) -> np.ndarray:
        size = int(np.prod(n))
        return np.frombuffer(self.bytes(8 * size), dtype=np.uint64).reshape(n).copy()

    def __repr__(self) -> str:
        return "KeyedSource(<secret>)"


@dataclass(frozen=True, eq=False)
class _Scope:
    """The salts of one partition: its agent's name (what memos tell scopes apart by) and
    the agent, whose secret key is drawn on the first random node read through it."""

    name: str
    agent: object

    @property
    def key(self) -> bytes:
        # Drawn lazily: a partition with no random node below it takes nothing from the
        # noise stream, so its noise is what a GROUP BY of the same query draws.
        with _LOCK:
            key = _KEYS.get(self.agent)
            if key is None:
                key = _KEYS[self.agent] = _noise.current_source().bytes(32)
        return key

    def __repr__(self) -> str:
        return f"_Scope({self.name!r})"


_SCOPE: ContextVar[_Scope | None] = ContextVar("pinqpy_salt_scope", default=None)
_SOURCE: ContextVar[_noise.RandomSource | None] = ContextVar("pinqpy_salt_source", default=None)

# One secret per partition agent, drawn on its first read and dropped with the agent.
_KEYS: weakref.WeakKeyDictionary[object, bytes] = weakref.WeakKeyDictionary()
# Labels of nodes without canonical text (a Python callable: local plans only).
_LABELS: weakref.WeakKeyDictionary[PlanNode, str] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def salt_source() -> _noise.RandomSource:
    """Where an engine draws the salts of the node it is evaluating: the partition's keyed
    stream for that node (inside :func:`drawing` under a partition), else the noise source."""
    src = _SOURCE.get()
    return src if src is not None else _noise.current_source()


def draws_salts(node: PlanNode) -> bool:
    """Whether evaluating ``node`` itself draws salts (a random truncation)."""
    return isinstance(node, BoundContributions | BoundGroups | BoundDegree) or (
        isinstance(node, Join) and node.bounds is not None
    )


def scope_token() -> str | None:
    """The current salt scope (None: fresh draws), for memos of evaluated nodes: a node
    evaluated in two scopes is two results."""
    scope = _SCOPE.get()
    return None if scope is None else scope.name


def _scope_of(name: str, agent: object) -> _Scope:
    return _Scope(name, agent)


def _label(node: PlanNode, catalog: Catalog) -> bytes:
    """The node's canonical text with every table named alike: what the node computes, not
    which table it reads (the key tells partitions apart; equal labels are allowed), so a
    neighbouring table, which has the same label, draws the same salts."""
    try:
        text = canonical_plan(node, lambda t: "table", catalog)
    except NotCanonical:
        with _LOCK:
            text = _LABELS.setdefault(node, f"node-{uuid.uuid4().hex}")
    return text.encode("utf-8", "surrogatepass")


@contextmanager
def _set(scope: _Scope | None, source: _noise.RandomSource | None) -> Iterator[None]:
    t_scope, t_source = _SCOPE.set(scope), _SOURCE.set(source)
    try:
        yield
    finally:
        _SOURCE.reset(t_source)
        _SCOPE.reset(t_scope)


@contextmanager
def drawing(node: PlanNode, catalog: Catalog) -> Iterator[None]:
    """Evaluate ``node`` (an engine's visit of it, children included) with its salts: a part
    (:class:`~pinqpy.plan.nodes.PartSource`) enters its partition's scope; a random node in a
    scope draws from its own keyed stream, anything else from the noise source."""
    scope = _SCOPE.get()
    if isinstance(node, PartSource):
        ref = node.partition
        scope = _scope_of(ref.agent, catalog.agent(ref.agent))
    source = None
    if scope is not None and draws_salts(node):
        label = hmac.new(scope.key, _label(node, catalog), hashlib.sha256).digest()
        source = KeyedSource(label)
    with _set(scope, source):
        yield


@contextmanager
def through(name: str, agent: object) -> Iterator[None]:
    """A read of every part of a partition at once (``parts.count(...)``): the partitioned
    frame, read whole, draws the partition's salts, as a read of one part does."""
    with _set(_scope_of(name, agent), None):
        yield
