"""Test-only hooks: reproducible or switched-off noise.

.. warning::
   **Never use these in production.** A seeded generator is predictable, and :func:`no_noise`
   releases exact values: either one removes every privacy guarantee pinqpy gives. They exist
   so that tests, notebooks and documentation examples can be reproducible.

Both hooks are process-wide (they change the one random source every mechanism draws from)
and restore what was there before when used as context managers.

>>> import numpy as np
>>> from pinqpy import testing
>>> from pinqpy._mechanisms import CountMechanism
>>> with testing.no_noise():
...     float(CountMechanism(0.1).release(np.array([42]))[0][0])
42.0
>>> with testing.seed(7):
...     a = CountMechanism(1.0).release(np.array([10]))[0]
>>> with testing.seed(7):
...     b = CountMechanism(1.0).release(np.array([10]))[0]
>>> bool((a == b).all())
True
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

from . import _noise

__all__ = ["engine", "no_noise", "reset", "seed"]


class seed:  # lower case: it is used like a function, ``testing.seed(7)``
    """Make all noise reproducible, from numpy's PCG64 seeded with ``value``.

    A plain call (``testing.seed(7)``) seeds the process until :func:`reset`. As a context
    manager (``with testing.seed(7): ...``) the previous source is restored on exit, so a
    seeded block does not leak into later tests.
    """

    def __init__(self, value: int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("testing.seed() takes an integer")
        self.value = value
        # Installed now, so the plain-call form works without ``with``.
        self._previous = _noise._set_source(_noise.SeededSource(value))

    def __enter__(self) -> seed:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _noise._set_source(self._previous)

    def __repr__(self) -> str:
        return f"testing.seed({self.value})"


@contextmanager
def engine(name: str) -> Iterator[None]:
    """Inside this block a PrivateFrame made from a pandas DataFrame without ``engine=`` runs
    on ``name`` (``"pandas"``, ``"duckdb"`` or ``"spark"``), so one test suite can check that
    every engine gives the same answers and charges. Frames made before keep their engine.

    >>> import pandas as pd, pinqpy as pq
    >>> with pq.testing.engine("duckdb"):
    ...     people = pq.PrivateFrame(pd.DataFrame({"age": [30, 40]}), pq.Budget(1.0))
    >>> people.engine
    'duckdb'
    """
    from ._engine import set_default_engine

    previous = set_default_engine(name)
    try:
        yield
    finally:
        set_default_engine(previous)


@contextmanager
def no_noise() -> Iterator[None]:
    """Inside this block every mechanism releases its exact value.

    Counts, sums and means are exact (the mean of an empty group is the midpoint of its
    bounds); a quantile is the candidate of best score (the lowest on ties); an argmax is the
    exact argmax (the first candidate on ties). Nothing else changes: charges are made as
    usual.
    """
    previous = _noise._set_noise_disabled(True)
    try:
        yield
    finally:
        _noise._set_noise_disabled(previous)


def reset() -> None:
    """Back to production behaviour: a fresh secure source, noise on, pandas by default."""
    from ._engine import set_default_engine

    _noise._set_source(None)
    _noise._set_noise_disabled(False)
    set_default_engine("pandas")
