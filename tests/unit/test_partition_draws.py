"""Partitions of a frame whose rows are chosen at random (``bound_contributions``,
``bound_groups``, ``bound_degree``, a join with ``max_rows_per_key``).

Every read through one partition draws that partition's fixed salts (``pinqpy.plan.salts``),
so the parts are pieces of one dataset across reads and the parent pays the largest part,
query after query, as PINQ's agents charge (issue 28, item 7). Checked on every engine:
the charges, that separate reads see one dataset, and on neighbouring data that for one
partition's salts the parts together move by at most the stability, whatever each read's
own random state. Reads outside a partition, and another partition, still draw afresh.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq

KEYS = list(range(5))


@pytest.fixture
def visits() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame({"user": rng.integers(0, 50, 400), "state": rng.choice(["CA", "NY"], 400)})


@pytest.fixture
def edges() -> pd.DataFrame:
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"src": rng.integers(0, 40, 240), "dst": rng.integers(0, 40, 240)})
    return df.assign(b=df.dst % 5)


def _frame(df: pd.DataFrame, budget: pq.Budget) -> pq.PrivateFrame:
    return pq.PrivateFrame(df, budget, privacy_unit="user", keys={"state": ["CA", "NY"]})


def _eps(x: float) -> float:
    return pq.Cost(epsilon=x).epsilon


# -- charges ---------------------------------------------------------------------------------
def test_parts_of_a_bounded_frame_asked_one_at_a_time_pay_the_largest(engine, visits):
    # Every read through the partition sees the same cut, so a user's 3 kept rows are in
    # CA or in NY for good: 3·max(0.25, 0.5), not 3·0.25 + 3·0.5.
    budget = pq.Budget(epsilon=100)
    parts = _frame(visits, budget).bound_contributions(3).partition("state")
    parts["CA"].count(epsilon=0.25)
    assert budget.spent.epsilon == _eps(0.75)
    parts["NY"].count(epsilon=0.5)
    assert budget.spent.epsilon == _eps(1.5)
    parts.count(epsilon=0.125)  # every part at once: 0.125 more on each
    assert budget.spent.epsilon == _eps(1.875)


def test_a_bounded_self_join_split_five_ways_costs_one_count_of_it(engine, edges):
    budget = pq.Budget(epsilon=100)
    g = pq.PrivateFrame(edges, budget)
    joined = g.join(g, on="src", max_rows_per_key=(3, 3))
    assert joined.stability == 12
    parts = joined.partition("b", keys=KEYS)
    for k in KEYS:
        parts[k].count(epsilon=0.1)
    assert budget.spent.epsilon == _eps(1.2)  # was 5·1.2 = 6.0
    one = pq.Budget(epsilon=100)
    g1 = pq.PrivateFrame(edges, one)
    g1.join(g1, on="src", max_rows_per_key=(3, 3)).count(epsilon=0.1)
    assert one.spent.epsilon == budget.spent.epsilon


def test_splits_of_a_concat_and_of_a_groupby_cost_as_before(engine, edges):
    for make in (
        lambda g: g.concat(g),
        lambda g: g.groupby("src", "b").agg(n="COUNT(*)"),
    ):
        budget = pq.Budget(epsilon=100)
        frame = make(pq.PrivateFrame(edges, budget))
        assert frame.stability == 2
        parts = frame.partition("b", keys=KEYS)
        for k in KEYS:
            parts[k].count(epsilon=0.1)
        assert budget.spent.epsilon == _eps(0.2)


def test_assortativity_in_five_by_five_nested_parts_costs_what_pinq_charges(engine, edges):
    # PINQ's assortativity example: each edge joined with the degrees of both its ends
    # (two bounded joins with the degree table), then 5 x 5 nested partitions by the two
    # degrees, NoisyCount(0.1) in each cell. PINQ charges 0.1 times the stability, 124.
    budget = pq.Budget(epsilon=10_000)
    g = pq.PrivateFrame(edges[["src", "dst"]], budget)
    deg = g.groupby("src").agg(d="COUNT(*)")
    by_src = deg.select(src="src", sd="LEAST(d, 5)")
    by_dst = deg.select(dst="src", dd="LEAST(d, 5)")
    cells = g.join(by_src, on="src", max_rows_per_key=(10, 10)).join(
        by_dst, on="dst", max_rows_per_key=(10, 10)
    )
    assert cells.stability == 1240
    outer = cells.partition("sd", keys=[1, 2, 3, 4, 5])
    for a in outer:
        inner = outer[a].partition("dd", keys=[1, 2, 3, 4, 5])
        for b in inner:
            inner[b].count(epsilon=0.1)
    assert budget.spent.epsilon == _eps(124)  # was 25·124 = 3,100


def test_a_group_bounded_split_accumulates_across_reads(engine, visits):
    budget = pq.Budget(epsilon=100)
    f = _frame(visits.assign(x=visits.index % 3), budget)
    b = f.bound_contributions(max_groups=1, max_rows_per_group=2, by="state")
    parts = b.partition("state")
    parts["CA"].count(epsilon=0.25)
    parts["NY"].count(epsilon=0.5)
    # One user in one part (G = 1), 2 rows: 2·max(0.25, 0.5).
    assert budget.spent.epsilon == _eps(1.0)


# -- one dataset across reads ----------------------------------------------------------------
def _random_frames(visits: pd.DataFrame) -> dict[str, pq.PrivateFrame]:
    f = _frame(visits.assign(x=visits.index % 7), pq.Budget(10**6))
    return {
        "bound_contributions": f.bound_contributions(3),
        "bound_groups": f.bound_contributions(max_groups=1, max_rows_per_group=3, by="state"),
        "bound_degree": pq.PrivateFrame(visits, pq.Budget(10**6)).bound_degree("user", 2),
        "join": f.bound_contributions(4).join(
            f.bound_contributions(2), on="user", max_rows_per_key=(2, 2)
        ),
    }


def test_separate_reads_through_one_partition_see_one_dataset(engine, visits):
    for name, frame in _random_frames(visits).items():
        with pq.testing.no_noise():
            whole = int(frame.count(epsilon=1))
            parts = frame.partition("state", keys=["CA", "NY"])
            with pq.testing.seed(1):
                ca = int(parts["CA"].count(epsilon=1))
            with pq.testing.seed(2):
                ny = int(parts["NY"].count(epsilon=1))
            with pq.testing.seed(3):
                again = int(parts["CA"].count(epsilon=1))
            with pq.testing.seed(4):
                both = parts.count(epsilon=1)
        assert again == ca, name
        assert [int(v) for v in both] == [ca, ny], name
        if name != "bound_groups":  # which group a user keeps changes the total, too
            assert ca + ny == whole, name


def test_nested_parts_are_pieces_of_their_part(engine, visits):
    f = _frame(visits.assign(x=visits.index % 2), pq.Budget(10**6))
    joined = f.bound_contributions(4).join(
        f.bound_contributions(2), on="user", max_rows_per_key=(2, 2)
    )
    with pq.testing.no_noise():
        outer = joined.partition("state", keys=["CA", "NY"])
        with pq.testing.seed(5):
            ca = int(outer["CA"].count(epsilon=1))
        inner = outer["CA"].partition("x", keys=[0, 1])
        cells = []
        for i, k in enumerate([0, 1]):
            with pq.testing.seed(10 + i):
                cells.append(int(inner[k].count(epsilon=1)))
        with pq.testing.seed(20):
            per_key = [int(v) for v in inner.count(epsilon=1)]
    assert sum(cells) == ca
    assert per_key == cells


def test_other_partitions_and_plain_reads_draw_afresh(engine, visits):
    f = _frame(visits, pq.Budget(10**6)).bound_contributions(3)
    with pq.testing.no_noise(), pq.testing.seed(7):
        # Each partition has salts of its own (five partitions, five cuts)...
        by_partition = {int(f.partition("state")["CA"].count(epsilon=1)) for _ in range(5)}
        # ... and a read outside any partition draws its own every time.
        plain = {int(f.where("state = 'CA'").count(epsilon=1)) for _ in range(5)}
    assert len(by_partition) > 1
    assert len(plain) > 1


# -- neighbours ------------------------------------------------------------------------------
def _part_counts(frame: pq.PrivateFrame, column: str, keys: list, seed: int) -> list[int]:
    """Each part's exact count, each in its own read under its own random state; the first
    read (which draws the partition's key) under ``seed`` on both neighbours."""
    parts = frame.partition(column, keys=keys)
    out = []
    with pq.testing.no_noise():
        for i, k in enumerate(keys):
            with pq.testing.seed(seed + 1000 * i):
                out.append(int(parts[k].count(epsilon=1)))
    return out


def _trials(engine: str, n: int) -> range:
    return range(n if engine != "spark" else 1)  # a Spark read is a job: one trial there


def test_one_more_person_moves_the_parts_together_by_at_most_the_stability(engine):
    for trial in _trials(engine, 6):
        rng = np.random.default_rng(trial)
        base = pd.DataFrame({"user": rng.integers(0, 30, 300), "b": rng.integers(0, 5, 300)})
        # A newcomer with rows in every part, 3 of which are kept.
        newcomer = pd.DataFrame({"user": [99] * 20, "b": [k % 5 for k in range(20)]})

        def counts(df: pd.DataFrame, trial: int = trial) -> list[int]:
            f = pq.PrivateFrame(df, pq.Budget(10**6), privacy_unit="user")
            f = f.bound_contributions(3)
            assert f.stability == 3
            return _part_counts(f, "b", KEYS, seed=trial)

        before, after = counts(base), counts(pd.concat([base, newcomer], ignore_index=True))
        # The newcomer's 3 kept rows, wherever they fall: 3 in all the parts together.
        assert np.abs(np.array(after) - np.array(before)).sum() <= 3, trial


def test_one_more_edge_moves_the_joined_parts_together_by_at_most_12(engine, edges):
    hub = int(edges.src.value_counts().index[0])  # a key with more edges than are kept
    for trial in _trials(engine, 4):
        rng = np.random.default_rng(trial)
        extra = pd.DataFrame({"src": [hub], "dst": [int(rng.integers(0, 40))]})
        extra = extra.assign(b=extra.dst % 5)

        def counts(df: pd.DataFrame, trial: int = trial) -> list[int]:
            g = pq.PrivateFrame(df, pq.Budget(10**6))
            joined = g.join(g, on="src", max_rows_per_key=(3, 3))
            return _part_counts(joined, "b", KEYS, trial)

        before, after = counts(edges), counts(pd.concat([edges, extra], ignore_index=True))
        assert np.abs(np.array(after) - np.array(before)).sum() <= 12, trial


# -- the keyed stream ------------------------------------------------------------------------
def test_a_keyed_stream_is_the_same_for_the_same_key_and_shows_nothing():
    from pinqpy.plan.salts import KeyedSource

    a, b, c = KeyedSource(b"k" * 32), KeyedSource(b"k" * 32), KeyedSource(b"j" * 32)
    first = a.bytes(24)
    assert first == b.bytes(24) and first != c.bytes(24)
    assert a.bytes(24) != first  # each call draws on
    assert a.uint64(3).dtype == np.uint64
    assert "k" not in repr(a)
