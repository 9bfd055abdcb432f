"""The SQL compiler: a parsed statement becomes a release of prepared measurements."""

from pinqpy.sql.compiler.context import Catalog, locate, option_pos
from pinqpy.sql.compiler.release import (
    MAX_GROUPS,
    CompiledRelease,
    Measurement,
    compile_release,
)
from pinqpy.sql.compiler.scopes import resolve_table

__all__ = ["Catalog", "CompiledRelease", "Measurement", "compile_release", "resolve_table"]
__all__ += ["MAX_GROUPS", "locate", "option_pos"]
