"""Compile SQL statements to the same plans and aggregations as Python method chaining.

There is one engine: a FROM clause becomes a :class:`~pinqpy.pipeline.relation.Relation` built
with the same checked transformations as ``PrivateFrame``'s methods, and the outermost SELECT
becomes a list of prepared aggregations (:mod:`pinqpy.pipeline.prepare`) charged in one
transaction, exactly as ``frame.count(...)`` would be.

Budget semantics (SQL.md): the query's epsilon is the *total* it charges. With ``m`` noisy
measurements (distinct aggregate calls in SELECT, HAVING and ORDER BY) over a FROM clause of
stability ``s`` (the largest over the budgets it draws on), each measurement gets
``epsilon / (m·s)``, so each budget is charged at most ``epsilon`` and the one of largest
stability exactly ``epsilon``. The outermost GROUP BY is a partition (parallel composition):
every group gets all ``m`` measurements and the budget pays once.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import numbers
import re
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pandas as pd

from pinqpy.accounting.agents import AllParts, Scaled
from pinqpy.accounting.cost import check_delta, check_epsilon
from pinqpy.core.exact import to_fraction
from pinqpy.errors import PinqError, PinqSyntaxError, PrivacyError
from pinqpy.expr.ast import (
    AGGREGATE_FUNCTIONS,
    MAX_DEPTH,
    Binary,
    Call,
    Column,
    Expr,
    IsNull,
    Literal,
    NamedArg,
    Pos,
    canonical_aggregate,
    contains_aggregate,
    depth,
)
from pinqpy.expr.bounds import derive_bounds, derive_keys
from pinqpy.expr.check import (
    _NOT_CONSTANT,
    check_expression,
    constant_value,
    infer_type,
    read_untyped_literals,
)
from pinqpy.noise.keyselect import KeySelectionMechanism
from pinqpy.pipeline.prepare import (
    Prepared,
    prepare_count,
    prepare_mean,
    prepare_quantile,
    prepare_sum,
    prepare_variance,
)
from pinqpy.pipeline.relation import Relation
from pinqpy.pipeline.run import key_structure
from pinqpy.plan.catalog import agent_name
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.meta import check_keys, internal_names
from pinqpy.plan.nodes import Source
from pinqpy.plan.stability import INF, lineage_of
from pinqpy.sql import ast as q
from pinqpy.sql.bigquery import (
    PER_GROUP,
    PER_ROW,
    ROW_AGGREGATES,
    Contribution,
    literal,
    normalize_call,
    per_unit,
    split_bounds,
)

__all__ = ["Catalog", "CompiledRelease", "Measurement", "compile_release", "resolve_table"]

# MIN and MAX are released as private quantiles this close to 0 and 1 (SQL.md): exactly 0 or
# 1 would make every candidate beyond the extreme value score equally well.
MIN_Q, MAX_Q = 0.01, 0.99
MAX_GROUPS = 1_000_000


@dataclass
class Catalog:
    """What a query can name: private relations and public tables."""

    private: Mapping[str, Relation]
    public: Mapping[str, pd.DataFrame]


@dataclass
class _Rel:
    """A compiled FROM clause: a private frame (or a public table) and how names resolve."""

    frame: Relation | None
    public: pd.DataFrame | None = None
    # alias (None for unaliased subqueries) -> {visible column: frame column}
    scopes: dict[str | None, dict[str, str]] = field(default_factory=dict)
    # frame column -> (public table, its column): public keys for GROUP BY, found on demand
    public_values: dict[str, tuple[pd.DataFrame, str]] = field(default_factory=dict)
    describe: str = ""
    # alias -> the schema an unaliased FROM table was written with (FROM census.pums):
    # what a column's schema.table.col qualifier is checked against
    schemas: dict[str | None, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class Measurement:
    """One noisy aggregate of the release."""

    call: Call
    prepared: Prepared
    label: str


@dataclass
class CompiledRelease:
    """Everything needed to charge, run and shape a query's answer (nothing charged yet)."""

    frame: Relation
    measurements: list[Measurement]
    grouping: Grouping | None
    target: tuple[Grouping, dict[object, Any]] | None
    key_names: list[str]
    outputs: list[tuple[str, Expr]]  # output name -> expression over keys and __m{i}
    having: Expr | None
    order_by: tuple[q.OrderItem, ...] | None
    limit: int | None
    epsilon: Fraction
    delta: Fraction
    stability: Fraction
    per_measurement_epsilon: Fraction
    group_desc: str
    # Private key selection (no public keys, delta > 0): (frame, key columns, mechanism) and
    # the lineage the per-group aggregates are charged through; keys are chosen at run time.
    key_selection: tuple[Relation, tuple[str, ...], KeySelectionMechanism] | None = None
    target_lineage: dict[object, Any] | None = None
    # Where the charge or the noise differs from what BigQuery would do (EXPLAIN lists them).
    notes: list[str] = field(default_factory=list)
    # The measurement (a COUNT(*) of the release frame) whose released values are the key
    # selection's noisy counts; it is not charged or measured separately.
    selection_index: int | None = None
    # SELECT releases only the GROUP BY keys: the selection's noisy counts are not output.
    keys_only: bool = False
    # SELECT DISTINCT over noisy results: duplicate released rows are dropped (before LIMIT).
    distinct: bool = False


def _offset(text: str, pos: Pos | None) -> int:
    if pos is None:
        return 0
    lines = text.split("\n")
    return sum(len(line) + 1 for line in lines[: pos.line - 1]) + pos.column - 1


def locate(text: str, pattern: str, after: Pos | None = None, group: int = 0) -> Pos | None:
    """The position of the first match of ``pattern`` (case-insensitive) at or after ``after``.

    For carets under things the AST does not keep a node for (an option's value, a bound of
    WITH BOUNDS, a repeated alias).
    """
    import re

    m = re.compile(pattern, re.IGNORECASE).search(text, _offset(text, after))
    if m is None:
        return None
    start = m.start(group)
    line = text.count("\n", 0, start) + 1
    column = start - (text.rfind("\n", 0, start) + 1) + 1
    return Pos(line, column)


def _pick(written: str, quoted: bool, names: Iterable[str]) -> list[str]:
    """The names a written name matches: itself if present, else (unquoted only) every name
    equal to it ignoring case (PostgreSQL and BigQuery users write names in any case).

    >>> _pick("AGE", False, ["age", "sex"]), _pick("AGE", True, ["age"])
    (['age'], [])
    >>> _pick("a", False, ["a", "A"]), _pick("Age", False, ["age", "AGE"])
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


def _aligned(written: q.Path, parts: tuple[str, ...]) -> int | None:
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
            score = _aligned(path, parts)
            if score is None:
                continue
            rank = (0, int(len(parts) == len(path)), score)
        if best is None or rank > best:
            best, found = rank, [name]
        elif rank == best:
            found.append(name)
    return found


def _close(name: str, names: Iterable[str]) -> str | None:
    """The name most like ``name``: one equal to it ignoring case first (a quoted name that
    is matched exactly), else the closest spelling; for the last part of a dotted registered
    name too (``pums`` of ``census.pums``)."""
    import difflib

    names = list(names)
    folded = name.casefold()
    for n in names:
        if n.casefold() == folded or n.rsplit(".", 1)[-1].casefold() == folded:
            return n
    close = difflib.get_close_matches(name, names, n=1)
    return close[0] if close else None


def _column_path(c: Column) -> q.Path:
    """How a column reference was written; a Column built in Python is matched exactly."""
    if c.path:
        return c.path
    if c.table is None:
        return ((c.name, True),)
    return ((c.table, True), (c.name, True))


class _Compiler:
    def __init__(self, catalog: Catalog, text: str):
        self.catalog = catalog
        self.text = text
        self._tmp = itertools.count()
        # OPTIONS (quantile_ci = true): quantiles spend a quarter of their epsilon on a
        # value-space interval (prepare_quantile's ci=True); off, the whole epsilon selects.
        self.quantile_ci = False

    # -- errors -------------------------------------------------------------------------
    def syntax(self, message: str, pos: Pos | None) -> PinqSyntaxError:
        if pos is None:
            return PinqSyntaxError(message, text=self.text)
        return PinqSyntaxError(message, text=self.text, line=pos.line, column=pos.column)

    def tmp(self, stem: str) -> str:
        return f"__pinq_{stem}{next(self._tmp)}"

    # -- FROM ---------------------------------------------------------------------------
    def from_item(self, item: q.FromItem | None, clause: str = "FROM") -> _Rel:
        if item is None:
            raise PrivacyError("a query needs a FROM clause naming a private table")
        if isinstance(item, q.TableFrom):
            return self.table(item)
        if isinstance(item, q.SubqueryFrom):
            frame = self.inner_query(item.query)
            scope = {c: c for c in frame.columns}
            return _Rel(frame, scopes={item.alias: scope}, describe="(subquery)")
        return self.join(item)

    def table(self, item: q.TableFrom) -> _Rel:
        alias = item.alias or item.name
        schemas = {} if item.alias else {alias: item.schema}
        name = self.table_name(item.name, item.schema, item.path, item.pos)
        if name in self.catalog.private:
            frame = self.catalog.private[name]
            scopes = {alias: {c: c for c in frame.columns}}
            return _Rel(frame, scopes=scopes, describe=name, schemas=schemas)
        df = self.catalog.public[name]
        scopes = {alias: {str(c): str(c) for c in df.columns}}
        return _Rel(None, public=df, scopes=scopes, schemas=schemas)

    def table_name(self, name: str, schema: tuple[str, ...], path: q.Path, pos: Pos | None) -> str:
        """The registered table a FROM clause names (see :func:`resolve_table`)."""
        if not path:
            path = tuple((part, True) for part in (*schema, name))
        names = list(self.catalog.private) + list(self.catalog.public)
        found = resolve_table(names, path)
        written = ".".join(part for part, _ in path)
        if len(found) > 1:
            shown = " and ".join(repr(n) for n in found[:2])
            raise self.syntax(
                f"table name {written!r} is ambiguous: it matches {shown}; write the name as "
                'registered, in double quotes ("name") for an exact match',
                pos,
            )
        if found:
            return found[0]
        hint = _close(path[-1][0], names) or _close(written, names)
        extra = f"; did you mean {hint!r}?" if hint else ""
        raise self.syntax(f"unknown table {written!r}{extra}", pos)

    def join(self, j: q.Join) -> _Rel:
        left, right = self.from_item(j.left), self.from_item(j.right)
        pairs = self.join_keys(j, left, right)
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
            return self.public_join(j, left, right, pairs)
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
                    at = locate(
                        self.text, r"\bWITH\s+BOUNDS\s*\(\s*(\S+?)\s*,\s*(\S+?)\s*\)", j.pos, i + 1
                    )
                    side = "b_left" if i == 0 else "b_right"
                    raise self.syntax(f"WITH BOUNDS: {side} must be a positive whole number", at)
        try:
            frame = left.frame.join(rframe, left.frame.join_keys(on), j.bounds)
        except PrivacyError:
            raise PrivacyError(
                "JOIN of two private tables needs WITH BOUNDS (b_left, b_right) after its ON "
                "or USING clause (at most that many rows per key on each side), unless both "
                "sides are unique on the key (for example, each is a GROUP BY on it)"
            ) from None
        return self.merge_scopes(j, left, right, frame, set(on), "_right", renames)

    def public_join(self, j: q.Join, left: _Rel, right: _Rel, pairs: list[tuple[str, str]]) -> _Rel:
        assert left.frame is not None and right.public is not None
        pub = right.public
        renames = {rk: lk for lk, rk in pairs if rk != lk}
        if renames:
            pub = pub.rename(columns=renames)
        on = [lk for lk, _ in pairs]
        if j.bounds is not None:
            raise self.syntax(
                "WITH BOUNDS applies to a join of two private tables",
                locate(self.text, r"\bWITH\s+BOUNDS\b", j.pos) or j.pos,
            )
        on_cols = left.frame.join_keys(on)
        frame = left.frame.public_join(pub, on_cols, j.kind, self.public_name(right))
        rel = self.merge_scopes(j, left, right, frame, set(on), "_public", renames)
        # Every column that comes from the public table, the join key included, has public
        # values: grouping by it needs no private key selection.
        for alias_scope in right.scopes.values():
            for col in alias_scope.values():
                target = renames.get(col, col)
                out = target if target in on else self._suffixed(target, left, "_public")
                rel.public_values[out] = (pub, target)
        return rel

    def public_name(self, rel: _Rel) -> str:
        for name, df in self.catalog.public.items():
            if df is rel.public:
                return name
        return "public"

    @staticmethod
    def _suffixed(col: str, left: _Rel, suffix: str) -> str:
        assert left.frame is not None
        return col + suffix if col in left.frame.columns else col

    def merge_scopes(
        self,
        j: q.Join,
        left: _Rel,
        right: _Rel,
        frame: Relation,
        on: set[str],
        suffix: str,
        renames: dict[str, str],
    ) -> _Rel:
        assert left.frame is not None
        scopes = dict(left.scopes)
        for alias, scope in right.scopes.items():
            if alias in scopes and alias is not None:
                right_pos = getattr(j.right, "pos", None)
                import re

                at = locate(self.text, rf"\b{re.escape(alias)}\b", right_pos)
                if right_pos is not None and at == right_pos and isinstance(j.right, q.TableFrom):
                    # the right table is itself named like the alias: point at its alias
                    at = locate(self.text, rf"\s(?:AS\s+)?({re.escape(alias)})\b", right_pos, 1)
                raise self.syntax(f"table alias {alias!r} is used twice; rename one", at or j.pos)
            mapped = {}
            for visible, col in scope.items():
                target = renames.get(col, col)
                mapped[visible] = target if target in on else self._suffixed(target, left, suffix)
            scopes[alias] = mapped
        public_values = dict(left.public_values)
        public_values.update(
            {
                (c if c in on else self._suffixed(c, left, suffix)): v
                for c, v in right.public_values.items()
            }
        )
        schemas = {**left.schemas, **right.schemas}
        return _Rel(
            frame, scopes=scopes, public_values=public_values, describe="join", schemas=schemas
        )

    def join_keys(self, j: q.Join, left: _Rel, right: _Rel) -> list[tuple[str, str]]:
        if j.using is not None:
            pairs = []
            for i, c in enumerate(j.using):
                col = Column(c, path=j.using_paths[i] if i < len(j.using_paths) else ())
                lc = self.lookup(col, left, j.pos)
                rc = self.lookup(col, right, j.pos)
                pairs.append((lc, rc))
            return pairs
        if j.on is None:
            raise self.syntax("JOIN needs ON a.k = b.k or USING (k)", j.pos)
        conjuncts: list[Expr] = []
        stack = [j.on]
        while stack:
            e = stack.pop()
            if isinstance(e, Binary) and e.op == "AND":
                stack.extend([e.right, e.left])
            else:
                conjuncts.append(e)
        pairs = []
        for e in conjuncts:
            if not (
                isinstance(e, Binary)
                and e.op == "="
                and isinstance(e.left, Column)
                and isinstance(e.right, Column)
            ):
                raise self.syntax(
                    "JOIN ... ON must be equalities between a column of each side "
                    "(a.k = b.k AND ...)",
                    e.pos or j.pos,
                )
            a, b = e.left, e.right
            la, rb = self.try_lookup(a, left), self.try_lookup(b, right)
            if la is not None and rb is not None:
                pairs.append((la, rb))
                continue
            lb, ra = self.try_lookup(b, left), self.try_lookup(a, right)
            if lb is not None and ra is not None:
                pairs.append((lb, ra))
                continue
            raise self.syntax(
                "each side of a JOIN condition must name a column of one of the two tables",
                e.pos or j.pos,
            )
        return pairs

    # -- name resolution ----------------------------------------------------------------
    def try_lookup(self, c: Column, rel: _Rel) -> str | None:
        try:
            return self.lookup(c, rel)
        except PinqSyntaxError:
            return None

    def lookup(self, c: Column, rel: _Rel, pos: Pos | None = None) -> str:
        """The frame column a reference names."""
        return self.lookup_name(c, rel, pos)[1]

    def scope_of(self, qualifier: q.Path, rel: _Rel, pos: Pos | None) -> str:
        """The alias a qualifier (``t`` of ``t.x``, ``s.t`` of ``s.t.x``) names."""
        *schema, table = qualifier
        aliases = [a for a in rel.scopes if a is not None]
        hits = _pick(table[0], table[1], aliases)
        if schema:
            # schema.table.col: the table must have been written without an alias, and its
            # written schema must agree as far as both go.
            hits = [
                a
                for a in hits
                if a in rel.schemas and _aligned(tuple(schema), rel.schemas[a]) is not None
            ]
        shown = ".".join(part for part, _ in qualifier)
        if not hits:
            raise self.syntax(f"unknown table or alias {shown!r}", pos)
        if len(hits) > 1:
            raise self.syntax(
                f"table or alias {shown!r} is ambiguous: it matches {hits[0]!r} and "
                f"{hits[1]!r}; write it in double quotes for an exact match",
                pos,
            )
        return hits[0]

    def lookup_name(self, c: Column, rel: _Rel, pos: Pos | None = None) -> tuple[str, str]:
        """The (visible name, frame column) a column reference names.

        An unquoted name matches ignoring case; an exact match wins, and two columns that
        differ only in case are ambiguous for a name that matches neither exactly."""
        pos = c.pos or pos
        path = _column_path(c)
        written, quoted = path[-1]
        if len(path) > 1:
            scopes = [rel.scopes[self.scope_of(path[:-1], rel, pos)]]
        else:
            scopes = list(rel.scopes.values())
        hits = [(written, s[written]) for s in scopes if written in s]
        if not hits and not quoted:
            hits = [(v, s[v]) for s in scopes for v in _pick(written, quoted, s)]
        found = {col for _, col in hits}
        if not found:
            every = {k: v for s in scopes for k, v in s.items()}
            raise self.syntax(self._unknown(written, every), pos)
        if len(found) > 1:
            names = sorted({v for v, _ in hits})
            if len(names) > 1:
                shown = " and ".join(repr(n) for n in names[:2])
                raise self.syntax(
                    f"column {written!r} is ambiguous: it matches {shown}; write the one you "
                    f'mean in double quotes ("{names[0]}")',
                    pos,
                )
            raise self.syntax(
                f"column {written!r} is ambiguous: qualify it with its table (t.{written})", pos
            )
        return hits[0]

    def output_name(self, e: Expr, rel: _Rel) -> str:
        """The name of an unaliased output: a column's real name, else the expression."""
        if isinstance(e, Column):
            return self.lookup_name(e, rel)[0]
        return e.to_sql()

    @staticmethod
    def _unknown(name: str, scope: Mapping[str, str]) -> str:
        hint = _close(name, scope)
        return f"unknown column {name!r}" + (f"; did you mean {hint!r}?" if hint else "")

    def resolve(self, e: Expr, rel: _Rel) -> Expr:
        if depth(e) > MAX_DEPTH:
            raise self.syntax(
                f"the expression is nested too deeply (more than {MAX_DEPTH} levels); simplify it",
                e.pos,
            )

        def fix(node: Expr) -> Expr:
            if isinstance(node, Column):
                return Column(self.lookup(node, rel), pos=node.pos)
            return node

        out = e.transform(fix)
        if rel.frame is not None:
            # In age > '30' the literal is read as the column's type (PostgreSQL's untyped
            # literal).
            out = read_untyped_literals(out, rel.frame.schema, text=self.text)
        return out

    def group_keys(self, s: q.Select, rel: _Rel) -> tuple[q.GroupKey, ...] | None:
        """GROUP BY with ordinals (``GROUP BY 1``) and output aliases (``GROUP BY decade``)
        replaced by the SELECT item they name.

        As in PostgreSQL, a name that is both a column of the FROM clause and an output alias
        is the column. An ordinal or alias that names an aggregate (or ``*``) is refused: the
        groups must be known before the aggregates are.
        """
        if s.group_by is None:
            return None
        aliases = [item.alias for item in s.items if item.alias is not None]
        out = []
        for gk in s.group_by:
            e, item, what = gk.expr, None, ""
            if isinstance(e, Literal) and type(e.value) is int:
                n = e.value
                if not 1 <= n <= len(s.items):
                    raise self.syntax(
                        f"GROUP BY {n}: the SELECT list has {len(s.items)} output(s); a "
                        "position counts them from 1",
                        e.pos or gk.pos,
                    )
                item, what = s.items[n - 1], f"GROUP BY {n}"
            elif isinstance(e, Column) and e.table is None and aliases:
                written, quoted = _column_path(e)[-1]
                if not self.has_column(e, rel):
                    hits = _pick(written, quoted, aliases)
                    if len(hits) > 1:
                        raise self.syntax(f"GROUP BY {written}: two outputs are named so", e.pos)
                    if hits:
                        item = next(i for i in s.items if i.alias == hits[0])
                        what = f"GROUP BY {written}"
            if item is None:
                out.append(gk)
                continue
            if isinstance(item.expr, q.Star):
                raise self.syntax(f"{what} names *, not one output", e.pos or gk.pos)
            if contains_aggregate(item.expr):
                raise self.syntax(
                    f"{what} names {item.expr.to_sql()}, an aggregate; GROUP BY takes the keys "
                    "the aggregates are computed for",
                    e.pos or gk.pos,
                )
            out.append(dataclasses.replace(gk, expr=item.expr))
        return tuple(out)

    def has_column(self, c: Column, rel: _Rel) -> bool:
        """Whether a reference names any column (or several: then it is ambiguous)."""
        written, quoted = _column_path(c)[-1]
        return any(_pick(written, quoted, scope) for scope in rel.scopes.values())

    def where(self, s: q.Select, rel: _Rel, frame: Relation) -> Relation:
        """``frame`` filtered by the statement's WHERE clause, if it has one."""
        if s.where is None:
            return frame
        w = self.resolve(s.where, rel)
        if contains_aggregate(w):
            raise self.syntax("aggregates are not allowed in WHERE; use HAVING", w.pos)
        self.condition(w, frame, "WHERE")
        return frame.where(w)

    def condition(self, e: Expr, frame: Relation, clause: str) -> None:
        ctype = self.check(e, frame)
        if ctype not in ("bool", "any"):
            raise self.syntax(
                f"{clause} needs a condition (true or false), but {e.to_sql()} is of type "
                f"{ctype}; compare it with something, e.g. x > 0",
                e.pos,
            )

    def check(self, e: Expr, frame: Relation, *, aggregates: bool = False) -> str:
        try:
            return check_expression(e, frame.schema, text=self.text, allow_aggregates=aggregates)
        except PinqSyntaxError:
            raise
        except PinqError as err:
            raise self.syntax(str(err), e.pos) from None

    # -- inner queries: transformations ------------------------------------------------
    def inner_query(self, query: q.Query) -> Relation:
        if isinstance(query, q.SetQuery):
            if query.order_by or query.limit is not None:
                raise PrivacyError(
                    "ORDER BY / LIMIT inside a subquery change which rows exist, so the "
                    "answer could depend on one person; apply them to the outermost query"
                )
            left, right = self.inner_query(query.left), self.inner_query(query.right)
            if len(left.columns) != len(right.columns):
                raise self.syntax(
                    f"{query.op.upper().replace('_', ' ')} needs both sides to have the same "
                    "number of columns",
                    query.pos,
                )
            if right.columns != left.columns:
                right = right.select(
                    (), {lc: Column(rc) for lc, rc in zip(left.columns, right.columns, strict=True)}
                )
            op = {
                "union": "union",
                "union_all": "concat",
                "intersect": "intersect",
                "except": "difference",
            }
            return left.set_op(right, op[query.op])  # type: ignore[arg-type]
        return self.inner_select(query)

    def inner_select(self, s: q.Select) -> Relation:
        if s.order_by or s.limit is not None:
            raise PrivacyError(
                "ORDER BY / LIMIT inside a subquery change which rows exist (so does SELECT "
                "TOP n), so the answer could depend on one person; apply them to the "
                "outermost query"
            )
        if s.options:
            raise self.syntax(
                "OPTIONS belong to the outermost query",
                locate(self.text, r"\bOPTIONS\b", s.pos) or s.pos,
            )
        rel = self.from_item(s.from_)
        if rel.frame is None:
            raise PrivacyError("a subquery over only public tables has nothing private to query")
        frame = rel.frame
        frame = self.where(s, rel, frame)
        if s.group_by is not None or any(
            not isinstance(i.expr, q.Star) and contains_aggregate(i.expr) for i in s.items
        ):
            frame = self.inner_group(s, rel, frame)
        else:
            if s.having is not None:
                raise self.syntax("HAVING needs GROUP BY or aggregates", s.having.pos)
            frame = self.inner_project(s, rel, frame)
        if s.distinct:
            frame = frame.distinct()
        return frame

    def inner_project(self, s: q.Select, rel: _Rel, frame: Relation) -> Relation:
        outputs: dict[str, Expr] = {}
        for item in s.items:
            if isinstance(item.expr, q.Star):
                if item.expr.table is not None:
                    qualifier = item.expr.path or ((item.expr.table, True),)
                    scopes = [rel.scopes[self.scope_of(qualifier, rel, item.pos)]]
                else:
                    scopes = list(rel.scopes.values())
                for scope in scopes:
                    for col in scope.values():
                        outputs.setdefault(col, Column(col))
                continue
            e = self.resolve(item.expr, rel)
            self.check(e, frame)
            name = item.alias or (
                self.output_name(item.expr, rel) if isinstance(item.expr, Column) else e.to_sql()
            )
            if name in outputs:
                raise self.syntax(f"the subquery has two columns named {name!r}; use AS", item.pos)
            outputs[name] = e
        plain = [n for n, e in outputs.items() if isinstance(e, Column) and e.name == n]
        computed = {n: e for n, e in outputs.items() if n not in plain}
        frame = frame.select(plain, computed) if computed or plain else frame
        order = list(outputs)
        if frame.columns != order:
            frame = frame.select(order, {})
        return frame

    def inner_group(self, s: q.Select, rel: _Rel, frame: Relation) -> Relation:
        keys: list[tuple[Expr, str]] = []  # (resolved expr, frame column)
        assigns: dict[str, Expr] = {}
        for gk in self.group_keys(s, rel) or ():
            if gk.keys is not None:
                raise self.syntax(
                    "a key list (GROUP BY x IN (...)) belongs to the outermost GROUP BY", gk.pos
                )
            e = self.resolve(gk.expr, rel)
            self.check(e, frame)
            if isinstance(e, Column):
                keys.append((e, e.name))
            else:
                name = self.tmp("g")
                assigns[name] = e
                keys.append((e, name))
        if not keys:  # aggregates with no GROUP BY: one group
            name = self.tmp("all")
            assigns[name] = Literal(1)
            keys.append((Literal(1), name))
        if assigns:
            frame = frame.assign(assigns)
        aggs: dict[str, Expr] = {}
        outputs: list[tuple[str, str]] = []  # (output name, grouped column)
        agg_names: dict[Expr, str] = {}

        def agg_column(call: Call) -> str:
            if call not in agg_names:
                agg_names[call] = self.tmp("a")
                name = canonical_aggregate(call.name)
                if name in ("PERCENTILE", "QUANTILE"):
                    raise self.syntax(
                        f"{call.name} is not available inside a subquery's GROUP BY", call.pos
                    )
                if name in ("VAR_POP", "STDDEV_POP"):
                    sample = "VARIANCE" if name == "VAR_POP" else "STDDEV"
                    raise self.syntax(
                        f"{call.name} is not available inside a subquery's GROUP BY; "
                        f"{sample} (the sample form) is",
                        call.pos,
                    )
                aggs[agg_names[call]] = Call(name, call.args[:1], call.distinct, call.star)
            return agg_names[call]

        for item in s.items:
            if isinstance(item.expr, q.Star):
                raise self.syntax("SELECT * cannot be used with GROUP BY", item.pos)
            e = self.resolve(item.expr, rel)
            key_col = next((col for ke, col in keys if ke == e), None)
            if key_col is not None:
                name = item.alias or (
                    self.output_name(item.expr, rel)
                    if isinstance(item.expr, Column)
                    else e.to_sql()
                )
                outputs.append((name, key_col))
                continue
            if isinstance(e, Call) and e.name in AGGREGATE_FUNCTIONS:
                self.check(e, frame, aggregates=True)
                outputs.append((item.alias or item.expr.to_sql(), agg_column(e)))
                continue
            raise self.syntax(
                "in a subquery with GROUP BY, each output must be a group key or one aggregate "
                "such as COUNT(*) or SUM(x)",
                item.pos or e.pos,
            )
        having = None
        if s.having is not None:
            h = self.resolve_having(s.having, rel, dict(outputs))

            def swap(node: Expr) -> Expr:
                if isinstance(node, Call) and node.name in AGGREGATE_FUNCTIONS:
                    self.check(node, frame, aggregates=True)
                    return Column(agg_column(node))
                return node

            having = h.transform(swap)
        grouped = frame.aggregate(frame.group_keys([col for _, col in keys]), aggs)
        if having is not None:
            grouped = grouped.where(having)
        names = [n for n, _ in outputs]
        if len(set(names)) != len(names):
            raise self.syntax("the subquery has two columns with the same name; use AS", s.pos)
        return grouped.select((), {n: Column(c) for n, c in outputs})

    def resolve_having(self, h: Expr, rel: _Rel, aliases: Mapping[str, str]) -> Expr:
        def fix(node: Expr) -> Expr:
            alias = self.alias_named(node, aliases)
            if alias is not None:
                return Column(aliases[alias], pos=node.pos)
            if isinstance(node, Column):
                return Column(self.lookup(node, rel), pos=node.pos)
            return node

        return h.transform(fix)

    def alias_named(self, e: Expr, aliases: Iterable[str]) -> str | None:
        """The output alias an unqualified column reference names, if any (unquoted: any
        case; two aliases that differ only in case are ambiguous for neither's spelling)."""
        if not isinstance(e, Column) or e.table is not None:
            return None
        written, quoted = _column_path(e)[-1]
        hits = _pick(written, quoted, aliases)
        if len(hits) > 1:
            raise self.syntax(
                f"{written!r} is ambiguous: it matches the outputs {hits[0]!r} and "
                f"{hits[1]!r}; write the one you mean in double quotes",
                e.pos,
            )
        return hits[0] if hits else None

    # -- the release --------------------------------------------------------------------
    def release(
        self, s: q.Query, epsilon: Fraction, delta: Fraction, options: dict
    ) -> CompiledRelease:
        self.quantile_ci = options.get("quantile_ci") is True
        if isinstance(s, q.SetQuery):
            raise PrivacyError(
                "the outermost query must be one SELECT of noisy aggregates; put "
                "UNION / INTERSECT / EXCEPT inside a subquery: SELECT COUNT(*) FROM (... UNION ...)"
            )
        distinct = False
        if s.distinct:
            s, distinct = self.top_distinct(s)
        notes: list[str] = []
        s = self.normalized(s, notes)
        rel = self.from_item(s.from_)
        if rel.frame is None:
            raise PrivacyError(
                "this query reads only public tables; there is nothing private to release"
            )
        frame = self.query_unit(options, rel, rel.frame, notes)
        frame = self.where(s, rel, frame)
        s = dataclasses.replace(s, group_by=self.group_keys(s, rel))
        max_rows = options.get("max_rows_contributed")
        if max_rows is not None:
            if frame.privacy_unit is None:
                raise PrivacyError(
                    "OPTIONS max_rows_contributed bounds the rows of each privacy unit, but the "
                    "FROM clause has none: name it with privacy_unit_column = <column>"
                )
            frame = frame.bound_contributions(max_rows)

        # GROUP BY: public keys, possibly on computed expressions.
        key_exprs: list[Expr] = []
        key_cols: list[str] = []
        key_lists: list[list[Hashable] | None] = []
        assigns: dict[str, Expr] = {}
        for gk in s.group_by or ():
            e = self.resolve(gk.expr, rel)
            ctype = self.check(e, frame)
            col = e.name if isinstance(e, Column) else self.tmp("g")
            if not isinstance(e, Column):
                assigns[col] = e
            key_exprs.append(e)
            key_cols.append(col)
            key_lists.append(self.public_keys(gk, e, frame, rel, ctype, delta))
        if assigns:
            frame = frame.assign(assigns)

        # Outputs: group keys, or expressions over aggregate calls.
        calls: list[Call] = []

        def measure(e: Expr) -> Expr:
            """An output with aggregates, top-down: each aggregate becomes its measurement,
            each GROUP BY key its released key; any other column would be a raw value, and
            is refused here, before the charge (evaluated after it, it would fail there)."""

            def swap(node: Expr) -> Expr:
                if isinstance(node, Call) and node.name in AGGREGATE_FUNCTIONS:
                    self.check(self.stripped(node), frame, aggregates=True)
                    if node not in calls:
                        calls.append(node)
                    return Column(f"__m{calls.index(node)}")
                idx = next((i for i, ke in enumerate(key_exprs) if ke == node), None)
                if idx is not None:
                    return Column(f"__k{idx}")
                if isinstance(node, Column):
                    raise PrivacyError(
                        f"{node.to_sql()} next to an aggregate in SELECT is a raw column: the "
                        "outermost SELECT releases only noisy aggregates and GROUP BY keys; "
                        "wrap it in an aggregate or add it to GROUP BY"
                    )
                return node.map_children(swap)

            return swap(e)

        outputs: list[tuple[str, Expr]] = []
        aliases: dict[str, Expr] = {}
        for item in s.items:
            if isinstance(item.expr, q.Star):
                raise PrivacyError(
                    "SELECT * at the top would release raw rows: every output of the "
                    "outermost SELECT must be a noisy aggregate (COUNT, SUM, AVG, ...) or a "
                    "GROUP BY key"
                )
            e = self.resolve(item.expr, rel)
            name = item.alias or self.output_name(item.expr, rel)
            # Names, functions and argument counts first: an unknown function is a syntax
            # error wherever it appears, before any privacy question.
            self.check(self.stripped(e), frame, aggregates=True)
            if contains_aggregate(e):
                out = measure(e)
            else:
                idx = next((i for i, ke in enumerate(key_exprs) if ke == e), None)
                if idx is None and not e.columns():
                    # A constant (SELECT 1 AS one, 'x' AS tag): public, the same in every
                    # output row, so it reveals nothing and is charged nothing.
                    outputs.append((self.unique_output(name, outputs, item), e))
                    aliases[name] = e
                    continue
                if idx is None:
                    what = item.expr.to_sql()
                    raise PrivacyError(
                        f"SELECT {what}: the outermost SELECT releases only noisy aggregates "
                        "and GROUP BY keys; a raw value would reveal individual rows. Wrap it "
                        "in an aggregate or add it to GROUP BY"
                    )
                out = Column(f"__k{idx}")
            outputs.append((self.unique_output(name, outputs, item), out))
            aliases[name] = out

        def post(e: Expr) -> Expr:
            """HAVING / ORDER BY (top-down): aliases, keys and aggregates (measured if new)."""
            if isinstance(e, Call) and e.name in AGGREGATE_FUNCTIONS:
                resolved = self.resolve(e, rel)
                self.check(self.stripped(resolved), frame, aggregates=True)
                if resolved not in calls:
                    calls.append(resolved)
                return Column(f"__m{calls.index(resolved)}")
            if isinstance(e, Column):
                alias = self.alias_named(e, aliases)
                if alias is not None:
                    return aliases[alias]
                col = Column(self.lookup(e, rel), pos=e.pos)
                idx = next((i for i, ke in enumerate(key_exprs) if ke == col), None)
                if idx is None:
                    raise PrivacyError(
                        f"{e.to_sql()} in HAVING / ORDER BY is a raw column; use an aggregate, "
                        "a GROUP BY key or an output alias"
                    )
                return Column(f"__k{idx}")
            return e.map_children(post)

        having = post(s.having) if s.having is not None else None
        if having is not None:
            # HAVING COUNT(*) > '5': the literal is read as the aggregate's (or key's) type.
            types = {f"__m{i}": infer_type(c, frame.schema) for i, c in enumerate(calls)}
            types.update({f"__k{i}": infer_type(k, frame.schema) for i, k in enumerate(key_exprs)})
            having = read_untyped_literals(having, types, text=self.text)
        order_by = (
            tuple(
                q.OrderItem(self.ordinal(o.expr, outputs) or post(o.expr), o.descending, o.pos)
                for o in s.order_by
            )
            if s.order_by
            else None
        )
        # HAVING and ORDER BY run on the released values, after the charge: check them now
        # (an unknown function, a type error), so that their refusal spends nothing.
        released = {f"__m{i}": infer_type(c, frame.schema) for i, c in enumerate(calls)}
        released.update({f"__k{i}": infer_type(k, frame.schema) for i, k in enumerate(key_exprs)})
        spelled = {f"__m{i}": c.to_sql() for i, c in enumerate(calls)}
        spelled.update({f"__k{i}": k.to_sql() for i, k in enumerate(key_exprs)})

        def check_released(e: Expr, written: Expr, clause: str) -> str:
            try:
                return check_expression(e, released, text=self.text)
            except PinqSyntaxError as err:
                if not re.search(r"__[mk]\d", str(err)):
                    raise
                # A fault on a released value: say it in the query's own terms, at the clause.
                message = re.sub(r"__[mk]\d+", lambda m: spelled[m.group(0)], err.message)
                raise self.syntax(f"{clause} {written.to_sql()}: {message}", written.pos) from None

        if having is not None:
            assert s.having is not None
            ctype = check_released(having, s.having, "HAVING")
            if ctype not in ("bool", "any"):
                raise self.syntax(
                    f"HAVING needs a condition (true or false), but {s.having.to_sql()} is of "
                    f"type {ctype}; compare it with something, e.g. COUNT(*) > 10",
                    s.having.pos,
                )
        for item, written in zip(order_by or (), s.order_by or (), strict=True):
            if isinstance(item.expr, Expr):
                check_released(item.expr, written.expr, "ORDER BY")
        keys_only = not calls
        if keys_only:
            calls.append(self.keys_only(key_exprs, key_lists, options))

        specs = {c: split_bounds(c, self.text) for c in calls}
        frame, prepared_calls = self.contributions(
            frame, calls, specs, key_cols, options, bool(s.group_by), notes
        )
        if keys_only:  # the hidden selection count is not released: no note about its value
            hidden = calls[0].to_sql()
            notes[:] = [note for note in notes if not note.startswith(hidden)]
        stabilities = frame.stabilities()
        worst = max(stabilities.values())
        if worst == INF:
            unit = frame.privacy_unit
            hint = (
                f"register it with max_rows=k (at most k rows per {unit!r}), write OPTIONS "
                f"(max_rows_contributed = k), or GROUP BY {unit!r} in a subquery"
                if unit
                else "bound each person's rows (register the table with max_rows=k)"
            )
            raise PrivacyError(
                f"FROM: a user-level table's contributions are unbounded, so one person could "
                f"change any number of rows; {hint}"
            )
        s_frac = Fraction(worst)
        gaussian = str(options.get("noise", "laplace")).lower() == "gaussian"
        if gaussian and delta == 0:
            raise PrivacyError("OPTIONS (noise = 'gaussian') needs delta > 0")
        if gaussian and s_frac != 1:
            raise PrivacyError(
                "Gaussian noise in SQL needs a FROM clause of stability 1; use Laplace "
                "(the default) or bound the query's stability"
            )
        private_keys = any(k is None for k in key_lists)
        # COUNT(*) of a whole table whose row count is public is released free and exactly:
        # the query's epsilon is split among the other measurements only.
        public = sum(1 for c in calls if _public_count(prepared_calls[c], frame, key_cols))
        m = max(len(calls) - public, 1)
        selection_index = _selection_count(calls, prepared_calls) if private_keys else None
        # Key selection, when needed, is one more measurement of the split -- unless the
        # query asks for COUNT(*), whose noisy counts are then the selection's (one step).
        extra = 1 if (private_keys and selection_index is None) else 0
        eps_each = epsilon / ((m + extra) * s_frac)
        delta_for_noise = delta / 2 if (gaussian and private_keys) else delta
        delta_each = (delta_for_noise / m) if gaussian else None
        grouping = None
        target = None
        group_desc = ""
        key_selection = None
        target_lineage = None
        if key_cols:
            target_lineage = {AllParts(frame.partition_agent(tuple(key_cols))): Fraction(1)}
            keys_text = ", ".join(e.to_sql() for e in key_exprs)
            if private_keys:
                structure = key_structure(frame, tuple(key_cols))
                mech = _key_selection(
                    eps_each, delta, structure, gaussian, selection_index, delta_each
                )
                key_selection = (frame, tuple(key_cols), mech)
                if "privacy_unit_column" in options:
                    notes.append(
                        "groups: BigQuery keeps a group when a noisy count of its units passes "
                        "a threshold; pinqpy selects keys privately from the rows it reads "
                        "(one per unit and group when contributions are totalled per unit)"
                    )
                group_desc = f"GROUP BY {keys_text} (keys selected privately: {mech.describe()})"
            else:
                combos = list(itertools.product(*key_lists)) if len(key_lists) > 1 else key_lists[0]
                if len(combos) > MAX_GROUPS:
                    raise PrivacyError(
                        f"GROUP BY has {len(combos):,} key combinations; at most {MAX_GROUPS:,}"
                    )
                try:
                    keys_t = check_keys(combos, tuple(key_cols), frame.schema)
                except PinqError as err:
                    at = next((gk.keys[0].pos for gk in (s.group_by or ()) if gk.keys), None)
                    raise self.syntax(str(err), at) from None
                grouping = Grouping(tuple(key_cols), keys_t)
                target = (grouping, target_lineage)
                if "privacy_unit_column" in options:
                    notes.append(
                        f"groups: the keys of {keys_text} are public, so every group is released "
                        "(BigQuery would drop the groups with few units)"
                    )
                group_desc = f"GROUP BY {keys_text} ({len(keys_t)} public keys)"
        measurements = [
            Measurement(
                c,
                self.prepare(prepared_calls[c], frame, key_cols, eps_each, delta_each),
                c.to_sql(),
            )
            for c in calls
        ]
        return CompiledRelease(
            frame=frame,
            measurements=measurements,
            grouping=grouping,
            target=target,
            key_names=key_cols,
            outputs=outputs,
            having=having,
            order_by=order_by,
            limit=s.limit,
            epsilon=epsilon,
            delta=delta if gaussian else Fraction(0),
            stability=s_frac,
            per_measurement_epsilon=eps_each,
            group_desc=group_desc,
            key_selection=key_selection,
            target_lineage=target_lineage,
            notes=notes,
            selection_index=selection_index,
            keys_only=keys_only,
            distinct=distinct,
        )

    def top_distinct(self, s: q.Select) -> tuple[q.Select, bool]:
        """The outermost ``SELECT DISTINCT``: a query over released values, or a key release.

        With an aggregate or a GROUP BY, DISTINCT drops duplicate rows of the noisy answer:
        post-processing, which costs nothing and reads nothing more (the second value says
        so). Without either (``SELECT DISTINCT educ FROM t``), it asks which values occur: the
        same question as ``SELECT educ FROM t GROUP BY educ``, answered the same way (see
        :meth:`keys_only`). ``SELECT DISTINCT *`` would release raw rows and is refused.
        """
        if any(isinstance(it.expr, q.Star) for it in s.items):
            raise PrivacyError(
                "SELECT DISTINCT * at the top would release raw rows; write SELECT "
                "<columns> FROM t GROUP BY <columns>, or aggregate outside a subquery"
            )
        if s.group_by or any(contains_aggregate(it.expr) for it in s.items):  # type: ignore[arg-type]
            return s, True
        keys = tuple(q.GroupKey(it.expr, pos=it.pos) for it in s.items)  # type: ignore[arg-type]
        return dataclasses.replace(s, group_by=keys, distinct=False), False

    def keys_only(
        self,
        key_exprs: list[Expr],
        key_lists: list[list[Hashable] | None],
        options: Mapping[str, object],
    ) -> Call:
        """The measurement of a query that releases only its GROUP BY keys.

        ``SELECT educ FROM t GROUP BY educ`` (SmartNoise's tests and documentation write it)
        asks which keys occur. When the keys are not public, that set is itself private and
        is released by pinqpy's private key selection: a noisy COUNT(*) per key, thresholded.
        The selection is the query's one measurement, charged the query's epsilon (and delta);
        the noisy counts are not output -- dropping them is post-processing. When every key is
        public, the answer is known without reading the data, so nothing private is asked and
        the query is refused rather than charged for nothing: pinqpy releases every public
        key whether or not it occurs, so the keys alone would say nothing about the rows.
        """
        if not key_exprs:
            raise PrivacyError(
                "the query releases no aggregate: the outermost SELECT needs at least one "
                "noisy aggregate such as COUNT(*)"
            )
        keys_text = ", ".join(e.to_sql() for e in key_exprs)
        if all(k is not None for k in key_lists):
            raise PrivacyError(
                f"the query releases only the values of {keys_text} (its GROUP BY or SELECT "
                "DISTINCT keys), and they are public (declared keys, an IN list, a public "
                "table or bounds): pinqpy releases every public key, whether it occurs or "
                "not, so the keys alone say nothing; add an aggregate such as COUNT(*) (and "
                "HAVING COUNT(*) > t to keep the keys that occur)"
            )
        if "privacy_unit_column" in options or "max_groups_contributed" in options:
            # BigQuery's meaning: a group is kept by a noisy count of its units, each unit
            # counted once in each of the (at most max_groups_contributed) groups it keeps.
            once = NamedArg(PER_GROUP, (Literal(0), Literal(1)), pair=True)
            return Call("COUNT", (once,), star=True)
        return Call("COUNT", (), star=True)

    def ordinal(self, e: Expr, outputs: list[tuple[str, Expr]]) -> Expr | None:
        """``ORDER BY 2``: the second output (PostgreSQL), or None if ``e`` is no position."""
        if not (isinstance(e, Literal) and type(e.value) is int):
            return None
        if not 1 <= e.value <= len(outputs):
            raise self.syntax(
                f"ORDER BY {e.value}: the SELECT list has {len(outputs)} output(s); a position "
                "counts them from 1",
                e.pos,
            )
        return outputs[e.value - 1][1]

    def unique_output(self, name: str, outputs: list[tuple[str, Expr]], item: q.SelectItem) -> str:
        if any(n == name for n, _ in outputs):
            raise self.syntax(f"two outputs are named {name!r}; use AS", item.pos)
        return name

    # -- BigQuery's differential-privacy clause ------------------------------------------
    def normalized(self, s: q.Select, notes: list[str]) -> q.Select:
        """``s`` with ZetaSQL's ANON_ spellings read as pinqpy's aggregates."""

        def fix(e: Expr) -> Expr:
            # Too deep an expression is refused by resolve() with its own message.
            return e if depth(e) > MAX_DEPTH else normalize_call(e, self.text, notes)

        return dataclasses.replace(
            s,
            items=tuple(
                it if isinstance(it.expr, q.Star) else dataclasses.replace(it, expr=fix(it.expr))
                for it in s.items
            ),
            having=None if s.having is None else fix(s.having),
            order_by=None
            if s.order_by is None
            else tuple(dataclasses.replace(o, expr=fix(o.expr)) for o in s.order_by),
        )

    def stripped(self, e: Expr) -> Expr:
        """``e`` with the named arguments of its calls checked and taken out."""

        def fix(node: Expr) -> Expr:
            return split_bounds(node, self.text)[0] if isinstance(node, Call) else node

        return e.transform(fix)

    def query_unit(
        self, options: Mapping[str, object], rel: _Rel, frame: Relation, notes: list[str]
    ) -> Relation:
        """The FROM clause with the query's ``privacy_unit_column``, if the query names one.

        A user-level table keeps its own unit; naming another is refused. A row-level table
        read directly becomes user-level on the named column for this query, since each of
        its rows still belongs to exactly one value of that column. The table's budget
        protects rows, not units: a row changed is its unit leaving and coming back with one
        row fewer, two changes of a unit, so a query that is ``s·epsilon``-DP per unit is
        ``2·s·epsilon``-DP per row (group privacy). The view therefore draws on the budget
        at twice its stability (:class:`~pinqpy.accounting.agents.Scaled`), so each
        mechanism is charged its own ``charge.at(2·s)`` (a key selection keeps the delta of
        its threshold: a unit's old and new rows each have at most its G keys, and a key
        only one side has passes with probability at most delta), and EXPLAIN shows the
        doubled stability.
        """
        raw = options.get("privacy_unit_column")
        if "privacy_unit_column" not in options:
            return frame
        at = option_pos(self.text, "privacy_unit_column", value=True)
        if not isinstance(raw, str):
            raise self.syntax("privacy_unit_column names a column: privacy_unit_column = id", at)
        table, _, name = raw.rpartition(".")
        col = self.lookup(Column(name, table or None), rel, at)
        if frame.privacy_unit == col:
            return frame
        if frame.privacy_unit is not None:
            raise PrivacyError(
                f"OPTIONS privacy_unit_column = {raw}: the FROM clause's privacy unit is "
                f"{frame.privacy_unit!r}, declared when its table was registered; a query can "
                "only name that unit"
            )
        plan = frame.plan
        if not (isinstance(plan, Source) and plan.table.privacy_unit is None):
            raise PrivacyError(
                f"OPTIONS privacy_unit_column = {raw}: the FROM clause no longer carries a "
                "privacy unit (a subquery, join or set operation made its column a computed "
                "one); name the unit of a table read directly, or register the table with "
                "privacy_unit=..."
            )
        budget = frame.catalog.agent(plan.table.agent)
        agent = Scaled(budget, Fraction(2))
        table_ref = dataclasses.replace(plan.table, privacy_unit=col, agent=agent_name(agent))
        notes.append(
            f"privacy_unit_column = {col}: {plan.table.name} is registered with one row per "
            "person, so pinqpy charges twice the per-unit cost (a changed row is its unit "
            "leaving and coming back)"
        )
        return Relation(Source(table_ref), frame.catalog.with_agent(table_ref.agent, agent))

    def contributions(
        self,
        frame: Relation,
        calls: list[Call],
        specs: Mapping[Call, tuple[Call, Contribution | None]],
        key_cols: list[str],
        options: Mapping[str, object],
        grouped: bool,
        notes: list[str],
    ) -> tuple[Relation, dict[Call, Call]]:
        """The relation the release reads and, for each call, the aggregate computed on it.

        With a privacy unit and BigQuery's per-unit semantics (a ``privacy_unit_column`` or
        ``max_groups_contributed`` option, a ``contribution_bounds_per_group``, or
        ``COUNT(DISTINCT unit)``), each aggregate is computed per unit and group first,
        clamped, then added up (:meth:`per_unit_release`). Otherwise the rows are read as
        they are, and a per-row bound is pinqpy's inline ``(lo, hi)``. An aggregate of rows
        (PERCENTILE, MEDIAN, VARIANCE, ...) under ``max_groups_contributed = G`` reads
        ``bound_groups(by, G, k)`` with k the rows a unit may have in all (a unit has no more
        rows in one group than in all), which a GROUP BY on ``by`` charges as G parts at
        stability k; without a bound on a unit's rows it is refused.
        """
        unit = frame.privacy_unit
        plain_calls = {c: self.with_row_bounds(c, *specs[c], unit) for c in calls}
        if unit is None:
            return frame, plain_calls
        group_bound = any(b is not None and b.kind == "group" for _, b in specs.values())
        distinct_unit = [c for c, (p, _) in specs.items() if self.counts_units(p, unit)]
        per_unit_wanted = (
            group_bound
            or bool(distinct_unit)
            or "privacy_unit_column" in options
            or options.get("max_groups_contributed") is not None
        )
        if not per_unit_wanted:
            return frame, plain_calls
        rows = [c for c, (p, _) in specs.items() if p.name in ROW_AGGREGATES or p.distinct]
        rows = [c for c in rows if c not in distinct_unit]
        if not rows:
            return self.per_unit_release(frame, calls, specs, key_cols, options, notes)
        if group_bound or distinct_unit:
            other = next(c for c in calls if c not in rows)
            raise PrivacyError(
                f"{rows[0].to_sql()} is computed over rows and {other.to_sql()} over each "
                "unit's total in a group; pinqpy releases one or the other in a query: split "
                "it in two"
            )
        groups = self.groups_per_unit(frame, options, key_cols, notes)
        if not grouped or groups is None:
            return frame, plain_calls
        k = self.rows_per_unit(frame)
        bound_groups = getattr(frame, "bound_groups", None)
        if bound_groups is None or k == INF:
            raise PrivacyError(
                f"{rows[0].to_sql()} with max_groups_contributed: pinqpy computes it over "
                "rows and needs the rows of each unit bounded; write OPTIONS "
                "(max_rows_contributed = k) instead of max_groups_contributed"
            )
        notes.append(
            f"{rows[0].to_sql()} is computed over rows: each unit keeps at most {groups} "
            f"group(s) and at most {k} rows in each (its rows in all), chosen at random"
        )
        return bound_groups(tuple(key_cols), groups, int(k)), plain_calls

    @staticmethod
    def counts_units(call: Call, unit: str | None) -> bool:
        """Whether ``call`` is ``COUNT(DISTINCT unit)``."""
        return (
            call.name == "COUNT"
            and call.distinct
            and len(call.args) == 1
            and isinstance(call.args[0], Column)
            and call.args[0].name == unit
        )

    def with_row_bounds(
        self, call: Call, plain: Call, bound: Contribution | None, unit: str | None
    ) -> Call:
        """``plain`` with a bound that reads rows as they are written inline (lo, hi).

        A per-group bound on a table with one row per person is the same per-row bound: a
        person's total in a group is their one row's value. For COUNT it clamps that row's
        count of 1, which only a bound excluding 1 would change.
        """
        if bound is None or (bound.kind == "group" and unit is not None):
            return plain
        if plain.name == "COUNT":
            if not bound.lo <= 1 <= bound.hi:
                raise self.syntax(
                    f"{PER_GROUP} of COUNT on a table with one row per person must include 1 "
                    "(each person's count in a group is 1)",
                    bound.pos,
                )
            return plain
        return Call(plain.name, (*plain.args, literal(bound.lo), literal(bound.hi)), pos=call.pos)

    def rows_per_unit(self, frame: Relation) -> Fraction | float:
        """How many rows one unit of the FROM clause can have (its stability per unit)."""
        unit = frame.meta.unit
        if unit is None:
            return INF
        return lineage_of(frame.plan).get(unit[1].agent, INF)

    def groups_per_unit(
        self,
        frame: Relation,
        options: Mapping[str, object],
        key_cols: list[str],
        notes: list[str],
    ) -> int | None:
        """``max_groups_contributed``: as given, BigQuery's default 1 when the query names its
        privacy unit, and None (no group bound: a unit with at most k rows meets at most k
        groups) when the option is NULL, when ``max_rows_contributed`` bounds the rows, or
        when the query is pinqpy's own."""
        if "max_groups_contributed" in options:
            value = options["max_groups_contributed"]
            return None if value is None else int(value)  # type: ignore[call-overload]
        if "privacy_unit_column" in options and "max_rows_contributed" not in options:
            if key_cols:
                notes.append(
                    "max_groups_contributed is BigQuery's default 1: each unit keeps one "
                    "group of the GROUP BY, chosen at random"
                )
            return 1
        return None

    def per_unit_release(
        self,
        frame: Relation,
        calls: list[Call],
        specs: Mapping[Call, tuple[Call, Contribution | None]],
        key_cols: list[str],
        options: Mapping[str, object],
        notes: list[str],
    ) -> tuple[Relation, dict[Call, Call]]:
        """BigQuery's semantics with pinqpy's stable transformations.

        1. Group by the unit and the GROUP BY keys: one row per unit and group, holding the
           unit's exact contribution to the group (its row count, its sum, its average).
        2. Keep at most G of each unit's rows, chosen at random (``max_groups_contributed``;
           without it, the k rows a unit may have can meet at most k groups, so G = k keeps
           every row). Every row still carries one unit, so bounding contributions to G rows
           has stability G whatever came before (:mod:`pinqpy.plan.stability`). Without a
           GROUP BY the grouping by the unit alone has stability 1.
        3. Release the clamped sum (or mean) of those contributions per group: a unit adds
           one value within ``contribution_bounds_per_group`` to each of at most G groups.

        ``COUNT(DISTINCT unit)`` is the count of those rows: removing a unit removes exactly
        one row from each of its (at most G) groups, so it needs no row bound at all.
        """
        unit = frame.privacy_unit
        assert unit is not None
        k = self.rows_per_unit(frame)
        aggs: dict[str, Expr] = {}
        outer: dict[Call, Call] = {}
        for c in calls:
            plain, bound = specs[c]
            if self.counts_units(plain, unit):
                outer[c] = Call("COUNT", (), star=True)
                continue
            if len(plain.args) == 3:  # pinqpy's inline bounds clamp rows
                lo_hi = [self.const(a, plain) for a in plain.args[1:]]
                bound = Contribution("row", float(lo_hi[0]), float(lo_hi[1]), plain.pos)
                plain = Call(plain.name, plain.args[:1], pos=plain.pos)
            inner, outer_name = per_unit(plain, bound)
            lo, hi = self.unit_bounds(c, plain, bound, frame, k, notes)
            if plain.name == "COUNT":
                notes.append(
                    f"{c.to_sql()}: a sum of each unit's clamped count, released as a number "
                    "(BigQuery rounds it to an integer)"
                )
            name = self.tmp("u")
            aggs[name] = inner
            outer[c] = Call(outer_name, (Column(name), literal(lo), literal(hi)), pos=c.pos)
        keys = [unit, *[col for col in key_cols if col != unit]]
        per = frame.aggregate(frame.group_keys(keys), aggs)
        if key_cols:
            groups = self.groups_per_unit(frame, options, key_cols, notes)
            if groups is None:
                if k == INF:
                    raise PrivacyError(
                        "FROM: a user-level table's contributions are unbounded, so one unit "
                        "could add to any number of groups; give OPTIONS "
                        "(max_groups_contributed = G) or (max_rows_contributed = k)"
                    )
                groups = int(k)
            per = per.bound_contributions(groups)
        return per, outer

    def unit_bounds(
        self,
        call: Call,
        plain: Call,
        bound: Contribution | None,
        frame: Relation,
        k: Fraction | float,
        notes: list[str],
    ) -> tuple[float, float]:
        """The clamp of a unit's contribution to a group: ``contribution_bounds_per_group``,
        or public bounds it cannot exceed. BigQuery would otherwise choose bounds from the
        data (spending part of epsilon); pinqpy never reads bounds off the data."""
        if bound is not None and bound.kind == "group":
            return bound.lo, bound.hi
        if plain.name == "COUNT":
            lo_hi: tuple[float, float] | None = (0.0, 1.0)
            why = "a count of rows"
        else:
            lo_hi = (bound.lo, bound.hi) if bound is not None else None
            why = f"each row clamped by {PER_ROW}" if lo_hi else "the values' bounds"
            lo_hi = lo_hi or derive_bounds(plain.args[0], frame.bounds)
        if lo_hi is None:
            raise PrivacyError(
                f"{call.to_sql()} needs bounds: write {plain.name}(..., {PER_GROUP} => (lo, "
                "hi)) (each unit's total in a group clamped to [lo, hi]). Bounds are never "
                "read off the data"
            )
        lo, hi = lo_hi
        if plain.name != "AVG":  # a total of up to k rows
            if k == INF:
                raise PrivacyError(
                    f"{call.to_sql()} needs {PER_GROUP} => (lo, hi): the rows of a unit are "
                    "not bounded, so neither is its total (or give OPTIONS "
                    "(max_rows_contributed = k))"
                )
            lo, hi = float(k) * min(lo, 0.0), float(k) * max(hi, 0.0)
            why += f" times {k} rows per unit"
        notes.append(
            f"{call.to_sql()}: no {PER_GROUP}; BigQuery would pick bounds from the data, "
            f"pinqpy clamps each unit's contribution to the public [{lo:g}, {hi:g}] ({why})"
        )
        return lo, hi

    def public_keys(
        self, gk: q.GroupKey, e: Expr, frame: Relation, rel: _Rel, ctype: str, delta: Fraction
    ) -> list[Hashable] | None:
        if gk.keys is not None:
            values = []
            for k in gk.keys:
                v = constant_value(k)
                if v is _NOT_CONSTANT:
                    raise self.syntax("GROUP BY ... IN (...) needs constant keys", k.pos)
                values.append(v)
            return values
        if isinstance(e, Column) and e.name in rel.public_values:
            table, column = rel.public_values[e.name]
            return table[column].drop_duplicates().tolist()
        found = derive_keys(e, frame.keys, frame.bounds, frame.schema)
        if found is not None:
            return list(found)
        if delta > 0:
            return None  # selected privately at run time (noisy thresholding spends delta)
        fix = (
            "declare keys on the table, join a public table of keys, or give the query a "
            "delta (delta= or OPTIONS (delta = 1e-6))"
        )
        col = e.name if isinstance(e, Column) else "COLUMN"
        raise PrivacyError(
            f"GROUP BY {e.to_sql()}: its keys are not public, and reading them off the data "
            "would reveal who is in it. Give the keys inline (GROUP BY "
            f"{e.to_sql()} IN ('a', 'b')), {fix} so that keys are selected privately",
            hints={
                "python": fix,
                "magic": "declare keys on the table, join a public table of keys, or give "
                "the query a delta (-d 1e-6 or OPTIONS (delta = 1e-6))",
                "shell": f"start the shell with --keys {col}=K1,K2,..., join a public table "
                "of keys (--public NAME=PATH), or give the query a delta (.delta 1e-6 or "
                "OPTIONS (delta = 1e-6), with a delta budget: --delta D)",
                "cli": f"pass --keys {col}=K1,K2,..., join a public table of keys (--public "
                "NAME=PATH), or give the query a delta (--delta-per-query 1e-6 or OPTIONS "
                "(delta = 1e-6), with a delta budget: --delta D)",
            },
        )

    def prepare(
        self,
        call: Call,
        frame: Relation,
        key_cols: list[str],
        eps: Fraction,
        delta: Fraction | None,
    ) -> Prepared:
        name = canonical_aggregate(call.name)
        args = call.args
        whole = not key_cols  # a public row count is the whole table's, never a group's
        if name == "COUNT":
            if call.star:
                return prepare_count(frame, eps, delta, whole=whole)
            arg = args[0]
            if call.distinct:
                col = arg.name if isinstance(arg, Column) else self.tmp("d")
                base = frame if isinstance(arg, Column) else frame.assign({col: arg})
                base = base.select(dict.fromkeys([*key_cols, col]), {}).distinct()
                return prepare_count(base.where(IsNull(Column(col), negated=True)), eps, delta)
            return prepare_count(frame.where(IsNull(arg, negated=True)), eps, delta)
        value = args[0]
        extra = [self.const(a, call) for a in args[1:]]
        if name in ("PERCENTILE", "QUANTILE"):
            q_level, extra = extra[0], extra[1:]
        cands = self.key_candidates(name, value, frame, extra)
        bounds = None if cands is not None else self.bounds(call, value, frame, extra)
        if name == "SUM":
            return prepare_sum(frame, value, eps, bounds, delta, whole=whole)
        if name == "AVG":
            return prepare_mean(frame, value, eps, bounds, delta, whole=whole)
        if name in ("VARIANCE", "STDDEV", "VAR_POP", "STDDEV_POP"):
            # VARIANCE/STDDEV (and VAR, VAR_SAMP, STD, STDDEV_SAMP) are the sample forms, as
            # in SQL; the _POP forms divide by n. The same noisy count, sum and sum of squares
            # serve both (post-processing), so the charge is the same.
            return prepare_variance(
                frame,
                value,
                eps,
                bounds,
                delta,
                stddev=name in ("STDDEV", "STDDEV_POP"),
                ddof=0 if name.endswith("_POP") else 1,
                whole=whole,
            )
        self.no_delta(call, delta)
        if name == "MEDIAN":
            return prepare_quantile(
                frame, value, 0.5, eps, bounds, cands, self.quantile_ci, whole=whole
            )
        if name in ("PERCENTILE", "QUANTILE"):
            if not isinstance(q_level, int | float) or not 0 <= q_level <= 1:
                raise self.syntax(f"{name}'s level must be a number between 0 and 1", call.pos)
            return prepare_quantile(
                frame, value, q_level, eps, bounds, cands, self.quantile_ci, whole=whole
            )
        if name in ("MIN", "MAX"):
            return prepare_quantile(
                frame,
                value,
                MIN_Q if name == "MIN" else MAX_Q,
                eps,
                bounds,
                cands,
                self.quantile_ci,
                whole=whole,
            )
        raise self.syntax(f"{name} is not a noisy aggregate pinqpy can release", call.pos)

    def no_delta(self, call: Call, delta: Fraction | None) -> None:
        if delta is not None:
            raise PrivacyError(
                f"{call.name} uses the exponential mechanism and cannot take Gaussian noise; "
                "drop OPTIONS (noise = 'gaussian')"
            )

    def const(self, e: Expr, call: Call) -> Any:
        v = constant_value(e)
        if v is _NOT_CONSTANT:
            raise self.syntax(f"{call.name}'s extra arguments must be constants", e.pos or call.pos)
        return v

    def key_candidates(
        self, name: str, value: Expr, frame: Relation, extra: list[Any]
    ) -> list[float] | None:
        """A quantile's candidates from the column's declared public keys, when it has no
        bounds (inline or declared) and its keys are at least two numbers.

        Declared keys are public (the table's registration, not its rows), so they may serve
        as the exponential mechanism's candidate grid; their least and greatest values bound
        the answer (:func:`pinqpy.pipeline.prepare.prepare_quantile`). Bounds, when known,
        keep their meaning and their grid.
        """
        if name not in ("MEDIAN", "PERCENTILE", "QUANTILE", "MIN", "MAX") or extra:
            return None
        if not isinstance(value, Column) or derive_bounds(value, frame.bounds) is not None:
            return None
        keys = frame.keys.get(value.name)
        if not keys:
            return None
        nums = [
            float(k)
            for k in keys
            if isinstance(k, numbers.Real) and not isinstance(k, bool) and math.isfinite(k)
        ]
        if len(nums) != len(keys) or len(set(nums)) < 2:
            return None
        return nums

    def bounds(
        self, call: Call, value: Expr, frame: Relation, extra: list[Any]
    ) -> tuple[float, float]:
        if len(extra) == 2:
            lo, hi = extra
            if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in (lo, hi)):
                raise self.syntax(f"{call.name}'s bounds must be numbers", call.pos)
            if lo > hi:
                raise self.syntax(
                    f"{call.name}'s bounds have lo > hi; write them as lo, hi", call.pos
                )
            return (float(lo), float(hi))
        if extra:
            raise self.syntax(f"{call.name} takes both bounds or neither", call.pos)
        found = derive_bounds(value, frame.bounds)
        if found is None:
            fix = "declare them for the column when registering the table"
            if isinstance(value, Column):
                flag = f"--bounds {value.name}=LO:HI"
                python = f"bounds={{{value.name!r}: (lo, hi)}}"
            else:
                flag = "--bounds COLUMN=LO:HI for the columns it is computed from"
                python = "bounds={'COLUMN': (lo, hi)}"
            raise PrivacyError(
                f"{call.name}({value.to_sql()}) needs bounds: {fix}, or write them inline: "
                f"{call.name}({value.to_sql()}, lo, hi). Bounds are never read off the data",
                hints={
                    "python": fix,
                    "magic": f"declare them when registering the table ({python})",
                    "shell": f"start the shell with {flag}",
                    "cli": f"pass {flag}",
                },
            )
        return found


def _public_count(call: Call, frame: Relation, key_cols: list[str]) -> bool:
    """Whether ``call`` is a COUNT(*) of the whole frame over a public row count (released
    exactly, charged nothing: :func:`~pinqpy.pipeline.prepare.prepare_count`)."""
    return (
        not key_cols
        and canonical_aggregate(call.name) == "COUNT"
        and call.star
        and not call.distinct
        and frame.meta.size is not None
    )


def _selection_count(calls: list[Call], prepared: Mapping[Call, Call]) -> int | None:
    """The index of the measured call whose exact value per key is the key selection's count
    (the rows of the released relation with that key), if the query asks for one.

    The selection counts the rows of the relation the aggregates read, so a call qualifies
    when the aggregate computed on that relation (``prepared``) is exactly that count:

    * ``COUNT(*)`` of its rows (a plain COUNT(*); under BigQuery's per-unit semantics,
      ``COUNT(DISTINCT unit)``, the count of the unit's rows per group);
    * under per-unit semantics, a ``COUNT(*)`` whose per-unit count is clamped to ``[lo, 1]``:
      every unit that has a row in a group counts at least 1 there, so each clamped count is
      exactly 1 and their sum is the count of per-unit rows. With any other upper bound
      (``contribution_bounds_per_group => (0, 5)``, or the ``(0, k)`` derived from
      ``max_rows_contributed = k``) it is a sum of counts up to that bound, not the
      selection's count of units, and is measured on its own.
    """
    for i, c in enumerate(calls):
        p = prepared[c]
        if p.name == "COUNT" and p.star and not p.distinct:
            return i
        if (
            c.name == "COUNT"
            and c.star
            and not c.distinct
            and p.name == "SUM"
            and len(p.args) == 3
            and _constant_number(p.args[2]) == 1
            and (_constant_number(p.args[1]) is not None)
        ):
            return i
    return None


def _constant_number(e: Expr) -> float | None:
    """A numeric literal's value, else None."""
    v = constant_value(e)
    if isinstance(v, numbers.Real) and not isinstance(v, bool):
        return float(v)
    return None


def _key_selection(
    eps_each: Fraction,
    delta: Fraction,
    structure: tuple[int, int],
    gaussian: bool,
    selection_index: int | None,
    delta_each: Fraction | None,
) -> KeySelectionMechanism:
    """The private key selection of a GROUP BY (:mod:`pinqpy.noise.keyselect`).

    Noise of a count at ``eps_each`` per row, threshold for a unit of the FROM clause with
    ``structure = (G, k)`` (:func:`pinqpy.pipeline.run.key_structure`: at most ``G`` keys of
    at most ``k`` rows; ``G = k = ceil(s)`` for stability ``s`` with no more known), so the
    charge at stability ``s`` is ``(s·eps_each, delta)`` for the Laplace: one measurement's
    epsilon share and the whole delta. With ``noise = 'gaussian'`` (stability 1) half of
    delta is the threshold's, and the other half is split over the Gaussian measurements;
    when the selection is the query's COUNT(*) its noise is that COUNT(*)'s discrete Gaussian
    (its ``delta_each``), so the total stays ``delta``. Without a COUNT(*) the selection keeps
    Laplace noise (its counts are not released).

    A query with COUNT(*) releases the selection's noisy counts as that COUNT(*): a
    post-processing of the selection, so the split has ``m`` measurements, not ``m + 1``.
    Other aggregates (SUM, AVG, ...) are measured on the released keys with their own share.
    AVG keeps its own count: the mean mechanism's guarantees (its split of epsilon between a
    sum and an independent, unbiased count; its clamping into the bounds and its intervals)
    assume that count's noise, while a selection count is biased upward near the threshold
    (it passed because its noise was high) and carries the per-query share, not half of the
    AVG's; using it would change what the mean's intervals state.
    """
    g, k = structure
    if gaussian:
        noise_delta = delta_each if selection_index is not None else None
        return KeySelectionMechanism(
            eps_each, delta / 2, max_groups=g, max_rows=k, noise_delta=noise_delta
        )
    return KeySelectionMechanism(eps_each, delta, max_groups=g, max_rows=k)


def option_pos(text: str, name: str, value: bool = False) -> Pos | None:
    """Where an option's name (or value) is written inside OPTIONS (...)."""
    import re

    name_re = re.escape(name)
    if value:
        return locate(text, rf"\bOPTIONS\s*\([^)]*?\b{name_re}\s*=\s*([^,)\s]+)", None, 1)
    return locate(text, rf"\bOPTIONS\s*\([^)]*?\b({name_re})\s*=", None, 1)


def _positioned(err: PinqError, text: str, name: str) -> PinqSyntaxError:
    pos = option_pos(text, name, value=True)
    if pos is None:
        return PinqSyntaxError(str(err), text=text)
    return PinqSyntaxError(str(err), text=text, line=pos.line, column=pos.column)


def resolve_budget(
    epsilon: object, delta: object, options: Mapping[str, object]
) -> tuple[Fraction, Fraction]:
    """The query's total (epsilon, delta), from the arguments or OPTIONS (if both, equal)."""
    eps_opt = options.get("epsilon")
    if epsilon is None and eps_opt is None:
        fix = "pass epsilon= to sql() or write OPTIONS (epsilon = 0.5)"
        raise PrivacyError(
            f"the query needs an epsilon: {fix}",
            hints={
                "python": fix,
                "magic": "pass -e E or write OPTIONS (epsilon = 0.5)",
                "shell": "set .epsilon E or write OPTIONS (epsilon = 0.5)",
                "cli": "pass --epsilon E or write OPTIONS (epsilon = 0.5)",
            },
        )
    if epsilon is not None and eps_opt is not None and to_fraction(epsilon) != to_fraction(eps_opt):
        raise PrivacyError("epsilon is given twice, as an argument and in OPTIONS, differently")
    eps = check_epsilon(epsilon if epsilon is not None else eps_opt, "epsilon")
    dlt_opt = options.get("delta")
    dlt_raw = delta if delta is not None else dlt_opt
    if delta is not None and dlt_opt is not None and to_fraction(delta) != to_fraction(dlt_opt):
        raise PrivacyError("delta is given twice, as an argument and in OPTIONS, differently")
    dlt = Fraction(0) if dlt_raw in (None, 0) else check_delta(dlt_raw, "delta")
    return eps, dlt


KNOWN_OPTIONS = {
    "epsilon",
    "delta",
    "noise",
    "privacy_unit_column",
    "max_groups_contributed",
    "max_rows_contributed",
    "quantile_ci",
}


def compile_release(
    catalog: Catalog, statement: q.Query, text: str, epsilon: object, delta: object
) -> CompiledRelease:
    options = dict(statement.options)
    for name in options:
        if name not in KNOWN_OPTIONS:
            pos = option_pos(text, name)
            raise PinqSyntaxError(
                f"unknown option {name!r}; known: {', '.join(sorted(KNOWN_OPTIONS))}",
                text=text,
                line=pos.line if pos else None,
                column=pos.column if pos else None,
            )
    noise = options.get("noise")
    if noise is not None and str(noise).lower() not in ("laplace", "gaussian"):
        raise _positioned(PinqError("OPTIONS noise must be 'laplace' or 'gaussian'"), text, "noise")
    for name in ("max_groups_contributed", "max_rows_contributed"):
        value = options.get(name)
        whole = isinstance(value, int) and not isinstance(value, bool)
        if value is not None and not (whole and value >= 1):  # type: ignore[operator]
            raise _positioned(
                PinqError(f"OPTIONS {name} must be a positive whole number (or NULL)"), text, name
            )
    if "quantile_ci" in options and not isinstance(options["quantile_ci"], bool):
        raise _positioned(
            PinqError("OPTIONS quantile_ci must be true or false"), text, "quantile_ci"
        )
    if "max_groups_contributed" in options and "max_rows_contributed" in options:
        pos = option_pos(text, "max_rows_contributed")
        raise PinqSyntaxError(
            "OPTIONS max_groups_contributed and max_rows_contributed exclude each other (as in "
            "BigQuery): bound either the groups or the rows of each unit",
            text=text,
            line=pos.line if pos else None,
            column=pos.column if pos else None,
        )
    try:
        eps, dlt = resolve_budget(epsilon, delta, options)
    except PrivacyError:
        raise
    except PinqError as err:
        which = "delta" if "delta" in str(err) else "epsilon"
        if which in options:
            raise _positioned(err, text, which) from None
        raise
    # The compiler names its scratch columns with the reserved prefix, which the query text
    # itself may not use (the parser refuses such aliases), so they never meet a user's.
    with internal_names():
        return _Compiler(catalog, text).release(statement, eps, dlt, options)
