"""What a request's work answers: a status and a body, the same wherever the work ran.

A request's work (one of :class:`~pinqpy.remote.server.state.ServerState`'s operations) runs
either in a thread of the server's process or in a worker process
(:mod:`pinqpy.remote.server.workers`). Both turn its outcome into a :class:`Reply` with
:func:`answer`, so a request is answered alike wherever it ran: 200 with the result, or the
status and pinqpy error of a refusal, or a fixed message for an internal fault whose trace
(``fault``) goes to the curator's console only. A reply crosses from a worker to the server
as bytes (:meth:`Reply.to_bytes`), never pickled.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from typing import Any

from pinqpy.errors import BudgetExceededError, PinqError
from pinqpy.remote.protocol import dumps, encode_error, encode_result
from pinqpy.remote.server.replay import LimitExceeded, TableNotFound
from pinqpy.remote.server.state import AnalystState, BadArguments, ServerState
from pinqpy.remote.server.stopping import NotStarted

__all__ = ["INTERNAL_ERROR", "Reply", "answer", "error_doc", "status_of"]

#: The message of a 500 (nothing else is said).
INTERNAL_ERROR = "the server could not answer this request (internal error)"


def error_doc(message: str) -> dict[str, Any]:
    """The error body of a plain :class:`~pinqpy.PinqError` with ``message``."""
    return encode_error(PinqError(message))


def status_of(exc: PinqError) -> int:
    """The HTTP status of a pinqpy error raised by a request's work."""
    if isinstance(exc, BudgetExceededError):
        return 409
    if isinstance(exc, TableNotFound):
        return 403
    if isinstance(exc, LimitExceeded):
        return 422
    if isinstance(exc, NotStarted):
        return 503
    return 400


@dataclass(frozen=True)
class Reply:
    """A request's answer: ``body`` (the JSON text of a 200) or ``error`` (an encoded pinqpy
    error), and ``fault``, a trace for the curator's log (never sent to the analyst)."""

    status: int
    body: bytes = b""
    error: dict[str, Any] | None = None
    fault: str | None = None

    def to_bytes(self) -> bytes:
        head = {"status": self.status, "error": self.error, "fault": self.fault}
        return json.dumps(head).encode() + b"\n" + self.body

    @classmethod
    def from_bytes(cls, data: bytes) -> Reply:
        head, _, body = data.partition(b"\n")
        doc = json.loads(head)
        return cls(int(doc["status"]), body, doc.get("error"), doc.get("fault"))


def answer(
    state: ServerState, analyst: AnalystState, operation: str, doc: Any, wrap: bool
) -> Reply:
    """Run ``state.<operation>(analyst, doc)`` under the server's noise hooks; its reply.

    ``wrap``: the result is one of pinqpy's result types, sent as :func:`encode_result`
    makes it."""
    try:
        with state.hooks():
            result = getattr(state, operation)(analyst, doc)
            return Reply(200, dumps({"result": encode_result(result) if wrap else result}))
    except PinqError as err:
        fault = _trace(err.__cause__) if isinstance(err, BadArguments) else None
        return Reply(status_of(err), error=encode_error(err), fault=fault)
    except RecursionError:
        return Reply(422, error=error_doc("the request nests more deeply than this server accepts"))
    except Exception as exc:
        return Reply(500, error=error_doc(INTERNAL_ERROR), fault=_trace(exc))


def _trace(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    return "".join(traceback.format_exception(exc))
