"""Silent extra charges are shown: Session.last_note after each SQL statement, the audit
trail of method-chained queries, PrivateFrame.explain, and EXPLAIN's scan names."""

from __future__ import annotations

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_KEYS, load_pums

BOUNDS = {"age": (0, 100), "income": (0, 500_000)}
# A public table whose key 1 repeats: joining on it doubles the stability.
LABELS = pd.DataFrame({"educ": [1, 1, 2, 3], "label": ["a", "b", "c", "d"]})


@pytest.fixture
def budget() -> pq.Budget:
    return pq.Budget(10)


@pytest.fixture
def people(budget: pq.Budget) -> pq.PrivateFrame:
    return pq.PrivateFrame(load_pums(), budget, bounds=BOUNDS, keys=PUMS_KEYS)


@pytest.fixture
def session(people: pq.PrivateFrame) -> pq.Session:
    s = pq.Session()
    s.register("people", people)
    s.register_public("labels", LABELS)
    return s


def test_note_names_the_join_that_doubles_the_charge(session: pq.Session) -> None:
    assert session.last_note is None
    session.sql(
        "SELECT COUNT(*), AVG(age) FROM people JOIN labels ON people.educ = labels.educ",
        epsilon=0.2,
    )
    assert session.last_note == (
        "charged epsilon 0.2 on people: 2 measurements x 0.05 x stability 2 "
        "(join labels: a key repeats up to 2 times (stability 1 -> 2)); 9.8 left"
    )


def test_note_of_a_plain_query_and_of_groups(session: pq.Session, budget: pq.Budget) -> None:
    session.sql("SELECT COUNT(*) FROM people WHERE age > 30", epsilon=0.1)
    assert session.last_note == (
        "charged epsilon 0.1 on people: 1 measurement x 0.1 x stability 1; 9.9 left"
    )
    session.sql("SELECT sex, AVG(income) FROM people GROUP BY sex", epsilon=0.3)
    assert session.last_note == (
        "charged epsilon 0.3 on people: 1 measurement x 0.3 x stability 1, once for all groups; "
        "9.6 left"
    )
    assert budget.spent == pq.Cost(0.4)


def test_note_of_a_groupby_subquery(session: pq.Session) -> None:
    session.sql(
        "SELECT COUNT(*) FROM (SELECT educ, COUNT(*) AS n FROM people GROUP BY educ) AS g "
        "WHERE n > 10",
        epsilon=0.2,
    )
    note = session.last_note
    assert note is not None and note.startswith("charged epsilon 0.2 on people: 1 measurement")
    assert "groupby educ" in note and "(stability 1 -> 2)" in note


def test_statements_that_charge_nothing(session: pq.Session) -> None:
    session.sql("EXPLAIN SELECT COUNT(*) FROM people", epsilon=0.1)
    assert session.last_note == "charged nothing (EXPLAIN reads no data)"
    session.sql("SHOW TABLES")
    assert session.last_note is None
    session.sql("SELECT COUNT(*) FROM people", epsilon=0.1)
    session.sql("SELECT COUNT(*) FROM people", epsilon=0.1)  # the same answer again
    assert session.last_note is not None and session.last_note.startswith("charged nothing")


def test_refused_query_leaves_no_note(session: pq.Session) -> None:
    session.sql("SELECT COUNT(*) FROM people", epsilon=0.1)
    with pytest.raises(pq.BudgetExceededError):
        session.sql("SELECT AVG(age) FROM people", epsilon=50)
    assert session.last_note is None


def test_note_holds_no_data(session: pq.Session) -> None:
    session.sql("SELECT AVG(income) FROM people WHERE age >= 65", epsilon=0.2)
    note = session.last_note or ""
    assert "0.2" in note
    exact = load_pums().query("age >= 65")["income"].mean()
    assert f"{exact:.0f}" not in note


# -- the audit trail of method chaining ----------------------------------------------------
def test_method_chained_charges_show_their_plan(people: pq.PrivateFrame, budget: pq.Budget) -> None:
    people.where("age >= 65").mean("income", epsilon=0.1)
    people.partition("sex").count(epsilon=0.1)
    people.join(LABELS, on="educ", name="labels").count(epsilon=0.1)
    people.groupby("educ").agg(n="COUNT(*)").where("n > 3").count(epsilon=0.1)
    people.median("age", epsilon=0.1)
    people.histogram("race", epsilon=0.1)
    labels = [label for _cost, label in budget.charges]
    assert labels == [
        "mean(income) over Where(age >= 65) <- table",
        "count() per sex (2 keys) over table",
        "count() over Join(public labels on educ) <- table",
        "count() over Where(n > 3) <- GroupBy(educ: n = COUNT(*)) <- table",
        "quantile(age) over table",
        "count() per race (6 keys) over table",
    ]
    audit = budget.audit()
    assert audit["description"].tolist() == labels


def test_selected_keys_are_labelled(budget: pq.Budget) -> None:
    df = pd.DataFrame({"city": ["Oslo"] * 50})
    frame = pq.PrivateFrame(df, pq.Budget(1, delta=1e-6), name="people")
    frame.where("city <> 'x'").select_keys("city", epsilon=0.5, delta=1e-7)
    assert frame.budgets[0].charges[0][1] == "select_keys(city) over Where(city <> 'x') <- people"


def test_ledger_keeps_the_plan_label(tmp_path: object) -> None:
    budget = pq.Budget(1, ledger=f"{tmp_path}/ledger.db", name="people")
    frame = pq.PrivateFrame(load_pums(), budget, bounds=BOUNDS, name="people")
    frame.where("age >= 65").mean("income", epsilon=0.1)
    audit = budget.audit()
    assert "mean(income) over Where(age >= 65) <- people" in audit.to_string()
    budget.ledger.close()  # type: ignore[attr-defined]


# -- explain() and EXPLAIN --------------------------------------------------------------------
def test_frame_explain_lists_steps_and_multipliers(people: pq.PrivateFrame) -> None:
    joined = people.join(LABELS, on="educ", name="labels").where("age > 3")
    text = joined.explain(epsilon=0.1)
    lines = text.splitlines()
    assert lines[0].startswith("Filter age > 3") and lines[0].endswith("stability 2")
    assert "Inner join public labels on educ" in lines[1] and lines[1].endswith("stability 2")
    assert lines[2].strip().startswith("Scan table") and lines[2].endswith("stability 1")
    assert "Multiplies the charge: join labels: a key repeats up to 2 times" in text
    assert "charges epsilon 0.1 x stability 2 = Cost(epsilon=0.2) to table" in text
    assert text.charges == {"table": pq.Cost(0.2)}
    assert people.budgets[0].spent.epsilon == 0  # explain charges nothing


def test_frame_explain_without_multipliers(people: pq.PrivateFrame) -> None:
    assert "No step multiplies the charge." in people.where("age > 3").explain()


def test_explain_scans_a_frame_by_its_registered_name(session: pq.Session) -> None:
    text = session.explain("SELECT COUNT(*) FROM people", epsilon=0.1)
    assert "Scan people" in text
    assert "Scan table" not in text


def test_a_bound_on_a_user_level_table_is_named() -> None:
    df = pd.DataFrame({"uid": [1, 1, 2], "x": [1, 2, 3]})
    s = pq.Session()
    s.register("visits", df, budget=pq.Budget(1), privacy_unit="uid", max_rows=2)
    s.sql("SELECT COUNT(*) FROM visits", epsilon=0.1)
    assert s.last_note == (
        "charged epsilon 0.1 on visits: 1 measurement x 0.05 x stability 2 "
        "(bound_contributions: up to 2 rows per 'uid' (stability inf -> 2)); 0.9 left"
    )
    frame = pq.PrivateFrame(df, pq.Budget(1), privacy_unit="uid", name="visits")
    text = frame.bound_contributions(3).explain(epsilon=0.1)
    assert "Multiplies the charge: bound_contributions: up to 3 rows per 'uid'" in text
    assert "= Cost(epsilon=0.3) to visits" in text
    assert "No step multiplies" in frame.bound_contributions(1).explain()
