"""The shared aggregations (pinqpy.api.aggregations) are defined once and offered alike by a
frame, a partition, their remote twins and the server."""

from __future__ import annotations

import inspect

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.api.aggregations import (
    AGGREGATIONS,
    ALIASES,
    FRAME_AGGREGATIONS,
    PREVIEWS,
    Aggregations,
)
from pinqpy.remote.client.frame import RemoteFrame, RemotePartition
from pinqpy.remote.server.state import FRAME_METHODS, PARTITION_METHODS

LOCAL = (pq.PrivateFrame, pq.Partition)
REMOTE = (RemoteFrame, RemotePartition)


def _public_methods(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}


def test_the_list_is_the_mixins_methods():
    assert set(AGGREGATIONS) | set(ALIASES) | set(PREVIEWS) == _public_methods(Aggregations)
    for alias, name in ALIASES.items():
        assert getattr(Aggregations, alias) is getattr(Aggregations, name)


@pytest.mark.parametrize("cls", LOCAL)
def test_a_local_table_inherits_every_aggregation_unchanged(cls):
    for name in (*AGGREGATIONS, *ALIASES):
        assert getattr(cls, name) is getattr(Aggregations, name), (cls, name)
    assert not set(AGGREGATIONS) & _public_methods(cls), "redefined instead of inherited"


@pytest.mark.parametrize(("remote", "local"), list(zip(REMOTE, LOCAL, strict=True)))
def test_a_remote_table_forwards_every_aggregation(remote, local):
    names = FRAME_AGGREGATIONS if remote is RemoteFrame else AGGREGATIONS
    for name in (*names, *ALIASES):
        mine, theirs = getattr(remote, name), getattr(local, name)
        assert mine is not theirs, name
        assert inspect.signature(mine) == inspect.signature(theirs), name
        assert mine.__doc__ == theirs.__doc__ and mine.__doc__, name
        assert mine.__qualname__ == f"{remote.__name__}.{theirs.__name__}"


def test_the_server_accepts_exactly_the_forwarded_ones():
    assert FRAME_METHODS == FRAME_AGGREGATIONS
    assert PARTITION_METHODS == AGGREGATIONS
    for name in FRAME_AGGREGATIONS:
        assert callable(getattr(pq.PrivateFrame, name)), name


def test_a_frame_answers_once_and_a_partition_per_key():
    df = pd.DataFrame({"g": ["a", "b", "a", "b"], "x": [1.0, 2.0, 3.0, 4.0]})
    budget = pq.Budget(epsilon=10)
    frame = pq.PrivateFrame(df, budget, bounds={"x": (0, 4)})
    parts = frame.partition("g", keys=["a", "b"])
    with pq.testing.no_noise():
        for name in ("count", "sum", "mean", "variance", "std", "median", "quantile"):
            args = () if name == "count" else ("x",)
            whole = getattr(frame, name)(*args, epsilon=0.1)
            per_key = getattr(parts, name)(*args, epsilon=0.1)
            assert isinstance(whole, pq.NoisyCount if name == "count" else pq.NoisyValue), name
            assert isinstance(per_key, pq.NoisySeries), name
            assert list(per_key.index) == ["a", "b"], name
        top = frame.argmax("g", ["a", "b"], epsilon=0.1)
        tops = parts.argmax("g", ["a", "b"], epsilon=0.1)
    assert isinstance(top, pq.NoisyLabel)
    assert tops.to_dict() == {"a": "a", "b": "b"}
    assert budget.spent.epsilon == 1.6  # 16 charges of 0.1: one per call, parts or not
