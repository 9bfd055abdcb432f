"""The SQLite ledger across real processes: SIGKILL at random instants, and racing writers.

Each child is a fresh interpreter running a small script that imports ``pinqpy.accounting.ledger``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

import pinqpy as pq
from pinqpy.accounting.ledger import Ledger

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="SIGKILL and fork semantics are POSIX"
)

REPO = Path(__file__).resolve().parents[2]

# Charges forever against two budgets; after each COMMIT prints "C <id>", after storing the
# answer "A <id> <cache key>". ``sleep`` widens the transaction window: the fits rule runs
# inside the transaction, after the spent totals are read and before anything is written.
KILL_CHILD = r"""
import json, random, sys, time
from fractions import Fraction
from pinqpy.accounting.ledger import ChargeRecord, Ledger
from pinqpy.accounting.cost import Cost

path, seed, sleep = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
rng = random.Random(seed)
total = Cost(epsilon=10**9, delta=Fraction(1, 2))
ledger = Ledger(path)
ledger.open_budget("a", total)
ledger.open_budget("b", total)
limits = {"a": total, "b": total}

def fits(name, spent, cost, limit):
    if sleep:
        time.sleep(rng.random() * sleep)
    return (spent + cost).fits_in(limit)

print("READY", flush=True)
i = 0
while True:
    i += 1
    cost = Cost(epsilon=Fraction(1, rng.randint(1, 997)), delta=Fraction(1, 10**rng.randint(6, 40)))
    entries = [("a", cost)] if i % 3 else [("a", cost), ("b", cost + cost)]
    key = f"{seed}-{i}"
    qid = ledger.charge(entries, ChargeRecord("q", plan=f"plan {i}", cache_key=key), limits, fits)
    assert qid is not None
    print(f"C {qid}", flush=True)
    ledger.store_answer(qid, key, json.dumps({"qid": qid}))
    print(f"A {qid} {key}", flush=True)
"""

# Waits for a line on stdin, then tries ``n`` charges of 1/1000; prints the ids it got.
RACE_CHILD = r"""
import json, sys
from fractions import Fraction
from pinqpy.accounting.ledger import ChargeRecord, Ledger
from pinqpy.accounting.cost import Cost

path, n = sys.argv[1], int(sys.argv[2])
limit = Cost(epsilon=Fraction(600, 1000))
ledger = Ledger(path)
ledger.open_budget("shared", limit)
print("READY", flush=True)
sys.stdin.readline()
got = []
for _ in range(n):
    qid = ledger.charge([("shared", Cost(epsilon=Fraction(1, 1000)))], ChargeRecord("race"),
                        {"shared": limit})
    if qid is not None:
        got.append(qid)
print(json.dumps(got), flush=True)
"""


def spawn(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_ready(proc: subprocess.Popen[str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "READY":
        proc.kill()
        _, err = finish(proc)
        pytest.fail(f"child did not start: {line!r}\n{err}")
    assert time.monotonic() < deadline


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> tuple[str, str]:
    """The rest of a child's output, read through the same buffered file as ``wait_ready``.

    (``communicate()`` would read the raw pipe and miss lines already buffered.)
    """
    assert proc.stdout is not None and proc.stderr is not None
    if proc.stdin is not None:
        proc.stdin.close()
    with proc.stdout, proc.stderr:
        out = proc.stdout.read()
        err = proc.stderr.read()
    proc.wait(timeout=timeout)
    return out, err


def kill_round(
    path: Path, seed: int, delay: float, sleep: float
) -> tuple[list[int], dict[int, str]]:
    """Run the charging child, SIGKILL it ``delay`` s after it is ready; its reports."""
    proc = spawn(KILL_CHILD, path, seed, sleep)
    wait_ready(proc)
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    out, err = finish(proc)
    assert proc.returncode == -signal.SIGKILL, err
    committed: list[int] = []
    answered: dict[int, str] = {}
    for line in out.splitlines():
        kind, *values = line.split(" ")
        if kind == "C":
            committed.append(int(values[0]))
        elif kind == "A":
            answered[int(values[0])] = values[1]
    return committed, answered


def test_sigkill_at_random_instants_loses_no_committed_charge(tmp_path):
    path = tmp_path / "ledger.db"
    rng = random.Random(20260101)
    seen_max = 0
    total_committed = 0
    # (delay after the child is ready, longest sleep inside each transaction)
    rounds = [(0.0, 0.0), (0.003, 0.0), (0.05, 0.0)]
    rounds += [(rng.uniform(0.01, 0.6), (0.0, 0.002, 0.02)[i % 3]) for i in range(9)]
    for seed, (delay, sleep) in enumerate(rounds):
        committed, answered = kill_round(path, seed, delay, sleep)
        if os.environ.get("PINQPY_LEDGER_VERBOSE"):
            print(f"round {seed}: delay {delay:.3f} s, sleep {sleep}, {len(committed)} committed")
        total_committed += len(committed)
        with Ledger(path) as ledger:
            assert ledger.check() == [], f"round {seed}"
            with ledger._use() as conn:
                assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            ids = set(ledger.charges().query_id)
            new = {i for i in ids if i > seen_max}
            # every charge the child reported as committed is in the file ...
            assert set(committed) <= new, f"round {seed}: lost {set(committed) - new}"
            # ... and at most one more: the charge committed just before the kill, unreported
            extra = new - set(committed)
            assert len(extra) <= 1
            if extra and committed:
                assert min(extra) > max(committed)
            # every answer the child reported as stored is served from the cache
            for qid, key in answered.items():
                assert ledger.cached(key) == json.dumps({"qid": qid})
            # the running totals equal the sums of the rows (check() above), exactly
            rows = ledger.charges("a")
            assert ledger.spent("a").epsilon == sum(
                (Fraction(s) for s in rows.epsilon_exact), Fraction(0)
            )
            seen_max = max(ids, default=0)
    assert total_committed > 20  # the rounds did real work, not only start-up


def test_a_writer_killed_inside_its_transaction_does_not_block_others(tmp_path):
    path = tmp_path / "ledger.db"
    # Sleeps up to 0.3 s with the write lock held: killed there almost surely.
    committed, _ = kill_round(path, seed=7, delay=0.5, sleep=0.3)
    start = time.monotonic()
    with Ledger(path) as ledger:
        assert ledger.check() == []
        total = ledger.total("a")
        for _ in range(20):
            assert ledger.charge([("a", pq.Cost(epsilon=1))], _rec(), {"a": total}) is not None
        assert set(committed) <= set(ledger.charges().query_id)
    assert time.monotonic() - start < 10


def _rec():
    from pinqpy.accounting.ledger import ChargeRecord

    return ChargeRecord("after the kill")


def test_two_processes_racing_never_overspend(tmp_path):
    path = tmp_path / "ledger.db"
    Ledger(path).close()  # create the file once, so both children only open it
    procs = [spawn(RACE_CHILD, path, 500) for _ in range(2)]
    for p in procs:
        wait_ready(p)
    start = time.monotonic()
    for p in procs:  # release both at once
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    got: list[list[int]] = []
    for p in procs:
        out, err = finish(p)
        assert p.returncode == 0, err
        got.append(json.loads(out.strip().splitlines()[-1]))
    elapsed = time.monotonic() - start
    if os.environ.get("PINQPY_LEDGER_VERBOSE"):
        print(f"race: {len(got[0])} + {len(got[1])} charges in {elapsed:.2f} s")
    assert len(got[0]) + len(got[1]) == 600
    assert not set(got[0]) & set(got[1])
    with Ledger(path) as ledger:
        assert ledger.spent("shared") == pq.Cost(epsilon=Fraction(600, 1000))
        df = ledger.charges("shared")
        assert len(df) == 600
        assert sorted(df.query_id) == sorted(got[0] + got[1])
        assert ledger.check() == []
    assert elapsed < 60, f"the race took {elapsed:.1f} s"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_connection(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger(path) as ledger:
        ledger.open_budget("b", pq.Cost(epsilon=1))
        first = ledger.charge([("b", pq.Cost(epsilon=0.25))], _rec(), {})
        pid = os.fork()
        if pid == 0:  # child: the inherited connection must not be used
            code = 1
            try:
                qid = ledger.charge([("b", pq.Cost(epsilon=0.25))], _rec(), {})
                code = 0 if qid is not None and ledger.spent("b").epsilon == 0.5 else 2
                ledger.close()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert ledger.spent("b").epsilon == Fraction(1, 2)
        assert ledger.charge([("b", pq.Cost(epsilon=0.5))], _rec(), {}) is not None
        assert ledger.charge([("b", pq.Cost(epsilon=0.01))], _rec(), {}) is None
        assert ledger.check() == []
        assert first == min(ledger.charges().query_id)
