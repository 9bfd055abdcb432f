"""Fix-it hints spoken in the terms of the interface in use: the same error says
``pass epsilon= to sql()`` in Python, ``set .epsilon E`` in the shell, ``pass --epsilon E`` on
the command line and ``pass -e E`` in a notebook magic, while ``str(err)`` stays as it was."""

from __future__ import annotations

import io
import math
import pickle
import re
import sys
import types

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.errors import BudgetExceededError, PinqError, PrivacyError
from pinqpy.interfaces.cli import main
from pinqpy.interfaces.errors import for_interface, one_line
from pinqpy.interfaces.output import interval_kinds, render_markdown, render_table, symmetric
from pinqpy.interfaces.shell import Shell


def _session() -> pq.Session:
    session = pq.Session()
    frame = pd.DataFrame({"age": [30, 40, 50], "income": [1.0, 2.0, 3.0], "city": list("abc")})
    session.register("people", frame, budget=pq.Budget(epsilon=1.0), bounds={"age": (0, 100)})
    return session


def _raised(call) -> PinqError:
    with pytest.raises(PinqError) as info:
        call()
    return info.value


def test_the_epsilon_hint_in_each_interface() -> None:
    err = _raised(lambda: _session().sql("SELECT COUNT(*) FROM people"))
    python = "the query needs an epsilon: pass epsilon= to sql() or write OPTIONS (epsilon = 0.5)"
    assert str(err) == python
    assert for_interface(err, "python") == python
    assert for_interface(err, "shell") == (
        "the query needs an epsilon: set .epsilon E or write OPTIONS (epsilon = 0.5)"
    )
    assert for_interface(err, "cli") == (
        "the query needs an epsilon: pass --epsilon E or write OPTIONS (epsilon = 0.5)"
    )
    assert for_interface(err, "magic") == (
        "the query needs an epsilon: pass -e E or write OPTIONS (epsilon = 0.5)"
    )


def test_the_sql_bounds_hint_in_each_interface() -> None:
    err = _raised(lambda: _session().sql("SELECT AVG(income) FROM people", epsilon=0.1))
    assert str(err) == (
        "AVG(income) needs bounds: declare them for the column when registering the table, "
        "or write them inline: AVG(income, lo, hi). Bounds are never read off the data"
    )
    shell = for_interface(err, "shell")
    assert shell.startswith("AVG(income) needs bounds: start the shell with --bounds income=LO:HI,")
    assert "inline: AVG(income, lo, hi)" in shell
    assert "pass --bounds income=LO:HI, or write them inline" in for_interface(err, "cli")
    assert "declare them when registering the table (bounds={'income': (lo, hi)})" in (
        for_interface(err, "magic")
    )
    # An expression's bounds come from the columns it is computed from.
    err = _raised(lambda: _session().sql("SELECT AVG(income * 2) FROM people", epsilon=0.1))
    assert "--bounds COLUMN=LO:HI for the columns it is computed from" in for_interface(
        err, "shell"
    )


def test_the_frame_bounds_hint_in_each_interface() -> None:
    budget = pq.Budget(epsilon=1.0)
    frame = pq.PrivateFrame(pd.DataFrame({"income": [1.0, 2.0]}), budget)
    err = _raised(lambda: frame.mean("income", epsilon=0.1))
    assert "pass bounds=(lo, hi), or declare bounds={'income': (lo, hi)} on the PrivateFrame" in (
        str(err)
    )
    assert for_interface(err, "python") == str(err)
    assert "needs bounds for income: start the shell with --bounds income=LO:HI;" in (
        for_interface(err, "shell")
    )
    assert "needs bounds for income: pass --bounds income=LO:HI;" in for_interface(err, "cli")
    assert "declare bounds={'income': (lo, hi)} when registering the table" in (
        for_interface(err, "magic")
    )
    # Nothing was charged by the refusal.
    assert budget.spent.epsilon == 0


def test_the_group_by_keys_hint_in_each_interface() -> None:
    err = _raised(
        lambda: _session().sql("SELECT city, COUNT(*) FROM people GROUP BY city", epsilon=0.1)
    )
    assert "declare keys on the table, join a public table of keys" in str(err)
    assert "start the shell with --keys city=K1,K2,..." in for_interface(err, "shell")
    assert ".delta 1e-6" in for_interface(err, "shell")
    assert "pass --keys city=K1,K2,..." in for_interface(err, "cli")
    assert "--delta-per-query 1e-6" in for_interface(err, "cli")
    assert "-d 1e-6" in for_interface(err, "magic")
    for interface in ("shell", "cli", "magic"):
        assert "delta=" not in for_interface(err, interface)


def test_errors_without_hints_read_as_they_are() -> None:
    err = BudgetExceededError("over budget")
    for interface in ("python", "magic", "shell", "cli"):
        assert for_interface(err, interface) == "over budget"
    assert for_interface(ValueError("plain"), "shell") == "plain"
    # A hint whose Python phrase is not in the message changes nothing.
    odd = PrivacyError("message", hints={"python": "absent", "shell": "x"})
    assert for_interface(odd, "shell") == "message"
    with pytest.raises(ValueError, match="interface must be one of"):
        for_interface(odd, "gui")


def test_hints_survive_pickling_and_one_line_speaks_them() -> None:
    err = _raised(lambda: _session().sql("SELECT COUNT(*) FROM people"))
    copy = pickle.loads(pickle.dumps(err))
    assert str(copy) == str(err) and dict(copy.hints) == dict(err.hints)
    assert one_line(err, "shell").endswith("set .epsilon E or write OPTIONS (epsilon = 0.5)")
    assert one_line(err) == str(err)
    assert PinqError("x").hints == {}


# -- the shell and the command line say them --------------------------------------------------


def _shell(session: object, **kwargs: object) -> tuple[Shell, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    shell = Shell(session, epsilon=0.1, out=out, err=err, **kwargs)  # type: ignore[arg-type]
    return shell, out, err


def test_the_shell_says_set_epsilon() -> None:
    shell, _, err = _shell(_session())
    shell.epsilon = None  # e.g. over a server whose budgets could not be read
    assert shell.run_script("SELECT COUNT(*) FROM people;") == 1
    assert err.getvalue() == (
        "error (line 1): the query needs an epsilon: set .epsilon E or write OPTIONS "
        "(epsilon = 0.5)\n"
    )


def test_the_command_line_says_pass_epsilon(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = types.ModuleType("pinqpy.remote.client.session")
    fake.connect = lambda url, token=None, **kw: _session()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pinqpy.remote.client.session", fake)
    monkeypatch.setenv("PINQPY_TOKEN", "t" * 32)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    status = main(["query", "--connect", "http://127.0.0.1:9", "SELECT COUNT(*) FROM people"])
    assert status == 1
    assert capsys.readouterr().err == (
        "pinqpy: error: the query needs an epsilon: pass --epsilon E or write OPTIONS "
        "(epsilon = 0.5)\n"
    )


# -- the footer: the session's note when it keeps one -----------------------------------------


class _Noting:
    """A session that keeps a note on each statement, as a local Session does; a statement
    the shell asks for itself (SHOW BUDGET) replaces it."""

    def __init__(self) -> None:
        self._session = _session()
        self.last_note: str | None = None

    @property
    def tables(self) -> list[str]:
        return list(self._session.tables)

    def sql(self, query: str, epsilon: object = None, delta: object = None) -> object:
        result = self._session.sql(query, epsilon=epsilon, delta=delta)
        self.last_note = f"note on {query.split()[0]} {query.split()[1]}"
        return result

    def describe(self, name: str) -> pd.DataFrame:
        return self._session.describe(name)


def test_the_footer_uses_the_sessions_note_and_says_what_is_left() -> None:
    shell, out, _ = _shell(_Noting())
    assert shell.run_script("SELECT COUNT(*) FROM people;") == 0
    footer = out.getvalue().strip().splitlines()[-1]
    # The note on the query itself, read before the shell asked SHOW BUDGET.
    assert footer == ("(1 row; ± is the half-width of the 95% interval; note on SELECT COUNT(*))")


class _Silent(_Noting):
    """A session that keeps no note, as a remote session does."""

    def __getattribute__(self, name: str) -> object:
        if name == "last_note":
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def sql(self, query: str, epsilon: object = None, delta: object = None) -> object:
        return self._session.sql(query, epsilon=epsilon, delta=delta)


def test_without_a_note_the_footer_reports_the_budgets_spent() -> None:
    shell, out, _ = _shell(_Silent())
    assert shell.run_script("SELECT COUNT(*) FROM people;") == 0
    assert out.getvalue().strip().splitlines()[-1] == (
        "(1 row; ± is the half-width of the 95% interval; charged epsilon 0.1 to people (0.9 left))"
    )


# -- intervals --------------------------------------------------------------------------------


def test_symmetric_intervals_and_the_cells_they_print() -> None:
    assert symmetric(10.0, 7.0, 13.0)
    assert not symmetric(7945.0, 0.0, 78437.0)  # clipped to the bounds on one side
    assert symmetric(44.1, 42.81, 45.36, places=1)  # 1.29 and 1.26 both read 1.3
    assert not symmetric(44.1, 42.81, 45.36)
    assert symmetric(1.0, -math.inf, math.inf)
    session = _session()
    session.register(
        "incomes",
        pd.DataFrame({"income": [0.0] * 90 + [78_437.0] * 10}),
        budget=pq.Budget(epsilon=1.0),
        bounds={"income": (0, 78_437)},
    )
    result = session.sql("SELECT COUNT(*) AS n, AVG(income) AS income FROM incomes", epsilon=0.05)
    (low, high), value = result.ci("income").iloc[0], float(result["income"].iloc[0])
    assert low == 0 and value - low != high - value  # clipped: lopsided
    text = render_table(result)
    row = text.splitlines()[2]
    assert re.search(r"\d+ ± \d+", row)  # the count's interval is symmetric
    assert re.search(r"\d+ \[0, \d+\]$", row), text
    assert interval_kinds(result) == {"±", "[]"}
    assert "[0, " in render_markdown(result)


def test_an_exceeded_budget_speaks_each_interface() -> None:
    session = _session()
    err = _raised(lambda: session.sql("SELECT COUNT(*) FROM people", epsilon=2))
    assert isinstance(err, BudgetExceededError)
    python = str(err)
    assert "needs Cost(epsilon=2) but only Cost(epsilon=1) remains" in python  # unchanged
    assert for_interface(err, "python") == python
    for interface, words in (
        ("cli", "pass a smaller --epsilon-per-query E"),
        ("shell", "set a smaller .epsilon E"),
        ("magic", "a smaller -e E"),
    ):
        spoken = for_interface(err, interface)
        assert "the query needs epsilon 2 but only epsilon 1 remains" in spoken
        assert words in spoken and "Cost(" not in spoken, spoken
