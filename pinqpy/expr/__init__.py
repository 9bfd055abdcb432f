"""The expression language shared by the Python API and SQL.

- :mod:`.ast`: the immutable syntax tree (no pandas), with ``to_sql()``.
- :mod:`.parser`: text -> tree, with positioned :class:`~pinqpy.errors.PinqSyntaxError`.
- :mod:`.check`: static checks against a schema (names, arity, types).
- :mod:`.bounds`: bounds and public keys derived from metadata, never from data.
- :mod:`.pandas_eval`: vectorized evaluation with SQL NULL semantics.

Only the tree and the parser are imported here, so plans do not pull in pandas.
"""

from pinqpy.expr.ast import AGGREGATE_FUNCTIONS, Expr, contains_aggregate
from pinqpy.expr.parser import parse_expression

__all__ = ["AGGREGATE_FUNCTIONS", "Expr", "contains_aggregate", "parse_expression"]
