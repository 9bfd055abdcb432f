"""The command line remembers: budgets of local files are kept in a ledger between runs.

Each test runs ``python -m pinqpy`` as separate processes over the real PUMS sample, with the
state directory its own (``PINQPY_STATE_DIR``, set for every test by tests/conftest.py), and
reads the ledger file back with :class:`pinqpy.accounting.ledger.Ledger` to see what was spent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

from pinqpy.accounting.ledger import Ledger
from pinqpy.demo import load_pums
from pinqpy.interfaces.tables import TableSpec, ledger_budget_name

REPO = Path(__file__).resolve().parents[2]


def pinqpy(
    *args: str, stdin: str = "", cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PINQPY_DEBUG"}
    env["PYTHONIOENCODING"] = "utf-8"
    # Run this checkout's pinqpy whatever the working directory.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "pinqpy", *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def people_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ledger_cli") / "people.csv"
    load_pums().to_csv(path, index=False)
    return path


@pytest.fixture
def state() -> Path:
    return Path(os.environ["PINQPY_STATE_DIR"])


# The file's column types, declared: an undeclared CSV makes pinqpy warn on stderr that its
# types were inferred (a public fact), which these tests of stderr would read.
SCHEMA = [f"--schema={c}={t}" for c, t in (
    ("age", "int"), ("sex", "int"), ("educ", "int"), ("race", "int"), ("income", "float"),
    ("married", "int"),
)]  # fmt: skip


def query(people_csv: Path, sql: str, *flags: str, epsilon: str = "1") -> list[str]:
    return ["query", f"people={people_csv}", *SCHEMA, "--epsilon", epsilon, *flags, sql]


def spent(ledger_file: Path, people_csv: Path, name: str = "people") -> Fraction:
    with Ledger(ledger_file) as ledger:
        return ledger.spent(ledger_budget_name(TableSpec(name, people_csv))).epsilon


def charges(ledger_file: Path) -> pd.DataFrame:
    with Ledger(ledger_file) as ledger:
        return ledger.charges()


def test_repeated_runs_spend_one_budget_and_refuse_when_it_is_gone(
    people_csv: Path, state: Path
) -> None:
    per = ("--epsilon-per-query", "0.4")
    first = pinqpy(*query(people_csv, "SELECT COUNT(*) FROM people WHERE age > 30", *per))
    assert first.returncode == 0, first.stderr
    # stderr holds only what the query charged (stdout stays the answer alone)
    assert first.stderr == "charged epsilon 0.4 to people; 0.6 of 1 left\n"
    ledger_file = state / "ledger.db"
    assert spent(ledger_file, people_csv) == Fraction(2, 5)

    second = pinqpy(*query(people_csv, "SELECT COUNT(*) FROM people WHERE age > 40", *per))
    assert second.returncode == 0, second.stderr
    assert spent(ledger_file, people_csv) == Fraction(4, 5)

    third = pinqpy(*query(people_csv, "SELECT COUNT(*) FROM people WHERE age > 50", *per))
    assert third.returncode == 1
    assert "budget exceeded" in third.stderr
    assert len(third.stderr.strip().splitlines()) == 1
    assert third.stdout == ""
    assert spent(ledger_file, people_csv) == Fraction(4, 5)  # the refusal charged nothing

    shown = pinqpy(*query(people_csv, "SHOW BUDGET", "--format", "json"))
    assert shown.returncode == 0, shown.stderr
    [row] = json.loads(shown.stdout)
    assert row["spent_epsilon"] == pytest.approx(0.8)
    assert row["remaining_epsilon"] == pytest.approx(0.2)


def test_a_repeated_query_is_answered_from_the_ledger_at_no_charge(
    people_csv: Path, state: Path
) -> None:
    sql = "SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM people GROUP BY sex"
    args = query(people_csv, sql, "--bounds", "age=0:100", "--keys", "sex=0,1", "--format", "json")
    first = pinqpy(*args, "--epsilon-per-query", "0.5")
    assert first.returncode == 0, first.stderr
    again = pinqpy(*args, "--epsilon-per-query", "0.5")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(first.stdout)  # the same noisy answer
    assert spent(state / "ledger.db", people_csv) == Fraction(1, 2)
    assert len(charges(state / "ledger.db")) == 1

    # The same question at another epsilon is a new question: charged, and answered anew.
    other = pinqpy(*args, "--epsilon-per-query", "0.25")
    assert other.returncode == 0, other.stderr
    assert spent(state / "ledger.db", people_csv) == Fraction(3, 4)


def test_the_shell_and_query_share_the_ledger(people_csv: Path, state: Path) -> None:
    ran = pinqpy(*query(people_csv, "SELECT COUNT(*) FROM people", "--epsilon-per-query", "0.3"))
    assert ran.returncode == 0, ran.stderr
    shell = pinqpy(
        "shell",
        f"people={people_csv}",
        *SCHEMA,
        "--epsilon",
        "1",
        stdin="SELECT COUNT(*) FROM people OPTIONS (epsilon = 0.3);\n"
        "SELECT AVG(age, 0, 100) FROM people;\n.budget\n",
    )
    assert shell.returncode == 0, shell.stderr
    assert shell.stderr == ""
    # The repeated count came from the ledger; the average spent the shell's default 0.1.
    assert "charged nothing: the same query was answered before" in shell.stdout
    assert (
        "charged epsilon 0.1 on people: 1 measurement x 0.1 x stability 1; 0.6 left" in shell.stdout
    )
    assert spent(state / "ledger.db", people_csv) == Fraction(2, 5)


def test_no_ledger_warns_and_forgets(people_csv: Path, state: Path) -> None:
    for _ in range(2):  # the whole budget, twice: nothing remembers the first run
        proc = pinqpy(*query(people_csv, "SELECT COUNT(*) FROM people", "--no-ledger"))
        assert proc.returncode == 0, proc.stderr
        [warning, footer] = proc.stderr.splitlines()
        assert warning.startswith("pinqpy: warning: --no-ledger")
        assert "will not carry over between runs" in warning
        assert "averages its noise away" in warning
        # a tenth per query by default, as in the shell; and the same each run, since
        # nothing remembers the first
        assert footer == "charged epsilon 0.1 to people; 0.9 of 1 left"
    assert not (state / "ledger.db").exists()


def test_ledger_and_no_ledger_together_is_a_usage_error(people_csv: Path, tmp_path: Path) -> None:
    proc = pinqpy(
        *query(people_csv, "SELECT COUNT(*) FROM people", "--no-ledger", "--ledger", "x.db"),
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert "--no-ledger" in proc.stderr and "--ledger" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.db").exists()


def test_ledger_path_keeps_the_budgets_in_that_file(
    people_csv: Path, state: Path, tmp_path: Path
) -> None:
    chosen = tmp_path / "budgets.db"
    sql = "SELECT COUNT(*) FROM people"
    proc = pinqpy(*query(people_csv, sql, "--ledger", str(chosen), "--epsilon-per-query", "0.6"))
    assert proc.returncode == 0, proc.stderr
    assert spent(chosen, people_csv) == Fraction(3, 5)
    assert not (state / "ledger.db").exists()
    # The default ledger is another file: its budget is untouched and whole.
    fresh = pinqpy(*query(people_csv, "SELECT COUNT(*) FROM people WHERE sex = 1"))
    assert fresh.returncode == 0, fresh.stderr
    assert "0.9 of 1 left" in fresh.stderr
    over = pinqpy(
        *query(people_csv, "SELECT COUNT(*) FROM people WHERE sex = 0", "--ledger", str(chosen)),
        "--epsilon-per-query",
        "0.5",
    )
    assert over.returncode == 1
    assert "budget exceeded" in over.stderr


def test_another_epsilon_for_a_kept_budget_says_what_to_do(people_csv: Path) -> None:
    ran = pinqpy(*query(people_csv, "SELECT COUNT(*) FROM people", "--epsilon-per-query", "0.1"))
    assert ran.returncode == 0, ran.stderr
    proc = pinqpy(*query(people_csv, "SELECT COUNT(*) FROM people", epsilon="2"))
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith("pinqpy: error: the ledger ")
    assert "already keeps a budget for table people" in line
    assert "with a total of epsilon 1:" in line
    assert "run with --epsilon 1 to go on spending it" in line
    assert "--ledger PATH" in line
    assert "Traceback" not in proc.stderr
    with_delta = pinqpy(*query(people_csv, "SHOW BUDGET", "--delta", "1e-6"))
    assert with_delta.returncode == 2
    assert "run with --epsilon 1 to go on" in with_delta.stderr


def test_two_files_with_one_name_keep_separate_budgets(tmp_path: Path, state: Path) -> None:
    pums = load_pums()
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        pums.to_csv(tmp_path / folder / "people.csv", index=False)
    sql = "SELECT COUNT(*) FROM people"
    whole = ("--epsilon", "1", "--epsilon-per-query", "1")
    for folder in ("a", "b"):  # a bare PATH names the table after its file: people
        proc = pinqpy("query", f"{folder}/people.csv", *whole, sql, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    for folder in ("a", "b"):
        assert spent(state / "ledger.db", tmp_path / folder / "people.csv") == 1
    again = pinqpy("query", "a/people.csv", *whole, f"{sql} WHERE age > 1", cwd=tmp_path)
    assert again.returncode == 1
    assert "budget exceeded" in again.stderr


def test_a_ledger_from_before_file_names_goes_on_spending(people_csv: Path, tmp_path: Path) -> None:
    from pinqpy.accounting.cost import Cost
    from pinqpy.accounting.ledger import ChargeRecord

    old = tmp_path / "old.db"
    with Ledger(old) as ledger:  # a budget kept under the bare table name, 0.9 spent
        ledger.open_budget("people", Cost(epsilon=1))
        ledger.charge([("people", Cost(epsilon=0.9))], ChargeRecord("count"), {"people": Cost(1)})
    sql = "SELECT COUNT(*) FROM people"
    over = pinqpy(*query(people_csv, sql, "--ledger", str(old), "--epsilon-per-query", "0.2"))
    assert over.returncode == 1
    assert "budget exceeded" in over.stderr
    fits = pinqpy(*query(people_csv, sql, "--ledger", str(old), "--epsilon-per-query", "0.1"))
    assert fits.returncode == 0, fits.stderr
    with Ledger(old) as ledger:
        assert list(ledger.budgets()["budget"]) == ["people"]
        assert ledger.spent("people").epsilon == 1


# -- pinqpy ledger: who spent what ------------------------------------------------------------


def test_pinqpy_ledger_shows_each_budget_and_every_charge(people_csv: Path, state: Path) -> None:
    for sql in ("SELECT COUNT(*) FROM people", "SELECT COUNT(*) FROM people WHERE age > 30"):
        assert pinqpy(*query(people_csv, sql)).returncode == 0
    before = (state / "ledger.db").read_bytes()
    table = pinqpy("ledger")  # the command line's own ledger, in the state directory
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == [
        "table", "file", "epsilon", "spent", "remaining", "queries", "last_query",
    ]  # fmt: skip
    cells = lines[2].split()
    assert cells[:6] == ["people", str(people_csv.resolve()), "1", "0.2", "0.8", "2"]
    assert cells[-1] == "UTC"
    [record] = json.loads(pinqpy("ledger", "--format", "json").stdout)
    assert record["spent"] == pytest.approx(0.2) and record["queries"] == 2
    assert record["last_query"].endswith("+00:00")  # programs get the ISO 8601 time
    charges = pinqpy("ledger", str(state / "ledger.db"), "--charges", "--format", "csv")
    assert charges.returncode == 0, charges.stderr
    rows = charges.stdout.splitlines()
    assert rows[0] == "query,time,table,budget,epsilon,label"
    assert rows[2].endswith(",0.1,SELECT COUNT(*) FROM people WHERE age > 30")
    assert (state / "ledger.db").read_bytes() == before  # read-only


def test_pinqpy_ledger_of_a_server_file_names_the_analysts(tmp_path: Path) -> None:
    from pinqpy.accounting.cost import Cost
    from pinqpy.accounting.ledger import ChargeRecord

    path = tmp_path / "server.db"
    with Ledger(path) as led:
        led.open_budget("analyst:ada/adult", Cost(epsilon=1))
        led.open_budget("group:team/adult", Cost(epsilon=2))
        led.charge([("group:team/adult", Cost(Fraction(1, 2)))], ChargeRecord("count"), {})
    proc = pinqpy("ledger", str(path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:2] == ["analyst", "table"]
    assert lines[2].split()[:7] == ["analyst", "ada", "adult", "1", "0", "1", "0"]
    assert lines[3].split()[:7] == ["group", "team", "adult", "2", "0.5", "1.5", "1"]


def test_pinqpy_ledger_errors_are_one_line(tmp_path: Path) -> None:
    missing = pinqpy("ledger", str(tmp_path / "nope.db"))
    assert missing.returncode == 1
    assert missing.stderr.startswith("pinqpy: error: ledger ")
    assert "no ledger file" in missing.stderr
    assert len(missing.stderr.splitlines()) == 1
    assert not (tmp_path / "nope.db").exists()
    bad = pinqpy("ledger", "--format", "xml")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
