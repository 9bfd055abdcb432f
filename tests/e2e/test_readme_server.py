"""The server page, docs/server.md, runs as written, against real servers.

Its python blocks run in tests/e2e/test_readme_snippets.py, with every other page's (they
say ``# needs: server``, and that test starts ``pinqpy serve --demo``). Here: the quick
start's commands, the config and its commands, the notebook magic and the shell, and the
limits table. The only substitutions are the ones a reader makes: the port the test server
listens on for 8765, and ``python -m pinqpy`` (this checkout's) for ``pinqpy``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

import pinqpy as pq
from pinqpy.demo import PUMS_PATH
from tests.e2e.snippets import PINQPY, REPO, Server
from tests.e2e.snippets import blocks as read_blocks
from tests.e2e.snippets import reader_env as child_env

PAGE = REPO / "docs" / "server.md"


def section() -> str:
    return PAGE.read_text()


def blocks(lang: str) -> list[str]:
    """The page's fenced code blocks in language ``lang`` ("" for a bare fence)."""
    return [b.text for b in read_blocks(PAGE) if b.lang == lang]


def commands(block: str) -> list[list[str]]:
    """The commands of a bash block, comments dropped, ``pinqpy`` as ``python -m pinqpy``."""
    out = []
    for line in block.splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            out.append(PINQPY + words[1:] if words[0] == "pinqpy" else words)
    return out


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    (quick,) = [b for b in blocks("bash") if "--demo" in b]
    install, serve = commands(quick)
    assert install == ["pip", "install", "'.[server]'"]
    assert serve == [*PINQPY, "serve", "--demo"]
    server = Server(serve, tmp_path)
    try:
        tokens = server.tokens()
        assert len(tokens) == 1, server.output()
        # the token is shown for the analyst's shell, never inside a paste-able connect line
        assert f"\nexport PINQPY_TOKEN={tokens[0]}\n" in server.output()
        assert f'pq.connect("{server.url}")' in server.output()
        assert f'token="{tokens[0]}"' not in server.output()
        yield server, tokens[0]
    finally:
        server.stop()


def test_three_ways_in_notebook(demo: tuple[Server, str], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output
    from traitlets.config import Config

    server, token = demo
    monkeypatch.setenv("PINQPY_TOKEN", token)
    (block,) = [b for b in blocks("") if "%pinq connect" in b]
    lines = [
        line.replace("127.0.0.1:8765", f"127.0.0.1:{server.port}") for line in block.split("\n")
    ]
    cfg = Config()
    cfg.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=cfg)
    try:
        with capture_output() as out:
            for line in filter(None, lines):
                assert shell.run_cell(line, store_history=False).success, out.stderr
            done = shell.run_cell("%%pinq -e 0.1\nSELECT COUNT(*) AS n FROM pums")
        assert done.success and isinstance(done.result, pd.DataFrame), out.stderr
        assert list(done.result.columns) == ["n"]
    finally:
        shell.run_cell("%pinq disconnect", store_history=False)
        shell.run_line_magic("unload_ext", "pinqpy")


def test_three_ways_in_shell(demo: tuple[Server, str]) -> None:
    server, token = demo
    url = f"http://127.0.0.1:{server.port}"
    text = section().replace("127.0.0.1:8765", f"127.0.0.1:{server.port}")
    assert f"`pinqpy shell --connect {url}`" in text
    env = {**child_env(), "PINQPY_TOKEN": token}  # the analyst's machine: a token, no data
    shell = subprocess.run(
        [*PINQPY, "shell", "--connect", url],
        input="SELECT COUNT(*) AS n FROM pums;\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shell.returncode == 0, shell.stdout + shell.stderr
    assert re.search(r"^\s*\d+ ± \d+\s*$", shell.stdout, re.M), shell.stdout  # a noisy count
    assert "charged epsilon" in shell.stdout and token not in shell.stdout + shell.stderr


def test_config_and_add_analyst(tmp_path: Path) -> None:
    config = blocks("toml")[0]  # the full config; the second block is a PostgreSQL table
    shutil.copy(PUMS_PATH, tmp_path / "PUMS.csv")  # "path" is relative to the config file
    (tmp_path / "server.toml").write_text(config)
    (add, serve) = commands(next(b for b in blocks("bash") if "--add-analyst" in b))
    tokens = {}
    for name in ("alice", "bob"):
        argv = [*add[:-1], name]
        out = subprocess.run(argv, cwd=tmp_path, env=child_env(), capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
        (tokens[name],) = re.findall(r"^token: (\S+)$", out.stdout, flags=re.M)
    stored = (tmp_path / "pinqpy-tokens.json").read_text()
    assert all(tok not in stored for tok in tokens.values())  # hashes only
    assert (tmp_path / "pinqpy-tokens.json").stat().st_mode & 0o777 == 0o600
    server = Server(serve, tmp_path)
    try:
        out = server.output()
        assert "pums" in out and "alice" in out and "bob" in out
        alice = pq.connect(server.url, token=tokens["alice"])
        bob = pq.connect(server.url, token=tokens["bob"])
        alice.table("pums").count(epsilon=0.1)
        bob.table("pums").count(epsilon=0.25)
        assert alice.budget.total.epsilon == 1 and alice.budget.spent.epsilon == 0.1
        assert bob.budget.total.epsilon == 2 and bob.budget.spent.epsilon == 0.25
        alice.close()
        bob.close()
    finally:
        server.stop()
    assert (tmp_path / "pinqpy-ledger.db").exists()


def test_config_block_loads(tmp_path: Path) -> None:
    from pinqpy.remote.server.config import load_config

    block, postgres = blocks("toml")
    # The PostgreSQL table's block names the variable that holds the connection string.
    visits = tomllib.loads(postgres)["tables"]["visits"]
    assert visits["source"] == "postgres" and visits["connection_env"] == "CENSUS_PG_URL"
    shutil.copy(PUMS_PATH, tmp_path / "PUMS.csv")
    (tmp_path / "server.toml").write_text(block)
    config = load_config(tmp_path / "server.toml")
    assert config.port == 8765 and config.ledger == tmp_path / "pinqpy-ledger.db"
    assert set(config.tables) == {"pums"} and set(config.analysts) == {"alice", "bob"}


def test_limits_table_gives_the_defaults() -> None:
    from pinqpy.remote.server.config import Limits

    shown: dict[str, float] = {}
    for line in section().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 3:
            names = re.findall(r"`(\w+)`", cells[0])
            if cells[1] == "the CPUs, at least 2":  # max_running: the machine's, said so
                cells[1] = str(Limits().max_running)
            values = [float(v.replace(",", "")) for v in cells[1].split(", ")]
            shown.update(zip(names, values, strict=True))
    assert shown == {k: float(v) for k, v in Limits().as_dict().items()}


def test_sample_config_has_the_keys_shown() -> None:
    """Every key the README's config shows (the group aside: the sample has none) is one the
    bundled sample sets too, so the README's block is the sample's shape."""
    sample = tomllib.loads((REPO / "pinqpy" / "data" / "server-demo.toml").read_text())
    shown = tomllib.loads(blocks("toml")[0])
    assert set(shown["server"]) <= set(sample["server"])
    assert (sample["server"]["host"], sample["server"]["port"]) == ("127.0.0.1", 8765)  # --demo
    assert set(shown["tables"]["pums"]) <= set(sample["tables"]["pums"])
    assert set(shown["analysts"]["alice"]) <= set(sample["analysts"]["demo"])
