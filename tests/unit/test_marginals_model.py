"""pq.Marginals: tables and samples are post-processing of the released counts.

They run with the data gone (the frame's DataFrame emptied in place, and the object pickled
into a fresh Python process that never had the data), charge nothing, and give consistent,
non-negative tables. The model is Private-PGM's (mbi); its first fit compiles (JAX), so the
tests share one small measurement.
"""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq

pytest.importorskip("mbi")

SCRIPT = """
import pickle, sys
m = pickle.loads(sys.stdin.buffer.read())
t = m.table(("age", "sex", "emp"))
s = m.sample(50, seed=3)
print(round(float(t["count"].sum()), 3), len(s), sorted(s.columns))
"""


@pytest.fixture(scope="module")
def measured() -> tuple[pq.Marginals, pq.Budget, pd.DataFrame]:
    rng = np.random.default_rng(4)
    n = 3000
    sex = rng.integers(1, 3, n)
    age = rng.normal(40 + 5 * sex, 15, n)
    emp = (rng.random(n) < np.where(age < 60, 0.8, 0.2)).astype(int)
    df = pd.DataFrame({"age": age, "sex": sex, "emp": emp})
    budget = pq.Budget(2)
    f = pq.PrivateFrame(df, budget, keys={"sex": [1, 2], "emp": [0, 1]})
    with pq.testing.seed(11):
        m = f.marginals(
            [("age", "sex"), ("age", "emp")], epsilon=0.5, cuts={"age": [20, 40, 60]}
        )
    return m, budget, df


def test_tables_are_consistent_and_cost_nothing(measured) -> None:
    m, budget, _df = measured
    spent = budget.spent
    full = m.table(("age", "sex", "emp"))
    assert (full["count"] >= 0).all() and len(full) == 4 * 2 * 2
    for cols in (("age", "sex"), ("sex", "emp"), ("emp",)):
        t = m.table(cols)
        summed = full.groupby(list(cols), observed=True, sort=False)["count"].sum()
        assert np.allclose(summed.to_numpy(), t["count"].to_numpy(), rtol=1e-6, atol=1e-6)
        assert abs(t["count"].sum() - full["count"].sum()) < 1e-6 * full["count"].sum()
    assert "measured in (age, sex)" in m.table(("age", "sex")).attrs["accuracy"]
    assert "no interval is claimed" in m.table(("sex", "emp")).attrs["accuracy"]
    assert budget.spent == spent


def test_table_is_close_to_the_truth(measured) -> None:
    m, _b, df = measured
    bins = pd.cut(df["age"], [-np.inf, 20, 40, 60, np.inf], right=False)
    true = pd.crosstab(bins, df["sex"]).to_numpy().reshape(-1)
    est = m.table(("age", "sex"))["count"].to_numpy()
    # Each noisy cell is DiscreteLaplace(2): sd about 2.8; the projection is no worse by
    # much, so 8 cells stay far within 8 sd of noise each.
    assert np.abs(est - true).sum() < 8 * 8 * 2.9


def test_sample_has_the_domain_and_is_reproducible(measured) -> None:
    m, budget, _df = measured
    spent = budget.spent
    a, b = m.sample(200, seed=7), m.sample(200, seed=7)
    pd.testing.assert_frame_equal(a, b)
    assert set(a["age"].cat.categories) == set(m.domain["age"])
    assert set(a["sex"]) <= {1, 2} and len(a) == 200
    assert len(m.sample(0)) == 0 and budget.spent == spent
    with pytest.raises(pq.PinqError):
        m.sample(-1)
    with pytest.raises(pq.PinqError, match="not measured"):
        m.table(("income",))


def test_runs_with_the_data_deleted(measured) -> None:
    m, _b, df = measured
    before = m.table(("age", "emp"))
    df.drop(df.index, inplace=True)  # the frame's source is gone
    pd.testing.assert_frame_equal(before, m.table(("age", "emp")))
    blob = pickle.dumps(m)
    assert b"__pinq" not in blob
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], input=blob, capture_output=True, timeout=600
    )
    assert out.returncode == 0, out.stderr.decode()[-2000:]
    total, rows, cols = out.stdout.decode().split(" ", 2)
    assert int(rows) == 50 and "'emp'" in cols
    assert abs(float(total) - m.total) < 1e-3 * m.total
