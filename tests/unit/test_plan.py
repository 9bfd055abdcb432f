"""The plan is immutable, lazy and engine-free, and every node kind has a stability rule."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.plan import nodes as _plan
from pinqpy.plan.stability import StabilityVisitor

PKG = Path(pq.__file__).parent


def test_every_node_kind_has_a_stability_rule():
    kinds = _plan.node_kinds()
    assert len(kinds) >= 11
    for cls in kinds:
        assert cls._visit in _plan.PlanVisitor.__abstractmethods__
        assert getattr(StabilityVisitor, cls._visit) is not getattr(_plan.PlanVisitor, cls._visit)
    StabilityVisitor()  # concrete: would raise TypeError if a rule were missing


def test_a_node_without_a_visitor_method_cannot_be_defined():
    with pytest.raises(TypeError, match="stability rule"):

        @dataclasses.dataclass(frozen=True)
        class Sneaky(_plan.PlanNode):
            child: _plan.PlanNode

            @property
            def children(self):
                return (self.child,)


def test_a_visitor_missing_a_case_cannot_be_instantiated():
    cases = {
        name: (lambda self, node: None)
        for name in _plan.PlanVisitor.__abstractmethods__
        if name != "visit_where"
    }
    partial = type("Partial", (_plan.PlanVisitor,), cases)
    with pytest.raises(TypeError):
        partial()


def test_plan_modules_do_not_import_pandas():
    """Plans and accounting must not depend on pandas (other engines run the same plans);
    a function may import it lazily to return a DataFrame to the user."""
    modules = ["plan/nodes.py", "plan/stability.py", "accounting/agents.py", "accounting/budget.py"]
    for mod in [*modules, "expr/ast.py"]:
        tree = ast.parse((PKG / mod).read_text())
        names = set()
        for node in tree.body:
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module.split(".")[0])
        assert "pandas" not in names, mod


def test_plan_nodes_are_frozen():
    f = pq.PrivateFrame(pd.DataFrame({"a": [1]}), pq.Budget(epsilon=1))
    node = f.where("a > 0")._plan
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.child = None  # type: ignore[misc]


def test_transformations_are_lazy(monkeypatch):
    from pinqpy.engines.pandas import executor as _pandas_executor

    def boom(*a, **k):
        raise AssertionError("data was read while building a plan")

    monkeypatch.setattr(_pandas_executor.PandasExecutor, "relation", boom)
    b = pq.Budget(epsilon=1)
    f = pq.PrivateFrame(pd.DataFrame({"a": [1, 2], "u": [1, 1], "l": [[1], [2]]}), b)
    g = (
        f.where("a > 0")
        .select("a", "u", "l", b2="a * 2")
        .assign(c="b2 + 1")
        .explode("l", max_items=2)
        .distinct("a", "u")
    )
    g = g.groupby("a").agg(n="COUNT(*)").join(g.groupby("a").agg(m="COUNT(*)"), on="a")
    g = g.concat(g).union(g).intersect(g).difference(g)
    g.partition("a", keys=[1, 2])
    assert b.spent.is_zero
