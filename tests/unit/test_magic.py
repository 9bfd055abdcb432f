"""The ``%pinq``/``%%pinq`` IPython magics, run through IPython's own InteractiveShell."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums
from pinqpy.interfaces import magic

pytest.importorskip("IPython")

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

QUERY = "SELECT sex, COUNT(*) AS n, AVG(income) AS mean_income FROM people GROUP BY sex"


@pytest.fixture(scope="module")
def shell() -> Iterator[Any]:
    """One InteractiveShell with ``%load_ext pinqpy`` done (wired here if not yet in pinqpy)."""
    from traitlets.config import Config

    cfg = Config()
    cfg.HistoryManager.hist_file = ":memory:"
    sh = InteractiveShell.instance(config=cfg)
    with pytest.MonkeyPatch.context() as mp:
        if not hasattr(pq, "load_ipython_extension"):
            mp.setattr(pq, "load_ipython_extension", magic.load_ipython_extension, raising=False)
            mp.setattr(
                pq, "unload_ipython_extension", magic.unload_ipython_extension, raising=False
            )
        sh.run_line_magic("load_ext", "pinqpy")
        yield sh
        sh.run_line_magic("unload_ext", "pinqpy")


@pytest.fixture
def pums() -> pd.DataFrame:
    return load_pums()


@pytest.fixture
def session(shell: Any, pums: pd.DataFrame) -> Iterator[pq.Session]:
    """A fresh session over PUMS in the user namespace as ``s``, noted as the latest one."""
    # The InteractiveShell is one per process: drop Sessions other test files left in it.
    for name in [k for k, v in shell.user_ns.items() if isinstance(v, pq.Session)]:
        del shell.user_ns[name]
    budget = pq.Budget(epsilon=1.0)
    s = pq.Session()
    s.register("people", pums, budget=budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
    shell.user_ns.update(s=s, budget=budget)
    the_magic = shell.magics_manager.magics["line"]["pinq"]
    the_magic.chosen = the_magic.sticky = None  # each test starts with no choice made
    yield s
    for name in ("s", "s2", "budget", "budget2", "result", "r"):
        shell.user_ns.pop(name, None)


def run(shell: Any, cell: str) -> tuple[Any, Any]:
    """Run ``cell`` as a user would; return (ExecutionResult, captured output)."""
    with capture_output() as captured:
        result = shell.run_cell(cell, store_history=False)
    return result, captured


def exact_counts(pums: pd.DataFrame) -> list[float]:
    return [float(v) for v in pums.groupby("sex").size().reindex([0, 1])]


# -- registration ----------------------------------------------------------------------------
def test_load_ext_registers_line_and_cell_magic(shell: Any) -> None:
    magics = shell.magics_manager.magics
    assert "pinq" in magics["line"]
    assert "pinq" in magics["cell"]


def test_unload_and_reload(shell: Any) -> None:
    shell.run_line_magic("unload_ext", "pinqpy")
    assert "pinq" not in shell.magics_manager.magics["line"]
    shell.run_line_magic("load_ext", "pinqpy")
    assert "pinq" in shell.magics_manager.magics["cell"]


# -- cell magic ------------------------------------------------------------------------------
def test_cell_magic_returns_and_displays_the_result(shell: Any, session: Any, pums: Any) -> None:
    with pq.testing.no_noise():
        res, out = run(shell, f"%%pinq -e 0.5\n{QUERY}")
    assert res.success and res.error_in_exec is None
    frame = res.result
    assert isinstance(frame, pq.NoisyFrame)
    assert list(frame.columns) == ["sex", "n", "mean_income"]
    assert list(frame["n"]) == exact_counts(pums)
    assert session.table("people").budgets[0].spent.epsilon == 0.5
    # displayed with its accuracy: the frame, then a table of 95% intervals
    assert "mean_income" in out.stdout
    assert "95% intervals" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr


def test_run_cell_magic_directly(shell: Any, session: Any, pums: Any) -> None:
    with pq.testing.no_noise():
        frame = shell.run_cell_magic("pinq", "--epsilon 0.2", QUERY)
    assert list(frame.columns) == ["sex", "n", "mean_income"]
    assert list(frame["n"]) == exact_counts(pums)


def test_result_has_html_with_intervals(shell: Any, session: Any) -> None:
    frame = shell.run_cell_magic("pinq", "-e 0.2", QUERY)
    data, _meta = shell.display_formatter.format(frame)
    assert "mean_income 95% interval" in data["text/html"]  # values and intervals together
    assert data["text/html"].count("<table") == 1
    assert "95% intervals" in data["text/plain"]


def test_out_option_stores_the_result(shell: Any, session: Any, pums: Any) -> None:
    with pq.testing.no_noise():
        res, _ = run(shell, f"%%pinq -e 0.5 -o result\n{QUERY}")
    assert res.success
    stored = shell.user_ns["result"]
    assert isinstance(stored, pq.NoisyFrame)
    assert list(stored["n"]) == exact_counts(pums)
    assert stored.ci("n").shape == (2, 2)


def test_quiet_stores_without_displaying(shell: Any, session: Any) -> None:
    res, out = run(shell, f"%%pinq -q -e 0.1 --out=r\n{QUERY}")
    assert res.result is None
    assert "mean_income" not in out.stdout
    assert isinstance(shell.user_ns["r"], pq.NoisyFrame)


def test_session_option_picks_a_named_session(shell: Any, session: Any, pums: Any) -> None:
    budget2 = pq.Budget(epsilon=2.0)
    s2 = pq.Session()
    s2.register("others", pums, budget=budget2, bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
    shell.user_ns.update(s2=s2, budget2=budget2)
    with pq.testing.no_noise():
        res, out = run(shell, "%%pinq --session s2 -e 0.4\nSELECT COUNT(*) AS n FROM others")
    assert res.success, out.stderr
    assert float(res.result["n"].iloc[0]) == len(pums)
    assert budget2.spent.epsilon == 0.4
    assert shell.user_ns["budget"].spent.epsilon == 0
    # -s chose for one cell only; with two Sessions defined the next cell must be told
    res, out = run(shell, "%%pinq -e 0.4\nSELECT COUNT(*) AS n FROM others")
    assert not res.success
    assert "several pinqpy Sessions are defined (s, s2)" in out.stderr
    assert "%pinq use NAME" in out.stderr
    shell.run_line_magic("pinq", "use s")
    res, out = run(shell, "%%pinq -e 0.4\nSELECT COUNT(*) AS n FROM others")
    assert not res.success and "unknown table" in out.stdout


def test_session_option_errors_are_usage_errors(shell: Any, session: Any) -> None:
    _, out = run(shell, "%%pinq --session nope -e 0.1\nSELECT COUNT(*) FROM people")
    assert "-s/--session: no variable named 'nope'" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    shell.user_ns["r"] = 3
    _, out = run(shell, "%%pinq -s r -e 0.1\nSELECT COUNT(*) FROM people")
    assert "not a pinqpy Session" in out.stderr
    assert shell.user_ns["budget"].spent.epsilon == 0


def test_default_session_is_the_only_one_in_the_namespace(
    shell: Any, session: Any, pums: Any
) -> None:
    s2 = pq.Session()  # the newest Session, but in no variable: not a candidate
    b2 = pq.Budget(epsilon=1.0)
    s2.register("people", pums.head(10), budget=b2)
    with pq.testing.no_noise():
        res, out = run(shell, "%pinq -e 0.1 SELECT COUNT(*) AS n FROM people")
    assert res.success, out.stderr
    assert float(res.result["n"].iloc[0]) == 1000
    assert b2.spent.epsilon == 0
    assert "(session:" not in out.stdout  # one candidate: nothing ambiguous to say


def test_no_session_or_several_is_a_usage_error(shell: Any, session: Any) -> None:
    shell.user_ns.pop("s")
    try:
        res, out = run(shell, "%pinq -e 0.1 SELECT COUNT(*) FROM people")
    finally:
        shell.user_ns["s"] = session
    assert not res.success
    assert "no pinqpy Session in the notebook's variables" in out.stderr
    shell.user_ns["s2"] = pq.Session()
    res, out = run(shell, "%pinq -e 0.1 SELECT COUNT(*) FROM people")
    assert not res.success
    assert "(s, s2)" in out.stderr and "%pinq use NAME" in out.stderr and "-s NAME" in out.stderr
    assert shell.user_ns["budget"].spent.epsilon == 0


# -- epsilon and delta -----------------------------------------------------------------------
def test_epsilon_option_sets_the_charge(shell: Any, session: Any) -> None:
    budget = shell.user_ns["budget"]
    run(shell, "%%pinq -e 0.3\nSELECT COUNT(*) FROM people")
    assert budget.spent.epsilon == 0.3
    run(shell, "%%pinq --epsilon=0.05\nSELECT COUNT(*) FROM people WHERE age > 30")
    assert budget.spent.epsilon == 0.35
    # without -e the query's own OPTIONS decide
    run(shell, "%%pinq\nSELECT COUNT(*) FROM people WHERE age > 40 OPTIONS (epsilon = 0.15)")
    assert budget.spent.epsilon == 0.5


def test_missing_epsilon_is_a_short_message(shell: Any, session: Any) -> None:
    res, out = run(shell, "%%pinq\nSELECT COUNT(*) FROM people")
    assert not res.success and res.result is None
    # shown as the message alone: the error's name first, no "UsageError:" before it
    assert out.stdout.startswith("PrivacyError: ") and "UsageError" not in out.stdout
    assert "epsilon" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr


def test_delta_option_is_passed(shell: Any, pums: Any) -> None:
    budget = pq.Budget(epsilon=1.0, delta=1e-5)
    s = pq.Session()
    s.register("people", pums, budget=budget, bounds=PUMS_BOUNDS)
    shell.user_ns["s2"] = s
    try:
        res, out = run(
            shell,
            "%%pinq -s s2 -e 0.5 -d 1e-6\n"
            "SELECT COUNT(*) AS n FROM people OPTIONS (noise = 'gaussian')",
        )
    finally:
        shell.user_ns.pop("s2", None)
    assert res.success, out.stderr
    assert budget.spent.delta == 1e-6
    assert "Gaussian" in res.result.accuracy["n"].mechanism


def test_bad_option_values(shell: Any, session: Any) -> None:
    for cell, message in [
        ("%%pinq -e lots\nSELECT COUNT(*) FROM people", "needs a number"),
        ("%%pinq -x 1\nSELECT COUNT(*) FROM people", "unknown option '-x'"),
        ("%%pinq -o 1abc -e 0.1\nSELECT COUNT(*) FROM people", "variable name"),
        ("%%pinq -e\nSELECT COUNT(*) FROM people", "needs a value"),
        ("%%pinq -e 0.1 SELECT 1\nSELECT COUNT(*) FROM people", "first line"),
        ("%%pinq -e 0.1\n   \n", "no query"),
    ]:
        res, out = run(shell, cell)
        assert not res.success
        assert "UsageError" in out.stderr and message in out.stderr, (cell, out.stderr)
        assert "Traceback" not in out.stderr + out.stdout
    assert shell.user_ns["budget"].spent.epsilon == 0


# -- errors ----------------------------------------------------------------------------------
def test_unknown_column_shows_the_caret_not_a_traceback(shell: Any, session: Any) -> None:
    budget = shell.user_ns["budget"]
    res, out = run(
        shell, "%%pinq -e 0.5 -o result\nSELECT COUNT(*) AS n\nFROM people WHERE agee > 3"
    )
    assert not res.success
    assert isinstance(res.error_in_exec, UsageError)  # the cell fails: Run All stops here
    assert res.result is None
    assert "result" not in shell.user_ns
    lines = out.stdout.splitlines()
    assert lines[0].startswith("PinqSyntaxError: unknown column 'agee'")
    assert "(line 2, column 19)" in lines[0]
    assert lines[1].strip() == "FROM people WHERE agee > 3"
    assert lines[2].index("^") == lines[1].index("agee")
    assert "Traceback" not in out.stderr + out.stdout
    assert out.stderr == ""
    assert budget.spent.epsilon == 0
    assert budget.charges == []


def test_budget_exceeded_is_a_short_message(shell: Any, session: Any) -> None:
    budget = shell.user_ns["budget"]
    res, out = run(shell, "%%pinq -e 2\nSELECT COUNT(*) FROM people")
    assert not res.success and res.result is None
    assert out.stdout.startswith("BudgetExceededError: privacy budget exceeded")
    assert "-e E" in out.stdout  # the hint in the magic's words
    assert "Traceback" not in out.stdout
    assert budget.spent.epsilon == 0


# -- line magic ------------------------------------------------------------------------------
def test_line_magic(shell: Any, session: Any, pums: Any) -> None:
    with pq.testing.no_noise():
        frame = shell.run_line_magic("pinq", "-e 0.1 " + QUERY)
    assert list(frame.columns) == ["sex", "n", "mean_income"]
    assert list(frame["n"]) == exact_counts(pums)
    with pq.testing.no_noise():
        res, _ = run(shell, "r = %pinq -e 0.1 SELECT COUNT(*) AS n FROM people WHERE sex = 1")
    assert res.success
    assert float(shell.user_ns["r"]["n"].iloc[0]) == float((pums["sex"] == 1).sum())
    assert shell.user_ns["budget"].spent.epsilon == 0.2


def test_line_magic_keeps_string_literals(shell: Any, session: Any) -> None:
    res, out = run(
        shell, "%pinq -e 0.1 -- SELECT COUNT(*) AS n FROM people WHERE CAST(sex AS TEXT) = '1'"
    )
    assert res.success and isinstance(res.result, pq.NoisyFrame), out.stderr


def test_line_magic_error(shell: Any, session: Any) -> None:
    res, out = run(shell, "%pinq -e 0.1 SELECT COUNT(*) FROM peeple")
    assert not res.success and res.result is None
    assert "unknown table" in out.stdout and "^" in out.stdout
    assert "Traceback" not in out.stdout


# -- EXPLAIN and SHOW ------------------------------------------------------------------------
def test_explain_displays_its_text(shell: Any, session: Any) -> None:
    res, out = run(shell, f"%%pinq -e 0.5\nEXPLAIN {QUERY}")
    assert res.success
    assert "EXPLAIN (charges nothing" in out.stdout
    assert "\\n" not in out.stdout  # shown as text, not as a quoted string
    assert shell.user_ns["budget"].spent.epsilon == 0
    html = shell.display_formatter.format(res.result)[0]["text/html"]
    assert html.startswith("<pre") and "EXPLAIN" in html


def test_show_statements_display_dataframes(shell: Any, session: Any) -> None:
    tables = shell.run_line_magic("pinq", "SHOW TABLES")
    assert isinstance(tables, pd.DataFrame) and list(tables["table"]) == ["people"]
    shell.run_line_magic("pinq", "-e 0.25 SELECT COUNT(*) FROM people")
    budgets = shell.run_line_magic("pinq", "SHOW BUDGET")
    assert float(budgets["spent_epsilon"].iloc[0]) == 0.25
    _, out = run(shell, "%pinq DESCRIBE people")
    assert "income" in out.stdout and "[0, 500000]" in out.stdout


# -- options parser --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", magic.MagicOptions()),
        ("SELECT 1", magic.MagicOptions(query="SELECT 1")),
        (
            "-e 0.5 -d 1e-6 -s sess -o out -q SELECT  'a  b'",
            magic.MagicOptions("SELECT  'a  b'", 0.5, 1e-6, "sess", "out", True),
        ),
        ("--epsilon=0.1 --quiet", magic.MagicOptions(epsilon=0.1, quiet=True)),
        ("-e 1 -- -x", magic.MagicOptions(query="-x", epsilon=1.0)),
    ],
)
def test_parse_options(line: str, expected: magic.MagicOptions) -> None:
    assert magic.parse_options(line) == expected


@pytest.mark.parametrize("line", ["-q=1", "--out", "-o for", "-s a.b", "--bogus 1"])
def test_parse_options_refuses(line: str) -> None:
    with pytest.raises(magic.MagicUsageError):
        magic.parse_options(line)


# -- a pinqpy server: %pinq connect / disconnect / status -----------------------------------
URL = "http://127.0.0.1:8765"
TOKEN = "tok-" + "x" * 40


class RemoteStandIn:
    """A server session's stand-in for the magic's argument handling: the session protocol
    answered by a local Session over a table the notebook's own session does not have."""

    def __init__(self, url: str, token: str):
        self.url, self.token = url, token
        self.budget = pq.Budget(epsilon=1.0)
        self._session = pq.Session()
        self._session.register(
            "pums", load_pums(), budget=self.budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS
        )
        self.closed = False
        self.asked: list[tuple[str, Any, Any]] = []

    @property
    def tables(self) -> list[str]:
        return list(self._session.tables)

    def sql(self, query: str, epsilon: Any = None, delta: Any = None) -> Any:
        self.asked.append((query, epsilon, delta))
        return self._session.sql(query, epsilon=epsilon, delta=delta)

    def describe(self, name: str) -> pd.DataFrame:
        return self._session.describe(name)

    def close(self) -> None:
        self.closed = True

    def __repr__(self) -> str:
        return f"RemoteSession({self.url!r}, analyst='alice')"


@pytest.fixture
def servers(
    shell: Any, session: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[RemoteStandIn]]:
    """``pinqpy.remote.client.session.connect`` replaced by a recorder of RemoteStandIns."""
    import sys
    import types

    made: list[RemoteStandIn] = []

    def connect(url: str, token: str | None = None, **kwargs: Any) -> RemoteStandIn:
        remote = RemoteStandIn(url, str(token))
        made.append(remote)
        return remote

    fake = types.ModuleType("pinqpy.remote.client.session")
    fake.connect = connect  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pinqpy.remote.client.session", fake)
    monkeypatch.delenv("PINQPY_TOKEN", raising=False)
    yield made
    shell.magics_manager.magics["line"]["pinq"].disconnect(quiet=True)


def test_connect_runs_later_cells_on_the_server(
    shell: Any, servers: list[RemoteStandIn], monkeypatch: pytest.MonkeyPatch, pums: Any
) -> None:
    monkeypatch.setenv("PINQPY_TOKEN", TOKEN)
    res, out = run(shell, f"%pinq connect {URL}")
    assert res.success, out.stderr
    [remote] = servers
    assert (remote.url, remote.token) == (URL, TOKEN)
    assert out.stdout.startswith(f"pinqpy: cells run on the pinqpy server {URL}")
    assert "%pinq disconnect" in out.stdout
    assert TOKEN not in out.stdout + out.stderr

    with pq.testing.no_noise():
        res, out = run(shell, "%%pinq -e 0.5\nSELECT COUNT(*) AS n FROM pums")
    assert res.success and isinstance(res.result, pq.NoisyFrame), out.stderr
    assert float(res.result["n"].iloc[0]) == len(pums)
    # SHOW BUDGET before and after: the stand-in has no last_note, so the charge note is
    # what the budget's spent grew by
    assert remote.asked == [
        ("SHOW BUDGET", None, None),
        ("SELECT COUNT(*) AS n FROM pums", 0.5, None),
        ("SHOW BUDGET", None, None),
    ]
    assert out.stdout.splitlines()[-1] == "charged epsilon 0.5 to pums (0.5 left)"
    assert remote.budget.spent.epsilon == 0.5
    assert shell.user_ns["budget"].spent.epsilon == 0  # the local session was not asked
    assert URL not in out.stdout  # a result looks the same wherever it was computed

    res, out = run(shell, "%pinq status")
    assert out.stdout.strip() == (
        f"pinqpy: cells run on the pinqpy server {URL} (RemoteSession('{URL}', analyst='alice'))"
    )
    res, out = run(shell, "%pinq disconnect")
    assert remote.closed
    assert out.stdout.strip() == f"pinqpy: disconnected from {URL}; cells run on local sessions"
    with pq.testing.no_noise():
        value = shell.run_line_magic("pinq", "-e 0.1 SELECT COUNT(*) AS n FROM people")
    assert float(value["n"].iloc[0]) == len(pums)
    assert shell.user_ns["budget"].spent.epsilon == 0.1
    _, out = run(shell, "%pinq status")
    assert out.stdout.startswith("pinqpy: cells run on local sessions: s (Session(")


def test_an_error_on_the_server_says_which_server(
    shell: Any, servers: list[RemoteStandIn], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PINQPY_TOKEN", TOKEN)
    shell.run_line_magic("pinq", f"connect {URL}")
    res, out = run(shell, "%%pinq -e 0.1\nSELECT COUNT(*) FROM pums WHERE agee > 3")
    assert not res.success and res.result is None
    lines = out.stdout.splitlines()
    assert lines[0].startswith("PinqSyntaxError: unknown column 'agee'")
    assert lines[-1] == f"(on the pinqpy server {URL})"
    assert "Traceback" not in out.stdout
    assert servers[0].budget.spent.epsilon == 0


def test_connect_reads_the_named_variable_or_asks(
    shell: Any, servers: list[RemoteStandIn], monkeypatch: pytest.MonkeyPatch
) -> None:
    import getpass

    monkeypatch.setenv("LAB_TOKEN", "lab-token")
    shell.run_line_magic("pinq", f"connect {URL} --token-env LAB_TOKEN")
    shell.run_line_magic("pinq", "connect https://dp.example.org --token-env=LAB_TOKEN")
    asked: list[str] = []
    monkeypatch.setattr(getpass, "getpass", lambda prompt: asked.append(prompt) or " typed ")
    shell.run_line_magic("pinq", f"connect {URL}")
    assert [(r.url, r.token) for r in servers] == [
        (URL, "lab-token"),
        ("https://dp.example.org", "lab-token"),
        (URL, "typed"),
    ]
    assert asked == [f"pinqpy token for {URL}: "]
    assert servers[0].closed and servers[1].closed  # a new connection replaces the last
    assert not servers[2].closed


def test_no_way_to_ask_for_a_token_is_a_usage_error(
    shell: Any, servers: list[RemoteStandIn], monkeypatch: pytest.MonkeyPatch
) -> None:
    import getpass

    def no_stdin(prompt: str) -> str:
        raise NotImplementedError("this frontend does not support input requests")

    monkeypatch.setattr(getpass, "getpass", no_stdin)
    res, out = run(shell, f"%pinq connect {URL}")
    assert not res.success
    assert "UsageError" in out.stderr
    assert "set the environment variable PINQPY_TOKEN" in out.stderr
    assert servers == []


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        (f"connect {URL} {TOKEN}", "never taken from the line"),
        (f"connect {URL} --token {TOKEN}", "never taken from the line"),
        (f"connect {URL} --token={TOKEN}", "never taken from the line"),
        (f"connect {TOKEN}", "takes the server's address"),
        (f"connect {URL} --token-env {TOKEN}.", "not the token itself"),
        ("connect", "needs the server's address"),
        (f"connect http://alice:{TOKEN}@h:1", "no credentials"),
        (f"connect {URL} --token-env", "--token-env needs the NAME"),
        ("disconnect now", "takes no arguments"),
    ],
)
def test_connect_refuses_tokens_on_the_line(
    shell: Any,
    servers: list[RemoteStandIn],
    monkeypatch: pytest.MonkeyPatch,
    line: str,
    fragment: str,
) -> None:
    monkeypatch.setenv("PINQPY_TOKEN", TOKEN)
    res, out = run(shell, f"%pinq {line}")
    assert not res.success
    assert "UsageError" in out.stderr and fragment in out.stderr, out.stderr
    assert TOKEN not in out.stderr + out.stdout
    assert "Traceback" not in out.stderr
    assert servers == []


def test_connect_is_a_line_magic(shell: Any, servers: list[RemoteStandIn]) -> None:
    res, out = run(shell, f"%%pinq connect {URL}\nSELECT COUNT(*) FROM pums")
    assert not res.success
    assert "line magic" in out.stderr
    assert servers == []


def test_a_refused_connection_leaves_cells_where_they_ran(
    shell: Any, session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import types

    def refuse(url: str, token: str | None = None, **kwargs: Any) -> Any:
        raise pq.PinqError("a valid analyst token is required (Authorization: Bearer <token>)")

    fake = types.ModuleType("pinqpy.remote.client.session")
    fake.connect = refuse  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pinqpy.remote.client.session", fake)
    monkeypatch.setenv("PINQPY_TOKEN", TOKEN)
    res, out = run(shell, f"%pinq connect {URL}")
    assert not res.success and res.result is None
    assert out.stderr.splitlines() == [
        "UsageError: PinqError: a valid analyst token is required (Authorization: Bearer <token>)",
        f"(connecting to {URL}; cells still run where they did)",
    ]
    _, out = run(shell, "%pinq status")
    assert out.stdout.startswith("pinqpy: cells run on local sessions")


def test_session_option_takes_a_server_session_variable(
    shell: Any, servers: list[RemoteStandIn], session: Any
) -> None:
    remote = RemoteStandIn(URL, TOKEN)
    shell.user_ns["s2"] = remote
    with pq.testing.no_noise():
        res, out = run(shell, "%%pinq -s s2 -e 0.2\nSELECT COUNT(*) AS n FROM pums")
    assert res.success and isinstance(res.result, pq.NoisyFrame), out.stderr
    assert remote.budget.spent.epsilon == 0.2
    _, out = run(shell, "%%pinq -s s2 -e 0.2\nSELECT COUNT(*) FROM nobody")
    assert out.stdout.splitlines()[-1] == f"(on RemoteSession('{URL}', analyst='alice'))"


def test_unloading_closes_the_connection(
    shell: Any, servers: list[RemoteStandIn], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PINQPY_TOKEN", TOKEN)
    shell.run_line_magic("pinq", f"connect {URL}")
    shell.run_line_magic("unload_ext", "pinqpy")
    shell.run_line_magic("load_ext", "pinqpy")
    assert servers[0].closed
    _, out = run(shell, "%pinq status")
    assert out.stdout.startswith("pinqpy: cells run on local sessions")
