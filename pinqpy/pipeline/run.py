"""Run: check, charge, consult the answer cache, read through the engine, release with noise.

Every entry point (method chaining, partitions, SQL) runs its prepared measurements
(:mod:`pinqpy.pipeline.prepare`) through :func:`run`: nothing touches data until the whole
charge is accepted, and if any budget refuses, none is charged.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from pinqpy.accounting.agents import charge_all, flatten
from pinqpy.accounting.cost import check_delta
from pinqpy.engines.base import Executor, Read
from pinqpy.engines.registry import executor_for
from pinqpy.errors import PinqError, PrivacyError
from pinqpy.noise.keyselect import KeySelectionMechanism
from pinqpy.pipeline import answers as _answers
from pinqpy.pipeline.prepare import Prepared, check_eps
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.batch import batch
from pinqpy.plan.canonical import NotCanonical, canonical_plan
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.stability import INF

__all__ = ["Target", "reading", "run", "run_one", "select_keys"]

#: Where aggregates are taken: None for the whole relation, or (grouping, lineage) for all
#: parts of a partition at once.
Target = tuple[Grouping, Mapping[object, Any]] | None


def run_one(prepared: Prepared, target: Target) -> tuple[Any, Any]:
    """:func:`run` for one measurement: its released ``(values, accuracy)``."""
    return run([prepared], target)[0]


def run(
    prepared: list[Prepared],
    target: Target,
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
        return _run_batch(prepared, target, label, charged)


def _run_batch(
    prepared: list[Prepared], target: Target, label: str | None, charged: bool
) -> list[tuple[np.ndarray, Any]]:
    grouping = None if target is None else target[0]
    lineages = [p.relation.lineage() if target is None else target[1] for p in prepared]
    for p, lin in zip(prepared, lineages, strict=True):
        p.relation.require_bounded(lin, p.label)
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
        with reading(p.label):
            data = p.exact(grouping)
            released = (
                p.mechanism.release(*data) if isinstance(data, tuple) else p.mechanism.release(data)
            )
        _answers.put(keys[i], lineages[i], released, p.relation.plan)
        out.append(released)
    if receipt is not None and pkey is not None:
        try:
            text = _answers.encode(out)
        except _answers.NotStorable:  # no data form: cached in memory only
            return out
        for ledger, query_id in receipt.queries.items():
            ledger.store_answer(query_id, pkey, text)  # type: ignore[attr-defined]
    return out


def select_keys(
    rel: Relation,
    columns: str | Iterable[str],
    epsilon: object,
    delta: object,
    max_groups: int | None = None,
) -> list[Hashable]:
    """The keys of ``columns`` whose noisy row count clears the threshold
    (:class:`~pinqpy.noise.keyselect.KeySelectionMechanism`), charged (epsilon, delta) times
    the stability. ``max_groups=G`` first limits every person of a user-level relation to G
    distinct keys."""
    try:
        cols = (columns,) if isinstance(columns, str) else tuple(columns)
    except TypeError:
        raise PinqError("select_keys takes a column name or a list of column names") from None
    cols = rel.check_columns(cols)
    m = KeySelectionMechanism(check_eps(epsilon), check_delta(delta, "delta"))
    unit = rel.privacy_unit
    base = rel
    if max_groups is not None:
        if unit is None:
            raise PrivacyError(
                "max_groups limits each person's keys on a user-level frame; this frame "
                "has no privacy unit (each row is one person already)"
            )
        base = rel.distinct(dict.fromkeys([unit, *cols])).bound_contributions(max_groups)
    lin = base.lineage()
    if any(k == INF for k in flatten(lin).values()):
        raise PrivacyError(
            f"select_keys on a user-level frame needs max_groups=G: each person (by "
            f"{unit!r}) then counts toward at most G keys"
            if unit
            else "select_keys on a frame with unbounded contributions: bound them first"
        )
    ex = executor_for(base.plan, base.catalog)
    ex.validate(base.plan)
    charge_all([(lin, m.charge)], label="select_keys")
    with reading("select_keys"):
        keys, counts = ex.key_counts(base.plan, cols)
        selected, _ = m.release(keys, counts)
    return selected  # type: ignore[no-any-return]


def _plan_text(prepared: list[Prepared]) -> str:
    """The canonical plans and aggregations of a charge, for the ledger's audit trail."""
    parts = []
    for p in prepared:
        try:
            plan = canonical_plan(p.relation.plan, lambda t: t.name, p.relation.catalog)
        except NotCanonical:
            plan = "<plan with a Python callable>"
        parts.append(f"{p.what or p.label} over {plan}")
    return "; ".join(parts)


@contextmanager
def reading(label: str) -> Iterator[None]:
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
            with reading(", ".join(p.label for p in prepared)):
                ex.prefetch(reads, grouping)
