"""Slow clients cannot hold connections open: real sockets against a real server process.

Every loop here is bounded; the only time asserted is a generous upper bound on how long the
server takes to close a connection (several times its ``header_timeout_s``).
"""

from __future__ import annotations

import contextlib
import select
import socket
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.remote.harness import ServerProcess, default_config, start_server

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX sockets")

LIMITS = "header_timeout_s = 1\nmax_connections = 8\nquery_timeout_s = 5"
HEAD = b"GET /v1/session HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    text = default_config().replace("[tables.pums]", f"[server.limits]\n{LIMITS}\n\n[tables.pums]")
    s = start_server(tmp_path_factory.mktemp("connections"), text)
    yield s
    s.stop()


def connect(server: ServerProcess, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        c.setblocking(False)
        out.append(c)
    return out


def closed(c: socket.socket) -> bool:
    """Whether the server has closed ``c`` (end of stream or reset), reading what it sent."""
    try:
        while select.select([c], [], [], 0)[0]:
            if not c.recv(65536):
                return True
    except OSError:
        return True
    return False


def drip(socks: list[socket.socket], seconds: float, every: float = 0.2) -> list[bool]:
    """Send each socket's request head one byte every ``every`` seconds for ``seconds``;
    which of them the server closed."""
    shut = [False] * len(socks)
    for i in range(int(seconds / every)):
        for k, c in enumerate(socks):
            if shut[k] or closed(c):
                shut[k] = True
                continue
            try:
                c.send(HEAD[i : i + 1])
            except OSError:
                shut[k] = True
        if all(shut):
            break
        time.sleep(every)
    return shut


def honest(server: ServerProcess) -> int:
    return httpx.get(server.url + "/v1/session", headers=server.headers(), timeout=30).status_code


def test_a_head_sent_a_byte_at_a_time_is_cut_off(server):
    socks = connect(server, 6)
    try:
        shut = drip(socks, seconds=8)  # the head timeout is 1 s
        assert sum(shut) == len(socks), f"{len(socks) - sum(shut)} slow connections still open"
        assert honest(server) == 200
    finally:
        for c in socks:
            c.close()


def test_the_cut_off_connection_is_told_why(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as c:
        c.sendall(HEAD[:20])
        got = b""
        for _ in range(50):  # bounded: at most 50 reads of up to 10 s each
            chunk = c.recv(65536)
            if not chunk:
                break
            got += chunk
    assert got.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b"the request head took too long to arrive" in got


def test_connections_that_send_nothing_are_closed_too(server):
    socks = connect(server, 4)
    try:
        shut = [False] * len(socks)
        for _ in range(40):  # at most 8 s
            shut = [s or closed(c) for s, c in zip(shut, socks, strict=True)]
            if all(shut):
                break
            time.sleep(0.2)
        assert all(shut)
    finally:
        for c in socks:
            c.close()


def test_a_cap_on_open_connections_still_lets_an_honest_client_in(server):
    socks = connect(server, 20)  # more than max_connections = 8, none sending
    try:
        time.sleep(0.3)
        still = [c for c in socks if not closed(c)]
        assert len(still) <= 8  # the ones waiting longest were closed to make room
        assert honest(server) == 200  # one more waiting connection closed for it
    finally:
        for c in socks:
            c.close()


def read_until_closed(c: socket.socket, reads: int = 50) -> tuple[bytes, bool]:
    """What the server sends on ``c`` until it closes it (at most ``reads`` blocking reads);
    whether it did close it."""
    got = b""
    for _ in range(reads):
        try:
            chunk = c.recv(65536)
        except OSError:  # reset: closed
            return got, True
        if not chunk:
            return got, True
        got += chunk
    return got, False


def test_a_huge_head_is_refused(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as c:
        with contextlib.suppress(OSError):  # the server may close before reading it all
            c.sendall(b"GET /v1/session HTTP/1.1\r\nX-Big: " + b"a" * 200_000)
        got, shut = read_until_closed(c)
    assert shut
    # Closed with unread bytes in its buffer, the socket may be reset before the answer
    # is read; what does arrive is the 431.
    assert got == b"" or got.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
    assert honest(server) == 200


def test_a_second_request_dripped_on_a_kept_alive_connection_is_cut_off(server):
    token = server.tokens["alice"]
    first = f"GET /v1/budget HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as c:
        c.sendall(first.encode())
        answer = c.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
        c.setblocking(False)
        (shut,) = drip([c], seconds=8)
    assert shut


def test_a_body_dripped_after_the_answer_is_cut_off(server):
    head = b"POST /v1/aggregate HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as c:
        c.sendall(head)  # no token: answered 401 at once, the body never read
        assert c.recv(65536).startswith(b"HTTP/1.1 401 Unauthorized\r\n")
        c.setblocking(False)
        shut = False
        for _ in range(100):  # the body has query_timeout_s (5 s) and a second: at most 20 s
            if closed(c):
                shut = True
                break
            try:
                c.send(b"x")
            except OSError:
                shut = True
                break
            time.sleep(0.2)
    assert shut
