"""Sub-expressions computed once, as columns of projections below the query that uses them."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pinqpy.engines.sqlgen.dialect import Dialect, S

__all__ = ["Lets"]


class Lets:
    """Sub-expressions computed once, as columns of projections below the query using them.

    SQL has no ``let``: a value needed twice (``x`` in ``x BETWEEN a AND b``, a result checked
    for being finite) would otherwise be written, and evaluated, twice -- exponentially often
    when nested (and DuckDB expands NULLIF into a CASE that repeats its argument as well).
    Every translated expression is free of faults (faults give NULL), so computing one on
    every row, not just where a CASE would reach it, is safe.
    """

    def __init__(self, dialect: Dialect) -> None:
        self.d = dialect
        self.items: list[tuple[str, str, int]] = []  # name, SQL, projection level
        q = re.escape(dialect.quote)
        self._ref = re.compile(q + r"__pinq_l(\d+)" + q)

    def bind(self, v: S) -> S:
        if self.d.simple.fullmatch(v.sql):
            return v
        level = 1 + max((self.items[i][2] for i in self._refs(v.sql)), default=0)
        name = f"__pinq_l{len(self.items)}"
        self.items.append((name, v.sql, level))
        return S(self.d.ident(name), v.kind)

    def _refs(self, sql: str) -> list[int]:
        return [int(i) for i in self._ref.findall(sql) if int(i) < len(self.items)]

    def names(self, uses: Sequence[str]) -> list[str]:
        """The bound values that ``uses`` need, directly or through other bound values
        (values bound but no longer used, such as a finite check a sum skipped, are not)."""
        need: set[int] = set()
        stack = [i for sql in uses for i in self._refs(sql)]
        while stack:
            i = stack.pop()
            if i not in need:
                need.add(i)
                stack.extend(self._refs(self.items[i][1]))
        return [self.items[i][0] for i in sorted(need)]

    def source(self, child: str, uses: Sequence[str]) -> str:
        """``child`` with the bound values ``uses`` needs added as columns, as a FROM item."""
        wanted = set(self.names(uses))
        out = child
        top = max((lv for n, _, lv in self.items if n in wanted), default=0)
        for lv in range(1, top + 1):
            cols = ", ".join(
                f"{sql} AS {self.d.ident(n)}"
                for n, sql, level in self.items
                if level == lv and n in wanted
            )
            if cols:
                out = f"(SELECT *, {cols} FROM {out}{self.d.let_fence}) AS __pinq_s{lv}"
        return out

    def hide(self, uses: Sequence[str]) -> str:
        """A star that leaves out the bound columns, for ``SELECT {hide} FROM {source}``
        (DuckDB's ``* EXCLUDE``)."""
        names = self.names(uses)
        return f"* EXCLUDE ({', '.join(map(self.d.ident, names))})" if names else "*"
