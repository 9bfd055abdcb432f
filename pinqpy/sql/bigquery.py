"""BigQuery's differential-privacy SQL, read with BigQuery's meaning.

BigQuery (GoogleSQL) writes a private query as ``SELECT WITH DIFFERENTIAL_PRIVACY OPTIONS
(epsilon = ..., delta = ..., max_groups_contributed = G, privacy_unit_column = id) ...`` and
bounds each aggregate with a named argument: ``SUM(x, contribution_bounds_per_group => (lo,
hi))`` clamps each privacy unit's total in a group, ``PERCENTILE_CONT(x, 0.5,
contribution_bounds_per_row => (lo, hi))`` clamps each row. This module reads that syntax:
the named arguments (:func:`split_bounds`) and ZetaSQL's older spellings (``ANON_SUM(x
CLAMPED BETWEEN lo AND hi)``, :func:`normalize_call`). What they mean for the release (each
unit's contribution to a group computed, clamped, then added up) is the compiler's pass
:mod:`pinqpy.sql.compiler.contributions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal as Lit

from pinqpy.errors import PinqSyntaxError
from pinqpy.expr.ast import Call, Expr, NamedArg, Pos
from pinqpy.expr.check import _NOT_CONSTANT, constant_value

__all__ = [
    "PER_GROUP",
    "PER_ROW",
    "ROW_AGGREGATES",
    "Contribution",
    "normalize_call",
    "split_bounds",
]

PER_GROUP = "contribution_bounds_per_group"
PER_ROW = "contribution_bounds_per_row"

#: Aggregates computed over rows, not over per-unit totals: only a per-row bound means
#: something for them (BigQuery's PERCENTILE_CONT, VAR_POP and STDDEV_POP take only
#: ``contribution_bounds_per_row``).
ROW_AGGREGATES = frozenset(
    {"PERCENTILE", "QUANTILE", "MEDIAN", "MIN", "MAX", "VARIANCE", "STDDEV", "PERCENTILE_CONT"}
    | {"VAR_POP", "STDDEV_POP", "VAR_SAMP", "STDDEV_SAMP", "VAR", "STD"}
    | {"STDEV", "STDEVP", "VARP"}
)

# ZetaSQL's ANON_ functions: pinqpy's aggregate, and what CLAMPED BETWEEN clamps (its
# documentation: per privacy unit for COUNT, SUM and AVG; per row for the others).
_ANON: dict[str, tuple[str, str]] = {
    "ANON_COUNT": ("COUNT", PER_GROUP),
    "ANON_SUM": ("SUM", PER_GROUP),
    "ANON_AVG": ("AVG", PER_GROUP),
    "ANON_PERCENTILE_CONT": ("PERCENTILE", PER_ROW),
    "ANON_VAR_POP": ("VARIANCE", PER_ROW),
    "ANON_STDDEV_POP": ("STDDEV", PER_ROW),
}

# BigQuery / ZetaSQL private aggregates pinqpy has no mechanism for, with what to write.
_UNSUPPORTED: dict[str, str] = {
    "APPROX_COUNT_DISTINCT": "COUNT(DISTINCT x) (exact distinct count, noised)",
    "ANON_QUANTILES": "one PERCENTILE(x, q, lo, hi) per quantile",
    "APPROX_QUANTILES": "one PERCENTILE(x, q, lo, hi) per quantile",
    "ANON_COUNT_DISTINCT": "COUNT(DISTINCT x)",
    "APPROX_TOP_COUNT": "GROUP BY x with COUNT(*) and ORDER BY ... LIMIT",
    "APPROX_TOP_SUM": "GROUP BY x with SUM(y) and ORDER BY ... LIMIT",
}


@dataclass(frozen=True)
class Contribution:
    """A contribution bound of one aggregate: ``kind`` ``"group"`` clamps a unit's total in
    a group, ``"row"`` clamps each row."""

    kind: Lit["group", "row"]
    lo: float
    hi: float
    pos: Pos | None = field(default=None, compare=False)


def _error(text: str, message: str, pos: Pos | None) -> PinqSyntaxError:
    if pos is None:
        return PinqSyntaxError(message, text=text)
    return PinqSyntaxError(message, text=text, line=pos.line, column=pos.column)


def normalize_call(e: Expr, text: str, notes: list[str] | None = None) -> Expr:
    """``e`` with ZetaSQL's ``ANON_X(x CLAMPED BETWEEN lo AND hi)`` written as pinqpy's
    ``X(x, contribution_bounds_per_... => (lo, hi))``; a private aggregate of BigQuery that
    pinqpy cannot compute is refused here, naming what to write instead. Where pinqpy's
    aggregate differs from ZetaSQL's, a line is added to ``notes``."""

    def fix(node: Expr) -> Expr:
        if not isinstance(node, Call):
            return node
        if node.name in _UNSUPPORTED:
            raise _error(
                text,
                f"{node.name} is not supported by pinqpy; write {_UNSUPPORTED[node.name]}",
                node.pos,
            )
        mapped = _ANON.get(node.name)
        args = []
        for a in node.args:
            if isinstance(a, NamedArg) and a.name.endswith("_between"):
                if a.name != "clamped_between":
                    word = a.name[: -len("_between")].upper()
                    raise _error(text, f"expected CLAMPED BETWEEN, not {word} BETWEEN", a.pos)
                if mapped is None:
                    raise _error(
                        text,
                        f"CLAMPED BETWEEN belongs to ZetaSQL's ANON_ functions; write "
                        f"{node.name}(..., {PER_ROW} => (lo, hi)) or "
                        f"{node.name}(..., {PER_GROUP} => (lo, hi))",
                        a.pos,
                    )
                a = NamedArg(mapped[1], a.values, True, pos=a.pos)
            args.append(a)
        if mapped is None:
            return node
        if notes is not None and node.name in ("ANON_VAR_POP", "ANON_STDDEV_POP"):
            notes.append(
                f"{node.name} is read as pinqpy's {mapped[0]}, which divides by n - 1 (the "
                "sample figure); ZetaSQL's divides by n"
            )
        return Call(mapped[0], tuple(args), node.distinct, node.star, pos=node.pos)

    return e.transform(fix)


def split_bounds(call: Call, text: str) -> tuple[Call, Contribution | None]:
    """``call`` without its named arguments, and the contribution bound they give.

    Refused, with the position of the argument: a name pinqpy does not know, a bound given
    twice (or both kinds), a bound that is not two constant numbers ``lo <= hi``, a per-group
    bound on an aggregate of rows (a percentile or variance has no per-unit total to clamp),
    a per-row bound on COUNT (a count has no values to clamp), and bounds on a function that
    is not a noisy aggregate.
    """
    named = [a for a in call.args if isinstance(a, NamedArg)]
    if not named:
        return call, None
    plain = tuple(a for a in call.args if not isinstance(a, NamedArg))
    name = call.name
    found: Contribution | None = None
    for arg in named:
        if arg.name not in (PER_GROUP, PER_ROW):
            raise _error(
                text,
                f"unknown named argument {arg.name!r}; pinqpy knows {PER_GROUP} => (lo, hi) "
                f"and {PER_ROW} => (lo, hi)",
                arg.pos,
            )
        if found is not None:
            raise _error(
                text, f"{name} takes one contribution bound; {arg.name} is one too many", arg.pos
            )
        kind: Lit["group", "row"] = "group" if arg.name == PER_GROUP else "row"
        if not arg.pair:
            raise _error(text, f"{arg.name} takes a pair: {arg.name} => (lo, hi)", arg.pos)
        lo, hi = (constant_value(v) for v in arg.values)
        numbers = all(
            v is not _NOT_CONSTANT and isinstance(v, int | float) and not isinstance(v, bool)
            for v in (lo, hi)
        )
        if not numbers:
            raise _error(text, f"{arg.name} takes two constant numbers (lo, hi)", arg.pos)
        if lo > hi:  # type: ignore[operator]
            raise _error(text, f"{arg.name} has lo > hi; write it as (lo, hi)", arg.pos)
        if kind == "group" and name in ROW_AGGREGATES:
            raise _error(
                text,
                f"{name} is computed over rows, so it takes {PER_ROW} => (lo, hi) (each row "
                f"clamped), not {PER_GROUP}",
                arg.pos,
            )
        if kind == "row" and name == "COUNT":
            raise _error(
                text,
                f"COUNT has no values to clamp per row; write COUNT(..., {PER_GROUP} => (0, n)) "
                "(at most n rows of each unit counted per group)",
                arg.pos,
            )
        if call.distinct:
            raise _error(text, "COUNT(DISTINCT ...) takes no contribution bound", arg.pos)
        found = Contribution(kind, float(lo), float(hi), arg.pos)  # type: ignore[arg-type]
    if name not in ("COUNT", "SUM", "AVG") and name not in ROW_AGGREGATES:
        raise _error(
            text, f"{name} is not a noisy aggregate and takes no contribution bound", call.pos
        )
    extra = len(plain) - (2 if name in ("PERCENTILE", "QUANTILE", "PERCENTILE_CONT") else 1)
    if extra > 0 and found is not None:
        raise _error(
            text,
            f"{name} has its bounds twice: inline (lo, hi) and as a named argument; keep one",
            found.pos,
        )
    return Call(name, plain, call.distinct, call.star, pos=call.pos), found
