"""Neighbouring datasets against the charge: unknown-key releases, group bounds, unit counts.

For a random dataset ``D`` and a neighbour ``D'`` (one privacy unit added: a row of a
record-level table, or every row of one new person of a user-level table, adversarially many
rows over many keys, NULL, NaN, ``-0.0`` and extreme keys), run under one
``pq.testing.seed`` on both sides, the exact quantities a release adds noise to must move by
at most what was charged for them:

* **the one-step release** (``histogram``, ``select_keys``, SQL ``GROUP BY`` over private
  keys): the exact count of every key the mechanism is given (captured at
  :meth:`KeySelectionMechanism.release`) moves by at most the charged stability in L1
  (charged epsilon / the mechanism's per-row epsilon), in at most ``G`` keys by at most ``k``
  each, where ``(G, k)`` is the contribution structure its threshold was set for; so a key of
  ``D'`` absent from ``D`` (or the reverse) holds at most ``k`` of the unit's rows, which is
  what the threshold's delta assumes. The keys given are distinct under the engines' key
  equality (NaN is None, ``-0.0`` is ``0.0``): one key, one noise draw.
* **a Gaussian split of a group-bounded frame**: the per-part exact counts move by at most
  the L2 sensitivity the zCDP charge paid for (``Σ Δ² <= rho charged / rho of a
  sensitivity-1 count``), and in at most ``G`` parts by at most ``k``.
* **COUNT(DISTINCT unit)** on a user-level table: the exact count moves by at most the
  charged stability (1 without GROUP BY, whatever the rows per person); in Python,
  ``distinct(unit).count()``, in SQL also ``COUNT(*)`` of ``SELECT DISTINCT unit``.

Hypothesis runs with ``derandomize=True``: the examples are fixed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pinqpy as pq
from pinqpy.accounting.charges import usage_of
from pinqpy.engines.registry import executor_for
from pinqpy.noise.keyselect import (
    KeySelectionMechanism,
    gaussian_selection_threshold,
    selection_threshold,
)
from pinqpy.noise.mechanisms import CountMechanism
from tests.unit.test_stability_properties import sym_diff

ENGINES = ["pandas", "duckdb", "polars"]
EPS = Fraction(1, 2)
DELTA = 1e-4
EXAMPLES = {"pandas": 40, "duckdb": 20, "polars": 10}

# Keys an adversary would pick: every NULL spelling, both zeros, extremes.
FLOAT_KEYS = [0.0, -0.0, math.nan, None, 1.0, 2.5, -7.0, 1e300, -1e300, math.inf]
STR_KEYS = ["a", "b", "", "A", None, "a "]


def settings_for(engine: str) -> settings:
    return settings(
        max_examples=EXAMPLES[engine],
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


def canonical(key: Hashable) -> Hashable:
    """The engines' key equality: every NULL-like is None, -0.0 is 0.0."""
    if isinstance(key, tuple):
        return tuple(canonical(k) for k in key)
    if key is None or key is pd.NA or (isinstance(key, float) and math.isnan(key)):
        return None
    if isinstance(key, float) and key == 0.0:
        return 0.0
    return key


class Captured:
    """Every call of ``KeySelectionMechanism.release``: the mechanism and its exact counts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.calls: list[tuple[KeySelectionMechanism, dict[Hashable, int], int]] = []
        original = KeySelectionMechanism.release

        def release(mech: KeySelectionMechanism, keys: list, counts: Any):
            c = [int(x) for x in np.asarray(counts)]
            exact = {canonical(k): n for k, n in zip(keys, c, strict=True)}
            self.calls.append((mech, exact, len(keys)))
            return original(mech, keys, counts)

        monkeypatch.setattr(KeySelectionMechanism, "release", release)

    def last(self) -> tuple[KeySelectionMechanism, dict[Hashable, int], int]:
        assert self.calls, "no key selection ran"
        return self.calls[-1]


def check_release(
    before: tuple[KeySelectionMechanism, dict[Hashable, int], int],
    after: tuple[KeySelectionMechanism, dict[Hashable, int], int],
    charged: tuple[pq.Cost, pq.Cost],
) -> None:
    mech, d, n_d = before
    mech2, d2, n_d2 = after
    # One key, one noise draw: no two keys given are equal under the engines' equality.
    assert len(d) == n_d and len(d2) == n_d2
    # The mechanism is chosen from public facts alone: the same on both sides.
    assert (mech.threshold, mech.max_groups, mech.max_rows) == (
        mech2.threshold,
        mech2.max_groups,
        mech2.max_rows,
    )
    assert mech.epsilon == mech2.epsilon and mech.scale == mech2.scale
    g, k = mech.max_groups, mech.max_rows
    # The threshold is the one derived for (G, k) at the mechanism's noise.
    if mech.noise_delta is None:
        assert mech.threshold == selection_threshold(mech.scale, mech.delta, g, k)
    else:
        assert mech.threshold == gaussian_selection_threshold(mech.scale, mech.delta, g, k)
    cost, cost2 = charged
    assert cost == cost2
    assert mech.delta <= Fraction(cost.delta)
    stability = Fraction(cost.epsilon) / mech.epsilon  # what the budget paid per row
    moved = {key: d2.get(key, 0) - d.get(key, 0) for key in set(d) | set(d2)}
    moved = {key: x for key, x in moved.items() if x}
    assert sum(abs(x) for x in moved.values()) <= stability, (moved, stability)
    assert len(moved) <= g, (moved, g)
    assert all(abs(x) <= k for x in moved.values()), (moved, k)


# -- data ------------------------------------------------------------------------------------
def users_strategy(keys: list) -> st.SearchStrategy:
    one_user = st.lists(st.sampled_from(keys), min_size=1, max_size=5)
    return st.lists(one_user, max_size=6)


def new_user_strategy(keys: list) -> st.SearchStrategy:
    # Adversarial: up to 16 rows over every key, NULL spellings included.
    return st.lists(st.sampled_from(keys), min_size=1, max_size=16)


def user_frame(users: list[list], string: bool) -> pd.DataFrame:
    xs = [x for xs in users for x in xs]
    df = pd.DataFrame({"pid": np.repeat(np.arange(len(users)), [len(u) for u in users])})
    df["pid"] = df["pid"].astype("int64")
    if string:
        df["x"] = pd.array(xs, dtype="string")
    else:
        df["x"] = np.array([math.nan if v is None else v for v in xs], dtype=np.float64)
    df["y"] = np.arange(len(df), dtype="int64") % 3
    return df


def neighbours(users: list[list], new: list) -> tuple[list[list], list[list]]:
    return users, [*users, new]


def released_on(
    engine: str,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[pd.DataFrame, pq.Budget], object],
    dfs: tuple[pd.DataFrame, pd.DataFrame],
    seed: int,
) -> None:
    cap = Captured(monkeypatch)
    sides, costs = [], []
    for df in dfs:
        budget = pq.Budget(epsilon=1000, delta=0.5)
        with pq.testing.engine(engine), pq.testing.no_noise(), pq.testing.seed(seed):
            make(df, budget)
        sides.append(cap.last())
        costs.append(budget.spent)
    check_release(sides[0], sides[1], (costs[0], costs[1]))


# -- the one-step release on a group-bounded frame ---------------------------------------------
GROUP_BOUNDED: dict[str, Callable[[pq.PrivateFrame, int, int], pq.PrivateFrame]] = {
    "bounded": lambda f, g, k: f.bound_contributions(max_groups=g, max_rows_per_group=k, by="x"),
    "bounded, renamed, filtered": lambda f, g, k: (
        f.bound_contributions(max_groups=g, max_rows_per_group=k, by="x")
        .select("pid", "y", z="x")
        .where("y < 2")
    ),
    "bounded, capped overall": lambda f, g, k: f.bound_contributions(
        3, max_groups=g, max_rows_per_group=k, by="x"
    ),
    "bounded twice": lambda f, g, k: f.bound_contributions(2).bound_contributions(
        max_groups=g, max_rows_per_group=k, by="x"
    ),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("string", [False, True], ids=["float keys", "text keys"])
@pytest.mark.parametrize("chain", sorted(GROUP_BOUNDED))
def test_histogram_of_a_group_bounded_frame(engine, string, chain, monkeypatch):
    keys = STR_KEYS if string else FLOAT_KEYS
    build = GROUP_BOUNDED[chain]
    col = "z" if "renamed" in chain else "x"

    @settings_for(engine)
    @given(
        users=users_strategy(keys),
        new=new_user_strategy(keys),
        g=st.integers(1, 3),
        k=st.integers(1, 3),
        seed=st.integers(0, 2**16),
    )
    def prop(users, new, g, k, seed):
        def make(df: pd.DataFrame, budget: pq.Budget) -> object:
            f = pq.PrivateFrame(df, budget, privacy_unit="pid")
            return build(f, g, k).histogram(col, EPS, delta=DELTA)

        d, d2 = neighbours(users, new)
        released_on(
            engine, monkeypatch, make, (user_frame(d, string), user_frame(d2, string)), seed
        )

    prop()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("string", [False, True], ids=["float keys", "text keys"])
def test_histogram_with_max_groups_counts_people(engine, string, monkeypatch):
    keys = STR_KEYS if string else FLOAT_KEYS

    @settings_for(engine)
    @given(
        users=users_strategy(keys),
        new=new_user_strategy(keys),
        g=st.integers(1, 4),
        seed=st.integers(0, 2**16),
    )
    def prop(users, new, g, seed):
        def make(df: pd.DataFrame, budget: pq.Budget) -> object:
            f = pq.PrivateFrame(df, budget, privacy_unit="pid")
            return f.select_keys("x", EPS, DELTA, max_groups=g)

        d, d2 = neighbours(users, new)
        released_on(
            engine, monkeypatch, make, (user_frame(d, string), user_frame(d2, string)), seed
        )

    prop()


# -- the one-step release on record-level frames of stability > 1 -------------------------------
RECORD: dict[str, Callable[[pq.PrivateFrame], pq.PrivateFrame]] = {
    # A new row moves one group's count: its old value leaves the keys, a new one comes.
    "grouped counts as keys": lambda f: f.groupby("y").agg(n="COUNT(*)").select(x="n"),
    "bound_degree": lambda f: f.bound_degree("x", 2),
    "explode-like concat": lambda f: f.concat(f.where("y = 1")),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("chain", sorted(RECORD))
def test_histogram_of_a_record_level_frame_of_stability_above_one(engine, chain, monkeypatch):
    build = RECORD[chain]
    row = st.tuples(st.sampled_from(FLOAT_KEYS), st.integers(0, 2))

    @settings_for(engine)
    @given(rows=st.lists(row, max_size=12), new=row, seed=st.integers(0, 2**16))
    def prop(rows, new, seed):
        def frame(rs: list) -> pd.DataFrame:
            df = pd.DataFrame(rs, columns=["x", "y"])
            return df.astype({"x": "float64", "y": "int64"})

        def make(df: pd.DataFrame, budget: pq.Budget) -> object:
            return build(pq.PrivateFrame(df, budget)).histogram("x", EPS, delta=DELTA)

        released_on(engine, monkeypatch, make, (frame(rows), frame([*rows, new])), seed)

    prop()


# -- SQL: GROUP BY over private keys --------------------------------------------------------------
SQL = {
    "per-unit COUNT(*) clamped to 1": (
        "SELECT x, COUNT(*, contribution_bounds_per_group => (0, 1)) AS n FROM t GROUP BY x "
        "OPTIONS (max_groups_contributed = {g})"
    ),
    "per-unit COUNT(DISTINCT pid)": (
        "SELECT x, COUNT(DISTINCT pid) AS n FROM t GROUP BY x "
        "OPTIONS (max_groups_contributed = {g})"
    ),
    "rows, max_rows_contributed": (
        "SELECT x, COUNT(*) AS n FROM t GROUP BY x OPTIONS (max_rows_contributed = {g})"
    ),
    "per-unit SUM, keys selected apart": (
        "SELECT x, SUM(y, contribution_bounds_per_group => (0, 2)) AS s FROM t GROUP BY x "
        "OPTIONS (max_groups_contributed = {g})"
    ),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("query", sorted(SQL))
def test_sql_group_by_private_keys(engine, query, monkeypatch):
    @settings_for(engine)
    @given(
        users=users_strategy(FLOAT_KEYS),
        new=new_user_strategy(FLOAT_KEYS),
        g=st.integers(1, 3),
        seed=st.integers(0, 2**16),
    )
    def prop(users, new, g, seed):
        def make(df: pd.DataFrame, budget: pq.Budget) -> object:
            s = pq.Session()
            s.register("t", df, budget=budget, privacy_unit="pid")
            return s.sql(SQL[query].format(g=g), epsilon=1, delta=DELTA)

        d, d2 = neighbours(users, new)
        released_on(engine, monkeypatch, make, (user_frame(d, False), user_frame(d2, False)), seed)

    prop()


# -- Gaussian split of a group-bounded frame ------------------------------------------------------
# The public table doubles every key's rows: the split after it must not be charged as G parts
# of k rows (a join is not row-wise), nor after a recomputed by column.
DOUBLING = pd.DataFrame({"x": [0.0, 0.0, 1.0, 1.0, 2.5, 2.5], "tag": list("pqrstu")})
AFTER_BOUNDING: dict[str, Callable[[pq.PrivateFrame], pq.PrivateFrame]] = {
    "split on by": lambda b: b,
    "renamed, filtered": lambda b: b.select("pid", "y", x="x").where("y < 2"),
    "public join doubling rows": lambda b: b.join(DOUBLING, on="x"),
    "by recomputed": lambda b: b.assign(x="x * 1"),
    "concat with itself": lambda b: b.concat(b),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("after", sorted(AFTER_BOUNDING))
def test_gaussian_split_on_the_by_column_moves_within_its_l2_charge(engine, after):
    keys = [0.0, None, 1.0, 2.5, -7.0, 1e300, -1e300, math.inf]
    then = AFTER_BOUNDING[after]
    delta = Fraction(1, 10**6)
    rho1 = usage_of(CountMechanism(EPS, delta=delta).charge, 1).rho

    @settings_for(engine)
    @given(
        users=users_strategy(FLOAT_KEYS),
        new=new_user_strategy(FLOAT_KEYS),
        g=st.integers(1, 3),
        k=st.integers(1, 3),
        cap=st.one_of(st.none(), st.integers(1, 6)),
        seed=st.integers(0, 2**16),
    )
    def prop(users, new, g, k, cap, seed):
        out, charged = [], []
        for data in neighbours(users, new):
            budget = pq.Budget(1000, 1e-3, accounting="zcdp")
            with pq.testing.engine(engine), pq.testing.no_noise(), pq.testing.seed(seed):
                f = pq.PrivateFrame(user_frame(data, False), budget, privacy_unit="pid")
                b = f.bound_contributions(cap, max_groups=g, max_rows_per_group=k, by="x")
                counts = then(b).partition("x", keys=keys).count(EPS, delta=delta)
            out.append(counts.to_numpy(dtype=np.int64))
            charged.append(budget._spent.rho)
        assert charged[0] == charged[1]
        moved = out[1] - out[0]
        assert int((moved**2).sum()) * rho1 <= charged[0]
        if after in ("split on by", "renamed, filtered"):
            assert int((moved != 0).sum()) <= g
            assert int(np.abs(moved).max()) <= k

    prop()


# -- COUNT(DISTINCT unit) -----------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
def test_count_distinct_unit_moves_by_one_whatever_the_rows(engine):
    @settings_for(engine)
    @given(
        users=users_strategy(FLOAT_KEYS),
        new=new_user_strategy(FLOAT_KEYS),
        null_unit_rows=st.integers(0, 3),
        seed=st.integers(0, 2**16),
    )
    def prop(users, new, null_unit_rows, seed):
        values, charged = [], []
        for data in neighbours(users, new):
            df = user_frame(data, False)
            # Rows of no person: not counted, whatever they hold.
            extra = pd.DataFrame(
                {
                    "pid": np.full(null_unit_rows, np.nan),
                    "x": np.ones(null_unit_rows),
                    "y": np.zeros(null_unit_rows, dtype=np.int64),
                }
            )
            df = pd.concat([df.astype({"pid": "float64"}), extra], ignore_index=True)
            budget = pq.Budget(1000)
            s = pq.Session()
            with pq.testing.engine(engine), pq.testing.no_noise(), pq.testing.seed(seed):
                s.register("t", df, budget=budget, privacy_unit="pid")
                res = s.sql("SELECT COUNT(DISTINCT pid) AS n FROM t", epsilon=1)
            values.append(int(res["n"].iloc[0]))
            charged.append(budget.spent.epsilon)
        assert values[0] == len(users) and values[1] == len(users) + 1
        assert charged[0] == charged[1] == 1  # stability 1: the whole epsilon, once

    prop()


# -- bound_degree on adversarial keys -----------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("column", ["x", "recomputed"])
def test_bound_degree_changes_at_most_two_rows_whatever_the_key(engine, column):
    """PINQ's degree cap keeps at most b rows per key (every NULL spelling one key, -0.0 and
    0.0 one key); a new row joins its key and may evict one kept row: at most 2 rows change,
    also on a column recomputed from another (no fact of the column is used)."""
    row = st.tuples(st.sampled_from(FLOAT_KEYS), st.integers(0, 2))

    @settings_for(engine)
    @given(
        rows=st.lists(row, max_size=14), new=row, b=st.integers(1, 3), seed=st.integers(0, 2**16)
    )
    def prop(rows, new, b, seed):
        out = []
        for rs in (rows, [*rows, new]):
            df = pd.DataFrame(rs, columns=["x", "y"]).astype({"x": "float64", "y": "int64"})
            budget = pq.Budget(1000)
            with pq.testing.engine(engine):
                f = pq.PrivateFrame(df, budget)
                if column == "recomputed":
                    f = f.assign(x="x * 1", y="y")
                bounded = f.bound_degree("x", b)
                assert bounded.stability == 2
                with pq.testing.seed(seed):
                    ex = executor_for(bounded._plan, bounded._rel.catalog)
                    out.append(ex.rows(bounded._plan))  # type: ignore[attr-defined]
        assert sym_diff(out[0], out[1]) <= 2
        per_key = pd.Series([canonical(v) for v in out[1]["x"]], dtype=object)
        assert per_key.value_counts(dropna=False).le(b).all()

    prop()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(
    "how", ["python distinct", "python renamed", "sql count of distinct", "sql distinct subquery"]
)
def test_distinct_units_move_by_one(engine, how):
    @settings_for(engine)
    @given(
        users=users_strategy(FLOAT_KEYS),
        new=new_user_strategy(FLOAT_KEYS),
        null_unit_rows=st.integers(0, 3),
        seed=st.integers(0, 2**16),
    )
    def prop(users, new, null_unit_rows, seed):
        values, charged = [], []
        for data in neighbours(users, new):
            df = user_frame(data, False).astype({"pid": "float64"})
            nulls = pd.DataFrame({"pid": np.full(null_unit_rows, np.nan), "x": 1.0, "y": 0})
            df = pd.concat([df, nulls.astype({"y": "int64"})], ignore_index=True)
            budget = pq.Budget(1000)
            with pq.testing.engine(engine), pq.testing.no_noise(), pq.testing.seed(seed):
                if how.startswith("python"):
                    f = pq.PrivateFrame(df, budget, privacy_unit="pid")
                    f = f.select(u="pid", x="x").distinct("u") if "renamed" in how else f
                    f = f if "renamed" in how else f.distinct("pid")
                    values.append(int(f.count(1)))
                else:
                    s = pq.Session()
                    s.register("t", df, budget=budget, privacy_unit="pid")
                    q = (
                        "SELECT COUNT(DISTINCT pid) AS n FROM t"
                        if "count of distinct" in how
                        else "SELECT COUNT(*) AS n FROM (SELECT DISTINCT pid FROM t) d"
                    )
                    values.append(int(s.sql(q, epsilon=1)["n"].iloc[0]))
            charged.append(budget.spent.epsilon)
        assert charged[0] == charged[1] == 1  # stability 1: the whole epsilon, once
        assert abs(values[1] - values[0]) <= 1

    prop()
