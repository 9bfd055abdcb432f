"""IPython/Jupyter integration: the ``%pinq`` line magic and the ``%%pinq`` cell magic.

``%load_ext pinqpy`` registers one magic, ``pinq``, usable both ways::

    %%pinq -e 0.5
    SELECT sex, COUNT(*) AS n, AVG(income) AS mean_income
    FROM people GROUP BY sex

    %pinq -e 0.1 SELECT COUNT(*) FROM people WHERE age >= 65
    n = %pinq -e 0.1 SELECT COUNT(*) AS n FROM people

Options (before the query on the magic's line):

``-e/--epsilon E``  the total epsilon the query charges (else the query's own ``OPTIONS``)
``-d/--delta D``    the delta it may spend
``-s/--session S``  the name of a :class:`~pinqpy.Session` in the notebook's namespace, for
                    this call only
``-o/--out NAME``   also store the result in the variable ``NAME`` (deleted if the call fails)
``-q/--quiet``      do not display the result, nor the line saying what it charged
``--``              ends the options (the rest of the line is the query)

Which session a cell runs on
----------------------------
The first of these that applies, so a cell never silently moves to another session:

1. ``-s/--session NAME`` on the cell;
2. the variable ``%pinq use NAME`` chose (until another ``%pinq use``);
3. the pinqpy server ``%pinq connect URL`` opened (until ``%pinq disconnect``; a later
   ``%pinq connect`` replaces a ``%pinq use``);
4. the variable an earlier cell ran on by this rule; when it holds no Session any more (it
   was deleted), the cell fails and says how to choose rather than moving to another one;
5. the only Session in the notebook's variables (names not starting with ``_``); with none, or
   with several, the cell fails and says how to choose (``%pinq use NAME``).

So creating another Session later does not move cells to it; when several Sessions are in the
variables and rule 4 chose, the cell prints ``(session: NAME)`` so the choice is visible.
Names are looked up at each cell: re-running ``session = pq.Session()`` is picked up.
``%pinq status`` says where cells run now.

Parameters
----------
``{name}`` in the line or the cell pastes ``str(name)`` into the text (``{{``/``}}`` are
literal braces); ``:name`` outside strings and comments binds a number, a string, a bool or
None as a SQL literal (:mod:`pinqpy.interfaces.parameters`). IPython's own ``$name``/``{name}``
expansion is off for this magic, so the two rules above are the only ones.

A pinqpy server's tables are queried the same way after connecting::

    %pinq connect http://127.0.0.1:8765            # the token from $PINQPY_TOKEN, or asked for
    %pinq connect https://dp.example.org --token-env LAB_TOKEN
    %%pinq -e 0.5
    SELECT COUNT(*) FROM pums
    %pinq status                                     # where cells run now
    %pinq disconnect                                 # back to local sessions

The token is read from the environment variable ``PINQPY_TOKEN`` (or the one ``--token-env``
names) or typed at a hidden prompt, never from the magic's line: a line is saved in the
notebook and in IPython's history, so ``%pinq connect`` refuses any other argument. Results are
the same objects as locally; only a ``%pinq`` status line and an error say which server
answered.

Results, notes and failures
---------------------------
The magic returns what :meth:`Session.sql` returns, so IPython displays it: a released
:class:`~pinqpy.NoisyFrame` is shown with a small table of 95% intervals for its noisy
columns, EXPLAIN as plain text, SHOW/DESCRIBE as DataFrames. Under a released result one line
says what the statement charged and why: the session's ``last_note`` when it has one, else the
growth of each budget's spent in ``SHOW BUDGET`` read before and after
(:mod:`pinqpy.interfaces.charges`).

A pinqpy error (a syntax error, an unknown column, a query that cannot be answered privately,
an exceeded budget) fails the cell: it raises IPython's ``UsageError``, shown as its message
alone (``PrivacyError: ...``, no ``UsageError:`` in front) -- with the caret under the fault --
and not as a traceback, so "Run All" and ``jupyter nbconvert
--execute`` stop there. It charges nothing, and the ``-o`` variable is deleted, so no result
of an earlier run is mistaken for this one's. A fix-it hint in the message speaks the magic's
options (:func:`pinqpy.interfaces.errors.for_interface`).

This module imports IPython only when the extension is loaded, so pinqpy does not depend on
it. The user guide is ``docs/notebook.md``.
"""

from __future__ import annotations

import contextlib
import functools
import getpass
import keyword
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pinqpy.api.session import Session
from pinqpy.errors import PinqError
from pinqpy.interfaces.charges import charged, read_budgets
from pinqpy.interfaces.connect import TOKEN_ENV, check_env_name, check_url, find_token, open_remote
from pinqpy.interfaces.errors import CliError, for_interface
from pinqpy.interfaces.parameters import ParameterError, bind, substitute
from pinqpy.interfaces.progress import notebook_progress, terminal_progress

if TYPE_CHECKING:
    from pinqpy.interfaces.shell import SqlSession

__all__ = ["PinqMagic", "load_ipython_extension", "unload_ipython_extension"]


# -- options -------------------------------------------------------------------------------
class MagicUsageError(Exception):
    """Bad options to ``%pinq``; turned into IPython's ``UsageError`` (no traceback)."""


@dataclass
class MagicOptions:
    """The parsed options of one ``%pinq``/``%%pinq`` call, and the query text."""

    query: str = ""
    epsilon: float | None = None
    delta: float | None = None
    session: str | None = None
    out: str | None = None
    quiet: bool = False


_VALUED = {
    "-e": "epsilon",
    "--epsilon": "epsilon",
    "-d": "delta",
    "--delta": "delta",
    "-s": "session",
    "--session": "session",
    "-o": "out",
    "--out": "out",
}
_FLAGS = {"-q": "quiet", "--quiet": "quiet"}
_COMMANDS = ("connect", "disconnect", "status", "use")
_TOKEN = re.compile(r"\s*(\S+)")


def parse_options(line: str) -> MagicOptions:
    """Parse leading options off ``line``; what follows them is the query, untouched.

    Options end at the first token that does not start with ``-`` or at ``--``. The query
    text is kept verbatim (quotes, spacing), so SQL string literals survive.

    >>> o = parse_options("-e 0.5 --session=s -o r SELECT 'a  b' FROM t")
    >>> (o.epsilon, o.session, o.out, o.query)
    (0.5, 's', 'r', "SELECT 'a  b' FROM t")
    """
    opts = MagicOptions()
    pos = 0
    while True:
        m = _TOKEN.match(line, pos)
        if m is None:
            break
        token = m.group(1)
        if token == "--":
            pos = m.end()
            break
        if not token.startswith("-") or token == "-":
            break
        name, sep, value = token.partition("=")
        if name in _FLAGS:
            if sep:
                raise MagicUsageError(f"{name} takes no value")
            setattr(opts, _FLAGS[name], True)
            pos = m.end()
            continue
        if name not in _VALUED:
            raise MagicUsageError(
                f"unknown option {name!r}; %pinq takes -e/--epsilon, -d/--delta, "
                "-s/--session, -o/--out and -q/--quiet"
            )
        pos = m.end()
        if not sep:
            v = _TOKEN.match(line, pos)
            if v is None:
                raise MagicUsageError(f"{name} needs a value")
            value = v.group(1)
            pos = v.end()
        _set_option(opts, _VALUED[name], name, value)
    opts.query = line[pos:].strip()
    return opts


def _set_option(opts: MagicOptions, field: str, flag: str, value: str) -> None:
    if field in ("epsilon", "delta"):
        try:
            number = float(value)
        except ValueError:
            raise MagicUsageError(f"{flag} needs a number, not {value!r}") from None
        setattr(opts, field, number)
        return
    if not value.isidentifier() or keyword.iskeyword(value):
        raise MagicUsageError(f"{flag} needs a Python variable name, not {value!r}")
    setattr(opts, field, value)


@dataclass
class ConnectOptions:
    """The arguments of ``%pinq connect URL [--token-env NAME]``."""

    url: str
    token_env: str | None = None


_CONNECT_ONLY = (
    "%pinq connect takes the server's address and --token-env NAME only: the token is read "
    f"from the environment variable {TOKEN_ENV} (or the one --token-env names) or asked for, "
    "never taken from the line, which the notebook and its history keep"
)


def parse_connect(line: str) -> ConnectOptions:
    """Parse ``connect URL [--token-env NAME]`` (``line`` starts with ``connect``).

    Anything else on the line is refused without being repeated: it may be a token.

    >>> parse_connect("connect http://127.0.0.1:8765 --token-env LAB_TOKEN")
    ConnectOptions(url='http://127.0.0.1:8765', token_env='LAB_TOKEN')
    """
    words = line.split()[1:]
    url: str | None = None
    token_env: str | None = None
    i = 0
    while i < len(words):
        word = words[i]
        name, sep, value = word.partition("=")
        if name == "--token-env":
            if not sep:
                i += 1
                if i == len(words):
                    raise MagicUsageError("--token-env needs the NAME of an environment variable")
                value = words[i]
            try:
                token_env = check_env_name(value)
            except CliError as err:
                raise MagicUsageError(str(err)) from None
        elif word.startswith("-") or url is not None:
            raise MagicUsageError(_CONNECT_ONLY)
        else:
            url = word
        i += 1
    if url is None:
        raise MagicUsageError("%pinq connect needs the server's address: %pinq connect URL")
    try:
        check_url(url, "%pinq connect")
    except CliError as err:
        raise MagicUsageError(str(err)) from None
    return ConnectOptions(url, token_env)


def _speaks_sql(obj: object) -> bool:
    """Whether ``obj`` has the session protocol (``sql``, ``tables``, ``describe``; see
    :mod:`pinqpy.interfaces.shell`), as a session from ``pq.connect`` does."""
    methods = all(callable(getattr(obj, m, None)) for m in ("sql", "describe"))
    return methods and hasattr(obj, "tables")


# -- the magic -----------------------------------------------------------------------------
_NO_STATEMENT_CHARGE = ("SHOW", "DESCRIBE", "EXPLAIN")


class PinqMagic:
    """Run one SQL statement against a pinqpy Session.

    ``%pinq [options] QUERY`` or, as a cell magic, ``%%pinq [options]`` with the query in the
    cell. Options: ``-e/--epsilon E`` (the total the query charges), ``-d/--delta D``,
    ``-s/--session NAME`` (a Session in the namespace, for this call), ``-o/--out NAME`` (also
    store the result there; deleted when the call fails), ``-q/--quiet`` (display neither the
    result nor the charge note), ``--`` (end of options). ``{name}`` pastes a variable's text
    and ``:name`` binds a variable as a SQL literal. Returns the result -- a NoisyFrame shown
    with its 95% intervals, EXPLAIN text, or a DataFrame -- so ``x = %pinq ...`` works, and
    prints under it what the statement charged. A pinqpy error fails the call with IPython's
    ``UsageError`` (its message and caret, no traceback) and charges nothing.

    ``%pinq use NAME`` makes the Session in variable ``NAME`` the one later calls run on;
    without it a call runs where the previous one did (see the module's documentation for the
    whole rule). ``%pinq connect URL [--token-env NAME]`` makes later calls without
    ``--session`` run on a pinqpy server, ``%pinq disconnect`` returns to local sessions and
    ``%pinq status`` says where calls run. A session needs only the session protocol of
    :mod:`pinqpy.interfaces.shell` (``sql``; ``tables`` and ``describe`` complete it).
    """

    #: IPython leaves ``$name`` and ``{name}`` on the line alone: the magic's own parameters
    #: (``{name}``, ``:name``) apply to the line and the cell alike, with clear errors.
    _ipython_magic_no_var_expand = True

    def __init__(self, shell: Any):
        self.shell = shell
        #: The server session ``%pinq connect`` opened, and its address; None when local.
        self.remote: SqlSession | None = None
        self.remote_url: str | None = None
        #: The variable ``%pinq use`` chose; None when not chosen.
        self.chosen: str | None = None
        #: The variable the default rule last ran a cell on (rule 4 of the module's docs).
        self.sticky: str | None = None
        #: Charge notes waiting for the end of the running cell, to print under its result.
        self.pending: list[str] = []
        self.in_cell = False

    # -- choosing the session ---------------------------------------------------------------
    def local_sessions(self) -> dict[str, Session]:
        """The notebook's variables that hold a Session (names starting with ``_`` left out:
        IPython's output history holds displayed objects there)."""
        return {
            k: v
            for k, v in self.shell.user_ns.items()
            if not k.startswith("_") and isinstance(v, Session)
        }

    def variable(self, name: str, said: str) -> SqlSession:
        """The session in variable ``name``; ``said`` is how the user named it (for errors)."""
        ns = self.shell.user_ns
        if name not in ns:
            raise MagicUsageError(f"{said}: no variable named {name!r}")
        found = ns[name]
        if not isinstance(found, Session) and not _speaks_sql(found):
            raise MagicUsageError(
                f"{said}: {name!r} is a {type(found).__name__}, not a pinqpy Session"
            )
        return found  # type: ignore[no-any-return]

    def find_session(self, name: str | None) -> tuple[SqlSession, str | None]:
        """The session a call runs on, and a note naming it when the choice is not obvious
        (None otherwise); the rule is the module's documentation."""
        if name is not None:
            return self.variable(name, "-s/--session"), None
        if self.chosen is not None:
            return self.variable(self.chosen, f"%pinq use {self.chosen}"), None
        if self.remote is not None:
            return self.remote, None
        found = self.local_sessions()
        several = len({id(s) for s in found.values()}) > 1
        if self.sticky in found:
            return found[self.sticky], f"(session: {self.sticky})" if several else None
        if self.sticky is not None:  # never move on silently, not even to the only other
            listed = f" ({', '.join(sorted(found))})" if found else ""
            raise MagicUsageError(
                f"earlier cells ran on {self.sticky}, which holds no pinqpy Session now: "
                f"choose a session{listed} with %pinq use NAME (or -s NAME for one cell)"
            )
        if not found:
            raise MagicUsageError(
                "no pinqpy Session in the notebook's variables: create one "
                "(session = pq.Session()) and register tables, or connect to a server "
                "(%pinq connect URL)"
            )
        if several:
            raise MagicUsageError(
                f"several pinqpy Sessions are defined ({', '.join(sorted(found))}): choose one "
                "with %pinq use NAME (or -s NAME for one cell)"
            )
        self.sticky = sorted(found)[0]
        return found[self.sticky], None

    # -- running a statement ----------------------------------------------------------------
    def __call__(self, line: str, cell: str | None = None) -> Any:
        """Run the magic: ``line`` holds the options (and, as a line magic, the query)."""
        from IPython.core.error import UsageError

        words = line.split()
        command = words[0].lower() if words else ""
        if command in _COMMANDS:
            if cell is not None:
                raise UsageError(f"%pinq {command} is a line magic: write it without %%")
            try:
                # {name} works in commands too (%pinq connect {url}), as in a query's options
                self.run_command(command, substitute(line, self.shell.user_ns))
            except (MagicUsageError, ParameterError) as err:
                raise UsageError(str(err)) from None
            return None

        ns = self.shell.user_ns
        try:
            opts = parse_options(substitute(line, ns))
            if cell is not None:
                if opts.query:
                    raise MagicUsageError(
                        "%%pinq takes options on its first line and the query in the cell "
                        f"(unexpected {opts.query!r})"
                    )
                opts.query = substitute(cell, ns).strip()
        except (MagicUsageError, ParameterError) as err:
            raise UsageError(str(err)) from None
        if opts.out is not None:  # a failure below leaves no stale result behind
            ns.pop(opts.out, None)
        try:
            if not opts.query:
                raise MagicUsageError(
                    "no query: write %pinq [options] SELECT ... or put the query in a %%pinq cell"
                )
            query = bind(opts.query, ns)
            session, note = self.find_session(opts.session)
        except (MagicUsageError, ParameterError) as err:
            raise UsageError(str(err)) from None
        if note is not None:
            print(note)

        first = query.split(None, 1)[0].upper() if query.split() else ""
        before = None
        if not opts.quiet and not hasattr(session, "last_note"):
            before = None if first in _NO_STATEMENT_CHARGE else read_budgets(session)
        try:
            with self.progress():
                result = session.sql(query, epsilon=opts.epsilon, delta=opts.delta)
        except PinqError as err:
            raise refused(self.failure(err, session, note)) from None
        if opts.out is not None:
            ns[opts.out] = result
        if opts.quiet:
            return None
        if first not in _NO_STATEMENT_CHARGE:  # EXPLAIN's own text already says it is free
            self.note_charge(session, result, before)
        return result

    def progress(self) -> contextlib.AbstractContextManager[None]:
        """"running query…" while a statement takes more than about a second: a line in the
        cell that clears when the answer comes (in a notebook), or a spinner on a terminal's
        standard error (terminal IPython)."""
        if getattr(self.shell, "kernel", None) is not None:
            return notebook_progress()
        return terminal_progress(sys.stderr)

    def failure(self, err: PinqError, session: object, note: str | None = None) -> str:
        """The message a failed call shows: the error's (its caret lines kept, its fix-it hint
        in the magic's terms) and, when not obvious, which session answered."""
        text = f"{type(err).__name__}: {for_interface(err, 'magic')}"
        where = self._where(session) or note
        return f"{text}\n{where}" if where else text

    def _where(self, session: object) -> str | None:
        """Which server answered, for an error's last line (None for a local session)."""
        if session is self.remote:
            return f"(on the pinqpy server {self.remote_url})"
        if not isinstance(session, Session):
            return f"(on {session!r})"
        return None

    # -- the note under a result ------------------------------------------------------------
    def note_charge(self, session: object, result: object, before: list[Any] | None) -> None:
        """Print what the statement charged and why, under its displayed result."""
        note = getattr(session, "last_note", None)
        if note is None and before is not None and getattr(result, "accuracy", None):
            charges = charged(before, read_budgets(session))
            note = (
                "charged " + "; ".join(charges)
                if charges
                else "charged nothing (the same query was answered before)"
            )
        if not note:
            return
        if self.in_cell:  # IPython shows the result after the magic returns: wait for it
            self.pending.append(str(note))
        else:
            print(note)

    def pre_run_cell(self, info: object = None) -> None:
        """IPython's ``pre_run_cell`` event: a cell starts, no note is waiting."""
        self.in_cell, self.pending = True, []

    def post_run_cell(self, result: object = None) -> None:
        """IPython's ``post_run_cell`` event: print the cell's notes under its output."""
        pending, self.in_cell, self.pending = self.pending, False, []
        for note in pending:
            print(note)

    # -- connect, disconnect, status, use ---------------------------------------------------
    def run_command(self, command: str, line: str) -> None:
        """``%pinq connect URL [--token-env NAME]``, ``%pinq disconnect``, ``%pinq status``,
        ``%pinq use NAME``."""
        if command == "connect":
            self.connect(parse_connect(line))
            return
        if command == "use":
            words = line.split()[1:]
            if len(words) != 1:
                raise MagicUsageError(
                    "%pinq use takes the name of the variable that holds a Session: %pinq use NAME"
                )
            self.use(words[0])
            return
        if len(line.split()) > 1:
            raise MagicUsageError(f"%pinq {command} takes no arguments")
        if command == "disconnect":
            self.disconnect()
        else:
            print(self.status())

    def use(self, name: str) -> None:
        """Make the session in variable ``name`` the one later calls run on."""
        if not name.isidentifier() or keyword.iskeyword(name):
            raise MagicUsageError(f"%pinq use needs a Python variable name, not {name!r}")
        found = self.variable(name, "%pinq use")
        self.chosen = name
        also = (
            f" (not the server {self.remote_url}, still connected)"
            if self.remote is not None
            else ""
        )
        print(f"pinqpy: cells run on {name} ({found!r}){also}")

    def connect(self, opts: ConnectOptions) -> None:
        """Open a session on the server; later cells without ``--session`` run there."""
        try:
            token = find_token(opts.url, opts.token_env, prompt=getpass.getpass)
            remote = open_remote(opts.url, token)
        except CliError as err:
            raise MagicUsageError(str(err)) from None
        except PinqError as err:  # the server refused (an unknown token, say) or is unreachable
            raise MagicUsageError(
                f"{type(err).__name__}: {for_interface(err, 'magic')}\n"
                f"(connecting to {opts.url}; cells still run where they did)"
            ) from None
        self.disconnect(quiet=True)
        self.remote, self.remote_url = remote, opts.url
        self.chosen = None  # the newest explicit choice wins
        print(f"pinqpy: {self.status().removeprefix('pinqpy: ')}; %pinq disconnect to leave")

    def disconnect(self, *, quiet: bool = False) -> None:
        """Close the server session, if any; cells run on local sessions again."""
        remote, url = self.remote, self.remote_url
        self.remote = self.remote_url = None
        if remote is not None:
            close = getattr(remote, "close", None)
            if callable(close):
                try:
                    close()
                except PinqError as err:
                    if not quiet:
                        print(f"{type(err).__name__}: {err}", file=sys.stderr)
        if not quiet:
            print(
                f"pinqpy: disconnected from {url}; cells run on local sessions"
                if remote is not None
                else "pinqpy: not connected; cells run on local sessions"
            )

    def status(self) -> str:
        """One line: where ``%%pinq`` cells without ``--session`` run now, and why."""
        if self.chosen is not None:
            found = self.shell.user_ns.get(self.chosen)
            if not isinstance(found, Session) and not _speaks_sql(found):
                return (
                    f"pinqpy: %pinq use chose {self.chosen}, which holds no Session now; "
                    "%pinq use NAME to choose again"
                )
            also = f"; connected to {self.remote_url} too" if self.remote is not None else ""
            return f"pinqpy: cells run on {self.chosen} ({found!r}), chosen by %pinq use{also}"
        if self.remote is not None:
            return f"pinqpy: cells run on the pinqpy server {self.remote_url} ({self.remote!r})"
        found_all = self.local_sessions()
        if self.sticky in found_all:
            return (
                f"pinqpy: cells run on local sessions: {self.sticky} "
                f"({found_all[self.sticky]!r}), where earlier cells ran; "
                "%pinq use NAME to choose another"
            )
        if self.sticky is not None:
            return (
                f"pinqpy: earlier cells ran on {self.sticky}, which holds no pinqpy Session now; "
                "choose one with %pinq use NAME"
            )
        if not found_all:
            return "pinqpy: cells run on local sessions: none yet (session = pq.Session())"
        if len({id(s) for s in found_all.values()}) > 1:
            return (
                f"pinqpy: cells run on local sessions: several ({', '.join(sorted(found_all))}); "
                "choose one with %pinq use NAME"
            )
        name = sorted(found_all)[0]
        return f"pinqpy: cells run on local sessions: {name} ({found_all[name]!r})"


# -- a refused cell ------------------------------------------------------------------------
@functools.cache
def _refused_class() -> type[Exception]:
    """A ``UsageError`` that IPython shows as its message alone.

    IPython prints a plain ``UsageError`` as ``UsageError: message``; a subclass goes
    through its ``_render_traceback_`` instead, which here is the message (the error's own
    name first, its caret lines kept). It is still a ``UsageError``: the cell fails, so "Run
    All" and ``nbconvert --execute`` stop there, with no traceback.
    """
    from IPython.core.error import UsageError

    class RefusedCell(UsageError):
        def _render_traceback_(self) -> list[str]:
            return str(self).splitlines()

    RefusedCell.__module__ = __name__
    return RefusedCell


def refused(message: str) -> Exception:
    """The error a refused ``%%pinq`` statement raises (see :func:`_refused_class`)."""
    return _refused_class()(message)


# -- display -------------------------------------------------------------------------------
def _text_printer(render: Any) -> Any:
    def printer(obj: Any, p: Any, cycle: bool) -> None:
        p.text(render(obj))

    return printer


def _display_types() -> tuple[dict[type, Any], dict[type, Any]]:
    """(text/plain printers, text/html printers) by type, installed by the extension."""
    from pinqpy.accounting.budget import Budget
    from pinqpy.api.frame import PrivateFrame
    from pinqpy.results.html import result_html
    from pinqpy.results.labels import NoisyLabel
    from pinqpy.results.tables import NoisyFrame, NoisySeries
    from pinqpy.results.text import noisy_frame_text, noisy_series_text
    from pinqpy.results.values import NoisyValue
    from pinqpy.sql.explain import Explanation

    text: dict[type, Any] = {
        NoisyFrame: _text_printer(noisy_frame_text),
        NoisySeries: _text_printer(noisy_series_text),
        Explanation: _text_printer(str),
    }
    html: dict[type, Any] = {
        NoisyFrame: result_html,
        NoisySeries: result_html,
        NoisyValue: result_html,
        NoisyLabel: result_html,
        Explanation: result_html,
        PrivateFrame: PrivateFrame._repr_html_,
        Budget: Budget._repr_html_,
        Session: Session._repr_html_,
    }
    return text, html


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext pinqpy``: register ``%pinq``/``%%pinq`` and pinqpy's display formatters."""
    magic = PinqMagic(ipython)
    ipython.register_magic_function(magic, magic_kind="line_cell", magic_name="pinq")
    ipython.events.register("pre_run_cell", magic.pre_run_cell)
    ipython.events.register("post_run_cell", magic.post_run_cell)
    text, html = _display_types()
    formatters = ipython.display_formatter.formatters
    for typ, printer in text.items():
        formatters["text/plain"].for_type(typ, printer)
    for typ, printer in html.items():
        formatters["text/html"].for_type(typ, printer)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext pinqpy``: remove the magic and the display formatters."""
    magics = ipython.magics_manager.magics
    registered = magics["line"].get("pinq")
    if isinstance(registered, PinqMagic):
        registered.disconnect(quiet=True)
        for event in ("pre_run_cell", "post_run_cell"):
            with contextlib.suppress(ValueError):  # not registered: nothing to remove
                ipython.events.unregister(event, getattr(registered, event))
    magics["line"].pop("pinq", None)
    magics["cell"].pop("pinq", None)
    text, html = _display_types()
    formatters = ipython.display_formatter.formatters
    for typ in text:
        formatters["text/plain"].pop(typ, None)
    for typ in html:
        formatters["text/html"].pop(typ, None)
