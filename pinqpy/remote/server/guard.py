"""A guard in front of the HTTP protocol: slow clients cannot hold connections open.

The HTTP server (uvicorn) times out a connection only while it is idle *after* a response,
and any byte resets that timer; a client that sends its request head one byte at a time,
or opens connections and sends nothing, holds each of them for as long as it likes. The
guard wraps uvicorn's protocol (whichever it is; it forwards every event unchanged) and
reads the same bytes with a parser of its own (httptools) to see where each request is:

* **the head** (request line and headers) must be complete within ``header_timeout_s`` of
  the connection opening or of the request's first byte, and within :data:`MAX_HEAD_BYTES`;
  otherwise the connection is answered 408 (or 431) and closed;
* **the body** must be complete within ``query_timeout_s`` (plus a second, so that the
  app's own 408 wins when it reads the body) of the end of the head; otherwise the
  connection is closed (the app may be answering, so nothing is written);
* at most ``max_connections`` are open at once: one more closes the oldest connection that
  has not yet sent a whole request head (one that sent nothing yet, or is still sending its
  head), or, if there is none, is itself answered 503 and closed.

While a request is being answered, and while a connection is idle after its response
(uvicorn closes those after ``timeout_keep_alive``), the guard keeps no timer.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from typing import Any

from pinqpy.remote.server.config import Limits

__all__ = ["MAX_HEAD_BYTES", "Connections", "guarded"]

#: The largest request head (request line and headers) a connection may send.
MAX_HEAD_BYTES = 64 * 1024

_WAITING, _HEAD, _BODY, _HANDED = "waiting", "head", "body", "handed"


def _response(status: str, message: str) -> bytes:
    body = json.dumps({"error": {"type": "PinqError", "message": message}}).encode()
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body


class Connections:
    """The guarded connections of one server, oldest first."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.open: OrderedDict[int, _Guarded] = OrderedDict()

    def add(self, conn: _Guarded) -> bool:
        """Count a new connection; False if it must be turned away (every other one has a
        request in hand and the cap is reached)."""
        if len(self.open) >= self.limits.max_connections:
            victim = next((c for c in self.open.values() if c.phase in (_WAITING, _HEAD)), None)
            if victim is None:
                return False
            victim.drop()
        self.open[id(conn)] = conn
        return True

    def remove(self, conn: _Guarded) -> None:
        self.open.pop(id(conn), None)


class _Guarded(asyncio.Protocol):
    """One connection: the wrapped protocol, and the guard's view of its request."""

    registry: Connections
    inner_class: type[asyncio.Protocol]

    def __init__(self, **kwargs: Any):
        import httptools

        self.inner = self.inner_class(**kwargs)
        self.loop = asyncio.get_event_loop()
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.phase = _WAITING
        self.head_bytes = 0
        self.timer: asyncio.TimerHandle | None = None
        self.served = False  # the wrapped protocol has the connection

    # -- the protocol, forwarded ---------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if not self.registry.add(self):
            transport.write(_response("503 Service Unavailable", _FULL))  # type: ignore[attr-defined]
            transport.close()
            self.phase = _HANDED
            return
        self._arm(self.registry.limits.header_timeout_s)
        self.served = True
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.registry.remove(self)
        if self.served:
            self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._watch(data)
        if self.transport is not None and not self.transport.is_closing():
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.served else None

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # -- the guard -----------------------------------------------------------------------
    def _watch(self, data: bytes) -> None:
        import httptools

        if self.phase in (_WAITING, _HEAD):
            self.head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            return  # the server answers 400 and closes
        except httptools.HttpParserUpgrade:
            self.on_headers_complete()  # no upgrade is served: bounded like a body
            return
        if self.phase in (_WAITING, _HEAD) and self.head_bytes > MAX_HEAD_BYTES:
            self._refuse("431 Request Header Fields Too Large", _TOO_BIG)

    def on_message_begin(self) -> None:
        if self.phase != _WAITING:  # a request after a response: its own head time
            self._arm(self.registry.limits.header_timeout_s)
        self.phase = _HEAD
        self.head_bytes = 0

    def on_headers_complete(self) -> None:
        self.phase = _BODY
        self._arm(self.registry.limits.query_timeout_s + 1.0)

    def on_message_complete(self) -> None:
        self.phase = _HANDED
        self._disarm()

    def drop(self) -> None:
        """Close at once (the cap needs room; nothing more is read or written)."""
        self.phase = _HANDED
        self._disarm()
        self.registry.remove(self)
        if self.transport is not None:
            self.transport.abort()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self.timer = self.loop.call_at(self.loop.time() + seconds, self._expire)

    def _disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _expire(self) -> None:
        self.timer = None
        if self.phase in (_WAITING, _HEAD):
            self._refuse("408 Request Timeout", _SLOW)
        elif self.phase == _BODY:
            self.drop()

    def _refuse(self, status: str, message: str) -> None:
        self.phase = _HANDED
        self._disarm()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_response(status, message))
            self.transport.close()


_SLOW = "the request head took too long to arrive; send the whole request at once"
_TOO_BIG = f"the request head is larger than this server accepts ({MAX_HEAD_BYTES} bytes)"
_FULL = "the server has as many connections open as it accepts; try again shortly"


def guarded(inner: type[asyncio.Protocol], limits: Limits) -> type[asyncio.Protocol]:
    """A protocol class for uvicorn (``Config(http=...)``) that wraps ``inner`` with the
    guard, all its connections counted together (see the module docstring)."""
    return type(
        "GuardedHttpProtocol",
        (_Guarded,),
        {"registry": Connections(limits), "inner_class": inner, "__module__": __name__},
    )

