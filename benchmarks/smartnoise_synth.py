"""SmartNoise's MST on the same cells, for bench_marginals.py --synth: run by an interpreter
that has ``smartnoise-synth``, never pinqpy.

    /tmp/sn-venv/bin/python benchmarks/smartnoise_synth.py SPEC.json

SmartNoise is not a dependency of pinqpy: install it in its own environment
(``python -m venv /tmp/sn-venv && /tmp/sn-venv/bin/pip install smartnoise-synth``). The spec
names a CSV of cell codes (``0..k-1`` per column, as pinqpy numbers its cells), the true
2-way tables (C order), epsilon, delta and the repetitions. Each repetition fits MST at
(epsilon, delta) on the codes as categorical columns, draws as many rows as the data has, and
reports each 2-way table's L1 distance between the synthetic and the true shares of rows,
with the wall and CPU time of the fit and the draw. SmartNoise draws its noise from numpy's
global generator, seeded with the repetition's number.

A caveat on what this measures: smartnoise-synth 1.0.8 requires ``mbi<2``, and mbi 1.1.0's
``synthetic_data`` draws each column given its neighbours in a way that loses the model's
dependence between columns in different cliques (on Adult's ``sex`` by ``race``, with a tree
fitted to exact marginals: the model's table is 0.07 from the truth in L1 of shares, its
synthetic rows 0.23; mbi 2.0's, which pinqpy uses, 0.07). So SmartNoise's figure here is that
of its rows, as a user gets them, not of its model.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np
import pandas as pd


def _shares(df: pd.DataFrame, cols: list[str], sizes: dict) -> np.ndarray:
    idx = [df[c].to_numpy(dtype=np.int64) for c in cols]
    flat = np.ravel_multi_index(idx, [sizes[c] for c in cols])
    counts = np.bincount(flat, minlength=int(np.prod([sizes[c] for c in cols])))
    return counts / max(counts.sum(), 1)


def _one(spec: dict, data: pd.DataFrame, rep: int) -> dict[str, Any]:
    from snsynth import Synthesizer

    np.random.seed(rep)
    wall, cpu = time.perf_counter(), time.process_time()
    synth = Synthesizer.create("mst", epsilon=spec["epsilon"], delta=spec["delta"])
    synth.fit(data, categorical_columns=list(data.columns), preprocessor_eps=0.0)
    rows = synth.sample(len(data))
    took = (time.perf_counter() - wall, time.process_time() - cpu)
    errors = {}
    for name, truth in spec["truth"].items():
        cols = name.split("|")
        t = np.asarray(truth, dtype=float)
        errors[name] = float(np.abs(_shares(rows, cols, spec["sizes"]) - t / t.sum()).sum())
    return {"pairs": errors, "wall": took[0], "cpu": took[1]}


def main(path: str) -> None:
    with open(path) as f:
        spec = json.loads(f.read())
    data = pd.read_csv(spec["csv"])[spec["columns"]].astype(int)
    reps = [_one(spec, data, rep) for rep in range(spec["reps"])]
    print(json.dumps({"reps": reps}))


if __name__ == "__main__":
    main(sys.argv[1])
