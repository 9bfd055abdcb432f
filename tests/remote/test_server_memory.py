"""The server stays flat in memory however many distinct questions it is asked.

A real server process answers one analyst's distinct questions back to back over one
connection, on a table of six rows so that each is cheap: counts, each at an epsilon of its
own (a fresh answer, charged), and every fourth a count per key of a partition under an id of
its own (a fresh partition agent too). The server keeps only ``answers_in_memory`` answers
(the others stay in the ledger), ``partitions_in_memory`` agents and its budgets' latest
charges, so once those are full (the warm-up fills them many times over) the memory of the
server and its workers (their resident sets, read from ``/proc``) stops growing. Kept in
full, as before, every question added about 1.5 KB: some 6 MB over the measured questions,
against a bound of 3 MB for the allocators' slack (what the bounded caches hold, about 1.5 KB
an answer and 2 KB an agent, is all there at the start of the measure). The ledger lives on
a RAM file system where there is one, so that its syncs cost nothing: this test is about
memory (the durability tests sync for real). No timing is measured.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

import httpx
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.plan.serialize import plan_to_data
from pinqpy.remote.protocol import encode_args
from tests.remote.harness import start_server

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

CONFIG = """\
[server]
host = "127.0.0.1"
ledger = "ledger.db"
tokens = "tokens.json"

[server.limits]
answers_in_memory = 50
partitions_in_memory = 20

[tables.small]
source = "csv"
path = "{csv}"
keys = {{ k = [0, 1, 2, 3, 4, 5] }}

[analysts.alice]
tables = ["small"]
budget = {{ epsilon = 100000, delta = 1e-6 }}
"""
#: Warm-up questions (the bounded caches fill), then the questions measured.
WARM, MEASURED = 1000, 4000
#: Growth allowed over the measured questions (see the module docstring).
BOUND = 3 * 2**20


def rss_of_tree(root: int) -> int:
    """The resident set of process ``root`` and all its descendants, in bytes."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in tree:
                tree.add(child)
                frontier.append(child)
    total = 0
    for pid in tree:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) * 1024
    return total


def question(plan: object, i: int) -> dict[str, object]:
    """Question ``i``: a count at an epsilon of its own; every fourth one per key of a
    partition with an id of its own (a fresh agent)."""
    part = {"columns": ["k"], "id": f"split-{i}"} if i % 4 == 0 else None
    return {
        "plan": plan,
        "partition": part,
        "method": "count",
        "args": encode_args({"epsilon": Fraction(1, 1000) + Fraction(i, 10**9)}),
    }


def test_memory_stays_flat_over_many_distinct_questions(tmp_path):
    ram = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(dir=ram)) if ram.is_dir() else tmp_path
    csv = folder / "small.csv"
    pd.DataFrame({"k": [0, 1, 2, 3, 4, 5], "v": [1, 2, 3, 4, 5, 6]}).to_csv(csv, index=False)
    server = start_server(folder, CONFIG.format(csv=csv))
    stand_in = pq.PrivateFrame(
        pd.read_csv(csv).iloc[:0], pq.Budget(1), name="small", keys={"k": list(range(6))}
    )
    plan = plan_to_data(stand_in._plan)
    try:
        with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as client:

            def ask(first: int, last: int) -> None:
                for i in range(first, last):
                    r = client.post("/v1/aggregate", json=question(plan, i))
                    assert r.status_code == 200, r.text

            ask(0, WARM)
            before = rss_of_tree(server.proc.pid)
            ask(WARM, WARM + MEASURED)
            after = rss_of_tree(server.proc.pid)
            # The first answers left memory long ago, not the ledger: asked again, they are
            # answered from it and charged nothing.
            again = [client.post("/v1/aggregate", json=question(plan, i)) for i in (0, 1)]
            doc = client.get("/v1/budget").json()["result"]["budgets"][0]
    finally:
        server.stop()
        if folder != tmp_path:
            shutil.rmtree(folder, ignore_errors=True)
    growth = after - before
    assert growth < BOUND, f"the server grew by {growth / 2**20:.1f} MB"
    assert [r.status_code for r in again] == [200, 200]
    asked = WARM + MEASURED
    spent = sum((Fraction(1, 1000) + Fraction(i, 10**9) for i in range(asked)), Fraction(0))
    assert Fraction(doc["spent"]["epsilon"]) == spent
