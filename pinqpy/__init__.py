"""pinqpy: Privacy Integrated Queries for pandas.

Wrap a DataFrame in a :class:`PrivateFrame` with a :class:`Budget`; transform it freely with
stable transformations; learn about it only through noisy aggregations, each charged to the
budget before any data is read.

>>> import pandas as pd, pinqpy as pq
>>> budget = pq.Budget(epsilon=1.0)
>>> people = pq.PrivateFrame(pd.DataFrame({"age": [30, 41, 52]}), budget)
>>> _ = people.where("age > 35").count(epsilon=0.1)
>>> budget.remaining.epsilon == 0.9
True
"""

from pinqpy import testing
from pinqpy.accounting.budget import Budget
from pinqpy.accounting.cost import Cost
from pinqpy.api.expressions import Expression, col, func, lit
from pinqpy.api.frame import GroupedFrame, PrivateFrame
from pinqpy.api.partition import Partition
from pinqpy.api.session import Session
from pinqpy.core.version import __version__ as __version__
from pinqpy.errors import (
    BudgetExceededError,
    PandasHabitError,
    PandasHabitTypeError,
    PinqError,
    PinqSyntaxError,
    PrivacyError,
)
from pinqpy.interfaces.magic import load_ipython_extension as load_ipython_extension
from pinqpy.interfaces.magic import unload_ipython_extension as unload_ipython_extension
from pinqpy.remote.client.session import connect
from pinqpy.results.labels import NoisyLabel
from pinqpy.results.marginals import Marginals
from pinqpy.results.tables import NoisyFrame, NoisySeries
from pinqpy.results.values import NoisyCount, NoisyValue

__all__ = [
    "Budget",
    "BudgetExceededError",
    "Cost",
    "Expression",
    "GroupedFrame",
    "Marginals",
    "NoisyCount",
    "NoisyFrame",
    "NoisyLabel",
    "NoisySeries",
    "NoisyValue",
    "PandasHabitError",
    "PandasHabitTypeError",
    "Partition",
    "PinqError",
    "PinqSyntaxError",
    "PrivacyError",
    "PrivateFrame",
    "Session",
    "col",
    "connect",
    "func",
    "lit",
    "testing",
]
