"""What each SQL engine spells differently (:class:`Dialect`), the translated value every
part of the SQL generator passes around (:class:`S`), and the constants they share. The
translation itself is :mod:`pinqpy.engines.sqlgen.expressions`'s.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pinqpy.expr.types import valid_text

__all__ = [
    "FALSE_WORDS",
    "I64_MAX",
    "I64_MIN",
    "NUMERIC",
    "TRUE_WORDS",
    "Dialect",
    "S",
    "Translator",
]

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1
NUMERIC = frozenset({"int", "float", "bool"})
TRUE_WORDS = ("true", "t", "yes", "y", "1", "on")
FALSE_WORDS = ("false", "f", "no", "n", "0", "off")


@dataclass(frozen=True)
class S:
    """Translated SQL text and the kind of value it yields (as in pandas_eval).

    ``raw``, for some floats, is the same value before non-finite results were made NULL:
    ``+``, ``-`` and ``*`` of a non-finite operand are non-finite too, so they may use it and
    let the one check on their own result stand for the skipped ones (fewer nested lets).
    """

    sql: str
    kind: str
    raw: str | None = None


class Translator(Protocol):
    """What a dialect's methods may ask of the translator they are given (an
    :class:`~pinqpy.engines.sqlgen.expressions.ExprSql`)."""

    def bind(self, v: S) -> S:
        """``v`` computed once, as a let, and read by name."""
        ...

    def finite(self, sql: str) -> S:
        """A float ``sql`` with its non-finite values made NULL."""
        ...


class Dialect:
    """What one engine's SQL spells differently; everything else is
    :class:`~pinqpy.engines.sqlgen.expressions.ExprSql`'s.

    The attributes are declared per engine; the methods write the few constructs whose
    spelling (or fault guard) differs. Methods given the translator ``t`` may bind values
    (:meth:`~pinqpy.engines.sqlgen.expressions.ExprSql.bind`) to compute them once.
    """

    name: str  # in messages: "the {name} engine ..."
    quote: str  # identifier quote
    string_type: str  # the SQL type of text
    max_string: int  # the longest text: substring's start and length are clamped to it
    simple: re.Pattern[str]  # SQL cheap enough to repeat (a column, a literal): never bound
    qualified_columns: bool  # whether a column may be named ``t.x`` (else by name alone)
    share_repeats: bool  # whether a sub-expression written twice is translated once
    # POWER of a positive literal exponent uses its base's unchecked value (see S.raw).
    power_skips_base_check: bool
    # TRIM, LTRIM, RTRIM (of spaces only): templates of one text
    trim: str
    ltrim: str
    rtrim: str
    length_fn: str  # characters of a text
    sign_fn: str  # -1, 0 or 1
    concat_all: str  # concatenation of the texts ``{}`` skipping NULLs ('' when all are)
    # Values of kind "datetime" that may differ in precision, made one type (None: as is).
    unify_datetime: str | None = None
    # -- plans (see pinqpy.engines.sqlgen.plans) --
    null_safe_eq: str  # the equality under which NULL equals NULL
    cte_as: str = "AS"  # how a common table expression is introduced
    # What keeps a projection of lets from being merged into its reader, which would write
    # each let out again where it is used ("": the engine computes a projection once).
    let_fence: str = ""
    double_type: str = "DOUBLE"  # the SQL type of a double
    # Whether float_op writes each operand several times (guards of an engine that raises
    # on overflow), so that the operands are bound first.
    guarded_floats: bool = False
    # The engine type of a computed value of each kind, where the translator tracks types
    # (none: the engine's types are asked for only where needed).
    kind_types: dict[str, str] = {}  # noqa: RUF012 (read only)

    def row_priority(self, columns: Sequence[str]) -> str:
        """A row's truncation priority: a hash of the row's ``columns`` keyed by a salt from
        :func:`pinqpy.plan.salts.salt_source` (fresh on every read, or a partition's own),
        so that which rows are kept depends on the row and the salt alone."""
        raise NotImplementedError

    def hash_input(self, column: str, dtype: object) -> str:
        """How :meth:`row_priority` reads a column (``column``: its SQL) of the engine type
        ``dtype`` (None: not known): every column enters a row's priority, so that rows of
        one key that differ in any column are ordered by their values, never by the engine."""
        return column

    def join_equal(self, a: str, b: str, kind: str) -> str:
        """SQL true where the join keys ``a`` and ``b`` (of a column of ``kind``) are equal,
        NULL matching NULL."""
        return f"{a} {self.null_safe_eq} {b}"

    # -- conversions that cannot fail ----------------------------------------------------
    def to_double(self, sql: str, kind: str) -> str:
        """A value of a numeric kind (``int``, ``float``, ``bool``) as a double."""
        return f"CAST({sql} AS {self.double_type})"

    def to_bigint(self, sql: str, kind: str) -> str:
        """A value of kind ``bool`` (or an integer of another width) as a BIGINT."""
        return f"CAST({sql} AS BIGINT)"

    # -- spelling -------------------------------------------------------------------------
    def ident(self, name: str) -> str:
        """A column or table name as an identifier (always quoted)."""
        q = self.quote
        return q + name.replace(q, q + q) + q

    def str_lit(self, text: str) -> str:
        return "'" + valid_text(text).replace("'", "''") + "'"

    def int_lit(self, v: int) -> str:
        raise NotImplementedError

    def float_lit(self, v: float) -> str:
        """A double; NaN as NULL."""
        raise NotImplementedError

    def null(self, kind: str) -> str:
        """A NULL of a kind's SQL type."""
        types = {
            "int": "BIGINT",
            "float": self.double_type,
            "bool": "BOOLEAN",
            "str": self.string_type,
            "datetime": "TIMESTAMP",
        }
        return f"CAST(NULL AS {types[kind]})" if kind in types else "NULL"

    # -- faults as NULL -------------------------------------------------------------------
    def finite_test(self, x: str) -> str:
        """SQL true where the double ``x`` is finite (false or NULL otherwise)."""
        raise NotImplementedError

    def int_op(self, op: str, a: str, b: str) -> str:
        """``a op b`` of BIGINTs (op in + - * %), NULL on overflow and on % 0."""
        raise NotImplementedError

    def int_quotient(self, a: str, b: str) -> str:
        """``a / b`` of BIGINTs ``a >= 0`` and ``b > 0``, rounded down (never overflows)."""
        raise NotImplementedError

    def int_neg(self, a: str) -> str:
        """``-a`` of a BIGINT, NULL on overflow."""
        raise NotImplementedError

    def int_abs(self, a: str) -> str:
        """``abs(a)`` of a BIGINT, NULL on overflow."""
        raise NotImplementedError

    def float_op(self, op: str, x: str, y: str) -> str:
        """``x op y`` of DOUBLEs, without a fault (the result is then checked for being
        finite)."""
        raise NotImplementedError

    def to_int(self, t: Translator, v: S, how: str) -> S:
        """round (halves away from zero), floor or ceil of a DOUBLE, as a BIGINT; NULL
        outside the int64 range."""
        raise NotImplementedError

    def round_to(self, t: Translator, x: str, d: str) -> S:
        """ROUND(x, d) of DOUBLEs as numpy rounds; NULL where not finite."""
        raise NotImplementedError

    # -- text -----------------------------------------------------------------------------
    def datetime_text(self, sql: str) -> str:
        """A timestamp as ``YYYY-MM-DD HH:MM:SS``."""
        raise NotImplementedError

    def float_text(self, t: Translator, sql: str) -> S:
        """A double as text."""
        raise NotImplementedError

    def concat2(self, a: str, b: str) -> str:
        """``a || b`` (NULL when either is)."""
        return f"({a} || {b})"

    def like(self, t: Translator, x: S, pattern: str) -> S:
        """``x LIKE pattern``, the pattern in pinqpy's reading (``\\x`` is a literal x)."""
        raise NotImplementedError

    def text_to_int(self, t: Translator, s: str) -> str:
        """Text that is an optionally signed run of digits (surrounding whitespace allowed)
        as a BIGINT, else NULL."""
        raise NotImplementedError

    def text_to_float(self, s: str) -> str:
        """Text as pandas.to_numeric reads a number, as a DOUBLE, else NULL."""
        raise NotImplementedError

    def text_to_number(self, s: str) -> str:
        """As :meth:`text_to_float`, infinities kept (pandas' _numeric)."""
        raise NotImplementedError

    def text_to_bool(self, t: Translator, s: str) -> str:
        """Text that is one of the true or false words (any case, surrounding whitespace
        allowed) as a BOOLEAN, else NULL."""
        raise NotImplementedError

    # -- times ----------------------------------------------------------------------------
    def float_aggregate(self, fn: str, x: str) -> str:
        """The aggregate ``fn`` (sum, avg, min, max, median, var_samp, stddev_samp) of the
        doubles ``x``, never raising (an overflow is an infinity)."""
        return f"{fn}({x})"

    def math1(self, t: Translator, fn: str, x: str) -> str:
        """``fn(x)`` of a double (``sqrt``, ``ln``, ``log10``, ``exp``), without a fault (the
        result is then checked for being finite)."""
        return f"{fn}({x})"

    def power(self, t: Translator, x: str, y: str) -> str:
        """``x`` to the power ``y`` of doubles as IEEE 754 and numpy compute it (``1`` and
        ``-1`` to an infinite power are 1), without a fault (then checked as above)."""
        return f"pow({x}, {y})"

    def compare_strs(self, op: str, a: str, b: str) -> str:
        """``a op b`` of texts, ordered by code point."""
        return f"({a} {op} {b})"

    def extreme(self, least: bool, args: Sequence[str], kind: str) -> str:
        """LEAST or GREATEST of values of one kind, skipping NULLs (texts by code point)."""
        return f"{'least' if least else 'greatest'}({', '.join(args)})"

    def to_timestamp(self, sql: str, kind: str) -> str:
        """A value of kind "datetime" or "str" as a TIMESTAMP (NULL when it is none); text only
        in pinqpy's form (:data:`~pinqpy.expr.types.TIMESTAMP_TEXT`), else NULL. ``sql`` is
        simple (bound) when it is text: it may be read twice."""
        raise NotImplementedError

    def to_date(self, sql: str) -> str:
        """A TIMESTAMP at the start of its day."""
        raise NotImplementedError

    def compare_datetimes(self, t: Translator, op: str, a: S, b: S) -> S:
        return S(f"({a.sql} {op} {b.sql})", "bool")
