"""Loading the lark grammar of the SQL dialect, once.

The grammar file ships inside the wheel as ``pinqpy/grammar/pinqpy.lark``; in a source checkout
(or an editable install) it lives at ``<repo>/grammar/pinqpy.lark``. Both the text and the LALR
parsers built from it are cached, so only the first parse pays for building the tables.

Building the LALR tables takes about half a second per parser, which every new process (a
``pinqpy query``, a server's worker) would pay before its first parse. So the tables are kept
on disk too: lark's own cache file in ``$PINQPY_CACHE_DIR`` (default
``$XDG_CACHE_HOME/pinqpy``, else ``~/.cache/pinqpy``; an empty value turns it off), one file
per grammar, start rule, option set and lark version, which lark checks against the grammar's
hash before it uses it (then about 30 ms). lark stores the tables with pickle, so a cache file
is as trusted as code: pinqpy uses the folder only when it belongs to the current user and no
one else can write to it, and otherwise builds the tables in memory as before.

>>> "expression_start" in grammar_text()
True
>>> str(get_parser("expression_start").parse("1 + 2").data)
'expression_start'
>>> "AND" in keywords()
True
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import os
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
    options = {
        "start": start,
        "parser": "lalr",
        "lexer": "basic",
        "propagate_positions": positions,
        "maybe_placeholders": True,
    }
    cache = _cache_file(options)
    return lark.Lark(grammar_text(), **options, **({"cache": cache} if cache else {}))


def _cache_dir() -> Path | None:
    """The folder of the parser cache, or None when there is none to use safely."""
    where = os.environ.get("PINQPY_CACHE_DIR")
    if where == "":
        return None
    try:
        if where:
            folder = Path(where)
        else:
            home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
            folder = Path(home) / "pinqpy"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.stat()
    except (OSError, RuntimeError, KeyError):  # no home folder, or nowhere to write
        return None
    mine = not hasattr(os, "getuid") or info.st_uid == os.getuid()
    return folder if mine and not info.st_mode & 0o022 else None


def _cache_file(options: dict[str, object]) -> str | None:
    folder = _cache_dir()
    if folder is None:
        return None
    key = repr((grammar_text(), sorted(options.items()), lark.__version__)).encode()
    return str(folder / f"parser-{hashlib.sha256(key).hexdigest()[:24]}.lark")


@functools.cache
def keywords() -> frozenset[str]:
    """Every reserved word of the grammar, upper-cased (identifiers spelled so need quotes)."""
    return frozenset(word.upper() for word in _KEYWORD_RE.findall(grammar_text()))
