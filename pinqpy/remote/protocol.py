"""The wire between an analyst's client and a curator's server: JSON data, nothing else.

Both sides speak only what this module writes and reads:

* **values** (call arguments, keys, candidates, bounds): JSON numbers, text, booleans and null,
  lists, and tagged objects ``{"$": tag, ...}`` for tuples, fractions, non-finite floats,
  timestamps and expressions (:func:`encode_value`). A Python callable has no data form and is
  refused before anything is sent;
* **results** (:func:`encode_result`): pinqpy's own result types, rebuilt on the client by
  allocating the whitelisted classes and filling in their fields (the same rule as the
  ledger's answers, :mod:`pinqpy.pipeline.answers`), so ``.ci()`` works on a remote answer and
  no data the server sends can run code on the client;
* **errors** (:func:`encode_error`): the class (one of :mod:`pinqpy.errors`) and its message,
  plus, for a syntax error, the query text, line and column, so the client shows the same caret;
* **tables** (:func:`encode_frame`): a pandas DataFrame column by column, for the public tables
  an analyst joins with and the catalogue statements' answers.

JSON here is strict: ``NaN`` and ``Infinity`` are not numbers on the wire (they travel tagged),
and :func:`loads` refuses a body over its size limit before parsing it.

>>> from fractions import Fraction
>>> decode_value(encode_value((1, Fraction(1, 3), "a", None)))
(1, Fraction(1, 3), 'a', None)
>>> decode_error(encode_error(PinqSyntaxError("unknown column 'agee'", text="agee > 3",
...                                           line=1, column=1))).column
1
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import fields as dc_fields
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from pinqpy import errors as _errors
from pinqpy.accounting.cost import Cost
from pinqpy.api.expressions import Expression
from pinqpy.errors import BudgetExceededError, PinqError, PinqSyntaxError
from pinqpy.expr.ast import Expr
from pinqpy.expr.serialize import expr_from_data, expr_to_data, value_from_data, value_to_data
from pinqpy.pipeline.answers import NotStorable, from_data, to_data
from pinqpy.results.accuracy import Accuracy, AccuracyPreview
from pinqpy.results.keys import SelectedKeys
from pinqpy.results.labels import NoisyLabel, _Label
from pinqpy.results.marginals import Attribute, Marginals
from pinqpy.results.tables import NoisyFrame, NoisySeries
from pinqpy.results.values import NoisyCount, NoisyValue
from pinqpy.sql.explain import Explanation

__all__ = [
    "API_PREFIX",
    "TOKEN_ENV",
    "decode_args",
    "decode_error",
    "decode_frame",
    "decode_result",
    "decode_value",
    "dumps",
    "encode_args",
    "encode_error",
    "encode_frame",
    "encode_result",
    "encode_value",
    "loads",
]

API_PREFIX = "/v1"
#: The environment variable clients read an analyst token from when none is given.
TOKEN_ENV = "PINQPY_TOKEN"

_MAX_DEPTH = 64


# -- JSON --------------------------------------------------------------------------------------
def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def dumps(doc: Any) -> bytes:
    """Strict JSON bytes (a non-finite float is an error: it must travel tagged)."""
    return json.dumps(doc, allow_nan=False, separators=(",", ":")).encode("utf-8")


def loads(body: bytes | str, limit: int | None = None) -> Any:
    """Strict JSON, refused with a :class:`~pinqpy.PinqError` when over ``limit`` bytes, not
    UTF-8, not JSON, or nested too deeply."""
    if limit is not None and len(body) > limit:
        raise PinqError(f"the request is larger than this server accepts ({limit} bytes)")
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise PinqError("the request is nested too deeply") from None
    except (UnicodeDecodeError, ValueError):
        raise PinqError("the request body is not valid JSON") from None


# -- values ------------------------------------------------------------------------------------
def encode_value(v: object) -> Any:
    """A call argument as JSON data; expressions (``pq.col(...)``) travel as syntax trees."""
    if isinstance(v, Expression):
        return {"$": "expr", "tree": expr_to_data(v.expr)}
    if isinstance(v, Expr):
        return {"$": "expr", "tree": expr_to_data(v)}
    if callable(v) and not isinstance(v, type):
        raise PinqError(
            "a Python callable cannot be sent to a pinqpy server (the server runs no analyst "
            'code); write it as an expression string such as "income / 1000" or with pq.col'
        )
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, np.ndarray | pd.Index | pd.Series):
        v = list(v.tolist())
    if isinstance(v, tuple):
        return {"$": "tuple", "items": [encode_value(x) for x in v]}
    if isinstance(v, list):
        return [encode_value(x) for x in v]
    if isinstance(v, Mapping):
        return {"$": "map", "items": [[encode_value(k), encode_value(x)] for k, x in v.items()]}
    return value_to_data(v)


def decode_value(data: Any, depth: int = 0) -> Any:
    """The value :func:`encode_value` wrote; an expression comes back as a
    :class:`~pinqpy.Expression`, so the API reads it as the analyst's ``pq.col``."""
    if depth > _MAX_DEPTH:
        raise PinqError("a value in the request is nested too deeply")
    if isinstance(data, list):
        return [decode_value(x, depth + 1) for x in data]
    if isinstance(data, dict):
        tag = data.get("$")
        if tag == "expr":
            return Expression(expr_from_data(data.get("tree")))
        if tag == "tuple" and isinstance(data.get("items"), list):
            return tuple(decode_value(x, depth + 1) for x in data["items"])
        if tag == "map" and isinstance(data.get("items"), list):
            out = {}
            for kv in data["items"]:
                if not (isinstance(kv, list) and len(kv) == 2):
                    raise PinqError("a mapping in the request is malformed")
                key = decode_value(kv[0], depth + 1)
                try:
                    out[key] = decode_value(kv[1], depth + 1)
                except TypeError:
                    raise PinqError("a mapping key in the request cannot be a key") from None
            return out
    return value_from_data(data)


def encode_args(kwargs: Mapping[str, object]) -> dict[str, Any]:
    """Keyword arguments as JSON data (see :func:`encode_value`)."""
    return {str(k): encode_value(v) for k, v in kwargs.items()}


def decode_args(data: Any) -> dict[str, Any]:
    """Keyword arguments from JSON data; names must be plain identifiers."""
    if not isinstance(data, dict):
        raise PinqError("args must be an object of named arguments")
    out = {}
    for k, v in data.items():
        if not (isinstance(k, str) and k.isidentifier() and not k.startswith("_")):
            raise PinqError(f"{str(k)[:40]!r} is not an argument name")
        out[k] = decode_value(v)
    return out


# -- tables ------------------------------------------------------------------------------------
def _cell(x: object) -> Any:
    if x is None or x is pd.NaT or x is pd.NA:
        return None
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and math.isnan(x):
        return {"$": "float", "value": "nan"}
    return value_to_data(x)


def _labels(index: pd.Index) -> dict[str, Any]:
    if isinstance(index, pd.RangeIndex):
        return {"range": [index.start, index.stop, index.step], "names": [index.name]}
    return {
        "values": [_cell(x) for x in index.tolist()],
        "names": [None if n is None else str(n) for n in index.names],
        "dtype": str(index.dtype),
    }


def _index(data: Any) -> pd.Index:
    if not isinstance(data, dict):
        raise PinqError("a table's index is malformed")
    names = data.get("names") or [None]
    if "range" in data:
        start, stop, step = (int(x) for x in data["range"])
        return pd.RangeIndex(start, stop, step, name=names[0])
    values = [value_from_data(x) for x in data.get("values", [])]
    if len(names) > 1:
        return pd.MultiIndex.from_tuples(values, names=names)
    idx = pd.Index(values, name=names[0], dtype=object)
    return _typed(idx, str(data.get("dtype", "object")))


def _typed(values: Any, dtype: str) -> Any:
    """Values in their original dtype when it is a plain one; object otherwise."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is not None and dt.kind in "biufM" and not dt.hasobject:
        try:
            return values.astype(dt)
        except (TypeError, ValueError, OverflowError):
            return values
    if dtype in ("category", "string", "str") or dtype.startswith("string"):
        try:
            return values.astype(dtype)
        except (TypeError, ValueError):
            return values
    return values


def encode_frame(df: pd.DataFrame) -> dict[str, Any]:
    """A DataFrame column by column: names, dtypes, cells and index."""
    if not isinstance(df, pd.DataFrame):
        raise PinqError(f"a table must be a pandas DataFrame, not {type(df).__name__}")
    cols = []
    for name in df.columns:
        col = df[name]
        if isinstance(col, pd.DataFrame):
            raise PinqError(f"the table has two columns named {name!r}")
        if col.dtype.kind == "M":
            cells = [_cell(pd.Timestamp(x) if pd.notna(x) else None) for x in col.tolist()]
        else:
            cells = [_cell(x) for x in col.tolist()]
        cols.append({"name": value_to_data(name), "dtype": str(col.dtype), "values": cells})
    return {"columns": cols, "index": _labels(df.index)}


def decode_frame(data: Any) -> pd.DataFrame:
    """The DataFrame :func:`encode_frame` wrote."""
    if not isinstance(data, dict) or not isinstance(data.get("columns"), list):
        raise PinqError("a table in the request is malformed")
    index = _index(data.get("index", {"range": [0, 0, 1]}))
    out: dict[Any, Any] = {}
    for col in data["columns"]:
        if not isinstance(col, dict) or not isinstance(col.get("values"), list):
            raise PinqError("a table column in the request is malformed")
        name = value_from_data(col.get("name"))
        values = pd.Series([value_from_data(x) for x in col["values"]], dtype=object)
        if len(values) != len(index):
            raise PinqError("a table column in the request has the wrong length")
        out[name] = _typed(values, str(col.get("dtype", "object"))).to_numpy()
    if len(set(map(repr, out))) != len(data["columns"]):
        raise PinqError("a table in the request has two columns with the same name")
    return pd.DataFrame(out, index=index)


# -- results -----------------------------------------------------------------------------------
def _cost(c: Cost) -> dict[str, str]:
    return {"epsilon": str(Fraction(c.epsilon)), "delta": str(Fraction(c.delta))}


def _read_cost(data: Any) -> Cost:
    try:
        return Cost(Fraction(data["epsilon"]), Fraction(data["delta"]))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        raise PinqError("the server sent a malformed cost") from None


def _acc(acc: Accuracy) -> Any:
    try:
        return to_data(acc)
    except NotStorable:
        raise PinqError("this result has no form that can be sent") from None


def _read_acc(data: Any) -> Accuracy:
    acc = from_data(data)
    if not isinstance(acc, Accuracy):
        raise PinqError("the server sent a malformed result (an accuracy was expected)")
    return acc


def encode_result(obj: object) -> dict[str, Any]:
    """A result as JSON data: noisy values, labels, Series and frames keep their accuracy."""
    if isinstance(obj, NoisyValue | NoisyCount):
        return {"kind": "value", "accuracy": _acc(obj.accuracy)}
    if isinstance(obj, _Label):
        return {
            "kind": "label",
            "candidate": encode_value(obj.candidate),
            "accuracy": _acc(obj.accuracy),
        }
    if isinstance(obj, NoisySeries):
        return {
            "kind": "series",
            "accuracy": _acc(obj.accuracy),
            "index": _labels(obj._pq_keys),
            "name": value_to_data(obj.name),
        }
    if isinstance(obj, NoisyFrame):
        return {
            "kind": "frame",
            "data": encode_frame(pd.DataFrame(obj)),
            "accuracy": [[value_to_data(c), _acc(a)] for c, a in obj.accuracy.items()],
        }
    if isinstance(obj, Explanation):
        charges = {str(k): _cost(v) for k, v in getattr(obj, "charges", {}).items()}
        return {"kind": "explanation", "text": str(obj), "charges": charges}
    if isinstance(obj, AccuracyPreview):
        out = {}
        for f in dc_fields(obj):
            v = getattr(obj, f.name)
            if f.name == "charge":
                out[f.name] = {str(k): _cost(c) for k, c in v.items()}
            else:
                out[f.name] = to_data(v)
        return {"kind": "preview", "fields": out}
    if isinstance(obj, pd.DataFrame):
        return {"kind": "table", "data": encode_frame(obj)}
    if isinstance(obj, pd.Series):
        return {
            "kind": "plain_series",
            "index": _labels(obj.index),
            "name": value_to_data(obj.name),
            "items": [encode_result(x) for x in obj.tolist()],
        }
    if isinstance(obj, Cost):
        return {"kind": "cost", "cost": _cost(obj)}
    if isinstance(obj, SelectedKeys):  # released keys and the noisy counts released with them
        return {
            "kind": "keys",
            "items": [encode_value(x) for x in obj],
            "counts": encode_result(obj.counts),
        }
    if isinstance(obj, Marginals):
        return _encode_marginals(obj)
    if isinstance(obj, list):
        return {"kind": "list", "items": [encode_value(x) for x in obj]}
    return {"kind": "plain", "value": encode_value(obj)}


def _encode_marginals(m: Marginals) -> dict[str, Any]:
    """Only the released noisy counts and the public domain travel; the model is fitted on
    the analyst's side."""
    attributes = [
        {"name": a.name, "labels": encode_value(list(a.labels)), "cuts": encode_value(a.cuts)}
        for a in m.attributes
    ]
    measured = [
        {"clique": list(c), "counts": encode_result(s)} for c, s in m.measurements.items()
    ]
    return {"kind": "marginals", "attributes": attributes, "measured": measured}


def _decode_marginals(data: dict[str, Any]) -> Marginals:
    try:
        attributes = [
            Attribute(str(a["name"]), tuple(decode_value(a["labels"])), decode_value(a["cuts"]))
            for a in data["attributes"]
        ]
        measured = []
        for item in data["measured"]:
            counts = decode_result(item["counts"])
            if not isinstance(counts, NoisySeries):
                raise TypeError
            measured.append((tuple(str(c) for c in item["clique"]), counts))
        return Marginals(attributes, measured)
    except (KeyError, TypeError, ValueError):
        raise PinqError("the server sent malformed marginals") from None


def decode_result(data: Any) -> Any:
    """The result :func:`encode_result` wrote, as the same pinqpy type."""
    if not isinstance(data, dict):
        raise PinqError("the server sent a malformed result")
    kind = data.get("kind")
    if kind == "value":
        return NoisyValue.from_release(_read_acc(data.get("accuracy")))
    if kind == "label":
        return NoisyLabel(decode_value(data.get("candidate")), _read_acc(data.get("accuracy")))
    if kind == "series":
        acc = _read_acc(data.get("accuracy"))
        return NoisySeries.from_release(
            acc, index=_index(data.get("index")), name=value_from_data(data.get("name"))
        )
    if kind == "frame":
        frame = decode_frame(data.get("data"))
        accs = {value_from_data(c): _read_acc(a) for c, a in data.get("accuracy", [])}
        return NoisyFrame.from_release(frame, accs)
    if kind == "explanation":
        text = Explanation(str(data.get("text", "")))
        text.charges = {str(k): _read_cost(v) for k, v in dict(data.get("charges", {})).items()}
        return text
    if kind == "preview":
        got = dict(data.get("fields", {}))
        values = {}
        for f in dc_fields(AccuracyPreview):
            if f.name == "charge":
                values[f.name] = {str(k): _read_cost(v) for k, v in dict(got["charge"]).items()}
            else:
                values[f.name] = from_data(got.get(f.name))
        return AccuracyPreview(**values)
    if kind == "table":
        return decode_frame(data.get("data"))
    if kind == "plain_series":
        items = [decode_result(x) for x in data.get("items", [])]
        return pd.Series(
            items,
            index=_index(data.get("index")),
            name=value_from_data(data.get("name")),
            dtype=object,
        )
    if kind == "cost":
        return _read_cost(data.get("cost"))
    if kind == "keys":
        counts = decode_result(data.get("counts"))
        if not isinstance(counts, NoisySeries):
            raise PinqError("the server sent malformed keys (their counts were expected)")
        try:
            return SelectedKeys([decode_value(x) for x in data.get("items", [])], counts)
        except ValueError:
            raise PinqError("the server sent malformed keys (one count per key)") from None
    if kind == "marginals":
        return _decode_marginals(data)
    if kind == "list":
        return [decode_value(x) for x in data.get("items", [])]
    if kind == "plain":
        return decode_value(data.get("value"))
    raise PinqError("the server sent a result of a kind this pinqpy does not read")


# -- errors ------------------------------------------------------------------------------------
_ERRORS: dict[str, type[PinqError]] = {
    name: cls
    for name in _errors.__all__
    if isinstance(cls := getattr(_errors, name), type) and issubclass(cls, PinqError)
}


def encode_error(exc: BaseException) -> dict[str, Any]:
    """A pinqpy error as data: its nearest public class and its message (nothing else)."""
    cls = next(
        (k for k in type(exc).__mro__ if k in _ERRORS.values()),
        PinqError,
    )
    out: dict[str, Any] = {"type": cls.__name__}
    if isinstance(exc, PinqSyntaxError):
        out.update(
            message=exc.message,
            text=exc.text,
            line=exc.line,
            column=exc.column,
            expected=list(exc.expected),
        )
    else:
        out["message"] = str(exc)
    return out


def decode_error(data: Any) -> PinqError:
    """The pinqpy error :func:`encode_error` wrote (same class, same ``str``)."""
    if not isinstance(data, dict) or not isinstance(data.get("message"), str):
        return PinqError("the server answered with a malformed error")
    cls = _ERRORS.get(str(data.get("type")), PinqError)
    message = data["message"]
    if issubclass(cls, PinqSyntaxError):
        line, column = data.get("line"), data.get("column")
        return cls(
            message,
            text=data.get("text") if isinstance(data.get("text"), str) else None,
            line=line if isinstance(line, int) else None,
            column=column if isinstance(column, int) else None,
            expected=[str(x) for x in data.get("expected") or []],
        )
    if issubclass(cls, BudgetExceededError):
        return cls(message)
    return cls(message)
