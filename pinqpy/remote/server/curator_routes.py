"""The curator's routes of the server's app: the dashboard page and the summary's JSON.

=======  ======================  =================================================
GET      /v1/curator/summary     who spent what, as JSON (``Authorization: Bearer``)
GET      /curator                the dashboard page (signed in), else the sign-in form
POST     /curator/login          sign in: the form's ``token``; sets the session cookie
POST     /curator/logout         sign out: ends the session, removes the cookie
=======  ======================  =================================================

They exist only when the config sets ``curator_token_sha256``; otherwise these paths are
like any other unknown one (401 without an analyst's token). They answer before the
analysts' token check, since the curator has no analyst token.

Who may see what (:mod:`pinqpy.remote.server.sessions` for the credentials):

* the summary wants the curator's token in the ``Authorization`` header: 401 without a
  valid token, **403 with an analyst's token**, 200 with the curator's;
* the page wants a live session cookie, or the curator's token in the ``Authorization``
  header (a script's way in); with an analyst's token it answers 403, with another 401;
  without either it shows the sign-in form (200);
* signing in with an analyst's token is refused with 403, with any other token 401; a sign
  in (or out) whose ``Origin`` is another site is refused with 403.

The summary is read from the ledger in a thread (:func:`~pinqpy.remote.server.curator.summary`),
so the server keeps answering meanwhile. Every page carries
:data:`~pinqpy.remote.server.dashboard.SECURITY_HEADERS` (no script, no framing, no cache).
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from pinqpy.remote.protocol import API_PREFIX, dumps
from pinqpy.remote.server.curator import summary
from pinqpy.remote.server.dashboard import SECURITY_HEADERS, dashboard_page, login_page
from pinqpy.remote.server.replies import error_doc
from pinqpy.remote.server.requestlog import Seen
from pinqpy.remote.server.sessions import COOKIE, CuratorKey, Sessions, bearer, same_origin
from pinqpy.remote.server.state import ServerState

__all__ = ["LOGIN", "LOGOUT", "PAGE", "PATHS", "SUMMARY", "CuratorRoutes"]

PAGE = "/curator"
LOGIN = "/curator/login"
LOGOUT = "/curator/logout"
SUMMARY = f"{API_PREFIX}/curator/summary"
PATHS = frozenset({PAGE, LOGIN, LOGOUT, SUMMARY})
#: The largest sign-in form accepted (a token has 43 characters).
MAX_FORM_BYTES = 4096

_ANALYST_REFUSED = (
    "an analyst's token does not open the curator's dashboard; use the curator's token "
    "(pinqpy serve CONFIG --curator-token)"
)
_NOT_CURATOR = "that is not the curator's token"


class CuratorRoutes:
    """The curator's routes over ``state`` (see the module docstring); ``secure``: the server
    serves TLS, so the session cookie is ``Secure``."""

    def __init__(self, state: ServerState, key: CuratorKey, *, secure: bool):
        self.state = state
        self.key = key
        self.secure = secure
        self.sessions = Sessions()

    def who(self, token: str | None, seen: Seen) -> str | None:
        """``"curator"``, ``"analyst"`` or None, for a presented token (noted in ``seen``,
        with the analyst's name for the log)."""
        if self.key.verify(token):
            seen.role = "curator"
        elif token is not None and (analyst := self.state.authenticate(token)) is not None:
            seen.role, seen.analyst = "analyst", analyst.name
        return seen.role

    async def handle(self, request: Any, seen: Seen) -> Any:
        path, method = request.url.path.rstrip("/") or "/", request.method
        want = "GET" if path in (PAGE, SUMMARY) else "POST"
        if method != want and not (method == "HEAD" and want == "GET"):
            return _json(405, {"error": error_doc(f"{path} takes {want} requests")})
        if path == SUMMARY:
            return await self._summary(request, seen)
        if path == PAGE:
            return await self._page(request, seen)
        if not same_origin(request.headers.get("origin"), request.headers.get("host")):
            return _html(403, login_page("a sign-in or sign-out from another site is refused"))
        if path == LOGIN:
            return await self._login(request, seen)
        self.sessions.end(request.cookies.get(COOKIE))
        return _redirect(self.sessions.clear_cookie(secure=self.secure))

    async def _summary(self, request: Any, seen: Seen) -> Any:
        role = self.who(bearer(request.headers.get("authorization")), seen)
        if role == "curator":
            doc = await asyncio.to_thread(summary, self.state)
            return _json(200, doc)
        if role == "analyst":
            return _json(403, {"error": error_doc(_ANALYST_REFUSED)})
        message = "the curator's summary needs the curator's token (Authorization: Bearer <token>)"
        return _json(401, {"error": error_doc(message)}, {"WWW-Authenticate": "Bearer"})

    async def _page(self, request: Any, seen: Seen) -> Any:
        header = request.headers.get("authorization")
        if header is not None:
            role = self.who(bearer(header), seen)
            if role == "analyst":
                return _html(403, login_page(_ANALYST_REFUSED))
            if role is None:
                return _html(401, login_page(_NOT_CURATOR), {"WWW-Authenticate": "Bearer"})
        elif self.sessions.valid(request.cookies.get(COOKIE)):
            seen.role = "curator"
        else:
            return _html(200, login_page())
        doc = await asyncio.to_thread(summary, self.state)
        return _html(200, dashboard_page(doc))

    async def _login(self, request: Any, seen: Seen) -> Any:
        body = await _form(request)
        if body is None:
            return _html(400, login_page("the sign-in form could not be read; try again"))
        tokens = body.get("token", [])
        role = self.who(tokens[0].strip() if len(tokens) == 1 else None, seen)
        if role == "analyst":
            return _html(403, login_page(_ANALYST_REFUSED))
        if role is None:
            return _html(401, login_page(_NOT_CURATOR), {"WWW-Authenticate": "Bearer"})
        cookie = self.sessions.set_cookie(self.sessions.issue(), secure=self.secure)
        return _redirect(cookie)


async def _form(request: Any) -> dict[str, list[str]] | None:
    """The sign-in form's fields, or None when it is too large, slow or malformed."""
    chunks, size = [], 0
    try:
        async with asyncio.timeout(10):
            async for chunk in request.stream():
                size += len(chunk)
                if size > MAX_FORM_BYTES:
                    return None
                chunks.append(chunk)
        text = b"".join(chunks).decode("utf-8")
        return parse_qs(text, max_num_fields=8)
    except (TimeoutError, UnicodeDecodeError, ValueError):
        return None


def _json(status: int, doc: Any, headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import Response

    return Response(
        dumps(doc), status, {"Cache-Control": "no-store", **(headers or {})},
        media_type="application/json",
    )  # fmt: skip


def _html(status: int, text: str, headers: dict[str, str] | None = None) -> Any:
    from starlette.responses import Response

    return Response(
        text, status, {**SECURITY_HEADERS, **(headers or {})}, media_type="text/html"
    )


def _redirect(cookie: str) -> Any:
    """To the page (303: the browser GETs it), setting or clearing the session cookie."""
    from starlette.responses import Response

    return Response(
        b"", 303, {**SECURITY_HEADERS, "Location": PAGE, "Set-Cookie": cookie}
    )
