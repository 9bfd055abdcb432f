"""Private-PGM (the ``mbi`` package) behind :class:`~pinqpy.Marginals`: fit one graphical model
to noisy marginals, read tables off it, draw synthetic rows from it.

Everything here is post-processing of released noisy counts: it reads no private data and
costs nothing. ``mbi`` (and JAX, which it runs on) is imported only when a model is fitted,
so ``import pinqpy`` stays light; without the ``synth`` extra the error says what to install.

The model (McKenna, Sheldon & Miklau 2019, "Graphical-model based estimation and inference
for differential privacy") is the distribution, scaled to the minimum-variance estimate of the
total (every measurement's sum, weighted by the inverse of its variance), that minimises
``½·Σ ((marginal - noisy counts)/sd)²`` over the marginal polytope: each measurement weighted
by the inverse of its noise's variance, and every table read off it non-negative and
consistent with the others. It is found by mirror descent, and two choices decide how close
the fit gets (both use released values and public noise scales only):

* **The start** is the independence model of the noisy marginals: each column's shares are
  the inverse-variance weighted mean of its sums in the measurements that hold it (clipped at
  0, plus one row per cell so that their log is finite). Stopped early, mirror descent stays
  near its start; from independence, the usual baseline of a contingency table, that costs
  less than from the uniform table (OpenDP's and mbi's default start), notably on sparse
  tables (Adult) -- ``benchmarks/bench_marginals.py``.
* **The stop.** mbi's default of 1,000 steps is far from the fit on tables with large counts
  and structural zeros (the Eurostat LFS sample: there it leaves the 2-way tables worse than
  the raw noisy counts). Here mirror descent runs until, for :data:`PATIENCE` blocks of 50
  steps in a row, each block lowers the loss by at most ``tol·loss`` with
  ``tol = 1/sqrt(2K)`` (:func:`tolerance`) for ``K`` measured cells, or
  :data:`MAX_ITERATIONS` steps. At the true counts the loss is half a chi-square with ``K``
  degrees of freedom (mean ``K/2``, sd ``sqrt(K/2)``); near that value the rule stops once
  1,000 more steps would lower the loss by less than 10 such standard deviations. Fitting
  the noisy counts closer than that fits their noise: on Adult (sparse, many small cells)
  every 2-way and 3-way table's error rises with more steps past this point, at rho = 0.1 as
  at epsilon = 1, while the stop still comes late enough for the LFS sample, whose tables
  need thousands of steps. The trade-off, measured on the same noisy marginals (paired):
  a tenth of this tolerance (one standard deviation) lowers the LFS sample's mean errors by
  3-15% but raises Adult's by 1-7%, and leaves Adult's at epsilon = 1 above OpenDP's fixed
  1,000 steps from the uniform table on some tables (``benchmarks/bench_marginals.py``).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from pinqpy.errors import PinqError

__all__ = [
    "MAX_ITERATIONS", "PATIENCE", "fit", "one_way_shares", "project", "synthetic_rows", "tolerance",
]

#: The most mirror-descent steps of one fit (the stopping rule ends it sooner).
MAX_ITERATIONS = 10_000
#: Blocks of 50 steps in a row, each below the tolerance, that end a fit (1,000 steps).
PATIENCE = 20


def _mbi() -> Any:
    try:
        with warnings.catch_warnings():
            # mbi warns at import about JAX settings it would prefer; the fit below runs in
            # 64-bit floats whatever the process's JAX default is.
            warnings.simplefilter("ignore")
            import mbi
    except ImportError:
        raise PinqError(
            "Marginals.table() and .sample() estimate a model with Private-PGM: install it "
            "with pip install 'pinqpy[synth]' (the mbi package, which runs on JAX); the "
            "measurements are kept and nothing more is charged"
        ) from None
    return mbi


@contextlib.contextmanager
def _x64() -> Iterator[None]:
    """64-bit JAX floats for this fit only (float32 stalls on counts in the 100,000s)."""
    import jax

    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def fit(
    sizes: dict[str, int],
    measurements: Sequence[tuple[tuple[str, ...], np.ndarray, float]],
    iterations: int = MAX_ITERATIONS,
) -> Any:
    """The model fitted to ``(clique, noisy counts in C order over the clique, noise sd)``
    measurements over a domain of ``sizes`` (column -> number of cells): mirror descent from
    the independence model, stopped by the rule in the module docstring."""
    mbi = _mbi()
    from mbi import estimation

    with _x64():
        domain = mbi.Domain(list(sizes), [sizes[c] for c in sizes])
        loss = [
            mbi.LinearMeasurement(np.asarray(y, dtype=np.float64), tuple(clique), stddev=float(sd))
            for clique, y, sd in measurements
        ]
        cells = sum(int(np.size(y)) for _c, y, _sd in measurements)
        return estimation.MirrorDescent().estimate(
            domain, loss, iters=iterations, warm_start=_independence(mbi, sizes, measurements),
            tol=tolerance(cells), patience=PATIENCE,
        )


def tolerance(cells: int) -> float:
    """The stopping rule's relative tolerance per block of 50 steps for ``cells`` measured
    cells: ``1/sqrt(2·cells)`` (the module docstring says why)."""
    return 1 / math.sqrt(2 * cells)


def one_way_shares(
    sizes: dict[str, int], measurements: Sequence[tuple[tuple[str, ...], np.ndarray, float]]
) -> dict[str, np.ndarray]:
    """Each column's share of the rows, from every measurement that holds it: its sums there,
    weighted by the inverse of their variance (``sd²`` times the cells summed), clipped at 0,
    plus one row per cell (so each share is positive), normalised."""
    sums: dict[str, np.ndarray] = {c: np.zeros(n) for c, n in sizes.items()}
    weights: dict[str, float] = dict.fromkeys(sizes, 0.0)
    for clique, y, sd in measurements:
        table = np.asarray(y, dtype=np.float64).reshape([sizes[c] for c in clique])
        for axis, c in enumerate(clique):
            summed = table.sum(axis=tuple(i for i in range(len(clique)) if i != axis))
            w = 1.0 / (float(sd) ** 2 * (table.size / sizes[c]))
            sums[c] += w * summed
            weights[c] += w
    out = {}
    for c, total in sums.items():
        counts = np.clip(total / weights[c], 0.0, None) + 1.0 if weights[c] else np.ones(sizes[c])
        out[c] = counts / counts.sum()
    return out


def _independence(mbi: Any, sizes: dict[str, int], measurements: Sequence[Any]) -> Any:
    """Potentials of the independence model of :func:`one_way_shares` (their logs)."""
    import jax.numpy as jnp

    domain = mbi.Domain(list(sizes), [sizes[c] for c in sizes])
    shares = one_way_shares(sizes, measurements)
    tables = {(c,): mbi.Factor(domain.project((c,)), jnp.log(shares[c])) for c in sizes}
    return mbi.CliqueVector(domain, list(tables), tables)


def project(model: Any, columns: tuple[str, ...]) -> np.ndarray:
    """The model's table over ``columns``: an array of shape ``(cells of each column)``."""
    with _x64():
        return np.asarray(model.project(columns).datavector(flatten=False), dtype=np.float64)


def total(model: Any) -> float:
    """The model's estimated row count."""
    return float(model.total)


def synthetic_rows(model: Any, n: int, seed: int) -> dict[str, np.ndarray]:
    """``n`` rows drawn from the model (mbi's randomized rounding along its junction tree), as
    cell indices per column. mbi draws from numpy's global generator: it is seeded with
    ``seed`` for the draw and restored afterwards."""
    state = np.random.get_state()
    try:
        np.random.seed(seed)
        with _x64():
            data = model.synthetic_data(n)
        return {str(c): np.asarray(data.to_dict()[c]) for c in model.domain.attributes}
    finally:
        np.random.set_state(state)
