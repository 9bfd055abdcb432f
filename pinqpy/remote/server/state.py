"""The server's state: its tables, its ledger-backed budgets, and one session per analyst.

:class:`ServerState` is everything a request is answered from, built once from a
:class:`~pinqpy.remote.server.config.ServerConfig`:

* each table is opened once (:func:`open_table`) and registered, with the curator's public
  facts, in the :class:`~pinqpy.api.session.Session` of every analyst it is granted to;
  an analyst's session holds only their granted tables, under the config's names;
* every budget is a :class:`~pinqpy.Budget` kept in the config's ledger file, one object per
  ledger name for the server's life: ``analyst:<name>/<table>`` for an analyst's own budget,
  ``group:<group>/<table>`` for a group's, which every member's frame of that table draws on.
  Charges go through the ledger (one SQLite transaction each, under the file's write lock), so
  concurrent requests never overspend, and a restart restores every budget's spent and the
  answers already released;
* each analyst has a :class:`~pinqpy.remote.server.replay.PartitionRegistry`.

The operations (:meth:`ServerState.session_doc`, :meth:`ServerState.aggregate`, ...) are plain
synchronous functions of an analyst and a request body; :mod:`pinqpy.remote.server.app` runs
them in worker threads. They answer exactly as the local API does, since they call it: the
aggregation endpoint replays the plan and calls the real ``PrivateFrame`` (or ``Partition``)
method with the decoded arguments; the SQL endpoint calls the analyst's ``Session.sql``.

Test hooks: the server never turns one on for a request. A server started in testing mode
(``--testing no-noise`` or ``--testing seed=N``, only with ``PINQPY_TESTING=1`` in the
curator's environment) runs every request under that hook, one request at a time; with
``seed=N`` the source is re-seeded with ``N`` before each request, so a request's answer is
the local answer under ``pinqpy.testing.seed(N)``. A server not in testing mode refuses to
answer while a hook is somehow in force (:class:`HookActive`).
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pandas as pd

from pinqpy.accounting.budget import Budget
from pinqpy.accounting.cost import Cost
from pinqpy.accounting.ledger import Ledger
from pinqpy.api.frame import PrivateFrame
from pinqpy.api.partition import Partition
from pinqpy.api.session import Session
from pinqpy.core.version import __version__
from pinqpy.engines.registry import Wrapped, read_file, wrap
from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.serialize import plan_to_data
from pinqpy.remote.protocol import decode_args, decode_value
from pinqpy.remote.server.auth import TokenStore
from pinqpy.remote.server.config import AnalystSpec, ServerConfig, TableSpec
from pinqpy.remote.server.replay import (
    LimitExceeded,
    PartitionRegistry,
    Replayer,
    public_tables,
)

__all__ = [
    "FRAME_METHODS",
    "PARTITION_METHODS",
    "AnalystState",
    "HookActive",
    "ServerState",
    "cost_doc",
    "open_table",
    "parse_testing",
]

#: The aggregations a request may call on a frame, and on a partition (per key).
FRAME_METHODS = ("count", "sum", "mean", "median", "quantile", "argmax", "select_keys", "accuracy")
PARTITION_METHODS = ("count", "sum", "mean", "median", "quantile", "argmax")
# Arguments that list public values: bounded by max_keys like partition keys.
_LIST_ARGS = ("candidates", "keys")


class HookActive(Exception):
    """A test hook is in force in a server that is not in testing mode (never a pinqpy error:
    the request is refused as an internal fault)."""


def parse_testing(mode: str | None) -> tuple[str, int] | None:
    """``"no-noise"`` -> ("no-noise", 0); ``"seed=N"`` -> ("seed", N); None -> None."""
    if mode is None:
        return None
    if mode == "no-noise":
        return ("no-noise", 0)
    if mode.startswith("seed="):
        try:
            return ("seed", int(mode[len("seed=") :]))
        except ValueError:
            pass
    raise PinqError(f"--testing takes no-noise or seed=N, not {mode!r}")


def cost_doc(c: Cost) -> dict[str, str]:
    """A cost as exact text: ``{"epsilon": "1/2", "delta": "1/1000000"}``."""
    return {"epsilon": str(Fraction(c.epsilon)), "delta": str(Fraction(c.delta))}


def open_table(spec: TableSpec) -> Wrapped:
    """The engine handle of a configured table, opened once for the server's life."""
    schema = dict(spec.schema) if spec.schema is not None else None
    if spec.source in ("csv", "parquet"):
        return read_file(str(spec.path), spec.source, spec.engine, schema=schema)
    if spec.source == "spark":
        return read_file(str(spec.path), spec.format or "parquet", "spark", schema=schema)
    import duckdb

    try:
        con = duckdb.connect(str(spec.database), read_only=True)
    except duckdb.Error as err:
        raise PinqError(
            f"the duckdb database {str(spec.database)!r} of table {spec.name!r} cannot be "
            f"opened ({type(err).__name__})"
        ) from None
    return wrap(spec.table, "duckdb", con, schema)


@dataclass
class AnalystState:
    """One analyst: their session (granted tables only), budgets by table, partitions."""

    spec: AnalystSpec
    session: Session
    budgets: dict[str, Budget]
    registry: PartitionRegistry = field(default_factory=PartitionRegistry)

    @property
    def name(self) -> str:
        return self.spec.name

    def tables(self) -> dict[str, Relation]:
        """The server's relation of each granted table, by name."""
        return {t: self.session.table(t)._rel for t in self.spec.tables}


class ServerState:
    """Tables, budgets, sessions and tokens of a running server (see the module docstring)."""

    def __init__(self, config: ServerConfig, *, testing: str | None = None):
        self.config = config
        self.limits = config.limits
        self.testing = parse_testing(testing)
        self.tokens = TokenStore(config.tokens, config.analysts)
        self.tokens.load()
        self._serial = threading.Lock()
        self.ledger = Ledger(config.ledger)
        try:
            handles = {name: open_table(spec) for name, spec in config.tables.items()}
            budgets: dict[str, Budget] = {}
            self.analysts: dict[str, AnalystState] = {}
            for name, a in config.analysts.items():
                session = Session()
                mine = {}
                for t in a.tables:
                    ledger_name = a.ledger_name(t)
                    budget = budgets.get(ledger_name)
                    if budget is None:
                        budget = config.budget_spec(a).make(ledger=self.ledger, name=ledger_name)
                        budgets[ledger_name] = budget
                    mine[t] = budget
                    spec = config.tables[t]
                    session.register(
                        t,
                        handles[t],
                        budget=budget,
                        bounds=dict(spec.bounds),
                        keys={k: list(v) for k, v in spec.keys.items()},
                        privacy_unit=spec.privacy_unit,
                        max_rows=spec.max_rows,
                    )
                self.analysts[name] = AnalystState(a, session, mine)
        except BaseException:
            self.ledger.close()
            raise
        self.budgets = budgets

    def close(self) -> None:
        self.ledger.close()

    # -- requests ------------------------------------------------------------------------
    def authenticate(self, token: object) -> AnalystState | None:
        name = self.tokens.verify(token)
        return None if name is None else self.analysts.get(name)

    @contextlib.contextmanager
    def hooks(self) -> Iterator[None]:
        """The noise state a request runs under (see the module docstring)."""
        if self.testing is None:
            if _noise.hooks_active():
                raise HookActive
            yield
            return
        kind, value = self.testing
        with self._serial:
            if kind == "seed":
                _noise._set_source(_noise.SeededSource(value))
            else:
                _noise._set_noise_disabled(True)
            yield

    # -- operations: (analyst, request body) -> result ----------------------------------
    def budget_docs(self, a: AnalystState) -> list[dict[str, Any]]:
        out = []
        for table, b in a.budgets.items():
            out.append(
                {
                    "name": a.spec.ledger_name(table),
                    "tables": [table],
                    "accounting": b.accounting,
                    "total": cost_doc(b.total),
                    "spent": cost_doc(b.spent),
                    "remaining": cost_doc(b.remaining),
                }
            )
        return out

    def session_doc(self, a: AnalystState, body: Any = None) -> dict[str, Any]:
        return {
            "analyst": a.name,
            "version": __version__,
            "tables": [
                {
                    "name": t,
                    "plan": plan_to_data(a.session.table(t)._plan),
                    "budget": a.spec.ledger_name(t),
                }
                for t in a.spec.tables
            ],
            "budgets": self.budget_docs(a),
            "limits": self.limits.as_dict(),
        }

    def budget_doc(self, a: AnalystState, body: Any = None) -> dict[str, Any]:
        return {"budgets": self.budget_docs(a)}

    def audit(self, a: AnalystState, body: Any = None) -> pd.DataFrame:
        """This analyst's budgets' charges (the ledger's audit trail, oldest first)."""
        frames = [b.audit() for b in a.budgets.values()]
        return pd.concat(frames, ignore_index=True).sort_values(
            ["query_id", "budget"], kind="stable", ignore_index=True
        )

    def aggregate(self, a: AnalystState, body: Any) -> Any:
        """Replay the plan, then call the real aggregation with the decoded arguments."""
        body = _fields(body, ("plan", "method"), ("public", "partition", "args"))
        method = body["method"]
        partition = body.get("partition")
        allowed = FRAME_METHODS if partition is None else PARTITION_METHODS
        if not isinstance(method, str) or method not in allowed:
            what = "a frame" if partition is None else "a partition"
            shown = repr(method)[:40] if isinstance(method, str) else type(method).__name__
            raise PinqError(
                f"{shown} is not an aggregation of {what}; the aggregations are "
                + ", ".join(allowed)
            )
        args = decode_args(body.get("args", {}))
        for name in _LIST_ARGS:
            v = args.get(name)
            if isinstance(v, list | tuple | dict | set):
                self._check_count(len(v), f"{name} in {method}()")
        public = public_tables(body.get("public"), self.limits)
        replayer = Replayer(a.tables(), a.registry, self.limits, public)
        rel = replayer.relation(body["plan"])
        frame = PrivateFrame._wrap(rel)
        target: Any = frame
        if partition is not None:
            p = _fields(partition, ("columns",), ("keys",))
            keys = decode_value(p.get("keys"))
            ref, prel = replayer.partition(rel, p["columns"], keys)
            target = Partition(frame, prel, ref, PrivateFrame._wrap)
        fn = getattr(target, method)
        try:
            inspect.signature(fn).bind(**args)
        except TypeError as err:
            raise PinqError(f"{method}() was called with bad arguments: {err}") from None
        return fn(**args)

    def _check_count(self, n: int, what: str) -> None:
        if n > self.limits.max_keys:
            raise LimitExceeded(
                f"the request has {n} {what}; this server accepts at most {self.limits.max_keys}"
            )

    def sql(self, a: AnalystState, body: Any) -> Any:
        """The analyst's ``Session.sql`` (or ``Session.explain``) on the query text."""
        body = _fields(body, ("query",), ("epsilon", "delta", "explain"))
        query = body["query"]
        if not isinstance(query, str):
            raise PinqError("query must be the SQL text")
        if len(query) > self.limits.max_sql_chars:
            raise LimitExceeded(
                f"the query has {len(query)} characters; this server accepts at most "
                f"{self.limits.max_sql_chars}"
            )
        epsilon = decode_value(body.get("epsilon"))
        delta = decode_value(body.get("delta"))
        explain = body.get("explain", False)
        if not isinstance(explain, bool):
            raise PinqError("explain must be true or false")
        if explain:
            return a.session.explain(query, epsilon, delta)
        return a.session.sql(query, epsilon, delta)


def _fields(body: Any, required: tuple[str, ...], optional: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise PinqError("the request body must be a JSON object")
    for k in body:
        if k not in required and k not in optional:
            shown = repr(k)[:40]
            raise PinqError(
                f"the request has no field {shown}; its fields are "
                + ", ".join(required + optional)
            )
    for k in required:
        if k not in body:
            raise PinqError(f"the request needs its field {k!r}")
    return body
