"""pandas habits, answered: what a pandas spelling is called in pinqpy.

A data scientist reaches for ``frame.shape``, ``frame.describe()`` or ``frame['age']`` first.
A private frame has none of them (each would read private rows without noise), so instead of
Python's bare ``AttributeError`` the frame answers with a
:class:`~pinqpy.errors.PandasHabitError` that names the pinqpy way. The error is an
``AttributeError`` too, so ``hasattr()`` and notebook completion behave as before.

Only public names are answered: private attributes and dunders keep Python's own error (the
pickling and copying machinery probes them).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NoReturn

from pinqpy.errors import PandasHabitError, PandasHabitTypeError

__all__ = ["FRAME_HABITS", "GROUPED_HABITS", "PARTITION_HABITS", "habit_error", "need_epsilon"]

_COUNT = "the row count is private: .count(epsilon=...) releases a noisy one"
_COLUMNS = ".columns and .schema list the columns and their types (public)"
_PREVIEW = ".accuracy('mean', 'age', epsilon=...) previews the error of a statistic for free"
_ONE_BY_ONE = (
    "ask for each statistic with its own epsilon: .count(epsilon=), .mean(col, epsilon=), "
    ".quantile(col, q, epsilon=), .variance(col, epsilon=), .std(col, epsilon=)"
)
_HISTOGRAM = (
    ".histogram(col, epsilon=...) gives a noisy count per key (or "
    ".partition(col).count(epsilon=...))"
)
_ROWS = "rows are private: use .where(...) to filter and noisy aggregations to learn about them"

#: pandas DataFrame names -> the pinqpy way.
FRAME_HABITS: dict[str, str] = {
    "shape": f"{_COUNT}; {_COLUMNS}",
    "size": _COUNT,
    "empty": _COUNT,
    "ndim": "a private frame is a table; " + _COLUMNS,
    "index": "a private frame has no index: its rows are private",
    "dtypes": ".schema gives each column's type (public)",
    "info": f"{_COLUMNS}; .bounds and .keys show the declared public metadata",
    "describe": f"{_ONE_BY_ONE}; {_PREVIEW}",
    "value_counts": _HISTOGRAM,
    "nunique": _HISTOGRAM + "; the number of keys is the length of its index",
    "unique": ".select_keys(col, epsilon=, delta=) chooses keys privately; .keys lists "
    "the declared ones",
    "mode": ".argmax(col, candidates=[...], epsilon=...) picks the most frequent candidate",
    "min": ".quantile(col, 0.0, epsilon=...) (a noisy minimum), or .bounds for the declared bounds",
    "max": ".quantile(col, 1.0, epsilon=...) (a noisy maximum), or .bounds for the declared bounds",
    "agg": ".groupby(...).agg(name='COUNT(*)') builds per-group rows; noisy statistics are "
    "methods: " + _ONE_BY_ONE,
    "aggregate": "noisy statistics are methods: " + _ONE_BY_ONE,
    "iloc": _ROWS,
    "loc": "use .where('age >= 65') to keep rows and .select('age') to keep columns",
    "iat": _ROWS,
    "at": _ROWS,
    "values": _ROWS,
    "to_numpy": _ROWS,
    "to_pandas": _ROWS,
    "to_dict": _ROWS,
    "to_csv": _ROWS,
    "to_parquet": _ROWS,
    "to_list": _ROWS,
    "itertuples": _ROWS,
    "iterrows": _ROWS,
    "items": _ROWS,
    "query": "use .where('age >= 65 AND sex = 1') (SQL expressions)",
    "drop": "use .select(...) with the columns to keep",
    "dropna": "use .where('col IS NOT NULL')",
    "fillna": "use .assign(col='COALESCE(col, 0)')",
    "apply": "use .assign(new='expression') or .select(new='expression') (SQL expressions)",
    "map": "use .assign(new='CASE WHEN ... END') (SQL expressions)",
    "astype": "use .assign(col='CAST(col AS int)')",
    "merge": "use .join(other, on=...)",
    "sort_values": "a private frame has no row order; .quantile(col, q, epsilon=) describes "
    "a distribution",
    "pivot_table": "use .partition([col1, col2]).count(epsilon=...) (public keys)",
    "crosstab": "use .partition([col1, col2]).count(epsilon=...) (public keys)",
    "plot": _HISTOGRAM + "; plot the released Series",
    "hist": _HISTOGRAM + "; plot the released Series",
    "corr": "not released directly: .mean('x * y', epsilon=, bounds=) and the means and "
    "standard deviations give it",
}

#: pandas GroupBy names -> the pinqpy method a partition answers them with.
_GROUPED_AS: dict[str, str] = {
    "count": "count",
    "size": "count",
    "value_counts": "count",
    "sum": "sum",
    "mean": "mean",
    "median": "median",
    "quantile": "quantile",
    "min": "quantile",
    "max": "quantile",
    "var": "variance",
    "std": "std",
}
_GROUPED_OTHER = (
    "nunique",
    "first",
    "last",
    "describe",
    "apply",
    "transform",
    "filter",
    "aggregate",
    "ngroups",
    "groups",
)
_GROUPED_TAIL = (
    " (keys are public: declared, passed, or taken from integer bounds); .groupby(...)"
    ".agg(n='COUNT(*)') builds exact per-group rows for a later noisy query"
)

#: pandas GroupBy names -> the pinqpy way (a pinqpy groupby builds per-group rows).
GROUPED_HABITS: dict[str, str] = {
    **{
        name: f"noisy per-group statistics come from .partition(keys).{method}(..., "
        f"epsilon=...){_GROUPED_TAIL}"
        for name, method in _GROUPED_AS.items()
    },
    **{
        name: "noisy per-group statistics come from .partition(keys).count(epsilon=...), "
        f".mean(col, epsilon=...) and the like{_GROUPED_TAIL}"
        for name in _GROUPED_OTHER
    },
}

#: pandas names a Partition (a mapping of key -> part) does not have.
PARTITION_HABITS: dict[str, str] = {
    "describe": "each statistic has its own epsilon: .count(epsilon=), .mean(col, epsilon=), "
    ".variance(col, epsilon=), .std(col, epsilon=), .quantile(col, q, epsilon=)",
    "size": "use .count(epsilon=...): one noisy count per key",
    "value_counts": "use .count(epsilon=...): one noisy count per key",
    "agg": "each statistic is a method with its own epsilon: .count(epsilon=), "
    ".mean(col, epsilon=), ...",
    "aggregate": "each statistic is a method with its own epsilon: .count(epsilon=), "
    ".mean(col, epsilon=), ...",
    "apply": "index a part (parts['CA']) and aggregate it, or use the per-key methods",
    "shape": "the keys are public: len(parts) counts them; the rows are private",
    "ngroups": "the keys are public: len(parts) counts them",
    "groups": "the keys are public: list(parts) lists them",
}


def habit_error(
    kind: str,
    name: str,
    table: dict[str, str],
    columns: Iterable[str] = (),
    keys: tuple[str, ...] = (),
) -> NoReturn:
    """Raise the :class:`PandasHabitError` for ``name`` on a ``kind`` (its class name), or
    Python's own AttributeError for a name pinqpy has no pointer for."""
    if name.startswith("_"):
        raise AttributeError(f"{kind!r} object has no attribute {name!r}")
    pointer = table.get(name)
    if pointer is None and name in set(columns):
        pointer = (
            f"columns are not attributes: write {name!r} (or pq.col({name!r})) in an "
            f"expression, or .select({name!r}) to keep it"
        )
    if pointer is None:
        raise AttributeError(f"{kind!r} object has no attribute {name!r}")
    if keys:
        spelt = repr(keys[0]) if len(keys) == 1 else repr(list(keys))
        pointer = pointer.replace(".partition(keys)", f".partition({spelt})")
    raise PandasHabitError(f"{kind} has no .{name} (a pandas habit): {pointer}")


def need_epsilon(what: str, epsilon: object, column: object = True) -> None:
    """Refuse an aggregation called without its epsilon (or its column), as pandas'
    ``.sum()`` would be."""
    if column is None:
        raise PandasHabitTypeError(
            f"{what}() needs a column (or an expression) and epsilon=: pinqpy aggregates one "
            f"column at a time, each with its own epsilon (for example "
            f"{what}('age', epsilon=0.1))"
        )
    if epsilon is None:
        arg = "" if column is True else f"{column!r}, " if isinstance(column, str) else "..., "
        raise PandasHabitTypeError(
            f"{what}() needs epsilon=: every noisy answer costs privacy budget, so say how "
            f"much (for example {what}({arg}epsilon=0.1)); .accuracy(...) previews the error "
            "at an epsilon without spending it"
        )
