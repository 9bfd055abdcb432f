"""The server against an adversarial analyst: raw HTTP requests to a real server process.

Every refusal is a 4xx with a pinqpy error body, never a 500, never a trace, a server path or
a private value, and never a charge (each test reads /v1/budget before and after).
"""

from __future__ import annotations

import copy
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums
from pinqpy.plan.serialize import plan_to_data
from pinqpy.remote.protocol import encode_args, encode_frame
from tests.remote.harness import PUMS_CSV, ServerProcess, _command, default_config, start_server

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

UNAUTHORIZED = "a valid analyst token is required (Authorization: Bearer <token>)"
INTERNAL = "the server could not answer this request (internal error)"

# alice: pums only, her own budget. bob: pums and "secret". fuzzer: a budget too small for
# any query the fuzz can make (every epsilon it sends is at least 0.5, or invalid).
CONFIG = (
    default_config(("alice", "bob")).replace(
        '[analysts.bob]\ntables = ["pums"]', '[analysts.bob]\ntables = ["pums", "secret"]'
    )
    + f"""
[tables.secret]
source = "csv"
path = "{PUMS_CSV}"
bounds = {{ age = [0, 100] }}

[analysts.fuzzer]
tables = ["pums"]
budget = {{ epsilon = 0.01, delta = 1e-9 }}
"""
)
assert '["pums", "secret"]' in CONFIG

PUMS = load_pums()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    s = start_server(
        tmp_path_factory.mktemp("security"), CONFIG, analysts=("alice", "bob", "fuzzer")
    )
    yield s
    s.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as c:
        yield c


def stand_in(name: str = "pums") -> pq.PrivateFrame:
    """The analyst's local frame named like the server's table (no private rows in it)."""
    return pq.PrivateFrame(
        PUMS.iloc[:0], pq.Budget(1), name=name, bounds=PUMS_BOUNDS, keys=PUMS_KEYS
    )


def agg(frame: pq.PrivateFrame, method: str = "count", **args: Any) -> dict[str, Any]:
    return {
        "plan": plan_to_data(frame._plan),
        "public": {},
        "partition": None,
        "method": method,
        "args": encode_args(args or {"epsilon": 0.1}),
    }


def spent(http: httpx.Client, server: ServerProcess, who: str = "alice") -> list[Any]:
    r = http.get("/v1/budget", headers=server.headers(who))
    assert r.status_code == 200
    return [b["spent"] for b in r.json()["result"]["budgets"]]


ERRORS: list[str] = []  # every error body seen, checked at the end for leaks


def refused(r: httpx.Response, status: int, match: str = "") -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    ERRORS.append(r.text)
    error = r.json()["error"]
    assert error["type"] in (
        "PinqError",
        "PinqSyntaxError",
        "PrivacyError",
        "BudgetExceededError",
        "PandasHabitError",
        "PandasHabitTypeError",
    )
    assert isinstance(error["message"], str)
    if match:
        assert re.search(match, error["message"]), error["message"]
    return error


ENDPOINTS = [
    ("GET", "/v1/session"),
    ("GET", "/v1/budget"),
    ("GET", "/v1/audit"),
    ("POST", "/v1/aggregate"),
    ("POST", "/v1/sql"),
    ("GET", "/v1/nothing"),
    ("DELETE", "/v1/budget"),
    ("GET", "/"),
]


def test_no_token_or_a_wrong_one_is_401_everywhere_and_charges_nothing(server, http):
    before = spent(http, server)
    body = json.dumps(agg(stand_in()))
    bad = [
        {},
        {"Authorization": "Bearer"},
        {"Authorization": "Bearer nope"},
        {"Authorization": "Basic " + server.tokens["alice"]},
        {"Authorization": "Bearer " + server.tokens["alice"] + "x"},
        {"Authorization": "Bearer " + server.tokens["alice"][:-1]},
    ]
    for method, path in ENDPOINTS:
        for headers in bad:
            r = http.request(method, path, headers=headers, content=body)
            err = refused(r, 401)
            assert err == {"type": "PinqError", "message": UNAUTHORIZED}
            assert r.headers["www-authenticate"] == "Bearer"
    assert spent(http, server) == before


def test_unknown_paths_and_methods_need_a_token_then_say_so(server, http):
    h = server.headers()
    refused(http.get("/v1/nothing", headers=h), 404, "no such endpoint")
    refused(http.delete("/v1/budget", headers=h), 405, "takes GET")
    refused(http.get("/v1/aggregate", headers=h), 405, "takes POST")


def test_another_analysts_table_reads_exactly_like_an_unknown_one(server, http):
    before = spent(http, server)
    h = server.headers("alice")
    secret = refused(http.post("/v1/aggregate", headers=h, json=agg(stand_in("secret"))), 403)
    nosuch = refused(http.post("/v1/aggregate", headers=h, json=agg(stand_in("nosuch"))), 403)
    assert secret["message"].replace("secret", "X") == nosuch["message"].replace("nosuch", "X")
    assert secret["message"] == "no private table named 'secret'"
    q = "SELECT COUNT(*) AS n FROM {}"
    a = refused(
        http.post("/v1/sql", headers=h, json={"query": q.format("secret"), "epsilon": 1}), 400
    )
    b = refused(
        http.post("/v1/sql", headers=h, json={"query": q.format("nosuch"), "epsilon": 1}), 400
    )
    assert {k: v for k, v in a.items() if k not in ("message", "text")} == {
        k: v for k, v in b.items() if k not in ("message", "text")
    }
    assert a["message"].replace("secret", "X") == b["message"].replace("nosuch", "X")
    session = http.get("/v1/session", headers=h).json()["result"]
    assert [t["name"] for t in session["tables"]] == ["pums"]
    assert spent(http, server) == before
    # bob may query it
    r = http.post("/v1/aggregate", headers=server.headers("bob"), json=agg(stand_in("secret")))
    assert r.status_code == 200, r.text


def test_each_analyst_sees_only_their_own_budget_and_audit_trail(server, http):
    alice_before = spent(http, server, "alice")
    r = http.post(
        "/v1/sql",
        headers=server.headers("bob"),
        json={
            "query": "SELECT COUNT(*) AS bobs_question FROM pums WHERE age > 42",
            "epsilon": 0.25,
        },
    )
    assert r.status_code == 200, r.text
    assert spent(http, server, "alice") == alice_before
    docs = http.get("/v1/budget", headers=server.headers("alice")).json()["result"]["budgets"]
    assert [d["name"] for d in docs] == ["analyst:alice/pums"]
    bob_docs = http.get("/v1/budget", headers=server.headers("bob")).json()["result"]["budgets"]
    assert sorted(d["name"] for d in bob_docs) == ["analyst:bob/pums", "analyst:bob/secret"]
    audit = http.get("/v1/audit", headers=server.headers("alice")).text
    assert "bobs_question" not in audit and "analyst:bob" not in audit
    bob_audit = http.get("/v1/audit", headers=server.headers("bob")).text
    assert "bobs_question" in bob_audit
    show = http.post("/v1/sql", headers=server.headers("alice"), json={"query": "SHOW LEDGER"})
    assert show.status_code == 200 and "bobs_question" not in show.text


def test_forged_plans_are_refused_or_recomputed_and_never_charged_wrongly(server, http):
    h = server.headers()
    f = stand_in().where("age > 30")
    before = spent(http, server)
    forged = agg(f)
    forged["plan"]["nodes"].append({"type": "Sample", "child": 0})
    forged["plan"]["root"] = 2
    refused(http.post("/v1/aggregate", headers=h, json=forged), 400, "unknown plan node 'Sample'")
    forged = agg(f)
    forged["plan"]["nodes"][1]["stability"] = 0
    refused(http.post("/v1/aggregate", headers=h, json=forged), 400, "no field 'stability'")
    deep = stand_in()
    for i in range(70):
        deep = deep.where(f"age > {i}")
    refused(http.post("/v1/aggregate", headers=h, json=agg(deep)), 422, "more than 64 steps deep")
    many = agg(stand_in())
    many["plan"]["nodes"] += [dict(many["plan"]["nodes"][0]) for _ in range(500)]
    refused(http.post("/v1/aggregate", headers=h, json=many), 422, "501 nodes")
    typed = agg(stand_in().where("age > 1"))
    typed["plan"]["nodes"][1]["predicate"] = {
        "type": "Binary", "op": "+",
        "left": {"type": "Column", "name": "age"}, "right": {"type": "Literal", "value": "x"},
    }  # fmt: skip
    r = http.post("/v1/aggregate", headers=h, json=typed)
    assert r.status_code == 400, r.text
    ERRORS.append(r.text)
    fn = agg(stand_in(), "count")
    fn["plan"]["nodes"][0] = {"type": "PyFunc", "fn": "os.system", "name": "x"}
    refused(http.post("/v1/aggregate", headers=h, json=fn), 400)
    assert spent(http, server) == before
    # Declarations and derived fields the client forges are ignored: the charge is the
    # server's own (a public table with two rows per key doubles it, whatever is claimed).
    public = pd.DataFrame({"sex": [0, 0, 1, 1], "label": ["a", "b", "c", "d"]})
    joined = stand_in().join(public, on="sex")
    body = agg(joined, epsilon=0.125)
    node = next(n for n in body["plan"]["nodes"] if n["type"] == "PublicJoin")
    node["multiplicity"] = 1
    body["public"] = {node["public"]: encode_frame(public)}
    forged_tables = body["plan"]["tables"][0]
    forged_tables["privacy_unit"] = None
    forged_tables["bounds"] = {"$": "map", "items": []}
    r = http.post("/v1/aggregate", headers=h, json=body)
    assert r.status_code == 200, r.text
    after = spent(http, server)
    assert _eps(after[0]) - _eps(before[0]) == pytest.approx(0.25)


def _eps(cost: dict[str, str]) -> float:
    from fractions import Fraction

    return float(Fraction(cost["epsilon"]))


def test_oversized_and_malformed_bodies(server, http):
    h = server.headers()
    before = spent(http, server)
    big = b'{"query": "' + b"x" * 1_100_000 + b'"}'
    refused(http.post("/v1/sql", headers=h, content=big), 413, "larger than this server")

    def chunks() -> Iterator[bytes]:  # no Content-Length: refused while reading
        yield b'{"query": "'
        for _ in range(200):
            yield b"y" * 10_000

    refused(http.post("/v1/sql", headers=h, content=chunks()), 413, "larger than this server")
    for bad in [b"", b"{", b"nope", b'{"query": NaN}', b"\xff\xfe", b"[1, 2", b'{"a": Infinity}']:
        refused(http.post("/v1/sql", headers=h, content=bad), 400)
    refused(http.post("/v1/sql", headers=h, content=b"[" * 600 + b"]" * 600), 422)
    refused(http.post("/v1/sql", headers=h, json=[]), 400, "JSON object")
    refused(http.post("/v1/sql", headers=h, json={"query": 3}), 400, "SQL text")
    refused(http.post("/v1/sql", headers=h, json={"query": "x" * 20_001}), 422, "20000")
    refused(http.post("/v1/aggregate", headers=h, json={"plan": {}, "method": "head"}), 400,
            "not an aggregation")  # fmt: skip
    refused(http.post("/v1/aggregate", headers=h, json={**agg(stand_in()), "x": 1}), 400,
            "no field 'x'")  # fmt: skip
    refused(
        http.post("/v1/aggregate", headers=h, json=agg(stand_in(), "count", epsilon=0.1, x=1)),
        400,
        "bad arguments",
    )
    cands = agg(stand_in(), "argmax", column="educ", candidates=list(range(100_001)), epsilon=1)
    refused(http.post("/v1/aggregate", headers=h, json=cands), 422, "at most 100000")
    assert spent(http, server) == before


def test_testing_mode_needs_the_curators_switch(tmp_path):
    config = tmp_path / "server.toml"
    config.write_text(default_config())
    env = {k: v for k, v in os.environ.items() if k != "PINQPY_TESTING"}
    done = subprocess.run(
        _command(str(config), "--testing", "no-noise", "--port", "0"),
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "PINQPY_TESTING=1" in done.stderr and len(done.stderr.strip().splitlines()) == 1


# -- fuzz ---------------------------------------------------------------------------------------
_POOL: list[Any] = [
    None, True, False, -1, 0, 0.5, 1, 2.5, 10**30, -(10**30), "", "age", "sex", "x" * 50,
    "age > 1", "COUNT(*)", [], [1], ["age"], {}, {"$": "tuple", "items": [0, 100]},
    {"$": "expr", "tree": {"type": "Column", "name": "age"}}, {"$": "expr", "tree": 3},
    {"$": "float", "value": "nan"}, {"$": "frac", "n": 1, "d": 0}, {"type": "Where"},
    {"$": "map", "items": [[1, 2]]}, [[["deep"]]], "'; DROP TABLE budgets; --",
]  # fmt: skip


def _mutate(doc: Any, rng: random.Random) -> Any:
    """``doc`` with one randomly chosen part replaced, removed or duplicated."""
    doc = copy.deepcopy(doc)
    paths: list[tuple[Any, Any]] = []
    stack: list[Any] = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                paths.append((item, k))
                stack.append(v)
        elif isinstance(item, list):
            for i, v in enumerate(item):
                paths.append((item, i))
                stack.append(v)
    if not paths:
        return rng.choice(_POOL)
    parent, key = rng.choice(paths)
    roll = rng.random()
    if roll < 0.15 and isinstance(parent, dict):
        del parent[key]
    elif roll < 0.25 and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[key]))
    else:
        parent[key] = copy.deepcopy(rng.choice(_POOL))
    return doc


def _seeds() -> list[dict[str, Any]]:
    f = stand_in()
    bounded = f.where("age > 20")
    part = agg(bounded, "mean", column="income", epsilon=0.5)
    part["partition"] = {"columns": ["sex"], "keys": [0, 1]}
    return [
        agg(bounded, "count", epsilon=0.5),
        agg(f, "sum", column="income", epsilon=0.5, bounds=(0, 1000)),
        agg(f, "quantile", column="age", q=0.5, epsilon=0.5),
        agg(f, "argmax", column="educ", candidates=[1, 2, 3], epsilon=0.5),
        agg(f, "select_keys", columns="educ", epsilon=0.5, delta=1e-7),
        agg(f.groupby("educ").agg(n="COUNT(*)"), "count", epsilon=0.5),
        agg(f, "accuracy", aggregation="count", epsilon=0.5),
        part,
        {"query": "SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex", "epsilon": 0.5},
        {"query": "SELECT AVG(income) FROM pums WHERE age > 3", "epsilon": 0.5, "explain": True},
    ]


def test_a_random_request_fuzz_gets_only_pinqpy_errors_and_charges_nothing(server, http):
    rng = random.Random(20261126)
    h = server.headers("fuzzer")
    before = spent(http, server, "fuzzer")
    seeds = _seeds()
    statuses: dict[int, int] = {}
    for i in range(400):
        seed = rng.choice(seeds)
        path = "/v1/sql" if "query" in seed else "/v1/aggregate"
        doc = seed
        for _ in range(rng.randint(1, 3)):
            doc = _mutate(doc, rng)
        if i % 20 == 0:
            path = rng.choice(["/v1/sql", "/v1/aggregate", "/v1/session", "/v1/audit", "/v1/x"])
        method = "POST" if path in ("/v1/sql", "/v1/aggregate") else rng.choice(["GET", "POST"])
        r = http.request(method, path, headers=h, content=json.dumps(doc))
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        assert r.status_code != 500, (doc, r.text)
        assert r.headers["content-type"].startswith("application/json")
        if r.status_code != 200:
            assert 400 <= r.status_code < 500, (doc, r.text)
            refused(r, r.status_code)
    assert spent(http, server, "fuzzer") == before
    assert statuses.get(400, 0) > 100  # the fuzz mostly reaches the checks


def test_no_error_body_holds_a_trace_a_path_or_a_private_value(server):
    assert len(ERRORS) > 100
    exact = {str(len(PUMS)), str(int(PUMS["income"].sum())), f"{PUMS['age'].mean():.4f}"}
    for text in ERRORS:
        assert "Traceback" not in text and 'File "' not in text
        assert "/tmp/" not in text and str(server.config.parent) not in text
        assert str(PUMS_CSV) not in text and "site-packages" not in text
        assert INTERNAL not in text
        for value in exact:
            assert not re.search(rf"(?<![\d.]){re.escape(value)}(?![\d.])", text), (value, text)
