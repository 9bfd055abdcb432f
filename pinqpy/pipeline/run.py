"""Run: check, charge, consult the answer cache, read through the engine, release with noise.

Every entry point (method chaining, partitions, SQL) runs its prepared measurements
(:mod:`pinqpy.pipeline.prepare`) through :func:`run`: nothing touches data until the whole
charge is accepted, and if any budget refuses, none is charged.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.accounting.agents import charge_all, flatten
from pinqpy.accounting.cost import check_delta
from pinqpy.engines.base import Executor, Read
from pinqpy.engines.registry import executor_for
from pinqpy.errors import PinqError, PrivacyError
from pinqpy.noise.keyselect import KeySelectionMechanism, structure_for
from pinqpy.pipeline import answers as _answers
from pinqpy.pipeline.prepare import Prepared, changed_row_frame, check_eps
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.batch import batch
from pinqpy.plan.canonical import NotCanonical, canonical_plan
from pinqpy.plan.describe import plan_label
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.keys import is_null_key
from pinqpy.plan.stability import INF, unit_spread
from pinqpy.results.keys import SelectedKeys
from pinqpy.results.tables import NoisySeries

__all__ = ["Target", "audit_label", "reading", "run", "run_each", "run_one", "select_keys"]

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
        return _run_batch(prepared, [target] * len(prepared), label, charged)


def run_each(
    items: Sequence[tuple[Prepared, Target]], label: str | None = None
) -> list[tuple[np.ndarray, Any]]:
    """:func:`run` for measurements taken each over its own target (the marginals of one
    call, each a partition of its own): checked and charged in one transaction, then read
    in one batch."""
    with batch():
        return _run_batch([p for p, _ in items], [t for _, t in items], label, False)


def _run_batch(
    prepared: list[Prepared], targets: list[Target], label: str | None, charged: bool
) -> list[tuple[np.ndarray, Any]]:
    groupings = [None if t is None else t[0] for t in targets]
    if any(
        g is not None and getattr(p.mechanism, "changed_row", False)
        for p, g in zip(prepared, groupings, strict=True)
    ):
        # Calibrated for one changed row of the whole frame, which moves a group's statistic
        # more: a caller's bug, refused before anything is charged or read.
        raise PinqError(
            "an aggregation calibrated for the whole frame cannot be released per group "
            "(nothing was charged)"
        )
    # One grouping for the whole call (a query, a partition's read), else None: the ledger
    # keeps answers of one grouping only, and the engine prefetches per grouping.
    shared = all(g == groupings[0] for g in groupings)
    grouping = groupings[0] if shared and groupings else None
    lineages = [
        p.relation.lineage() if t is None else t[1]
        for p, t in zip(prepared, targets, strict=True)
    ]
    for p, lin in zip(prepared, lineages, strict=True):
        p.relation.require_bounded(lin, p.label)
    # A budget kept in a ledger remembers whole answers across restarts.
    budgets = {b for lin in lineages for b in flatten(lin)}
    ledgered = [b for b in budgets if b._ledger is not None]
    pkey = _answers.persistent_key(prepared, grouping, ledgered) if ledgered and shared else None
    if pkey is not None:
        for b in ledgered:
            stored = b._ledger_answer(pkey)
            if stored is not None:
                return _answers.decode(stored)
    keys: list[str | None] = []
    hits: dict[int, tuple[np.ndarray, Any]] = {}
    requests = []
    for i, (p, lin) in enumerate(zip(prepared, lineages, strict=True)):
        key = _answers.key(p, groupings[i])
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
            label=label or _label_of(prepared, groupings),
            plan=_plan_text(prepared),
            cache_key=pkey,
        )
    if shared:
        _prefetch([p for i, p in enumerate(prepared) if i not in hits], grouping)
    out = []
    for i, p in enumerate(prepared):
        if i in hits:
            out.append(hits[i])
            continue
        with reading(p.label):
            data = p.exact(groupings[i])
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


def _label_of(prepared: list[Prepared], groupings: list[Grouping | None]) -> str:
    if all(g == groupings[0] for g in groupings):
        return audit_label(prepared, groupings[0])
    return "; ".join(audit_label([p], g) for p, g in zip(prepared, groupings, strict=True))


def select_keys(
    rel: Relation,
    columns: str | Iterable[str],
    epsilon: object,
    delta: object,
    max_groups: int | None = None,
    *,
    label: str = "select_keys",
) -> SelectedKeys:
    """The keys of ``columns`` whose noisy row count clears the threshold, sorted, with those
    noisy counts as ``.counts`` (:class:`~pinqpy.noise.keyselect.KeySelectionMechanism`: one
    step, the counts are the selection's). Charged ``epsilon`` times the stability and
    ``delta``.

    The threshold is set for the frame's contribution structure: ``max_groups=G`` first limits
    every person of a user-level relation to G distinct keys (then each counts at most 1 in
    each of at most G keys: ``(G, 1)``, stability G); otherwise a unit of stability ``s``
    may put its ``s`` rows anywhere (``G = k = ceil(s)``). A frame that draws on several
    budgets uses the latter for all of them (the structure is known for one unit only)."""
    try:
        cols = (columns,) if isinstance(columns, str) else tuple(columns)
    except TypeError:
        raise PinqError(f"{label} takes a column name or a list of column names") from None
    cols = rel.check_columns(cols)
    eps = check_eps(epsilon)
    dlt = check_delta(delta, "delta")
    base, lin, structure = _counted(rel, cols, max_groups, label)
    m = KeySelectionMechanism(eps, dlt, max_groups=structure[0], max_rows=structure[1])
    ex = executor_for(base.plan, base.catalog)
    ex.validate(base.plan)
    charge_all([(lin, m.charge)], label=f"{label}({', '.join(cols)}) over {plan_label(base.plan)}")
    with reading(label):
        keys, counts = ex.key_counts(base.plan, cols)
        selected, noisy = m.release(keys, counts)
    order = _key_order(selected)
    selected = [selected[i] for i in order]
    acc = m.released_accuracy(np.asarray(noisy, dtype=np.int64)[order])
    if len(cols) == 1:
        index = pd.Index(selected, name=cols[0], dtype=object)
    else:
        index = pd.MultiIndex.from_tuples(selected, names=list(cols))
    return SelectedKeys(selected, NoisySeries.from_release(acc, index=index))


def _counted(
    rel: Relation, cols: tuple[str, ...], max_groups: int | None, label: str
) -> tuple[Relation, Mapping[object, Any], tuple[int, int]]:
    """The relation whose rows a key's count counts, its lineage, and the contribution
    structure ``(G, k)`` of one unit in it (see :func:`select_keys`)."""
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
    stabilities = flatten(lin)
    if any(k == INF for k in stabilities.values()):
        raise PrivacyError(
            f"{label} on a user-level frame needs max_groups=G: each person (by "
            f"{unit!r}) then counts toward at most G keys"
            if unit
            else f"{label} on a frame with unbounded contributions: bound them first"
        )
    if max_groups is not None and len(stabilities) == 1:
        structure = (int(max_groups), 1)
    else:
        structure = key_structure(base, cols)
    return base, lin, structure


def key_structure(rel: Relation, columns: tuple[str, ...]) -> tuple[int, int]:
    """``(G, k)``: at most how many keys of ``columns`` one privacy unit's rows of ``rel``
    fall in, and at most how many rows in each (the structure key selection's threshold is
    set for; :mod:`pinqpy.noise.keyselect`).

    A relation bounded by groups on exactly ``columns`` (``bound_contributions(max_groups=G,
    max_rows_per_group=k, by=columns)``, then row-wise steps) and drawing on one budget has
    the spread :func:`~pinqpy.plan.stability.unit_spread` derives: at most ``G`` keys, at
    most ``k`` rows each. Otherwise a unit of stability ``s`` may put its rows anywhere:
    ``G = k = ceil(s)`` (the largest stability over the budgets: the threshold's delta must
    hold for every budget's unit, and the structure is known for one unit only).

    A frame with exactly the rows of a table whose row count is public
    (:func:`~pinqpy.pipeline.prepare.changed_row_frame`) is ``(1, 1)`` at its stability 2:
    one changed row removes one row (so at most one key only the old table has, of one row)
    and adds one (at most one key only the new table has, of one row), and the threshold's
    argument (:mod:`pinqpy.noise.keyselect`, "Derived frames") needs only that."""
    if changed_row_frame(rel, True):
        return 1, 1
    raw = rel.lineage()
    lineage = flatten(raw)
    worst = max(lineage.values(), default=Fraction(1))
    spread = unit_spread(rel.plan, tuple(columns))
    if spread is not None and len(lineage) == 1 and len(raw) == 1:
        agent = rel.catalog.agent(spread.agent)
        if raw.get(agent) == spread.total and spread.per_part != INF:
            return min(spread.max_parts, math.ceil(spread.total)), math.ceil(spread.per_part)
    return structure_for(worst)


def _key_order(keys: list[Hashable]) -> list[int]:
    """Positions of ``keys`` in sorted order (NULL-like keys last; mixed types by type name)."""

    def plain(i: int) -> Any:
        return keys[i]

    def robust(i: int) -> Any:
        k = keys[i] if isinstance(keys[i], tuple) else (keys[i],)
        return tuple((is_null_key(v), type(v).__name__, v if not is_null_key(v) else 0) for v in k)

    idx = list(range(len(keys)))
    try:
        return sorted(idx, key=plain)
    except TypeError:
        try:
            return sorted(idx, key=robust)
        except TypeError:
            return sorted(idx, key=lambda i: repr(keys[i]))


def audit_label(prepared: Sequence[Prepared], grouping: Grouping | None = None) -> str:
    """What a method-chained charge is called in the budget's history and the ledger: each
    aggregation and its input, per key when it is taken over a partition, and the plan on one
    line (:func:`~pinqpy.plan.describe.plan_label`), e.g. ``mean(income) over Where(age >=
    65) <- people``. Built from the query alone (expressions, public parameters and keys,
    table names), never from data."""
    parts = []
    for p in prepared:
        if p.what is None:
            what = f"{p.label}(<callable>)"
        else:  # candidate grids are digests: name the column only
            what = p.what.split(";")[0] + ")" if ";" in p.what else p.what
        per = ""
        if grouping is not None:
            n = len(grouping.keys)
            per = f" per {', '.join(grouping.columns)} ({n} key{'s' if n != 1 else ''})"
        parts.append(f"{what}{per} over {plan_label(p.relation.plan)}")
    return "; ".join(parts)


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
