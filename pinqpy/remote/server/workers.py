"""Worker processes for pandas requests: the work of a request past its limit is killed.

No thread can be stopped from outside, and pandas computes in the thread that asked, so a
pandas request runs in a process the server can kill:

* at start, once the tables are loaded and before the server listens or starts a thread, it
  forks a **zygote**: a single-threaded copy of the loaded server that does nothing but fork
  workers (so every worker is forked from a process with no threads and no client sockets,
  and shares the loaded tables copy-on-write; nothing is read again);
* each analyst whose granted tables are all on the pandas engine gets **a worker of their
  own**, forked on their first request, which answers their aggregations and SQL one at a
  time (their session, partitions and answer cache live there) and sends each reply back
  over a socket pair (:class:`~pinqpy.remote.server.replies.Reply` as bytes, never pickled);
* a request still running at its deadline is **killed** with its worker (``SIGKILL``, then
  reaped): its CPU use ends at once. The next request of that analyst forks a fresh worker.
  At most ``max_running`` workers compute at once (:class:`~pinqpy.remote.server.stopping.Gate`);
  a request waits for its analyst's worker and a slot until its deadline at most, and one
  that did not get both never started (503, nothing charged).

Why a killed request cannot overspend or leak. A worker charges through the ledger file,
each charge one SQLite transaction that checks the spent total under the file's write lock
and commits before any data is read; a process killed at any instant has committed the whole
charge or none of it, and nothing is ever refunded. Every check reads the spent totals from
the file, so a fresh worker sees every charge of every process. What a killed worker loses
is only what it kept in memory: its answer cache (an answer is stored in the ledger only
after it was computed, so the killed request's answer exists nowhere, and asking again is
charged again) and its partitions' agents (a fresh agent charges the next part of an old
partition anew: parallel composition then pays the largest part once per worker life, more
than needed, never less). The analyst learns nothing but the 504 at the deadline, a fixed
message: that the request ran past its limit is the timing the server already does not
protect (docs/server.md, *What it does not protect*).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from pinqpy.errors import PinqError
from pinqpy.pipeline.answers import fingerprint
from pinqpy.remote.protocol import encode_error, loads
from pinqpy.remote.server.replies import INTERNAL_ERROR, Reply, answer, error_doc
from pinqpy.remote.server.state import ServerState
from pinqpy.remote.server.stopping import NotStarted, Ticket, not_started

__all__ = ["WorkerPool", "stopped_reply"]

_SPAWN, _KILL = 1, 2
_COMMAND = struct.Struct("!BI")  # (what, analyst index or pid)
_ANSWER = struct.Struct("!I")  # a pid, or 0


def stopped_reply(limit: float) -> Reply:
    """The 504 of a request whose work was stopped at its limit."""
    return Reply(
        504,
        error=error_doc(
            f"the request ran longer than this server allows ({limit:g} s) and was stopped; "
            "if it was charged, the charge stands and no answer was released"
        ),
    )


@dataclass
class _Worker:
    pid: int
    conn: Connection


class WorkerPool:
    """The zygote and the analysts' workers, seen from the server (see the module docstring).

    :meth:`start` must run before the server starts a thread or opens a socket;
    :meth:`call` runs in a thread of the server's and returns when the reply is in or the
    request's deadline has passed (the worker then killed)."""

    def __init__(self, state: ServerState, analysts: list[str]):
        self.state = state
        self.analysts = sorted(analysts)
        self._locks = {a: threading.Lock() for a in self.analysts}
        self._workers: dict[str, _Worker] = {}
        self._control: socket.socket | None = None
        self._control_lock = threading.Lock()
        self.zygote: int | None = None

    # -- life ----------------------------------------------------------------------------
    def start(self) -> None:
        """Fork the zygote (the server process must have no other thread yet)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        sys.stdout.flush()
        sys.stderr.flush()
        gc.collect()
        gc.freeze()  # the loaded tables' objects stay shared with every fork
        try:
            pid = os.fork()
        except OSError as err:
            gc.unfreeze()
            ours.close()
            theirs.close()
            raise PinqError(
                f"cannot start the worker processes ({err.strerror or type(err).__name__})"
            ) from None
        if pid == 0:  # pragma: no cover - the zygote (measured by the real-server tests)
            ours.close()
            _run_child(_zygote, theirs, self.state, self.analysts)
        gc.unfreeze()
        theirs.close()
        self._control, self.zygote = ours, pid

    def close(self) -> None:
        """Stop every worker and the zygote (it kills its workers when its socket closes)."""
        control, self._control = self._control, None
        if control is not None:
            control.close()
        if self.zygote is not None:
            _reap(self.zygote)
            self.zygote = None
        for w in self._workers.values():
            w.conn.close()
        self._workers.clear()

    # -- requests ------------------------------------------------------------------------
    def call(self, ticket: Ticket, operation: str, raw: bytes, wrap: bool) -> Reply:
        """Answer ``operation`` of ``ticket``'s analyst in their worker (see the module
        docstring): the reply, a 503 if it never started, a 504 if it was stopped."""
        lock = self._locks[ticket.analyst]
        try:
            if not lock.acquire(timeout=ticket.remaining()):
                raise not_started()
            try:
                with self.state.gate.slot(ticket):
                    return self._exchange(ticket, operation, raw, wrap)
            finally:
                lock.release()
        except NotStarted as err:
            return Reply(503, error=encode_error(err))

    def _exchange(self, ticket: Ticket, operation: str, raw: bytes, wrap: bool) -> Reply:
        if ticket.remaining() <= 0:
            raise not_started()
        worker = self._worker(ticket.analyst)
        ticket.started = True
        head = json.dumps({"op": operation, "wrap": wrap}).encode()
        try:
            worker.conn.send_bytes(head + b"\n" + raw)
            if worker.conn.poll(ticket.remaining()):
                return Reply.from_bytes(worker.conn.recv_bytes())
        except (EOFError, OSError):
            self._end(ticket.analyst, worker)
            return Reply(
                500,
                error=error_doc(INTERNAL_ERROR),
                fault=f"the worker process of analyst {ticket.analyst!r} ended unexpectedly\n",
            )
        self._end(ticket.analyst, worker)
        return stopped_reply(self.state.limits.query_timeout_s)

    def _worker(self, analyst: str) -> _Worker:
        have = self._workers.get(analyst)
        if have is not None:
            return have
        pid, fd = self._command(_SPAWN, self.analysts.index(analyst), want_fd=True)
        worker = _Worker(pid, Connection(fd))
        self._workers[analyst] = worker
        return worker

    def _end(self, analyst: str, worker: _Worker) -> None:
        """Kill ``worker`` (and reap it) and forget it."""
        self._workers.pop(analyst, None)
        worker.conn.close()
        self._command(_KILL, worker.pid)

    def _command(self, what: int, arg: int, want_fd: bool = False) -> tuple[int, int]:
        with self._control_lock:
            if self._control is None:
                raise RuntimeError("the worker pool is closed")
            self._control.sendall(_COMMAND.pack(what, arg))
            data, fds, _, _ = socket.recv_fds(self._control, _ANSWER.size, 1)
            data += _recv_exact(self._control, _ANSWER.size - len(data))
        if want_fd and not fds:
            raise RuntimeError("the zygote could not fork a worker")
        return _ANSWER.unpack(data)[0], (fds[0] if fds else -1)


# -- the zygote and the workers (child processes) ---------------------------------------------
def _reap(pid: int, patience: float = 5.0) -> None:
    """Wait for the zygote to leave (it kills its workers first); kill it after ``patience``
    seconds (its workers die with it)."""
    deadline = time.monotonic() + patience
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return
            time.sleep(0.02)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return out


def _run_child(main: Any, *args: Any) -> None:  # pragma: no cover - in a child process
    """Run ``main(*args)`` in a forked child and leave with ``os._exit``: never back into
    the parent's code, its atexit handlers or its objects' finalizers."""
    status = 0
    try:
        main(*args)
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _die_with_parent() -> None:  # pragma: no cover - in a child process
    """Be killed when the parent process dies (Linux; elsewhere the closed socket tells)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _zygote(  # pragma: no cover - the zygote process
    control: socket.socket, state: ServerState, analysts: list[str]
) -> None:
    """Fork a worker or kill one, on the server's command, until the server is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the server's to handle
    _die_with_parent()
    children: set[int] = set()
    warm: set[str] = set()
    try:
        while True:
            try:
                what, arg = _COMMAND.unpack(_recv_exact(control, _COMMAND.size))
            except (EOFError, OSError):
                return  # the server is gone
            if what == _SPAWN:
                if analysts[arg] not in warm:
                    _warm(state, analysts[arg])
                    warm.add(analysts[arg])
                _spawn(control, state, analysts[arg], children)
            elif what == _KILL:
                known = arg in children
                children.discard(arg)
                if known:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(arg, signal.SIGKILL)
                control.sendall(_ANSWER.pack(0))  # it computes no more: the server may answer
                if known:
                    _kill(arg)  # reaped only now (freeing a large worker can take a moment)
    finally:
        for pid in children:
            _kill(pid)


def _warm(state: ServerState, analyst: str) -> None:  # pragma: no cover - in the zygote
    """Hash the analyst's tables once, here (a question's key in the ledger's answer cache
    needs it), so that each of their workers, forked after, has it already."""
    for rel in state.analysts[analyst].sources.values():
        with contextlib.suppress(Exception):  # not hashable: answers cached in memory only
            fingerprint(rel.plan.table, rel.catalog)  # type: ignore[attr-defined]


def _spawn(  # pragma: no cover - in the zygote
    control: socket.socket, state: ServerState, analyst: str, children: set[int]
) -> None:
    """Fork ``analyst``'s worker; send the server its pid and its end of their socket."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        pid = os.fork()
    except OSError:  # the server answers that request 500; the zygote goes on
        ours.close()
        theirs.close()
        control.sendall(_ANSWER.pack(0))
        return
    if pid == 0:
        control.close()
        ours.close()
        _run_child(_worker, theirs, state, analyst)
    theirs.close()
    children.add(pid)
    socket.send_fds(control, [_ANSWER.pack(pid)], [ours.fileno()])
    ours.close()


def _kill(pid: int) -> None:  # pragma: no cover - in the zygote
    """Kill a worker and reap it (a worker is reaped only here, so its pid is never reused
    while the server may still name it)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _worker(sock: socket.socket, state: ServerState, name: str) -> None:  # pragma: no cover
    """Answer one analyst's requests, one at a time, until the server closes the socket."""
    _die_with_parent()
    conn = Connection(sock.detach())
    analyst = state.analysts[name]
    limit = state.limits.max_request_bytes
    while True:
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return
        head, _, raw = message.partition(b"\n")
        request = json.loads(head)
        doc = loads(raw, limit)
        reply = answer(state, analyst, request["op"], doc, request["wrap"])
        conn.send_bytes(reply.to_bytes())
