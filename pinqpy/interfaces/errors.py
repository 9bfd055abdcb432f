"""User errors of the command line and the shell: each is reported as one line, never a
traceback (a bad command line exits with status 2, anything else with 1)."""

from __future__ import annotations

from pinqpy.errors import PinqSyntaxError

__all__ = ["INTERFACES", "CliError", "for_interface", "one_line"]


class CliError(Exception):
    """A user error the command reports as one line, with its exit status."""

    def __init__(self, message: str, status: int = 1):
        super().__init__(message)
        self.status = status


def one_line(err: BaseException, interface: str = "python") -> str:
    """An error's message on one line (a syntax error keeps its line and column), its fix-it
    hint spoken for ``interface`` (see :func:`for_interface`)."""
    if isinstance(err, PinqSyntaxError):
        spoken = for_interface(err, interface)
        text = spoken.splitlines()[0] if spoken else err.message
        if err.expected and len(err.expected) <= 8:
            text += "; expected one of: " + ", ".join(sorted(err.expected))
        return text
    return " ".join(for_interface(err, interface).split()) or type(err).__name__


INTERFACES = ("python", "magic", "shell", "cli")


def for_interface(err: BaseException, interface: str) -> str:
    """``err``'s message with its fix-it hint spoken in the terms of ``interface``: one of
    ``"python"``, ``"magic"``, ``"shell"``, ``"cli"``. A hint written for one interface
    ("pass epsilon= to sql()") is replaced by the spelling of the interface in use.

    The error carries its hints itself (:attr:`pinqpy.PinqError.hints`, set where it is
    raised): the ``"python"`` entry is the phrase as ``str(err)`` spells it, and the entry of
    ``interface`` replaces it. An error without hints, or without one for ``interface``, reads
    as ``str(err)``; so does every error for ``"python"``.

    >>> from pinqpy.errors import PrivacyError
    >>> err = PrivacyError("needs an epsilon: pass epsilon= to sql()",
    ...                    hints={"python": "pass epsilon= to sql()", "shell": "set .epsilon E"})
    >>> for_interface(err, "shell")
    'needs an epsilon: set .epsilon E'
    >>> for_interface(err, "cli") == str(err) == for_interface(err, "python")
    True
    """
    if interface not in INTERFACES:
        raise ValueError(f"interface must be one of {', '.join(INTERFACES)}, not {interface!r}")
    text = str(err)
    hints = getattr(err, "hints", None) or {}
    python, spoken = hints.get("python"), hints.get(interface)
    if interface == "python" or not python or not spoken or python not in text:
        return text
    return text.replace(python, spoken)
