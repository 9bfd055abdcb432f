"""A stable JSON form for expressions, and for the plain values plans hold.

An expression is written as nested objects, one per node: ``{"type": "Binary", "op": "+",
"left": ..., "right": ...}``, with its source position (``"pos": [line, column]``) when it has
one. Each node kind lists its fields below, and the list is checked against the class when
this module is imported, so a field added to a node without a JSON spelling fails at once.
Reading checks every kind, field and value type: the text may come from another process, so
anything unexpected is refused with a :class:`~pinqpy.errors.PinqError`, and nothing in it
is ever run.

Values (literals, public keys, bounds, schemas) are JSON's own where JSON spells them
exactly, and tagged objects ``{"$": tag, ...}`` elsewhere, so that every value reads back
as the same type and the same number: a float stays a float (``1.0``, ``-0.0``, and NaN and
the infinities, which strict JSON has no words for), an integer of any size stays an
integer, a Fraction, tuple, frozenset, mapping (in its order, with keys of any type) or
pandas Timestamp stays one.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import fields
from fractions import Fraction
from typing import Any

from pinqpy.errors import PinqError
from pinqpy.expr.ast import (
    Between,
    Binary,
    Call,
    Case,
    Cast,
    Column,
    Expr,
    InList,
    IsNull,
    Like,
    Literal,
    NamedArg,
    Pos,
    Unary,
)

__all__ = [
    "EXPR_FORMAT",
    "VERSION",
    "BadJson",
    "check_header",
    "dumps",
    "expr_from_data",
    "expr_to_data",
    "expression_kinds",
    "from_json",
    "loads",
    "to_json",
    "value_from_data",
    "value_to_data",
]

#: The version of the JSON forms written here and in :mod:`pinqpy.plan.serialize`.
VERSION = 1
EXPR_FORMAT = "pinqpy-expr"


class BadJson(PinqError):
    """Text that is not a valid JSON form of a pinqpy expression or plan."""


def dumps(data: object) -> str:
    """The one spelling of JSON data: sorted keys, no spaces, strict JSON (no NaN)."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def loads(text: object) -> Any:
    if not isinstance(text, str | bytes | bytearray):
        raise BadJson(f"a JSON form is text, not {type(text).__name__}")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise BadJson("the JSON text nests too deeply") from None
    except ValueError as exc:
        raise BadJson(f"the text is not valid JSON ({exc.__class__.__name__})") from None


def _no_constant(name: str) -> None:
    raise BadJson(f"the JSON text holds {name}, which strict JSON does not have")


def check_header(data: object, form: str) -> dict[str, Any]:
    """The outer object of a JSON form, after checking its format and version."""
    if not isinstance(data, dict) or data.get("format") != form:
        raise BadJson(f"the text is not a {form} JSON form")
    version = data.get("version")
    if version != VERSION:
        raise BadJson(f"{form} JSON version {version!r} is not known (this pinqpy reads {VERSION})")
    return data


# -- values -----------------------------------------------------------------------------------
def value_to_data(v: object) -> Any:
    """A plain value as JSON data that :func:`value_from_data` reads back as an equal value
    of the same type."""
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        if math.isfinite(v):
            return float(v)
        return {"$": "float", "value": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    if isinstance(v, Fraction):
        return {"$": "fraction", "value": f"{v.numerator}/{v.denominator}"}
    if isinstance(v, tuple):
        return {"$": "tuple", "items": [value_to_data(x) for x in v]}
    if isinstance(v, list):
        return [value_to_data(x) for x in v]
    if isinstance(v, frozenset):
        items = sorted((value_to_data(x) for x in v), key=dumps)
        return {"$": "frozenset", "items": items}
    if isinstance(v, Mapping):
        return {"$": "map", "items": [[value_to_data(k), value_to_data(x)] for k, x in v.items()]}
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(v, pd.Timestamp) and v is not pd.NaT:
        tz = None if v.tz is None else str(v.tz)
        return {"$": "timestamp", "ns": int(v.value), "tz": tz}
    raise PinqError(
        f"a value of type {type(v).__name__} cannot be serialised; plans hold numbers, text, "
        "booleans, None, timestamps and tuples of them"
    )


_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def value_from_data(d: Any) -> Any:
    """The value :func:`value_to_data` wrote."""
    if d is None or isinstance(d, bool | str | int | float):
        return d
    if isinstance(d, list):
        return [value_from_data(x) for x in d]
    if not isinstance(d, dict):  # pragma: no cover - json.loads makes nothing else
        raise BadJson(f"unexpected JSON value of type {type(d).__name__}")
    tag = d.get("$")
    if tag == "float" and d.get("value") in _FLOATS:
        return _FLOATS[d["value"]]
    if tag == "fraction" and isinstance(d.get("value"), str):
        try:
            return Fraction(d["value"])
        except (ValueError, ZeroDivisionError):
            raise BadJson("a fraction is spelt n/d") from None
    if tag in ("tuple", "frozenset") and isinstance(d.get("items"), list):
        items = [value_from_data(x) for x in d["items"]]
        if tag == "tuple":
            return tuple(items)
        try:
            return frozenset(items)
        except TypeError:
            raise BadJson("a frozenset holds unhashable values") from None
    if tag == "map" and isinstance(d.get("items"), list):
        out = {}
        for pair in d["items"]:
            if not (isinstance(pair, list) and len(pair) == 2):
                raise BadJson("a map's items are [key, value] pairs")
            key = value_from_data(pair[0])
            try:
                out[key] = value_from_data(pair[1])
            except TypeError:
                raise BadJson("a map key is unhashable") from None
        return out
    if tag == "timestamp" and isinstance(d.get("ns"), int) and not isinstance(d["ns"], bool):
        import pandas as pd

        tz = d.get("tz")
        if tz is not None and not isinstance(tz, str):
            raise BadJson("a timestamp's time zone is text")
        try:
            return pd.Timestamp(d["ns"], tz=tz)
        except Exception:
            raise BadJson("a timestamp is out of range or has an unknown time zone") from None
    raise BadJson(f"unknown tagged value {tag!r}")


# -- expressions ------------------------------------------------------------------------------
# Field shapes: "str", "str?" (or None), "bool", "expr", "expr?", "exprs" (a tuple of
# expressions), "whens" (CASE's (condition, result) pairs), "value" (a literal's value).
_EXPR_FIELDS: dict[type[Expr], dict[str, str]] = {
    Column: {"name": "str", "table": "str?"},
    Literal: {"value": "value"},
    Unary: {"op": "str", "operand": "expr"},
    Binary: {"op": "str", "left": "expr", "right": "expr"},
    Call: {"name": "str", "args": "exprs", "distinct": "bool", "star": "bool"},
    Case: {"whens": "whens", "else_": "expr?"},
    Cast: {"operand": "expr", "type_name": "str"},
    InList: {"operand": "expr", "items": "exprs", "negated": "bool"},
    Between: {"operand": "expr", "low": "expr", "high": "expr", "negated": "bool"},
    Like: {"operand": "expr", "pattern": "expr", "negated": "bool"},
    IsNull: {"operand": "expr", "negated": "bool"},
    NamedArg: {"name": "str", "values": "exprs", "pair": "bool"},
}
_EXPR_KINDS: dict[str, type[Expr]] = {cls.__name__: cls for cls in _EXPR_FIELDS}


def expression_kinds() -> list[type[Expr]]:
    """Every expression node class this module writes."""
    return list(_EXPR_FIELDS)


def _check_fields() -> None:
    for cls, spec in _EXPR_FIELDS.items():
        # Fields outside equality (the source position, SQL's spelling) are not written.
        have = [f.name for f in fields(cls) if f.compare]
        if have != list(spec):  # pragma: no cover - import guard
            raise TypeError(f"expression node {cls.__name__} has fields {have}, JSON {list(spec)}")


_check_fields()


def expr_to_data(e: Expr) -> dict[str, Any]:
    """An expression as JSON data (see the module docstring)."""
    spec = _EXPR_FIELDS.get(type(e))
    if spec is None:
        raise PinqError(f"expression node {type(e).__name__} has no JSON form")
    out: dict[str, Any] = {"type": type(e).__name__}
    for name, shape in spec.items():
        out[name] = _ENCODE[shape](getattr(e, name))
    if e.pos is not None:
        out["pos"] = [e.pos.line, e.pos.column]
    return out


def expr_from_data(d: Any) -> Expr:
    """The expression :func:`expr_to_data` wrote."""
    if not isinstance(d, dict):
        raise BadJson("an expression is a JSON object")
    kind = d.get("type")
    cls = _EXPR_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise BadJson(f"unknown expression node {str(kind)[:40]!r}")
    spec = _EXPR_FIELDS[cls]
    extra = set(d) - set(spec) - {"type", "pos"}
    if extra:
        raise BadJson(f"expression node {cls.__name__} has no field {sorted(extra)[0]!r}")
    args = {}
    for name, shape in spec.items():
        if name not in d:
            raise BadJson(f"expression node {cls.__name__} lacks its field {name!r}")
        args[name] = _DECODE[shape](d[name])
    pos = d.get("pos")
    if pos is not None:
        if not (isinstance(pos, list) and len(pos) == 2 and all(_is_int(x) for x in pos)):
            raise BadJson("an expression's position is [line, column]")
        args["pos"] = Pos(pos[0], pos[1])
    return cls(**args)


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _expect(kind: type | tuple[type, ...], what: str) -> Callable[[Any], Any]:
    def check(x: Any) -> Any:
        if not isinstance(x, kind) or (kind is not bool and isinstance(x, bool)):
            raise BadJson(f"expected {what}, found {type(x).__name__}")
        return x

    return check


def _literal_value(x: Any) -> Any:
    v = value_from_data(x)
    if not (v is None or isinstance(v, bool | int | float | str)):
        raise BadJson(f"a literal is a number, text, a boolean or NULL, not {type(v).__name__}")
    return v


def _exprs(x: Any) -> tuple[Expr, ...]:
    if not isinstance(x, list):
        raise BadJson("expected a list of expressions")
    return tuple(expr_from_data(i) for i in x)


def _whens(x: Any) -> tuple[tuple[Expr, Expr], ...]:
    if not isinstance(x, list) or not all(isinstance(p, list) and len(p) == 2 for p in x):
        raise BadJson("CASE's branches are [condition, result] pairs")
    return tuple((expr_from_data(c), expr_from_data(r)) for c, r in x)


_ENCODE: dict[str, Callable[[Any], Any]] = {
    "str": lambda x: x,
    "str?": lambda x: x,
    "bool": lambda x: x,
    "value": value_to_data,
    "expr": expr_to_data,
    "expr?": lambda x: None if x is None else expr_to_data(x),
    "exprs": lambda xs: [expr_to_data(x) for x in xs],
    "whens": lambda ws: [[expr_to_data(c), expr_to_data(r)] for c, r in ws],
}
_DECODE: dict[str, Callable[[Any], Any]] = {
    "str": _expect(str, "text"),
    "str?": lambda x: None if x is None else _expect(str, "text")(x),
    "bool": _expect(bool, "true or false"),
    "value": _literal_value,
    "expr": expr_from_data,
    "expr?": lambda x: None if x is None else expr_from_data(x),
    "exprs": _exprs,
    "whens": _whens,
}


def to_json(e: Expr) -> str:
    """The JSON form of an expression, with its format and version."""
    return dumps({"format": EXPR_FORMAT, "version": VERSION, "expr": expr_to_data(e)})


def from_json(text: str | bytes) -> Expr:
    """The expression :func:`to_json` wrote; malformed text is refused with a PinqError."""
    data = check_header(loads(text), EXPR_FORMAT)
    try:
        return expr_from_data(data.get("expr"))
    except RecursionError:
        raise BadJson("the expression nests too deeply") from None
