"""The server's app in this process (Starlette's test client), for what a real process cannot
show cheaply: the run-time limit, test hooks, internal faults; and ``--demo`` end to end."""

from __future__ import annotations

import dataclasses
import io
import re
import shutil
import ssl
import subprocess
import sys
import time
import warnings
from pathlib import Path

import httpx
import pandas as pd
import pytest

with warnings.catch_warnings():  # starlette would rather its test client used httpx2
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums
from pinqpy.errors import PinqError
from pinqpy.plan.canonical import canonical_plan
from pinqpy.plan.serialize import plan_to_data
from pinqpy.remote.protocol import decode_result, encode_args
from pinqpy.remote.server.app import INTERNAL_ERROR, create_app
from pinqpy.remote.server.auth import TokenStore
from pinqpy.remote.server.config import load_config
from pinqpy.remote.server.replay import Replayer
from pinqpy.remote.server.run import serve_command
from pinqpy.remote.server.state import ServerState
from tests.remote.harness import PUMS_CSV, _command, _env, default_config, start_server

STAND_IN = pq.PrivateFrame(
    load_pums().iloc[:0], pq.Budget(1), name="pums", bounds=PUMS_BOUNDS, keys=PUMS_KEYS
)


def count_body(frame: pq.PrivateFrame = STAND_IN, epsilon: float = 0.5) -> dict[str, object]:
    return {
        "plan": plan_to_data(frame._plan),
        "method": "count",
        "args": encode_args({"epsilon": epsilon}),
    }


@pytest.fixture
def app(tmp_path):
    def make(extra: str = "", testing: str | None = None):
        text = default_config().replace("[tables.pums]", extra + "\n[tables.pums]")
        (tmp_path / "server.toml").write_text(text)
        cfg = load_config(tmp_path / "server.toml")
        token = TokenStore(cfg.tokens, cfg.analysts).add("alice")
        state = ServerState(cfg, testing=testing)
        log = io.StringIO()
        client = TestClient(create_app(state, log=log), raise_server_exceptions=False)
        client.headers["Authorization"] = f"Bearer {token}"
        made.append(state)
        return state, client, log

    made: list[ServerState] = []
    yield make
    for s in made:
        s.close()


def spent(state: ServerState) -> object:
    return state.analysts["alice"].budgets["pums"].spent


def test_the_run_time_limit_answers_504_and_the_charge_stands(app, monkeypatch):
    state, client, _ = app("[server.limits]\nquery_timeout_s = 0.2\n")
    real = state.aggregate

    def slow(a, body):
        out = real(a, body)  # charged and answered ...
        time.sleep(1.0)  # ... but too late
        return out

    monkeypatch.setattr(state, "aggregate", slow)
    r = client.post("/v1/aggregate", json=count_body(epsilon=0.5))
    assert r.status_code == 504
    assert "ran longer than this server allows (0.2 s)" in r.json()["error"]["message"]
    assert spent(state) == pq.Cost(0.5)


def test_a_test_hook_in_force_makes_a_normal_server_refuse(app):
    state, client, log = app()
    with pq.testing.no_noise():
        r = client.post("/v1/aggregate", json=count_body())
    assert r.status_code == 500
    assert r.json() == {"error": {"type": "PinqError", "message": INTERNAL_ERROR}}
    assert "HookActive" in log.getvalue()
    assert spent(state) == pq.Cost(0)
    assert client.post("/v1/aggregate", json=count_body()).status_code == 200


def test_testing_mode_answers_as_the_local_api_under_the_same_hook(app):
    _, client, _ = app(testing="seed=7")
    local = pq.PrivateFrame(load_pums(), pq.Budget(10), bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
    for _ in range(2):  # re-seeded for every request
        remote = decode_result(client.post("/v1/aggregate", json=count_body()).json()["result"])
        with pq.testing.seed(7):
            assert int(remote) == int(local.count(epsilon=0.5))
    _, exact, _ = app(testing="no-noise")
    r = exact.post("/v1/aggregate", json=count_body(STAND_IN.where("age >= 65")))
    assert int(decode_result(r.json()["result"])) == int((load_pums()["age"] >= 65).sum())


def test_an_internal_fault_says_nothing_but_the_log_has_the_trace(app, monkeypatch):
    state, client, log = app()

    def broken(a, body):
        raise ValueError("private detail 4321 in /srv/secret")

    monkeypatch.setattr(state, "sql", broken)
    r = client.post("/v1/sql", json={"query": "SELECT 1"})
    assert r.status_code == 500
    assert r.json() == {"error": {"type": "PinqError", "message": INTERNAL_ERROR}}
    assert "private detail 4321" in log.getvalue()


def test_server_paths_are_scrubbed_from_pinqpy_messages(app, monkeypatch, tmp_path):
    state, client, _ = app()
    where = str(state.config.ledger)

    def failing(a, body):
        raise PinqError(f"the ledger {where!r} is locked")

    monkeypatch.setattr(state, "sql", failing)
    r = client.post("/v1/sql", json={"query": "SELECT 1"})
    assert r.status_code == 400
    assert str(tmp_path) not in r.text and "<server>" in r.text


def test_a_declared_oversized_body_is_refused_before_it_is_read(app):
    _, client, _ = app("[server.limits]\nmax_request_bytes = 100\n")
    r = client.post("/v1/sql", content=b"{" + b" " * 200 + b"}")
    assert r.status_code == 413


def test_usage_errors_are_one_line_and_status_2(tmp_path):
    err = io.StringIO()
    assert serve_command(None, err=err) == 2
    assert serve_command("x.toml", demo=True, err=err) == 2
    assert serve_command(None, demo=True, add_analyst="x", err=err) == 2
    assert serve_command("x.toml", port=70000, err=err) == 2
    assert serve_command("x.toml", testing="loud", err=err) == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 5 and all(line.startswith("pinqpy serve: ") for line in lines)
    err = io.StringIO()
    assert serve_command(str(tmp_path / "none.toml"), err=err) == 1
    assert "does not exist" in err.getvalue() and len(err.getvalue().splitlines()) == 1
    (tmp_path / "s.toml").write_text(default_config())
    err, out = io.StringIO(), io.StringIO()
    assert serve_command(str(tmp_path / "s.toml"), add_analyst="mallory", out=out, err=err) == 1
    assert "not an analyst of this config" in err.getvalue()
    assert serve_command(str(tmp_path / "s.toml"), add_analyst="alice", out=out, err=err) == 0
    token = re.search(r"^token: (\S+)$", out.getvalue(), re.M).group(1)
    assert TokenStore(tmp_path / "tokens.json", ["alice"]).verify(token) == "alice"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")
def test_demo_serves_pums_and_prints_the_token_and_connect_line():
    proc = subprocess.Popen(
        _command("--demo", "--port", "0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
    )
    try:
        assert proc.stdout is not None
        lines = []
        while not any("pq.connect(" in line for line in lines):
            line = proc.stdout.readline()
            assert line, "\n".join(lines)
            lines.append(line.rstrip("\n"))
        text = "\n".join(lines)
        url = re.search(r"^listening on (http://127\.0\.0\.1:(\d+))$", text, re.M).group(1)
        assert not url.endswith(":0")
        token = re.search(r"^token: (\S+)$", text, re.M).group(1)
        assert f"export PINQPY_TOKEN={token}" in lines  # for the analyst's shell ...
        assert f'then, in Python: pq.connect("{url}") (it reads $PINQPY_TOKEN)' in lines
        assert f'token="{token}"' not in text  # ... never inside a line to paste
        assert re.search(r"^tables: pums\b", text, re.M)
        assert re.search(r"^analysts: demo\b", text, re.M)
        for _ in range(200):
            try:
                r = httpx.get(url + "/v1/session", headers={"Authorization": f"Bearer {token}"})
                break
            except httpx.TransportError:
                time.sleep(0.05)
        doc = r.json()["result"]
        assert doc["analyst"] == "demo" and [t["name"] for t in doc["tables"]] == ["pums"]
        from pinqpy.plan.serialize import plan_from_data

        table = plan_from_data(doc["tables"][0]["plan"]).table
        assert dict(table.bounds) == {k: tuple(map(float, v)) for k, v in PUMS_BOUNDS.items()}
        assert {k: list(v) for k, v in table.keys.items()} == PUMS_KEYS
        assert Path(re.search(r"^ledger: (\S+)$", text, re.M).group(1)).exists()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test certificate")
def test_tls_serves_https_with_the_configured_certificate(tmp_path, monkeypatch):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    config = default_config().replace(
        'tokens = "tokens.json"',
        'tokens = "tokens.json"\ntls_certfile = "cert.pem"\ntls_keyfile = "key.pem"',
    )
    server = start_server(tmp_path, config)
    try:
        assert server.url.startswith("https://127.0.0.1:")
        assert any(line == f"listening on {server.url}" for line in server.output)
        trust = ssl.create_default_context(cafile=str(cert))
        with httpx.Client(base_url=server.url, verify=trust) as c:
            assert c.get("/v1/session").status_code == 401
            r = c.get("/v1/session", headers=server.headers())
            assert r.status_code == 200 and r.json()["result"]["analyst"] == "alice"
        with pytest.raises(httpx.TransportError):  # not over plain http
            httpx.get(server.url.replace("https", "http") + "/v1/session", timeout=5)
        # pq.connect verifies the certificate against the system's trust store, which
        # SSL_CERT_FILE extends (a curator's own authority, say)
        with pytest.raises(pq.PinqError, match="cannot be reached"):
            pq.connect(server.url, token=server.tokens["alice"], timeout=10)
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        with pq.connect(server.url, token=server.tokens["alice"]) as s:
            assert s.analyst == "alice" and s.table("pums").count(epsilon=0.5) > 0
    finally:
        server.stop()


def _post(client: TestClient, body: dict[str, object]) -> object:
    r = client.post("/v1/aggregate", json=body)
    assert r.status_code == 200, r.text
    return decode_result(r.json()["result"])


def _agg(frame: pq.PrivateFrame, method: str, partition=None, **args: object) -> dict:
    return {
        "plan": plan_to_data(frame._plan),
        "partition": partition,
        "method": method,
        "args": encode_args(args),
    }


def test_every_aggregation_answers_as_the_local_api(app):
    state, client, _ = app(testing="no-noise")
    local = pq.PrivateFrame(load_pums(), pq.Budget(100, 1e-3), bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
    adults = STAND_IN.where("age >= 18")
    cases = [
        ("count", {"epsilon": 0.1}),
        ("sum", {"column": "income", "epsilon": 0.1}),
        ("mean", {"column": pq.col("income") / 1000, "epsilon": 0.1, "bounds": (0, 500)}),
        ("median", {"column": "age", "epsilon": 0.1}),
        ("quantile", {"column": "age", "q": 0.9, "epsilon": 0.1}),
        ("argmax", {"column": "educ", "candidates": list(range(1, 17)), "epsilon": 0.1}),
        ("select_keys", {"columns": "race", "epsilon": 0.5, "delta": 1e-7}),
    ]
    with pq.testing.no_noise():
        for method, args in cases:
            got = _post(client, _agg(adults, method, **args))
            want = getattr(local.where("age >= 18"), method)(**args)
            assert got == want if method == "select_keys" else float(got) == float(want), method
        preview = _post(client, _agg(adults, "accuracy", aggregation="mean", column="age",
                                     epsilon=0.2))  # fmt: skip
        want = local.where("age >= 18").accuracy("mean", "age", epsilon=0.2)
        assert list(preview.charge.values()) == list(want.charge.values())
        # The charge is labelled by the budget's repr, which is the server's own budget.
        assert dataclasses.replace(preview, charge={}) == dataclasses.replace(want, charge={})
        series = _post(client, _agg(adults, "mean", {"columns": ["sex"], "keys": [0, 1]},
                                    column="income", epsilon=0.2))  # fmt: skip
        want = local.where("age >= 18").partition("sex", keys=[0, 1]).mean("income", epsilon=0.2)
        assert list(series.index) == [0, 1] and list(series) == list(want)
        assert series.ci(0.9).shape == (2, 2)
    total = state.analysts["alice"].budgets["pums"].spent
    assert total == local.budgets[0].spent


def test_the_parts_of_a_partition_asked_one_by_one_charge_the_largest(app):
    state, client, _ = app()
    parts = STAND_IN.partition("sex", keys=[0, 1])
    _post(client, _agg(parts[0], "count", epsilon=0.25))
    _post(client, _agg(parts[1].where("age > 30"), "count", epsilon=0.5))
    _post(client, _agg(parts[0], "count", epsilon=0.125))
    assert spent(state) == pq.Cost(0.5)  # max(0.25 + 0.125, 0.5)
    _post(client, _agg(STAND_IN, "count", {"columns": "sex", "keys": [0, 1]}, epsilon=0.25))
    assert spent(state) == pq.Cost(0.75)  # every part grew by 0.25


@pytest.mark.parametrize("source", ["duckdb", "parquet", "spark", "polars"])
def test_duckdb_parquet_and_spark_sources(tmp_path, source):
    modules = {"duckdb": "duckdb", "parquet": "pyarrow", "spark": "pyspark", "polars": "polars"}
    pytest.importorskip(modules[source])
    rows = load_pums()
    engine = source if source != "parquet" else "duckdb"
    if source == "polars":  # a parquet file scanned by Polars
        rows.to_parquet(tmp_path / "people.parquet")
        table = 'source = "parquet"\npath = "people.parquet"\nengine = "polars"'
    elif source == "spark":
        rows.to_parquet(tmp_path / "people.parquet")
        table = 'source = "spark"\npath = "people.parquet"\nformat = "parquet"'
    elif source == "duckdb":
        import duckdb

        con = duckdb.connect(str(tmp_path / "census.duckdb"))
        con.execute("CREATE TABLE people AS SELECT * FROM rows")
        con.close()
        table = 'source = "duckdb"\ndatabase = "census.duckdb"\ntable = "people"'
    else:
        rows.to_parquet(tmp_path / "people.parquet")
        table = 'source = "parquet"\npath = "people.parquet"\nengine = "duckdb"'
    config = f"""
[server]
ledger = "l.db"
[tables.people]
{table}
bounds = {{ age = [0, 100] }}
schema = {{ age = "int" }}
[analysts.alice]
tables = ["people"]
budget = {{ epsilon = 1 }}
"""
    (tmp_path / "s.toml").write_text(config)
    state = ServerState(load_config(tmp_path / "s.toml"), testing="no-noise")
    try:
        a = state.analysts["alice"]
        assert a.session.table("people").engine == engine
        with state.hooks():  # as each request runs: here, with noise off
            got = state.sql(a, {"query": "SELECT COUNT(*) AS n FROM people WHERE age >= 65",
                                "epsilon": 0.5})  # fmt: skip
        assert int(got["n"][0]) == int((rows["age"] >= 65).sum())
    finally:
        state.close()


def test_a_configured_max_rows_is_the_bound_in_the_analysts_plan_not_a_second_one(tmp_path):
    rows = pd.DataFrame({"pid": [1, 1, 1, 2, 3, 3], "minutes": [5, 6, 7, 8, 9, 10]})
    rows.to_csv(tmp_path / "visits.csv", index=False)
    (tmp_path / "s.toml").write_text(
        '[tables.visits]\nsource = "csv"\npath = "visits.csv"\nprivacy_unit = "pid"\n'
        "max_rows = 2\nbounds = { minutes = [0, 60] }\n"
        '[analysts.alice]\ntables = ["visits"]\nbudget = { epsilon = 1 }\n'
    )
    state = ServerState(load_config(tmp_path / "s.toml"))
    try:
        a = state.analysts["alice"]
        handed = a.session.table("visits")  # what /v1/session describes
        assert type(handed._plan).__name__ == "BoundContributions"
        client = pq.PrivateFrame(
            rows.iloc[:0], pq.Budget(1), name="visits", privacy_unit="pid",
            bounds={"minutes": (0, 60)},
        ).bound_contributions(2)  # fmt: skip
        sent = client.where("minutes > 5")
        rel = Replayer(a.tables(), a.registry, state.limits).relation(plan_to_data(sent._plan))
        local = handed.where("minutes > 5")._rel
        text = canonical_plan(rel.plan, lambda t: t.name, rel.catalog)
        assert text == canonical_plan(local.plan, lambda t: t.name, local.catalog)
        assert text.count("bound(") == 1
        assert rel.stabilities() == local.stabilities()
        assert rel.plan.child.child is local.plan.child.child  # one Source, shared
    finally:
        state.close()


def test_a_body_slower_than_the_time_limit_is_refused_408(app):
    import anyio

    state, client, _ = app("[server.limits]\nquery_timeout_s = 0.2\n")
    token = client.headers["Authorization"].encode()
    asgi = create_app(state)
    sent: list[dict] = []

    async def receive() -> dict:
        await anyio.sleep(5)  # the body never comes
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/v1/sql", "raw_path": b"/v1/sql", "query_string": b"",
        "root_path": "", "headers": [(b"authorization", token)], "server": ("test", 80),
        "client": ("test", 1),
    }  # fmt: skip
    anyio.run(asgi, scope, receive, send)
    assert sent[0]["status"] == 408
    assert b"took too long to arrive" in sent[1]["body"]


def test_a_tokens_file_gone_bad_is_an_internal_fault_not_a_message(app):
    state, client, log = app()
    state.config.tokens.chmod(0o666)
    r = client.get("/v1/budget")
    assert r.status_code == 500 and "tokens" not in r.text
    assert "writable by other users" in log.getvalue()
    state.config.tokens.chmod(0o600)
    assert client.get("/v1/budget").status_code == 200


def test_a_bad_tls_certificate_is_one_line_and_status_1(tmp_path):
    (tmp_path / "cert.pem").write_text("not a certificate")
    (tmp_path / "key.pem").write_text("not a key")
    config = default_config().replace(
        'tokens = "tokens.json"',
        'tokens = "tokens.json"\ntls_certfile = "cert.pem"\ntls_keyfile = "key.pem"',
    )
    (tmp_path / "s.toml").write_text(config)
    out, err = io.StringIO(), io.StringIO()
    assert serve_command(str(tmp_path / "s.toml"), port=0, out=out, err=err) == 1
    assert err.getvalue().startswith("pinqpy serve: cannot serve TLS with ")
    assert len(err.getvalue().splitlines()) == 1
    assert "listening on" not in out.getvalue()


def test_concurrent_requests_on_a_duckdb_table_all_answer(tmp_path):
    import threading

    pytest.importorskip("duckdb")
    pytest.importorskip("pyarrow")
    rows = load_pums()
    rows.to_parquet(tmp_path / "people.parquet")
    (tmp_path / "s.toml").write_text(
        '[tables.people]\nsource = "parquet"\npath = "people.parquet"\nengine = "duckdb"\n'
        "bounds = { age = [0, 100], income = [0, 500000] }\n"
        '[analysts.alice]\ntables = ["people"]\nbudget = { epsilon = 100 }\n'
    )
    state = ServerState(load_config(tmp_path / "s.toml"))
    a = state.analysts["alice"]
    stand_in = pq.PrivateFrame(rows.iloc[:0], pq.Budget(1), name="people", bounds={"age": (0, 100)})
    failures: list[str] = []

    def client(t: int) -> None:
        for i in range(8):
            try:
                if i % 2:
                    q = f"SELECT sex, COUNT(*) AS n FROM people WHERE age > {t * 10 + i} "
                    state.sql(a, {"query": q + "GROUP BY sex IN (0, 1)", "epsilon": 0.01})
                else:
                    body = count_body(stand_in.where(f"age > {t * 10 + i}"), epsilon=0.01)
                    state.aggregate(a, body)
            except Exception as err:
                failures.append(f"{type(err).__name__}: {err}")

    threads = [threading.Thread(target=client, args=(t,)) for t in range(6)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert failures == []
        assert a.budgets["people"].spent.epsilon == pytest.approx(0.48)
    finally:
        state.close()


def test_a_groups_members_draw_on_one_budget_per_table(tmp_path):
    config = default_config(("carol",)) + (
        '\n[groups.lab]\nbudget = { epsilon = 1, accounting = "pure" }\n'
        '[analysts.alice]\ntables = ["pums"]\ngroup = "lab"\n'
        '[analysts.bob]\ntables = ["pums"]\ngroup = "lab"\n'
    )
    (tmp_path / "s.toml").write_text(config)
    state = ServerState(load_config(tmp_path / "s.toml"))
    try:
        alice, bob, carol = (state.analysts[n] for n in ("alice", "bob", "carol"))
        # Each member has a Budget object of their own, all kept as one budget of the file.
        assert alice.budgets["pums"].name == bob.budgets["pums"].name == "group:lab/pums"
        assert carol.budgets["pums"].name == "analyst:carol/pums"
        state.aggregate(alice, count_body(epsilon=0.25))
        assert alice.budgets["pums"].spent == bob.budgets["pums"].spent == pq.Cost(0.25)
        (doc,) = state.budget_docs(bob)
        assert doc["name"] == "group:lab/pums" and doc["accounting"] == "pure"
        assert doc["spent"] == {"epsilon": "1/4", "delta": "0"}
        assert carol.budgets["pums"].spent == pq.Cost(0)
        audit = state.audit(bob)
        assert list(audit["budget"]) == ["group:lab/pums"]
    finally:
        state.close()


def test_a_postgres_source_reads_its_connection_string_from_the_environment(
    tmp_path, monkeypatch, postgres_url
):
    import psycopg

    rows = load_pums()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS census")
        conn.execute("DROP TABLE IF EXISTS census.people")
        conn.execute("CREATE TABLE census.people (age integer, sex integer, income numeric)")
        with conn.cursor().copy("COPY census.people FROM STDIN") as copy:
            for r in rows[["age", "sex", "income"]].itertuples(index=False):
                copy.write_row(tuple(r))
    config = """
[server]
ledger = "l.db"
[tables.people]
source = "postgres"
table = "census.people"
connection_env = "PINQPY_TEST_PG"
bounds = { age = [0, 100] }
[analysts.alice]
tables = ["people"]
budget = { epsilon = 1 }
"""
    (tmp_path / "s.toml").write_text(config)
    cfg = load_config(tmp_path / "s.toml")
    monkeypatch.delenv("PINQPY_TEST_PG", raising=False)
    with pytest.raises(pq.PinqError, match="PINQPY_TEST_PG, which is not set"):
        ServerState(cfg, testing="no-noise")
    monkeypatch.setenv("PINQPY_TEST_PG", postgres_url)
    state = ServerState(cfg, testing="no-noise")
    try:
        a = state.analysts["alice"]
        assert a.session.table("people").engine == "postgres"
        with state.hooks():
            got = state.sql(a, {"query": "SELECT COUNT(*) AS n FROM people WHERE age >= 65",
                                "epsilon": 0.5})  # fmt: skip
        assert int(got["n"][0]) == int((rows["age"] >= 65).sum())
    finally:
        state.close()


def test_serve_warns_the_curator_of_two_tables_over_one_file_and_of_unstoppable_work(tmp_path):
    config = default_config().replace('tables = ["pums"]', 'tables = ["pums", "again"]') + (
        f'\n[tables.again]\nsource = "csv"\npath = "{PUMS_CSV}"\nengine = "duckdb"\n'
    )
    with start_server(tmp_path, config) as server:
        warnings = [line for line in server.output if line.startswith("pinqpy serve: warning:")]
    inferred = [line for line in warnings if "column types were inferred" in line]
    assert [line.split(":")[2] for line in inferred] == [" table pums", " table again"]
    assert [line for line in warnings if line not in inferred] == [
        f"pinqpy serve: warning: tables 'pums' and 'again' both read {PUMS_CSV}: each has "
        "budgets of its own, so an analyst granted both spends two budgets on the same "
        "people; serve the data as one table (analysts may share it), or grant each analyst "
        "only one of them",
        "pinqpy serve: warning: analyst 'alice' is granted pandas tables and duckdb ones, so "
        "their requests run in the server's own process, where pandas work past "
        'query_timeout_s cannot be stopped; serve those tables with engine = "duckdb", or '
        "grant them apart",
    ]
