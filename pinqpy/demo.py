"""A short private query session over the bundled sample of real data.

The sample is the 1,000-person California PUMS extract (US Census, public domain) that
OpenDP and SmartNoise use as their standard test table: age, sex, educ, race, income,
married. Run it with ``pinqpy demo`` or ``python -m pinqpy demo``.
"""

from __future__ import annotations

from importlib import resources

import pandas as pd

from pinqpy.accounting.budget import Budget
from pinqpy.api.frame import PrivateFrame
from pinqpy.errors import BudgetExceededError
from pinqpy.results.values import NoisyCount, NoisyValue

__all__ = ["NEXT_STEP", "PUMS_PATH", "WHOLE_RANGE", "load_pums", "main", "whole_range"]

_PUMS = resources.files("pinqpy").joinpath("data", "PUMS.csv")
# A file path, so engines that read files themselves (DuckDB, Spark) can be shown the sample.
PUMS_PATH = str(_PUMS)

PUMS_BOUNDS = {"age": (0, 100), "income": (0, 500_000)}
PUMS_KEYS = {
    "sex": [0, 1],
    "married": [0, 1],
    "race": [1, 2, 3, 4, 5, 6],
    "educ": list(range(1, 17)),
}


# The demo's last line: where a newcomer goes next (the same sample, in SQL).
NEXT_STEP = "Next, ask the same sample in SQL: pinqpy shell --demo-data"


def load_pums() -> pd.DataFrame:
    """The bundled 1,000-row California PUMS sample as a DataFrame."""
    with _PUMS.open("rb") as fh:
        return pd.read_csv(fh)


# Said of an interval that spans the whole public range: it says nothing the bounds did not.
WHOLE_RANGE = "the interval is the whole range: too few rows for this epsilon"


def whole_range(lo: float, hi: float, bounds: tuple[float, float] | None) -> str:
    """``"  (the interval is the whole range: ...)"`` when ``[lo, hi]`` covers ``bounds``.

    >>> whole_range(0.0, 500_000.0, (0, 500_000)), whole_range(1.0, 2.0, (0, 10))
    ('  (the interval is the whole range: too few rows for this epsilon)', '')
    """
    if bounds is None or lo > bounds[0] or hi < bounds[1]:
        return ""
    return f"  ({WHOLE_RANGE})"


def _show(
    label: str, value: NoisyValue | NoisyCount, bounds: tuple[float, float] | None = None
) -> None:
    lo, hi = value.ci(0.95)
    if isinstance(value, int):  # counts are exact integers from the discrete Laplace
        print(f"  {label:<44} {value:>12,d}   95% CI [{lo:,d}, {hi:,d}]")
    else:
        note = whole_range(lo, hi, bounds)
        print(f"  {label:<44} {float(value):>12,.1f}   95% CI [{lo:,.1f}, {hi:,.1f}]{note}")


def main() -> int:
    print("pinqpy demo: a private query session over 1,000 real Californians (PUMS)\n")
    budget = Budget(epsilon=2.0)
    people = PrivateFrame(load_pums(), budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
    print(people, "\n")

    print("Noisy answers (each charges epsilon x stability before reading any row):")
    _show("people.count(epsilon=0.1)", people.count(epsilon=0.1))
    _show('where("age >= 65").count(epsilon=0.1)', people.where("age >= 65").count(epsilon=0.1))
    income, age = PUMS_BOUNDS["income"], PUMS_BOUNDS["age"]
    _show('mean("income", epsilon=0.2)', people.mean("income", epsilon=0.2), income)
    median = people.median("age", epsilon=0.1, ci=True)
    _show('median("age", epsilon=0.1, ci=True)', median, age)
    top = people.argmax("educ", candidates=PUMS_KEYS["educ"], epsilon=0.1)
    print(f"  {'most common educ code (argmax, epsilon=0.1)':<44} {top!s:>12}")
    print(f"\n  budget now: {budget}")

    print("\nParallel composition: one mean per marital status costs 0.2 in all, not 0.4:")
    by_married = people.partition("married").mean("income", epsilon=0.2)
    ci = by_married.ci(0.95)
    for key, value in by_married.items():
        lo, hi = ci.loc[key]
        note = whole_range(lo, hi, income)
        print(
            f"  married={key}: mean income {value:>10,.0f}   95% CI [{lo:,.0f}, {hi:,.0f}]{note}"
        )
    print(f"  budget now: {budget}")

    print("\nGroupBy has stability 2 (one person changes one group's row: out, then in):")
    levels = people.groupby("educ").agg(n="COUNT(*)", mean_age="AVG(age)")
    print(f"  levels.stability == {levels.stability}, so a query at epsilon 0.5 charges 1.0")
    _show("education levels with >= 50 people (eps 0.5)", levels.where("n >= 50").count(0.5))
    print(f"  budget now: {budget}")

    print("\nAsking for more than remains is refused before any data is read:")
    try:
        people.count(epsilon=1.0)
    except BudgetExceededError as err:
        print(f"  BudgetExceededError: {err}")
    print(f"  budget unchanged: {budget}")
    print(f"\n{NEXT_STEP}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
