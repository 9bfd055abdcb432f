"""Plans are pure data: their JSON form reads back as the same plan, with the same facts.

``from_json(to_json(plan))`` must equal ``plan`` field by field (tables and public tables by
id, expressions structurally, values with their exact type and bits) and share what it
shares; and the facts, stabilities and canonical text of the plan read back must be the
original's, over the random plans of the adversarial stability harness and every SQL
fixture that compiles. The JSON never holds a value of a private table, and a plan with a
Python callable is refused.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
from fractions import Fraction
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pinqpy as pq
from pinqpy.expr import ast as expr_ast
from pinqpy.expr import serialize as expr_json
from pinqpy.expr.parser import parse_expression
from pinqpy.pipeline.relation import Relation
from pinqpy.plan import nodes
from pinqpy.plan.canonical import NotCanonical, canonical_plan
from pinqpy.plan.facts import facts_of
from pinqpy.plan.meta import ColumnId, FrameMeta, internal_names
from pinqpy.plan.serialize import from_json, plan_from_data, plan_to_data, to_json
from pinqpy.plan.stability import lineage_of
from tests.sql.conftest import load_cases, make_env
from tests.unit.test_adversarial_stability import (
    BIG,
    Ctx,
    Skip,
    build_chain,
    chains,
    scenarios,
    table,
)


# -- equality ---------------------------------------------------------------------------------
def _same_value(a: object, b: object) -> bool:
    """Equal and of the same type; floats to the bit (NaN equals NaN, -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (  # type: ignore[arg-type]
            a == b and math.copysign(1, a) == math.copysign(1, b)  # type: ignore[arg-type]
        )
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return list(a) == list(b) and all(  # type: ignore[call-overload]
            _same_value(a[k], b[k])
            for k in a  # type: ignore[index]
        )
    if isinstance(a, frozenset):
        return a == b
    return a == b


class _Compare:
    """Structural equality of two plans, every field of every dataclass (including those left
    out of ``==``), with the sharing of one mirrored exactly by the other."""

    def __init__(self) -> None:
        self.pairs: dict[int, object] = {}  # id(node of a) -> its counterpart in b
        self.back: dict[int, object] = {}

    def same(self, a: object, b: object) -> bool:
        if isinstance(a, nodes.PlanNode | nodes.PartitionRef):
            if id(a) in self.pairs:
                return self.pairs[id(a)] is b
            if id(b) in self.back:
                return False  # two nodes of a read back as one
            self.pairs[id(a)], self.back[id(b)] = b, a
        if isinstance(a, nodes.PyFunc):
            return a is b
        if dataclasses.is_dataclass(a) and not isinstance(a, type):
            if type(a) is not type(b):
                return False
            return all(
                self.same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
            )
        if isinstance(a, tuple | list) and type(a) is type(b):
            return len(a) == len(b) and all(self.same(x, y) for x, y in zip(a, b, strict=True))  # type: ignore[arg-type]
        if isinstance(a, dict) and type(a) is type(b):
            return list(a) == list(b) and all(self.same(a[k], b[k]) for k in a)  # type: ignore[index]
        return _same_value(a, b)


def same_plan(a: nodes.PlanNode, b: nodes.PlanNode) -> _Compare | None:
    """The node correspondence when ``b`` is ``a`` rebuilt, else None."""
    cmp = _Compare()
    return cmp if cmp.same(a, b) else None


def _moved(meta: FrameMeta, pairs: dict[int, object]) -> FrameMeta:
    """``meta`` with each column identity's origin replaced by its counterpart."""

    def cid(i: ColumnId) -> ColumnId:
        return ColumnId(pairs.get(id(i.origin), i.origin), i.name)

    return FrameMeta(
        schema=dict(meta.schema),
        ids={n: cid(i) for n, i in meta.ids.items()},
        col_bounds={cid(i): b for i, b in meta.col_bounds.items()},
        col_keys={cid(i): k for i, k in meta.col_keys.items()},
        unit=None if meta.unit is None else (cid(meta.unit[0]), meta.unit[1]),
        unique=frozenset(frozenset(cid(i) for i in u) for u in meta.unique),
        allow_callables=meta.allow_callables,
        size=meta.size,  # the table's own declaration (tables are equal by id)
    )


def _all_nodes(plan: nodes.PlanNode) -> list[nodes.PlanNode]:
    out, seen, stack = [], set(), [plan]
    while stack:
        n = stack.pop()
        if id(n) not in seen:
            seen.add(id(n))
            out.append(n)
            stack.extend(n.children)
    return out


def check_round_trip(rel: Relation) -> None:
    """The plan read back is the plan, and everything derived from it is the same."""
    plan = rel.plan
    text = to_json(plan)
    again = from_json(text)
    cmp = same_plan(plan, again)
    assert cmp is not None, text
    assert to_json(again) == text  # one spelling
    json.loads(text)  # strict JSON
    # SQL names its scratch columns with the reserved prefix, which facts accept only while
    # pinqpy itself names columns: as when the original plan was made.
    with internal_names():
        for node in _all_nodes(plan):
            twin = cmp.pairs[id(node)]
            assert facts_of(twin) == _moved(facts_of(node), cmp.pairs)  # type: ignore[arg-type]
            assert lineage_of(twin) == lineage_of(node)  # type: ignore[arg-type]
        assert rel.catalog.lineage(again) == rel.catalog.lineage(plan)
    try:
        want = canonical_plan(plan, lambda t: f"{t.name}#{t.id}", rel.catalog)
    except NotCanonical:
        return
    assert canonical_plan(again, lambda t: f"{t.name}#{t.id}", rel.catalog) == want


# -- every kind has a JSON form -----------------------------------------------------------------
def _dataclasses(module: object) -> set[type]:
    return {
        c
        for _, c in inspect.getmembers(module, inspect.isclass)
        if dataclasses.is_dataclass(c) and c.__module__ == module.__name__  # type: ignore[attr-defined]
    }


def test_every_plan_dataclass_is_covered() -> None:
    from pinqpy.plan import serialize

    covered = set(serialize._NODE_FIELDS) | {nodes.TableRef, nodes.PublicTable, nodes.PyFunc}
    assert _dataclasses(nodes) == covered
    assert set(nodes.node_kinds()) <= set(serialize._NODE_FIELDS)


def test_every_expression_dataclass_is_covered() -> None:
    covered = set(expr_json.expression_kinds()) | {expr_ast.Expr, expr_ast.Pos}
    assert _dataclasses(expr_ast) == covered


# -- values ---------------------------------------------------------------------------------------
VALUES = [
    None,
    True,
    False,
    0,
    -7,
    2**80,
    0.0,
    -0.0,
    1.0,
    1e16,
    5e-324,
    1.7976931348623157e308,
    math.inf,
    -math.inf,
    math.nan,
    "",
    "text with 'quotes' and \"doubles\"",
    "lone \ud800 surrogate",
    Fraction(1, 3),
    Fraction(-22, 7),
    (1, "a", None),
    (),
    ((1, 2), (3.5, None)),
    [1, (2, 3)],
    frozenset({1, 2, "x"}),
    {"b": (0.0, 1.0), "a": (2, 3)},
    {1: "one", (2, 3): None},
    pd.Timestamp("2020-02-29 13:45:01.123456789"),
    pd.Timestamp("2021-06-01 08:00", tz="Europe/Oslo"),
]


# Positional ids: a set's repr follows the per-process hash seed, and xdist
# workers must collect identical test ids.
@pytest.mark.parametrize("value", VALUES, ids=[f"v{i}" for i in range(len(VALUES))])
def test_values_read_back_exactly(value: object) -> None:
    text = expr_json.dumps(expr_json.value_to_data(value))
    back = expr_json.value_from_data(json.loads(text))
    assert _same_value(back, value)
    if isinstance(value, pd.Timestamp):
        assert str(back.tz) == str(value.tz)


@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.text()
        | st.fractions(),
        lambda inner: st.tuples(inner, inner) | st.lists(inner, max_size=3),
        max_leaves=8,
    )
)
@settings(max_examples=200, deadline=None)
def test_random_values_read_back_exactly(value: object) -> None:
    back = expr_json.value_from_data(json.loads(expr_json.dumps(expr_json.value_to_data(value))))
    assert _same_value(back, value)


@pytest.mark.parametrize(
    "text",
    [
        "a + 1",
        "CASE WHEN x > 1.5 THEN 'big' WHEN x IS NULL THEN NULL ELSE CAST(x AS VARCHAR) END",
        "x NOT IN (1, 2.0, TRUE) AND s NOT LIKE 'a%' OR NOT (y BETWEEN -1e999 AND 1e999)",
        "COUNT(DISTINCT x) + COUNT(*) + SUM(-0.0 * y)",
        "t.col IS NOT NULL AND 1e300 * 1e300 > 0",
    ],
)
def test_expressions_read_back(text: str) -> None:
    for positions in (False, True):
        e = parse_expression(text, positions=positions)
        back = expr_json.from_json(expr_json.to_json(e))
        assert _Compare().same(e, back)
        assert back.to_sql() == e.to_sql()
        if positions:
            assert [n.pos for n in back.walk()] == [n.pos for n in e.walk()]


# -- plans from the API, the harness and SQL --------------------------------------------------
def _people() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "pid": [1, 1, 2, 3],
            "age": [30, 41, 52, 63],
            "score": [0.5, -0.0, float("nan"), 2.25],
            "city": ["Oslo", "Bergen", None, "Oslo"],
            "tags": [["a"], [], ["b", "c"], None],
            "when": pd.to_datetime(["2020-01-01", "2021-01-01", "2022-01-01", None]),
        }
    )


def test_api_plans_read_back() -> None:
    b = pq.Budget(epsilon=10)
    f = pq.PrivateFrame(
        _people(),
        b,
        privacy_unit="pid",
        bounds={"age": (0, 120), "score": (-1, 3)},
        keys={"city": ["Oslo", "Bergen", None], "when": [pd.Timestamp("2020-01-01")]},
    )
    other = pq.PrivateFrame(_people(), pq.Budget(epsilon=1), privacy_unit="pid")
    g = f.bound_contributions(2)
    pub = pd.DataFrame({"city": ["Oslo", "Oslo", "Bergen"], "region": ["E", "E2", "W"]})
    frames = [
        f,
        g.where("age > 30.5 AND city LIKE 'O%'").assign(x="age / 7", y="score * -0.0"),
        g.select("city", "age").distinct("city"),
        g.explode("tags", 2),
        g.groupby("city").agg(n="COUNT(*)", m="AVG(age)", s="STDDEV(score)"),
        f.groupby("pid").agg(n="COUNT(*)"),
        g.join(pub, on="city", how="left"),
        g.concat(g),
        g.select("pid", "age").union(other.bound_contributions(1).select("pid", "age")),
        f.join(other, on="pid", max_rows_per_key=(2, 3)),
        f.groupby("city").agg(n="COUNT(*)").join(f.groupby("city").agg(a="MAX(age)"), on="city"),
        f.bound_contributions(max_groups=2, max_rows_per_group=1, by=["city", "age"]),
        f.bound_contributions(max_rows=3, max_groups=1, by="city"),
        g.bound_degree("city", 2),
    ]
    parts = g.partition("city")
    frames += [parts["Oslo"], parts[None], parts["Oslo"].concat(parts["Bergen"])]
    frames.append(g.partition("when")[pd.Timestamp("2020-01-01")].where("age > 1"))
    frames.append(g.partition(["city", "age"], keys=[("Oslo", 30), (None, 52)])[("Oslo", 30)])
    for frame in frames:
        check_round_trip(frame._rel)


def test_sharing_survives() -> None:
    f = pq.PrivateFrame(_people(), pq.Budget(1)).assign(x="age + 1")
    both = f.concat(f)
    back = from_json(to_json(both._plan))
    assert isinstance(back, nodes.SetOp) and back.left is back.right
    # The computed column keeps one identity on both sides, so the union of identical sides
    # keeps it too, exactly as in the original.
    assert facts_of(back).ids["x"].origin is back.left
    parts = pq.PrivateFrame(_people(), pq.Budget(1)).partition("city", keys=["Oslo", "Bergen"])
    back = from_json(to_json(parts["Oslo"].concat(parts["Bergen"])._plan))
    assert isinstance(back, nodes.SetOp)
    assert back.left.partition is back.right.partition  # type: ignore[attr-defined]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(sc=scenarios(), chain=chains)
def test_harness_plans_read_back(sc: Any, chain: list[str]) -> None:
    world, _side, _extra = sc
    a_df = table(world.a_users, 0, 0, None)
    b_df = table(world.b_users, 3, 1, None)
    a = pq.PrivateFrame(a_df, pq.Budget(BIG), privacy_unit="pid" if world.a_user_level else None)
    b = pq.PrivateFrame(b_df, pq.Budget(BIG), privacy_unit="pid" if world.b_user_level else None)
    b = b.select(*[c for c in b.columns if c != "items"])
    if chain and chain[0].startswith("explode"):
        a, chain = a.explode("items", max_items=2), chain[1:]
    else:
        a = a.select(*[c for c in a.columns if c != "items"])
    try:
        f = build_chain(a, Ctx(b), chain)
    except (Skip, pq.PinqError):
        return
    check_round_trip(f._rel)
    for col, keys in (("src", [0, 1]), ("k", [0, 1, 2, 3])):
        if col in f.columns:
            try:
                part = f.partition(col, keys=keys)[keys[-1]]
            except pq.PinqError:  # unbounded contributions
                continue
            check_round_trip(part.where(f"{col} IS NOT NULL")._rel)


def _compiled_relations() -> list[tuple[str, Relation]]:
    env = make_env()
    out = []
    for case in load_cases():
        try:
            _statement, compiled = env.session._compile(case.query, case.epsilon, case.delta)
        except pq.PinqError:
            continue
        if compiled is None:
            continue
        rels = [compiled.frame, *(m.prepared.relation for m in compiled.measurements)]
        if compiled.key_selection is not None:
            rels.append(compiled.key_selection[0])
        out += [(case.name, rel) for rel in rels]
    return out


def test_sql_fixture_plans_read_back() -> None:
    compiled = _compiled_relations()
    assert len({name for name, _ in compiled}) >= 40
    for _name, rel in compiled:
        check_round_trip(rel)


# -- refusals and secrecy -------------------------------------------------------------------------
def test_callables_are_refused() -> None:
    f = pq.PrivateFrame(_people(), pq.Budget(1), allow_callables=True)
    for g in (f.where(lambda d: d["age"] > 1), f.assign(x=lambda d: d["age"])):
        with pytest.raises(pq.PinqError, match=r"Python callable.*cannot be serialised"):
            to_json(g._plan)


def test_no_private_value_in_the_json() -> None:
    marker = "SECRET-7f3a9c"
    df = pd.DataFrame({"name": [marker, "x"], "n": [123456789, 2], "v": [0.123456789, 1.0]})
    f = pq.PrivateFrame(df, pq.Budget(1), bounds={"n": (0, 10)})
    plans = [
        f,
        f.where("name <> 'a'").assign(w="v * 2"),
        f.groupby("name").agg(c="COUNT(*)"),
        f.join(pd.DataFrame({"name": ["x"], "p": [1]}), on="name"),
        f.partition("name", keys=["x", "y"])["x"],
    ]
    for g in plans:
        text = to_json(g._plan)
        for secret in (marker, "123456789", "0.123456789"):
            assert secret not in text


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"format": "pinqpy-plan", "version": 99}',
        '{"format": "pinqpy-plan", "version": 1, "tables": [], "public": [], "nodes": '
        '[{"type": "Eval", "code": "1"}], "root": 0}',
        '{"format": "pinqpy-plan", "version": 1, "tables": [], "public": [], "nodes": '
        '[{"type": "Where", "child": 0, "predicate": {"type": "Column", "name": "a", '
        '"table": null}}], "root": 0}',
        '{"format": "pinqpy-plan", "version": 1, "tables": [], "public": [], "nodes": '
        '[{"type": "Source", "table": "nowhere"}], "root": 0}',
        '{"format": "pinqpy-plan", "version": 1, "tables": [], "public": [], "nodes": [], '
        '"root": NaN}',
    ],
)
def test_malformed_json_is_a_pinq_error(text: str) -> None:
    with pytest.raises(pq.PinqError):
        from_json(text)


def test_a_kind_or_table_id_that_is_not_text_is_a_pinqpy_error():
    df = pd.DataFrame({"age": [30, 40]})
    frame = pq.PrivateFrame(df, pq.Budget(1)).where("age > 1")
    data = plan_to_data(frame._plan)
    for node in ({**data["nodes"][0], "table": {"x": 1}}, {**data["nodes"][0], "type": ["W"]}):
        with pytest.raises(pq.PinqError):
            plan_from_data({**data, "nodes": [node, *data["nodes"][1:]]})
    with pytest.raises(pq.PinqError, match="unknown expression node"):
        expr_json.expr_from_data({"type": {"Column": 1}})


def test_select_keys_with_columns_that_are_not_names_is_a_pinqpy_error():
    budget = pq.Budget(1, 1e-6)
    frame = pq.PrivateFrame(pd.DataFrame({"city": ["a", "b"]}), budget)
    with pytest.raises(pq.PinqError, match="column name"):
        frame.select_keys(True, epsilon=0.5, delta=1e-7)  # type: ignore[arg-type]
    assert budget.spent == pq.Cost(0)
