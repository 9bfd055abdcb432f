"""Fix-it hints spoken in the terms of the interface in use: the same error says
``pass epsilon= to sql()`` in Python, ``set .epsilon E`` in the shell, ``pass --epsilon E`` on
the command line and ``pass -e E`` in a notebook magic, while ``str(err)`` stays as it was."""

from __future__ import annotations

import pickle

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.errors import BudgetExceededError, PinqError, PrivacyError
from pinqpy.interfaces.errors import for_interface, one_line


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
