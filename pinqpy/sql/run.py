"""Run a compiled release: one charge for every measurement, then read, add noise and shape
the answer (HAVING, ORDER BY and LIMIT are post-processing of the noisy values)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from pinqpy.accounting.agents import charge_all
from pinqpy.engines.registry import executor_for
from pinqpy.expr.pandas_eval import evaluate, predicate_mask
from pinqpy.pipeline.prepare import Prepared
from pinqpy.pipeline.run import reading, released_keys, run
from pinqpy.plan.batch import batch
from pinqpy.plan.grouping import Grouping
from pinqpy.results.accuracy import Accuracy
from pinqpy.results.tables import NoisyFrame
from pinqpy.sql.compiler import CompiledRelease

__all__ = ["run_release"]


def run_release(rel: CompiledRelease, label: str = "sql") -> NoisyFrame:
    prepared = [m.prepared for m in rel.measurements]
    grouping = rel.grouping
    if rel.key_selection is not None:
        released, grouping = _with_selected_keys(rel, prepared, label)
    else:
        released = run(prepared, rel.target, label=label)
    n = 1 if grouping is None else len(grouping.keys)
    work: dict[str, object] = {"__pos": np.arange(n)}
    if grouping is not None:
        keys = grouping.keys
        for i in range(len(rel.key_names)):
            col = [k[i] for k in keys] if len(rel.key_names) > 1 else list(keys)
            work[f"__k{i}"] = pd.Series(col, dtype=object).infer_objects()
    accs: list[Accuracy] = []
    for i, (values, acc) in enumerate(released):
        work[f"__m{i}"] = np.asarray(values)  # counts stay integers
        accs.append(acc)
    frame = pd.DataFrame(work)
    if rel.having is not None:
        frame = frame[predicate_mask(rel.having, frame)]
    if rel.order_by:
        sort_cols, ascending = [], []
        for j, item in enumerate(rel.order_by):
            name = f"__o{j}"
            frame = frame.assign(**{name: evaluate(item.expr, frame).to_numpy()})
            sort_cols.append(name)
            ascending.append(not item.descending)
        frame = frame.sort_values(sort_cols, ascending=ascending, kind="stable", na_position="last")
    if rel.distinct:
        # SELECT DISTINCT over the released values: drop repeated output rows (post-processing).
        shown = pd.DataFrame({name: evaluate(expr, frame).to_numpy() for name, expr in rel.outputs})
        frame = frame[~shown.duplicated().to_numpy()]
    if rel.limit is not None:
        frame = frame.head(rel.limit)
    frame = frame.reset_index(drop=True)
    positions = frame["__pos"].to_numpy()
    out = {}
    accuracy: dict[str, Accuracy] = {}
    for name, expr in rel.outputs:
        out[name] = evaluate(expr, frame).to_numpy()
        col = getattr(expr, "name", None)
        if col is not None and col.startswith("__m") and type(expr).__name__ == "Column":
            accuracy[name] = accs[int(col[3:])].take(positions)
    return NoisyFrame.from_release(pd.DataFrame(out), accuracy)


def _with_selected_keys(
    rel: CompiledRelease, prepared: list[Prepared], label: str
) -> tuple[list, Grouping]:
    """Charge selection and every aggregate in one transaction, then select, then aggregate."""
    with batch():  # selection and the aggregates read the same relations
        return _select_then_aggregate(rel, prepared, label)


def _select_then_aggregate(
    rel: CompiledRelease, prepared: list[Prepared], label: str
) -> tuple[list, Grouping]:
    """The selection's noisy counts are the released COUNT(*) when the query has one
    (``rel.selection_index``): that measurement is neither charged nor read again."""
    assert rel.key_selection is not None and rel.target_lineage is not None
    relation, columns, mechanism = rel.key_selection
    lineage = relation.lineage()
    relation.require_bounded(lineage, "GROUP BY")
    ex = executor_for(relation.plan, relation.catalog)
    ex.validate(relation.plan)
    sel = rel.selection_index
    others = [p for i, p in enumerate(prepared) if i != sel]
    for p in others:
        if p.check is not None:
            p.check()
    requests = [(lineage, mechanism.charge)]
    requests += [(rel.target_lineage, p.mechanism.charge) for p in others]
    charge_all(requests, label=label)
    with reading("GROUP BY key selection"):
        selected, noisy = released_keys(ex, relation.plan, columns, mechanism)
    grouping = Grouping(columns, tuple(selected))
    if not selected:
        out = [(np.zeros(0), _empty(p)) for p in others]
    else:
        out = run(others, (grouping, rel.target_lineage), label=label, charged=True)
    if sel is not None:
        out.insert(sel, (noisy, mechanism.released_accuracy(noisy)))
    return out, grouping


def _empty(prepared: Prepared) -> Accuracy:
    """The accuracy of an aggregate over no released key: no values, and the epsilon and
    delta its measurement was charged (as a non-empty release would state them)."""
    from pinqpy.results.accuracy import AdditiveAccuracy
    from pinqpy.results.noise import LaplaceNoise

    mech = prepared.mechanism
    return AdditiveAccuracy(
        np.zeros(0),
        LaplaceNoise(1.0),
        epsilon=getattr(mech, "epsilon", 1),
        delta=getattr(mech, "delta", 0),
    )
