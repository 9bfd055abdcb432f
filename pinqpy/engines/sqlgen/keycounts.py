"""Key counts for private key selection, split inside the engine (DuckDB and Spark alike).

Key selection (:mod:`pinqpy.noise.keyselect`) adds independent noise to the row count of
every key that occurs and releases the keys whose noisy count reaches the threshold ``tau``.
Reading every key into Python costs memory in the number of distinct keys (ids, URLs). The
engine therefore returns two things in one query (:func:`split_sql`):

* every *heavy* key, whose count is at least ``heavy_from`` (pinqpy passes ``tau``), with
  its count: at most ``rows / tau`` of them;
* for the *light* keys, only how many keys have each count ``c < heavy_from``: at most
  ``heavy_from - 1`` rows, whatever the data.

Python draws the noise of the ``n_c`` light keys of count ``c`` (in chunks, so its memory
stays bounded) and notes which draws ``i`` pass; a second query (:func:`picked_sql`)
numbers the light keys of each count (``ROW_NUMBER``, any order) and returns those at the
drawn positions. The ``i``-th key of count ``c`` gets the ``i``-th draw: the draws are
independent and identically distributed and the numbering does not depend on them, so each
key's noise is independent with the noise's law, exactly as if every key were read. The
released keys and counts have exactly the distribution of the mechanism that reads them all.

That holds only if the engine's groups are the keys Python releases, one to one. Groups are
taken on the column as pinqpy reads it (NaN as NULL; a timestamp as its wall time), and a
group whose values may read alike with another group's (:attr:`KeyColumn.loose`: text that
is not valid UTF-8, or holds U+FFFD, on Spark) is always returned as heavy, whatever its
count, so Python merges such groups with their exact counts. A column of a type not vetted
here is not split at all (the engine reads every key, as before).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["KeyColumn", "grouped_sql", "picked_sql", "split_sql"]

#: The alias of the j-th key column in the grouped relation, and of its row count.
KEY = "__pinq_k{}"
COUNT = "__pinq_n"


@dataclass(frozen=True)
class KeyColumn:
    """One key column: ``group``, the SQL rows are grouped by (the column as pinqpy reads
    it, up to a one-to-one spelling), ``read``, the SQL that reads the grouped value (``{}``
    its alias), and ``loose``, an SQL test of the grouped value (``{}``) that is true where
    rows of another group may read as the same key (None: never)."""

    group: str
    read: str = "{}"
    loose: str | None = None


def grouped_sql(source: str, cols: Sequence[KeyColumn]) -> str:
    """The keys of ``source`` and their row counts: columns ``__pinq_k0..``, ``__pinq_n``."""
    items = ", ".join(f"{c.group} AS {KEY.format(j)}" for j, c in enumerate(cols))
    by = ", ".join(c.group for c in cols)
    return f"SELECT {items}, COUNT(*) AS {COUNT} FROM {source} GROUP BY {by}"


def _loose(cols: Sequence[KeyColumn]) -> str | None:
    tests = [c.loose.format(KEY.format(j)) for j, c in enumerate(cols) if c.loose is not None]
    return " OR ".join(f"({t})" for t in tests) if tests else None


def _light(cols: Sequence[KeyColumn], heavy_from: int) -> str:
    """The test of a light group: below ``heavy_from`` rows, and not loose."""
    loose = _loose(cols)
    below = f"{COUNT} < {int(heavy_from)}"
    return below if loose is None else f"{below} AND NOT COALESCE({loose}, FALSE)"


def split_sql(grouped: str, cols: Sequence[KeyColumn], heavy_from: int) -> str:
    """One query over :func:`grouped_sql`'s relation ``grouped``: rows ``(part, keys...,
    count, keys_of_count)``. Part 0: a heavy or loose group, its keys and count (and 1).
    Part 1: a count ``c`` of light groups, NULL keys, ``c`` and how many groups have it."""
    light = _light(cols, heavy_from)
    reads = ", ".join(c.read.format(KEY.format(j)) for j, c in enumerate(cols))
    nulls = ", ".join("NULL" for _ in cols)
    heavy = f"SELECT 0 AS __pinq_part, {reads}, {COUNT}, 1 AS __pinq_m FROM {grouped}"
    heavy += f" WHERE NOT ({light})"
    classes = f"SELECT 1 AS __pinq_part, {nulls}, {COUNT}, COUNT(*) AS __pinq_m FROM {grouped}"
    classes += f" WHERE {light} GROUP BY {COUNT}"
    return f"{heavy} UNION ALL {classes}"


def picked_sql(
    grouped: str, cols: Sequence[KeyColumn], heavy_from: int, picks: str
) -> str:
    """The light groups at the drawn positions: ``picks`` is a FROM item of rows
    ``(__pinq_c, __pinq_r)``, a count and a position (from 1) among the light groups of that
    count; rows ``(keys..., count, position)``. Positions are numbered in one pass of this
    query, so they are a one-to-one numbering of each count's groups (the order is the
    engine's: it needs no meaning)."""
    keys = [KEY.format(j) for j in range(len(cols))]
    order = ", ".join(keys)
    numbered = (
        f"SELECT {', '.join(keys)}, {COUNT}, ROW_NUMBER() OVER (PARTITION BY {COUNT} "
        f"ORDER BY {order}) AS __pinq_r FROM {grouped} WHERE {_light(cols, heavy_from)}"
    )
    reads = ", ".join(c.read.format(f"l.{k}") for c, k in zip(cols, keys, strict=True))
    return (
        f"SELECT {reads}, l.{COUNT}, l.__pinq_r FROM ({numbered}) AS l JOIN {picks} AS p "
        f"ON l.{COUNT} = p.__pinq_c AND l.__pinq_r = p.__pinq_r"
    )
