"""The shell's handling of the text being typed: splitting input into statements and
dot-commands, completion, and highlighting. Plain functions, usable and testable without a
terminal:

>>> [p.text for p in split_statements("SELECT ';' AS x; -- a;\\n.budget\\nSHOW TABLES;").pieces]
["SELECT ';' AS x", '.budget', 'SHOW TABLES']
>>> [c.text for c in complete("SEL", "SEL", {"people": ["age", "sex"]})]
['SELECT']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pinqpy.core.grammar import keywords
from pinqpy.expr.ast import AGGREGATE_FUNCTIONS, SCALAR_FUNCTIONS, quote_identifier

__all__ = [
    "DOT_COMMANDS",
    "HELP_WORDS",
    "QUIT_WORDS",
    "STYLE",
    "Candidate",
    "Piece",
    "Split",
    "complete",
    "fragment_lines",
    "highlight",
    "split_statements",
    "statement_ready",
]

DOT_COMMANDS: dict[str, tuple[str, str]] = {
    ".help": ("", "this help"),
    ".tables": ("", "the tables and their columns"),
    ".describe": ("TABLE", "a table's columns, types, bounds and keys"),
    ".budget": ("", "what each private table's budget has spent and has left"),
    ".summarize": ("SELECT ...", "each noisy measurement's mechanism and error; spends nothing"),
    ".epsilon": ("[EPS]", "show or set the epsilon each query spends"),
    ".delta": ("[DELTA]", "show or set the delta each query may spend"),
    ".mode": ("[MODE]", "show or set how results print: table, csv, json or markdown"),
    ".output": ("[FILE]", "send results to FILE (overwritten); alone: back to the screen"),
    ".read": ("FILE", "run the statements and commands in FILE"),
    ".bail": ("[on|off]", "stop at the first error (non-interactive: exit status 1)"),
    ".quit": ("", "leave the shell (also .exit, Ctrl-D)"),
}
QUIT_WORDS = {".quit", ".exit", ".q", "quit", "exit", "\\q"}
HELP_WORDS = {".help", "help", "\\?", "?"}
_TABLE_CONTEXT = {"FROM", "JOIN", "DESCRIBE", "DESC"}
_SHOW_WORDS = ("TABLES", "BUDGET", "LEDGER")
_SOURCE_RE = re.compile(
    r"\b(?:FROM|JOIN)\s+([A-Za-z_]\w*)(?:\s+(?:AS\s+)?([A-Za-z_]\w*))?", re.IGNORECASE
)


# -- splitting input into statements ----------------------------------------------------------


@dataclass(frozen=True)
class Piece:
    """One unit of input: an SQL statement (without its ``;``) or a dot-command line."""

    kind: str  # "sql" or "command"
    text: str
    line: int  # 1-based line of the input where it starts


@dataclass(frozen=True)
class Split:
    """The complete pieces of some input and what is left after them.

    ``rest`` is an SQL statement not yet ended by ``;`` (empty if none); ``state`` is None,
    or the quote character or ``"comment"`` the input ends inside.
    """

    pieces: list[Piece]
    rest: str
    rest_line: int
    state: str | None

    @property
    def complete(self) -> bool:
        return not self.rest and self.state in (None, "line")


def split_statements(text: str) -> Split:
    """Split input at the ``;`` that are not in a string, quoted name or comment.

    A line starting with ``.`` where a statement could start is a dot-command.

    >>> s = split_statements("SELECT 1;\\nSELECT 'a;\\nb'")
    >>> [p.text for p in s.pieces], s.rest, s.state
    (['SELECT 1'], "SELECT 'a;\\nb'", None)
    >>> split_statements("SELECT 'open").state
    "'"
    """
    pieces: list[Piece] = []
    n = len(text)
    i = 0
    line = 1
    sig: int | None = None  # index of the current statement's first significant character
    sig_line = 1
    state: str | None = None
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        if state is not None:  # inside a quote
            if c == state:
                state = None
            i += 1
            continue
        if c in " \t\r\n\f\v":
            i += 1
            continue
        if text.startswith("--", i):
            j = text.find("\n", i)
            if j < 0:
                state = "line"
                break
            i = j
            continue
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                state = "comment"
                break
            line += text.count("\n", i, j)
            i = j + 2
            continue
        if sig is None and c == "." and not text[text.rfind("\n", 0, i) + 1 : i].strip():
            j = text.find("\n", i)
            end = n if j < 0 else j
            pieces.append(Piece("command", text[i:end].strip(), line))
            i = end
            continue
        if c == ";":
            if sig is not None:
                pieces.append(Piece("sql", text[sig:i].rstrip(), sig_line))
            sig = None
            i += 1
            continue
        if sig is None:
            sig, sig_line = i, line
        if c in "'\"`":
            state = c
        i += 1
    rest = "" if sig is None else text[sig:].rstrip()
    return Split(pieces, rest, sig_line, state)


def statement_ready(text: str) -> bool:
    """Whether Enter should run ``text``: it is empty, a dot-command or a quit word, or
    every statement in it is ended by ``;``.

    >>> statement_ready("SELECT COUNT(*)\\nFROM people"), statement_ready("SHOW TABLES;")
    (False, True)
    """
    stripped = text.strip()
    if not stripped or stripped.lower() in QUIT_WORDS | HELP_WORDS:
        return True
    split = split_statements(text)
    return split.complete and bool(split.pieces)


# -- completion -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A completion: the text to insert in place of the ``replace`` characters before the
    cursor, and what it is (``meta``)."""

    text: str
    replace: int
    meta: str


def _function_words() -> list[str]:
    return sorted(AGGREGATE_FUNCTIONS | SCALAR_FUNCTIONS)


def _sources(text: str, tables: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """alias or table name -> table, for the tables named after FROM/JOIN in ``text``."""
    reserved = keywords()
    out: dict[str, str] = {}
    for match in _SOURCE_RE.finditer(text):
        table, alias = match.group(1), match.group(2)
        if table not in tables:
            continue
        out[table] = table
        if alias and alias.upper() not in reserved:
            out[alias] = table
    return out


def complete(
    before: str, text: str, tables: Mapping[str, Sequence[str]], public: Sequence[str] = ()
) -> list[Candidate]:
    """Completions at the cursor, given the text before it and the whole input.

    After FROM/JOIN/DESCRIBE: table names; after ``alias.``: that table's columns; otherwise
    columns (of the tables the statement names, else of every table), functions, keywords
    and tables. Keywords follow the case of what was typed.

    >>> cat = {"people": ["age", "sex"], "visits": ["user_id", "age"]}
    >>> [c.text for c in complete("SELECT a", "SELECT a FROM people", cat)]
    ['age', 'abs', 'avg', 'all', 'and', 'as', 'asc']
    >>> [c.text for c in complete("SELECT v.", "SELECT v. FROM visits v", cat)]
    ['user_id', 'age']
    >>> [c.text for c in complete("select * from p", "select * from p", cat)]
    ['people']
    """
    stripped = before.lstrip()
    dot = re.fullmatch(r"(\.\w*)", stripped)
    if dot:
        word = dot.group(1)
        return [
            Candidate(c, len(word), d) for c, (_, d) in DOT_COMMANDS.items() if c.startswith(word)
        ]
    described = re.fullmatch(r"\.(?:describe|schema)\s+(\w*)", stripped)
    if described:
        word = described.group(1)
        return [Candidate(t, len(word), "table") for t in tables if t.startswith(word)]
    split = split_statements(before)
    if split.state is not None:
        return []  # inside a string, quoted name or comment
    match = re.search(r"[A-Za-z_][A-Za-z0-9_]*$", before)
    word = match.group(0) if match else ""
    head = before[: len(before) - len(word)]
    low = word.lower()
    out: list[Candidate] = []
    seen: set[str] = set()

    def add(candidate: str, meta: str, insert: str | None = None) -> None:
        if candidate.lower().startswith(low) and (insert or candidate) not in seen:
            seen.add(insert or candidate)
            out.append(Candidate(insert or candidate, len(word), meta))

    def kw(w: str) -> str:
        return w.lower() if word and word.islower() else w

    sources = _sources(text, tables)
    qualified = re.search(r"([A-Za-z_]\w*|\"[^\"]+\")\.$", head)
    if qualified:
        name = qualified.group(1).strip('"')
        targets = [sources[name]] if name in sources else list(tables)
        for t in targets:
            for column in tables[t]:
                add(column, f"column of {t}", quote_identifier(column))
        return out
    previous = re.search(r"([A-Za-z_]\w*)\s+$", head)
    prev = previous.group(1).upper() if previous else ""
    if prev in _TABLE_CONTEXT:
        for t in tables:
            add(t, "public table" if t in public else "table")
        return out
    if prev == "SHOW":
        for w in _SHOW_WORDS:
            add(kw(w), "keyword")
        return out
    named = list(dict.fromkeys(sources.values())) or list(tables)
    for t in named:
        for column in tables[t]:
            add(column, f"column of {t}", quote_identifier(column))
    for f in _function_words():
        add(kw(f), "function")
    for k in sorted(keywords()):
        add(kw(k), "keyword")
    for t in tables:
        add(t, "public table" if t in public else "table")
    return out


# -- highlighting -----------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"(?P<comment>--[^\n]*|/\*[\s\S]*?(?:\*/|$))"
    r"|(?P<string>'(?:[^']|'')*'?)"
    r"|(?P<quoted>\"(?:[^\"]|\"\")*\"?|`[^`]*`?)"
    r"|(?P<number>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<space>\s+)"
    r"|(?P<other>.)"
)


def highlight(
    text: str, tables: Sequence[str] = (), columns: Sequence[str] = ()
) -> list[tuple[str, str]]:
    """``(style class, text)`` fragments of SQL input, for the shell's lexer.

    >>> highlight("SELECT 1 -- hi")  # doctest: +NORMALIZE_WHITESPACE
    [('class:keyword', 'SELECT'), ('', ' '), ('class:number', '1'), ('', ' '),
     ('class:comment', '-- hi')]
    """
    if text.lstrip().startswith("."):
        return [("class:command", text)]
    reserved = keywords()
    functions = AGGREGATE_FUNCTIONS | SCALAR_FUNCTIONS
    table_set, column_set = set(tables), set(columns)
    out: list[tuple[str, str]] = []
    for m in _TOKEN_RE.finditer(text):
        kind, value = m.lastgroup or "other", m.group(0)
        if kind == "word":
            upper = value.upper()
            if upper in reserved:
                kind = "keyword"
            elif upper in functions:
                kind = "function"
            elif value in table_set:
                kind = "table"
            elif value in column_set:
                kind = "column"
            else:
                kind = ""
        elif kind in ("space", "other"):
            kind = ""
        elif kind == "quoted":
            kind = "column" if value.strip('"`') in column_set else "name"
        out.append((f"class:{kind}" if kind else "", value))
    return out


def fragment_lines(fragments: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Fragments cut into lines (a fragment may span several)."""
    lines: list[list[tuple[str, str]]] = [[]]
    for style, value in fragments:
        parts = value.split("\n")
        for k, part in enumerate(parts):
            if k:
                lines.append([])
            if part:
                lines[-1].append((style, part))
    return lines


STYLE = {
    "keyword": "bold ansiblue",
    "function": "ansicyan",
    "string": "ansigreen",
    "number": "ansimagenta",
    "comment": "italic ansibrightblack",
    "table": "bold ansiyellow",
    "column": "ansiyellow",
    "name": "",
    "command": "bold ansiyellow",
    "bottom-toolbar": "noreverse bg:ansibrightblack ansiwhite",
}
