"""pinqpy on PostgreSQL against the same aggregates written by hand in SQL, on one server.

    PINQPY_TESTING=1 python benchmarks/bench_postgres.py --rows 1000000 --repeat 5

Starts a throwaway server (tests/postgres_server.py), loads a synthetic table of ``rows``
rows (age, income, a 50-value string key, a user id with about 3 rows per user), then times
each query min-of-``repeat``, pinqpy and hand-written SQL interleaved, and prints the ratio
with the statements and round trips pinqpy made per aggregate. Timings on a shared machine
are rough; the ratios are what to read.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pinqpy as pq
from pinqpy.engines.postgres.connection import link_for
from tests.postgres_server import running_server

CLAMP = "LEAST(GREATEST(income, 0), 500000)"
KEYS = [f"k{i:02d}" for i in range(50)]


def load(url: str, rows: int) -> None:
    import psycopg

    rng = np.random.default_rng(1)
    df = pd.DataFrame(
        {
            "age": rng.integers(0, 100, rows),
            "income": rng.gamma(2.0, 20000.0, rows).round(2),
            "state": np.array(KEYS)[rng.integers(0, 50, rows)],
            "uid": rng.integers(0, max(rows // 3, 1), rows),
        }
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS people")
        conn.execute(
            "CREATE TABLE people (age integer, income double precision, state text, uid bigint)"
        )
        with conn.cursor().copy("COPY people FROM STDIN (FORMAT csv)") as copy:
            copy.write(df.to_csv(header=False, index=False))
        conn.execute("ANALYZE people")


def queries(url: str) -> dict[str, tuple[Callable[[], Any], str]]:
    big = pq.Budget(epsilon=1e9, delta=1e-3)
    f = pq.PrivateFrame.from_sql(url, "people", big, bounds={"age": (0, 100),
                                                            "income": (0, 500_000)})  # fmt: skip
    users = pq.PrivateFrame.from_sql(url, "people", big, privacy_unit="uid")
    return {
        "filtered count": (
            lambda: f.where("age >= 18").count(epsilon=1),
            "SELECT COUNT(*) FROM people WHERE age >= 18",
        ),
        "bounded sum": (
            lambda: f.sum("income", epsilon=1),
            f"SELECT SUM({CLAMP}) FROM people",
        ),
        "mean": (lambda: f.mean("income", epsilon=1), f"SELECT AVG({CLAMP}) FROM people"),
        "median": (
            lambda: f.median("age", epsilon=1),
            "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY age) FROM people",
        ),
        "50-key string partition": (
            lambda: f.partition("state", keys=KEYS).count(epsilon=1),
            "SELECT state, COUNT(*) FROM people GROUP BY state",
        ),
        "user-level count, bound_contributions(2)": (
            lambda: users.bound_contributions(max_rows=2).where("age >= 18").count(epsilon=1),
            "SELECT COUNT(*) FROM (SELECT age, row_number() OVER (PARTITION BY uid ORDER BY "
            "hashtextextended(ROW(age, income, state, uid)::text, 7)) AS r FROM people) AS t "
            "WHERE r <= 2 AND age >= 18",
        ),
        "unknown-key histogram": (
            lambda: f.histogram("state", epsilon=1, delta=1e-6),
            "SELECT state, COUNT(*) FROM people GROUP BY state",
        ),
    }


def best(run: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        # A testing hook in force: the same question is computed again, not served from
        # the cache of answers.
        with pq.testing.seed(0):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=float, default=1e6)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with running_server() as url:
        load(url, int(args.rows))
        link = link_for(url)
        import psycopg

        raw = psycopg.connect(url, autocommit=True)
        print(f"{int(args.rows):,} rows, min of {args.repeat}")
        print(f"{'query':42} {'pinqpy s':>9} {'SQL s':>9} {'ratio':>6} {'stmts':>5} {'trips':>5}")
        for name, (ours, sql) in queries(url).items():
            best(ours, 1)  # warm the table's pages
            s0, r0 = link.statements, link.round_trips
            best(ours, 1)
            stmts, trips = link.statements - s0, link.round_trips - r0
            a = b = float("inf")
            for _ in range(args.repeat):  # interleaved
                a = min(a, best(ours, 1))
                b = min(b, best(lambda q=sql: raw.execute(q).fetchall(), 1))
            print(f"{name:42} {a:9.3f} {b:9.3f} {a / b:6.2f} {stmts:5d} {trips:5d}")
        raw.close()


if __name__ == "__main__":
    main()
