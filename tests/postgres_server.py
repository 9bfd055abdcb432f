"""A real PostgreSQL server for the tests: ``initdb`` in a temporary folder, listening on
127.0.0.1 on a free port (its Unix socket in that folder), stopped by its PID at the end.

initdb and the server refuse to run as root: as root they run as the ``postgres`` user
(which the Debian package creates), the folder handed to it. The binaries are found on the
PATH or under ``/usr/lib/postgresql/*/bin`` (Debian does not put them on the PATH).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def binaries() -> Path | None:
    """The folder holding initdb and postgres, or None where PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(folder, "initdb")):
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_user() -> tuple[list[str], int | None]:
    """The command prefix that runs as a non-root user (root: ``postgres``), and its uid."""
    if os.geteuid() != 0:
        return [], None
    try:
        uid = pwd.getpwnam("postgres").pw_uid
    except KeyError:
        raise RuntimeError("running as root needs a 'postgres' user for the test server") from None
    runner = shutil.which("runuser") or shutil.which("su")
    if runner is None:
        raise RuntimeError("running as root needs runuser or su for the test server")
    if runner.endswith("runuser"):
        return [runner, "-u", "postgres", "--"], uid
    return [runner, "postgres", "-s", "/bin/sh", "-c"], uid


@contextlib.contextmanager
def running_server() -> Iterator[str]:
    """A fresh server for the duration; yields its connection string (user ``pinq``,
    database ``pinq``, trust authentication on 127.0.0.1 only)."""
    bindir = binaries()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (initdb not found)")
    prefix, uid = _as_user()
    folder = Path(tempfile.mkdtemp(prefix="pinqpy-pg-"))
    if uid is not None:
        os.chown(folder, uid, -1)
    data, port = folder / "data", _free_port()

    def run(*args: str) -> None:
        cmd = [str(bindir / args[0]), *args[1:]]
        if prefix and prefix[-1] == "-c":  # su: one shell command
            cmd = [*prefix, " ".join(map(_quote, cmd))]
        else:
            cmd = [*prefix, *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    proc = None
    try:
        run("initdb", "-D", str(data), "-A", "trust", "-U", "pinq", "-E", "UTF8",
            "--no-sync", "--locale=C.UTF-8")
        options = [
            "-p", str(port), "-k", str(folder), "-c", "listen_addresses=127.0.0.1",
            "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
            "-c", "max_connections=40", "-c", "shared_buffers=64MB",
        ]
        cmd = [str(bindir / "postgres"), "-D", str(data), *options]
        if prefix and prefix[-1] == "-c":
            cmd = [*prefix, "exec " + " ".join(map(_quote, cmd))]
        else:
            cmd = [*prefix, *cmd]
        log = open(folder / "server.log", "wb")  # noqa: SIM115 (closed below)
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        url = f"host=127.0.0.1 port={port} user=pinq dbname=postgres"
        _wait(url, proc)
        _create_db(url)
        yield f"host=127.0.0.1 port={port} user=pinq dbname=pinq"
    finally:
        if proc is not None:
            _stop(folder, proc)
        shutil.rmtree(folder, ignore_errors=True)


def _quote(s: str) -> str:
    return "'" + s.replace("'", "'\\''") + "'"


def _wait(url: str, proc: subprocess.Popen[bytes]) -> None:
    import psycopg

    deadline = time.monotonic() + 60
    while True:
        try:
            psycopg.connect(url, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the PostgreSQL test server did not start") from None
            time.sleep(0.05)


def _create_db(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE DATABASE pinq")


def _stop(folder: Path, proc: subprocess.Popen[bytes]) -> None:
    """Stop the postmaster by its PID (an immediate shutdown: the data is thrown away)."""
    pid = proc.pid
    pidfile = folder / "data" / "postmaster.pid"
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int(pidfile.read_text().split()[0])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGQUIT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)
