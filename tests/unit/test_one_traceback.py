"""A user's mistake prints one traceback: pinqpy errors never chain an internal cause."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import load_pums

ROOT = Path(__file__).resolve().parents[2]


def _unchained(err: BaseException) -> bool:
    """Python prints a second traceback for an explicit cause, or for a context that is not
    suppressed; neither may be there."""
    return err.__cause__ is None and (err.__context__ is None or err.__suppress_context__)


@pytest.fixture(scope="module")
def people() -> pq.PrivateFrame:
    return pq.PrivateFrame(
        load_pums(), pq.Budget(epsilon=1.0), bounds={"age": (0, 100), "income": (0, 500_000)}
    )


@pytest.fixture(scope="module")
def session() -> pq.Session:
    s = pq.Session()
    s.register("people", load_pums(), budget=pq.Budget(1.0), bounds={"age": (0, 100)})
    return s


MISTAKES: dict[str, Callable[[pq.PrivateFrame, pq.Session], object]] = {
    "where typo": lambda f, s: f.where("agee >= 65"),
    "where syntax": lambda f, s: f.where("age >= "),
    "select typo": lambda f, s: f.select(x="agee + 1"),
    "select column typo": lambda f, s: f.select("agee"),
    "assign typo": lambda f, s: f.assign(x="FLOOR(agee)"),
    "assign type error": lambda f, s: f.assign(x="age + 'a'"),
    "agg typo": lambda f, s: f.groupby("sex").agg(n="COUNTT(*)"),
    "mean without bounds": lambda f, s: f.mean("educ", epsilon=0.1),
    "bounds reversed": lambda f, s: f.mean("age", epsilon=0.1, bounds=(5, 1)),
    "bounds not a pair": lambda f, s: f.mean("age", epsilon=0.1, bounds="x"),
    "epsilon not a number": lambda f, s: f.count(epsilon="a"),
    "over budget": lambda f, s: f.count(epsilon=5),
    "sql table typo": lambda f, s: s.sql("SELECT COUNT(*) FROM peple", epsilon=0.1),
    "sql column typo": lambda f, s: s.sql("SELECT AVG(agee) FROM people", epsilon=0.1),
    "sql where typo": lambda f, s: s.sql("SELECT COUNT(*) FROM people WHERE agee > 3", epsilon=0.1),
    "sql syntax": lambda f, s: s.sql("SELEC COUNT(*) FROM people", epsilon=0.1),
    "sql without bounds": lambda f, s: s.sql("SELECT AVG(income) FROM people", epsilon=0.1),
    "sql without epsilon": lambda f, s: s.sql("SELECT COUNT(*) FROM people"),
    "sql over budget": lambda f, s: s.sql("SELECT COUNT(*) FROM people", epsilon=5),
    "explain typo": lambda f, s: s.explain("SELECT AVG(agee) FROM people", epsilon=0.1),
    "declared bounds typo": lambda f, s: pq.PrivateFrame(
        pd.DataFrame({"age": [1]}), pq.Budget(1.0), bounds={"agee": (0, 1)}
    ),
    "schema does not convert": lambda f, s: pq.PrivateFrame(
        pd.DataFrame({"s": ["a"]}), pq.Budget(1.0), schema={"s": "int"}
    ),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_error_has_no_chained_cause(
    name: str, people: pq.PrivateFrame, session: pq.Session
) -> None:
    with pytest.raises(pq.PinqError) as info:
        MISTAKES[name](people, session)
    assert _unchained(info.value), name


def test_reraised_errors_suppress_their_context(
    people: pq.PrivateFrame, session: pq.Session
) -> None:
    """The errors raised while another was handled (the positioned re-parse) say so."""
    for mistake in ("where typo", "sql column typo", "sql without bounds"):
        with pytest.raises(pq.PinqError) as info:
            MISTAKES[mistake](people, session)
        err = info.value
        if err.__context__ is not None:
            assert err.__suppress_context__, mistake


SCRIPT = """
import pinqpy as pq
from pinqpy.demo import load_pums
people = pq.PrivateFrame(load_pums(), pq.Budget(0.5), bounds={"age": (0, 100)})
people.%s
"""


@pytest.mark.parametrize(
    "call",
    ["where('agee >= 65')", "count(epsilon=5)", "mean('income', epsilon=0.1)"],
    ids=["typo", "over-budget", "missing-bounds"],
)
def test_one_traceback_printed(call: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT % call],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.count("Traceback") == 1, proc.stderr
    assert "During handling" not in proc.stderr
    assert "direct cause" not in proc.stderr
    assert "pinqpy.errors." in proc.stderr
