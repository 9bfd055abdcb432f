"""A real pinqpy server in a child process on 127.0.0.1, for the remote tests.

    server = start_server(tmp_path)
    httpx.get(server.url + "/v1/budget", headers=server.headers("alice"))

:func:`start_server` writes a config (by default the bundled PUMS sample as table ``pums``,
analyst ``alice`` with her own budget of epsilon 10, delta 1e-6, the ledger and tokens in
``tmp_path``), makes each analyst's token with ``--add-analyst``, starts the server on a free
port and waits until it answers. Every server started is stopped when the test process ends,
whatever happened; :meth:`ServerProcess.kill` and :meth:`ServerProcess.restart` let a test
crash and restart it on the same port with the same ledger and tokens.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import httpx

from pinqpy.remote.server.config import load_config

REPO = Path(__file__).resolve().parents[2]
PUMS_CSV = Path(str(resources.files("pinqpy").joinpath("data", "PUMS.csv")))
#: How long a server may take to start (import pandas, read the data, start a JVM, bind) on
#: a machine shared with other work.
START_TIMEOUT = 120.0

DEFAULT_CONFIG = """\
[server]
host = "127.0.0.1"
ledger = "ledger.db"
tokens = "tokens.json"

[tables.pums]
source = "csv"
path = "{pums}"
bounds = {{ age = [0, 100], income = [0, 500000] }}
keys = {{ sex = [0, 1], married = [0, 1], race = [1, 2, 3, 4, 5, 6], educ = [{educ}] }}
"""

ANALYST = """
[analysts.{name}]
tables = ["pums"]
budget = {{ epsilon = 10, delta = 1e-6 }}
"""


def default_config(analysts: Sequence[str] = ("alice",)) -> str:
    """The default config: PUMS as ``pums``; each analyst with epsilon 10, delta 1e-6."""
    text = DEFAULT_CONFIG.format(pums=PUMS_CSV, educ=", ".join(str(i) for i in range(1, 17)))
    return text + "".join(ANALYST.format(name=a) for a in analysts)


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "pinqpy", "serve", *args]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("PINQPY_TESTING", "1")
    return env


@dataclass
class ServerProcess:
    """A running server: its URL, each analyst's token, the process and its output lines."""

    url: str
    tokens: dict[str, str]
    proc: subprocess.Popen[str]
    config: Path
    ledger: Path
    output: list[str] = field(default_factory=list)
    testing: str | None = None

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def headers(self, analyst: str = "alice") -> dict[str, str]:
        """The Authorization header of ``analyst``."""
        return {"Authorization": f"Bearer {self.tokens[analyst]}"}

    def kill(self) -> None:
        """SIGKILL and wait (a crash: nothing is flushed or closed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        """Terminate (a graceful shutdown) and wait."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> ServerProcess:
        """A new server on the same port with the same config, ledger and tokens (this one is
        stopped first if it still runs)."""
        self.stop()
        return _launch(self.config, self.tokens, self.ledger, self.port, self.testing)

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


_LIVE: list[ServerProcess] = []


@atexit.register
def _stop_all() -> None:
    for server in _LIVE:
        with contextlib.suppress(Exception):
            server.kill()


def _pump(proc: subprocess.Popen[str], lines: list[str], ready: threading.Event) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("listening on "):
            ready.set()
    ready.set()  # the process ended


def _launch(
    config: Path, tokens: dict[str, str], ledger: Path, port: int, testing: str | None
) -> ServerProcess:
    args = [str(config), "--port", str(port), "--host", "127.0.0.1"]
    if testing is not None:
        args += ["--testing", testing]
    proc = subprocess.Popen(
        _command(*args),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
        cwd=str(config.parent),
    )
    lines: list[str] = []
    ready = threading.Event()
    threading.Thread(target=_pump, args=(proc, lines, ready), daemon=True).start()
    server = ServerProcess("", tokens, proc, config, ledger, lines, testing)
    _LIVE.append(server)
    ready.wait(START_TIMEOUT)
    found = next((m for line in lines if (m := re.match(r"listening on (\S+)", line))), None)
    if found is None:
        server.kill()
        raise RuntimeError("the server did not start:\n" + "\n".join(lines))
    server.url = found.group(1)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        try:
            # Only "is it up": a TLS test checks the certificate itself.
            probe = httpx.get(server.url + "/v1/session", timeout=5, verify=False)
            if probe.status_code == 401:
                return server
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            server.kill()
            raise RuntimeError("the server did not answer:\n" + "\n".join(lines))
        time.sleep(0.05)


def add_analysts(config: Path, names: Sequence[str]) -> dict[str, str]:
    """Run ``--add-analyst NAME`` for each name (side by side) and return the tokens printed."""
    procs = {
        name: subprocess.Popen(
            _command(str(config), "--add-analyst", name),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for name in names
    }
    tokens = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=START_TIMEOUT)
        found = re.search(r"^token: (\S+)$", out, re.M)
        if proc.returncode != 0 or found is None:
            raise RuntimeError(f"--add-analyst {name} failed: {out}{err}")
        tokens[name] = found.group(1)
    return tokens


def start_server(
    tmp_path: Path,
    config_text: str | None = None,
    *,
    analysts: Sequence[str] = ("alice",),
    testing: str | None = None,
) -> ServerProcess:
    """Write the config (default: :func:`default_config`) to ``tmp_path / "server.toml"``,
    make a token for each analyst, and start the server on a free port (see the module
    docstring). ``testing`` is ``"no-noise"`` or ``"seed=N"``."""
    config = Path(tmp_path) / "server.toml"
    config.write_text(config_text if config_text is not None else default_config(analysts))
    tokens = add_analysts(config, analysts)
    ledger = _ledger_of(config)
    return _launch(config, tokens, ledger, 0, testing)


def _ledger_of(config: Path) -> Path:
    return load_config(config).ledger
