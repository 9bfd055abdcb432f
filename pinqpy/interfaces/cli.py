"""The ``pinqpy`` command line: ``pinqpy demo``, and ``pinqpy shell`` and ``pinqpy query`` over
CSV/parquet files (see :mod:`pinqpy.interfaces.tables` for how the files become tables).

A user error (a bad file, flag, column or query) is one line on standard error and a
non-zero exit status (2 for a bad command line, 1 otherwise), never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import NoReturn

from pinqpy.core.version import __version__
from pinqpy.demo import main as demo
from pinqpy.errors import PinqError
from pinqpy.interfaces.errors import CliError, one_line
from pinqpy.interfaces.output import format_result
from pinqpy.interfaces.shell import Shell
from pinqpy.interfaces.statements import run_statement
from pinqpy.interfaces.tables import load_session

__all__ = ["COMMANDS", "USAGE", "build_parser", "main"]

COMMANDS = {
    "demo": "a short private query session over the bundled PUMS sample",
    "shell": "an interactive SQL shell over private CSV/parquet files",
    "query": "answer one SQL query over private CSV/parquet files",
}

USAGE = (
    "usage: pinqpy {demo,shell,query} ...\n\n"
    + "\n".join(f"  {name:<7} {text}" for name, text in COMMANDS.items())
    + "\n\nexamples:\n"
    "  pinqpy demo\n"
    "  pinqpy shell people=people.csv --epsilon 1 --bounds age=0:100 --keys sex=0,1\n"
    '  pinqpy query people=people.csv --epsilon 1 "SELECT COUNT(*) FROM people"\n\n'
    "Run pinqpy shell --help or pinqpy query --help for every option."
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


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--epsilon",
        type=_positive("--epsilon"),
        required=True,
        metavar="EPS",
        help="each private table's privacy budget (its own, not shared)",
    )
    parser.add_argument(
        "--delta",
        type=_probability,
        default=0.0,
        metavar="DELTA",
        help="each private table's delta budget (default 0)",
    )
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
    parser.add_argument(
        "--engine",
        choices=("pandas", "duckdb", "spark"),
        default="pandas",
        help="where private tables are read and aggregated (default: pandas, in memory; "
        "duckdb and spark read the files where they lie)",
    )
    parser.add_argument(
        "--ledger",
        metavar="PATH",
        help="keep the budgets in this SQLite ledger, so spending carries over between runs",
    )
    parser.add_argument(
        "--delta-per-query",
        type=_probability,
        default=None,
        metavar="DELTA",
        help="the delta each query may spend (see --epsilon-per-query for the default)",
    )


_EPILOG = (
    "Files: .csv, .tsv (optionally compressed) and .parquet (with pyarrow). A file larger than "
    "16 MB shows a progress line on standard error (PINQPY_PROGRESS_BYTES sets the size)."
)


def build_parser(command: str) -> argparse.ArgumentParser:
    """The argument parser of one command (``shell`` or ``query``)."""
    if command == "shell":
        parser = _Parser(
            prog="pinqpy shell",
            description=(
                "An interactive SQL shell over private files. With standard input not a "
                "terminal, it reads statements separated by ';' and exits non-zero if any "
                "failed."
            ),
            epilog=_EPILOG + " History is kept in $PINQPY_HISTORY (default ~/.pinqpy_history).",
        )
        per_query = (
            "the epsilon each query spends unless it says otherwise (default: a tenth "
            "of --epsilon; .epsilon changes it)"
        )
    elif command == "query":
        parser = _Parser(
            prog="pinqpy query",
            description="Answer one SQL statement over private files.",
            epilog=_EPILOG,
        )
        per_query = "the epsilon the query spends unless it says otherwise (default: --epsilon)"
    else:
        raise CliError(f"unknown command {command!r}", 2)
    parser.add_argument("tables", nargs="+", metavar="NAME=PATH", help="a private table to load")
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
    if command == "query":
        parser.add_argument(
            "--format",
            choices=("table", "csv", "json"),
            default="table",
            help="output format (default: table); csv and json add <col>_ci_low/_ci_high",
        )
    return parser


def _query(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.sql == "-" else args.sql
    if not text.strip():
        raise CliError("the query is empty", 2)
    loaded = load_session(args)
    epsilon = args.epsilon_per_query if args.epsilon_per_query is not None else args.epsilon
    delta = args.delta_per_query if args.delta_per_query is not None else args.delta
    try:
        result = run_statement(loaded.session, text, epsilon, delta)
    except PinqError as err:
        raise CliError(one_line(err)) from None
    print(format_result(result, args.format))
    return 0


def _shell(args: argparse.Namespace) -> int:
    loaded = load_session(args)
    epsilon = args.epsilon_per_query
    if epsilon is None:
        epsilon = _tenth(args.epsilon)
    delta = args.delta_per_query if args.delta_per_query is not None else _tenth(args.delta)
    shell = Shell(loaded, epsilon=epsilon, delta=delta)
    if sys.stdin.isatty():
        return shell.interact()
    return shell.run_script(sys.stdin.read())


def _tenth(value: float) -> float:
    """A tenth of ``value``, spelled as a short decimal (0.7 -> 0.07, not 0.06999...).

    >>> _tenth(0.7)
    0.07
    """
    return float(Decimal(repr(value)) / 10)


def _dispatch(argv: Sequence[str]) -> int:
    if not argv:
        raise CliError("choose a command: demo, shell or query (see pinqpy --help)", 2)
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
    if command not in COMMANDS:
        raise CliError(f"unknown command {command!r}; choose demo, shell or query", 2)
    args = build_parser(command).parse_intermixed_args(rest)
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
        print(f"pinqpy: error: {one_line(err)}", file=sys.stderr)
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
