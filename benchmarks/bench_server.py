"""Server benchmark: what answering through ``pinqpy serve`` adds to a query, and how many
small queries one server answers per second.

Run: ``python benchmarks/bench_server.py`` (needs ``pip install 'pinqpy[server]'``; about
two minutes with the defaults).

It writes a config for the bundled PUMS sample (table ``pums``, the demo's public facts) into
a temporary directory, with one analyst per client and a budget of ``--budget-epsilon``
each: the demo's own budget would run out long before the measurements end. It registers
the analysts with ``pinqpy serve CONFIG --add-analyst NAME`` (one token each, read from the
``token:`` line), starts ``python -m pinqpy serve CONFIG --port 0`` as a real process,
reads the free port it took on ``--host`` from its ``listening on`` line, waits until it
answers an unauthenticated request with 401, and then measures:

(a) **Added latency.** ``count`` of the whole table, ``--calls`` times, through
    ``pq.connect(url, token=...)``, against the same count asked locally of the same CSV file
    (``PrivateFrame.from_csv``), once with an in-memory budget and once with a budget kept in
    a ledger file, as the server keeps it. Every call asks a distinct epsilon, so every call
    is charged (one committed ledger transaction each) and none is answered from the cache.
    Then the same question repeated (``--calls`` times, one epsilon): answered from the cache,
    charged nothing. Median and 95th percentile of the calls, after ``--warmup`` untimed
    ones; the added latency is remote minus local with a ledger. The calls are made in
    ``--rounds`` rounds, each timing every side in turn, so that the machine's load (shared
    with other work) falls on every side alike.
(b) **Throughput, one client.** A client process asks counts back to back for
    ``--duration`` seconds, charged ones (a distinct epsilon each), then cached ones (one
    question repeated); reported: queries per second, the per-query latency, and the CPU
    time per query of the server (from ``/proc``) and of the client.
(c) **Throughput, concurrent clients.** The same with ``--clients`` processes (default 4
    and 16) asking at once, each with its own analyst and budget (``--shared-analyst``: all
    on one analyst and one budget, so every charge contends for the same ledger rows). The
    charges of different analysts come to the server's write group together and share synced
    ledger transactions (group commit), which is what lets charged throughput rise with
    clients.
(d) **Memory over many distinct questions.** A server of its own, with one analyst, is asked
    ``--memory-questions`` (default 100,000) distinct questions back to back through
    ``pq.connect``: counts, each at an epsilon of its own (a fresh answer, charged), every
    fourth one a count per key of a new partition (a fresh partition agent too). The resident
    set of the server and its worker processes (``/proc``, Linux) is read every tenth of the
    way. Its ledger lives on ``/dev/shm`` where there is one, so that the syncs do not set
    the pace: this part measures memory, not the disk. ``--memory-questions 0`` skips it.

Client processes are fresh interpreters (this file with ``--worker``); each connects, asks
``--client-warmup`` untimed queries and says READY, and then all are given one start time. The
server, the clients and the benchmark share the machine: on 2 cores the client processes
take CPU from the server, so (c) is a lower bound of what a server on its own machine
sustains.

Output: a markdown report on standard output (also written to ``--out``), and with
``--json PATH`` one JSON object per measurement (JSON lines), each with the 1-minute load
average at its end.

Flags:
  --calls N            timed calls per latency measurement (default 300)
  --warmup N           untimed calls of each side before the latency rounds (default 50)
  --rounds N           rounds the latency calls are split into (default 5)
  --client-warmup N    untimed calls in each client process before the start (default 20)
  --duration S         seconds of each throughput measurement (default 10)
  --clients N[,N...]   concurrent client processes for (c) (default 4,16; (b) is always 1)
  --memory-questions N distinct questions of (d) (default 100000; 0: no memory part)
  --shared-analyst     all clients use one analyst (one budget) instead of one each
  --budget-epsilon E   each analyst's total epsilon (default 1e6; delta 1e-6)
  --engine NAME        pandas or duckdb: how the server reads the CSV file, and the local
                       side (default pandas)
  --host H             where the server listens (default 127.0.0.1)
  --keep DIR           write the config, tokens and ledgers to DIR and keep them
  --server-log PATH    save the server's output there
  --out PATH           also write the markdown report to PATH
  --json PATH          also write the results as JSON lines to PATH
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx

import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, PUMS_PATH, load_pums
from pinqpy.plan.serialize import plan_to_data
from pinqpy.remote.protocol import encode_args

# The server and the client processes import the same pinqpy as this process.
PKG_ROOT = Path(pq.__file__).resolve().parents[1]
TABLE = "pums"
STARTUP_TIMEOUT_S = 60.0


# -- epsilons: distinct per call, so that every call is charged ----------------------------
def epsilon_of(worker: int, k: int) -> float:
    """The ``k``-th epsilon of client ``worker``: 0.01 plus a step of 1e-8, with a block of
    10**5 steps per client, so no two calls of one analyst (or of a shared one) ask the same
    question, and each costs about 0.01 to 0.03."""
    return (10**6 + worker * 10**5 + k) / 10**8


# -- the server ------------------------------------------------------------------------------
def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string is JSON's string syntax for these values
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"no TOML spelling for {v!r}")


def write_config(folder: Path, analysts: Sequence[str], args: argparse.Namespace) -> Path:
    """A server config in the format of the bundled sample (``pinqpy/data/server-demo.toml``):
    the PUMS sample with the demo's public facts, a large budget per analyst."""
    budget = {"epsilon": args.budget_epsilon, "delta": 1e-6}
    lines = [
        "[server]",
        f"host = {toml_value(args.host)}",
        'ledger = "bench-ledger.db"',
        'tokens = "bench-tokens.json"',
        "",
        f"[tables.{TABLE}]",
        'source = "csv"',
        f"path = {toml_value(PUMS_PATH)}",
        f"engine = {toml_value(args.engine)}",
        f"bounds = {toml_value({k: list(v) for k, v in PUMS_BOUNDS.items()})}",
        f"keys = {toml_value(PUMS_KEYS)}",
        "",
    ]
    if args.shared_analyst:
        lines += ["[groups.bench]", f"budget = {toml_value(budget)}", ""]
    for name in analysts:
        lines += [f"[analysts.{name}]", f"tables = {toml_value([TABLE])}"]
        lines += ['group = "bench"'] if args.shared_analyst else [f"budget = {toml_value(budget)}"]
        lines.append("")
    path = folder / "bench-server.toml"
    path.write_text("\n".join(lines))
    return path


def child_env() -> dict[str, str]:
    """The environment of the server and client processes: this process's pinqpy, and no
    testing switch (the server runs as a curator runs it)."""
    env = dict(os.environ)
    env.pop("PINQPY_TESTING", None)
    env["PYTHONPATH"] = str(PKG_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def serve_command() -> list[str]:
    """``python -m pinqpy serve`` under this interpreter."""
    return [sys.executable, "-m", "pinqpy", "serve"]


def add_analyst(cmd: list[str], config: Path, name: str) -> str:
    out = subprocess.run(
        [*cmd, str(config), "--add-analyst", name], capture_output=True, text=True, env=child_env()
    )
    if out.returncode != 0:
        raise SystemExit(f"--add-analyst {name} failed:\n{out.stdout}{out.stderr}")
    for line in out.stdout.splitlines():
        m = re.match(r"\s*token:\s*(\S+)\s*$", line)
        if m:
            return m.group(1)
    raise SystemExit(f"no 'token:' line in the output of --add-analyst {name}:\n{out.stdout}")


@dataclass
class Server:
    proc: subprocess.Popen[str]
    url: str
    output: list[str] = field(default_factory=list)

    def cpu_seconds(self) -> float:
        """User plus system CPU time of the server process so far (Linux ``/proc``)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_server(cmd: list[str], config: Path, host: str) -> Server:
    """Start the server on a free port (``--port 0``; the banner's ``listening on`` line
    names it) and wait until it refuses a request without a token."""
    proc = subprocess.Popen(
        [*cmd, str(config), "--host", host, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env=child_env(),
    )
    server = Server(proc, "")

    def drain() -> None:  # a full pipe would stall the server (it may log every request)
        assert proc.stdout is not None
        for line in proc.stdout:
            server.output.append(line.rstrip("\n"))

    threading.Thread(target=drain, daemon=True).start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the server exited:\n" + "\n".join(server.output))
        for line in server.output:
            m = re.search(r"listening on (https?://\S+)", line)
            if m:
                server.url = m.group(1).rstrip("/")
        if not server.url:
            time.sleep(0.1)
            continue
        try:
            urllib.request.urlopen(server.url + "/v1/session", timeout=2)
        except urllib.error.HTTPError as err:
            if err.code == 401:  # up, and refusing a request without a token
                return server
        except OSError:
            pass
        time.sleep(0.1)
    server.stop()
    raise SystemExit("the server did not answer within 60 s:\n" + "\n".join(server.output))


# -- measuring -------------------------------------------------------------------------------
def summary(times: Sequence[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "calls": len(times),
        "median_ms": statistics.median(times) * 1e3,
        "p95_ms": ordered[int(0.95 * (len(ordered) - 1))] * 1e3,
        "mean_ms": statistics.fmean(times) * 1e3,
    }


def timed_calls(call: Callable[[int], object], n: int, warmup: int, offset: int) -> list[float]:
    """Latencies of ``call(k)`` for ``n`` fresh ``k`` after ``warmup`` untimed ones."""
    for k in range(warmup):
        call(offset + k)
    out = []
    for k in range(warmup, warmup + n):
        t0 = time.perf_counter()
        call(offset + k)
        out.append(time.perf_counter() - t0)
    return out


def latency(server: Server, token: str, folder: Path, args: argparse.Namespace) -> list[dict]:
    """(a): the same count, locally (in-memory budget, ledgered budget) and remotely."""
    results: list[dict[str, Any]] = []
    big = args.budget_epsilon

    def local_frame(budget: pq.Budget) -> pq.PrivateFrame:
        return pq.PrivateFrame.from_csv(
            PUMS_PATH, budget, engine=args.engine, bounds=PUMS_BOUNDS, keys=PUMS_KEYS
        )

    memory = local_frame(pq.Budget(epsilon=big, delta=1e-6))
    ledgered = local_frame(
        pq.Budget(epsilon=big, delta=1e-6, ledger=folder / "local-ledger.db", name="local")
    )
    session = pq.connect(server.url, token=token)
    remote = session.table(TABLE)
    sides: list[tuple[str, Any, int]] = [
        ("local, in-memory budget", memory, 0),
        ("local, ledgered budget", ledgered, 1),
        ("remote (pq.connect)", remote, 2),
    ]
    per_round = max(1, args.calls // args.rounds)
    for charged in (True, False):
        times: dict[str, list[float]] = {label: [] for label, _, _ in sides}
        for r in range(args.rounds):
            for label, frame, block in sides:
                if charged:  # a new question each call: block, then call number

                    def call(k: int, f: Any = frame, b: int = block) -> object:
                        return f.count(epsilon=epsilon_of(b, k))
                else:  # one question, asked (and charged) once in the warm-up

                    def call(k: int, f: Any = frame, b: int = block) -> object:
                        return f.count(epsilon=epsilon_of(b, 99_999))

                warm = (args.warmup if charged else 1) if r == 0 else 0
                offset = r * (per_round + args.warmup)
                times[label] += timed_calls(call, per_round, warm, offset)
        for label, _, _ in sides:
            results.append(
                {"measure": "latency", "side": label, "charged": charged, **summary(times[label])}
            )
            emit(results[-1])
    session.close()
    by = {(r["side"], r["charged"]): r for r in results}
    for charged in (True, False):
        base = by[("local, ledgered budget", charged)]
        rem = by[("remote (pq.connect)", charged)]
        results.append(
            {
                "measure": "added latency",
                "charged": charged,
                "median_ms": rem["median_ms"] - base["median_ms"],
                "p95_ms": rem["p95_ms"] - base["p95_ms"],
            }
        )
        emit(results[-1])
    return results


def throughput(
    server: Server,
    tokens: Sequence[str],
    clients: int,
    first_block: int,
    charged: bool,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """(b), (c): ``clients`` processes asking counts for ``--duration`` seconds, each charged
    (a distinct epsilon every time) or each answered from the cache (one question repeated).
    Client ``i`` asks the epsilons of block ``first_block + i``, used by no other run. Each
    client says READY once it has connected and warmed up; then all are sent one start time."""
    procs = []
    for i in range(clients):
        spec = {
            "url": server.url,
            "token": tokens[0] if args.shared_analyst else tokens[i],
            "worker": first_block + i,
            "charged": charged,
            "duration": args.duration,
            "warmup": args.client_warmup,
        }
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)]
        procs.append(
            subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=child_env()
            )
        )
    for p in procs:
        assert p.stdout is not None and p.stdin is not None
        if p.stdout.readline().strip() != "READY":
            for q in procs:
                q.kill()
            raise SystemExit(f"a client process failed to start (exit {p.wait()})")
    start_at = time.time() + 0.2
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(f"{start_at!r}\n")
        p.stdin.flush()
    while time.time() < start_at:
        time.sleep(0.01)
    cpu0 = server.cpu_seconds()
    time.sleep(args.duration)
    cpu1 = server.cpu_seconds()
    done: list[dict[str, Any]] = []
    for p in procs:
        out, _ = p.communicate(timeout=args.duration + 120)
        for line in reversed(out.splitlines()):
            if line.startswith("RESULT "):
                done.append(json.loads(line[len("RESULT ") :]))
                break
        else:
            raise SystemExit(f"a client process failed (exit {p.returncode})")
    queries = sum(d["queries"] for d in done)
    times = [t for d in done for t in d["times"]]
    res = {
        "measure": "throughput",
        "clients": clients,
        "charged": charged,
        "shared_analyst": bool(args.shared_analyst),
        "duration_s": args.duration,
        "queries": queries,
        "qps": queries / args.duration,
        "server_cpu_ms_per_query": (cpu1 - cpu0) * 1e3 / max(queries, 1),
        "client_cpu_ms_per_query": sum(d["cpu_s"] for d in done) * 1e3 / max(queries, 1),
        "errors": sum(d["errors"] for d in done),
        **summary(times),
    }
    emit(res)
    return res


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One client process: warm up, wait for the common start, ask until the end time."""
    session = pq.connect(spec["url"], token=spec["token"])
    frame = session.table(TABLE)
    w, k = spec["worker"], 0

    def epsilon() -> float:  # charged: a new question each time; else always the same one
        return epsilon_of(w, k) if spec["charged"] else epsilon_of(w, 99_999)

    for _ in range(spec["warmup"]):
        frame.count(epsilon=epsilon())
        k += 1
    print("READY", flush=True)
    start_at = float(sys.stdin.readline())
    while time.time() < start_at:
        time.sleep(0.001)
    end = start_at + spec["duration"]
    times, errors = [], 0
    cpu0 = time.process_time()
    while True:
        t0 = time.perf_counter()
        try:
            frame.count(epsilon=epsilon())
        except pq.PinqError:
            errors += 1
        t1 = time.perf_counter()
        k += 1
        if k >= 10**5:
            raise SystemExit("more than 10**5 queries in one run: shorten --duration")
        if time.time() > end:  # a query that ends after the window is not counted
            break
        times.append(t1 - t0)
    cpu = time.process_time() - cpu0
    session.close()
    return {"queries": len(times), "times": times, "errors": errors, "cpu_s": cpu}


# -- memory ----------------------------------------------------------------------------------
def rss_of_tree(root: int) -> int:
    """The resident set of process ``root`` and all its descendants, in bytes (``/proc``)."""
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
        children = [c for c, parent in parents.items() if parent == pid and c not in tree]
        tree.update(children)
        frontier += children
    total = 0
    for pid in tree:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += sum(
            int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmRSS:")
        )
    return total


def memory_question(plan: Any, k: int) -> dict[str, Any]:
    """Question ``k`` of (d) as the client sends it: a count at an epsilon of its own, every
    fourth one per key of a partition under an id of its own."""
    part = {"columns": ["sex"], "id": f"memory-{k}"} if k % 4 == 0 else None
    eps = Fraction(1, 1000) + Fraction(k, 10**9)
    args = encode_args({"epsilon": eps})
    return {"plan": plan, "partition": part, "method": "count", "args": args}


def memory(cmd: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    """(d): the server tree's resident set along ``--memory-questions`` distinct questions,
    posted as ``pq.connect`` posts them (bodies made ahead, two connections, so the client's
    own work does not set the pace)."""
    ram = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(prefix="pinqpy-bench-mem-", dir=ram if ram.is_dir() else None))
    solo = argparse.Namespace(**{**vars(args), "shared_analyst": False})
    config = write_config(folder, ["mem0"], solo)
    token = add_analyst(cmd, config, "mem0")
    server = start_server(cmd, config, args.host)
    stand_in = pq.PrivateFrame(
        load_pums().iloc[:0], pq.Budget(1), name=TABLE, bounds=PUMS_BOUNDS, keys=PUMS_KEYS
    )
    plan = plan_to_data(stand_in._plan)
    n, step, results = args.memory_questions, max(1, args.memory_questions // 10), []
    headers = {"Authorization": f"Bearer {token}"}

    def ask(first: int, last: int, lane: int) -> None:
        with httpx.Client(base_url=server.url, headers=headers, timeout=120) as client:
            for k in range(first + lane, last, 2):
                r = client.post("/v1/aggregate", json=memory_question(plan, k))
                if r.status_code != 200:
                    raise SystemExit(f"question {k} failed: {r.status_code} {r.text[:200]}")

    t0 = time.perf_counter()
    try:
        for first in range(0, n + 1, step):
            rss = rss_of_tree(server.proc.pid) / 2**20
            results.append({"measure": "memory", "questions": first, "rss_mb": rss})
            emit(results[-1])
            lanes = [
                threading.Thread(target=ask, args=(first, min(first + step, n), i)) for i in (0, 1)
            ]
            for t in lanes:
                t.start()
            for t in lanes:
                t.join()
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    results[-1]["wall_s"] = time.perf_counter() - t0
    return results


def memory_report(results: list[dict[str, Any]]) -> list[str]:
    rows = [r for r in results if r["measure"] == "memory"]
    if not rows:
        return []
    lines = [
        f"## Memory over {rows[-1]['questions']:,} distinct questions (one analyst, "
        f"{rows[-1]['wall_s']:.0f} s)",
        "",
        "| questions asked | resident set of the server and its workers |",
        "|---:|---:|",
    ]
    lines += [f"| {r['questions']:,} | {r['rss_mb']:.1f} MB |" for r in rows]
    warm = rows[1] if len(rows) > 2 else rows[0]
    lines += [
        "",
        f"Growth after the first {warm['questions']:,} questions (the bounded caches full): "
        f"{rows[-1]['rss_mb'] - warm['rss_mb']:+.1f} MB.",
        "",
    ]
    return lines


# -- reporting -------------------------------------------------------------------------------
JSON_OUT: Path | None = None


def emit(result: dict[str, Any]) -> None:
    result["load"] = os.getloadavg()[0]
    print("  " + ", ".join(f"{k}={_fmt(v)}" for k, v in result.items()), file=sys.stderr)
    if JSON_OUT is not None:
        with JSON_OUT.open("a") as fh:
            fh.write(json.dumps(result) + "\n")


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


def report(results: list[dict[str, Any]], command: str, args: argparse.Namespace) -> str:
    loads = [r["load"] for r in results]
    lines = [
        "# Server benchmark results",
        "",
        f"`{command}`, {date.today().isoformat()}: {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, pinqpy {pq.__version__}, engine {args.engine}; the "
        "server, the clients and the benchmark on one machine, over 127.0.0.1.",
        "",
        f"The 1-minute load average at the end of each measurement had median "
        f"{statistics.median(loads):.1f} and max {max(loads):.1f}.",
        "",
        f"## Latency of one `count` ({args.rounds} rounds of {args.calls // args.rounds} "
        f"calls per side, after {args.warmup} warm-ups)",
        "",
        "| side | charged (distinct epsilons) | | cached (one question repeated) | |",
        "|---|---:|---:|---:|---:|",
        "| | median | p95 | median | p95 |",
    ]
    by = {(r.get("side"), r["charged"]): r for r in results if r["measure"] == "latency"}
    for side in ("local, in-memory budget", "local, ledgered budget", "remote (pq.connect)"):
        c, u = by[(side, True)], by[(side, False)]
        lines.append(
            f"| {side} | {ms(c['median_ms'])} | {ms(c['p95_ms'])} | {ms(u['median_ms'])} "
            f"| {ms(u['p95_ms'])} |"
        )
    added = {r["charged"]: r for r in results if r["measure"] == "added latency"}
    lines.append(
        f"| **added by the server** (remote - local, ledgered) | **{ms(added[True]['median_ms'])}"
        f"** | {ms(added[True]['p95_ms'])} | **{ms(added[False]['median_ms'])}** "
        f"| {ms(added[False]['p95_ms'])} |"
    )
    lines += [
        "",
        f"## Throughput: counts for {args.duration:g} s"
        + (" (all clients on one analyst)" if args.shared_analyst else ""),
        "",
        "| queries | client processes | queries/s | latency median | latency p95 "
        "| CPU per query: server | clients | errors |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        if r["measure"] == "throughput":
            kind = "charged" if r["charged"] else "cached"
            lines.append(
                f"| {kind} | {r['clients']} | {r['qps']:.0f} | {ms(r['median_ms'])} "
                f"| {ms(r['p95_ms'])} | {ms(r['server_cpu_ms_per_query'])} "
                f"| {ms(r['client_cpu_ms_per_query'])} | {r['errors']} |"
            )
    lines += [
        "",
        "Every charged query is committed to the ledger (synced) before it reads data, on the "
        "server as in the ledgered local column; on the server, the charges of analysts who "
        "ask at once share one synced transaction (group commit). A cached one reads the "
        "ledger and charges nothing. CPU per query is the user and system time of the "
        "server process, and of "
        "all client processes together, over the measured window, divided by the queries "
        "answered: the client processes share the cores with the server, so with N clients "
        "the server gets only part of the machine.",
        "",
    ]
    return "\n".join(lines + memory_report(results))


def ms(v: float) -> str:
    return f"{v:.2f} ms" if abs(v) < 100 else f"{v:.0f} ms"


def parse_clients(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError("a comma-separated list of client counts") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError("client counts must be at least 1")
    return out


def main() -> int:
    global JSON_OUT
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--calls", type=int, default=300, help="timed calls per latency figure")
    ap.add_argument("--warmup", type=int, default=50, help="untimed calls before timing")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the latency calls")
    ap.add_argument(
        "--client-warmup", type=int, default=20, help="untimed calls per client process"
    )
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per throughput run")
    ap.add_argument("--clients", type=parse_clients, default=[4, 16], help="e.g. 8 or 4,16")
    ap.add_argument(
        "--memory-questions", type=int, default=100_000, help="distinct questions of (d)"
    )
    ap.add_argument("--shared-analyst", action="store_true", help="one analyst for all clients")
    ap.add_argument("--budget-epsilon", type=float, default=1e6, help="each analyst's epsilon")
    ap.add_argument("--engine", choices=("pandas", "duckdb"), default="pandas")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--keep", type=Path, default=None, help="keep config and ledgers in DIR")
    ap.add_argument("--server-log", type=Path, default=None, help="save the server's output")
    ap.add_argument("--out", type=Path, default=None, help="also write the markdown here")
    ap.add_argument("--json", type=Path, default=None, help="also write JSON lines here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return 0
    if args.rounds < 1 or args.calls < args.rounds or args.duration <= 0:
        ap.error("--rounds and --duration must be positive, --calls at least --rounds")
    JSON_OUT = args.json
    if JSON_OUT is not None:
        JSON_OUT.unlink(missing_ok=True)
    command = ("python benchmarks/bench_server.py " + " ".join(sys.argv[1:])).strip()

    with tempfile.TemporaryDirectory(prefix="pinqpy-bench-server-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        names = (
            ["bench0"] if args.shared_analyst else [f"bench{i}" for i in range(max(args.clients))]
        )
        config = write_config(folder, names, args)
        cmd = serve_command()
        tokens = [add_analyst(cmd, config, name) for name in names]
        server = start_server(cmd, config, args.host)
        print(f"server {server.url} ({' '.join(cmd[1:])}), pid {server.proc.pid}", file=sys.stderr)
        try:
            results = latency(server, tokens[0], folder, args)
            block = 3  # epsilon blocks 0-2 belong to the latency measurement
            for charged in (True, False):
                for n in [1] + [n for n in args.clients if n != 1]:
                    results.append(throughput(server, tokens, n, block, charged, args))
                    block += n
        finally:
            server.stop()
            if args.server_log is not None:
                args.server_log.write_text("\n".join(server.output) + "\n")
        if args.memory_questions > 0:
            results += memory(cmd, args)
    text = report(results, command, args)
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
