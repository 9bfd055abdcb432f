"""A fixed SQL session for the SQL tests: the bundled PUMS sample under several guises.

Tables (each private table has its own budget, so a test can see exactly which one moved):

- ``pums``: the bundled 1,000-row California PUMS with the declared bounds (age [0, 100],
  income [0, 500000]) and public keys (sex, married, race, educ).
- ``pums_raw``: the same rows with bounds only: no public keys at all.
- ``persons``: the same rows with a person id ``pid`` 1..1000 (one row per person), bounds
  for age, income and pid, keys for sex and married.
- ``visits``: a user-level table (``privacy_unit="pid"``), person ``pid`` has ``1 + pid % 4``
  rows; registered with ``max_rows=3``, so queries see a table of stability 3.
- ``visits_all``: the same rows, user-level and unbounded (stability infinity).
- ``census``: the same rows as ``pums`` (same bounds and keys), its row count declared
  public (``public_size=True``): COUNT(*) of the whole table is 1,000, exact and free, and
  AVG divides by it.
- public ``educ_names`` (educ 1..16 -> label, level; unique key) and ``race_groups`` (race ->
  grp, where race 1 has two rows, so joining it has stability 2).

The fixture files
-----------------

A file holds several cases. Each case starts with a ``-- name:`` line; the ``-- key: value``
lines right after it are its header, and everything after the header up to the next
``-- name:`` line is the statement, run exactly as written (line and column positions in the
header refer to it). Text before a file's first case is a comment.

Header keys (repeatable ones are marked *):

- ``name``: unique across all files.
- ``epsilon``, ``delta``: passed to ``Session.sql``; omitted means not passed.
- ``expect``: ``plan``, ``error`` or ``result``.
- ``xfail``: ``BUG: <one line>``: a known pinqpy bug; the case is a strict xfail.

``expect: error``: ``error`` (``PinqSyntaxError`` or ``PrivacyError``), ``message`` (a
substring of the message), ``at`` (``line:column``; required for ``PinqSyntaxError``,
``none`` asserts that there is no position). No budget may move.

``expect: plan``: the statement is EXPLAINed (``EXPLAIN`` is prefixed unless written), which
charges nothing; then it is run with noise off, and what it charges must be what EXPLAIN
said. ``split`` is the exact "Noisy measurements:" line (after that prefix); ``measure``* is
``label | epsilon`` of each measurement, in order and complete; ``total``* is each exact
"Total charge to ..." line (after that prefix), complete; ``contains``* a line or part of a
line the plan must hold (runs of spaces compare as one space).

``expect: result``: run with ``pq.testing.no_noise()``. ``columns`` (names separated by ``|``),
``row``* (a Python literal tuple body per row, compared in order, numbers to 1e-9
relative), ``rows`` (the number of rows, when they are too many to list), ``charge``:
``none`` (nothing charged, for SHOW / DESCRIBE / EXPLAIN) or ``table=eps, ...`` the exact
charge per budget; without ``charge`` the budget of largest charge pays exactly the query's
epsilon and no budget pays more.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums

# Large enough that no test and no fuzzed query can exhaust a budget (1 per query at most).
BIG_EPSILON = 1_000_000

EDUC_LABELS = [
    "no schooling",
    "nursery-4th",
    "5th-6th",
    "7th-8th",
    "9th",
    "10th",
    "11th",
    "12th no diploma",
    "high school",
    "some college <1y",
    "college no degree",
    "associate",
    "bachelor",
    "master",
    "professional",
    "doctorate",
]


@cache
def _pums() -> pd.DataFrame:
    return load_pums()


def pums_df() -> pd.DataFrame:
    """A fresh copy of the bundled PUMS sample."""
    return _pums().copy()


def persons_df() -> pd.DataFrame:
    df = pums_df()
    df.insert(0, "pid", range(1, len(df) + 1))
    return df


def visits_df() -> pd.DataFrame:
    """User-level rows: person ``pid`` has ``1 + pid % 4`` visits on days 1.. of a week."""
    rows = []
    for pid in range(1, 1001):
        for j in range(1 + pid % 4):
            rows.append({"pid": pid, "day": 1 + (pid + j) % 7, "minutes": (pid * 7 + j * 13) % 301})
    return pd.DataFrame(rows)


def educ_names_df() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "educ": list(range(1, 17)),
            "label": EDUC_LABELS,
            "level": ["low"] * 9 + ["mid"] * 3 + ["high"] * 4,
        }
    )


def race_groups_df() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "race": [1, 1, 2, 3, 4, 5, 6],
            "grp": ["r1", "r1 (again)", "r2", "r3", "r4", "r5", "r6"],  # race codes have no labels
        }
    )


# Spark's createDataFrame costs ~0.08 s a table, ~0.45 s a session of five: on Spark each
# private table is converted once per Spark session, as the forced engine would convert it
# (the same `to_spark` of the cleaned DataFrame), and wrapped as that Spark DataFrame.
_SPARK_TABLES: dict[tuple[int, str], object] = {}


def _private(make: Callable[[], pd.DataFrame]) -> object:
    """The table ``make`` builds, as the session's engine receives it."""
    from pinqpy.engines.wrapping.wrapped import default_engine

    if default_engine() != "spark":
        return make()
    from pinqpy.engines.spark.types import to_spark
    from pinqpy.engines.text import clean_text
    from pinqpy.engines.wrapping.spark_source import spark_session

    spark = spark_session()
    if any(sid != id(spark) for sid, _ in _SPARK_TABLES):
        _SPARK_TABLES.clear()  # a new Spark session: the old frames belong to a stopped one
    key = (id(spark), make.__name__)
    if key not in _SPARK_TABLES:
        _SPARK_TABLES[key] = to_spark(spark, clean_text(make()))
    return _SPARK_TABLES[key]


@dataclass
class SqlEnv:
    """The session and every budget behind it."""

    session: pq.Session
    budgets: dict[str, pq.Budget] = field(default_factory=dict)

    def spent(self) -> dict[str, tuple[Fraction, Fraction]]:
        """Exact spent (epsilon, delta) of every budget, to compare before and after."""
        return {
            name: (Fraction(b.spent.epsilon), Fraction(b.spent.delta))
            for name, b in self.budgets.items()
        }


def make_env(epsilon: float = BIG_EPSILON, delta: float = 1e-3) -> SqlEnv:
    session = pq.Session()
    budgets = {
        name: pq.Budget(epsilon=epsilon, delta=delta)
        for name in ("pums", "pums_raw", "persons", "visits", "visits_all")
    }
    session.register(
        "pums", _private(pums_df), budget=budgets["pums"], bounds=PUMS_BOUNDS, keys=PUMS_KEYS
    )
    session.register("pums_raw", _private(pums_df), budget=budgets["pums_raw"], bounds=PUMS_BOUNDS)
    session.register(
        "persons",
        _private(persons_df),
        budget=budgets["persons"],
        bounds={**PUMS_BOUNDS, "pid": (1, 1000)},
        keys={"sex": [0, 1], "married": [0, 1]},
    )
    visit_bounds = {"minutes": (0, 300), "day": (1, 7)}
    session.register(
        "visits",
        _private(visits_df),
        budget=budgets["visits"],
        bounds=visit_bounds,
        privacy_unit="pid",
        max_rows=3,
    )
    session.register(
        "visits_all",
        _private(visits_df),
        budget=budgets["visits_all"],
        bounds=visit_bounds,
        privacy_unit="pid",
    )
    session.register_public("educ_names", educ_names_df())
    session.register_public("race_groups", race_groups_df())
    budgets["census"] = pq.Budget(epsilon=epsilon, delta=delta)
    session.register(
        "census",
        _private(pums_df),
        budget=budgets["census"],
        bounds=PUMS_BOUNDS,
        keys=PUMS_KEYS,
        public_size=True,
    )
    return SqlEnv(session, budgets)


@pytest.fixture
def env() -> Iterator[SqlEnv]:
    yield make_env()


# -- the fixture files ----------------------------------------------------------------------
FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "sql"

REPEATABLE = frozenset({"measure", "total", "contains", "row"})
KNOWN_KEYS = frozenset(
    {
        "name",
        "epsilon",
        "delta",
        "expect",
        "xfail",
        "error",
        "message",
        "at",
        "split",
        "columns",
        "rows",
        "charge",
        *REPEATABLE,
    }
)
_HEADER = re.compile(r"--\s*([a-z_]+)\s*:\s?(.*)$")


@dataclass
class Case:
    """One fixture case: a statement and what must come of it."""

    name: str
    path: Path
    line: int
    query: str
    header: dict[str, str] = field(default_factory=dict)
    lists: dict[str, list[str]] = field(default_factory=dict)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.header.get(key, default)

    def all(self, key: str) -> list[str]:
        return self.lists.get(key, [])

    @property
    def expect(self) -> str:
        return self.header["expect"]

    @property
    def epsilon(self) -> float | None:
        v = self.get("epsilon")
        return None if v is None else float(v)

    @property
    def delta(self) -> float | None:
        v = self.get("delta")
        return None if v is None else float(v)

    @property
    def where(self) -> str:
        return f"{self.path.name}:{self.line} ({self.name})"

    def at(self) -> tuple[int, int] | None:
        """The expected ``(line, column)``; None for ``at: none``."""
        raw = self.header["at"].strip()
        if raw == "none":
            return None
        line, column = raw.split(":")
        return int(line), int(column)

    def rows(self) -> list[tuple[object, ...]]:
        return [ast.literal_eval("(" + r + ",)") for r in self.all("row")]

    def columns(self) -> list[str]:
        return [c.strip() for c in self.header["columns"].split("|")]

    def charges(self) -> dict[str, float] | None:
        """The exact charge per budget (``charge: pums=1, persons=0.5``); None if unset;
        an empty dict for ``charge: none``."""
        raw = self.get("charge")
        if raw is None:
            return None
        if raw.strip() == "none":
            return {}
        out = {}
        for part in raw.split(","):
            table, value = part.split("=")
            out[table.strip()] = float(value)
        return out


def _validate(case: Case) -> None:
    expect = case.get("expect")
    if expect not in ("plan", "error", "result"):
        raise ValueError(f"{case.where}: expect must be plan, error or result, not {expect!r}")
    if not case.query:
        raise ValueError(f"{case.where}: no statement")
    if expect == "error":
        if case.get("error") not in ("PinqSyntaxError", "PrivacyError"):
            raise ValueError(f"{case.where}: error must be PinqSyntaxError or PrivacyError")
        if not case.get("message"):
            raise ValueError(f"{case.where}: an error case needs a message substring")
        if case.get("error") == "PinqSyntaxError" and case.get("at") is None:
            raise ValueError(f"{case.where}: a PinqSyntaxError case needs at: line:column")
    if expect == "plan" and not (case.get("split") and case.all("measure") and case.all("total")):
        raise ValueError(f"{case.where}: a plan case needs split, measure and total")
    if expect == "result" and case.get("columns") is None:
        raise ValueError(f"{case.where}: a result case needs columns")
    xfail = case.get("xfail")
    if xfail is not None and not xfail.startswith("BUG: "):
        raise ValueError(f"{case.where}: xfail reasons start with 'BUG: '")


def parse_file(path: Path) -> list[Case]:
    cases: list[Case] = []
    current: Case | None = None
    in_header = False
    body: list[str] = []

    def finish() -> None:
        if current is not None:
            current.query = "\n".join(body).strip("\n").rstrip()
            _validate(current)
            cases.append(current)

    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        m = _HEADER.match(raw)
        if m and m.group(1) == "name":
            finish()
            current = Case(name=m.group(2).strip(), path=path, line=number, query="")
            current.header["name"] = current.name
            in_header, body = True, []
            continue
        if current is None:
            continue  # the file's leading comment
        if in_header and m:
            key, value = m.group(1), m.group(2).strip()
            if key not in KNOWN_KEYS:
                raise ValueError(f"{path.name}:{number}: unknown header key {key!r}")
            if key in REPEATABLE:
                current.lists.setdefault(key, []).append(value)
            elif key in current.header:
                raise ValueError(f"{path.name}:{number}: {key!r} is given twice")
            else:
                current.header[key] = value
            continue
        in_header = False
        body.append(raw)
    finish()
    return cases


def load_cases(directory: Path = FIXTURE_DIR) -> list[Case]:
    """Every case of every fixture file, in file order; names must be unique."""
    cases: list[Case] = []
    for path in sorted(directory.glob("*.sql")):
        cases.extend(parse_file(path))
    seen: dict[str, str] = {}
    for case in cases:
        if case.name in seen:
            raise ValueError(f"{case.where}: name also used at {seen[case.name]}")
        seen[case.name] = case.where
    return cases
