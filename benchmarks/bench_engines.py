"""Engine benchmarks: pinqpy on pandas, DuckDB, Spark, Polars and PostgreSQL against each
engine's own code.

Run everything (about an hour and a half on a 2-core machine):

    python benchmarks/bench_engines.py --rows 1e6,1e7,1e8 --engines pandas,duckdb,spark

A quick smoke run: ``python benchmarks/bench_engines.py`` (1e5 rows). Verify that pinqpy and
the hand-written code compute the same exact aggregates (noise switched off):
``python benchmarks/bench_engines.py --check``.

Data: generated PUMS-like rows and the bundled real PUMS extract repeated, both written
straight to parquet by DuckDB SQL under ``--data-dir`` (default /tmp/pinqpy-bench), so that
1e8 rows never pass through pandas. Every (engine, data, rows, workload, pinqpy | raw)
measurement runs in a fresh subprocess, so peak memory figures do not mix; ``--rounds N``
measures each cell N times, raw and pinqpy interleaved, and keeps the best of each. The
markdown report goes to ``--out`` (default benchmarks/RESULTS.md).

PostgreSQL (``--engines postgres``): the run starts a throwaway server of its own
(tests/postgres_server.py: initdb in a temporary folder, 127.0.0.1, stopped at the end) and
copies each parquet file into a table there once; pinqpy reads it with ``from_sql`` and the
raw side sends the hand-written SQL over its own connection. Peak memory is the measuring
process's (the client), and separately the peak RSS of the server backend serving that
connection (the query's parallel workers are processes of their own, not counted). The
report also gives the statements and round trips pinqpy sends per aggregate.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
# Measure the pinqpy of this checkout (the commit the report names), not whichever one is
# installed: a script's own folder, not the repository root, is first on sys.path.
if (HERE.parent / "pinqpy").is_dir() and str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))
ENGINES = ("pandas", "duckdb", "spark", "polars", "postgres")
DATASETS = ("generated", "pums")
EPS = 1.0
INCOME = (0, 200_000)
# The float columns `wage` (DOUBLE) and `wage32` (FLOAT) and their bounds, which are not on a
# power-of-two grid: every value is scaled and rounded onto pinqpy's exact grid.
FLOAT_BOUNDS = (-50.0, 200_000.0)
FLOAT_COLUMNS = {"float64": "wage", "float32": "wage32"}
AGE_KEYS = list(range(18, 68))  # the 50 public keys of the partition count
# The string key column `state`: generated data picks one of the 50 US states per row; the
# PUMS extract has no string column, so there it is the text label of the education code
# (16 keys). The string workloads' public keys are those of the dataset.
STATES = [
    "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut",
    "Delaware", "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa",
    "Kansas", "Kentucky", "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan",
    "Minnesota", "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire",
    "New Jersey", "New Mexico", "New York", "North Carolina", "North Dakota", "Ohio",
    "Oklahoma", "Oregon", "Pennsylvania", "Rhode Island", "South Carolina", "South Dakota",
    "Tennessee", "Texas", "Utah", "Vermont", "Virginia", "Washington", "West Virginia",
    "Wisconsin", "Wyoming",
]  # fmt: skip
EDUC_LABELS = [  # PUMS education codes 1..16
    "no schooling", "nursery to grade 4", "grade 5 or 6", "grade 7 or 8", "grade 9",
    "grade 10", "grade 11", "grade 12, no diploma", "high school graduate",
    "some college, under a year", "some college, a year or more", "associate degree",
    "bachelor's degree", "master's degree", "professional degree", "doctorate",
]  # fmt: skip
STATE_KEYS = {"generated": STATES, "pums": EDUC_LABELS}
DATA_VERSION = 3  # in the file names: files written before `state` and `wage` are never reused
MAX_ROWS = 5  # bound_contributions(max_rows=...)
MEDIAN_STEP = (INCOME[1] - INCOME[0]) / 1000  # pinqpy's candidate grid over the bounds
TINY_ROWS = 100
MAX_RUNS = 50  # timed runs of a fast cell, at most
# A public table for the SQL workload's join (PUMS education codes 1..16).
LEVELS = pd.DataFrame(
    {
        "educ": list(range(1, 17)),
        "level": ["school"] * 8 + ["high school"] + ["some college"] * 3 + ["degree"] * 4,
    }
)
PRIVATE_SQL = """
SELECT e.level, COUNT(*) AS n, AVG(p.income) AS avg_income
FROM (SELECT educ, income FROM people WHERE age >= 18) AS p
JOIN educ_levels AS e ON p.educ = e.educ
GROUP BY e.level
"""
# The same query without privacy: AVG of the values clamped into the declared bounds.
RAW_SQL = f"""
SELECT e.level, COUNT(*) AS n, AVG(LEAST(GREATEST(p.income, {INCOME[0]}), {INCOME[1]})) AS avg_income
FROM (SELECT educ, income FROM {{people}} WHERE age >= 18) AS p
JOIN educ_levels AS e ON p.educ = e.educ
GROUP BY e.level
"""  # noqa: E501


def parse_rows(text: str) -> list[int]:
    return [int(float(t)) for t in text.split(",") if t.strip()]


def fmt_rows(n: int) -> str:
    if n >= 1_000_000 and n % 10 ** int(math.log10(n)) == 0:
        return f"1e{int(math.log10(n))}"
    return f"{n:,}"


# -- data ------------------------------------------------------------------------------------
def pums_extract() -> pd.DataFrame:
    from pinqpy.demo import load_pums

    return load_pums()


def sql_list(values: Iterable[str]) -> str:
    """String literals for SQL, comma-separated."""
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


def wages(i: str, cents: str) -> str:
    """SQL of the float columns from ``cents`` (an integer) and the row number ``i``: a few
    hundredths added so values are not whole, some of them beyond the bounds."""
    wage = f"(CAST({cents} AS DOUBLE) + {i} % 97) / 100.0 - 100.0"
    return f"{wage} AS wage, CAST({wage} AS FLOAT) AS wage32"


def data_path(data_dir: Path, dataset: str, rows: int) -> Path:
    if dataset == "pums":  # named by the extract's size, so a new bundled extract is not stale
        return data_dir / f"pums{DATA_VERSION}_{len(pums_extract())}_{rows}.parquet"
    return data_dir / f"{dataset}{DATA_VERSION}_{rows}.parquet"


def ensure_data(data_dir: Path, dataset: str, rows: int) -> Path:
    """Write the parquet file once with DuckDB SQL (never through pandas: 1e8 rows would not
    fit). Values come from hashes of the row number, so every run sees the same data."""
    import duckdb

    path = data_path(data_dir, dataset, rows)
    if path.exists():
        return path
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    users = max(rows // 10, 1)  # about 10 rows per user, Poisson-spread
    pid = f"CAST(hash(i, 10) % {users} AS BIGINT) AS pid"
    con = duckdb.connect()
    con.execute(f"SET temp_directory = '{data_dir / 'duckdb-tmp'}'")
    if dataset == "generated":

        def h(k: int, m: int) -> str:
            return f"CAST(hash(i, {k}) % {m} AS BIGINT)"

        select = (
            f"SELECT {h(1, 100)} AS age, {h(2, 2)} AS sex, 1 + {h(3, 6)} AS race, "
            f"1 + {h(4, 16)} AS educ, {h(5, 250_000)} AS income, {h(6, 2)} AS latino, "
            f"{h(7, 2)} AS black, {h(8, 2)} AS asian, {h(9, 2)} AS married, "
            f"[{sql_list(STATES)}][1 + {h(11, len(STATES))}] AS state, {pid}, "
            f"{wages('i', h(12, 25_000_000))} FROM range({rows}) AS t(i)"
        )
    else:
        src = pums_extract()
        src = src.assign(__rid=np.arange(len(src)))
        con.register("pums_src", src)
        cols = ", ".join(f'p."{c}"' for c in src.columns if c != "__rid")
        state = f"[{sql_list(EDUC_LABELS)}][p.educ] AS state"
        select = (
            f"SELECT {cols}, {state}, {pid}, {wages('i', 'p.income * 100')} "
            f"FROM range({rows}) AS t(i) "
            f"JOIN pums_src AS p ON p.__rid = i % {len(src)}"
        )
    con.execute(f"COPY ({select}) TO '{tmp}' (FORMAT parquet)")
    con.close()
    tmp.rename(path)
    return path


# -- engines ---------------------------------------------------------------------------------
class Ctx:
    """One engine in one worker process: how pinqpy wraps the data, and the raw handles."""

    engine: str

    def __init__(self, path: Path, spec: dict[str, Any]) -> None:
        self.path = str(path)
        self.spec = spec
        self.keys: list[str] = STATE_KEYS[spec["dataset"]]  # the string workloads' keys
        # The workloads this process runs: a converted key column is made only for those that
        # read it, so the other cells' memory figures do not carry it.
        self.workloads = set(spec.get("workloads") or [spec.get("workload")])

    def frame(self, budget: Any, **meta: Any) -> Any:
        raise NotImplementedError

    cat_column = "state"  # the categorical key column of categorical_frame

    def categorical_frame(self, budget: Any) -> Any:
        """The data whose key column has the engine's categorical type."""
        raise NotImplementedError

    def child_pids(self) -> list[int]:
        return []


class PandasCtx(Ctx):
    engine = "pandas"

    def __init__(self, path: Path, spec: dict[str, Any]) -> None:
        super().__init__(path, spec)
        self.df = pd.read_parquet(path)  # in memory: the pandas engine's own premise
        # `state` is pandas' default string dtype as read from parquet (Arrow-backed `str`);
        # the categorical and object copies are made once here, in the same frame.
        if "cat_partition" in self.workloads:
            self.df["state_cat"] = self.df["state"].astype("category")
        if "object_partition" in self.workloads:
            self.df["state_obj"] = self.df["state"].astype(object)
        release_free_memory()  # so the peak below is the frame's, not the reader's leftovers

    def frame(self, budget: Any, **meta: Any) -> Any:
        import pinqpy as pq

        return pq.PrivateFrame(self.df, budget, **meta)

    cat_column = "state_cat"

    def categorical_frame(self, budget: Any) -> Any:
        return self.frame(budget)


class DuckDBCtx(Ctx):
    engine = "duckdb"

    def __init__(self, path: Path, spec: dict[str, Any]) -> None:
        import duckdb

        super().__init__(path, spec)
        self.con = duckdb.connect()
        # The same settings for pinqpy and raw; a limit leaves room for whatever else runs.
        spill = Path(spec["data_dir"]) / "duckdb-tmp"
        # Measurements run one at a time, so anything here was left by one that was killed.
        shutil.rmtree(spill, ignore_errors=True)
        self.con.execute(f"SET memory_limit = '{spec['duckdb_memory_limit']}'")
        self.con.execute(f"SET temp_directory = '{spill}'")
        # A cap on spilling, so a query too big for the machine fails instead of filling the
        # disk that everything else on it shares.
        self.con.execute(
            f"SET max_temp_directory_size = '{spec.get('duckdb_spill_limit', '30GB')}'"
        )
        self.con.sql("SELECT 42").fetchall()  # warm the connection
        self.con.register("educ_levels", LEVELS)  # the public table of the raw SQL
        self.table = f"read_parquet('{self.path}')"
        if "cat_partition" in self.workloads:
            # The key column as DuckDB's categorical type, in a table of this connection (in
            # memory: one byte a row), which both sides then read.
            self.con.execute(f"CREATE TYPE state_enum AS ENUM ({sql_list(self.keys)})")
            self.con.execute(
                "CREATE TABLE people_enum AS "
                f"SELECT CAST(state AS state_enum) AS state FROM {self.table}"
            )

    def frame(self, budget: Any, **meta: Any) -> Any:
        import pinqpy as pq

        return pq.PrivateFrame.from_parquet(
            self.path, budget, engine="duckdb", connection=self.con, **meta
        )

    def categorical_frame(self, budget: Any) -> Any:
        import pinqpy as pq

        return pq.PrivateFrame("people_enum", budget, engine="duckdb", connection=self.con)

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        return self.con.sql(query.format(people=self.table)).fetchall()


class SparkCtx(Ctx):
    engine = "spark"

    def __init__(self, path: Path, spec: dict[str, Any]) -> None:
        super().__init__(path, spec)
        t0 = time.perf_counter()
        from pyspark.sql import SparkSession

        local = Path(spec["data_dir"]) / "spark-tmp"
        # pinqpy uses the active session, so both sides run with these settings: those of
        # pinqpy's own local session, plus memory and a scratch directory for 1e8 rows.
        self.spark = (
            SparkSession.builder.master(spec.get("spark_master", "local[*]"))
            .appName("pinqpy-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.memory", spec["spark_driver_memory"])
            .config("spark.local.dir", str(local))
            .getOrCreate()
        )
        self.spark.sparkContext.setLogLevel("ERROR")
        self.spark.range(1000).count()  # the first job compiles and loads classes
        self.startup_s = time.perf_counter() - t0

    def frame(self, budget: Any, **meta: Any) -> Any:
        import pinqpy as pq

        return pq.PrivateFrame.from_parquet(self.path, budget, engine="spark", **meta)

    def read(self) -> Any:
        return self.spark.read.parquet(self.path)

    def child_pids(self) -> list[int]:
        import psutil

        me = psutil.Process()
        return [p.pid for p in me.children(recursive=True) if p.name() == "java"]


class PolarsCtx(Ctx):
    """Both sides scan the parquet file lazily and run on Polars' streaming engine."""

    engine = "polars"

    def __init__(self, path: Path, spec: dict[str, Any]) -> None:
        import polars as pl

        super().__init__(path, spec)
        self.pl = pl
        self.lf = pl.scan_parquet(self.path)
        if "cat_partition" in self.workloads:
            # The key column as Polars' categorical type, in memory, which both sides read.
            self.cat = self.lf.select(pl.col("state").cast(pl.Categorical)).collect()
    def frame(self, budget: Any, **meta: Any) -> Any:
        import pinqpy as pq

        return pq.PrivateFrame.from_parquet(self.path, budget, engine="polars", **meta)

    def categorical_frame(self, budget: Any) -> Any:
        import pinqpy as pq

        return pq.PrivateFrame(self.cat, budget)

    def run(self, query: Any) -> Any:
        return query.collect(engine="streaming")


class PostgresCtx(Ctx):
    """A table the parent copied into its PostgreSQL server; pinqpy and the raw SQL each
    read it over a connection of their own."""

    engine = "postgres"

    def __init__(self, path: Path, spec: dict[str, Any]) -> None:
        import psycopg

        from pinqpy.engines.postgres.connection import link_for

        super().__init__(path, spec)
        self.url = spec["postgres_url"]
        self.table = spec["postgres_table"]
        self.link = link_for(self.url)  # pinqpy's connection (opened here, not timed)
        self.raw = psycopg.connect(self.url, autocommit=True)
        self.raw.execute("SELECT 42").fetchall()

    def frame(self, budget: Any, **meta: Any) -> Any:
        import pinqpy as pq

        return pq.PrivateFrame.from_sql(self.url, self.table, budget, **meta)

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        rows = self.raw.execute(query.format(people=self.table)).fetchall()
        return rows  # type: ignore[no-any-return]

    def server_pids(self, impl: str) -> list[int]:
        """The server backend serving the measured side's connection."""
        conn = self.link.connection if impl == "pinqpy" else self.raw
        return [int(conn.execute("SELECT pg_backend_pid()").fetchall()[0][0])]


CTX: dict[str, type[Ctx]] = {
    "pandas": PandasCtx,
    "duckdb": DuckDBCtx,
    "spark": SparkCtx,
    "polars": PolarsCtx,
    "postgres": PostgresCtx,
}


# -- workloads -------------------------------------------------------------------------------
def budget(delta: float = 0.0) -> Any:
    import pinqpy as pq

    return pq.Budget(epsilon=1e9, delta=delta)  # large: no run is ever refused


def private_sql(ctx: Ctx) -> Any:
    import pinqpy as pq

    session = pq.Session()
    session.register("people", ctx.frame(budget(), bounds={"income": INCOME}))
    session.register_public("educ_levels", LEVELS)
    return session.sql(PRIVATE_SQL, epsilon=EPS)


def per_key(pairs: Iterable[tuple[Any, Any]], keys: list[Any] = AGE_KEYS) -> list[int]:
    """(key, count) rows as counts in ``keys`` order, 0 for a key with no rows."""
    got = {(k if isinstance(k, str) else int(k)): int(n) for k, n in pairs}
    return [got.get(k, 0) for k in keys]


def hist_rows(pairs: Iterable[tuple[Any, Any]]) -> list[list[Any]]:
    """(key, count) rows of a histogram over unknown keys, sorted by key."""
    return sorted([str(k), int(n)] for k, n in pairs)


def sql_rows(rows: Iterable[Iterable[Any]]) -> list[list[Any]]:
    return sorted([str(level), int(n), float(avg)] for level, n, avg in rows)


def pandas_sql(ctx: Any) -> list[list[Any]]:
    df = ctx.df
    p = df.loc[df["age"] >= 18, ["educ", "income"]].merge(LEVELS, on="educ")
    g = p.assign(x=p["income"].clip(*INCOME)).groupby("level")["x"].agg(["size", "mean"])
    return sql_rows(g.itertuples())


def spark_sql(ctx: Any) -> list[list[Any]]:
    ctx.read().createOrReplaceTempView("people")
    ctx.spark.createDataFrame(LEVELS).createOrReplaceTempView("educ_levels")
    return sql_rows(ctx.spark.sql(RAW_SQL.format(people="people")).collect())


def spark_clamped(ctx: Any, agg: str, column: str = "income", bounds: tuple = INCOME) -> float:
    from pyspark.sql import functions as F

    x = F.least(F.greatest(F.col(column), F.lit(bounds[0])), F.lit(bounds[1]))
    return float(ctx.read().select(getattr(F, agg)(x)).collect()[0][0])


def spark_truncated_count(ctx: Any) -> int:
    from pyspark.sql import functions as F

    n = ctx.read().groupBy("pid").count()
    return int(n.select(F.sum(F.least(F.col("count"), F.lit(MAX_ROWS)))).collect()[0][0])


def spark_truncated_sum(ctx: Any) -> float:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("pid").orderBy(F.rand())
    kept = (
        ctx.read().select("income", F.row_number().over(w).alias("rn")).where(f"rn <= {MAX_ROWS}")
    )
    x = F.least(F.greatest(F.col("income"), F.lit(INCOME[0])), F.lit(INCOME[1]))
    return float(kept.select(F.sum(x)).collect()[0][0])


def spark_str_partition(ctx: Any) -> list[int]:
    from pyspark.sql import functions as F

    df = ctx.read().where(F.col("state").isin(ctx.keys)).groupBy("state").count()
    return per_key(df.collect(), ctx.keys)


def spark_histogram(ctx: Any) -> list[list[Any]]:
    return hist_rows(ctx.read().groupBy("state").count().collect())


def spark_partition(ctx: Any) -> list[int]:
    from pyspark.sql import functions as F

    df = ctx.read().where(F.col("age").isin(AGE_KEYS)).groupBy("age").count()
    return per_key(df.collect())


def spark_median(ctx: Any) -> float:
    from pyspark.sql import functions as F

    return float(ctx.read().select(F.median("income")).collect()[0][0])


def polars_clamped(ctx: Any, agg: str) -> float:
    x = ctx.pl.col("income").clip(*INCOME)
    return float(ctx.run(ctx.lf.select(getattr(x, agg)())).item())


def polars_float(ctx: Any, agg: str, column: str) -> float:
    """A bounded float sum, mean or (sample) variance, hand-written in Polars' lazy API."""
    x = ctx.pl.col(column).clip(*FLOAT_BOUNDS)
    out = x.var(ddof=1) if agg == "variance" else getattr(x, agg)()
    return float(ctx.run(ctx.lf.select(out)).item())


def polars_partition(ctx: Any, column: str, keys: list[Any], lf: Any = None) -> list[int]:
    pl = ctx.pl
    lf = ctx.lf if lf is None else lf
    got = ctx.run(lf.filter(pl.col(column).is_in(keys)).group_by(column).len())
    return per_key(got.rows(), keys)


def polars_truncated_count(ctx: Any) -> int:
    pl = ctx.pl
    n = ctx.lf.group_by("pid").len()
    return int(ctx.run(n.select(pl.min_horizontal(pl.col("len"), MAX_ROWS).sum())).item())


def polars_truncated_sum(ctx: Any) -> float:
    pl = ctx.pl
    r = pl.int_range(pl.len()).shuffle()  # a random order of the rows
    kept = ctx.lf.select("pid", "income").filter(r.rank("ordinal").over("pid") <= MAX_ROWS)
    return float(ctx.run(kept.select(pl.col("income").clip(*INCOME).sum())).item())


def polars_sql(ctx: Any) -> list[list[Any]]:
    pl = ctx.pl
    p = ctx.lf.filter(pl.col("age") >= 18).select("educ", "income")
    p = p.join(pl.from_pandas(LEVELS).lazy(), on="educ")
    g = p.group_by("level").agg(pl.len(), pl.col("income").clip(*INCOME).mean())
    return sql_rows(ctx.run(g).rows())
def postgres_median(ctx: Any) -> float:
    query = "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY income) FROM {people}"
    return float(ctx.sql(query)[0][0])


def per_user(ctx: Ctx) -> Any:
    """The user-level frame of the user_* workloads: at most MAX_ROWS rows per user."""
    return ctx.frame(budget(), privacy_unit="pid").bound_contributions(max_rows=MAX_ROWS)


CLAMP = f"LEAST(GREATEST(income, {INCOME[0]}), {INCOME[1]})"
IN_KEYS = ", ".join(map(str, AGE_KEYS))


def duckdb_str_partition(ctx: Any, table: str = "{people}") -> list[int]:
    return per_key(
        ctx.sql(
            f"SELECT state, COUNT(*) FROM {table} WHERE state IN ({sql_list(ctx.keys)}) "
            "GROUP BY state"
        ),
        ctx.keys,
    )


def pandas_partition(ctx: Any, column: str) -> list[int]:
    counts = ctx.df[column].value_counts().reindex(ctx.keys, fill_value=0)
    return per_key(counts.items(), ctx.keys)


def pandas_truncated_sum(ctx: Any) -> float:
    kept = ctx.df[["pid", "income"]].sample(frac=1.0).groupby("pid", sort=False).head(MAX_ROWS)
    return float(kept["income"].clip(*INCOME).sum())


def truncated_sum_range(path: str) -> list[float]:
    """What any choice of at most MAX_ROWS rows per user can sum to: from the sum of each
    user's smallest clamped values to that of their largest. The sum over randomly kept rows
    differs from run to run, so --check asserts both sides fall in this range."""
    df = pd.read_parquet(path, columns=["pid", "income"])
    df = df.assign(x=df["income"].clip(*INCOME)).sort_values(["pid", "x"])
    g = df.groupby("pid")["x"]
    return [float(g.head(MAX_ROWS).sum()), float(g.tail(MAX_ROWS).sum())]


@dataclass(frozen=True)
class Workload:
    name: str
    label: str
    private: Callable[[Ctx], Any]  # pinqpy, from data to noisy answer
    raw: dict[str, Callable[[Any], Any]]  # engine -> the same exact aggregate, no privacy
    tol: float = 0.0  # how far the exact answers may differ in --check
    skip: dict[str, str] | None = None  # engine -> why the workload does not run there
    # --check: a range both answers must fall in, for an answer that is random (from the path)
    check_range: Callable[[str], list[float]] | None = None


# Pinqpy's quantisation, which the --check comparison allows for: a SUM moves each value by
# less than its grid step, a mean by at most half the lattice step q = w·2**-21 (up to
# 2**-20·w), and a variance by at most w·q.
_W = FLOAT_BOUNDS[1] - FLOAT_BOUNDS[0]
FLOAT_TOL = {"sum": 0.0, "mean": _W * 2.0**-20, "variance": _W * _W * 2.0**-20}
# pandas sums a float32 column in float32: on --check's 10,000 rows its pairwise sum errs by
# up to about 2**-24 · log2(n) · n · max|x|.
FLOAT32_SUM_TOL = 2.0**-24 * 14 * 10_000 * FLOAT_BOUNDS[1]
_RAW_AGG = {
    "sum": ("sum", "SUM", "sum"),
    "mean": ("mean", "AVG", "avg"),
    "variance": ("var", "VAR_SAMP", "var_samp"),
}


def float_workload(agg: str, dtype: str) -> Workload:
    """A bounded sum, mean or variance of the float column of ``dtype``."""
    col = FLOAT_COLUMNS[dtype]
    pandas_agg, sql_agg, spark_agg = _RAW_AGG[agg]
    clamp = f"LEAST(GREATEST({col}, {FLOAT_BOUNDS[0]}), {FLOAT_BOUNDS[1]})"
    # Postgres sums a real in real; by hand one would sum it in double, as DuckDB does.
    pg_clamp = clamp.replace(col, f"CAST({col} AS double precision)", 1)
    return Workload(
        f"{dtype}_{agg}",
        f"{agg} of a {dtype} column (`{col}` in [{FLOAT_BOUNDS[0]:g}, {FLOAT_BOUNDS[1]:g}])",
        lambda c: getattr(c.frame(budget()), agg)(col, epsilon=EPS, bounds=FLOAT_BOUNDS),
        {
            "pandas": lambda c: float(getattr(c.df[col].clip(*FLOAT_BOUNDS), pandas_agg)()),
            "duckdb": lambda c: float(c.sql(f"SELECT {sql_agg}({clamp}) FROM {{people}}")[0][0]),
            "spark": lambda c: spark_clamped(c, spark_agg, col, FLOAT_BOUNDS),
            "polars": lambda c: polars_float(c, agg, col),
            "postgres": lambda c: float(
                c.sql(f"SELECT {sql_agg}({pg_clamp}) FROM {{people}}")[0][0]
            ),
        },
        tol=FLOAT32_SUM_TOL if (dtype, agg) == ("float32", "sum") else FLOAT_TOL[agg],
    )


WORKLOADS = [
    Workload(
        "filtered_count",
        "filtered count (`age >= 18`)",
        lambda c: c.frame(budget()).where("age >= 18").count(epsilon=EPS),
        {
            "pandas": lambda c: int((c.df["age"] >= 18).sum()),
            "duckdb": lambda c: c.sql("SELECT COUNT(*) FROM {people} WHERE age >= 18")[0][0],
            "spark": lambda c: c.read().where("age >= 18").count(),
            "polars": lambda c: int(
                c.run(c.lf.filter(c.pl.col("age") >= 18).select(c.pl.len())).item()
            ),
            "postgres": lambda c: c.sql("SELECT COUNT(*) FROM {people} WHERE age >= 18")[0][0],
        },
    ),
    Workload(
        "partition_count",
        "50-key partition count (`age` 18..67)",
        lambda c: c.frame(budget()).partition("age", keys=AGE_KEYS).count(epsilon=EPS),
        {
            "pandas": lambda c: per_key(
                c.df["age"].value_counts().reindex(AGE_KEYS, fill_value=0).items()
            ),
            "duckdb": lambda c: per_key(
                c.sql(f"SELECT age, COUNT(*) FROM {{people}} WHERE age IN ({IN_KEYS}) GROUP BY age")
            ),
            "spark": spark_partition,
            "polars": lambda c: polars_partition(c, "age", AGE_KEYS),
            "postgres": lambda c: per_key(
                c.sql(f"SELECT age, COUNT(*) FROM {{people}} WHERE age IN ({IN_KEYS}) GROUP BY age")
            ),
        },
    ),
    Workload(
        "bounded_sum",
        "bounded sum (`income` in [0, 200000])",
        lambda c: c.frame(budget()).sum("income", epsilon=EPS, bounds=INCOME),
        {
            "pandas": lambda c: float(c.df["income"].clip(*INCOME).sum()),
            "duckdb": lambda c: float(c.sql(f"SELECT SUM({CLAMP}) FROM {{people}}")[0][0]),
            "spark": lambda c: spark_clamped(c, "sum"),
            "polars": lambda c: polars_clamped(c, "sum"),
            "postgres": lambda c: float(c.sql(f"SELECT SUM({CLAMP}) FROM {{people}}")[0][0]),
        },
    ),
    Workload(
        "mean",
        "mean (`income`, same bounds)",
        lambda c: c.frame(budget()).mean("income", epsilon=EPS, bounds=INCOME),
        {
            "pandas": lambda c: float(c.df["income"].clip(*INCOME).mean()),
            "duckdb": lambda c: float(c.sql(f"SELECT AVG({CLAMP}) FROM {{people}}")[0][0]),
            "spark": lambda c: spark_clamped(c, "avg"),
            "polars": lambda c: polars_clamped(c, "mean"),
            "postgres": lambda c: float(c.sql(f"SELECT AVG({CLAMP}) FROM {{people}}")[0][0]),
        },
    ),
    *[
        float_workload(agg, dtype)
        for dtype in FLOAT_COLUMNS
        for agg in ("sum", "mean", "variance")
    ],
    Workload(
        "median",
        "median (`income`, same bounds; raw: exact median)",
        lambda c: c.frame(budget()).median("income", epsilon=EPS, bounds=INCOME),
        {
            "pandas": lambda c: float(c.df["income"].median()),
            "duckdb": lambda c: float(c.sql("SELECT MEDIAN(income) FROM {people}")[0][0]),
            "spark": spark_median,
            "polars": lambda c: float(c.run(c.lf.select(c.pl.col("income").median())).item()),
            "postgres": postgres_median,
        },
        tol=MEDIAN_STEP,  # pinqpy answers on a public grid of 1001 candidates
    ),
    Workload(
        "user_count",
        f"user-level count (`bound_contributions({MAX_ROWS})`, ~10 rows/user; "
        f"raw: Σ min(rows, {MAX_ROWS}) per user)",
        lambda c: per_user(c).count(epsilon=EPS),
        {
            # The count after truncation does not depend on which rows are kept: it is
            # the sum over users of min(rows, 5), one GROUP BY pid in every engine.
            "pandas": lambda c: int(
                np.minimum(c.df["pid"].value_counts().to_numpy(), MAX_ROWS).sum()
            ),
            "duckdb": lambda c: c.sql(
                f"SELECT SUM(LEAST(n, {MAX_ROWS})) FROM "
                "(SELECT COUNT(*) AS n FROM {people} GROUP BY pid)"
            )[0][0],
            "spark": spark_truncated_count,
            "polars": polars_truncated_count,
            "postgres": lambda c: int(
                c.sql(
                    f"SELECT SUM(LEAST(n, {MAX_ROWS})) FROM "
                    "(SELECT COUNT(*) AS n FROM {people} GROUP BY pid) AS t"
                )[0][0]
            ),
        },
    ),
    Workload(
        "user_sum",
        f"user-level sum (`bound_contributions({MAX_ROWS})`, `income` bounds; "
        f"raw: {MAX_ROWS} random rows per user)",
        lambda c: per_user(c).sum("income", epsilon=EPS, bounds=INCOME),
        {
            # A sum depends on which rows are kept: keep at most 5 random rows per user.
            "pandas": pandas_truncated_sum,
            "duckdb": lambda c: float(
                c.sql(
                    # DuckDB refuses random() in a window's ORDER BY; draw it one level down.
                    f"SELECT SUM({CLAMP}) FROM (SELECT income, row_number() OVER "
                    "(PARTITION BY pid ORDER BY r) AS rn FROM "
                    f"(SELECT pid, income, random() AS r FROM {{people}})) WHERE rn <= {MAX_ROWS}"
                )[0][0]
            ),
            "spark": spark_truncated_sum,
            "polars": polars_truncated_sum,
            "postgres": lambda c: float(
                c.sql(
                    f"SELECT SUM({CLAMP}) FROM (SELECT income, row_number() OVER "
                    "(PARTITION BY pid ORDER BY random()) AS rn FROM {people}) AS t "
                    f"WHERE rn <= {MAX_ROWS}"
                )[0][0]
            ),
        },
        tol=1e-6,
        check_range=truncated_sum_range,
    ),
    Workload(
        "str_partition",
        "partition count, string keys (`state`, public keys)",
        lambda c: c.frame(budget()).partition("state", keys=c.keys).count(epsilon=EPS),
        {
            "pandas": lambda c: pandas_partition(c, "state"),
            "duckdb": duckdb_str_partition,
            "spark": spark_str_partition,
            "polars": lambda c: polars_partition(c, "state", c.keys),
            "postgres": duckdb_str_partition,  # the same SQL
        },
    ),
    Workload(
        "cat_partition",
        "partition count, categorical keys (pandas `category`, DuckDB `ENUM`)",
        lambda c: (
            c.categorical_frame(budget()).partition(c.cat_column, keys=c.keys).count(epsilon=EPS)
        ),
        {
            "pandas": lambda c: pandas_partition(c, "state_cat"),
            "duckdb": lambda c: duckdb_str_partition(c, "people_enum"),
            "polars": lambda c: polars_partition(c, "state", c.keys, c.cat.lazy()),
        },
        skip={
            "spark": "skipped: Spark has no categorical type",
            "postgres": "skipped: pinqpy reads a PostgreSQL enum as text (the string partition)",
        },
    ),
    Workload(
        "object_partition",
        "partition count, Python object string keys (pandas `object`)",
        lambda c: c.frame(budget()).partition("state_obj", keys=c.keys).count(epsilon=EPS),
        {"pandas": lambda c: pandas_partition(c, "state_obj")},
        skip={
            "duckdb": "skipped: object columns are a pandas dtype",
            "spark": "skipped: object columns are a pandas dtype",
            "polars": "skipped: object columns are a pandas dtype",
            "postgres": "skipped: object columns are a pandas dtype",
        },
    ),
    Workload(
        "unknown_hist",
        "histogram, unknown string keys (`state`, delta 1e-6)",
        lambda c: c.frame(budget(delta=0.5)).histogram("state", epsilon=EPS, delta=1e-6),
        {
            "pandas": lambda c: hist_rows(c.df["state"].value_counts().items()),
            "duckdb": lambda c: hist_rows(
                c.sql("SELECT state, COUNT(*) FROM {people} GROUP BY state")
            ),
            "spark": spark_histogram,
            "polars": lambda c: hist_rows(c.run(c.lf.group_by("state").len()).rows()),
            "postgres": lambda c: hist_rows(
                c.sql("SELECT state, COUNT(*) FROM {people} GROUP BY state")
            ),
        },
    ),
    Workload(
        "sql",
        "SQL: subquery + join with a public table, 4 groups",
        private_sql,
        {
            "pandas": pandas_sql,
            "duckdb": lambda c: sql_rows(c.sql(RAW_SQL)),
            "spark": spark_sql,
            "polars": polars_sql,
            "postgres": lambda c: sql_rows(c.sql(RAW_SQL)),
        },
        tol=1e-9,
    ),
]


def id_histogram_workload() -> Workload:
    """A histogram over unknown keys of high cardinality: ``pid``, about rows/10 distinct
    values (10^6 keys at 1e7 rows), most below the threshold. The engines split the keys
    in the engine (pinqpy.engines.sqlgen.keycounts), so the driver's peak memory shows
    whether the keys that cannot pass stay out of Python; the raw side reads every key."""
    return Workload(
        "id_hist",
        "histogram, unknown high-cardinality keys (`pid`, ~rows/10 keys, delta 1e-6)",
        lambda c: c.frame(budget(delta=0.5)).histogram("pid", epsilon=EPS, delta=1e-6),
        {
            # Each engine's own result: turned into rows only for --check, untimed.
            "pandas": lambda c: c.df["pid"].value_counts(),
            "duckdb": lambda c: c.sql("SELECT pid, COUNT(*) FROM {people} GROUP BY pid"),
            "spark": lambda c: c.read().groupBy("pid").count().collect(),
            "polars": lambda c: c.run(c.lf.group_by("pid").len()),
            "postgres": lambda c: c.sql("SELECT pid, COUNT(*) FROM {people} GROUP BY pid"),
        },
    )


WORKLOADS.append(id_histogram_workload())
BY_NAME = {w.name: w for w in WORKLOADS}


def exact_value(workload: str, value: Any) -> Any:
    """A pinqpy answer or raw result as plain JSON values, comparable across the two."""
    if workload in ("unknown_hist", "id_hist") and isinstance(value, pd.Series):  # key -> count
        return hist_rows(value.items())
    if workload == "id_hist":  # an engine's own (key, count) rows or Polars frame
        return hist_rows(value if isinstance(value, list) else value.rows())
    if isinstance(value, pd.DataFrame):  # SQL: level, n, avg_income
        return sql_rows(value[["level", "n", "avg_income"]].itertuples(index=False))
    if isinstance(value, pd.Series):  # per-key counts, in key order
        return [int(v) for v in value.to_numpy()]
    if isinstance(value, list):
        return value
    if workload in ("filtered_count", "user_count"):
        return int(value)
    return float(value)


def agree(a: Any, b: Any, tol: float) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(agree(x, y, tol) for x, y in zip(a, b, strict=True))
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return abs(float(a) - float(b)) <= max(tol, 1e-9 * abs(float(b)))


# -- memory ----------------------------------------------------------------------------------
def _status_kb(pid: int | str, field: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    m = re.search(rf"^{field}:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) if m else 0


def reset_peaks(pids: list[int | str]) -> bool:
    """Reset the kernel's peak-RSS mark (Linux: clear_refs 5), so the peak measured is that of
    the queries, not of loading the data or starting the engine."""
    try:
        for pid in pids:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def release_free_memory() -> None:
    """Hand memory freed after loading back to the OS (arrow's pool, then glibc's heap)."""
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def peak_mb(pid: int | str = "self") -> float:
    """Peak RSS since the last reset. Not ``ru_maxrss``: Linux carries the launching
    process's peak into it across exec, so it never reads below the parent's size."""
    return _status_kb(pid, "VmHWM") / 1024


# -- the worker (one measurement in a fresh process) -----------------------------------------
def pinqpy_source() -> str:
    """A short hash of pinqpy's source, to tell whether it changed between measurements."""
    import hashlib

    import pinqpy

    root = Path(pinqpy.__file__).parent
    h = hashlib.sha1()
    for f in sorted(root.rglob("*.py")):
        h.update(f.read_bytes())
    return h.hexdigest()[:8]


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    import pinqpy as pq

    path = Path(spec["path"])
    ctx = CTX[spec["engine"]](path, spec)
    out: dict[str, Any] = {"pinqpy_src": pinqpy_source()}
    if isinstance(ctx, SparkCtx):
        out["startup_s"] = ctx.startup_s
    if spec["impl"] == "check":  # both sides once, without noise, compared by the parent
        os.environ["PINQPY_TESTING"] = "1"  # the switch pq.testing's hooks need
        with pq.testing.no_noise():
            for name in spec["workloads"]:
                w = BY_NAME[name]
                try:
                    got = exact_value(name, w.private(ctx))
                except Exception as e:  # a refusal is the cell's result, not the run's end
                    out[name] = {"error": f"pinqpy: {type(e).__name__}: {e}"[:300]}
                    continue
                res = {"pinqpy": got, "raw": exact_value(name, w.raw[ctx.engine](ctx))}
                if w.check_range is not None:
                    res["range"] = w.check_range(ctx.path)
                if name == "unknown_hist":  # compare the keys released (all, if none is rare)
                    released = {k for k, _ in got}
                    res["unreleased"] = [k for k, _ in res["raw"] if k not in released]
                    res["raw"] = [kn for kn in res["raw"] if kn[0] in released]
                out[name] = res
        return out
    w = BY_NAME[spec["workload"]]
    fn: Callable[[], Any] = (
        (lambda: w.private(ctx)) if spec["impl"] == "pinqpy" else (lambda: w.raw[ctx.engine](ctx))
    )
    jvm = ctx.child_pids()
    server = ctx.server_pids(spec["impl"]) if isinstance(ctx, PostgresCtx) else []
    out["base_mb"] = _status_kb("self", "VmRSS") / 1024  # data loaded, engine started
    out["peak_reset"] = reset_peaks(["self", *jvm, *server])
    t0 = time.perf_counter()
    fn()  # warm-up: caches, JIT, page cache, pinqpy's parser tables
    warm = time.perf_counter() - t0
    # More warm-ups for a cell fast enough: a JVM compiles a query's code over several runs
    # (Spark's times settle only after 10 to 20 runs), so warm up for `warmup_time` seconds
    # as well as `warmup` runs, at most MAX_RUNS runs.
    if warm < spec["time_budget"] / 10:
        runs, spent = 1, warm
        while runs < spec.get("warmup", 1) or (
            spent < spec.get("warmup_time", 0.0) and runs < MAX_RUNS
        ):
            t0 = time.perf_counter()
            fn()
            spent += time.perf_counter() - t0
            runs += 1
        out["warmups"] = runs
    times: list[float] = []
    if warm > spec["time_budget"]:  # so slow that warming up cannot matter: it is the figure
        times.append(warm)
        out["warmup_only"] = True
    # At least `repeat` runs, and more (up to 50) until they take `min_time` in all: a cell
    # of a few milliseconds varies by half from run to run in a fresh process.
    while not out.get("warmup_only") and (
        len(times) < spec["repeat"]
        or (sum(times) < spec.get("min_time", 0.0) and len(times) < MAX_RUNS)
    ):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if sum(times) > spec["time_budget"]:  # a very slow cell: fewer runs, still >= 1
            break
    # The 1-minute load average: other work on the machine slows every figure alike.
    out.update(best_s=min(times), times=times, peak_mb=peak_mb(), load=os.getloadavg()[0])
    out["peak_method"] = "VmHWM"
    if jvm:
        out["jvm_peak_mb"] = sum(peak_mb(p) for p in jvm)
    if server:
        out["server_peak_mb"] = sum(peak_mb(p) for p in server)
    if isinstance(ctx, PostgresCtx) and spec["impl"] == "pinqpy":
        s0, r0 = ctx.link.statements, ctx.link.round_trips
        fn()  # once more, counted: what one aggregate sends
        out["statements"] = ctx.link.statements - s0
        out["round_trips"] = ctx.link.round_trips - r0
    return out


# -- the parent ------------------------------------------------------------------------------
def run_worker(spec: dict[str, Any], timeout: float, log: Path) -> dict[str, Any]:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYTHONWARNINGS="ignore")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    with log.open("a") as fh:
        fh.write(f"### {json.dumps(spec)}\n{proc.stderr[-20000:]}\n")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            res: dict[str, Any] = json.loads(line[len("RESULT ") :])
            res["wall_s"] = time.perf_counter() - t0
            return res
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    if proc.returncode < 0:
        tail = f"killed by signal {-proc.returncode} (out of memory?)"
    return {"error": tail[:300]}


def measure(spec: dict[str, Any], args: argparse.Namespace, log: Path) -> dict[str, Any]:
    """One cell, in one fresh process, or for Spark the best of ``--spark-processes``: on
    two cores one JVM's steady state can be twice another's for the same query, pinqpy's or
    not. The peak memory reported is the largest of them."""
    n = args.spark_processes if spec["engine"] == "spark" else 1
    runs = [run_worker(spec, args.timeout, log) for _ in range(max(1, n))]
    ok = [r for r in runs if "best_s" in r]
    if not ok:
        return runs[0]
    best = dict(min(ok, key=lambda r: r["best_s"]))
    best["processes"] = [r["best_s"] for r in ok]
    if len(ok) < len(runs):  # kept in the JSON results, so a failure is not lost
        best["failed_processes"] = [r.get("error", "no result") for r in runs if r not in ok]
    best["peak_mb"] = max(r["peak_mb"] for r in ok)
    for extra in ("jvm_peak_mb", "server_peak_mb"):
        if extra in best:
            best[extra] = max(r.get(extra, 0.0) for r in ok)
    return best


def key_of(spec: dict[str, Any]) -> str:
    return "|".join(str(spec[k]) for k in ("engine", "dataset", "rows", "workload", "impl"))


def skip_reason(engine: str, rows: int, workload: str, args: argparse.Namespace) -> str | None:
    reason = (BY_NAME[workload].skip or {}).get(engine)
    if reason:
        return reason
    if engine == "pandas" and rows > args.pandas_max_rows:
        gb = rows * 10 * 8 / 2**30
        return f"skipped: the frame alone is {gb:.0f} GiB in memory (--pandas-max-rows)"
    if engine == "spark" and rows > args.spark_max_rows:
        return "skipped, to keep the whole run near two hours (--spark-max-rows)"
    return None


def run_all(args: argparse.Namespace, on_result: Callable[[list[dict[str, Any]]], None]) -> list:
    data_dir: Path = args.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    log = data_dir / "workers.log"
    store: Path = args.json or data_dir / "results.jsonl"
    done: dict[str, dict[str, Any]] = {}
    if args.resume and store.exists():
        for line in store.read_text().splitlines():
            r = json.loads(line)
            if "error" not in r or args.report_only:  # a report shows failures too
                done[key_of(r)] = r
    elif store.exists():
        store.unlink()
    plan = [(d, n) for d in args.datasets for n in rows_of(d, args)]
    if args.tiny and (DATASETS[0], TINY_ROWS) not in plan:
        plan.insert(0, (DATASETS[0], TINY_ROWS))
    results: list[dict[str, Any]] = []
    for dataset, rows in plan:
        data = _Data(args, dataset, rows)
        for engine in args.engines:
            for wname in args.workloads:
                specs = [_spec(args, engine, dataset, rows, wname, impl) for impl in IMPLS]
                got: dict[str, dict[str, Any]] = {}
                todo = []
                for spec in specs:
                    reason = skip_reason(engine, rows, wname, args)
                    if reason:
                        got[spec["impl"]] = {**spec, "skipped": reason}
                    elif key_of(spec) in done:
                        got[spec["impl"]] = done[key_of(spec)]
                    elif not args.report_only:
                        todo.append(data.ready(spec))
                got.update(interleaved(todo, args, log, store))
                for spec in specs:
                    if spec["impl"] in got:
                        results.append(got[spec["impl"]])
                        print(progress_line(got[spec["impl"]]), flush=True)
                on_result(results)  # the report so far, in case the run is cut short
    return results


IMPLS = ("raw", "pinqpy")


def _spec(
    args: argparse.Namespace, engine: str, dataset: str, rows: int, workload: str, impl: str
) -> dict[str, Any]:
    return {
        "engine": engine,
        "dataset": dataset,
        "rows": rows,
        "workload": workload,
        "impl": impl,
        "repeat": repeats(rows, args),
        "warmup": args.warmup_tiny if rows == TINY_ROWS else args.warmup,
        "min_time": args.min_time,
        "warmup_time": args.warmup_time,
        "time_budget": args.time_budget,
        "data_dir": str(args.data_dir),
        "duckdb_memory_limit": args.duckdb_memory_limit,
        "duckdb_spill_limit": args.duckdb_spill_limit,
        "spark_driver_memory": args.spark_driver_memory,
        "spark_master": args.spark_master,
    }


class _Data:
    """One dataset at one size: its parquet file, and its PostgreSQL table, made the first
    time a measurement needs them."""

    def __init__(self, args: argparse.Namespace, dataset: str, rows: int) -> None:
        self.args, self.dataset, self.rows = args, dataset, rows
        self.path: Path | None = None
        self.table: str | None = None

    def ready(self, spec: dict[str, Any]) -> dict[str, Any]:
        if self.path is None:
            t0 = time.perf_counter()
            self.path = ensure_data(self.args.data_dir, self.dataset, self.rows)
            print(f"data {self.path} ({time.perf_counter() - t0:.1f} s)", flush=True)
        spec["path"] = str(self.path)
        if spec["engine"] == "postgres":
            if self.table is None:
                t0 = time.perf_counter()
                self.table = postgres_table(self.args.postgres_url, self.path)
                print(f"postgres {self.table} ({time.perf_counter() - t0:.1f} s)", flush=True)
            spec["postgres_url"], spec["postgres_table"] = self.args.postgres_url, self.table
        return spec


def interleaved(
    specs: list[dict[str, Any]], args: argparse.Namespace, log: Path, store: Path
) -> dict[str, dict[str, Any]]:
    """Measure raw and pinqpy in turn, ``--rounds`` times each (on a shared machine the load
    changes within minutes: each side sees the same), keeping each side's best round (its
    peak memory the largest of its rounds)."""
    best: dict[str, dict[str, Any]] = {}
    for _ in range(max(1, args.rounds)):
        for spec in specs:
            res = {**spec, **measure(spec, args, log)}
            prev = best.get(spec["impl"])
            if prev is None or ("best_s" in res and res["best_s"] < prev.get("best_s", 1e99)):
                if prev is not None and "peak_mb" in prev and "peak_mb" in res:
                    res["peak_mb"] = max(res["peak_mb"], prev["peak_mb"])
                best[spec["impl"]] = res
            elif "peak_mb" in res and "peak_mb" in prev:
                prev["peak_mb"] = max(prev["peak_mb"], res["peak_mb"])
    for res in best.values():
        res["rounds"] = max(1, args.rounds)
        with store.open("a") as fh:
            fh.write(json.dumps(res) + "\n")
    return best


# -- PostgreSQL ----------------------------------------------------------------------------------
def postgres_table(url: str, path: Path) -> str:
    """The parquet file copied into a table of the benchmark's server (once per file; the
    public table of the SQL workload too), frozen and analyzed so that no measurement
    writes hint bits or plans without statistics."""
    import duckdb
    import psycopg

    name = "bench_" + re.sub(r"\W", "_", path.stem)
    types = {"BIGINT": "bigint", "INTEGER": "integer", "VARCHAR": "text"}
    types |= {"DOUBLE": "double precision", "FLOAT": "real"}
    con = duckdb.connect()
    described = con.execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()
    cols = ", ".join(f'"{c}" {types.get(t, "text")}' for c, t, *_ in described)
    csv = path.with_suffix(".pg.csv")
    con.execute(f"COPY (SELECT * FROM read_parquet('{path}')) TO '{csv}' (HEADER false)")
    con.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.execute(f"CREATE TABLE {name} ({cols})")
        load = f"COPY {name} FROM STDIN (FORMAT csv)"
        with conn.cursor().copy(load) as copy, csv.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                copy.write(chunk)
        conn.execute(f"VACUUM (FREEZE, ANALYZE) {name}")
        if not conn.execute("SELECT to_regclass('educ_levels')").fetchall()[0][0]:
            conn.execute("CREATE TABLE educ_levels (educ bigint, level text)")
            with conn.cursor().copy("COPY educ_levels FROM STDIN") as copy:
                for row in LEVELS.itertuples(index=False):
                    copy.write_row(tuple(row))
    csv.unlink()
    return name


def repeats(rows: int, args: argparse.Namespace) -> int:
    """Timed runs: fewer at 1e8 rows; more on the tiny table, whose milliseconds vary most."""
    if rows == TINY_ROWS:
        return max(args.repeat, args.warmup_tiny)
    return args.repeat if rows < 10**8 else args.repeat_large


def rows_of(dataset: str, args: argparse.Namespace) -> list[int]:
    return args.pums_rows if dataset == "pums" and args.pums_rows else args.rows


def progress_line(r: dict[str, Any]) -> str:
    head = f"{r['engine']:<6} {r['dataset']:<9} {fmt_rows(r['rows']):>7} {r['workload']:<15}"
    head += f" {r['impl']:<6}"
    if "skipped" in r:
        return f"{head} {r['skipped']}"
    if "error" in r:
        return f"{head} ERROR {r['error']}"
    jvm = f" jvm {r['jvm_peak_mb']:,.0f} MB" if "jvm_peak_mb" in r else ""
    if "server_peak_mb" in r:
        jvm += f" server {r['server_peak_mb']:,.0f} MB"
    return f"{head} {r['best_s']:9.4f} s  peak {r['peak_mb']:,.0f} MB{jvm}"


# -- the report ------------------------------------------------------------------------------
def fmt_s(s: float) -> str:
    if s < 0.01:
        return f"{s * 1000:.2f} ms"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    return f"{s:.2f} s"


def fmt_time(r: dict[str, Any]) -> str:
    """Best time; a cell with fewer timed runs than asked says how many (``(1 run)``)."""
    if "best_s" not in r:
        return f"error: {r.get('error', '?')}" if r else ""
    text = fmt_s(r["best_s"])
    if r.get("warmup_only"):
        return text + " (1 run, no warm-up)"
    if len(r["times"]) < r["repeat"]:
        text += f" ({len(r['times'])} run{'s' if len(r['times']) > 1 else ''})"
    return text


def fmt_mem(r: dict[str, Any]) -> str:
    if "peak_mb" not in r:
        return ""
    text = f"{r['peak_mb']:,.0f}"
    if r.get("peak_method") != "VmHWM":  # an early ru_maxrss figure: an upper bound
        text = "≤ " + text
    if "jvm_peak_mb" in r:
        text += f" + {r['jvm_peak_mb']:,.0f}"
    if "server_peak_mb" in r:
        text += f" (server {r['server_peak_mb']:,.0f})"
    return text


@functools.cache
def versions() -> str:
    """Engine versions and pinqpy's commit, taken once before the report is first written
    (so that the report itself does not mark the tree dirty)."""
    import duckdb

    parts = [f"Python {platform.python_version()}", f"pandas {pd.__version__}"]
    parts.append(f"DuckDB {duckdb.__version__}")
    try:
        import pyspark

        parts.append(f"Spark {pyspark.__version__}")
    except ImportError:
        pass
    with contextlib.suppress(ImportError):
        import psycopg

        parts.append(f"psycopg {psycopg.__version__}")
    try:
        import polars

        parts.append(f"Polars {polars.__version__}")
    except ImportError:
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", str(HERE), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        parts.append(f"pinqpy at {commit}")
    except OSError:
        pass
    return ", ".join(parts)


def machine() -> str:
    m = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
    gib = int(m.group(1)) / 2**20 if m else 0
    return f"{os.cpu_count()} cores, {gib:.0f} GiB RAM"


def report(results: list[dict[str, Any]], args: argparse.Namespace, command: str) -> str:
    idx = {key_of(r): r for r in results}
    target = args.target

    def pair(engine: str, dataset: str, rows: int, w: str) -> tuple[dict, dict]:
        k = f"{engine}|{dataset}|{rows}|{w}"
        return idx.get(k + "|pinqpy", {}), idx.get(k + "|raw", {})

    def ratio(p: dict, r: dict) -> float | None:
        if "best_s" in p and "best_s" in r:
            return float(p["best_s"] / r["best_s"])
        return None

    version = getattr(args, "postgres_version", None)
    server = f", PostgreSQL {version}" if version else ""
    lines = [
        "# Engine benchmark results",
        "",
        f"`{command}`, {date.today().isoformat()}: {machine()}; {versions()}{server}.",
        "",
        "Times are the best of "
        f"{args.repeat} runs ({args.repeat_large} at 1e8 rows) after at least {args.warmup} "
        f"warm-up runs that take at least {args.warmup_time:g} s in all (at most {MAX_RUNS}; "
        "one for a cell slower than a tenth of the time budget), or "
        f"of more runs for a fast cell (until they take {args.min_time:g} s, at most "
        f"{MAX_RUNS}; on the {TINY_ROWS}-row table {args.warmup_tiny} warm-ups and "
        f"{args.warmup_tiny} runs, on both sides); a Spark cell is the best of "
        f"{args.spark_processes} fresh processes (its peak memory the largest of theirs); "
        "pinqpy's include building the plan, the charge, execution and noise, and the raw "
        "figure is the same exact aggregate hand-written in the engine. Peak memory is the "
        "peak RSS of the measuring process (a fresh one per cell) from the end of loading "
        "the data through the last run, in MB; for Spark, `python + JVM`. The pandas figures "
        "include the DataFrame itself; DuckDB and Spark read parquet files. See README.md for "
        "the method.",
        "",
    ]
    sources = {r["pinqpy_src"] for r in results if "pinqpy_src" in r}
    if len(sources) > 1:
        lines += [
            f"pinqpy's source changed while this ran ({len(sources)} versions were measured), "
            "as it was being edited at the same time; the `pinqpy_src` field of the JSON "
            "results tells which cell ran which.",
            "",
        ]
    loads = [r["load"] for r in results if "load" in r]
    if loads:
        lines += [
            "The 1-minute load average at the end of each measurement (the engine's own "
            f"threads included) had median {statistics.median(loads):.1f} and max "
            f"{max(loads):.1f} on {os.cpu_count()} cores, so single figures are noisy; "
            "ratios compare runs made minutes apart.",
            "",
        ]
    misses: list[str] = []
    for dataset in args.datasets:
        lines += [
            "## Generated data"
            if dataset == "generated"
            else f"## Real PUMS data: the bundled {len(pums_extract()):,}-row extract, repeated",
            "",
            "| engine | rows | workload | pinqpy | raw | ratio | peak MB pinqpy | peak MB raw |",
            "|---|---:|---|---:|---:|---:|---:|---:|",
        ]
        for engine in args.engines:
            for rows in rows_of(dataset, args):
                for w in args.workloads:
                    p, r = pair(engine, dataset, rows, w)
                    if not p and not r:
                        continue
                    label = BY_NAME[w].label
                    cells = [engine, fmt_rows(rows), label]
                    if "skipped" in p:
                        lines.append("| " + " | ".join([*cells, p["skipped"], "", "", "", ""]))
                        continue
                    q = ratio(p, r)
                    flag = ""
                    if q is not None and q > target:
                        flag = " **(over)**"
                        misses.append(
                            f"{engine}, {dataset}, {fmt_rows(rows)} rows, {w}: {q:.2f}x "
                            f"({fmt_s(p['best_s'])} vs {fmt_s(r['best_s'])})"
                        )
                    cells += [
                        fmt_time(p),
                        fmt_time(r),
                        f"{q:.2f}{flag}" if q is not None else "",
                        fmt_mem(p),
                        fmt_mem(r),
                    ]
                    lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    lines += postgres_section(args, pair)
    lines += scaling_section(results, args, pair)
    lines += overhead_section(results, args, pair, ratio)
    lines += targets_section(results, args, misses, pair)
    return "\n".join(lines) + "\n"


def postgres_section(args: argparse.Namespace, pair: Any) -> list:
    """What pinqpy sends PostgreSQL per aggregate, and the server backend's peak memory."""
    if "postgres" not in args.engines:
        return []
    out = [
        "## PostgreSQL: statements, round trips and server memory per aggregate",
        "",
        "Statements and round trips are those of one run of the pinqpy query; server peak MB "
        "is the peak RSS of the backend serving the measuring connection (shared buffers it "
        "touched included; a query's parallel workers are processes of their own, not counted).",
        "",
        "| data | rows | workload | statements | round trips | server MB pinqpy | server MB raw |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for dataset in args.datasets:
        for rows in rows_of(dataset, args):
            for w in args.workloads:
                p, r = pair("postgres", dataset, rows, w)
                if "statements" not in p:
                    continue
                cells = [dataset, fmt_rows(rows), w, str(p["statements"]), str(p["round_trips"])]
                cells += [f"{x.get('server_peak_mb', 0):,.0f}" for x in (p, r)]
                out.append("| " + " | ".join(cells) + " |")
    return [*out, ""]


def scaling_section(results: list[dict[str, Any]], args: argparse.Namespace, pair: Any) -> list:
    every = set(args.rows) | set(args.pums_rows or ())
    rows_list = sorted(n for n in every if n >= 10**5)
    if len(rows_list) < 2:
        return []
    head = " | ".join(fmt_rows(n) for n in rows_list)
    out = [
        "## How time grows with rows",
        "",
        "pinqpy's time (raw in brackets); the last column is the growth of pinqpy's time for "
        f"each 10x rows, from {fmt_rows(rows_list[0])} to the largest size that ran.",
        "",
        f"| engine | data | workload | {head} | x per 10x rows |",
        "|---|---|---|" + "---:|" * (len(rows_list) + 1),
    ]
    for engine in args.engines:
        for dataset in args.datasets:
            sizes = [n for n in rows_list if n in rows_of(dataset, args)]
            if len(sizes) < 2:  # one size says nothing about growth
                continue
            for w in args.workloads:
                cells = [engine, dataset, w]
                ran: list[tuple[int, float]] = []
                for n in rows_list:
                    p, r = pair(engine, dataset, n, w)
                    if "best_s" in p:
                        raw = f" ({fmt_s(r['best_s'])})" if "best_s" in r else ""
                        cells.append(fmt_s(p["best_s"]) + raw)
                        ran.append((n, p["best_s"]))
                    else:
                        cells.append("skipped" if "skipped" in p else "")
                growth = ""
                if len(ran) >= 2:
                    (n0, t0), (n1, t1) = ran[0], ran[-1]
                    growth = f"{(t1 / t0) ** (1 / math.log10(n1 / n0)):.1f}"
                out.append("| " + " | ".join([*cells, growth]) + " |")
    return [*out, ""]


def overhead_section(
    results: list[dict[str, Any]], args: argparse.Namespace, pair: Any, ratio: Any
) -> list:
    if not args.tiny:
        return []
    out = [
        f"## Fixed overhead per query ({TINY_ROWS}-row table)",
        "",
        "| engine | workload | pinqpy | raw | ratio | pinqpy - raw |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for engine in args.engines:
        for w in args.workloads:
            p, r = pair(engine, DATASETS[0], TINY_ROWS, w)
            q = ratio(p, r)
            if q is None:
                continue
            diff = p["best_s"] - r["best_s"]
            sign = "-" if diff < 0 else ""
            out.append(
                f"| {engine} | {w} | {fmt_s(p['best_s'])} | {fmt_s(r['best_s'])} | {q:.2f} | "
                f"{sign}{fmt_s(abs(diff))} |"
            )
    starts = [r["startup_s"] for r in results if "startup_s" in r]
    if starts:
        out += [
            "",
            f"Spark session start-up (not in any figure above): median "
            f"{statistics.median(starts):.1f} s, min {min(starts):.1f} s in the {len(starts)} "
            "processes whose figures are reported (session creation and one first job).",
        ]
    return [*out, ""]


def targets_section(
    results: list[dict[str, Any]], args: argparse.Namespace, misses: list[str], pair: Any
) -> list:
    out = ["## Targets", ""]
    if misses:
        out.append(f"- pinqpy at most {args.target}x the engine's own time: **missed** on:")
        out += [f"  - {m}" for m in misses]
    else:
        out.append(f"- pinqpy at most {args.target}x the engine's own time: met everywhere.")
    if "duckdb" in args.engines and 10**8 in args.rows:
        big = [
            r
            for r in results
            if r["engine"] == "duckdb" and r["rows"] == 10**8 and r["impl"] == "pinqpy"
        ]
        ok = [r for r in big if "best_s" in r]
        peak = max((r["peak_mb"] for r in ok), default=0)
        verdict = "met" if ok and len(ok) == len(big) else "**missed**"
        out.append(
            f"- 1e8 rows on DuckDB: {verdict}: {len(ok)} of {len(big)} pinqpy runs completed, "
            f"largest peak RSS {peak:,.0f} MB."
        )
    if "spark" in args.engines and args.tiny:
        worse = []
        for w in args.workloads:
            p, r = pair("spark", DATASETS[0], TINY_ROWS, w)
            if "best_s" in p and "best_s" in r and p["best_s"] > args.target * r["best_s"]:
                worse.append(f"{w} ({p['best_s'] / r['best_s']:.2f}x)")
        verdict = "met" if not worse else "**missed** on " + ", ".join(worse)
        out.append(
            f"- Spark fixed overhead per query no worse than Spark's own (within "
            f"{args.target}x on a {TINY_ROWS}-row table): {verdict}."
        )
    skipped = sorted(
        {
            f"{r['workload']} on {r['engine']}"
            if (BY_NAME[r["workload"]].skip or {}).get(r["engine"])
            else f"{r['engine']} at {fmt_rows(r['rows'])}"
            for r in results
            if "skipped" in r
        }
    )
    if skipped:
        out.append(f"- Not run: {', '.join(skipped)} (see the tables for why).")
    return [*out, ""]


# -- --check ---------------------------------------------------------------------------------
def check(args: argparse.Namespace) -> int:
    rows = 10_000
    bad = 0
    log = args.data_dir / "workers.log"
    for dataset in args.datasets:
        data = _Data(args, dataset, rows)
        for engine in args.engines:
            spec = {
                "engine": engine,
                "dataset": dataset,
                "rows": rows,
                "impl": "check",
                "workloads": [w for w in args.workloads if engine in BY_NAME[w].raw],
                "data_dir": str(args.data_dir),
                "duckdb_memory_limit": args.duckdb_memory_limit,
                "spark_driver_memory": args.spark_driver_memory,
                "spark_master": args.spark_master,
            }
            res = run_worker(data.ready(spec), args.timeout, log)
            if "error" in res:
                print(f"{engine:<6} {dataset:<9} ERROR {res['error']}")
                bad += 1
                continue
            for w in args.workloads:
                reason = (BY_NAME[w].skip or {}).get(engine)
                if reason:
                    print(f"{engine:<6} {dataset:<9} {w:<16} --  {reason}")
                    continue
                got = res[w]
                if "error" in got:
                    print(f"{engine:<6} {dataset:<9} {w:<16} BAD {got['error']}")
                    bad += 1
                    continue
                p, r = got["pinqpy"], got["raw"]
                if "range" in got:  # random rows kept: both must lie in the possible range
                    lo, hi = got["range"]
                    slack = 1e-9 * max(abs(lo), abs(hi), 1.0)
                    ok = all(lo - slack <= v <= hi + slack for v in (p, r))
                    shown = f"{p:.6g} and raw {r:.6g} within [{lo:.6g}, {hi:.6g}]"
                else:
                    ok = agree(p, r, BY_NAME[w].tol) and (p != [] or w != "unknown_hist")
                    shown = f"{p!r:.60}" if ok else f"{p} != {r}"
                if got.get("unreleased"):
                    shown += f" (keys not released: {got['unreleased']})"
                bad += not ok
                print(f"{engine:<6} {dataset:<9} {w:<16} {'ok ' if ok else 'BAD'} {shown}")
    print(f"{'all agree' if not bad else f'{bad} disagreements'}")
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rows", type=parse_rows, default=[100_000], help="e.g. 1e6,1e7,1e8")
    ap.add_argument(
        "--pums-rows", type=parse_rows, default=None, help="sizes for the PUMS data (--rows)"
    )
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--workloads", default=",".join(w.name for w in WORKLOADS))
    ap.add_argument("--repeat", type=int, default=3, help="timed runs (best is reported)")
    ap.add_argument("--repeat-large", type=int, default=2, help="timed runs at 1e8 rows")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs before timing")
    ap.add_argument(
        "--min-time",
        type=float,
        default=0.5,
        help="seconds of timed runs per cell, at least (more runs for fast cells, up to 50)",
    )
    ap.add_argument(
        "--warmup-time",
        type=float,
        default=8.0,
        help="seconds of untimed runs per cell, at least (more warm-ups, up to 50)",
    )
    ap.add_argument(
        "--warmup-tiny",
        type=int,
        default=150,
        help="untimed runs, and timed runs, on the 100-row table (fixed overhead); the same "
        "count on both sides, since Spark's time there falls for 100 to 150 runs",
    )
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/pinqpy-bench"))
    ap.add_argument("--out", type=Path, default=HERE / "RESULTS.md")
    ap.add_argument("--json", type=Path, default=None, help="raw results (JSON lines)")
    ap.add_argument("--resume", action="store_true", help="reuse results already in --json")
    ap.add_argument(
        "--report-only", action="store_true", help="write --out from --json, measure nothing"
    )
    ap.add_argument("--no-tiny", dest="tiny", action="store_false", help="skip the 100-row run")
    ap.add_argument("--pandas-max-rows", type=parse_rows, default=[10**7])
    ap.add_argument("--spark-max-rows", type=parse_rows, default=[10**8])
    ap.add_argument(
        "--spark-processes",
        type=int,
        default=2,
        help="fresh processes per Spark cell (the best is reported)",
    )
    ap.add_argument("--duckdb-memory-limit", default="12GB")
    ap.add_argument("--duckdb-spill-limit", default="30GB", help="DuckDB's temp directory cap")
    ap.add_argument("--spark-driver-memory", default="8g")
    ap.add_argument(
        "--spark-master",
        default="local[*]",
        help="e.g. 'local-cluster[2,1,1024]': two executor JVMs of one core and 1 GB each",
    )
    ap.add_argument(
        "--time-budget",
        type=float,
        default=120,
        help="stop repeating a measurement once its timed runs took this many seconds",
    )
    ap.add_argument("--timeout", type=float, default=900, help="seconds per measurement")
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure each cell this many times, raw and pinqpy in turn (the best is kept)",
    )
    ap.add_argument("--target", type=float, default=1.3)
    ap.add_argument("--check", action="store_true", help="verify exact answers on 1e4 rows")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--as-command", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        res = worker(json.loads(args.worker))
        print("RESULT " + json.dumps(res), flush=True)
        return 0
    args.engines = [e for e in args.engines.split(",") if e]
    args.datasets = [d for d in args.datasets.split(",") if d]
    args.workloads = [w for w in args.workloads.split(",") if w]
    args.pandas_max_rows = args.pandas_max_rows[0]
    args.spark_max_rows = args.spark_max_rows[0]
    for given, known in [(args.engines, ENGINES), (args.datasets, DATASETS)]:
        if not set(given) <= set(known):
            ap.error(f"choose from {', '.join(known)}")
    if not set(args.workloads) <= set(BY_NAME):
        ap.error(f"workloads: choose from {', '.join(BY_NAME)}")
    with postgres_server(args):
        return run(args)


@contextlib.contextmanager
def postgres_server(args: argparse.Namespace) -> Any:
    """A throwaway PostgreSQL server for the run when it measures the postgres engine."""
    args.postgres_url = None
    if "postgres" not in args.engines or args.report_only:
        yield
        return
    import psycopg

    sys.path.insert(0, str(HERE.parent))
    from tests.postgres_server import running_server

    with running_server() as url:
        args.postgres_url = url
        with psycopg.connect(url) as conn:
            args.postgres_version = conn.execute("SHOW server_version").fetchall()[0][0]
        yield


def run(args: argparse.Namespace) -> int:
    if args.check:
        return check(args)
    args.resume |= args.report_only
    command = ("python benchmarks/bench_engines.py " + " ".join(sys.argv[1:])).strip()
    if args.as_command:  # a report rebuilt from stored results names the measuring command
        command = args.as_command

    def write(results: list[dict[str, Any]]) -> None:
        args.out.write_text(report(results, args, command))

    versions()
    write(run_all(args, write))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
