"""Loading the lark grammar of the SQL dialect, once.

The grammar file ships inside the wheel as ``pinqpy/grammar/pinqpy.lark``; in a source checkout
(or an editable install) it lives at ``<repo>/grammar/pinqpy.lark``. Both the text and the LALR
parsers built from it are cached, so only the first parse pays for building the tables.

>>> "expression_start" in grammar_text()
True
>>> get_parser("expression_start").parse("1 + 2").data
Token('RULE', 'expression_start')
>>> "AND" in keywords()
True
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from pathlib import Path

import lark

__all__ = ["get_parser", "grammar_text", "keywords"]

_GRAMMAR_FILE = "pinqpy.lark"

# A keyword in the grammar is a string literal of letters with the case-insensitive flag.
_KEYWORD_RE = re.compile(r'"([A-Za-z_][A-Za-z_0-9]*)"i')


def _packaged_text() -> str | None:
    """The grammar as installed inside the package (wheel layout), if present."""
    try:
        resource = importlib.resources.files("pinqpy") / "grammar" / _GRAMMAR_FILE
        if resource.is_file():
            return resource.read_text(encoding="utf-8")
    except (ImportError, OSError, TypeError, ValueError, AttributeError):
        # A namespace or zipped package may not support every resource operation; fall back.
        pass
    return None


@functools.cache
def grammar_text() -> str:
    """The full grammar text (expressions and statements)."""
    text = _packaged_text()
    if text is not None:
        return text
    source = Path(__file__).resolve().parents[2] / "grammar" / _GRAMMAR_FILE
    return source.read_text(encoding="utf-8")


@functools.cache
def get_parser(start: str, positions: bool = True) -> lark.Lark:
    """One cached LALR parser per start rule (``"expression_start"``, ``"query"``, ...).

    The basic lexer (not the contextual one) keeps keywords reserved everywhere, so a word
    means the same thing wherever it appears. With ``positions`` trees carry 1-based
    positions in ``meta``; without, parsing takes about half the time, which is what the
    happy path uses (positions are only needed to point at an error, and an error re-parses).
    """
    return lark.Lark(
        grammar_text(),
        start=start,
        parser="lalr",
        lexer="basic",
        propagate_positions=positions,
        maybe_placeholders=True,
    )


@functools.cache
def keywords() -> frozenset[str]:
    """Every reserved word of the grammar, upper-cased (identifiers spelled so need quotes)."""
    return frozenset(word.upper() for word in _KEYWORD_RE.findall(grammar_text()))
