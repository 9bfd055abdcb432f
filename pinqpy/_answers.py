"""The answer cache: asking the same question again returns the same noisy answer, free.

Re-releasing an answer already released is post-processing, so it costs no privacy. A
question is the same when its canonical plan (:mod:`pinqpy._canonical`), its aggregation and
input expression, its mechanism and every public parameter (epsilon, delta, bounds, q,
candidates) and its public keys all agree. The key is a hash of that text, so it does not
depend on how the query was spelt (method chaining or SQL, spacing, keyword case).

Answers are kept on the budgets the question was charged to. An in-memory key names each table
by its identity and the entry keeps the table alive, so new data registered later can never
be answered from old data. A budget with a ledger also stores answers there (see
:mod:`pinqpy._ledger`), keyed by a fingerprint of the data, so they survive a restart.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Mapping
from typing import Any

from ._agents import flatten
from ._canonical import NotCanonical, canonical_plan, digest
from ._executor import Grouping
from ._plan import TableRef

__all__ = ["get", "key", "put"]


def _tables(plan: Any) -> list[TableRef]:
    out: list[TableRef] = []
    stack = [plan]
    while stack:
        node = stack.pop()
        table = getattr(node, "table", None)
        if isinstance(table, TableRef):
            out.append(table)
        stack.extend(node.children)
    return out


def _mechanism_text(mechanism: Any) -> str:
    parts = [type(mechanism).__name__, f"eps={mechanism.epsilon!r}", f"delta={mechanism.delta!r}"]
    for name in ("lo", "hi", "q", "sensitivity"):
        if hasattr(mechanism, name):
            parts.append(f"{name}={getattr(mechanism, name)!r}")
    return ",".join(parts)


def question(prepared: Any, grouping: Grouping | None, identity: Any) -> str | None:
    """The canonical text of a prepared aggregation, or None when it cannot be cached."""
    if prepared.what is None:
        return None
    try:
        plan = canonical_plan(prepared.frame._plan, identity)
    except NotCanonical:
        return None
    groups = "" if grouping is None else f"{grouping.columns!r}:{grouping.keys!r}"
    return f"{plan}|{prepared.what}|{_mechanism_text(prepared.mechanism)}|{groups}"


def key(prepared: Any, grouping: Grouping | None) -> str | None:
    """The in-memory cache key of a prepared aggregation (tables named by identity)."""
    text = question(prepared, grouping, lambda t: f"{t.name}#{id(t)}")
    if text is None:
        return None
    return digest(text)


def _budgets(lineage: Mapping[object, Any]) -> list[Any]:
    return sorted(flatten(lineage), key=id)


def get(cache_key: str | None, lineage: Mapping[object, Any]) -> tuple[Any, Any] | None:
    """A stored answer for this question over these budgets, or None."""
    if cache_key is None:
        return None
    budgets = _budgets(lineage)
    if not budgets:
        return None
    entry = budgets[0]._answers.get(cache_key)
    if entry is not None:
        return entry[0]
    for b in budgets:
        stored = b._ledger_answer(cache_key) if hasattr(b, "_ledger_answer") else None
        if stored is not None:
            return decode(stored)
    return None


def put(
    cache_key: str | None, lineage: Mapping[object, Any], released: tuple[Any, Any], plan: Any
) -> None:
    if cache_key is None:
        return
    # The entry holds the plan's tables so their identities stay unique while it lives.
    tables = _tables(plan)
    for b in _budgets(lineage):
        b._answers[cache_key] = (released, tables)


def encode(released: tuple[Any, Any]) -> str:
    """An answer as text for the ledger (the ledger file is the curator's own)."""
    return base64.b64encode(pickle.dumps(released, protocol=pickle.HIGHEST_PROTOCOL)).decode()


def decode(text: str) -> tuple[Any, Any]:
    return pickle.loads(base64.b64decode(text.encode()))
