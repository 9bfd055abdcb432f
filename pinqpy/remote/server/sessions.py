"""The curator's credentials for the dashboard: the curator's token, and browser sessions.

**The curator's token** is apart from every analyst's: the config holds only its SHA-256
(``[server] curator_token_sha256``), as the tokens file holds only the analysts'
(:mod:`pinqpy.remote.server.auth`, whose reasons hold here too: 256 random bits need no salt
or stretching). ``pinqpy serve CONFIG --curator-token`` makes one and prints the line to
paste; the server never writes the config. A presented token is hashed and compared with
:func:`hmac.compare_digest`. A script sends it as ``Authorization: Bearer <token>``.

**A browser** signs in once: the login form POSTs the token in its body (never in a URL),
and the answer sets a session cookie:

* its value is ``<expiry>.<nonce>.<mac>``, the MAC an HMAC-SHA256 under a secret this server
  process made at start (so a restart ends every session), checked in constant time;
* the server also keeps the live sessions, so signing out ends one at once, and at most
  :data:`MAX_SESSIONS` are live (the oldest goes first);
* it lasts :data:`SESSION_SECONDS`; the cookie is ``HttpOnly`` (no script reads it),
  ``SameSite=Strict`` (no other site's page sends it), ``Path=/curator`` (the analysts' API
  never receives it) and ``Secure`` when the server serves TLS.

The dashboard only reads, and every change of state (signing in or out) is a POST that a
page of another site cannot make with the cookie (``SameSite=Strict``) and whose ``Origin``,
when the browser sends one, must be this server (:func:`same_origin`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from pinqpy.remote.server.auth import MAX_TOKEN_CHARS, hash_token

__all__ = [
    "COOKIE",
    "MAX_SESSIONS",
    "SESSION_SECONDS",
    "CuratorKey",
    "Sessions",
    "bearer",
    "same_origin",
]

#: The session cookie's name.
COOKIE = "pinqpy_curator"
#: How long a browser session lasts.
SESSION_SECONDS = 30 * 60
#: Live sessions at most (a new one ends the oldest).
MAX_SESSIONS = 32


class CuratorKey:
    """The curator's token, known by its SHA-256 only."""

    def __init__(self, sha256_hex: str):
        self._hash = bytes.fromhex(sha256_hex)

    def verify(self, token: object) -> bool:
        """Whether ``token`` is the curator's (constant time in the token's contents)."""
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
            return False
        return hmac.compare_digest(bytes.fromhex(hash_token(token)), self._hash)


class Sessions:
    """The dashboard's live browser sessions of one server process (see the module
    docstring)."""

    def __init__(
        self, lifetime: float = SESSION_SECONDS, clock: Callable[[], float] = time.time
    ):
        self.lifetime = lifetime
        self._clock = clock
        self._secret = secrets.token_bytes(32)
        self._lock = threading.Lock()
        self._live: dict[str, float] = {}  # nonce -> expiry, oldest first

    def _mac(self, text: str) -> str:
        digest = hmac.new(self._secret, text.encode("ascii"), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def issue(self) -> str:
        """A new session's cookie value."""
        now = self._clock()
        expiry = int(now + self.lifetime)
        nonce = secrets.token_urlsafe(18)
        with self._lock:
            self._live = {n: t for n, t in self._live.items() if t > now}
            while len(self._live) >= MAX_SESSIONS:
                del self._live[next(iter(self._live))]
            self._live[nonce] = expiry
        text = f"{expiry}.{nonce}"
        return f"{text}.{self._mac(text)}"

    def _nonce(self, value: object) -> str | None:
        """The nonce of a well-formed, correctly signed, unexpired cookie value."""
        if not isinstance(value, str) or len(value) > 200:
            return None
        expiry, _, rest = value.partition(".")
        nonce, _, mac = rest.partition(".")
        if not (expiry.isdigit() and nonce and mac):
            return None
        if not hmac.compare_digest(self._mac(f"{expiry}.{nonce}").encode(), mac.encode()):
            return None
        return nonce if int(expiry) > self._clock() else None

    def valid(self, value: object) -> bool:
        """Whether ``value`` is the cookie of a live session."""
        nonce = self._nonce(value)
        if nonce is None:
            return False
        with self._lock:
            expiry = self._live.get(nonce)
        return expiry is not None and expiry > self._clock()

    def end(self, value: object) -> None:
        """End the session of cookie ``value`` (signing out), if it is one."""
        nonce = self._nonce(value)
        if nonce is not None:
            with self._lock:
                self._live.pop(nonce, None)

    def set_cookie(self, value: str, *, secure: bool) -> str:
        """The ``Set-Cookie`` header value that starts a browser's session."""
        return _cookie(value, int(self.lifetime), secure)

    @staticmethod
    def clear_cookie(*, secure: bool) -> str:
        """The ``Set-Cookie`` header value that removes the session cookie."""
        return _cookie("", 0, secure)


def _cookie(value: str, max_age: int, secure: bool) -> str:
    parts = [f"{COOKIE}={value}", "Path=/curator", f"Max-Age={max_age}", "HttpOnly"]
    parts.append("SameSite=Strict")
    if secure:
        parts.append("Secure")
    return "; ".join(parts)


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def same_origin(origin: str | None, host: str | None) -> bool:
    """Whether a POST's ``Origin`` header is this server's (``host``: its Host header); a
    request without one (not a browser's, or an old one) passes, as SameSite guards it."""
    if origin is None:
        return True
    if not host or origin == "null":
        return False
    return urlsplit(origin).netloc.lower() == host.lower()
