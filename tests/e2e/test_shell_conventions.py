"""``pinqpy shell`` speaks the conventions of the sqlite3 and duckdb shells, checked as a user
meets them: as real subprocesses (``-c``, ``-f``, ``-bail``, ``.mode``, ``.output``,
``.read``) and through a pseudo-terminal. Also: fix-it hints in the shell's and the command
line's own terms, intervals printed as ``value [lo, hi]`` where they are lopsided,
``--demo-data``, and ``pinqpy demo``'s last line.
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pinqpy.demo import NEXT_STEP, load_pums
from tests.e2e.test_cli import pinqpy

COUNT_CELL = re.compile(r"^\s*(\d+) ± (\d+)\s*$")
BRACKET_CELL = re.compile(r"(-?[\d.]+) \[(-?[\d.]+), (-?[\d.]+)\]")


@pytest.fixture(scope="module")
def bare_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The PUMS sample as a file of one's own, with no public facts declared."""
    path = tmp_path_factory.mktemp("conventions") / "people.csv"
    load_pums().to_csv(path, index=False)
    return path


def shell(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return pinqpy("shell", "--demo-data", *args, stdin=stdin)


# -- -c, -f, -bail and the exit status --------------------------------------------------------


def test_c_runs_the_statements_and_exits() -> None:
    proc = shell("-c", "SELECT COUNT(*) AS n FROM pums")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0].strip() == "n"
    value, half = (int(x) for x in COUNT_CELL.match(lines[2]).groups())  # type: ignore[union-attr]
    assert abs(value - 1000) <= 3 * half
    assert "charged epsilon 0.1 on pums: 1 measurement x 0.1 x stability 1; 0.9 left" in proc.stdout
    assert "pinqpy shell:" not in proc.stdout  # no banner


def test_without_bail_a_run_goes_on_and_exits_1_at_the_end() -> None:
    proc = shell("-c", "SELECT nope FROM pums; SHOW TABLES; SELECT COUNT(*) FROM pums")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error (line 1): unknown column 'nope'")
    assert "private" in proc.stdout  # SHOW TABLES ran after the failure
    assert "charged epsilon 0.1 on pums" in proc.stdout  # and so did the query


def test_bail_stops_at_the_first_error_with_status_1() -> None:
    script = "SHOW TABLES;\nSELECT nope FROM pums;\nSELECT COUNT(*) FROM pums;\n"
    for flags, stdin in (("-bail", None), ("--bail", None), ("-bail", script)):
        args = ["-c", script] if stdin is None else []
        proc = shell(flags, *args, stdin=stdin)
        assert proc.returncode == 1
        assert "private" in proc.stdout  # the statement before the failure ran
        assert "unknown column 'nope'" in proc.stderr
        assert "charged" not in proc.stdout  # the one after it did not
    # .bail on inside a script does the same from there on.
    proc = shell("-c", ".bail on\nSELECT nope FROM pums;\nSELECT COUNT(*) FROM pums;")
    assert proc.returncode == 1 and "charged" not in proc.stdout
    # All good: status 0.
    assert shell("-bail", "-c", "SHOW TABLES").returncode == 0


def test_f_runs_a_file_naming_it_in_errors(tmp_path: Path) -> None:
    script = tmp_path / "queries.sql"
    script.write_text(
        "-- two queries and a typo\n"
        "SELECT COUNT(*) AS n FROM pums;\n"
        "SELECT agee FROM pums;\n"
        "SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex;\n",
        encoding="utf-8",
    )
    proc = shell("-f", str(script))
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"error ({script} line 3): unknown column 'agee'")
    assert proc.stdout.count("charged epsilon 0.1 on pums") == 2
    proc = shell("-f", str(script), "-bail")
    assert proc.returncode == 1
    assert proc.stdout.count("charged epsilon 0.1 on pums") == 1
    # '-' reads standard input.
    proc = shell("-f", "-", stdin="SELECT COUNT(*) FROM pums;")
    assert proc.returncode == 0 and "charged" in proc.stdout
    # A missing file and -c with -f are one-line errors.
    proc = shell("-f", str(tmp_path / "missing.sql"))
    assert proc.returncode == 1
    assert proc.stderr.strip().endswith("(No such file or directory)")
    assert "Traceback" not in proc.stderr
    proc = shell("-f", str(script), "-c", "SHOW TABLES")
    assert proc.returncode == 2
    assert "-c SQL and -f FILE" in proc.stderr


# -- .mode and --format -----------------------------------------------------------------------


def test_mode_csv_has_interval_columns_and_the_footer_on_stderr() -> None:
    proc = shell("-c", ".mode csv\nSELECT sex, COUNT(*) AS n FROM pums GROUP BY sex;")
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert list(rows[0]) == ["sex", "n", "n_ci_low", "n_ci_high"]
    assert [r["sex"] for r in rows] == ["0", "1"]
    for row in rows:
        low, n, high = int(row["n_ci_low"]), int(row["n"]), int(row["n_ci_high"])
        assert low < n < high and n - low == high - n
    # What the query spent is still shown, apart from the data.
    assert "charged epsilon 0.1 on pums: " in proc.stderr and "; 0.9 left)" in proc.stderr
    # and no word on how to read '±' cells, which csv has none of
    assert "±" not in proc.stderr and "interval" not in proc.stderr
    assert proc.stderr.startswith("(2 rows; charged epsilon 0.1 on pums")


def test_mode_json_and_the_format_flag() -> None:
    for args in (
        ["-c", ".mode json\nSELECT COUNT(*) AS n FROM pums;"],
        ["--format", "json", "-c", "SELECT COUNT(*) AS n FROM pums;"],
    ):
        proc = shell(*args)
        assert proc.returncode == 0, proc.stderr
        [record] = json.loads(proc.stdout)
        assert set(record) == {"n", "n_ci_low", "n_ci_high"}
        assert record["n_ci_low"] < record["n"] < record["n_ci_high"]
    proc = shell("-c", ".mode")
    assert proc.stdout.strip() == "results print as table"
    proc = shell("-c", ".mode xml")
    assert proc.returncode == 1
    assert ".mode takes one of table, csv, json, markdown, not 'xml'" in proc.stderr


def test_mode_markdown_prints_a_pipe_table() -> None:
    proc = shell("-c", ".mode markdown\nSELECT married, COUNT(*) AS n FROM pums GROUP BY married;")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "| married | n |"
    assert lines[1] == "| ---: | ---: |"
    for line, key in zip(lines[2:4], ("0", "1"), strict=True):
        assert re.fullmatch(rf"\| {key} \| \d+ ± \d+ \|", line), line


# -- .output and .read ------------------------------------------------------------------------


def test_output_sends_results_to_a_file_and_back(tmp_path: Path) -> None:
    out = tmp_path / "answers.csv"
    proc = shell(
        "-c",
        f".mode csv\n.output {out}\nSELECT COUNT(*) AS n FROM pums;\n.tables\n.output\n"
        "SELECT COUNT(*) AS m FROM pums WHERE age > 40;",
    )
    assert proc.returncode == 0, proc.stderr
    written = out.read_text(encoding="utf-8")
    assert written.startswith("n,n_ci_low,n_ci_high\n")
    assert "pums (private): age, sex" in written  # .tables is a result too
    assert "m,m_ci_low" not in written
    assert proc.stdout.startswith("m,m_ci_low,m_ci_high\n")
    # A file that cannot be written is an error, and results stay on the screen.
    proc = shell("-c", f".output {tmp_path / 'no' / 'such' / 'dir.txt'}\nSHOW TABLES;")
    assert proc.returncode == 1
    assert ".output: cannot write" in proc.stderr
    assert "private" in proc.stdout


def test_read_runs_a_file_and_names_it_in_errors(tmp_path: Path) -> None:
    inner = tmp_path / "inner.sql"
    inner.write_text(".mode json\nSELECT COUNT(*) AS n FROM pums;\nSELECT nope FROM pums;\n")
    outer = tmp_path / "outer.sql"
    outer.write_text(f".read {inner}\nSHOW TABLES;\n")
    proc = shell("-f", str(outer))
    assert proc.returncode == 1
    assert f"error ({inner} line 3): unknown column 'nope'" in proc.stderr
    first, second = proc.stdout.splitlines()[:2]
    assert set(json.loads(first)[0]) == {"n", "n_ci_low", "n_ci_high"}
    assert json.loads(second)[0]["table"] == "pums"  # the outer file went on, in json mode
    # A missing file; a file that reads itself stops at a depth limit.
    proc = shell("-c", f".read {tmp_path / 'missing.sql'}")
    assert proc.returncode == 1 and ".read: cannot read" in proc.stderr
    loop = tmp_path / "loop.sql"
    loop.write_text(f".read {loop}\n")
    proc = shell("-c", f".read {loop}")
    assert proc.returncode == 1
    assert "files read each other too deeply" in proc.stderr


# -- intervals --------------------------------------------------------------------------------


def test_a_lopsided_interval_prints_as_value_and_bounds() -> None:
    # At epsilon 0.05 the mean income's interval is far wider than the mean, so it is clipped
    # to the column's public bounds [0, 500000] on the low side: not centred on the value.
    proc = shell(
        "-c", "SELECT COUNT(*) AS n, AVG(income) AS income FROM pums OPTIONS (epsilon = 0.05);"
    )
    assert proc.returncode == 0, proc.stderr
    row = proc.stdout.splitlines()[2]
    count, income = re.split(r"\s{2,}", row.strip())
    assert COUNT_CELL.match(count)  # a count's interval is symmetric: value ± half-width
    match = BRACKET_CELL.fullmatch(income)
    assert match, row
    value, low, high = (float(x) for x in match.groups())
    assert low == 0 and low <= value <= high <= 500_000
    assert high - value != value - low
    assert "[lo, hi] the interval where lopsided" in proc.stdout


# -- demo data --------------------------------------------------------------------------------


def test_demo_data_needs_no_file_and_keeps_no_ledger(tmp_path: Path) -> None:
    for _ in range(2):  # a fresh budget of epsilon 1 on every run
        proc = pinqpy("query", "--demo-data", "SELECT COUNT(*) AS n FROM pums")
        assert proc.returncode == 0, proc.stderr
        assert COUNT_CELL.match(proc.stdout.splitlines()[2])
    proc = pinqpy(
        "query", "--demo-data", "SELECT sex, AVG(age) AS age FROM pums GROUP BY sex"
    )  # bounds and keys are declared
    assert proc.returncode == 0, proc.stderr
    # With --ledger the budget is kept: a second query finds it spent.
    ledger = tmp_path / "demo.db"
    args = ["query", "--demo-data", "--ledger", str(ledger)]
    kept = pinqpy(*args, "SELECT COUNT(*) FROM pums")
    assert kept.returncode == 0 and kept.stderr == "charged epsilon 0.1 to pums; 0.9 of 1 left\n"
    proc = pinqpy(*args, "--epsilon-per-query", "0.95", "SELECT COUNT(*) FROM pums WHERE age > 30")
    assert proc.returncode == 1 and "budget exceeded" in proc.stderr


def test_demo_data_with_other_flags(bare_csv: Path) -> None:
    proc = pinqpy(
        "query",
        "--demo-data",
        "--epsilon",
        "2",
        "--format",
        "json",
        "SELECT COUNT(*) AS n FROM pums",
    )
    assert proc.returncode == 0, proc.stderr
    [record] = json.loads(proc.stdout)
    # --epsilon 2 is the budget, and the query spends a tenth of it: a discrete Laplace of
    # scale 5, whose 95% half-width is 15 (it is 30 at the default budget of epsilon 1).
    assert record["n_ci_high"] - record["n"] == 15
    assert proc.stderr == "charged epsilon 0.2 to pums; 1.8 of 2 left\n"
    proc = pinqpy("query", "--demo-data", f"pums={bare_csv}", "--epsilon", "1", "SHOW TABLES")
    assert proc.returncode == 2
    assert "table name 'pums' is given twice (--demo-data names its table pums)" in proc.stderr
    proc = pinqpy("query", "--demo-data", "--connect", "http://127.0.0.1:9", "SHOW TABLES")
    assert proc.returncode == 2
    assert "--demo-data describes local files" in proc.stderr
    proc = pinqpy("query", "SHOW TABLES")
    assert proc.returncode == 2
    assert "NAME=PATH, --epsilon (or --demo-data for the bundled sample)" in proc.stderr


def test_demo_ends_with_the_next_command_which_runs() -> None:
    proc = pinqpy("demo")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().splitlines()[-1] == NEXT_STEP
    command = NEXT_STEP.split(": ", 1)[1].split()
    assert command == ["pinqpy", "shell", "--demo-data"]
    proc = pinqpy(*command[1:], stdin="SELECT COUNT(*) FROM pums;\n")
    assert proc.returncode == 0, proc.stderr


# -- fix-it hints in the interface's own terms ------------------------------------------------


def test_hints_speak_the_shell_and_the_command_line(bare_csv: Path) -> None:
    table = [f"people={bare_csv}", "--epsilon", "1"]
    proc = pinqpy("shell", *table, "-c", "SELECT AVG(income) FROM people")
    assert proc.returncode == 1
    assert "needs bounds: start the shell with --bounds income=LO:HI, or write them inline" in (
        proc.stderr
    )
    assert "registering" not in proc.stderr
    proc = pinqpy("query", *table, "SELECT AVG(income) FROM people")
    assert proc.returncode == 1
    assert "needs bounds: pass --bounds income=LO:HI, or write them inline" in proc.stderr
    proc = pinqpy("query", *table, "SELECT race, COUNT(*) FROM people GROUP BY race")
    assert proc.returncode == 1
    assert "pass --keys race=K1,K2,..." in proc.stderr
    assert "delta=" not in proc.stderr
    proc = pinqpy("shell", *table, "-c", "SELECT race, COUNT(*) FROM people GROUP BY race")
    assert "start the shell with --keys race=K1,K2,..." in proc.stderr
    assert ".delta 1e-6" in proc.stderr


# -- at a terminal ----------------------------------------------------------------------------


def test_dot_commands_at_a_terminal(tmp_path: Path) -> None:
    pexpect = pytest.importorskip("pexpect")
    pytest.importorskip("prompt_toolkit")
    if sys.platform == "win32":  # pragma: no cover
        pytest.skip("pseudo-terminals need a POSIX system")
    from tests.e2e.test_repl import TIMEOUT, Terminal, environment

    script = tmp_path / "two.sql"
    script.write_text("SELECT COUNT(*) AS from_file FROM pums;\n", encoding="utf-8")
    out = tmp_path / "out.md"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "pinqpy", "shell", "--demo-data"],
        env=environment(tmp_path, TERM="xterm"),
        dimensions=(40, 160),
        encoding="utf-8",
        timeout=TIMEOUT,
    )
    term = Terminal(child)
    try:
        term.expect(r"Demo data: pums is the bundled PUMS sample")
        term.expect(r"budget is not kept: it starts afresh on every run")
        term.expect(r"pinqpy>")
        term.send(".help\r")
        for command in (".mode", ".output", ".read", ".bail"):
            term.expect(re.escape(command))
        term.send(".mode csv\r")
        term.send("SELECT COUNT(*) AS n FROM pums;\r")
        term.expect(r"n,n_ci_low,n_ci_high\n\d+,\d+,\d+")
        term.expect(r"charged epsilon 0\.1 on pums: [^\n]*; 0\.9 left")
        term.send(".mode markdown\r")
        term.send(f".output {out}\r")
        term.send(f".read {script}\r")
        term.send(".output\r")
        term.send(".mode table\r")
        term.send("SELECT nope FROM pums;\r")
        term.expect(r"error: unknown column 'nope'")
        term.send("SELECT COUNT(*) AS back FROM pums;\r")
        term.expect(r"back\s*\n-+\n\s*\d+ ± \d+")
        term.send(".quit\r")
        assert term.finish() == 0
    finally:
        if child.isalive():
            child.terminate(force=True)
    written = out.read_text(encoding="utf-8")
    assert written.startswith("| from_file |\n| ---: |\n| ")
