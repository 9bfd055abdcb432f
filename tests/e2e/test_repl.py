"""``pinqpy shell`` driven as a user drives it: through a pseudo-terminal (pexpect), and with
statements piped to its standard input.

The terminal is a fixed-size xterm; its output is read with the ANSI escape codes stripped,
so the checks see what a user sees. Cursor-position requests are turned off
(``PROMPT_TOOLKIT_NO_CPR``) because nobody answers them here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pinqpy.demo import load_pums

pexpect = pytest.importorskip("pexpect")
pytest.importorskip("prompt_toolkit")
if sys.platform == "win32":  # pragma: no cover
    pytest.skip("pseudo-terminals need a POSIX system", allow_module_level=True)

ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, modes
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC: window titles
    r"|\x1b[()][0-9A-Za-z]"  # character sets
    r"|\x1b[@-Z\\-_=>]"  # other two-character escapes
    r"|\r"
)
TIMEOUT = 15


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text)


class Terminal:
    """A ``pinqpy shell`` in a pseudo-terminal; ``expect`` waits for a regex in the visible
    text written since the last match."""

    def __init__(self, child: pexpect.spawn):
        self.child = child
        self.raw = ""
        self.mark = 0

    @property
    def screen(self) -> str:
        return strip_ansi(self.raw)

    def send(self, keys: str) -> None:
        self.child.send(keys)

    def expect(self, pattern: str, timeout: float = TIMEOUT) -> re.Match[str]:
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen
            match = regex.search(text, self.mark)
            if match:
                self.mark = match.end()
                return match
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"{pattern!r} did not appear; the screen ends:\n{text[-1500:]}"
                )
            try:
                self.raw += self.child.read_nonblocking(65536, timeout=min(left, 0.5))
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                text = self.screen
                if not regex.search(text, self.mark):
                    raise AssertionError(
                        f"the shell ended before {pattern!r}; the screen ends:\n{text[-1500:]}"
                    ) from None

    def since(self, start: int) -> str:
        return self.screen[start:]

    def finish(self) -> int:
        """Wait for the process to end; its exit status."""
        self.child.expect(pexpect.EOF, timeout=TIMEOUT)
        self.raw += self.child.before or ""
        self.child.close()
        return self.child.exitstatus


@pytest.fixture(scope="module")
def people_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("repl") / "people.csv"
    load_pums().to_csv(path, index=False)
    return path


# The file's column types, declared: an undeclared CSV makes pinqpy warn on stderr that its
# types were inferred (a public fact), which these tests of stderr would read.
SCHEMA = [f"--schema={c}={t}" for c, t in (
    ("age", "int"), ("sex", "int"), ("educ", "int"), ("race", "int"), ("income", "float"),
    ("married", "int"),
)]  # fmt: skip


def shell_args(people_csv: Path) -> list[str]:
    return [
        "-m",
        "pinqpy",
        "shell",
        f"people={people_csv}",
        *SCHEMA,
        "--epsilon",
        "1",
        "--bounds",
        "age=0:100",
        "--keys",
        "sex=0,1",
    ]


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PINQPY_")}
    env |= {
        "PINQPY_HISTORY": str(tmp_path / "history"),
        "PINQPY_STATE_DIR": str(tmp_path / "state"),
        "HOME": str(tmp_path),
        "PYTHONIOENCODING": "utf-8",
        "PROMPT_TOOLKIT_NO_CPR": "1",
        **extra,
    }
    return env


@pytest.fixture
def terminal(tmp_path: Path, people_csv: Path):
    child = pexpect.spawn(
        sys.executable,
        shell_args(people_csv),
        env=environment(tmp_path, TERM="xterm"),
        dimensions=(40, 160),
        encoding="utf-8",
        timeout=TIMEOUT,
    )
    term = Terminal(child)
    term.expect(r"pinqpy>")
    yield term
    if child.isalive():
        child.terminate(force=True)


# -- at a terminal ----------------------------------------------------------------------------


def test_a_query_shows_its_table_and_quit_exits_cleanly(terminal: Terminal, tmp_path: Path):
    # The banner says where the budgets are kept between runs.
    banner = terminal.screen.replace("\n", "")
    assert "Budgets are kept in the ledger" in banner
    assert str(tmp_path / "state" / "ledger.db") in banner
    terminal.send("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex;\r")
    start = terminal.mark
    terminal.expect(r"charged epsilon 0\.1 on people: [^\n]*; 0\.9 left")
    output = terminal.since(start)
    lines = [line.strip() for line in output.splitlines()]
    header = lines.index(next(line for line in lines if line.startswith("sex")))
    assert lines[header].split() == ["sex", "n"]
    assert set(lines[header + 1].replace(" ", "")) == {"-"}
    rows = [re.split(r"\s{2,}", line) for line in lines[header + 2 : header + 4]]
    assert [r[0] for r in rows] == ["0", "1"]
    for row in rows:
        value, half = (float(x) for x in row[1].split("±"))
        assert 400 < value < 650
        assert half == pytest.approx(10 * 2.9957, rel=0.02)  # epsilon 0.1: Laplace scale 10

    terminal.send(".budget\r")
    terminal.expect(r"people\s+1\s+0\.1\s+0\.9")
    terminal.send(".quit\r")
    assert terminal.finish() == 0
    history = (tmp_path / "history").read_text()
    assert "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex;" in history


def test_history_is_kept_across_runs(tmp_path: Path, people_csv: Path):
    (tmp_path / "history").write_text("\n# earlier\n+SELECT AVG(age) AS mean_age FROM people;\n")
    term = Terminal(
        pexpect.spawn(
            sys.executable,
            shell_args(people_csv),
            env=environment(tmp_path, TERM="xterm"),
            dimensions=(40, 160),
            encoding="utf-8",
            timeout=TIMEOUT,
        )
    )
    term.expect(r"pinqpy>")
    term.send("\x1b[A")  # the up arrow recalls the last statement of an earlier run
    term.expect(r"mean_age")
    term.send("\r")
    term.expect(r"mean_age\s*\n-+\n\s*[\d.]+ (± [\d.]+|\[[\d.]+, [\d.]+\])")
    term.send(".quit\r")
    assert term.finish() == 0


def test_tab_completes_keywords_tables_and_columns(terminal: Terminal):
    terminal.send("SEL\t")
    terminal.expect(r"SELECT")
    # Highlighted: the completed keyword is drawn with a colour of its own.
    assert re.search(r"\x1b\[[\d;]*m(?:\x1b\[[\d;?]*[a-zA-Z])*SELECT", terminal.raw)
    terminal.send(" COUNT(*) FROM peo\t")
    terminal.expect(r"people")
    terminal.send(" WHERE ag\t")
    terminal.expect(r"age")
    start = terminal.mark
    terminal.send(" >= 65;\r")
    terminal.expect(r"charged epsilon")
    assert "error" not in terminal.since(start)  # the completed statement ran

    # Tab after WHERE lists the columns in a menu.
    terminal.send("SELECT AVG(income, 0, 100000) FROM people WHERE \t")
    terminal.expect(r"column of people")
    terminal.expect(r"married")
    terminal.send("\x03")  # Ctrl-C clears the statement
    terminal.expect(r"pinqpy>")
    terminal.send(".tab\t")
    terminal.expect(r"\.tables")
    terminal.send("\r")
    terminal.expect(r"people \(private\): age, sex, educ, race, income, married")
    terminal.send("\x04")  # Ctrl-D leaves
    assert terminal.finish() == 0


def test_errors_show_a_caret_and_statements_span_lines(terminal: Terminal):
    terminal.send("SELECT COUNT(*) FROM people WHERE agee > 3;\r")
    message = terminal.expect(r"error: unknown column 'agee'[^\n]*\n(.*)\n(.*)\n")
    source, caret = message.group(1), message.group(2)
    assert caret.strip() == "^"
    assert source.index("agee") == caret.index("^")

    terminal.send("SELECT COUNT(*)\r")
    terminal.expect(r"\.\.\.>")  # a continuation line: no ';' yet
    terminal.send("  FROM people\r")
    terminal.expect(r"\.\.\.>")
    terminal.send("  WHERE age > 30;\r")
    terminal.expect(r"COUNT\(\*\)\s*\n-+\n\s*\d+ ± \d+")
    terminal.expect(r"charged epsilon 0\.1")

    terminal.send(".epsilon 0.25\r")
    terminal.expect(r"each query now spends epsilon 0\.25")
    terminal.send("SELECT AVG(age) FROM people;\r")
    terminal.expect(r"charged epsilon 0\.25 on people: [^\n]*; 0\.65 left")
    terminal.send("SELECT COUNT(*) FROM people OPTIONS (epsilon = 0.05);\r")
    terminal.expect(r"charged epsilon 0\.05 on people: [^\n]*; 0\.6 left")
    terminal.send("EXPLAIN SELECT COUNT(*) FROM people WHERE sex = 1;\r")
    terminal.expect(r"Total charge")
    terminal.send("SELECT COUNT(*) FROM people OPTIONS (epsilon = 5);\r")
    terminal.expect(r"error: privacy budget exceeded")
    terminal.send(".quit\r")
    assert terminal.finish() == 0


# -- with standard input not a terminal -------------------------------------------------------


def run_piped(people_csv: Path, tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *shell_args(people_csv)],
        input=script,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=environment(tmp_path),
        timeout=60,
        check=False,
    )


def test_piped_statements(people_csv: Path, tmp_path: Path):
    proc = run_piped(people_csv, tmp_path, "SELECT COUNT(*) FROM people;\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0].strip() == "COUNT(*)"
    value, half = (float(x) for x in lines[2].split("±"))
    assert abs(value - len(load_pums())) <= 3 * half
    assert "pinqpy>" not in proc.stdout  # no prompt, no banner


def test_piped_script_runs_every_statement_and_fails_if_one_did(people_csv: Path, tmp_path: Path):
    script = (
        "-- a script of queries\n"
        "SELECT sex, AVG(age) AS mean_age\n"
        "  FROM people\n"
        " GROUP BY sex;\n"
        ".epsilon 0.2\n"
        "SELECT COUNT(*) FROM people WHERE agee > 3;\n"
        "SHOW BUDGET;\n"
        "SELECT COUNT(*) AS n FROM people WHERE 'a;b' = 'a;b'"  # the last ';' may be missing
    )
    proc = run_piped(people_csv, tmp_path, script)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    errors = proc.stderr.splitlines()
    assert errors[0].startswith("error (line 6): unknown column 'agee'")
    assert errors[2].strip() == "^"
    assert errors[1].index("agee") == errors[2].index("^")
    out = proc.stdout
    assert "mean_age" in out and "each query now spends epsilon 0.2" in out
    assert "spent_epsilon" in out  # SHOW BUDGET ran after the failure
    assert re.search(r"charged epsilon 0\.2 on people: [^\n]*; 0\.7 left", out)


def test_piped_quit_stops_and_all_good_exits_zero(people_csv: Path, tmp_path: Path):
    proc = run_piped(people_csv, tmp_path, "SHOW TABLES;\n.quit\nSELECT COUNT(*) FROM nobody;\n")
    assert proc.returncode == 0, proc.stderr
    assert "people" in proc.stdout
    assert proc.stderr == ""


# -- over a pinqpy server ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    """A real ``pinqpy serve`` process on 127.0.0.1: PUMS as ``pums``, analyst ``alice``
    with a budget of epsilon 10."""
    from tests.remote.harness import start_server

    with start_server(tmp_path_factory.mktemp("server")) as srv:
        yield srv


def test_connect_asks_for_the_token_hidden_and_runs_the_same_shell(tmp_path: Path, server):
    url, token = server.url, server.tokens["alice"]
    child = pexpect.spawn(
        sys.executable,
        ["-m", "pinqpy", "shell", "--connect", url],
        env=environment(tmp_path, TERM="xterm"),
        dimensions=(40, 160),
        encoding="utf-8",
        timeout=TIMEOUT,
    )
    term = Terminal(child)
    term.expect(re.escape(f"pinqpy token for {url}: "))
    start = term.mark
    term.send(token + "\r")
    term.expect(r"pinqpy shell: private tables pums")
    assert token not in term.since(start)  # typed without echo
    term.expect(re.escape(f"Connected to {url}: the server keeps the budgets."))
    term.expect(r"pinqpy>")
    term.send("SELECT COUNT(*) FROM pums;\r")
    term.expect(r"charged epsilon 1 to pums \(9 left\)")  # a tenth of the budget
    term.send("SELECT COUNT(*) FROM pu\t")
    term.expect(r"pums")
    term.send(" WHERE ag\t")
    term.expect(r"age")
    term.send(" > 30;\r")
    term.expect(r"charged epsilon 1 to pums \(8 left\)")
    term.send("SELECT COUNT(*) FROM pums WHERE agee > 3;\r")
    term.expect(r"\^")  # the server's error, with its caret under the fault
    term.send(".quit\r")
    assert term.finish() == 0
    assert token not in term.screen


def test_connect_with_a_wrong_token_is_one_line(tmp_path: Path, server):
    proc = subprocess.run(
        [sys.executable, "-m", "pinqpy", "shell", "--connect", server.url],
        input="SELECT COUNT(*) FROM pums;\n",
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=environment(tmp_path, PINQPY_TOKEN="wrong"),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        "pinqpy: error: a valid analyst token is required (Authorization: Bearer <token>)\n"
    )
    assert proc.stdout == ""


# -- progress on long work --------------------------------------------------------------------


def _spawn(argv: list[str], tmp_path: Path, **env: str) -> Terminal:
    child = pexpect.spawn(
        argv[0], argv[1:], env=environment(tmp_path, TERM="xterm", **env),
        dimensions=(40, 160), encoding="utf-8", timeout=TIMEOUT,
    )  # fmt: skip
    return Terminal(child)


def test_a_slow_query_shows_running_query_on_the_terminal_and_erases_it(tmp_path: Path):
    # PINQPY_PROGRESS_AFTER=0 shows the spinner at once (a real one waits about a second).
    argv = [sys.executable, "-m", "pinqpy", "query", "--demo-data", "SELECT COUNT(*) FROM pums"]
    term = _spawn(argv, tmp_path, PINQPY_PROGRESS_AFTER="0")
    term.expect(r"running query… \d+s")
    term.expect(r"\d+ ± 30")
    assert term.finish() == 0
    raw = term.raw
    # the line is erased before the answer is written in its place
    assert raw.index("running query") < raw.index("\r\x1b[K") < raw.index(" ± 30")
    assert not re.search(r"running query[^\r]*\d{3}", raw)  # elapsed seconds only, no count


def test_progress_never_reaches_stdout_in_csv_mode(tmp_path: Path):
    out = tmp_path / "answer.csv"
    script = (
        f"{sys.executable} -m pinqpy query --demo-data --format csv "
        f"'SELECT COUNT(*) AS n FROM pums' > {out}"
    )
    term = _spawn(["/bin/bash", "-c", script], tmp_path, PINQPY_PROGRESS_AFTER="0")
    term.expect(r"running query")  # stderr is the terminal: the spinner shows there ...
    assert term.finish() == 0
    assert out.read_text().splitlines()[0] == "n,n_ci_low,n_ci_high"  # ... stdout is clean
    assert "running" not in out.read_text()
    assert "charged epsilon 0.1 to pums" in term.screen


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "pinqpy", "query", "--demo-data", "SELECT COUNT(*) FROM pums"],
        env=environment(tmp_path, PINQPY_PROGRESS_AFTER="0"), capture_output=True, text=True,
        encoding="utf-8", timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "charged epsilon 0.1 to pums; 0.9 of 1 left\n"


def test_the_shell_shows_progress_too(tmp_path: Path, people_csv: Path):
    term = _spawn([sys.executable, *shell_args(people_csv)], tmp_path, PINQPY_PROGRESS_AFTER="0")
    term.expect(r"pinqpy>")
    term.send("SELECT COUNT(*) FROM people;\r")
    term.expect(r"running query")
    term.expect(r"charged epsilon 0\.1")
    term.send(".quit\r")
    assert term.finish() == 0
