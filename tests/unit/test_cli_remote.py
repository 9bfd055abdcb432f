"""The command line's remote arguments: ``pinqpy serve`` and ``--connect URL``.

Only the argument handling is tested here: ``serve_command`` and ``connect`` are replaced by
recorders (a real server and client are tested in tests/remote). The stand-in remote session
answers through a local Session and has nothing but the session protocol the shell and the
command line may use (``sql``, ``tables``, ``describe``, and ``close``), so any other use
fails the test.
"""

from __future__ import annotations

import getpass
import importlib.util
import io
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums
from pinqpy.interfaces.cli import main

URL = "http://127.0.0.1:8765"
TOKEN = "tok-" + "x" * 40


# -- pinqpy serve ------------------------------------------------------------------------------


@pytest.fixture
def serve_calls(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    def serve_command(config: Any, **kwargs: Any) -> int:
        calls.append({"config": config, **kwargs})
        return 0

    fake = types.ModuleType("pinqpy.remote.server.run")
    fake.serve_command = serve_command  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pinqpy.remote.server.run", fake)
    return calls


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["server.toml"],
            {"config": Path("server.toml"), "add_analyst": None, "demo": False, "host": None,
             "port": None, "testing": None},
        ),
        (
            ["server.toml", "--add-analyst", "alice"],
            {"config": Path("server.toml"), "add_analyst": "alice", "demo": False, "host": None,
             "port": None, "testing": None},
        ),
        (
            ["--host", "0.0.0.0", "--port", "9000", "conf/s.toml", "--testing", "seed=3"],
            {"config": Path("conf/s.toml"), "add_analyst": None, "demo": False,
             "host": "0.0.0.0", "port": 9000, "testing": "seed=3"},
        ),
        (
            ["server.toml", "--curator-token"],
            {"config": Path("server.toml"), "add_analyst": None, "curator_token": True,
             "demo": False, "host": None, "port": None, "testing": None},
        ),
        (
            ["--demo", "--port", "0"],
            {"config": None, "add_analyst": None, "demo": True, "host": None, "port": 0,
             "testing": None},
        ),
    ],
)  # fmt: skip
def test_serve_passes_its_arguments(
    serve_calls: list[dict[str, Any]], argv: list[str], expected: dict[str, Any]
) -> None:
    assert main(["serve", *argv]) == 0
    assert serve_calls == [{"curator_token": False, **expected}]


def test_serve_exit_status_is_serve_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("pinqpy.remote.server.run")
    fake.serve_command = lambda config, **kw: 3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pinqpy.remote.server.run", fake)
    assert main(["serve", "s.toml"]) == 3


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        ([], "CONFIG (or --demo)"),
        (["--demo", "s.toml"], "--demo serves the bundled sample"),
        (["--demo", "--add-analyst", "bob"], "--add-analyst"),
        (["s.toml", "--port", "70000"], "from 0 to 65535"),
        (["s.toml", "--port", "http"], "whole number"),
        (["s.toml", "other.toml"], "unrecognized arguments"),
        (["s.toml", "--token", TOKEN], "unrecognized arguments"),
    ],
)
def test_serve_usage_errors(
    serve_calls: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    fragment: str,
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", *argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert fragment in err
    assert len(err.strip().splitlines()) == 1
    assert serve_calls == []


def test_serve_without_the_server_extra(
    serve_calls: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a)
    )
    assert main(["serve", "s.toml"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "pinqpy: error: pinqpy serve needs the server extra: pip install 'pinqpy[server]'\n"
    )
    assert serve_calls == []


def test_serve_help_hides_the_testing_switch(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["serve", "--help"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert "--add-analyst" in text and "--demo" in text and "--port" in text
    assert "--testing" not in text
    assert main(["--help"]) == 0
    assert "serve" in capsys.readouterr().out


def test_the_command_line_does_not_import_the_server() -> None:
    code = (
        "import sys\n"
        "from pinqpy.interfaces.cli import main\n"
        "main(['--help'])\n"
        "assert not {'starlette', 'uvicorn', 'httpx'} & set(sys.modules), sys.modules.keys()\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr


# -- --connect ---------------------------------------------------------------------------------


class StandIn:
    """A remote session's stand-in: the session protocol and ``close``, answered locally."""

    def __init__(self, session: pq.Session):
        self._session = session
        self.calls: list[tuple[str, Any]] = []
        self.closed = False

    @property
    def tables(self) -> list[str]:
        self.calls.append(("tables", None))
        return list(self._session.tables)

    def sql(self, query: str, epsilon: float | None = None, delta: float | None = None) -> Any:
        self.calls.append(("sql", (query, epsilon, delta)))
        return self._session.sql(query, epsilon=epsilon, delta=delta)

    def describe(self, name: str) -> pd.DataFrame:
        self.calls.append(("describe", name))
        return self._session.describe(name)

    def close(self) -> None:
        self.closed = True

    def __getattr__(self, name: str) -> Any:
        if name == "last_note":  # optional in the protocol; a remote session has none
            raise AttributeError(name)
        raise AssertionError(f"the command line used {name!r}, outside the session protocol")


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, StandIn]]:
    made: list[tuple[str, str, StandIn]] = []

    def connect(url: str, token: str | None = None, **kwargs: Any) -> StandIn:
        session = pq.Session()
        session.register(
            "pums",
            load_pums(),
            budget=pq.Budget(epsilon=1.0),
            bounds=PUMS_BOUNDS,
            keys=PUMS_KEYS,
        )
        remote = StandIn(session)
        made.append((url, str(token), remote))
        return remote

    fake = types.ModuleType("pinqpy.remote.client.session")
    fake.connect = connect  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pinqpy.remote.client.session", fake)
    monkeypatch.delenv("PINQPY_TOKEN", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    return made


def test_query_connect_reads_the_token_from_the_environment(
    connections: list[tuple[str, str, StandIn]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PINQPY_TOKEN", TOKEN)
    argv = ["query", "--connect", URL, "--epsilon", "0.5", "--format", "json"]
    with pq.testing.no_noise():
        status = main([*argv, "SELECT COUNT(*) AS n FROM pums"])
    out = capsys.readouterr()
    assert status == 0, out.err
    assert json.loads(out.out)[0]["n"] == len(load_pums())
    [(url, token, remote)] = connections
    assert (url, token) == (URL, TOKEN)
    # Besides the query, the budget is read (SHOW BUDGET, free) for the charge line on stderr.
    asked = [c for c in remote.calls if c != ("sql", ("SHOW BUDGET", None, None))]
    assert asked == [("sql", ("SELECT COUNT(*) AS n FROM pums", 0.5, None))]
    assert ("sql", ("SHOW BUDGET", None, None)) in remote.calls
    assert remote.closed


def test_query_connect_per_query_flags_and_options(
    connections: list[tuple[str, str, StandIn]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAB_TOKEN", TOKEN)
    argv = ["query", "--connect", URL, "--token-env", "LAB_TOKEN", "--epsilon-per-query", "0.2"]
    assert main([*argv, "SELECT COUNT(*) FROM pums OPTIONS (epsilon = 0.1)"]) == 0
    assert main([*argv, "--delta", "1e-9", "SHOW TABLES"]) == 0
    sent = [args for _, _, r in connections for kind, args in r.calls]
    sent = [a for a in sent if a != ("SHOW BUDGET", None, None)]  # read for the charge line
    # OPTIONS wins over the flag; --delta with --connect is the query's delta.
    assert sent == [
        ("SELECT COUNT(*) FROM pums OPTIONS (epsilon = 0.1)", None, None),
        ("SHOW TABLES", 0.2, 1e-9),
    ]
    assert connections[0][1] == TOKEN


def test_no_token_is_a_clear_error_and_nothing_connects(
    connections: list[tuple[str, str, StandIn]], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", "--connect", URL, "SHOW TABLES"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pinqpy: error: no token for {URL}: set the environment variable")
    assert "PINQPY_TOKEN" in err and len(err.strip().splitlines()) == 1
    assert main(["query", "--connect", URL, "--token-env", "LAB_TOKEN", "SHOW TABLES"]) == 1
    assert "set the environment variable LAB_TOKEN to" in capsys.readouterr().err
    # A token given where the variable's name goes is not repeated, even when it could be one.
    like_a_name = "Ab" + "c9" * 21
    assert main(["query", "--connect", URL, "--token-env", like_a_name, "SHOW TABLES"]) == 1
    err = capsys.readouterr().err
    assert "the environment variable --token-env names" in err
    assert like_a_name not in err
    assert connections == []


def test_at_a_terminal_the_token_is_asked_for_hidden(
    connections: list[tuple[str, str, StandIn]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    asked: list[str] = []

    def hidden(prompt: str) -> str:
        asked.append(prompt)
        return f"  {TOKEN}\n"

    monkeypatch.setattr(sys, "stdin", Terminal(""))
    monkeypatch.setattr(getpass, "getpass", hidden)
    assert main(["query", "--connect", URL, "SHOW TABLES"]) == 0
    assert asked == [f"pinqpy token for {URL}: "]
    assert connections[0][1] == TOKEN
    monkeypatch.setattr(getpass, "getpass", lambda prompt: "")
    assert main(["query", "--connect", URL, "SHOW TABLES"]) == 1
    assert "nothing was typed" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["query", "--connect", URL, "people=p.csv", "SHOW TABLES"], "give no NAME=PATH"),
        (["query", "--connect", URL, "--bounds", "age=0:1", "SHOW TABLES"], "--bounds describes"),
        (["shell", "--connect", URL, "--ledger", "x.db"], "--ledger describes"),
        (["shell", "--connect", URL, "--no-ledger"], "--no-ledger describes"),
        (["shell", "--connect", URL, "--engine", "duckdb"], "--engine describes"),
        (["query", "--connect", URL, "--epsilon", "1", "--epsilon-per-query", "1", "SHOW TABLES"],
         "not both"),
        (["query", "--connect", "ftp://h/x", "SHOW TABLES"], "http://HOST:PORT"),
        (["query", "--connect", "127.0.0.1:8765", "SHOW TABLES"], "http://HOST:PORT"),
        (["query", "--connect", f"http://alice:{TOKEN}@h:1", "SHOW TABLES"], "no credentials"),
        (["query", "--connect", URL, "--token-env", TOKEN + ".x", "SHOW TABLES"],
         "not the token itself"),
        (["query", "--connect", URL, "--token", TOKEN, "SHOW TABLES"], "not the token itself"),
        (["query", "p.csv", "--epsilon", "1", "--token-env", "T", "SHOW TABLES"],
         "--token-env goes with --connect"),
        (["shell"], "NAME=PATH, --epsilon"),
        (["shell", "p.csv"], "required: --epsilon"),
    ],
)  # fmt: skip
def test_connect_usage_errors(
    connections: list[tuple[str, str, StandIn]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    fragment: str,
) -> None:
    monkeypatch.setenv("PINQPY_TOKEN", TOKEN)
    try:
        status = main(argv)
    except SystemExit as exit_:
        status = exit_.code  # type: ignore[assignment]
    assert status == 2
    err = capsys.readouterr().err
    assert fragment in err
    assert len(err.strip().splitlines()) == 1
    assert TOKEN not in err  # no error repeats a token back
    assert connections == []


def test_shell_connect_runs_the_same_shell_over_the_protocol(
    connections: list[tuple[str, str, StandIn]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("PINQPY_TOKEN", TOKEN)
    script = (
        "SELECT COUNT(*) FROM pums;\n.tables\n.budget\n.describe pums\nSELECT nope FROM pums;\n"
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO(script))
    assert main(["shell", "--connect", URL]) == 1  # the last statement fails
    out = capsys.readouterr()
    # The default per-query epsilon is a tenth of the budget, as for local files.
    assert "charged epsilon 0.1 to pums (0.9 left)" in out.out
    assert "pums (private): age, sex, educ, race, income, married" in out.out
    assert "(each query spends epsilon 0.1; .epsilon changes it)" in out.out
    assert "type_source" in out.out  # .describe ran DESCRIBE
    assert out.err.startswith("error (line 5): unknown column 'nope'")
    [(_, _, remote)] = connections
    assert {kind for kind, _ in remote.calls} == {"tables", "sql", "describe"}
    assert remote.closed
