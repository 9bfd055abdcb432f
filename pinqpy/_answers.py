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
import hashlib
import pickle
import weakref
from collections.abc import Mapping
from typing import Any

from ._agents import flatten
from ._canonical import NotCanonical, canonical_plan, digest
from ._executor import Grouping
from ._plan import TableRef

__all__ = ["fingerprint", "get", "key", "persistent_key", "put"]

_FINGERPRINTS: weakref.WeakKeyDictionary[TableRef, str] = weakref.WeakKeyDictionary()


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


def fingerprint(table: TableRef) -> str:
    """A hash of a table's name, schema and contents, computed once per table.

    Only budgets with a ledger need it (to recognise the same data after a restart); it is
    one pass over the data, never released and never leaving the process except as this
    hash inside the curator's own ledger file. Only pandas tables have one.
    """
    found = _FINGERPRINTS.get(table)
    if found is None:
        import pandas as pd

        data = table.data
        if not isinstance(data, pd.DataFrame):
            # A DuckDB or Spark table would need a full scan to hash; such answers are cached
            # in memory only (the ledger still records every charge).
            raise NotCanonical
        h = hashlib.sha256()
        h.update(
            repr((table.name, tuple(map(str, data.columns)), tuple(map(str, data.dtypes)))).encode()
        )
        h.update(pd.util.hash_pandas_object(data, index=False).to_numpy().tobytes())
        found = h.hexdigest()[:32]
        _FINGERPRINTS[table] = found
    return found


def persistent_key(
    prepared: list[Any], grouping: Grouping | None, budgets: list[Any]
) -> str | None:
    """The ledger's cache key for one call's aggregations together (None if any can't be)."""
    parts = []
    for p in prepared:
        text = question(p, grouping, fingerprint)
        if text is None:
            return None
        parts.append(text)
    names = ",".join(sorted(b._ledger_name for b in budgets))
    return "ledger:" + digest(names + "|" + "||".join(parts))


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
