"""``pinqpy shell``: an interactive SQL shell over private tables, built on prompt_toolkit.

At a terminal it offers history kept across runs (``$PINQPY_HISTORY``, default
``~/.pinqpy_history``), statements spanning several lines up to a ``;``, tab completion of
keywords, functions, tables and columns, syntax highlighting, and dot-commands (``.help``,
``.tables``, ``.budget``, ``.epsilon 0.1``, ``.mode csv``, ``.output FILE``, ``.read FILE``,
``.bail on``, ``.quit``), in the manner of the sqlite3 and duckdb shells. Every noisy answer
is shown with its accuracy: ``value ± half-width`` of its 95% interval, or ``value [low,
high]`` where the interval is not centred on the value. With standard input not a terminal
(or with ``-c SQL`` / ``-f FILE``) it runs the statements it reads, goes on after an error,
and exits with status 1 if any of them failed; with ``.bail on`` (``-bail``) it stops at the
first error.

The pieces that do not need a terminal are usable and testable alone: splitting statements,
completion and highlighting (:mod:`pinqpy.interfaces.editing`), and :class:`Shell`, which
answers statements.

The session protocol
--------------------
A :class:`Shell` answers over any object with these three members (:class:`SqlSession`),
which both a local :class:`~pinqpy.Session` and a remote session from ``pq.connect(...)``
have, so the same shell runs over local files and over a pinqpy server:

``tables``
    the names of the tables (private and public), a sequence of text;
``sql(query, epsilon=None, delta=None)``
    the answer to one statement: a NoisyFrame, an Explanation, or a DataFrame for
    ``SHOW TABLES`` (columns ``table`` and ``kind``), ``SHOW BUDGET`` (columns ``budget``,
    ``epsilon``, ``delta``, ``spent_epsilon``, ``spent_delta``, ``remaining_epsilon``,
    ``remaining_delta``) and ``DESCRIBE``; a user error raises a :class:`~pinqpy.PinqError`;
``describe(name)``
    a table's columns, a DataFrame with a ``column`` column;
``last_note`` (optional)
    one line on the last statement answered (each step's stability and cost), or None: a
    local :class:`~pinqpy.Session` keeps it, a remote session does not, and the footer then
    reports what the budgets' spent grew by.

Everything else the shell shows comes from those: which tables are public from ``SHOW
TABLES``, the columns it completes from ``describe``, and budgets (``.budget``, the toolbar,
what a query charged) from ``SHOW BUDGET`` read before and after the statement. A budget
shared with other processes (one ledger file, or a server's group budget) can also be spent by
them meanwhile; the charge a footer reports is what the budget's spent grew by.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import IO, Any, Protocol

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
from pinqpy.interfaces.errors import for_interface, one_line
from pinqpy.interfaces.output import FORMATS, format_result, interval_kinds, summary_text
from pinqpy.interfaces.progress import terminal_progress
from pinqpy.interfaces.statements import run_statement, summarize_statement

__all__ = ["BudgetLine", "Shell", "SqlSession", "history_path", "tenth"]


class SqlSession(Protocol):
    """What :class:`Shell` and the notebook magic need of a session (see the module's
    documentation): a local :class:`~pinqpy.Session` or a remote session both fit."""

    @property
    def tables(self) -> Sequence[str]: ...

    def sql(self, query: str, epsilon: float | None = None, delta: float | None = None) -> Any: ...

    def describe(self, name: str) -> pd.DataFrame: ...


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


def charged(before: Sequence[BudgetLine], after: Sequence[BudgetLine]) -> list[str]:
    """One ``epsilon E[, delta D] to NAME (R left)`` per budget whose spent grew between two
    readings of ``SHOW BUDGET``."""
    earlier = {b.name: b for b in before}
    charges = []
    for budget in after:
        was = earlier.get(budget.name)
        if was is None:
            continue
        eps = budget.spent_epsilon - was.spent_epsilon
        dlt = budget.spent_delta - was.spent_delta
        if eps or dlt:
            cost = f"epsilon {_fmt(eps)}" + (f", delta {_fmt(dlt)}" if dlt else "")
            charges.append(f"{cost} to {budget.name} ({_fmt(budget.remaining_epsilon)} left)")
    return charges


def tenth(value: float) -> float:
    """A tenth of ``value``, spelled as a short decimal (0.7 -> 0.07, not 0.06999...).

    >>> tenth(0.7)
    0.07
    """
    return float(Decimal(repr(value)) / 10)


@dataclass(frozen=True)
class BudgetLine:
    """One budget as ``SHOW BUDGET`` reports it; ``name`` is its label without the
    ``budget of`` prefix (the table or tables it covers)."""

    name: str
    epsilon: float
    delta: float
    spent_epsilon: float
    spent_delta: float
    remaining_epsilon: float
    remaining_delta: float


class Shell:
    """Answers statements and dot-commands over a session, printing as it goes.

    ``session`` is anything with the session protocol (:class:`SqlSession`). ``epsilon``
    and ``delta`` are what each query spends unless its OPTIONS say otherwise; ``epsilon``
    None means a tenth of the smallest budget's total (as ``pinqpy shell`` does locally).
    ``notes`` are lines the banner adds (where the budgets are kept). ``mode`` is how
    results print (``.mode``); ``bail`` stops a run at its first error (``.bail``).

    Results (answers, their footers, ``.tables``, ``.budget``) go to ``out``, or to the
    file ``.output FILE`` opened; messages and errors go to ``out`` and ``err``. In the
    ``csv``, ``json`` and ``markdown`` modes a result's footer (rows, what it charged) goes to
    ``err``, so the results stay a clean CSV, JSON or Markdown stream while what a query
    spent is still shown.
    """

    MAX_READ_DEPTH = 16  # .read of a file that .reads itself stops here

    def __init__(
        self,
        session: SqlSession,
        *,
        epsilon: float | None,
        delta: float = 0.0,
        notes: Sequence[str] = (),
        out: IO[str] | None = None,
        err: IO[str] | None = None,
        level: float = 0.95,
        mode: str = "table",
        bail: bool = False,
    ):
        self.session = session
        self.mode = mode
        self.bail = bail
        self.sink: IO[str] | None = None  # the .output file, when one is open
        self.sink_name: str | None = None
        self._reading: list[Path] = []
        self.delta = delta
        self.level = level
        self.notes = list(notes)
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.done = False
        self.tables, self.public = self._catalogue()
        self.budgets = self.read_budgets()
        if epsilon is None and self.budgets:
            epsilon = tenth(min(b.epsilon for b in self.budgets))
        self.epsilon = epsilon

    # -- catalogue ----------------------------------------------------------------------
    def _catalogue(self) -> tuple[dict[str, list[str]], list[str]]:
        """Table name -> its column names, and the public tables' names."""
        names = [str(n) for n in self.session.tables]
        kinds: dict[str, str] = {}
        try:
            shown = self.session.sql("SHOW TABLES")
            kinds = {str(t): str(k) for t, k in zip(shown["table"], shown["kind"], strict=True)}
        except (PinqError, KeyError, TypeError):
            pass
        columns: dict[str, list[str]] = {}
        for name in names:
            try:
                columns[name] = [str(c) for c in self.session.describe(name)["column"]]
            except (PinqError, KeyError, TypeError):
                columns[name] = []
        return columns, [n for n in names if kinds.get(n) == "public"]

    def read_budgets(self) -> list[BudgetLine]:
        """Every budget as ``SHOW BUDGET`` reports it now (empty if it cannot be read)."""
        try:
            frame = self.session.sql("SHOW BUDGET")
            records = frame.to_dict("records")
            return [
                BudgetLine(
                    str(r["budget"]).removeprefix("budget of "),
                    *(
                        float(r[k])
                        for k in (
                            "epsilon",
                            "delta",
                            "spent_epsilon",
                            "spent_delta",
                            "remaining_epsilon",
                            "remaining_delta",
                        )
                    ),
                )
                for r in records
            ]
        except (PinqError, KeyError, TypeError, ValueError, AttributeError):
            return []

    def _print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def _emit(self, text: str = "") -> None:
        """Print a result: to the ``.output`` file when one is open."""
        print(text, file=self.sink or self.out, flush=True)

    def close(self) -> None:
        """Close the ``.output`` file, if one is open."""
        if self.sink is not None:
            self.sink.close()
            self.sink, self.sink_name = None, None

    def _error(self, message: str, where: str = "") -> None:
        prefix = f"error ({where}): " if where else "error: "
        print(prefix + message, file=self.err, flush=True)

    # -- running input ------------------------------------------------------------------
    def run_text(self, text: str, *, where: Callable[[Piece], str] | None = None) -> int:
        """Run every statement and command in ``text`` (a last one may lack its ``;``).

        Returns how many failed; stops early after ``.quit``, and after the first failure
        with ``.bail on``.
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
            if failures and self.bail:
                break
        return failures

    def run_script(self, text: str, source: str | None = None) -> int:
        """Non-interactive use: run ``text`` (read from ``source``, a file name that errors
        name, if given); exit status 1 if any statement failed (it goes on after a failure
        unless ``bail``), else 0."""
        prefix = f"{source} " if source else ""
        failures = self.run_text(text, where=lambda p: f"{prefix}line {p.line}")
        return 1 if failures else 0

    def sql(self, text: str, where: str = "") -> bool:
        """Answer one SQL statement; True when it succeeded."""
        if text.strip().lower() in QUIT_WORDS | HELP_WORDS:
            return self.command(text, where)
        before = self.read_budgets()
        try:
            with terminal_progress(self.err):  # "running query…" if it takes a while
                result = run_statement(self.session, text, self.epsilon, self.delta)
            # Read before anything else asks the session (SHOW BUDGET would replace it).
            note = getattr(self.session, "last_note", None)
        except PinqSyntaxError as err:
            self._error(for_interface(err, "shell"), where)
            return False
        except PinqError as err:
            self._error(one_line(err, "shell"), where)
            return False
        except KeyboardInterrupt:
            self._error("interrupted", where)
            return False
        except Exception as err:  # keep the session alive; the message may quote data
            self._error(f"internal error ({type(err).__name__}); the statement failed", where)
            return False
        try:
            self._emit(format_result(result, self.mode, self.level))
            if isinstance(result, pd.DataFrame):
                footer = self._footer(result, before, note if isinstance(note, str) else None)
                if self.mode == "table":
                    self._emit(footer)
                else:
                    print(footer, file=self.err, flush=True)
            if self.mode in ("table", "markdown"):
                self._emit()
        except OSError as err:
            self._error(f"cannot write to {self.sink_name or 'the output'}: {err.strerror}")
            return False
        return True

    def _footer(
        self, result: pd.DataFrame, before: Sequence[BudgetLine], note: str | None = None
    ) -> str:
        """``(N rows; how to read the intervals; what it charged)``.

        What it charged is the session's own note on the statement (``last_note``: each
        step's stability and cost, and what each charged budget has left) when the session
        keeps one; else (a remote session) what each budget's spent grew by.
        """
        rows = len(result)
        parts = [f"{rows} row{'s' if rows != 1 else ''}"]
        if getattr(result, "accuracy", None):
            if self.mode in ("table", "markdown"):  # csv and json hold intervals as columns
                parts.append(self._how_to_read(interval_kinds(result, self.level)))
            self.budgets = self.read_budgets()
            charges = charged(before, self.budgets)
            if note and note.strip():  # the note names what each budget has left
                parts.append(" ".join(note.split()))
            else:
                parts.append(
                    "charged " + "; ".join(charges) if charges else "charged nothing (asked before)"
                )
        return "(" + "; ".join(parts) + ")"

    def _how_to_read(self, kinds: set[str]) -> str:
        """How to read the intervals printed (see :func:`~pinqpy.interfaces.output.symmetric`)."""
        level = f"{self.level:.0%}"
        if kinds == {"[]"}:
            return f"[lo, hi] is the {level} interval"
        if "[]" in kinds:
            return (
                f"± is the half-width of the {level} interval, [lo, hi] the interval where lopsided"
            )
        return f"± is the half-width of the {level} interval"

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
            self._emit(self._tables_text())
            return True
        if name in (".describe", ".schema"):
            if not arg:
                self._error(f"{name} needs a table name: {name} TABLE", where)
                return False
            return self.sql(f"DESCRIBE {quote_identifier(arg)}", where)
        if name == ".budget":
            self._emit(self._budget_text())
            return True
        if name == ".summarize":
            return self._summarize(arg, where)
        if name in (".epsilon", ".delta"):
            return self._set_default(name[1:], arg, where)
        if name == ".mode":
            return self._set_mode(arg, where)
        if name == ".output":
            return self._set_output(arg, where)
        if name == ".read":
            return self._read(arg, where)
        if name == ".bail":
            return self._set_bail(arg, where)
        self._error(f"unknown command {name}; type .help for the list", where)
        return False

    def _summarize(self, arg: str, where: str) -> bool:
        """``.summarize SELECT ...``: the query's planned measurements, their mechanisms and
        errors (:meth:`pinqpy.Session.summarize`); reads no data and charges nothing."""
        if not arg:
            self._error(".summarize needs a query: .summarize SELECT ...", where)
            return False
        if not callable(getattr(self.session, "summarize", None)):
            self._error(
                ".summarize needs a local session; over a server, EXPLAIN SELECT ... states "
                "the same figures",
                where,
            )
            return False
        try:
            table = summarize_statement(self.session, arg, self.epsilon, self.delta)
        except PinqError as err:
            self._error(for_interface(err, "shell"), where)
            return False
        self._emit(format_result(summary_text(table), self.mode, self.level))
        footer = "(charged nothing; OPTIONS (n = ...) states means and quantiles in values)"
        if self.mode == "table":
            self._emit(footer)
        else:
            print(footer, file=self.err, flush=True)
        return True

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

    def _set_mode(self, arg: str, where: str) -> bool:
        if not arg:
            self._print(f"results print as {self.mode}")
            return True
        mode = arg.lower()
        if mode not in FORMATS:
            self._error(f".mode takes one of {', '.join(FORMATS)}, not {arg!r}", where)
            return False
        self.mode = mode
        return True

    def _file_argument(self, command: str, arg: str, where: str) -> str | None:
        """The one file name a command takes (quoted if it has spaces), or None after an
        error."""
        try:
            words = shlex.split(arg)
        except ValueError:
            self._error(f"{command}: unbalanced quotes in {arg!r}", where)
            return None
        if len(words) != 1:
            self._error(f"{command} takes one file name (quote it if it has spaces)", where)
            return None
        return words[0]

    def _set_output(self, arg: str, where: str) -> bool:
        if not arg or arg.strip() in ("stdout", "-"):
            self.close()
            return True
        name = self._file_argument(".output", arg, where)
        if name is None:
            return False
        try:
            sink = Path(name).expanduser().open("w", encoding="utf-8")
        except OSError as err:
            self._error(f".output: cannot write {name!r} ({err.strerror or err})", where)
            return False
        self.close()
        self.sink, self.sink_name = sink, name
        return True

    def _read(self, arg: str, where: str) -> bool:
        if not arg:
            self._error(".read needs a file name: .read FILE", where)
            return False
        name = self._file_argument(".read", arg, where)
        if name is None:
            return False
        path = Path(name).expanduser()
        if len(self._reading) >= self.MAX_READ_DEPTH:
            self._error(f".read {name}: files read each other too deeply", where)
            return False
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            reason = getattr(err, "strerror", None) or "not UTF-8 text"
            self._error(f".read: cannot read {name!r} ({reason})", where)
            return False
        self._reading.append(path)
        try:
            failures = self.run_text(text, where=lambda p: f"{name} line {p.line}")
        finally:
            self._reading.pop()
        return failures == 0

    def _set_bail(self, arg: str, where: str) -> bool:
        if not arg:
            self._print(f"bail is {'on' if self.bail else 'off'}")
            return True
        value = arg.lower()
        if value not in ("on", "off", "true", "false", "1", "0", "yes", "no"):
            self._error(f".bail takes on or off, not {arg!r}", where)
            return False
        self.bail = value in ("on", "true", "1", "yes")
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
            "  .summarize SELECT ...                 each measurement's error, as a table\n"
            "  SHOW TABLES;  SHOW BUDGET;  DESCRIBE table;\n"
            "Commands:\n"
            f"{commands}\n"
            "Answers read 'value ± e' (e is the half-width of the 95% interval of the noise), "
            "or\n'value [lo, hi]' where the interval is not centred on the value.\n"
            "From the command line: pinqpy shell ... -c SQL (run it and exit), -f FILE, -bail.\n"
            "Tab completes keywords, tables and columns; Alt-Enter runs a statement without ';'."
        )

    def _tables_text(self) -> str:
        lines = []
        for name, columns in self.tables.items():
            kind = "public" if name in self.public else "private"
            lines.append(f"{name} ({kind}): {', '.join(columns)}")
        return "\n".join(lines)

    def _budget_text(self) -> str:
        self.budgets = self.read_budgets()
        rows = []
        for budget in self.budgets:
            row = {
                "table": budget.name,
                "epsilon": _fmt(budget.epsilon),
                "spent": _fmt(budget.spent_epsilon),
                "left": _fmt(budget.remaining_epsilon),
            }
            if budget.delta:
                row |= {
                    "delta": _fmt(budget.delta),
                    "delta spent": _fmt(budget.spent_delta),
                    "delta left": _fmt(budget.remaining_delta),
                }
            rows.append(row)
        table = format_result(pd.DataFrame(rows), "table")
        return f"{table}\n({self._default_text()}; .epsilon changes it)"

    def _default_text(self) -> str:
        if self.epsilon is None:
            return "each query says what it spends: OPTIONS (epsilon = ...)"
        default = f"each query spends epsilon {_fmt(self.epsilon)}"
        if self.delta:
            default += f" and delta {_fmt(self.delta)}"
        return default

    def toolbar(self) -> str:
        """The bottom toolbar: the per-query epsilon and what each budget had left after the
        last statement (it is redrawn at every key, so it does not ask the session)."""
        left = ", ".join(f"{b.name} {_fmt(b.remaining_epsilon)}" for b in self.budgets)
        return f" epsilon per query {_fmt(self.epsilon)} | left: {left} | .help  .quit "

    def banner(self) -> str:
        """What the shell prints when it starts."""
        private = [n for n in self.tables if n not in self.public]
        eps = {_fmt(b.epsilon) for b in self.budgets}
        text = f"pinqpy shell: private tables {', '.join(private) or '(none)'}"
        if self.public:
            text += f"; public tables {', '.join(self.public)}"
        spends = (
            f"a query spends {_fmt(self.epsilon)} unless it says OPTIONS (epsilon = ...)"
            if self.epsilon is not None
            else "a query says what it spends with OPTIONS (epsilon = ...)"
        )
        if eps:
            text += f"\nEach private table has its own budget of epsilon {', '.join(sorted(eps))}; "
        else:
            text += "\n"
        text += f"{spends}.\n"
        text += "".join(f"{note}\n" for note in self.notes)
        text += "End statements with ';'. Tab completes. Type .help for help, .quit to leave."
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
                document.text_before_cursor, document.text, shell.tables, shell.public
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
