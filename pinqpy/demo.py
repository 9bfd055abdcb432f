"""A short private query session over the bundled sample of real data, and a throwaway
PostgreSQL server to try the postgres engine on.

The sample is the 1,000-person California PUMS extract (US Census, public domain) that
OpenDP and SmartNoise use as their standard test table: age, sex, educ, race, income,
married. Run it with ``pinqpy demo`` or ``python -m pinqpy demo``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pandas as pd

from pinqpy.accounting.budget import Budget
from pinqpy.api.frame import PrivateFrame
from pinqpy.errors import BudgetExceededError, PinqError
from pinqpy.results.values import NoisyCount, NoisyValue

__all__ = [
    "NEXT_STEP",
    "PUMS_PATH",
    "WHOLE_RANGE",
    "load_pums",
    "main",
    "postgres_binaries",
    "postgres_server",
    "whole_range",
]

_PUMS = resources.files("pinqpy").joinpath("data", "PUMS.csv")
# A file path, so engines that read files themselves (DuckDB, Spark) can be shown the sample.
PUMS_PATH = str(_PUMS)

PUMS_BOUNDS = {"age": (0, 100), "income": (0, 500_000)}
PUMS_KEYS = {
    "sex": [0, 1],
    "married": [0, 1],
    "race": [1, 2, 3, 4, 5, 6],
    "educ": list(range(1, 17)),
}


# The demo's last line: where a newcomer goes next (the same sample, in SQL).
NEXT_STEP = "Next, ask the same sample in SQL: pinqpy shell --demo-data"


def load_pums() -> pd.DataFrame:
    """The bundled 1,000-row California PUMS sample as a DataFrame."""
    with _PUMS.open("rb") as fh:
        return pd.read_csv(fh)


# Said of an interval that spans the whole public range: it says nothing the bounds did not.
WHOLE_RANGE = "the interval is the whole range: too few rows for this epsilon"


def whole_range(lo: float, hi: float, bounds: tuple[float, float] | None) -> str:
    """``"  (the interval is the whole range: ...)"`` when ``[lo, hi]`` covers ``bounds``.

    >>> whole_range(0.0, 500_000.0, (0, 500_000)), whole_range(1.0, 2.0, (0, 10))
    ('  (the interval is the whole range: too few rows for this epsilon)', '')
    """
    if bounds is None or lo > bounds[0] or hi < bounds[1]:
        return ""
    return f"  ({WHOLE_RANGE})"


def _show(
    label: str, value: NoisyValue | NoisyCount, bounds: tuple[float, float] | None = None
) -> None:
    lo, hi = value.ci(0.95)
    if isinstance(value, int):  # counts are exact integers from the discrete Laplace
        print(f"  {label:<44} {value:>12,d}   95% CI [{lo:,d}, {hi:,d}]")
    else:
        note = whole_range(lo, hi, bounds)
        print(f"  {label:<44} {float(value):>12,.1f}   95% CI [{lo:,.1f}, {hi:,.1f}]{note}")


def main() -> int:
    print("pinqpy demo: a private query session over 1,000 real Californians (PUMS)\n")
    budget = Budget(epsilon=2.0)
    people = PrivateFrame(load_pums(), budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
    print(people, "\n")

    print("Noisy answers (each charges epsilon x stability before reading any row):")
    _show("people.count(epsilon=0.1)", people.count(epsilon=0.1))
    _show('where("age >= 65").count(epsilon=0.1)', people.where("age >= 65").count(epsilon=0.1))
    income, age = PUMS_BOUNDS["income"], PUMS_BOUNDS["age"]
    _show('mean("income", epsilon=0.2)', people.mean("income", epsilon=0.2), income)
    median = people.median("age", epsilon=0.1, ci=True)
    _show('median("age", epsilon=0.1, ci=True)', median, age)
    top = people.argmax("educ", candidates=PUMS_KEYS["educ"], epsilon=0.1)
    print(f"  {'most common educ code (argmax, epsilon=0.1)':<44} {top!s:>12}")
    print(f"\n  budget now: {budget}")

    print("\nParallel composition: one mean per marital status costs 0.2 in all, not 0.4:")
    by_married = people.partition("married").mean("income", epsilon=0.2)
    ci = by_married.ci(0.95)
    for key, value in by_married.items():
        lo, hi = ci.loc[key]
        note = whole_range(lo, hi, income)
        print(
            f"  married={key}: mean income {value:>10,.0f}   95% CI [{lo:,.0f}, {hi:,.0f}]{note}"
        )
    print(f"  budget now: {budget}")

    print("\nGroupBy has stability 2 (one person changes one group's row: out, then in):")
    levels = people.groupby("educ").agg(n="COUNT(*)", mean_age="AVG(age)")
    print(f"  levels.stability == {levels.stability}, so a query at epsilon 0.5 charges 1.0")
    _show("education levels with >= 50 people (eps 0.5)", levels.where("n >= 50").count(0.5))
    print(f"  budget now: {budget}")

    print("\nAsking for more than remains is refused before any data is read:")
    try:
        people.count(epsilon=1.0)
    except BudgetExceededError as err:
        print(f"  BudgetExceededError: {err}")
    print(f"  budget unchanged: {budget}")
    print(f"\n{NEXT_STEP}")
    return 0


# -- a throwaway PostgreSQL server --------------------------------------------------------


def postgres_binaries() -> Path | None:
    """The folder holding PostgreSQL's ``initdb`` and ``postgres`` programs, or None where
    PostgreSQL is not installed: the PATH first, then ``/usr/lib/postgresql/*/bin`` (the
    newest), where Debian's package puts them without putting them on the PATH."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    for folder in sorted(versions, key=lambda f: [int(n) for n in re.findall(r"\d+", f)])[::-1]:
        if os.path.exists(os.path.join(folder, "initdb")):
            return Path(folder)
    return None


@contextlib.contextmanager
def postgres_server() -> Iterator[str]:
    """A fresh PostgreSQL server for the duration of the block; yields its connection string.

    For trying the postgres engine (the notebooks, the test suite): a curator's data lives in
    their own server. ``initdb`` makes a cluster in a new temporary folder; the server
    listens on 127.0.0.1 only, on a free port (its Unix socket in that folder), with trust
    authentication for user ``pinq`` and database ``pinq`` (any local user may connect while
    it runs: it is for demo and test data), and without durability (the data is thrown
    away). At the end it is stopped by its PID and the folder is removed. initdb
    and the server refuse to run as root, so as root they run as the ``postgres`` user
    (which Debian's package creates). A missing PostgreSQL or psycopg 3
    (``pip install 'pinqpy[postgres]'``) is a PinqError that says so.

    ``with postgres_server() as url: pq.PrivateFrame.from_sql(url, "t", budget)`` reads a
    table ``t`` made there.
    """
    bindir = postgres_binaries()
    if bindir is None:
        raise PinqError(
            "PostgreSQL is not installed (no initdb on the PATH or in /usr/lib/postgresql): "
            "install its server, e.g. apt-get install postgresql"
        )
    _import_psycopg()
    prefix, uid = _as_postgres_user()
    folder = Path(tempfile.mkdtemp(prefix="pinqpy-pg-"))
    proc = None
    try:
        if uid is not None:
            os.chown(folder, uid, -1)
        _run(prefix, bindir, "initdb", "-D", str(folder / "data"), "-A", "trust", "-U", "pinq",
             "-E", "UTF8", "--no-sync", "--locale=C.UTF-8")
        port = _free_port()
        proc = _start(prefix, bindir, folder, port)
        _wait_for(f"host=127.0.0.1 port={port} user=pinq dbname=postgres", proc)
        yield f"host=127.0.0.1 port={port} user=pinq dbname=pinq"
    finally:
        if proc is not None:
            _stop(folder, proc)
        shutil.rmtree(folder, ignore_errors=True)


def _import_psycopg() -> None:
    try:
        import psycopg  # noqa: F401 (only whether it is there)
    except ImportError:
        raise PinqError(
            "the PostgreSQL server needs psycopg 3 to be reached: pip install 'pinqpy[postgres]'"
        ) from None


def _as_postgres_user() -> tuple[list[str], int | None]:
    """The command prefix that runs a program as a non-root user (root: ``postgres``), and
    that user's uid (None: the current user)."""
    if os.geteuid() != 0:
        return [], None
    import pwd  # Unix only, like running as root

    try:
        uid = pwd.getpwnam("postgres").pw_uid
    except KeyError:
        raise PinqError(
            "PostgreSQL refuses to run as root, and there is no 'postgres' user to run it as"
        ) from None
    runner = shutil.which("runuser") or shutil.which("su")
    if runner is None:
        raise PinqError("PostgreSQL refuses to run as root, and runuser or su is missing")
    if runner.endswith("runuser"):
        return [runner, "-u", "postgres", "--"], uid
    return [runner, "postgres", "-s", "/bin/sh", "-c"], uid


def _command(prefix: list[str], cmd: list[str], exec_: bool = False) -> list[str]:
    if prefix and prefix[-1] == "-c":  # su: one shell command
        quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in cmd)
        return [*prefix, ("exec " if exec_ else "") + quoted]
    return [*prefix, *cmd]


def _run(prefix: list[str], bindir: Path, program: str, *args: str) -> None:
    cmd = _command(prefix, [str(bindir / program), *args])
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    except subprocess.CalledProcessError as err:
        output = err.stderr.decode(errors="replace").strip()
        raise PinqError(f"{program} failed: {output}") from None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(prefix: list[str], bindir: Path, folder: Path, port: int) -> subprocess.Popen[bytes]:
    options = [
        "-p", str(port), "-k", str(folder), "-c", "listen_addresses=127.0.0.1",
        "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
        "-c", "max_connections=40", "-c", "shared_buffers=64MB",
    ]
    cmd = _command(prefix, [str(bindir / "postgres"), "-D", str(folder / "data"), *options], True)
    with open(folder / "server.log", "wb") as log:  # the child keeps its own descriptor
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def _wait_for(url: str, proc: subprocess.Popen[bytes]) -> None:
    """Wait until the server accepts connections, then make the ``pinq`` database."""
    import psycopg

    deadline = time.monotonic() + 60
    while True:
        try:
            with psycopg.connect(url, connect_timeout=2, autocommit=True) as conn:
                conn.execute("CREATE DATABASE pinq")
            return
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise PinqError("the PostgreSQL server did not start") from None
            time.sleep(0.05)


def _stop(folder: Path, proc: subprocess.Popen[bytes]) -> None:
    """Stop the postmaster by its PID (an immediate shutdown: the data is thrown away)."""
    pid = proc.pid
    with contextlib.suppress(OSError, ValueError, IndexError):
        pid = int((folder / "data" / "postmaster.pid").read_text().split()[0])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGQUIT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
