"""Scopes and name resolution: which column, table or output a written name means.

Takes a :class:`Scope` (what a compiled FROM clause makes visible: the columns of each alias,
the schema an unaliased table was written with) and a name or an expression as the query
wrote it; returns the frame column it names, or the expression with every column reference
replaced by the frame column. Unquoted names match ignoring case (PostgreSQL and BigQuery
users write names in any case); an exact match wins, and a tie is ambiguous.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import pandas as pd

from pinqpy.core.names import closest
from pinqpy.errors import PinqSyntaxError
from pinqpy.expr.ast import MAX_DEPTH, Column, Expr, Literal, Pos, contains_aggregate, depth
from pinqpy.expr.check import read_untyped_literals
from pinqpy.pipeline.relation import Relation
from pinqpy.sql import ast as q
from pinqpy.sql.compiler.context import Context

__all__ = [
    "Scope",
    "alias_named",
    "alias_of",
    "column_path",
    "group_keys",
    "lookup",
    "lookup_name",
    "output_name",
    "resolve",
    "resolve_table",
    "try_lookup",
]


@dataclass(frozen=True, eq=False)
class Scope:
    """A compiled FROM clause: a private frame (or a public table) and how names resolve."""

    frame: Relation | None
    public: pd.DataFrame | None = None
    # alias (None for unaliased subqueries) -> {visible column: frame column}
    aliases: Mapping[str | None, Mapping[str, str]] = field(default_factory=dict)
    # frame column -> (public table, its column): public keys for GROUP BY, found on demand
    public_values: Mapping[str, tuple[pd.DataFrame, str]] = field(default_factory=dict)
    describe: str = ""
    # alias -> the schema an unaliased FROM table was written with (FROM census.pums):
    # what a column's schema.table.col qualifier is checked against
    schemas: Mapping[str | None, tuple[str, ...]] = field(default_factory=dict)


# -- matching written names ---------------------------------------------------------------
def pick(written: str, quoted: bool, names: Iterable[str]) -> list[str]:
    """The names a written name matches: itself if present, else (unquoted only) every name
    equal to it ignoring case (PostgreSQL and BigQuery users write names in any case).

    >>> pick("AGE", False, ["age", "sex"]), pick("AGE", True, ["age"])
    (['age'], [])
    >>> pick("a", False, ["a", "A"]), pick("Age", False, ["age", "AGE"])
    (['a'], ['age', 'AGE'])
    """
    names = list(dict.fromkeys(names))
    if written in names:
        return [written]
    if quoted:
        return []
    folded = written.casefold()
    return [n for n in names if n.casefold() == folded]


def _part_matches(written: tuple[str, bool], name: str) -> int:
    """2 for an exact match, 1 for a match ignoring case (unquoted only), 0 for none."""
    if written[0] == name:
        return 2
    return 1 if not written[1] and written[0].casefold() == name.casefold() else 0


def aligned(written: q.Path, parts: tuple[str, ...]) -> int | None:
    """How many parts match when both are aligned from the right, as far as both go (exact
    ones counted twice), or None if one of them does not match."""
    score = 0
    for w, name in zip(reversed(written), reversed(parts), strict=False):
        hit = _part_matches(w, name)
        if not hit:
            return None
        score += hit
    return score


def resolve_table(names: Iterable[str], path: q.Path) -> list[str]:
    """The registered names a written table name (``pums``, ``PUMS.PUMS``, ``dataset.t``)
    resolves to: one name, none (unknown) or several (ambiguous).

    A registered name is matched part by part from the right (``census.pums`` has the parts
    ``census`` and ``pums``) as far as both go, unquoted parts ignoring case; so ``pums``
    matches ``x.pums`` and ``PUMS.PUMS``, and ``census.pums`` matches ``pums``. The full
    dotted name as registered wins, then a name with as many parts as written, then the
    most parts matched exactly (``pums`` over ``PUMS`` for ``pums``); a tie is ambiguous.

    >>> resolve_table(["pums", "visits"], (("PUMS", False), ("PUMS", False)))
    ['pums']
    >>> resolve_table(["a.t", "b.t"], (("t", False),))
    ['a.t', 'b.t']
    """
    joined = ".".join(part for part, _ in path)
    best: tuple[int, int, int] | None = None
    found: list[str] = []
    for name in dict.fromkeys(names):
        if name == joined:
            rank: tuple[int, int, int] = (1, 1, 0)
        else:
            parts = tuple(name.split("."))
            score = aligned(path, parts)
            if score is None:
                continue
            rank = (0, int(len(parts) == len(path)), score)
        if best is None or rank > best:
            best, found = rank, [name]
        elif rank == best:
            found.append(name)
    return found


def close_name(name: str, names: Iterable[str]) -> str | None:
    """The name most like ``name``: one equal to it ignoring case first (a quoted name that
    is matched exactly), else the closest spelling; for the last part of a dotted registered
    name too (``pums`` of ``census.pums``)."""
    names = list(names)
    folded = name.casefold()
    for n in names:
        if n.casefold() == folded or n.rsplit(".", 1)[-1].casefold() == folded:
            return n
    return closest(name, names)


def column_path(c: Column) -> q.Path:
    """How a column reference was written; a Column built in Python is matched exactly."""
    if c.path:
        return c.path
    if c.table is None:
        return ((c.name, True),)
    return ((c.table, True), (c.name, True))


# -- columns of a scope -------------------------------------------------------------------
def try_lookup(ctx: Context, scope: Scope, c: Column) -> str | None:
    """The frame column a reference names, or None if it names none (or several)."""
    try:
        return lookup(ctx, scope, c)
    except PinqSyntaxError:
        return None


def lookup(ctx: Context, scope: Scope, c: Column, pos: Pos | None = None) -> str:
    """The frame column a reference names."""
    return lookup_name(ctx, scope, c, pos)[1]


def alias_of(ctx: Context, scope: Scope, qualifier: q.Path, pos: Pos | None) -> str:
    """The alias a qualifier (``t`` of ``t.x``, ``s.t`` of ``s.t.x``) names."""
    *schema, table = qualifier
    aliases = [a for a in scope.aliases if a is not None]
    hits = pick(table[0], table[1], aliases)
    if schema:
        # schema.table.col: the table must have been written without an alias, and its
        # written schema must agree as far as both go.
        hits = [
            a
            for a in hits
            if a in scope.schemas and aligned(tuple(schema), scope.schemas[a]) is not None
        ]
    shown = ".".join(part for part, _ in qualifier)
    if not hits:
        raise ctx.syntax(f"unknown table or alias {shown!r}", pos)
    if len(hits) > 1:
        raise ctx.syntax(
            f"table or alias {shown!r} is ambiguous: it matches {hits[0]!r} and "
            f"{hits[1]!r}; write it in double quotes for an exact match",
            pos,
        )
    return hits[0]


def lookup_name(ctx: Context, scope: Scope, c: Column, pos: Pos | None = None) -> tuple[str, str]:
    """The (visible name, frame column) a column reference names.

    An unquoted name matches ignoring case; an exact match wins, and two columns that
    differ only in case are ambiguous for a name that matches neither exactly."""
    pos = c.pos or pos
    path = column_path(c)
    written, quoted = path[-1]
    if len(path) > 1:
        visible = [scope.aliases[alias_of(ctx, scope, path[:-1], pos)]]
    else:
        visible = list(scope.aliases.values())
    hits = [(written, s[written]) for s in visible if written in s]
    if not hits and not quoted:
        hits = [(v, s[v]) for s in visible for v in pick(written, quoted, s)]
    found = {col for _, col in hits}
    if not found:
        every = {k: v for s in visible for k, v in s.items()}
        raise ctx.syntax(_unknown(written, every), pos)
    if len(found) > 1:
        names = sorted({v for v, _ in hits})
        if len(names) > 1:
            shown = " and ".join(repr(n) for n in names[:2])
            raise ctx.syntax(
                f"column {written!r} is ambiguous: it matches {shown}; write the one you "
                f'mean in double quotes ("{names[0]}")',
                pos,
            )
        raise ctx.syntax(
            f"column {written!r} is ambiguous: qualify it with its table (t.{written})", pos
        )
    return hits[0]


def _unknown(name: str, columns: Mapping[str, str]) -> str:
    hint = close_name(name, columns)
    return f"unknown column {name!r}" + (f"; did you mean {hint!r}?" if hint else "")


def has_column(scope: Scope, c: Column) -> bool:
    """Whether a reference names any column (or several: then it is ambiguous)."""
    written, quoted = column_path(c)[-1]
    return any(pick(written, quoted, visible) for visible in scope.aliases.values())


def output_name(ctx: Context, scope: Scope, e: Expr) -> str:
    """The name of an unaliased output: a column's real name, else the expression."""
    if isinstance(e, Column):
        return lookup_name(ctx, scope, e)[0]
    return e.to_sql()


def resolve(ctx: Context, scope: Scope, e: Expr) -> Expr:
    """``e`` with every column reference replaced by the frame column it names."""
    if depth(e) > MAX_DEPTH:
        raise ctx.syntax(
            f"the expression is nested too deeply (more than {MAX_DEPTH} levels); simplify it",
            e.pos,
        )

    def fix(node: Expr) -> Expr:
        if isinstance(node, Column):
            return Column(lookup(ctx, scope, node), pos=node.pos)
        return node

    out = e.transform(fix)
    if scope.frame is not None:
        # In age > '30' the literal is read as the column's type (PostgreSQL's untyped
        # literal).
        out = read_untyped_literals(out, scope.frame.schema, text=ctx.text)
    return out


# -- outputs a clause names ---------------------------------------------------------------
def alias_named(ctx: Context, e: Expr, aliases: Iterable[str]) -> str | None:
    """The output alias an unqualified column reference names, if any (unquoted: any
    case; two aliases that differ only in case are ambiguous for neither's spelling)."""
    if not isinstance(e, Column) or e.table is not None:
        return None
    written, quoted = column_path(e)[-1]
    hits = pick(written, quoted, aliases)
    if len(hits) > 1:
        raise ctx.syntax(
            f"{written!r} is ambiguous: it matches the outputs {hits[0]!r} and "
            f"{hits[1]!r}; write the one you mean in double quotes",
            e.pos,
        )
    return hits[0] if hits else None


def group_keys(ctx: Context, scope: Scope, s: q.Select) -> tuple[q.GroupKey, ...] | None:
    """GROUP BY with ordinals (``GROUP BY 1``) and output aliases (``GROUP BY decade``)
    replaced by the SELECT item they name.

    As in PostgreSQL, a name that is both a column of the FROM clause and an output alias
    is the column. An ordinal or alias that names an aggregate (or ``*``) is refused: the
    groups must be known before the aggregates are.
    """
    if s.group_by is None:
        return None
    out = []
    for gk in s.group_by:
        item, what = _named_item(ctx, scope, s, gk)
        if item is None:
            out.append(gk)
            continue
        at = gk.expr.pos or gk.pos
        if isinstance(item.expr, q.Star):
            raise ctx.syntax(f"{what} names *, not one output", at)
        if contains_aggregate(item.expr):
            raise ctx.syntax(
                f"{what} names {item.expr.to_sql()}, an aggregate; GROUP BY takes the keys "
                "the aggregates are computed for",
                at,
            )
        out.append(dataclasses.replace(gk, expr=item.expr))
    return tuple(out)


def _named_item(
    ctx: Context, scope: Scope, s: q.Select, gk: q.GroupKey
) -> tuple[q.SelectItem | None, str]:
    """The SELECT item a GROUP BY key names by position or output alias, and how it was
    written (``GROUP BY 2``); no item for a key that is an expression or a column."""
    e = gk.expr
    if isinstance(e, Literal) and type(e.value) is int:
        n = e.value
        if not 1 <= n <= len(s.items):
            raise ctx.syntax(
                f"GROUP BY {n}: the SELECT list has {len(s.items)} output(s); a "
                "position counts them from 1",
                e.pos or gk.pos,
            )
        return s.items[n - 1], f"GROUP BY {n}"
    aliases = [item.alias for item in s.items if item.alias is not None]
    if isinstance(e, Column) and e.table is None and aliases:
        written, quoted = column_path(e)[-1]
        if not has_column(scope, e):
            hits = pick(written, quoted, aliases)
            if len(hits) > 1:
                raise ctx.syntax(f"GROUP BY {written}: two outputs are named so", e.pos)
            if hits:
                return next(i for i in s.items if i.alias == hits[0]), f"GROUP BY {written}"
    return None, ""
