"""Exact sampler benchmarks: a million discrete Laplace and discrete Gaussian draws.

Run: ``python benchmarks/bench_samplers.py [--samples 1000000] [--repeat 5] [--json out.json]``

Every draw takes its bits from :class:`pinqpy.noise.source.SecureSource` (``os.urandom``), as in
production. Each workload reports the best of ``--repeat`` runs, the random bytes drawn per
sample and the number of vectorized rejection rounds, against its target (for a million
samples on a 2-core machine: discrete Laplace < 0.5 s, discrete Gaussian < 2 s). For scale,
the float Laplace and Gaussian of ``pinqpy.noise.source`` (inexact; see
``pinqpy.noise.samplers``) are timed too.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from fractions import Fraction
from pathlib import Path

from pinqpy.noise.samplers.gaussian import _discrete_gaussian_stats
from pinqpy.noise.samplers.laplace import _discrete_laplace_stats
from pinqpy.noise.source import SecureSource

WORKLOADS = [
    ("discrete Laplace, scale 10/3", "laplace", Fraction(10, 3), 0.5),
    ("discrete Laplace, scale 100", "laplace", Fraction(100), 0.5),
    ("discrete Gaussian, sigma^2 = 10", "gaussian", Fraction(10), 2.0),
    ("discrete Gaussian, sigma^2 = 10000", "gaussian", Fraction(10_000), 2.0),
]


def run(samples: int, repeat: int) -> list[dict[str, object]]:
    source = SecureSource()
    _discrete_laplace_stats(3, 1000, source)  # warm-up: imports, first allocations
    results: list[dict[str, object]] = []
    for name, kind, param, target in WORKLOADS:
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            if kind == "laplace":
                x, bits = _discrete_laplace_stats(param, samples, source)
            else:
                x, bits = _discrete_gaussian_stats(param, samples, source)
            best = min(best, time.perf_counter() - t0)
        assert x.size == samples
        row = {
            "workload": name,
            "samples": samples,
            "seconds": round(best, 4),
            "target_seconds": target,
            "ok": best < target,
            "bytes_per_sample": round(bits.nbytes / samples, 2),
            "rounds": bits.rounds,
        }
        results.append(row)
        verdict = "ok" if row["ok"] else "MISSED"
        print(
            f"{name:<36} {best:7.3f} s  (target < {target:.1f} s, {verdict})  "
            f"{row['bytes_per_sample']:5.2f} random bytes/sample, {bits.rounds} rounds"
        )
    for name, call in (
        ("float Laplace (_noise, inexact)", lambda: source.laplace(samples, 10 / 3)),
        ("float Gaussian (_noise, inexact)", lambda: source.gaussian(samples, 10**0.5)),
    ):
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - t0)
        results.append({"workload": name, "samples": samples, "seconds": round(best, 4)})
        print(f"{name:<36} {best:7.3f} s  (reference)")
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", type=Path, default=None, help="also write results here")
    args = ap.parse_args(argv)
    results = run(args.samples, args.repeat)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if all(r.get("ok", True) for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
