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
4. **the work**, in a worker thread: replay and every check, then the pipeline, which charges
   before it reads. Refusals before the charge leave every budget untouched.

Statuses: 200 ``{"result": ...}``; 400 a pinqpy error (malformed request, bad arguments, a
refused query); 401 no valid token; 403 a table the analyst may not query (unknown or not
granted, alike); 404 no such endpoint; 405 the wrong HTTP method; 408 a body slower to arrive
than ``query_timeout_s``; 409 the budget does not cover the query; 413 the body is too large;
422 over a complexity limit; 504 over the run-time limit; 500 an internal fault. Error bodies
are ``{"error": encode_error(...)}``: a pinqpy error's class and message, which never quote a
data value. An internal fault answers a fixed message and nothing else (no trace, no
exception text); the trace goes to the curator's console only. Messages are also scrubbed of
the server's own paths (its config folder, ledger and table files).

**The run-time limit** (``query_timeout_s``) can only trip while the work runs, and the work
charges the budget before it reads any data: a request that answers 504 may have been charged,
and its charge stands (the ledger keeps it; the answer, once computed, is cached like any
other, so asking again returns it without a new charge when the first run finished). A worker
thread cannot be stopped, so the abandoned work runs to its end in the background.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import IO, Any

from pinqpy.errors import BudgetExceededError, PinqError
from pinqpy.remote.protocol import API_PREFIX, dumps, encode_error, encode_result, loads
from pinqpy.remote.server.replay import LimitExceeded, TableNotFound, check_depth
from pinqpy.remote.server.state import AnalystState, BadArguments, ServerState

__all__ = ["INTERNAL_ERROR", "MAX_JSON_DEPTH", "UNAUTHORIZED", "create_app"]

#: The message of a 401.
UNAUTHORIZED = "a valid analyst token is required (Authorization: Bearer <token>)"
#: The message of a 500 (nothing else is said).
INTERNAL_ERROR = "the server could not answer this request (internal error)"
#: The deepest JSON nesting a request may have (an expression of a few hundred levels).
MAX_JSON_DEPTH = 400

_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"]


class _Refusal(Exception):
    def __init__(self, status: int, error: dict[str, Any]):
        self.status = status
        self.error = error


def _error(message: str) -> dict[str, Any]:
    return encode_error(PinqError(message))


def _status(exc: PinqError) -> int:
    if isinstance(exc, BudgetExceededError):
        return 409
    if isinstance(exc, TableNotFound):
        return 403
    if isinstance(exc, LimitExceeded):
        return 422
    return 400


def create_app(state: ServerState, *, log: IO[str] | None = None) -> Any:
    """The Starlette app serving ``state``; internal faults are logged to ``log`` (default
    standard error)."""
    import anyio
    import anyio.to_thread
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    limits = state.limits
    # path -> (HTTP method, the state's operation, whether its result is encode_result'ed)
    routes: dict[str, tuple[str, str, bool]] = {
        f"{API_PREFIX}/session": ("GET", "session_doc", False),
        f"{API_PREFIX}/budget": ("GET", "budget_doc", False),
        f"{API_PREFIX}/audit": ("GET", "audit", True),
        f"{API_PREFIX}/aggregate": ("POST", "aggregate", True),
        f"{API_PREFIX}/sql": ("POST", "sql", True),
    }
    scrub = _scrubber(state)

    def respond(status: int, doc: Any, headers: dict[str, str] | None = None) -> Response:
        return Response(dumps(doc), status, headers, media_type="application/json")

    def fail(status: int, error: dict[str, Any]) -> Response:
        if isinstance(error.get("message"), str):
            error = {**error, "message": scrub(error["message"])}
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return respond(status, {"error": error}, headers)

    async def read_body(request: Request) -> bytes:
        limit = limits.max_request_bytes
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

    def work(
        fn: Callable[[AnalystState, Any], Any], analyst: AnalystState, doc: Any, wrap: bool
    ) -> bytes:
        with state.hooks():
            result = fn(analyst, doc)
            return dumps({"result": encode_result(result) if wrap else result})

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
            fn = getattr(state, operation)
            if method != want and not (method == "HEAD" and want == "GET"):
                raise _Refusal(405, _error(f"{path} takes {want} requests"))
            doc: Any = None
            if want == "POST":
                # A body trickling in holds no worker, but it is bounded in time all the same.
                with anyio.move_on_after(limits.query_timeout_s) as reading:
                    raw = await read_body(request)
                if reading.cancelled_caught:
                    raise _Refusal(408, _error("the request body took too long to arrive"))
                doc = loads(raw, limits.max_request_bytes)
                check_depth(doc, MAX_JSON_DEPTH)
            with anyio.fail_after(limits.query_timeout_s):
                body = await anyio.to_thread.run_sync(
                    work, fn, analyst, doc, wrap, abandon_on_cancel=True
                )
            return Response(body, 200, media_type="application/json")
        except _Refusal as r:
            return fail(r.status, r.error)
        except PinqError as err:
            if isinstance(err, BadArguments):
                _log_fault(log, method, path, err.__cause__)
            return fail(_status(err), encode_error(err))
        except TimeoutError:
            return fail(
                504,
                _error(
                    f"the request ran longer than this server allows "
                    f"({limits.query_timeout_s:g} s); if it was charged, the charge stands"
                ),
            )
        except RecursionError:
            return fail(422, _error("the request nests more deeply than this server accepts"))
        except Exception as exc:
            _log_fault(log, method, path, exc)
            return fail(500, _error(INTERNAL_ERROR))

    return Starlette(routes=[Route("/{path:path}", endpoint, methods=_METHODS)])


def _log_fault(log: IO[str] | None, method: str, path: str, exc: BaseException | None) -> None:
    """The trace of a fault, for the curator's console only."""
    stream = log if log is not None else sys.stderr
    print(f"pinqpy server: fault answering {method} {path}:", file=stream)
    if exc is not None:
        traceback.print_exception(exc, file=stream)
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
