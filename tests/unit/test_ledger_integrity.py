"""The ledger and the answer cache against an adversarial analyst (and small accounting bugs).

* audit output (``budget.audit()``, ``SHOW LEDGER``, reprs) shows nothing an analyst could
  recompute from a guessed dataset (the old scheme printed a fixed-key hash of every row);
* a ledger file whose spent no longer matches its charges is refused when opened, and answers
  are stored as JSON data, never pickled: a planted row cannot run code;
* a quantile's cache key covers its whole candidate grid;
* nothing is cached or served from the cache while a test hook is in force, and the hooks work
  only behind ``PINQPY_TESTING=1``;
* a fresh zCDP budget shows exactly its total, numpy numbers are accepted, and a delta too
  small to calibrate is refused quickly and charges nothing.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import os
import pickle
import re
import sqlite3
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import pinqpy as pq
from pinqpy.accounting.ledger import Ledger
from pinqpy.pipeline import answers as _answers
from pinqpy.pipeline.prepare import prepare_count

PKG = Path(pq.__file__).parent


def people() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": [f"p{i}" for i in range(60)],
            "income": [1000 * (i % 17) for i in range(60)],
            "g": ["a", "b", "c"] * 20,
        }
    )


def frame(budget: pq.Budget, data: pd.DataFrame | None = None) -> pq.PrivateFrame:
    return pq.PrivateFrame(people() if data is None else data, budget, bounds={"income": (0, 2e4)})


def _dump(path: Path) -> list[tuple[str, list[tuple[object, ...]]]]:
    raw = sqlite3.connect(path)
    try:
        tables = [r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return [(t, sorted(raw.execute(f"SELECT * FROM {t}").fetchall(), key=repr)) for t in tables]
    finally:
        raw.close()


def _sql(path: Path, *statements: tuple[str, tuple[object, ...]]) -> None:
    raw = sqlite3.connect(path)
    for sql, params in statements:
        raw.execute(sql, params)
    raw.commit()
    raw.close()


# -- 1. the audit trail is no equality oracle ------------------------------------------------
def _old_fingerprint(name: str, data: pd.DataFrame) -> str:
    """What the old scheme computed: a fixed-key hash of every row."""
    h = hashlib.sha256()
    h.update(repr((name, tuple(map(str, data.columns)), tuple(map(str, data.dtypes)))).encode())
    h.update(pd.util.hash_pandas_object(data, index=False).to_numpy().tobytes())
    return h.hexdigest()[:32]


def _old_key(prepared: object, budgets: list[pq.Budget], data: pd.DataFrame) -> str:
    text = _answers.question(prepared, None, lambda t: _old_fingerprint(t.name, data))
    assert text is not None
    names = ",".join(sorted(b._ledger_name for b in budgets))
    return "ledger:" + hashlib.sha256((names + "|" + text).encode()).hexdigest()


def test_audit_output_holds_no_recomputable_key(tmp_path):
    path = tmp_path / "budget.db"
    data = people()
    b = pq.Budget(epsilon=1, ledger=path, name="census")
    f = pq.PrivateFrame(data, b, bounds={"income": (0, 2e4)}, name="people")
    f.count(epsilon=0.01)
    table = f._plan.table  # type: ignore[attr-defined]
    prep = prepare_count(f._rel, 0.01, None)
    old_fp = _old_fingerprint(table.name, data)
    old_key = _old_key(prep, [b], data)
    secrets = {
        old_fp,
        old_key,
        old_key.removeprefix("ledger:"),
        _answers.fingerprint(table, f._rel.catalog),  # this process's data hash: never shown either
        _answers.persistent_key([prep], None, [b]) or "",
    }
    secrets |= {s[:16] for s in secrets if s}  # nor any prefix worth comparing

    s = pq.Session()
    s.register("people", data, budget=b, bounds={"income": (0, 2e4)})
    s.sql("SELECT COUNT(*) FROM people WHERE income > 5000", epsilon=0.01)
    outputs = [
        b.audit().to_string(),
        b.audit().to_csv(),
        s.sql("SHOW LEDGER").to_string(),
        s.sql("SHOW LEDGER").to_csv(),
        repr(b),
        b._repr_html_(),
        repr(b.ledger),
        b.ledger.budgets().to_string(),  # type: ignore[attr-defined]
    ]
    for out in outputs:
        for secret in secrets:
            assert secret not in out
        assert not re.search(r"[0-9a-f]{24,}", out), out  # no hash of anything at all
    assert "cache_key" not in b.audit().columns
    # Nor does the file: answers are keyed by an HMAC under the file's own secret.
    stored = _dump(path)
    flat = repr(stored)
    for secret in secrets:
        assert secret not in flat
    answers = dict(stored)["answers"]
    assert len(answers) == 2 and all(len(row[1]) == 64 for row in answers)


def test_each_ledger_file_has_its_own_secret(tmp_path):
    keys = []
    for name in ("one.db", "two.db"):
        b = pq.Budget(epsilon=1, ledger=tmp_path / name)
        frame(b).count(epsilon=0.1)
        b.ledger.close()  # type: ignore[attr-defined]
        keys.append(dict(_dump(tmp_path / name))["answers"][0][1])
    assert keys[0] != keys[1]  # the same question over the same data


def test_in_memory_keys_are_keyed_per_process():
    from pinqpy.plan.canonical import digest

    assert digest("count") != hashlib.sha256(b"count").hexdigest()


# -- 2. the ledger does not trust its file ---------------------------------------------------
@pytest.fixture
def charged(tmp_path) -> Path:
    path = tmp_path / "budget.db"
    b = pq.Budget(epsilon=1, ledger=path, name="main")
    f = frame(b)
    f.count(epsilon=0.1)
    f.sum("income", epsilon=0.2)
    f.where("income > 3000").count(epsilon=0.3)
    b.ledger.close()  # type: ignore[attr-defined]
    return path


TAMPERING = {
    "edit spent": [("UPDATE budgets SET spent_epsilon = '0/1' WHERE name = 'main'", ())],
    "delete a charge": [
        ("DELETE FROM charges WHERE query_id = (SELECT MAX(query_id) FROM charges)", ())
    ],
    "edit a charge": [
        (
            "UPDATE charges SET epsilon = '1/100' WHERE query_id = (SELECT MIN(query_id) "
            "FROM charges)",
            (),
        )
    ],
    "charge of no budget": [
        (
            "INSERT INTO charges (query_id, budget, epsilon, delta) VALUES (1, 'ghost', '1/2', "
            "'0/1')",
            (),
        )
    ],
    "malformed spent": [("UPDATE budgets SET spent_epsilon = 'x' WHERE name = 'main'", ())],
}


@pytest.mark.parametrize("how", sorted(TAMPERING))
def test_a_tampered_ledger_is_refused_on_open_and_left_untouched(charged, how):
    _sql(charged, *TAMPERING[how])
    before = _dump(charged)
    with pytest.raises(pq.PinqError, match="integrity check"):
        pq.Budget(epsilon=1, ledger=charged, name="main")
    with pytest.raises(pq.PinqError, match="integrity check"):
        Ledger(charged)
    assert _dump(charged) == before  # nothing was written
    with Ledger(charged, verify=False) as led:  # the curator may inspect it
        assert led.problems and led.check()
        assert not led.charges().empty
        with pytest.raises(pq.PinqError, match="inspection only"):
            led.cached("anything")
        with pytest.raises(pq.PinqError, match="inspection only"):
            pq.Budget(epsilon=1, ledger=led, name="main")
    assert _dump(charged) == before


def test_an_untampered_ledger_reopens(charged):
    b = pq.Budget(epsilon=1, ledger=charged, name="main")
    assert b.spent.epsilon == Fraction(3, 5)
    assert b.ledger.problems == []  # type: ignore[attr-defined]


def _imports(module: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_no_pickle_on_the_ledger_path():
    for name in (
        "pipeline/answers.py",
        "pipeline/run.py",
        "accounting/ledger.py",
        "accounting/budget.py",
        "plan/canonical.py",
    ):
        source = (PKG / name).read_text()
        assert not _imports(PKG / name) & {"pickle", "marshal", "shelve", "dill", "cloudpickle"}
        assert "pickle.loads" not in source and "eval(" not in source


class _Boom:
    def __reduce__(self):  # runs os.system if anything unpickles it
        return (os.system, ("touch PWNED",))


def _planted_answers(marker: Path) -> list[str]:
    evil = base64.b64encode(pickle.dumps(_Boom())).decode()
    return [
        evil,  # the old format: a pickle
        pickle.dumps(_Boom()).decode("latin-1"),
        '{"format": 1, "answer": {"$": "obj", "cls": "Popen", "f": {}}}',
        '{"format": 1, "answer": {"$": "obj", "cls": "_Boom", "f": {}}}',
        '{"format": 1, "answer": [{"$": "tuple", "v": [{"$": "nd", "dtype": "|V8", "shape": '
        '[1], "v": [1]}, null]}]}',
        '{"format": 1, "answer": [{"$": "obj", "cls": "AdditiveAccuracy", "f": {"__class__": '
        '"x"}}]}',
        '{"format": 1, "answer": {"$": "np", "dtype": "O", "v": 1}}',
    ]


def test_a_planted_answer_cannot_run_code(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    path = tmp_path / "budget.db"
    for text in _planted_answers(marker):
        path.unlink(missing_ok=True)
        b = pq.Budget(epsilon=10, ledger=path)
        frame(b).count(epsilon=0.1)
        b.ledger.close()  # type: ignore[attr-defined]
        _sql(path, ("UPDATE answers SET answer = ?", (text,)))
        again = pq.Budget(epsilon=10, ledger=path)
        with pytest.raises(pq.PinqError, match="ledger holds"):
            frame(again).count(epsilon=0.1)
        assert not marker.exists()
        again.ledger.close()  # type: ignore[attr-defined]
        for extra in ("-wal", "-shm"):
            Path(str(path) + extra).unlink(missing_ok=True)


def test_restart_restores_budget_and_every_kind_of_answer(tmp_path):
    path = tmp_path / "budget.db"

    def ask(b: pq.Budget) -> list[object]:
        f = frame(b)
        parts = f.partition("g", keys=["a", "b"])
        s = pq.Session()
        s.register("t", people(), budget=b, bounds={"income": (0, 2e4)})
        out = [
            f.count(epsilon=0.1),
            f.count(epsilon=0.1, delta=1e-6),
            f.sum("income", epsilon=0.1),
            f.mean("income", epsilon=0.1, delta=1e-6),
            f.quantile("income", 0.5, epsilon=0.1, ci=True),
            f.quantile("income", 0.5, epsilon=0.1),
            f.argmax("g", ["a", "b", "z"], epsilon=0.1),
            parts.count(epsilon=0.1),
            parts.median("income", epsilon=0.1, ci=True),
            s.sql("SELECT VARIANCE(income), STDDEV(income) FROM t", epsilon=0.2),
        ]
        rendered = []
        for o in out:
            acc = o.accuracy
            accs = acc.values() if isinstance(acc, dict) else [acc]
            rendered.append(
                repr(o)
                + "".join(
                    repr(a.interval(0.9) if a.has_interval else a.rank_error(0.9)) for a in accs
                )
            )
        return rendered

    first_budget = pq.Budget(epsilon=10, delta=1e-3, ledger=path, name="c")
    first = ask(first_budget)
    spent = first_budget.spent
    assert first_budget.audit().has_answer.all()  # every kind of answer was stored
    first_budget.ledger.close()  # type: ignore[attr-defined]
    again = pq.Budget(epsilon=10, delta=1e-3, ledger=path, name="c")  # a restart
    assert again.spent == spent
    assert ask(again) == first
    assert again.spent == spent  # every answer came from the ledger


def test_a_version_1_ledger_keeps_its_charges_and_drops_its_pickled_answers(charged):
    _sql(
        charged,
        ("UPDATE meta SET value = '1' WHERE key = 'schema_version'", ()),
        ("DELETE FROM meta WHERE key = 'secret'", ()),
        ("UPDATE queries SET cache_key = 'ledger:abc'", ()),
    )
    b = pq.Budget(epsilon=1, ledger=charged, name="main")
    assert b.spent.epsilon == Fraction(3, 5)
    tables = dict(_dump(charged))
    assert tables["answers"] == []
    assert all(row[3] is None for row in tables["queries"])
    meta = dict(tables["meta"])
    assert meta["schema_version"] == "2" and len(meta["secret"]) == 64


# -- 3. the cache answers the right question -------------------------------------------------
def test_quantile_cache_key_covers_the_whole_candidate_grid():
    b = pq.Budget(epsilon=10)
    f = frame(b)
    # Same length, same first four candidates (the 32 bytes the old key read), then different.
    f.quantile("income", 0.5, epsilon=0.1, candidates=[0, 1000, 2000, 3000, 4000, 5000])
    f.quantile("income", 0.5, epsilon=0.1, candidates=[0, 1000, 2000, 3000, 4000, 6000])
    assert b.spent.epsilon == Fraction(1, 5)
    f.quantile("income", 0.5, epsilon=0.1, candidates=[0, 1000, 2000, 3000, 4000, 6000])
    assert b.spent.epsilon == Fraction(1, 5)  # the same grid again: cached
    a = _answers.grid_digest(np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0]))
    assert a != _answers.grid_digest(np.array([0.0, 1.0, 2.0, 3.0, 4.0, 6.0]))
    assert len(a) == 64


def test_median_cache_key_tells_the_interval_form_apart():
    b = pq.Budget(epsilon=10)
    f = frame(b)
    plain = f.median("income", epsilon=0.1)
    with_ci = f.median("income", epsilon=0.1, ci=True)  # another release: charged again
    assert b.spent.epsilon == Fraction(1, 5)
    low, high = with_ci.ci()  # the cache did not hand back the release without an interval
    assert low <= with_ci <= high
    with pytest.raises(pq.PinqError, match="ci=True"):
        plain.ci()
    assert f.median("income", epsilon=0.1, ci=True).ci() == (low, high)  # cached
    assert f.median("income", epsilon=0.1) == plain
    assert b.spent.epsilon == Fraction(1, 5)


@pytest.mark.parametrize("hook", ["no_noise", "seed"])
def test_nothing_is_cached_or_served_under_a_test_hook(tmp_path, hook):
    def active():
        return pq.testing.no_noise() if hook == "no_noise" else pq.testing.seed(5)

    path = tmp_path / "budget.db"
    b = pq.Budget(epsilon=10, ledger=path)
    f = frame(b)
    noisy = f.count(epsilon=0.1)  # cached (in memory and in the ledger)
    assert b.spent.epsilon == Fraction(1, 10)
    with active():
        f.count(epsilon=0.1)  # not served from the cache: charged again
        assert b.spent.epsilon == Fraction(2, 10)
        exact = f.where("income >= 0").count(epsilon=0.2)
        f.where("income >= 0").count(epsilon=0.2)
        assert b.spent.epsilon == Fraction(6, 10)
    if hook == "no_noise":
        assert int(exact) == 60
    assert f.count(epsilon=0.1) == noisy  # the earlier noisy answer, free again
    assert b.spent.epsilon == Fraction(6, 10)
    f.where("income >= 0").count(epsilon=0.2)  # never cached: charged
    assert b.spent.epsilon == Fraction(8, 10)
    audit = b.audit()
    assert audit.has_answer.tolist() == [True, False, False, False, True]
    b.ledger.close()  # type: ignore[attr-defined]
    restarted = pq.Budget(epsilon=10, ledger=path)
    frame(restarted).where("income >= 0").count(epsilon=0.2)  # the noisy one, from the ledger
    assert restarted.spent.epsilon == Fraction(8, 10)


# -- 4. the hooks need an explicit switch ----------------------------------------------------
def test_hooks_are_refused_without_the_switch(monkeypatch):
    for value in (None, "0", "yes", ""):
        if value is None:
            monkeypatch.delenv("PINQPY_TESTING", raising=False)
        else:
            monkeypatch.setenv("PINQPY_TESTING", value)
        with pytest.raises(pq.PinqError, match="PINQPY_TESTING=1"):
            pq.testing.seed(1)
        with pytest.raises(pq.PinqError, match="PINQPY_TESTING=1"), pq.testing.no_noise():
            pass
        with pytest.raises(pq.PinqError, match="PINQPY_TESTING=1"), pq.testing.engine("pandas"):
            pass
        assert not pq.testing.active()
        pq.testing.reset()  # always allowed
    monkeypatch.setenv("PINQPY_TESTING", "1")
    with pq.testing.seed(1):
        assert pq.testing.active()
    assert not pq.testing.active()


# -- 5. small accounting defects -------------------------------------------------------------
def test_a_fresh_zcdp_budget_shows_exactly_its_total():
    b = pq.Budget(epsilon=1.0, delta=1e-6, accounting="zcdp")
    assert b.remaining == pq.Cost(epsilon=1, delta=1e-6)
    assert b.remaining.epsilon == 1
    frame(b).count(epsilon=0.1)
    assert 0 < b.remaining.epsilon < 1


@pytest.mark.parametrize(
    "value, expected",
    [
        (np.int64(1), Fraction(1)),
        (np.int32(2), Fraction(2)),
        (np.uint8(3), Fraction(3)),
        (np.float64(0.5), Fraction(1, 2)),
        (np.float64(0.1), Fraction(1, 10)),
        (np.float32(0.25), Fraction(1, 4)),
    ],
)
def test_numpy_numbers_are_accepted_exactly(value, expected):
    b = pq.Budget(epsilon=value)
    assert b.total.epsilon == expected and type(b.total.epsilon.numerator) is int
    big = pq.Budget(epsilon=10, delta=np.float64(1e-3))
    f = frame(big)
    f.count(epsilon=value)
    f.sum("income", epsilon=value, delta=np.float64(1e-6))
    assert big.spent.epsilon == 2 * expected


@pytest.mark.parametrize(
    "value", [True, np.bool_(True), "abc", None, [1], np.complex128(1), np.float64("nan")]
)
def test_non_numbers_are_refused_with_a_pinq_error(value):
    with pytest.raises(pq.PinqError):
        pq.Budget(epsilon=value)
    b = pq.Budget(epsilon=1)
    with pytest.raises(pq.PinqError):
        frame(b).count(epsilon=value)
    assert b.spent.epsilon == 0


@pytest.mark.parametrize("delta", [5e-324, 1e-310, Fraction(1, 10**400)])
def test_a_delta_too_small_to_calibrate_is_refused_quickly_and_charges_nothing(tmp_path, delta):
    b = pq.Budget(epsilon=1, delta=0.5, ledger=tmp_path / "b.db")
    f = frame(b)
    for ask in (
        lambda: f.count(epsilon=0.5, delta=delta),
        lambda: f.sum("income", epsilon=0.5, delta=delta),
        lambda: f.mean("income", epsilon=0.5, delta=delta),
        lambda: f.select_keys("g", epsilon=0.5, delta=delta),
    ):
        start = time.monotonic()
        with pytest.raises(pq.PinqError, match="too small"):
            ask()
        assert time.monotonic() - start < 5
    assert b.spent.epsilon == 0 and b.audit().empty
    # the smallest accepted delta still calibrates, split or not
    f.mean("income", epsilon=0.5, delta=1e-300)
    assert b.spent.epsilon == Fraction(1, 2)
