"""The SQL compiler: a parsed statement becomes a release of prepared measurements."""

from pinqpy.sql.compiler.release import (
    MAX_GROUPS,
    Catalog,
    CompiledRelease,
    Measurement,
    compile_release,
    locate,
    option_pos,
    resolve_table,
)

__all__ = ["Catalog", "CompiledRelease", "Measurement", "compile_release", "resolve_table"]
__all__ += ["MAX_GROUPS", "locate", "option_pos"]
