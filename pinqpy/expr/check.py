"""Static checks of an expression against a schema, before any data is read.

:func:`check_expression` finds unknown columns and functions, wrong argument counts,
aggregates where they are not allowed and obvious type errors, and returns the expression's
result type. Messages name only columns, functions and types, never data values.

>>> from pinqpy.expr.parser import parse_expression
>>> check_expression(parse_expression("age / 10 >= 2"), {"age": "int"})
'bool'
>>> try:
...     check_expression(parse_expression("agee > 1"), {"age": "int"}, text="agee > 1")
... except Exception as err:
...     print(err.message)
unknown column 'agee'; did you mean 'age'?
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pinqpy.core.names import closest
from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.expr.ast import (
    AGGREGATE_FUNCTIONS,
    MAX_DEPTH,
    SCALAR_FUNCTIONS,
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
    Unary,
    canonical_aggregate,
    depth,
)
from pinqpy.expr.types import CAST_TYPES, NUMERIC_TYPES, ColumnType, type_of_value

__all__ = [
    "FUNCTION_ARITY",
    "check_expression",
    "constant_value",
    "infer_type",
    "read_untyped_literals",
    "resolve_column",
    "tag_types",
]

# Allowed argument counts (None: any number from the minimum up).
FUNCTION_ARITY: dict[str, tuple[int, ...] | tuple[int, None]] = {
    "ABS": (1,),
    "FLOOR": (1,),
    "CEIL": (1,),
    "CEILING": (1,),
    "ROUND": (1, 2),
    "SQRT": (1,),
    "LN": (1,),
    "LOG": (1,),
    "LOG10": (1,),
    "EXP": (1,),
    "POWER": (2,),
    "POW": (2,),
    "SIGN": (1,),
    "LEAST": (1, None),
    "GREATEST": (1, None),
    "COALESCE": (1, None),
    "NULLIF": (2,),
    "IF": (3,),
    "IIF": (3,),
    "LOWER": (1,),
    "UPPER": (1,),
    "LENGTH": (1,),
    "SUBSTR": (2, 3),
    "SUBSTRING": (2, 3),
    "TRIM": (1,),
    "LTRIM": (1,),
    "RTRIM": (1,),
    "CONCAT": (1, None),
    # Aggregates: the optional trailing pair is the (lower, upper) bounds.
    "COUNT": (1,),
    "SUM": (1, 3),
    "AVG": (1, 3),
    "MEDIAN": (1, 3),
    "VARIANCE": (1, 3),
    "STDDEV": (1, 3),
    "VAR_POP": (1, 3),
    "STDDEV_POP": (1, 3),
    "VAR": (1, 3),
    "VAR_SAMP": (1, 3),
    "STD": (1, 3),
    "STDDEV_SAMP": (1, 3),
    "STDEV": (1, 3),
    "STDEVP": (1, 3),
    "VARP": (1, 3),
    "MIN": (1, 3),
    "MAX": (1, 3),
    "PERCENTILE": (2, 4),
    "QUANTILE": (2, 4),
    "PERCENTILE_CONT": (2, 4),
}

_ARG_HINTS = {
    "SUM": " (x, or x, lower, upper)",
    "AVG": " (x, or x, lower, upper)",
    "MEDIAN": " (x, or x, lower, upper)",
    "VARIANCE": " (x, or x, lower, upper)",
    "STDDEV": " (x, or x, lower, upper)",
    "MIN": " (x, or x, lower, upper)",
    "MAX": " (x, or x, lower, upper)",
    "VAR_POP": " (x, or x, lower, upper)",
    "STDDEV_POP": " (x, or x, lower, upper)",
    "VAR": " (x, or x, lower, upper)",
    "VAR_SAMP": " (x, or x, lower, upper)",
    "STD": " (x, or x, lower, upper)",
    "STDDEV_SAMP": " (x, or x, lower, upper)",
    "STDEV": " (x, or x, lower, upper)",
    "STDEVP": " (x, or x, lower, upper)",
    "VARP": " (x, or x, lower, upper)",
    "PERCENTILE": " (x, q, or x, q, lower, upper)",
    "QUANTILE": " (x, q, or x, q, lower, upper)",
    "PERCENTILE_CONT": " (x, p, or x, p, lower, upper)",
    "SUBSTR": " (s, start[, length])",
    "SUBSTRING": " (s, start[, length])",
    "ROUND": " (x[, digits])",
}

# Functions of other systems that pinqpy spells differently (or refuses), with what works.
_OTHER_FUNCTIONS = {
    "TOP": "SELECT TOP n without parentheses, or LIMIT n",
    "NVL": "COALESCE(x, y)",
    "IFNULL": "COALESCE(x, y)",
    "ISNULL": "COALESCE(x, y) or x IS NULL",
    "LEN": "LENGTH(s)",
    "CHAR_LENGTH": "LENGTH(s)",
    "CHARACTER_LENGTH": "LENGTH(s)",
    "MOD": "a % b",
    "DIV": "FLOOR(a / b)",
    "TRUNC": "FLOOR(x) or CAST(x AS INT)",
    "TRUNCATE": "FLOOR(x) or CAST(x AS INT)",
    "APPROX_COUNT_DISTINCT": "COUNT(DISTINCT x)",
    "COUNTIF": "COUNT(CASE WHEN condition THEN 1 END)",
    "APPROX_QUANTILES": "PERCENTILE(x, p)",
    "APPROX_PERCENTILE": "PERCENTILE(x, p)",
    "PERCENTILE_APPROX": "PERCENTILE(x, p)",
    "PERCENTILE_DISC": "PERCENTILE(x, p)",
    "LOG2": "LN(x) / LN(2)",
    "DEGREES": "x * 180 / PI()",
    "RADIANS": "x * PI() / 180",
    "CHOOSE": "CASE i WHEN 1 THEN a WHEN 2 THEN b END",
    "NEWID": "nothing: a random value per row could not be reproduced from the query",
    "ROLLUP": "one query per grouping (GROUP BY a, b; then GROUP BY a)",
    "CUBE": "one query per grouping (GROUP BY a, b; then GROUP BY a)",
    "GROUPING": "one query per grouping (GROUP BY a, b; then GROUP BY a)",
    "STRING_AGG": "no list aggregate (it would release raw values); COUNT ... GROUP BY x",
    "ARRAY_AGG": "no list aggregate (it would release raw values); COUNT ... GROUP BY x",
    "GROUP_CONCAT": "no list aggregate (it would release raw values); COUNT ... GROUP BY x",
    "LISTAGG": "no list aggregate (it would release raw values); COUNT ... GROUP BY x",
}

_COMPARISONS = frozenset({"=", "<>", "<", "<=", ">", ">="})
_ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})

_NOT_CONSTANT = object()


def resolve_column(col: Column, names: Mapping[str, object]) -> str | None:
    """The key under which ``col`` appears in ``names`` (``t.x`` as "t.x" first, then "x")."""
    if col.table is not None:
        qualified = f"{col.table}.{col.name}"
        if qualified in names:
            return qualified
    return col.name if col.name in names else None


def constant_value(e: Expr) -> object:
    """The value of an expression made only of literals and arithmetic, else a sentinel.

    >>> constant_value(Binary("*", Literal(2), Literal(3)))
    6
    >>> constant_value(Column("x")) is _NOT_CONSTANT
    True
    """
    if isinstance(e, Literal):
        return e.value
    if isinstance(e, Unary) and e.op == "-":
        v = constant_value(e.operand)
        if isinstance(v, int | float) and not isinstance(v, bool):
            return -v
        return _NOT_CONSTANT
    if isinstance(e, Binary) and e.op in ("+", "-", "*", "/"):
        a, b = constant_value(e.left), constant_value(e.right)
        numbers = (int, float)
        if not (isinstance(a, numbers) and isinstance(b, numbers)):
            return _NOT_CONSTANT
        if isinstance(a, bool) or isinstance(b, bool):
            return _NOT_CONSTANT
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        return a / b if b != 0 else _NOT_CONSTANT
    return _NOT_CONSTANT


class _Checker:
    def __init__(
        self,
        root: Expr,
        schema: Mapping[str, ColumnType],
        text: str | None,
        allow_aggregates: bool,
    ) -> None:
        self.root = root
        self.schema = schema
        self.text = text
        self.allow_aggregates = allow_aggregates
        self.in_aggregate = False

    # -- error reporting ------------------------------------------------------------------
    def error(
        self,
        node: Expr,
        message: str,
        *,
        expected: list[str] | None = None,
        about: tuple[Expr, ...] = (),
    ) -> PinqError:
        """The error at ``node``; ``about`` are the expressions whose types the message is
        about (their columns become the error's ``typed_columns``)."""
        err = self._positioned(node, message, expected)
        return tag_types(err, *about) if about else err

    def _positioned(self, node: Expr, message: str, expected: list[str] | None) -> PinqError:
        if self.text is not None and node.pos is not None:
            return PinqSyntaxError(
                message,
                text=self.text,
                line=node.pos.line,
                column=node.pos.column,
                expected=expected,
            )
        # No source position: point into the canonical SQL text of the whole expression.
        try:
            sql, offsets = self.root.sql_offsets()
        except Exception:  # rendering is best effort here; the message matters more
            return PinqSyntaxError(message, expected=expected)
        offset = offsets.get(id(node))
        if offset is None:
            return PinqSyntaxError(message, expected=expected)
        before = sql[:offset]
        line = before.count("\n") + 1
        column = offset - (before.rfind("\n") + 1) + 1
        return PinqSyntaxError(message, text=sql, line=line, column=column, expected=expected)

    def sql(self, node: Expr) -> str:
        s = node.to_sql()
        return s if len(s) <= 40 else s[:37] + "..."

    # -- dispatch -------------------------------------------------------------------------
    def check(self, e: Expr) -> ColumnType:
        if isinstance(e, Column):
            return self.column(e)
        if isinstance(e, Literal):
            return type_of_value(e.value)
        if isinstance(e, Unary):
            return self.unary(e)
        if isinstance(e, Binary):
            return self.binary(e)
        if isinstance(e, Call):
            return self.call(e)
        if isinstance(e, Case):
            return self.case(e)
        if isinstance(e, Cast):
            return self.cast(e)
        if isinstance(e, InList):
            t = self.check(e.operand)
            for item in e.items:
                self.comparable(t, self.check(item), item, "IN", e.operand)
            return "bool"
        if isinstance(e, Between):
            t = self.check(e.operand)
            self.comparable(t, self.check(e.low), e.low, "BETWEEN", e.operand)
            self.comparable(t, self.check(e.high), e.high, "BETWEEN", e.operand)
            return "bool"
        if isinstance(e, Like):
            self.need(e.operand, self.check(e.operand), ("str",), "LIKE needs a string")
            self.need(e.pattern, self.check(e.pattern), ("str",), "a LIKE pattern is a string")
            if not (isinstance(e.pattern, Literal) and isinstance(e.pattern.value, str | None)):
                raise self.error(e.pattern, "the LIKE pattern must be a constant string")
            return "bool"
        if isinstance(e, IsNull):
            self.check(e.operand)
            return "bool"
        raise self.error(e, f"unsupported expression node {type(e).__name__}")

    def column(self, e: Column) -> ColumnType:
        key = resolve_column(e, self.schema)
        if key is not None:
            return self.schema[key]
        shown = e.name if e.table is None else f"{e.table}.{e.name}"
        message = f"unknown column '{shown}'"
        hint = _suggest(e.name, list(self.schema))
        if hint:
            message += f"; did you mean '{hint}'?"
        elif self.text is not None and e.pos is not None and _char_at(self.text, e.pos) == '"':
            message += " (strings are written in single quotes: 'like this')"
        raise self.error(e, message)

    # -- operators ------------------------------------------------------------------------
    def unary(self, e: Unary) -> ColumnType:
        t = self.check(e.operand)
        if e.op == "NOT":
            self.boolean(e.operand, t, "NOT")
            return "bool"
        self.need(e.operand, t, ("int", "float"), "unary minus needs a number")
        return t

    def binary(self, e: Binary) -> ColumnType:
        lt, rt = self.check(e.left), self.check(e.right)
        op = e.op
        if op in ("AND", "OR"):
            self.boolean(e.left, lt, op)
            self.boolean(e.right, rt, op)
            return "bool"
        if op in _COMPARISONS:
            self.comparable(lt, rt, e.right, op, e.left)
            return "bool"
        if op == "||":
            return "str"
        if op in _ARITHMETIC:
            for side, t in ((e.left, lt), (e.right, rt)):
                if t == "str":
                    hint = " (use || or CONCAT to join strings)" if op == "+" else ""
                    raise self.error(
                        side,
                        f"'{op}' needs numbers, but {self.sql(side)} is a string{hint}",
                        about=(side,),
                    )
                self.need(side, t, tuple(NUMERIC_TYPES), f"'{op}' needs numbers")
            if "any" in (lt, rt):
                return "float" if op == "/" else "any"
            if op == "/" or "float" in (lt, rt):
                return "float"
            return "int"
        raise self.error(e, f"unknown operator '{op}'")

    def boolean(self, node: Expr, t: ColumnType, op: str) -> None:
        if t not in ("bool", "any"):
            raise self.error(
                node,
                f"{op} needs true/false values, but {self.sql(node)} is of type {t} "
                f"(compare it, e.g. {self.sql(node)} <> 0)",
                about=(node,),
            )

    def need(self, node: Expr, t: ColumnType, allowed: tuple[str, ...], what: str) -> None:
        if t != "any" and t not in allowed:
            raise self.error(node, f"{what}, but {self.sql(node)} is of type {t}", about=(node,))

    def comparable(
        self, a: ColumnType, b: ColumnType, node: Expr, op: str, other: Expr | None = None
    ) -> None:
        """``a`` (the type of ``other``, the operand) and ``b`` (of ``node``) compare."""
        if "any" in (a, b) or a == b:
            return
        if a in NUMERIC_TYPES and b in NUMERIC_TYPES:
            return
        if {a, b} == {"datetime", "str"}:  # date columns compare with '2020-01-31'
            return
        about = (node,) if other is None else (other, node)
        raise self.error(node, f"cannot compare {a} with {b} ({op})", about=about)

    def unify(self, typed: list[tuple[Expr, ColumnType]], what: str) -> ColumnType:
        known = [(n, t) for n, t in typed if t != "any"]
        if not known:
            return "any"
        kinds = {t for _, t in known}
        if kinds <= NUMERIC_TYPES:
            if "float" in kinds:
                return "float"
            return "int" if "int" in kinds else "bool"
        if len(kinds) == 1:
            return known[0][1]
        first = known[0][1]
        for node, t in known:
            if t != first:
                raise self.error(node, f"{what} mixes values of type {first} and {t}")
        return first  # pragma: no cover - loop always raises

    # -- CASE / CAST ----------------------------------------------------------------------
    def case(self, e: Case) -> ColumnType:
        results: list[tuple[Expr, ColumnType]] = []
        for cond, result in e.whens:
            self.boolean(cond, self.check(cond), "WHEN")
            results.append((result, self.check(result)))
        if e.else_ is not None:
            results.append((e.else_, self.check(e.else_)))
        return self.unify(results, "CASE")

    def cast(self, e: Cast) -> ColumnType:
        t = self.check(e.operand)
        target = CAST_TYPES.get(e.type_name.upper())
        if target is None:
            hint = _suggest(e.type_name.upper(), list(CAST_TYPES))
            raise self.error(
                e,
                f"unknown type '{e.type_name}' in CAST"
                + (f"; did you mean '{hint}'?" if hint else ""),
            )
        if t == "datetime" and target in ("int", "float", "bool"):
            raise self.error(
                e.operand, f"cannot CAST a datetime to {e.type_name}", about=(e.operand,)
            )
        if target == "datetime" and t in ("int", "float", "bool"):
            raise self.error(e.operand, f"cannot CAST a {t} to {e.type_name}", about=(e.operand,))
        return target

    # -- calls ----------------------------------------------------------------------------
    def call(self, e: Call) -> ColumnType:
        name = e.name.upper()
        if name in ("RAND", "RANDOM"):
            raise self.error(
                e,
                f"{name}() is not supported: a random value per row could not be reproduced "
                "from the query, and a private answer needs no randomness of yours; the noisy "
                "aggregates (COUNT, SUM, AVG, ...) already add the noise",
            )
        if name == "PI":  # PI() itself is read as its value
            raise self.error(e, "PI() takes no arguments")
        if name in _OTHER_FUNCTIONS:
            hint = _OTHER_FUNCTIONS[name]
            raise self.error(e, f"unknown function '{e.name}': pinqpy writes {hint}")
        named = next((a for a in e.args if isinstance(a, NamedArg)), None)
        if named is not None:
            # The SQL compiler takes the ones it knows out of differentially private
            # aggregates; any other place has no meaning for them.
            raise self.error(
                named,
                f"the named argument {named.name} => ... is only for the noisy aggregates of a "
                "SQL query (COUNT, SUM, AVG, PERCENTILE_CONT, ...); write bounds as "
                f"{name}(x, lo, hi) elsewhere",
            )
        if name not in FUNCTION_ARITY:
            hint = _suggest(name, sorted(FUNCTION_ARITY))
            raise self.error(
                e, f"unknown function '{e.name}'" + (f"; did you mean {hint}?" if hint else "")
            )
        if e.star and name != "COUNT":
            raise self.error(e, f"{name}(*) is not allowed; only COUNT(*) takes *")
        if e.distinct and name != "COUNT":
            raise self.error(
                e,
                f"DISTINCT is only supported as COUNT(DISTINCT x), not in {name}; aggregate "
                f"the distinct values in a subquery: {name}(x) FROM (SELECT DISTINCT x FROM t)",
            )
        n = len(e.args)
        if not e.star:
            allowed = FUNCTION_ARITY[name]
            if not _arity_ok(allowed, n):
                raise self.error(
                    e,
                    f"{name} takes {_arity_text(allowed)}{_ARG_HINTS.get(name, '')}, got {n}",
                )
        if name in AGGREGATE_FUNCTIONS:
            return self.aggregate(e, name)
        return self.scalar(e, name)

    def aggregate(self, e: Call, name: str) -> ColumnType:
        if self.in_aggregate:
            raise self.error(e, f"aggregates cannot be nested ({name} inside another aggregate)")
        if not self.allow_aggregates:
            raise self.error(
                e,
                f"the aggregate {name} is not allowed here; use it in an aggregation "
                "(SELECT list or agg()), not in a row expression",
            )
        if e.star:
            return "int"
        self.in_aggregate = True
        try:
            t = self.check(e.args[0])
        finally:
            self.in_aggregate = False
        if name == "COUNT":
            return "int"
        name = canonical_aggregate(name)
        if name in ("MIN", "MAX") and t == "datetime":
            raise self.error(e.args[0], f"{name} of a datetime is not supported; it needs numbers")
        self.need(e.args[0], t, tuple(NUMERIC_TYPES), f"{name} needs numbers")
        extra = e.args[1:]
        if name in ("PERCENTILE", "QUANTILE"):
            q = self.constant_number(extra[0], f"the {name} fraction")
            if not 0.0 <= q <= 1.0:
                raise self.error(extra[0], f"the {name} fraction must be between 0 and 1")
            extra = extra[1:]
        if extra:
            lo = self.constant_number(extra[0], f"the lower bound of {name}")
            hi = self.constant_number(extra[1], f"the upper bound of {name}")
            if not lo <= hi:
                raise self.error(extra[0], f"the bounds of {name} must satisfy lower <= upper")
        return "float"

    def constant_number(self, node: Expr, what: str) -> float:
        v = constant_value(node)
        if v is _NOT_CONSTANT or isinstance(v, bool) or not isinstance(v, int | float):
            if v is _NOT_CONSTANT:
                self.check(node)  # report unknown columns first; they are likelier typos
            raise self.error(node, f"{what} must be a constant number")
        return float(v)

    def scalar(self, e: Call, name: str) -> ColumnType:
        types = [self.check(a) for a in e.args]
        args = e.args
        numeric = tuple(NUMERIC_TYPES)
        if name in ("ABS", "SIGN"):
            self.need(args[0], types[0], numeric, f"{name} needs a number")
            return "int" if types[0] == "bool" else types[0]
        if name in ("FLOOR", "CEIL", "CEILING"):
            self.need(args[0], types[0], numeric, f"{name} needs a number")
            return "int"
        if name == "ROUND":
            self.need(args[0], types[0], numeric, "ROUND needs a number")
            if len(args) == 1:
                return "int"
            self.need(args[1], types[1], ("int",), "ROUND's digits must be an integer")
            return "float"
        if name in ("SQRT", "LN", "LOG", "LOG10", "EXP"):
            self.need(args[0], types[0], numeric, f"{name} needs a number")
            return "float"
        if name in ("POWER", "POW"):
            for a, t in zip(args, types, strict=True):
                self.need(a, t, numeric, f"{name} needs numbers")
            return "float"
        if name in ("LEAST", "GREATEST", "COALESCE"):
            return self.unify(list(zip(args, types, strict=True)), name)
        if name == "NULLIF":
            self.comparable(types[0], types[1], args[1], "NULLIF")
            return types[0]
        if name in ("IF", "IIF"):
            self.boolean(args[0], types[0], name)
            return self.unify([(args[1], types[1]), (args[2], types[2])], name)
        if name in ("LOWER", "UPPER", "TRIM", "LTRIM", "RTRIM"):
            self.need(args[0], types[0], ("str",), f"{name} needs a string")
            return "str"
        if name == "LENGTH":
            self.need(args[0], types[0], ("str",), "LENGTH needs a string")
            return "int"
        if name in ("SUBSTR", "SUBSTRING"):
            self.need(args[0], types[0], ("str",), f"{name} needs a string")
            for a, what in zip(args[1:], ("start", "length"), strict=False):
                v = constant_value(a)
                if isinstance(v, bool) or not isinstance(v, int):
                    raise self.error(a, f"the {what} of {name} must be a constant integer")
                if what == "length" and v < 0:
                    raise self.error(a, f"the length of {name} must not be negative")
            return "str"
        if name == "CONCAT":
            return "str"
        if name in SCALAR_FUNCTIONS:  # pragma: no cover - every scalar is handled above
            return "any"
        raise self.error(e, f"unknown function '{name}'")


def tag_types(err: PinqError, *about: Expr) -> PinqError:
    """``err`` marked as a type mismatch of the bare columns among ``about``: its
    ``typed_columns`` name them, so a layer that knows where each column's type came from
    (declared, or inferred from a file) can say how to declare it. A column inside a larger
    expression is not named: declaring its type is then not what the message asks for.
    Returns ``err``."""
    names = {node.name for node in about if isinstance(node, Column)}
    err.typed_columns = tuple(sorted(names))
    return err


def _char_at(text: str, pos: object) -> str:
    lines = text.split("\n")
    line, column = pos.line, pos.column  # type: ignore[attr-defined]
    if 1 <= line <= len(lines) and 1 <= column <= len(lines[line - 1]):
        return lines[line - 1][column - 1]
    return ""


def _suggest(name: str, candidates: list[str]) -> str | None:
    """The closest candidate name, preferring one that differs only in case."""
    for c in candidates:
        if c.lower() == name.lower():
            return c
    return closest(name, candidates)


def _arity_ok(allowed: tuple[int, ...] | tuple[int, None], n: int) -> bool:
    if len(allowed) == 2 and allowed[1] is None:
        return n >= allowed[0]
    return n in allowed


def _arity_text(allowed: tuple[int, ...] | tuple[int, None]) -> str:
    if len(allowed) == 2 and allowed[1] is None:
        return f"at least {allowed[0]} argument" + ("s" if allowed[0] != 1 else "")
    counts = [str(a) for a in allowed]
    word = "argument" if allowed == (1,) else "arguments"
    return (" or ".join(counts)) + f" {word}"


def check_expression(
    expr: Expr,
    schema: Mapping[str, ColumnType],
    *,
    text: str | None = None,
    allow_aggregates: bool = False,
) -> ColumnType:
    """Check ``expr`` against ``schema`` and return its result type.

    ``text`` is the string the expression was parsed from (positions and the caret point
    into it); without it, errors point into ``expr.to_sql()``. With ``allow_aggregates`` an
    aggregate call may appear (not nested in another).

    >>> from pinqpy.expr.parser import parse_expression
    >>> check_expression(parse_expression("SUM(income, 0, 1000)"), {"income": "int"},
    ...                  allow_aggregates=True)
    'float'
    >>> try:
    ...     check_expression(parse_expression("LOWER(age)"), {"age": "int"})
    ... except Exception as err:
    ...     print(err.message)
    LOWER needs a string, but age is of type int
    """
    if depth(expr) > MAX_DEPTH:
        pos = expr.pos
        raise PinqSyntaxError(
            f"the expression is nested too deeply (more than {MAX_DEPTH} levels); simplify it",
            text=text if pos else None,
            line=pos.line if pos else None,
            column=pos.column if pos else None,
        )
    checker = _Checker(expr, schema, text, allow_aggregates)
    try:
        return checker.check(expr)
    except RecursionError:
        raise PinqSyntaxError("the expression is nested too deeply") from None


def infer_type(expr: Expr, schema: Mapping[str, ColumnType]) -> ColumnType:
    """Like :func:`check_expression` but never raises: ``"any"`` when the check fails."""
    try:
        return check_expression(expr, schema, allow_aggregates=True)
    except PinqError:
        return "any"


def parse_and_check(
    text: str, schema: Mapping[str, ColumnType], *, allow_aggregates: bool = False
) -> tuple[Expr, ColumnType]:
    """Parse ``text`` and check it against ``schema``; return the AST and its type.

    The happy path parses without node positions (about twice as fast). When the check
    fails, the text is parsed again with positions so the error can point at the fault.
    """
    from pinqpy.expr.parser import parse_expression

    fast = parse_expression(text, positions=False)
    try:
        return fast, check_expression(fast, schema, text=text, allow_aggregates=allow_aggregates)
    except PinqError:
        pass
    # Outside the handler, so the positioned error is the only one its traceback shows.
    precise = parse_expression(text)
    ctype = check_expression(precise, schema, text=text, allow_aggregates=allow_aggregates)
    # Unreachable unless the two parses disagree; answer with the positioned one.
    return precise, ctype


_INT_TEXT = re.compile(r"\s*[+-]?\d+\s*\Z")
_FLOAT_TEXT = re.compile(
    r"\s*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)\s*\Z", re.IGNORECASE
)


def read_untyped_literals(
    expr: Expr, schema: Mapping[str, ColumnType], *, text: str | None = None
) -> Expr:
    """``expr`` with each string literal compared with a number read as that number.

    PostgreSQL reads a quoted literal compared with an integer or float expression as a
    constant of that type (``age > '30'`` is ``age > 30``); so do comparisons, ``IN`` lists
    and ``BETWEEN``. The literal is a constant of the query, so reading it needs no data, and
    one that does not spell a number of the type (``age > '30.5'`` for an integer, ``'abc'``)
    is a :class:`PinqSyntaxError` pointing at it.

    >>> from pinqpy.expr.parser import parse_expression
    >>> read_untyped_literals(parse_expression("age BETWEEN '18' AND 30"), {"age": "int"}).to_sql()
    'age BETWEEN 18 AND 30'
    """

    def read(node: Expr, other: Expr) -> Expr:
        if not (isinstance(node, Literal) and isinstance(node.value, str)):
            return node
        target = infer_type(other, schema)
        if target not in ("int", "float"):
            return node
        raw = node.value
        if target == "int" and _INT_TEXT.match(raw):
            return Literal(int(raw), pos=node.pos)
        if target == "float" and _FLOAT_TEXT.match(raw):
            return Literal(float(raw), pos=node.pos)
        what = "an integer" if target == "int" else "a number"
        message = (
            f"{node.to_sql()} is compared with {other.to_sql()}, of type {target}, but it is "
            f"not {what}; write the number without quotes"
        )
        if node.pos is not None and text is not None:
            raise tag_types(
                PinqSyntaxError(message, text=text, line=node.pos.line, column=node.pos.column),
                other,
            )
        raise tag_types(PinqSyntaxError(message), other)

    def fix(node: Expr) -> Expr:
        if isinstance(node, Binary) and node.op in _COMPARISONS:
            left, right = read(node.left, node.right), read(node.right, node.left)
            if left is not node.left or right is not node.right:
                return Binary(node.op, left, right, pos=node.pos)
        elif isinstance(node, InList):
            items = tuple(read(item, node.operand) for item in node.items)
            if any(a is not b for a, b in zip(items, node.items, strict=True)):
                return InList(node.operand, items, node.negated, pos=node.pos)
        elif isinstance(node, Between):
            low, high = read(node.low, node.operand), read(node.high, node.operand)
            if low is not node.low or high is not node.high:
                return Between(node.operand, low, high, node.negated, pos=node.pos)
        return node

    return expr.transform(fix)
