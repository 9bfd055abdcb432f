"""The server's state: its tables, its ledger-backed budgets, and one session per analyst.

:class:`ServerState` is everything a request is answered from, built once from a
:class:`~pinqpy.remote.server.config.ServerConfig`:

* each table is opened once (:func:`open_table`) and registered, with the curator's public
  facts, in the :class:`~pinqpy.api.session.Session` of every analyst it is granted to;
  an analyst's session holds only their granted tables, under the config's names;
* every budget is a :class:`~pinqpy.Budget` kept in the config's ledger file, one object per
  analyst and table for the server's life, under its ledger name: ``analyst:<name>/<table>``
  for an analyst's own budget, ``group:<group>/<table>`` for a group's, which every member's
  frame of that table draws on. Each analyst reaches the file through a ledger of their own
  (:class:`~pinqpy.remote.server.trail.AnalystLedger`, a
  :class:`~pinqpy.remote.server.trail.MemberLedger` for a group member), whose audit trail
  numbers their queries for them and, in a group, keeps their own questions and answers
  apart. Charges go through the ledger, each checked under the file's write lock and
  committed (synced) before any data is read, several at once in one transaction when they
  come together (group commit, :mod:`pinqpy.accounting.group_commit`), so concurrent
  requests, threads or processes never overspend, and a restart restores every budget's
  spent and the answers already released;
* what each analyst keeps in memory is bounded by the config: their released answers
  (``answers_in_memory``, one :class:`~pinqpy.core.lru.LRU` for all their budgets; the
  ledger keeps every answer it can store), their budgets' latest :data:`HISTORY_KEPT`
  charges (the ledger keeps all), and their partitions' agents
  (:class:`~pinqpy.remote.server.replay.PartitionRegistry`, ``partitions_in_memory`` and
  ``partition_keys_in_memory``);
* the :class:`~pinqpy.remote.server.stopping.Gate` decides which requests read data now.

The operations (:meth:`ServerState.session_doc`, :meth:`ServerState.aggregate`, ...) are plain
synchronous functions of an analyst and a request body; :mod:`pinqpy.remote.server.app` runs
them in threads, or in the analyst's worker process (:mod:`pinqpy.remote.server.workers`),
which is a fork of this state. They answer exactly as the local API does, since they call it: the
aggregation endpoint replays the plan and calls the real ``PrivateFrame`` (or ``Partition``)
method with the decoded arguments; the SQL endpoint calls the analyst's ``Session.sql``.

Test hooks: the server never turns one on for a request. A server started in testing mode
(``--testing no-noise`` or ``--testing seed=N``, only with ``PINQPY_TESTING=1`` in the
curator's environment) runs every request under that hook, one request at a time; with
``seed=N`` the source is re-seeded with ``N`` before each request, so a request's answer is
the local answer under ``pinqpy.testing.seed(N)``. A server not in testing mode refuses to
answer while a hook is somehow in force (:class:`HookActive`). The hooks are process-wide
(module state of :mod:`pinqpy.noise.source`, under its lock), not per thread: a hook set for
one request is in force in every worker thread, which is why testing mode runs requests one
at a time, and why no request may ever set one.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pandas as pd

from pinqpy.accounting.budget import Budget
from pinqpy.accounting.cost import Cost
from pinqpy.accounting.ledger import Ledger
from pinqpy.api.aggregations import AGGREGATIONS, FRAME_AGGREGATIONS
from pinqpy.api.frame import PrivateFrame
from pinqpy.api.partition import Partition
from pinqpy.api.session import Session
from pinqpy.core.lru import LRU
from pinqpy.core.version import __version__
from pinqpy.engines.inferred import inferred_types_message
from pinqpy.engines.registry import Wrapped, read_file, wrap
from pinqpy.engines.wrapping.wrapped import type_sources
from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise
from pinqpy.pipeline import answers as _answers
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.nodes import Source
from pinqpy.plan.serialize import plan_to_data
from pinqpy.remote.protocol import decode_args, decode_value
from pinqpy.remote.server.auth import TokenStore
from pinqpy.remote.server.config import AnalystSpec, ServerConfig, TableSpec
from pinqpy.remote.server.replay import (
    DECODING_ERRORS,
    LimitExceeded,
    PartitionRegistry,
    Replayer,
    decoding,
    public_tables,
)
from pinqpy.remote.server.stopping import Gate
from pinqpy.remote.server.trail import AnalystLedger, MemberLedger, prepare

__all__ = [
    "FRAME_METHODS",
    "HISTORY_KEPT",
    "PARTITION_METHODS",
    "AnalystState",
    "BadArguments",
    "HookActive",
    "ServerState",
    "base_relation",
    "cost_doc",
    "inferred_type_warnings",
    "open_table",
    "parse_testing",
]

#: The aggregations a request may call on a frame, and on a partition (per key).
FRAME_METHODS = FRAME_AGGREGATIONS
PARTITION_METHODS = AGGREGATIONS
# Arguments that list public values: bounded by max_keys like partition keys.
_LIST_ARGS = ("candidates", "keys")
#: The charges each budget keeps in memory (``Budget.charges``, which no analyst reads on a
#: server: their audit trail is the ledger's, which keeps every charge).
HISTORY_KEPT = 100


class BadArguments(PinqError):
    """An aggregation that failed on its arguments with a Python error rather than a pinqpy
    one. The analyst is told which kind of error, never its text; the curator's log has the
    trace (``__cause__``)."""


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
    if spec.source == "postgres":
        url = os.environ.get(spec.connection_env or "")
        if not url:
            raise PinqError(
                f"table {spec.name!r} reads its PostgreSQL connection string from the "
                f"environment variable {spec.connection_env}, which is not set"
            )
        return wrap(spec.table or "", "postgres", url)
    import duckdb

    # The database is attached read-only to a connection of the server's own, where pinqpy
    # can make the views it reads through; the curator's file is never written.
    con = duckdb.connect()
    path = str(spec.database).replace("'", "''")
    try:
        con.execute(f"ATTACH '{path}' AS curated (READ_ONLY)")
    except duckdb.Error as err:
        raise PinqError(
            f"the duckdb database {str(spec.database)!r} of table {spec.name!r} cannot be "
            f"opened ({type(err).__name__})"
        ) from None
    return wrap(f"curated.{spec.table}", "duckdb", con, schema)


def inferred_type_warnings(state: ServerState) -> list[str]:
    """One line per served table whose column types were inferred from its file's rows (a
    CSV table without ``schema``), with the config line that declares them."""
    out: dict[str, str] = {}
    for analyst in state.analysts.values():
        for name, rel in analyst.sources.items():
            found = type_sources(rel.plan)
            types = {c: t for c, t in rel.schema.items() if found.get(c) == "inferred"}
            if types and name not in out:
                listed = ", ".join(f'{c} = "{t}"' for c, t in types.items())
                declare = f"schema = {{ {listed} }} under [tables.{name}]"
                out[name] = inferred_types_message(f"table {name}", declare)
    return list(out.values())


@dataclass
class AnalystState:
    """One analyst: their session (granted tables only), budgets by table, partitions."""

    spec: AnalystSpec
    session: Session
    budgets: dict[str, Budget]
    ledger: AnalystLedger
    registry: PartitionRegistry = field(default_factory=PartitionRegistry)
    sources: dict[str, Relation] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for t in self.spec.tables:
            self.sources[t] = base_relation(self.session.table(t)._rel)

    @property
    def name(self) -> str:
        return self.spec.name

    def tables(self) -> dict[str, Relation]:
        """The relation a plan's ``Source`` of each granted table stands for, by name: the
        table itself, before any step the session's frame adds on top (a configured
        ``max_rows`` is a ``BoundContributions`` node of the plan the analyst is handed,
        which the analyst's plan holds and replay rebuilds)."""
        return self.sources


def _engines(handles: Any) -> tuple[list[Any], list[Any], list[Any]]:
    """The DuckDB connections, Spark contexts and PostgreSQL connections the tables live in
    (what a request past its limit is interrupted in)."""
    duckdb: dict[int, Any] = {}
    spark: dict[int, Any] = {}
    postgres: dict[int, Any] = {}
    for h in handles:
        if h.engine == "duckdb":
            con = getattr(h.data, "connection", None)
            if con is not None:
                duckdb[id(con)] = con
        elif h.engine == "spark":
            session = getattr(h.data, "session", None) or getattr(h.data, "sparkSession", None)
            if session is not None:
                spark[id(session.sparkContext)] = session.sparkContext
        elif h.engine == "postgres":
            conn = h.data.link.connection
            postgres[id(conn)] = conn
    return list(duckdb.values()), list(spark.values()), list(postgres.values())


def base_relation(rel: Relation) -> Relation:
    """The relation of the one ``Source`` under a registered table's plan (the same node
    object every time, so plans of one table share it as they do locally)."""
    node = rel.plan
    while not isinstance(node, Source):
        (node,) = node.children
    return Relation(node, rel.catalog)


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
        self.ledgers: dict[str, AnalystLedger] = {}
        try:
            handles = {name: open_table(spec) for name, spec in config.tables.items()}
            if any(a.group is not None for a in config.analysts.values()):
                prepare(self.ledger)
            self.analysts: dict[str, AnalystState] = {
                name: self._analyst(a, handles) for name, a in config.analysts.items()
            }
        except BaseException:
            self.close()
            raise
        self.gate = Gate(self.limits.max_running, *_engines(handles.values()))

    def _analyst(self, a: AnalystSpec, handles: dict[str, Wrapped]) -> AnalystState:
        """An analyst's session and budgets, which they reach through a ledger of their own
        (:class:`~pinqpy.remote.server.trail.AnalystLedger`; a group member's keeps their
        own questions and answers apart): the same file, their queries numbered for them."""
        names = [a.ledger_name(t) for t in a.tables]
        kind = AnalystLedger if a.group is None else MemberLedger
        ledger = self.ledgers[a.name] = kind(self.config.ledger, a.name, names)
        lim = self.limits
        answers = LRU(lim.answers_in_memory, weight=_answers.weight)
        session = Session()
        mine = {}
        for t in a.tables:
            budget = self.config.budget_spec(a).make(ledger=ledger, name=a.ledger_name(t))
            budget._keep_in_memory(answers, HISTORY_KEPT)
            mine[t] = budget
            spec = self.config.tables[t]
            session.register(
                t,
                handles[t],
                budget=budget,
                bounds=dict(spec.bounds),
                keys={k: list(v) for k, v in spec.keys.items()},
                privacy_unit=spec.privacy_unit,
                max_rows=spec.max_rows,
                public_size=spec.public_size,
            )
        registry = PartitionRegistry(lim.partitions_in_memory, lim.partition_keys_in_memory)
        return AnalystState(a, session, mine, ledger, registry)

    def pandas_only(self, a: AnalystState) -> bool:
        """Whether every table granted to ``a`` is on the pandas engine (their requests can
        then run in a worker process, :mod:`pinqpy.remote.server.workers`)."""
        return all(self.config.tables[t].engine == "pandas" for t in a.spec.tables)

    def close(self) -> None:
        for ledger in self.ledgers.values():
            ledger.close()
        self.ledger.close()

    # -- requests ------------------------------------------------------------------------
    def authenticate(self, token: object) -> AnalystState | None:
        """The analyst a token belongs to, or None.

        A tokens file that became unusable while the server runs is the curator's fault, not
        the caller's: it is raised as a plain error (an internal fault, logged), so nobody
        without a token learns anything about the server's files."""
        try:
            name = self.tokens.verify(token)
        except PinqError as err:
            raise RuntimeError(str(err)) from None
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
            "tables": [self._table_doc(a, t) for t in a.spec.tables],
            "budgets": self.budget_docs(a),
            "limits": self.limits.as_dict(),
        }

    def _table_doc(self, a: AnalystState, table: str) -> dict[str, Any]:
        doc = {
            "name": table,
            "plan": plan_to_data(a.session.table(table)._plan),
            "budget": a.spec.ledger_name(table),
        }
        # A public row count changes the table's neighbour relation (one row changed, two
        # rows of stability): the client shows the stabilities the server charges. Its value
        # is not sent; the plan has no field for it, so a client cannot declare it.
        if self.config.tables[table].public_size:
            doc["public_size"] = True
        return doc

    def budget_doc(self, a: AnalystState, body: Any = None) -> dict[str, Any]:
        return {"budgets": self.budget_docs(a)}

    def audit(self, a: AnalystState, body: Any = None) -> pd.DataFrame:
        """This analyst's budgets' charges (the ledger's audit trail, oldest first), their
        queries numbered for them (:class:`~pinqpy.remote.server.trail.AnalystLedger`)."""
        return a.ledger.charges()

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
        with decoding("args"):
            args = decode_args(body.get("args", {}))
        for name in _LIST_ARGS:
            v = args.get(name)
            if isinstance(v, list | tuple | dict | set):
                self._check_count(len(v), f"{name} in {method}()")
        self._check_domains(method, args)
        public = public_tables(body.get("public"), self.limits)
        replayer = Replayer(a.tables(), a.registry, self.limits, public)
        rel = replayer.relation(body["plan"])
        frame = PrivateFrame._wrap(rel)
        target: Any = frame
        if partition is not None:
            p = _fields(partition, ("columns",), ("keys", "id"))
            with decoding("partition keys"):
                keys = decode_value(p.get("keys"))
            ref, prel = replayer.partition(rel, p["columns"], keys, p.get("id"))
            target = Partition(frame, prel, ref, PrivateFrame._wrap)
        fn = getattr(target, method)
        try:
            inspect.signature(fn).bind(**args)
        except TypeError as err:
            raise PinqError(f"{method}() was called with bad arguments: {err}") from None
        # DuckDB and Spark tables are read through connections the whole server shares,
        # one request at a time (the gate); pandas ones by each request on its own.
        with self.gate.hold(rel.engine != "pandas"):
            return _call(method, fn, args)

    def _check_domains(self, method: str, args: Mapping[str, Any]) -> None:
        """A marginals call's per-column keys and cuts are public lists like partition keys:
        each is bounded by max_keys too (its marginals' cells by the partition limit)."""
        for name in ("keys", "cuts"):
            given = args.get(name)
            if isinstance(given, dict):
                for column, values in given.items():
                    if isinstance(values, list | tuple | set):
                        self._check_count(len(values), f"{name}[{column!r}] in {method}()")

    def _check_count(self, n: int, what: str) -> None:
        if n > self.limits.max_keys:
            raise LimitExceeded(
                f"the request has {n} {what}; this server accepts at most {self.limits.max_keys}"
            )

    def sql(self, a: AnalystState, body: Any) -> Any:
        """The analyst's ``Session.sql`` (or ``Session.explain``) on the query text."""
        body = _fields(body, ("query",), ("epsilon", "delta", "explain", "n"))
        query = body["query"]
        if not isinstance(query, str):
            raise PinqError("query must be the SQL text")
        if len(query) > self.limits.max_sql_chars:
            raise LimitExceeded(
                f"the query has {len(query)} characters; this server accepts at most "
                f"{self.limits.max_sql_chars}"
            )
        with decoding("epsilon, delta or n"):
            epsilon = decode_value(body.get("epsilon"))
            delta = decode_value(body.get("delta"))
            n = decode_value(body.get("n"))
        explain = body.get("explain", False)
        if not isinstance(explain, bool):
            raise PinqError("explain must be true or false")
        call = {"query": query, "epsilon": epsilon, "delta": delta}
        if n is not None:
            call["n"] = n
        # A query may name any granted table.
        with self.gate.hold(any(r.engine != "pandas" for r in a.tables().values())):
            if explain:
                return _call("explain", a.session.explain, call)
            return _call("sql", a.session.sql, call)


def _call(what: str, fn: Any, args: dict[str, Any]) -> Any:
    """``fn(**args)``, an API call on the analyst's arguments.

    pinqpy refuses bad input with a pinqpy error; a plain Python error escaping the call
    (a ``TypeError`` from an argument of the wrong kind, say) is the analyst's arguments
    meeting code that did not expect them, so it is reported as a bad request
    (:class:`BadArguments`, naming only the kind of error) and logged for the curator.
    """
    try:
        return fn(**args)
    except PinqError:
        raise
    except DECODING_ERRORS as err:
        raise BadArguments(
            f"{what}() could not use the arguments it was given ({type(err).__name__})"
        ) from err


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
