"""The SQL compiler: a parsed statement becomes a release of prepared measurements.

One module a pass, run in order by :func:`~.release.compile_release` (docs/architecture.md
draws them): :mod:`.options` (OPTIONS and the budget), :mod:`.scopes` (name resolution),
:mod:`.joins` (FROM and joins), :mod:`.subqueries` (inner queries and their GROUP BY),
:mod:`.contributions` (the contribution bounds per privacy unit), :mod:`.keys` (the outer
GROUP BY: public keys or private key selection), :mod:`.outputs` (SELECT, HAVING and ORDER BY
over the released values), :mod:`.aggregates` (each aggregate's prepared measurement) and
:mod:`.release` (the budget split and the :class:`~.release.CompiledRelease`). Each takes
frozen values and returns a frozen value; :mod:`.context` holds what they all read.
"""

from pinqpy.sql.compiler.context import Catalog, locate, option_pos
from pinqpy.sql.compiler.keys import MAX_GROUPS
from pinqpy.sql.compiler.release import CompiledRelease, Measurement, compile_release
from pinqpy.sql.compiler.scopes import resolve_table

__all__ = ["Catalog", "CompiledRelease", "Measurement", "compile_release", "resolve_table"]
__all__ += ["MAX_GROUPS", "locate", "option_pos"]
