"""A real headless Chromium for the browser tests, driven by Playwright, stopped by its PID.

    with chromium(tmp_path) as (browser, pid):
        page = browser.new_context().new_page()

Debian's ``chromium`` (``/usr/bin/chromium``; ``.ci/run`` installs it when missing) is
started by this helper, not by Playwright (which would want a browser build of its own,
and this machine's network is closed): on 127.0.0.1 with remote debugging on a free port,
a fresh profile, and no background networking; Playwright connects to it over CDP. At the
end the browser is asked to close and its process is waited for, by PID, then its whole
process group is killed should anything of it remain. With ``CI`` set, a missing Chromium
or Playwright fails the test; elsewhere it skips.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
START_TIMEOUT = 60.0


def _require() -> Any:
    missing = None
    if not CHROMIUM.exists():
        missing = f"{CHROMIUM} (Debian's chromium: apt-get install chromium)"
    try:
        from playwright import sync_api
    except ImportError:
        missing = missing or "playwright (pip install playwright)"
    if missing is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser tests need {missing}; .ci/run installs it")
        pytest.skip(f"needs {missing}")
    return sync_api


def running(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (a zombie is dead: it only waits for
    a parent to reap it, and orphans here go to a PID 1 that may not)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


@contextlib.contextmanager
def chromium(folder: Path) -> Iterator[tuple[Any, int]]:
    """A started Chromium and its PID (see the module docstring)."""
    sync_api = _require()
    log = (folder / "chromium.log").open("w")
    proc = subprocess.Popen(
        [str(CHROMIUM), *FLAGS, "--remote-debugging-address=127.0.0.1",
         "--remote-debugging-port=0", f"--user-data-dir={folder / 'profile'}", "about:blank"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
        start_new_session=True,  # its own process group, so nothing of it can outlive the test
    )  # fmt: skip
    try:
        endpoint = _endpoint(folder / "chromium.log", proc)
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.connect_over_cdp(endpoint)
            try:
                yield browser, proc.pid
            finally:
                with contextlib.suppress(Exception):
                    browser.new_browser_cdp_session().send("Browser.close")
    finally:
        _stop(proc)
        log.close()


def _endpoint(log: Path, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        found = re.search(r"DevTools listening on (ws://\S+)", log.read_text(errors="replace"))
        if found:
            return found.group(1)
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("Chromium did not start:\n" + log.read_text(errors="replace"))
        time.sleep(0.05)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Wait for the browser by its PID (it was asked to close), firmly if need be; then end
    whatever of its process group is left."""
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(15)
    if running(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        # SIGKILL is delivered at once, but a process takes a moment to be gone from /proc
        deadline = time.monotonic() + 15
        while running(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
