"""Accuracy previews: what an aggregation of a frame (or of every part of a partition) would
give at some epsilon, in the answer's own units, without reading data or charging anything.

:meth:`PrivateFrame.accuracy <pinqpy.PrivateFrame.accuracy>` and
:meth:`Partition.accuracy <pinqpy.api.partition.Partition.accuracy>` both call
:func:`preview`. It builds the aggregation's mechanism from public parameters only (the same
``prepare_*`` step the aggregation runs first, which checks every argument), states the
mechanism's error at ``level`` (:mod:`pinqpy.results.accuracy` derives the figures and what
they assume), and what the aggregation would charge each budget. Nothing private is read: a
frame's public row count (``public_size``) is the curator's published fact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from pinqpy.accounting.agents import flatten
from pinqpy.accounting.charges import usage_of
from pinqpy.accounting.cost import check_delta
from pinqpy.core.exact import Exact
from pinqpy.errors import PinqError, PrivacyError
from pinqpy.noise import mechanisms as mech
from pinqpy.noise.keyselect import KeySelectionMechanism
from pinqpy.pipeline import prepare, run
from pinqpy.pipeline.neighbours import neighbours_text
from pinqpy.pipeline.relation import Relation
from pinqpy.results.accuracy import (
    AccuracyPreview,
    ErrorFigure,
    key_selection_figure,
    mean_figure,
    quantile_figure,
)
from pinqpy.results.noise import check_level

__all__ = ["KINDS", "preview"]

#: What ``accuracy()`` previews.
KINDS = (
    "count",
    "sum",
    "mean",
    "median",
    "quantile",
    "variance",
    "stddev",
    "histogram",
    "select_keys",
)


def _column_name(column: object) -> str | None:
    """The column as the analyst wrote it, for "in age's units"."""
    if isinstance(column, str):
        return column
    to_sql = getattr(column, "to_sql", None)
    return str(to_sql()) if callable(to_sql) else None


def _needs_column(kind: str, column: object) -> None:
    if column is None:
        raise PinqError(f"accuracy({kind!r}) needs a column")


def _charge(rel: Relation, m: Any, kind: str) -> dict[str, object]:
    lin = rel.lineage()
    rel.require_bounded(lin, kind)
    return {repr(b): m.charge.at(Fraction(k)) for b, k in flatten(lin).items()}


def _extras(
    rel: Relation, m: Any, expected: float | None, expected_times_n: float | None = None
) -> dict[str, Any]:
    """The preview's expected error, the measurement's delta, and its rho at stability 1
    when a budget the frame draws on accounts in zCDP (what its charge is composed as)."""
    zcdp = any(getattr(b, "accounting", None) == "zcdp" for b in flatten(rel.lineage()))
    rho = usage_of(m.charge, 1).rho if zcdp else None
    return {
        "expected": None if expected is None else float(expected),
        "expected_times_n": None if expected_times_n is None else float(expected_times_n),
        "delta": float(getattr(m, "delta", 0) or 0),
        "rho": None if rho is None else float(rho),
    }


def _scales(m: Any) -> float | dict[str, float] | None:
    """The noise scale(s) of a mechanism: one float, or a dict when it measures several."""
    if m.noise_scale is not None:
        return float(m.noise_scale)
    named = {
        name: float(getattr(m, f"{name}_noise").scale)
        for name in ("count", "sum", "sq")
        if getattr(m, f"{name}_noise", None) is not None
    }
    return named or None


def preview(
    rel: Relation,
    aggregation: str,
    column: object = None,
    *,
    epsilon: object,
    level: float = 0.95,
    bounds: tuple[float, float] | None = None,
    delta: object = None,
    q: float = 0.5,
    n: object = None,
    whole: bool = True,
    max_groups: int | None = None,
    declared_keys: Iterable[str] = (),
) -> AccuracyPreview:
    """The preview of ``aggregation`` over ``rel``; ``whole=False`` for each part of a
    partition (a part never uses the frame's public row count: a public total says nothing
    public about a part's rows). See :class:`~pinqpy.results.accuracy.AccuracyPreview`; its
    ``neighbours`` names the neighbour relation the charge protects
    (:mod:`pinqpy.pipeline.neighbours`)."""
    found = _preview(
        rel, aggregation, column, epsilon, level, bounds, delta, q, n, whole, max_groups,
        declared_keys,
    )  # fmt: skip
    return dataclasses.replace(found, neighbours=neighbours_text(rel))


def _preview(
    rel: Relation,
    aggregation: str,
    column: object,
    epsilon: object,
    level: float,
    bounds: tuple[float, float] | None,
    delta: object,
    q: float,
    n: object,
    whole: bool,
    max_groups: int | None,
    declared_keys: Iterable[str],
) -> AccuracyPreview:
    if not isinstance(aggregation, str):
        raise PinqError(f"accuracy() knows {', '.join(KINDS)}")
    kind = aggregation.lower()
    lv = check_level(level)
    if kind in ("histogram", "select_keys"):
        return _keys_preview(rel, kind, column, epsilon, delta, max_groups, lv, declared_keys)
    if max_groups is not None:
        raise PinqError("max_groups belongs to accuracy('histogram') and accuracy('select_keys')")
    name = _column_name(column)
    fig: ErrorFigure | None = None
    if kind == "count":
        prep = prepare.prepare_count(rel, epsilon, delta, whole=whole)
    elif kind == "sum":
        _needs_column(kind, column)
        prep = prepare.prepare_sum(rel, column, epsilon, bounds, delta, whole=whole)
    elif kind == "mean":
        _needs_column(kind, column)
        prep = prepare.prepare_mean(rel, column, epsilon, bounds, delta, whole=whole)
        fig = mean_figure(prep.mechanism, level=lv, n=n, column=name)
    elif kind in ("median", "quantile"):
        _needs_column(kind, column)
        qq = 0.5 if kind == "median" else q
        prep = prepare.prepare_quantile(rel, column, qq, epsilon, bounds, None, whole=whole)
        fig = quantile_figure(prep.mechanism, level=lv, n=n, column=name)
    elif kind in ("variance", "stddev"):
        _needs_column(kind, column)
        prep = prepare.prepare_variance(
            rel, column, epsilon, bounds, delta, stddev=kind == "stddev", whole=whole
        )
    else:
        raise PinqError(f"accuracy() knows {', '.join(KINDS)}")
    m = prep.mechanism
    charge = _charge(rel, m, kind)
    if fig is not None:
        return AccuracyPreview(
            kind, m.describe(), m.epsilon, lv, float(fig.error or 0.0), fig.unit,
            fig.noise_scale, charge, fig.note, fig.n, fig.error_times_n, fig.rank_error,
            **_extras(rel, m, fig.expected, fig.expected_times_n),
        )  # fmt: skip
    if n is not None:
        raise PinqError(
            f"n= (a row count) sharpens the preview of a mean or a quantile; a {kind}'s error "
            "does not depend on it"
        )
    err = float(m.accuracy(lv))
    if isinstance(m, mech.PublicCountMechanism):
        note = "the row count is public (declared by the curator): released exactly, free"
    elif kind == "count":
        note = "in rows"
    elif kind == "sum":
        note = f"in {name or 'the column'}'s units"
    else:
        note = f"in {name or 'the column'}'s {'units' if kind == 'stddev' else 'units squared'}"
    return AccuracyPreview(
        kind, m.describe(), m.epsilon, lv, err, "", _scales(m), charge, note,
        **_extras(rel, m, float(m.expected_error())),
    )  # fmt: skip


def _keys_preview(
    rel: Relation,
    kind: str,
    columns: object,
    epsilon: object,
    delta: object,
    max_groups: int | None,
    level: float,
    declared_keys: Iterable[str],
) -> AccuracyPreview:
    """A key selection's threshold and its released counts' error (``select_keys``, and
    ``histogram`` without public keys); a histogram over public keys is a count per key."""
    if columns is None:
        raise PinqError(f"accuracy({kind!r}) needs the key column(s)")
    try:
        cols = (columns,) if isinstance(columns, str) else tuple(columns)  # type: ignore[arg-type]
    except TypeError:
        raise PinqError(f"accuracy({kind!r}) takes a column name or a list of names") from None
    cols = tuple(rel.check_columns(cols))
    public = set(declared_keys)
    if kind == "histogram" and all(c in public for c in cols):
        base = rel
        if max_groups is not None:
            unit = rel.privacy_unit
            if unit is None:
                raise PrivacyError(
                    "max_groups limits each person's keys on a user-level frame; this frame "
                    "has no privacy unit (each row is one person already)"
                )
            base = rel.distinct(dict.fromkeys([unit, *cols])).bound_contributions(max_groups)
        prep = prepare.prepare_count(base, epsilon, None)
        m = prep.mechanism
        note = "public keys: every key is released, each count off by at most this many rows"
        return AccuracyPreview(
            kind, m.describe(), m.epsilon, level, float(m.accuracy(level)), "rows",
            _scales(m), _charge(base, m, kind), note, **_extras(base, m, m.expected_error()),
        )  # fmt: skip
    if delta is None or (not isinstance(delta, bool) and delta == 0):
        raise PrivacyError(
            f"accuracy({kind!r}) of {', '.join(map(repr, cols))}: keys that are not public are "
            "selected privately, which needs a delta (delta=1e-6)"
        )
    eps = prepare.check_eps(epsilon)
    dlt = check_delta(delta, "delta")
    base, lin, structure = run._counted(rel, cols, max_groups, kind)
    base.require_bounded(lin, kind)
    m = KeySelectionMechanism(eps, dlt, max_groups=structure[0], max_rows=structure[1])
    fig = key_selection_figure(m, level=level)
    charge = {repr(b): m.charge.at(Fraction(k)) for b, k in flatten(lin).items()}
    half = int(m.threshold)
    sure = half
    while m.pass_probability(sure) < level:
        sure += 1
    details = {"rows_for_half": float(half), "rows_for_level": float(sure)}
    return AccuracyPreview(
        kind, m.describe(), Exact(eps), level, float(fig.error or 0.0), "rows",
        fig.noise_scale, charge, fig.note, None, None, None, int(m.threshold), details,
        **_extras(base, m, m.expected_error()),
    )  # fmt: skip
