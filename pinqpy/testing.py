"""Test-only hooks: reproducible or switched-off noise.

.. warning::
   **Never use these in production.** A seeded generator is predictable, and :func:`no_noise`
   releases exact values: either one removes every privacy guarantee pinqpy gives. They exist
   so that tests and documentation examples can be reproducible.

The hooks work only behind an explicit switch: the environment variable
``PINQPY_TESTING=1``, set *before* the hook is called (the test suite's ``conftest.py`` sets
it). Without it every hook raises :class:`~pinqpy.PinqError`, so an analyst in a notebook
cannot switch noise off or make it predictable by calling a documented function.
:func:`reset` (back to production behaviour) always works.

Answers released while :func:`no_noise` or :func:`seed` is in force are never cached (in
memory or in a ledger), and no cached answer is served while either is in force: an exact or
predictable answer can never be handed out later as a noisy one.

Both noise hooks are process-wide (they change the one random source every mechanism draws
from) and restore what was there before when used as context managers.

Examples
--------
>>> import numpy as np
>>> from pinqpy import testing
>>> from pinqpy.noise.mechanisms import CountMechanism
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

import os
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

from pinqpy.errors import PinqError
from pinqpy.noise import source as _noise

__all__ = ["SWITCH", "active", "enabled", "engine", "no_noise", "reset", "seed"]

#: The environment variable that must be ``"1"`` for the hooks to work.
SWITCH = "PINQPY_TESTING"


def enabled() -> bool:
    """Whether the test switch is on (``PINQPY_TESTING=1`` in the environment)."""
    return os.environ.get(SWITCH) == "1"


def _require(hook: str) -> None:
    if not enabled():
        raise PinqError(
            f"pinqpy.testing.{hook}() is a test-only hook that removes privacy guarantees; it "
            f"works only when the environment variable {SWITCH}=1 is set (test suites set it, "
            "e.g. in conftest.py); never use it on real releases"
        )


def active() -> bool:
    """Whether a noise hook is in force: noise switched off, or a seeded (predictable) source.

    Answers are neither cached nor served from the cache while this is true.
    """
    return _noise.hooks_active()


class seed:  # lower case: it is used like a function, ``testing.seed(7)``
    """Make all noise reproducible, from numpy's PCG64 seeded with ``value``.

    A plain call (``testing.seed(7)``) seeds the process until :func:`reset`. As a context
    manager (``with testing.seed(7): ...``) the previous source is restored on exit, so a
    seeded block does not leak into later tests.
    """

    def __init__(self, value: int):
        _require("seed")
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
def engine(name: str, connection: object = None) -> Iterator[None]:
    """Inside this block a PrivateFrame made from a pandas DataFrame without ``engine=`` runs
    on ``name`` (``"pandas"``, ``"duckdb"``, ``"spark"``, ``"polars"`` or ``"postgres"``), so
    one test suite can check that every engine gives the same answers and charges. Frames made
    before keep their engine. On ``"postgres"`` the DataFrame is copied into a temporary table
    of ``connection`` (a psycopg connection or connection string: the test server's).

    >>> import pandas as pd, pinqpy as pq
    >>> with pq.testing.engine("duckdb"):
    ...     people = pq.PrivateFrame(pd.DataFrame({"age": [30, 40]}), pq.Budget(1.0))
    >>> people.engine
    'duckdb'
    """
    from pinqpy.engines.registry import set_default_engine
    from pinqpy.engines.wrapping.wrapped import set_default_connection

    _require("engine")
    previous = set_default_engine(name)
    previous_connection = set_default_connection(connection)
    try:
        yield
    finally:
        set_default_engine(previous)
        set_default_connection(previous_connection)


@contextmanager
def no_noise() -> Iterator[None]:
    """Inside this block every mechanism releases its exact value.

    Counts, sums and means are exact (the mean of an empty group is the midpoint of its
    bounds); a quantile is the candidate of best score (the lowest on ties); an argmax is the
    exact argmax (the first candidate on ties). Charges are made as usual; answers are not
    cached.
    """
    _require("no_noise")
    previous = _noise._set_noise_disabled(True)
    try:
        yield
    finally:
        _noise._set_noise_disabled(previous)


def reset() -> None:
    """Back to production behaviour: a fresh secure source, noise on, pandas by default."""
    from pinqpy.engines.registry import set_default_engine

    _noise._set_source(None)
    _noise._set_noise_disabled(False)
    set_default_engine("pandas")
