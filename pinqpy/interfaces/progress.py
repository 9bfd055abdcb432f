"""Progress on long work: "running query…" while a statement takes more than about a second.

:func:`terminal_progress` draws a spinner with the seconds elapsed on a terminal's standard
error (the shell and ``pinqpy query``) and erases it when the answer comes;
:func:`notebook_progress` shows the same line in a notebook cell and clears it. Both wait
``PINQPY_PROGRESS_AFTER`` seconds first (default 1; ``off`` never shows one), so a quick
answer shows nothing, and both are context managers around the statement.

They never print a value, a count or anything else about the data: only the words
"running query…" and the time elapsed, which the user sees anyway. The terminal spinner
writes only to a stream that is a terminal (standard error, so a ``--format csv`` or
``json`` answer on standard output stays clean, even when only standard error is a
terminal); piped or redirected, it writes nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

__all__ = ["AFTER_ENV", "delay", "notebook_progress", "terminal_progress"]

#: The environment variable with the seconds to wait before showing progress (``off``: never).
AFTER_ENV = "PINQPY_PROGRESS_AFTER"
MESSAGE = "running query…"
_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_ASCII_FRAMES = "|/-\\"


def delay(environ: dict[str, str] | None = None) -> float | None:
    """Seconds to wait before showing progress, or None when it is turned off.

    >>> delay({}), delay({"PINQPY_PROGRESS_AFTER": "0"}), delay({"PINQPY_PROGRESS_AFTER": "off"})
    (1.0, 0.0, None)
    """
    text = (os.environ if environ is None else environ).get(AFTER_ENV, "").strip().lower()
    if not text:
        return 1.0
    if text in ("off", "no", "never", "false"):
        return None
    try:
        value = float(text)
    except ValueError:
        return 1.0
    return value if value >= 0 else None


class _Ticker:
    """Calls ``draw(seconds)`` every ``every`` seconds from ``after`` on, in a thread that
    sees the caller's context (a notebook's output goes to the caller's cell), until stopped.
    With ``after`` 0 the first frame is drawn before the work starts."""

    def __init__(self, draw: Callable[[float], None], after: float, every: float) -> None:
        self._draw, self._after, self._every = draw, after, every
        self._done = threading.Event()
        self._start = time.monotonic()
        self.drawn = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._after == 0:
            self._tick()
        context = contextvars.copy_context()
        self._thread = threading.Thread(target=context.run, args=(self._loop,), daemon=True)
        self._thread.start()

    def _tick(self) -> None:
        self._draw(time.monotonic() - self._start)
        self.drawn = True

    def _loop(self) -> None:
        if self._done.wait(self._after):
            return
        while not self._done.is_set():
            with contextlib.suppress(Exception):  # progress must never break the query
                self._tick()
            self._done.wait(self._every)

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _frames(stream: IO[str]) -> str:
    try:
        _FRAMES.encode(getattr(stream, "encoding", None) or "ascii")
        "…".encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return _ASCII_FRAMES
    return _FRAMES


@contextlib.contextmanager
def terminal_progress(stream: IO[str] | None = None, message: str = MESSAGE) -> Iterator[None]:
    """A spinner on ``stream`` (standard error) while the block runs, if it is a terminal."""
    out = stream if stream is not None else sys.stderr
    after = delay()
    isatty = getattr(out, "isatty", None)
    if after is None or not callable(isatty) or not isatty():
        yield
        return
    frames = _frames(out)
    text = message if frames is _FRAMES else message.replace("…", "...")
    count = [0]

    def draw(seconds: float) -> None:
        frame = frames[count[0] % len(frames)]
        count[0] += 1
        out.write(f"\r{frame} {text} {seconds:.0f}s")
        out.flush()

    ticker = _Ticker(draw, after, 0.1)
    ticker.start()
    try:
        yield
    finally:
        ticker.stop()
        if ticker.drawn:
            with contextlib.suppress(OSError, ValueError):
                out.write("\r\x1b[K")  # erase the line: the answer is printed in its place
                out.flush()


@contextlib.contextmanager
def notebook_progress(message: str = MESSAGE) -> Iterator[None]:
    """A "running query…" line in the running cell while the block runs, cleared after."""
    after = delay()
    try:
        from IPython.display import display
    except ImportError:  # pragma: no cover - the magic runs inside IPython
        display = None  # type: ignore[assignment]
    if after is None or display is None:
        yield
        return
    shown: list[Any] = []

    def bundle(seconds: float) -> dict[str, str]:
        line = f"{message} {seconds:.0f}s"
        return {"text/plain": line, "text/html": f'<span style="opacity:0.7">⏳ {line}</span>'}

    def draw(seconds: float) -> None:
        if not shown:
            shown.append(display(bundle(seconds), raw=True, display_id=True))
        else:
            shown[0].update(bundle(seconds), raw=True)

    ticker = _Ticker(draw, after, 0.5)
    ticker.start()
    try:
        yield
    finally:
        ticker.stop()
        if shown and shown[0] is not None:
            with contextlib.suppress(Exception):
                shown[0].update({"text/plain": "", "text/html": ""}, raw=True)
