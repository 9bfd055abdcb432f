"""``%%pinq`` cells as a notebook runs them: failing cells fail, the session is explicit,
``{name}``/``:name`` parameters, and the charge note under a result.

Everything runs through a real IPython InteractiveShell (``shell.run_cell``), so what is
checked is what a notebook's cell would show and whether "Run All" stops there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums
from pinqpy.interfaces import magic, parameters

pytest.importorskip("IPython")

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

COUNT = "SELECT COUNT(*) AS n FROM people"


@pytest.fixture(scope="module")
def shell() -> Iterator[Any]:
    """The InteractiveShell with ``%load_ext pinqpy`` done."""
    from traitlets.config import Config

    cfg = Config()
    cfg.HistoryManager.hist_file = ":memory:"
    sh = InteractiveShell.instance(config=cfg)
    sh.run_line_magic("load_ext", "pinqpy")
    yield sh
    sh.run_line_magic("unload_ext", "pinqpy")


@pytest.fixture
def pums() -> pd.DataFrame:
    return load_pums()


def make_session(frame: pd.DataFrame, epsilon: float = 1.0) -> tuple[pq.Session, pq.Budget]:
    budget = pq.Budget(epsilon=epsilon)
    s = pq.Session()
    s.register("people", frame, budget=budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
    return s, budget


@pytest.fixture
def ns(shell: Any, pums: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """The notebook's namespace holding ``session`` over PUMS (budget epsilon 1)."""
    # The InteractiveShell is one per process: drop Sessions other test files left in it.
    for name in [k for k, v in shell.user_ns.items() if isinstance(v, pq.Session)]:
        del shell.user_ns[name]
    s, budget = make_session(pums)
    shell.user_ns.update(session=s, budget=budget)
    the_magic = shell.magics_manager.magics["line"]["pinq"]
    the_magic.chosen = the_magic.sticky = None
    added = set(shell.user_ns)
    yield shell.user_ns
    for name in set(shell.user_ns) - added | {"session", "budget"}:
        if not name.startswith("_"):
            shell.user_ns.pop(name, None)
    for name in ("scratch", "other", "result", "rec", "noting"):
        shell.user_ns.pop(name, None)


def run(shell: Any, cell: str) -> tuple[Any, Any]:
    """Run ``cell`` as a notebook would; (ExecutionResult, captured output)."""
    with capture_output() as captured:
        result = shell.run_cell(cell, store_history=False)
    return result, captured


class Recorder:
    """A session (the session protocol) that records the statements it is asked, answered by
    a real Session; ``last_note`` is what a note-keeping session would say."""

    def __init__(self, session: pq.Session, last_note: str | None = None):
        self.session = session
        self.asked: list[str] = []
        self.last_note: str | None = None
        self.note = last_note

    @property
    def tables(self) -> list[str]:
        return list(self.session.tables)

    def sql(self, query: str, epsilon: Any = None, delta: Any = None) -> Any:
        self.asked.append(query)
        result = self.session.sql(query, epsilon=epsilon, delta=delta)
        self.last_note = self.note
        return result

    def describe(self, name: str) -> pd.DataFrame:
        return self.session.describe(name)


# -- a failing cell fails ----------------------------------------------------------------
def test_a_failing_cell_fails_without_a_traceback(shell: Any, ns: dict[str, Any]) -> None:
    res, out = run(shell, "%%pinq -e 0.5\nSELECT COUNT(*) AS n\nFROM people WHERE agee > 3")
    assert res.success is False
    assert isinstance(res.error_in_exec, UsageError)
    assert "Traceback" not in out.stdout + out.stderr
    lines = out.stdout.splitlines()  # the message alone, with no "UsageError:" in front
    assert lines[0].startswith("PinqSyntaxError: unknown column 'agee'")
    assert lines[1].strip() == "FROM people WHERE agee > 3"
    assert lines[2].index("^") == lines[1].index("agee")
    assert ns["budget"].spent.epsilon == 0


def test_every_pinqpy_refusal_fails_the_cell(shell: Any, ns: dict[str, Any]) -> None:
    for cell, name in [
        ("%%pinq\nSELECT COUNT(*) FROM people", "PrivacyError"),
        ("%%pinq -e 5\nSELECT COUNT(*) FROM people", "BudgetExceededError"),
        ("%%pinq -e 0.1\nSELECT age FROM people", "PrivacyError"),
        ("%pinq -e 0.1 SELECT COUNT(*) FROM nowhere", "unknown table"),
    ]:
        res, out = run(shell, cell)
        assert res.success is False, cell
        assert isinstance(res.error_in_exec, UsageError), cell
        assert name in out.stdout and "Traceback" not in out.stdout + out.stderr, cell
        assert "UsageError" not in out.stdout, cell
    assert ns["budget"].spent.epsilon == 0


def test_out_variable_is_deleted_when_the_cell_fails(shell: Any, ns: dict[str, Any]) -> None:
    res, _ = run(shell, f"%%pinq -e 0.1 -o result\n{COUNT}")
    assert res.success and isinstance(ns["result"], pq.NoisyFrame)
    res, _ = run(shell, "%%pinq -e 0.1 -o result\nSELECT COUNT(*) FROM people WHERE agee > 1")
    assert res.success is False
    assert "result" not in ns  # not the previous run's answer
    ns["result"] = "stale"
    res, _ = run(shell, "%%pinq -e 0.1 -o result\nSELECT COUNT(*) FROM people WHERE age > :nope")
    assert res.success is False
    assert "result" not in ns


def test_the_hint_speaks_the_magic(
    shell: Any, ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def spoken(err: BaseException, interface: str) -> str:
        seen.append(interface)
        return str(err).replace("epsilon=", "-e E")

    monkeypatch.setattr(magic, "for_interface", spoken)
    res, out = run(shell, f"%%pinq\n{COUNT}")
    assert res.success is False
    assert seen == ["magic"]
    assert "-e E" in out.stdout


# -- the session is explicit -------------------------------------------------------------
def test_a_newer_session_does_not_steal_cells(
    shell: Any, ns: dict[str, Any], pums: pd.DataFrame
) -> None:
    with pq.testing.no_noise():
        res, out = run(shell, f"%pinq -e 0.1 {COUNT}")
    assert res.success and float(res.result["n"].iloc[0]) == len(pums)
    assert "(session:" not in out.stdout  # one Session: nothing to say
    scratch, scratch_budget = make_session(pums.head(10))
    ns["scratch"] = scratch
    with pq.testing.no_noise():
        res, out = run(shell, f"%pinq -e 0.1 {COUNT}")
    assert res.success and float(res.result["n"].iloc[0]) == len(pums)
    assert out.stdout.splitlines()[0] == "(session: session)"
    assert scratch_budget.spent.epsilon == 0
    assert ns["budget"].spent.epsilon == pytest.approx(0.2)
    # a failure says where it ran, since it is not obvious
    res, out = run(shell, "%pinq -e 0.1 SELECT COUNT(*) FROM nowhere")
    assert out.stdout.splitlines()[-1] == "(session: session)"
    _, out = run(shell, "%pinq status")
    assert out.stdout.startswith("pinqpy: cells run on local sessions: session (Session(")


def test_rebinding_the_variable_is_picked_up(
    shell: Any, ns: dict[str, Any], pums: pd.DataFrame
) -> None:
    run(shell, f"%pinq -e 0.1 {COUNT}")
    fresh, fresh_budget = make_session(pums.head(10))
    ns["session"] = fresh  # the setup cell ran again
    with pq.testing.no_noise():
        res, _ = run(shell, f"%pinq -e 0.1 {COUNT}")
    assert float(res.result["n"].iloc[0]) == 10
    assert fresh_budget.spent.epsilon == 0.1


def test_several_sessions_and_no_choice_is_an_error(
    shell: Any, ns: dict[str, Any], pums: pd.DataFrame
) -> None:
    ns["other"], _ = make_session(pums)
    res, out = run(shell, f"%pinq -e 0.1 {COUNT}")
    assert res.success is False
    assert "several pinqpy Sessions are defined (other, session)" in out.stderr
    _, out = run(shell, "%pinq status")
    assert "several (other, session)" in out.stdout
    assert ns["budget"].spent.epsilon == 0


def test_use_persists_and_s_overrides_one_cell(
    shell: Any, ns: dict[str, Any], pums: pd.DataFrame
) -> None:
    other, other_budget = make_session(pums.head(10))
    ns["other"] = other
    res, out = run(shell, "%pinq use other")
    assert res.success
    assert out.stdout.startswith("pinqpy: cells run on other (Session(")
    with pq.testing.no_noise():
        first, out1 = run(shell, f"%%pinq -e 0.1\n{COUNT}")
        once, _ = run(shell, f"%%pinq -e 0.1 -s session\n{COUNT}")
        again, _ = run(shell, f"%%pinq -e 0.1\n{COUNT}")
    assert "(session:" not in out1.stdout  # chosen explicitly: no note
    assert [float(r.result["n"].iloc[0]) for r in (first, once, again)] == [10, len(pums), 10]
    assert other_budget.spent.epsilon == pytest.approx(0.2)
    assert ns["budget"].spent.epsilon == 0.1
    # a newer Session changes nothing
    ns["scratch"], scratch_budget = make_session(pums)
    run(shell, f"%%pinq -e 0.1\n{COUNT}")
    assert scratch_budget.spent.epsilon == 0
    _, out = run(shell, "%pinq status")
    assert out.stdout.startswith("pinqpy: cells run on other (Session(")
    assert "chosen by %pinq use" in out.stdout
    # the chosen variable gone: say so, do not guess
    del ns["other"]
    res, out = run(shell, f"%%pinq -e 0.1\n{COUNT}")
    assert res.success is False
    assert "%pinq use other: no variable named 'other'" in out.stderr


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("use", "%pinq use NAME"),
        ("use a b", "%pinq use NAME"),
        ("use nope", "%pinq use: no variable named 'nope'"),
        ("use budget", "'budget' is a Budget, not a pinqpy Session"),
        ("use 1x", "variable name"),
    ],
)
def test_use_refuses(shell: Any, ns: dict[str, Any], line: str, fragment: str) -> None:
    res, out = run(shell, f"%pinq {line}")
    assert res.success is False
    assert fragment in out.stderr, out.stderr
    assert shell.magics_manager.magics["line"]["pinq"].chosen is None


def test_use_is_a_line_magic(shell: Any, ns: dict[str, Any]) -> None:
    res, out = run(shell, f"%%pinq use session\n{COUNT}")
    assert res.success is False and "line magic" in out.stderr


def test_braces_work_in_commands(shell: Any, ns: dict[str, Any]) -> None:
    ns["which"] = "session"
    res, out = run(shell, "%pinq use {which}")
    assert res.success, out.stderr
    assert shell.magics_manager.magics["line"]["pinq"].chosen == "session"
    res, out = run(shell, "%pinq use {nowhere}")
    assert res.success is False and "nowhere" in out.stderr


# -- parameters ----------------------------------------------------------------------------
def test_braces_paste_text(shell: Any, ns: dict[str, Any], pums: pd.DataFrame) -> None:
    ns.update(tbl="people", eps=0.2, cond="age >= 65")
    with pq.testing.no_noise():
        res, out = run(shell, "%%pinq -e {eps}\nSELECT COUNT(*) AS n FROM {tbl} WHERE {cond}")
    assert res.success, out.stderr
    assert float(res.result["n"].iloc[0]) == float((pums["age"] >= 65).sum())
    assert ns["budget"].spent.epsilon == 0.2
    with pq.testing.no_noise():
        res, _ = run(shell, "%pinq -e {eps} SELECT COUNT(*) AS n FROM {tbl}")
    assert float(res.result["n"].iloc[0]) == len(pums)


def test_unknown_parameters_are_usage_errors(shell: Any, ns: dict[str, Any]) -> None:
    for cell, fragment in [
        ("%%pinq -e 0.1\nSELECT COUNT(*) FROM {nowhere}", "{nowhere}: no variable named"),
        ("%%pinq -e 0.1\nSELECT COUNT(*) FROM people WHERE age > :old", ":old: no variable"),
        ("%%pinq -e 0.1\nSELECT COUNT(*) FROM {people", "braces take one variable name"),
        ("%%pinq -e 0.1\nSELECT COUNT(*) FROM people}", "write }} for a literal brace"),
    ]:
        res, out = run(shell, cell)
        assert res.success is False, cell
        assert isinstance(res.error_in_exec, UsageError)
        assert fragment in out.stderr, (cell, out.stderr)
    assert ns["budget"].spent.epsilon == 0


def test_colon_binds_sql_literals(shell: Any, ns: dict[str, Any], pums: pd.DataFrame) -> None:
    rec = Recorder(ns["session"])
    ns.update(rec=rec, old=65, code="1", who="O'Hara", nothing=None, yes=True, low=-5)
    with pq.testing.no_noise():
        res, out = run(
            shell,
            "%%pinq -s rec -e 0.1\n"
            "SELECT COUNT(*) AS n FROM people WHERE age >= :old AND CAST(sex AS TEXT) = :code",
        )
    assert res.success, out.stderr
    assert rec.asked[-1].endswith("WHERE age >= 65 AND CAST(sex AS TEXT) = '1'")
    exact = ((pums["age"] >= 65) & (pums["sex"] == 1)).sum()
    assert float(res.result["n"].iloc[0]) == float(exact)
    with pq.testing.no_noise():
        res, out = run(
            shell,
            "%%pinq -s rec -e 0.1\n"
            "SELECT COUNT(*) AS n FROM people WHERE CAST(sex AS TEXT) = :who AND age > :low",
        )
    assert res.success, out.stderr  # the quote inside the string did not break the query
    assert rec.asked[-1].endswith("CAST(sex AS TEXT) = 'O''Hara' AND age > (-5)")
    assert float(res.result["n"].iloc[0]) == 0
    run(shell, "%%pinq -s rec -e 0.1\nSELECT COUNT(*) FROM people WHERE :yes OR :nothing IS NULL")
    assert rec.asked[-1].endswith("WHERE TRUE OR NULL IS NULL")


def test_colon_is_left_alone_in_strings_comments_and_casts(shell: Any, ns: dict[str, Any]) -> None:
    rec = Recorder(ns["session"])
    ns.update(rec=rec, code="1")
    query = (
        "SELECT COUNT(*) AS n -- :unknown in a comment\n"
        "FROM people /* :also */ WHERE CAST(sex AS TEXT) = ':code' AND age::INTEGER > 1"
    )
    res, out = run(shell, f"%%pinq -s rec -e 0.1\n{query}")
    assert res.success, out.stderr
    assert rec.asked[-1] == query


def test_colon_refuses_other_values(shell: Any, ns: dict[str, Any]) -> None:
    ns.update(ages=[1, 2], bad=float("nan"))
    for name, fragment in [("ages", ":ages is a list"), ("bad", "no literal")]:
        res, out = run(shell, f"%%pinq -e 0.1\nSELECT COUNT(*) FROM people WHERE age > :{name}")
        assert res.success is False
        assert fragment in out.stderr, out.stderr
    assert ns["budget"].spent.epsilon == 0


def test_parameter_functions() -> None:
    assert parameters.substitute("{{a}} {a} }}", {"a": 1}) == "{a} 1 }"
    assert parameters.sql_literal("it's") == "'it''s'"
    assert parameters.sql_literal(False) == "FALSE"
    assert parameters.sql_literal(-0.5) == "(-0.5)"
    assert parameters.sql_literal(1e-7) == "1e-07"
    assert parameters.bind("x - :n", {"n": -3}) == "x - (-3)"  # never `x --3`, a comment
    assert parameters.bind("'it''s :n' || :n", {"n": 2}) == "'it''s :n' || 2"
    assert parameters.bind('"col:n" = :n', {"n": 2}) == '"col:n" = 2'
    with pytest.raises(parameters.ParameterError, match="dict"):
        parameters.sql_literal({})


# -- the note under a result ---------------------------------------------------------------
def test_the_charge_note_follows_the_result(shell: Any, ns: dict[str, Any]) -> None:
    res, out = run(shell, f"%%pinq -e 0.2\n{COUNT}")
    assert res.success
    lines = out.stdout.splitlines()
    assert lines[-1] == "charged epsilon 0.2 on people: 1 measurement x 0.2 x stability 1; 0.8 left"
    shown = "\n".join(lines[:-1])
    assert "95% intervals" in shown  # the result came first, the note under it


def test_the_sessions_own_note_is_printed(shell: Any, ns: dict[str, Any]) -> None:
    note = "charged epsilon 0.2 on people (epsilon 0.1 x stability 2)"
    ns["noting"] = Recorder(ns["session"], last_note=note)
    res, out = run(shell, f"%%pinq -s noting -e 0.2\n{COUNT}")
    assert res.success
    assert out.stdout.splitlines()[-1] == note
    assert "SHOW BUDGET" not in ns["noting"].asked  # no need to read budgets around it
    ns["noting"] = Recorder(ns["session"], last_note=None)
    res, out = run(shell, f"%%pinq -s noting -e 0.2\n{COUNT}")
    assert "charged" not in out.stdout  # the session said nothing: nothing is made up


def test_quiet_and_statements_that_charge_nothing_have_no_note(
    shell: Any, ns: dict[str, Any]
) -> None:
    res, out = run(shell, f"%%pinq -q -e 0.2 -o result\n{COUNT}")
    assert res.success and "charged" not in out.stdout
    for cell in ("%pinq SHOW BUDGET", f"%pinq -e 0.1 EXPLAIN {COUNT}", "%pinq DESCRIBE people"):
        res, out = run(shell, cell)
        assert res.success and "charged" not in out.stdout, cell


def test_a_vanished_session_is_not_replaced_silently(
    shell: Any, ns: dict[str, Any], pums: pd.DataFrame
) -> None:
    run(shell, f"%pinq -e 0.1 {COUNT}")
    ns["scratch"], scratch_budget = make_session(pums)
    del ns["session"]
    res, out = run(shell, f"%pinq -e 0.1 {COUNT}")
    assert res.success is False
    assert "earlier cells ran on session, which holds no pinqpy Session now" in out.stderr
    assert "(scratch)" in out.stderr and "%pinq use NAME" in out.stderr
    assert scratch_budget.spent.epsilon == 0
    _, out = run(shell, "%pinq status")
    assert "earlier cells ran on session, which holds no pinqpy Session now" in out.stdout
    run(shell, "%pinq use scratch")
    res, _ = run(shell, f"%pinq -e 0.1 {COUNT}")
    assert res.success and scratch_budget.spent.epsilon == 0.1
