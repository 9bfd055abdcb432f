"""What DuckDB's SQL spells differently (:class:`~pinqpy.engines.sqlgen.dialect.Dialect`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pinqpy.engines.sqlgen.dialect import FALSE_WORDS, TRUE_WORDS, Dialect, S
from pinqpy.engines.sqlgen.expressions import ExprSql
from pinqpy.expr.types import TIMESTAMP_TEXT
from pinqpy.plan.salts import salt_source

__all__ = ["DUCKDB"]


class DuckDBDialect(Dialect):
    name = "DuckDB"
    quote = '"'
    string_type = "VARCHAR"
    # DuckDB strings hold at most 2**32 - 1 bytes, and substring refuses a start or length
    # beyond that (for every row): both are clamped to it, which changes no result.
    max_string = 2**32 - 1
    simple = re.compile(
        r'"(?:[^"]|"")*"|TRUE|FALSE|NULL|CAST\(NULL AS \w+\)|CAST\(-?\d+ AS BIGINT\)'
        r"|CAST\('[^']*' AS DOUBLE\)|'(?:[^']|'')*'"
    )
    qualified_columns = False
    share_repeats = False
    power_skips_base_check = False
    trim = "trim({}, ' ')"
    ltrim = "ltrim({}, ' ')"
    rtrim = "rtrim({}, ' ')"
    length_fn = "length"
    sign_fn = "sign"
    concat_all = "concat('', {})"  # DuckDB's concat skips NULLs
    # Branches of one result may be TIMESTAMP_NS and TIMESTAMP: DuckDB would cast both to
    # nanoseconds, which fails (for every row) on a value outside 1677-2262.
    unify_datetime = "TRY_CAST({} AS TIMESTAMP)"
    null_safe_eq = "IS NOT DISTINCT FROM"
    # DuckDB's types are tracked per column (a CTE's schema), so most need no binding.
    kind_types = {  # noqa: RUF012 (read only)
        "int": "BIGINT",
        "float": "DOUBLE",
        "bool": "BOOLEAN",
        "str": "VARCHAR",
        "datetime": "TIMESTAMP",
    }

    def row_priority(self, columns: Sequence[str]) -> str:
        """DuckDB's ``hash`` of several values combines them linearly, so a salt hashed along
        with the row would only XOR every row's hash with one constant, which keeps most of
        the rows' order. The row's hash is keyed instead as the pandas engine keys it: two
        rounds of XOR with a fresh 64-bit salt, each followed by DuckDB's (nonlinear)
        64-bit integer hash, so the priority depends on the row and the salt alone."""
        salt = salt_source().bytes(24)
        s1 = int.from_bytes(salt[8:16], "little")
        s2 = int.from_bytes(salt[16:24], "little")
        row = f"hash({', '.join([self.str_lit(salt[:8].hex()), *columns])})"
        return f"hash(xor(hash(xor({row}, CAST({s1} AS UBIGINT))), CAST({s2} AS UBIGINT)))"

    def int_lit(self, v: int) -> str:
        return f"CAST({v} AS BIGINT)"

    def float_lit(self, v: float) -> str:
        # As text, which DuckDB reads exactly.
        return self.null("float") if v != v else f"CAST('{v!r}' AS DOUBLE)"

    def finite_test(self, x: str) -> str:
        return f"isfinite({x})"

    # DuckDB raises on overflow and on % 0; TRY makes both NULL.
    def int_op(self, op: str, a: str, b: str) -> str:
        return f"TRY({a} {op} {b})"

    def int_neg(self, a: str) -> str:
        return f"TRY(-({a}))"

    def int_abs(self, a: str) -> str:
        return f"TRY(abs({a}))"

    def float_op(self, op: str, x: str, y: str) -> str:
        return f"TRY({x} % {y})" if op == "%" else f"({x} {op} {y})"

    def to_int(self, t: ExprSql, v: S, how: str) -> S:
        # DuckDB's round takes halves away from zero; TRY_CAST is NULL beyond int64.
        return S(f"TRY_CAST({how}({v.sql}) AS BIGINT)", "int")

    def round_to(self, t: ExprSql, x: str, d: str) -> S:
        scale = t.bind(S(f"pow(10.0, trunc({d}))", "float")).sql
        return t.finite(f"(round({x} * {scale}) / {scale})")

    def datetime_text(self, sql: str) -> str:
        return f"strftime({sql}, '%Y-%m-%d %H:%M:%S')"

    def float_text(self, t: ExprSql, sql: str) -> S:
        return S(f"CAST({sql} AS VARCHAR)", "str")

    def like(self, t: ExprSql, x: S, pattern: str) -> S:
        return S(f"({x.sql} LIKE {self.str_lit(pattern)} ESCAPE '\\')", "bool")

    def text_to_int(self, t: ExprSql, s: str) -> str:
        x = t.bind(S(f"trim({s})", "str")).sql
        return f"(CASE WHEN regexp_full_match({x}, '[+-]?[0-9]+') THEN TRY_CAST({x} AS BIGINT) END)"

    def text_to_float(self, s: str) -> str:
        return f"TRY_CAST(trim({s}) AS DOUBLE)"

    def text_to_number(self, s: str) -> str:
        return f"TRY_CAST({s} AS DOUBLE)"

    def text_to_bool(self, t: ExprSql, s: str) -> str:
        x = t.bind(S(f"lower(trim({s}))", "str")).sql
        yes = ", ".join(self.str_lit(w) for w in TRUE_WORDS)
        no = ", ".join(self.str_lit(w) for w in FALSE_WORDS)
        return f"(CASE WHEN {x} IN ({yes}) THEN TRUE WHEN {x} IN ({no}) THEN FALSE END)"

    def to_timestamp(self, sql: str, kind: str) -> str:
        # A date beyond the TIMESTAMP range is NULL; text is read only in pinqpy's form.
        if kind == "str":
            ok = f"regexp_full_match({sql}, {self.str_lit(TIMESTAMP_TEXT)})"
            return f"(CASE WHEN {ok} THEN TRY_CAST({sql} AS TIMESTAMP) END)"
        return f"TRY_CAST({sql} AS TIMESTAMP)"

    def to_date(self, sql: str) -> str:
        return f"CAST(CAST({sql} AS DATE) AS TIMESTAMP)"

    def compare_datetimes(self, t: ExprSql, op: str, a: S, b: S) -> S:
        """Compare timestamps of any precision without a fault: DuckDB casts a TIMESTAMP to
        TIMESTAMP_NS to compare it with one, which fails outside 1677-2262. Both are read in
        nanoseconds when they fit and in microseconds otherwise; a value outside the
        nanosecond range lies beyond every one inside it, so the order is the same."""
        a, b = t.bind(a), t.bind(b)
        na, nb = f"TRY_CAST({a.sql} AS TIMESTAMP_NS)", f"TRY_CAST({b.sql} AS TIMESTAMP_NS)"
        ua, ub = f"TRY_CAST({a.sql} AS TIMESTAMP)", f"TRY_CAST({b.sql} AS TIMESTAMP)"
        return S(
            f"(CASE WHEN {na} IS NOT NULL AND {nb} IS NOT NULL THEN {na} {op} {nb} "
            f"ELSE {ua} {op} {ub} END)",
            "bool",
        )


DUCKDB = DuckDBDialect()
