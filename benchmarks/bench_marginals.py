"""Accuracy of marginals: the L1 error of every 2-way and 3-way table estimated from the
measured 2-way marginals (pq.Marginals.table), against the raw noisy marginals, at zCDP
rho = 0.1 and at epsilon = 1; and of every 2-way marginal of synthesize's synthetic file.

    python benchmarks/bench_marginals.py [--reps 5] [--lfs PATH]

Adult (tests/data/adult.csv: sex, race, income, workclass, age cut at 25/35/45/55/65) and the
Eurostat LFS sample (SEX, AGE cut at 20/40/60, HWUSUAL cut at 1/20/40, ILOSTAT) when its path
is given. Fixed seeds; mean ± sd over the repetitions. The comparison with OpenDP's
contingency_table is not part of this script yet (see the branch's report).
"""

from __future__ import annotations

import argparse
import itertools
import os
import time

os.environ.setdefault("PINQPY_TESTING", "1")

import numpy as np
import pandas as pd

import pinqpy as pq

ADULT = {
    "path": "tests/data/adult.csv",
    "columns": ["sex", "race", "income", "workclass", "age"],
    "cuts": {"age": [25, 35, 45, 55, 65]},
}
LFS = {
    "columns": ["SEX", "AGE", "HWUSUAL", "ILOSTAT"],
    "cuts": {"AGE": [20, 40, 60], "HWUSUAL": [1, 20, 40]},
}


def _true(df: pd.DataFrame, cols: tuple, cuts: dict, keys: dict) -> np.ndarray:
    """The exact table over ``cols``, in the cells' order of pq.Marginals (a measurement with
    noise off, on a throw-away budget: the benchmark's ground truth, never a release)."""
    frame = pq.PrivateFrame(df, pq.Budget(1), keys=keys)
    with pq.testing.no_noise():
        m = frame.marginals([cols], epsilon=1, cuts={c: v for c, v in cuts.items() if c in cols})
    return np.asarray(m.measurements[cols], dtype=float)


def run(df: pd.DataFrame, spec: dict, reps: int) -> None:
    cols, cuts = spec["columns"], spec["cuts"]
    keys = {c: sorted(df[c].dropna().unique().tolist()) for c in cols if c not in cuts}
    pairs = list(itertools.combinations(cols, 2))
    triples = list(itertools.combinations(cols, 3))
    for setting in ({"rho": 0.1 / len(pairs)}, {"epsilon": 1 / len(pairs)}):
        errs: dict[str, list[float]] = {"raw 2-way": [], "consistent 2-way": [],
                                        "consistent 3-way": []}
        times = []
        for rep in range(reps):
            budget = pq.Budget(100, 1e-6, accounting="zcdp")
            frame = pq.PrivateFrame(df, budget, keys=keys)
            with pq.testing.seed(rep):
                m = frame.marginals(pairs, cuts=cuts, **setting)
            t0 = time.perf_counter()
            for name, cliques in (("consistent 2-way", pairs), ("consistent 3-way", triples)):
                errs[name].append(float(np.mean([
                    np.abs(m.table(c)["count"].to_numpy() - _true(df, c, cuts, keys)).sum()
                    for c in cliques
                ])))
            times.append(time.perf_counter() - t0)
            errs["raw 2-way"].append(float(np.mean([
                np.abs(np.asarray(m.measurements[c], dtype=float) - _true(df, c, cuts, keys)).sum()
                for c in pairs
            ])))
        label = ", ".join(f"{k}={v:.4g} per marginal" for k, v in setting.items())
        print(f"{label}: mean L1 per table over {reps} reps (mean ± sd)")
        for name, values in errs.items():
            print(f"  {name:18} {np.mean(values):9.1f} ± {np.std(values):7.1f}")
        print(f"  estimation wall time {np.mean(times):.1f} s (shared machine: rough)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--lfs", default=None)
    args = parser.parse_args()
    print("Adult")
    run(pd.read_csv(ADULT["path"]), ADULT, args.reps)
    if args.lfs:
        print("Eurostat LFS")
        run(pd.read_csv(args.lfs, usecols=LFS["columns"]), LFS, args.reps)


if __name__ == "__main__":
    main()
