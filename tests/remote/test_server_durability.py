"""The server under concurrent clients and a crash: charges go through the ledger, so no
interleaving overspends, a ``kill -9`` loses no charge whose answer was sent, and a restart
restores every budget and cached answer."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import pytest

import pinqpy as pq
from pinqpy.accounting.ledger import Ledger
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums
from pinqpy.plan.serialize import plan_to_data
from pinqpy.remote.protocol import encode_args
from tests.remote.harness import default_config, start_server

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes and signals")

# A client process: posts each body in turn and prints one JSON line per answer; stops at
# the first transport error (the server went away).
CLIENT = r"""
import json, sys, httpx
url, token, path = sys.argv[1:4]
with open(path) as fh:
    bodies = json.load(fh)
print("READY", flush=True)
sys.stdin.readline()  # start together
with httpx.Client(base_url=url, timeout=120, headers={"Authorization": "Bearer " + token}) as c:
    for tag, body in bodies:
        try:
            r = c.post("/v1/aggregate", json=body)
        except httpx.TransportError:
            print("DOWN", flush=True)
            break
        print(json.dumps([tag, r.status_code, r.json()]), flush=True)
"""

STAND_IN = pq.PrivateFrame(
    load_pums().iloc[:0], pq.Budget(1), name="pums", bounds=PUMS_BOUNDS, keys=PUMS_KEYS
)


def count_body(frame: pq.PrivateFrame, epsilon: object) -> dict[str, Any]:
    return {
        "plan": plan_to_data(frame._plan),
        "public": {},
        "partition": None,
        "method": "count",
        "args": encode_args({"epsilon": epsilon}),
    }


def run_clients(
    tmp_path: Path, url: str, token: str, work: list[list[Any]]
) -> list[subprocess.Popen[str]]:
    """Start one client process per list of (tag, body) and release them together."""
    procs = []
    for i, bodies in enumerate(work):
        path = tmp_path / f"bodies-{i}.json"
        path.write_text(json.dumps(bodies))
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", CLIENT, url, token, str(path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "READY"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    return procs


def answers(lines: list[str]) -> list[tuple[Any, int, Any]]:
    return [tuple(json.loads(line)) for line in lines if line.startswith("[")]


def test_8_clients_x_100_queries_spend_exactly_the_budget(tmp_path):
    # 0.01 is read as exactly 1/100, so the budget of 2 fits exactly 200 of the 800 queries.
    config = default_config().replace("budget = { epsilon = 10,", "budget = { epsilon = 2,")
    server = start_server(tmp_path, config)
    work = [
        [
            [i, count_body(STAND_IN.where(f"age >= {i}"), 0.01)]
            for i in range(c * 100, c * 100 + 100)
        ]
        for c in range(8)
    ]
    procs = run_clients(tmp_path, server.url, server.tokens["alice"], work)
    got = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        got += answers(out.splitlines())
    assert len(got) == 800
    statuses = [status for _, status, _ in got]
    assert statuses.count(200) == 200
    assert statuses.count(409) == 600
    refusal = next(doc for _, status, doc in got if status == 409)
    assert refusal["error"]["type"] == "BudgetExceededError"
    budget = httpx.get(server.url + "/v1/budget", headers=server.headers()).json()["result"]
    assert budget["budgets"][0]["spent"]["epsilon"] == "2"
    assert budget["budgets"][0]["remaining"]["epsilon"] == "0"
    server.stop()
    with Ledger(server.ledger) as ledger:
        assert ledger.check() == []
        charges = ledger.charges("analyst:alice/pums")
        assert len(charges) == 200
        assert set(charges["epsilon_exact"]) == {"1/100"}
        assert ledger.spent("analyst:alice/pums").epsilon == 2


def test_kill_9_under_load_loses_no_charge_and_a_restart_restores_budget_and_answers(tmp_path):
    config = default_config().replace("budget = { epsilon = 10,", "budget = { epsilon = 1000,")
    server = start_server(tmp_path, config)
    # Every question is the same count at its own epsilon, so each one charges, and its
    # charge is recognisable in the ledger.
    work = [
        [[k, count_body(STAND_IN, Fraction(k, 10_000))] for k in range(c + 1, 1200, 4)]
        for c in range(4)
    ]
    procs = run_clients(tmp_path, server.url, server.tokens["alice"], work)
    seen: list[str] = []
    first = procs[0]
    assert first.stdout is not None
    while len(seen) < 25:  # let the load build up, then crash mid-stream
        line = first.stdout.readline()
        assert line, "the client stopped early"
        seen.append(line)
    server.kill()
    got = answers(seen)
    for p in procs:
        out, _ = p.communicate(timeout=60)
        got += answers(out.splitlines())
    answered = {k: doc for k, status, doc in got if status == 200}
    assert len(answered) >= 25
    assert all(status == 200 for _, status, _ in got)

    with Ledger(server.ledger) as ledger:
        assert ledger.check() == []
        charges = ledger.charges("analyst:alice/pums")
        charged = {Fraction(e) for e in charges["epsilon_exact"]}
        spent = ledger.spent("analyst:alice/pums")
    missing = [k for k in answered if Fraction(k, 10_000) not in charged]
    assert missing == []  # every answer a client received was charged, durably
    assert spent.epsilon == sum(charged)

    restarted = server.restart()
    h = restarted.headers()
    doc = httpx.get(restarted.url + "/v1/budget", headers=h).json()["result"]["budgets"][0]
    assert Fraction(doc["spent"]["epsilon"]) == spent.epsilon
    k, before = next(iter(answered.items()))
    again = httpx.post(
        restarted.url + "/v1/aggregate",
        headers=h,
        json=count_body(STAND_IN, Fraction(k, 10_000)),
        timeout=60,
    )
    assert again.status_code == 200
    assert again.json() == before  # the same released answer, from the ledger's cache
    doc = httpx.get(restarted.url + "/v1/budget", headers=h).json()["result"]["budgets"][0]
    assert Fraction(doc["spent"]["epsilon"]) == spent.epsilon  # and no new charge
    restarted.stop()


ANALYSTS = [f"a{i}" for i in range(6)]


def test_kill_9_under_concurrent_analysts_loses_no_charge_of_a_shared_commit(tmp_path):
    """Six analysts, each with a worker process of their own, charge at once: their charges
    reach the server's write group together, and share synced transactions. A SIGKILL at
    any instant keeps every charge whose answer a client received."""
    config = default_config(ANALYSTS).replace(
        "budget = { epsilon = 10,", "budget = { epsilon = 1000,"
    )
    server = start_server(tmp_path, config, analysts=ANALYSTS)
    work = {
        name: [[k, count_body(STAND_IN, Fraction(k, 10_000))] for k in range(1, 400)]
        for name in ANALYSTS
    }
    procs = {}
    for name, bodies in work.items():
        (tmp_path / name).mkdir()
        procs[name] = run_clients(tmp_path / name, server.url, server.tokens[name], [bodies])[0]
    watched = procs[ANALYSTS[-1]]  # the last one started: every client is running by then
    assert watched.stdout is not None
    seen = [watched.stdout.readline() for _ in range(20)]
    assert all(line.startswith("[") for line in seen), "a client stopped early"
    server.kill()
    answered: dict[str, set[Fraction]] = {}
    for name, p in procs.items():
        out, _ = p.communicate(timeout=120)
        lines = (seen + out.splitlines()) if p is watched else out.splitlines()
        got = answers(lines)
        assert all(status == 200 for _, status, _ in got), name
        answered[name] = {Fraction(k, 10_000) for k, _, _ in got}
    assert sum(len(a) > 0 for a in answered.values()) >= 2  # charges of several at once

    spent: dict[str, Fraction] = {}
    with Ledger(server.ledger) as ledger:
        assert ledger.check() == []
        for name in ANALYSTS:
            budget = f"analyst:{name}/pums"
            charged = {Fraction(e) for e in ledger.charges(budget)["epsilon_exact"]}
            assert answered[name] <= charged, name  # every answer received was charged
            spent[name] = ledger.spent(budget).epsilon
            assert spent[name] == sum(charged)
    restarted = server.restart()
    try:
        for name in ANALYSTS:
            r = httpx.get(restarted.url + "/v1/budget", headers=restarted.headers(name))
            doc = r.json()["result"]["budgets"][0]
            assert Fraction(doc["spent"]["epsilon"]) == spent[name], name
    finally:
        restarted.stop()
