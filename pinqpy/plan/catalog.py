"""The catalog: what the names in a plan stand for in this process.

A plan is pure data (:mod:`pinqpy.plan.serialize` writes it as JSON). A source names its table
by a :class:`~pinqpy.plan.nodes.TableRef` (an id unique per registration, and the curator's
public declarations), a public join names its snapshot by a
:class:`~pinqpy.plan.nodes.PublicTable`, and every source or part names the privacy agent it
draws on by a string. A :class:`Catalog` maps those names to what only this process holds:
each table's engine handle (its data), each public snapshot, and each agent (a Budget, a
partition's agent or one part's). A frame holds its plan and its catalog; combining frames
merges their catalogs, which never disagree, since every id is unique.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections.abc import Mapping
from typing import Any

from pinqpy.accounting.agents import Scaled
from pinqpy.errors import PinqError
from pinqpy.plan.nodes import PlanNode, PublicTable, TableRef
from pinqpy.plan.stability import Lineage, lineage_of

__all__ = ["Catalog", "agent_name", "new_id"]


def new_id(kind: str) -> str:
    """A fresh id for a table or public snapshot, unique across processes too."""
    return f"{kind}-{uuid.uuid4().hex}"


# One name per agent object for the life of the process, so that every catalog names the
# same budget alike (two tables of one budget share its unit domain, whichever frames
# they came from).
_AGENT_NAMES: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
_NAMING = threading.Lock()


def agent_name(agent: object) -> str:
    """The name plans use for ``agent`` (the same for the same object, always)."""
    with _NAMING:
        name = _AGENT_NAMES.get(agent)
        if name is None:
            name = _AGENT_NAMES[agent] = new_id(type(agent).__name__.lower())
        return name


class Catalog:
    """Table ids to engine handles, public snapshot ids to their rows, agent names to agents.

    Immutable: adding an entry or merging gives a new catalog, so a frame's catalog never
    changes under it. Compared by identity.
    """

    __slots__ = ("__weakref__", "_agents", "_public", "_tables", "executors")

    def __init__(
        self,
        tables: Mapping[str, Any] | None = None,
        public: Mapping[str, Any] | None = None,
        agents: Mapping[str, object] | None = None,
    ) -> None:
        self._tables: dict[str, Any] = dict(tables or {})
        self._public: dict[str, Any] = dict(public or {})
        self._agents: dict[str, object] = dict(agents or {})
        # The executors bound to this catalog, kept by the engine registry: they live and
        # die with it (pinqpy.engines.registry.executor_for).
        self.executors: dict[int, tuple[Any, Any]] = {}

    # -- looking up ---------------------------------------------------------------------
    def data(self, table: TableRef) -> Any:
        """The engine handle (a DataFrame, a DuckDB or Spark table) of a private table."""
        return _get(self._tables, table.id, "table")

    def public_data(self, public: PublicTable) -> Any:
        """The snapshot (a pandas DataFrame) of a public table."""
        return _get(self._public, public.id, "public table")

    def agent(self, name: str) -> Any:
        """The privacy agent named ``name``."""
        return _get(self._agents, name, "privacy agent")

    def root_agent(self, name: str) -> Any:
        """The agent named ``name``, or for a :class:`~pinqpy.accounting.agents.Scaled` view
        the agent it scales (the budget a public-size table's charges reach)."""
        agent = self.agent(name)
        while isinstance(agent, Scaled):
            agent = agent.agent
        return agent

    def lineage(self, plan: PlanNode) -> dict[Any, Any]:
        """:func:`~pinqpy.plan.stability.lineage_of` with each agent name resolved: ``{agent:
        stability}``, as charges and budgets need it."""
        return self.resolve(lineage_of(plan))

    def resolve(self, lineage: Lineage) -> dict[Any, Any]:
        """``lineage`` (by agent name) by agent. A :class:`~pinqpy.accounting.agents.Scaled`
        agent stands for its own agent at ``factor`` times the stability, so it resolves to
        that agent (stabilities of one agent reached twice add up, as two inputs do)."""
        out: dict[Any, Any] = {}
        for name, k in lineage.items():
            agent = self.agent(name)
            while isinstance(agent, Scaled):
                k, agent = k * agent.factor, agent.agent
            out[agent] = out[agent] + k if agent in out else k
        return out

    # -- adding -------------------------------------------------------------------------
    def with_table(self, table: TableRef, data: Any, agent: object) -> Catalog:
        """This catalog plus a private table's handle and the agent it draws on."""
        return self.merge(Catalog({table.id: data}, agents={table.agent: agent}))

    def with_public(self, public: PublicTable, data: Any) -> Catalog:
        """This catalog plus a public snapshot."""
        return self.merge(Catalog(public={public.id: data}))

    def with_agent(self, name: str, agent: object) -> Catalog:
        """This catalog plus an agent."""
        return self.merge(Catalog(agents={name: agent}))

    def merge(self, other: Catalog) -> Catalog:
        """Everything either catalog names (the same catalog when ``other`` adds nothing).
        An id that names two different things is refused: ids are unique, so only a
        hand-made catalog can do that."""
        if other is self:
            return self
        parts = [
            _union(mine, theirs, what)
            for mine, theirs, what in (
                (self._tables, other._tables, "table"),
                (self._public, other._public, "public table"),
                (self._agents, other._agents, "privacy agent"),
            )
        ]
        mine = (self._tables, self._public, self._agents)
        if all(p is m for p, m in zip(parts, mine, strict=True)):
            return self
        return Catalog(*parts)

    def __repr__(self) -> str:
        return (
            f"Catalog({len(self._tables)} tables, {len(self._public)} public tables, "
            f"{len(self._agents)} agents)"
        )


def _get(entries: dict[str, Any], key: str, what: str) -> Any:
    try:
        return entries[key]
    except KeyError:
        raise PinqError(f"the plan names {what} {key!r}, which is not in its catalog") from None


def _union(mine: dict[str, Any], theirs: dict[str, Any], what: str) -> dict[str, Any]:
    """``mine`` itself when ``theirs`` adds nothing, else both together."""
    new = {}
    for key, value in theirs.items():
        have = mine.get(key, _MISSING)
        if have is _MISSING:
            new[key] = value
        elif have is not value:
            raise PinqError(f"two catalogs give {what} {key!r} different contents")
    return {**mine, **new} if new else mine


_MISSING = object()
