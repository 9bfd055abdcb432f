"""A type mismatch on a column whose type was guessed from a file says how to declare it.

A CSV file has no types: its columns' types are inferred from the text when the table is
read (``DESCRIBE`` shows them as ``inferred``). A code column of digits is read as ``int``,
so ``WHERE educ = 'BA'`` is then refused as a type error, which only the curator can fix, by
declaring the column's type (``schema=`` on the table, ``--schema COL=TYPE`` on the command
line, ``schema`` in the server's config). :func:`note_inferred` adds that to the error of a
mismatch (a :class:`~pinqpy.PinqError` whose ``typed_columns`` the expression check set)
when one of its columns was inferred. It reads only where the types came from, a public fact
of the table's declaration, never the data.
"""

from __future__ import annotations

from collections.abc import Iterable

from pinqpy.engines.wrapping.wrapped import type_sources
from pinqpy.errors import PinqError, PinqSyntaxError
from pinqpy.plan.nodes import PlanNode

__all__ = ["note_inferred"]


def note_inferred(err: PinqError, plans: Iterable[PlanNode]) -> PinqError:
    """``err`` with a note naming the inferred columns it is about, or ``err`` itself."""
    columns = getattr(err, "typed_columns", ())
    if not columns:
        return err
    sources: dict[str, str] = {}
    for plan in plans:
        for col, source in type_sources(plan).items():
            sources.setdefault(col, source)
    inferred = [c for c in columns if sources.get(c) == "inferred"]
    if not inferred:
        return err
    which = ", ".join(inferred)
    python = "schema={" + ", ".join(f"{c!r}: TYPE" for c in inferred) + "}"
    flags = " ".join(f"--schema {c}=TYPE" for c in inferred)
    note = (
        f" ({which}: type inferred from the file's text; the curator can declare it with "
        f"{python}, TYPE one of int, float, str, bool, datetime)"
    )
    # Hints the error already has (its own fix) win; else the flag for each interface.
    hints = dict(err.hints) or {"python": python, "magic": python, "shell": flags, "cli": flags}
    if isinstance(err, PinqSyntaxError):
        out: PinqError = PinqSyntaxError(
            err.message + note,
            text=err.text,
            line=err.line,
            column=err.column,
            expected=err.expected,
        )
    else:
        out = type(err)(str(err) + note)
    out.hints = hints
    out.typed_columns = err.typed_columns
    return out
