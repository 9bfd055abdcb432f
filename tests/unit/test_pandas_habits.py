"""pandas habits get pointers: each pandas spelling on a private frame, a groupby or a
partition raises a pinqpy error naming the pinqpy way (and stays an AttributeError or a
TypeError, as Python's own answer is)."""

from __future__ import annotations

import copy
import pickle

import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.api.habits import FRAME_HABITS, GROUPED_HABITS, PARTITION_HABITS
from pinqpy.demo import PUMS_KEYS, load_pums


@pytest.fixture
def people() -> pq.PrivateFrame:
    return pq.PrivateFrame(
        load_pums(), pq.Budget(1.0), bounds={"age": (0, 100)}, keys=PUMS_KEYS, name="people"
    )


@pytest.mark.parametrize(
    ("attribute", "pointer"),
    [
        ("shape", "count(epsilon="),
        ("size", "count(epsilon="),
        ("describe", "accuracy("),
        ("value_counts", "histogram("),
        ("iloc", "where("),
        ("loc", "where("),
        ("dtypes", ".schema"),
        ("info", ".columns"),
        ("mode", "argmax("),
        ("merge", "join("),
        ("query", "where("),
    ],
)
def test_frame_habits_point_the_way(people: pq.PrivateFrame, attribute: str, pointer: str) -> None:
    with pytest.raises(pq.PandasHabitError, match="a pandas habit") as info:
        getattr(people, attribute)
    assert pointer in str(info.value)
    assert isinstance(info.value, AttributeError)
    assert isinstance(info.value, pq.PinqError)


def test_column_attribute_points_to_expressions(people: pq.PrivateFrame) -> None:
    with pytest.raises(pq.PandasHabitError, match=r"columns are not attributes.*select\('age'\)"):
        people.age  # noqa: B018


def test_unknown_names_keep_pythons_error(people: pq.PrivateFrame) -> None:
    with pytest.raises(AttributeError) as info:
        people.no_such_thing  # noqa: B018
    assert not isinstance(info.value, pq.PinqError)
    with pytest.raises(AttributeError) as info:
        people._private_name  # noqa: B018
    assert not isinstance(info.value, pq.PinqError)


def test_hasattr_and_dir_still_work(people: pq.PrivateFrame) -> None:
    assert not hasattr(people, "shape")
    assert not hasattr(people, "__array__")
    assert hasattr(people, "count")
    assert "partition" in dir(people)
    assert copy.copy(people) is people
    with pytest.raises(pq.PrivacyError):
        pickle.dumps(people)


def test_len_iteration_and_indexing_are_type_errors(people: pq.PrivateFrame) -> None:
    with pytest.raises(pq.PandasHabitTypeError, match=r"count\(epsilon=") as info:
        len(people)
    assert isinstance(info.value, TypeError) and isinstance(info.value, pq.PrivacyError)
    with pytest.raises(pq.PandasHabitTypeError, match="noisy aggregations"):
        list(people)
    with pytest.raises(pq.PandasHabitTypeError, match=r"select\(\.\.\.\)"):
        people["age"]


@pytest.mark.parametrize(
    ("call", "pointer"),
    [
        (lambda f: f.count(), r"count\(\) needs epsilon="),
        (lambda f: f.sum(), r"sum\(\) needs a column"),
        (lambda f: f.mean("age"), r"mean\('age', epsilon=0.1\)"),
        (lambda f: f.median("age"), r"median\(\) needs epsilon="),
        (lambda f: f.quantile("age", 0.9), r"quantile\(\) needs epsilon="),
        (lambda f: f.variance("age"), r"variance\(\) needs epsilon="),
        (lambda f: f.std(), r"std\(\) needs a column"),
        (lambda f: f.partition("sex").count(), r"count\(\) needs epsilon="),
        (lambda f: f.partition("sex").mean("age"), r"mean\(\) needs epsilon="),
    ],
)
def test_aggregations_without_epsilon_say_so(
    people: pq.PrivateFrame, call: object, pointer: str
) -> None:
    with pytest.raises(pq.PandasHabitTypeError, match=pointer) as info:
        call(people)  # type: ignore[operator]
    assert isinstance(info.value, TypeError)
    assert people.budgets[0].spent.epsilon == 0


@pytest.mark.parametrize(
    ("name", "method"),
    [
        ("count", "count"),
        ("size", "count"),
        ("mean", "mean"),
        ("sum", "sum"),
        ("var", "variance"),
        ("describe", "count"),
        ("value_counts", "count"),
    ],
)
def test_groupby_habits_point_to_partition(people: pq.PrivateFrame, name: str, method: str) -> None:
    grouped = people.groupby("sex")
    with pytest.raises(pq.PandasHabitError, match=rf"\.partition\('sex'\)\.{method}\(") as info:
        getattr(grouped, name)
    assert "agg(n='COUNT(*)')" in str(info.value)


def test_groupby_on_several_keys_names_them(people: pq.PrivateFrame) -> None:
    with pytest.raises(pq.PandasHabitError, match=r"\.partition\(\['sex', 'race'\]\)\.mean\("):
        people.groupby("sex", "race").mean  # noqa: B018
    with pytest.raises(pq.PandasHabitError, match=r"\.partition\(\['sex', 'race'\]\)\.variance\("):
        people.groupby("sex", "race").var  # noqa: B018


@pytest.mark.parametrize("name", ["describe", "size", "value_counts", "agg", "shape"])
def test_partition_habits_point_the_way(people: pq.PrivateFrame, name: str) -> None:
    parts = people.partition("sex")
    with pytest.raises(pq.PandasHabitError, match="a pandas habit"):
        getattr(parts, name)


def test_partition_is_still_a_mapping(people: pq.PrivateFrame) -> None:
    parts = people.partition("sex")
    assert len(parts) == 2 and list(parts) == [0, 1]
    assert list(parts.keys()) == [0, 1]
    assert isinstance(parts[0], pq.PrivateFrame)


def test_every_pointer_names_a_real_method() -> None:
    """The pinqpy way named in each pointer exists."""
    import re

    methods = set(dir(pq.PrivateFrame)) | set(dir(pq.Partition)) | set(dir(pq.GroupedFrame))
    for table in (FRAME_HABITS, GROUPED_HABITS, PARTITION_HABITS):
        for name, pointer in table.items():
            for method in re.findall(r"\.([a-z_]+)\(", pointer):
                assert method in methods, (name, method)
    # A habit named after a real method would never be reached.
    for cls, table in ((pq.PrivateFrame, FRAME_HABITS), (pq.GroupedFrame, GROUPED_HABITS)):
        assert not set(table) & set(dir(cls))
    assert not set(PARTITION_HABITS) & set(dir(pq.Partition))


def test_pointers_work_on_every_engine() -> None:
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    frame = pq.PrivateFrame(
        pd.DataFrame({"age": [1, 2]}), pq.Budget(1), engine="duckdb", connection=con
    )
    with pytest.raises(pq.PandasHabitError):
        frame.shape  # noqa: B018
