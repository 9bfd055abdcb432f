"""The request log on a real ``pinqpy serve``, asked by an analyst who tries to get a question
into it: a literal (``WHERE income = 123456``) in SQL, in a plan, in a malformed body, in a
path, a query string or a token, answered 200, 400, 401, 403, 404, 409, 413 or 422, never
appears in the log or anywhere in the server's output; each request is still one line with
who asked, the endpoint, the status, the tables and the charge. A request stopped at the
run-time limit is one line with status 504, its tables and charge ``null`` (not known: it
may or may not have been charged; the ledger has it), on the pandas path (a worker process,
killed) and the DuckDB one (a thread, interrupted)."""

from __future__ import annotations

import json
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums
from tests.remote.harness import PUMS_CSV, ServerProcess, default_config, start_server
from tests.remote.test_server_limits import STAND_IN, TINY, answers_soon, count_body, heavy

SECRET = "123456"  # in every question below; in no line of the log
# a table of the server's that neither analyst is granted (a 403, like an unknown one)
NOT_GRANTED = pq.PrivateFrame(
    load_pums().iloc[:0], pq.Budget(1), name="pums_db", bounds=PUMS_BOUNDS, keys=PUMS_KEYS
)
DUCKDB_TABLE = f"""
[tables.pums_db]
source = "csv"
path = "{PUMS_CSV}"
engine = "duckdb"
bounds = {{ age = [0, 100], income = [0, 500000] }}
"""


def log_config(limits: str = "", engine: str = "pandas") -> str:
    """alice and bob on ``pums``, the request log in ``requests.jsonl`` next to the config."""
    text = default_config(("alice", "bob"))
    text = text.replace("[server]\n", '[server]\nlog = "requests.jsonl"\n', 1)
    if limits:
        text = text.replace("[tables.pums]", f"[server.limits]\n{limits}\n\n[tables.pums]")
        text = text.replace("epsilon = 10,", "epsilon = 1000,")
    if engine != "pandas":
        text = text.replace(f'path = "{PUMS_CSV}"', f'path = "{PUMS_CSV}"\nengine = "{engine}"')
    return text


def read_log(path: Path, count: int) -> list[dict[str, Any]]:
    """The log's lines of analysts' and anonymous requests, waiting for ``count`` of them past
    the harness's start-up probes (401s without a token, ``analyst`` null, no charge)."""
    deadline = time.monotonic() + 30
    while True:
        text = path.read_text() if path.exists() else ""
        lines = [json.loads(x) for x in text.splitlines()]
        mine = [x for x in lines if x["analyst"] is not None]
        if len(mine) >= count or time.monotonic() > deadline:
            return lines
        time.sleep(0.05)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("requestlog")
    with start_server(folder, log_config() + DUCKDB_TABLE, analysts=("alice", "bob")) as s:
        yield s


def sql(s: ServerProcess, who: str, query: str, epsilon: float, **more: Any) -> int:
    body = {"query": query, "epsilon": epsilon, **more}
    return httpx.post(s.url + "/v1/sql", json=body, headers=s.headers(who), timeout=60).status_code


def raw(s: ServerProcess, who: str | None, method: str, path: str, content: bytes = b"") -> int:
    headers = s.headers(who) if who else {"Authorization": f"Bearer {SECRET}"}
    headers["Content-Type"] = "application/json"
    r = httpx.request(method, s.url + path, content=content, headers=headers, timeout=60)
    return r.status_code


def test_no_literal_of_any_question_reaches_the_log(server):
    where = f"WHERE income = {SECRET}"
    asked = [  # (who, what, status)
        (lambda: sql(server, "alice", f"SELECT COUNT(*) FROM pums {where}", 0.125), 200),
        (lambda: sql(server, "bob", f"SELECT AVG(income) FROM pums {where}", 0.25), 200),
        (lambda: sql(server, "alice", f"SELECT COUNT(*) FROM pums {where}", 0.5, explain=True),
         200),
        (lambda: sql(server, "bob", f"SELECT COUNT(*) FROM pums {where} AND", 0.1), 400),
        (lambda: sql(server, "alice", f"SELECT COUNT(*) FROM pums WHERE nosuch = {SECRET}", 0.1),
         400),
        (lambda: sql(server, "alice", f"SELECT COUNT(*) FROM t{SECRET}", 0.1), 400),
        (lambda: sql(server, "alice", f"SELECT COUNT(*) FROM pums {where}", 1000), 409),
        (lambda: sql(server, "bob", f"SELECT COUNT(*) FROM pums {where} " + " " * 20_000, 0.1),
         422),
        (lambda: raw(server, "alice", "POST", "/v1/aggregate", json.dumps(
            count_body(STAND_IN.where(f"income = {SECRET}"), 0.0625)).encode()), 200),
        (lambda: raw(server, "bob", "POST", "/v1/aggregate", json.dumps(
            count_body(NOT_GRANTED.where(f"income = {SECRET}"), 0.1)).encode()), 403),
        (lambda: raw(server, "bob", "POST", "/v1/sql", f'{{"query": "{SECRET}'.encode()), 400),
        (lambda: raw(server, "bob", "POST", "/v1/sql", SECRET.encode() * 200_000), 413),
        (lambda: raw(server, "alice", "GET", f"/v1/budget?income={SECRET}"), 200),
        (lambda: raw(server, "alice", "GET", f"/v1/sql/{SECRET}"), 404),
        (lambda: raw(server, None, "GET", f"/v1/{SECRET}"), 401),
    ]  # fmt: skip
    statuses = [ask() for ask, _ in asked]
    assert statuses == [status for _, status in asked]
    lines = read_log(server.config.parent / "requests.jsonl", len(asked) - 1)[-len(asked) :]
    assert [x["status"] for x in lines] == statuses
    assert [x["analyst"] for x in lines] == [
        "alice", "bob", "alice", "bob", "alice", "alice", "alice", "bob", "alice", "bob", "bob",
        "bob", "alice", "alice", None,
    ]  # fmt: skip
    assert [x["endpoint"] for x in lines] == (
        ["/v1/sql"] * 8 + ["/v1/aggregate"] * 2 + ["/v1/sql"] * 2 + ["/v1/budget", "other", "other"]
    )
    charged = [x["charges"] for x in lines]
    assert charged[0] == [
        {"table": "pums", "budget": "analyst:alice/pums", "epsilon": "1/8", "delta": "0"}
    ]
    assert charged[1][0]["budget"] == "analyst:bob/pums" and charged[1][0]["epsilon"] == "1/4"
    assert charged[8][0]["epsilon"] == "1/16"
    assert all(c == [] for i, c in enumerate(charged) if i not in (0, 1, 8))  # EXPLAIN is free
    # the tables charged, or refused for want of budget (the 409); never a name asked for
    assert [x["tables"] for x in lines] == (
        [["pums"]] * 2 + [[]] * 4 + [["pums"]] + [[]] + [["pums"]] + [[]] * 6
    )
    log = (server.config.parent / "requests.jsonl").read_text()
    assert SECRET not in log and "income" not in log and "SELECT" not in log
    assert SECRET not in "\n".join(server.output)  # nor the console (banner, warnings, faults)
    # the keys of a line are the documented ones, whatever the request was
    keys = {"time", "analyst", "role", "method", "endpoint", "status", "ms", "tables", "charges"}
    assert all(set(x) == keys for x in lines)


# -- a request stopped at the run-time limit ---------------------------------------------------
@pytest.mark.parametrize(("engine", "rows_per_key"), [("pandas", 2), ("duckdb", 40)])
def test_a_request_stopped_at_its_limit_is_one_line_its_charge_not_known(
    tmp_path, engine, rows_per_key
):
    if engine == "duckdb":
        pytest.importorskip("duckdb")
    server = start_server(tmp_path, log_config("query_timeout_s = 0.5", engine))
    with server, httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as c:
        answers_soon(c)  # the first read of a busy machine may take longer than 0.5 s
        spent = Fraction(c.get("/v1/budget").json()["result"]["budgets"][0]["spent"]["epsilon"])
        plan = heavy(rows_per_key, STAND_IN.where(f"income != {SECRET}"))
        assert c.post("/v1/aggregate", json=count_body(plan, TINY)).status_code == 504
        after = Fraction(c.get("/v1/budget").json()["result"]["budgets"][0]["spent"]["epsilon"])
        lines = read_log(tmp_path / "requests.jsonl", 1)
    mine = [x for x in lines if x["analyst"] == "alice"]
    stopped = next(x for x in mine if x["status"] == 504)
    assert stopped["endpoint"] == "/v1/aggregate"
    assert stopped["charges"] is None and stopped["tables"] is None
    # what the ledger says it charged is what the line could not say: 0 or the plan's cost
    assert after - spent in (0, Fraction(1, 10**9) * Fraction(plan.stability))
    # the budget reads before and after it, and the counts that answered, logged as usual
    answered = [x for x in mine if x["status"] == 200 and x["endpoint"] == "/v1/aggregate"]
    assert answered and all(x["charges"][0]["epsilon"] == "1/2" for x in answered)
    assert [x["endpoint"] for x in mine if x["endpoint"] == "/v1/budget"] == ["/v1/budget"] * 2
    assert SECRET not in (tmp_path / "requests.jsonl").read_text()
