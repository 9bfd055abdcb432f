"""The ``pinqpy`` command line: ``pinqpy demo``; ``pinqpy shell`` and ``pinqpy query`` over
CSV/parquet files (see :mod:`pinqpy.interfaces.tables` for how the files become tables) or,
with ``--connect URL``, over a pinqpy server's tables; and ``pinqpy serve``, the curator's
server (:mod:`pinqpy.remote.server`).

Over local files the budgets are kept in a ledger by default (``ledger.db`` in the user's
state directory, see :mod:`pinqpy.interfaces.state_dir`), so running a command again goes on
spending the same budget and a repeated query is answered from the ledger at no charge;
``--ledger PATH`` chooses another file and ``--no-ledger`` forgets them (with a warning).

``--demo-data`` registers the bundled PUMS sample as the private table ``pums`` (with its
public bounds and keys and, unless ``--epsilon`` says otherwise, a budget of epsilon 1), so
``pinqpy shell --demo-data`` and ``pinqpy query --demo-data "SELECT COUNT(*) FROM pums"`` run
from a fresh install (see :func:`pinqpy.interfaces.tables.load_session`).

``pinqpy shell`` speaks the conventions of the sqlite3 and duckdb shells: ``-c SQL`` runs
the statements given and exits, ``-f FILE`` runs a file and exits, and ``-bail`` stops at the
first error; ``--format`` (or ``.mode``) chooses table, csv, json or markdown output.

A user error (a bad file, flag, column or query) is one line on standard error and a
non-zero exit status (2 for a bad command line, 1 otherwise), never a traceback. A run of
statements (piped, ``-c`` or ``-f``) goes on after a failed statement and exits with status 1
at the end if any failed, or at the first failure with ``-bail``.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import importlib.util
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from pinqpy.core.version import __version__
from pinqpy.demo import main as demo
from pinqpy.errors import PinqError
from pinqpy.interfaces.charges import charge_footer, read_budgets
from pinqpy.interfaces.connect import TOKEN_ENV, check_url, find_token, open_remote
from pinqpy.interfaces.errors import CliError, one_line
from pinqpy.interfaces.ledger_cmd import ledger_command
from pinqpy.interfaces.output import FORMATS, format_result
from pinqpy.interfaces.progress import terminal_progress
from pinqpy.interfaces.shell import Shell, SqlSession, tenth
from pinqpy.interfaces.statements import run_statement
from pinqpy.interfaces.tables import DEMO_EPSILON, DEMO_TABLE, LoadedSession, load_session

__all__ = ["COMMANDS", "USAGE", "build_parser", "main"]

COMMANDS = {
    "demo": "a short private query session over the bundled PUMS sample",
    "shell": "an interactive SQL shell over private CSV/parquet files or a pinqpy server",
    "query": "answer one SQL query over private CSV/parquet files or a pinqpy server",
    "serve": "serve private tables to analysts over HTTP (needs pinqpy[server])",
    "ledger": "show who spent what in a ledger file (read-only)",
}

USAGE = (
    "usage: pinqpy {demo,shell,query,serve,ledger} ...\n\n"
    + "\n".join(f"  {name:<7} {text}" for name, text in COMMANDS.items())
    + "\n\nexamples:\n"
    "  pinqpy demo\n"
    "  pinqpy shell --demo-data\n"
    '  pinqpy shell --demo-data -c "SELECT sex, COUNT(*) FROM pums GROUP BY sex"\n'
    "  pinqpy shell people=people.csv --epsilon 1 --bounds age=0:100 --keys sex=0,1\n"
    '  pinqpy query people=people.csv --epsilon 1 "SELECT COUNT(*) FROM people"\n'
    "  pinqpy serve server.toml\n"
    "  PINQPY_TOKEN=... pinqpy shell --connect http://127.0.0.1:8765\n"
    "  pinqpy ledger --charges\n\n"
    "Budgets of local files are kept in a ledger between runs (--ledger PATH chooses it).\n"
    "Run pinqpy shell --help, pinqpy query --help, pinqpy serve --help or pinqpy ledger "
    "--help for every option."
)


# -- the command line -------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive(kind: str) -> Callable[[str], float]:
    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{kind} must be a number, not {text!r}") from None
        if not value > 0 or math.isinf(value):
            raise argparse.ArgumentTypeError(f"{kind} must be a positive number, not {text!r}")
        return value

    return convert


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"delta must be a number, not {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"delta must be at least 0 and below 1, not {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port must be a whole number, not {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"--port must be from 0 to 65535, not {text!r}")
    return value


def _add_common(parser: argparse.ArgumentParser) -> None:
    """The flags that the shell and query share, in the order --help lists them."""
    _add_budgets(parser)
    _add_table_facts(parser)
    _add_engine_and_ledger(parser)
    parser.add_argument(
        "--delta-per-query",
        type=_probability,
        default=None,
        metavar="DELTA",
        help="the delta each query may spend (see --epsilon-per-query for the default)",
    )
    _add_table_sources(parser)


def _add_budgets(parser: argparse.ArgumentParser) -> None:
    """--epsilon and --delta: each private table's budget (with --connect, each query's)."""
    parser.add_argument(
        "--epsilon",
        type=_positive("--epsilon"),
        default=None,
        metavar="EPS",
        help="each private table's privacy budget (its own, not shared); required with "
        "local files. With --connect the server keeps the budgets, and this is what each "
        "query spends",
    )
    parser.add_argument(
        "--delta",
        type=_probability,
        default=None,
        metavar="DELTA",
        help="each private table's delta budget (default 0); with --connect, the delta each "
        "query may spend",
    )


def _add_table_facts(parser: argparse.ArgumentParser) -> None:
    """The public facts of local tables: bounds, keys, types, privacy units, public tables."""
    parser.add_argument(
        "--bounds",
        action="append",
        metavar="COL=LO:HI",
        help="public bounds of a column, for every private table that has it (repeatable)",
    )
    parser.add_argument(
        "--keys",
        action="append",
        metavar="COL=K1,K2,...",
        help="public GROUP BY keys of a column (numbers for a numeric column; repeatable)",
    )
    parser.add_argument(
        "--schema",
        action="append",
        metavar="COL=TYPE",
        help="declare a column's type (int, float, str, bool, datetime, any) instead of "
        "inferring it from the file, for every private table that has it (repeatable)",
    )
    parser.add_argument(
        "--privacy-unit",
        action="append",
        metavar="[TABLE=]COL",
        help="all rows with the same COL are one person (repeatable)",
    )
    parser.add_argument(
        "--max-rows",
        action="append",
        metavar="[TABLE=]K",
        help="keep at most K rows per person of a table with a privacy unit (repeatable)",
    )
    parser.add_argument(
        "--public",
        action="append",
        metavar="NAME=PATH",
        help="a public table (joins, GROUP BY keys); charges nothing (repeatable)",
    )


def _add_engine_and_ledger(parser: argparse.ArgumentParser) -> None:
    """Where local tables are read and aggregated, and where their budgets are kept."""
    parser.add_argument(
        "--engine",
        choices=("pandas", "duckdb", "spark", "polars"),
        default=None,
        help="where private tables are read and aggregated (default: pandas, in memory; "
        "duckdb, spark and polars read the files where they lie)",
    )
    parser.add_argument(
        "--ledger",
        metavar="PATH",
        help="keep the budgets and answers in this SQLite ledger (default: ledger.db in "
        "$PINQPY_STATE_DIR, else the user's state directory, e.g. ~/.local/state/pinqpy)",
    )
    parser.add_argument(
        "--no-ledger",
        action="store_true",
        help="keep no ledger: budgets start afresh on every run, so repeating a query "
        "averages its noise away (a warning says so)",
    )


def _add_table_sources(parser: argparse.ArgumentParser) -> None:
    """Where the tables come from besides files: the bundled demo data or a pinqpy server."""
    parser.add_argument(
        "--demo-data",
        action="store_true",
        help=f"register the bundled PUMS sample (1,000 people) as the private table "
        f"{DEMO_TABLE}, with public bounds and keys; its budget is epsilon {DEMO_EPSILON:g} "
        "unless --epsilon says otherwise, and starts afresh on every run unless --ledger PATH "
        "is given (or other files are)",
    )
    parser.add_argument(
        "--connect",
        metavar="URL",
        help="ask a pinqpy server (http://HOST:PORT) instead of reading local files; the "
        f"token is read from ${TOKEN_ENV} (or the --token-env variable), else prompted for",
    )
    parser.add_argument(
        "--token-env",
        metavar="NAME",
        help=f"with --connect: the environment variable holding the token (default {TOKEN_ENV})",
    )

_EPILOG = (
    "Files: .csv, .tsv (optionally compressed) and .parquet (with pyarrow). A file larger than "
    "16 MB shows a progress line on standard error (PINQPY_PROGRESS_BYTES sets the size). "
    "Budgets are kept in a ledger between runs: a second run goes on spending them, and a "
    "repeated query is answered again from the ledger at no charge."
)

# Flags that describe local files; with --connect the server declares its own tables.
_LOCAL_FLAGS = (
    ("bounds", "--bounds"),
    ("keys", "--keys"),
    ("schema", "--schema"),
    ("privacy_unit", "--privacy-unit"),
    ("max_rows", "--max-rows"),
    ("public", "--public"),
    ("engine", "--engine"),
    ("ledger", "--ledger"),
    ("no_ledger", "--no-ledger"),
    ("demo_data", "--demo-data"),
)


def build_parser(command: str) -> argparse.ArgumentParser:
    """The argument parser of one command (``shell``, ``query`` or ``serve``)."""
    if command == "serve":
        return _serve_parser()
    if command == "shell":
        parser = _Parser(
            prog="pinqpy shell",
            description=(
                "An interactive SQL shell over private files, or over a pinqpy server's "
                "tables with --connect URL. With -c SQL, -f FILE or standard input not a "
                "terminal, it runs the statements (separated by ';') and exits: with status 1 "
                "if any failed (with -bail, at the first that fails), else 0."
            ),
            epilog=_EPILOG + " History is kept in $PINQPY_HISTORY (default ~/.pinqpy_history).",
        )
        per_query = (
            "the epsilon each query spends unless it says otherwise (default: a tenth "
            "of --epsilon, or of the smallest budget with --connect; .epsilon changes it)"
        )
    elif command == "query":
        parser = _Parser(
            prog="pinqpy query",
            description=(
                "Answer one SQL statement over private files, or over a pinqpy server's "
                "tables with --connect URL."
            ),
            epilog=_EPILOG,
        )
        per_query = (
            "the epsilon the query spends unless it says otherwise (default: a tenth of "
            "--epsilon, as in the shell; with --connect, the server's default)"
        )
    else:
        raise CliError(f"unknown command {command!r}", 2)
    parser.add_argument(
        "tables",
        nargs="*",
        metavar="NAME=PATH",
        help="a private table to load (required unless --connect)",
    )
    if command == "query":
        parser.add_argument("sql", metavar="QUERY", help="the SQL statement ('-': read stdin)")
    _add_common(parser)
    parser.add_argument(
        "--epsilon-per-query",
        type=_positive("--epsilon-per-query"),
        default=None,
        metavar="EPS",
        help=per_query,
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="output format (default: table, where a noisy cell reads 'value ± e' or "
        "'value [lo, hi]'); markdown prints the same cells as a pipe table; csv and json "
        "add <col>_ci_low/_ci_high" + ("; .mode changes it" if command == "shell" else ""),
    )
    if command == "shell":
        _add_script_flags(parser)
    return parser


def _add_script_flags(parser: argparse.ArgumentParser) -> None:
    """The shell's -c, -f and -bail: run statements without a terminal and exit."""
    parser.add_argument(
        "-c",
        dest="command",
        metavar="SQL",
        help="run these statements (and dot-commands) and exit, as with piped input",
    )
    parser.add_argument(
        "-f",
        dest="file",
        metavar="FILE",
        help="run the statements and dot-commands in FILE and exit ('-': standard input)",
    )
    parser.add_argument(
        "-bail",
        "--bail",
        action="store_true",
        help="stop at the first statement that fails, with exit status 1 (default: go on "
        "and exit with status 1 at the end)",
    )


def _serve_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pinqpy serve",
        description=(
            "Serve private tables to analysts over HTTP: each analyst asks with a token and "
            "draws on the budgets CONFIG grants; the budgets and answers are kept in the "
            "ledger CONFIG names. Needs the server extra: pip install 'pinqpy[server]'."
        ),
        epilog="CONFIG is a TOML file: [server], [tables.NAME], [groups.NAME] and "
        "[analysts.NAME] sections (see the pinqpy.remote.server.config documentation).",
    )
    parser.add_argument("config", nargs="?", metavar="CONFIG", help="the server's TOML file")
    parser.add_argument(
        "--add-analyst",
        metavar="NAME",
        help="make a new token for analyst NAME (one of CONFIG's [analysts]) and print it once; "
        "only its hash is stored",
    )
    parser.add_argument(
        "--curator-token",
        action="store_true",
        help="make a new token for the curator's dashboard (/curator) and print it once, with "
        "the curator_token_sha256 line to put in CONFIG's [server] section",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="serve the bundled PUMS sample as table pums to one analyst with a fresh token "
        "(no CONFIG; the budgets last as long as the server)",
    )
    parser.add_argument(
        "--host", metavar="HOST", help="the address to listen on (default: CONFIG's)"
    )
    parser.add_argument(
        "--port", type=_port, metavar="N", help="the port to listen on (0: any free port)"
    )
    parser.add_argument("--testing", metavar="MODE", help=argparse.SUPPRESS)
    return parser


def _parse(command: str, rest: Sequence[str]) -> argparse.Namespace:
    """Parse one command's arguments and check the combinations argparse cannot."""
    parser = build_parser(command)
    args = parser.parse_intermixed_args(rest)
    if command == "serve":
        if args.demo and args.config:
            parser.error("--demo serves the bundled sample: give no CONFIG with it")
        if args.demo and args.add_analyst:
            parser.error("--demo makes its own analyst and token: give no --add-analyst")
        if not args.demo and not args.config:
            parser.error("the following arguments are required: CONFIG (or --demo)")
        return args
    if command == "shell" and args.command is not None and args.file is not None:
        parser.error("-c SQL and -f FILE each give the statements to run: choose one")
    if args.connect is not None:
        check_url(args.connect)
        if args.tables:
            parser.error(
                "--connect asks the server's tables: give no NAME=PATH files "
                f"(got {' '.join(args.tables)})"
            )
        for attr, flag in _LOCAL_FLAGS:
            if getattr(args, attr):
                parser.error(f"{flag} describes local files; with --connect the server does")
        for which in ("epsilon", "delta"):
            if getattr(args, which) is not None and getattr(args, f"{which}_per_query") is not None:
                parser.error(
                    f"with --connect, --{which} is what each query spends: give it or "
                    f"--{which}-per-query, not both"
                )
        return args
    if args.token_env is not None:
        parser.error("--token-env goes with --connect URL")
    if args.ledger is not None and args.no_ledger:
        parser.error("--ledger PATH and --no-ledger contradict each other: choose one")
    if args.demo_data and args.epsilon is None:
        args.epsilon = DEMO_EPSILON
    missing = [
        name
        for name, absent in (
            ("NAME=PATH", not args.tables and not args.demo_data),
            ("--epsilon", args.epsilon is None),
        )
        if absent
    ]
    if missing:
        demo = " (or --demo-data for the bundled sample)" if "NAME=PATH" in missing else ""
        parser.error(f"the following arguments are required: {', '.join(missing)}{demo}")
    if args.delta is None:
        args.delta = 0.0
    if args.engine is None:
        args.engine = "pandas"
    return args


def _query_text(args: argparse.Namespace) -> str:
    text = sys.stdin.read() if args.sql == "-" else args.sql
    if not text.strip():
        raise CliError("the query is empty", 2)
    return text


def _warn_no_ledger(args: argparse.Namespace) -> None:
    if args.no_ledger:
        print(
            "pinqpy: warning: --no-ledger: budgets will not carry over between runs, so "
            "repeating a query averages its noise away",
            file=sys.stderr,
        )


def _warn_loaded(loaded: LoadedSession) -> None:
    for line in loaded.warnings:
        print(f"pinqpy: warning: {line}", file=sys.stderr)


def _query(args: argparse.Namespace) -> int:
    text = _query_text(args)
    if args.connect is not None:
        with _remote(args) as session:
            epsilon, delta = _remote_defaults(args)
            return _answer(session, text, epsilon, delta, args.format)
    _warn_no_ledger(args)
    loaded = load_session(args)
    _warn_loaded(loaded)
    # A tenth of each budget per query, as the shell spends: one run never empties a budget
    # by default (the ledger keeps what it spent for the next run).
    epsilon = args.epsilon_per_query
    if epsilon is None:
        epsilon = tenth(args.epsilon)
    delta = args.delta_per_query if args.delta_per_query is not None else tenth(args.delta)
    return _answer(loaded.session, text, epsilon, delta, args.format)


def _answer(session: SqlSession, text: str, epsilon: Any, delta: Any, fmt: str) -> int:
    """Print the answer on standard output and, for a noisy answer, what it charged on
    standard error (in every format, so csv and json stay clean)."""
    before = read_budgets(session)
    try:
        with terminal_progress(sys.stderr):  # "running query…" if it takes a while
            result = run_statement(session, text, epsilon, delta)
    except PinqError as err:
        raise CliError(one_line(err, "cli")) from None
    print(format_result(result, fmt), flush=True)
    if getattr(result, "accuracy", None):
        print(charge_footer(before, read_budgets(session)), file=sys.stderr, flush=True)
    return 0


def _shell(args: argparse.Namespace) -> int:
    if args.connect is not None:
        with _remote(args) as session:
            epsilon, delta = _remote_defaults(args)
            notes = [f"Connected to {args.connect}: the server keeps the budgets."]
            shell = Shell(
                session,
                epsilon=epsilon,
                delta=delta or 0.0,
                notes=notes,
                mode=args.format,
                bail=args.bail,
            )
            return _run_shell(shell, args)
    _warn_no_ledger(args)
    loaded = load_session(args)
    _warn_loaded(loaded)
    epsilon = args.epsilon_per_query
    if epsilon is None:
        epsilon = tenth(args.epsilon)
    delta = args.delta_per_query if args.delta_per_query is not None else tenth(args.delta)
    notes = []
    if args.demo_data:
        notes.append(
            f"Demo data: {DEMO_TABLE} is the bundled PUMS sample (1,000 Californians; age, sex, "
            "educ, race, income, married)."
        )
    if loaded.ledger is not None:
        notes.append(
            f"Budgets are kept in the ledger {loaded.ledger} (--ledger PATH chooses another)."
        )
    elif args.no_ledger:
        notes.append("Budgets are not kept: they start afresh on every run (--no-ledger).")
    else:
        notes.append(
            "The demo data's budget is not kept: it starts afresh on every run "
            "(--ledger PATH keeps it)."
        )
    shell = Shell(
        loaded.session,
        epsilon=epsilon,
        delta=delta,
        notes=notes,
        mode=args.format,
        bail=args.bail,
    )
    return _run_shell(shell, args)


def _run_shell(shell: Shell, args: argparse.Namespace) -> int:
    """Run the shell: the statements of ``-c`` or ``-f``, else at a terminal interactively,
    else the statements piped to standard input."""
    try:
        if args.command is not None:
            return shell.run_script(args.command)
        if args.file is not None:
            if args.file == "-":
                return shell.run_script(sys.stdin.read())
            try:
                text = Path(args.file).expanduser().read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                reason = getattr(err, "strerror", None) or "not UTF-8 text"
                raise CliError(f"-f: cannot read {args.file!r} ({reason})") from None
            return shell.run_script(text, source=args.file)
        if sys.stdin.isatty():
            return shell.interact()
        return shell.run_script(sys.stdin.read())
    finally:
        shell.close()


def _remote_defaults(args: argparse.Namespace) -> tuple[float | None, float | None]:
    """With --connect: what each query spends (--epsilon or --epsilon-per-query; None lets
    the shell take a tenth of the smallest budget, and a query its OPTIONS)."""
    epsilon = args.epsilon_per_query if args.epsilon_per_query is not None else args.epsilon
    delta = args.delta_per_query if args.delta_per_query is not None else args.delta
    return epsilon, delta


@contextlib.contextmanager
def _remote(args: argparse.Namespace) -> Any:
    """The analyst's session on the server ``--connect`` names, closed afterwards.

    The token comes from the environment or a hidden prompt at a terminal, never from the
    command line (see :mod:`pinqpy.interfaces.connect`).
    """
    prompt = getpass.getpass if sys.stdin.isatty() else None
    token = find_token(args.connect, args.token_env, prompt=prompt)
    session = open_remote(args.connect, token)
    try:
        yield session
    finally:
        close = getattr(session, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):
                close()


def _serve(args: argparse.Namespace) -> int:
    """``pinqpy serve``: hand the parsed arguments to the server (imported only here, so the
    rest of the command line does not need starlette or uvicorn)."""
    missing = "pinqpy serve needs the server extra: pip install 'pinqpy[server]'"
    if any(importlib.util.find_spec(m) is None for m in ("starlette", "uvicorn")):
        raise CliError(missing)
    try:
        from pinqpy.remote.server.run import serve_command
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] in ("starlette", "uvicorn"):
            raise CliError(missing) from None
        raise
    status = serve_command(
        Path(args.config) if args.config else None,
        add_analyst=args.add_analyst,
        curator_token=args.curator_token,
        demo=args.demo,
        host=args.host,
        port=args.port,
        testing=args.testing,
    )
    return int(status or 0)


def _dispatch(argv: Sequence[str]) -> int:
    if not argv:
        raise CliError(
            "choose a command: demo, shell, query, serve or ledger (see pinqpy --help)", 2
        )
    command, rest = argv[0], list(argv[1:])
    if command in ("-h", "--help", "help"):
        print(USAGE)
        return 0
    if command in ("-V", "--version"):
        print(f"pinqpy {__version__}")
        return 0
    if command == "demo":
        if rest and rest[0] in ("-h", "--help"):
            print(f"usage: pinqpy demo\n\n{COMMANDS['demo']}")
            return 0
        if rest:
            raise CliError(f"demo takes no arguments, got {' '.join(rest)!r}", 2)
        return demo()
    if command == "ledger":
        return ledger_command(rest)
    if command not in COMMANDS:
        raise CliError(
            f"unknown command {command!r}; choose demo, shell, query, serve or ledger", 2
        )
    args = _parse(command, rest)
    if command == "serve":
        return _serve(args)
    return _shell(args) if command == "shell" else _query(args)


def _tolerate_narrow_encodings() -> None:
    """Let output that cannot encode ``±`` (an ASCII terminal) degrade instead of failing."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None) or "ascii"
        try:
            "±".encode(encoding)
        except (UnicodeEncodeError, LookupError):
            with contextlib.suppress(AttributeError, ValueError):
                stream.reconfigure(errors="replace")  # type: ignore[union-attr]


def main(argv: Iterable[str] | None = None) -> int:
    """Run the ``pinqpy`` command; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    _tolerate_narrow_encodings()
    try:
        return _dispatch(args)
    except CliError as err:
        print(f"pinqpy: error: {err}", file=sys.stderr)
        return err.status
    except PinqError as err:
        print(f"pinqpy: error: {one_line(err, 'cli')}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("pinqpy: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (``pinqpy query ... | head``): stop quietly.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 1
    except Exception as err:
        if os.environ.get("PINQPY_DEBUG"):
            raise
        # The message may quote private values, so only the error's type is shown.
        print(
            f"pinqpy: internal error ({type(err).__name__}); set PINQPY_DEBUG=1 for details",
            file=sys.stderr,
        )
        return 1
