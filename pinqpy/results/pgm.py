"""Private-PGM (the ``mbi`` package) behind :class:`~pinqpy.Marginals`: fit one graphical model
to noisy marginals, read tables off it, draw synthetic rows from it.

Everything here is post-processing of released noisy counts: it reads no private data and
costs nothing. ``mbi`` (and JAX, which it runs on) is imported only when a model is fitted,
so ``import pinqpy`` stays light; without the ``synth`` extra the error says what to install.

The model (McKenna, Sheldon & Miklau 2019, "Graphical-model based estimation and inference
for differential privacy") is the distribution, scaled to an estimated total, that minimises
the squared error of its marginals against the noisy measurements, each weighted by the
inverse of its noise's standard deviation, over the marginal polytope (so every table read
off it is non-negative and all tables agree with each other); it is found by mirror descent.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from pinqpy.errors import PinqError

__all__ = ["ITERATIONS", "fit", "project", "synthetic_rows"]

#: Mirror-descent iterations of one fit (mbi's own default for its estimators).
ITERATIONS = 1000


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
    iterations: int = ITERATIONS,
) -> Any:
    """The model fitted to ``(clique, noisy counts in C order over the clique, noise sd)``
    measurements over a domain of ``sizes`` (column -> number of cells)."""
    mbi = _mbi()
    from mbi import estimation

    with _x64():
        domain = mbi.Domain(list(sizes), [sizes[c] for c in sizes])
        loss = [
            mbi.LinearMeasurement(np.asarray(y, dtype=np.float64), tuple(clique), stddev=float(sd))
            for clique, y, sd in measurements
        ]
        return estimation.MirrorDescent().estimate(domain, loss, iters=iterations)


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
