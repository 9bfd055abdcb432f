"""Parameters in the notebook magic's query text: ``{name}`` pastes a variable's text and
``:name`` binds a variable as a SQL literal.

Both read the analyst's own Python variables and produce query text, which is public: the
analyst wrote it and the query is charged and released the same way as if it had been typed
in full. A parameter never reads the private data, so substituting it discloses nothing.

``{name}``
    literal text substitution, anywhere in the text (inside strings and comments too): the
    variable's ``str()`` replaces the braces, unchanged. ``{{`` and ``}}`` stand for a literal
    brace. Use it for pieces of SQL (a table or column name, a condition).
``:name``
    a value bound as a SQL literal, outside string literals, quoted identifiers and comments:
    a number as a number (a negative one in parentheses, so ``x - :n`` never reads as a ``--``
    comment), a string quoted with ``'`` doubled inside, None as ``NULL``, a bool as ``TRUE``
    or ``FALSE``. Any other value is refused: pasting its text could change the query's shape.
    ``::`` (the cast operator) is not a parameter.

``{name}`` is replaced first, then ``:name`` is bound in the result, so a ``:name`` the pasted
text contains is bound too (the text is SQL, as if it had been typed).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["ParameterError", "bind", "sql_literal", "substitute"]


class ParameterError(ValueError):
    """A parameter that cannot be filled in (an unknown variable, a value of the wrong kind)."""


_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _lookup(name: str, namespace: Mapping[str, Any], spelled: str) -> Any:
    if name not in namespace:
        raise ParameterError(f"{spelled}: no variable named {name!r} in the notebook")
    return namespace[name]


def substitute(text: str, namespace: Mapping[str, Any]) -> str:
    """``text`` with each ``{name}`` replaced by ``str(namespace[name])``.

    >>> substitute("SELECT COUNT(*) FROM {t} -- {{not}} a parameter", {"t": "people"})
    'SELECT COUNT(*) FROM people -- {not} a parameter'
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "{":
            if text.startswith("{{", i):
                out.append("{")
                i += 2
                continue
            end = text.find("}", i + 1)
            inner = text[i + 1 : end] if end >= 0 else ""
            if end < 0 or not _NAME.fullmatch(inner.strip()):
                shown = text[i : end + 1] if 0 <= end < i + 40 else text[i : i + 20] + "..."
                raise ParameterError(
                    f"{shown!r}: braces take one variable name, {{name}}; "
                    "write {{ and }} for a literal brace"
                )
            name = inner.strip()
            out.append(str(_lookup(name, namespace, "{" + name + "}")))
            i = end + 1
            continue
        if ch == "}":
            if text.startswith("}}", i):
                out.append("}")
                i += 2
                continue
            raise ParameterError("a '}' without its '{'; write }} for a literal brace")
        out.append(ch)
        i += 1
    return "".join(out)


def sql_literal(value: object, name: str = "value") -> str:
    """``value`` as a SQL literal of the dialect (see the module's documentation).

    >>> [sql_literal(v) for v in (3, -2, 0.5, "O'Hara", None, True)]
    ['3', '(-2)', '0.5', "'O''Hara'", 'NULL', 'TRUE']
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):  # numpy too
        return "TRUE" if value else "FALSE"
    if isinstance(value, numbers.Integral):
        text = str(int(value))
    elif isinstance(value, numbers.Real):
        number = float(value)
        if not math.isfinite(number):
            raise ParameterError(f":{name} is {number}; SQL has no literal for it")
        text = repr(number)
    elif isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    else:
        raise ParameterError(
            f":{name} is a {type(value).__name__}; :name binds a number, a string, a bool or "
            f"None (write {{{name}}} to paste its text into the query)"
        )
    return f"({text})" if text.startswith("-") else text


def bind(query: str, namespace: Mapping[str, Any]) -> str:
    """``query`` with each ``:name`` outside strings, quoted names and comments replaced by
    the SQL literal of ``namespace[name]``.

    >>> bind("SELECT COUNT(*) FROM t WHERE age >= :a AND s = ':a' -- :a", {"a": 65})
    "SELECT COUNT(*) FROM t WHERE age >= 65 AND s = ':a' -- :a"
    """
    out: list[str] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch in "'\"":  # a string or a quoted name: to its closing quote (doubled = escaped)
            j = i + 1
            while j < n:
                if query[j] == ch:
                    if j + 1 < n and query[j + 1] == ch:
                        j += 2
                        continue
                    break
                j += 1
            out.append(query[i : j + 1])
            i = j + 1
            continue
        if query.startswith("--", i):
            j = query.find("\n", i)
            j = n if j < 0 else j
            out.append(query[i:j])
            i = j
            continue
        if query.startswith("/*", i):
            j = query.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(query[i:j])
            i = j
            continue
        if ch == ":" and not query.startswith("::", i) and (i == 0 or query[i - 1] != ":"):
            m = _NAME.match(query, i + 1)
            if m is not None:
                name = m.group(0)
                out.append(sql_literal(_lookup(name, namespace, ":" + name), name))
                i = m.end()
                continue
        out.append(ch)
        i += 1
    return "".join(out)
