"""The public names are a contract (API.md): this pins them."""

import pinqpy as pq

EXPECTED = {
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
}


def test_all_is_pinned():
    assert set(pq.__all__) == EXPECTED
    for name in pq.__all__:
        assert hasattr(pq, name), name


def test_error_hierarchy():
    for err in (pq.BudgetExceededError, pq.PrivacyError, pq.PinqSyntaxError):
        assert issubclass(err, pq.PinqError)
    assert issubclass(pq.PinqError, Exception)


def test_contract_methods_exist():
    for name in [
        "where",
        "select",
        "assign",
        "distinct",
        "explode",
        "groupby",
        "join",
        "concat",
        "union",
        "intersect",
        "difference",
        "bound_contributions",
        "bound_degree",
        "partition",
        "count",
        "sum",
        "mean",
        "median",
        "quantile",
        "argmax",
        "columns",
        "stability",
        "stabilities",
    ]:
        assert hasattr(pq.PrivateFrame, name), name
    for name in ["count", "sum", "mean", "median", "quantile"]:
        assert hasattr(pq.Partition, name), name
    for name in ["spent", "remaining"]:
        assert hasattr(pq.Budget, name), name
