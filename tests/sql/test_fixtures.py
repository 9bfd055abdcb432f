"""Every case of ``tests/fixtures/sql/*.sql`` against the fixed session of ``conftest.py``.

The file format is described in ``tests/sql/conftest.py``. Errors must leave every budget
as it was; EXPLAIN must charge nothing and announce exactly what running the query charges.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from fractions import Fraction

import pandas as pd
import pytest

import pinqpy as pq
from tests.sql.conftest import Case, SqlEnv, load_cases

# Engine-independent: every test runs on each engine (see the `engine` fixture).
pytestmark = pytest.mark.usefixtures("engine")

CASES = load_cases()

ERRORS: dict[str, type[pq.PinqError]] = {
    "PinqSyntaxError": pq.PinqSyntaxError,
    "PrivacyError": pq.PrivacyError,
}

# Every row of SQL.md has cases; the fixture files name the topics they cover.
MIN_CASES = 60


def _params() -> list[object]:
    out = []
    for case in CASES:
        marks = []
        reason = case.get("xfail")
        if reason is not None:
            marks.append(pytest.mark.xfail(strict=True, reason=reason))
        out.append(pytest.param(case, id=case.name, marks=marks))
    return out


def _kwargs(case: Case) -> dict[str, float]:
    kw = {}
    if case.epsilon is not None:
        kw["epsilon"] = case.epsilon
    if case.delta is not None:
        kw["delta"] = case.delta
    return kw


def _squash(text: str) -> str:
    return re.sub(r" {2,}", " ", text)


def _charged(before: dict[str, tuple[Fraction, Fraction]], env: SqlEnv) -> dict[str, Fraction]:
    after = env.spent()
    return {name: after[name][0] - before[name][0] for name in after if after[name] != before[name]}


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= MIN_CASES
    kinds = Counter(case.expect for case in CASES)
    assert kinds["plan"] >= 10 and kinds["error"] >= 20 and kinds["result"] >= 20


@pytest.mark.parametrize("case", _params())
def test_fixture(case: Case, env: SqlEnv) -> None:
    if case.expect == "error":
        check_error(case, env)
    elif case.expect == "plan":
        check_plan(case, env)
    else:
        check_result(case, env)


# -- errors -----------------------------------------------------------------------------------
def check_error(case: Case, env: SqlEnv) -> None:
    before = env.spent()
    cls = ERRORS[case.header["error"]]
    with pq.testing.no_noise(), pytest.raises(pq.PinqError) as info:
        env.session.sql(case.query, **_kwargs(case))
    err = info.value
    assert env.spent() == before, f"{case.where}: a refused query moved a budget"
    assert type(err) is cls, f"{case.where}: {type(err).__name__}: {err}"
    message = getattr(err, "message", str(err))
    assert case.header["message"] in message, f"{case.where}: message was {message!r}"
    assert "internal error" not in str(err)
    if case.get("at") is None:
        return
    expected = case.at()
    got = (getattr(err, "line", None), getattr(err, "column", None))
    if expected is None:
        assert got == (None, None), f"{case.where}: unexpected position {got}"
        return
    assert got == expected, f"{case.where}: error at {got}, expected {expected}:\n{err}"
    # The rendered error shows the offending line with a caret under the column.
    line, column = expected
    rendered = str(err).splitlines()
    source = case.query.splitlines()[line - 1] if case.query.splitlines() else ""
    assert "  " + source.expandtabs(1) in rendered, f"{case.where}: query line not shown"
    assert "  " + " " * (column - 1) + "^" in rendered, f"{case.where}: caret not shown"


# -- plans ------------------------------------------------------------------------------------
_MEASURE = re.compile(r"^  (?P<label>\S.*?) +epsilon (?P<eps>\S+) ")


def _measurements(plan: str) -> list[tuple[str, str]]:
    lines = plan.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Noisy measurements:"))
    out = []
    for ln in lines[start + 1 :]:
        if not ln.strip():
            break
        m = _MEASURE.match(ln)
        assert m is not None, f"unreadable measurement line {ln!r}"
        out.append((m.group("label"), m.group("eps")))
    return out


def check_plan(case: Case, env: SqlEnv) -> None:
    text = case.query
    statement = text if text.lstrip().upper().startswith("EXPLAIN") else "EXPLAIN " + text
    before = env.spent()
    plan = env.session.sql(statement, **_kwargs(case))
    assert env.spent() == before, f"{case.where}: EXPLAIN charged the budget"
    assert isinstance(plan, str)
    lines = plan.splitlines()
    assert lines[0] == "EXPLAIN (charges nothing, reads no data)"

    split = [ln for ln in lines if ln.startswith("Noisy measurements: ")]
    assert split == ["Noisy measurements: " + case.header["split"]], f"{case.where}:\n{plan}"

    expected_measures = [tuple(p.strip() for p in m.split("|")) for m in case.all("measure")]
    assert _measurements(plan) == expected_measures, f"{case.where}:\n{plan}"

    totals = sorted(ln[len("Total charge to ") :] for ln in lines if ln.startswith("Total charge"))
    assert totals == sorted(case.all("total")), f"{case.where}:\n{plan}"

    squashed = _squash(plan)
    for part in case.all("contains"):
        assert _squash(part) in squashed, f"{case.where}: {part!r} not in\n{plan}"

    # The same text from Session.explain, and running the query charges what EXPLAIN says.
    if statement is not text:
        assert env.session.explain(text, **_kwargs(case)) == plan
    query = re.sub(r"^\s*EXPLAIN\s+", "", text, flags=re.IGNORECASE)
    # A budget charged nothing (a public row count only) does not move.
    announced = {
        name: Fraction(cost.epsilon)
        for name, cost in plan.charges.items()  # type: ignore[attr-defined]
        if cost.epsilon or cost.delta
    }
    with pq.testing.no_noise():
        env.session.sql(query, **_kwargs(case))
    charged = {f"budget of {name}": eps for name, eps in _charged(before, env).items()}
    assert charged == announced, f"{case.where}: charged {charged}, EXPLAIN said {announced}"


# -- results ----------------------------------------------------------------------------------
def _same(got: object, want: object) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return bool(got) == want and type(want) is bool
    if isinstance(want, int | float) and isinstance(got, int | float):
        return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-9)
    return got == want


def check_result(case: Case, env: SqlEnv) -> None:
    before = env.spent()
    with pq.testing.no_noise():
        result = env.session.sql(case.query, **_kwargs(case))
    assert isinstance(result, pd.DataFrame), f"{case.where}: got {type(result).__name__}"
    assert list(result.columns) == case.columns(), f"{case.where}:\n{result}"
    if case.get("rows") is not None:
        assert len(result) == int(case.header["rows"]), f"{case.where}:\n{result}"
    rows = case.rows()
    if rows:
        got_rows = [tuple(r) for r in result.itertuples(index=False)]
        assert len(got_rows) == len(rows), f"{case.where}:\n{result}"
        for got, want in zip(got_rows, rows, strict=True):
            assert len(got) == len(want), f"{case.where}: row {want} has the wrong width"
            assert all(_same(g, w) for g, w in zip(got, want, strict=True)), (
                f"{case.where}: row {got} != expected {want}\n{result}"
            )
    # No released number is ever NaN.
    for col in result.columns:
        if pd.api.types.is_float_dtype(result[col]):
            assert not result[col].isna().any(), f"{case.where}: NaN in {col}"

    charged = _charged(before, env)
    expected = case.charges()
    if expected is not None:
        assert charged == {k: Fraction(str(v)) for k, v in expected.items()}, (
            f"{case.where}: charged {charged}"
        )
    else:
        epsilon = Fraction(str(case.epsilon)) if case.epsilon is not None else None
        assert charged, f"{case.where}: nothing was charged"
        if epsilon is not None:
            assert max(charged.values()) == epsilon, f"{case.where}: charged {charged}"


def test_explain_stability_over_two_budgets_is_not_a_fraction(env: SqlEnv) -> None:
    plan = env.session.explain(
        "SELECT COUNT(*) FROM (SELECT pid, COUNT(*) AS n FROM persons GROUP BY pid) AS a "
        "JOIN (SELECT pid, SUM(minutes) AS m FROM visits GROUP BY pid) AS b USING (pid)",
        epsilon=1,
    )
    join = next(ln for ln in plan.splitlines() if "Join on pid" in ln)
    # The join has stability 2 towards persons' budget and 1 towards visits' budget.
    assert not re.search(r"stability \d+/\d+\s*$", join), join
