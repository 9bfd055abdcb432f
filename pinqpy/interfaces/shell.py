"""``pinqpy shell``: an interactive SQL shell over private tables, built on prompt_toolkit.

At a terminal it offers history kept across runs (``$PINQPY_HISTORY``, default
``~/.pinqpy_history``), statements spanning several lines up to a ``;``, tab completion of
keywords, functions, tables and columns, syntax highlighting, and dot-commands (``.help``,
``.tables``, ``.budget``, ``.epsilon 0.1``, ``.quit``). Every noisy answer is shown with its
accuracy: ``value ± half-width`` of its 95% interval. With standard input not a terminal it
runs the statements it reads and exits non-zero if any of them failed.

The pieces that do not need a terminal (splitting statements, completion, highlighting, and
:class:`Shell`, which answers statements) are plain functions, usable and testable alone:

>>> [p.text for p in split_statements("SELECT ';' AS x; -- a;\\n.budget\\nSHOW TABLES;").pieces]
["SELECT ';' AS x", '.budget', 'SHOW TABLES']
>>> [c.text for c in complete("SEL", "SEL", {"people": ["age", "sex"]})]
['SELECT']
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import IO, Any

import pandas as pd

from pinqpy.core.grammar import keywords
from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import AGGREGATE_FUNCTIONS, SCALAR_FUNCTIONS, quote_identifier
from pinqpy.interfaces.errors import one_line
from pinqpy.interfaces.output import format_result
from pinqpy.interfaces.statements import run_statement
from pinqpy.interfaces.tables import LoadedSession

__all__ = [
    "DOT_COMMANDS",
    "Candidate",
    "Piece",
    "Shell",
    "Split",
    "complete",
    "highlight",
    "history_path",
    "split_statements",
    "statement_ready",
]

DOT_COMMANDS: dict[str, tuple[str, str]] = {
    ".help": ("", "this help"),
    ".tables": ("", "the tables and their columns"),
    ".describe": ("TABLE", "a table's columns, types, bounds and keys"),
    ".budget": ("", "what each private table's budget has spent and has left"),
    ".epsilon": ("[EPS]", "show or set the epsilon each query spends"),
    ".delta": ("[DELTA]", "show or set the delta each query may spend"),
    ".quit": ("", "leave the shell (also .exit, Ctrl-D)"),
}
_QUIT_WORDS = {".quit", ".exit", ".q", "quit", "exit", "\\q"}
_HELP_WORDS = {".help", "help", "\\?", "?"}
_TABLE_CONTEXT = {"FROM", "JOIN", "DESCRIBE", "DESC"}
_SHOW_WORDS = ("TABLES", "BUDGET", "LEDGER")
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
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
    if not stripped or stripped.lower() in _QUIT_WORDS | _HELP_WORDS:
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


def _lines(fragments: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
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


# -- the shell --------------------------------------------------------------------------------


def history_path() -> Path:
    """Where history is kept: ``$PINQPY_HISTORY`` or ``~/.pinqpy_history``."""
    configured = os.environ.get("PINQPY_HISTORY")
    return Path(configured).expanduser() if configured else Path.home() / ".pinqpy_history"


def _fmt(value: object) -> str:
    """A number briefly (``Fraction(1, 10)`` -> ``0.1``).

    >>> _fmt(Fraction(9, 10)), _fmt(2.0), _fmt(Fraction(1, 3))
    ('0.9', '2', '0.333333')
    """
    if isinstance(value, Fraction | float | int):
        return f"{float(value):.6g}"
    return str(value)


class Shell:
    """Answers statements and dot-commands over a loaded session, printing as it goes.

    ``epsilon`` and ``delta`` are what each query spends unless its OPTIONS say otherwise.
    """

    def __init__(
        self,
        loaded: LoadedSession,
        *,
        epsilon: float,
        delta: float = 0.0,
        out: IO[str] | None = None,
        err: IO[str] | None = None,
        level: float = 0.95,
    ):
        self.loaded = loaded
        self.epsilon = epsilon
        self.delta = delta
        self.level = level
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.done = False

    # -- catalogue ----------------------------------------------------------------------
    @property
    def tables(self) -> dict[str, list[str]]:
        """Table name -> its column names (private and public)."""
        return self.loaded.columns

    def _print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def _error(self, message: str, where: str = "") -> None:
        prefix = f"error ({where}): " if where else "error: "
        print(prefix + message, file=self.err, flush=True)

    # -- running input ------------------------------------------------------------------
    def run_text(self, text: str, *, where: Callable[[Piece], str] | None = None) -> int:
        """Run every statement and command in ``text`` (a last one may lack its ``;``).

        Returns how many failed; stops early after ``.quit``.
        """
        split = split_statements(text)
        pieces = list(split.pieces)
        if split.rest:
            pieces.append(Piece("sql", split.rest, split.rest_line))
        elif split.state not in (None, "line"):
            self._error("the input ends inside a quote or comment")
            return 1
        failures = 0
        for piece in pieces:
            if self.done:
                break
            label = where(piece) if where else ""
            ok = (
                self.command(piece.text, label)
                if piece.kind == "command"
                else self.sql(piece.text, label)
            )
            failures += not ok
        return failures

    def run_script(self, text: str) -> int:
        """Non-interactive use: run ``text``; exit status 1 if any statement failed."""
        failures = self.run_text(text, where=lambda p: f"line {p.line}")
        return 1 if failures else 0

    def sql(self, text: str, where: str = "") -> bool:
        """Answer one SQL statement; True when it succeeded."""
        if text.strip().lower() in _QUIT_WORDS | _HELP_WORDS:
            return self.command(text, where)
        before = self._spent()
        try:
            result = run_statement(self.loaded.session, text, self.epsilon, self.delta)
        except PinqSyntaxError as err:
            self._error(str(err), where)
            return False
        except PinqError as err:
            self._error(one_line(err), where)
            return False
        except KeyboardInterrupt:
            self._error("interrupted", where)
            return False
        except Exception as err:  # keep the session alive; the message may quote data
            self._error(f"internal error ({type(err).__name__}); the statement failed", where)
            return False
        self._print(format_result(result, "table", self.level))
        if isinstance(result, pd.DataFrame):
            self._print(self._footer(result, before))
        self._print()
        return True

    def _spent(self) -> dict[str, Any]:
        return {name: budget.spent for name, budget in self.loaded.budgets.items()}

    def _footer(self, result: pd.DataFrame, before: Mapping[str, Any]) -> str:
        rows = len(result)
        parts = [f"{rows} row{'s' if rows != 1 else ''}"]
        if getattr(result, "accuracy", None):
            parts.append(f"± is the half-width of the {self.level:.0%} interval")
            charges = []
            for name, budget in self.loaded.budgets.items():
                spent = budget.spent
                eps = spent.epsilon - before[name].epsilon
                dlt = spent.delta - before[name].delta
                if eps or dlt:
                    cost = f"epsilon {_fmt(eps)}" + (f", delta {_fmt(dlt)}" if dlt else "")
                    charges.append(f"{cost} to {name} ({_fmt(budget.remaining.epsilon)} left)")
            parts.append(
                "charged " + "; ".join(charges) if charges else "charged nothing (asked before)"
            )
        return "(" + "; ".join(parts) + ")"

    # -- dot-commands -------------------------------------------------------------------
    def command(self, line: str, where: str = "") -> bool:
        """Run a dot-command line; True when it succeeded."""
        name, _, arg = line.strip().rstrip(";").strip().partition(" ")
        name, arg = name.lower(), arg.strip()
        if name in _QUIT_WORDS:
            self.done = True
            return True
        if name in _HELP_WORDS:
            self._print(self.help_text())
            return True
        if name == ".tables":
            self._print(self._tables_text())
            return True
        if name in (".describe", ".schema"):
            if not arg:
                self._error(f"{name} needs a table name: {name} TABLE", where)
                return False
            return self.sql(f"DESCRIBE {quote_identifier(arg)}", where)
        if name == ".budget":
            self._print(self._budget_text())
            return True
        if name in (".epsilon", ".delta"):
            return self._set_default(name[1:], arg, where)
        self._error(f"unknown command {name}; type .help for the list", where)
        return False

    def _set_default(self, which: str, arg: str, where: str) -> bool:
        if not arg:
            self._print(f"each query spends {which} {_fmt(getattr(self, which))}")
            return True
        try:
            value = float(arg)
        except ValueError:
            self._error(f".{which} takes a number, not {arg!r}", where)
            return False
        valid = value > 0 if which == "epsilon" else 0 <= value < 1
        if not valid or value != value or value == float("inf"):
            need = "a positive number" if which == "epsilon" else "at least 0 and below 1"
            self._error(f".{which} must be {need}", where)
            return False
        setattr(self, which, value)
        self._print(f"each query now spends {which} {_fmt(value)}")
        return True

    def help_text(self) -> str:
        """The text of ``.help``."""
        commands = "\n".join(
            f"  {(name + ' ' + args).strip():<17} {text}"
            for name, (args, text) in DOT_COMMANDS.items()
        )
        return (
            "Statements end with ';' and may span lines:\n"
            "  SELECT ... FROM table ...;            a private query; spends the per-query "
            f"epsilon (now {_fmt(self.epsilon)})\n"
            "  SELECT ... OPTIONS (epsilon = 0.5);   spend another epsilon on this query\n"
            "  EXPLAIN SELECT ...;                   the plan, noise and cost; spends nothing\n"
            "  SHOW TABLES;  SHOW BUDGET;  DESCRIBE table;\n"
            "Commands:\n"
            f"{commands}\n"
            "Answers read 'value ± e': e is the half-width of the 95% interval of the noise.\n"
            "Tab completes keywords, tables and columns; Alt-Enter runs a statement without ';'."
        )

    def _tables_text(self) -> str:
        lines = []
        for name, columns in self.tables.items():
            kind = "public" if name in self.loaded.public else "private"
            lines.append(f"{name} ({kind}): {', '.join(columns)}")
        return "\n".join(lines)

    def _budget_text(self) -> str:
        rows = []
        for name, budget in self.loaded.budgets.items():
            row = {
                "table": name,
                "epsilon": _fmt(budget.total.epsilon),
                "spent": _fmt(budget.spent.epsilon),
                "left": _fmt(budget.remaining.epsilon),
            }
            if budget.total.delta:
                row |= {
                    "delta": _fmt(budget.total.delta),
                    "delta spent": _fmt(budget.spent.delta),
                    "delta left": _fmt(budget.remaining.delta),
                }
            rows.append(row)
        table = format_result(pd.DataFrame(rows), "table")
        default = f"each query spends epsilon {_fmt(self.epsilon)}"
        if self.delta:
            default += f" and delta {_fmt(self.delta)}"
        return f"{table}\n({default}; .epsilon changes it)"

    def toolbar(self) -> str:
        """The bottom toolbar: the per-query epsilon and what each budget has left."""
        left = ", ".join(
            f"{name} {_fmt(b.remaining.epsilon)}" for name, b in self.loaded.budgets.items()
        )
        return f" epsilon per query {_fmt(self.epsilon)} | left: {left} | .help  .quit "

    def banner(self) -> str:
        """What the shell prints when it starts."""
        private = [n for n in self.tables if n not in self.loaded.public]
        eps = {_fmt(b.total.epsilon) for b in self.loaded.budgets.values()}
        text = f"pinqpy shell: private tables {', '.join(private)}"
        if self.loaded.public:
            text += f"; public tables {', '.join(self.loaded.public)}"
        text += (
            f"\nEach private table has its own budget of epsilon {', '.join(sorted(eps))}; "
            f"a query spends {_fmt(self.epsilon)} unless it says OPTIONS (epsilon = ...).\n"
            "End statements with ';'. Tab completes. Type .help for help, .quit to leave."
        )
        return text

    # -- the terminal -------------------------------------------------------------------
    def interact(self) -> int:
        """Read, answer and print at a terminal until ``.quit`` or Ctrl-D; returns 0."""
        try:
            prompt = _prompt_session(self)
        except ImportError:
            self._error("the interactive shell needs prompt_toolkit: pip install prompt_toolkit")
            return 1
        self._print(self.banner())
        while not self.done:
            try:
                text = prompt.prompt()
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            self.run_text(text)
        return 0


def _history(path: Path) -> Any:
    from prompt_toolkit.history import FileHistory, InMemoryHistory

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8"):
            pass
    except OSError:
        print(f"pinqpy: cannot write history to {path}; keeping it in memory", file=sys.stderr)
        return InMemoryHistory()
    return FileHistory(str(path))


def _prompt_session(shell: Shell) -> Any:
    """The prompt_toolkit session of the interactive shell."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
    from prompt_toolkit.completion import CompleteEvent, Completer, Completion
    from prompt_toolkit.document import Document
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.lexers import Lexer
    from prompt_toolkit.styles import Style

    class SqlCompleter(Completer):
        def get_completions(
            self, document: Document, complete_event: CompleteEvent
        ) -> Iterator[Completion]:
            for c in complete(
                document.text_before_cursor, document.text, shell.tables, shell.loaded.public
            ):
                yield Completion(c.text, start_position=-c.replace, display_meta=c.meta)

    class SqlLexer(Lexer):
        def lex_document(self, document: Document) -> Callable[[int], Any]:
            columns = [c for cols in shell.tables.values() for c in cols]
            lines = _lines(highlight(document.text, list(shell.tables), columns))
            return lambda i: lines[i] if i < len(lines) else []

    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        state = buffer.complete_state
        if state is not None and state.current_completion is not None:
            buffer.complete_state = None  # keep the chosen completion, close the menu
            return
        if statement_ready(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    @bindings.add("escape", "enter")
    def _run(event: KeyPressEvent) -> None:
        event.current_buffer.validate_and_handle()

    return PromptSession(
        message="pinqpy> ",
        multiline=True,
        prompt_continuation=lambda width, line, wrap: "...> ".rjust(width),
        history=_history(history_path()),
        auto_suggest=AutoSuggestFromHistory(),
        completer=SqlCompleter(),
        complete_while_typing=False,
        lexer=SqlLexer(),
        style=Style.from_dict(STYLE),
        key_bindings=bindings,
        bottom_toolbar=shell.toolbar,
        enable_history_search=False,
    )
