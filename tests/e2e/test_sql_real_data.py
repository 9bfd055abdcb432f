"""SQL over the real public microdata in tests/data (see its README.md).

Tolerances come from the noise scale. A Laplace variable of scale b exceeds t·b in absolute
value with probability e^-t; every bound below uses t = T = 12 (e^-12 ≈ 6e-6 per value, so
even an unseeded run would essentially never fail) and the seeds are fixed
(``pq.testing.seed``), so a run is reproducible. In SQL the query's epsilon is split evenly
over its m aggregates and divided by the FROM clause's stability s: each aggregate runs at
``eps_each = epsilon / (m·s)`` on a table where one person changes s rows, so

- a count has scale ``s / (epsilon / m)`` in units of rows, i.e. ``1 / eps_each`` times s;
  written out per case below;
- a clamped sum over [lo, hi] has scale ``s·max(|lo|, |hi|) / (epsilon / m)``;
- a mean over [lo, hi] spends half of its share on a sum of ``x - mid`` (scale
  ``s·half / (share/2)``, half = (hi - lo)/2) and half on a count (scale ``s / (share/2)``); if
  the sum noise is at most t·b_s and the count noise at most t·b_c, the released mean is off
  by at most ``(t·b_s + half·t·b_c) / (n - t·b_c)`` (see :func:`mean_tolerance`).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS
from tests.conftest import data_csv

T = 12.0  # tail multiplier: P(|Laplace(b)| > T·b) = e^-T


def count_tolerance(share: float, stability: int = 1) -> float:
    """T times the Laplace scale of a count run with ``share`` of epsilon."""
    return T * stability / share


def mean_tolerance(n: float, lo: float, hi: float, share: float, stability: int = 1) -> float:
    """Worst error of a clamped mean of n rows when both noises are within T scales."""
    half = (hi - lo) / 2
    b_sum = stability * half / (share / 2)
    b_count = stability / (share / 2)
    return (T * b_sum + half * T * b_count) / (n - T * b_count)


def no_nan(frame: pd.DataFrame) -> None:
    numbers = frame.select_dtypes("number")
    assert not numbers.isna().any().any(), f"NaN released:\n{frame}"
    assert np.isfinite(numbers.to_numpy(dtype=float)).all()


Setup = tuple[pq.Session, pq.Budget, pd.DataFrame]


def spent(budget: pq.Budget) -> Fraction:
    return Fraction(budget.spent.epsilon)


# -- PUMS.csv with the declared bounds and keys -----------------------------------------------
@pytest.fixture
def pums_session() -> Setup:
    df = data_csv("PUMS.csv")
    budget = pq.Budget(epsilon=20)
    session = pq.Session()
    session.register("pums", df, budget=budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
    return session, budget, df


def test_pums_group_by_declared_keys(pums_session: Setup) -> None:
    session, budget, df = pums_session
    with pq.testing.seed(11):
        r = session.sql(
            "SELECT sex, COUNT(*) AS n, AVG(income) AS mean_income FROM pums GROUP BY sex",
            epsilon=4,
        )
    assert spent(budget) == 4  # parallel composition: one charge for both groups
    assert list(r.columns) == ["sex", "n", "mean_income"] and list(r.sex) == [0, 1]
    no_nan(r)
    share = 4 / 2  # two aggregates
    truth = df.groupby("sex").agg(n=("age", "size"), mean_income=("income", "mean"))
    for i, key in enumerate([0, 1]):
        n = truth.n[key]
        assert abs(r.n[i] - n) < count_tolerance(share)
        tol = mean_tolerance(n, 0, 500_000, share)
        assert abs(r.mean_income[i] - truth.mean_income[key]) < tol
        assert 0 <= r.mean_income[i] <= 500_000
    # The accuracy travels with the answer: the 95% half-width of a discrete Laplace count
    # of scale b = 1/2 is the least integer t with P(|X| > t) = 2q^(t+1)/(1+q) <= 0.05,
    # q = e^(-1/b): t = 1.
    q = math.exp(-share)
    t = next(t for t in range(100) if 2 * q ** (t + 1) / (1 + q) <= 0.05)
    ci = r.ci("n", 0.95)
    half_widths = (ci["high"] - ci["low"]) / 2
    assert t == 1 and np.allclose(half_widths, t)
    assert ((ci["low"] < r.n) & (r.n < ci["high"])).all()


def test_pums_where_and_expressions(pums_session: Setup) -> None:
    session, budget, df = pums_session
    with pq.testing.seed(12):
        r = session.sql(
            "SELECT COUNT(*) AS seniors, AVG(income / 1000) AS k FROM pums WHERE age >= 65",
            epsilon=2,
        )
    assert spent(budget) == 2
    seniors = df[df.age >= 65]
    # share 1 each: count scale 1; mean of income/1000 on the derived bounds [0, 500].
    assert abs(r.seniors[0] - len(seniors)) < count_tolerance(1)
    assert abs(r.k[0] - seniors.income.mean() / 1000) < mean_tolerance(len(seniors), 0, 500, 1)


def test_pums_median_within_bounds(pums_session: Setup) -> None:
    session, _budget, df = pums_session
    with pq.testing.seed(13):
        query = "SELECT MEDIAN(age) AS med FROM pums OPTIONS (quantile_ci = true)"
        r = session.sql(query, epsilon=2)
    # The exponential mechanism picks a candidate whose rank error is small with high
    # probability; its value-space ci comes with the answer when the query pays for it.
    low, high = r.ci("med", 0.999).iloc[0]
    assert low <= df.age.median() <= high
    assert 30 <= r.med[0] <= 55  # true median 42


# -- PUMS_dup.csv: user-level, one person = all rows of a pid ---------------------------------
@pytest.fixture
def dup() -> pd.DataFrame:
    return data_csv("PUMS_dup.csv")


def test_user_level_with_bounded_contributions(dup: pd.DataFrame) -> None:
    budget = pq.Budget(epsilon=10)
    session = pq.Session()
    session.register("dup", dup, budget=budget, privacy_unit="pid", max_rows=2, bounds=PUMS_BOUNDS)
    plan = session.explain("SELECT COUNT(*), AVG(age) FROM dup", epsilon=2)
    assert "Bound contributions: at most 2 rows per 'pid'" in plan
    assert "x 0.5 x stability 2" in plan
    with pq.testing.seed(21):
        r = session.sql("SELECT COUNT(*) AS n, AVG(age) AS age FROM dup", epsilon=2)
    assert spent(budget) == 2
    no_nan(r)
    # Every repeated row is a copy of the person's row, so what max_rows=2 keeps is known:
    # min(rows, 2) copies of each person.
    kept = dup.groupby("pid").head(2)
    # eps_each = 2 / (2 aggregates x stability 2) = 0.5 on a table of stability 2.
    assert abs(r.n[0] - len(kept)) < count_tolerance(1, stability=2)
    assert abs(r.age[0] - kept.age.mean()) < mean_tolerance(len(kept), 0, 100, 1, stability=2)


def test_unbounded_user_level_is_refused_unless_grouped_by_pid(dup: pd.DataFrame) -> None:
    budget = pq.Budget(epsilon=10)
    session = pq.Session()
    session.register("visits", dup, budget=budget, privacy_unit="pid", bounds=PUMS_BOUNDS)
    for query in (
        "SELECT COUNT(*) FROM visits",
        "SELECT AVG(age) FROM visits WHERE sex = 1",
        "SELECT sex, COUNT(*) FROM visits GROUP BY sex IN (0, 1)",
        "SELECT COUNT(*) FROM (SELECT sex, COUNT(*) AS n FROM visits GROUP BY sex) AS s",
    ):
        with pytest.raises(pq.PrivacyError, match="unbounded"):
            session.sql(query, epsilon=1)
    assert spent(budget) == 0

    with pq.testing.seed(22):
        r = session.sql(
            "SELECT COUNT(*) AS heavy, AVG(rows, 1, 4) AS mean_rows "
            "FROM (SELECT pid, COUNT(*) AS rows FROM visits GROUP BY pid) AS p "
            "WHERE rows >= 1",
            epsilon=2,
        )
    assert spent(budget) == 2  # grouping by the privacy unit has stability 1
    rows = dup.pid.value_counts()
    assert abs(r.heavy[0] - len(rows)) < count_tolerance(1)
    assert abs(r.mean_rows[0] - rows.mean()) < mean_tolerance(len(rows), 1, 4, 1)
    with pq.testing.seed(23):
        heavy = session.sql(
            "SELECT COUNT(*) AS n FROM (SELECT pid, COUNT(*) AS rows FROM visits GROUP BY pid) "
            "AS p WHERE rows >= 3",
            epsilon=1,
        )
    assert abs(heavy.n[0] - (180 + 93)) < count_tolerance(1)  # SOURCES.md: 180 + 93 persons


# -- PUMS_null.csv: NULLs ---------------------------------------------------------------------
@pytest.fixture
def nulls_session() -> Setup:
    df = data_csv("PUMS_null.csv")
    budget = pq.Budget(epsilon=50)
    session = pq.Session()
    session.register(
        "nulls", df, budget=budget, bounds=PUMS_BOUNDS, keys={"sex": [0, 1], "married": [0, 1]}
    )
    return session, budget, df


def test_null_semantics_exact(nulls_session: Setup) -> None:
    session, _budget, df = nulls_session
    with pq.testing.no_noise():
        r = session.sql(
            "SELECT COUNT(*) AS n, COUNT(age) AS n_age, COUNT(income) AS n_income, "
            "COUNT(DISTINCT educ) AS levels, SUM(COALESCE(age, 0)) AS age_total FROM nulls",
            epsilon=1,
        )
        by_sex = session.sql(
            "SELECT sex, COUNT(*) AS n, AVG(age) AS age, SUM(income) AS income "
            "FROM nulls GROUP BY sex",
            epsilon=1,
        )
        missing = session.sql("SELECT COUNT(*) AS n FROM nulls WHERE age IS NULL", epsilon=1)
    # COUNT(col) skips NULLs; COUNT(*) does not; COUNT(DISTINCT) ignores NULL.
    assert r.n[0] == 1948 and r.n_age[0] == 1948 - 116 and r.n_income[0] == 1948 - 86
    assert r.levels[0] == df.educ.dropna().nunique() == 16
    assert r.age_total[0] == df.age.fillna(0).sum()
    assert missing.n[0] == 116
    # Rows whose key is NULL belong to no public key; AVG and SUM skip NULL values.
    truth = df.groupby("sex").agg(n=("age", "size"), age=("age", "mean"), income=("income", "sum"))
    assert list(by_sex.n) == list(truth.n)
    assert np.allclose(by_sex.age, truth.age) and np.allclose(by_sex.income, truth.income)
    for frame in (r, by_sex, missing):
        no_nan(frame)


def test_nulls_never_give_nan_with_noise(nulls_session: Setup) -> None:
    session, budget, df = nulls_session
    queries = [
        "SELECT COUNT(age), AVG(age), SUM(income), MEDIAN(income), STDDEV(age) FROM nulls",
        "SELECT married, AVG(income), MIN(age), MAX(age) FROM nulls GROUP BY married",
        "SELECT AVG(age), MEDIAN(income), VARIANCE(age) FROM nulls WHERE age > 200",
        "SELECT sex, AVG(age) FROM nulls WHERE sex IS NULL GROUP BY sex",
        "SELECT AVG(COALESCE(income, 0)), COUNT(CASE WHEN age IS NULL THEN 1 END) FROM nulls",
    ]
    with pq.testing.seed(31):
        results = [session.sql(q, epsilon=1) for q in queries]
    assert spent(budget) == len(queries)
    for frame in results:
        no_nan(frame)
    empty = results[2]  # no rows: every value is still inside its bounds
    assert 0 <= empty.iloc[0, 0] <= 100 and 0 <= empty.iloc[0, 1] <= 500_000
    counted = results[0].iloc[0, 0]
    # COUNT(age) with 5 aggregates: share 0.2, scale 5.
    assert abs(counted - df.age.notna().sum()) < count_tolerance(0.2)
    nulls_counted = results[4].iloc[0, 1]
    assert abs(nulls_counted - 116) < count_tolerance(0.5)


# -- adult.csv (UCI Adult) ----------------------------------------------------------------------
EDUCATION_LEVELS = pd.DataFrame(
    {
        "education": [
            "Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th",
            "HS-grad", "Some-college", "Assoc-voc", "Assoc-acdm", "Bachelors", "Masters",
            "Prof-school", "Doctorate",
        ],
        "level": ["no diploma"] * 8 + ["high school"] + ["some college"] * 3 + ["degree"] * 4,
    }
)  # fmt: skip


@pytest.fixture
def adult_session() -> Setup:
    df = data_csv("adult.csv")
    budget = pq.Budget(epsilon=10)
    session = pq.Session()
    session.register("adult", df, budget=budget, bounds={"age": (0, 100)})
    session.register_public("education_levels", EDUCATION_LEVELS)
    return session, budget, df


def test_adult_group_by_inline_keys(adult_session: Setup) -> None:
    session, budget, df = adult_session
    with pq.testing.seed(41):
        r = session.sql(
            "SELECT sex, COUNT(*) AS n, AVG(hours_per_week, 1, 99) AS hours "
            "FROM adult GROUP BY sex IN ('Female', 'Male')",
            epsilon=1,
        )
    assert spent(budget) == 1
    assert list(r.sex) == ["Female", "Male"]
    no_nan(r)
    truth = df.groupby("sex").agg(n=("age", "size"), hours=("hours_per_week", "mean"))
    for i, key in enumerate(["Female", "Male"]):
        n = truth.n[key]
        assert abs(r.n[i] - n) < count_tolerance(0.5)
        assert abs(r.hours[i] - truth.hours[key]) < mean_tolerance(n, 1, 99, 0.5)
    assert r.hours[1] > r.hours[0]  # men report longer hours (about 42 vs 36)


def test_adult_join_with_public_education_levels(adult_session: Setup) -> None:
    session, budget, df = adult_session
    query = (
        "SELECT level, COUNT(*) AS n, AVG(age) AS age FROM adult "
        "JOIN education_levels USING (education) GROUP BY level"
    )
    plan = session.explain(query, epsilon=1)
    assert "GROUP BY level (4 public keys)" in plan
    assert "(at most 1 public rows per key)" in plan
    with pq.testing.seed(42):
        r = session.sql(query, epsilon=1)
    assert spent(budget) == 1
    assert list(r.level) == ["no diploma", "high school", "some college", "degree"]
    no_nan(r)
    truth = (
        df.merge(EDUCATION_LEVELS, on="education")
        .groupby("level")
        .agg(n=("age", "size"), age=("age", "mean"))
    )
    for i, level in enumerate(r.level):
        n = truth.n[level]
        assert abs(r.n[i] - n) < count_tolerance(0.5)
        assert abs(r.age[i] - truth.age[level]) < mean_tolerance(n, 0, 100, 0.5)


def test_adult_income_share_and_rare_key(adult_session: Setup) -> None:
    session, _budget, df = adult_session
    with pq.testing.seed(43):
        r = session.sql(
            "SELECT income, COUNT(*) AS n FROM adult GROUP BY income IN ('<=50K', '>50K')",
            epsilon=1,
        )
        rare = session.sql(
            "SELECT COUNT(*) AS n FROM adult WHERE native_country = 'Holand-Netherlands'",
            epsilon=1,
        )
    share = r.n[1] / (r.n[0] + r.n[1])
    assert abs(share - 0.2408) < 0.005  # 7,841 of 32,561 earn >50K; noise scale 1
    assert abs(r.n[1] - (df.income == ">50K").sum()) < count_tolerance(1)
    # One person: the noisy count does not reveal them (scale 1), but stays near 1.
    assert abs(rare.n[0] - 1) < count_tolerance(1)
