"""SQL == method chaining == pandas, with noise off, and both ways charge the same.

Each case is one SQL query, the hand-written PrivateFrame chain that computes the same
release, and the exact answer computed directly with pandas. Both pinqpy versions run on
fresh sessions of their own (so their budgets can be compared) under
``pq.testing.no_noise()``: counts and sums are then exact, a mean is the clamped mean (the
data lie inside the declared bounds, so it is the plain mean) and a quantile is the integer
candidate of best score, ``argmin_c |(1 - q)·#{x < c} - q·#{x > c}|`` (lowest on ties),
which pandas computes below and which is within one of ``numpy.quantile``.

SQL splits its epsilon evenly over the m distinct aggregates and divides by the FROM
clause's stability s; the chain passes ``epsilon / (m·s)`` to each aggregation, which
charges it times s: so both must charge exactly the same to every budget.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from tests.sql.conftest import (
    SqlEnv,
    educ_names_df,
    make_env,
    persons_df,
    pums_df,
    visits_df,
)

# Engine-independent: every test runs on each engine (see the `engine` fixture).
pytestmark = pytest.mark.usefixtures("engine")

Row = tuple[object, ...]
Rows = list[Row]
Tables = Callable[[str], pq.PrivateFrame]


# -- exact answers with pandas ----------------------------------------------------------------
def best_quantile(values: pd.Series, q: float, lo: int, hi: int) -> int:
    """The integer candidate in [lo, hi] of best exponential-mechanism score (lowest on ties)."""
    x = values.dropna().to_numpy(dtype=float)
    candidates = np.arange(lo, hi + 1)
    below = (x[None, :] < candidates[:, None]).sum(axis=1)
    above = (x[None, :] > candidates[:, None]).sum(axis=1)
    best = int(candidates[np.argmin(np.abs((1 - q) * below - q * above))])
    assert abs(best - float(np.quantile(x, q))) <= 1  # sanity: it is the quantile
    return best


def per_key(series: pd.Series, keys: Sequence[Hashable]) -> Rows:
    """``(key, value)`` rows in the order of the public keys, 0 for a key with no rows."""
    return [(k, float(series.get(k, 0))) for k in keys]


def bounded_visits() -> pd.DataFrame:
    """What ``max_rows=3`` keeps: at most 3 rows per pid. Which rows is random, so only
    per-person facts (how many rows, the pid itself) of the kept rows are exact."""
    return visits_df().groupby("pid").head(3)


# -- the cases --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    sql: str
    chain: Callable[[Tables], Rows]
    exact: Callable[[], Rows]
    epsilon: float = 1.0
    # Absolute tolerance against plain pandas: a mean is of values quantised on the public
    # lattice of its bounds (pinqpy.core.lattice), within q/2 = (hi - lo)·2**-21 of each value.
    tol: float = 1e-9


def one(*values: object) -> Rows:
    return [tuple(float(v) for v in values)]  # type: ignore[arg-type]


def series_rows(s: pd.Series) -> Rows:
    return [(k, float(v)) for k, v in s.items()]


def _partition_two(t: Tables) -> Rows:
    parts = t("pums").partition("sex")
    n, mean = parts.count(0.5), parts.mean("income", 0.5)
    return [(k, float(n[k]), float(mean[k])) for k in (0, 1)]


def _partition_two_exact() -> Rows:
    d = pums_df()
    g = d.groupby("sex")
    return [(k, float(g.size()[k]), float(g.income.mean()[k])) for k in (0, 1)]


def _having_chain(t: Tables) -> Rows:
    n = t("pums").partition("educ").count(1)
    kept = n[n > 100].sort_values(ascending=False, kind="stable")
    return series_rows(kept)


def _having_exact() -> Rows:
    n = pums_df().educ.value_counts()
    kept = n[n > 100].sort_values(ascending=False)
    return [(k, float(v)) for k, v in kept.items()]


def _min_max_chain(t: Tables) -> Rows:
    p = t("pums")
    return one(p.quantile("age", 0.01, 0.5), p.quantile("age", 0.99, 0.5))


LEVELS = list(educ_names_df().level.drop_duplicates())
DECADES = list(range(11))

CASES = [
    Case(
        "count_where",
        "SELECT COUNT(*) FROM pums WHERE age >= 65",
        lambda t: one(t("pums").where("age >= 65").count(1)),
        lambda: one((pums_df().age >= 65).sum()),
    ),
    Case(
        "sum_declared_bounds",
        "SELECT SUM(income) FROM pums",
        lambda t: one(t("pums").sum("income", 1)),
        lambda: one(pums_df().income.sum()),
    ),
    Case(
        "avg_declared_bounds",
        "SELECT AVG(age) FROM pums WHERE sex = 1",
        lambda t: one(t("pums").where("sex = 1").mean("age", 1)),
        lambda: one(pums_df().query("sex == 1").age.mean()),
    ),
    Case(
        "two_aggregates_split",
        "SELECT COUNT(*), AVG(income) FROM pums WHERE married = 1",
        lambda t: one(
            (m := t("pums").where("married = 1")).count(0.5),
            m.mean("income", 0.5),
        ),
        lambda: one((pums_df().married == 1).sum(), pums_df().query("married == 1").income.mean()),
    ),
    Case(
        "median",
        "SELECT MEDIAN(age) FROM pums",
        lambda t: one(t("pums").median("age", 1)),
        lambda: one(best_quantile(pums_df().age, 0.5, 0, 100)),
    ),
    Case(
        "percentile",
        "SELECT PERCENTILE(age, 0.9) FROM pums WHERE income > 0",
        lambda t: one(t("pums").where("income > 0").quantile("age", 0.9, 1)),
        lambda: one(best_quantile(pums_df().query("income > 0").age, 0.9, 0, 100)),
    ),
    Case(
        "min_max_are_extreme_quantiles",
        "SELECT MIN(age), MAX(age) FROM pums",
        _min_max_chain,
        lambda: one(
            best_quantile(pums_df().age, 0.01, 0, 100), best_quantile(pums_df().age, 0.99, 0, 100)
        ),
    ),
    Case(
        "sum_inline_bounds_clamps",
        "SELECT SUM(age, 0, 50) FROM pums_raw",
        lambda t: one(t("pums_raw").sum("age", 1, bounds=(0, 50))),
        lambda: one(pums_df().age.clip(0, 50).sum()),
    ),
    Case(
        "avg_of_expression_derived_bounds",
        "SELECT AVG(income / 1000) FROM pums",
        lambda t: one(t("pums").assign(k="income / 1000").mean("k", 1)),
        lambda: one((pums_df().income / 1000).mean()),
        tol=1e-3,
    ),
    Case(
        "count_of_nullable_expression",
        "SELECT COUNT(CASE WHEN age > 50 THEN 1 END) FROM pums",
        lambda t: one(t("pums").where("CASE WHEN age > 50 THEN 1 END IS NOT NULL").count(1)),
        lambda: one((pums_df().age > 50).sum()),
    ),
    Case(
        "group_by_declared_keys",
        "SELECT sex, COUNT(*) FROM pums GROUP BY sex",
        lambda t: series_rows(t("pums").partition("sex").count(1)),
        lambda: per_key(pums_df().groupby("sex").size(), [0, 1]),
    ),
    Case(
        "group_by_two_aggregates",
        "SELECT sex, COUNT(*), AVG(income) FROM pums GROUP BY sex",
        _partition_two,
        _partition_two_exact,
    ),
    Case(
        "group_by_two_keys",
        "SELECT sex, married, COUNT(*) FROM pums GROUP BY sex, married",
        lambda t: [
            (*k, float(v)) for k, v in t("pums").partition(["sex", "married"]).count(1).items()
        ],
        lambda: [
            (s, m, float(n))
            for (s, m), n in pums_df().groupby(["sex", "married"]).size().sort_index().items()
        ],
    ),
    Case(
        "group_by_inline_keys",
        "SELECT educ, SUM(age) FROM pums_raw GROUP BY educ IN (9, 13, 16)",
        lambda t: series_rows(t("pums_raw").partition("educ", keys=[9, 13, 16]).sum("age", 1)),
        lambda: per_key(pums_df().groupby("educ").age.sum(), [9, 13, 16]),
    ),
    Case(
        "group_by_case_keys",
        "SELECT CASE WHEN age < 40 THEN 'young' ELSE 'old' END AS band, COUNT(*) FROM pums_raw "
        "GROUP BY CASE WHEN age < 40 THEN 'young' ELSE 'old' END",
        lambda t: series_rows(
            t("pums_raw")
            .assign(band="CASE WHEN age < 40 THEN 'young' ELSE 'old' END")
            .partition("band", keys=["young", "old"])
            .count(1)
        ),
        lambda: per_key(
            pums_df().age.lt(40).map({True: "young", False: "old"}).value_counts(),
            ["young", "old"],
        ),
    ),
    Case(
        "group_by_boolean_keys",
        "SELECT age >= 65, COUNT(*) FROM pums_raw GROUP BY age >= 65",
        lambda t: series_rows(
            t("pums_raw")
            .assign(senior="age >= 65")
            .partition("senior", keys=[False, True])
            .count(1)
        ),
        lambda: per_key(pums_df().age.ge(65).value_counts(), [False, True]),
    ),
    Case(
        "group_by_bounded_int_keys",
        "SELECT FLOOR(age / 10), AVG(income) FROM pums_raw GROUP BY FLOOR(age / 10)",
        lambda t: series_rows(
            t("pums_raw")
            .assign(decade="FLOOR(age / 10)")
            .partition("decade", keys=DECADES)
            .mean("income", 1)
        ),
        # An empty group's clamped mean is the midpoint of the bounds.
        lambda: [
            (k, float(v) if not math.isnan(v) else 250_000.0)
            for k, v in pums_df()
            .groupby(pums_df().age // 10)
            .income.mean()
            .reindex(DECADES)
            .items()
        ],
    ),
    Case(
        "having_order_by",
        "SELECT educ, COUNT(*) AS n FROM pums GROUP BY educ HAVING n > 100 ORDER BY n DESC",
        _having_chain,
        _having_exact,
    ),
    Case(
        "subquery_group_by",
        "SELECT COUNT(*) FROM (SELECT educ, COUNT(*) AS n FROM pums GROUP BY educ) AS g "
        "WHERE n > 50",
        lambda t: one(t("pums").groupby("educ").agg(n="COUNT(*)").where("n > 50").count(0.5)),
        lambda: one((pums_df().educ.value_counts() > 50).sum()),
    ),
    Case(
        "subquery_group_by_privacy_unit",
        "SELECT COUNT(*) FROM (SELECT pid, COUNT(*) AS v FROM visits_all GROUP BY pid) AS t "
        "WHERE v >= 3",
        lambda t: one(t("visits_all").groupby("pid").agg(v="COUNT(*)").where("v >= 3").count(1)),
        lambda: one((visits_df().pid.value_counts() >= 3).sum()),
    ),
    Case(
        "user_level_bounded",
        "SELECT COUNT(*), SUM(pid, 0, 1000) FROM visits",
        lambda t: one(
            t("visits").count(Fraction(1, 6)),  # type: ignore[arg-type]
            t("visits").sum("pid", Fraction(1, 6), bounds=(0, 1000)),  # type: ignore[arg-type]
        ),
        lambda: one(len(bounded_visits()), bounded_visits().pid.sum()),
    ),
    Case(
        "public_join_filter",
        "SELECT COUNT(*) FROM pums_raw JOIN educ_names USING (educ) WHERE label LIKE 'b%'",
        lambda t: one(
            t("pums_raw").join(educ_names_df(), on="educ").where("label LIKE 'b%'").count(1)
        ),
        lambda: one(pums_df().merge(educ_names_df(), on="educ").label.str.startswith("b").sum()),
    ),
    Case(
        "public_join_keys",
        "SELECT level, AVG(age) FROM pums_raw JOIN educ_names USING (educ) GROUP BY level",
        lambda t: series_rows(
            t("pums_raw")
            .join(educ_names_df(), on="educ")
            .partition("level", keys=LEVELS)
            .mean("age", 1)
        ),
        lambda: per_key(
            pums_df().merge(educ_names_df(), on="educ").groupby("level").age.mean(), LEVELS
        ),
    ),
    Case(
        "private_join_with_bounds",
        "SELECT COUNT(*) FROM persons JOIN visits ON persons.pid = visits.pid WITH BOUNDS (1, 3)",
        lambda t: one(
            t("persons").join(t("visits"), on="pid", max_rows_per_key=(1, 3)).count(Fraction(1, 6))  # type: ignore[arg-type]
        ),
        lambda: one(len(persons_df().merge(bounded_visits(), on="pid"))),
    ),
    Case(
        "union_all",
        "SELECT COUNT(*) FROM (SELECT age FROM pums UNION ALL SELECT age FROM persons "
        "WHERE age < 30) AS t",
        lambda t: one(
            t("pums").select("age").concat(t("persons").where("age < 30").select("age")).count(1)
        ),
        lambda: one(len(pums_df()) + (persons_df().age < 30).sum()),
    ),
    Case(
        "except",
        "SELECT COUNT(*) FROM (SELECT age FROM pums EXCEPT SELECT age FROM persons "
        "WHERE age > 30) AS t",
        lambda t: one(
            t("pums")
            .select("age")
            .difference(t("persons").where("age > 30").select("age"))
            .count(1)
        ),
        lambda: one(len(set(pums_df().age) - set(persons_df().query("age > 30").age))),
    ),
    Case(
        "intersect",
        "SELECT COUNT(*) FROM (SELECT educ FROM pums WHERE age < 25 INTERSECT "
        "SELECT educ FROM persons WHERE age > 80) AS t",
        lambda t: one(
            t("pums")
            .where("age < 25")
            .select("educ")
            .intersect(t("persons").where("age > 80").select("educ"))
            .count(1)
        ),
        lambda: one(
            len(set(pums_df().query("age < 25").educ) & set(persons_df().query("age > 80").educ))
        ),
    ),
    Case(
        "distinct",
        "SELECT COUNT(*) FROM (SELECT DISTINCT race, sex FROM pums) AS t",
        lambda t: one(t("pums").distinct("race", "sex").count(1)),
        lambda: one(len(pums_df()[["race", "sex"]].drop_duplicates())),
    ),
    Case(
        "count_distinct",
        "SELECT COUNT(DISTINCT age) FROM pums WHERE sex = 0",
        lambda t: one(t("pums").where("sex = 0").distinct("age").count(1)),
        lambda: one(pums_df().query("sex == 0").age.nunique()),
    ),
]


def _sql_rows(result: pd.DataFrame) -> Rows:
    rows = []
    for r in result.itertuples(index=False):
        rows.append(tuple(v if isinstance(v, str | bool | np.bool_) else float(v) for v in r))
    return rows


def _assert_rows_equal(got: Rows, want: Rows, what: str, tol: float = 1e-9) -> None:
    assert len(got) == len(want), f"{what}: {got} != {want}"
    for g, w in zip(got, want, strict=True):
        assert len(g) == len(w), f"{what}: {g} != {w}"
        for a, b in zip(g, w, strict=True):
            if isinstance(b, str | bool | np.bool_) or isinstance(a, str | bool | np.bool_):
                assert a == b, f"{what}: {g} != {w}"
            else:
                assert math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=tol), (  # type: ignore[arg-type]
                    f"{what}: {g} != {w}"
                )


def _spent(env: SqlEnv) -> dict[str, Fraction]:
    return {name: eps for name, (eps, _delta) in env.spent().items() if eps}


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 20
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_sql_equals_chain_equals_pandas(case: Case) -> None:
    sql_env, chain_env = make_env(), make_env()
    with pq.testing.no_noise():
        sql_result = sql_env.session.sql(case.sql, epsilon=case.epsilon)
        chain_rows = case.chain(chain_env.session.table)
    assert isinstance(sql_result, pd.DataFrame)
    sql_rows = _sql_rows(sql_result)
    exact_rows = case.exact()
    _assert_rows_equal(sql_rows, chain_rows, f"{case.name}: SQL vs chain")
    _assert_rows_equal(sql_rows, exact_rows, f"{case.name}: SQL vs pandas", case.tol)
    # The same charge to every budget, and the SQL total is exactly the query's epsilon.
    sql_spent, chain_spent = _spent(sql_env), _spent(chain_env)
    assert sql_spent == chain_spent
    assert max(sql_spent.values()) == Fraction(str(case.epsilon))
