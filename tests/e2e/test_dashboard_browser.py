"""The curator's dashboard in a real browser: headless Chromium (Playwright) against a real
``pinqpy serve`` on 127.0.0.1. The curator signs in and sees one row per analyst and table
with the right numbers, a bar per budget and a plot with a series per analyst; an analyst's
token is refused (403) for the page and the summary; no question shows; the session cookie
is out of scripts' reach; the browser is stopped by its PID at the end."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from pinqpy.remote.server.auth import hash_token, new_token
from tests.e2e.browser import chromium, running
from tests.remote.harness import default_config, start_server

MARKER = "4242"  # in every question asked; never on the page
GROUP = """
[groups.lab]
budget = { epsilon = 2, delta = 1e-6 }
[analysts.carol]
tables = ["pums"]
group = "lab"
[analysts.dan]
tables = ["pums"]
group = "lab"
"""
# analyst -> the epsilons of their questions (each a different question, each charged)
ASKED = {"alice": [0.5, 1.5], "bob": [1.0], "carol": [0.5], "dan": [0.25]}


@pytest.fixture(scope="module")
def curator_token() -> str:
    return new_token()


@pytest.fixture(scope="module")
def server(tmp_path_factory, curator_token):
    text = default_config(("alice", "bob")) + GROUP
    line = f'curator_token_sha256 = "{hash_token(curator_token)}"'
    text = text.replace("[server]\n", f"[server]\n{line}\n")
    folder = tmp_path_factory.mktemp("dashboard")
    with start_server(folder, text, analysts=tuple(ASKED)) as s:
        for analyst, epsilons in ASKED.items():
            for i, epsilon in enumerate(epsilons):
                query = f"SELECT COUNT(*) FROM pums WHERE income > {MARKER} + {i}"
                r = httpx.post(s.url + "/v1/sql", json={"query": query, "epsilon": epsilon},
                               headers=s.headers(analyst), timeout=60)  # fmt: skip
                assert r.status_code == 200, r.text
        yield s


def cells(page, analyst: str) -> dict[str, str]:
    row = page.locator(f'#budgets tr[data-analyst="{analyst}"]')
    names = ["total", "analyst-spent", "spent", "remaining", "queries", "last"]
    return {n: row.locator(f"td.{n}").inner_text().strip() for n in names}


def sign_in(page, url: str, token: str):
    page.goto(url + "/curator")
    page.fill('input[name="token"]', token)
    with page.expect_response(url + "/curator/login") as answer:
        page.click('button[type="submit"]')
    page.wait_for_load_state()
    return answer.value


def test_the_curator_sees_who_spent_what_and_an_analyst_is_refused(
    server, curator_token, tmp_path
):
    with chromium(tmp_path) as (browser, pid):
        assert running(pid)
        context = browser.new_context()
        page = context.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))

        refused = sign_in(page, server.url, server.tokens["alice"])
        assert refused.status == 403
        assert "an analyst's token does not open" in page.inner_text("#message")
        assert page.locator("#budgets").count() == 0 and context.cookies() == []
        assert problems == ["Failed to load resource: the server responded with a status of 403 "
                            "(Forbidden)"]  # fmt: skip
        problems.clear()

        assert sign_in(page, server.url, curator_token).status == 303
        assert page.url == server.url + "/curator"
        check_the_table(page)
        check_the_bars(page)
        check_the_plot(page)
        html = page.content()
        assert MARKER not in html and "SELECT" not in html and "COUNT" not in html

        (cookie,) = context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert cookie["path"] == "/curator" and page.evaluate("document.cookie") == ""
        page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)
        assert (tmp_path / "dashboard.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

        page.click("text=sign out")
        page.wait_for_selector('input[name="token"]')
        page.goto(server.url + "/curator")
        assert page.locator("#budgets").count() == 0
        assert problems == []  # no script ran, and no style broke the page's policy
        context.close()
    assert not running(pid) and not Path(f"/proc/{pid}").exists()


def check_the_table(page) -> None:
    rows = page.locator("#budgets tbody tr")
    assert [rows.nth(i).get_attribute("data-analyst") for i in range(rows.count())] == list(ASKED)
    alice = cells(page, "alice")
    assert alice["total"] == "ε 10, δ 0.000001"
    assert alice["analyst-spent"] == alice["spent"] == "ε 2, δ 0"
    assert alice["remaining"] == "ε 8, δ 0.000001" and alice["queries"] == "2"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", alice["last"])
    assert cells(page, "bob")["spent"] == "ε 1, δ 0"
    carol, dan = cells(page, "carol"), cells(page, "dan")
    assert carol["total"] == dan["total"] == "ε 2, δ 0.000001"
    assert carol["spent"] == dan["spent"] == "ε 0.75, δ 0"  # the group's, both together
    assert carol["analyst-spent"] == "ε 0.5, δ 0" and dan["analyst-spent"] == "ε 0.25, δ 0"
    assert carol["queries"] == dan["queries"] == "1"


def check_the_bars(page) -> None:
    """Each bar's parts, as the browser lays them out: this analyst's share of the budget,
    and (a group's) everyone's."""
    expected = {"alice": (0.2, 0.2), "bob": (0.1, 0.1), "carol": (0.25, 0.375),
                "dan": (0.125, 0.375)}  # fmt: skip
    for analyst, (mine, everyone) in expected.items():
        bar = page.locator(f'#budgets tr[data-analyst="{analyst}"] svg.bar')
        assert float(bar.get_attribute("data-share")) == pytest.approx(everyone)
        track = bar.locator("rect.track").bounding_box()
        for part, share in (("mine", mine), ("others", everyone)):
            box = bar.locator(f"rect.{part}").bounding_box()
            assert box["width"] == pytest.approx(share * track["width"], abs=0.5)
        label = page.locator(f'#budgets tr[data-analyst="{analyst}"] .share').inner_text()
        assert label == f"{everyone:.0%}"


def check_the_plot(page) -> None:
    """A series per analyst, in order; each one's last level is its share used, so higher
    shares end higher on the plot (a smaller y)."""
    plot = page.locator("svg#spending")
    assert plot.is_visible()
    series = plot.locator("g.series")
    assert [series.nth(i).get_attribute("data-analyst") for i in range(series.count())] == list(
        ASKED
    )
    last_y = {}
    for i in range(series.count()):
        g = series.nth(i)
        analyst = g.get_attribute("data-analyst")
        assert g.get_attribute("data-charges") == str(len(ASKED[analyst]))
        points = g.locator("polyline").get_attribute("points").split()
        assert len(points) == 2 * len(ASKED[analyst]) + 1  # a step per charge, then on to now
        last_y[analyst] = float(points[-1].split(",")[1])
        assert g.locator("polyline").bounding_box()["width"] > 0
    assert last_y["carol"] < last_y["alice"] < last_y["dan"] < last_y["bob"]
    legend = plot.locator("#legend g.entry text").all_text_contents()
    assert [t.strip() for t in legend] == [f"{a} · pums" for a in ASKED]
    assert plot.locator("#legend g.entry").nth(3).bounding_box()["y"] > last_y["bob"]


def test_an_analysts_token_opens_neither_the_page_nor_the_summary(server, tmp_path):
    with chromium(tmp_path) as (browser, pid):
        context = browser.new_context(extra_http_headers=server.headers("bob"))
        page = context.new_page()
        assert page.goto(server.url + "/curator").status == 403
        assert "an analyst's token does not open" in page.inner_text("#message")
        assert page.locator("#budgets").count() == 0
        summary = page.goto(server.url + "/v1/curator/summary")
        assert summary.status == 403 and "analyst's token" in summary.json()["error"]["message"]
        context.close()
    assert not running(pid)
