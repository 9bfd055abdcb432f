"""The client's HTTP transport: one keep-alive connection per session.

Every request carries the analyst's token in an ``Authorization: Bearer`` header; bodies are
the strict JSON of :mod:`pinqpy.remote.protocol`. A pinqpy error the server reports is raised
here as the same class with the same message (:func:`~pinqpy.remote.protocol.decode_error`),
so a remote error reads exactly like the local one. Anything else that goes wrong on the way
(no server, a timeout, an answer that is not pinqpy's) is a :class:`~pinqpy.PinqError` that
names the server's URL and never the token.

It is the standard library's :mod:`http.client`: the client needs no extra package, and a
request costs a fraction of a millisecond of the client's time (a general HTTP client library
took 1.5 to 2 ms more per request in ``benchmarks/bench_server.py``). One connection is kept
open and reused; before a reuse it is checked for having been closed by the server (an idle
connection is closed after a few seconds), and a request that finds it closed before any
answer arrived is sent once more on a fresh connection. That repeat cannot charge twice for
one answer: the server answers a question it has answered before from its cache, free.
"""

from __future__ import annotations

import http.client
import re
import select
import socket
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pinqpy.core.version import __version__
from pinqpy.errors import PinqError
from pinqpy.remote import protocol

__all__ = ["DEFAULT_TIMEOUT", "Transport", "check_url"]

#: Seconds to wait for an answer. The server stops a query after its own run-time limit
#: (60 s by default) and answers then, so the client waits longer than that.
DEFAULT_TIMEOUT = 120.0

# Seconds to wait for a connection to open: a server that is up accepts at once.
_CONNECT_TIMEOUT = 10.0

# What a token can be: it travels in an HTTP header, so printable ASCII without spaces.
_TOKEN = re.compile(r"[\x21-\x7e]+")

# The largest response body the client reads (a released table of many groups is large,
# but a pinqpy answer is never near this).
_MAX_RESPONSE = 256 * 1024 * 1024


def check_url(url: object) -> str:
    """The server's base URL (``http://host:port``, maybe with a path), without a trailing
    slash; anything else is refused before a connection is tried."""
    if not isinstance(url, str) or not url.strip():
        raise PinqError("the server URL must be text such as 'http://127.0.0.1:8765'")
    url = url.strip()
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a bad port raises here
    except ValueError:
        raise PinqError(f"{url!r} is not a valid server URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise PinqError(
            f"{url!r} is not a server URL: give one such as 'http://127.0.0.1:8765' or "
            "'https://pinq.example.org'"
        )
    if parts.username or parts.password:
        raise PinqError("the server URL must not hold a user name or password; pass token=...")
    if parts.query or parts.fragment:
        raise PinqError(f"the server URL {url!r} must not have a query or a fragment")
    return url.rstrip("/")


class Transport:
    """Requests to one pinqpy server with one analyst's token.

    The token lives only in the request headers: it is never part of a repr, an error
    message or a URL.
    """

    def __init__(self, url: str, token: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.url = check_url(url)
        if not isinstance(token, str) or not _TOKEN.fullmatch(token.strip()):
            raise PinqError(
                "the analyst token must be the text the curator gave you (printable "
                "characters without spaces)"
            )
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout < float("inf")
        ):
            raise PinqError("timeout must be a positive number of seconds")
        self.timeout = float(timeout)
        parts = urlsplit(self.url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/") + protocol.API_PREFIX
        self._headers = {
            "Authorization": f"Bearer {token.strip()}",
            "Accept": "application/json",
            "User-Agent": f"pinqpy/{__version__}",
        }
        self._conn: http.client.HTTPConnection | None = None
        self.closed = False

    # -- requests -----------------------------------------------------------------------
    def get(self, path: str) -> Any:
        """The JSON document the server answers to ``GET path`` (path under ``/v1``)."""
        return self._request("GET", path, None)

    def post(self, path: str, doc: Mapping[str, Any]) -> Any:
        """The JSON document the server answers to ``POST path`` with ``doc`` as the body."""
        return self._request("POST", path, protocol.dumps(dict(doc)))

    def document(self, path: str) -> dict[str, Any]:
        """The JSON object of ``GET path`` for the session and budget routes, which answer a
        plain document (under ``"result"``, or bare)."""
        answer = self.get(path)
        if isinstance(answer, dict) and set(answer) == {"result"}:
            answer = answer["result"]
        if not isinstance(answer, dict):
            raise self._not_pinqpy("an answer that is not a JSON object")
        return answer

    def result(self, method: str, path: str, doc: Mapping[str, Any] | None = None) -> Any:
        """The decoded ``"result"`` of a request (a NoisyValue, a DataFrame, ...)."""
        answer = self.get(path) if method == "GET" else self.post(path, doc or {})
        if not isinstance(answer, dict) or "result" not in answer:
            raise self._not_pinqpy("an answer without a result")
        return protocol.decode_result(answer["result"])

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """The open connection (and True), or a new one (and False)."""
        conn = self._conn
        if conn is not None and conn.sock is not None:
            # An idle connection the server closed reads as ready (end of file).
            readable, _, _ = select.select([conn.sock], [], [], 0)
            if not readable:
                return conn, True
            conn.close()
        connect = min(_CONNECT_TIMEOUT, self.timeout)
        if self._https:
            context = ssl.create_default_context()
            conn = http.client.HTTPSConnection(
                self._host, self._port, timeout=connect, context=context
            )
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=connect)
        conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(self.timeout)
        # Headers and body leave at once: no wait for the server's acknowledgement.
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._conn = conn
        return conn, False

    def _exchange(self, method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn, reused = self._connection()
            try:
                conn.request(method, self._prefix + path, body=body, headers=headers)
                response = conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                self._conn = None
                if reused and attempt == 1:
                    continue  # the server had closed the idle connection: send it afresh
                raise
            length = response.getheader("Content-Length")
            if length is not None and length.isdigit() and int(length) > _MAX_RESPONSE:
                conn.close()
                self._conn = None
                raise self._not_pinqpy("an answer too large to read")
            content = response.read(_MAX_RESPONSE + 1)
            if response.will_close:
                conn.close()
                self._conn = None
            return response.status, content
        raise AssertionError("unreachable")  # pragma: no cover

    def _request(self, method: str, path: str, body: bytes | None) -> Any:
        if self.closed:
            raise PinqError(f"the connection to {self.url} is closed; connect again")
        try:
            status, content = self._exchange(method, path, body)
        except TimeoutError:
            self._drop()
            raise PinqError(
                f"the pinqpy server at {self.url} did not answer within {self.timeout:g} s "
                "(a query that was charged stays charged)"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            self._drop()
            raise PinqError(
                f"the pinqpy server at {self.url} cannot be reached ({type(exc).__name__}); "
                "check the URL and that the server is running"
            ) from None
        if len(content) > _MAX_RESPONSE:
            raise self._not_pinqpy("an answer too large to read")
        try:
            doc = protocol.loads(content, _MAX_RESPONSE)
        except PinqError:
            doc = None
        if status == 200 and isinstance(doc, dict):
            return doc
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            raise protocol.decode_error(doc["error"])
        raise self._not_pinqpy(f"HTTP {status}")

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _not_pinqpy(self, what: str) -> PinqError:
        return PinqError(
            f"the server at {self.url} did not answer as a pinqpy server ({what}); check the URL"
        )

    # -- life -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection; later requests are refused."""
        if not self.closed:
            self.closed = True
            self._drop()

    def __repr__(self) -> str:
        return f"Transport({self.url!r})"
