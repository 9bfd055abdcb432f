"""``pinqpy ledger [PATH]``: who spent what, read from a ledger file.

One row per budget (an analyst's or a group's on a server, a table's on the command line):
its total, what it spent and has left, how many queries it was charged for and when the last
one was. ``--charges`` lists every charge instead, oldest first, with its time and the
query's label (its SQL, or the method asked). ``--format csv|json`` prints the same rows for
programs. PATH defaults to the command line's own ledger (``ledger.db`` in the state
directory, :mod:`pinqpy.interfaces.state_dir`).

The file is opened read-only (:func:`pinqpy.accounting.ledger_summary.summarize_ledger`):
nothing is created, upgraded or charged, so a running server can be inspected. The labels
are what was asked, literals included: this command is the curator's, reading the curator's
own file (which analysts must not be able to read). A file that fails its integrity check is
still shown, with a warning naming the problems.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

import pandas as pd

from pinqpy.accounting.ledger_summary import LedgerSummary, summarize_ledger
from pinqpy.errors import PinqError
from pinqpy.interfaces.errors import CliError, one_line
from pinqpy.interfaces.output import render_table
from pinqpy.interfaces.state_dir import STATE_ENV, default_ledger_path

__all__ = ["ledger_command", "ledger_parser", "ledger_tables"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def ledger_parser() -> argparse.ArgumentParser:
    """The parser of ``pinqpy ledger``."""
    parser = _Parser(
        prog="pinqpy ledger",
        description=(
            "Show who spent what in a ledger file (read-only): one row per budget with its "
            "total, spent, remaining, number of queries and last query time; --charges lists "
            "every charge with its query's label (for the curator's eyes: the labels are the "
            "queries as asked)."
        ),
        epilog=f"PATH defaults to ledger.db in ${STATE_ENV}, else the user's state directory "
        "(the ledger pinqpy shell and pinqpy query keep).",
    )
    parser.add_argument("path", nargs="?", metavar="PATH", help="the ledger file")
    parser.add_argument(
        "--charges", action="store_true", help="list every charge, oldest first, with its label"
    )
    parser.add_argument(
        "--format", choices=("table", "csv", "json"), default="table", help="output format"
    )
    return parser


def _short_time(text: object) -> object:
    """``2026-05-01T12:03:04.123456+00:00`` as ``2026-05-01 12:03:04 UTC``."""
    if not isinstance(text, str) or "T" not in text:
        return text
    day, _, clock = text.partition("T")
    return f"{day} {clock[:8]} UTC"


def _source(name: str) -> str:
    """The file of a command-line budget (``people@/data/people.csv``), else ``""``."""
    return name.split("@", 1)[1] if "@" in name and ":" not in name.split("@", 1)[0] else ""


def ledger_tables(
    summary: LedgerSummary, charges: bool = False, *, short_times: bool = True
) -> pd.DataFrame:
    """The rows ``pinqpy ledger`` prints: the budgets, or with ``charges`` every charge.
    Columns nobody uses (no analyst, no delta, no rho) are left out; ``short_times`` prints
    times to the second (csv and json keep the file's ISO 8601 text)."""
    shorten = _short_time if short_times else (lambda t: t)
    if charges:
        frame = summary.charges_frame()
        frame["time"] = frame["time"].map(shorten)
        drop = [c for c in ("delta", "rho") if not frame[c].fillna(0).any()]
        if frame["rho"].notna().any():
            drop = [c for c in drop if c != "rho"]
    else:
        frame = summary.budgets_frame()
        frame["last_query"] = frame["last_query"].map(shorten)
        frame.insert(2, "file", frame["budget"].map(_source))
        drop = ["budget", "accounting"] if (frame["accounting"] == "approx").all() else ["budget"]
        if not frame["file"].any():
            drop.append("file")
    if not frame["analyst"].astype(bool).any():
        drop.append("analyst")
    return frame.drop(columns=drop)


def _records(frame: pd.DataFrame) -> list[dict[str, object]]:
    out = []
    for row in frame.to_dict("records"):
        out.append({k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()})
    return out


def ledger_command(argv: Sequence[str]) -> int:
    """Run ``pinqpy ledger`` with ``argv`` (the arguments after ``ledger``)."""
    args = ledger_parser().parse_args(list(argv))
    path = Path(args.path).expanduser() if args.path else default_ledger_path()
    try:
        summary = summarize_ledger(path, with_labels=args.charges)
    except PinqError as err:
        raise CliError(f"ledger {str(path)!r}: {one_line(err, 'cli')}") from None
    if summary.problems:
        print(
            f"pinqpy: warning: the ledger {str(path)!r} failed its integrity check (it was "
            f"edited outside pinqpy): {'; '.join(summary.problems[:3])}",
            file=sys.stderr,
        )
    frame = ledger_tables(summary, args.charges, short_times=args.format == "table")
    if args.format == "json":
        print(json.dumps(_records(frame)))
    elif args.format == "csv":
        print(frame.to_csv(index=False).rstrip("\n"))
    elif frame.empty:
        print("(no charges)" if args.charges else "(no budgets)")
    else:
        print(render_table(frame))
    return 0
