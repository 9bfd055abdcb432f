"""What every pass of the SQL compiler reads, and nothing it writes.

:class:`Context` is the query's catalog and its text (errors point into the text);
:class:`Scratch` is how many scratch columns (``__pinq_g0``, ``__pinq_u1``, ...) the passes
before have named. A pass takes a ``Scratch`` and returns the one after its own names, so the
names of one query never repeat and come out in the order the passes run (EXPLAIN shows
some of them). Both are frozen: no pass changes what another reads.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import Pos
from pinqpy.pipeline.relation import Relation

__all__ = ["Catalog", "Context", "Scratch", "locate", "option_error", "option_pos", "positioned"]


@dataclass(frozen=True)
class Catalog:
    """What a query can name: private relations and public tables."""

    private: Mapping[str, Relation]
    public: Mapping[str, pd.DataFrame]


@dataclass(frozen=True)
class Context:
    """The catalog a query names its tables in, and the query's text."""

    catalog: Catalog
    text: str

    def syntax(self, message: str, pos: Pos | None) -> PinqSyntaxError:
        """A syntax error at ``pos`` of the query (or of no position)."""
        return positioned(message, self.text, pos)

    def locate(self, pattern: str, after: Pos | None = None, group: int = 0) -> Pos | None:
        """:func:`locate` in the query's text."""
        return locate(self.text, pattern, after, group)


@dataclass(frozen=True)
class Scratch:
    """The number of the next scratch column: names are ``__pinq_<stem><number>``."""

    next: int = 0

    def take(self, stem: str) -> tuple[str, Scratch]:
        """A fresh scratch name, and the scratch after it."""
        return f"__pinq_{stem}{self.next}", Scratch(self.next + 1)


def _offset(text: str, pos: Pos | None) -> int:
    if pos is None:
        return 0
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[: pos.line - 1]) + pos.column - 1


def locate(text: str, pattern: str, after: Pos | None = None, group: int = 0) -> Pos | None:
    """The position of the first match of ``pattern`` (case-insensitive) at or after ``after``.

    For carets under things the AST does not keep a node for (an option's value, a bound of
    WITH BOUNDS, a repeated alias).
    """
    m = re.compile(pattern, re.IGNORECASE).search(text, _offset(text, after))
    if m is None:
        return None
    start = m.start(group)
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return Pos(line, column)


def option_pos(text: str, name: str, value: bool = False) -> Pos | None:
    """Where an option's name (or value) is written inside OPTIONS (...)."""
    name_re = re.escape(name)
    if value:
        return locate(text, rf"\bOPTIONS\s*\([^)]*?\b{name_re}\s*=\s*([^,)\s]+)", None, 1)
    return locate(text, rf"\bOPTIONS\s*\([^)]*?\b({name_re})\s*=", None, 1)


def positioned(message: str, text: str, pos: Pos | None) -> PinqSyntaxError:
    """A syntax error with ``message`` at ``pos`` of ``text`` (or of no position)."""
    if pos is None:
        return PinqSyntaxError(message, text=text)
    return PinqSyntaxError(message, text=text, line=pos.line, column=pos.column)


def option_error(err: PinqError | str, text: str, name: str, value: bool = True) -> PinqSyntaxError:
    """A syntax error about option ``name``, under its value (or its name)."""
    return positioned(str(err), text, option_pos(text, name, value=value))
