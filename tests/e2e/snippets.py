"""Reading the fenced code blocks of README.md and docs/*.md, and running them as a reader would.

One mechanism for every documentation test: :func:`blocks` finds a page's blocks with their
line numbers and markers, :func:`reader_env` is the environment of a command a page shows (this
checkout's pinqpy, no testing switch), and :class:`Server` runs ``pinqpy serve`` in a child
process on 127.0.0.1 until it answers. ``tests/e2e/test_readme_snippets.py`` executes the
blocks; ``tests/e2e/test_readme_server.py`` checks the server section's config and commands.

The markers (the convention every page follows):

- A ```` ```python ```` block runs as written, from the repository root, in one namespace per
  page, in page order. A first line ``# needs: server ...`` says it talks to a running
  ``pinqpy serve --demo``: the block reads the server's address from ``PINQPY_URL`` (default
  ``http://127.0.0.1:8765``) and the analyst's token from ``PINQPY_TOKEN``, and the test sets
  both for the server it starts.
- A ```` ```bash ```` block runs only when the line just before its fence is the HTML comment
  ``<!-- runnable -->`` (invisible when rendered). It runs with ``bash -e -o pipefail`` from
  the repository root, ``pinqpy`` being this checkout's. Other bash blocks (installs,
  commands that need the reader's own files or a server) are shown only.
- ```` ```pycon ````, ```` ```text ````, ```` ```sql ````, ```` ```toml ```` and bare blocks are
  shown only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RUNNABLE = "<!-- runnable -->"
NEEDS = re.compile(r"^#\s*needs:\s*(\w+)")


@dataclass(frozen=True)
class Block:
    """One fenced block: its page (relative to the repository), the line of its opening fence,
    its language, its text, and what it needs (``server``) or whether it is runnable."""

    page: str
    line: int
    lang: str
    text: str
    runnable: bool

    @property
    def needs(self) -> str | None:
        first = self.text.split("\n", 1)[0]
        found = NEEDS.match(first)
        return found.group(1) if found else None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every docs page, in a fixed order."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def blocks(path: Path, text: str | None = None) -> list[Block]:
    """The fenced blocks of a markdown page, in order. Fences are lines starting with three
    backticks (blocks nested in a list item are indented and not fences of the page)."""
    lines = (path.read_text() if text is None else text).splitlines()
    page = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else path.name
    found: list[Block] = []
    start: int | None = None
    lang = ""
    body: list[str] = []
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            if start is None:
                start, lang, body = number, line[3:].strip(), []
            else:
                runnable = start >= 2 and lines[start - 2].strip() == RUNNABLE
                found.append(Block(page, start, lang, "\n".join(body) + "\n", runnable))
                start = None
        elif start is not None:
            body.append(line)
    assert start is None, f"{page}:{start}: a fence is never closed"
    return found


def reader_env() -> dict[str, str]:
    """The environment of a command a page shows: this checkout's pinqpy, and no testing
    switch (a reader's shell, a curator's server and an analyst's session run without one)."""
    env = dict(os.environ)
    env.pop("PINQPY_TESTING", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class Server:
    """A ``pinqpy serve`` command run with ``--port 0`` (a free port, which its banner's
    ``listening on`` line names) until it refuses a request without a token."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.log = cwd / "server.log"
        self.out = self.log.open("w")
        self.proc = subprocess.Popen(
            [*argv, "--port", "0"], cwd=cwd, env=reader_env(), stdout=self.out,
            stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while (
            found := re.search(r"^listening on (http://127\.0\.0\.1:(\d+))$", self.output(), re.M)
        ) is None:
            assert self.proc.poll() is None and time.monotonic() < deadline, self.output()
            time.sleep(0.1)
        self.url, self.port = found.group(1), int(found.group(2))
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                urllib.request.urlopen(self.url + "/v1/session", timeout=2)
            except urllib.error.HTTPError as err:
                if err.code == 401:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.1)

    def output(self) -> str:
        self.out.flush()
        return self.log.read_text()

    def tokens(self) -> list[str]:
        """The tokens the banner printed (``token: ...`` lines)."""
        return re.findall(r"^token: (\S+)$", self.output(), flags=re.M)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()


PINQPY = [sys.executable, "-m", "pinqpy"]
