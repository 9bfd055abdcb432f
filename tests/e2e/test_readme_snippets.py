"""Every ```python block of README.md and docs/*.md runs as written, and so does every bash
block marked runnable.

The convention (the markers a page uses) is in :mod:`tests.e2e.snippets`, in short:

- ```` ```python ```` blocks run in page order, in one namespace per page, from the
  repository root, without ``PINQPY_TESTING`` (a block that needs the testing hooks sets it
  itself, as the README shows). A first line ``# needs: server`` makes the test start
  ``pinqpy serve --demo`` on 127.0.0.1 (once per run) and set ``PINQPY_URL`` and
  ``PINQPY_TOKEN`` for the block, which reads them as a reader's session would; ``# needs:
  postgres`` sets ``PINQPY_POSTGRES_URL`` to the session's PostgreSQL test server. No block is
  skipped silently: an unknown ``needs`` fails, and so does a missing server extra in CI
  (locally it is a skip that names the extra).
- ```` ```bash ```` blocks run when the line before the fence is ``<!-- runnable -->``: with
  ``bash -e -o pipefail`` from the repository root, ``pinqpy`` being this checkout's. Only
  commands that work on a fresh checkout are marked (the bundled demo data, no server).

A test's id is ``page:line`` (the line of the block's opening fence); running one block alone
(``"tests/e2e/test_readme_snippets.py::test_python_block[README.md:398]"``) runs the page's
earlier blocks first, in its namespace. Files a block
writes into the repository root (a ledger such as ``budget.db``) are removed afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.snippets import PINQPY, REPO, Block, Server, blocks, pages, reader_env

ALL = [b for page in pages() for b in blocks(page)]
PYTHON = [b for b in ALL if b.lang == "python"]
BASH = [b for b in ALL if b.lang == "bash" and b.runnable]
KNOWN_NEEDS = {"server", "postgres"}

# Per page: the namespace its blocks share, and how many of its python blocks have run.
_scopes: dict[str, dict[str, object]] = {}
_done: dict[str, int] = {}


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``pinqpy serve --demo`` (the README's quick start), as a curator would start it."""
    missing = [m for m in ("starlette", "uvicorn") if importlib.util.find_spec(m) is None]
    if missing:  # the server extra is a test dependency: missing in CI fails, locally skips
        message = f"a '# needs: server' block needs {', '.join(missing)} (pinqpy[server])"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    server = Server([*PINQPY, "serve", "--demo"], tmp_path_factory.mktemp("demo-server"))
    try:
        assert len(server.tokens()) == 1, server.output()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", autouse=True)
def _no_litter() -> Iterator[None]:
    """Remove what the blocks write into the repository root (named in a block's text, such
    as a ledger ``budget.db`` and its ``-wal``/``-shm`` files); nothing else is touched."""
    before = set(os.listdir(REPO))
    yield
    shown = "".join(b.text for b in PYTHON + BASH)
    for name in set(os.listdir(REPO)) - before:
        base = re.sub(r"-(wal|shm|journal)$", "", name)
        if base in shown and (REPO / name).is_file():
            (REPO / name).unlink()


def _run_python(block: Block, request: pytest.FixtureRequest, mp: pytest.MonkeyPatch) -> None:
    mp.chdir(REPO)
    mp.delenv("PINQPY_TESTING", raising=False)
    if block.needs == "postgres":  # the session's test server, as a curator's database
        mp.setenv("PINQPY_POSTGRES_URL", request.getfixturevalue("postgres_url"))
    elif block.needs is not None:
        assert block.needs in KNOWN_NEEDS, f"{block.id}: unknown '# needs: {block.needs}'"
        server: Server = request.getfixturevalue("demo_server")
        mp.setenv("PINQPY_URL", server.url)
        mp.setenv("PINQPY_TOKEN", server.tokens()[0])
    scope = _scopes.setdefault(block.page, {"__name__": "__main__"})
    # Padded so that a traceback names the page's own line numbers.
    code = compile("\n" * block.line + block.text, block.page, "exec")
    exec(code, scope)


@pytest.mark.parametrize("block", PYTHON, ids=[b.id for b in PYTHON])
def test_python_block(block: Block, request: pytest.FixtureRequest) -> None:
    page = [b for b in PYTHON if b.page == block.page]
    index = page.index(block)
    assert _done.get(block.page, 0) >= 0, f"an earlier block of {block.page} failed"
    # The page's earlier blocks first (they have run already, unless this one was selected
    # alone); a failure there fails this block and every later one of the page.
    for earlier in page[_done.get(block.page, 0) : index + 1]:
        _done[block.page] = -1
        with pytest.MonkeyPatch.context() as mp:
            _run_python(earlier, request, mp)
        _done[block.page] = page.index(earlier) + 1


@pytest.mark.parametrize("block", BASH, ids=[b.id for b in BASH])
def test_bash_block(block: Block, tmp_path: Path) -> None:
    shim = tmp_path / "bin" / "pinqpy"  # `pinqpy` is this checkout's, as an install makes it
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{PINQPY[0]}" -m pinqpy "$@"\n')
    shim.chmod(0o755)
    env = reader_env()
    env["PATH"] = str(shim.parent) + os.pathsep + env["PATH"]
    proc = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", block.text], cwd=REPO, env=env,
        stdin=subprocess.DEVNULL,  # an interactive command reads end of input, and quits
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, f"{block.id}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr


def test_the_demo_command_is_the_one_that_runs() -> None:
    """README's first command is a venv, an install (what tests/e2e/test_wheel.py checks),
    then ``pinqpy demo``: the command a runnable block of docs/index.md runs."""
    first = next(b for b in blocks(REPO / "README.md") if b.lang == "bash")
    assert first.text.strip() == (
        "python3 -m venv .venv && .venv/bin/pip install -q . && .venv/bin/pinqpy demo"
    )
    assert any(b.text.strip() == "pinqpy demo" for b in BASH)


def test_the_markers_are_understood() -> None:
    """Every page has its blocks closed (``blocks`` asserts it), no python block needs
    something the test cannot provide, and a ``runnable`` marker stands only before bash."""
    for page in pages():
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            if line.strip() == "<!-- runnable -->":
                nxt = lines[number] if number < len(lines) else ""
                assert nxt.startswith("```bash"), f"{page.name}:{number}: marker not before bash"
    assert all(b.needs in KNOWN_NEEDS | {None} for b in PYTHON)
    assert PYTHON and BASH
