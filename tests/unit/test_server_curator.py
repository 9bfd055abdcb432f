"""The curator's summary and dashboard page, from a real server state and its ledger file:
exact amounts per analyst and table, a group member's own part of the group's budget, the
ledger's other budgets, and no question anywhere."""

from __future__ import annotations

import json
from fractions import Fraction
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import pytest

from pinqpy.accounting.cost import Cost
from pinqpy.accounting.ledger import ChargeRecord, Ledger
from pinqpy.accounting.models import accountant_for
from pinqpy.remote.server.config import load_config
from pinqpy.remote.server.curator import read_ledger, summary
from pinqpy.remote.server.dashboard import _STYLE, CSP, dashboard_page, login_page
from pinqpy.remote.server.state import ServerState

PUMS = Path(str(resources.files("pinqpy").joinpath("data", "PUMS.csv")))
CONFIG = f"""
[server]
ledger = "ledger.db"
tokens = "tokens.json"
[tables.pums]
source = "csv"
path = "{PUMS}"
bounds = {{ age = [0, 100], income = [0, 500000] }}
[groups.lab]
budget = {{ epsilon = 2, delta = 1e-6, accounting = "zcdp" }}
[analysts.alice]
tables = ["pums"]
budget = {{ epsilon = 1, delta = 1e-6 }}
[analysts.bob]
tables = ["pums"]
group = "lab"
[analysts.carol]
tables = ["pums"]
group = "lab"
"""
# A literal no page or summary may show: the questions are the analysts' own.
MARKER = "4242"


@pytest.fixture
def state(tmp_path):
    path = tmp_path / "server.toml"
    path.write_text(CONFIG)
    s = ServerState(load_config(path))
    yield s
    s.close()


def ask(state: ServerState, analyst: str, where: str, epsilon: float) -> None:
    query = f"SELECT COUNT(*) FROM pums WHERE {where}"
    state.sql(state.analysts[analyst], {"query": query, "epsilon": epsilon})


def row_of(doc, analyst, budget=None):
    (row,) = [r for r in doc["rows"] if r["analyst"] == analyst and budget in (None, r["budget"])]
    return row


@pytest.fixture
def spent(state):
    ask(state, "alice", f"income > {MARKER}", 0.1)
    ask(state, "alice", "age > 37", 0.25)
    ask(state, "alice", "age > 37", 0.25)  # the same question again: free, not a query
    ask(state, "bob", "age > 20", 0.1)
    ask(state, "carol", "age > 30", 0.3)
    return state


def test_an_analysts_own_budget_exact(spent):
    doc = summary(spent)
    alice = row_of(doc, "alice")
    assert alice["budget"] == "analyst:alice/pums" and alice["table"] == "pums"
    assert alice["total"] == {"epsilon": "1", "delta": "1/1000000"}
    assert alice["spent"] == alice["analyst_spent"] == {"epsilon": "7/20", "delta": "0"}
    assert alice["remaining"] == {"epsilon": "13/20", "delta": "1/1000000"}
    assert alice["share"] == alice["analyst_share"] == pytest.approx(0.35, abs=0)
    assert alice["queries"] == alice["budget_queries"] == 2
    budget = spent.analysts["alice"].budgets["pums"]
    assert Fraction(alice["spent"]["epsilon"]) == budget.spent.epsilon
    times = [c["time"] for c in doc["charges"] if c["analyst"] == "alice"]
    assert alice["last_query"] == times[-1] and times == sorted(times)


def test_each_group_member_sees_the_groups_budget_and_their_own_part_of_it(spent):
    doc = summary(spent)
    bob, carol = row_of(doc, "bob"), row_of(doc, "carol")
    rho = accountant_for("zcdp").rho_budget(Cost(2, Fraction(1, 10**6)))  # type: ignore[attr-defined]
    for row in (bob, carol):
        assert row["budget"] == "group:lab/pums" and row["group"] == "lab"
        assert row["total"] == {"rho": str(rho), "epsilon": "2", "delta": "1/1000000"}
        assert row["spent"] == {"rho": "1/20"}  # (0.1² + 0.3²) / 2
        assert row["remaining"] == {"rho": str(rho - Fraction(1, 20))}
        assert row["budget_queries"] == 2 and row["queries"] == 1
    assert bob["analyst_spent"] == {"rho": "1/200"}
    assert carol["analyst_spent"] == {"rho": "9/200"}
    assert carol["analyst_share"] == pytest.approx(float(Fraction(9, 200) / rho), rel=1e-12)
    shares = {c["analyst"]: c["share_after"] for c in doc["charges"] if c["table"] == "pums"}
    assert shares["bob"] == bob["analyst_share"]


def test_the_ledgers_other_budgets_are_rows_not_in_the_config(spent):
    with Ledger(spent.config.ledger) as ledger:
        ledger.open_budget("analyst:dave/pums", Cost(1, Fraction(1, 10**6)))
        ledger.charge(
            [("analyst:dave/pums", Cost(Fraction(1, 10), Fraction(1, 2 * 10**6)))],
            ChargeRecord(f"count where x = {MARKER}"), {},
        )  # fmt: skip
        ledger.open_budget("group:<b>old</b>/pums", Cost(1))
        ledger.charge([("group:<b>old</b>/pums", Cost(Fraction(1, 2)))], ChargeRecord("x"), {})
    doc = summary(spent)
    dave = row_of(doc, "dave")
    assert dave["configured"] is False and dave["table"] == "pums"
    assert dave["share"] == 0.5  # delta's share (1/2) is the larger one
    assert dave["queries"] == 1
    old = row_of(doc, None, "group:<b>old</b>/pums")
    assert old["group"] == "<b>old</b>" and old["queries"] == 0 and old["budget_queries"] == 1
    page = dashboard_page(doc)
    assert "<b>old</b>" not in page and "&lt;b&gt;old&lt;/b&gt;" in page


def test_no_question_reaches_the_summary_or_the_page(spent):
    doc = summary(spent)
    text = json.dumps(doc) + dashboard_page(doc)
    assert MARKER not in text and "SELECT" not in text and "age > 37" not in text
    budgets, charges = read_ledger(spent.ledger)
    assert not any(hasattr(c, "description") or hasattr(c, "plan") for c in charges)
    assert {b.name for b in budgets} == {"analyst:alice/pums", "group:lab/pums"}


class Page(HTMLParser):
    """The page's table rows (cells by class), bars and plot series."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self.bars: list[dict[str, str]] = []
        self.series: list[dict[str, str]] = []
        self.cell: str | None = None
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and "data-budget" in a:
            self.rows.append({"data-analyst": a["data-analyst"], "data-table": a["data-table"]})
        elif tag == "td" and self.rows:
            self.cell = a["class"].split()[0]
            self.rows[-1][self.cell] = ""
        elif tag == "svg" and "bar" in a.get("class", ""):
            self.bars.append(a)
        elif tag == "g" and a.get("class") == "series":
            self.series.append(a)
        elif tag == "script":
            self.scripts += 1

    def handle_endtag(self, tag):
        if tag == "td":
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None and self.rows:
            self.rows[-1][self.cell] += data


def test_the_page_shows_the_table_the_bars_and_a_series_per_analyst(spent):
    page = Page()
    page.feed(dashboard_page(summary(spent)))
    assert [(r["data-analyst"], r["data-table"]) for r in page.rows] == [
        ("alice", "pums"), ("bob", "pums"), ("carol", "pums"),
    ]  # fmt: skip
    assert [r["analyst"] for r in page.rows] == ["alice", "bob (group lab)", "carol (group lab)"]
    alice = page.rows[0]
    assert alice["total"] == "ε 1, δ 0.000001" and alice["spent"] == "ε 0.35, δ 0"
    assert alice["remaining"] == "ε 0.65, δ 0.000001" and alice["queries"] == "2"
    assert page.rows[1]["analyst-spent"] == "ρ 0.005" and page.rows[1]["spent"] == "ρ 0.05"
    assert float(page.bars[0]["data-share"]) == pytest.approx(0.35)
    assert float(page.bars[1]["data-analyst-share"]) < float(page.bars[1]["data-share"])
    assert [s["data-analyst"] for s in page.series] == ["alice", "bob", "carol"]
    assert [s["data-charges"] for s in page.series] == ["2", "1", "1"]
    assert page.scripts == 0


def test_an_empty_ledger_says_so_and_the_style_is_the_one_the_policy_allows(state):
    page = dashboard_page(summary(state))
    assert 'id="no-charges"' in page and 'id="spending"' not in page
    import base64
    import hashlib

    digest = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
    assert f"style-src 'sha256-{digest}'" in CSP and "script-src" not in CSP
    assert "default-src 'none'" in CSP
    assert f"<style>{_STYLE}</style>" in page and f"<style>{_STYLE}</style>" in login_page()
    assert "&lt;script&gt;" in login_page("<script>")
