"""Accuracy benchmarks: how far pinqpy's released values are from the truth.

Run: ``python benchmarks/bench_accuracy.py [--rows 1000000] [--reps 200] [--out table.md]``

At epsilon 1 (the whole query) and delta 1e-6, each workload is released ``--reps`` times,
each time on a fresh budget (so no answer is served from the cache) and with the operating
system's randomness (no seed). The figures are the mean absolute error per released key
(over keys and repetitions), the keys released (mean over repetitions), and the theoretical
optimum where one is known:

* (a) a 50-key histogram whose keys are not public (string keys, about 20,000 rows each): in
  SQL (``SELECT k, COUNT(*) ... GROUP BY k`` with a delta) and in Python
  (``frame.histogram("k", epsilon, delta=...)``), both the one-step release; and, for
  comparison, the two-step release (``select_keys`` at epsilon/2, then a partition count at
  epsilon/2 on the keys it chose). Optimum: the discrete Laplace of scale ``1/epsilon`` on
  each count, ``E|X| = 2q/((1-q)(1+q))``, ``q = e^-epsilon`` (0.851 at epsilon 1): no
  mechanism that releases the counts at all can spend less on them.
* (b) a user-level histogram: 200,000 people with 5 rows each in 3 of the 50 keys (2, 2 and
  1 rows), bounded with ``bound_contributions(max_groups=3, max_rows_per_group=2, by="k")``
  (nothing is dropped, so the error is the noise alone), then ``histogram`` at
  ``epsilon / 6`` per row (stability 6: the whole query costs epsilon). Optimum for that L1
  sensitivity of 6: the discrete Laplace of scale 6, ``E|X| = 5.97``.
* (c) ``count``, ``mean`` and ``median`` of an integer column uniform on 0..99, bounds
  (0, 100): each at the whole epsilon. Optimum for the count: as in (a); the mean and the
  median have no simple optimum (the mean's reference is a Laplace sum with the count
  known, ``(hi - lo)/2 / (n·epsilon)``, which the mean over a public row count,
  ``PrivateFrame(..., public_size=True)``, attains: its whole epsilon goes to the centred sum).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

import pinqpy as pq

EPSILON = 1.0
DELTA = 1e-6
KEYS = np.array([f"key{i:02d}" for i in range(50)], dtype=object)


def discrete_laplace_mae(scale: float) -> float:
    """``E|X|`` for the discrete Laplace of ``scale``: ``2q/((1-q)(1+q))``, ``q = e^{-1/scale}``."""
    q = math.exp(-1.0 / scale)
    return 2 * q / ((1 - q) * (1 + q))


def histogram_data(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"k": KEYS[rng.integers(0, len(KEYS), rows)]})


def user_level_data(rows: int, seed: int = 1) -> pd.DataFrame:
    """``rows / 5`` people, each with rows in 3 distinct keys: 2, 2 and 1 rows."""
    rng = np.random.default_rng(seed)
    people = rows // 5
    first = rng.integers(0, len(KEYS), people)
    steps = rng.integers(1, len(KEYS) // 3, (people, 2))  # distinct: offsets 0 < a < a + b < 50
    second = (first + steps[:, 0]) % len(KEYS)
    third = (second + steps[:, 1]) % len(KEYS)
    codes = np.stack([first, first, second, second, third], axis=1).ravel()
    uid = np.repeat(np.arange(people), 5)
    return pd.DataFrame({"uid": uid, "k": KEYS[codes]})


def numeric_data(rows: int, seed: int = 2) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"x": rng.integers(0, 100, rows)})


@dataclass
class Result:
    name: str
    mae: float
    released: float | None
    optimum: str
    seconds: float


def _per_key(noisy: pd.Series, truth: pd.Series) -> tuple[np.ndarray, int]:
    got = pd.Series(noisy)
    err = np.abs(got.to_numpy(dtype=np.float64) - truth.reindex(got.index).to_numpy(np.float64))
    return err, len(got)


def repeat(
    name: str, reps: int, one: Callable[[], tuple[np.ndarray, int | None]], opt: str
) -> Result:
    errors, released = [], []
    t0 = time.perf_counter()
    for _ in range(reps):
        err, n = one()
        errors.append(err)
        if n is not None:
            released.append(n)
    seconds = time.perf_counter() - t0
    mae = float(np.concatenate(errors).mean())
    mean_released = float(np.mean(released)) if released else None
    result = Result(name, mae, mean_released, opt, seconds)
    shown = "" if mean_released is None else f", keys released {mean_released:.2f}"
    print(f"{name}: mean absolute error {mae:.4g}{shown} ({seconds:.1f} s)", flush=True)
    return result


def run(rows: int, reps: int) -> list[Result]:
    out: list[Result] = []
    hist = histogram_data(rows)
    truth = hist["k"].value_counts()
    opt1 = f"{discrete_laplace_mae(1 / EPSILON):.3f}"

    def sql_histogram() -> tuple[np.ndarray, int]:
        s = pq.Session()
        s.register("t", hist, budget=pq.Budget(epsilon=EPSILON, delta=DELTA))
        res = s.sql("SELECT k, COUNT(*) AS n FROM t GROUP BY k", epsilon=EPSILON, delta=DELTA)
        return _per_key(pd.Series(res["n"].to_numpy(), index=res["k"]), truth)

    def python_histogram() -> tuple[np.ndarray, int]:
        f = pq.PrivateFrame(hist, pq.Budget(epsilon=EPSILON, delta=DELTA))
        return _per_key(f.histogram("k", EPSILON, delta=DELTA), truth)

    def two_step() -> tuple[np.ndarray, int]:
        f = pq.PrivateFrame(hist, pq.Budget(epsilon=EPSILON, delta=DELTA))
        keys = f.select_keys("k", EPSILON / 2, DELTA)
        if not keys:
            return np.zeros(0), 0
        return _per_key(f.partition("k", list(keys)).count(EPSILON / 2), truth)

    out.append(repeat("(a) 50 unknown keys, SQL GROUP BY", reps, sql_histogram, opt1))
    out.append(repeat("(a) 50 unknown keys, Python histogram", reps, python_histogram, opt1))
    out.append(
        repeat(
            "(a) 50 unknown keys, two-step (select_keys + partition count)", reps, two_step, opt1
        )
    )

    users = user_level_data(rows)
    user_truth = users["k"].value_counts()
    g, k = 3, 2

    def user_histogram() -> tuple[np.ndarray, int]:
        f = pq.PrivateFrame(users, pq.Budget(epsilon=EPSILON, delta=DELTA), privacy_unit="uid")
        bounded = f.bound_contributions(max_groups=g, max_rows_per_group=k, by="k")
        per_row = Fraction(EPSILON) / (g * k)
        return _per_key(bounded.histogram("k", per_row, delta=DELTA), user_truth)

    opt_user = f"{discrete_laplace_mae(g * k / EPSILON):.3f}"
    out.append(repeat("(b) user-level, G = 3 keys x k = 2 rows", reps, user_histogram, opt_user))

    num = numeric_data(rows)
    n_true, mean_true, median_true = len(num), float(num["x"].mean()), float(num["x"].median())

    def count() -> tuple[np.ndarray, None]:
        f = pq.PrivateFrame(num, pq.Budget(epsilon=EPSILON))
        return np.array([abs(float(f.count(EPSILON)) - n_true)]), None

    def mean() -> tuple[np.ndarray, None]:
        f = pq.PrivateFrame(num, pq.Budget(epsilon=EPSILON))
        return np.array([abs(float(f.mean("x", EPSILON, (0, 100))) - mean_true)]), None

    def mean_public_size() -> tuple[np.ndarray, None]:
        f = pq.PrivateFrame(num, pq.Budget(epsilon=EPSILON), public_size=True)
        return np.array([abs(float(f.mean("x", EPSILON, (0, 100))) - mean_true)]), None

    def median() -> tuple[np.ndarray, None]:
        f = pq.PrivateFrame(num, pq.Budget(epsilon=EPSILON))
        return np.array([abs(float(f.median("x", EPSILON, (0, 100))) - median_true)]), None

    out.append(repeat("(c) count", reps, count, opt1))
    ref_mean = 50 / (rows * EPSILON)
    out.append(repeat("(c) mean of x in (0, 100)", reps, mean, f"ref. {ref_mean:.2g}"))
    out.append(repeat("(c) mean, row count public", reps, mean_public_size, f"ref. {ref_mean:.2g}"))
    out.append(repeat("(c) median of x in (0, 100)", reps, median, "-"))
    return out


def table(results: list[Result], rows: int, reps: int) -> str:
    lines = [
        f"Accuracy at epsilon {EPSILON:g}, delta {DELTA:g}, {rows:,} rows, {reps} repetitions",
        "",
        "| workload | mean abs. error per key | keys released (mean) | optimum | time |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in results:
        released = "" if r.released is None else f"{r.released:.2f}"
        lines.append(f"| {r.name} | {r.mae:.4g} | {released} | {r.optimum} | {r.seconds:.1f} s |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--out", type=Path, default=None, help="write the markdown table here")
    args = ap.parse_args()
    if args.rows < 1000 or args.reps < 1:
        print("--rows must be at least 1000 and --reps at least 1", file=sys.stderr)
        return 2
    results = run(args.rows, args.reps)
    text = table(results, args.rows, args.reps)
    print()
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
