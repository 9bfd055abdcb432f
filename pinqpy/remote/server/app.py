"""The HTTP face of the server: a Starlette app over a :class:`ServerState`.

Routes (all JSON; every one needs ``Authorization: Bearer <token>``):

=======  ================  =====================================================
GET      /v1/session       the analyst, their tables (as plans), budgets, limits
GET      /v1/budget        the analyst's budgets: total, spent, remaining
GET      /v1/audit         the analyst's budgets' charges (the ledger's trail)
POST     /v1/aggregate     an aggregation of a plan (or of a partition of it)
POST     /v1/sql           a SQL statement (or its EXPLAIN)
=======  ================  =====================================================

Every request is handled in the same order, each step before any later one can happen:

1. **the token** (401, nothing else is looked at: an unknown path or method answers 401 too,
   so the API cannot be explored without a token);
2. **the route** (404 unknown path, 405 wrong method);
3. **the body**, read in chunks and refused (413) as soon as it passes ``max_request_bytes``,
   so an oversized body is never held whole; then strict JSON (400) nested at most
   :data:`MAX_JSON_DEPTH` deep (422);
4. **admission** (429 when the analyst already has ``max_requests_per_analyst`` requests in
   progress, 503 when the server has ``max_requests``; :mod:`pinqpy.remote.server.admission`);
5. **the work**: replay and every check, then the pipeline, which charges before it reads.
   Refusals before the charge leave every budget untouched. A pandas analyst's data
   requests run in their worker process (:mod:`pinqpy.remote.server.workers`), every other
   request in a thread of the server's; at most ``max_running`` read data at once
   (:mod:`pinqpy.remote.server.stopping`).

Statuses: 200 ``{"result": ...}``; 400 a pinqpy error (malformed request, bad arguments, a
refused query); 401 no valid token; 403 a table the analyst may not query (unknown or not
granted, alike); 404 no such endpoint; 405 the wrong HTTP method; 408 a body slower to arrive
than ``query_timeout_s``; 409 the budget does not cover the query; 413 the body is too large;
422 over a complexity limit; 429 the analyst has too many requests in progress; 503 the
server has too many, or none of its workers was free for the whole run-time limit (the
request did not start); 504 over the run-time limit; 500 an internal fault. Error bodies
are ``{"error": encode_error(...)}``: a pinqpy error's class and message, which never quote a
data value. An internal fault answers a fixed message and nothing else (no trace, no
exception text); the trace goes to the curator's console only. Messages are also scrubbed of
the server's own paths (its config folder, ledger and table files).

**The run-time limit** (``query_timeout_s``) runs from admission, and the work charges the
budget before it reads any data: a request that answers 504 may have been charged, and its
charge stands (the ledger keeps it). At the limit the work is stopped: a worker process is
killed, a DuckDB or Spark read is interrupted (:mod:`pinqpy.remote.server.stopping`); no
answer of it is released or cached. Only pandas work in the server's own process (an analyst
granted pandas tables with DuckDB or Spark ones) cannot be stopped and runs to its end, its
place among the requests in progress kept until then.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import IO, Any

from pinqpy.errors import PinqError
from pinqpy.remote.protocol import API_PREFIX, dumps, encode_error, loads
from pinqpy.remote.server.admission import Admission, Crowded
from pinqpy.remote.server.replay import check_depth
from pinqpy.remote.server.replies import INTERNAL_ERROR, Reply, answer, error_doc, status_of
from pinqpy.remote.server.state import AnalystState, ServerState
from pinqpy.remote.server.stopping import Ticket, not_started
from pinqpy.remote.server.workers import WorkerPool, stopped_reply

__all__ = ["INTERNAL_ERROR", "MAX_JSON_DEPTH", "UNAUTHORIZED", "create_app"]

#: The message of a 401.
UNAUTHORIZED = "a valid analyst token is required (Authorization: Bearer <token>)"
#: The deepest JSON nesting a request may have (an expression of a few hundred levels).
MAX_JSON_DEPTH = 400
#: The operations that read data (run in a pandas analyst's worker process).
DATA_OPERATIONS = ("aggregate", "sql")

_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]
# path -> (HTTP method, the state's operation, whether its result is encode_result'ed)
_ROUTES: dict[str, tuple[str, str, bool]] = {
    f"{API_PREFIX}/session": ("GET", "session_doc", False),
    f"{API_PREFIX}/budget": ("GET", "budget_doc", False),
    f"{API_PREFIX}/audit": ("GET", "audit", True),
    f"{API_PREFIX}/aggregate": ("POST", "aggregate", True),
    f"{API_PREFIX}/sql": ("POST", "sql", True),
}


class _Refusal(Exception):
    def __init__(self, status: int, error: dict[str, Any]):
        self.status = status
        self.error = error


_error = error_doc


def create_app(
    state: ServerState, *, log: IO[str] | None = None, workers: WorkerPool | None = None
) -> Any:
    """The Starlette app serving ``state``; internal faults are logged to ``log`` (default
    standard error). ``workers``: the started worker processes that pandas analysts' data
    requests run in (without them, every request runs in a thread of this process)."""
    import anyio
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    limits = state.limits
    routes = _ROUTES
    scrub = _scrubber(state)
    work = _Work(state, workers)

    def respond(status: int, doc: Any, headers: dict[str, str] | None = None) -> Response:
        return Response(dumps(doc), status, headers, media_type="application/json")

    def fail(
        status: int, error: dict[str, Any], headers: dict[str, str] | None = None
    ) -> Response:
        if isinstance(error.get("message"), str):
            error = {**error, "message": scrub(error["message"])}
        if status == 401:
            headers = {"WWW-Authenticate": "Bearer"}
        return respond(status, {"error": error}, headers)

    def reply_of(reply: Reply, method: str, path: str) -> Response:
        if reply.fault is not None:
            _log_fault(log, method, path, reply.fault)
        if reply.status == 200:
            return Response(reply.body, 200, media_type="application/json")
        assert reply.error is not None
        return fail(reply.status, reply.error)

    async def endpoint(request: Request) -> Response:
        path, method = request.url.path, request.method
        try:
            analyst = state.authenticate(_bearer(request.headers.get("authorization")))
            if analyst is None:
                raise _Refusal(401, _error(UNAUTHORIZED))
            route = routes.get(path.rstrip("/") or path)
            if route is None:
                raise _Refusal(
                    404, _error(f"no such endpoint; the endpoints are under {API_PREFIX}/")
                )
            want, operation, wrap = route
            if method != want and not (method == "HEAD" and want == "GET"):
                raise _Refusal(405, _error(f"{path} takes {want} requests"))
            doc: Any = None
            raw = b""
            if want == "POST":
                # A body trickling in holds no worker, but it is bounded in time all the same.
                with anyio.move_on_after(limits.query_timeout_s) as reading:
                    raw = await _read_body(request, limits.max_request_bytes)
                if reading.cancelled_caught:
                    raise _Refusal(408, _error("the request body took too long to arrive"))
                doc = loads(raw, limits.max_request_bytes)
                check_depth(doc, MAX_JSON_DEPTH)
            reply = await work.run(analyst, operation, doc, raw, wrap)
            return reply_of(reply, method, path)
        except _Refusal as r:
            return fail(r.status, r.error)
        except Crowded as err:
            return fail(err.status, encode_error(err), {"Retry-After": "1"})
        except PinqError as err:  # a malformed or too deeply nested body
            return fail(status_of(err), encode_error(err))
        except RecursionError:
            return fail(422, _error("the request nests more deeply than this server accepts"))
        except Exception as exc:
            _log_fault(log, method, path, "".join(traceback.format_exception(exc)))
            return fail(500, _error(INTERNAL_ERROR))

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=_METHODS)])


async def _read_body(request: Any, limit: int) -> bytes:
    """The request's body, refused (413) as soon as it passes ``limit`` bytes."""
    too_big = _Refusal(
        413, _error(f"the request is larger than this server accepts ({limit} bytes)")
    )
    declared = request.headers.get("content-length")
    if declared is not None and declared.strip().isdigit() and int(declared) > limit:
        raise too_big
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


class _Work:
    """Where a request's work runs, and its answer at its deadline (see the module
    docstring): admitted, then run in the analyst's worker process (a pandas analyst's data
    requests) or in a thread of this process, with its :class:`Ticket`."""

    def __init__(self, state: ServerState, workers: WorkerPool | None):
        self.state = state
        self.limits = state.limits
        self.workers = workers
        self.admission = Admission(state.limits)

    def in_worker(self, analyst: AnalystState, operation: str) -> bool:
        return (
            self.workers is not None
            and analyst.name in self.workers.analysts
            and operation in DATA_OPERATIONS
        )

    async def run(
        self, analyst: AnalystState, operation: str, doc: Any, raw: bytes, wrap: bool
    ) -> Reply:
        self.admission.admit(analyst.name)
        ticket = Ticket(analyst.name, time.monotonic() + self.limits.query_timeout_s)
        done = _in_thread(self._job, ticket, analyst, operation, doc, raw, wrap)
        if self.in_worker(analyst, operation):
            return await done  # the worker's caller keeps the deadline itself
        try:
            return await asyncio.wait_for(asyncio.shield(done), ticket.remaining())
        except TimeoutError:
            return self._late(ticket, done)

    def _job(
        self, ticket: Ticket, analyst: AnalystState, operation: str, doc: Any, raw: bytes,
        wrap: bool,
    ) -> Reply:  # fmt: skip
        try:
            if self.in_worker(analyst, operation):
                assert self.workers is not None
                return self.workers.call(ticket, operation, raw, wrap)
            with self.state.gate.bound(ticket):
                return answer(self.state, analyst, operation, doc, wrap)
        finally:
            ticket.done.set()
            self.admission.release(analyst.name)

    def _late(self, ticket: Ticket, done: asyncio.Future[Reply]) -> Reply:
        """The answer at the deadline of work in this process: it is stopped."""
        started, stopped = self.state.gate.stop(ticket)
        if done.done():
            return done.result()
        limit = self.limits.query_timeout_s
        if not started:
            return Reply(503, error=encode_error(not_started()))
        if stopped:
            return stopped_reply(limit)
        return Reply(504, error=_error(_unstopped(limit)))


def _unstopped(limit: float) -> str:
    return (
        f"the request ran longer than this server allows ({limit:g} s); if it was charged, the "
        "charge stands"
    )


def _in_thread(fn: Callable[..., Reply], *args: Any) -> asyncio.Future[Reply]:
    """``fn(*args)`` in a thread of its own (a daemon: work that cannot be stopped never
    holds up the server's exit), as a future of the running loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Reply] = loop.create_future()

    def settle(result: Reply | None, exc: BaseException | None) -> None:
        if future.done():
            return
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def target() -> None:
        try:
            outcome: tuple[Reply | None, BaseException | None] = (fn(*args), None)
        except BaseException as exc:
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=target, daemon=True).start()
    return future


def _log_fault(log: IO[str] | None, method: str, path: str, trace: str) -> None:
    """The trace of a fault, for the curator's console only."""
    stream = log if log is not None else sys.stderr
    print(f"pinqpy server: fault answering {method} {path}:", file=stream)
    if trace:
        stream.write(trace)
    stream.flush()


def _bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _scrubber(state: ServerState) -> Callable[[str], str]:
    """Removes the server's own paths from a message (a pinqpy message may name a file)."""
    cfg = state.config
    paths = {str(cfg.ledger), str(cfg.tokens), str(cfg.ledger.parent), str(cfg.tokens.parent)}
    if cfg.path is not None:
        paths.update({str(cfg.path), str(cfg.path.parent)})
    for spec in cfg.tables.values():
        for p in (spec.path, spec.database):
            if p is not None:
                paths.update({str(p), str(p.parent)})
    ordered = sorted((p for p in paths if len(p) > 1), key=len, reverse=True)

    def scrub(message: str) -> str:
        for p in ordered:
            message = message.replace(p, "<server>")
        return message

    return scrub
