"""The client's HTTP transport: one keep-alive connection pool per session.

Every request carries the analyst's token in an ``Authorization: Bearer`` header; bodies are
the strict JSON of :mod:`pinqpy.remote.protocol`. A pinqpy error the server reports is raised
here as the same class with the same message (:func:`~pinqpy.remote.protocol.decode_error`),
so a remote error reads exactly like the local one. Anything else that goes wrong on the way
(no server, a timeout, an answer that is not pinqpy's) is a :class:`~pinqpy.PinqError` that
names the server's URL and never the token.

httpx is imported when a transport is made, not when pinqpy is imported, so ``import pinqpy``
stays light for local users; without it, connecting says which extra installs it.
"""

from __future__ import annotations

import re
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


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise PinqError(
            "connecting to a pinqpy server needs the httpx package: pip install 'pinqpy[client]'"
        ) from None
    return httpx


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

    The token lives only in the connection pool's default headers: it is never part of a
    repr, an error message or a URL.
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
        httpx = _import_httpx()
        self.timeout = float(timeout)
        self._httpx = httpx
        self._client = httpx.Client(
            base_url=self.url,
            headers={
                "Authorization": f"Bearer {token.strip()}",
                "Accept": "application/json",
                "User-Agent": f"pinqpy/{__version__}",
            },
            timeout=httpx.Timeout(self.timeout, connect=min(_CONNECT_TIMEOUT, self.timeout)),
            follow_redirects=False,
        )
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

    def _request(self, method: str, path: str, body: bytes | None) -> Any:
        if self.closed:
            raise PinqError(f"the connection to {self.url} is closed; connect again")
        httpx = self._httpx
        headers = {"Content-Type": "application/json"} if body is not None else None
        try:
            response = self._client.request(
                method, protocol.API_PREFIX + path, content=body, headers=headers
            )
            content = response.read()
        except httpx.TimeoutException:
            raise PinqError(
                f"the pinqpy server at {self.url} did not answer within {self.timeout:g} s "
                "(a query that was charged stays charged)"
            ) from None
        except httpx.HTTPError as exc:
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
        if response.status_code == 200 and isinstance(doc, dict):
            return doc
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            raise protocol.decode_error(doc["error"])
        raise self._not_pinqpy(f"HTTP {response.status_code}")

    def _not_pinqpy(self, what: str) -> PinqError:
        return PinqError(
            f"the server at {self.url} did not answer as a pinqpy server ({what}); check the URL"
        )

    # -- life -------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection pool; later requests are refused."""
        if not self.closed:
            self.closed = True
            self._client.close()

    def __repr__(self) -> str:
        return f"Transport({self.url!r})"
