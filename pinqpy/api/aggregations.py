"""The noisy aggregations every private table has, defined once.

:class:`Aggregations` holds ``count``, ``sum``, ``mean``, ``variance`` (``var``), ``std``,
``median``, ``quantile`` and ``argmax``, with their docstrings. Each method checks its
arguments, prepares the measurement (:mod:`pinqpy.pipeline.prepare`: public parameters only,
nothing charged or read) and hands it to the table's hooks, which charge, read and release:

* a :class:`~pinqpy.PrivateFrame` releases one answer for the whole frame (a
  :class:`~pinqpy.NoisyValue`, or a :class:`~pinqpy.NoisyLabel` for ``argmax``), and its
  public row count, where the curator declared one, may serve (``_whole``);
* a :class:`~pinqpy.Partition` releases one answer per public key (a
  :class:`~pinqpy.NoisySeries`, or a Series of labels), charged once for all parts;
* a remote frame and its partitions (:mod:`pinqpy.remote.client.frame`) forward each of
  :data:`AGGREGATIONS` to the server under the same name, signature and docstring.

A new aggregation is one method here and its name in :data:`AGGREGATIONS`.

``summarize`` and ``accuracy_curve`` are here too, built on the table's ``accuracy`` (so a
remote frame's are answered by its server's ``accuracy``): many previews in one DataFrame,
and one preview across epsilons as a plot (:mod:`pinqpy.api.summaries`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pinqpy.api.expressions import ExprLike, unwrap
from pinqpy.api.habits import need_epsilon
from pinqpy.api.summaries import accuracy_curve, summarize_plans
from pinqpy.pipeline import prepare
from pinqpy.pipeline.relation import Relation

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["AGGREGATIONS", "ALIASES", "FRAME_AGGREGATIONS", "PREVIEWS", "Aggregations"]

#: The aggregations of :class:`Aggregations`: a frame's and a partition's (per key) alike.
AGGREGATIONS = ("count", "sum", "mean", "median", "quantile", "variance", "std", "argmax")
#: Methods every table has that are built on its own ``accuracy`` (a frame's and a
#: partition's, or the server's for a remote frame): not forwarded, nothing charged.
PREVIEWS = ("summarize", "accuracy_curve")
#: Other names of those aggregations (pandas spells the variance ``var``).
ALIASES = {"var": "variance"}
#: A frame's aggregations: the shared ones and those only a whole frame has (its own methods;
#: ``marginals`` and ``synthesize`` release a :class:`~pinqpy.Marginals`).
FRAME_AGGREGATIONS = (
    *AGGREGATIONS, "select_keys", "histogram", "accuracy", "marginals", "synthesize",
)

#: What one aggregation releases: a NoisyValue for a frame, a NoisySeries (by key) for a
#: partition.
Result = TypeVar("Result")
#: What ``argmax`` releases: a NoisyLabel for a frame, a Series of labels for a partition.
Label = TypeVar("Label")


class Aggregations(Generic[Result, Label]):
    """The shared noisy aggregations of a private table (see the module docstring).

    A subclass has ``_rel`` (its :class:`~pinqpy.pipeline.relation.Relation`), says whether
    it is a whole table (``_whole``: a public row count may serve its ``count`` and
    ``mean``), and releases a prepared measurement with ``_release`` (``_choose`` for
    ``argmax``), charging before it reads.
    """

    __slots__ = ()

    _rel: Relation
    _whole: ClassVar[bool]

    def _release(self, prepared: prepare.Prepared) -> Result:
        """Charge, read and release ``prepared`` as this table's answer."""
        raise NotImplementedError

    def _choose(self, prepared: prepare.Prepared) -> Label:
        """Charge, read and release ``prepared`` (an argmax) as this table's chosen label."""
        raise NotImplementedError

    def summarize(
        self,
        *plans: object,
        epsilon: float | None = None,
        delta: float | None = None,
        n: float | None = None,
        level: float = 0.95,
    ) -> pd.DataFrame:
        """An overview of planned measurements, one row each: the query, its mechanism,
        epsilon, delta and (under zCDP) rho, noise scale, expected error and ``level``
        interval half-width in the column's units, and whether a figure needs a row count.
        Reads no data and charges nothing (each row is :meth:`accuracy`'s preview).

        A plan is ``"count"``, ``("mean", "income")``, ``("quantile", "age", {"q": 0.9})``
        or a mapping ``{"aggregation": ..., "column": ..., **options}``; ``epsilon``,
        ``delta`` and ``n`` (a guessed or public row count, for means and quantiles) are
        every plan's defaults. The columns are described in :mod:`pinqpy.results.summary`.
        In a notebook the DataFrame shows as a table.

        >>> import pandas as pd, pinqpy as pq
        >>> f = pq.PrivateFrame(pd.DataFrame({"age": [30, 40]}), pq.Budget(1),
        ...                     bounds={"age": (0, 100)})
        >>> s = f.summarize("count", ("mean", "age"), ("median", "age"), epsilon=0.1, n=1000)
        >>> s[["query", "expected_error", "ci95_half_width", "unit"]].round(2)
                 query  expected_error  ci95_half_width  unit
        0        count            9.98            30.00  rows
        1    mean(age)            1.50             4.11   age
        2  median(age)            6.12             8.11   age
        >>> f.budgets[0].spent
        Cost(epsilon=0)
        """
        return summarize_plans(
            self, plans, epsilon=epsilon, delta=delta, n=n, level=level,
            per_part=not self._whole,
        )  # fmt: skip

    def accuracy_curve(
        self,
        aggregation: str,
        column: ExprLike | None = None,
        *,
        epsilons: Iterable[float],
        level: float = 0.95,
        ax: Any = None,
        **options: Any,
    ) -> Any:
        """A plot (a matplotlib Axes) of the expected error and the ``level`` interval
        half-width of ``aggregation`` against each of ``epsilons``, before spending anything:
        :meth:`accuracy` at each epsilon (``options`` are its: ``n``, ``bounds``, ``q``,
        ``delta``). A mean's error needs ``n=`` (a guessed or public row count); a
        quantile's without one is in ranks. Needs matplotlib (the ``notebook`` extra);
        ``ax`` draws on axes of your own.
        """
        return accuracy_curve(
            self, aggregation, column, epsilons=epsilons, level=level, ax=ax, **options
        )

    def count(self, epsilon: float | None = None, *, delta: float | None = None) -> Result:
        """A noisy row count.

        Sensitivity 1 (adding or removing a row changes the count by 1), so the Laplace
        mechanism adds noise of scale ``1/epsilon``; with ``delta=`` the analytic Gaussian
        mechanism is calibrated to (epsilon, delta). The budget is charged ``epsilon ×
        stability`` (and delta, with group privacy for stability > 1).

        **Public row count.** On a frame whose curator declared its row count public
        (``public_size=True``) and that still has exactly the table's rows (only
        select/assign/rename since), the count is that public number, released exactly
        (``ci`` is ``(n, n)``) and charged nothing: a zero-cost release of a public fact.

        >>> import pandas as pd, pinqpy as pq
        >>> f = pq.PrivateFrame(pd.DataFrame({"x": range(100)}), pq.Budget(epsilon=1))
        >>> with pq.testing.seed(1):
        ...     n = f.count(epsilon=0.5)
        >>> 80 < n < 120
        True
        """
        need_epsilon("count", epsilon)
        return self._release(prepare.prepare_count(self._rel, epsilon, delta, whole=self._whole))

    def sum(
        self,
        column: ExprLike | None = None,
        epsilon: float | None = None,
        bounds: tuple[float, float] | None = None,
        *,
        delta: float | None = None,
    ) -> Result:
        """A noisy sum of ``column`` with every value clamped into ``bounds``.

        NULLs are ignored; ±inf are clamped like any value. Adding or removing a row changes
        the clamped sum by at most ``max(|lo|, |hi|)``: that is the sensitivity the noise is
        scaled to (Laplace scale ``max(|lo|, |hi|)/epsilon``).

        **Public row count.** On the rows of a table whose count is public (only
        select/assign/rename since) neighbours differ in one changed row, which moves the sum
        by at most ``max(hi, 0) - min(lo, 0)``; the frame's stability is 2, and the noise is
        for half of that per row of stability (see
        :class:`pinqpy.noise.mechanisms.SumMechanism`).
        """
        need_epsilon("sum", epsilon, column)
        rel, value = self._rel, unwrap(column)
        return self._release(
            prepare.prepare_sum(rel, value, epsilon, bounds, delta, whole=self._whole)
        )

    def mean(
        self,
        column: ExprLike | None = None,
        epsilon: float | None = None,
        bounds: tuple[float, float] | None = None,
        *,
        delta: float | None = None,
    ) -> Result:
        """A noisy mean of ``column`` clamped into ``bounds``; exactly epsilon-DP.

        Half of epsilon goes to a sum of ``x - mid`` (sensitivity ``(hi - lo)/2``), half to
        the count (sensitivity 1); the mean is ``mid + sum/count`` clamped into the bounds.
        See :class:`pinqpy.noise.mechanisms.MeanMechanism`. It is never NaN, even for no rows.

        **Public row count.** On a frame with a public row count ``n`` (``public_size=True``,
        only select/assign/rename since) the mean is ``noisy_sum(x - c)/n + c`` with ``c`` the
        midpoint of the bounds and all of epsilon on the centred sum. The table's neighbours
        differ in one changed row, which moves the clamped, centred sum by at most
        ``hi - lo``: its noise is for ``(hi - lo)/2`` per row of stability and the frame's
        stability is 2, so the mean costs ``2·epsilon``; dividing by the public constant
        ``n`` and adding ``c`` are post-processing. Its error is Laplace of scale
        ``(hi - lo)/(2·n·epsilon)`` (about a quarter of the two-measurement mean's at the same
        epsilon). NULL values count as ``c`` here (``n``
        counts every row), so on a column with NULLs it is not SQL's AVG over the non-NULL
        values; EXPLAIN and the result's mechanism say so. See
        :class:`pinqpy.noise.mechanisms.PublicSizeMeanMechanism`.
        """
        need_epsilon("mean", epsilon, column)
        rel, value = self._rel, unwrap(column)
        return self._release(
            prepare.prepare_mean(rel, value, epsilon, bounds, delta, whole=self._whole)
        )

    def variance(
        self,
        column: ExprLike | None = None,
        epsilon: float | None = None,
        bounds: tuple[float, float] | None = None,
        *,
        delta: float | None = None,
        ddof: int = 1,
    ) -> Result:
        """A noisy variance of ``column`` clamped into ``bounds``: SQL's ``VARIANCE``.

        ``ddof=1`` (the default, as pandas and SQL's ``VARIANCE``/``VAR_SAMP``) divides the
        squared deviations by ``n - 1``; ``ddof=0`` (``VAR_POP``) by ``n``. The mechanism is
        the one SQL runs (:class:`~pinqpy.noise.mechanisms.VarianceMechanism`): epsilon in
        thirds over a noisy count (sensitivity 1), a sum of ``x - mid`` (sensitivity ``h``,
        the half-width of the bounds) and a sum of ``(x - mid)² - h²/2`` (sensitivity
        ``h²/2``); the variance is post-processing of the three, clipped into ``[0, h²]``
        (times ``n/(n - 1)`` for the sample form). Both forms come from the same three
        measurements, so they charge the same: ``epsilon × stability`` (and delta).
        """
        need_epsilon("variance", epsilon, column)
        prep = prepare.prepare_variance(
            self._rel,
            unwrap(column),
            epsilon,
            bounds,
            delta,
            stddev=False,
            ddof=ddof,
            whole=self._whole,
        )
        return self._release(prep)

    var = variance

    def std(
        self,
        column: ExprLike | None = None,
        epsilon: float | None = None,
        bounds: tuple[float, float] | None = None,
        *,
        delta: float | None = None,
        ddof: int = 1,
    ) -> Result:
        """A noisy standard deviation: the square root of :meth:`variance` (post-processing,
        the same charge), SQL's ``STDDEV`` (``ddof=1``) or ``STDDEV_POP`` (``ddof=0``)."""
        need_epsilon("std", epsilon, column)
        prep = prepare.prepare_variance(
            self._rel,
            unwrap(column),
            epsilon,
            bounds,
            delta,
            stddev=True,
            ddof=ddof,
            whole=self._whole,
        )
        return self._release(prep)

    def median(
        self,
        column: ExprLike | None = None,
        epsilon: float | None = None,
        bounds: tuple[float, float] | None = None,
        *,
        candidates: Iterable[float] | None = None,
        ci: bool = False,
    ) -> Result:
        """A noisy median by the exponential mechanism; see :meth:`quantile`."""
        need_epsilon("median", epsilon, column)
        return self.quantile(column, 0.5, epsilon, bounds, candidates=candidates, ci=ci)

    def quantile(
        self,
        column: ExprLike | None = None,
        q: float = 0.5,
        epsilon: float | None = None,
        bounds: tuple[float, float] | None = None,
        *,
        candidates: Iterable[float] | None = None,
        ci: bool = False,
    ) -> Result:
        """A noisy ``q``-quantile of ``column`` within ``bounds``, exactly epsilon-DP.

        The exponential mechanism picks among public candidate values with utility
        ``-|(1-q)·#{x < c} - q·#{x > c}|``, whose sensitivity is ``max(q, 1-q)``; see
        :class:`pinqpy.noise.mechanisms.QuantileMechanism`. By default the whole epsilon goes
        to that choice and the answer has no value-space interval (its accuracy is stated in
        ranks, and ``ci()`` refuses); ``ci=True`` spends a quarter of epsilon on a noisy
        histogram that gives ``ci()``. With public ``candidates`` no bounds are needed: the
        candidates' least and greatest values are the bounds.
        """
        need_epsilon("quantile", epsilon, column)
        rel = self._rel
        prep = prepare.prepare_quantile(
            rel, unwrap(column), q, epsilon, bounds, candidates, ci, whole=self._whole
        )
        return self._release(prep)

    def argmax(self, column: ExprLike, candidates: Iterable[Hashable], epsilon: float) -> Label:
        """The most frequent of the public ``candidates`` in ``column``, by report-noisy-max.

        Each row adds 1 to at most one candidate's count, and counts only grow when a row is
        added, so selecting with weights ``exp(epsilon·count)`` is exactly epsilon-DP; pinqpy
        samples it by permute-and-flip with exact coins (see
        :class:`pinqpy.noise.mechanisms.ArgmaxMechanism`).
        """
        return self._choose(prepare.prepare_argmax(self._rel, unwrap(column), candidates, epsilon))
