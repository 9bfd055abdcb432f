"""The five mistakes a newcomer makes first, as the newcomer meets them: in a fresh Python.

Each mistake runs in a subprocess (``sys.executable -c``) over the bundled PUMS sample, and
the test asserts what the person at the keyboard sees: the exit status, the error's class and
message on stderr, the caret under a typo, and that nothing was charged.

1. a typo in a ``where()`` expression;
2. a query larger than the budget left;
3. a mean without bounds;
4. ``groupby(...).count()``, the pandas habit (pinqpy counts groups with ``partition``);
5. a ``%%pinq`` cell that fails, under IPython.

Beyond the message itself: one traceback, not a chained pair; a pointer to ``partition`` for
the pandas habit; a failing cell that IPython sees fail.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# A newcomer's frame: bounds for age only (so income has none), public keys for sex.
PRELUDE = """\
import pinqpy as pq
from pinqpy.demo import load_pums

budget = pq.Budget(epsilon=1.0)
people = pq.PrivateFrame(load_pums(), budget, bounds={"age": (0, 100)}, keys={"sex": [0, 1]})
"""


def run_python(body: str) -> subprocess.CompletedProcess[str]:
    """Run PRELUDE then ``body`` in a fresh interpreter (this checkout's pinqpy, no testing
    switch: a newcomer has none)."""
    env = dict(os.environ)
    env.pop("PINQPY_TESTING", None)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    code = PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def error_lines(stderr: str, cls: str = r"[\w.]+(?:Error|Exception)") -> list[str]:
    """The lines of ``stderr`` where Python names an exception of class ``cls`` (a regex),
    with its message: ``pinqpy.errors.PrivacyError: ...``."""
    return re.findall(rf"^{cls}: .*$", stderr, re.M)


# -- 1. a typo in where() ------------------------------------------------------------------
TYPO = "people.where('agee >= 65').count(epsilon=0.1)\n"


@pytest.fixture(scope="module")
def typo() -> subprocess.CompletedProcess[str]:
    return run_python(TYPO)


def test_typo_exits_1_suggesting_the_column(typo: subprocess.CompletedProcess[str]) -> None:
    assert typo.returncode == 1, typo.stderr
    assert "PinqSyntaxError" in typo.stderr, typo.stderr
    assert "unknown column 'agee'" in typo.stderr, typo.stderr
    assert "did you mean 'age'" in typo.stderr, typo.stderr
    assert typo.stdout == ""


def test_typo_has_a_caret_under_the_unknown_name(typo: subprocess.CompletedProcess[str]) -> None:
    lines = typo.stderr.splitlines()
    quoted = [i for i, line in enumerate(lines) if line.strip() == "agee >= 65"]
    assert quoted and quoted[-1] + 1 < len(lines), typo.stderr
    for i in quoted:  # the expression, quoted, then a caret under the 'a' of 'agee'
        assert re.fullmatch(r"\s*\^\s*", lines[i + 1]), typo.stderr
        assert lines[i + 1].index("^") == lines[i].index("agee"), typo.stderr


def test_typo_shows_one_traceback(typo: subprocess.CompletedProcess[str]) -> None:
    assert typo.stderr.count("Traceback") == 1, typo.stderr


# -- 2. over the budget --------------------------------------------------------------------
def test_over_budget_says_nothing_was_charged() -> None:
    done = run_python(
        """
        people.count(epsilon=0.5)
        people.where("age >= 65").count(epsilon=0.6)
        """
    )
    assert done.returncode == 1, done.stderr
    (error,) = error_lines(done.stderr, r"pinqpy\.errors\.BudgetExceededError")
    assert "nothing was charged" in error, done.stderr
    assert "Cost(epsilon=0.5) remains" in error, done.stderr
    assert done.stderr.count("Traceback") == 1, done.stderr


def test_over_budget_really_charges_nothing() -> None:
    done = run_python(
        """
        people.count(epsilon=0.5)
        try:
            people.where("age >= 65").count(epsilon=0.6)
        except pq.BudgetExceededError:
            print("refused; spent", float(budget.spent.epsilon))
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "refused; spent 0.5\n", done.stdout + done.stderr


# -- 3. a mean without bounds --------------------------------------------------------------
def test_mean_without_bounds_names_bounds() -> None:
    done = run_python("people.mean('income', epsilon=0.1)\n")
    assert done.returncode == 1, done.stderr
    (error,) = error_lines(done.stderr, r"pinqpy\.errors\.PrivacyError")
    assert "income" in error and "bounds=" in error, done.stderr
    assert done.stderr.count("Traceback") == 1, done.stderr


# -- 4. groupby(...).count() ---------------------------------------------------------------
@pytest.fixture(scope="module")
def groupby_count() -> subprocess.CompletedProcess[str]:
    return run_python("people.groupby('sex').count()\n")


def test_groupby_count_fails(groupby_count: subprocess.CompletedProcess[str]) -> None:
    assert groupby_count.returncode != 0, groupby_count.stdout
    assert error_lines(groupby_count.stderr), groupby_count.stderr
    assert groupby_count.stdout == ""


def test_groupby_count_points_at_partition(
    groupby_count: subprocess.CompletedProcess[str],
) -> None:
    errors = error_lines(groupby_count.stderr)
    assert any("partition" in error for error in errors), groupby_count.stderr


# -- 5. a failing %%pinq cell --------------------------------------------------------------
MAGIC = """\
from IPython.testing.globalipapp import start_ipython

ip = start_ipython()
ip.run_line_magic("load_ext", "pinqpy")
ip.user_ns["session"] = session = pq.Session()
session.register("people", load_pums(), budget=pq.Budget(epsilon=1.0),
                 bounds={"age": (0, 100)}, keys={"sex": [0, 1]})
result = ip.run_cell("%%pinq -e 0.1\\nSELECT COUNT(*) FROM people WHERE agee >= 65\\n")
spent = session.sql("SHOW BUDGET")["spent_epsilon"].iloc[0]
print(f"success={result.success} spent={spent}", flush=True)
"""


@pytest.fixture(scope="module")
def magic_cell() -> subprocess.CompletedProcess[str]:
    pytest.importorskip("IPython")
    return run_python(MAGIC)


def outcome(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
    found = re.search(r"^success=(\w+) spent=(\S+)$", done.stdout, re.M)
    assert found, done.stdout + done.stderr
    return {"success": found.group(1), "spent": found.group(2)}


def test_failing_magic_cell_reports_the_error(magic_cell: subprocess.CompletedProcess[str]) -> None:
    assert magic_cell.returncode == 0, magic_cell.stderr  # the session goes on
    shown = magic_cell.stdout + magic_cell.stderr
    assert "unknown column 'agee'; did you mean 'age'?" in shown, shown
    assert float(outcome(magic_cell)["spent"]) == 0.0, shown


def test_failing_magic_cell_fails(magic_cell: subprocess.CompletedProcess[str]) -> None:
    assert outcome(magic_cell)["success"] == "False", magic_cell.stdout + magic_cell.stderr
