"""Parsing SQL statements into the AST of :mod:`pinqpy.sql.ast`.

The grammar's ``statement`` rule (in ``grammar/pinqpy.lark``) yields a lark tree; this module
walks it into immutable nodes, handing every expression subtree to
:func:`pinqpy.expr.parser.tree_to_expr`. Every failure is a
:class:`~pinqpy.errors.PinqSyntaxError` with a 1-based line and column; no lark exception
escapes. ``positions=False`` (the path every query takes first) runs lark's tables through a
leaner driver, :class:`_FastParser`.

>>> q = parse_statement("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex OPTIONS (epsilon = 1)")
>>> [item.alias for item in q.items], q.from_.name, q.options
([None, 'n'], 'people', (('epsilon', 1),))
>>> parse_statement("SHOW TABLES;")
ShowTables()
>>> try:
...     parse_statement("SELECT COUNT(*)\\nFROM people\\nWHERE age >")
... except Exception as err:
...     print(type(err).__name__, err.line, err.column)
PinqSyntaxError 3 12
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys

import lark
from lark import Token, Tree

from pinqpy.core.grammar import get_parser
from pinqpy.core.lru import LRU
from pinqpy.errors import PinqSyntaxError
from pinqpy.expr.ast import Expr, InList
from pinqpy.expr.parser import _identifier, _number, _pos, parse_tree, tree_to_expr
from pinqpy.expr.types import valid_text
from pinqpy.plan.meta import RESERVED_PREFIX
from pinqpy.sql.ast import (
    Describe,
    Explain,
    FromItem,
    GroupKey,
    Join,
    MarginalColumn,
    MarginalsQuery,
    OrderItem,
    Path,
    Query,
    Select,
    SelectItem,
    SetQuery,
    ShowBudget,
    ShowLedger,
    ShowTables,
    Star,
    Statement,
    SubqueryFrom,
    TableFrom,
)

__all__ = ["parse_statement"]

_START = "statement"

_Options = tuple[tuple[str, object], ...]

_DIGITS_RE = re.compile(r"\d+\Z")


def parse_statement(text: str, *, positions: bool = True) -> Statement:
    """Parse one statement: a query, ``EXPLAIN <query>``, ``SHOW TABLES``, ``SHOW BUDGET``
    or ``DESCRIBE <table>``; a trailing ``;`` is allowed.

    The latest results are cached by ``(text, positions)`` (the nodes are immutable; at most
    :data:`_PARSED_CHARS` characters of text in all). With
    ``positions=False`` every ``pos`` is None and parsing is about four times faster (see
    :class:`_FastParser`); an error still points into the text, because a statement that
    fails after parsing is redone with positions.

    >>> s = parse_statement("select a from t union all select a from u order by a limit 3")
    >>> type(s).__name__, s.op, s.limit, s.order_by[0].expr.name
    ('SetQuery', 'union_all', 3, 'a')
    >>> parse_statement("SELECT a FROM t").pos
    Pos(line=1, column=1)
    >>> parse_statement("SELECT a FROM t", positions=False).pos is None
    True
    """
    if not isinstance(text, str):
        raise PinqSyntaxError(f"a statement must be text, not {type(text).__name__}")
    # A lone surrogate (no UTF-8 spelling) in a literal or a name reads as the data does.
    return _parse(valid_text(text), bool(positions))


# The statements parsed lately, by text: at most this many characters of text in all. A
# statement's nodes take about 100 bytes per character of its text, so the cache stays near
# 20 MB however long the texts a server is sent (an entry count alone would let 2048 texts
# of 20,000 characters hold 4 GB).
_PARSED_CHARS = 200_000
_PARSED = LRU(_PARSED_CHARS, weight=lambda entry: entry[0])


def _parse(text: str, positions: bool) -> Statement:
    hit = _PARSED.get((text, positions))
    if hit is not None:
        return hit[1]  # type: ignore[no-any-return]
    statement = _parse_text(text, positions)
    _PARSED[(text, positions)] = (len(text), statement)
    return statement


def _parse_text(text: str, positions: bool) -> Statement:
    tree = None
    if not positions:
        fast = _fast_parser()
        tree = None if fast is None else fast.parse(text)
    if tree is None:
        # The positioned parse, or the fallback that raises the syntax error.
        tree = parse_tree(text, _START, positions=positions)
    try:
        return _Converter(text).statement(tree)
    except PinqSyntaxError as err:
        if positions:
            raise
        unlocated = err
    except RecursionError:
        raise PinqSyntaxError("the query is nested too deeply", text=text) from None
    except ValueError:
        # int() refuses numbers of more than sys.get_int_max_str_digits() digits.
        raise _long_number_error(text) from None
    # Conversion errors locate themselves through tree positions, which the fast parse does
    # not record: redo the work with them to raise a located error (outside the handler, so
    # its traceback is the only one shown).
    _parse(text, True)
    raise unlocated


def _long_number_error(text: str) -> PinqSyntaxError:
    message = "a number is too long"
    limit = sys.get_int_max_str_digits()
    for tok in get_parser(_START).lex(text):
        if tok.type == "NUMBER" and len(tok) > limit and _DIGITS_RE.match(tok):
            return PinqSyntaxError(message, text=text, line=tok.line, column=tok.column)
    return PinqSyntaxError(message, text=text)


def _where(node: Tree | Token | None) -> tuple[int | None, int | None]:
    """Line and column of a node's first token (None, None when not recorded)."""
    if isinstance(node, Token):
        return node.line, node.column
    if isinstance(node, Tree):
        return getattr(node.meta, "line", None), getattr(node.meta, "column", None)
    return None, None


def _is_int_literal(tok: Token) -> bool:
    return bool(_DIGITS_RE.match(str(tok)))


def _top_node(body: Tree) -> Tree | None:
    """The ``top`` node of a query body that is one SELECT, if it has one."""
    if isinstance(body, Tree) and body.data == "select_core":
        items = body.children[2]
        if isinstance(items, Tree) and items.children and isinstance(items.children[0], Tree):
            return items.children[0]
    return None


class _Converter:
    """Walks one statement tree; ``text`` is kept only to build error messages."""

    def __init__(self, text: str) -> None:
        self.text = text

    def expr(self, node: Tree | Token) -> Expr:
        """An expression subtree, keeping how each column reference was spelled."""
        return tree_to_expr(node, spelling=True, text=self.text)

    def error(self, message: str, node: Tree | Token | None) -> PinqSyntaxError:
        line, column = _where(node)
        return PinqSyntaxError(message, text=self.text, line=line, column=column)

    # -- statements -----------------------------------------------------------------------
    def statement(self, t: Tree) -> Statement:
        kind = t.data
        if kind == "query_statement":
            return self.query(t.children[0])
        if kind == "explain_statement":
            return Explain(self.query(t.children[0]), pos=_pos(t.meta))
        if kind == "show_statement":
            word: Token = t.children[0]
            what = str(word).upper()
            if what == "TABLES":
                return ShowTables(pos=_pos(t.meta))
            if what == "BUDGET":
                return ShowBudget(pos=_pos(t.meta))
            if what == "LEDGER":
                return ShowLedger(pos=_pos(t.meta))
            raise self.error(
                f"SHOW {word} is not a statement: write SHOW TABLES or SHOW BUDGET "
                "(or SHOW LEDGER)",
                word,
            )
        if kind == "describe_statement":
            path = self.table_path(t.children[0])
            return Describe(
                path[-1][0], tuple(p for p, _ in path[:-1]), path=path, pos=_pos(t.meta)
            )
        if kind in ("marginals_statement", "explain_marginals_statement"):
            return self.marginals(t.children[0], kind == "explain_marginals_statement")
        raise self.error(f"unknown statement {kind}", t)  # pragma: no cover - grammar bug

    def marginals(self, t: Tree, explain: bool) -> MarginalsQuery:
        """``SELECT MARGINALS (...), (...) FROM t [WHERE ...] [OPTIONS (...)]``."""
        *sets, table, where, options = t.children
        path = self.table_path(table)
        return MarginalsQuery(
            tuple(tuple(self.marginal_column(c) for c in m.children) for m in sets),
            TableFrom(path[-1][0], None, tuple(p for p, _ in path[:-1]), path=path),
            None if where is None else self.expr(where.children[0]),
            () if options is None else self.merge_options((), options),
            explain,
            pos=_pos(t.meta),
        )

    def marginal_column(self, t: Tree) -> MarginalColumn:
        if t.data == "marginal_plain":
            return MarginalColumn(self.ident(t.children[0]), pos=_pos(t.meta))
        if t.data == "marginal_keys":
            name, *values = t.children
            keys = tuple(self.option_value(v) for v in values)
            return MarginalColumn(self.ident(name), keys=keys, pos=_pos(t.meta))
        word, name, *values = t.children
        if str(word).upper() != "CUT":
            raise self.error(
                f"{word}(...) is not a marginal's column: write a column, `col IN (...)` or "
                "CUT(col, point, ...)",
                word,
            )
        cuts = tuple(self.option_value(v) for v in values)
        return MarginalColumn(self.ident(name), cuts=cuts, pos=_pos(t.meta))

    # -- queries --------------------------------------------------------------------------
    def query(self, t: Tree) -> Query:
        """A ``query`` node: a set expression and the clauses that apply to all of it."""
        body_node, order_node, limit_node, options_node = t.children
        body = self.set_expr(body_node)
        if order_node is None and limit_node is None and options_node is None:
            return body
        order_by = None if order_node is None else self.order_by(order_node)
        limit = None if limit_node is None else self.limit(limit_node)
        top = _top_node(body_node)
        if top is not None and limit_node is not None:
            raise self.error(
                "SELECT TOP n and LIMIT both cut the rows; write one of them (LIMIT n)",
                limit_node,
            )
        # A parenthesised body may carry ORDER BY / LIMIT of its own; sorting or cutting
        # again after a LIMIT is a different query than one clause list, so refuse it.
        # (SELECT TOP n ... ORDER BY ... is one SELECT: it sorts, then keeps n rows.)
        if body.limit is not None and top is None and (order_by is not None or limit is not None):
            clause = order_node if order_node is not None else limit_node
            raise self.error(
                "ORDER BY and LIMIT after a parenthesised query that has a LIMIT are not "
                "supported: write them once, after the last SELECT",
                clause,
            )
        if body.order_by is not None and order_by is not None:
            raise self.error("ORDER BY is given twice", order_node)
        options = body.options
        if options_node is not None:
            options = self.merge_options(options, options_node)
        return dataclasses.replace(
            body,
            order_by=body.order_by if order_by is None else order_by,
            limit=body.limit if limit is None else limit,
            options=options,
        )

    def set_expr(self, t: Tree) -> Query:
        kind = t.data
        if kind == "select_core":
            return self.select(t)
        if kind == "query":  # a parenthesised query
            return self.query(t)
        left, quantifier, right = t.children
        is_all = quantifier is not None and quantifier.data == "quant_all"
        if kind == "union_op":
            op = "union_all" if is_all else "union"
        else:
            op = "intersect" if kind == "intersect_op" else "except"
            if is_all:
                word = op.upper()
                raise self.error(
                    f"{word} ALL is not supported: write {word} (which removes duplicates)",
                    quantifier,
                )
        return SetQuery(op, self.set_expr(left), self.set_expr(right), pos=_pos(t.meta))

    def select(self, t: Tree) -> Select:
        prefix, quantifier, items, from_, where, group, having = t.children
        options: _Options = ()
        if prefix is not None:
            word, options_node = prefix.children
            if str(word).upper() == "AGGREGATION_THRESHOLD":
                raise self.error(
                    "WITH AGGREGATION_THRESHOLD (k-anonymity style thresholding) is not "
                    "differential privacy and pinqpy does not support it; write SELECT WITH "
                    "DIFFERENTIAL_PRIVACY OPTIONS (epsilon = ..., delta = ...)",
                    word,
                )
            if str(word).upper() not in ("DIFFERENTIAL_PRIVACY", "ANONYMIZATION"):
                raise self.error(
                    f"expected DIFFERENTIAL_PRIVACY after SELECT WITH, not {word}", word
                )
            # BigQuery's OPTIONS may be left out when the call gives epsilon.
            if options_node is not None:
                options = self.merge_options((), options_node)
            if str(word).upper() == "ANONYMIZATION":
                # ZetaSQL's older clause: kappa is its name for max_groups_contributed.
                options = tuple(
                    ("max_groups_contributed" if k == "kappa" else k, v) for k, v in options
                )
        top, *item_nodes = items.children
        return Select(
            items=tuple(self.select_item(c) for c in item_nodes),
            from_=None if from_ is None else self.from_item(from_.children[0]),
            where=None if where is None else self.expr(where.children[0]),
            group_by=None if group is None else self.group_by(group),
            having=None if having is None else self.expr(having.children[0]),
            distinct=quantifier is not None and quantifier.data == "quant_distinct",
            # SQL Server's SELECT TOP n is LIMIT n (post-processing of the released rows).
            limit=None if top is None else self.top(top),
            options=options,
            pos=_pos(t.meta),
        )

    # -- SELECT list ----------------------------------------------------------------------
    def select_item(self, t: Tree) -> SelectItem:
        pos = _pos(t.meta)
        if t.data == "select_star":
            return SelectItem(Star(pos=pos), pos=pos)
        if t.data == "select_table_star":
            path = self.table_path(t.children[0])
            return SelectItem(Star(path[-1][0], path=path, pos=pos), pos=pos)
        expr_node, alias = t.children
        return SelectItem(self.expr(expr_node), self.alias(alias), pos=pos)

    def alias(self, t: Tree | None) -> str | None:
        if t is None:
            return None
        name = self.ident(t.children[0])
        if name.lower().startswith(RESERVED_PREFIX):
            raise self.error(
                f"the name {name!r} starts with {RESERVED_PREFIX!r}, which pinqpy reserves for "
                "its own working columns; choose another alias",
                t.children[0],
            )
        return name

    @staticmethod
    def ident(node: Tree | Token) -> str:
        if isinstance(node, Tree):  # the `identifier` rule wraps one token
            node = node.children[0]
        return _identifier(node)

    @staticmethod
    def table_path(node: Tree) -> Path:
        """The parts of a ``table_name`` (or one ``identifier``) and whether each is quoted.

        A backtick name holding dots (BigQuery's ```project.dataset.table```) is its parts,
        each quoted; a double-quoted name is one part, dots and all (PostgreSQL)."""
        idents = node.children if node.data == "table_name" else [node]
        out: list[tuple[str, bool]] = []
        for ident in idents:
            tok = ident.children[0] if isinstance(ident, Tree) else ident
            name = _identifier(tok)
            if tok.type == "BACKTICK_NAME" and "." in name and all(name.split(".")):
                out.extend((part, True) for part in name.split("."))
            else:
                out.append((name, tok.type != "NAME"))
        return tuple(out)

    def top(self, t: Tree) -> int:
        word, tok = t.children
        if str(word).upper() != "TOP":
            raise self.error(f"unexpected {word!r} after SELECT: did you mean TOP n?", word)
        if not _is_int_literal(tok):
            raise self.error("TOP takes a whole number of rows", tok)
        return int(tok)

    # -- FROM -----------------------------------------------------------------------------
    def from_item(self, t: Tree) -> FromItem:
        kind = t.data
        pos = _pos(t.meta)
        if kind == "table_from":
            name, alias = t.children
            path = self.table_path(name)
            schema = tuple(part for part, _ in path[:-1])
            return TableFrom(path[-1][0], self.alias(alias), schema, path=path, pos=pos)
        if kind == "subquery_from":
            query, alias = t.children
            return SubqueryFrom(self.query(query), self.alias(alias), pos=pos)
        if kind == "bad_join":
            kind_node = t.children[1]
            start = getattr(kind_node.meta, "start_pos", None)
            end = getattr(kind_node.meta, "end_pos", None)
            words = "this" if start is None else " ".join(self.text[start:end].upper().split())
            raise self.error(
                f"{words} JOIN is not supported: use JOIN or LEFT JOIN with ON or USING",
                kind_node,
            )
        left, right, spec = t.children
        on: Expr | None = None
        using: tuple[str, ...] | None = None
        using_paths: tuple[Path, ...] = ()
        *using_nodes, bounds_node = spec.children
        if spec.data == "join_on":
            on = self.expr(using_nodes[0])
        else:
            using = tuple(self.ident(c) for c in using_nodes)
            using_paths = tuple(self.table_path(c) for c in using_nodes)
        return Join(
            self.from_item(left),
            self.from_item(right),
            kind="left" if kind == "left_join" else "inner",
            on=on,
            using=using,
            bounds=None if bounds_node is None else self.join_bounds(bounds_node),
            using_paths=using_paths,
            pos=pos,
        )

    def join_bounds(self, t: Tree) -> tuple[int, int]:
        word, left, right = t.children
        if str(word).upper() != "BOUNDS":
            raise self.error(f"expected BOUNDS after the join's WITH, not {word}", word)
        for tok in (left, right):
            if not _is_int_literal(tok):
                raise self.error("WITH BOUNDS takes two whole numbers of rows per key", tok)
        return int(left), int(right)

    # -- GROUP BY, ORDER BY, LIMIT --------------------------------------------------------
    def group_by(self, t: Tree) -> tuple[GroupKey, ...]:
        keys = []
        for node in t.children[0].children:
            e = self.expr(node)
            # `key IN (v1, v2)` lists the public keys of `key` (not a boolean key).
            if isinstance(e, InList) and not e.negated:
                keys.append(GroupKey(e.operand, e.items, pos=e.pos))
            else:
                keys.append(GroupKey(e, pos=e.pos))
        return tuple(keys)

    def order_by(self, t: Tree) -> tuple[OrderItem, ...]:
        return tuple(
            OrderItem(
                self.expr(item.children[0]),
                descending=item.data == "order_desc",
                pos=_pos(item.meta),
            )
            for item in t.children
        )

    def limit(self, t: Tree) -> int:
        tok: Token = t.children[0]
        if not _is_int_literal(tok):
            raise self.error("LIMIT takes a whole number of rows", tok)
        return int(tok)

    # -- OPTIONS --------------------------------------------------------------------------
    def merge_options(self, before: _Options, t: Tree) -> _Options:
        """``before`` followed by the options of an ``options_clause`` node, in source order."""
        out = list(before)
        seen = {name for name, _ in out}
        for option in t.children:
            if option is None:  # `OPTIONS ()`
                continue
            name_node, value_node = option.children
            name = self.ident(name_node).lower()
            if name in seen:
                raise self.error(f"option {name} is given twice", name_node)
            seen.add(name)
            out.append((name, self.option_value(value_node)))
        return tuple(out)

    def option_value(self, t: Tree) -> object:
        kind = t.data
        if kind == "opt_number":
            return _number(str(t.children[0]))
        if kind == "opt_negative":
            return -_number(str(t.children[0]))
        if kind == "opt_string":
            return str(t.children[0])[1:-1].replace("''", "'")
        if kind == "opt_true":
            return True
        if kind == "opt_false":
            return False
        if kind == "opt_null":
            return None
        if kind == "opt_qualified_name":  # privacy_unit_column = members.id
            return ".".join(self.ident(c) for c in t.children)
        # A bare name (BigQuery's privacy_unit_column=pid) is read as its text.
        return self.ident(t.children[0])


# -- the fast path ----------------------------------------------------------------------------
# lark spends most of a position-free parse on per-token lexer bookkeeping and on the one-child
# reductions of the expression precedence ladder (about ten per operand). _FastParser runs the
# same LALR tables and tree-building callbacks of get_parser("statement", positions=False), with
# a leaner lexer and with chains of one-child reductions memoised, for about 2.5x less time.
# It produces exactly lark's tree (the tests compare the two); on any input it cannot handle it
# gives up and the caller re-parses with lark, which also raises the syntax error.

_SHIFT, _PASS, _REDUCE = 0, 1, 2

_Action = tuple[int, object, object, int]


class _FastParser:
    def __init__(self, parser: lark.Lark) -> None:
        # lark internals, imported here so that a different lark only disables the fast path.
        from lark.grammar import Rule
        from lark.parsers.lalr_analysis import Shift

        self.keywords, self.keyword_re, self.master, self.ignore = self._lexer_tables(parser)
        conf = parser.parse_interactive("").parser_state.parse_conf
        callbacks = conf.callbacks
        if any(not isinstance(rule, Rule) for rule in callbacks):
            raise TypeError("terminal callbacks are not supported")
        # A rule whose callback hands back its only child unchanged (a one-child `?rule`)
        # leaves the value stack alone; found by trying it, not by reading lark's options.
        probe = Tree("probe", [])
        passes = {
            rule
            for rule, callback in callbacks.items()
            if len(rule.expansion) == 1 and callback([probe]) is probe
        }
        self.table: dict[object, dict[str, _Action]] = {}
        for state, actions in conf.states.items():
            row: dict[str, _Action] = {}
            for symbol, (action, arg) in actions.items():
                if action is Shift:
                    row[symbol] = (_SHIFT, arg, None, 0)
                elif arg in passes:
                    row[symbol] = (_PASS, arg.origin.name, None, 1)
                else:
                    row[symbol] = (_REDUCE, arg.origin.name, callbacks[arg], len(arg.expansion))
            self.table[state] = row
        self.start = conf.start_state
        self.end = conf.end_state
        # (state below, top state, lookahead) -> top state after a chain of _PASS reductions.
        self.chains: dict[tuple[object, object, str], object] = {}

    @staticmethod
    def _lexer_tables(
        parser: lark.Lark,
    ) -> tuple[dict[str, str], re.Pattern[str], re.Pattern[str], frozenset[str]]:
        """The lexer of the grammar rebuilt as lark's basic lexer works: one alternation of
        the non-keyword terminals in lark's order, keywords recognised inside NAME matches."""
        from lark.lexer import PatternStr

        if parser.options.g_regex_flags:
            raise ValueError("global regex flags are not supported")
        terms = {t.name: t for t in parser.terminals}
        if "NAME" not in terms or "i" not in terms["NAME"].pattern.flags:
            raise ValueError("keywords are expected inside case-insensitive NAME matches")
        regexes = [
            re.compile(t.pattern.to_regexp()) for t in terms.values() if t.pattern.type == "re"
        ]
        name_re = re.compile(terms["NAME"].pattern.to_regexp())
        keywords: dict[str, str] = {}
        keyword_terms = []
        others = []
        for term in terms.values():
            pattern = term.pattern
            if isinstance(pattern, PatternStr) and name_re.fullmatch(pattern.value):
                plain = "i" in pattern.flags and term.priority == 0
                # Only NAME may match a keyword, or lark would pick between them otherwise.
                if not plain or sum(bool(r.fullmatch(pattern.value)) for r in regexes) != 1:
                    raise ValueError(f"keyword {term.name} is not a plain case-insensitive word")
                keywords[pattern.value.upper()] = term.name
                keyword_terms.append(term)
            else:
                others.append(term)
        if "_FAIL" in {t.name for t in others} or any(t.priority != 0 for t in others):
            raise ValueError("unexpected terminals")
        others.sort(key=lambda t: (-t.pattern.max_width, -len(t.pattern.value), t.name))
        groups = [f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in others]
        # Any character no terminal matches ends the fast lex (lark then reports it).
        master = re.compile("|".join([*groups, r"(?P<_FAIL>[\s\S])"]))
        keyword_re = re.compile(
            "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in keyword_terms)
        )
        # lexer_conf.ignore: a parser loaded from lark's cache has no ignore_tokens.
        return keywords, keyword_re, master, frozenset(parser.lexer_conf.ignore)

    def lex(self, text: str) -> list[Token] | None:
        tokens = []
        keywords = self.keywords
        ignore = self.ignore
        for m in self.master.finditer(text):
            kind = m.lastgroup
            if kind in ignore:
                continue
            value = m.group()
            if kind == "NAME":
                if value.isascii():
                    kind = keywords.get(value.upper(), kind)
                else:
                    # Unicode case folding (e.g. U+017F long s) is what lark applies.
                    hit = self.keyword_re.fullmatch(value)
                    kind = kind if hit is None else hit.lastgroup
            elif kind == "_FAIL":
                return None
            tokens.append(Token(kind, value))  # type: ignore[arg-type]
        tokens.append(Token("$END", ""))
        return tokens

    def parse(self, text: str) -> Tree | None:
        tokens = self.lex(text)
        if tokens is None:
            return None
        table = self.table
        states: list[object] = [self.start]
        values: list[object] = []
        for tok in tokens:
            kind = tok.type
            while True:
                act = table[states[-1]].get(kind)
                if act is None:
                    return None  # a syntax error: lark will report it
                code, arg, callback, size = act
                if code == _SHIFT:
                    states.append(arg)
                    values.append(tok)
                    break
                if code == _PASS:
                    key = (states[-2], states[-1], kind)
                    top = self.chains.get(key)
                    if top is None:
                        top = self.chains[key] = self._pass_chain(*key)
                    states[-1] = top
                else:
                    if size:
                        children = values[-size:]
                        del values[-size:]
                        del states[-size:]
                    else:
                        children = []
                    states.append(table[states[-1]][arg][1])  # type: ignore[index]
                    values.append(callback(children))  # type: ignore[operator]
                if kind == "$END" and states[-1] == self.end:
                    return values[-1]  # type: ignore[return-value]
        return None  # pragma: no cover - $END always ends the loop above

    def _pass_chain(self, below: object, top: object, kind: str) -> object:
        while True:
            act = self.table[top].get(kind)
            if act is None or act[0] != _PASS:
                return top
            top = self.table[below][act[1]][1]  # type: ignore[index]


@functools.cache
def _fast_parser() -> _FastParser | None:
    try:
        return _FastParser(get_parser(_START, positions=False))
    except Exception:
        # A lark version whose internals differ: use lark's own parse loop.
        return None
