"""What Spark's SQL spells differently (:class:`~pinqpy.engines.sqlgen.dialect.Dialect`),
whatever the session's ANSI setting: the ``try_`` functions give NULL where ANSI Spark raises.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from pinqpy.engines.sqlgen.dialect import FALSE_WORDS, I64_MIN, TRUE_WORDS, Dialect, S
from pinqpy.engines.sqlgen.expressions import ExprSql
from pinqpy.expr.types import TIMESTAMP_TEXT, valid_text
from pinqpy.plan.salts import salt_source

__all__ = ["SPARK"]

# Python's str.strip() whitespace, as a Java regex class (Spark's trim only removes spaces).
_WS = r"[\t\n\x0B\f\r\x1C-\x1F \x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]"
_INT_TEXT = rf"^{_WS}*([+-]?[0-9]+){_WS}*$"
_NUM = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
# Only what pandas.to_numeric reads: Java would also take "1d" or "0x1p3".
_FLOAT_TEXT = rf"^{_WS}*([+-]?{_NUM}){_WS}*$"
_FLOAT_OR_INF_TEXT = rf"^{_WS}*([+-]?(?:{_NUM}|(?i:inf|infinity))){_WS}*$"
# Java's %e format: "-1.2345e+07".
_SCI_TEXT = r"^-?([0-9])\.([0-9]+)e([+-][0-9]+)$"
_TWO63 = "9.223372036854775808E18D"


class SparkDialect(Dialect):
    name = "Spark"
    quote = "`"
    string_type = "STRING"
    # Spark strings hold fewer than 2**31 characters and substring takes INT positions: a
    # start or length beyond that is clamped to it, which changes no result (and never fails
    # a cast).
    max_string = 2**31 - 1
    simple = re.compile(
        r"`(?:[^`]|``)*`|\(?-?\d+L\)?|\(?-?[\d.]+(?:e[+-]?\d+)?D\)?|TRUE|FALSE|NULL"
        r"|CAST\(NULL AS \w+\)|CAST\('-?Infinity' AS DOUBLE\)"
    )
    qualified_columns = True
    share_repeats = True
    power_skips_base_check = True
    trim = "trim(BOTH ' ' FROM {})"
    ltrim = "trim(LEADING ' ' FROM {})"
    rtrim = "trim(TRAILING ' ' FROM {})"
    length_fn = "char_length"
    sign_fn = "signum"
    concat_all = "concat_ws('', {})"  # concat_ws skips NULLs, concat does not
    null_safe_eq = "<=>"

    def row_priority(self, columns: Sequence[str]) -> str:
        """Spark's ``xxhash64`` hashes each value with the hash so far as its seed, so the salt
        hashed first keys every later value nonlinearly, numbers included: which rows are kept
        changes with every salt."""
        salt = self.str_lit(salt_source().bytes(8).hex())
        return f"xxhash64({', '.join([salt, *columns])})"

    def power(self, t: ExprSql, x: str, y: str) -> str:
        # Java's pow makes 1 and -1 to an infinite power NaN; IEEE 754 (pandas, DuckDB) 1.
        x, y = t.bind(S(x, "float")).sql, t.bind(S(y, "float")).sql
        inf = "CAST('Infinity' AS DOUBLE)"
        return f"(CASE WHEN abs({x}) = 1D AND abs({y}) = {inf} THEN 1D ELSE pow({x}, {y}) END)"

    def hash_input(self, column: str, dtype: object) -> str:
        # xxhash64 refuses maps, also inside arrays and structs: those are hashed by their
        # JSON text, a function of the value alone (its entries, in the map's own order).
        return f"to_json({column})" if _holds_map(dtype) else column

    def str_lit(self, text: str) -> str:
        # Whether Spark unescapes backslashes in literals is a session setting
        # (spark.sql.parser.escapedStringLiterals): text without quotes, backslashes or
        # control characters reads the same either way, and anything else is spelled in hex.
        text = valid_text(text)
        if all(ch not in "'\\" and ch.isprintable() for ch in text):
            return f"'{text}'"
        return f"decode(unhex('{text.encode('utf-8').hex()}'), 'UTF-8')"

    def int_lit(self, v: int) -> str:
        return f"{v}L" if v >= 0 else f"({v}L)"

    def float_lit(self, v: float) -> str:
        if math.isnan(v):
            return "CAST(NULL AS DOUBLE)"
        if math.isinf(v):
            return f"CAST('{'-' if v < 0 else ''}Infinity' AS DOUBLE)"
        # A double literal reads its digits as Java's Double.parseDouble does, so repr's
        # shortest digits give back exactly v (and parse faster than a CAST of text).
        text = repr(abs(v)) + "D"
        return f"(-{text})" if math.copysign(1.0, v) < 0 else text

    def finite_test(self, x: str) -> str:
        # NaN compares greater than infinity in Spark, so this drops it too.
        return f"abs({x}) < CAST('Infinity' AS DOUBLE)"

    # The try_ forms give NULL on overflow and on % 0, whatever the ANSI setting.
    def int_op(self, op: str, a: str, b: str) -> str:
        fn = {"+": "try_add", "-": "try_subtract", "*": "try_multiply", "%": "try_mod"}[op]
        return f"{fn}({a}, {b})"

    def int_neg(self, a: str) -> str:
        return f"try_subtract(0L, {a})"

    def int_abs(self, a: str) -> str:
        return f"abs(nullif({a}, {self.int_lit(I64_MIN)}))"

    def float_op(self, op: str, x: str, y: str) -> str:
        if op == "/":
            return f"try_divide({x}, {y})"
        if op == "%":
            return f"try_mod({x}, {y})"
        return f"({x} {op} {y})"

    def to_int(self, t: ExprSql, v: S, how: str) -> S:
        x = t.bind(v).sql
        if how == "round":  # halves away from zero, as pandas_eval
            body = f"CAST(signum({x}) AS BIGINT) * floor(abs({x}) + 0.5D)"
            low = f"{x} > -{_TWO63}"
        else:
            body = f"{how}({x})"
            low = f"{x} >= -{_TWO63}"
        return S(f"(CASE WHEN {low} AND {x} < {_TWO63} THEN {body} END)", "int")

    def round_to(self, t: ExprSql, x: str, d: str) -> S:
        d = t.bind(S(d, "float")).sql
        # 10^trunc(d); a non-finite d gives NaN, and so NULL.
        scale = t.bind(S(f"pow(10.0D, {d} - try_mod({d}, 1.0D))", "float")).sql
        w = t.bind(S(f"({x} * {scale})", "float")).sql
        # floor(|w| + 0.5) as numpy computes it; beyond 2^63 w is already whole.
        rounded = (
            f"(CASE WHEN abs({w}) < 9.0E18D THEN signum({w}) * floor(abs({w}) + 0.5D) ELSE {w} END)"
        )
        return t.finite(f"try_divide({rounded}, {scale})")

    def datetime_text(self, sql: str) -> str:
        return f"date_format({sql}, 'yyyy-MM-dd HH:mm:ss')"

    def concat2(self, a: str, b: str) -> str:
        return f"concat({a}, {b})"

    def float_text(self, t: ExprSql, sql: str) -> S:
        """A double as Python's repr writes it: its shortest digits that read back as the same
        double (Java's own text is not always the shortest), fixed or scientific like repr."""
        x = t.bind(S(sql, "float")).sql
        r15 = t.bind(S(f"format_string('%.14e', {x})", "str")).sql
        r16 = t.bind(S(f"format_string('%.15e', {x})", "str")).sql
        # Any double whose shortest form has at most 15 digits reads back from 15 digits.
        sci = t.bind(
            S(
                f"(CASE WHEN try_cast({r15} AS DOUBLE) = {x} THEN {r15} "
                f"WHEN try_cast({r16} AS DOUBLE) = {x} THEN {r16} "
                f"ELSE format_string('%.16e', {x}) END)",
                "str",
            )
        ).sql
        pat = self.str_lit(_SCI_TEXT)
        digits = t.bind(
            S(
                f"trim(TRAILING '0' FROM concat(regexp_extract({sci}, {pat}, 1), "
                f"regexp_extract({sci}, {pat}, 2)))",
                "str",
            )
        ).sql
        # The value is 0.<digits> * 10^point.
        point = t.bind(
            S(f"(coalesce(try_cast(regexp_extract({sci}, {pat}, 3) AS INT), 0) + 1)", "int")
        ).sql
        n = f"char_length({digits})"
        fixed = (
            f"CASE WHEN {point} <= 0 THEN concat('0.', repeat('0', -{point}), {digits}) "
            f"WHEN {point} >= {n} THEN concat({digits}, repeat('0', {point} - {n}), '.0') "
            f"ELSE concat(substring({digits}, 1, {point}), '.', substring({digits}, {point} + 1)) "
            "END"
        )
        e = f"({point} - 1)"
        scientific = (
            f"concat(substring({digits}, 1, 1), IF({n} > 1, concat('.', substring({digits}, 2)), "
            f"''), 'e', IF({e} < 0, '-', '+'), IF(abs({e}) < 10, '0', ''), "
            f"CAST(abs({e}) AS STRING))"
        )
        body = (
            f"CASE WHEN {digits} = '' THEN '0.0' WHEN {e} >= -4 AND {e} < 16 THEN {fixed} "
            f"ELSE {scientific} END"
        )
        return S(
            # format_string writes NULL as 'null'.
            f"(CASE WHEN {x} IS NULL THEN CAST(NULL AS STRING) WHEN isnan({x}) THEN 'nan' "
            f"WHEN {x} = CAST('Infinity' AS DOUBLE) THEN 'inf' "
            f"WHEN {x} = CAST('-Infinity' AS DOUBLE) THEN '-inf' "
            f"ELSE concat(IF({sci} LIKE '-%', '-', ''), {body}) END)",
            "str",
        )

    def like(self, t: ExprSql, x: S, pattern: str) -> S:
        pieces = _like_pieces(pattern)
        if len(pieces) > 2:
            return self.like_pieces(t, x, pieces)
        # At most one %: Java's regex does not backtrack beyond one .*
        return S(f"({x.sql} LIKE {self.str_lit(_like_pattern(pattern))} ESCAPE '!')", "bool")

    def like_pieces(self, t: ExprSql, x: S, pieces: list[list[str | None]]) -> S:
        """LIKE with several %, without Spark's LIKE: that compiles to a Java regex with a .*
        per %, which backtracks (time polynomial of the degree of the number of % in a
        string's length). Instead the first piece must start the text, the last end it, and
        each middle piece is found leftmost after the one before (leftmost never loses a
        match): ``locate`` for literal pieces, and for pieces with ``_`` a lazy regex with no
        other repetition. Each step is linear in the text's length."""
        x = t.bind(x)
        length = t.bind(S(f"char_length({x.sql})", "int")).sql
        first, last = pieces[0], pieces[-1]
        conds = [f"({length} >= {sum(len(p) for p in pieces)})"]
        if first:
            pattern = _like_pattern(_piece_text(first)) + "%"
            conds.append(f"({x.sql} LIKE {self.str_lit(pattern)} ESCAPE '!')")
        if last:
            pattern = "%" + _like_pattern(_piece_text(last))
            conds.append(f"({x.sql} LIKE {self.str_lit(pattern)} ESCAPE '!')")
        start = str(len(first) + 1)  # 1-based; 0 once a piece was not found
        for piece in pieces[1:-1]:
            if not piece:
                continue
            if None not in piece:
                lit = self.str_lit("".join(c for c in piece if c is not None))
                pos = f"locate({lit}, {x.sql}, {start})"  # 0 when start is 0
            else:
                regex = (
                    "(?s)^.*?(?:"
                    + "".join("." if c is None else f"\\x{{{ord(c):x}}}" for c in piece)
                    + ")"
                )
                found = t.bind(
                    S(
                        f"(CASE WHEN {start} > 0 THEN "
                        f"regexp_extract(substring({x.sql}, {start}), {self.str_lit(regex)}, 0) "
                        "END)",
                        "str",
                    )
                ).sql
                pos = (
                    f"(CASE WHEN char_length({found}) > 0 THEN "
                    f"{start} + char_length({found}) - {len(piece)} ELSE 0 END)"
                )
            p = t.bind(S(pos, "int")).sql
            start = t.bind(S(f"(({p}) + {len(piece)}) * sign({p})", "int")).sql
        conds.append(f"({start} > 0)")
        conds.append(f"({start} - 1 <= {length} - {len(last)})")
        # (Spark's locate reads a NULL text as no match: NULL in, NULL out, as LIKE gives.)
        return S(f"(CASE WHEN {x.sql} IS NOT NULL THEN {' AND '.join(conds)} END)", "bool")

    def text_to_int(self, t: ExprSql, s: str) -> str:
        # Only an optionally signed run of digits counts (a regexp miss is '').
        return f"try_cast(regexp_extract({s}, {self.str_lit(_INT_TEXT)}, 1) AS BIGINT)"

    def text_to_float(self, s: str) -> str:
        return f"try_cast(regexp_extract({s}, {self.str_lit(_FLOAT_TEXT)}, 1) AS DOUBLE)"

    def text_to_number(self, s: str) -> str:
        return f"try_cast(regexp_extract({s}, {self.str_lit(_FLOAT_OR_INF_TEXT)}, 1) AS DOUBLE)"

    def text_to_bool(self, t: ExprSql, s: str) -> str:
        words = [(w, "TRUE") for w in TRUE_WORDS] + [(w, "FALSE") for w in FALSE_WORDS]
        table = ", ".join(f"{self.str_lit(w)}, {b}" for w, b in words)
        stripped = f"regexp_replace({s}, {self.str_lit(f'^{_WS}+|{_WS}+$')}, '')"
        return f"try_element_at(map({table}), lower({stripped}))"

    def to_timestamp(self, sql: str, kind: str) -> str:
        if kind == "datetime":
            return sql
        # Text is read only in pinqpy's form (TIMESTAMP_TEXT), as on every engine.
        text = self.str_lit(TIMESTAMP_TEXT)
        return f"(CASE WHEN {sql} RLIKE {text} THEN try_cast({sql} AS TIMESTAMP) END)"

    def to_date(self, sql: str) -> str:
        return f"date_trunc('DAY', {sql})"


def _like_pattern(pattern: str) -> str:
    """A LIKE pattern in pinqpy's reading (``\\x`` is a literal x) for Spark's LIKE with the
    escape character ``!``, which may only precede ``%``, ``_`` and itself."""
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
        out.append("!" + ch if ch in "%_!" else ch)
        i += 1
    return "".join(out)


def _like_pieces(pattern: str) -> list[list[str | None]]:
    """A LIKE pattern (``\\x`` is a literal x) split at each ``%``: each piece a list of its
    characters, None for ``_``."""
    pieces: list[list[str | None]] = [[]]
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            pieces[-1].append(pattern[i + 1])
            i += 2
            continue
        if ch == "%":
            pieces.append([])
        else:
            pieces[-1].append(None if ch == "_" else ch)
        i += 1
    return pieces


def _piece_text(piece: list[str | None]) -> str:
    """One piece back as pinqpy LIKE text (``_`` for None, other characters escaped)."""
    return "".join("_" if c is None else "\\" + c for c in piece)


SPARK = SparkDialect()


def _holds_map(dtype: object) -> bool:
    """Whether a Spark type is a map or holds one (in an array's items, a struct's fields or
    a map's values)."""
    name = type(dtype).__name__
    if name == "MapType":
        return True
    if name == "ArrayType":
        return _holds_map(dtype.elementType)  # type: ignore[attr-defined]
    if name == "StructType":
        return any(_holds_map(f.dataType) for f in dtype.fields)  # type: ignore[attr-defined]
    return False
