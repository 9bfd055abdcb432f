"""Releases over the keys of a private frame: noisy counts per key (:meth:`histogram`), the
keys themselves when none are public (:meth:`select_keys`), and marginals over a public domain
(:meth:`marginals`, :meth:`synthesize`). Each charges before it reads; the mechanisms and their
derivations are in :mod:`pinqpy.noise.keyselect`, :mod:`pinqpy.pipeline.marginals` and
:mod:`pinqpy.pipeline.synthesize`.

:class:`KeyedReleases` is a base of :class:`~pinqpy.PrivateFrame`; its members are documented
there.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping

from pinqpy.errors import PinqError, PrivacyError
from pinqpy.pipeline import run
from pinqpy.pipeline.relation import Relation
from pinqpy.results.marginals import Marginals
from pinqpy.results.tables import NoisySeries
from pinqpy.sql.explain import Explanation

__all__ = ["KeyedReleases"]


class KeyedReleases:
    """Histograms, key selection and marginals of a private frame.

    A subclass has ``_rel`` (its :class:`~pinqpy.pipeline.relation.Relation`), its public
    ``keys`` and ``privacy_unit``, ``_wrap`` (a frame over a relation) and ``partition``.
    """

    __slots__ = ()

    _rel: Relation

    def marginals(
        self,
        marginals: Iterable[str | tuple[str, ...]],
        epsilon: float | None = None,
        *,
        delta: float | None = None,
        rho: float | None = None,
        keys: Mapping[str, Iterable[Hashable]] | None = None,
        cuts: Mapping[str, Iterable[float | None]] | None = None,
        explain: bool = False,
    ) -> Marginals | Explanation:
        """Noisy counts of several marginals over a public domain, in one charge: a
        :class:`~pinqpy.Marginals`, from which ``.table(...)`` estimates any table over the
        measured columns (consistent, non-negative) and ``.sample(n)`` draws synthetic rows.

        Each marginal (a tuple of columns) is exactly ``partition(columns, keys).count(...)``
        over every cell of its domain: ``epsilon`` (Laplace) or ``epsilon`` and ``delta``
        (Gaussian) or ``rho`` (discrete Gaussian of variance ``1/(2·rho)``, a zCDP charge) is
        **per marginal**, so ``m`` marginals charge ``m × epsilon × stability`` (``m ×
        stability² × rho``). Each column's cells are public: ``keys={col: [...]}``, the
        declared keys, or ``cuts={col: [20, 40, 60]}`` for numeric columns (intervals closed
        on the left; add ``None`` to the list for a cell of NULLs). A value outside its
        column's cells, and a NULL without a declared cell, is dropped from the marginals
        over that column on every engine. A column with no public domain is refused before
        any charge. ``explain=True`` returns what would be measured and charged, charging
        nothing. See :mod:`pinqpy.pipeline.marginals`.

        >>> import pandas as pd, pinqpy as pq
        >>> df = pd.DataFrame({"age": [23, 35, 47, 71], "sex": [1, 2, 2, 1]})
        >>> people = pq.PrivateFrame(df, pq.Budget(1.0), keys={"sex": [1, 2]})
        >>> m = people.marginals([("age", "sex")], epsilon=0.5, cuts={"age": [30, 60]})
        >>> " | ".join(m.domain["age"])
        '(-inf, 30) | [30, 60) | [60, inf)'
        """
        from pinqpy.api.marginals import measure_marginals

        return measure_marginals(
            self._rel, marginals, epsilon=epsilon, delta=delta, rho=rho, keys=keys,
            cuts=cuts, explain=explain,
        )

    def synthesize(
        self,
        epsilon: float | None = None,
        *,
        columns: Iterable[str],
        rho: float | None = None,
        delta: float | None = None,
        keys: Mapping[str, Iterable[Hashable]] | None = None,
        cuts: Mapping[str, Iterable[float | None]] | None = None,
        max_degree: int = 2,
        explain: bool = False,
    ) -> Marginals | Explanation:
        """Choose and measure marginals for synthetic data (MST): every 1-way marginal of
        ``columns``, then ``d - 1`` pairs chosen privately (a spanning tree of the pairs the
        1-way marginals explain worst), measured; returns a :class:`~pinqpy.Marginals`.

        ``epsilon`` (Laplace) or ``rho`` (zCDP) is the **total**, split in thirds between
        the 1-way marginals, the choices and the chosen pairs (derivation and the scores'
        sensitivity in :mod:`pinqpy.pipeline.synthesize`), and charged times the stability
        in one transaction before any data is read. ``delta`` is a total too, shared by the
        counts: with ``epsilon`` it makes them Gaussian; with ``rho`` it is their (epsilon,
        delta) reading on a budget that is not zCDP. Domains as for :meth:`marginals`.
        ``explain=True`` returns the split and the charge, charging nothing.
        """
        from pinqpy.api.marginals import synthesize

        return synthesize(
            self._rel, columns, epsilon=epsilon, rho=rho, delta=delta, keys=keys, cuts=cuts,
            max_degree=max_degree, explain=explain,
        )

    def select_keys(
        self,
        columns: str | Iterable[str],
        epsilon: float,
        delta: float,
        *,
        max_groups: int | None = None,
    ) -> list[Hashable]:
        """Choose which keys of ``columns`` to release when none are public (noisy thresholding).

        Each key's row count gets discrete Laplace noise of scale ``1/epsilon`` and the keys
        whose noisy count reaches an integer threshold are returned (sorted), so a key that
        one unit alone holds is released with probability at most ``delta``; see
        :mod:`pinqpy.noise.keyselect`. Charges ``epsilon`` times the stability, and ``delta``.
        On a user-level frame, ``max_groups=G`` first limits every person to G distinct keys
        (the count is then of people, and the stability G). Use the keys with
        :meth:`partition`.

        The returned list also carries ``.counts``: the noisy counts that passed the
        threshold, a :class:`~pinqpy.NoisySeries` indexed by key with its accuracy. They are
        the selection's own noise (post-processing, no extra charge); :meth:`histogram`
        returns them directly.

        >>> import pandas as pd, pinqpy as pq
        >>> df = pd.DataFrame({"city": ["Oslo"] * 500 + ["Bergen"] * 300 + ["Hamar"]})
        >>> people = pq.PrivateFrame(df, pq.Budget(epsilon=1, delta=1e-6))
        >>> with pq.testing.seed(3):
        ...     keys = people.select_keys("city", epsilon=0.5, delta=1e-7)
        >>> list(keys), keys.counts.index.tolist()
        (['Bergen', 'Oslo'], ['Bergen', 'Oslo'])
        """
        return run.select_keys(self._rel, columns, epsilon, delta, max_groups)

    def histogram(
        self,
        columns: str | Iterable[str],
        epsilon: float,
        *,
        delta: float | None = None,
        keys: Iterable[Hashable] | None = None,
        max_groups: int | None = None,
    ) -> NoisySeries:
        """A noisy row count per key of ``columns``.

        * **Public keys** (``keys=`` given, or declared for every column): exactly
          ``partition(columns, keys).count(epsilon)``: every listed key, discrete Laplace noise
          of scale ``1/epsilon`` (sensitivity 1 per row), parallel composition, charged
          ``epsilon`` times the stability. ``delta`` is not used (nothing of it is charged).
        * **Unknown keys** (needs ``delta > 0``): the one-step thresholded release of
          :mod:`pinqpy.noise.keyselect`: each key that occurs gets the same discrete Laplace
          noise of scale ``1/epsilon``, and the keys whose noisy count reaches the threshold
          are returned with those noisy counts, sorted by key. A key that one unit alone holds
          (at most G keys of at most k rows per unit) is released with probability at most
          ``delta`` in all; the noisy counts cost what the public-key count costs. Charged
          ``epsilon`` times the stability, and ``delta``: the same epsilon as with public
          keys, with no budget spent on choosing keys separately. On DuckDB and Spark the
          keys below the threshold stay in the engine unless their drawn noise passes
          (:mod:`pinqpy.noise.keyselect`, "Reading the keys"): same distribution, same
          charge, and memory that does not grow with the number of distinct keys.

        ``max_groups=G`` (user-level frames) first keeps at most G distinct keys per person
        and counts people; the stability is then G.

        >>> import pandas as pd, pinqpy as pq
        >>> df = pd.DataFrame({"city": ["Oslo"] * 500 + ["Bergen"] * 300 + ["Hamar"]})
        >>> budget = pq.Budget(epsilon=1, delta=1e-6)
        >>> people = pq.PrivateFrame(df, budget)
        >>> with pq.testing.seed(3):
        ...     h = people.histogram("city", epsilon=1, delta=1e-6)
        >>> h.index.tolist(), budget.spent == pq.Cost(1, 1e-6)
        (['Bergen', 'Oslo'], True)
        """
        try:
            cols = (columns,) if isinstance(columns, str) else tuple(columns)
        except TypeError:
            raise PinqError("histogram takes a column name or a list of column names") from None
        cols = tuple(self._rel.check_columns(cols))
        base = self
        unit = self.privacy_unit
        if max_groups is not None and unit is None:
            raise PrivacyError(
                "max_groups limits each person's keys on a user-level frame; this frame "
                "has no privacy unit (each row is one person already)"
            )
        declared = all(c in self.keys for c in cols)
        if keys is not None or declared:
            if max_groups is not None:
                base = self._wrap(
                    self._rel.distinct(dict.fromkeys([unit, *cols])).bound_contributions(max_groups)
                )
            parts = base.partition(list(cols) if len(cols) > 1 else cols[0], keys)
            return parts.count(epsilon)
        if delta is None or (not isinstance(delta, bool) and delta == 0):
            raise PrivacyError(
                f"histogram of {', '.join(map(repr, cols))}: its keys are not public, and "
                "reading them off the data would reveal who is in it. Pass keys=[...], declare "
                "keys on the frame, or give a delta (delta=1e-6) so that keys are selected "
                "privately"
            )
        selected = run.select_keys(self._rel, cols, epsilon, delta, max_groups, label="histogram")
        return selected.counts
