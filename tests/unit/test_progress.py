"""Progress on long work (pinqpy.interfaces.progress): nothing for a quick statement, a
spinner with the seconds elapsed on a terminal for a slow one, erased afterwards; nothing on a
stream that is not a terminal; never anything but the words and the time."""

from __future__ import annotations

import io
import re
import time

import pytest

from pinqpy.interfaces.progress import AFTER_ENV, delay, terminal_progress


class FakeTerminal(io.StringIO):
    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def test_a_quick_statement_shows_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(AFTER_ENV, raising=False)
    out = FakeTerminal()
    with terminal_progress(out):
        pass
    assert out.getvalue() == ""


def test_a_slow_statement_spins_then_erases(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AFTER_ENV, "0.05")
    out = FakeTerminal()
    with terminal_progress(out):
        time.sleep(0.4)
    text = out.getvalue()
    frames = re.findall(r"\r(\S) running query… (\d+)s", text)
    assert len(frames) >= 2 and len({f for f, _ in frames}) >= 2  # it turns
    assert text.endswith("\r\x1b[K")  # and leaves a clean line for the answer
    assert re.fullmatch(r"(\r\S running query… \d+s)+\r\x1b\[K", text)


def test_nothing_on_a_stream_that_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AFTER_ENV, "0")
    out = io.StringIO()
    with terminal_progress(out):
        time.sleep(0.05)
    assert out.getvalue() == ""


def test_an_ascii_terminal_gets_ascii(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AFTER_ENV, "0")

    class Ascii(FakeTerminal):
        encoding = "ascii"

    out = Ascii()
    with terminal_progress(out):
        pass
    assert out.getvalue().startswith("\r| running query... 0s")


def test_an_error_in_the_block_still_erases_the_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(AFTER_ENV, "0")
    out = FakeTerminal()
    with pytest.raises(KeyError), terminal_progress(out):
        raise KeyError("boom")
    assert out.getvalue().endswith("\r\x1b[K")


def test_the_delay_setting() -> None:
    assert delay({AFTER_ENV: "2.5"}) == 2.5
    assert delay({AFTER_ENV: "off"}) is None and delay({AFTER_ENV: "-1"}) is None
    assert delay({AFTER_ENV: "soon"}) == 1.0
