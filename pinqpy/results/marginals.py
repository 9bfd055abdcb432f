"""Marginals: noisy marginal counts over a public domain, and the consistent model read off them.

``frame.marginals(...)``, ``frame.synthesize(...)``, ``Session.marginals(...)`` and SQL's
``SELECT MARGINALS`` return a :class:`Marginals`. It holds only public things: the domain
(each column's cells, from declared keys or public cut points) and the released noisy counts
of each measured marginal, with their accuracy. So it can be pickled, sent over the wire and
kept after the data is gone. Its :meth:`~Marginals.table` and :meth:`~Marginals.sample` are
post-processing (:mod:`pinqpy.results.pgm`): they read no private data and cost nothing.
"""

from __future__ import annotations

import itertools
import math
import secrets
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pinqpy.errors import PinqError
from pinqpy.results import pgm
from pinqpy.results.tables import NoisySeries

__all__ = ["MAX_TABLE_CELLS", "Attribute", "Marginals"]

#: The most cells a table read off the model may have (a dense array of that many floats).
MAX_TABLE_CELLS = 10_000_000


@dataclass(frozen=True)
class Attribute:
    """One column of the domain: its public cells in order, and for a cut column the cut points
    its interval labels were made from (``None`` for a column of declared keys)."""

    name: str
    labels: tuple[Hashable, ...]
    cuts: tuple[float, ...] | None = None


class Marginals:
    """Noisy marginals over a public domain, and tables and synthetic rows estimated from them.

    * :attr:`measurements` -- each measured marginal's released noisy counts, a
      :class:`~pinqpy.NoisySeries` (by cell) whose ``ci()`` is the measurement's own;
    * :meth:`table` -- any table over the measured columns, measured or not, from one
      consistent model: non-negative cells that agree with each other;
    * :meth:`sample` -- synthetic rows drawn from that model.

    The model is Private-PGM's (``pip install 'pinqpy[synth]'``), fitted once, on first use.
    """

    def __init__(
        self,
        attributes: Sequence[Attribute],
        measured: Sequence[tuple[tuple[str, ...], NoisySeries]],
        note: str = "",
    ):
        self._attributes = {a.name: a for a in attributes}
        self._measured = [(tuple(c), s) for c, s in measured]
        for clique, series in self._measured:
            if len(series) != math.prod(len(self._attributes[c].labels) for c in clique):
                raise PinqError("a measured marginal must have one count per cell of its domain")
        self.note = note  # what was charged, in one line
        self._model: Any = None

    # -- public facts -----------------------------------------------------------------------
    @property
    def columns(self) -> list[str]:
        return list(self._attributes)

    @property
    def attributes(self) -> list[Attribute]:
        return list(self._attributes.values())

    @property
    def domain(self) -> dict[str, list[Hashable]]:
        """Each column's cells, in order (keys, or interval labels of a cut column)."""
        return {a.name: list(a.labels) for a in self._attributes.values()}

    @property
    def cliques(self) -> list[tuple[str, ...]]:
        """The measured marginals' columns."""
        return [c for c, _ in self._measured]

    @property
    def measurements(self) -> dict[tuple[str, ...], NoisySeries]:
        """The released noisy counts of each measured marginal, by its columns."""
        return dict(self._measured)

    def __repr__(self) -> str:
        cl = ", ".join("(" + ", ".join(c) + ")" for c in self.cliques)
        return f"Marginals({len(self._measured)} measured: {cl}; columns {self.columns})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_model"] = None  # refitted on demand: the model is JAX arrays
        return state

    # -- the model --------------------------------------------------------------------------
    def _fitted(self) -> Any:
        if self._model is None:
            sizes = {c: len(a.labels) for c, a in self._attributes.items()}
            data = [
                (c, np.asarray(s.values, dtype=np.float64), _noise_sd(s)) for c, s in self._measured
            ]
            self._model = pgm.fit(sizes, data)
        return self._model

    @property
    def total(self) -> float:
        """The model's estimated number of rows (from every measurement, weighted by its
        noise: mbi's minimum-variance estimate)."""
        return pgm.total(self._fitted())

    def _check_columns(self, columns: Iterable[str] | str) -> tuple[str, ...]:
        cols = (columns,) if isinstance(columns, str) else tuple(columns)
        if not cols or len(set(cols)) != len(cols):
            raise PinqError("table() needs one or more distinct columns")
        for c in cols:
            if c not in self._attributes:
                raise PinqError(
                    f"column {c!r} was not measured; the measured columns are {self.columns}"
                )
        cells = math.prod(len(self._attributes[c].labels) for c in cols)
        if cells > MAX_TABLE_CELLS:
            raise PinqError(f"a table over {cols} has {cells:,} cells; at most {MAX_TABLE_CELLS:,}")
        return cols

    def table(self, columns: Iterable[str] | str) -> pd.DataFrame:
        """The estimated counts over ``columns``: one row per cell (every combination of the
        columns' cells, in domain order), the cells' labels and a ``count`` column.

        Counts are non-negative and consistent: every table read off the model sums to the
        same total, and summing a table over a column gives the table without it. A table
        nobody measured is estimated from the measured ones through the model's independence
        structure. What accuracy it can claim is in ``.attrs["accuracy"]`` (see
        :meth:`accuracy`). Post-processing: reads no data, charges nothing.
        """
        cols = self._check_columns(columns)
        counts = pgm.project(self._fitted(), cols).reshape(-1)
        labels = [self._attributes[c].labels for c in cols]
        rows = list(itertools.product(*labels))
        out = pd.DataFrame({c: self._column([r[i] for r in rows], c) for i, c in enumerate(cols)})
        out["count"] = np.maximum(counts, 0.0)
        out.attrs["accuracy"] = self.accuracy(cols)
        return out

    def accuracy(self, columns: Iterable[str] | str) -> str:
        """What the estimate of a table over ``columns`` can claim, honestly.

        * Inside a measured marginal: each cell of the *noisy* measurement has noise of the
          stated law, and a cell of this table sums ``k`` of its cells, so its raw noisy sum
          has noise of standard deviation ``sd·sqrt(k)``. The consistent estimate is a
          projection of all noisy measurements onto tables of one distribution; it is given
          with no interval of its own (the projection usually reduces the error; use
          :attr:`measurements` for the measured counts with their ``ci()``).
        * Not inside any measured marginal: estimated from the model's independence
          assumptions; no interval is claimed.
        """
        cols = self._check_columns(columns)
        for clique, series in self._measured:
            if set(cols) <= set(clique):
                k = math.prod(len(self._attributes[c].labels) for c in clique if c not in cols)
                sd = _noise_sd(series)
                return (
                    f"measured in ({', '.join(clique)}): each noisy cell has "
                    f"{series.accuracy.mechanism} noise (sd {sd:.4g}); a cell here sums {k} "
                    f"of them (raw sd {sd * math.sqrt(k):.4g}); the consistent estimate has "
                    "no interval of its own"
                )
        return (
            "not measured: estimated through the model's independence structure; "
            "no interval is claimed"
        )

    def sample(self, n: int | None = None, *, seed: int | None = None) -> pd.DataFrame:
        """``n`` synthetic rows drawn from the model (default: its estimated total, rounded),
        one column per measured column. A column of declared keys holds those keys; a cut
        column holds its interval labels (an ordered categorical), since the model knows
        nothing finer than the cells. ``seed`` makes the draw reproducible. Post-processing:
        reads no data, charges nothing."""
        model = self._fitted()
        rows = round(pgm.total(model)) if n is None else _rows(n)
        draw = secrets.randbits(32) if seed is None else int(seed)
        if rows == 0:
            return pd.DataFrame({c: self._column([], c) for c in self.columns})
        cells = pgm.synthetic_rows(model, rows, draw)
        out = {}
        for c, a in self._attributes.items():
            idx = np.asarray(cells[c], dtype=np.int64)
            out[c] = self._column([a.labels[i] for i in idx], c)
        return pd.DataFrame(out)

    def _column(self, values: list[Hashable], name: str) -> Any:
        a = self._attributes[name]
        if a.cuts is not None:
            cats = [x for x in a.labels if x is not None]
            return pd.Categorical(values, categories=cats, ordered=True)
        column = pd.Series(values, dtype=object)
        # A NULL key stays None (inference would turn it into NaN and the keys into floats).
        return column if any(x is None for x in a.labels) else column.infer_objects()


def _noise_sd(series: NoisySeries) -> float:
    """The standard deviation of a measurement's per-cell noise (an upper bound for the
    discrete Gaussian, whose variance is at most its sigma²)."""
    noise = series.accuracy.noise  # type: ignore[attr-defined]
    variance = getattr(noise, "variance", None)
    if callable(variance):
        variance = variance()
    if variance is None:
        variance = float(noise.sigma2)
    return max(math.sqrt(float(variance)), 1e-9)


def _rows(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise PinqError("sample(n) needs a whole number of rows, 0 or more")
    return int(n)
