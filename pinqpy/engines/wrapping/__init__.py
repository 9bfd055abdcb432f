"""User data made a plan source (:class:`~pinqpy.engines.wrapping.wrapped.Wrapped`) on its
engine: ``frames`` for data handed over in memory or by name, ``files`` for parquet and CSV
files, one ``*_source`` module per engine that reads data where it lies (DuckDB, Spark,
PostgreSQL; Polars in :mod:`pinqpy.engines.polars.source`), and ``declared`` for the types
declared with ``schema=``.

DuckDB, Spark and Polars are imported only when used, and a missing one is reported with the
pip extra that installs it.

Data in DuckDB, Spark or Polars is read where it lies: nothing is copied into Python. As with a
pandas DataFrame, the curator should not change a table while frames over it are in use
(answers are cached per wrapped table).

Column types are fixed when a table is wrapped, from the engine's column types (a pandas
dtype, a DuckDB or Spark type), never from the values a query reads. A pandas ``object``
column is ``any`` (see :data:`pinqpy.expr.types.ANY_RULE`); DuckDB and Spark cannot hold a
column of Python objects of mixed kinds, so there it must be declared (a Polars ``Object``
column too: see :mod:`pinqpy.engines.polars.types`). ``schema=`` declares
types: each declared column is converted (pandas) or cast (DuckDB, Spark) once, here, and a
value that does not convert is refused before anything is charged. A CSV file's types are
inferred from the file by the engine that reads it, once, when it is wrapped.
"""
