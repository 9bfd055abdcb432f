"""Method chaining against a real server process: the same answers and the same charges as the
local API over the same files with the same public facts.

The server runs with ``--testing no-noise`` and the local side under
``pq.testing.no_noise()``, so every answer is exact on both sides and must be equal; each
table has a budget of the same size on both sides, and after every step each budget must
have spent exactly as much remotely as locally.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, PUMS_PATH
from pinqpy.remote.client.budget import cost_from_data
from pinqpy.remote.client.frame import RemoteFrame, RemotePartition
from pinqpy.remote.client.session import RemoteSession
from pinqpy.results.accuracy import AccuracyPreview
from pinqpy.results.keys import SelectedKeys
from tests.remote.harness import start_server

EPSILON, DELTA = 1000, 1e-3
DIMS = 4

# table -> (file, public facts); the server's config and the local frames are made from this.
TABLES: dict[str, dict[str, Any]] = {
    "pums": {"bounds": PUMS_BOUNDS, "keys": PUMS_KEYS},
    "edges": {},
    "points": {"bounds": {f"x{i}": (-10.0, 10.0) for i in range(DIMS)}},
    "visits": {
        "bounds": {"minutes": (0, 300), "day": (1, 7)},
        "keys": {"day": list(range(1, 8))},
        "privacy_unit": "pid",
        "max_rows": 3,
    },
    "visits_all": {"bounds": {"minutes": (0, 300), "day": (1, 7)}, "privacy_unit": "pid"},
}


def _write_data(directory: Path) -> dict[str, Path]:
    rng = np.random.default_rng(2009)
    edges = pd.DataFrame({"src": rng.integers(0, 300, 3000), "dst": rng.integers(0, 300, 3000)})
    true_means = np.array([[4.0] * DIMS, [-4.0] * DIMS, [4.0] * (DIMS // 2) + [-4.0] * (DIMS // 2)])
    pts = np.vstack([rng.normal(m, 1.0, size=(1000, DIMS)) for m in true_means])
    points = pd.DataFrame(pts.round(6), columns=[f"x{i}" for i in range(DIMS)])
    visits = pd.DataFrame(
        [
            {"pid": pid, "day": 1 + (pid + j) % 7, "minutes": (pid * 7 + j * 13) % 301}
            for pid in range(1, 401)
            for j in range(1 + pid % 4)
        ]
    )
    paths = {"pums": Path(PUMS_PATH)}
    for name, df in (("edges", edges), ("points", points), ("visits", visits)):
        paths[name] = directory / f"{name}.csv"
        df.to_csv(paths[name], index=False)
    paths["visits_all"] = paths["visits"]
    return paths


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def config_text(
    paths: dict[str, Path],
    tables: dict[str, dict[str, Any]] = TABLES,
    epsilon: float = EPSILON,
) -> str:
    """A server config: each of ``tables`` a CSV file of ``paths`` with its public facts, all
    granted to analyst alice with a budget of ``epsilon`` (and ``DELTA``) each."""
    lines = ["[server]", 'host = "127.0.0.1"', ""]
    for name, facts in tables.items():
        lines += [f"[tables.{name}]", 'source = "csv"', f"path = {_toml(str(paths[name]))}"]
        lines += [f"{key} = {_toml(value)}" for key, value in facts.items()]
        lines.append("")
    lines += [
        "[analysts.alice]",
        f"tables = {_toml(list(tables))}",
        f"budget = {{ epsilon = {epsilon}, delta = {DELTA} }}",
    ]
    return "\n".join(lines) + "\n"


SEED = 11


@dataclass
class Pair:
    """The same tables locally and remotely, and each side's budget per table.

    ``testing`` is how both sides run: ``"no-noise"`` (exact answers) or ``"seed=N"`` (the
    server reseeds its random source for every request, so a query of one request draws the
    same noise and the same random row choices as the same query run locally under
    ``pq.testing.seed(N)``)."""

    remote: RemoteSession
    local: dict[str, pq.PrivateFrame]
    budgets: dict[str, pq.Budget]
    testing: str

    def both(self, name: str) -> tuple[pq.PrivateFrame, RemoteFrame]:
        return self.local[name], self.remote.table(name)

    def hooks(self) -> Any:
        if self.testing == "no-noise":
            return pq.testing.no_noise()
        return pq.testing.seed(int(self.testing.split("=")[1]))

    def check_charges(self) -> None:
        docs = self.remote._transport.document("/budget")["budgets"]
        spent = {doc["tables"][0]: cost_from_data(doc["spent"], "spent") for doc in docs}
        for name, budget in self.budgets.items():
            assert spent[name] == budget.spent, name

    def compare(self, local: Callable[[], Any], remote: Callable[[], Any]) -> Any:
        """The same answer (or the same error) and the same charges."""
        local_err = remote_err = None
        with self.hooks():
            try:
                want = local()
            except pq.PinqError as err:
                local_err = err
        try:
            got = remote()
        except pq.PinqError as err:
            remote_err = err
        if local_err is not None or remote_err is not None:
            assert type(remote_err) is type(local_err), (local_err, remote_err)
            assert str(remote_err) == str(local_err)
            self.check_charges()
            return remote_err
        assert_same(want, got)
        self.check_charges()
        return got

    def same(self, name: str, query: Callable[[pq.PrivateFrame], Any]) -> Any:
        """``query`` of the local and of the remote table ``name`` (see :meth:`compare`)."""
        local_frame, remote_frame = self.both(name)
        return self.compare(lambda: query(local_frame), lambda: query(remote_frame))


def _pair(directory: Path, testing: str) -> Iterator[Pair]:
    paths = _write_data(directory)
    server = start_server(directory, config_text(paths), testing=testing)
    local, budgets = {}, {}
    for name, facts in TABLES.items():
        budgets[name] = pq.Budget(EPSILON, DELTA)
        frame = pq.PrivateFrame.from_csv(
            paths[name],
            budgets[name],
            name=name,
            **{k: v for k, v in facts.items() if k != "max_rows"},
        )
        if "max_rows" in facts:
            frame = frame.bound_contributions(facts["max_rows"])
        local[name] = frame
    with pq.connect(server.url, token=server.tokens["alice"]) as session:
        yield Pair(session, local, budgets, testing)
    server.stop()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    yield from _pair(tmp_path_factory.mktemp("remote_api"), "no-noise")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    """For queries whose transformations choose rows at random (a join's per-key bound,
    bound_contributions): the same seed on both sides makes the same choice."""
    yield from _pair(tmp_path_factory.mktemp("remote_api_seeded"), f"seed={SEED}")


# -- comparing results -------------------------------------------------------------------------
def _same_number(a: Any, b: Any) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return bool(a == b)


def assert_same(want: Any, got: Any) -> None:
    """Equal values of the same type, with the same intervals where they have them."""
    assert type(got) is type(want), (type(want), type(got))
    if isinstance(want, pd.DataFrame):
        pd.testing.assert_frame_equal(pd.DataFrame(got), pd.DataFrame(want))
        if isinstance(want, pq.NoisyFrame):
            assert set(got.accuracy) == set(want.accuracy)
            for column in want.accuracy:
                pair = _both_ci(got, want, column)
                if pair is not None:
                    pd.testing.assert_frame_equal(*pair)
    elif isinstance(want, pd.Series):
        pd.testing.assert_series_equal(pd.Series(got), pd.Series(want))
        if isinstance(want, pq.NoisySeries):
            pair = _both_ci(got, want, 0.9)
            if pair is not None:
                pd.testing.assert_frame_equal(*pair)
    elif isinstance(want, AccuracyPreview):
        for field in ("aggregation", "mechanism", "epsilon", "level", "error", "unit"):
            assert getattr(got, field) == getattr(want, field), field
        assert list(got.charge.values()) == list(want.charge.values())
    elif isinstance(want, SelectedKeys):  # the keys, and the noisy counts released with them
        assert list(got) == list(want)
        assert_same(want.counts, got.counts)
    elif hasattr(want, "ci"):
        assert _same_number(want, got)
        for args in ((), (0.5,)):
            pair = _both_ci(got, want, *args)
            assert pair is None or pair[0] == pair[1]
    else:
        assert want == got


def _both_ci(got: Any, want: Any, *args: Any) -> tuple[Any, Any] | None:
    """Both intervals; None when the local answer has none (a quantile released without
    one), after checking that the remote one refuses the same way."""
    try:
        local = want.ci(*args)
    except pq.PinqError as err:
        with pytest.raises(pq.PinqError) as remote:
            got.ci(*args)
        assert str(remote.value) == str(err)
        return None
    return got.ci(*args), local


# -- PINQ's classic programs ---------------------------------------------------------------
def test_degree_histogram(pair: Pair) -> None:
    def histogram(graph: pq.PrivateFrame) -> Any:
        degrees = graph.groupby("src").agg(degree="COUNT(*)")
        assert degrees.stability == 2
        return degrees.partition("degree", keys=list(range(20))).count(epsilon=0.1)

    hist = pair.same("edges", histogram)
    assert list(hist.index) == list(range(20))
    assert pair.budgets["edges"].spent.epsilon == Fraction(1, 5)


def _nearest_centre_expr(centres: np.ndarray) -> str:
    dist = [
        " + ".join(f"POWER(x{i} - ({float(c[i])!r}), 2)" for i in range(centres.shape[1]))
        for c in centres
    ]
    d0, d1, d2 = (f"({d})" for d in dist)
    return f"CASE WHEN {d0} <= {d1} AND {d0} <= {d2} THEN 0 WHEN {d1} <= {d2} THEN 1 ELSE 2 END"


def test_kmeans(pair: Pair) -> None:
    rng = np.random.default_rng(7)
    start = rng.normal(0, 4, size=(3, DIMS))

    def kmeans(points: pq.PrivateFrame) -> np.ndarray:
        centres = start
        for _ in range(3):
            labelled = points.assign(cluster=_nearest_centre_expr(centres))
            parts = labelled.partition("cluster", keys=[0, 1, 2])
            centres = np.column_stack(
                [parts.mean(f"x{i}", epsilon=0.1).to_numpy() for i in range(DIMS)]
            )
        return centres

    with pq.testing.no_noise():
        want = kmeans(pair.local["points"])
    got = kmeans(pair.remote.table("points"))
    np.testing.assert_array_equal(got, want)
    pair.check_charges()
    assert pair.budgets["points"].spent.epsilon == Fraction(3 * DIMS, 10)


# -- every transformation ----------------------------------------------------------------------
NAMES = pd.DataFrame(
    {"educ": list(range(1, 17)), "level": ["low"] * 9 + ["mid"] * 3 + ["high"] * 4}
)
DOUBLE = pd.DataFrame({"sex": [0, 0, 1], "tag": ["a", "b", "c"]})  # key 0 twice: stability 2

TRANSFORMATIONS: dict[str, Callable[[pq.PrivateFrame], pq.PrivateFrame]] = {
    "where": lambda f: f.where("age >= 30 AND income > 10000"),
    "where_expression": lambda f: f.where((pq.col("age") > 40) & (pq.col("sex") == 1)),
    "filter": lambda f: f.filter("married = 1"),
    "select": lambda f: f.select("age", "sex", decade="FLOOR(age / 10)"),
    "assign": lambda f: f.assign(k=pq.col("income") / 1000, old="age > 60"),
    "distinct": lambda f: f.distinct("educ", "sex"),
    "distinct_all": lambda f: f.select("sex", "married").distinct(),
    "groupby": lambda f: f.groupby("educ").agg(n="COUNT(*)", mean_age="AVG(age)"),
    "groupby_two": lambda f: f.groupby(["sex", "race"]).agg(top="MAX(income)"),
    "join_public": lambda f: f.join(NAMES, on="educ"),
    "join_public_left": lambda f: f.join(NAMES[NAMES.educ > 8], on="educ", how="left"),
    "join_public_twice": lambda f: f.join(DOUBLE, on="sex"),
    "join_private": lambda f: f.join(
        f.where("age > 50").select("educ", "race"), on="educ", max_rows_per_key=(2, 3)
    ),
    "join_unique": lambda f: (
        f.groupby("educ").agg(n="COUNT(*)").join(f.groupby("educ").agg(m="AVG(income)"), on="educ")
    ),
    "concat": lambda f: f.where("age < 30").concat(f.where("age > 60")),
    "union": lambda f: f.select("sex", "race").union(f.select("sex", "race")),
    "intersect": lambda f: f.select("educ").intersect(f.where("sex = 1").select("educ")),
    "difference": lambda f: f.select("educ").difference(f.where("age > 50").select("educ")),
    "explode": lambda f: f.explode("educ", 2),
    "part": lambda f: f.partition("married")[1],
    "part_of_part": lambda f: f.partition("race", keys=[1, 2])[1].partition("sex")[0],
    "chain": lambda f: (
        f.where("age > 20").assign(inc="income / 1000").groupby("race").agg(s="SUM(inc)")
    ),
}


# Transformations that choose rows at random: compared with the seeded server.
RANDOM_ROWS = {"join_private"}


@pytest.mark.parametrize("name", list(TRANSFORMATIONS))
def test_every_transformation(pair: Pair, seeded: Pair, name: str) -> None:
    side = seeded if name in RANDOM_ROWS else pair
    transform = TRANSFORMATIONS[name]
    local_frame, remote_frame = side.both("pums")
    try:
        local_t = transform(local_frame)
    except pq.PinqError as err:
        with pytest.raises(type(err)) as info:
            transform(remote_frame)
        assert str(info.value) == str(err)
        return
    remote_t = transform(remote_frame)
    assert isinstance(remote_t, RemoteFrame) and remote_t.engine == "remote"
    assert remote_t.schema == local_t.schema
    assert remote_t.bounds == local_t.bounds
    assert remote_t.keys == local_t.keys
    assert list(remote_t.stabilities.values()) == list(local_t.stabilities.values())
    side.compare(lambda: local_t.count(epsilon=0.25), lambda: remote_t.count(epsilon=0.25))
    numeric = [c for c, t in local_t.schema.items() if t in ("int", "float")]
    if numeric:
        col = numeric[0]
        side.compare(
            lambda: local_t.sum(col, epsilon=0.25, bounds=(0, 100)),
            lambda: remote_t.sum(col, epsilon=0.25, bounds=(0, 100)),
        )


# -- every aggregation -------------------------------------------------------------------------
AGGREGATIONS: dict[str, Callable[[pq.PrivateFrame], Any]] = {
    "count": lambda f: f.count(epsilon=0.5),
    "count_gaussian": lambda f: f.count(epsilon=0.5, delta=1e-7),
    "sum": lambda f: f.sum("income", 0.5),
    "sum_bounds": lambda f: f.sum(pq.col("age") * 2, epsilon=0.5, bounds=(0, 200)),
    "sum_gaussian": lambda f: f.sum("age", 0.5, delta=1e-7),
    "mean": lambda f: f.mean("age", epsilon=0.5),
    "mean_expression": lambda f: f.mean("income / 1000", 0.5, (0, 500)),
    "median": lambda f: f.median("age", 0.5),
    "median_candidates": lambda f: f.median("age", 0.5, candidates=range(0, 101, 5)),
    "median_ci": lambda f: f.median("age", 0.5, ci=True),
    "quantile_candidates_no_bounds": lambda f: f.quantile("sex", 0.5, 0.5, candidates=[0, 1]),
    "quantile": lambda f: f.quantile("income", 0.9, epsilon=0.5),
    "variance": lambda f: f.variance("age", epsilon=0.5),
    "std_pop": lambda f: f.std("age", 0.5, ddof=0),
    "argmax": lambda f: f.argmax("educ", candidates=range(1, 17), epsilon=0.5),
    "argmax_text": lambda f: f.assign(s="CASE WHEN sex = 1 THEN 'm' ELSE 'f' END").argmax(
        "s", ["f", "m", "x"], 0.5
    ),
    "select_keys": lambda f: f.select_keys("educ", epsilon=1, delta=1e-6),
    "select_keys_two": lambda f: f.select_keys(["sex", "married"], 1, 1e-6),
    "histogram": lambda f: f.histogram("educ", epsilon=1, delta=1e-6),
    "histogram_two": lambda f: f.histogram(["sex", "married"], 1, delta=1e-6),
    "histogram_keys": lambda f: f.histogram("educ", 0.5, keys=[1, 9, 13, 99]),
    "histogram_declared": lambda f: f.histogram("race", 0.5),
    "accuracy_count": lambda f: f.accuracy("count", epsilon=0.1),
    "accuracy_mean": lambda f: f.accuracy("mean", "age", epsilon=0.1, n=1000, level=0.9),
    "accuracy_quantile": lambda f: f.accuracy("quantile", "age", epsilon=0.1, q=0.25),
    "parts_count": lambda f: f.partition("race").count(epsilon=0.5),
    "parts_count_keys": lambda f: f.partition("educ", keys=[1, 9, 13, 99]).count(0.5),
    "parts_two_columns": lambda f: f.partition(["sex", "married"]).count(0.5),
    "parts_sum": lambda f: f.partition("sex").sum("income", 0.5),
    "parts_mean": lambda f: f.partition("married").mean("age", 0.5, bounds=(18, 90)),
    "parts_median": lambda f: f.partition("educ").median("age", 0.5),
    "parts_median_ci": lambda f: f.partition("educ").median("age", 0.5, ci=True),
    "parts_quantile": lambda f: f.partition(["married", "sex"]).quantile("income", 0.75, 0.5),
    "parts_argmax": lambda f: f.partition("race", [1, 2, 3]).argmax("sex", [0, 1], 0.5),
    "parts_std": lambda f: f.partition("sex").std("age", 0.5),
    "part_mean": lambda f: f.partition("sex", keys=[1])[1].mean("income", 0.5),
}


@pytest.mark.parametrize("name", list(AGGREGATIONS))
def test_every_aggregation(pair: Pair, name: str) -> None:
    got = pair.same("pums", AGGREGATIONS[name])
    assert not isinstance(got, pq.PinqError), got


# With the same seed, the same noise too (one of each mechanism).
SEEDED = ["count", "count_gaussian", "sum", "mean", "median", "argmax", "select_keys"]
SEEDED += ["select_keys_two", "histogram", "histogram_keys"]
SEEDED += ["parts_count", "parts_mean", "parts_argmax", "part_mean", "variance", "parts_std"]


@pytest.mark.parametrize("name", SEEDED)
def test_the_same_noise_with_the_same_seed(seeded: Pair, name: str) -> None:
    got = seeded.same("pums", AGGREGATIONS[name])
    assert not isinstance(got, pq.PinqError), got


def test_remote_results_have_intervals(pair: Pair) -> None:
    pums = pair.remote.table("pums")
    n = pums.count(epsilon=0.5)
    assert isinstance(n, pq.NoisyCount)
    low, high = n.ci()
    assert low <= n <= high
    by_sex = pums.where("age > 20").partition("sex").mean("age", 0.5)
    assert isinstance(by_sex, pq.NoisySeries)
    assert list(by_sex.ci().columns) == ["low", "high"]
    top = pums.argmax("educ", range(1, 17), 0.5)
    assert isinstance(top, pq.NoisyLabel) and len(top.ci()) == 2
    pair.local["pums"].budgets[0]._charge_exact(pq.Cost(1.5))  # the same charges locally
    pair.check_charges()


# -- partitions charge the largest part ------------------------------------------------------
def test_parts_charge_the_max_as_locally(pair: Pair) -> None:
    def parts_in_turn(f: pq.PrivateFrame) -> list[Any]:
        parts = f.where("income >= 0").partition("race")
        out = [parts[1].count(epsilon=0.3), parts[2].count(epsilon=0.5)]
        out.append(parts[1].mean("age", epsilon=0.2))  # part 1 at 0.5: the max stays 0.5
        out.append(parts.count(epsilon=0.1))  # every part grows by 0.1
        return out

    before = pair.budgets["pums"].spent.epsilon
    local_frame, remote_frame = pair.both("pums")
    with pq.testing.no_noise():
        want = parts_in_turn(local_frame)
    got = parts_in_turn(remote_frame)
    for w, g in zip(want, got, strict=True):
        assert_same(w, g)
    pair.check_charges()
    assert pair.budgets["pums"].spent.epsilon - before == Fraction(6, 10)


def test_two_partition_calls_are_two_partitions_as_locally(pair: Pair) -> None:
    def twice(f: pq.PrivateFrame) -> list[Any]:
        first = f.where("age > 64").partition("sex")
        second = f.where("age > 64").partition("sex")
        return [first[0].count(epsilon=0.25), second[1].count(epsilon=0.25)]

    budget = pq.Budget(EPSILON, DELTA)  # a local side of its own (see below)
    local_frame = pq.PrivateFrame.from_csv(PUMS_PATH, budget, name="pums", **TABLES["pums"])
    with pq.testing.no_noise():
        twice(local_frame)
    before = pair.remote.budgets["pums"].spent
    try:
        twice(pair.remote.table("pums"))
    finally:
        # The pair's local budget is charged what the server charged, so the later tests
        # still compare equal totals.
        charged = pair.remote.budgets["pums"].spent.epsilon - before.epsilon
        pair.budgets["pums"]._charge_exact(pq.Cost(charged))
    assert charged == budget.spent.epsilon == Fraction(1, 2)


def test_a_remote_partition_is_a_partition_of_remote_frames(pair: Pair) -> None:
    parts = pair.remote.table("pums").partition("sex")
    assert isinstance(parts, RemotePartition) and isinstance(parts, pq.Partition)
    assert list(parts) == [0, 1] and len(parts) == 2 and parts.columns == ("sex",)
    assert isinstance(parts[0], RemoteFrame)
    with pytest.raises(KeyError):
        parts[7]


# -- user-level tables -------------------------------------------------------------------------
USER_LEVEL: dict[str, Callable[[pq.PrivateFrame], Any]] = {
    "unbounded_count": lambda f: f.count(epsilon=0.5),
    "bounded_count": lambda f: f.bound_contributions(3).count(epsilon=0.5),
    "bounded_mean": lambda f: f.bound_contributions(2).mean("minutes", 0.5),
    "by_person": lambda f: f.groupby("pid").agg(total="SUM(minutes)").mean("total", 0.5, (0, 900)),
    "bounded_parts": lambda f: f.bound_contributions(1).partition("day", range(1, 8)).count(0.5),
    "select_keys_needs_groups": lambda f: f.select_keys("day", 1, 1e-6),
    "select_keys_groups": lambda f: f.select_keys("day", 1, 1e-6, max_groups=2),
    "histogram_groups": lambda f: f.histogram("day", 1, delta=1e-6, max_groups=2),
    "histogram_needs_delta": lambda f: f.histogram("day", 1, max_groups=2),
    "partition_unbounded": lambda f: f.partition("day", range(1, 8)).count(0.5),
    "bound_twice": lambda f: f.bound_contributions(3).bound_contributions(1).count(0.5),
}


@pytest.mark.parametrize("name", list(USER_LEVEL))
def test_user_level_table(seeded: Pair, name: str) -> None:
    seeded.same("visits_all", USER_LEVEL[name])


def test_configured_max_rows_is_the_table_the_analyst_starts_from(pair: Pair) -> None:
    local_frame, remote_frame = pair.both("visits")
    assert remote_frame.stability == local_frame.stability == 3
    assert remote_frame.privacy_unit == local_frame.privacy_unit == "pid"
    pair.same("visits", lambda f: f.count(0.5))  # min(rows, 3) per person, whichever are kept
    pair.same("visits", lambda f: f.groupby("pid").agg(n="COUNT(*)").sum("n", 0.5, (0, 3)))


def test_configured_max_rows_keeps_the_rows_kept_locally(seeded: Pair) -> None:
    """The server bounds the table once, as the local frame is: the same random rows."""
    seeded.same("visits", lambda f: f.partition("day").sum("minutes", 0.5))


# -- errors ----------------------------------------------------------------------------------
ERRORS: dict[str, Callable[[pq.PrivateFrame], Any]] = {
    "unknown_column": lambda f: f.mean("agee", 0.1),
    "bad_epsilon": lambda f: f.count(epsilon=-1),
    "no_bounds": lambda f: f.sum("educ", 0.1),
    "bad_quantile": lambda f: f.quantile("age", 1.5, 0.1),
    "reversed_bounds": lambda f: f.median("age", 0.1, bounds=(5, 1)),
    "too_much": lambda f: f.count(epsilon=10**6),
    "too_much_for_parts": lambda f: f.partition("race").count(epsilon=10**6),
    "no_candidates": lambda f: f.argmax("educ", [], 0.1),
    "accuracy_unknown": lambda f: f.accuracy("mode", "age", epsilon=0.1),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_the_local_ones(pair: Pair, name: str) -> None:
    err = pair.same("pums", ERRORS[name])
    assert isinstance(err, pq.PinqError)


def test_transformation_errors_are_raised_on_the_client(pair: Pair) -> None:
    pums = pair.remote.table("pums")
    for call in (
        lambda: pums.where("agee > 3"),
        lambda: pums.where("age + 1"),
        lambda: pums.partition("income"),
        lambda: pums.join(pums, on="educ"),
        lambda: pums.bound_contributions(2),
    ):
        with pytest.raises(pq.PinqError):
            call()


# -- the session's budgets ---------------------------------------------------------------------
def test_budgets_and_their_audit_trail(pair: Pair) -> None:
    s = pair.remote
    assert s.tables == list(TABLES) and s.analyst == "alice"
    with pytest.raises(pq.PinqError, match=r"5 budgets .* session.budgets\[table\]"):
        s.budget  # noqa: B018
    budgets = s.budgets
    assert list(budgets) == list(TABLES)
    assert len({id(b) for b in budgets.values()}) == len(TABLES)
    edges = budgets["edges"]
    assert edges.name == "analyst:alice/edges" and edges.tables == ["edges"]
    assert edges.total == pq.Cost(EPSILON, DELTA) and edges.accounting == "approx"
    assert edges.remaining == pq.Cost(EPSILON, DELTA) - edges.spent
    assert repr(edges).startswith("RemoteBudget('analyst:alice/edges', epsilon=1000, delta=")
    before = len(edges.audit())
    pair.same("edges", lambda f: f.where("src < dst").count(epsilon=0.125))
    trail = edges.audit()
    assert len(trail) == before + 1
    assert set(trail["budget"]) == {"analyst:alice/edges"}
    assert trail["epsilon_exact"].iloc[-1] == "1/8"
    everything = s.audit()  # every budget's charges: at least this one's
    assert len(everything) >= len(trail)
    assert set(everything["budget"]) <= {budget.name for budget in budgets.values()}


def test_summarize_and_accuracy_curve_work_on_remote_frames(pair: Pair) -> None:
    """Built on accuracy(), which the server answers: the same table as locally, nothing
    charged on either side."""
    import matplotlib

    matplotlib.use("Agg")
    plans = ("count", ("mean", "age"), ("median", "age"), ("sum", "income"))
    local, remote = pair.both("pums")
    before = {name: b.spent for name, b in pair.budgets.items()}
    pair.same("pums", lambda f: f.summarize(*plans, epsilon=0.5, n=800))
    pair.same("pums", lambda f: f.partition("sex").summarize(*plans, epsilon=0.5, n=400))
    ax = remote.accuracy_curve("mean", "age", epsilons=[0.1, 1], n=800)
    want = local.accuracy_curve("mean", "age", epsilons=[0.1, 1], n=800)
    for got_line, want_line in zip(ax.get_lines(), want.get_lines(), strict=True):
        assert list(got_line.get_ydata()) == list(want_line.get_ydata())
    pair.check_charges()
    assert {name: b.spent for name, b in pair.budgets.items()} == before
