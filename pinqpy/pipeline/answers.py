"""The answer cache: asking the same question again returns the same noisy answer, free.

Re-releasing an answer already released is post-processing, so it costs no privacy. A
question is the same when its canonical plan (:mod:`pinqpy.plan.canonical`), its aggregation and
input expression, its mechanism and every public parameter (epsilon, delta, bounds, q,
candidates) and its public keys all agree. The key does not depend on how the query was
spelt (method chaining or SQL, spacing, keyword case).

Answers are kept on the budgets the question was charged to. An in-memory key names each table
by its id, unique per registration, so new data registered later can never be answered from
old data; it is an HMAC under a secret drawn once per process. A budget with a ledger also
stores answers there (see :mod:`pinqpy.accounting.ledger`), keyed by the question over a hash
of the data's contents for a pandas table, so they survive a restart; a DuckDB or Spark table
(which would need a full scan to hash) is named by its id there too, so its answers are found
again for as long as the table stays registered (a server's life). The ledger stores only an
HMAC of that key under a secret of its own, and the audit trail shows no key at all. Either
way an analyst cannot recompute a key for a guessed dataset and compare.

The answers in memory are an :class:`~pinqpy.core.lru.LRU` on each budget: unbounded by
default, bounded on a server's budgets (``answers_in_memory``), where each answer weighs
:func:`weight` (1, and 1 more per 8 KB of arrays it holds). An answer dropped from memory is
read back from the ledger; one the ledger could not store (below) is charged again if it is
asked again, which costs more, never less.

Answers are stored in the ledger as JSON data (numbers, text, lists and the fields of
pinqpy's own result objects, rebuilt without running any of their code), never pickled, so a
row planted in the file cannot run code in the curator's process.

While a test hook is in force (:func:`pinqpy.testing.no_noise` or :func:`pinqpy.testing.seed`)
nothing is cached and no cached answer is served.
"""

from __future__ import annotations

import hashlib
import json
import math
import weakref
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from pinqpy.accounting.agents import flatten
from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise
from pinqpy.plan.canonical import NotCanonical, canonical_plan, digest
from pinqpy.plan.catalog import Catalog
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.nodes import TableRef

__all__ = [
    "NotStorable",
    "decode",
    "encode",
    "fingerprint",
    "from_data",
    "get",
    "grid_digest",
    "key",
    "persistent_key",
    "put",
    "to_data",
    "weight",
]

_FINGERPRINTS: weakref.WeakKeyDictionary[TableRef, str] = weakref.WeakKeyDictionary()


def _tables(plan: Any) -> list[TableRef]:
    out: list[TableRef] = []
    stack = [plan]
    while stack:
        node = stack.pop()
        table = getattr(node, "table", None)
        if isinstance(table, TableRef):
            out.append(table)
        stack.extend(node.children)
    return out


def _mechanism_text(mechanism: Any) -> str:
    parts = [type(mechanism).__name__, f"eps={mechanism.epsilon!r}", f"delta={mechanism.delta!r}"]
    # ci_share: a quantile with a paid interval is a different release from one without.
    for name in ("lo", "hi", "q", "sensitivity", "ci_share"):
        if hasattr(mechanism, name):
            parts.append(f"{name}={getattr(mechanism, name)!r}")
    # Calibrated for one changed row (a public-size table's rows): another release. Named
    # only when set, so every other question keeps the key it had.
    if getattr(mechanism, "changed_row", False):
        parts.append("changed_row")
    return ",".join(parts)


def question(prepared: Any, grouping: Grouping | None, identity: Any) -> str | None:
    """The canonical text of a prepared aggregation, or None when it cannot be cached."""
    if prepared.what is None:
        return None
    try:
        rel = prepared.relation
        plan = canonical_plan(rel.plan, identity, rel.catalog)
    except NotCanonical:
        return None
    groups = "" if grouping is None else f"{grouping.columns!r}:{grouping.keys!r}"
    return f"{plan}|{prepared.what}|{_mechanism_text(prepared.mechanism)}|{groups}"


def grid_digest(values: np.ndarray) -> str:
    """A digest of a whole array of public parameters (a quantile's candidate grid): its
    dtype, shape and every byte, so two grids share a cache key only when they are equal."""
    arr = np.ascontiguousarray(values)
    h = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


def key(prepared: Any, grouping: Grouping | None) -> str | None:
    """The in-memory cache key of a prepared aggregation (tables named by identity), or None
    when it cannot be cached (a callable, or a test hook in force)."""
    if _noise.hooks_active():
        return None
    text = question(prepared, grouping, lambda t: f"{t.name}#{t.id}")
    if text is None:
        return None
    return digest(text)


def fingerprint(table: TableRef, catalog: Catalog) -> str:
    """A hash of a table's name, schema and contents, computed once per table.

    Only budgets with a ledger need it (to recognise the same data after a restart); it is
    one pass over the data, kept in this process only: it is one input of a question's
    persistent key, which the ledger stores only as an HMAC under its own secret and never
    shows. Only pandas tables have one.
    """
    found = _FINGERPRINTS.get(table)
    if found is None:
        import pandas as pd

        data = catalog.data(table)
        if not isinstance(data, pd.DataFrame):
            # A DuckDB or Spark table would need a full scan to hash; such answers are cached
            # in memory only (the ledger still records every charge).
            raise NotCanonical
        h = hashlib.sha256()
        h.update(
            repr((table.name, tuple(map(str, data.columns)), tuple(map(str, data.dtypes)))).encode()
        )
        h.update(
            pd.util.hash_pandas_object(_hashable_values(data), index=False).to_numpy().tobytes()
        )
        found = h.hexdigest()[:32]
        _FINGERPRINTS[table] = found
    return found


def _hashable_values(data: Any) -> Any:
    """``data`` with each value pandas cannot hash (a list in an object column) spelt as a
    tagged text of its type and repr, so that every table has a fingerprint."""
    import pandas as pd

    fixed = {}
    for i in range(data.shape[1]):
        s = data.iloc[:, i]
        if s.dtype != object:
            continue
        objs = s.to_numpy(dtype=object)
        bad = [j for j, x in enumerate(objs) if not _can_hash(x)]
        if bad:
            objs = objs.copy()
            for j in bad:
                objs[j] = f"\x00unhashable {type(objs[j]).__name__} {_spelling(objs[j])}"
            fixed[i] = pd.Series(objs, index=s.index, dtype=object)
    if not fixed:
        return data
    out = data.copy()
    for i, col in fixed.items():
        out.isetitem(i, col)
    return out


def _spelling(x: object) -> str:
    try:
        return repr(x).encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    except Exception:  # nested too deeply to spell: this process's identity of it
        return f"id {id(x)}"


def _can_hash(x: object) -> bool:
    try:
        hash(x)
    except Exception:
        return False
    return True


def _stored_identity(table: TableRef, catalog: Catalog) -> str:
    """How the ledger's key names a table: its contents' hash (pandas), else its id."""
    try:
        return fingerprint(table, catalog)
    except NotCanonical:
        return f"registration {table.id}"


def persistent_key(
    prepared: list[Any], grouping: Grouping | None, budgets: list[Any]
) -> str | None:
    """The ledger's cache key for one call's aggregations together (None if any can't be, or
    while a test hook is in force).

    Stable across processes (so answers of pandas tables survive a restart; see the module
    docstring for the others), and never stored or shown as is: the ledger keys its answers
    by an HMAC of it under the ledger's own secret.
    """
    if _noise.hooks_active():
        return None
    parts = []
    for p in prepared:
        catalog = p.relation.catalog
        text = question(p, grouping, lambda t, c=catalog: _stored_identity(t, c))
        if text is None:
            return None
        parts.append(text)
    names = ",".join(sorted(b._ledger_name for b in budgets))
    text = names + "|" + "||".join(parts)
    return "ledger:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _budgets(lineage: Mapping[object, Any]) -> list[Any]:
    return sorted(flatten(lineage), key=id)


def get(cache_key: str | None, lineage: Mapping[object, Any]) -> tuple[Any, Any] | None:
    """A stored answer for this question over these budgets, or None."""
    if cache_key is None or _noise.hooks_active():
        return None
    budgets = _budgets(lineage)
    if not budgets:
        return None
    entry = budgets[0]._answers.get(cache_key)
    if entry is not None:
        return entry[0]
    for b in budgets:
        stored = b._ledger_answer(cache_key) if hasattr(b, "_ledger_answer") else None
        if stored is not None:
            return decode(stored)
    return None


def weight(entry: tuple[Any, Any]) -> int:
    """What an in-memory answer weighs in a bounded cache: 1, plus 1 for every 8,000 bytes
    of arrays it holds (a count or a mean: 1; a histogram over 100,000 keys, or a quantile
    whose accuracy keeps a grid of 100,000 candidates: about 100), so a cache's capacity
    bounds its memory: about 1.5 KB per answer and 8 KB per unit of weight beyond the first.
    The arrays are found in the answer's values and its result objects' fields, a few levels
    deep."""
    return 1 + _array_bytes(entry[0], set(), 0) // 8000


def _array_bytes(x: Any, seen: set[int], depth: int) -> int:
    if depth > 6 or id(x) in seen or x is None or isinstance(x, str | int | float | bool):
        return 0
    seen.add(id(x))
    if isinstance(x, np.ndarray):
        if x.dtype != object or x.size == 0:
            return int(x.nbytes)
        # an array of objects: its first items, scaled to its size, stand for all of them
        sample = x.ravel()[:64]
        held = sum(_array_bytes(v, seen, depth + 1) for v in sample)
        return int(x.nbytes) + held * x.size // len(sample)
    if isinstance(x, tuple | list):
        return sum(_array_bytes(v, seen, depth + 1) for v in x)
    if isinstance(x, dict):
        return sum(_array_bytes(v, seen, depth + 1) for v in x.values())
    if isinstance(x, Fraction | np.generic):
        return 0
    return sum(_array_bytes(v, seen, depth + 1) for v in _fields(x).values())


def put(
    cache_key: str | None, lineage: Mapping[object, Any], released: tuple[Any, Any], plan: Any
) -> None:
    if cache_key is None or _noise.hooks_active():
        return
    # The entry holds the plan's tables (their ids are unique anyway), and so their
    # fingerprints while it lives.
    tables = _tables(plan)
    for b in _budgets(lineage):
        b._answers[cache_key] = (released, tables)


# -- answers as data ------------------------------------------------------------------------
# An answer is a list of (values, accuracy) pairs: numpy arrays and pinqpy's result objects.
# They are written as JSON, each non-JSON value tagged: {"$": tag, ...}. Only the classes
# named here are rebuilt, by allocating the object and filling in its fields (no __init__,
# no __setstate__, no property setter runs), and only from JSON data; anything else is
# refused. An answer holding something else is not stored (it stays cached in memory).

_CLASSES: dict[str, tuple[str, str]] = {
    name: (module, name)
    for module, names in (
        (
            "pinqpy.results.noise",
            (
                "LaplaceNoise", "GaussianNoise", "DiscreteLaplaceNoise", "DiscreteGaussianNoise",
                "LatticeNoise", "ZeroNoise",
            ),
        ),
        ("pinqpy.results.accuracy", ("AdditiveAccuracy", "ArgmaxAccuracy")),
        (
            "pinqpy.accounting.charges",
            ("PureCharge", "GaussianCharge", "DiscreteGaussianCharge", "CompositeCharge"),
        ),
        ("pinqpy.noise.mechanisms.base", ("_Noise",)),
        ("pinqpy.noise.mechanisms.additive", ("CountMechanism", "SumMechanism", "_NoCountNoise")),
        (
            "pinqpy.noise.mechanisms.mean",
            ("MeanMechanism", "MeanAccuracy", "PublicSizeMeanAccuracy"),
        ),
        ("pinqpy.noise.mechanisms.variance", ("VarianceMechanism", "VarianceAccuracy")),
        ("pinqpy.noise.mechanisms.quantile", ("QuantileMechanism", "QuantileAccuracy")),
        ("pinqpy.noise.mechanisms.argmax", ("ArgmaxMechanism",)),
        ("pinqpy.core.lattice", ("Lattice",)),
    )
    for name in names
}  # fmt: skip
#: numpy dtypes an array or scalar may have in a stored answer.
_DTYPE_KINDS = "biuf"
_MAX_DEPTH = 64
_FORMAT = 1


class NotStorable(Exception):
    """The answer holds a value that has no data form; it is not stored in the ledger."""


def _class(name: str) -> type:
    import importlib

    where = _CLASSES.get(name) if isinstance(name, str) else None
    if where is None:
        raise PinqError(f"the ledger holds an answer of an unknown kind {str(name)[:40]!r}")
    cls = getattr(importlib.import_module(where[0]), where[1])
    assert isinstance(cls, type)
    return cls


def _fields(obj: object) -> dict[str, Any]:
    out = dict(getattr(obj, "__dict__", {}))
    for klass in type(obj).__mro__:
        for slot in getattr(klass, "__slots__", ()):
            if slot not in ("__dict__", "__weakref__") and hasattr(obj, slot):
                out[slot] = getattr(obj, slot)
    return out


def _to_data(x: Any, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise NotStorable
    if x is None or isinstance(x, bool | str):
        return x
    if isinstance(x, Fraction):  # Exact too
        tag = "exact" if type(x).__name__ == "Exact" else "frac"
        return {"$": tag, "n": x.numerator, "d": x.denominator}
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x) if math.isfinite(x) else {"$": "float", "v": repr(float(x))}
    if isinstance(x, np.ndarray):
        if x.dtype.kind in _DTYPE_KINDS:
            items = [_to_data(v) for v in x.ravel().tolist()]
            return {"$": "nd", "dtype": x.dtype.str, "shape": list(x.shape), "v": items}
        if x.dtype.kind in "OU":  # labels (argmax candidates): each item stored as data
            items = [_to_data(v, depth + 1) for v in x.ravel().tolist()]
            return {"$": "nd", "dtype": x.dtype.str, "shape": list(x.shape), "v": items}
        raise NotStorable
    if isinstance(x, np.generic):
        if x.dtype.kind not in _DTYPE_KINDS:
            raise NotStorable
        return {"$": "np", "dtype": x.dtype.str, "v": _to_data(x.item())}
    if isinstance(x, list):
        return [_to_data(v, depth + 1) for v in x]
    if isinstance(x, tuple):
        return {"$": "tuple", "v": [_to_data(v, depth + 1) for v in x]}
    if isinstance(x, dict):
        return {
            "$": "dict",
            "v": [[_to_data(k, depth + 1), _to_data(v, depth + 1)] for k, v in x.items()],
        }
    name = type(x).__name__
    if _CLASSES.get(name) != (type(x).__module__, name):
        raise NotStorable
    fields = {k: _to_data(v, depth + 1) for k, v in _fields(x).items()}
    return {"$": "obj", "cls": name, "f": fields}


def _int(x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise PinqError("the ledger holds a malformed answer (a number was expected)")
    return x


def _dtype(text: Any, kinds: str) -> np.dtype:
    try:
        dt = np.dtype(str(text))
    except TypeError:
        raise PinqError("the ledger holds an answer with an unknown dtype") from None
    if dt.kind not in kinds or (dt.hasobject and dt.kind != "O"):
        raise PinqError("the ledger holds an answer with a dtype pinqpy does not store")
    return dt


def _from_data(x: Any, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise PinqError("the ledger holds a malformed answer (nested too deeply)")
    if x is None or isinstance(x, bool | int | float | str):
        return x
    if isinstance(x, list):
        return [_from_data(v, depth + 1) for v in x]
    if not isinstance(x, dict):
        raise PinqError("the ledger holds a malformed answer")
    tag = x.get("$")
    read = _READERS.get(tag) if isinstance(tag, str) else None
    if read is None:
        raise PinqError("the ledger holds a malformed answer (an unknown tag)")
    return read(x, depth)


def _read_fraction(x: dict[str, Any], depth: int) -> Any:
    """``frac`` (a Fraction) or ``exact`` (an Exact of it)."""
    den = _int(x.get("d"))
    if den == 0:
        raise PinqError("the ledger holds a malformed answer (a zero denominator)")
    value = Fraction(_int(x.get("n")), den)
    if x.get("$") == "exact":
        from pinqpy.core.exact import Exact

        return Exact.of(value)
    return value


def _read_float(x: dict[str, Any], depth: int) -> float:
    """``float``: a float JSON cannot spell (nan, inf, -inf)."""
    v = x.get("v")
    if v not in ("nan", "inf", "-inf"):
        raise PinqError("the ledger holds a malformed answer (a float was expected)")
    return float(v)


def _read_array(x: dict[str, Any], depth: int) -> np.ndarray:
    """``nd``: a numpy array, its items in order, then its shape."""
    dt = _dtype(x.get("dtype"), _DTYPE_KINDS + "OU")
    items = x.get("v")
    shape = x.get("shape")
    if not isinstance(items, list) or not isinstance(shape, list):
        raise PinqError("the ledger holds a malformed answer (an array)")
    values = [_from_data(v, depth + 1) for v in items]
    try:
        if dt.kind == "O":
            arr = np.empty(len(values), dtype=object)
            for i, v in enumerate(values):  # item by item: tuples stay whole
                arr[i] = v
        else:
            arr = np.array(values, dtype=dt)
        if arr.ndim != 1:
            raise ValueError
        return arr.reshape([_int(n) for n in shape])
    except (ValueError, TypeError, OverflowError):
        raise PinqError("the ledger holds a malformed answer (an array)") from None


def _read_numpy_number(x: dict[str, Any], depth: int) -> Any:
    """``np``: a numpy scalar of a numeric dtype."""
    dt = _dtype(x.get("dtype"), _DTYPE_KINDS)
    v = x.get("v")
    if isinstance(v, dict):
        v = _from_data(v, depth + 1)
    if not isinstance(v, bool | int | float):
        raise PinqError("the ledger holds a malformed answer (a numpy number)")
    try:
        return dt.type(v)
    except (ValueError, TypeError, OverflowError):
        raise PinqError("the ledger holds a malformed answer (a numpy number)") from None


def _read_tuple(x: dict[str, Any], depth: int) -> tuple[Any, ...]:
    items = x.get("v")
    if not isinstance(items, list):
        raise PinqError("the ledger holds a malformed answer (a tuple)")
    return tuple(_from_data(v, depth + 1) for v in items)


def _read_mapping(x: dict[str, Any], depth: int) -> dict[Any, Any]:
    """``dict``: key-value pairs, so that keys may be any stored value."""
    items = x.get("v")
    if not isinstance(items, list) or not all(
        isinstance(kv, list) and len(kv) == 2 for kv in items
    ):
        raise PinqError("the ledger holds a malformed answer (a mapping)")
    out = {}
    for k, v in items:
        kk = _from_data(k, depth + 1)
        try:
            out[kk] = _from_data(v, depth + 1)
        except TypeError:
            raise PinqError("the ledger holds a malformed answer (a mapping key)") from None
    return out


def _read_object(x: dict[str, Any], depth: int) -> Any:
    """``obj``: one of pinqpy's result classes, its fields set without running its code."""
    cls = _class(x.get("cls"))  # type: ignore[arg-type]
    fields = x.get("f")
    if not isinstance(fields, dict):
        raise PinqError("the ledger holds a malformed answer (an object)")
    obj = object.__new__(cls)
    slots = {s for k in cls.__mro__ for s in getattr(k, "__slots__", ())}
    has_dict = hasattr(obj, "__dict__")
    for name, value in fields.items():
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
            raise PinqError("the ledger holds a malformed answer (a field name)")
        v = _from_data(value, depth + 1)
        if name in slots:
            object.__setattr__(obj, name, v)  # a slot: C-level storage, no user code
        elif has_dict:
            obj.__dict__[name] = v
        else:
            raise PinqError("the ledger holds a malformed answer (an unknown field)")
    return obj


# The reader of each tag that _to_data writes.
_READERS: dict[str, Callable[[dict[str, Any], int], Any]] = {
    "frac": _read_fraction,
    "exact": _read_fraction,
    "float": _read_float,
    "nd": _read_array,
    "np": _read_numpy_number,
    "tuple": _read_tuple,
    "dict": _read_mapping,
    "obj": _read_object,
}


def to_data(released: Any) -> Any:
    """An answer (or any value made of pinqpy's result objects) as JSON data; raises
    :class:`NotStorable` if it has no data form."""
    try:
        return _to_data(released)
    except RecursionError:
        raise NotStorable from None


def from_data(data: Any) -> Any:
    """The value :func:`to_data` wrote; rebuilds only pinqpy's own result classes."""
    try:
        return _from_data(data)
    except RecursionError:
        raise PinqError("the ledger holds a malformed answer (nested too deeply)") from None


def encode(released: Any) -> str:
    """An answer as JSON text for the ledger; raises :class:`NotStorable` if it has no data
    form."""
    try:
        return json.dumps({"format": _FORMAT, "answer": _to_data(released)}, allow_nan=False)
    except (ValueError, TypeError, OverflowError, RecursionError):  # e.g. an int too long
        raise NotStorable from None


def decode(text: str) -> Any:
    """The answer :func:`encode` wrote. Rebuilds only pinqpy's own result classes, from data;
    anything else in the text raises :class:`~pinqpy.PinqError`."""
    try:
        doc = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        raise PinqError("the ledger holds an answer that is not valid JSON") from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT or "answer" not in doc:
        raise PinqError("the ledger holds an answer in a format this pinqpy does not read")
    try:
        return _from_data(doc["answer"])
    except RecursionError:
        raise PinqError("the ledger holds a malformed answer (nested too deeply)") from None
