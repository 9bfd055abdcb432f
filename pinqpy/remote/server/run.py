"""``pinqpy serve``: start the curator's server (uvicorn), add analysts, or serve the demo.

* ``pinqpy serve CONFIG`` serves the config's tables until stopped (Ctrl-C), printing where
  it listens and which tables and analysts it serves;
* ``pinqpy serve CONFIG --add-analyst NAME`` makes a token for an analyst of the config,
  prints it once, stores only its hash, and exits;
* ``pinqpy serve CONFIG --curator-token`` makes a token for the curator's dashboard, prints
  it once with the ``curator_token_sha256 = "..."`` line to put in the config's ``[server]``
  section (the server never writes the config), and exits;
* ``pinqpy serve --demo`` serves the bundled PUMS sample (``pinqpy/data/server-demo.toml``)
  as table ``pums`` to analyst ``demo``, with a fresh token and its ledger in a temporary
  folder, and prints the token and the ``export PINQPY_TOKEN=...`` line to paste into the
  analyst's shell (``pq.connect(url)`` reads the token from there, so it stays out of
  notebooks).

``--host`` and ``--port`` override the config (port 0: any free port; the banner shows the
real one). ``--testing no-noise`` / ``--testing seed=N`` (not shown in ``--help``) run every
request under that test hook, so tests can compare remote and local answers; they are
accepted only when ``PINQPY_TESTING=1`` is set in the server's own environment, and the
banner then says loudly that answers are not private.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import IO

from pinqpy.errors import PinqError
from pinqpy.remote.server.auth import TokenStore, hash_token, new_token
from pinqpy.remote.server.config import STDERR, ServerConfig, load_config, shared_sources
from pinqpy.remote.server.requestlog import RequestLog
from pinqpy.remote.server.state import ServerState, inferred_type_warnings, parse_testing
from pinqpy.remote.server.workers import WorkerPool

__all__ = ["demo_config", "serve_command"]

#: The environment switch the test hooks need (the value pinqpy.testing.SWITCH names).
TESTING_SWITCH = "PINQPY_TESTING"


def demo_config() -> Path:
    """The bundled sample config (serving ``pinqpy/data/PUMS.csv`` as ``pums``)."""
    return Path(str(resources.files("pinqpy").joinpath("data", "server-demo.toml")))


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # A restarted server takes its port back at once, even with connections in TIME_WAIT.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Answers are small: send each at once rather than wait for the client's ACK (Nagle's
    # algorithm with delayed ACKs adds about 40 ms to every request otherwise). Accepted
    # connections inherit the option.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise PinqError(
            f"cannot listen on {host}:{port} ({err.strerror or type(err).__name__}); choose "
            "another --port (0 picks a free one) or --host"
        ) from None
    sock.listen(128)
    return sock


def serve_command(
    config: str | os.PathLike[str] | None,
    *,
    add_analyst: str | None = None,
    curator_token: bool = False,
    demo: bool = False,
    host: str | None = None,
    port: int | None = None,
    testing: str | None = None,
    out: IO[str] = sys.stdout,
    err: IO[str] = sys.stderr,
) -> int:
    """Run ``pinqpy serve``; the exit status (1 on an error, 2 on bad usage; each error is
    one line on ``err``)."""

    def usage(message: str) -> int:
        print(f"pinqpy serve: {message}", file=err)
        return 2

    if demo and config is not None:
        return usage("--demo serves the bundled sample; give either a config file or --demo")
    if not demo and config is None:
        return usage("give a config file (pinqpy serve CONFIG) or --demo")
    if demo and add_analyst is not None:
        return usage("--demo makes its own analyst; --add-analyst needs a config file")
    if demo and curator_token:
        return usage("--curator-token makes a line for a config file; give the config file")
    if curator_token and add_analyst is not None:
        return usage("give --add-analyst or --curator-token, one at a time")
    if port is not None and not 0 <= port <= 65535:
        return usage("--port must be between 0 and 65535")
    if testing is not None:
        try:
            parse_testing(testing)
        except PinqError as e:
            return usage(str(e))
        if os.environ.get(TESTING_SWITCH) != "1":
            return usage(
                f"--testing removes every privacy guarantee and is accepted only when "
                f"{TESTING_SWITCH}=1 is set in the server's environment"
            )

    scratch: str | None = None
    try:
        if demo:
            scratch = tempfile.mkdtemp(prefix="pinqpy-demo-")
            cfg = load_config(demo_config())
            cfg = replace(
                cfg,
                ledger=Path(scratch) / "demo.ledger.db",
                tokens=Path(scratch) / "demo.tokens.json",
            )
        else:
            cfg = load_config(config)  # type: ignore[arg-type]
        if add_analyst is not None:
            token = TokenStore(cfg.tokens, cfg.analysts).add(add_analyst)
            print(f"token: {token}", file=out)
            print(
                f"(the token for analyst {add_analyst!r}, shown only now; {cfg.tokens} keeps "
                "only its hash, and a new token replaces it)",
                file=out,
            )
            return 0
        if curator_token:
            _print_curator_token(cfg, out)
            return 0
        cfg = replace(
            cfg,
            host=host if host is not None else cfg.host,
            port=port if port is not None else cfg.port,
        )
        demo_token = TokenStore(cfg.tokens, cfg.analysts).add("demo") if demo else None
        return _serve(cfg, testing, demo_token, out, err)
    except PinqError as e:
        print(f"pinqpy serve: {e}", file=err)
        return 1
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _print_curator_token(cfg: ServerConfig, out: IO[str]) -> None:
    """A fresh curator token, and the config line that holds its hash."""
    token = new_token()
    print(f"token: {token}", file=out)
    print(
        "(the curator's dashboard token, shown only now; the server keeps only its hash: put "
        f"this line in the [server] section of {cfg.path}, then restart the server)",
        file=out,
    )
    print(f'curator_token_sha256 = "{hash_token(token)}"', file=out)


def _check_curator(cfg: ServerConfig, state: ServerState) -> None:
    """The curator's token must be no analyst's."""
    digest = cfg.curator_token_sha256
    if digest is not None and digest in state.tokens.read().values():
        raise PinqError(
            "curator_token_sha256 is the hash of an analyst's token; the curator's token must "
            "be apart: make one with pinqpy serve CONFIG --curator-token"
        )


def _serve(
    cfg: ServerConfig, testing: str | None, demo_token: str | None, out: IO[str], err: IO[str]
) -> int:
    try:
        import uvicorn
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        raise PinqError(
            "the server needs its extra: pip install 'pinqpy[server]' (starlette, uvicorn, "
            "httptools)"
        ) from None
    from pinqpy.remote.server.app import create_app
    from pinqpy.remote.server.guard import guarded

    state = ServerState(cfg, testing=testing)
    workers: WorkerPool | None = None
    requests: RequestLog | None = None
    try:
        _check_curator(cfg, state)
        requests = RequestLog.open(cfg.log, err)
        _warn(cfg, state, err)
        workers = _start_workers(state)  # before any thread or socket of this process
        sock = _bind(cfg.host, cfg.port)
        real_port = sock.getsockname()[1]
        scheme = "https" if cfg.tls_certfile else "http"
        shown_host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
        url = f"{scheme}://{shown_host}:{real_port}"
        config = uvicorn.Config(
            create_app(state, log=err, workers=workers, requests=requests),
            http=guarded(HttpToolsProtocol, cfg.limits),
            ws="none",
            ssl_certfile=str(cfg.tls_certfile) if cfg.tls_certfile else None,
            ssl_keyfile=str(cfg.tls_keyfile) if cfg.tls_keyfile else None,
            log_level="warning",
            access_log=False,
            timeout_keep_alive=5,
            timeout_graceful_shutdown=5,
        )
        try:
            config.load()  # reads the TLS files now, so a bad one is one clear line
        except (OSError, ValueError) as e:
            sock.close()
            raise PinqError(
                f"cannot serve TLS with {cfg.tls_certfile} and {cfg.tls_keyfile} "
                f"({type(e).__name__}: {e}); check the certificate and key files"
            ) from None
        _banner(cfg, url, testing, demo_token, set(state.tokens.load()), out)
        for line in inferred_type_warnings(state):
            print(f"pinqpy serve: warning: {line}", file=err)
        server = uvicorn.Server(config)
        server.run(sockets=[sock])
        return 0
    finally:
        if workers is not None:
            workers.close()
        if requests is not None:
            requests.close()
        state.close()


def _start_workers(state: ServerState) -> WorkerPool | None:
    """The worker processes of the analysts granted pandas tables only (none where the
    system cannot fork)."""
    analysts = [name for name, a in state.analysts.items() if state.pandas_only(a)]
    if not analysts or not hasattr(os, "fork"):
        return None
    workers = WorkerPool(state, analysts)
    workers.start()
    return workers


def _warn(cfg: ServerConfig, state: ServerState, err: IO[str]) -> None:
    """The curator's warnings at load: two tables over one file (two budgets over the same
    people), and analysts whose pandas work cannot be stopped at the run-time limit."""
    for first, second, where in shared_sources(cfg):
        print(
            f"pinqpy serve: warning: tables {first!r} and {second!r} both read {where}: each "
            "has budgets of its own, so an analyst granted both spends two budgets on the same "
            "people; serve the data as one table (analysts may share it), or grant each "
            "analyst only one of them",
            file=err,
        )
    for name, a in state.analysts.items():
        engines = {cfg.tables[t].engine for t in a.spec.tables}
        if "pandas" in engines and len(engines) > 1:
            print(
                f"pinqpy serve: warning: analyst {name!r} is granted pandas tables and "
                f"{' and '.join(sorted(engines - {'pandas'}))} ones, so their requests run in "
                "the server's own process, where pandas work past query_timeout_s cannot be "
                'stopped; serve those tables with engine = "duckdb", or grant them apart',
                file=err,
            )
    err.flush()


def _banner(
    cfg: ServerConfig,
    url: str,
    testing: str | None,
    demo_token: str | None,
    with_token: set[str],
    out: IO[str],
) -> None:
    from pinqpy.core.version import __version__

    source = f" (config {cfg.path})" if cfg.path is not None and demo_token is None else ""
    print(f"pinqpy {__version__} server{source}", file=out)
    print(f"listening on {url}", file=out)
    tables = ", ".join(f"{n} ({t.source}, {t.engine})" for n, t in cfg.tables.items())
    print(f"tables: {tables}", file=out)
    analysts = ", ".join(
        f"{n} ({'group ' + a.group if a.group else 'own budget'}: {', '.join(a.tables)}"
        + ("" if n in with_token else "; no token yet: --add-analyst " + n)
        + ")"
        for n, a in cfg.analysts.items()
    )
    print(f"analysts: {analysts}", file=out)
    print(f"ledger: {cfg.ledger}", file=out)
    shown_log = "off" if cfg.log is None else "standard error" if cfg.log == STDERR else cfg.log
    print(f"request log: {shown_log}", file=out)
    if cfg.curator_token_sha256 is not None:
        print(f"dashboard: {url}/curator (the curator's token)", file=out)
    else:
        print(
            "dashboard: off (pinqpy serve CONFIG --curator-token makes the curator's token)",
            file=out,
        )
    if testing is not None:
        print(
            f"TESTING MODE ({testing}): answers are not private; never serve real data like this",
            file=out,
        )
    if demo_token is not None:
        print(f"token: {demo_token}", file=out)
        print(f"export PINQPY_TOKEN={demo_token}", file=out)
        print(f'then, in Python: pq.connect("{url}") (it reads $PINQPY_TOKEN)', file=out)
    out.flush()
