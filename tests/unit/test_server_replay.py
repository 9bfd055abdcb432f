"""Replay: a plan sent as data is rebuilt against the server's own tables; the client's
derived fields are ignored and recomputed, and bad plans are refused before any charge."""

from __future__ import annotations

import copy

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.plan.canonical import canonical_plan
from pinqpy.plan.nodes import PartitionRef, PlanNode, node_kinds
from pinqpy.plan.serialize import plan_to_data
from pinqpy.remote.server.config import Limits
from pinqpy.remote.server.replay import (
    LimitExceeded,
    PartitionRegistry,
    Replayer,
    TableNotFound,
    check_depth,
)

ROWS = pd.DataFrame(
    {
        "pid": [1, 1, 2, 3, 3, 3],
        "age": [30, 31, 45, 52, 53, 54],
        "sex": ["F", "F", "M", "F", "F", "F"],
        "tags": [["a"], ["b", "c"], [], ["a"], ["c"], ["a", "b"]],
    }
)
FACTS = {"privacy_unit": "pid", "bounds": {"age": (0, 100)}, "keys": {"sex": ["F", "M"]}}
PUBLIC = pd.DataFrame({"sex": ["F", "F", "M"], "label": ["f1", "f2", "m"]})


@pytest.fixture
def server():
    """The server's frame for table "people" (its own budget) and a second, ungranted table."""
    budget = pq.Budget(10, 1e-6)
    people = pq.PrivateFrame(ROWS, budget, name="people", **FACTS)
    secret = pq.PrivateFrame(ROWS, pq.Budget(1), name="secret", **FACTS)
    return budget, people, secret


@pytest.fixture
def client():
    """The analyst's frame, named like the server's table, over a stand-in of the same shape."""
    return pq.PrivateFrame(ROWS.iloc[:0], pq.Budget(1), name="people", **FACTS)


def replayer(server, registry=None, public=None, limits=None) -> Replayer:
    _, people, _ = server
    return Replayer(
        {"people": people._rel},
        registry if registry is not None else PartitionRegistry(),
        limits or Limits(),
        public,
    )


def public_of(frame) -> dict[str, pd.DataFrame]:
    """The public rows a request carries: {public id: rows} of the client's catalog."""
    out = {}
    stack = [frame._plan]
    while stack:
        node = stack.pop()
        if hasattr(node, "public"):
            out[node.public.id] = frame._rel.catalog.public_data(node.public)
        stack.extend(node.children)
    return out


# Each builds the same query from a frame (the client's stand-in or the server's own).
def _plans(f):
    b = f.bound_contributions(2)
    parts = b.partition("sex", keys=["F", "M"])
    w = parts["F"].where("age > 30")
    g1 = b.groupby("sex").agg(n="COUNT(*)")
    g2 = b.groupby("sex").agg(m="AVG(age)")
    return {
        "chain": w.assign(dec="FLOOR(age / 10)").explode("tags", 3).distinct("pid", "tags"),
        "select": w.select("age", "sex", older="age + 1"),
        "two parts": parts["F"].concat(parts["M"]),
        "shared": w.concat(w).union(w),
        "join": g1.join(g2, on="sex"),
        "bounded join": b.join(b, on="sex", max_rows_per_key=(2, 3)),
        "public": b.join(PUBLIC, on="sex"),
        "by unit": f.groupby("pid").agg(n="COUNT(*)"),
        "sets": b.intersect(b.where("age > 40")).difference(b.where("age > 50")),
        "bound groups": f.bound_contributions(max_groups=2, max_rows_per_group=1, by="sex"),
        "bound groups, open": f.bound_contributions(max_rows=3, max_groups=1, by=["sex", "age"]),
        "bound degree": b.bound_degree(["sex"], 2),
    }


def _kinds(plan: PlanNode) -> set[type]:
    out, stack = set(), [plan]
    while stack:
        node = stack.pop()
        out.add(type(node))
        stack.extend(node.children)
    return out


def test_every_node_kind_round_trips_to_the_servers_own_plan(server, client):
    budget, people, _ = server
    mine, theirs = _plans(people), _plans(client)
    assert set().union(*(_kinds(f._plan) for f in theirs.values())) == set(node_kinds())
    for name, sent in theirs.items():
        rel = replayer(server, public=public_of(sent)).relation(plan_to_data(sent._plan))
        local = mine[name]._rel
        assert canonical_plan(rel.plan, lambda t: t.name, rel.catalog) == canonical_plan(
            local.plan, lambda t: t.name, local.catalog
        ), name
        assert rel.stabilities() == local.stabilities(), name
        assert list(rel.stabilities()) == [budget], name
        assert rel.meta.schema == local.meta.schema, name
        assert rel.meta.keys == local.meta.keys, name
        assert rel.meta.bounds == local.meta.bounds, name
    assert budget.spent == pq.Cost(0)


def test_shared_nodes_stay_shared(server, client):
    w = client.bound_contributions(1).where("age > 1")
    rel = replayer(server).relation(plan_to_data(w.concat(w)._plan))
    assert rel.plan.left is rel.plan.right
    parts = client.bound_contributions(1).partition("sex", keys=["F", "M"])
    rel = replayer(server).relation(plan_to_data(parts["F"].concat(parts["M"])._plan))
    assert rel.plan.left.partition is rel.plan.right.partition


def test_a_partition_asked_again_draws_on_the_same_agent(server, client):
    budget, _, _ = server
    registry = PartitionRegistry()
    # One row per person (a deterministic parent): parts asked one request at a time share
    # the partition's agent, which charges the larger part, as one local partition does.
    per_person = client.groupby("pid").agg(n="COUNT(*)")
    parts = per_person.partition("n", keys=[1, 2, 3])
    one = replayer(server, registry).relation(plan_to_data(parts[1]._plan))
    two = replayer(server, registry).relation(plan_to_data(parts[2]._plan))
    pq.PrivateFrame._wrap(one).count(epsilon=0.3)
    pq.PrivateFrame._wrap(two).count(epsilon=0.5)
    assert budget.spent.epsilon == pq.Cost(0.5).epsilon  # the larger part, not the sum
    # Other keys are another partition, with an agent of its own.
    other = per_person.partition("n", keys=[1])
    o = replayer(server, registry).relation(plan_to_data(other[1]._plan))
    pq.PrivateFrame._wrap(o).count(epsilon=0.25)
    assert budget.spent.epsilon == pq.Cost(0.75).epsilon
    assert len(registry) == 2


def test_parts_of_a_randomly_cut_frame_asked_in_separate_requests_pay_the_largest(
    server, client
):
    # Every request through the kept agent draws the partition's salts, for plans replayed
    # anew (new node objects) each time: the parts stay pieces of one cut, so two requests
    # charge the larger part, as locally (pinqpy.plan.salts).
    budget, _, _ = server
    registry = PartitionRegistry()
    parts = client.bound_contributions(1).partition("sex", keys=["F", "M"])
    f = replayer(server, registry).relation(plan_to_data(parts["F"]._plan))
    m = replayer(server, registry).relation(plan_to_data(parts["M"]._plan))
    pq.PrivateFrame._wrap(f).count(epsilon=0.3)
    pq.PrivateFrame._wrap(m).count(epsilon=0.5)
    assert budget.spent.epsilon == pq.Cost(0.5).epsilon


def test_requests_through_one_kept_partition_see_one_cut(server, client):
    registry = PartitionRegistry()
    ages = [30, 31, 45, 52, 53, 54]
    parts = client.bound_contributions(1).partition("age", keys=ages)
    counts = []
    with pq.testing.no_noise():
        for i, age in enumerate(ages * 2):  # every part twice, each in its own request
            rel = replayer(server, registry).relation(plan_to_data(parts[age]._plan))
            with pq.testing.seed(i):
                counts.append(int(pq.PrivateFrame._wrap(rel).count(epsilon=1)))
    assert counts[:6] == counts[6:]  # the same part, asked again: the same rows
    assert sum(counts[:6]) == 3  # one kept row for each of the three people, in one part


def _node(data, kind):
    return next(n for n in data["nodes"] if n["type"] == kind)


def test_forged_derived_fields_are_ignored(server, client):
    _, people, _ = server
    sent = client.join(PUBLIC, on="sex").bound_contributions(1)
    data = plan_to_data(sent._plan)
    _node(data, "PublicJoin")["multiplicity"] = 1  # the public table has 2 rows for "F"
    _node(data, "BoundContributions")["unit"] = "age"
    rel = replayer(server, public=public_of(sent)).relation(data)
    local = people.join(PUBLIC, on="sex").bound_contributions(1)._rel
    assert rel.plan.child.multiplicity == 2
    assert rel.plan.unit == "pid"
    assert rel.stabilities() == local.stabilities()

    grouped = client.groupby("sex").agg(n="COUNT(*)")
    data = plan_to_data(grouped._plan)
    _node(data, "GroupBy")["by_unit"] = True  # it is not by the unit: one person, many rows
    rel = replayer(server).relation(data)
    assert rel.plan.by_unit is False
    assert rel.stabilities() == people.groupby("sex").agg(n="COUNT(*)")._rel.stabilities()


def test_the_clients_table_declarations_are_ignored(server, client):
    budget, people, _ = server
    data = plan_to_data(client._plan)
    (table,) = data["tables"]
    table.update(
        privacy_unit=None,
        agent="budget-of-someone-else",
        allow_callables=True,
        id="table-forged",
        schema={"$": "map", "items": [["age", "str"]]},
        bounds={"$": "map", "items": [["age", {"$": "tuple", "items": [0, 1]}]]},
    )
    data["nodes"][0]["table"] = "table-forged"
    rel = replayer(server).relation(data)
    assert rel.plan is people._plan
    assert rel.meta.privacy_unit == "pid"
    assert rel.meta.allow_callables is False
    assert rel.meta.schema["age"] == "int"
    assert rel.stabilities() == {budget: float("inf")}


def test_forged_bounds_and_keys_are_not_believed(server):
    _, people, _ = server
    liar = pq.PrivateFrame(
        ROWS.iloc[:0], pq.Budget(1), name="people", privacy_unit=None,
        bounds={"age": (0, 1)}, keys={"sex": ["F", "M", "X"]},
    )  # fmt: skip
    rel = replayer(server).relation(plan_to_data(liar._plan))
    assert rel.meta.bounds == people._rel.meta.bounds
    assert rel.meta.keys == people._rel.meta.keys
    assert rel.meta.privacy_unit == "pid"


def test_a_table_not_granted_reads_like_an_unknown_table(server):
    _, _, secret = server
    with pytest.raises(TableNotFound) as granted:
        replayer(server).relation(plan_to_data(secret._plan))
    nobody = pq.PrivateFrame(ROWS, pq.Budget(1), name="nobody")
    with pytest.raises(TableNotFound) as unknown:
        replayer(server).relation(plan_to_data(nobody._plan))
    assert str(granted.value) == "no private table named 'secret'"
    assert str(unknown.value) == "no private table named 'nobody'"
    assert secret.budgets[0].spent == pq.Cost(0)


@pytest.mark.parametrize(
    ("forge", "error", "match"),
    [
        (lambda d: d["nodes"].append({"type": "Sample", "child": 0}), PinqError, "unknown plan"),
        (lambda d: d["nodes"][0].update(type="PyFunc"), PinqError, "unknown plan node"),
        (lambda d: d.update(root=7), PinqError, "not listed before it"),
        (lambda d: d.update(format="other"), PinqError, "not a pinqpy-plan"),
        (
            lambda d: _node(d, "Where").update(predicate={"type": "Lambda"}),
            PinqError,
            "unknown expression",
        ),
        (lambda d: _node(d, "Where").update(stability=0), PinqError, "no field 'stability'"),
        (lambda d: d["tables"].clear(), PinqError, "does not list"),
    ],
)
def test_malformed_plans_get_a_clear_error(server, client, forge, error, match):
    budget, _, _ = server
    data = copy.deepcopy(plan_to_data(client.where("age > 3")._plan))
    forge(data)
    with pytest.raises(error, match=match):
        replayer(server).relation(data)
    assert budget.spent == pq.Cost(0)


def test_type_errors_in_expressions_are_refused(server, client):
    data = plan_to_data(client.where("age > 3")._plan)
    # "sex" is text on the server: adding a number to it is a type error there, whatever
    # type the client's stand-in gave it.
    forged = plan_to_data(
        pq.PrivateFrame(ROWS.assign(sex=1).iloc[:0], pq.Budget(1), name="people")
        .where("sex + 1 > 2")
        ._plan
    )
    with pytest.raises(PinqSyntaxError):
        replayer(server).relation(forged)
    _node(data, "Where")["predicate"] = _node(forged, "Where")["predicate"]
    with pytest.raises(PinqSyntaxError):
        replayer(server).relation(data)
    unknown = plan_to_data(
        pq.PrivateFrame(ROWS.assign(salary=1).iloc[:0], pq.Budget(1), name="people")
        .where("salary > 2")
        ._plan
    )
    with pytest.raises(PinqError, match="unknown column 'salary'"):
        replayer(server).relation(unknown)


def test_callables_have_no_data_form(client):
    f = pq.PrivateFrame(ROWS.iloc[:0], pq.Budget(1), name="people", allow_callables=True)
    with pytest.raises(PinqError, match="Python callable"):
        plan_to_data(f.where(lambda df: df.age > 3)._plan)


def test_too_many_nodes_or_too_deep_is_refused_before_decoding(server, client):
    f = client
    for i in range(10):
        f = f.where(f"age > {i}")
    data = plan_to_data(f._plan)
    with pytest.raises(LimitExceeded, match="11 nodes; this server accepts at most 5"):
        replayer(server, limits=Limits(max_plan_nodes=5)).relation(data)
    with pytest.raises(LimitExceeded, match="more than 4 steps deep"):
        replayer(server, limits=Limits(max_plan_depth=4)).relation(data)
    replayer(server, limits=Limits(max_plan_nodes=11, max_plan_depth=11)).relation(data)
    with pytest.raises(LimitExceeded, match="nests more deeply"):
        check_depth({"a": [[[[1]]]]}, 4)


def test_too_many_partition_keys_or_public_rows_are_refused(server, client):
    parts = client.bound_contributions(1).partition("age", keys=list(range(20)))
    with pytest.raises(LimitExceeded, match="20 partition keys"):
        replayer(server, limits=Limits(max_keys=10)).relation(plan_to_data(parts[3]._plan))
    sent = client.join(PUBLIC, on="sex")
    with pytest.raises(LimitExceeded, match="has 3 rows"):
        replayer(server, public=public_of(sent), limits=Limits(max_public_rows=2)).relation(
            plan_to_data(sent._plan)
        )
    with pytest.raises(PinqError, match="does not carry"):
        replayer(server).relation(plan_to_data(sent._plan))


def test_a_part_key_outside_its_partition_is_refused(server, client):
    parts = client.bound_contributions(1).partition("sex", keys=["F", "M"])
    data = plan_to_data(parts["F"]._plan)
    for key in ("X", {"$": "map", "items": [["a", 1]]}, [1, 2]):
        _node(data, "PartSource")["key"] = key
        with pytest.raises(PinqError, match=r"not one of its partition's keys|unhashable"):
            replayer(server).relation(data)
    bounded = server[1].bound_contributions(1)._rel
    assert isinstance(replayer(server).partition(bounded, ["sex"], None)[0], PartitionRef)


def test_two_partition_calls_are_two_partitions_and_ids_are_text(server, client):
    budget, _, _ = server
    registry = PartitionRegistry()
    per_person = client.groupby("pid").agg(n="COUNT(*)")
    first = per_person.partition("n", keys=[1, 2])
    second = per_person.partition("n", keys=[1, 2])
    for parts, key in ((first, 1), (second, 2)):
        rel = replayer(server, registry).relation(plan_to_data(parts[key]._plan))
        pq.PrivateFrame._wrap(rel).count(epsilon=0.25)
    assert budget.spent.epsilon == pq.Cost(0.5).epsilon  # as locally: two partitions
    assert len(registry) == 2
    parent = replayer(server, registry).relation(plan_to_data(per_person._plan))
    with pytest.raises(pq.PinqError, match="id must be text"):
        replayer(server, registry).partition(parent, "n", [1, 2], name=["x"])
    assert budget.spent.epsilon == pq.Cost(0.5).epsilon
