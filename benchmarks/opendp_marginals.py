"""The OpenDP side of bench_marginals.py: run by an interpreter that has OpenDP, never pinqpy.

    /tmp/odp-venv/bin/python benchmarks/opendp_marginals.py SPEC.json

OpenDP is not a dependency of pinqpy: install it in a separate environment
(``python -m venv /tmp/odp-venv && /tmp/odp-venv/bin/pip install 'opendp[mbi,polars]'``) and
pass that interpreter to ``bench_marginals.py --opendp``. The spec (written by
bench_marginals.py) names a CSV of cell codes (``0..k-1`` per column, empty for NULL: OpenDP
always adds a NULL cell last to every column, so pinqpy's side declares one too and both
estimate the same cells), the measured cliques, the tables to estimate with their true
counts (C order, NULL cell last), the privacy settings and the repetitions (one count for
all settings, or one per setting). For each setting
and repetition this measures the cliques with OpenDP's ``contingency_table`` and
``dp.mbi.Fixed`` at the whole budget, and prints one JSON object: per repetition the L1
error of every estimated table and of every raw noisy marginal, and the times (wall and CPU)
of the release (measurement and fit) and of the projections. OpenDP draws its noise from
the operating system, so its repetitions cannot be seeded.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np


def _timed(fn: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _release(dp: Any, data: Any, spec: dict, setting: dict) -> Any:
    cols, sizes = spec["columns"], spec["sizes"]
    loss = dp.loss_of(rho=setting["rho"]) if "rho" in setting else dp.loss_of(
        epsilon=setting["epsilon"]
    )
    context = dp.Context.compositor(
        data=data, privacy_unit=dp.unit_of(contributions=1), privacy_loss=loss,
        split_evenly_over=1,
    )
    queries = [dp.mbi.Count(by=tuple(c)) for c in spec["cliques"]]
    query = context.query().select(cols).contingency_table(
        keys={c: list(range(sizes[c] - 1)) for c in cols}, algorithm=dp.mbi.Fixed(queries=queries)
    )
    return query.release()


def _errors(table: Any, spec: dict) -> tuple[dict, dict]:
    est, raw = {}, {}
    for name, truth in spec["truth"].items():
        cols = tuple(name.split("|"))
        counts = np.asarray(table.project(cols), dtype=float).reshape(-1)
        est[name] = float(np.abs(counts - np.asarray(truth, dtype=float)).sum())
    for m in table.marginals.flatten():
        name = "|".join(m.clique)
        if name in spec["truth"] and len(m.clique) > 1:
            y = np.asarray(m.noisy_measurement, dtype=float)
            raw[name] = float(np.abs(y - np.asarray(spec["truth"][name], dtype=float)).sum())
    return est, raw


def main(path: str) -> None:
    import polars as pl

    started = time.perf_counter()
    import opendp.prelude as dp

    dp.enable_features("contrib")
    import_time = time.perf_counter() - started
    with open(path) as f:
        spec = json.loads(f.read())
    data = pl.read_csv(spec["csv"]).select(
        [pl.col(c).cast(pl.Int64) for c in spec["columns"]]
    ).lazy()
    out: dict[str, Any] = {"import_s": import_time, "settings": []}
    counts = spec["reps"]
    if not isinstance(counts, list):
        counts = [counts] * len(spec["settings"])
    for setting, count in zip(spec["settings"], counts, strict=True):
        reps = []
        for _ in range(count):
            table, wall, cpu = _timed(lambda s=setting: _release(dp, data, spec, s))
            (est, raw), pwall, pcpu = _timed(lambda t=table: _errors(t, spec))
            reps.append({
                "table": est, "raw": raw, "release_wall": wall, "release_cpu": cpu,
                "project_wall": pwall, "project_cpu": pcpu,
            })
        out["settings"].append({"setting": setting, "reps": reps})
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
