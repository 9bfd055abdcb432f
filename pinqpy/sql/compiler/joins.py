"""FROM and joins: a FROM clause becomes a :class:`~.scopes.Scope` over one relation.

Takes the FROM item of a SELECT (a table, a subquery or a join of two items) and returns the
relation it reads, built with the same checked transformations as ``PrivateFrame``'s joins
(a join of two private tables needs ``WITH BOUNDS`` unless both sides are unique on the key;
a join with a public table keeps the private side's rows), and the names it makes visible.

Subqueries are compiled by :mod:`.subqueries`, which hands its compiler in (``inner``): a
FROM clause holds subqueries and a subquery holds a FROM clause, and the recursion goes
through that argument rather than an import each way.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

from pinqpy.errors import PrivacyError
from pinqpy.expr.ast import Binary, Column, Expr, Pos
from pinqpy.pipeline.relation import Relation
from pinqpy.sql import ast as q
from pinqpy.sql.compiler.context import Context, Scratch
from pinqpy.sql.compiler.scopes import Scope, close_name, lookup, resolve_table, try_lookup

__all__ = ["FromClause", "InnerQuery", "compile_from"]

#: How a subquery is compiled: its relation and the scratch after its names.
InnerQuery = Callable[[Context, q.Query, Scratch], tuple[Relation, Scratch]]


@dataclass(frozen=True)
class FromClause:
    """A compiled FROM clause and the scratch after the names its subqueries took."""

    scope: Scope
    scratch: Scratch


def compile_from(
    ctx: Context, item: q.FromItem | None, scratch: Scratch, inner: InnerQuery
) -> FromClause:
    """The relation and the names of a FROM item."""
    if item is None:
        raise PrivacyError("a query needs a FROM clause naming a private table")
    if isinstance(item, q.TableFrom):
        return FromClause(_table(ctx, item), scratch)
    if isinstance(item, q.SubqueryFrom):
        frame, scratch = inner(ctx, item.query, scratch)
        names = {c: c for c in frame.columns}
        return FromClause(Scope(frame, aliases={item.alias: names}, describe="(subquery)"), scratch)
    return _join(ctx, item, scratch, inner)


def _table(ctx: Context, item: q.TableFrom) -> Scope:
    alias = item.alias or item.name
    schemas = {} if item.alias else {alias: item.schema}
    name = table_name(ctx, item.name, item.schema, item.path, item.pos)
    if name in ctx.catalog.private:
        frame = ctx.catalog.private[name]
        aliases = {alias: {c: c for c in frame.columns}}
        return Scope(frame, aliases=aliases, describe=name, schemas=schemas)
    df = ctx.catalog.public[name]
    aliases = {alias: {str(c): str(c) for c in df.columns}}
    return Scope(None, public=df, aliases=aliases, schemas=schemas)


def table_name(
    ctx: Context, name: str, schema: tuple[str, ...], path: q.Path, pos: Pos | None
) -> str:
    """The registered table a FROM clause names (see :func:`~.scopes.resolve_table`)."""
    if not path:
        path = tuple((part, True) for part in (*schema, name))
    names = list(ctx.catalog.private) + list(ctx.catalog.public)
    found = resolve_table(names, path)
    written = ".".join(part for part, _ in path)
    if len(found) > 1:
        shown = " and ".join(repr(n) for n in found[:2])
        raise ctx.syntax(
            f"table name {written!r} is ambiguous: it matches {shown}; write the name as "
            'registered, in double quotes ("name") for an exact match',
            pos,
        )
    if found:
        return found[0]
    hint = close_name(path[-1][0], names) or close_name(written, names)
    extra = f"; did you mean {hint!r}?" if hint else ""
    raise ctx.syntax(f"unknown table {written!r}{extra}", pos)


def _join(ctx: Context, j: q.Join, scratch: Scratch, inner: InnerQuery) -> FromClause:
    left_from = compile_from(ctx, j.left, scratch, inner)
    right_from = compile_from(ctx, j.right, left_from.scratch, inner)
    left, right = left_from.scope, right_from.scope
    pairs = join_keys(ctx, j, left, right)
    if left.frame is None and right.frame is None:
        raise PrivacyError("JOIN of two public tables: at least one side must be private")
    if left.frame is None:
        if j.kind == "left":
            raise PrivacyError(
                "LEFT JOIN with the public table on the left would release public rows "
                "with no private match; put the private table on the left"
            )
        left, right = right, left
        pairs = [(b, a) for a, b in pairs]
    assert left.frame is not None
    if right.frame is None:
        return FromClause(_public_join(ctx, j, left, right, pairs), right_from.scratch)
    return FromClause(_private_join(ctx, j, left, right, pairs), right_from.scratch)


def _private_join(
    ctx: Context, j: q.Join, left: Scope, right: Scope, pairs: list[tuple[str, str]]
) -> Scope:
    assert left.frame is not None and right.frame is not None
    if j.kind == "left":
        raise PrivacyError(
            "LEFT JOIN of two private tables is not supported; use an inner JOIN with "
            "WITH BOUNDS (b_left, b_right)"
        )
    renames = {rk: lk for lk, rk in pairs if rk != lk}
    rframe = right.frame
    if renames:
        keep = [c for c in rframe.columns if c not in renames]
        rframe = rframe.select(keep, {lk: Column(rk) for rk, lk in renames.items()})
    on = [lk for lk, _ in pairs]
    if j.bounds is not None:
        for i, b in enumerate(j.bounds):
            if b < 1:
                at = ctx.locate(r"\bWITH\s+BOUNDS\s*\(\s*(\S+?)\s*,\s*(\S+?)\s*\)", j.pos, i + 1)
                side = "b_left" if i == 0 else "b_right"
                raise ctx.syntax(f"WITH BOUNDS: {side} must be a positive whole number", at)
    try:
        frame = left.frame.join(rframe, left.frame.join_keys(on), j.bounds)
    except PrivacyError:
        raise PrivacyError(
            "JOIN of two private tables needs WITH BOUNDS (b_left, b_right) after its ON "
            "or USING clause (at most that many rows per key on each side), unless both "
            "sides are unique on the key (for example, each is a GROUP BY on it)"
        ) from None
    return _merged(ctx, j, left, right, frame, set(on), "_right", renames)


def _public_join(
    ctx: Context, j: q.Join, left: Scope, right: Scope, pairs: list[tuple[str, str]]
) -> Scope:
    assert left.frame is not None and right.public is not None
    pub = right.public
    renames = {rk: lk for lk, rk in pairs if rk != lk}
    if renames:
        pub = pub.rename(columns=renames)
    on = [lk for lk, _ in pairs]
    if j.bounds is not None:
        raise ctx.syntax(
            "WITH BOUNDS applies to a join of two private tables",
            ctx.locate(r"\bWITH\s+BOUNDS\b", j.pos) or j.pos,
        )
    on_cols = left.frame.join_keys(on)
    frame = left.frame.public_join(pub, on_cols, j.kind, _public_name(ctx, right))
    scope = _merged(ctx, j, left, right, frame, set(on), "_public", renames)
    # Every column that comes from the public table, the join key included, has public
    # values: grouping by it needs no private key selection.
    public_values = dict(scope.public_values)
    for names in right.aliases.values():
        for col in names.values():
            target = renames.get(col, col)
            out = target if target in on else _suffixed(target, left, "_public")
            public_values[out] = (pub, target)
    return dataclasses.replace(scope, public_values=public_values)


def _public_name(ctx: Context, scope: Scope) -> str:
    for name, df in ctx.catalog.public.items():
        if df is scope.public:
            return name
    return "public"


def _suffixed(col: str, left: Scope, suffix: str) -> str:
    assert left.frame is not None
    return col + suffix if col in left.frame.columns else col


def _merged(
    ctx: Context,
    j: q.Join,
    left: Scope,
    right: Scope,
    frame: Relation,
    on: set[str],
    suffix: str,
    renames: dict[str, str],
) -> Scope:
    """The names of both sides of a join over ``frame``: a right column that the left side
    also has is suffixed (join keys are one column)."""
    assert left.frame is not None
    aliases = dict(left.aliases)
    for alias, names in right.aliases.items():
        if alias in aliases and alias is not None:
            raise ctx.syntax(
                f"table alias {alias!r} is used twice; rename one", _alias_pos(ctx, j, alias)
            )
        mapped = {}
        for visible, col in names.items():
            target = renames.get(col, col)
            mapped[visible] = target if target in on else _suffixed(target, left, suffix)
        aliases[alias] = mapped
    public_values = dict(left.public_values)
    public_values.update(
        {
            (c if c in on else _suffixed(c, left, suffix)): v
            for c, v in right.public_values.items()
        }
    )
    schemas = {**left.schemas, **right.schemas}
    return Scope(
        frame, aliases=aliases, public_values=public_values, describe="join", schemas=schemas
    )


def _alias_pos(ctx: Context, j: q.Join, alias: str) -> Pos | None:
    """Where the right side of a join repeats an alias of the left."""
    right_pos = getattr(j.right, "pos", None)
    at = ctx.locate(rf"\b{re.escape(alias)}\b", right_pos)
    if right_pos is not None and at == right_pos and isinstance(j.right, q.TableFrom):
        # the right table is itself named like the alias: point at its alias
        at = ctx.locate(rf"\s(?:AS\s+)?({re.escape(alias)})\b", right_pos, 1)
    return at or j.pos


def join_keys(ctx: Context, j: q.Join, left: Scope, right: Scope) -> list[tuple[str, str]]:
    """The (left column, right column) pairs a join's USING or ON clause equates."""
    if j.using is not None:
        pairs = []
        for i, c in enumerate(j.using):
            col = Column(c, path=j.using_paths[i] if i < len(j.using_paths) else ())
            pairs.append((lookup(ctx, left, col, j.pos), lookup(ctx, right, col, j.pos)))
        return pairs
    if j.on is None:
        raise ctx.syntax("JOIN needs ON a.k = b.k or USING (k)", j.pos)
    conjuncts: list[Expr] = []
    stack = [j.on]
    while stack:
        e = stack.pop()
        if isinstance(e, Binary) and e.op == "AND":
            stack.extend([e.right, e.left])
        else:
            conjuncts.append(e)
    return [_equated(ctx, j, e, left, right) for e in conjuncts]


def _equated(ctx: Context, j: q.Join, e: Expr, left: Scope, right: Scope) -> tuple[str, str]:
    """The (left column, right column) one equality of an ON clause names."""
    if not (
        isinstance(e, Binary)
        and e.op == "="
        and isinstance(e.left, Column)
        and isinstance(e.right, Column)
    ):
        raise ctx.syntax(
            "JOIN ... ON must be equalities between a column of each side (a.k = b.k AND ...)",
            e.pos or j.pos,
        )
    a, b = e.left, e.right
    la, rb = try_lookup(ctx, left, a), try_lookup(ctx, right, b)
    if la is not None and rb is not None:
        return la, rb
    lb, ra = try_lookup(ctx, left, b), try_lookup(ctx, right, a)
    if lb is not None and ra is not None:
        return lb, ra
    raise ctx.syntax(
        "each side of a JOIN condition must name a column of one of the two tables",
        e.pos or j.pos,
    )
