"""Did-you-mean: the known name closest to a misspelt one, offered only when it is close.

A suggestion that is not close misleads more than it helps (``nope`` is not a misspelling of
``income``), so a candidate must be within a few edits of what was written, relative to its
length: at most one edit for a name of up to five characters, two up to eight, and a third
of the length beyond. An edit is an insertion, deletion or substitution of one character, or
the swap of two neighbours (the optimal string alignment distance, compared case-folded).
A candidate equal to the name but for case is always offered first.

>>> closest("agee", ["age", "income"]), closest("nope", ["age", "income"])
('age', None)
>>> closest("INCOME", ["age", "income"]), closest("incmoe", ["age", "income"])
('income', 'income')
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["closest", "edit_distance", "max_edits"]


def edit_distance(a: str, b: str) -> int:
    """The optimal string alignment distance: insertions, deletions, substitutions and swaps
    of two neighbouring characters, each one edit.

    >>> edit_distance("agee", "age"), edit_distance("incmoe", "income"), edit_distance("", "ab")
    (1, 1, 2)
    """
    rows = len(a) + 1
    cols = len(b) + 1
    d = [[0] * cols for _ in range(rows)]
    for i in range(rows):
        d[i][0] = i
    for j in range(cols):
        d[0][j] = j
    for i in range(1, rows):
        for j in range(1, cols):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def max_edits(name: str) -> int:
    """How many edits a suggestion for ``name`` may be away: 1 up to five characters, 2 up to
    eight, then a third of the length."""
    n = len(name)
    if n <= 5:
        return 1
    if n <= 8:
        return 2
    return n // 3


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate to offer for ``name``: one equal to it but for case, else the nearest
    within :func:`max_edits` (the first listed among equally near ones), else None."""
    names = [c for c in candidates if isinstance(c, str)]
    folded = name.casefold()
    for c in names:
        if c.casefold() == folded:
            return c
    limit = max_edits(name)
    best: tuple[int, str] | None = None
    for c in names:
        if abs(len(c) - len(name)) > limit:
            continue
        dist = edit_distance(folded, c.casefold())
        if dist <= limit and (best is None or dist < best[0]):
            best = (dist, c)
    return None if best is None else best[1]
