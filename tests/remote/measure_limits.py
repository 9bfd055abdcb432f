"""The figures of docs/server.md on the server's limits, measured on real server processes.

    python -m tests.remote.measure_limits work      # CPU after a 504; 3 heavy requests
    python -m tests.remote.measure_limits duckdb    # CPU after a 504 on DuckDB
    python -m tests.remote.measure_limits spark     # ... on Spark (starts a JVM)
    python -m tests.remote.measure_limits slow      # slow-header connections left open
    python -m tests.remote.measure_limits trail     # another member's questions seen

Not a test (nothing is asserted): run it from a checkout, whose code the servers run (the
harness puts it first on their path), to compare two versions. CPU time is that of the
server's whole process tree (``/proc``), so it does not depend on how busy the machine is;
wall-clock figures do, and are rough on a shared machine.
"""

from __future__ import annotations

import select
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

import pinqpy as pq
from pinqpy.demo import load_pums
from tests.remote.harness import PUMS_CSV, ServerProcess, default_config, start_server
from tests.remote.test_server_limits import STAND_IN, count_body, heavy, tree_cpu


def _server(
    limit: float, engine: str = "pandas", analysts: tuple[str, ...] = ("alice",)
) -> ServerProcess:
    tmp = Path(tempfile.mkdtemp())
    text = default_config(analysts).replace(
        "[tables.pums]", f"[server.limits]\nquery_timeout_s = {limit}\n\n[tables.pums]"
    ).replace("epsilon = 10,", "epsilon = 1e9,")
    if engine == "duckdb":
        text = text.replace(f'path = "{PUMS_CSV}"', f'path = "{PUMS_CSV}"\nengine = "duckdb"')
    elif engine == "spark":
        load_pums().to_parquet(tmp / "pums.parquet")
        text = text.replace('source = "csv"', 'source = "spark"')
        text = text.replace(f'path = "{PUMS_CSV}"', f'path = "{tmp / "pums.parquet"}"')
    return start_server(tmp, text, analysts=analysts)


def _until_idle(server: ServerProcess, rounds: int = 240) -> float:
    start = last = tree_cpu(server.proc.pid)
    quiet = 0
    for _ in range(rounds):
        time.sleep(0.5)
        now = tree_cpu(server.proc.pid)
        quiet = quiet + 1 if now - last < 0.02 else 0
        last = now
        if quiet >= 2:
            break
    return last - start


def _after_504(engine: str, rows_per_key: int, limit: float) -> None:
    s = _server(limit, engine)
    with s, httpx.Client(base_url=s.url, headers=s.headers(), timeout=300) as c:
        for i in range(5):  # warm up (a JVM's first query is slow)
            cheap = count_body(STAND_IN.where(f"age > {i}"), 0.01)
            if c.post("/v1/aggregate", json=cheap).status_code == 200:
                break
        r = c.post("/v1/aggregate", json=count_body(heavy(rows_per_key), 1e-9))
        print(f"{engine}: {r.status_code} {r.json().get('error', {}).get('message', '')}")
        print(f"{engine}: CPU-seconds used after the 504, until idle: {_until_idle(s):.2f}")


def work() -> None:
    """The issue's scenario: limit 2 s, one heavy request; then 3 heavy requests of alice
    while bob asks counts."""
    _after_504("pandas", 10, 2)
    with _server(2, analysts=("alice", "bob")) as s:
        statuses: list[int] = []

        def fire(k: int) -> None:
            body = count_body(heavy(10), 1e-9 * (k + 2))
            with httpx.Client(base_url=s.url, headers=s.headers(), timeout=300) as h:
                statuses.append(h.post("/v1/aggregate", json=body).status_code)

        start = tree_cpu(s.proc.pid)
        threads = [threading.Thread(target=fire, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        latencies = []
        with httpx.Client(base_url=s.url, headers=s.headers("bob"), timeout=300) as h:
            t0 = time.monotonic()
            while time.monotonic() - t0 < 9:
                q = time.perf_counter()
                honest = STAND_IN.where(f"age > {len(latencies)}")
                h.post("/v1/aggregate", json=count_body(honest, 0.001))
                latencies.append(time.perf_counter() - q)
                time.sleep(0.25)
        for t in threads:
            t.join()
        used = tree_cpu(s.proc.pid) - start + _until_idle(s)
        latencies.sort()
        print(f"3 heavy requests: statuses {sorted(statuses)}, CPU-seconds until idle {used:.2f}")
        mid, top = latencies[len(latencies) // 2], latencies[-1]
        print(f"bob's counts meanwhile: median {mid:.3f} s, max {top:.3f} s")


def slow(n: int = 60, seconds: float = 20) -> None:
    """``n`` connections sending their head one byte every 0.5 s: how many stay open."""
    with _server(60) as s:
        head = b"GET /v1/session HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 10_000
        socks = [socket.create_connection(("127.0.0.1", s.port)) for _ in range(n)]
        live = [True] * n
        for i in range(int(seconds / 0.5)):
            for k, c in enumerate(socks):
                try:
                    if live[k] and select.select([c], [], [], 0)[0] and not c.recv(65536):
                        live[k] = False
                    if live[k]:
                        c.send(head[i : i + 1])
                except OSError:
                    live[k] = False
            time.sleep(0.5)
        print(f"{sum(live)} of {n} slow-header connections still open after {seconds:g} s")
        for c in socks:
            c.close()


def trail() -> None:
    """Lines of bob's trail (/v1/audit, SHOW LEDGER) that show what alice, of his group,
    asked."""
    text = default_config(()) + (
        '\n[groups.lab]\nbudget = { epsilon = 5 }\n[analysts.alice]\ntables = ["pums"]\n'
        'group = "lab"\n[analysts.bob]\ntables = ["pums"]\ngroup = "lab"\n'
    )
    with start_server(Path(tempfile.mkdtemp()), text, analysts=("alice", "bob")) as s:
        alice, bob = (pq.connect(s.url, token=s.tokens[w]) for w in ("alice", "bob"))
        alice.sql("SELECT COUNT(*) FROM pums WHERE income > 123456", epsilon=0.1)
        alice.table("pums").where("age = 77").count(epsilon=0.1)
        bob.sql("SELECT COUNT(*) FROM pums WHERE age < 30", epsilon=0.1)
        for name, seen in (("/v1/audit", bob.audit()), ("SHOW LEDGER", bob.sql("SHOW LEDGER"))):
            lines = [" ".join(map(str, row)) for row in seen.itertuples(index=False)]
            shown = sum(("123456" in line or "77" in line) for line in lines)
            print(f"{name}: {shown} of bob's {len(lines)} lines show alice's question")


def main(argv: list[str]) -> None:
    what: dict[str, Any] = {
        "work": work,
        "duckdb": lambda: _after_504("duckdb", 100, 2),
        "spark": lambda: _after_504("spark", 3, 10),
        "slow": slow,
        "trail": trail,
    }
    for name in argv or list(what):
        what[name]()


if __name__ == "__main__":
    main(sys.argv[1:])
