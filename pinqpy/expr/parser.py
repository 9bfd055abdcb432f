"""Parsing expression strings into the syntax tree of :mod:`pinqpy.expr.ast`.

Every failure is a :class:`~pinqpy.errors.PinqSyntaxError` with a 1-based line and column and
a short list of what would have been accepted; no lark exception escapes.

>>> parse_expression("age >= 18 AND sex = 'F'").to_sql()
"age >= 18 AND sex = 'F'"
>>> parse_expression("-5").value
-5
>>> try:
...     parse_expression("age >=")
... except Exception as err:
...     print(err.line, err.column)
1 7

The statement layer parses whole queries with :func:`parse_tree` and turns each ``expr``
subtree into an expression with :func:`tree_to_expr`.
"""

from __future__ import annotations

import functools
import math
import re

import lark
from lark import Token, Tree
from lark.exceptions import (
    LarkError,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from pinqpy.core.grammar import get_parser
from pinqpy.errors import PinqSyntaxError
from pinqpy.expr.ast import (
    Between,
    Binary,
    Call,
    Case,
    Cast,
    Column,
    Expr,
    InList,
    IsNull,
    Like,
    Literal,
    NamedArg,
    Pos,
    Unary,
    negate,
)
from pinqpy.expr.types import valid_text

__all__ = [
    "parse_expression",
    "parse_tree",
    "syntax_error_from_lark",
    "tree_to_expr",
]

_EXPRESSION_START = "expression_start"

# Human-readable names for the named terminals of the grammar.
_TERMINAL_NAMES = {
    "NUMBER": "a number",
    "STRING": "a string",
    "NAME": "a name",
    "QUOTED_NAME": "a quoted name",
    "BACKTICK_NAME": "a quoted name",
    "$END": "end of text",
}

_BINARY_ALIASES = {
    "or_op": "OR",
    "and_op": "AND",
    "eq": "=",
    "ne": "<>",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "concat": "||",
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "mod": "%",
}

_INT_RE = re.compile(r"\d+\Z")


def _pos(meta: object) -> Pos | None:
    line = getattr(meta, "line", None)
    column = getattr(meta, "column", None)
    if line is None or column is None:
        return None
    return Pos(line, column)


def _token_pos(tok: Token) -> Pos | None:
    if tok.line is None or tok.column is None:
        return None
    return Pos(tok.line, tok.column)


def _identifier(tok: Token) -> str:
    """The name an identifier token spells, with quotes removed and doubled quotes undone."""
    s = str(tok)
    if tok.type == "QUOTED_NAME":
        return s[1:-1].replace('""', '"')
    if tok.type == "BACKTICK_NAME":
        return s[1:-1].replace("``", "`")
    return s


def _number(text: str) -> int | float:
    return int(text) if _INT_RE.match(text) else float(text)


class _ToExpr:
    """Converts a parse tree (or any ``expr`` subtree of a query) into AST nodes.

    Written as an explicit walk, not a lark Transformer, so callers can convert subtrees of
    a larger tree and so deep left-nested chains (``a OR b OR ...``) use one frame per level.
    With ``spelling`` (SQL statements) each column reference keeps how it was written
    (:attr:`Column.path`), for SQL's case-insensitive matching of unquoted names.
    """

    def __init__(self, spelling: bool = False) -> None:
        self.spelling = spelling

    def convert(self, node: Tree | Token) -> Expr:
        if isinstance(node, Token):
            # Only an identifier-like token can stand alone as an expression.
            return Column(_identifier(node), pos=_token_pos(node))
        data = str(node.data)
        method = getattr(self, "_" + data, None)
        if method is not None:
            return method(node)
        if data in _BINARY_ALIASES:
            left, right = node.children
            return Binary(
                _BINARY_ALIASES[data], self.convert(left), self.convert(right), pos=_pos(node.meta)
            )
        if len(node.children) == 1 and data in ("expression_start", "expr"):
            return self.convert(node.children[0])
        raise PinqSyntaxError(f"not an expression: {data}")

    # -- leaves ---------------------------------------------------------------------------
    def _number(self, t: Tree) -> Expr:
        return Literal(_number(str(t.children[0])), pos=_pos(t.meta))

    def _string(self, t: Tree) -> Expr:
        raw = str(t.children[0])
        # A lone surrogate has no UTF-8 spelling: read as tables are (types.valid_text).
        return Literal(valid_text(raw[1:-1].replace("''", "'")), pos=_pos(t.meta))

    def _true(self, t: Tree) -> Expr:
        return Literal(True, pos=_pos(t.meta))

    def _false(self, t: Tree) -> Expr:
        return Literal(False, pos=_pos(t.meta))

    def _null(self, t: Tree) -> Expr:
        return Literal(None, pos=_pos(t.meta))

    def _column(self, t: Tree) -> Expr:
        return Column(self._ident(t.children[0]), pos=_pos(t.meta), path=self._path(t))

    def _qualified_column(self, t: Tree) -> Expr:
        # table.name, or schema.table.name (the schema is kept only in the path).
        table, name = t.children[-2:]
        return Column(self._ident(name), self._ident(table), pos=_pos(t.meta), path=self._path(t))

    def _path(self, t: Tree) -> tuple[tuple[str, bool], ...]:
        if not self.spelling:
            return ()
        out = []
        for node in t.children:
            tok = node.children[0] if isinstance(node, Tree) else node
            out.append((_identifier(tok), tok.type != "NAME"))  # type: ignore[arg-type]
        return tuple(out)

    @staticmethod
    def _ident(node: Tree | Token) -> str:
        if isinstance(node, Tree):  # the `identifier` rule wraps one token
            node = node.children[0]
        return _identifier(node)  # type: ignore[arg-type]

    # -- operators ------------------------------------------------------------------------
    def _neg(self, t: Tree) -> Expr:
        return negate(self.convert(t.children[0]), pos=_pos(t.meta))

    def _not_op(self, t: Tree) -> Expr:
        return Unary("NOT", self.convert(t.children[0]), pos=_pos(t.meta))

    def _is_null(self, t: Tree) -> Expr:
        return IsNull(self.convert(t.children[0]), False, pos=_pos(t.meta))

    def _is_not_null(self, t: Tree) -> Expr:
        return IsNull(self.convert(t.children[0]), True, pos=_pos(t.meta))

    def _in_list(self, t: Tree, negated: bool = False) -> Expr:
        operand, items = t.children
        return InList(
            self.convert(operand),
            tuple(self.convert(c) for c in items.children),  # type: ignore[union-attr]
            negated,
            pos=_pos(t.meta),
        )

    def _not_in_list(self, t: Tree) -> Expr:
        return self._in_list(t, True)

    def _between(self, t: Tree, negated: bool = False) -> Expr:
        operand, low, high = (self.convert(c) for c in t.children)
        return Between(operand, low, high, negated, pos=_pos(t.meta))

    def _not_between(self, t: Tree) -> Expr:
        return self._between(t, True)

    def _like(self, t: Tree, negated: bool = False) -> Expr:
        operand, pattern = (self.convert(c) for c in t.children)
        return Like(operand, pattern, negated, pos=_pos(t.meta))

    def _not_like(self, t: Tree) -> Expr:
        return self._like(t, True)

    # -- calls, CASE, CAST ----------------------------------------------------------------
    def _call(self, t: Tree, distinct: bool = False) -> Expr:
        name = str(t.children[0]).upper()
        args: tuple[Expr, ...] = ()
        if len(t.children) > 1:
            args = tuple(self.convert(c) for c in t.children[1].children)  # type: ignore[union-attr]
        if name == "PI" and not args and not distinct:
            # PI() is a constant: every consumer (bounds, SQL generators) sees a literal.
            return Literal(math.pi, pos=_pos(t.meta))
        return Call(name, args, distinct=distinct, pos=_pos(t.meta))

    def _within_group(self, t: Tree) -> Expr:
        """PostgreSQL's ``PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x)``: ``PERCENTILE_CONT(x,
        p)``. Only the ordered-set aggregates take this form."""
        call_node, order = t.children
        call = self.convert(call_node)
        pos = _pos(t.meta)
        if not (
            isinstance(call, Call)
            and call.name == "PERCENTILE_CONT"
            and len(call.args) == 1
            and not call.distinct
        ):
            raise _located(
                "WITHIN GROUP (ORDER BY x) follows PERCENTILE_CONT(p) only; pinqpy writes "
                "PERCENTILE(x, p)",
                call.pos or pos,
            )
        return Call(call.name, (self.convert(order), call.args[0]), pos=call.pos or pos)

    def _call_distinct(self, t: Tree) -> Expr:
        return self._call(t, True)

    def _call_star(self, t: Tree) -> Expr:
        named = tuple(self.convert(c) for c in t.children[1:])
        return Call(str(t.children[0]).upper(), named, star=True, pos=_pos(t.meta))

    def _named_arg(self, t: Tree) -> Expr:
        name, value = t.children
        values = tuple(self.convert(c) for c in value.children)  # type: ignore[union-attr]
        pair = value.data == "named_pair"  # type: ignore[union-attr]
        return NamedArg(str(name).lower(), values, pair, pos=_pos(t.meta))

    def _call_clamped(self, t: Tree) -> Expr:
        """ZetaSQL's ``ANON_SUM(x CLAMPED BETWEEN lo AND hi)``: the bounds become the named
        argument ``clamped_between => (lo, hi)``, which the SQL compiler maps (another word
        than CLAMPED gives another name, which the compiler refuses with its position)."""
        name, args, word, low, high = t.children
        positional = tuple(self.convert(c) for c in args.children)  # type: ignore[union-attr]
        bounds = NamedArg(
            f"{str(word).lower()}_between",
            (self.convert(low), self.convert(high)),
            True,
            pos=_token_pos(word),  # type: ignore[arg-type]
        )
        return Call(str(name).upper(), (*positional, bounds), pos=_pos(t.meta))

    def _whens(self, nodes: list[Tree]) -> tuple[tuple[Expr, Expr], ...]:
        return tuple((self.convert(w.children[0]), self.convert(w.children[1])) for w in nodes)

    def _case_searched(self, t: Tree) -> Expr:
        *whens, else_ = t.children
        return Case(
            self._whens(whens),  # type: ignore[arg-type]
            None if else_ is None else self.convert(else_),
            pos=_pos(t.meta),
        )

    def _case_simple(self, t: Tree) -> Expr:
        # CASE x WHEN v THEN r ... is CASE WHEN x = v THEN r ...
        subject, *whens, else_ = t.children
        x = self.convert(subject)
        pairs = tuple(
            (
                Binary("=", x, self.convert(w.children[0]), pos=_pos(w.meta)),
                self.convert(w.children[1]),
            )
            for w in whens  # type: ignore[union-attr]
        )
        return Case(pairs, None if else_ is None else self.convert(else_), pos=_pos(t.meta))

    def _cast_expr(self, t: Tree) -> Expr:
        operand, type_name = t.children
        return Cast(self.convert(operand), self._type_name(type_name), pos=_pos(t.meta))

    def _pg_cast(self, t: Tree) -> Expr:
        operand, type_name = t.children
        return Cast(self.convert(operand), self._type_name(type_name), pos=_pos(t.meta))

    @staticmethod
    def _type_name(t: Tree | Token) -> str:
        node = t.children[0] if isinstance(t, Tree) else t
        return str(node).upper()

    # Wrapper rules that may appear when the statement layer hands over a subtree.
    def _expression_start(self, t: Tree) -> Expr:
        return self.convert(t.children[0])


class _Located(PinqSyntaxError):
    """A conversion error whose position the caller attaches (it alone has the text)."""

    def __init__(self, message: str, pos: Pos | None) -> None:
        super().__init__(message)
        self.pos = pos


def _located(message: str, pos: Pos | None) -> _Located:
    return _Located(message, pos)


def tree_to_expr(tree: Tree | Token, *, spelling: bool = False, text: str | None = None) -> Expr:
    """Convert an ``expr`` subtree of a parse tree from :func:`pinqpy.core.grammar.get_parser`.

    ``spelling`` keeps how each column reference was written (SQL statements); ``text`` is
    the source, for errors that point into it.

    >>> from pinqpy.core.grammar import get_parser
    >>> tree_to_expr(get_parser("expression_start").parse("a + 1")).to_sql()
    'a + 1'
    """
    try:
        return _ToExpr(spelling).convert(tree)
    except _Located as err:
        pos = err.pos
        raise PinqSyntaxError(
            err.message,
            text=text if pos is not None else None,
            line=pos.line if pos is not None else None,
            column=pos.column if pos is not None else None,
        ) from None
    except RecursionError:
        raise PinqSyntaxError("the expression is nested too deeply") from None


# -- errors -------------------------------------------------------------------------------
def _describe_terminal(name: str, parser: lark.Lark) -> str:
    if name in _TERMINAL_NAMES:
        return _TERMINAL_NAMES[name]
    try:
        pattern = parser.get_terminal(name).pattern
    except (KeyError, AttributeError):
        return name.lower()
    value = getattr(pattern, "value", "")
    if type(pattern).__name__ == "PatternStr" and value:
        return value.upper() if value.replace("_", "").isalpha() else f"'{value}'"
    return name.lower()


def _end_position(text: str) -> tuple[int, int]:
    """Line and column just after the last non-blank character (where "more" was expected)."""
    body = text.rstrip()
    line = body.count("\n") + 1
    last = body.rsplit("\n", 1)[-1]
    return line, len(last) + 1


def _token_text(tok: Token) -> str:
    s = str(tok)
    if len(s) > 30:
        s = s[:27] + "..."
    return s


def syntax_error_from_lark(
    exc: LarkError, text: str, parser: lark.Lark | None = None
) -> PinqSyntaxError:
    """Turn a lark parse error into a :class:`PinqSyntaxError` pointing into ``text``."""
    parser = parser or get_parser(_EXPRESSION_START)
    expected: list[str] = []
    if isinstance(exc, UnexpectedToken) and exc.token.type != "$END":
        tok = exc.token
        expected = sorted({_describe_terminal(n, parser) for n in exc.expected})
        word = _token_text(tok)
        kind = "keyword" if tok.type in _keyword_terminals(parser) else ""
        message = f"unexpected {kind + ' ' if kind else ''}'{word}'"
        if word == "=" and _previous_char(text, tok.line, tok.column) == "=":
            message += " (SQL compares with a single '=')"
        line, column = tok.line, tok.column
        hint = _other_syntax(tok, text, expected)
        if hint is not None:
            message, line, column = hint
        return PinqSyntaxError(message, text=text, line=line, column=column, expected=expected)
    if isinstance(exc, UnexpectedToken | UnexpectedEOF):
        names = getattr(exc, "expected", None) or []
        expected = sorted({_describe_terminal(n, parser) for n in names})
        line, column = _end_position(text)
        return PinqSyntaxError(
            "unexpected end of text", text=text, line=line, column=column, expected=expected
        )
    if isinstance(exc, UnexpectedCharacters):
        ch = text[exc.pos_in_stream] if 0 <= exc.pos_in_stream < len(text) else ""
        allowed = exc.allowed or set()
        if len(allowed) <= 8:
            expected = sorted({_describe_terminal(n, parser) for n in allowed})
        if ch == "'":
            message = "unterminated string (strings are written 'like this', with '' for a quote)"
        elif ch in '"`':
            message = "unterminated quoted name"
        elif ch == "[":
            message = (
                '[bracketed] names are not supported: write the name in double quotes ("like this")'
            )
        else:
            message = f"unexpected character {ch!r}"
        return PinqSyntaxError(
            message, text=text, line=exc.line, column=exc.column, expected=expected
        )
    if isinstance(exc, UnexpectedInput):
        return PinqSyntaxError(
            "invalid syntax", text=text, line=getattr(exc, "line", None), column=exc.column
        )
    return PinqSyntaxError("invalid syntax")


# Words of other SQL dialects that pinqpy does not take, with the spelling that works.
_OTHER_SYNTAX = {
    "OFFSET": "OFFSET is not supported: LIMIT n keeps the first n released rows (ORDER BY "
    "chooses which)",
    "FETCH": "FETCH FIRST n ROWS ONLY is written LIMIT n",
    "OVER": "window functions (OVER) are not supported: aggregate with GROUP BY",
    "QUALIFY": "QUALIFY is not supported: filter the noisy results with HAVING",
    "ILIKE": "ILIKE is not supported: write LOWER(x) LIKE 'pattern'",
    "NULLS": "NULLS FIRST / LAST is not supported: NULL results sort last",
    "TABLESAMPLE": "TABLESAMPLE is not supported: every answer already reads all the rows",
    "ROWS": "FETCH FIRST n ROWS ONLY is written LIMIT n",
}


def _other_syntax(tok: Token, text: str, expected: list[str]) -> tuple[str, int, int] | None:
    """A message naming a construct of another dialect and what pinqpy writes, with where
    the construct starts, if ``tok`` is part of one."""
    word = str(tok).upper()
    at = (tok.line, tok.column)
    if word in _OTHER_SYNTAX:
        return _OTHER_SYNTAX[word], *at
    previous, prev_at = _previous_word(text, tok)
    if previous in ("OVER", "FETCH"):  # read as an alias, so the next token is the fault
        return _OTHER_SYNTAX[previous], *prev_at
    if word == "WITH" and text[: _offset(text, tok.line, tok.column)].strip() == "":
        message = (
            "WITH (a common table expression) is not supported: write the subquery in FROM, "
            "FROM (SELECT ...) AS name"
        )
        return message, *at
    if word == "," and "JOIN" in expected:
        message = "a comma between tables (FROM a, b) is not supported: write a JOIN b ON a.k = b.k"
        return message, *at
    if previous == "FILTER" and word == "(":  # FILTER was read as an alias
        message = (
            "FILTER (WHERE ...) is not supported: move the condition into the aggregate, "
            "SUM(CASE WHEN condition THEN x END), or into WHERE"
        )
        return message, *prev_at
    if word == "SELECT" and _previous_char(text, tok.line, tok.column) == "(":
        message = (
            "a subquery inside an expression is not supported: its value would be read off "
            "the private data; ask it as its own noisy query and write the number it returns"
        )
        return message, *at
    if word == "SELECT" and _previous_char(text, tok.line, tok.column) == ";":
        return "one statement at a time: send each query in its own call", *at
    if word in ("TRUE", "FALSE", "UNKNOWN") and previous == "IS":
        value = word if word != "UNKNOWN" else "NULL"
        return f"IS {word} is not supported: write x = {value}", *at
    return None


def _offset(text: str, line: int, column: int) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[: line - 1]) + column - 1


def _previous_word(text: str, tok: Token) -> tuple[str, tuple[int, int]]:
    """The word just before ``tok`` (upper-case, "" if none) and its line and column."""
    before = text[: _offset(text, tok.line, tok.column)].rstrip()
    m = re.search(r"(\w+)\Z", before)
    if m is None:
        return "", (tok.line, tok.column)
    start = m.start(1)
    line = before.count("\n", 0, start) + 1
    column = start - (before.rfind("\n", 0, start) + 1) + 1
    return m.group(1).upper(), (line, column)


@functools.cache
def _keyword_terminals(parser: lark.Lark) -> frozenset[str]:
    out = set()
    for term in parser.terminals:
        value = getattr(term.pattern, "value", "")
        if type(term.pattern).__name__ == "PatternStr" and value.replace("_", "").isalpha():
            out.add(term.name)
    return frozenset(out)


def _previous_char(text: str, line: int, column: int) -> str:
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return ""
    before = lines[line - 1][: column - 1].rstrip()
    return before[-1:] if before else ""


def parse_tree(text: str, start: str = _EXPRESSION_START, *, positions: bool = True) -> Tree:
    """Parse ``text`` from the grammar rule ``start``; errors are PinqSyntaxErrors.

    ``positions=False`` parses faster and leaves node positions unset (tokens keep theirs).
    """
    if not isinstance(text, str):
        raise PinqSyntaxError(f"expected text to parse, not {type(text).__name__}")
    parser = get_parser(start, positions)
    try:
        return parser.parse(text)
    except LarkError as exc:
        if isinstance(exc, VisitError):  # not raised without callbacks; kept for safety
            raise PinqSyntaxError("invalid syntax") from None
        raise syntax_error_from_lark(exc, text, parser) from None


def parse_expression(text: str, *, positions: bool = True) -> Expr:
    """Parse one expression; cached by text (the result is immutable).

    ``positions=False`` skips node positions for speed; use it where an error triggers a
    second, positioned parse (see :func:`parse_and_check`).

    >>> e = parse_expression("a OR b AND NOT c = d")
    >>> e.to_sql()
    'a OR b AND NOT c = d'
    >>> type(e).__name__, e.op
    ('Binary', 'OR')
    """
    if not isinstance(text, str):
        raise PinqSyntaxError(f"an expression must be text, not {type(text).__name__}")
    text = valid_text(text)  # a lone surrogate reads as the data does (types.valid_text)
    return _parse_cached(text) if positions else _parse_fast(text)


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str) -> Expr:
    return tree_to_expr(parse_tree(text, _EXPRESSION_START), text=text)


@functools.lru_cache(maxsize=4096)
def _parse_fast(text: str) -> Expr:
    return tree_to_expr(parse_tree(text, _EXPRESSION_START, positions=False), text=text)
