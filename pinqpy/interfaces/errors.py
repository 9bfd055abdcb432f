"""User errors of the command line and the shell: each is reported as one line, never a
traceback (a bad command line exits with status 2, anything else with 1)."""

from __future__ import annotations

from pinqpy.errors import PinqSyntaxError

__all__ = ["CliError", "for_interface", "one_line"]


class CliError(Exception):
    """A user error the command reports as one line, with its exit status."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def one_line(err: BaseException) -> str:
    """An error's message on one line (a syntax error keeps its line and column)."""
    if isinstance(err, PinqSyntaxError):
        text = str(err).splitlines()[0] if str(err) else err.message
        if err.expected and len(err.expected) <= 8:
            text += "; expected one of: " + ", ".join(sorted(err.expected))
        return text
    return " ".join(str(err).split()) or type(err).__name__


def for_interface(err: BaseException, interface: str) -> str:
    """``err``'s message with its fix-it hint spoken in the terms of ``interface``: one of
    ``"python"``, ``"magic"``, ``"shell"``, ``"cli"``. A hint written for one interface
    ("pass epsilon= to sql()") is replaced by the spelling of the interface in use."""
    return str(err)
