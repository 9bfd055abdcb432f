"""The errors pinqpy raises on purpose.

Every error derives from :class:`PinqError`. No message ever contains a value read from the
private data: messages name columns, clauses, parameters and public metadata only.

>>> import pinqpy as pq
>>> issubclass(pq.BudgetExceededError, pq.PinqError)
True
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "BudgetExceededError",
    "InferredTypesWarning",
    "PandasHabitError",
    "PandasHabitTypeError",
    "PinqError",
    "PinqSyntaxError",
    "PinqWarning",
    "PrivacyError",
]


class PinqError(Exception):
    """Root of every error pinqpy raises on purpose.

    ``hints`` (optional, keyword only) is how to fix the error in the terms of each interface:
    a mapping from ``"python"``, ``"magic"``, ``"shell"`` or ``"cli"`` to a phrase. Its
    ``"python"`` entry is the phrase as the message spells it, so ``str(err)`` is the same with
    or without hints; :func:`pinqpy.interfaces.errors.for_interface` swaps it for another
    interface's entry.

    >>> err = PinqError("needs an epsilon: pass epsilon=", hints={"python": "pass epsilon="})
    >>> str(err), err.hints["python"]
    ('needs an epsilon: pass epsilon=', 'pass epsilon=')
    """

    hints: Mapping[str, str] = MappingProxyType({})
    #: The columns whose types a type mismatch is about (empty for other errors), so that a
    #: layer that knows where each column's type came from can say how to declare it.
    typed_columns: tuple[str, ...] = ()

    def __init__(self, *args: object, hints: Mapping[str, str] | None = None):
        super().__init__(*args)
        if hints:
            self.hints = dict(hints)


class BudgetExceededError(PinqError):
    """A charge does not fit the remaining budget; nothing was charged and no data was read.
    ``budget`` is the name of the budget that refused it, when it has one."""

    def __init__(
        self,
        message: str,
        *,
        requested: object = None,
        remaining: object = None,
        budget: str | None = None,
        hints: Mapping[str, str] | None = None,
    ):
        super().__init__(message, hints=hints)
        self.requested = requested
        self.remaining = remaining
        self.budget = budget


class PrivacyError(PinqError):
    """The request cannot be answered privately as written; the message says how to fix it."""


class PandasHabitError(PinqError, AttributeError):
    """A pandas spelling a private frame does not have (``.shape``, ``.describe()``,
    ``.value_counts()``...); the message names the pinqpy way. It is an AttributeError too,
    so ``hasattr()`` and completion in notebooks keep working."""


class PandasHabitTypeError(PrivacyError, TypeError):
    """``len()``, iteration or indexing of a private frame, or an aggregation called without
    its epsilon, as pandas would allow; the message names the pinqpy way. It is a TypeError
    too, as Python's own answer to such a call is."""


class PinqSyntaxError(PinqError):
    """A query or expression does not parse, or names an unknown column, table or function.

    ``line`` and ``column`` are 1-based and point at the first character of the offending
    token. ``str(err)`` shows the message, the offending line of text and a caret.
    """

    def __init__(
        self,
        message: str,
        *,
        text: str | None = None,
        line: int | None = None,
        column: int | None = None,
        expected: list[str] | None = None,
    ):
        self.message = message
        self.text = text
        self.line = line
        self.column = column
        self.expected = list(expected) if expected else []
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.message]
        if self.line is not None and self.column is not None:
            parts[0] = f"{self.message} (line {self.line}, column {self.column})"
        if self.text is not None and self.line is not None and self.column is not None:
            lines = self.text.splitlines() or [""]
            if 1 <= self.line <= len(lines):
                src = lines[self.line - 1].expandtabs(1)
                parts.append("  " + src)
                parts.append("  " + " " * (self.column - 1) + "^")
        if self.expected and len(self.expected) <= 8:
            parts.append("expected one of: " + ", ".join(sorted(self.expected)))
        return "\n".join(parts)


class PinqWarning(UserWarning):
    """Root of the warnings pinqpy gives on purpose (``warnings.warn``). Like the errors,
    they never contain a value read from the private data."""


class InferredTypesWarning(PinqWarning):
    """A table's column types were inferred from its rows (a CSV file read without
    ``schema=``). Column types are public facts: every analyst sees them, and inferred ones
    follow the rows (on pandas an empty field makes an integer column float). The message
    says how to declare them. Given once per table, when it is loaded."""
