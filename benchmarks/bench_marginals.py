"""Accuracy and time of marginals, against OpenDP's contingency_table on the same marginals.

    python benchmarks/bench_marginals.py [--reps 10] [--lfs PATH] [--opendp PYTHON]
        [--smartnoise PYTHON] [--only adult|lfs|synth] [--cache DIR | --no-cache]

For each table (Adult, ``tests/data/adult.csv``: sex, race, income, workclass, age cut at
25/35/45/55/65; the Eurostat LFS sample, ``--lfs``: SEX, AGE cut at 20/40/60, HWUSUAL cut at
1/20/40, ILOSTAT) and each total budget (zCDP rho = 0.1; epsilon = 1) every 2-way marginal is
measured, the whole budget split evenly over them, and every 2-way and 3-way table is
estimated from them. Printed: the L1 error of each estimated table (mean over the tables of
that order, then mean ± sd over the repetitions), the raw noisy 2-way marginals' error, and
wall and CPU times. pinqpy's repetitions are seeded (``pq.testing.seed(rep)``).

**The same marginals.** OpenDP's contingency_table adds a NULL cell to every column and cuts
its intervals closed on the right; pinqpy's are closed on the left. So the data handed to
OpenDP is each row's pinqpy cell as a code (``0..k-1``, NULL for the NULL cell) and pinqpy's
domain declares the NULL cell too (``None`` among the keys and cuts): both measure and
estimate exactly the same cells, with the same noise per cell (discrete Gaussian of variance
``m/(2·rho)``, or discrete Laplace of scale ``m/epsilon``, for ``m`` marginals). The true
tables come from pinqpy with the noise off and are checked against a count of the codes.

OpenDP runs in its own interpreter (``--opendp``: a virtualenv with ``opendp[mbi,polars]``;
it is not a pinqpy dependency) through ``benchmarks/opendp_marginals.py``. Each OpenDP
repetition is kept in ``--cache`` (``benchmarks/.opendp_cache``), keyed by the data, the tables,
the budget, the repetition's number and the interpreter, so a rerun fits only the repetitions
it has not seen (OpenDP's noise is unseeded, so repetition ``i`` is just the ``i``-th draw).
The synthesize comparison (Adult; ``--only synth`` runs it alone) adds SmartNoise's MST through
``benchmarks/smartnoise_synth.py`` when ``--smartnoise`` names an interpreter that has it.
Keys of the categorical columns are the values found in the file: a benchmark's public
domain, never something pinqpy reads off private data.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("PINQPY_TESTING", "1")

import numpy as np
import pandas as pd

import pinqpy as pq

HERE = Path(__file__).resolve().parent
ADULT = {
    "name": "Adult",
    "path": str(HERE.parent / "tests/data/adult.csv"),
    "columns": ["sex", "race", "income", "workclass", "age"],
    "cuts": {"age": [25, 35, 45, 55, 65]},
}
LFS = {
    "name": "Eurostat LFS",
    "columns": ["SEX", "AGE", "HWUSUAL", "ILOSTAT"],
    "cuts": {"AGE": [20, 40, 60], "HWUSUAL": [1, 20, 40]},
}
SETTINGS = ({"rho": 0.1}, {"epsilon": 1.0})
#: OpenDP's results, one JSON file per (data, tables, budget, repetition, interpreter).
CACHE = HERE / ".opendp_cache"


def domain(df: pd.DataFrame, spec: dict) -> tuple[dict, dict]:
    """Keys and cuts, each with a NULL cell last (OpenDP's domain)."""
    cuts = {c: [*p, None] for c, p in spec["cuts"].items()}
    keys = {
        c: [*sorted(df[c].dropna().unique().tolist()), None]
        for c in spec["columns"] if c not in cuts
    }
    return keys, cuts


def codes(df: pd.DataFrame, spec: dict, keys: dict) -> pd.DataFrame:
    """Each row's pinqpy cell per column as a code, NULL for the NULL cell."""
    out = {}
    for c in spec["columns"]:
        v = df[c]
        if c in spec["cuts"]:
            x = v.to_numpy(dtype=float)
            idx = np.searchsorted(np.asarray(spec["cuts"][c], float), x, side="right")
            code = pd.Series(np.where(np.isnan(x), -1, idx), dtype="Int64")
        else:
            lookup = {k: i for i, k in enumerate(keys[c][:-1])}
            code = pd.Series([lookup.get(k, -1) if pd.notna(k) else -1 for k in v], dtype="Int64")
        out[c] = code.mask(code < 0)
    return pd.DataFrame(out)


def truth(df: pd.DataFrame, keys: dict, cuts: dict, tables: list[tuple]) -> dict:
    """The exact tables, in pinqpy's cell order (noise off, on a throw-away budget: the
    benchmark's ground truth, never a release)."""
    frame = pq.PrivateFrame(df, pq.Budget(10**6), keys=keys)
    with pq.testing.no_noise():
        m = frame.marginals(tables, epsilon=1, cuts=cuts)
    return {t: np.asarray(m.measurements[t], dtype=float) for t in tables}


def check_codes(coded: pd.DataFrame, sizes: dict, exact: dict) -> None:
    """The codes give the same true tables as pinqpy's own binning (the same marginals)."""
    for t, counts in exact.items():
        idx = [coded[c].fillna(sizes[c] - 1).to_numpy(dtype=np.int64) for c in t]
        flat = np.ravel_multi_index(idx, [sizes[c] for c in t])
        found = np.bincount(flat, minlength=int(np.prod([sizes[c] for c in t])))
        assert np.array_equal(found, counts), f"codes disagree with pinqpy's cells on {t}"


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    return time.perf_counter() - t[0], time.process_time() - t[1]


def _l1(values: Any, exact: np.ndarray) -> float:
    return float(np.abs(np.asarray(values, dtype=float) - exact).sum())


def run_pinqpy(df: pd.DataFrame, keys: dict, cuts: dict, setting: dict, reps: int,
               exact: dict) -> list[dict]:
    """Per repetition: each table's L1 error, each raw 2-way marginal's, and the times."""
    pairs = [t for t in exact if len(t) == 2]
    per = {k: v / len(pairs) for k, v in setting.items()}
    out = []
    for rep in range(reps):
        budget = pq.Budget(10**6, 1e-6, accounting="zcdp") if "rho" in per else pq.Budget(10**6)
        frame = pq.PrivateFrame(df, budget, keys=keys)
        t = _clock()
        with pq.testing.seed(rep):
            m = frame.marginals(pairs, cuts=cuts, **per)
        measure = _since(t)
        t = _clock()
        _ = m.total  # fits the model
        fit = _since(t)
        t = _clock()
        err = {x: _l1(m.table(x)["count"], exact[x]) for x in exact}
        project = _since(t)
        raw = {p: _l1(m.measurements[p], exact[p]) for p in pairs}
        out.append({"table": err, "raw": raw, "measure": measure, "fit": fit, "project": project})
    return out


def _opendp_key(python: str, coded: pd.DataFrame, exact: dict, setting: dict, rep: int) -> str:
    """One OpenDP repetition's cache key: the data (a digest of the codes), the measured and
    estimated tables, the budget, the repetition and the interpreter (its OpenDP)."""
    digest = hashlib.sha256(pd.util.hash_pandas_object(coded, index=False).to_numpy().tobytes())
    key = json.dumps({
        "data": digest.hexdigest(), "columns": list(coded.columns),
        "tables": [list(t) for t in exact], "setting": setting, "rep": rep, "python": python,
    }, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def run_opendp(python: str, coded: pd.DataFrame, sizes: dict, exact: dict, reps: int,
               cache: Path | None = None) -> dict:
    """OpenDP's repetitions per setting; with ``cache`` (a folder), each repetition is read
    from ``cache/<key>.json`` when it was run before, and only the missing ones are run."""
    keys = [[_opendp_key(python, coded, exact, s, r) for r in range(reps)] for s in SETTINGS]
    found = [[_read_cached(cache, k) for k in ks] for ks in keys]
    missing = [sum(r is None for r in f) for f in found]
    if any(missing):
        fresh = _call_opendp(python, coded, sizes, exact, missing)
        for f, ks, new in zip(found, keys, fresh["settings"], strict=True):
            todo = iter(new["reps"])
            for i, rep in enumerate(f):
                if rep is None:
                    f[i] = next(todo)
                    if cache is not None:
                        cache.mkdir(parents=True, exist_ok=True)
                        Path(cache, f"{ks[i]}.json").write_text(json.dumps(f[i]))
    return {"settings": [{"setting": s, "reps": f} for s, f in zip(SETTINGS, found, strict=True)]}


def _read_cached(cache: Path | None, key: str) -> dict | None:
    path = Path(cache, f"{key}.json") if cache is not None else None
    return json.loads(path.read_text()) if path is not None and path.exists() else None


def _call_opendp(python: str, coded: pd.DataFrame, sizes: dict, exact: dict,
                 reps: list[int]) -> dict:
    """Runs opendp_marginals.py for ``reps[i]`` repetitions of ``SETTINGS[i]``."""
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp, "codes.csv")
        coded.to_csv(csv, index=False)
        spec = {
            "csv": str(csv), "columns": list(coded.columns), "sizes": sizes, "reps": reps,
            "cliques": [list(t) for t in exact if len(t) == 2],
            "truth": {"|".join(t): v.tolist() for t, v in exact.items()},
            "settings": list(SETTINGS),
        }
        Path(tmp, "spec.json").write_text(json.dumps(spec))
        done = subprocess.run(
            [python, str(HERE / "opendp_marginals.py"), str(Path(tmp, "spec.json"))],
            capture_output=True, text=True, check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"OpenDP's run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ms(values: list[float]) -> str:
    return f"{np.mean(values):.1f} ± {np.std(values, ddof=1) if len(values) > 1 else 0:.1f}"


def _order(reps: list[dict], key: str, order: int) -> list[float]:
    """Each repetition's mean L1 over the tables of one order."""
    return [float(np.mean([v for t, v in r[key].items() if _len(t) == order])) for r in reps]


def _len(t: Any) -> int:
    return len(t.split("|")) if isinstance(t, str) else len(t)


def _worst(ours: list[dict], theirs: list[dict]) -> str:
    """The table where pinqpy's mean error is highest relative to OpenDP's, and every table
    where it is above OpenDP's, with both sides' mean ± sd (is the difference noise?)."""
    ratios, lines = {}, []
    for t in ours[0]["table"]:
        a = [r["table"][t] for r in ours]
        b = [r["table"]["|".join(t)] for r in theirs]
        ratios[t] = np.mean(a) / np.mean(b)
        if ratios[t] > 1:
            lines.append(f"{', '.join(t)}: pinqpy {_ms(a)}, OpenDP {_ms(b)}")
    t = max(ratios, key=ratios.get)
    above = "; ".join(lines) or "none"
    return f"{', '.join(t)}: {ratios[t]:.2f}x\ntables where pinqpy's mean is higher: {above}"


def report(name: str, setting: dict, ours: list[dict], theirs: list[dict] | None) -> None:
    label = ", ".join(f"{k} = {v:g}" for k, v in setting.items())
    print(f"\n### {name}, {label} (total), {len(ours)} repetitions\n")
    print("| tables | pinqpy consistent | raw noisy | OpenDP (Fixed) |")
    print("|---|---:|---:|---:|")
    for order in (2, 3):
        raw = _ms(_order(ours, "raw", 2)) if order == 2 else "not measured"
        odp = _ms(_order(theirs, "table", order)) if theirs else "-"
        print(f"| {order}-way | {_ms(_order(ours, 'table', order))} | {raw} | {odp} |")
    if theirs:
        print(f"| OpenDP's raw 2-way | | {_ms(_order(theirs, 'raw', 2))} | |")
        print(f"\nhighest pinqpy/OpenDP ratio of mean errors, one table: {_worst(ours, theirs)}")
    fit = [r["fit"][0] for r in ours]
    print(f"\npinqpy wall (CPU) seconds: measure {_ms([r['measure'][0] for r in ours])}, "
          f"first fit {fit[0]:.1f} ({ours[0]['fit'][1]:.1f}), later fits "
          f"{_ms(fit[1:] or fit)} ({_ms([r['fit'][1] for r in ours[1:]] or [0])}), "
          f"all tables {_ms([r['project'][0] for r in ours])}")
    if theirs:
        rel = [r["release_wall"] for r in theirs]
        print(f"OpenDP wall (CPU) seconds: first release (measure + fit) {rel[0]:.1f} "
              f"({theirs[0]['release_cpu']:.1f}), later releases {_ms(rel[1:] or rel)} "
              f"({_ms([r['release_cpu'] for r in theirs[1:]] or [0])}), all tables "
              f"{_ms([r['project_wall'] for r in theirs])}")


def bench(df: pd.DataFrame, spec: dict, reps: int, opendp: str | None,
          cache: Path | None = None) -> None:
    df = df[spec["columns"]]
    keys, cuts = domain(df, spec)
    cols = spec["columns"]
    tables = list(itertools.combinations(cols, 2)) + list(itertools.combinations(cols, 3))
    exact = truth(df, keys, cuts, tables)
    sizes = {c: len(keys.get(c) or cuts[c]) + (1 if c in cuts else 0) for c in cols}
    coded = codes(df, spec, keys)
    check_codes(coded, sizes, exact)
    theirs = run_opendp(opendp, coded, sizes, exact, reps, cache) if opendp else None
    for i, setting in enumerate(SETTINGS):
        ours = run_pinqpy(df, keys, cuts, setting, reps, exact)
        report(spec["name"], setting, ours, theirs["settings"][i]["reps"] if theirs else None)
        sys.stdout.flush()


def rho_for(epsilon: float, delta: float) -> float:
    """The largest rho (to 4 digits, below) that pinqpy's zCDP budget of (epsilon, delta)
    accepts: the (epsilon, delta) of SmartNoise's MST, read as pinqpy reads it."""
    from pinqpy.accounting.models import zcdp_epsilon

    lo, hi = 0.0, float(epsilon)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if zcdp_epsilon(mid, delta) <= epsilon else (lo, mid)
    return float(np.floor(lo * 1e4) / 1e4)


def _synthetic_l1(rows: pd.DataFrame, keys: dict, cuts: dict, exact: dict) -> dict:
    """Each 2-way table's L1 distance between the synthetic and the true shares of rows."""
    out = {}
    for t, counts in exact.items():
        idx = []
        for c in t:
            col = rows[c]
            idx.append(col.cat.codes.to_numpy() if c in cuts else
                       col.map({k: i for i, k in enumerate(keys[c])}).to_numpy(dtype=np.int64))
        shape = [len(keys[c]) if c in keys else len(cuts[c]) + 1 for c in t]
        found = np.bincount(np.ravel_multi_index(idx, shape), minlength=int(np.prod(shape)))
        out[t] = float(np.abs(found / found.sum() - counts / counts.sum()).sum())
    return out


def run_synthesize(df: pd.DataFrame, keys: dict, cuts: dict, setting: dict, reps: int,
                   exact: dict) -> list[dict]:
    out = []
    for rep in range(reps):
        budget = pq.Budget(1, 1e-9, accounting="zcdp") if "rho" in setting else pq.Budget(1)
        frame = pq.PrivateFrame(df, budget, keys=keys)
        t = _clock()
        with pq.testing.seed(rep):
            s = frame.synthesize(columns=list(df.columns), cuts=cuts, **setting)
        rows = s.sample(seed=rep)
        took = _since(t)
        out.append({"pairs": _synthetic_l1(rows, keys, cuts, exact), "wall": took[0],
                    "cpu": took[1], "cliques": s.cliques[len(df.columns):]})
    return out


def run_smartnoise(python: str, coded: pd.DataFrame, sizes: dict, exact: dict, reps: int,
                   epsilon: float, delta: float) -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp, "codes.csv")
        coded.to_csv(csv, index=False)
        spec = {
            "csv": str(csv), "columns": list(coded.columns), "sizes": sizes, "reps": reps,
            "truth": {"|".join(t): v.tolist() for t, v in exact.items()},
            "epsilon": epsilon, "delta": delta,
        }
        Path(tmp, "spec.json").write_text(json.dumps(spec))
        done = subprocess.run(
            [python, str(HERE / "smartnoise_synth.py"), str(Path(tmp, "spec.json"))],
            capture_output=True, text=True, check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"SmartNoise's run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["reps"]


def synth_bench(df: pd.DataFrame, spec: dict, reps: int, smartnoise: str | None) -> None:
    """synthesize (MST) against SmartNoise's MST: every 2-way table of the synthetic rows."""
    df = df[spec["columns"]]
    cuts = spec["cuts"]
    keys = {c: sorted(df[c].dropna().unique().tolist()) for c in df.columns if c not in cuts}
    pairs = list(itertools.combinations(df.columns, 2))
    exact = truth(df, keys, cuts, pairs)
    delta = 1e-9  # SmartNoise MST's default
    rho = rho_for(1.0, delta)
    print(f"\n### synthesize, {spec['name']}: mean over the {len(pairs)} 2-way tables of the L1 "
          f"distance between synthetic and true shares, {reps} repetitions\n")
    print("| synthesizer | privacy | L1 (mean ± sd) | wall s | CPU s |")
    print("|---|---|---:|---:|---:|")
    ours = [("epsilon = 1 (pure)", {"epsilon": 1}), (f"rho = {rho:g}: (1, 1e-9)", {"rho": rho})]
    rows = [("pinqpy synthesize", privacy, run_synthesize(df, keys, cuts, setting, reps, exact))
            for privacy, setting in ours]
    if smartnoise:
        coded = codes(df, spec, {c: [*k, None] for c, k in keys.items()})
        sizes = {c: len(keys[c]) if c in keys else len(cuts[c]) + 1 for c in df.columns}
        theirs = run_smartnoise(smartnoise, coded, sizes, exact, reps, 1.0, delta)
        rows.append(("SmartNoise MST", "(1, 1e-9)", theirs))
    for name, privacy, res in rows:
        errs = [float(np.mean(list(r["pairs"].values()))) for r in res]
        print(f"| {name} | {privacy} | {np.mean(errs):.3f} ± {np.std(errs, ddof=1):.3f} | "
              f"{np.mean([r['wall'] for r in res]):.1f} | {np.mean([r['cpu'] for r in res]):.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--lfs", default=str(HERE.parent / "tests/data/eurostat_lfs_fr_4cols.csv"))
    parser.add_argument("--opendp", default=None, help="a Python interpreter with OpenDP")
    parser.add_argument("--only", choices=["adult", "lfs", "synth"], default=None)
    parser.add_argument("--smartnoise", default=None, help="a Python with smartnoise-synth")
    parser.add_argument("--cache", default=str(CACHE),
                        help="folder of OpenDP's results, one file per repetition")
    parser.add_argument("--no-cache", action="store_true", help="refit OpenDP every time")
    args = parser.parse_args()
    cache = None if args.no_cache else Path(args.cache)
    if args.only in (None, "synth"):
        synth_bench(pd.read_csv(ADULT["path"]), ADULT, args.reps, args.smartnoise)
    if args.only == "synth":
        return
    if args.only in (None, "adult"):
        bench(pd.read_csv(ADULT["path"]), ADULT, args.reps, args.opendp, cache)
    if args.lfs and args.only in (None, "lfs"):
        bench(pd.read_csv(args.lfs, usecols=LFS["columns"]), LFS, args.reps, args.opendp, cache)


if __name__ == "__main__":
    main()
