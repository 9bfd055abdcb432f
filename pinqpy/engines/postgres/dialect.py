"""What PostgreSQL's SQL spells differently (:class:`~pinqpy.engines.sqlgen.dialect.Dialect`).

PostgreSQL raises where pinqpy's semantics give NULL: integer overflow, division by zero,
a double that overflows **or underflows to zero** (``1e-200 * 1e-200``), the square root of
a negative, the logarithm of zero, a bad cast. Every such operation is written here behind a
``CASE`` that takes it only where it cannot raise (a ``CASE`` evaluates its branches in
order, and constant folding drops a branch whose condition folds to false before it folds
the branch), so no data can make a query fail.

Doubles: ``*`` and ``/`` of operands in ``[2**-511, 2**511]`` (or zeros, or non-finite
operands, where PostgreSQL does not raise) are the IEEE ones; beyond that range they are
computed exactly in NUMERIC from the operands' shortest decimals and rounded to a double
(NULL beyond the doubles, 0 below them): within a unit in the last place of the IEEE result.
``+`` and ``-`` are exact. POWER and EXP decide overflow (NULL) and underflow (0) from
``y·ln|x|``, so a result within 1e-7 (relative) of either edge is NULL or 0.

NaN is NULL in pinqpy, but PostgreSQL orders NaN above every number and NaN = NaN is true:
stored NaN is read as NULL (:meth:`PostgresDialect.nan_read`), computed non-finite values
are made NULL by the finite test, which NaN fails.

Text is ordered by code point (``COLLATE "C"``) wherever pinqpy orders text, as pandas
compares strings; equality of text is byte equality under every deterministic collation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

from pinqpy.engines.sqlgen.dialect import (
    FALSE_WORDS,
    I64_MAX,
    I64_MIN,
    TRUE_WORDS,
    Dialect,
    S,
)
from pinqpy.engines.sqlgen.expressions import ExprSql
from pinqpy.expr.types import TIMESTAMP_TEXT
from pinqpy.plan.salts import salt_source

__all__ = ["POSTGRES", "PostgresDialect"]

_F8 = "DOUBLE PRECISION"
_MAX = 1.7976931348623157e308
# Python's str.strip() whitespace, as a PostgreSQL regular expression class.
_WS = "[\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
_NUM = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
# pandas.to_numeric's numbers, with an exponent of at most three digits (numeric reads
# exponents up to 1000); text longer than _LONG is not read (numeric's digit limits).
_FLOAT_TEXT = rf"^{_WS}*([+-]?{_NUM}(?:[eE][+-]?[0-9]{{1,3}})?){_WS}*$"
_INF_TEXT = rf"^{_WS}*([+-]?)(?:inf|infinity){_WS}*$"
_INT_TEXT = rf"^{_WS}*([+-]?[0-9]{{1,25}}){_WS}*$"
_LONG = 10000
# Where TIMESTAMP_TEXT puts its fields (position, length): year, month, day, hour, minute;
# the seconds (with any fraction) are what follows position 18.
_FIELDS = ((1, 4), (6, 2), (9, 2), (12, 2), (15, 2))
# The exact midpoints beyond which a decimal rounds to infinity, and at or below which it
# rounds to zero, as a double (round half to even).
_OVERFLOW = str(2**1024 - 2**970)
# (2**-1075 is 5**1075 / 10**1075; as a float it would be 0.)
_UNDERFLOW = "0." + str(5**1075).rjust(1075, "0")
# The same to 40 digits, the first rounded down and the second up, so that a value between
# one and its exact midpoint is made NULL or 0 rather than cast (which would raise).
_OVERFLOW_E = "1.797693134862315807937289714053034150799e308"
_UNDERFLOW_E = "2.470328229206232720882843964341106861826e-324"


_DOUBLE_LIT = re.compile(rf"CAST\('[^']*' AS {_F8}\)")
_BIGINT_LIT = re.compile(r"CAST\((-?\d+) AS BIGINT\)")


def _lit_value(sql: str) -> float:
    """The double of a literal written by :func:`_lit`."""
    return float(sql[len("CAST('") : sql.index("' AS")])


def _lit(v: float) -> str:
    if math.isinf(v):
        return f"CAST('{'-' if v < 0 else ''}Infinity' AS {_F8})"
    return f"CAST('{v!r}' AS {_F8})"


def _p2(e: int) -> str:
    return _lit(math.ldexp(1.0, e))


class PostgresDialect(Dialect):
    name = "PostgreSQL"
    quote = '"'
    string_type = "TEXT"
    # substring takes INTEGER positions; a text holds at most 1 GB, so clamping changes no
    # result.
    max_string = 2**30
    simple = re.compile(
        r'"(?:[^"]|"")*"|TRUE|FALSE|NULL|CAST\(NULL AS [A-Z ]+\)|CAST\(-?\d+ AS BIGINT\)'
        rf"|CAST\('[^']*' AS {_F8}\)|'(?:[^']|'')*'"
    )
    qualified_columns = False
    share_repeats = True
    power_skips_base_check = False
    trim = "btrim({}, ' ')"
    ltrim = "ltrim({}, ' ')"
    rtrim = "rtrim({}, ' ')"
    length_fn = "char_length"
    sign_fn = "sign"
    concat_all = "concat('', {})"  # concat skips NULLs
    null_safe_eq = "IS NOT DISTINCT FROM"
    # A CTE read twice would be materialised (copied) by default; every CTE pinqpy writes
    # is a pure function of its inputs and the salts, so it is inlined instead.
    cte_as = "AS NOT MATERIALIZED"
    # The planner would merge a projection of lets into the query reading it, writing every
    # let out again at each use (exponentially many times in nested expressions): OFFSET 0
    # keeps each projection (and each CTE of computed columns) a plan node of its own,
    # computed once per row.
    let_fence = " OFFSET 0"
    double_type = _F8
    guarded_floats = True
    kind_types = {  # noqa: RUF012 (read only)
        "int": "bigint",
        "float": "double precision",
        "bool": "boolean",
        "str": "text",
        "datetime": "timestamp",
    }

    def row_priority(self, columns: Sequence[str]) -> str:
        """``hashtextextended`` (PostgreSQL's 64-bit hash of text, keyed by a 64-bit seed)
        of the row's text, with a seed from :func:`~pinqpy.plan.salts.salt_source` (fresh on
        every read, or a partition's own): the text of a row is one
        to one with its values (a record's text quotes what needs quoting and writes NULL
        as nothing), so the priority is a function of the row and the seed alone and every
        column reaches it."""
        seed = int.from_bytes(salt_source().bytes(8), "little", signed=True)
        return f"hashtextextended(ROW({', '.join(columns)})::text, {seed})"

    def join_equal(self, a: str, b: str, kind: str) -> str:
        """``IS NOT DISTINCT FROM`` cannot be a hash join's key in PostgreSQL (a join of two
        large tables would compare every pair): NULL-safe equality is written as two plain
        equalities, of whether each is NULL and of the value with NULL as a constant."""
        zero = {
            "int": "0",
            "float": _lit(0.0),
            "bool": "FALSE",
            "str": "''",
            "datetime": "TIMESTAMP '2000-01-01'",
        }.get(kind)
        if zero is None:
            # A list is no key: only a NULL one matches (a NULL key), whatever the types.
            return f"({a} IS NULL AND {b} IS NULL)"
        return f"({a} IS NULL) = ({b} IS NULL) AND COALESCE({a}, {zero}) = COALESCE({b}, {zero})"

    def to_double(self, sql: str, kind: str) -> str:
        """A literal stays a literal (a double one as it is, an integer one as the double
        PostgreSQL's cast gives, the nearest): a literal operand's guards fold away when
        the query is planned, and POWER(x, 2) is seen as a square."""
        if kind == "bool":  # PostgreSQL casts a boolean to INTEGER only
            return f"CAST(CAST({sql} AS INTEGER) AS {_F8})"
        if _DOUBLE_LIT.fullmatch(sql):
            return sql
        m = _BIGINT_LIT.fullmatch(sql)
        if m:
            return _lit(float(int(m[1])))
        return f"CAST({sql} AS {_F8})"

    def to_bigint(self, sql: str, kind: str) -> str:
        if kind == "bool":
            return f"CAST(CAST({sql} AS INTEGER) AS BIGINT)"
        return f"CAST({sql} AS BIGINT)"

    def nan_read(self, q: str) -> str:
        """A stored double with NaN read as NULL (NaN = NaN is true in PostgreSQL)."""
        return f"NULLIF({q}, CAST('NaN' AS {_F8}))"

    # -- spelling -------------------------------------------------------------------------
    def int_lit(self, v: int) -> str:
        return f"CAST({v} AS BIGINT)"

    def float_lit(self, v: float) -> str:
        return self.null("float") if v != v else _lit(v)

    # -- faults as NULL -------------------------------------------------------------------
    def finite_test(self, x: str) -> str:
        # NaN is above every number, so it fails the second test.
        return f"({x} > {_lit(-math.inf)} AND {x} < {_lit(math.inf)})"

    def int_op(self, op: str, a: str, b: str) -> str:
        hi, lo = self.int_lit(I64_MAX), self.int_lit(I64_MIN)
        if op == "+":
            return (
                f"(CASE WHEN {b} >= 0 THEN (CASE WHEN {a} <= {hi} - {b} THEN {a} + {b} END) "
                f"ELSE (CASE WHEN {a} >= {lo} - {b} THEN {a} + {b} END) END)"
            )
        if op == "-":
            return (
                f"(CASE WHEN {b} >= 0 THEN (CASE WHEN {a} >= {lo} + {b} THEN {a} - {b} END) "
                f"ELSE (CASE WHEN {a} <= {hi} + {b} THEN {a} - {b} END) END)"
            )
        if op == "*":
            exact = f"(CAST({a} AS NUMERIC) * {b})"
            return f"(CASE WHEN {exact} BETWEEN {lo} AND {hi} THEN {a} * {b} END)"
        return f"(CASE WHEN {b} <> 0 THEN {a} % {b} END)"

    def int_quotient(self, a: str, b: str) -> str:
        return f"({a} / {b})"  # BIGINT division truncates: downwards for a >= 0

    def int_neg(self, a: str) -> str:
        return f"(CASE WHEN {a} <> {self.int_lit(I64_MIN)} THEN -{a} END)"

    def int_abs(self, a: str) -> str:
        return f"(CASE WHEN {a} <> {self.int_lit(I64_MIN)} THEN abs({a}) END)"

    def float_op(self, op: str, x: str, y: str) -> str:
        """``x op y`` of doubles, NULL where PostgreSQL would raise (module docstring)."""
        if op in ("+", "-"):
            return self._add(op, x, y)
        if op in ("*", "/"):
            return self._mul(op, x, y)
        return self._mod(x, y)

    def _finite2(self, x: str, y: str) -> str:
        return f"{self.finite_test(x)} AND {self.finite_test(y)}"

    def _add(self, op: str, x: str, y: str) -> str:
        # Both operands of at least 1 in magnitude: halving is exact and the sum of the
        # halves overflows its own range exactly when the sum overflows (ties to even).
        big, half = _p2(1022), _lit(0.5)
        return (
            f"(CASE WHEN abs({x}) < {big} AND abs({y}) < {big} "
            f"OR abs({x}) < 1 OR abs({y}) < 1 OR NOT ({self._finite2(x, y)}) THEN {x} {op} {y} "
            f"WHEN abs({x} * {half} {op} {y} * {half}) <= {_lit(_MAX / 2)} THEN {x} {op} {y} END)"
        )

    def _mul(self, op: str, x: str, y: str) -> str:
        """In the normal range the IEEE product or quotient; beyond it (an operand outside
        ``[2**-511, 2**511]``), the exact NUMERIC product or quotient (to 16 digits) of the
        operands' shortest decimals, rounded to a double, NULL beyond the doubles and 0
        below them."""
        hi, lo = _p2(511), _p2(-511)
        safe = f"abs({x}) BETWEEN {lo} AND {hi} AND abs({y}) BETWEEN {lo} AND {hi}"
        if op == "*" and x == y:  # a square: each test once
            safe = f"abs({x}) BETWEEN {lo} AND {hi}"
            plain = f"{safe} OR {x} = 0 OR NOT ({self.finite_test(x)})"
        elif op == "*":
            plain = f"{safe} OR {x} = 0 OR {y} = 0 OR NOT ({self._finite2(x, y)})"
        else:
            plain = f"{y} <> 0 AND ({safe} OR {x} = 0 OR NOT ({self._finite2(x, y)}))"
        n = (
            f"(CAST(CAST({x} AS TEXT) AS NUMERIC) {op} "
            f"NULLIF(CAST(CAST({y} AS TEXT) AS NUMERIC), 0))"
        )
        return (
            f"(CASE WHEN {plain} THEN {x} {op} {y} "
            f"WHEN abs({n}) >= {_OVERFLOW_E} THEN NULL "
            f"WHEN abs({n}) <= {_UNDERFLOW_E} THEN {_lit(0.0)} "
            f"ELSE CAST({n} AS {_F8}) END)"
        )

    def _mod(self, x: str, y: str) -> str:
        """fmod (the sign of the dividend), which PostgreSQL has no operator for: the
        remainder of the doubles' shortest decimals, exact in NUMERIC, as a double."""
        r = f"mod(CAST(CAST({x} AS TEXT) AS NUMERIC), CAST(CAST({y} AS TEXT) AS NUMERIC))"
        return (
            f"(CASE WHEN {self._finite2(x, y)} AND {y} <> 0 THEN "
            f"(CASE WHEN abs({r}) <= {_UNDERFLOW} THEN {_lit(0.0)} * sign({x}) "
            f"ELSE CAST({r} AS {_F8}) END) END)"
        )

    def to_int(self, t: ExprSql, v: S, how: str) -> S:
        x = t.bind(v).sql
        two63 = _p2(63)
        if how == "round":  # halves away from zero, as pandas_eval
            body = f"(CASE WHEN {x} < 0 THEN -floor(-{x} + 0.5) ELSE floor({x} + 0.5) END)"
        else:
            body = f"{how}({x})"
        return S(
            f"(CASE WHEN {x} >= -{two63} AND {x} < {two63} THEN CAST({body} AS BIGINT) END)",
            "int",
        )

    def round_to(self, t: ExprSql, x: str, d: str) -> S:
        x, d = t.bind(S(x, "float")).sql, t.bind(S(d, "float")).sql
        # 10**trunc(d) as numpy's power gives it; out of the doubles' range the result is
        # non-finite (0 or inf as the scale), so NULL.
        scale = t.bind(
            S(f"(CASE WHEN {d} BETWEEN -323 AND 308 THEN pow(10.0, trunc({d})) END)", "float")
        ).sql
        w = t.bind(S(self.float_op("*", x, scale), "float")).sql
        rounded = f"(CASE WHEN {w} < 0 THEN -floor(-{w} + 0.5) ELSE floor({w} + 0.5) END)"
        return t.finite(self.float_op("/", rounded, scale))

    def math1(self, t: ExprSql, fn: str, x: str) -> str:
        x = t.bind(S(x, "float")).sql
        if fn == "sqrt":
            return f"(CASE WHEN {x} >= 0 THEN sqrt({x}) END)"  # NaN >= 0: sqrt(NaN) is NaN
        if fn in ("ln", "log10"):
            return f"(CASE WHEN {x} > 0 THEN {fn}({x}) END)"
        # exp: NULL beyond the doubles (within 1e-9 of the edge: NULL too), 0 below them.
        return (
            f"(CASE WHEN NOT {self.finite_test(x)} THEN exp({x}) "
            f"WHEN {x} >= 709.78271289 THEN NULL WHEN {x} < -745.1332 THEN {_lit(0.0)} "
            f"ELSE exp({x}) END)"
        )

    def power(self, t: ExprSql, x: str, y: str) -> str:
        """``pow``, its overflow (NULL) and underflow (0) decided from ``y·ln|x|``, which
        errs by less than 1e-11 there: within 1e-7 of either edge the result is NULL or 0.
        A literal exponent 2 is ``x * x``, as numpy squares."""
        if y == _lit(2.0):
            x = t.bind(S(x, "float")).sql
            return self._mul("*", x, x)
        if _DOUBLE_LIT.fullmatch(x) and _DOUBLE_LIT.fullmatch(y):
            # Of two literals, numpy's power here: PostgreSQL would fold pow() of constants
            # as it plans, even in a branch a guard of bound values (est) never takes.
            with np.errstate(all="ignore"):
                v = float(np.power(np.float64(_lit_value(x)), np.float64(_lit_value(y))))
            return _lit(v) if v == v else f"CAST('NaN' AS {_F8})"
        x, y = t.bind(S(x, "float")).sql, t.bind(S(y, "float")).sql
        est = t.bind(
            S(
                f"(CASE WHEN {x} <> 0 AND {self._finite2(x, y)} AND abs({y}) <= {_p2(53)} "
                f"AND abs({y}) >= 1e-300 THEN ln(abs({x})) * {y} END)",
                "float",
            )
        ).sql
        huge = (
            f"(CASE WHEN abs({x}) = 1 THEN {_lit(1.0)} "
            f"WHEN (abs({x}) > 1) = ({y} > 0) THEN NULL ELSE {_lit(0.0)} END)"
        )
        return (
            f"(CASE WHEN NOT ({self._finite2(x, y)}) THEN pow({x}, {y}) "
            f"WHEN {x} = 0 THEN (CASE WHEN {y} >= 0 THEN pow({x}, {y}) END) "
            f"WHEN {x} < 0 AND {y} <> trunc({y}) THEN NULL "
            f"WHEN abs({y}) > {_p2(53)} THEN {huge} "
            f"WHEN abs({y}) < 1e-300 THEN pow({x}, {y}) "
            f"WHEN {est} >= 709.7827128 THEN NULL WHEN {est} <= -745.1332 THEN {_lit(0.0)} "
            f"ELSE pow({x}, {y}) END)"
        )

    def float_aggregate(self, fn: str, x: str) -> str:
        """PostgreSQL's sums and variances of doubles raise on overflow: they are computed
        in NUMERIC from the values' shortest decimals (exact for sums) and made doubles
        (±inf beyond their range, as a float sum would overflow). MEDIAN is
        ``percentile_cont(0.5)``."""
        if fn in ("min", "max"):
            return f"{fn}({x})"
        if fn == "median":
            return f"percentile_cont(0.5) WITHIN GROUP (ORDER BY {x})"
        n = f"{fn}(CAST(CAST({x} AS TEXT) AS NUMERIC))"
        return (
            f"(CASE WHEN abs({n}) >= {_OVERFLOW_E} THEN sign({n}) * {_lit(math.inf)} "
            f"WHEN abs({n}) <= {_UNDERFLOW_E} THEN {_lit(0.0)} ELSE CAST({n} AS {_F8}) END)"
        )

    # -- text -----------------------------------------------------------------------------
    def compare_strs(self, op: str, a: str, b: str) -> str:
        return f'({a} {op} {b} COLLATE "C")'

    def extreme(self, least: bool, args: Sequence[str], kind: str) -> str:
        if kind == "str":
            args = [f'({a} COLLATE "C")' for a in args]
        return super().extreme(least, args, kind)

    def datetime_text(self, sql: str) -> str:
        return f"to_char({sql}, 'YYYY-MM-DD HH24:MI:SS')"

    def float_text(self, t: ExprSql, sql: str) -> S:
        """A double as Python's repr writes it, from PostgreSQL's shortest digits (which
        read back as the same double): PostgreSQL writes ``1`` for ``1.0`` and uses an
        exponent from 10**15 on, Python from 10**16 on."""
        x = t.bind(S(sql, "float")).sql
        r = t.bind(S(f"CAST({x} AS TEXT)", "str")).sql
        digits = t.bind(
            S(f"regexp_replace(split_part({r}, 'e', 1), '[-.]', '', 'g')", "str")
        ).sql
        sign = f"(CASE WHEN {x} < 0 THEN '-' ELSE '' END)"
        e15 = (
            f"{sign} || (CASE WHEN char_length({digits}) <= 16 THEN rpad({digits}, 16, '0') "
            f"|| '.0' ELSE substr({digits}, 1, 16) || '.' || substr({digits}, 17) END)"
        )
        return S(
            f"(CASE WHEN {x} IS NULL THEN CAST(NULL AS TEXT) "
            f"WHEN {x} = CAST('NaN' AS {_F8}) THEN 'nan' "
            f"WHEN {x} = {_lit(math.inf)} THEN 'inf' WHEN {x} = {_lit(-math.inf)} THEN '-inf' "
            f"WHEN {r} LIKE '%e+15' THEN {e15} "
            f"WHEN strpos({r}, '.') > 0 OR strpos({r}, 'e') > 0 THEN {r} "
            f"ELSE {r} || '.0' END)",
            "str",
        )

    def like(self, t: ExprSql, x: S, pattern: str) -> S:
        """PostgreSQL's LIKE (escape ``\\``), the pattern rewritten so that every literal
        character is one (a trailing ``\\`` is a literal backslash in pinqpy, an error in
        PostgreSQL). Its matcher gives up on a ``%`` that cannot lead to a match, so its
        time is polynomial in the text's length."""
        out: list[str] = []
        i = 0
        while i < len(pattern):
            ch = pattern[i]
            if ch == "\\" and i + 1 < len(pattern):
                ch = pattern[i + 1]
                i += 1
            elif ch in "%_":
                out.append(ch)
                i += 1
                continue
            out.append("\\" + ch if ch in "%_\\" else ch)
            i += 1
        lit = self.str_lit("".join(out))
        return S(f'(({x.sql} COLLATE "C") LIKE {lit} ESCAPE \'\\\')', "bool")

    def text_to_int(self, t: ExprSql, s: str) -> str:
        got = t.bind(S(f"(regexp_match({s}, {self.str_lit(_INT_TEXT)}))[1]", "str")).sql
        n = f"CAST({got} AS NUMERIC)"
        return (
            f"(CASE WHEN {n} BETWEEN {I64_MIN} AND {I64_MAX} THEN CAST({n} AS BIGINT) END)"
        )

    def _decimal(self, s: str) -> str:
        """Text that reads as a number, as a double; NULL for any other (and for text too
        long, or with an exponent of four digits or more, which NUMERIC cannot read)."""
        found = f"(regexp_match({s}, {self.str_lit(_FLOAT_TEXT)}))[1]"
        got = f"(CASE WHEN char_length({s}) < {_LONG} THEN {found} END)"
        n = f"CAST({got} AS NUMERIC)"
        return (
            f"(CASE WHEN abs({n}) >= {_OVERFLOW} THEN sign({n}) * {_lit(math.inf)} "
            f"WHEN abs({n}) <= {_UNDERFLOW} THEN {_lit(0.0)} ELSE CAST({n} AS {_F8}) END)"
        )

    def text_to_float(self, s: str) -> str:
        return self._decimal(s)

    def text_to_number(self, s: str) -> str:
        inf = f"(regexp_match(lower({s}), {self.str_lit(_INF_TEXT)}))[1]"
        return (
            f"(CASE WHEN {inf} IS NOT NULL THEN (CASE WHEN {inf} = '-' THEN "
            f"{_lit(-math.inf)} ELSE {_lit(math.inf)} END) ELSE {self._decimal(s)} END)"
        )

    def text_to_bool(self, t: ExprSql, s: str) -> str:
        strip = f"^{_WS}+|{_WS}+$"
        x = t.bind(S(f"lower(regexp_replace({s}, {self.str_lit(strip)}, '', 'g'))", "str")).sql
        yes = ", ".join(self.str_lit(w) for w in TRUE_WORDS)
        no = ", ".join(self.str_lit(w) for w in FALSE_WORDS)
        return f"(CASE WHEN {x} IN ({yes}) THEN TRUE WHEN {x} IN ({no}) THEN FALSE END)"

    # -- times ----------------------------------------------------------------------------
    def to_timestamp(self, sql: str, kind: str) -> str:
        """Text in pinqpy's form alone (:data:`~pinqpy.expr.types.TIMESTAMP_TEXT`, matched
        with ``~``, whose regular expressions read that pattern alike), read field by field
        at its fixed places (PostgreSQL's cast raises on a day that does not exist, and
        reads other spellings): a day that does not exist is NULL, as on pandas, never an
        error."""
        if kind == "datetime":
            return sql
        ok = f"{sql} ~ {self.str_lit(TIMESTAMP_TEXT)}"
        # (A date alone has no hour or minute: NULLIF makes the empty text NULL.)
        y, mo, d, h, mi = (
            f"CAST(NULLIF(substr({sql}, {p}, {n}), '') AS INTEGER)" for p, n in _FIELDS
        )
        secs = f"CAST(COALESCE(NULLIF(substr({sql}, 18), ''), '0') AS {_F8})"
        # Year 0 is 1 BC (PostgreSQL's year -1), as pandas and DuckDB read it.
        day = f"(make_date(CASE WHEN {y} = 0 THEN -1 ELSE {y} END, {mo}, 1) + ({d} - 1))"
        valid = f"{mo} BETWEEN 1 AND 12 AND {d} BETWEEN 1 AND 31"
        stamp = (
            f"CAST({day} AS TIMESTAMP) + make_interval(hours => COALESCE({h}, 0), "
            f"mins => COALESCE({mi}, 0), secs => {secs})"
        )
        month_ok = f"extract(month FROM {day}) = {mo}"
        return (
            f"(CASE WHEN {ok} THEN (CASE WHEN {valid} THEN (CASE WHEN {month_ok} "
            f"THEN {stamp} END) END) END)"
        )

    def to_date(self, sql: str) -> str:
        return f"date_trunc('day', {sql})"


POSTGRES = PostgresDialect()
