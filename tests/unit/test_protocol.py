"""The wire format: values, results, errors and tables survive a round trip through JSON
bytes, and nothing but data crosses."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.remote import protocol as P


def _wire(data):
    return P.loads(P.dumps(data))


def _round(result):
    return P.decode_result(_wire(P.encode_result(result)))


@pytest.fixture
def people():
    rng = np.random.default_rng(7)
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 90, 400),
            "sex": rng.integers(0, 2, 400),
            "state": rng.choice(["CA", "NY", "TX"], 400),
        }
    )
    budget = pq.Budget(epsilon=100, delta=1e-6)
    return pq.PrivateFrame(df, budget, bounds={"age": (0, 100)}, keys={"sex": [0, 1]})


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        3,
        2.5,
        "CA",
        (1, "a"),
        [1, (2, 3)],
        Fraction(1, 3),
        {"age": (0, 100)},
        pd.Timestamp("2020-01-02"),
    ],
)
def test_values_round_trip_with_their_types(value):
    back = P.decode_value(_wire(P.encode_value(value)))
    assert back == value and type(back) is type(value)


def test_non_finite_floats_and_numpy_scalars_travel_as_plain_numbers():
    back = P.decode_value(_wire(P.encode_value([np.int64(3), np.float32(0.5), math.inf])))
    assert back == [3, 0.5, math.inf]
    assert [type(x) for x in back] == [int, float, float]


def test_expressions_travel_as_trees_and_come_back_as_expressions():
    back = P.decode_value(_wire(P.encode_value(pq.col("age") * 2 + 1)))
    assert isinstance(back, pq.Expression)
    assert back.to_sql() == (pq.col("age") * 2 + 1).to_sql()


def test_a_callable_is_refused_before_anything_is_sent():
    with pytest.raises(pq.PinqError, match="callable cannot be sent"):
        P.encode_value(lambda rows: rows["age"])
    with pytest.raises(pq.PinqError, match="callable cannot be sent"):
        P.encode_args({"column": np.log})


def test_argument_names_must_be_plain_identifiers():
    with pytest.raises(pq.PinqError, match="not an argument name"):
        P.decode_args({"__class__": 1})
    with pytest.raises(pq.PinqError, match="named arguments"):
        P.decode_args([1, 2])


def test_strict_json_refuses_nan_oversized_and_deep_bodies():
    with pytest.raises(pq.PinqError, match="not valid JSON"):
        P.loads(b'{"x": NaN}')
    with pytest.raises(pq.PinqError, match="larger than"):
        P.loads(b"[" + b"1," * 100 + b"1]", limit=50)
    with pytest.raises(pq.PinqError, match="nested too deeply"):
        P.loads(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(pq.PinqError, match="not valid JSON"):
        P.loads(b"\xff\xfe")
    with pytest.raises(ValueError):
        P.dumps({"x": math.nan})


def test_scalar_results_keep_value_type_and_interval(people):
    for result in (
        people.count(epsilon=0.5),
        people.sum("age", epsilon=0.5),
        people.mean("age", epsilon=0.5),
        people.median("age", epsilon=0.5, ci=True),
    ):
        back = _round(result)
        assert type(back) is type(result)
        assert back == result
        assert back.ci(0.9) == result.ci(0.9)
        assert back.epsilon == result.epsilon and back.mechanism == result.mechanism


def test_a_median_without_interval_round_trips_its_refusal(people):
    result = people.median("age", epsilon=0.5)
    back = _round(result)
    assert back == result and back.mechanism == result.mechanism
    assert back.accuracy.rank_error(0.9) == result.accuracy.rank_error(0.9)
    with pytest.raises(pq.PinqError, match="ci=True"):
        back.ci(0.9)


def test_labels_series_frames_and_explanations_round_trip(people):
    label = people.argmax("state", candidates=["CA", "NY", "TX"], epsilon=0.5)
    back = _round(label)
    assert back == label and isinstance(back, pq.NoisyLabel) and back.ci() == label.ci()

    series = people.partition("sex").count(epsilon=0.5)
    back = _round(series)
    assert back.equals(series) and back.ci().equals(series.ci())

    session = pq.Session()
    session.register("people", people)
    frame = session.sql(
        "SELECT sex, COUNT(*) AS n, AVG(age) AS a FROM people GROUP BY sex", epsilon=1
    )
    back = _round(frame)
    assert pd.DataFrame(back).equals(pd.DataFrame(frame))
    assert back.ci("a").equals(frame.ci("a"))

    text = session.explain("SELECT COUNT(*) FROM people", epsilon=0.25)
    back = _round(text)
    assert back == text and back.charges == text.charges

    described = session.sql("DESCRIBE people")
    assert _round(described).equals(described)


def test_accuracy_previews_and_key_lists_round_trip(people):
    preview = people.accuracy("sum", "age", epsilon=0.1)
    assert _round(preview) == preview
    assert _round(["CA", ("NY", 1), None]) == ["CA", ("NY", 1), None]


def test_selected_keys_travel_with_their_counts(people):
    with pq.testing.seed(4):
        keys = people.select_keys(["state", "sex"], epsilon=1, delta=1e-6)
    back = _round(keys)
    assert type(back) is type(keys) and list(back) == list(keys) == sorted(keys)
    pd.testing.assert_series_equal(pd.Series(back.counts), pd.Series(keys.counts))
    pd.testing.assert_frame_equal(back.counts.ci(0.9), keys.counts.ci(0.9))
    doc = _wire(P.encode_result(keys))
    with pytest.raises(pq.PinqError, match="counts were expected"):
        P.decode_result({**doc, "counts": {"kind": "plain", "value": 3}})
    with pytest.raises(pq.PinqError, match="one count per key"):
        P.decode_result({**doc, "items": doc["items"][:1]})


def test_public_tables_keep_their_columns_types_and_missing_values():
    df = pd.DataFrame(
        {
            "state": ["CA", None, "TX"],
            "pop": [39, 20, 29],
            "share": [0.5, math.nan, 1.0],
            "flag": [True, False, True],
            "when": pd.to_datetime(["2020-01-01", None, "2021-06-30"]),
        }
    )
    back = P.decode_frame(_wire(P.encode_frame(df)))
    assert list(back.columns) == list(df.columns)
    assert back.dtypes.tolist() == df.dtypes.tolist()
    pd.testing.assert_frame_equal(back, df)


def test_malformed_tables_and_results_are_pinqpy_errors():
    with pytest.raises(pq.PinqError, match="malformed"):
        P.decode_frame({"columns": "x"})
    with pytest.raises(pq.PinqError, match="wrong length"):
        P.decode_frame({"columns": [{"name": "a", "values": [1]}], "index": {"range": [0, 2, 1]}})
    with pytest.raises(pq.PinqError, match="does not read"):
        P.decode_result({"kind": "pickle"})
    with pytest.raises(pq.PinqError):
        P.decode_result({"kind": "value", "accuracy": {"$": "obj", "cls": "os.system"}})


def test_errors_keep_class_message_and_caret():
    err = pq.PinqSyntaxError("unknown column 'agee'", text="SELECT agee", line=1, column=8)
    back = P.decode_error(_wire(P.encode_error(err)))
    assert type(back) is pq.PinqSyntaxError and str(back) == str(err)
    for exc in (pq.PrivacyError("no"), pq.BudgetExceededError("over"), pq.PinqError("bad")):
        back = P.decode_error(_wire(P.encode_error(exc)))
        assert type(back) is type(exc) and str(back) == str(exc)
    assert type(P.decode_error({"type": "SystemExit", "message": "x"})) is pq.PinqError
    assert str(P.decode_error("junk")) == "the server answered with a malformed error"
