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
``-s/--session S``  the name of a :class:`~pinqpy.Session` in the notebook's namespace
                    (default: the most recently created Session still alive, or else the only
                    Session in the namespace)
``-o/--out NAME``   also store the result in the variable ``NAME``
``-q/--quiet``      do not display the result (useful with ``-o``)
``--``              ends the options (the rest of the line is the query)

A pinqpy server's tables are queried the same way after connecting::

    %pinq connect http://127.0.0.1:8765            # the token from $PINQPY_TOKEN, or asked for
    %pinq connect https://dp.example.org --token-env LAB_TOKEN
    %%pinq -e 0.5
    SELECT COUNT(*) FROM pums
    %pinq status                                     # where cells run now
    %pinq disconnect                                 # back to local sessions

While connected, ``%pinq``/``%%pinq`` without ``--session`` run on the server (``--session
NAME`` still picks a variable: a local Session or a session from ``pq.connect``). The token
is read from the environment variable ``PINQPY_TOKEN`` (or the one ``--token-env`` names) or
typed at a hidden prompt, never from the magic's line: a line is saved in the notebook and in
IPython's history, so ``%pinq connect`` refuses any other argument. Results are the same
objects as locally; only a ``%pinq`` status line and an error say which server answered.

The magic returns what :meth:`Session.sql` returns, so IPython displays it: a released
:class:`~pinqpy.NoisyFrame` is shown with a small table of 95% intervals for its noisy
columns, EXPLAIN as plain text, SHOW/DESCRIBE as DataFrames. A pinqpy error (a syntax error,
an unknown column, a query that cannot be answered privately, an exceeded budget) is printed
to stderr as its message -- with the caret under the fault -- and not as a traceback; it
charges nothing and the magic returns None.

This module imports IPython only when the extension is loaded, so pinqpy does not depend on
it. The newest session is the one :func:`pinqpy.api.session.newest_session` reports.
"""

from __future__ import annotations

import getpass
import keyword
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pinqpy.api.session import Session, newest_session
from pinqpy.errors import PinqError
from pinqpy.interfaces.connect import TOKEN_ENV, check_env_name, check_url, find_token, open_remote
from pinqpy.interfaces.errors import CliError

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
_COMMANDS = ("connect", "disconnect", "status")
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
class PinqMagic:
    """Run one SQL statement against a pinqpy Session.

    ``%pinq [options] QUERY`` or, as a cell magic, ``%%pinq [options]`` with the query in the
    cell. Options: ``-e/--epsilon E`` (the total the query charges), ``-d/--delta D``,
    ``-s/--session NAME`` (a Session in the namespace; default: the last one created),
    ``-o/--out NAME`` (also store the result there), ``-q/--quiet`` (do not display it),
    ``--`` (end of options). Returns the result -- a NoisyFrame shown with its 95% intervals,
    EXPLAIN text, or a DataFrame -- so ``x = %pinq ...`` works. A pinqpy error is printed to
    stderr with its caret, charges nothing, and gives None.

    ``%pinq connect URL [--token-env NAME]`` makes later calls without ``--session`` run on a
    pinqpy server, ``%pinq disconnect`` returns to local sessions and ``%pinq status`` says
    where calls run. A session needs only the session protocol of
    :mod:`pinqpy.interfaces.shell` (``sql``; ``tables`` and ``describe`` complete it).
    """

    def __init__(self, shell: Any):
        self.shell = shell
        #: The server session ``%pinq connect`` opened, and its address; None when local.
        self.remote: SqlSession | None = None
        self.remote_url: str | None = None

    def find_session(self, name: str | None) -> SqlSession:
        """The session named ``name`` in the user namespace, else the server session
        ``%pinq connect`` opened, else the default local one."""
        ns = self.shell.user_ns
        if name is not None:
            if name not in ns:
                raise MagicUsageError(f"--session: no variable named {name!r}")
            found = ns[name]
            if not isinstance(found, Session) and not _speaks_sql(found):
                raise MagicUsageError(
                    f"--session: {name!r} is a {type(found).__name__}, not a pinqpy Session"
                )
            return found  # type: ignore[no-any-return]
        if self.remote is not None:
            return self.remote
        noted = newest_session()
        if noted is not None:
            return noted
        in_ns = {
            id(v): v for k, v in ns.items() if not k.startswith("_") and isinstance(v, Session)
        }
        if len(in_ns) == 1:
            return next(iter(in_ns.values()))
        if not in_ns:
            raise MagicUsageError(
                "no pinqpy Session to query: create one (session = pq.Session()) and register "
                "tables, or pass --session NAME"
            )
        raise MagicUsageError("several pinqpy Sessions are defined: choose one with --session NAME")

    def __call__(self, line: str, cell: str | None = None) -> Any:
        """Run the magic: ``line`` holds the options (and, as a line magic, the query)."""
        from IPython.core.error import UsageError

        words = line.split()
        command = words[0].lower() if words else ""
        if command in _COMMANDS:
            if cell is not None:
                raise UsageError(f"%pinq {command} is a line magic: write it without %%")
            try:
                self.run_command(command, line)
            except MagicUsageError as err:
                raise UsageError(str(err)) from None
            return None

        try:
            opts = parse_options(line)
            if cell is not None:
                if opts.query:
                    raise MagicUsageError(
                        "%%pinq takes options on its first line and the query in the cell "
                        f"(unexpected {opts.query!r})"
                    )
                opts.query = cell.strip()
            if not opts.query:
                raise MagicUsageError(
                    "no query: write %pinq [options] SELECT ... or put the query in a %%pinq cell"
                )
            session = self.find_session(opts.session)
        except MagicUsageError as err:
            raise UsageError(str(err)) from None

        try:
            result = session.sql(opts.query, epsilon=opts.epsilon, delta=opts.delta)
        except PinqError as err:
            print(f"{type(err).__name__}: {err}", file=sys.stderr)
            where = self._where(session)
            if where:
                print(where, file=sys.stderr)
            return None
        if opts.out is not None:
            self.shell.user_ns[opts.out] = result
        return None if opts.quiet else result

    def _where(self, session: object) -> str | None:
        """Which server answered, for an error's last line (None for a local session)."""
        if session is self.remote:
            return f"(on the pinqpy server {self.remote_url})"
        if not isinstance(session, Session):
            return f"(on {session!r})"
        return None

    # -- connect, disconnect, status --------------------------------------------------------
    def run_command(self, command: str, line: str) -> None:
        """``%pinq connect URL [--token-env NAME]``, ``%pinq disconnect``, ``%pinq status``."""
        if command == "connect":
            self.connect(parse_connect(line))
            return
        if len(line.split()) > 1:
            raise MagicUsageError(f"%pinq {command} takes no arguments")
        if command == "disconnect":
            self.disconnect()
        else:
            print(self.status())

    def connect(self, opts: ConnectOptions) -> None:
        """Open a session on the server; later cells without ``--session`` run there."""
        try:
            token = find_token(opts.url, opts.token_env, prompt=getpass.getpass)
            remote = open_remote(opts.url, token)
        except CliError as err:
            raise MagicUsageError(str(err)) from None
        except PinqError as err:  # the server refused (an unknown token, say) or is unreachable
            print(f"{type(err).__name__}: {err}", file=sys.stderr)
            print(f"(connecting to {opts.url}; cells still run where they did)", file=sys.stderr)
            return
        self.disconnect(quiet=True)
        self.remote, self.remote_url = remote, opts.url
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
        """One line: where ``%%pinq`` cells without ``--session`` run now."""
        if self.remote is not None:
            return f"pinqpy: cells run on the pinqpy server {self.remote_url} ({self.remote!r})"
        noted = newest_session()
        return "pinqpy: cells run on local sessions" + (
            f" (now {noted!r})" if noted is not None else ""
        )


# -- display -------------------------------------------------------------------------------
def noisy_frame_text(frame: Any, level: float = 0.95) -> str:
    """A NoisyFrame as text: the DataFrame, then its noisy columns' ``level`` intervals."""
    import pandas as pd

    from pinqpy.results.html import interval_table

    text = pd.DataFrame.__repr__(frame)
    table = interval_table(frame, level)
    if table is None:
        return text
    return f"{text}\n\n{level * 100:g}% intervals:\n{table.to_string()}"


def noisy_series_text(series: Any, level: float = 0.95) -> str:
    """A NoisySeries as text: the Series, then its ``level`` intervals when it has them."""
    import pandas as pd

    text = pd.Series.__repr__(series)
    try:
        ci = series.ci(level)
    except PinqError:
        return text
    return f"{text}\n\n{level * 100:g}% intervals:\n{ci.to_string()}"


def _text_printer(render: Any) -> Any:
    def printer(obj: Any, p: Any, cycle: bool) -> None:
        p.text(render(obj))

    return printer


def _display_types() -> tuple[dict[type, Any], dict[type, Any]]:
    """(text/plain printers, text/html printers) by type, installed by the extension."""
    from pinqpy.accounting.budget import Budget
    from pinqpy.api.frame import PrivateFrame
    from pinqpy.results.html import budget_html, frame_html, result_html, session_html
    from pinqpy.results.labels import NoisyLabel
    from pinqpy.results.tables import NoisyFrame, NoisySeries
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
        PrivateFrame: frame_html,
        Budget: budget_html,
        Session: session_html,
    }
    return text, html


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext pinqpy``: register ``%pinq``/``%%pinq`` and pinqpy's display formatters."""
    ipython.register_magic_function(PinqMagic(ipython), magic_kind="line_cell", magic_name="pinq")
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
    magics["line"].pop("pinq", None)
    magics["cell"].pop("pinq", None)
    text, html = _display_types()
    formatters = ipython.display_formatter.formatters
    for typ in text:
        formatters["text/plain"].pop(typ, None)
    for typ in html:
        formatters["text/html"].pop(typ, None)
