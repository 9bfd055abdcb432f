"""Prepare: an aggregation request becomes a :class:`Prepared` measurement.

Each ``prepare_*`` function validates its arguments (epsilon, delta, bounds, quantile level,
candidates) against public facts only and builds the mechanism from public parameters,
returning what to charge and how to read the exact aggregate. Nothing is charged or read
here; :mod:`pinqpy.pipeline.run` does that.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Hashable, Iterable
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.accounting.cost import check_delta, check_epsilon
from pinqpy.engines.base import Read
from pinqpy.engines.registry import executor_for
from pinqpy.errors import PinqError, PrivacyError
from pinqpy.expr.ast import Column, Expr
from pinqpy.noise import mechanisms as mech
from pinqpy.pipeline import answers as _answers
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.keys import is_null_key
from pinqpy.plan.meta import check_bounds
from pinqpy.plan.nodes import PyFunc, Source

__all__ = [
    "Prepared",
    "changed_row_frame",
    "check_eps",
    "prepare_argmax",
    "prepare_count",
    "prepare_mean",
    "prepare_quantile",
    "prepare_sum",
    "prepare_variance",
    "public_row_count",
]


class Prepared:
    """An aggregation ready to run: its mechanism (built from public parameters only) and how
    to read its exact aggregate. Nothing has been charged or read yet."""

    __slots__ = ("candidates", "check", "exact", "label", "mechanism", "read", "relation", "what")

    def __init__(
        self,
        relation: Relation,
        mechanism: Any,
        exact: Callable[[Grouping | None], Any],
        label: str,
        what: str | None = None,
        check: Callable[[], None] | None = None,
        read: Read | None = None,
    ):
        self.relation = relation
        self.mechanism = mechanism
        self.exact = exact
        self.label = label
        # What is aggregated, for the answer cache; None when it has no canonical form.
        self.what = what
        # The engine's own refusal (callables, unaggregatable types), run before the charge.
        self.check = check
        self.candidates: tuple[Hashable, ...] = ()
        # What ``exact`` reads, so the engine can read a query's aggregates together.
        self.read = read


def public_row_count(rel: Relation) -> int | None:
    """The row count of ``rel`` when its curator declared it public (``public_size=True``)
    and ``rel`` still has exactly the table's rows (:mod:`pinqpy.plan.facts`), else None.

    Read once per table, at its first use, by the table's own engine (``COUNT(*)`` for
    DuckDB and Spark), and kept: it is public, so reading it charges nothing and its value
    may be shown (EXPLAIN does).
    """
    size = rel.meta.size
    if size is None:
        return None
    if size.n is None:
        plan = Source(size.table)  # type: ignore[arg-type]
        ex = executor_for(plan, rel.catalog)
        try:
            counted = np.asarray(ex.count(plan, None)).reshape(-1)
        except PinqError:
            raise
        except Exception as exc:  # engine messages can quote values: quote none
            raise PinqError(f"reading the public row count failed ({type(exc).__name__})") from None
        size.n = int(counted[0]) if counted.size else 0
    return size.n


def changed_row_frame(rel: Relation, whole: bool) -> bool:
    """Whether an aggregation of ``rel`` calibrates its noise to its own sensitivity under
    **one changed row**, the neighbour relation of a table whose row count is public.

    True when the aggregation is of the whole frame (``whole``: not per group or part), the
    frame still has exactly the rows of such a table (``rel.meta.size``: only
    select/assign/renames since, :mod:`pinqpy.plan.facts`) and its stability is exactly 2
    for its budget: the table's :class:`~pinqpy.accounting.agents.ChangedRowView`, since a
    changed row is one row removed and one added. Neighbouring frames then have the same
    number of rows and differ in one row's values. A statistic that one changed row moves
    by at most ``D`` is released with noise calibrated to ``D/2`` per row of stability; the
    charge at stability 2 is then exactly its cost for one changed row: ``2·epsilon``
    (Laplace), ``4·rho`` = the rho of sensitivity ``D`` (zCDP), and for Gaussian noise the
    profile at shift ``2·(D/2) = D`` (:class:`~pinqpy.accounting.charges.GaussianCharge`).

    Never for groups or parts: the frame's total is public, a group's is not, and one
    changed row can leave one group and enter another, moving each group's statistic as
    much as a row added or removed does. Those are charged by the generic rule, two rows of
    stability per changed row (the partition's largest part at stability 2).
    """
    if not whole or rel.meta.size is None:
        return False
    stab = rel.stabilities()
    return bool(stab) and all(k == 2 for k in stab.values())


def _public_n(rel: Relation) -> Callable[[], int]:
    def n_of() -> int:
        n = public_row_count(rel)
        assert n is not None
        return n

    return n_of


def prepare_count(
    rel: Relation, epsilon: object, delta: object, *, whole: bool = False
) -> Prepared:
    """A row count: sensitivity 1 (adding or removing a row changes it by 1).

    ``whole=True`` (the count of the whole frame, not of groups): when the frame's row count
    is public (``public_size``), it is released exactly and charged nothing
    (:class:`~pinqpy.noise.mechanisms.PublicCountMechanism`); ``epsilon`` is still checked.
    Under that table's neighbour relation (one row changed) the count does not move at all.
    Groups never use it: a public total says nothing public about a group's rows, and one
    changed row moves two groups' counts by one each (charged as stability 2 per changed
    row, the partition's largest part at 2). A filtered frame's count is noisy too, charged
    at stability 2 (the changed row may leave the filter and another enter it).
    """
    eps = check_eps(epsilon)
    dlt = _delta(delta)
    plan = rel.plan
    if whole and rel.meta.size is not None:
        n_of = _public_n(rel)
        return Prepared(
            rel,
            mech.PublicCountMechanism(n_of),
            lambda g: np.array([n_of()], dtype=np.int64),
            "count",
            "count()",
        )
    m = mech.CountMechanism(eps, dlt)
    ex = executor_for(plan, rel.catalog)
    return Prepared(
        rel,
        m,
        lambda g: ex.count(plan, g),
        "count",
        "count()",
        lambda: ex.validate(plan),
        Read(ex, plan, "count"),
    )


def prepare_sum(
    rel: Relation,
    column: object,
    epsilon: object,
    bounds: Any,
    delta: object,
    *,
    whole: bool = False,
) -> Prepared:
    """A clamped sum: sensitivity ``max(|lo|, |hi|)`` per row added or removed; over the
    whole of a public-size table's rows (:func:`changed_row_frame`) ``max(hi, 0) - min(lo,
    0)`` per changed row (:class:`~pinqpy.noise.mechanisms.SumMechanism`)."""
    e, (lo, hi) = _numeric_arg(rel, column, bounds, "sum")
    m = mech.SumMechanism(
        check_eps(epsilon), lo, hi, _delta(delta), changed_row=changed_row_frame(rel, whole)
    )
    plan, ex = rel.plan, executor_for(rel.plan, rel.catalog)
    return Prepared(
        rel,
        m,
        lambda g: ex.clamped_sum(plan, g, e, lo, hi)[0],
        "sum",
        _what("sum", e),
        lambda: ex.validate(plan, e, numeric=True),
        Read(ex, plan, "sum", e, lo, hi),
    )


def prepare_mean(
    rel: Relation,
    column: object,
    epsilon: object,
    bounds: Any,
    delta: object,
    *,
    whole: bool = False,
) -> Prepared:
    """A clamped mean (:class:`pinqpy.noise.mechanisms.MeanMechanism`).

    ``whole=True`` (the mean of the whole frame, not of groups) over a frame whose row count
    is public (``public_size``): the public count is the denominator and all of epsilon goes
    to the centred sum (:class:`~pinqpy.noise.mechanisms.PublicSizeMeanMechanism`, which
    counts NULL values as the midpoint of the bounds). One changed row moves that sum by at
    most ``2·h`` (``h`` the half-width), twice its sensitivity ``h`` per row added or
    removed, which the frame's stability 2 charges exactly.
    """
    e, (lo, hi) = _numeric_arg(rel, column, bounds, "mean")
    plan, ex = rel.plan, executor_for(rel.plan, rel.catalog)
    if whole and rel.meta.size is not None:
        n_of = _public_n(rel)
        pm = mech.PublicSizeMeanMechanism(check_eps(epsilon), lo, hi, n_of, _delta(delta))
        return Prepared(
            rel,
            pm,
            lambda g: (*_drop_squares(ex.lattice_sums(plan, g, e, lo, hi)), n_of()),
            "mean",
            _what("mean", e),
            lambda: ex.validate(plan, e, numeric=True),
            Read(ex, plan, "mean", e, lo, hi),
        )
    m = mech.MeanMechanism(check_eps(epsilon), lo, hi, _delta(delta))
    return Prepared(
        rel,
        m,
        lambda g: _drop_squares(ex.lattice_sums(plan, g, e, lo, hi)),
        "mean",
        _what("mean", e),
        lambda: ex.validate(plan, e, numeric=True),
        Read(ex, plan, "mean", e, lo, hi),
    )


def prepare_variance(
    rel: Relation,
    column: object,
    epsilon: object,
    bounds: Any,
    delta: object,
    *,
    stddev: bool,
    ddof: int = 1,
    whole: bool = False,
) -> Prepared:
    """A clamped variance or standard deviation
    (:class:`~pinqpy.noise.mechanisms.VarianceMechanism`): the sample form (``ddof=1``, as
    SQL's VARIANCE) or the population form (``ddof=0``, VAR_POP). Over the whole of a
    public-size table's rows (:func:`changed_row_frame`) its count is calibrated to one
    changed row."""
    what = "stddev" if stddev else "variance"
    e, (lo, hi) = _numeric_arg(rel, column, bounds, what)
    m = mech.VarianceMechanism(
        check_eps(epsilon),
        lo,
        hi,
        _delta(delta),
        stddev=stddev,
        ddof=ddof,
        changed_row=changed_row_frame(rel, whole),
    )
    plan, ex = rel.plan, executor_for(rel.plan, rel.catalog)
    # The population form is another answer: its own cache entry (the sample form's key is
    # unchanged).
    kind = what if m.ddof == 1 else f"{what}_pop"
    return Prepared(
        rel,
        m,
        lambda g: ex.lattice_sums(plan, g, e, lo, hi, squares=True),
        what,
        _what(kind, e),
        lambda: ex.validate(plan, e, numeric=True),
        Read(ex, plan, "moments", e, lo, hi),
    )


def prepare_quantile(
    rel: Relation,
    column: object,
    q: object,
    epsilon: object,
    bounds: Any,
    candidates: Any,
    ci: bool = False,
    *,
    whole: bool = False,
) -> Prepared:
    """A ``q``-quantile by the exponential mechanism over public candidates.

    ``ci=False`` (the default) spends the whole epsilon on the selection; ``ci=True`` spends
    :data:`~pinqpy.noise.mechanisms.QUANTILE_CI_SHARE` of it on a noisy histogram that gives
    the release a value-space ``ci()`` (:class:`~pinqpy.noise.mechanisms.QuantileMechanism`).
    Over the whole of a public-size table's rows (:func:`changed_row_frame`) the score
    sensitivity is that of one changed row, 1 (``1/2`` per row of stability).

    **Candidates without bounds.** With public ``candidates`` and no bounds (given or
    declared), the bounds are the candidates' own ``[min, max]``. That is sound: the
    candidates are public (the analyst's, fixed before any data is read), so these bounds
    are too, and they depend on no row. The answer is always one of the candidates, so it
    lies in that range anyway. Clamping each row into it is a row-by-row map, so
    neighbouring tables stay neighbours (the score sensitivity ``max(q, 1-q)`` is
    unchanged), and it changes no candidate's rank counts except at the two ends: a row
    below the least candidate is still counted at or below it, above the greatest at or
    above it, which is where the quantile of such rows lands.
    """
    if not isinstance(ci, bool):
        raise PinqError("ci must be True or False")
    qq = _quantile_level(q)
    if bounds is None and candidates is not None:
        e = rel.column_expr(column, "quantile's column")
        if rel.expr_bounds(e) is None:
            arr = _candidate_values(candidates)
            lo, hi = float(arr[0]), float(arr[-1])
            e, (lo, hi) = _numeric_arg(rel, column, (lo, hi), "quantile")  # checks the type
            cand = _candidates(arr, lo, hi)
            return _quantile(rel, e, qq, epsilon, lo, hi, cand, ci, whole)
    e, (lo, hi) = _numeric_arg(rel, column, bounds, "quantile")
    cand = None if candidates is None else _candidates(candidates, lo, hi)
    return _quantile(rel, e, qq, epsilon, lo, hi, cand, ci, whole)


def _quantile(
    rel: Relation,
    e: Expr | PyFunc,
    qq: float,
    epsilon: object,
    lo: float,
    hi: float,
    cand: np.ndarray | None,
    ci: bool,
    whole: bool,
) -> Prepared:
    share = mech.QUANTILE_CI_SHARE if ci else 0
    m = mech.QuantileMechanism(
        check_eps(epsilon),
        qq,
        lo,
        hi,
        cand,
        ci_share=share,
        changed_row=changed_row_frame(rel, whole),
    )
    plan, ex = rel.plan, executor_for(rel.plan, rel.catalog)
    return Prepared(
        rel,
        m,
        lambda g: ex.buckets(plan, g, e, m.candidates),
        "quantile",
        _what("quantile", e, _answers.grid_digest(m.candidates), len(m.candidates)),
        lambda: ex.validate(plan, e, numeric=True),
    )


def prepare_argmax(rel: Relation, column: object, candidates: Any, epsilon: object) -> Prepared:
    """The most frequent public candidate, by report-noisy-max. On a public-size table's
    rows the generic rule (stability 2 per changed row) is already its change-one-row cost
    (:class:`~pinqpy.noise.mechanisms.ArgmaxMechanism`)."""
    e = rel.column_expr(column, "argmax's column")
    cands = _argmax_candidates(candidates)
    m = mech.ArgmaxMechanism(check_eps(epsilon), len(cands))
    plan, ex = rel.plan, executor_for(rel.plan, rel.catalog)
    prep = Prepared(
        rel,
        m,
        lambda g: ex.candidate_counts(plan, g, e, cands),
        "argmax",
        _what("argmax", e, repr(cands)),
        lambda: ex.validate(plan, e),
    )
    prep.candidates = cands
    return prep


# -- argument checks -------------------------------------------------------------------------
def check_eps(epsilon: object) -> Fraction:
    return check_epsilon(epsilon, "epsilon")


def _delta(delta: object) -> Fraction | None:
    return None if delta is None else check_delta(delta, "delta")


def _numeric_arg(
    rel: Relation, column: object, bounds: tuple[float, float] | None, what: str
) -> tuple[Expr | PyFunc, tuple[float, float]]:
    e = rel.column_expr(column, f"{what}'s column")
    t = rel.expr_type(e)
    if t not in ("int", "float", "bool", "any"):
        raise PinqError(f"{what} needs a numeric column or expression, not one of type {t}")
    if bounds is not None:
        return e, check_bounds(bounds, f"{what}")
    b = rel.expr_bounds(e)
    if b is None:
        if isinstance(e, Column):
            fix = (
                f"pass bounds=(lo, hi), or declare bounds={{{e.name!r}: (lo, hi)}} on the "
                "PrivateFrame"
            )
            raise PrivacyError(
                f"{what} needs bounds for {e.name}: {fix}; bounds are never read off the data",
                hints={
                    "python": fix,
                    "magic": f"declare bounds={{{e.name!r}: (lo, hi)}} when registering the table",
                    "shell": f"start the shell with --bounds {e.name}=LO:HI",
                    "cli": f"pass --bounds {e.name}=LO:HI",
                },
            )
        fix = "pass bounds=(lo, hi), or declare bounds on the columns it is computed from"
        raise PrivacyError(
            f"{what} needs bounds for {_expr_text(e)}: {fix}; bounds are never read off the data",
            hints={
                "python": fix,
                "magic": "declare bounds on the columns it is computed from when registering "
                "the table",
                "shell": "start the shell with --bounds COLUMN=LO:HI for the columns it is "
                "computed from",
                "cli": "pass --bounds COLUMN=LO:HI for the columns it is computed from",
            },
        )
    return e, b


def _expr_text(e: Expr | PyFunc) -> str:
    """An expression as the analyst would write it, for error messages."""
    return "a Python function" if isinstance(e, PyFunc) else e.to_sql()


def _quantile_level(q: object) -> float:
    try:
        qq = float(q)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise PinqError("q must be a number between 0 and 1") from None
    if not 0 <= qq <= 1:
        raise PinqError("q must be between 0 and 1")
    return qq


def _candidates(values: Iterable[float], lo: float, hi: float) -> np.ndarray:
    try:
        arr = np.unique(np.asarray(list(values), dtype="float64"))
    except (TypeError, ValueError):
        raise PinqError("candidates must be numbers") from None
    if len(arr) < 2 or not np.all(np.isfinite(arr)):
        raise PinqError("candidates must be at least two finite numbers")
    if arr[0] < lo or arr[-1] > hi:
        raise PinqError("candidates must lie within the bounds")
    return np.unique(np.concatenate([[lo], arr, [hi]]))


def _candidate_values(values: Any) -> np.ndarray:
    """The public candidates, sorted and unique (refusing what :func:`_candidates` refuses)."""
    if isinstance(values, str | bytes) or not isinstance(values, Iterable):
        raise PinqError("candidates must be numbers")
    return _candidates(values, -np.inf, np.inf)[1:-1]


def _plain_value(v: object) -> bool:
    if isinstance(v, tuple):
        return all(_plain_value(x) for x in v)
    return type(v) in (str, int, float, bool) or isinstance(
        v, np.generic | dt.date | dt.datetime | pd.Timestamp
    )


def _argmax_candidates(candidates: object) -> tuple[Hashable, ...]:
    if isinstance(candidates, str) or not isinstance(candidates, Iterable):
        raise PinqError("argmax needs a list of public candidates")
    cands = tuple(candidates)
    if not cands:
        raise PinqError("argmax needs at least one candidate")
    for c in cands:  # all refused before any charge: candidates are public
        if is_null_key(c):
            raise PinqError(
                "argmax candidates cannot be NULL or NaN (a NULL equals no value); "
                "filter NULLs out or map them to a value first"
            )
        # Plain values only: an object of the analyst's own class would run its own __eq__
        # against private values while an engine compares them.
        if not _plain_value(c):
            raise PinqError(
                "argmax candidates must be plain hashable values (text, numbers, booleans, "
                f"dates, or tuples of them), not {type(c).__name__}"
            )
    if len(set(cands)) != len(cands):
        raise PinqError("argmax candidates must not repeat")
    return cands


def _drop_squares(sums: tuple[Any, Any, Any]) -> tuple[Any, Any]:
    """A mean's read: the lattice-index sums and counts (no squares were computed)."""
    return sums[0], sums[2]


def _what(kind: str, value: Expr | PyFunc, *extra: object) -> str | None:
    """A canonical description of an aggregation's input, or None for a callable."""
    if isinstance(value, PyFunc):
        return None
    return f"{kind}({value.to_sql()}{''.join(f';{x}' for x in extra)})"
