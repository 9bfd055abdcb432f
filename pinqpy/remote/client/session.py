"""The analyst's session with a pinqpy server: ``pq.connect(url, token=...)``.

>>> import pinqpy as pq
>>> pq.connect("http://127.0.0.1:8765", token="")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
pinqpy.errors.PinqError: connecting to a pinqpy server needs your analyst token: ...

A :class:`RemoteSession` offers what a local :class:`~pinqpy.Session` does, answered by the
server: ``table(name)`` (a :class:`~pinqpy.remote.client.frame.RemoteFrame`, transformed
exactly as a PrivateFrame), ``sql``, ``explain``, ``describe``, the budgets and their audit
trail. When it is made it reads, once, what the server grants this analyst (``GET
/v1/session``): each table's starting plan with the curator's public facts, and its budget.

The client speaks HTTP with the standard library (:mod:`pinqpy.remote.client.transport`):
connecting needs no extra package.
"""

from __future__ import annotations

import html
import os
from fractions import Fraction
from types import TracebackType
from typing import Any

import pandas as pd

from pinqpy.accounting.agents import ChangedRowView
from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.catalog import Catalog
from pinqpy.plan.nodes import PlanNode, Source, TableRef
from pinqpy.plan.serialize import plan_from_data
from pinqpy.remote import protocol
from pinqpy.remote.client.budget import RemoteBudget
from pinqpy.remote.client.frame import RemoteFrame
from pinqpy.remote.client.transport import DEFAULT_TIMEOUT, Transport
from pinqpy.results.tables import NoisyFrame

__all__ = ["RemoteSession", "connect"]

# The pandas dtype of each declared column type, for a stub (an empty table: its dtypes are
# the only thing it says, and nothing reads it).
_STUB_DTYPES = {
    "int": "Int64",
    "float": "float64",
    "str": "object",
    "bool": "boolean",
    "datetime": "datetime64[ns]",
    "any": "object",
}


def connect(
    url: str, token: str | None = None, *, timeout: float = DEFAULT_TIMEOUT
) -> RemoteSession:
    """Connect to the pinqpy server at ``url`` as the analyst whose token is ``token`` (else
    the environment variable ``PINQPY_TOKEN``).

    ``timeout`` is how many seconds to wait for an answer. The connection is checked (and
    the analyst's tables and budgets read) here, so a wrong URL or token fails now.
    """
    if token is None:
        token = os.environ.get(protocol.TOKEN_ENV)
    if token is None or (isinstance(token, str) and not token.strip()):
        raise PinqError(
            "connecting to a pinqpy server needs your analyst token: pass token=... or set "
            f"the environment variable {protocol.TOKEN_ENV}"
        )
    transport = Transport(url, token, timeout=timeout)
    try:
        return RemoteSession(transport)
    except BaseException:
        transport.close()
        raise


def _stub(table: TableRef) -> pd.DataFrame:
    """An empty table with the declared column types: the catalog entry of a remote table."""
    schema = dict(table.schema or {})
    return pd.DataFrame(
        {c: pd.Series(dtype=_STUB_DTYPES.get(str(schema.get(c)), "object")) for c in table.columns}
    )


def _sources(plan: PlanNode) -> list[TableRef]:
    out: dict[str, TableRef] = {}
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, Source):
            out.setdefault(node.table.id, node.table)
        stack.extend(node.children)
    return list(out.values())


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise PinqError(f"the server sent a malformed session ({what})")
    return value


def _number(value: object) -> Any:
    """An SQL call's epsilon or delta as it travels (checked by the server as locally)."""
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    if isinstance(value, Fraction):
        return float(value) if value.denominator != 1 else int(value)
    return protocol.encode_value(value)


class RemoteSession:
    """What one analyst may query on one pinqpy server; made by :func:`connect`.

    - ``table(name)``: the :class:`~pinqpy.remote.client.frame.RemoteFrame` a query starts
      from; ``tables``: the names granted.
    - ``sql(query, epsilon=None, delta=None)``, ``explain(...)``, ``describe(name)``: as on a
      local :class:`~pinqpy.Session`, answered and charged by the server.
    - ``budget`` (when every table draws on one budget), ``budgets`` ({table: budget}),
      ``audit()`` (the server's trail of this analyst's charges).
    - ``close()``, or use the session as a context manager.
    """

    def __init__(self, transport: Transport) -> None:
        self._transport = transport
        doc = transport.document("/session")
        if not isinstance(doc, dict):
            raise PinqError("the server sent a malformed session")
        self.analyst = _text(doc.get("analyst"), "analyst")
        self.version = _text(doc.get("version"), "version")
        limits = doc.get("limits")
        self.limits: dict[str, Any] = dict(limits) if isinstance(limits, dict) else {}
        tables = doc.get("tables")
        if not isinstance(tables, list):
            raise PinqError("the server sent a malformed session (tables)")
        self._budgets: dict[str, RemoteBudget] = {}  # by the server's label
        self._frames: dict[str, RemoteFrame] = {}
        self._table_budget: dict[str, RemoteBudget] = {}
        for entry in tables:
            if not isinstance(entry, dict):
                raise PinqError("the server sent a malformed session (tables)")
            name = _text(entry.get("name"), "table name")
            label = _text(entry.get("budget"), "budget name")
            budget = self._budgets.get(label)
            if budget is None:
                budget = self._budgets[label] = RemoteBudget(transport, label)
            plan = plan_from_data(entry.get("plan"))
            catalog = Catalog()
            # A table whose row count is public has neighbours one changed row apart: two
            # rows of stability, as the server charges (its count stays on the server).
            agent: object = budget
            if entry.get("public_size") is True:
                agent = ChangedRowView(budget, Fraction(2))
            for table in _sources(plan):
                catalog = catalog.with_table(table, _stub(table), agent)
            self._frames[name] = RemoteFrame._over(Relation(plan, catalog), transport)
            self._table_budget[name] = budget

    # -- tables -----------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The server's URL."""
        return self._transport.url

    @property
    def tables(self) -> list[str]:
        """The names of the tables the server grants this analyst."""
        return list(self._frames)

    def table(self, name: str) -> RemoteFrame:
        """The frame a query on table ``name`` starts from (the curator's public facts: its
        schema, bounds, keys and privacy unit)."""
        frame = self._frames.get(name) if isinstance(name, str) else None
        if frame is None:
            raise PinqError(f"no private table named {name!r}")
        return frame

    def describe(self, name: str) -> pd.DataFrame:
        """The public schema of a table (``DESCRIBE name`` on the server)."""
        if not isinstance(name, str) or not name:
            raise PinqError("a table name must be a non-empty string")
        result = self.sql(f"DESCRIBE {name}")
        assert isinstance(result, pd.DataFrame)
        return result

    # -- SQL --------------------------------------------------------------------------------
    def _sql(
        self, query: object, epsilon: object, delta: object, explain: bool, n: object = None
    ) -> Any:
        if not isinstance(query, str):
            raise PinqSyntaxError(f"a query must be text, not {type(query).__name__}")
        doc = {
            "query": query,
            "epsilon": _number(epsilon),
            "delta": _number(delta),
            "explain": explain,
        }
        if n is not None:
            # Sent only when given: a server that predates ``n`` still answers the rest.
            doc["n"] = _number(n)
        return self._transport.result("POST", "/sql", doc)

    def sql(
        self,
        query: str,
        epsilon: float | None = None,
        delta: float | None = None,
        *,
        n: float | None = None,
    ) -> NoisyFrame | pd.DataFrame | str:
        """Answer one SQL statement on the server, as :meth:`pinqpy.Session.sql` does locally:
        a SELECT gives a noisy table (``result.ci(column)`` works), EXPLAIN a printable plan
        that charges nothing, SHOW TABLES / SHOW BUDGET / SHOW LEDGER / DESCRIBE a table.
        ``n`` (EXPLAIN only) is the row count a mean's or median's error is stated for."""
        return self._sql(query, epsilon, delta, False, n)  # type: ignore[no-any-return]

    def explain(
        self,
        query: str,
        epsilon: float | None = None,
        delta: float | None = None,
        *,
        n: float | None = None,
    ) -> str:
        """EXPLAIN a SELECT without writing the keyword; charges nothing. ``n`` as for
        :meth:`sql`."""
        return self._sql(query, epsilon, delta, True, n)  # type: ignore[no-any-return]

    # -- budgets ------------------------------------------------------------------------------
    @property
    def budgets(self) -> dict[str, RemoteBudget]:
        """``{table: budget}`` for every table granted (tables may share a budget)."""
        return dict(self._table_budget)

    @property
    def budget(self) -> RemoteBudget:
        """The one budget this analyst's tables draw on; with several, see :attr:`budgets`."""
        distinct = list(self._budgets.values())
        if len(distinct) != 1:
            raise PinqError(
                f"this analyst has {len(distinct)} budgets (one per table or group); use "
                "session.budgets[table]"
            )
        return distinct[0]

    def audit(self) -> pd.DataFrame:
        """The server's audit trail of this analyst's charges (every budget), oldest first."""
        trail = self._transport.result("GET", "/audit")
        if not isinstance(trail, pd.DataFrame):
            raise PinqError(f"the server at {self.url} sent a malformed audit trail")
        return trail

    # -- life -------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection; the session's frames can no longer be aggregated."""
        self._transport.close()

    @property
    def closed(self) -> bool:
        return self._transport.closed

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteSession({self.url!r}, analyst={self.analyst!r})"

    def _repr_html_(self) -> str:
        names = ", ".join(self._frames) or "none"
        return f"<pre>{html.escape(repr(self))}\ntables: {html.escape(names)}</pre>"

    def __reduce__(self) -> None:
        raise PinqError("a remote session cannot be pickled: connect again with pq.connect")
