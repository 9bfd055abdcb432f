"""The outer query's OPTIONS (...) and its budget, checked before any pass runs.

Takes the options as written and the epsilon and delta given to ``sql()``; returns the
query's total (epsilon, delta), or refuses an unknown option or a value out of range with
its position in the text. Nothing here reads a table.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from pinqpy.accounting.cost import check_delta, check_epsilon
from pinqpy.core.exact import to_fraction
from pinqpy.errors import PinqError, PrivacyError
from pinqpy.sql.compiler.context import option_error

__all__ = ["KNOWN_OPTIONS", "check_options", "query_budget", "resolve_budget"]

KNOWN_OPTIONS = {
    "epsilon",
    "delta",
    "noise",
    "privacy_unit_column",
    "max_groups_contributed",
    "max_rows_contributed",
    "quantile_ci",
}


def check_options(text: str, options: Mapping[str, object]) -> None:
    """Refuse an unknown option, or a known one with a value it cannot take."""
    for name in options:
        if name not in KNOWN_OPTIONS:
            known = ", ".join(sorted(KNOWN_OPTIONS))
            raise option_error(f"unknown option {name!r}; known: {known}", text, name, False)
    noise = options.get("noise")
    if noise is not None and str(noise).lower() not in ("laplace", "gaussian"):
        raise option_error("OPTIONS noise must be 'laplace' or 'gaussian'", text, "noise")
    for name in ("max_groups_contributed", "max_rows_contributed"):
        value = options.get(name)
        whole = isinstance(value, int) and not isinstance(value, bool)
        if value is not None and not (whole and value >= 1):  # type: ignore[operator]
            message = f"OPTIONS {name} must be a positive whole number (or NULL)"
            raise option_error(message, text, name)
    if "quantile_ci" in options and not isinstance(options["quantile_ci"], bool):
        raise option_error("OPTIONS quantile_ci must be true or false", text, "quantile_ci")
    if "max_groups_contributed" in options and "max_rows_contributed" in options:
        raise option_error(
            "OPTIONS max_groups_contributed and max_rows_contributed exclude each other (as in "
            "BigQuery): bound either the groups or the rows of each unit",
            text,
            "max_rows_contributed",
            False,
        )


def query_budget(
    text: str, epsilon: object, delta: object, options: Mapping[str, object]
) -> tuple[Fraction, Fraction]:
    """:func:`resolve_budget`, a fault in an option's value shown under it."""
    try:
        return resolve_budget(epsilon, delta, options)
    except PrivacyError:
        raise
    except PinqError as err:
        which = "delta" if "delta" in str(err) else "epsilon"
        if which in options:
            raise option_error(err, text, which) from None
        raise


def resolve_budget(
    epsilon: object, delta: object, options: Mapping[str, object]
) -> tuple[Fraction, Fraction]:
    """The query's total (epsilon, delta), from the arguments or OPTIONS (if both, equal)."""
    eps_opt = options.get("epsilon")
    if epsilon is None and eps_opt is None:
        fix = "pass epsilon= to sql() or write OPTIONS (epsilon = 0.5)"
        raise PrivacyError(
            f"the query needs an epsilon: {fix}",
            hints={
                "python": fix,
                "magic": "pass -e E or write OPTIONS (epsilon = 0.5)",
                "shell": "set .epsilon E or write OPTIONS (epsilon = 0.5)",
                "cli": "pass --epsilon E or write OPTIONS (epsilon = 0.5)",
            },
        )
    if epsilon is not None and eps_opt is not None and to_fraction(epsilon) != to_fraction(eps_opt):
        raise PrivacyError("epsilon is given twice, as an argument and in OPTIONS, differently")
    eps = check_epsilon(epsilon if epsilon is not None else eps_opt, "epsilon")
    dlt_opt = options.get("delta")
    dlt_raw = delta if delta is not None else dlt_opt
    if delta is not None and dlt_opt is not None and to_fraction(delta) != to_fraction(dlt_opt):
        raise PrivacyError("delta is given twice, as an argument and in OPTIONS, differently")
    dlt = Fraction(0) if dlt_raw in (None, 0) else check_delta(dlt_raw, "delta")
    return eps, dlt
