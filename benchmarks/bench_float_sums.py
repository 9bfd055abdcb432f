"""Side by side, in one process: pinqpy's exact bounded sum, mean and variance of a float
column against the engine's own clamped aggregate (and diffprivlib's on numpy, for pandas).

    python benchmarks/bench_float_sums.py --rows 1e6,1e7 --engines pandas,duckdb,spark

Each repeat runs every side once, in turn (pinqpy, then the hand-written computation, ...),
so that load from other work on the machine falls on all sides alike; the figure is the best
of ``--repeat``. Also times wrapping a frame whose object column holds one long list, and a
frame with an object text column (``--wrap``). Timings are for reading, never for tests.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
if (HERE.parent / "pinqpy").is_dir() and str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

import pinqpy as pq  # noqa: E402

BOUNDS = (-50.0, 250_000.0)  # not on a power-of-two grid: every value is scaled and rounded
EPS = 1.0
AGGS = ("sum", "mean", "variance")


def values(rows: int, dtype: str) -> np.ndarray:
    """Log-normal incomes with a few out of bounds and some NaN, as ``dtype``."""
    rng = np.random.default_rng(7)
    x = rng.lognormal(10.5, 1.0, rows)
    x[rng.random(rows) < 0.001] = np.nan
    return x.astype(dtype)


def best(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, tuple[float, float]]:
    """Best wall-clock and best CPU time (this process's threads) of each function, the
    functions interleaved within every repeat. CPU time is the steadier figure on a shared
    machine; it misses work done in other processes (Spark's JVM)."""
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():  # warm-up
        fn()
    for _ in range(repeat):
        for k, fn in fns.items():
            gc.collect()
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    return {k: (min(wall[k]), min(cpu[k])) for k in fns}


def budget() -> Any:
    return pq.Budget(epsilon=1e12)


def pandas_cells(rows: int, dtype: str) -> dict[str, dict[str, Callable[[], Any]]]:
    import diffprivlib.tools as dp

    df = pd.DataFrame({"x": values(rows, dtype)})
    arr = df["x"].to_numpy()
    lo, hi = BOUNDS
    # A new frame per question, as an analyst's first question: answers are cached per table.
    def f() -> Any:
        return pq.PrivateFrame(df, budget())

    clean = arr[~np.isnan(arr)]  # diffprivlib refuses NaN: it gets the non-NaN values
    return {
        "sum": {
            "pinqpy": lambda: f().sum("x", epsilon=EPS, bounds=BOUNDS),
            "pandas": lambda: df["x"].clip(lo, hi).sum(),
            "diffprivlib": lambda: dp.sum(clean, epsilon=EPS, bounds=BOUNDS),
        },
        "mean": {
            "pinqpy": lambda: f().mean("x", epsilon=EPS, bounds=BOUNDS),
            "pandas": lambda: df["x"].clip(lo, hi).mean(),
            "diffprivlib": lambda: dp.mean(clean, epsilon=EPS, bounds=BOUNDS),
        },
        "variance": {
            "pinqpy": lambda: f().variance("x", epsilon=EPS, bounds=BOUNDS),
            "pandas": lambda: df["x"].clip(lo, hi).var(),
            "diffprivlib": lambda: dp.var(clean, epsilon=EPS, bounds=BOUNDS),
        },
    }


def parquet(rows: int, dtype: str, data_dir: Path) -> str:
    path = data_dir / f"floats_{dtype}_{rows}.parquet"
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"x": values(rows, dtype)}).to_parquet(path)
    return str(path)


def duckdb_cells(rows: int, dtype: str, data_dir: Path) -> dict[str, dict[str, Callable]]:
    import duckdb

    con = duckdb.connect()
    path = parquet(rows, dtype, data_dir)
    con.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{path}')")

    def f() -> Any:
        return pq.PrivateFrame("t", budget(), engine="duckdb", connection=con)

    lo, hi = BOUNDS
    clamp = f"LEAST(GREATEST(x, {lo}), {hi})"

    def raw(agg: str) -> Callable[[], Any]:
        return lambda: con.sql(f"SELECT {agg}({clamp}) FROM t").fetchall()

    return {
        "sum": {"pinqpy": lambda: f().sum("x", epsilon=EPS, bounds=BOUNDS), "duckdb": raw("SUM")},
        "mean": {"pinqpy": lambda: f().mean("x", epsilon=EPS, bounds=BOUNDS), "duckdb": raw("AVG")},
        "variance": {
            "pinqpy": lambda: f().variance("x", epsilon=EPS, bounds=BOUNDS),
            "duckdb": raw("VAR_SAMP"),
        },
    }


_SPARK: Any = None


def spark_session(master: str) -> Any:
    global _SPARK
    if _SPARK is None:
        from pyspark.sql import SparkSession

        _SPARK = (
            SparkSession.builder.master(master)
            .appName("pinqpy-float-sums")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.memory", "2g")
            .getOrCreate()
        )
        _SPARK.sparkContext.setLogLevel("ERROR")
    return _SPARK


def spark_cells(rows: int, dtype: str, data_dir: Path, master: str) -> dict[str, dict]:
    from pyspark.sql import functions as F

    spark = spark_session(master)
    path = parquet(rows, dtype, data_dir)
    sdf = spark.read.parquet(path).cache()
    sdf.count()

    def f() -> Any:
        return pq.PrivateFrame(sdf, budget(), engine="spark")

    lo, hi = BOUNDS
    x = F.least(F.greatest(F.col("x"), F.lit(lo)), F.lit(hi))

    def raw(agg: Callable[[Any], Any]) -> Callable[[], Any]:
        return lambda: sdf.select(agg(x)).collect()

    return {
        "sum": {"pinqpy": lambda: f().sum("x", epsilon=EPS, bounds=BOUNDS), "spark": raw(F.sum)},
        "mean": {"pinqpy": lambda: f().mean("x", epsilon=EPS, bounds=BOUNDS), "spark": raw(F.avg)},
        "variance": {
            "pinqpy": lambda: f().variance("x", epsilon=EPS, bounds=BOUNDS),
            "spark": raw(F.var_samp),
        },
    }


def wrap_cells(rows: int) -> dict[str, dict[str, Callable[[], Any]]]:
    one_list = pd.DataFrame({"items": pd.Series([list(range(rows))], dtype=object)})
    words = np.array(["alpha", "beta", "gamma", "delta", "épsilon"], dtype=object)
    text = pd.DataFrame({"s": pd.Series(words[np.arange(rows) % len(words)], dtype=object)})
    return {
        "wrap one list": {
            "pinqpy": lambda: pq.PrivateFrame(one_list, budget()),
            "pandas copy": lambda: one_list.copy(deep=True),
        },
        "wrap object text": {
            "pinqpy": lambda: pq.PrivateFrame(text, budget()),
            "pandas copy": lambda: text.copy(deep=True),
        },
    }


def show(title: str, cells: dict[str, dict[str, Callable[[], Any]]], repeat: int) -> None:
    for agg, fns in cells.items():
        t = best(fns, repeat)
        parts = [f"{k} {w * 1000:7.1f} ms ({c * 1000:6.1f} cpu)" for k, (w, c) in t.items()]
        pw, pc = t["pinqpy"]
        ratios = [f"/{k} {pw / w:.2f} ({pc / c:.2f})" for k, (w, c) in t.items() if k != "pinqpy"]
        line = f"{title:<28} {agg:<16} " + "  ".join(parts) + "   ratio " + ", ".join(ratios)
        print(line, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", default="1e6,1e7")
    ap.add_argument("--engines", default="pandas")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--spark-master", default="local[2]")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pinqpy-float-sums"))
    ap.add_argument("--wrap", default="", help="rows for the wrap cases, e.g. 1e7")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (shared machine)")
    for rows in [int(float(r)) for r in args.rows.split(",") if r]:
        for dtype in args.dtypes.split(","):
            for engine in args.engines.split(","):
                title = f"{engine} {rows:.0e} {dtype}"
                if engine == "pandas":
                    cells = pandas_cells(rows, dtype)
                elif engine == "duckdb":
                    cells = duckdb_cells(rows, dtype, args.data_dir)
                else:
                    title += f" {args.spark_master}"
                    cells = spark_cells(rows, dtype, args.data_dir, args.spark_master)
                show(title, cells, args.repeat)
    for rows in [int(float(r)) for r in args.wrap.split(",") if r]:
        show(f"wrap {rows:.0e}", wrap_cells(rows), max(1, args.repeat // 3))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
