"""``pinqpy shell``: an interactive SQL shell over private tables, built on prompt_toolkit.

At a terminal it offers history kept across runs (``$PINQPY_HISTORY``, default
``~/.pinqpy_history``), statements spanning several lines up to a ``;``, tab completion of
keywords, functions, tables and columns, syntax highlighting, and dot-commands (``.help``,
``.tables``, ``.budget``, ``.epsilon 0.1``, ``.quit``). Every noisy answer is shown with its
accuracy: ``value ± half-width`` of its 95% interval. With standard input not a terminal it
runs the statements it reads and exits non-zero if any of them failed.

The pieces that do not need a terminal are usable and testable alone: splitting statements,
completion and highlighting (:mod:`pinqpy.interfaces.editing`), and :class:`Shell`, which
answers statements.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from pathlib import Path
from typing import IO, Any

import pandas as pd

from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import quote_identifier
from pinqpy.interfaces.editing import (
    DOT_COMMANDS,
    HELP_WORDS,
    QUIT_WORDS,
    STYLE,
    Piece,
    complete,
    fragment_lines,
    highlight,
    split_statements,
    statement_ready,
)
from pinqpy.interfaces.errors import one_line
from pinqpy.interfaces.output import format_result
from pinqpy.interfaces.statements import run_statement
from pinqpy.interfaces.tables import LoadedSession

__all__ = ["Shell", "history_path"]


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
        if text.strip().lower() in QUIT_WORDS | HELP_WORDS:
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
        if name in QUIT_WORDS:
            self.done = True
            return True
        if name in HELP_WORDS:
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
            cut = fragment_lines(highlight(document.text, list(shell.tables), columns))
            return lambda i: cut[i] if i < len(cut) else []

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
