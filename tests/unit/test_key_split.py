"""Key selection with the keys split in the engine (pinqpy.noise.keyselect, "Reading the
keys"; pinqpy.engines.sqlgen.keycounts): the release has the law of noising every key, the
driver's memory does not grow with the number of distinct keys, and every engine agrees.

Tolerances: a count of independent passes is Binomial(n, p) (p the exact pass probability of
the discrete Laplace); it is checked within 6 standard deviations (a miss has probability
below 1e-8), with fixed seeds. The overshoot ``Y - tau`` of a released count of a key far
below the threshold is geometric, ``P(j) = (1 - q)·q^j`` (memorylessness of the discrete
Laplace's tail), of mean ``q/(1 - q)`` and standard deviation ``√q/(1 - q)``.
"""

from __future__ import annotations

import math
import tracemalloc
from fractions import Fraction

import duckdb
import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.engines.base import split_in_memory
from pinqpy.noise.keyselect import KeySelectionMechanism

Q = math.exp(-1.0)  # the discrete Laplace of scale 1 (epsilon 1)


def _within(observed: float, mean: float, sd: float, k: float = 6.0) -> bool:
    return abs(observed - mean) <= k * sd


# -- the draws (no engine) --------------------------------------------------------------------
def test_light_draws_pass_as_often_as_the_threshold_says() -> None:
    m = KeySelectionMechanism(Fraction(1), Fraction(1, 10**4))
    classes = [(1, 300_000), (m.threshold - 3, 2_000)]
    with pq.testing.seed(11):
        picked = m.draw_light(classes)
    for c, n in classes:
        got = [p for p in picked if p[0] == c]
        p = m.pass_probability(c)
        assert _within(len(got), n * p, math.sqrt(n * p * (1 - p)))
        ranks = [r for _, r, _ in got]
        assert len(set(ranks)) == len(ranks) and all(1 <= r <= n for r in ranks)
        assert all(y >= m.threshold for _, _, y in got)
    far = [y - m.threshold for c, _, y in picked if c == 1]  # overshoot of count-1 keys
    mean, sd = Q / (1 - Q), math.sqrt(Q) / (1 - Q)
    assert _within(float(np.mean(far)), mean, sd / math.sqrt(len(far)))


def test_light_draws_cover_every_position_alike() -> None:
    # The i-th key of a count gets the i-th draw: positions pass uniformly (first half vs
    # second half of a class are two Binomial(n/2, p) counts).
    m = KeySelectionMechanism(Fraction(1), Fraction(1, 10**3))
    n = 400_000
    with pq.testing.seed(12):
        ranks = np.array([r for _, r, _ in m.draw_light([(2, n)])])
    p = m.pass_probability(2)
    sd = math.sqrt(n / 2 * p * (1 - p))
    assert _within(int((ranks <= n // 2).sum()), n / 2 * p, sd)
    assert _within(int((ranks > n // 2).sum()), n / 2 * p, sd)


def test_split_in_memory_maps_positions_to_the_keys_of_that_count() -> None:
    keys = ["a", "b", "c", "d", "e"]
    counts = np.array([3, 1, 9, 1, 3])
    seen: list[list[tuple[int, int]]] = []

    def draw(classes: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
        seen.append(classes)
        return [(1, 2, 40), (3, 1, 41)]  # the 2nd key of count 1, the 1st of count 3

    split = split_in_memory(keys, counts, 5, draw)
    assert seen == [[(1, 2), (3, 2)]]
    assert split.heavy_keys == ["c"] and split.heavy_counts.tolist() == [9]
    assert split.light_keys == ["d", "a"] and split.light_noisy.tolist() == [40, 41]


# -- engines ----------------------------------------------------------------------------------
def _ids(n: int, heavy: dict[str, int]) -> pd.DataFrame:
    keys = [f"user-{i:07d}" for i in range(n)]
    for k, rows in heavy.items():
        keys += [k] * rows
    return pd.DataFrame({"k": keys})


def _released_with_peak(f: pq.PrivateFrame, seed: int) -> tuple[pq.SelectedKeys, int]:
    tracemalloc.start()
    try:
        with pq.testing.seed(seed):
            keys = f.select_keys("k", epsilon=1, delta=1e-4)
        return keys, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _check_release(keys: pq.SelectedKeys, n: int, heavy: dict[str, int]) -> None:
    m = KeySelectionMechanism(Fraction(1), Fraction(1, 10**4))
    counts = keys.counts
    for k, rows in heavy.items():
        assert k in keys and abs(int(counts[k]) - rows) <= 30  # P(|X| > 30) < 1e-13
    light = [k for k in keys if k not in heavy]
    p = m.pass_probability(1)
    assert _within(len(light), n * p, math.sqrt(n * p * (1 - p)))
    over = np.array([int(counts[k]) - m.threshold for k in light])
    assert (over >= 0).all()
    mean, sd = Q / (1 - Q), math.sqrt(Q) / (1 - Q)
    assert _within(float(over.mean()), mean, sd / math.sqrt(len(over)))


@pytest.mark.parametrize(
    ("engine_name", "n"), [("duckdb", 1_000_000), ("spark", 200_000)], ids=["duckdb", "spark"]
)
def test_a_million_distinct_keys_keep_the_driver_flat(engine_name: str, n: int) -> None:
    # Every key is a distinct id (one row each) but five: reading them all into Python
    # takes over 100 MB at 10^6 keys; the split reads the heavy keys, the class sizes and
    # the picked ids, so the peak stays that of a chunk of draws, whatever n is.
    if engine_name == "spark":
        pytest.importorskip("pyspark")
    heavy = {f"popular-{j}": 400 + j for j in range(5)}
    with pq.testing.engine(engine_name):
        f = pq.PrivateFrame(_ids(n, heavy), pq.Budget(epsilon=10, delta=1e-2))
        keys, peak = _released_with_peak(f, seed=21)
    _check_release(keys, n, heavy)
    assert peak < 24_000_000, peak


def test_duckdb_reads_only_the_picked_light_keys() -> None:
    # The rows the engine hands to Python: heavy keys, one row per light count, picked keys.
    from pinqpy.engines.duckdb.executor import DuckDBExecutor

    fetched: list[int] = []
    real = DuckDBExecutor._fetch

    def counting(self: DuckDBExecutor, sql: str) -> list[tuple[object, ...]]:
        rows = real(self, sql)
        fetched.append(len(rows))
        return rows

    n = 300_000
    with pq.testing.engine("duckdb"):
        f = pq.PrivateFrame(_ids(n, {"popular": 500}), pq.Budget(epsilon=10, delta=1e-2))
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(DuckDBExecutor, "_fetch", counting)
            with pq.testing.seed(3):
                keys = f.select_keys("k", epsilon=1, delta=1e-4)
    m = KeySelectionMechanism(Fraction(1), Fraction(1, 10**4))
    assert sum(fetched) <= 1 + m.threshold + len(keys)  # never the 300,000 ids


def _mixed() -> pd.DataFrame:
    """Keys that read alike though stored apart (NaN and NULL, -0.0 and 0.0), in counts
    below the threshold each, and several columns."""
    x = [np.nan] * 30 + [None] * 30 + [-0.0] * 25 + [0.0] * 25 + [1.5] * 3 + [2.5] * 70
    y = ["a"] * 60 + ["b"] * 50 + ["a"] * 73
    t = pd.to_datetime(["2024-03-01"] * 100 + ["2024-03-02"] * 83)
    return pd.DataFrame({"x": pd.array(x, dtype="float64"), "y": y, "t": t})


@pytest.mark.parametrize("columns", [("x",), ("x", "y"), ("t",), ("y", "t")])
def test_engines_agree_on_keys_and_counts_without_noise(columns: tuple[str, ...]) -> None:
    got = {}
    for name in ("pandas", "duckdb", "spark"):
        with pq.testing.engine(name), pq.testing.no_noise():
            f = pq.PrivateFrame(_mixed(), pq.Budget(epsilon=10, delta=1e-2))
            keys = f.select_keys(list(columns), epsilon=1, delta=1e-6)
            got[name] = (list(keys), keys.counts.to_numpy().tolist())
    assert got["pandas"] == got["duckdb"] == got["spark"]
    assert sum(got["pandas"][1]) == len(_mixed())


@pytest.mark.parametrize("name", ["pandas", "duckdb", "spark"])
def test_keys_stored_apart_are_counted_as_one_before_the_threshold(name: str) -> None:
    # NaN (30) and NULL (30) are one key of 60 rows; -0.0 and 0.0 one of 50: both clear a
    # threshold of 15 as one key, though each stored group alone would be light.
    with pq.testing.engine(name):
        f = pq.PrivateFrame(_mixed(), pq.Budget(epsilon=10, delta=1e-2))
        with pq.testing.seed(4):
            keys = f.select_keys("x", epsilon=1, delta=1e-6)
    counts = dict(zip(list(keys), keys.counts.to_numpy().tolist(), strict=True))
    assert set(counts) >= {None, 0.0, 2.5}
    for k, rows in ((None, 60), (0.0, 50), (2.5, 70)):
        assert abs(counts[k] - rows) <= 30


def test_spark_text_that_reads_alike_is_one_key() -> None:
    # Three byte strings that are not valid UTF-8 read as the same text "a\ufffd" (and one
    # valid text holds U+FFFD itself): four groups of 40 rows in Spark, each below the
    # threshold, one key of 160 rows once read.
    from pinqpy.engines.spark.session import local_session

    spark = local_session()
    rows = ["61ff", "61fe", "61c0", "61efbfbd"]
    sdf = spark.sql(
        "SELECT CAST(unhex(h) AS STRING) AS k FROM VALUES "
        + ", ".join(f"('{h}')" for h in rows)
        + " AS v(h) LATERAL VIEW explode(sequence(1, 40)) e AS i"
    )
    f = pq.PrivateFrame(sdf, pq.Budget(epsilon=10, delta=1e-2))
    with pq.testing.seed(5):
        keys = f.select_keys("k", epsilon=1, delta=1e-6)
    assert list(keys) == ["a\ufffd"]
    assert abs(int(keys.counts.iloc[0]) - 160) <= 30


def test_the_charge_is_the_threshold_delta_alone() -> None:
    # The split adds no delta: the charge is the mechanism's, on every engine.
    con = duckdb.connect()
    con.register("t", _ids(1000, {"popular": 100}))
    b = pq.Budget(epsilon=10, delta=1e-6)
    f = pq.PrivateFrame(con.table("t"), b, connection=con)
    f.select_keys("k", epsilon=1, delta=1e-6)
    assert b.spent == pq.Cost(1, 1e-6)


@pytest.mark.parametrize("name", ["pandas", "duckdb"])
def test_a_neighbours_lone_key_passes_as_the_charged_delta_allows(name: str) -> None:
    # D' = D + one row of a new key: the event "x is released" tells D' from D. Read light
    # through the split, x passes with the exact pass probability of a one-row key, which
    # the threshold keeps at most delta (the charge's delta, nothing added); under D never.
    delta = Fraction(1, 32)
    m = KeySelectionMechanism(Fraction(1), delta)
    base = ["Oslo"] * 60 + [f"id{i}" for i in range(200)]
    runs = 400
    with pq.testing.engine(name), pq.testing.seed(8):
        for rows, lone in ((base, False), ([*base, "x"], True)):
            data = pd.DataFrame({"k": rows})
            seen = 0
            for _ in range(runs):  # a budget each (a budget's delta stays below 1)
                b = pq.Budget(epsilon=1, delta=1 / 32)
                seen += "x" in pq.PrivateFrame(data, b).select_keys("k", 1, 1 / 32)
                assert b.spent == pq.Cost(1, 1 / 32)  # the threshold's delta, nothing added
            if not lone:
                assert seen == 0
                continue
            p = m.pass_probability(1)
            assert p <= float(delta)
            assert _within(seen, runs * p, math.sqrt(runs * p * (1 - p)))
