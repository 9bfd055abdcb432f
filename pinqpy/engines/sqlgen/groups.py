"""Rows in the groups of listed (public) keys, for the generic SQL executor
(:mod:`pinqpy.engines.sqlgen.executor`).

A query reads a FROM item :attr:`Groups.src` and groups by :attr:`Groups.head`; each result
row starts with the :attr:`Groups.width` columns that name its group, and
:meth:`Groups.positions` turns them into the group's position in the listed keys. Two ways:

* **Filtered, then matched** (when the keys can make few groups): the rows are filtered by
  each key column's listed values (``IN``, and ``IS NULL`` where a key is NULL), which drops
  only rows no key can match, so the groups are few whatever the column's other values
  (grouping every value and filtering the groups afterwards costs time and memory that
  follow the column's number of distinct values: eight times as long at a million distinct
  strings on PostgreSQL). The groups are the exact values of the key columns, each then
  matched to the listed key equal to it in Python (``column_key_rows`` spells the keys as the
  columns do: Python's equality on those values is the engine's on the columns, ``-0.0``
  equal to ``0.0``; a NaN key column value is read as NULL first).
* **Joined**: each row joined to the listed keys written as a ``VALUES`` list on the
  dialect's NULL-safe :meth:`~pinqpy.engines.sqlgen.dialect.Dialect.join_equal`, so each
  row gets its key's position, and no row two. Used when the listed values of the columns
  could make more than :data:`INLINE_GROUPS` groups, and if two groups ever met one key.

Group values never leave :meth:`Groups.positions`: only the aggregates of matched groups do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from pinqpy.engines.base import column_key_rows
from pinqpy.engines.sqlgen.dialect import Dialect
from pinqpy.errors import PinqSyntaxError
from pinqpy.plan.grouping import Grouping

__all__ = ["INLINE_GROUPS", "Groups", "KeyRows", "group_by", "key_rows"]

#: The most groups the listed values of the key columns may make for them to be matched in
#: Python (their product: every combination of listed values could occur).
INLINE_GROUPS = 5000

KeyRows = list[tuple[int, tuple[Any, ...]]]


@dataclass(frozen=True)
class Groups:
    """A FROM item of rows in their groups, and how a result row names its group."""

    src: str
    head: str  # what a query selects first and groups by ("0": one group)
    width: int  # the columns of a result row that name its group
    keys: dict[tuple[Any, ...], int] | None = None  # filtered: group values -> position
    kinds: tuple[str, ...] = ()  # of the key columns

    @property
    def by(self) -> str:
        """The GROUP BY clause (none for one group: a plain aggregate costs no grouping)."""
        return self.group()

    def group(self, *more: str, qual: str = "") -> str:
        """A GROUP BY clause of the group columns (qualified by ``qual``) and ``more``."""
        cols = [] if self.head == "0" else [qual + h for h in self.head.split(", ")]
        cols += more
        return f" GROUP BY {', '.join(cols)}" if cols else ""

    def select(self, qual: str = "") -> str:
        """The group columns as a query over :attr:`src` selects them first."""
        return "0" if self.head == "0" else ", ".join(qual + h for h in self.head.split(", "))

    def positions(self, rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]] | None:
        """Result rows as (position, rest...): the rows of groups no key matches left out;
        None if two groups met one key (the caller then joins)."""
        if self.keys is None:
            return [(int(r[0]), *r[1:]) for r in rows]
        w = self.width
        out: list[tuple[Any, ...]] = []
        seen: set[int] = set()
        for r in rows:
            got = tuple(_group_value(v, k) for v, k in zip(r[:w], self.kinds, strict=True))
            i = self.keys.get(got)
            if i is None:
                continue
            if i in seen:
                return None
            seen.add(i)
            out.append((i, *r[w:]))
        return out


def _group_value(v: object, kind: str) -> object:
    if v is not None and kind == "datetime":
        return pd.Timestamp(v)  # type: ignore[arg-type]
    return v


def key_rows(kinds: Sequence[str], grouping: Grouping) -> KeyRows:
    """The listed keys spelt as columns of ``kinds`` spell them (``column_key_rows``)."""
    return column_key_rows(list(kinds), grouping.keys, len(grouping.columns) == 1)


def group_by(
    d: Dialect,
    literal: Any,
    values: Sequence[str],
    kinds: Sequence[str],
    rows: KeyRows,
    body: tuple[str, str],
    joined: bool = False,
) -> Groups:
    """The rows of ``body`` (its select items and its FROM item, whose rows are ``r``) in
    the groups of ``rows``, the key columns read as ``values`` (SQL over ``r``) of ``kinds``;
    ``literal(value, kind)`` writes a key. ``joined``: always the join (module docstring)."""
    items, src = body[0], _as_r(body[1])
    listed = [{vals[j] for _, vals in rows} for j in range(len(values))]
    product = 1
    for vals in listed:
        product *= len(vals)
    if not joined and product <= INLINE_GROUPS:
        conds = []
        for v, kind, vals in zip(values, kinds, listed, strict=True):
            ors = []
            known = sorted(literal(x, kind) for x in vals if x is not None)
            if known:
                ors.append(f"{v} IN ({', '.join(known)})")
            if None in vals:
                ors.append(f"{v} IS NULL")
            conds.append("(" + " OR ".join(ors) + ")")
        ks = [f"__pinq_k{j}" for j in range(len(values))]
        keyed = ", ".join(f"{v} AS {k}" for v, k in zip(values, ks, strict=True))
        inner = f"SELECT {keyed}{items} FROM {src} WHERE {' AND '.join(conds)}"
        keys = {vals: i for i, vals in rows}
        return Groups(f"({inner}) AS b", ", ".join(ks), len(ks), keys, tuple(kinds))
    tuples = ", ".join(
        "("
        + ", ".join(
            [str(i)]
            + [d.null(k) if v is None else literal(v, k) for v, k in zip(vals, kinds, strict=True)]
        )
        + ")"
        for i, vals in rows
    )
    names = ", ".join(["__pinq_g", *(f"__pinq_k{j}" for j in range(len(values)))])
    on = " AND ".join(
        d.join_equal(v, f"g.__pinq_k{j}", k)
        for j, (v, k) in enumerate(zip(values, kinds, strict=True))
    )
    inner = (
        f"SELECT g.__pinq_g AS __pinq_gi{items} FROM {src} "
        f"JOIN (VALUES {tuples}) AS g({names}) ON {on}"
    )
    return Groups(f"({inner}) AS b", "__pinq_gi", 1)


_ALIASED = re.compile(r"(\(.*\)) AS __pinq_s\d+", re.DOTALL)


def _as_r(src: str) -> str:
    """The FROM item ``src`` named ``r``: a table's name, or the projections of bound values
    (:meth:`~pinqpy.engines.sqlgen.lets.Lets.source`), whose outermost name nothing
    else reads, renamed."""
    m = _ALIASED.fullmatch(src)
    return f"{m[1] if m else src} AS r"


def key_columns(cols: Sequence[Any], grouping: Grouping) -> list[Any]:
    """The columns (``Col``) of a grouping, refused when one is not a column."""
    by_name = {c.name: c for c in cols}
    missing = [c for c in grouping.columns if c not in by_name]
    if missing:
        raise PinqSyntaxError(f"unknown column '{missing[0]}'")
    return [by_name[c] for c in grouping.columns]
