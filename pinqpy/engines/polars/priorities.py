"""Salted row priorities for the Polars engine's truncations, and keeping the lowest per key.

``bound_contributions``, ``bound_degree``, ``bound_groups`` and bounded joins keep, per key, the
``limit`` rows of lowest priority. Stability needs one thing of a priority: it is a function of
the row's own values and a fresh salt, never of other rows or of positions; then which rows one
key keeps does not change when another unit's rows arrive or leave, so the truncations of
neighbouring tables differ only in that unit's rows (for the same salt).

A row's priority is the pair ``(h1, h2)`` of Polars' ``hash`` of the struct of *every* column
of the row (lists and structs included: Polars hashes them by content) under two independent
64-bit seeds drawn when the plan is translated, from :func:`pinqpy.plan.salts.salt_source`:
fresh on every read; under a partition, the partition's keyed stream for the node, so every
read through its parts keeps the same rows. Rows are ranked by ``h1`` and, where it ties,
``h2`` (the pair packed as one 128-bit integer ``h1·2**64 + h2``, whose order is the pair's:
ranking it costs little more than ranking ``h1`` alone, where a struct of the two costs half
as much again). Both are functions of the row and the salt (Polars' hash of a value does not
depend on the frame's chunks or the row's position, and reads ``-0.0`` and ``0.0`` alike, as
they are equal). Rows equal in every value tie for good: they are then interchangeable, so
whichever of them is kept, the truncated table is the same multiset of rows. Distinct rows
tie only if both 64-bit hashes collide (about ``2**-128`` per pair).

Polars' hash is stable within one Polars version only; a priority is never stored, so that
suffices.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import polars as pl

from pinqpy.plan.salts import salt_source

__all__ = ["group_rank", "row_priority"]


def _seed() -> int:
    return int.from_bytes(salt_source().bytes(8), "little")


def _values(columns: Sequence[str], text: Collection[str]) -> list[pl.Expr]:
    """The columns as hashed: a category by its text (its code depends on the other rows)."""
    return [pl.col(c).cast(pl.String) if c in text else pl.col(c) for c in columns]


def row_priority(columns: Sequence[str], text: Collection[str] = ()) -> pl.Expr:
    """A fresh salted priority of each row over ``columns`` (all of the relation's; those in
    ``text`` are categories): two salted hashes as the UInt128 ``h1·2**64 + h2``."""
    row = pl.struct(_values(columns, text))
    h1, h2 = row.hash(_seed()).cast(pl.UInt128), row.hash(_seed()).cast(pl.UInt128)
    return h1 * pl.lit(2**64, dtype=pl.UInt128) + h2


def group_rank(unit: str, by: Sequence[str], text: Collection[str] = ()) -> pl.Expr:
    """Each row's rank (from 1) among the distinct ``by`` groups of its ``unit``, by a fresh
    salted hash of ``(unit, by)`` (ties, which a 64-bit hash makes all but impossible, broken
    by the ``by`` values, so that never more groups are kept): a function of the unit's own
    rows and the salt."""
    group = pl.struct(_values((unit, *by), text)).hash(_seed()).alias("__pinq_g")
    order = pl.struct([group, *_values(by, text)])
    return order.rank("dense").over(unit)
