"""The ledger's SQLite file: its tables, the settings every connection runs with, exact
rationals stored as text, and the checks made when a file is opened (see
:mod:`pinqpy.accounting.ledger` for the durability and concurrency these settings give)."""

from __future__ import annotations

import secrets
import sqlite3
import time
from datetime import UTC, datetime
from fractions import Fraction

from pinqpy.accounting.cost import Cost
from pinqpy.errors import PinqError

__all__ = [
    "BUSY_TIMEOUT",
    "FORMAT",
    "SCHEMA",
    "SCHEMA_VERSION",
    "decode",
    "encode",
    "group_connection",
    "init_schema",
    "locked_out",
    "open_file",
    "spent_problems",
    "stored_cost",
    "utc_now",
]

#: Version of the tables below; a file written by a newer schema is refused. Version 2 added
#: the file's secret and stores answers as JSON under keyed hashes; opening a version-1 file
#: drops its cached answers (pickled, under unkeyed hashes; never read) and keeps every charge.
SCHEMA_VERSION = 2
#: Seconds a connection waits for another process's write lock before giving up.
BUSY_TIMEOUT = 30.0
FORMAT = "pinqpy-ledger"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS budgets (
    name          TEXT PRIMARY KEY,
    total_epsilon TEXT NOT NULL,
    total_delta   TEXT NOT NULL,
    accounting    TEXT NOT NULL,
    spent_epsilon TEXT NOT NULL,
    spent_delta   TEXT NOT NULL,
    created       TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS queries (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    description TEXT NOT NULL,
    plan        TEXT NOT NULL,
    cache_key   TEXT,
    created     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS charges (
    query_id INTEGER NOT NULL REFERENCES queries(id),
    budget   TEXT NOT NULL REFERENCES budgets(name),
    epsilon  TEXT NOT NULL,
    delta    TEXT NOT NULL,
    PRIMARY KEY (query_id, budget)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS charges_by_budget ON charges(budget, query_id);
CREATE TABLE IF NOT EXISTS answers (
    query_id  INTEGER PRIMARY KEY REFERENCES queries(id),
    cache_key TEXT NOT NULL,
    answer    TEXT NOT NULL,
    created   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS answers_by_key ON answers(cache_key, query_id);
"""

# str(int) and int(str) refuse more than this many decimal digits (Python >= 3.11); hex is
# exempt, so a rational too long for decimal is written as 0x.../0x... instead.
_MAX_DECIMAL_BITS = 4000 * 3


# -- exact rationals as text ---------------------------------------------------------------


def _int_text(n: int) -> str:
    return str(n) if n.bit_length() <= _MAX_DECIMAL_BITS else hex(n)


def encode(x: Fraction) -> str:
    """``num/den`` in lowest terms; hexadecimal parts for numbers too long for decimal.

    >>> encode(Fraction(1, 10))
    '1/10'
    >>> encode(Fraction(3))
    '3/1'
    """
    return f"{_int_text(x.numerator)}/{_int_text(x.denominator)}"


def _parse_int(s: str) -> int:
    s = s.strip()
    return int(s, 16) if s.startswith(("0x", "-0x")) else int(s)


def decode(s: str) -> Fraction:
    """The exact rational a text column holds.

    >>> decode("1/10") == Fraction(1, 10)
    True
    >>> decode(encode(Fraction(3, 2**20000))) == Fraction(3, 2**20000)
    True
    """
    num, sep, den = s.partition("/")
    try:
        d = _parse_int(den) if sep else 1
        value = Fraction(_parse_int(num), d)
    except (ValueError, ZeroDivisionError):
        raise PinqError(f"the ledger holds a malformed number {s[:40]!r}") from None
    if value < 0:
        raise PinqError(f"the ledger holds a negative amount {s[:40]!r}")
    return value


def stored_cost(epsilon: Fraction, delta: Fraction) -> Cost:
    return Cost._of(epsilon, delta)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def open_file(path: str) -> tuple[sqlite3.Connection, str]:
    """A connection to the ledger file with its settings (see the module docstring), and
    the journal mode it runs in."""
    try:
        conn = sqlite3.connect(
            path,
            timeout=BUSY_TIMEOUT,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            check_same_thread=False,  # guarded by a lock (the ledger's, or its write group's)
        )
    except sqlite3.Error as exc:
        raise PinqError(f"cannot open the ledger {path!r}: {exc}") from None
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT * 1000)}")
        mode = _set_wal(conn)
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA fullfsync = ON")
        conn.execute("PRAGMA checkpoint_fullfsync = ON")
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise PinqError(f"{path!r} is not a usable pinqpy ledger: {exc}") from None
    except BaseException:
        conn.close()
        raise
    return conn, mode


def _set_wal(conn: sqlite3.Connection) -> str:
    # Switching a new file to WAL needs an exclusive lock for a moment; a concurrent
    # opener can see SQLITE_BUSY here without the busy handler, so retry until the timeout.
    deadline = time.monotonic() + BUSY_TIMEOUT
    while True:
        try:
            row = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return str(row[0]).lower()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def group_connection(path: str) -> sqlite3.Connection:
    """The connection of a process's write group for the file at ``path``."""
    return open_file(path)[0]


def locked_out(path: str, exc: sqlite3.OperationalError) -> PinqError:
    return PinqError(
        f"the ledger {path!r} stayed locked by another process for more than "
        f"{BUSY_TIMEOUT:g} s ({exc})"
    )


def init_schema(conn: sqlite3.Connection, path: str, verify: bool) -> tuple[bytes, list[str]]:
    """Create or check the tables, verify the spent totals, and read the file's secret."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if tables and "meta" not in tables:
            raise PinqError(
                "this SQLite file already holds other tables and is not a pinqpy ledger; "
                "give the ledger a file of its own"
            )
        # executescript() would commit the open transaction first; run them one by one.
        for statement in SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if not meta:
            meta = {
                "format": FORMAT,
                "schema_version": str(SCHEMA_VERSION),
                "created": utc_now(),
                "secret": secrets.token_hex(32),
            }
            conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta.items())
        elif meta.get("format") != FORMAT:
            raise PinqError("this SQLite file is not a pinqpy ledger")
        try:
            version = int(meta.get("schema_version", "0"))
        except ValueError:
            raise PinqError("this pinqpy ledger has a malformed schema version") from None
        if version > SCHEMA_VERSION:
            raise PinqError(
                f"this ledger was written by a newer pinqpy (schema "
                f"{meta['schema_version']}, this version reads {SCHEMA_VERSION}); "
                "upgrade pinqpy to use it"
            )
        problems = spent_problems(conn)
        if problems and verify:
            raise PinqError(
                f"the ledger {path!r} failed its integrity check and was not used (nothing "
                f"was changed): {'; '.join(problems[:3])}. The file was edited outside "
                "pinqpy; restore it from a backup, or open it with "
                "Ledger(path, verify=False) to inspect it"
            )
        if not problems and (version < SCHEMA_VERSION or "secret" not in meta):
            # Upgrade: drop answers of the old format (pickles under unkeyed hashes are
            # never read) and the keys kept in the audit trail; every charge stays.
            conn.execute("DELETE FROM answers")
            conn.execute("UPDATE queries SET cache_key = NULL")
            meta["secret"] = meta.get("secret") or secrets.token_hex(32)
            conn.executemany(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [("secret", meta["secret"]), ("schema_version", str(SCHEMA_VERSION))],
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    try:
        secret = bytes.fromhex(meta.get("secret", ""))
    except ValueError:
        secret = b""
    if len(secret) < 16 and not problems:
        raise PinqError(f"the ledger {path!r} holds a malformed secret")
    return secret, problems


def spent_problems(conn: sqlite3.Connection) -> list[str]:
    """Budgets whose running spent is not the exact sum of their charges, or beyond their
    total; charges of unknown budgets or of no query. Read in the caller's transaction."""
    problems: list[str] = []
    try:
        budgets = conn.execute(
            "SELECT name, spent_epsilon, spent_delta, total_epsilon, total_delta FROM budgets"
        ).fetchall()
        sums: dict[str, list[Fraction]] = {}
        for budget, eps, dlt in conn.execute("SELECT budget, epsilon, delta FROM charges"):
            acc = sums.setdefault(budget, [Fraction(0), Fraction(0)])
            acc[0] += decode(eps)
            acc[1] += decode(dlt)
        orphans = conn.execute(
            "SELECT COUNT(*) FROM charges c LEFT JOIN queries q ON q.id = c.query_id "
            "WHERE q.id IS NULL"
        ).fetchone()[0]
        known = set()
        for name, se, sd, te, td in budgets:
            known.add(name)
            spent = (decode(se), decode(sd))
            total = sums.get(name, [Fraction(0), Fraction(0)])
            if spent != (total[0], total[1]):
                problems.append(
                    f"budget {name!r}: running spent {encode(spent[0])}, {encode(spent[1])} "
                    f"but its charges add to {encode(total[0])}, {encode(total[1])}"
                )
            if spent[0] > decode(te) or spent[1] > decode(td):
                problems.append(f"budget {name!r}: spent beyond its total")
    except PinqError as exc:  # a malformed or negative number in a row
        return [str(exc)]
    except (sqlite3.Error, TypeError, AttributeError):
        return ["the ledger's tables hold values of the wrong type"]
    problems.extend(f"charges name unknown budget {name!r}" for name in sorted(set(sums) - known))
    if orphans:
        problems.append(f"{orphans} charge rows belong to no query")
    return problems
