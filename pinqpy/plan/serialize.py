"""A stable JSON form for plans, so that a plan can cross a process boundary.

A plan is pure data: its tables, public snapshots and privacy agents are names, which a
:class:`~pinqpy.plan.catalog.Catalog` resolves, so the JSON holds the plan's structure and the
curator's public declarations only, never a row. It reads::

    {"format": "pinqpy-plan", "version": 1,
     "tables": [{"id": ..., "name": ..., "columns": [...], "agent": ..., ...}],
     "public": [{"id": ..., "name": ..., "columns": [...], "schema": ...}],
     "nodes": [{"type": "Source", "table": "<table id>"},
               {"type": "Where", "child": 0, "predicate": <expression>}, ...],
     "root": 1}

``nodes`` lists the plan's nodes (and its partitions, ``"type": "PartitionRef"``) children
first; a node names another by its position in the list. A node that a plan uses twice
(``f.concat(f)``, the parts of one partition) is listed once and read back as one object, so
the column identities the facts are keyed by (:mod:`pinqpy.plan.meta`) come back as they
were: the facts, stabilities and canonical text of a plan read back are those of the plan
written. Tables and public tables are compared by their ids, which the JSON keeps.

Expressions and values are written by :mod:`pinqpy.expr.serialize`. Every node kind lists its
fields below, and the list is checked against the classes when this module is imported. A
:class:`~pinqpy.plan.nodes.PyFunc` (an analyst's Python callable) has no JSON form: writing a
plan that holds one is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any

from pinqpy.errors import PinqError
from pinqpy.expr.ast import Call, Expr
from pinqpy.expr.serialize import (
    VERSION,
    BadJson,
    check_header,
    dumps,
    expr_from_data,
    expr_to_data,
    loads,
    value_from_data,
    value_to_data,
)
from pinqpy.plan.nodes import (
    BoundContributions,
    BoundDegree,
    BoundGroups,
    Distinct,
    Explode,
    GroupBy,
    Join,
    PartitionRef,
    PartSource,
    PlanNode,
    PublicJoin,
    PublicTable,
    PyFunc,
    Select,
    SetOp,
    Source,
    TableRef,
    Where,
    node_kinds,
)

__all__ = ["PLAN_FORMAT", "from_json", "plan_from_data", "plan_to_data", "to_json"]

PLAN_FORMAT = "pinqpy-plan"

# Field shapes: "node" (another node, by position), "partition" (a PartitionRef, by
# position), "table" / "public" (by id), "str", "int", "int?" (a whole number or None),
# "bool", "strs" (a tuple of text),
# "value" (any plain value), "values" (a tuple of them), "expr", "call" (an aggregate call),
# "predicate" (an expression; a callable is refused), "outputs" ((name, expression) pairs),
# "aggs" ((name, call) pairs), "row_bounds" (None or a pair of whole numbers), and
# "one of:a,b" (text from a fixed list).
_NODE_FIELDS: dict[type, dict[str, str]] = {
    Source: {"table": "table"},
    PartSource: {"partition": "partition", "key": "value", "agent": "str"},
    Where: {"child": "node", "predicate": "predicate"},
    Select: {"child": "node", "outputs": "outputs", "keep_all": "bool"},
    Distinct: {"child": "node", "columns": "strs"},
    Explode: {"child": "node", "column": "str", "max_items": "int"},
    GroupBy: {"child": "node", "keys": "strs", "aggs": "aggs", "by_unit": "bool"},
    Join: {"left": "node", "right": "node", "on": "strs", "bounds": "row_bounds"},
    PublicJoin: {
        "child": "node",
        "public": "public",
        "on": "strs",
        "how": "one of:inner,left",
        "multiplicity": "int",
    },
    SetOp: {"kind": "one of:concat,union,intersect,difference", "left": "node", "right": "node"},
    BoundContributions: {"child": "node", "unit": "str", "max_rows": "int"},
    BoundGroups: {
        "child": "node",
        "unit": "str",
        "by": "strs",
        "max_groups": "int",
        "max_rows_per_group": "int?",
    },
    BoundDegree: {"child": "node", "columns": "strs", "max_rows": "int"},
    PartitionRef: {"parent": "node", "key_columns": "strs", "keys": "values", "agent": "str"},
}
_TABLE_FIELDS: dict[str, str] = {
    "id": "str",
    "name": "str",
    "columns": "strs",
    "agent": "str",
    "privacy_unit": "str?",
    "schema": "value",
    "bounds": "value",
    "keys": "value",
    "allow_callables": "bool",
}
_PUBLIC_FIELDS: dict[str, str] = {"id": "str", "name": "str", "columns": "strs", "schema": "value"}
_KINDS: dict[str, type] = {cls.__name__: cls for cls in _NODE_FIELDS}


def _check_fields() -> None:
    missing = [c.__name__ for c in node_kinds() if c not in _NODE_FIELDS]
    if missing:  # pragma: no cover - import guard
        raise TypeError(f"plan nodes without a JSON form: {', '.join(missing)}")
    spec_of = {**_NODE_FIELDS, TableRef: _TABLE_FIELDS, PublicTable: _PUBLIC_FIELDS}
    for cls, spec in spec_of.items():
        have = [f.name for f in fields(cls)]
        if sorted(have) != sorted(spec):  # pragma: no cover - import guard
            raise TypeError(f"plan class {cls.__name__} has fields {have}, JSON {list(spec)}")


_check_fields()


def _refuse_callable(fn: PyFunc) -> None:
    raise PinqError(
        f"the plan uses a Python callable ({fn.name}), which cannot be serialised; write it "
        "as an expression (a string or pq.col(...)) instead"
    )


# -- writing ----------------------------------------------------------------------------------
class _Writer:
    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.positions: dict[int, tuple[object, int]] = {}
        self.tables: dict[str, tuple[TableRef, dict[str, Any]]] = {}
        self.public: dict[str, tuple[PublicTable, dict[str, Any]]] = {}

    def node(self, node: object) -> int:
        hit = self.positions.get(id(node))
        if hit is not None and hit[0] is node:
            return hit[1]
        spec = _NODE_FIELDS.get(type(node))
        if spec is None:
            raise PinqError(f"plan node {type(node).__name__} has no JSON form")
        out: dict[str, Any] = {"type": type(node).__name__}
        for name, shape in spec.items():
            out[name] = self.encode(shape, getattr(node, name))
        self.nodes.append(out)
        self.positions[id(node)] = (node, len(self.nodes) - 1)
        return len(self.nodes) - 1

    def encode(self, shape: str, v: Any) -> Any:
        if shape in ("node", "partition"):
            return self.node(v)
        if shape == "table":
            return self.table(v)
        if shape == "public":
            return self.public_table(v)
        if shape == "predicate":
            return _predicate_data(v)
        if shape == "outputs":
            return [[name, _predicate_data(e)] for name, e in v]
        if shape == "aggs":
            return [[name, expr_to_data(c)] for name, c in v]
        if shape == "expr":
            return expr_to_data(v)
        if shape == "row_bounds":
            return None if v is None else [int(v[0]), int(v[1])]
        if shape in ("strs", "values"):
            return [value_to_data(x) for x in v]
        return value_to_data(v)

    def table(self, t: TableRef) -> str:
        data = {name: self.encode(shape, getattr(t, name)) for name, shape in _TABLE_FIELDS.items()}
        _once(self.tables, t, data, "table")
        return t.id

    def public_table(self, t: PublicTable) -> str:
        data = {
            name: self.encode(shape, getattr(t, name)) for name, shape in _PUBLIC_FIELDS.items()
        }
        _once(self.public, t, data, "public table")
        return t.id


def _once(
    seen: dict[str, tuple[Any, dict[str, Any]]], t: Any, data: dict[str, Any], what: str
) -> None:
    prev = seen.get(t.id)
    if prev is None:
        seen[t.id] = (t, data)
    elif prev[1] != data:
        raise PinqError(f"the plan holds two different {what}s with the id {t.id!r}")


def _predicate_data(e: Expr | PyFunc) -> dict[str, Any]:
    if isinstance(e, PyFunc):
        _refuse_callable(e)
    return expr_to_data(e)  # type: ignore[arg-type]


def plan_to_data(plan: PlanNode) -> dict[str, Any]:
    """A plan as JSON data (see the module docstring); refuses a plan with a callable."""
    w = _Writer()
    root = w.node(plan)
    return {
        "format": PLAN_FORMAT,
        "version": VERSION,
        "tables": [d for _, d in w.tables.values()],
        "public": [d for _, d in w.public.values()],
        "nodes": w.nodes,
        "root": root,
    }


def to_json(plan: PlanNode) -> str:
    """The JSON form of ``plan``: the same plan always gives the same text."""
    return dumps(plan_to_data(plan))


# -- reading ----------------------------------------------------------------------------------
def _strs(x: Any) -> tuple[str, ...]:
    if not isinstance(x, list) or not all(isinstance(i, str) for i in x):
        raise BadJson("expected a list of text")
    return tuple(x)


def _int(x: Any) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise BadJson(f"expected a whole number, found {type(x).__name__}")
    return x


def _of(kind: type, what: str) -> Callable[[Any], Any]:
    def check(x: Any) -> Any:
        if not isinstance(x, kind):
            raise BadJson(f"expected {what}, found {type(x).__name__}")
        return x

    return check


def _pairs(x: Any, read: Callable[[Any], Any]) -> tuple[tuple[str, Any], ...]:
    if not isinstance(x, list) or not all(
        isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in x
    ):
        raise BadJson("expected a list of [name, expression] pairs")
    return tuple((name, read(e)) for name, e in x)


def _call(x: Any) -> Call:
    e = expr_from_data(x)
    if not isinstance(e, Call):
        raise BadJson("a groupby aggregate is a function call")
    return e


def _row_bounds(x: Any) -> tuple[int, int] | None:
    if x is None:
        return None
    if not (isinstance(x, list) and len(x) == 2):
        raise BadJson("a join's bounds are [b_left, b_right]")
    return (_int(x[0]), _int(x[1]))


def _fields(data: Any, spec: dict[str, str], what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise BadJson(f"a {what} is a JSON object")
    extra = set(data) - set(spec) - {"type"}
    if extra:
        raise BadJson(f"a {what} has no field {sorted(extra)[0]!r}")
    lacking = set(spec) - set(data)
    if lacking:
        raise BadJson(f"a {what} lacks its field {sorted(lacking)[0]!r}")
    return data


class _Reader:
    def __init__(self, data: dict[str, Any]) -> None:
        self.tables = self.index(data.get("tables"), _TABLE_FIELDS, TableRef, "table")
        self.public = self.index(data.get("public"), _PUBLIC_FIELDS, PublicTable, "public table")
        self.objects: list[object] = []

    def index(self, items: Any, spec: dict[str, str], cls: type, what: str) -> dict[str, Any]:
        if not isinstance(items, list):
            raise BadJson(f"a plan's {what}s are a list")
        out: dict[str, Any] = {}
        for item in items:
            d = _fields(item, spec, what)
            args = {name: self.decode(shape, d[name]) for name, shape in spec.items()}
            if args["id"] in out:
                raise BadJson(f"two {what}s with the id {args['id']!r}")
            out[args["id"]] = cls(**args)
        return out

    def decode(self, shape: str, x: Any) -> Any:
        if shape in ("node", "partition"):
            i = _int(x)
            if not 0 <= i < len(self.objects):
                raise BadJson("a node names a node that is not listed before it")
            got = self.objects[i]
            want = PartitionRef if shape == "partition" else PlanNode
            if not isinstance(got, want):
                raise BadJson(f"a node's {shape} is a {type(got).__name__}")
            return got
        if shape in ("table", "public"):
            table_id = x if isinstance(x, str) else None
            found = (self.tables if shape == "table" else self.public).get(table_id)
            if found is None:
                raise BadJson(f"a node names a {shape} table {x!r} that the plan does not list")
            return found
        if shape in ("predicate", "expr"):
            return expr_from_data(x)
        if shape == "outputs":
            return _pairs(x, expr_from_data)
        if shape == "aggs":
            return _pairs(x, _call)
        if shape == "row_bounds":
            return _row_bounds(x)
        if shape == "strs":
            return _strs(x)
        if shape == "values":
            if not isinstance(x, list):
                raise BadJson("expected a list of values")
            return tuple(value_from_data(v) for v in x)
        if shape == "str":
            return _of(str, "text")(x)
        if shape == "str?":
            return None if x is None else _of(str, "text")(x)
        if shape == "int":
            return _int(x)
        if shape == "int?":
            return None if x is None else _int(x)
        if shape == "bool":
            return _of(bool, "true or false")(x)
        if shape.startswith("one of:"):
            if x not in shape[len("one of:") :].split(","):
                raise BadJson(f"{x!r} is not one of {shape[len('one of:') :]}")
            return x
        value = value_from_data(x)
        try:
            hash(value)
        except TypeError:
            if not isinstance(value, dict):
                raise BadJson("a key value is unhashable") from None
        return value

    def node(self, data: Any) -> object:
        if not isinstance(data, dict):
            raise BadJson("a plan node is a JSON object")
        kind = data.get("type")
        cls = _KINDS.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise BadJson(f"unknown plan node {str(kind)[:40]!r}")
        spec = _NODE_FIELDS[cls]
        d = _fields(data, spec, f"{cls.__name__} node")
        return cls(**{name: self.decode(shape, d[name]) for name, shape in spec.items()})


def plan_from_data(data: Any) -> PlanNode:
    """The plan :func:`plan_to_data` wrote."""
    data = check_header(data, PLAN_FORMAT)
    reader = _Reader(data)
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        raise BadJson("a plan's nodes are a list")
    try:
        for item in nodes:
            reader.objects.append(reader.node(item))
    except RecursionError:
        raise BadJson("an expression of the plan nests too deeply") from None
    root = reader.decode("node", data.get("root"))
    return root  # type: ignore[no-any-return]


def from_json(text: str | bytes) -> PlanNode:
    """The plan :func:`to_json` wrote; malformed text is refused with a PinqError."""
    return plan_from_data(loads(text))
