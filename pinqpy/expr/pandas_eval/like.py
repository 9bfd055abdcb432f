"""SQL LIKE over text: a pattern classified (equality, prefix, suffix, contains, regex), and a
matcher that runs in linear time for patterns a regex engine could backtrack on."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd


def _like_regex(pattern: str) -> tuple[str, str | None]:
    """Classify a LIKE pattern: ("eq"|"prefix"|"suffix"|"contains", text) or ("regex", re)."""
    pieces: list[tuple[str, str]] = []  # ("lit", text) | ("any", "%") | ("one", "_")
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            pieces.append(("lit", pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            pieces.append(("any", ch))
        elif ch == "_":
            pieces.append(("one", ch))
        else:
            pieces.append(("lit", ch))
        i += 1
    kinds = [k for k, _ in pieces]
    literal = "".join(t for k, t in pieces if k == "lit")
    if "one" not in kinds:
        wild = [i for i, k in enumerate(kinds) if k == "any"]
        n = len(pieces)
        if not wild:
            return "eq", literal
        if wild == [n - 1]:
            return "prefix", literal
        if wild == [0]:
            return "suffix", literal
        if wild == [0, n - 1] and n >= 2:
            return "contains", literal
    regex = "".join(".*" if k == "any" else "." if k == "one" else re.escape(t) for k, t in pieces)
    return "regex", "(?s)" + regex


def _like_pieces(pattern: str) -> list[tuple[re.Pattern[str], int]]:
    """A LIKE pattern split at each ``%``: each piece (literal characters and ``_``) as a
    regex without repetition, and its length in characters."""
    pieces: list[list[str]] = [[]]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            pieces[-1].append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if ch == "%":
            pieces.append([])
        else:
            pieces[-1].append("." if ch == "_" else re.escape(ch))
        i += 1
    return [(re.compile("(?s)" + "".join(p)), len(p)) for p in pieces]


def _like_one(text: str, pieces: list[tuple[re.Pattern[str], int]]) -> bool:
    """Whether ``text`` matches a LIKE pattern, in time linear in ``len(text)`` (times the
    pattern's length): the first piece must match at the start, the last at the end, and
    each middle piece is found leftmost after the previous one (taking the leftmost match
    never loses one). No piece has a quantifier, so no search backtracks."""
    (first, n0), (last, nk) = pieces[0], pieces[-1]
    if len(pieces) == 1:
        return len(text) == n0 and first.match(text) is not None
    if len(text) < sum(n for _, n in pieces):
        return False
    if n0 and first.match(text) is None:
        return False
    pos, end = n0, len(text) - nk
    if nk and last.match(text, end) is None:
        return False
    for piece, n in pieces[1:-1]:
        if n == 0:
            continue
        m = piece.search(text, pos, end)
        if m is None:
            return False
        pos = m.end()
    return True


def _like_match(s: pd.Series, pattern: str) -> pd.Series:
    """LIKE over a text Series that is not Arrow-backed (so would run Python's ``re``)."""
    pieces = _like_pieces(pattern)
    objs = s.to_numpy(dtype=object, na_value=None)
    hit = np.fromiter(
        (isinstance(x, str) and _like_one(x, pieces) for x in objs), dtype=bool, count=len(objs)
    )
    return pd.Series(hit, index=s.index)
