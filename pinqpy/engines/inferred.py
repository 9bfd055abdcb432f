"""Telling the curator that a table's column types were inferred from its rows.

A CSV file read without ``schema=`` gets the types its engine infers from the text. Column
types are public facts (every analyst sees them, and stabilities and refusals follow them),
but inferred ones follow the rows: on pandas one empty field makes an integer column float,
so the type of a privacy unit or key column can say whether a NULL is there, and the engines
can infer different types from one file. Each interface warns once per table as it loads it,
in its own words for declaring the types (``schema=``, ``--schema``, the server config's
``schema = {...}``); the warning names columns and types, never a value.

>>> from pinqpy.engines.registry import Wrapped
>>> types = {"age": "int", "name": "str"}
>>> w = Wrapped("pandas", None, types, {"age": "inferred", "name": "declared"})
>>> inferred_types(w)
{'age': 'int'}
>>> note = inferred_types_message("people.csv", "schema={'age': 'int'}")
>>> print(note)  # doctest: +NORMALIZE_WHITESPACE
people.csv: column types were inferred from the file's rows. Inferred types are public
facts (every analyst sees them) that follow the rows: on pandas one empty field makes an
integer column float. Declare them (here as inferred now): schema={'age': 'int'}
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pinqpy.expr.types import ColumnType

if TYPE_CHECKING:
    from pinqpy.engines.wrapping.wrapped import Wrapped

__all__ = ["inferred_types", "inferred_types_message"]


def inferred_types(wrapped: Wrapped) -> dict[str, ColumnType]:
    """The columns of ``wrapped`` whose types were inferred from its rows, with those types."""
    return {c: wrapped.schema[c] for c, s in wrapped.type_source.items() if s == "inferred"}


def inferred_types_message(where: str, declaration: str) -> str:
    """The warning for a table (``where``: its file or name) whose types were inferred;
    ``declaration`` is how the interface declares them."""
    return (
        f"{where}: column types were inferred from the file's rows. Inferred types are "
        "public facts (every analyst sees them) that follow the rows: on pandas one empty "
        f"field makes an integer column float. Declare them (here as inferred now): "
        f"{declaration}"
    )
