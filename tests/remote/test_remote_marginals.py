"""Marginals over pq.connect: the server measures, only noisy counts and the public domain
cross the wire, and the client fits the model (SQL's SELECT MARGINALS and the Python call)."""

from __future__ import annotations

import pytest

import pinqpy as pq
from tests.remote.harness import start_server


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory):
    server = start_server(tmp_path_factory.mktemp("marginals"), testing="no-noise")
    with pq.connect(server.url, token=server.tokens["alice"]) as s:
        yield s
    server.stop()


def test_sql_marginals_cross_as_counts(session) -> None:
    before = session.budget.spent
    text = session.sql(
        "EXPLAIN SELECT MARGINALS (sex, married), (CUT(age, 30, 50), sex) FROM pums "
        "OPTIONS (epsilon = 1)"
    )
    assert "2 marginal(s) charge Cost(epsilon=1)" in str(text)
    assert session.budget.spent == before
    m = session.sql(
        "SELECT MARGINALS (sex, married), (CUT(age, 30, 50), sex) FROM pums OPTIONS (epsilon = 1)"
    )
    assert isinstance(m, pq.Marginals)
    assert m.domain["age"] == ["(-inf, 30)", "[30, 50)", "[50, inf)"]
    assert int(m.measurements[("sex", "married")].sum()) == 1000  # no-noise server: exact
    assert session.budget.spent.epsilon - before.epsilon == 1


def test_frame_marginals_and_synthesize(session) -> None:
    t = session.table("pums")
    m = t.marginals([("sex", "race")], epsilon=0.1)
    assert m.measurements[("sex", "race")].tolist()[:2] == [274, 34]  # PUMS: sex 0 of race 1 and 2
    s = t.synthesize(0.3, columns=["sex", "married", "race"])
    assert len(s.cliques) == 5
    pytest.importorskip("mbi")
    assert round(s.table(("sex",))["count"].sum()) in range(995, 1006)
