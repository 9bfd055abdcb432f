"""One SQL generator for the SQL engines: expressions and plan helpers, with a declared
:class:`~pinqpy.engines.sqlgen.dialect.Dialect` per engine."""
