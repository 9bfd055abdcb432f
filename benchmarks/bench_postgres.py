"""pinqpy on PostgreSQL against the same aggregates written by hand in SQL: the shared engine
benchmark (benchmarks/bench_engines.py) on the postgres engine and the workloads of issue 31.

    python benchmarks/bench_postgres.py --rows 1e6,1e7 --rounds 3
    python benchmarks/bench_postgres.py --check

Any other option of bench_engines.py may be given too. The run starts a throwaway server
(tests/postgres_server.py), copies the data into it once per size, and reports each ratio
with the statements and round trips pinqpy sent per aggregate and the client's and the
server backend's peak memory. On a shared machine, run it under ``nice`` with ``--rounds``
(raw and pinqpy interleaved, best of each): the ratios are what to read.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_engines

WORKLOADS = (
    "filtered_count",
    "bounded_sum",
    "mean",
    "median",
    "str_partition",
    "user_count",
    "unknown_hist",
)

# Flags and their values (None: a flag alone) unless the command line gives them.
DEFAULTS: dict[str, str | None] = {
    "--engines": "postgres",
    "--workloads": ",".join(WORKLOADS),
    "--datasets": "generated",
    "--rows": "1e6",
    "--no-tiny": None,
    "--warmup-time": "1",
    "--out": str(Path(__file__).resolve().parent / "RESULTS_postgres.md"),
}


def main() -> int:
    given = {a.split("=")[0] for a in sys.argv[1:] if a.startswith("--")}
    extra: list[str] = []
    for flag, value in DEFAULTS.items():
        if flag not in given:
            extra += [flag] if value is None else [flag, value]
    sys.argv = [sys.argv[0], *extra, *sys.argv[1:]]
    return bench_engines.main()


if __name__ == "__main__":
    raise SystemExit(main())
