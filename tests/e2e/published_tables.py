"""The tables that published DP SQL reads, built from tests/data with their public facts.

Each *database* is one :class:`pinqpy.Session`, named as the queries' sources name it:

- ``PUMS``, ``PUMS_pid``, ``PUMS_dup``, ``PUMS_null``, ``PUMS_large``: SmartNoise SQL's test
  databases (smartnoise-sdk ``sql/tests/README.md``). Each holds its CSV as table
  ``PUMS.PUMS`` (``PUMS.PUMS_large`` for the large one), with the facts of SmartNoise's
  metadata (``datasets/PUMS*.yaml``): age in [0, 100], income in [0, 500000]; ``PUMS`` has
  row privacy; the others have the private id ``pid`` (``PersonID``) and SmartNoise's
  default ``max_ids: 1``, i.e. pinqpy's ``privacy_unit="pid", max_rows=1``. The categorical
  columns (sex, educ, race, married) have no declared keys in that metadata, so a GROUP BY on
  them selects its keys privately (SmartNoise's ``censor_dims`` does the same with a
  threshold), which needs the delta the queries are run with. ``PUMS_large`` is SmartNoise's
  1.2-million-row California file; it is not in tests/data, so its 10,000-person
  extract with the same columns (``PUMS5extract10000.csv``, its ``X`` as ``PersonID``)
  stands in.
- ``bigquery``: the tables of BigQuery's and ZetaSQL's DP documentation, with the rows the
  documentation gives: ``professors`` and ``students`` (``id`` the privacy unit; no bounds:
  the documentation declares none) and the views ``view_on_professors`` /
  ``view_on_students`` (the same rows; a view with ``anonymization_userid_column='id'``)
  under the dataset ``mydataset`` (the documentation writes ``{{USERNAME}}``).
- ``opendp``: the tables of OpenDP's tutorials: ``teacher_survey`` (7,000 rows, one per
  teacher; the score bounds of its ``public_metadata.json``, and an age range of 18..70
  chosen here as a public bound, as the tutorials choose one) and ``california_pums`` (the
  same 1,000 rows as PUMS.csv; age and income ranges chosen here the same way, and the 0/1
  codes of sex and married as public keys).
- ``pinq``: PINQ's classic examples (McSherry's paper and tutorial), whose protected unit is
  one record: ``people`` (PUMS.csv with the codebook's keys) and ``visits`` (PUMS_dup.csv, a
  visit log with the visitor's ``pid``).

Every budget is large (the corpus runs each query once) and has a delta, so that a query
which needs private key selection can have one.
"""

from __future__ import annotations

from functools import cache

import pandas as pd

import pinqpy as pq
from tests.conftest import data_csv

PUMS_BOUNDS = {"age": (0, 100), "income": (0, 500_000)}
BUDGET_EPSILON = 1e21  # the documentation's "without noise" examples spend epsilon = 1e20
BUDGET_DELTA = 0.5

DATABASES = (
    "PUMS",
    "PUMS_pid",
    "PUMS_dup",
    "PUMS_null",
    "PUMS_large",
    "bigquery",
    "opendp",
    "pinq",
)

PROFESSORS = [
    (101, "pencil", 24),
    (123, "pen", 16),
    (123, "pencil", 10),
    (123, "pencil", 38),
    (101, "pen", 19),
    (101, "pen", 23),
    (130, "scissors", 8),
    (150, "pencil", 72),
]
STUDENTS = [(1, "pencil", 5), (1, "pen", 2), (2, "pen", 1), (3, "pen", 4)]


@cache
def _csv(name: str) -> pd.DataFrame:
    return data_csv(name)


def _budget() -> pq.Budget:
    return pq.Budget(epsilon=BUDGET_EPSILON, delta=BUDGET_DELTA)


def make_session(database: str) -> tuple[pq.Session, list[pq.Budget]]:
    """A fresh session for ``database`` and every budget behind its tables."""
    session = pq.Session()
    budgets: list[pq.Budget] = []

    def private(name: str, df: pd.DataFrame, **facts: object) -> None:
        budget = _budget()
        budgets.append(budget)
        session.register(name, df.copy(), budget=budget, **facts)  # type: ignore[arg-type]

    if database == "PUMS":
        private("PUMS.PUMS", _csv("PUMS.csv"), bounds=PUMS_BOUNDS)
    elif database in ("PUMS_pid", "PUMS_dup", "PUMS_null"):
        private(
            "PUMS.PUMS",
            _csv(f"{database}.csv"),
            bounds=PUMS_BOUNDS,
            privacy_unit="pid",
            max_rows=1,
        )
    elif database == "PUMS_large":
        large = _csv("PUMS5extract10000.csv").rename(columns={"X": "PersonID"})
        private("PUMS.PUMS_large", large, bounds=PUMS_BOUNDS, privacy_unit="PersonID", max_rows=1)
    elif database == "bigquery":
        professors = pd.DataFrame(PROFESSORS, columns=["id", "item", "quantity"])
        students = pd.DataFrame(STUDENTS, columns=["id", "item", "quantity"])
        private("professors", professors, privacy_unit="id")
        private("students", students, privacy_unit="id")
        private("mydataset.view_on_professors", professors, privacy_unit="id")
        private("mydataset.view_on_students", students, privacy_unit="id")
    elif database == "opendp":
        teachers = data_csv("teacher_survey.csv", na_values=[" "])
        private(
            "teacher_survey",
            teachers,
            bounds={
                "age": (18, 70),
                "optimism": (6, 30),
                "lifeSatisfaction": (5, 35),
                "selfEsteem": (5, 35),
            },
            keys={"sex": [1, 2, 3], "smoker": [1, 2]},
        )
        private(
            "california_pums",
            _csv("PUMS.csv"),
            bounds={"age": (18, 80), "income": (0, 200_000)},
            keys={"sex": [0, 1], "married": [0, 1]},
        )
    elif database == "pinq":
        private(
            "people",
            _csv("PUMS.csv"),
            bounds=PUMS_BOUNDS,
            keys={"sex": [0, 1], "married": [0, 1], "educ": range(1, 17), "race": range(1, 7)},
        )
        # PINQ protects records: each row is one participant (its privacy is row-level).
        private("visits", _csv("PUMS_dup.csv"), bounds=PUMS_BOUNDS)
    else:
        raise ValueError(f"unknown database {database!r}")
    return session, budgets
