"""The curator's view on a real ``pinqpy serve``: the summary and the page open with the
curator's token only (an analyst's is refused, 403), the browser's sign-in is a short-lived
cookie that cannot travel to the API, and every request writes one log line that says who,
what endpoint, which status and what was charged, and never what was asked."""

from __future__ import annotations

import io
import json
import re
import stat
import subprocess
import time
import warnings
from fractions import Fraction

import httpx
import pytest

import pinqpy as pq
from pinqpy.demo import load_pums
from pinqpy.remote.server.app import create_app
from pinqpy.remote.server.auth import TokenStore, hash_token, new_token
from pinqpy.remote.server.config import load_config
from pinqpy.remote.server.requestlog import RequestLog
from pinqpy.remote.server.sessions import COOKIE
from pinqpy.remote.server.state import ServerState
from tests.remote.harness import (
    PUMS_CSV,
    START_TIMEOUT,
    ServerProcess,
    _command,
    _env,
    default_config,
    start_server,
)

# A literal that no log line, summary or page may show (it is in the analysts' questions).
MARKER = "4242"
DUCKDB_TABLE = f"""
[tables.pums_db]
source = "csv"
path = "{PUMS_CSV}"
engine = "duckdb"
bounds = {{ age = [0, 100], income = [0, 500000] }}
"""


def curator_config(digest: str | None, *, server: str = "", analysts=("alice", "bob")) -> str:
    text = default_config(analysts)
    lines = server + (f'\ncurator_token_sha256 = "{digest}"' if digest else "")
    return text.replace("[server]\n", f"[server]{lines}\n", 1)


@pytest.fixture(scope="module")
def curator_token() -> str:
    return new_token()


@pytest.fixture(scope="module")
def server(tmp_path_factory, curator_token):
    """alice on pandas (her data requests run in her worker process) and bob on DuckDB (in
    a thread of the server's), both with their own budgets; the log on standard error."""
    text = curator_config(hash_token(curator_token)) + DUCKDB_TABLE
    text = text.replace('[analysts.bob]\ntables = ["pums"]', '[analysts.bob]\ntables = ["pums_db"]')
    with start_server(tmp_path_factory.mktemp("curator"), text, analysts=("alice", "bob")) as s:
        yield s


def sql(server: ServerProcess, analyst: str, query: str, epsilon: float) -> httpx.Response:
    return httpx.post(
        server.url + "/v1/sql", json={"query": query, "epsilon": epsilon},
        headers=server.headers(analyst), timeout=60,
    )  # fmt: skip


def log_lines(server: ServerProcess, since: int = 0, count: int = 0) -> list[dict]:
    """The JSON lines of the server's output after the first ``since``, waiting for
    ``count`` of them (the output is read by a thread of the harness)."""
    deadline = time.monotonic() + 30
    while True:
        found = [json.loads(x) for x in server.output[since:] if x.startswith("{")]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- the summary -------------------------------------------------------------------------------
def test_the_summary_opens_with_the_curators_token_only(server, curator_token):
    url = server.url + "/v1/curator/summary"
    assert httpx.get(url, headers=bearer(curator_token)).status_code == 200
    refused = httpx.get(url, headers=server.headers("alice"))
    assert refused.status_code == 403
    assert "analyst's token" in refused.json()["error"]["message"]
    for headers in ({}, bearer(new_token()), {"Authorization": f"Basic {curator_token}"}):
        r = httpx.get(url, headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert httpx.post(url, headers=bearer(curator_token)).status_code == 405


def test_the_summary_says_who_spent_what_exactly_and_no_question(server, curator_token):
    assert sql(server, "alice", f"SELECT COUNT(*) FROM pums WHERE income > {MARKER}", 0.1)
    assert sql(server, "bob", "SELECT COUNT(*) FROM pums_db WHERE age > 30", 0.25)
    r = httpx.get(server.url + "/v1/curator/summary", headers=bearer(curator_token))
    doc = r.json()
    assert r.headers["cache-control"] == "no-store"
    rows = {(row["analyst"], row["table"]): row for row in doc["rows"]}
    assert set(rows) == {("alice", "pums"), ("bob", "pums_db")}
    budget = httpx.get(server.url + "/v1/budget", headers=server.headers("alice")).json()
    (mine,) = budget["result"]["budgets"]
    alice = rows[("alice", "pums")]
    assert alice["spent"] == mine["spent"] and alice["remaining"] == mine["remaining"]
    assert alice["total"] == mine["total"] == {"epsilon": "10", "delta": "1/1000000"}
    assert alice["queries"] >= 1 and alice["last_query"] is not None
    spent = Fraction(alice["spent"]["epsilon"])
    assert alice["share"] == pytest.approx(float(spent / 10))
    assert MARKER not in r.text and "SELECT" not in r.text


ROW_KEYS = {
    "analyst", "table", "budget", "group", "accounting", "configured", "total", "spent",
    "remaining", "share", "analyst_spent", "analyst_share", "queries", "budget_queries",
    "last_query",
}  # fmt: skip
CHARGE_KEYS = {"analyst", "table", "budget", "time", "epsilon", "delta", "share_after"}


def test_the_summary_and_the_page_hold_budgets_and_charges_only(server, curator_token):
    """No answer the analysts got, and no row count, reaches the curator's view: the summary
    has only the documented keys, and neither it nor the page shows an answer's value."""
    answers = []
    for who, table in (("alice", "pums"), ("bob", "pums_db")):
        with pq.connect(server.url, token=server.tokens[who]) as session:
            got = session.sql(f"SELECT COUNT(*) AS n, SUM(income) AS s FROM {table}", 0.5)
        answers += [float(got["n"].iloc[0]), float(got["s"].iloc[0])]
    doc = httpx.get(server.url + "/v1/curator/summary", headers=bearer(curator_token)).json()
    assert set(doc) == {"generated", "version", "rows", "charges"}
    assert all(set(row) == ROW_KEYS for row in doc["rows"])
    assert all(set(c) == CHARGE_KEYS for c in doc["charges"])
    page = httpx.get(server.url + "/curator", headers=bearer(curator_token)).text
    rows = len(load_pums())
    # each noisy answer as a client would print it, and to 4 decimals
    noisy = [f"{x:.4f}" for x in answers] + [repr(x) for x in answers]
    for text in (json.dumps(doc), page):
        assert not re.search(rf"(?<![\d/.]){rows}(?![\d/.])", text)  # the table's row count
        assert not any(number in text for number in noisy)


# -- the request log ---------------------------------------------------------------------------
def test_every_request_writes_one_line_with_its_charge_and_never_its_question(server):
    since = len(server.output)
    queries = [
        ("alice", f"SELECT COUNT(*) FROM pums WHERE age > 40 AND income < {MARKER}", 0.125),
        ("bob", f"SELECT COUNT(*) FROM pums_db WHERE income < {MARKER}", 0.5),
        ("alice", "SELECT COUNT(*) FROM pums", 1000),  # over the budget: 409, not charged
        ("alice", "SELECT COUNT(*) FROM pums_db", 0.1),  # not hers: refused, 400
    ]
    statuses = [sql(server, a, q, e).status_code for a, q, e in queries]
    assert statuses == [200, 200, 409, 400]
    httpx.get(server.url + f"/v1/{MARKER}/x", headers=server.headers("alice"))  # 404
    httpx.get(server.url + "/v1/budget")  # 401
    lines = log_lines(server, since, 6)
    assert len(lines) == 6
    ok_alice, ok_bob, over, forbidden, unknown, anonymous = lines
    assert ok_alice["charges"] == [
        {"table": "pums", "budget": "analyst:alice/pums", "epsilon": "1/8", "delta": "0"}
    ]
    assert ok_bob["charges"] == [
        {"table": "pums_db", "budget": "analyst:bob/pums_db", "epsilon": "1/2", "delta": "0"}
    ]
    for line, status in zip(lines, [200, 200, 409, 400, 404, 401], strict=True):
        assert line["status"] == status and isinstance(line["ms"], float)
        assert line["time"].endswith("+00:00")
    assert [x["analyst"] for x in lines] == ["alice", "bob", "alice", "alice", "alice", None]
    assert [x["endpoint"] for x in lines] == ["/v1/sql"] * 4 + ["other", "/v1/budget"]
    assert over["charges"] == [] and forbidden["charges"] == []
    assert [x["tables"] for x in lines] == [["pums"], ["pums_db"], ["pums"], [], [], []]
    assert unknown["charges"] == [] and anonymous["role"] is None
    text = "\n".join(server.output[since:])
    assert MARKER not in text and "SELECT" not in text
    assert not any(t in text for t in server.tokens.values())


def test_a_request_stopped_at_its_limit_logs_its_charge_as_not_known(tmp_path, monkeypatch):
    """In this process (Starlette's test client), where the work can be made slow: past the
    run-time limit the answer is 504 and the line's charges are null, not []."""
    with warnings.catch_warnings():  # starlette would rather its test client used httpx2
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    text = default_config().replace("[tables.pums]", "[server.limits]\nquery_timeout_s = 4\n"
                                    "\n[tables.pums]")  # fmt: skip
    (tmp_path / "server.toml").write_text(text)
    cfg = load_config(tmp_path / "server.toml")
    token = TokenStore(cfg.tokens, cfg.analysts).add("alice")
    state = ServerState(cfg)
    stream = io.StringIO()
    app = create_app(state, log=io.StringIO(), requests=RequestLog(stream))
    real = state.sql

    def slow(a, body):
        out = real(a, body)  # charged and answered ...
        time.sleep(5)  # ... too late
        return out

    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            client.headers["Authorization"] = f"Bearer {token}"
            body = {"query": "SELECT COUNT(*) FROM pums", "epsilon": 0.5}
            monkeypatch.setattr(state, "sql", slow)
            assert client.post("/v1/sql", json=body).status_code == 504
            monkeypatch.setattr(state, "sql", real)
            body["epsilon"] = 0.25
            assert client.post("/v1/sql", json=body).status_code == 200
    finally:
        state.close()
    late, answered = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert (late["status"], late["charges"], late["tables"]) == (504, None, None)
    assert answered["charges"] == [
        {"table": "pums", "budget": "analyst:alice/pums", "epsilon": "1/4", "delta": "0"}
    ]


def test_the_log_can_go_to_a_file_of_the_curators_own(tmp_path):
    text = curator_config(None, server='\nlog = "requests.jsonl"', analysts=("alice",))
    with start_server(tmp_path, text) as server:
        assert "request log: " + str(tmp_path / "requests.jsonl") in server.output
        assert httpx.get(server.url + "/v1/budget", headers=server.headers()).status_code == 200
        path = tmp_path / "requests.jsonl"
        deadline = time.monotonic() + 30
        while not path.exists() or not path.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # the harness's probes (401s without a token) first, then alice's request
        *probes, line = [json.loads(x) for x in path.read_text().splitlines()]
        assert line["analyst"] == "alice" and line["endpoint"] == "/v1/budget"
        assert all(p["status"] == 401 and p["analyst"] is None for p in probes)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert not any(x.startswith("{") for x in server.output)


# -- without a curator token -------------------------------------------------------------------
def test_without_a_curator_token_there_is_no_dashboard(tmp_path):
    with start_server(tmp_path) as server:
        assert any(x.startswith("dashboard: off") for x in server.output)
        for path in ("/curator", "/v1/curator/summary"):
            assert httpx.get(server.url + path).status_code == 401
            assert httpx.get(server.url + path, headers=server.headers()).status_code == 404


# -- the curator's token -----------------------------------------------------------------------
def test_curator_token_prints_a_token_and_the_line_with_its_hash(tmp_path):
    config = tmp_path / "server.toml"
    config.write_text(default_config())
    made = subprocess.run(
        _command(str(config), "--curator-token"), capture_output=True, text=True, env=_env(),
        timeout=START_TIMEOUT,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    token = re.search(r"^token: (\S+)$", made.stdout, re.M).group(1)  # type: ignore[union-attr]
    line = re.search(r'^curator_token_sha256 = "([0-9a-f]{64})"$', made.stdout, re.M)
    assert line is not None and line.group(1) == hash_token(token)
    assert config.read_text() == default_config()  # the server never writes the config


def test_an_analysts_token_cannot_be_the_curators(tmp_path):
    config = tmp_path / "server.toml"
    config.write_text(default_config())
    made = subprocess.run(
        _command(str(config), "--add-analyst", "alice"), capture_output=True, text=True,
        env=_env(), timeout=START_TIMEOUT,
    )  # fmt: skip
    token = made.stdout.split()[1]
    config.write_text(curator_config(hash_token(token), analysts=("alice",)))
    run = subprocess.run(
        _command(str(config), "--port", "0"), capture_output=True, text=True, env=_env(),
        timeout=START_TIMEOUT,
    )  # fmt: skip
    assert run.returncode == 1
    assert "hash of an analyst's token" in run.stderr and "--curator-token" in run.stderr


# -- the browser's way in ----------------------------------------------------------------------
def login(server: ServerProcess, token: str, **headers: str) -> httpx.Response:
    return httpx.post(
        server.url + "/curator/login", data={"token": token}, headers=headers,
        follow_redirects=False,
    )  # fmt: skip


def test_signing_in_sets_a_strict_httponly_cookie_for_the_curator_paths(server, curator_token):
    r = login(server, curator_token, origin=server.url)
    assert r.status_code == 303 and r.headers["location"] == "/curator"
    cookie = r.headers["set-cookie"]
    assert re.match(rf"{COOKIE}=[\w.-]+; Path=/curator; Max-Age=\d+; HttpOnly; SameSite=Strict$",
                    cookie)  # fmt: skip
    value = cookie.split(";")[0].split("=", 1)[1]
    page = httpx.get(server.url + "/curator", headers={"Cookie": f"{COOKIE}={value}"})
    assert page.status_code == 200 and 'id="budgets"' in page.text
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    assert page.headers["x-frame-options"] == "DENY" and page.headers["cache-control"] == "no-store"
    # the cookie opens nothing of the analysts' API
    api = httpx.get(server.url + "/v1/budget", headers={"Cookie": f"{COOKIE}={value}"})
    assert api.status_code == 401
    # signing out ends the session: the same cookie then shows the sign-in form
    out = httpx.post(server.url + "/curator/logout", headers={"Cookie": f"{COOKIE}={value}"})
    assert out.status_code == 303 and "Max-Age=0" in out.headers["set-cookie"]
    again = httpx.get(server.url + "/curator", headers={"Cookie": f"{COOKIE}={value}"})
    assert again.status_code == 200 and 'name="token"' in again.text
    assert 'id="budgets"' not in again.text


def test_an_analysts_token_or_another_sites_form_is_refused(server, curator_token):
    refused = login(server, server.tokens["alice"])
    assert refused.status_code == 403 and "set-cookie" not in refused.headers
    assert "an analyst&#x27;s token does not open" in refused.text
    assert login(server, new_token()).status_code == 401
    assert login(server, "").status_code == 401
    elsewhere = login(server, curator_token, origin="http://evil.example")
    assert elsewhere.status_code == 403 and "set-cookie" not in elsewhere.headers
    too_big = httpx.post(server.url + "/curator/login", content=b"token=" + b"x" * 10_000)
    assert too_big.status_code == 400
    page = httpx.get(server.url + "/curator", headers=server.headers("alice"))
    assert page.status_code == 403 and 'id="budgets"' not in page.text
    assert httpx.get(server.url + "/curator", headers=bearer(curator_token)).status_code == 200
    assert httpx.get(server.url + "/curator/login").status_code == 405


def test_the_curators_requests_are_logged_as_the_curators_without_the_token(
    server, curator_token
):
    since = len(server.output)
    login(server, curator_token)
    login(server, server.tokens["bob"])
    lines = log_lines(server, since, 2)
    assert [(x["role"], x["analyst"], x["status"]) for x in lines] == [
        ("curator", None, 303), ("analyst", "bob", 403),
    ]  # fmt: skip
    assert all(x["endpoint"] == "/curator/login" for x in lines)
    assert curator_token not in "\n".join(server.output)


def test_a_fresh_server_forgets_every_session(tmp_path, curator_token):
    text = curator_config(hash_token(curator_token), analysts=("alice",))
    server = start_server(tmp_path, text)
    try:
        value = login(server, curator_token).headers["set-cookie"].split(";")[0]
        server = server.restart()
        page = httpx.get(server.url + "/curator", headers={"Cookie": value})
        assert 'id="budgets"' not in page.text and 'name="token"' in page.text
    finally:
        server.stop()


def test_the_banner_names_the_dashboard(server):
    assert f"dashboard: {server.url}/curator (the curator's token)" in server.output
    assert "request log: standard error" in server.output
