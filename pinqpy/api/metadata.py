"""What a private frame tells for free: its public metadata (columns, schema, bounds, keys,
engine, privacy unit, stabilities), the explanation of its plan's charges, and the accuracy an
aggregation would have. None of it reads private data or charges a budget.

:class:`FrameMetadata` is a base of :class:`~pinqpy.PrivateFrame`; its members are documented
there.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable
from fractions import Fraction

from pinqpy.accounting.budget import Budget
from pinqpy.api.expressions import ExprLike, unwrap
from pinqpy.api.previews import preview
from pinqpy.errors import PinqError
from pinqpy.expr.types import ColumnType
from pinqpy.pipeline.relation import Relation
from pinqpy.plan.nodes import PlanNode
from pinqpy.plan.stability import INF
from pinqpy.results.accuracy import AccuracyPreview
from pinqpy.sql.explain import Explanation

__all__ = ["FrameMetadata", "stability_value"]


def stability_value(k: Fraction | float) -> int | Fraction | float:
    """A stability as the analyst reads it: ``math.inf`` when unbounded, else an int when
    whole, else a Fraction."""
    if k == INF:
        return math.inf
    k = Fraction(k)
    return int(k) if k.denominator == 1 else k


class FrameMetadata:
    """The public metadata of a private frame, its explanation and its accuracy previews.

    A subclass has ``_rel``, its :class:`~pinqpy.pipeline.relation.Relation`.
    """

    __slots__ = ()

    _rel: Relation

    @property
    def columns(self) -> list[str]:
        """The column names (the schema is public)."""
        return self._rel.columns

    @property
    def schema(self) -> dict[str, ColumnType]:
        """Column name -> type (``int``, ``float``, ``str``, ``bool``, ``datetime``, ``any``)."""
        return dict(self._rel.meta.schema)

    @property
    def bounds(self) -> dict[str, tuple[float, float]]:
        """Declared public bounds that still hold for this frame's columns."""
        return dict(self._rel.meta.bounds)

    @property
    def keys(self) -> dict[str, tuple[Hashable, ...]]:
        """Declared public keys per column."""
        return dict(self._rel.meta.keys)

    @property
    def engine(self) -> str:
        """Where exact aggregates are computed: ``"pandas"``, ``"duckdb"``, ``"spark"`` or
        ``"polars"`` or ``"postgres"``."""
        return self._rel.engine

    @property
    def privacy_unit(self) -> str | None:
        """The column naming each row's owner, while it is still tracked."""
        return self._rel.privacy_unit

    @property
    def stabilities(self) -> dict[Budget, int | Fraction | float]:
        """``{budget: multiplier}`` for every budget the frame draws on.

        The multiplier is how many of this frame's rows one privacy unit of that budget's
        table can change; a query of epsilon on this frame costs that budget at most
        ``epsilon × multiplier``. Over a table whose row count is public (``public_size``)
        neighbours differ in one changed row, one row removed and one added, so the
        multiplier is twice what it would be (2 for the table itself).
        """
        return {b: stability_value(k) for b, k in self._rel.stabilities().items()}

    @property
    def stability(self) -> int | Fraction | float:
        """The multiplier from this frame to its budget (see :attr:`stabilities`)."""
        st = self.stabilities
        if len(st) != 1:
            raise PinqError(
                f"this frame draws on {len(st)} budgets, so it has one stability per budget; "
                "use .stabilities"
            )
        return next(iter(st.values()))

    @property
    def budgets(self) -> list[Budget]:
        return list(self.stabilities)

    def explain(self, epsilon: float | None = None) -> Explanation:
        """Each step of this frame's plan with its stability, the steps that multiply a
        query's charge and why, and (with ``epsilon``) what one query at that epsilon would
        charge each budget. Reads no data and charges nothing; ``print()`` it.

        A query of ``epsilon`` on a frame of stability ``k`` charges ``epsilon × k`` (Laplace
        noise; Gaussian noise and zCDP budgets account ``k`` as group privacy does), so the
        multiplying steps are where a query's cost comes from: a public join whose key
        repeats, a groupby (2), an explode, a bound of ``k`` rows per person. A frame over a
        table whose row count is public says so ("Neighbours: one row changed, n public"):
        its stabilities count a changed row twice (one row removed, one added).

        >>> import pandas as pd, pinqpy as pq
        >>> f = pq.PrivateFrame(pd.DataFrame({"g": [1, 2]}), pq.Budget(1), name="people")
        >>> print(f.groupby("g").agg(n="COUNT(*)").explain(epsilon=0.1))
        GroupBy g: COUNT(*) AS n                                         stability 2
          Scan people                                                    stability 1
        <BLANKLINE>
        Multiplies the charge: groupby g: a changed row alters two groups (stability 1 -> 2)
        A query at epsilon 0.1 charges epsilon 0.1 x stability 2 = Cost(epsilon=0.2) to people
        """
        from pinqpy.accounting.agents import flatten
        from pinqpy.accounting.cost import Cost
        from pinqpy.pipeline.neighbours import changed_row_note, changed_row_reasons
        from pinqpy.plan.describe import StepDescriber, multipliers, stability_text

        rel = self._rel
        describe = StepDescriber()
        lines: list[str] = []

        def tree(node: PlanNode, depth: int) -> None:
            ks = flatten(rel.catalog.lineage(node)).values()
            stab = ", ".join(sorted({stability_text(k) for k in ks}))
            lines.append(f"{'  ' * depth + describe.visit(node):<64} stability {stab}")
            for child in node.children:
                tree(child, depth + 1)

        tree(rel.plan, 0)
        neighbours = changed_row_note(rel)
        if neighbours is not None:
            lines += ["", neighbours]
        reasons = [step.reason for step in multipliers(rel.plan)] + changed_row_reasons(rel)
        lines.append("")
        if reasons:
            lines += [f"Multiplies the charge: {reason}" for reason in reasons]
        else:
            lines.append("No step multiplies the charge.")
        charges: dict[str, object] = {}
        if epsilon is not None:
            eps = Cost(epsilon).epsilon
            for budget, k in rel.stabilities().items():
                name = budget.name or _tables_on(rel, budget) or "budget"
                if k == INF:
                    lines.append(
                        f"A query is refused on {name}: its stability is unbounded "
                        "(bound_contributions first)"
                    )
                    continue
                cost = Cost(eps * k)
                charges[name] = cost
                lines.append(
                    f"A query at epsilon {eps} charges epsilon {eps} x stability "
                    f"{stability_text(k)} = {cost!r} to {name}"
                )
        out = Explanation("\n".join(lines))
        out.charges = charges
        return out

    def accuracy(
        self,
        aggregation: str,
        column: ExprLike | str | Iterable[str] | None = None,
        *,
        epsilon: float,
        level: float = 0.95,
        bounds: tuple[float, float] | None = None,
        delta: float | None = None,
        q: float = 0.5,
        n: float | None = None,
        max_groups: int | None = None,
    ) -> AccuracyPreview:
        """How accurate an aggregation would be at ``epsilon``, without reading data or spending.

        ``aggregation`` is one of ``count``, ``sum``, ``mean``, ``median``, ``quantile``,
        ``variance``, ``stddev``, ``histogram``, ``select_keys``. The error is stated in the
        answer's own units, with the assumption behind it in ``.note`` (see
        :class:`~pinqpy.results.accuracy.AccuracyPreview`):

        * a **mean**'s error depends on the number of rows ``n``: pass ``n=`` (a guess, or a
          public count) for a figure in the column's units (first order, for any mean within
          the bounds). On a frame with a public row count (``public_size=True``) that count is
          used, and the note says so. Without either, the preview says which ``C`` the error
          ``C/n`` has;
        * a **median/quantile**'s error is in rows of rank; with ``n=`` it is also stated in
          values, assuming the values spread evenly over the bounds;
        * **histogram / select_keys** (``column`` the key column or columns, ``delta=`` and
          ``max_groups=`` as for :meth:`select_keys`): the threshold (a key needs about that
          many rows to be released with probability 1/2, ``.threshold``) and the error of the
          released counts. A histogram over public keys is a count per key.

        EXPLAIN shows the same figures for SQL.

        >>> import pandas as pd, pinqpy as pq
        >>> f = pq.PrivateFrame(pd.DataFrame({"age": [30]}), pq.Budget(epsilon=1))
        >>> f.accuracy("count", epsilon=0.1).error  # discrete Laplace(10): an integer bound
        30.0
        >>> round(f.accuracy("mean", "age", epsilon=1, bounds=(0, 100), n=1000).error, 2)
        0.41
        """
        return preview(
            self._rel,
            aggregation,
            unwrap(column),  # type: ignore[arg-type]
            epsilon=epsilon,
            level=level,
            bounds=bounds,
            delta=delta,
            q=q,
            n=n,
            max_groups=max_groups,
            declared_keys=tuple(self.keys),
        )


# -- helpers ---------------------------------------------------------------------------------
def _tables_on(rel: Relation, budget: Budget) -> str:
    """The names of the tables of ``rel`` that draw on ``budget`` (a budget has no name of
    its own unless given one)."""
    from pinqpy.plan.nodes import Source

    names: list[str] = []
    stack = [rel.plan]
    while stack:
        node = stack.pop()
        if isinstance(node, Source) and rel.catalog.root_agent(node.table.agent) is budget:
            names.append(node.table.name)
        stack.extend(node.children)
    return ", ".join(dict.fromkeys(names))
