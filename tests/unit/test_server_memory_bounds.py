"""What a server keeps in memory per analyst is bounded, and dropping it stays sound: the
answers' LRU, the budgets' latest charges, the partition agents (by count, and by the keys
they list, their ancestors included), the SQL parse cache."""

from __future__ import annotations

import tomllib
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.core.lru import LRU
from pinqpy.pipeline import answers
from pinqpy.plan.serialize import plan_to_data
from pinqpy.remote.protocol import encode_args
from pinqpy.remote.server.config import ConfigError, Limits, parse_config
from pinqpy.remote.server.replay import PartitionRegistry, Replayer
from pinqpy.remote.server.replies import answer
from pinqpy.remote.server.state import HISTORY_KEPT, ServerState
from pinqpy.sql import parser

ROWS = pd.DataFrame({"k": [0, 1, 2, 3, 4, 5] * 2, "v": [1.0, 2, 3, 4, 5, 6] * 2})


# -- the LRU ---------------------------------------------------------------------------------
def test_an_lru_drops_the_least_recently_used_beyond_its_weight():
    cache = LRU(10, weight=lambda v: v)
    for key, w in [("a", 4), ("b", 4)]:
        cache[key] = w
    assert cache.get("a") == 4  # now "b" is the oldest
    cache["c"] = 3
    assert sorted(cache.keys()) == ["a", "c"] and cache.weight == 7
    cache["big"] = 25  # heavier than the whole capacity: kept alone, as the newest
    assert cache.keys() == ["big"] and cache.weight == 25
    cache["big"] = 1  # a rewrite replaces its weight
    assert cache.weight == 1
    with pytest.raises(ValueError):
        LRU(0)
    unbounded = LRU()
    for i in range(5000):
        unbounded[i] = i
    assert len(unbounded) == 5000


def test_an_answer_weighs_its_arrays_wherever_its_result_keeps_them():
    b = pq.Budget(1e6)
    f = pq.PrivateFrame(ROWS, b, bounds={"v": (0, 10)}, keys={"k": list(range(6))})
    f.count(epsilon=0.1)
    f.median("v", epsilon=0.1, candidates=np.linspace(0, 10, 20_000))
    big = pd.DataFrame({"k": np.arange(50_000), "v": 1.0})
    g = pq.PrivateFrame(big, b, keys={"k": list(range(50_000))})
    g.partition("k").count(epsilon=0.1)
    weights = [answers.weight(entry) for entry, _ in b._answers._entries.values()]
    # a count: 1; a median keeping a grid of 20,000 floats (160 KB): 21; a histogram of
    # 50,000 counts (400 KB of int64, and its accuracy's arrays): at least 51
    assert weights[0] == 1
    assert weights[1] == 1 + 20_000 * 8 // 8000
    assert weights[2] >= 1 + 50_000 * 8 // 8000


# -- a server's analyst ------------------------------------------------------------------------
CONFIG = """
[server]
ledger = "ledger.db"
tokens = "tokens.json"
[server.limits]
answers_in_memory = 5
partitions_in_memory = 3
partition_keys_in_memory = 100000
[tables.small]
source = "csv"
path = "{csv}"
keys = {{ k = [0, 1, 2, 3, 4, 5] }}
bounds = {{ v = [0, 10] }}
[analysts.alice]
tables = ["small", "other"]
budget = {{ epsilon = 1000, delta = 1e-6 }}
[tables.other]
source = "csv"
path = "{csv}"
"""


@pytest.fixture
def state(tmp_path):
    csv = tmp_path / "small.csv"
    ROWS.to_csv(csv, index=False)
    text = CONFIG.format(csv=csv)
    (tmp_path / "server.toml").write_text(text)
    s = ServerState(parse_config(tomllib.loads(text), tmp_path / "server.toml"))
    yield s
    s.close()


def ask(state: ServerState, i: int, partition: dict | None = None) -> object:
    stand_in = pq.PrivateFrame(ROWS.iloc[:0], pq.Budget(1), name="small")
    body = {
        "plan": plan_to_data(stand_in._plan),
        "partition": partition,
        "method": "count",
        "args": encode_args({"epsilon": Fraction(1, 100) + Fraction(i, 10**6)}),
    }
    reply = answer(state, state.analysts["alice"], "aggregate", body, True)
    assert reply.status == 200, reply.error
    return reply.body


def test_an_analyst_keeps_a_bounded_number_of_answers_and_charges(state):
    alice = state.analysts["alice"]
    small, other = alice.budgets["small"], alice.budgets["other"]
    assert small._answers is other._answers  # one cache for all of the analyst's budgets
    for i in range(HISTORY_KEPT + 20):
        ask(state, i)
    assert len(small._answers) == 5
    assert len(small.charges) == HISTORY_KEPT
    assert len(state.ledgers["alice"].charges()) == HISTORY_KEPT + 20  # the ledger has all
    # an answer dropped from memory comes back from the ledger, the same and free
    spent = small.spent
    first = ask(state, 0)
    assert small.spent == spent
    assert first == ask(state, 0)


def test_an_analyst_keeps_a_bounded_number_of_partition_agents(state):
    alice = state.analysts["alice"]
    for i in range(10):
        ask(state, 1000 + i, {"columns": ["k"], "id": f"split-{i}"})
    assert len(alice.registry) == 3
    assert alice.registry.weight == 3 * 6


def test_dropping_a_partitions_agent_charges_its_next_part_afresh():
    budget = pq.Budget(10)
    frame = pq.PrivateFrame(ROWS, budget, name="t", keys={"k": list(range(6))})
    stand_in = pq.PrivateFrame(ROWS.iloc[:0], pq.Budget(1), name="t", keys={"k": list(range(6))})
    registry = PartitionRegistry(capacity=1)
    tables = {"t": frame._rel}

    def part_count(parts: object, key: int, eps: float) -> None:
        plan = plan_to_data(parts[key]._plan)  # type: ignore[index]
        rel = Replayer(tables, registry, Limits()).relation(plan)
        pq.PrivateFrame._wrap(rel).count(epsilon=eps)

    first = stand_in.partition("k")
    part_count(first, 0, 0.5)
    part_count(first, 1, 0.5)  # the same partition, another part: the largest part is paid
    assert budget.spent.epsilon == Fraction(1, 2)
    # another partition takes the only place; the first one's next part is charged anew
    part_count(stand_in.partition("k", keys=[0, 1]), 0, 0.25)
    part_count(first, 2, 0.5)
    assert budget.spent.epsilon == Fraction(1, 2) + Fraction(1, 4) + Fraction(1, 2)


def test_a_partition_weighs_its_keys_and_its_ancestors():
    budget = pq.Budget(10)
    frame = pq.PrivateFrame(ROWS, budget, name="t", keys={"k": list(range(6))})
    stand_in = pq.PrivateFrame(ROWS.iloc[:0], pq.Budget(1), name="t", keys={"k": list(range(6))})
    registry = PartitionRegistry(capacity=100, keys=20)
    outer = stand_in.partition("k")
    inner = outer[0].partition("k", keys=[0, 1])
    Replayer({"t": frame._rel}, registry, Limits()).relation(plan_to_data(inner[0]._plan))
    # the outer partition (6 keys) and the inner one (2 keys, and its ancestor's 6)
    assert len(registry) == 2 and registry.weight == 6 + (2 + 6)
    for _ in range(3):  # three more partitions of 6 keys: beyond 20 keys, the oldest go
        again = stand_in.partition("k")
        Replayer({"t": frame._rel}, registry, Limits()).relation(plan_to_data(again[0]._plan))
        assert registry.weight <= 20
    assert len(registry) == 3


def test_the_bounds_are_read_from_the_config_and_checked(tmp_path):
    csv = tmp_path / "t.csv"
    ROWS.to_csv(csv, index=False)
    table = (
        f'[tables.t]\nsource = "csv"\npath = "{csv}"\n'
        '[analysts.a]\ntables = ["t"]\nbudget = { epsilon = 1 }\n'
    )

    def limits(text: str) -> Limits:
        config = tomllib.loads(f"[server.limits]\n{text}\n" + table)
        return parse_config(config, tmp_path / "c").limits

    cfg = limits("answers_in_memory = 7\npartitions_in_memory = 2")
    assert (cfg.answers_in_memory, cfg.partitions_in_memory) == (7, 2)
    assert Limits().partition_keys_in_memory == Limits().max_keys
    with pytest.raises(ConfigError, match="partition_keys_in_memory: must be at least max_keys"):
        limits("partition_keys_in_memory = 10")
    with pytest.raises(ConfigError, match="answers_in_memory: must be at least 1"):
        limits("answers_in_memory = 0")


# -- the SQL parse cache -------------------------------------------------------------------------
def test_the_sql_parse_cache_holds_a_bounded_length_of_text():
    parser._PARSED.clear()
    listed = ", ".join(str(i) for i in range(3500))  # about 17,000 characters
    for i in range(40):
        parser.parse_statement(f"SELECT COUNT(*) FROM t WHERE age IN ({listed}, {-i})")
    held = sum(len(text) for text, _ in parser._PARSED.keys())  # noqa: SIM118
    assert held <= parser._PARSED_CHARS
    assert len(parser._PARSED) < 40
    short = "SELECT COUNT(*) FROM t"
    assert parser.parse_statement(short) is parser.parse_statement(short)  # still a cache
