"""A public row count (``public_size=True``): which steps keep it, the free exact count, the
centred mean over it, that only the curator can declare it, and the server's config key."""

from __future__ import annotations

import copy
import inspect
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.errors import PinqError
from pinqpy.noise.mechanisms import PublicSizeMeanMechanism
from pinqpy.plan.serialize import plan_to_data
from pinqpy.remote.server.config import ConfigError, Limits, load_config
from pinqpy.remote.server.replay import PartitionRegistry, Replayer

ROWS = pd.DataFrame(
    {
        "pid": [1, 1, 2, 3, 3, 3, 4, 5],
        "age": [30.0, 31.0, 45.0, 52.0, 53.0, 54.0, 20.0, 90.0],
        "sex": ["F", "F", "M", "F", "F", "F", "M", "M"],
        "tags": [["a"], ["b", "c"], [], ["a"], ["c"], ["a", "b"], ["a"], []],
    }
)
BOUNDS = {"age": (0, 100)}
PUBLIC = pd.DataFrame({"sex": ["F", "M"], "label": ["f", "m"]})


def frame(budget: pq.Budget | None = None, **facts: object) -> pq.PrivateFrame:
    return pq.PrivateFrame(
        ROWS, budget or pq.Budget(10), bounds=BOUNDS, keys={"sex": ["F", "M"]}, **facts
    )


def public(f: pq.PrivateFrame) -> bool:
    return f._rel.meta.size is not None


# -- which transformations keep the fact ----------------------------------------------------
def test_row_preserving_steps_keep_it():
    f = frame(public_size=True)
    assert public(f)
    assert public(f.select("age", "sex"))
    assert public(f.select(years="age"))  # a rename
    assert public(f.assign(older="age + 1"))
    assert public(f.assign(older="age + 1").select("older"))


@pytest.mark.parametrize(
    "derive",
    [
        lambda f: f.where("age > 40"),
        lambda f: f.distinct("sex"),
        lambda f: f.explode("tags", 2),
        lambda f: f.groupby("sex").agg(n="COUNT(*)"),
        lambda f: f.join(f, on="sex", max_rows_per_key=(2, 2)),
        lambda f: f.join(PUBLIC, on="sex"),
        lambda f: f.concat(f),
        lambda f: f.union(f),
        lambda f: f.intersect(f),
        lambda f: f.difference(f.where("age > 50")),
        lambda f: f.bound_degree(["sex"], 2),
        lambda f: f.partition("sex")["F"],
        lambda f: f.select("age").where("age > 0").select("age"),
    ],
    ids=[
        "where", "distinct", "explode", "groupby", "join", "public join", "concat", "union",
        "intersect", "difference", "bound_degree", "partition part", "select after where",
    ],
)  # fmt: skip
def test_every_other_step_loses_it(derive):
    assert not public(derive(frame(public_size=True)))


@pytest.mark.parametrize(
    "derive",
    [
        lambda f: f.bound_contributions(2),
        lambda f: f.bound_contributions(max_groups=1, max_rows_per_group=1, by="sex"),
        lambda f: f.bound_degree(["pid"], 1),
    ],
    ids=["bound_contributions", "bound_groups", "bound_degree on the unit"],
)
def test_bounding_steps_lose_it(derive):
    assert not public(derive(frame(public_size=True, privacy_unit="pid")))


# Every kind of plan node, built over a public-size table (user-level where it needs a unit).
NODE_BUILDERS = {
    "Source": lambda f, u: f,
    "Select": lambda f, u: f.select(years="age").assign(older="years + 1"),
    "Where": lambda f, u: f.where("age >= 0"),
    "Distinct": lambda f, u: f.distinct("age", "sex", "pid"),
    "Explode": lambda f, u: f.explode("tags", 1),
    "GroupBy": lambda f, u: f.groupby("pid", "age", "sex").agg(n="COUNT(*)"),
    "Join": lambda f, u: f.select("pid", "age").join(
        f.select("pid", "sex"), on="pid", max_rows_per_key=(1, 1)
    ),
    "PublicJoin": lambda f, u: f.join(PUBLIC, on="sex", how="left"),
    "SetOp": lambda f, u: f.select("age").concat(f.select("age")),
    "PartSource": lambda f, u: f.partition("sex")["F"],
    "BoundContributions": lambda f, u: u.bound_contributions(100),
    "BoundGroups": lambda f, u: u.bound_contributions(
        max_groups=8, max_rows_per_group=8, by="sex"
    ),
    "BoundDegree": lambda f, u: f.bound_degree(["sex"], 100),
}


def test_only_source_and_select_keep_it():
    """Every plan node type but a Source and a row-wise Select may change the number of rows
    (even when it happens not to, as each builder here keeps them all): it drops the count.
    A node type added later without a case here fails this test."""
    import pinqpy.plan.nodes as nodes

    kinds = {cls.__name__ for cls in nodes.node_kinds()}
    assert kinds == set(NODE_BUILDERS)
    rows = ROWS.assign(pid=range(len(ROWS)))  # one row per person: every node keeps every row
    f = pq.PrivateFrame(
        rows, pq.Budget(1000), bounds=BOUNDS, keys={"sex": ["F", "M"]}, public_size=True
    )
    u = pq.PrivateFrame(rows, pq.Budget(1000), privacy_unit="pid", public_size=True)
    for name, build in NODE_BUILDERS.items():
        out = build(f, u)
        assert type(out._plan).__name__ == name
        assert public(out) == (name in ("Source", "Select")), name
        if name not in ("Source", "Select"):
            with pq.testing.no_noise():
                assert "row count public" not in out.count(1).mechanism, name


def test_sql_counts_only_the_own_rows_for_free():
    s = pq.Session()
    budget = pq.Budget(10)
    s.register("t", ROWS.drop(columns="tags"), budget=budget, bounds=BOUNDS, public_size=True)
    free = ["SELECT COUNT(*) FROM t", "SELECT COUNT(*) FROM (SELECT age + 1 AS a FROM t)"]
    noisy = [
        "SELECT COUNT(*) FROM t WHERE age > 0",
        "SELECT COUNT(*) FROM (SELECT age FROM t UNION ALL SELECT age FROM t)",
        "SELECT COUNT(*) FROM (SELECT sex, COUNT(*) AS n FROM t GROUP BY sex)",
        "SELECT COUNT(*) FROM (SELECT DISTINCT age FROM t)",
        "SELECT COUNT(*) FROM t a JOIN t b ON a.pid = b.pid WITH BOUNDS (1, 1)",
        "SELECT COUNT(pid) FROM t",
        "SELECT sex, COUNT(*) FROM t GROUP BY sex IN ('F', 'M')",
    ]
    for q in free + noisy:
        before = budget.spent
        text = str(s.sql("EXPLAIN " + q, epsilon=1))
        with pq.testing.no_noise():
            s.sql(q, epsilon=1)
        assert ("row count public (n = 8)" in text) == (q in free), q
        assert (budget.spent == before) == (q in free), q


def test_it_is_off_unless_declared():
    assert not public(frame())
    with pytest.raises(PinqError, match="public_size must be True or False"):
        frame(public_size="yes")


# -- count ------------------------------------------------------------------------------------
def test_count_is_exact_and_free():
    budget = pq.Budget(1)
    f = frame(budget, public_size=True)
    n = f.count(0.5)
    assert int(n) == len(ROWS)
    assert n.ci() == (len(ROWS), len(ROWS))
    assert n.ci(0.999) == (len(ROWS), len(ROWS))
    assert "row count public (n = 8)" in n.mechanism
    assert f.select("age").count(0.5) == len(ROWS)
    assert budget.spent == pq.Cost(0)
    # Bad input is still refused, and a filtered count is noisy and charged again, at
    # stability 2: a changed row may leave the filter and another enter it.
    with pytest.raises(PinqError):
        f.count(-1)
    f.where("age > 40").count(0.5)
    assert budget.spent == pq.Cost(1)


def test_the_count_is_read_once(monkeypatch):
    from pinqpy.engines.pandas.executor import PandasExecutor

    f = frame(public_size=True)
    calls = []
    original = PandasExecutor.count

    def counting(self, plan, grouping):
        calls.append(plan)
        return original(self, plan, grouping)

    monkeypatch.setattr(PandasExecutor, "count", counting)
    for _ in range(3):
        assert f.count(0.1) == len(ROWS)
        assert f.assign(a="age * 2").count(0.1) == len(ROWS)
    assert len(calls) == 1


def test_a_partition_count_is_noisy_and_charged():
    budget = pq.Budget(1)
    parts = frame(budget, public_size=True).partition("sex")
    parts.count(0.25)
    # One changed row can leave one part and enter another: the largest part at 2.
    assert budget.spent == pq.Cost(Fraction(1, 2))


# -- mean -------------------------------------------------------------------------------------
def test_mean_divides_the_centred_sum_by_the_public_count():
    budget = pq.Budget(1)
    f = frame(budget, public_size=True)
    with pq.testing.no_noise():
        m = f.mean("age", 0.5)
    assert float(m) == pytest.approx(ROWS["age"].mean())
    assert "row count public (n = 8)" in m.mechanism
    assert budget.spent == pq.Cost(1)  # epsilon x stability 2 (one changed row)


def test_mean_counts_nulls_as_the_midpoint():
    rows = pd.DataFrame({"x": [10.0, 20.0, None, 60.0]})
    f = pq.PrivateFrame(rows, pq.Budget(1), bounds={"x": (0, 100)}, public_size=True)
    with pq.testing.no_noise():
        m = f.mean("x", 0.5)
        plain = pq.PrivateFrame(rows, pq.Budget(1), bounds={"x": (0, 100)}).mean("x", 0.5)
    assert float(m) == pytest.approx((10 + 20 + 50 + 60) / 4)
    assert float(plain) == pytest.approx(30.0)
    assert "NULL counted as 50" in m.mechanism


def test_mean_accuracy_uses_the_public_count():
    f = frame(public_size=True)
    plain = frame()
    with pq.testing.seed(3):
        m = f.mean("age", 1.0)
    lo, hi = m.ci(0.95)
    mech = PublicSizeMeanMechanism(1, 0, 100, lambda: len(ROWS))
    t = mech.sum_noise.half_width(0.95) / len(ROWS)
    assert hi - lo <= 2 * t + 2 * 2.0**-14
    preview = f.accuracy("mean", "age", epsilon=1.0)
    assert preview.error == pytest.approx(t)
    assert preview.error < plain.accuracy("mean", "age", epsilon=1.0, n=len(ROWS)).error
    assert f.accuracy("count", epsilon=0.1).error == 0
    # The Laplace scale on the mean is (hi - lo)/(2·n·epsilon), up to the lattice's rounding.
    assert mech.sum_noise.scale / len(ROWS) == pytest.approx(100 / (2 * len(ROWS)), rel=1e-2)


@pytest.mark.parametrize("bounds", [(0.0, 100.0), (-3.0, 5.0), (1e6, 1e6 + 7.0), (-50.0, -20.0)])
def test_the_centred_sum_moves_by_at_most_half_the_width(bounds):
    """Add/remove one row, random data, values at the bounds and beyond, NULLs: the centred
    sum (before the division by n) changes by at most (hi - lo)/2."""
    lo, hi = bounds
    m = PublicSizeMeanMechanism(1, lo, hi, lambda: 1)
    rng = np.random.default_rng(7)
    width = hi - lo
    worst = Fraction(0)
    for _ in range(300):
        size = int(rng.integers(0, 12))
        data = rng.uniform(lo - width, hi + width, size)
        data[rng.random(size) < 0.2] = np.nan
        extra = rng.choice([lo, hi, lo - 10 * width, hi + 10 * width, np.nan, rng.uniform(lo, hi)])
        s, _, k = m.lattice.value_sums(data)
        s2, _, k2 = m.lattice.value_sums(np.append(data, extra))
        (before,) = m.centred([s], [k])
        (after,) = m.centred([s2], [k2])
        worst = max(worst, abs(after - before))
    assert worst <= Fraction(width) / 2
    assert worst == Fraction(width) / 2  # reached by a row at a bound
    assert m._sum.sensitivity == Fraction(width) / 2


def test_group_means_do_not_use_it():
    budget = pq.Budget(1)
    parts = frame(budget, public_size=True).partition("sex")
    with pq.testing.no_noise():
        means = parts.mean("age", 0.5)
    # Each group's own mean (a public total says nothing about a group's size).
    assert means.loc["F"] == pytest.approx(ROWS.age[ROWS.sex == "F"].mean())
    assert means.loc["M"] == pytest.approx(ROWS.age[ROWS.sex == "M"].mean())
    assert budget.spent == pq.Cost(1)


# -- only the curator declares it ---------------------------------------------------------------
def test_no_method_of_a_frame_takes_it():
    curator = {"__init__", "from_csv", "from_parquet"}
    for name, fn in inspect.getmembers(pq.PrivateFrame, inspect.isfunction):
        if name in curator:
            assert "public_size" in inspect.signature(fn).parameters
        else:
            assert "public_size" not in inspect.signature(fn).parameters, name
    f = frame()
    with pytest.raises(PinqError, match="must be an expression"):
        f.select("age", public_size=True)
    # A keyword of select/assign names a column; it declares nothing.
    renamed = f.select("age", public_size="age")
    assert renamed.columns == ["age", "public_size"] and not public(renamed)
    assert not public(f.assign(public_size="1"))
    with pytest.raises(PinqError):
        pq.PrivateFrame(f.where("age > 1"), pq.Budget(1), public_size=True)


def test_a_registered_frame_cannot_gain_it():
    s = pq.Session()
    with pytest.raises(PinqError, match="on its own"):
        s.register("t", frame(), public_size=True)
    t = s.register("u", ROWS, budget=pq.Budget(1), bounds=BOUNDS, public_size=True)
    assert public(t)
    assert not public(s.register("v", ROWS, budget=pq.Budget(1), privacy_unit="pid", max_rows=2))


def test_a_remote_plan_cannot_send_it():
    server_frame = pq.PrivateFrame(ROWS, pq.Budget(1), name="people", bounds=BOUNDS)
    client = pq.PrivateFrame(ROWS.iloc[:0], pq.Budget(1), name="people", public_size=True)
    replayer = Replayer({"people": server_frame._rel}, PartitionRegistry(), Limits(), None)
    # The client's declaration has no form in the plan: the server's table decides.
    assert not replayer.relation(plan_to_data(client._plan)).meta.size
    data = copy.deepcopy(plan_to_data(client._plan))
    data["tables"][0]["public_size"] = True
    with pytest.raises(PinqError, match="no field 'public_size'"):
        replayer.relation(data)
    declared = pq.PrivateFrame(ROWS, pq.Budget(1), name="people", public_size=True)
    rep = Replayer({"people": declared._rel}, PartitionRegistry(), Limits(), None)
    assert rep.relation(plan_to_data(client.select("age")._plan)).meta.size is not None
    assert rep.relation(plan_to_data(client.where("age > 1")._plan)).meta.size is None


# -- the server config ----------------------------------------------------------------------
CONFIG = """
[tables.people]
source = "csv"
path = "people.csv"
bounds = { age = [0, 100] }
{extra}

[analysts.alice]
tables = ["people"]
budget = {{ epsilon = 1 }}
"""


def _config(tmp_path: Path, extra: str) -> Path:
    (tmp_path / "people.csv").write_text("pid,age\n1,30\n2,40\n3,50\n")
    p = tmp_path / "server.toml"
    p.write_text(CONFIG.replace("{extra}", extra).replace("{{", "{").replace("}}", "}"))
    return p


def test_the_config_key(tmp_path):
    assert load_config(_config(tmp_path, "public_size = true")).tables["people"].public_size
    assert not load_config(_config(tmp_path, "")).tables["people"].public_size
    with pytest.raises(ConfigError, match=r"tables\.people\.public_size.*must be true"):
        load_config(_config(tmp_path, 'public_size = "yes"'))
    with pytest.raises(ConfigError, match=r"tables\.people\.public_size.*max_rows"):
        load_config(_config(tmp_path, 'public_size = true\nprivacy_unit = "pid"\nmax_rows = 2'))


def test_the_server_registers_it(tmp_path):
    from pinqpy.remote.server.state import ServerState

    cfg = load_config(_config(tmp_path, "public_size = true"))
    state = ServerState(cfg)
    try:
        people = state.analysts["alice"].session.table("people")
        assert people.count(0.5) == 3
        assert state.analysts["alice"].budgets["people"].spent == pq.Cost(0)
    finally:
        state.close()


# -- every engine gives the same answers ------------------------------------------------------
def test_every_engine_agrees(engine):
    rows = pd.DataFrame({"age": [30.0, 31.0, 45.0, 52.0, None, 90.0], "sex": list("FFMFMM")})
    f = pq.PrivateFrame(rows, pq.Budget(10), bounds={"age": (0, 100)}, public_size=True)
    assert f.engine == engine
    with pq.testing.no_noise():
        assert f.count(0.5) == 6
        assert float(f.mean("age", 0.5)) == pytest.approx((30 + 31 + 45 + 52 + 50 + 90) / 6)
        assert f.where("age > 40").count(0.5) == 3
    assert f.budgets[0].spent == pq.Cost(2)  # the public count is free; stability 2
    s = pq.Session()
    s.register("t", f)
    with pq.testing.no_noise():
        out = s.sql("SELECT COUNT(*) AS n, AVG(age) AS a FROM t", epsilon=1)
    assert out["n"].tolist() == [6]
    assert out["a"].tolist() == pytest.approx([298 / 6])


def test_answers_over_a_public_count_have_a_data_form():
    """The ledger stores, and the server sends, answers as data: a free count's and a
    public-size mean's accuracies must survive the trip with their intervals."""
    from pinqpy.pipeline import answers

    f = frame(public_size=True)
    with pq.testing.seed(5):
        count, mean = f.count(0.1), f.mean("age", 1.0)
    for value in (count, mean):
        acc = value._accuracy
        (back,) = answers.decode(answers.encode([(acc.values, acc)]))
        assert type(back[1]) is type(acc)
        assert np.array_equal(back[1].interval(0.9)[0], acc.interval(0.9)[0])
        assert np.array_equal(back[1].interval(0.9)[1], acc.interval(0.9)[1])


def test_a_whole_frame_calibration_is_never_released_per_group():
    """A sum calibrated for one changed row of the whole frame would be too little noise for
    a group (a changed row can leave one and enter another): run refuses it per group, before
    any charge."""
    from pinqpy.pipeline import prepare, run
    from pinqpy.plan.grouping import Grouping

    budget = pq.Budget(1)
    f = frame(budget, public_size=True)
    prep = prepare.prepare_sum(f._rel, "age", 0.1, None, None, whole=True)
    assert prep.mechanism.changed_row
    parts = f.partition("sex")
    target = parts._target()
    assert isinstance(target[0], Grouping)
    with pytest.raises(PinqError, match="nothing was charged"):
        run.run_one(prep, target)
    assert budget.spent == pq.Cost(0)
    assert not prepare.prepare_sum(f._rel, "age", 0.1, None, None).mechanism.changed_row
