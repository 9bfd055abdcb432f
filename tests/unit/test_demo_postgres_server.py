"""pinqpy.demo.postgres_server: a real, throwaway PostgreSQL server on 127.0.0.1 that the
postgres engine reads, stopped and removed at the end of its block even when the block fails."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

import pinqpy as pq
from pinqpy.demo import postgres_binaries, postgres_server


def _require_postgres() -> None:
    if importlib.util.find_spec("psycopg") is None or postgres_binaries() is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL (initdb and psycopg) is missing in CI")
        pytest.skip("PostgreSQL is not installed")


def test_the_binaries_folder_holds_the_server_programs():
    _require_postgres()
    folder = postgres_binaries()
    assert folder is not None
    for program in ("initdb", "postgres"):
        assert os.access(folder / program, os.X_OK), program


def test_a_server_on_loopback_that_is_gone_after_its_block():
    _require_postgres()
    import psycopg

    class Done(Exception):
        pass

    with pytest.raises(Done), postgres_server() as url:
        with psycopg.connect(url, autocommit=True) as conn:
            where = conn.execute(
                "SELECT host(inet_server_addr()), current_user, current_database(), "
                "current_setting('data_directory')"
            ).fetchone()
            conn.execute("CREATE TABLE people (age int)")
            conn.execute("INSERT INTO people SELECT g % 90 FROM generate_series(1, 250) g")
        assert where[:3] == ("127.0.0.1", "pinq", "pinq")
        data_dir = Path(where[3])
        assert data_dir.is_dir()
        people = pq.PrivateFrame.from_sql(url, "people", pq.Budget(epsilon=1.0))
        with pq.testing.no_noise():
            older = people.where("age >= 45").count(epsilon=0.5)
        assert older == sum(g % 90 >= 45 for g in range(1, 251))
        raise Done  # the server must be stopped on the way out of a failing block too
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=5).close()
    assert not data_dir.parent.exists()

