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

import itertools
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pandas as pd

from pinqpy.accounting.agents import AllParts
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
    Pos,
    contains_aggregate,
    depth,
)
from pinqpy.expr.bounds import derive_bounds, derive_keys
from pinqpy.expr.check import _NOT_CONSTANT, check_expression, constant_value
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
from pinqpy.plan.grouping import Grouping
from pinqpy.plan.meta import check_keys, internal_names
from pinqpy.plan.stability import INF
from pinqpy.sql import ast as q

__all__ = ["Catalog", "CompiledRelease", "Measurement", "compile_release"]

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
    # The measurement (a COUNT(*) of the release frame) whose released values are the key
    # selection's noisy counts; it is not charged or measured separately.
    selection_index: int | None = None


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


class _Compiler:
    def __init__(self, catalog: Catalog, text: str):
        self.catalog = catalog
        self.text = text
        self._tmp = itertools.count()

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
        if item.name in self.catalog.private:
            frame = self.catalog.private[item.name]
            return _Rel(frame, scopes={alias: {c: c for c in frame.columns}}, describe=item.name)
        if item.name in self.catalog.public:
            df = self.catalog.public[item.name]
            return _Rel(None, public=df, scopes={alias: {str(c): str(c) for c in df.columns}})
        import difflib

        names = list(self.catalog.private) + list(self.catalog.public)
        hint = difflib.get_close_matches(item.name, names, n=1)
        extra = f"; did you mean {hint[0]!r}?" if hint else ""
        raise self.syntax(f"unknown table {item.name!r}{extra}", item.pos)

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
        return _Rel(frame, scopes=scopes, public_values=public_values, describe="join")

    def join_keys(self, j: q.Join, left: _Rel, right: _Rel) -> list[tuple[str, str]]:
        if j.using is not None:
            pairs = []
            for c in j.using:
                lc = self.lookup(Column(c), left, j.pos)
                rc = self.lookup(Column(c), right, j.pos)
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
        if c.table is not None:
            scope = rel.scopes.get(c.table)
            return None if scope is None else scope.get(c.name)
        found = {scope[c.name] for scope in rel.scopes.values() if c.name in scope}
        if len(found) == 1:
            return found.pop()
        return None

    def lookup(self, c: Column, rel: _Rel, pos: Pos | None = None) -> str:
        pos = c.pos or pos
        if c.table is not None:
            if c.table not in rel.scopes:
                raise self.syntax(f"unknown table or alias {c.table!r}", pos)
            scope = rel.scopes[c.table]
            if c.name not in scope:
                raise self.syntax(self._unknown(c.name, scope), pos)
            return scope[c.name]
        found = {scope[c.name] for scope in rel.scopes.values() if c.name in scope}
        if not found:
            every = {k: v for s in rel.scopes.values() for k, v in s.items()}
            raise self.syntax(self._unknown(c.name, every), pos)
        if len(found) > 1:
            raise self.syntax(
                f"column {c.name!r} is ambiguous: qualify it with its table (t.{c.name})", pos
            )
        return found.pop()

    @staticmethod
    def _unknown(name: str, scope: Mapping[str, str]) -> str:
        import difflib

        hint = difflib.get_close_matches(name, list(scope), n=1)
        return f"unknown column {name!r}" + (f"; did you mean {hint[0]!r}?" if hint else "")

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

        return e.transform(fix)

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
                f"{clause} needs a condition (true or false), but this expression is of type "
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
                "ORDER BY / LIMIT inside a subquery change which rows exist, so the answer "
                "could depend on one person; apply them to the outermost query"
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
                    if item.expr.table not in rel.scopes:
                        raise self.syntax(f"unknown table or alias {item.expr.table!r}", item.pos)
                    scopes = [rel.scopes[item.expr.table]]
                else:
                    scopes = list(rel.scopes.values())
                for scope in scopes:
                    for col in scope.values():
                        outputs.setdefault(col, Column(col))
                continue
            e = self.resolve(item.expr, rel)
            self.check(e, frame)
            name = item.alias or (item.expr.name if isinstance(item.expr, Column) else e.to_sql())
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
        for gk in s.group_by or ():
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
                if call.name in ("PERCENTILE", "QUANTILE"):
                    raise self.syntax(
                        f"{call.name} is not available inside a subquery's GROUP BY", call.pos
                    )
                aggs[agg_names[call]] = Call(call.name, call.args[:1], call.distinct, call.star)
            return agg_names[call]

        for item in s.items:
            if isinstance(item.expr, q.Star):
                raise self.syntax("SELECT * cannot be used with GROUP BY", item.pos)
            e = self.resolve(item.expr, rel)
            key_col = next((col for ke, col in keys if ke == e), None)
            if key_col is not None:
                name = item.alias or (
                    item.expr.name if isinstance(item.expr, Column) else e.to_sql()
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
            if isinstance(node, Column) and node.table is None and node.name in aliases:
                return Column(aliases[node.name], pos=node.pos)
            if isinstance(node, Column):
                return Column(self.lookup(node, rel), pos=node.pos)
            return node

        return h.transform(fix)

    # -- the release --------------------------------------------------------------------
    def release(
        self, s: q.Query, epsilon: Fraction, delta: Fraction, options: dict
    ) -> CompiledRelease:
        if isinstance(s, q.SetQuery):
            raise PrivacyError(
                "the outermost query must be one SELECT of noisy aggregates; put "
                "UNION / INTERSECT / EXCEPT inside a subquery: SELECT COUNT(*) FROM (... UNION ...)"
            )
        if s.distinct:
            raise PrivacyError(
                "SELECT DISTINCT at the top would release raw values; use it inside a "
                "subquery and aggregate outside"
            )
        rel = self.from_item(s.from_)
        if rel.frame is None:
            raise PrivacyError(
                "this query reads only public tables; there is nothing private to release"
            )
        frame = rel.frame
        unit = options.get("privacy_unit_column")
        if unit is not None and str(unit) != frame.privacy_unit:
            have = (
                f"its privacy unit is {frame.privacy_unit!r}"
                if frame.privacy_unit
                else "each row is one person"
            )
            raise PrivacyError(
                f"OPTIONS privacy_unit_column = {unit}: the FROM clause's {have}. A table's "
                "privacy unit is declared when it is registered (privacy_unit=..., with "
                "max_rows=...), not by the query"
            )
        frame = self.where(s, rel, frame)

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
            def swap(node: Expr) -> Expr:
                if isinstance(node, Call) and node.name in AGGREGATE_FUNCTIONS:
                    self.check(node, frame, aggregates=True)
                    if node not in calls:
                        calls.append(node)
                    return Column(f"__m{calls.index(node)}")
                return node

            return e.transform(swap)

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
            name = item.alias or (
                item.expr.name if isinstance(item.expr, Column) else item.expr.to_sql()
            )
            # Names, functions and argument counts first: an unknown function is a syntax
            # error wherever it appears, before any privacy question.
            self.check(e, frame, aggregates=True)
            if contains_aggregate(e):
                out = measure(e)
            else:
                idx = next((i for i, ke in enumerate(key_exprs) if ke == e), None)
                if idx is None:
                    what = item.expr.to_sql()
                    raise PrivacyError(
                        f"SELECT {what}: the outermost SELECT releases only noisy aggregates "
                        "and GROUP BY keys; a raw value would reveal individual rows. Wrap it "
                        "in an aggregate or add it to GROUP BY"
                    )
                out = Column(f"__k{idx}")
            if any(n == name for n, _ in outputs):
                raise self.syntax(f"two outputs are named {name!r}; use AS", item.pos)
            outputs.append((name, out))
            aliases[name] = out

        def post(e: Expr) -> Expr:
            """HAVING / ORDER BY (top-down): aliases, keys and aggregates (measured if new)."""
            if isinstance(e, Call) and e.name in AGGREGATE_FUNCTIONS:
                resolved = self.resolve(e, rel)
                self.check(resolved, frame, aggregates=True)
                if resolved not in calls:
                    calls.append(resolved)
                return Column(f"__m{calls.index(resolved)}")
            if isinstance(e, Column):
                if e.table is None and e.name in aliases:
                    return aliases[e.name]
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
        order_by = (
            tuple(q.OrderItem(post(o.expr), o.descending, o.pos) for o in s.order_by)
            if s.order_by
            else None
        )
        if not calls:
            raise PrivacyError(
                "the query releases no aggregate: the outermost SELECT needs at least one "
                "noisy aggregate such as COUNT(*)"
            )

        stabilities = frame.stabilities()
        worst = max(stabilities.values())
        if worst == INF:
            unit = frame.privacy_unit
            hint = (
                f"register it with max_rows=k (at most k rows per {unit!r}), or GROUP BY "
                f"{unit!r} in a subquery"
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
        m = len(calls)
        selection_index = _count_star(calls) if private_keys else None
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
                group_desc = f"GROUP BY {keys_text} ({len(keys_t)} public keys)"
        measurements = [
            Measurement(c, self.prepare(c, frame, key_cols, eps_each, delta_each), c.to_sql())
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
            selection_index=selection_index,
        )

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
        raise PrivacyError(
            f"GROUP BY {e.to_sql()}: its keys are not public, and reading them off the data "
            "would reveal who is in it. Give the keys inline (GROUP BY "
            f"{e.to_sql()} IN ('a', 'b')), declare keys on the table, join a public table "
            "of keys, or give the query a delta (delta= or OPTIONS (delta = 1e-6)) so that "
            "keys are selected privately"
        )

    def prepare(
        self,
        call: Call,
        frame: Relation,
        key_cols: list[str],
        eps: Fraction,
        delta: Fraction | None,
    ) -> Prepared:
        name = call.name
        args = call.args
        if name == "COUNT":
            if call.star:
                return prepare_count(frame, eps, delta)
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
        bounds = self.bounds(call, value, frame, extra)
        if name == "SUM":
            return prepare_sum(frame, value, eps, bounds, delta)
        if name == "AVG":
            return prepare_mean(frame, value, eps, bounds, delta)
        if name in ("VARIANCE", "STDDEV"):
            return prepare_variance(frame, value, eps, bounds, delta, stddev=name == "STDDEV")
        self.no_delta(call, delta)
        if name == "MEDIAN":
            return prepare_quantile(frame, value, 0.5, eps, bounds, None)
        if name in ("PERCENTILE", "QUANTILE"):
            if not isinstance(q_level, int | float) or not 0 <= q_level <= 1:
                raise self.syntax(f"{name}'s level must be a number between 0 and 1", call.pos)
            return prepare_quantile(frame, value, q_level, eps, bounds, None)
        if name in ("MIN", "MAX"):
            return prepare_quantile(
                frame, value, MIN_Q if name == "MIN" else MAX_Q, eps, bounds, None
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
            raise PrivacyError(
                f"{call.name}({value.to_sql()}) needs bounds: declare them for the column when "
                f"registering the table, or write them inline: {call.name}({value.to_sql()}, "
                "lo, hi). Bounds are never read off the data"
            )
        return found


def _count_star(calls: list[Call]) -> int | None:
    """The index of ``COUNT(*)`` among the measured calls, if the query asks for it."""
    return next(
        (i for i, c in enumerate(calls) if c.name == "COUNT" and c.star and not c.distinct),
        None,
    )


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
        raise PrivacyError(
            "the query needs an epsilon: pass epsilon= to sql() or write OPTIONS (epsilon = 0.5)"
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


KNOWN_OPTIONS = {"epsilon", "delta", "noise", "privacy_unit_column", "max_groups_contributed"}


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
    if "max_groups_contributed" in options:
        raise PrivacyError(
            "OPTIONS max_groups_contributed: bound each person's rows when registering the "
            "table (max_rows=...); pinqpy does not take contribution bounds from the query"
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
