"""The ``pinqpy`` command as a user runs it: real subprocesses over the real PUMS sample.

``pinqpy query`` answers one statement in three formats; ``pinqpy demo`` still runs; every
user error (bad file, column, flag or query) is one line on standard error and a non-zero
exit status, never a traceback.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from pinqpy.demo import load_pums

LN20 = math.log(20)  # a Laplace variable's 95% interval is ±scale·ln(20)


def pinqpy(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m pinqpy ARGS`` as a separate process."""
    full_env = {
        k: v for k, v in os.environ.items() if k not in ("PINQPY_DEBUG", "PINQPY_PROGRESS_BYTES")
    }
    full_env |= {"PYTHONIOENCODING": "utf-8", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "pinqpy", *args],
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=full_env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


PUMS_INTS = ("age", "sex", "educ", "race", "married")


@pytest.fixture(scope="module")
def pums() -> pd.DataFrame:
    return load_pums()


@pytest.fixture(scope="module")
def people_csv(tmp_path_factory: pytest.TempPathFactory, pums: pd.DataFrame) -> Path:
    path = tmp_path_factory.mktemp("cli") / "people.csv"
    pums.to_csv(path, index=False)
    return path


# The file's column types, declared as a curator declares them (inferred ones are warned
# about on stderr, which these tests read).
SCHEMA = [f"--schema={c}={t}" for c, t in [*((c, "int") for c in PUMS_INTS), ("income", "float")]]


def table_args(people_csv: Path) -> list[str]:
    return [
        f"people={people_csv}",
        *SCHEMA,
        "--epsilon",
        "1",
        "--bounds",
        "age=0:100",
        "--bounds",
        "income=0:500000",
        "--keys",
        "sex=0,1",
    ]


def parse_table(stdout: str) -> tuple[list[str], list[list[str]]]:
    """Header names and row cells of the aligned table (cells split at 2+ spaces)."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert set(lines[1].replace(" ", "")) == {"-"}, stdout
    header = lines[0].split()
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[2:] if not line.startswith("(")]
    return header, rows


def value_pm(cell: str) -> tuple[float, float]:
    """A noisy cell's value and the half-width of its interval: ``value ± half``, or
    ``value [lo, hi]`` where the interval is lopsided (a mean's often is)."""
    if "[" in cell:
        value, _, rest = cell.partition("[")
        low, high = (float(x) for x in rest.rstrip("]").split(","))
        assert low <= high
        return float(value), (high - low) / 2
    value, half = cell.split("±")
    return float(value), float(half)


# -- answers ----------------------------------------------------------------------------------


def test_query_table_format_shows_each_group_with_its_accuracy(
    people_csv: Path, pums: pd.DataFrame
) -> None:
    proc = pinqpy(
        "query",
        *table_args(people_csv),
        "--epsilon-per-query",
        "0.5",
        "SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM people GROUP BY sex",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "charged epsilon 0.5 to people; 0.5 of 1 left\n"
    header, rows = parse_table(proc.stdout)
    assert header == ["sex", "n", "mean_age"]
    assert [r[0] for r in rows] == ["0", "1"]
    exact = pums.groupby("sex").agg(n=("age", "size"), mean_age=("age", "mean"))
    for cells in rows:
        sex = int(cells[0])
        n, n_half = value_pm(cells[1])
        mean, mean_half = value_pm(cells[2])
        # Two measurements share 0.5: the count's Laplace scale is 1 / 0.25.
        assert n_half == pytest.approx(4 * LN20, rel=0.02)
        assert abs(n - exact.loc[sex, "n"]) <= 3 * n_half
        assert abs(mean - exact.loc[sex, "mean_age"]) <= 3 * mean_half
        assert 0 <= mean <= 100


def test_query_csv_format_adds_interval_columns(people_csv: Path, pums: pd.DataFrame) -> None:
    proc = pinqpy(
        "query",
        *table_args(people_csv),
        "--format",
        "csv",
        "SELECT married, COUNT(*) AS n FROM people GROUP BY married IN (0, 1)",
    )
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert list(rows[0]) == ["married", "n", "n_ci_low", "n_ci_high"]
    exact = pums["married"].value_counts()
    for row in rows:
        n, low, high = float(row["n"]), float(row["n_ci_low"]), float(row["n_ci_high"])
        assert low < n < high
        # epsilon 0.1 (a tenth of the budget, the default share) on one count: scale 10.
        assert (high - low) / 2 == pytest.approx(10 * LN20, rel=0.02)
        assert abs(n - exact[int(row["married"])]) <= 3 * (high - low)


def test_query_json_format_and_options_override_the_default_epsilon(people_csv: Path) -> None:
    proc = pinqpy(
        "query",
        *table_args(people_csv),
        "--epsilon-per-query",
        "0.5",
        "--format",
        "json",
        "SELECT COUNT(*) AS n FROM people WHERE age >= 65 OPTIONS (epsilon = 0.25)",
    )
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)
    assert len(records) == 1
    assert set(records[0]) == {"n", "n_ci_low", "n_ci_high"}
    half = (records[0]["n_ci_high"] - records[0]["n_ci_low"]) / 2
    assert half == pytest.approx(LN20 / 0.25, rel=0.02)  # OPTIONS, not --epsilon-per-query


def test_query_explain_show_and_describe(people_csv: Path) -> None:
    explain = pinqpy(
        "query", *table_args(people_csv), "EXPLAIN SELECT AVG(income) FROM people WHERE age > 30"
    )
    assert explain.returncode == 0, explain.stderr
    assert "charges nothing" in explain.stdout
    assert "Total charge" in explain.stdout
    tables = pinqpy("query", *table_args(people_csv), "--format", "json", "SHOW TABLES")
    assert json.loads(tables.stdout)[0]["table"] == "people"
    described = pinqpy("query", *table_args(people_csv), "DESCRIBE people")
    assert described.returncode == 0, described.stderr
    header, rows = parse_table(described.stdout)
    assert header[:2] == ["column", "type"]
    assert [r[0] for r in rows] == ["age", "sex", "educ", "race", "income", "married"]
    assert "[0, 100]" in described.stdout


def test_privacy_unit_max_rows_and_public_tables(tmp_path: Path, pums: pd.DataFrame) -> None:
    visits = pums.assign(pid=range(len(pums)))
    visits = pd.concat([visits, visits.iloc[: len(pums) // 2]], ignore_index=True)
    visits.to_csv(tmp_path / "visits.csv", index=False)
    labels = pd.DataFrame({"sex": [0, 1], "label": ["male", "female"]})
    labels.to_csv(tmp_path / "labels.csv", index=False)
    common = [
        f"visits={tmp_path / 'visits.csv'}",
        "--epsilon",
        "2",
        "--privacy-unit",
        "visits=pid",
        "--max-rows",
        "visits=2",
        "--public",
        f"labels={tmp_path / 'labels.csv'}",
    ]
    plan = pinqpy("query", *common, "EXPLAIN SELECT COUNT(*) FROM visits")
    assert plan.returncode == 0, plan.stderr
    assert "stability 2" in plan.stdout
    joined = pinqpy(
        "query",
        *common,
        "--format",
        "json",
        "SELECT l.label, COUNT(*) AS n FROM visits v JOIN labels l ON v.sex = l.sex "
        "GROUP BY l.label",
    )
    assert joined.returncode == 0, joined.stderr
    assert sorted(r["label"] for r in json.loads(joined.stdout)) == ["female", "male"]


def test_a_large_file_shows_a_progress_line(people_csv: Path) -> None:
    proc = pinqpy(
        "query",
        *table_args(people_csv),
        "SELECT COUNT(*) FROM people",
        env={"PINQPY_PROGRESS_BYTES": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "loading people" in proc.stderr
    assert "100%" in proc.stderr
    assert "±" in proc.stdout  # the answer itself is unaffected


def test_parquet_files(tmp_path: Path, pums: pd.DataFrame) -> None:
    path = tmp_path / "people.parquet"
    if importlib.util.find_spec("pyarrow") is None:
        path.write_bytes(b"PAR1 not really parquet")
        proc = pinqpy("query", f"people={path}", "--epsilon", "1", "SELECT COUNT(*) FROM people")
        assert proc.returncode == 1
        assert "needs pyarrow" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    else:
        pums.to_parquet(path)
        proc = pinqpy("query", f"people={path}", "--epsilon", "1", "SELECT COUNT(*) FROM people")
        assert proc.returncode == 0, proc.stderr


def test_demo_still_runs() -> None:
    proc = pinqpy("demo")
    assert proc.returncode == 0, proc.stderr
    assert "pinqpy demo" in proc.stdout
    assert "BudgetExceededError" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_help() -> None:
    top = pinqpy("--help")
    assert top.returncode == 0
    assert "shell" in top.stdout and "query" in top.stdout and "serve" in top.stdout
    sub = pinqpy("query", "--help")
    assert sub.returncode == 0
    assert "--epsilon-per-query" in sub.stdout and "--format" in sub.stdout
    assert "--ledger" in sub.stdout and "--no-ledger" in sub.stdout
    assert "--connect" in sub.stdout and "--token-env" in sub.stdout
    serve = pinqpy("serve", "--help")
    assert serve.returncode == 0
    assert "--add-analyst" in serve.stdout and "--demo" in serve.stdout


# -- errors -----------------------------------------------------------------------------------


OK = "SELECT COUNT(*) FROM people"
P = ["query", "people={people}", *SCHEMA, "--epsilon", "1"]

ERROR_CASES = [
    ("missing file", ["query", "people={tmp}/nope.csv", "--epsilon", "1", OK], 1, "no such file"),
    ("empty file", ["query", "people={tmp}/empty.csv", "--epsilon", "1", OK], 1, "empty"),
    ("directory", ["query", "people={tmp}/", "--epsilon", "1", OK], 1, "directory"),
    ("file type", ["query", "people={tmp}/people.xlsx", "--epsilon", "1", OK], 1, ".xlsx"),
    ("query column", [*P, "SELECT COUNT(*) FROM people WHERE agee > 3"], 1, "did you mean 'age'"),
    ("flag column", [*P, "--bounds", "agee=0:1", OK], 2, "no private table has a column 'agee'"),
    ("bounds syntax", [*P, "--bounds", "age=0-1", OK], 2, "COLUMN=LO:HI"),
    ("numeric keys", [*P, "--keys", "sex=M,F", OK], 2, "numbers"),
    ("unknown flag", [*P, "--bogus", OK], 2, "--bogus"),
    ("bad epsilon", ["query", "people={people}", "--epsilon", "abc", OK], 2, "abc"),
    ("no epsilon", ["query", "people={people}", OK], 2, "--epsilon"),
    ("bad format", [*P, "--format", "xml", OK], 2, "xml"),
    ("syntax", [*P, "SELEC COUNT(*) FROM people"], 1, "line 1, column 1"),
    ("raw rows", [*P, "SELECT * FROM people"], 1, ""),
    ("over budget", [*P, "--epsilon-per-query", "2", OK], 1, "budget exceeded"),
    ("unknown table", [*P, "SELECT COUNT(*) FROM nobody"], 1, "nobody"),
    ("no command", [], 2, "command"),
    ("unknown command", ["frobnicate"], 2, "frobnicate"),
    ("shell file", ["shell", "people={tmp}/nope.csv", "--epsilon", "1"], 1, "no such file"),
]


@pytest.mark.parametrize(
    ("args", "status", "fragment"),
    [pytest.param(a, s, f, id=name) for name, a, s, f in ERROR_CASES],
)
def test_errors_are_one_line_and_non_zero(
    args: list[str], status: int, fragment: str, people_csv: Path, tmp_path: Path
) -> None:
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "people.xlsx").write_text("a,b\n1,2\n")
    proc = pinqpy(*(a.format(people=people_csv, tmp=tmp_path) for a in args))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == status, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("pinqpy"), lines
    assert fragment in lines[0], lines
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout == ""


# -- what a query charged, and hints in the command line's words ------------------------------


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "markdown"])
def test_query_spends_a_tenth_and_says_so_on_stderr_in_every_format(
    fmt: str, tmp_path: Path
) -> None:
    ledger = str(tmp_path / "ledger.db")
    left = ["0.9", "0.8"]
    for i, remaining in enumerate(left):
        proc = pinqpy(
            "query", "--demo-data", "--ledger", ledger, "--format", fmt,
            f"SELECT COUNT(*) AS n FROM pums WHERE age > {30 + i}",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == f"charged epsilon 0.1 to pums; {remaining} of 1 left\n"
        assert "charged" not in proc.stdout
    if fmt == "json":
        [record] = json.loads(proc.stdout)
        # a tenth of the budget on one count: a discrete Laplace of scale 10
        assert record["n_ci_high"] - record["n"] == round(10 * LN20)
    again = pinqpy("query", "--demo-data", "--ledger", ledger, "--format", fmt,
                   "SELECT COUNT(*) AS n FROM pums WHERE age > 30")  # fmt: skip
    assert again.stderr == (
        "charged nothing: the same query was answered before (pums: 0.8 of 1 left)\n"
    )
    plan = pinqpy("query", "--demo-data", "--ledger", ledger, "--format", fmt,
                  "EXPLAIN SELECT COUNT(*) FROM pums")  # fmt: skip
    assert plan.returncode == 0 and plan.stderr == ""  # EXPLAIN says itself that it is free


def test_query_hints_speak_the_command_line(tmp_path: Path, pums: pd.DataFrame) -> None:
    path = tmp_path / "adult.csv"
    pums.to_csv(path, index=False)
    base = ["query", f"adult={path}", "--epsilon", "1", "--no-ledger"]
    over = pinqpy(*base, "--epsilon-per-query", "2", "SELECT COUNT(*) FROM adult")
    assert over.returncode == 1
    line = over.stderr.splitlines()[-1]
    assert "the query needs epsilon 2 but only epsilon 1 remains (nothing was charged)" in line
    assert "--epsilon-per-query" in line and "Cost(" not in line and "epsilon=" not in line
    delta = pinqpy(*base, "SELECT COUNT(*) FROM adult OPTIONS (delta = 1e-6, noise = 'gaussian')")
    assert "--delta D" in delta.stderr and "delta=" not in delta.stderr
    bounds = pinqpy(*base, "SELECT AVG(age) FROM adult")
    assert "pass --bounds age=LO:HI" in bounds.stderr and "bounds=" not in bounds.stderr
    # educ's type was inferred from the CSV text (digits: int); the curator can declare it
    typed = pinqpy(*base, "SELECT COUNT(*) FROM adult WHERE educ = 'BA'")
    assert typed.returncode == 1
    assert "educ: type inferred from the file's text" in typed.stderr
    assert "--schema educ=TYPE" in typed.stderr and "schema=" not in typed.stderr
    declared = pinqpy(*base, "--schema", "educ=str", "SELECT COUNT(*) FROM adult WHERE educ = 'BA'")
    assert declared.returncode == 0, declared.stderr
