"""Shared fixtures: the real public microdata in tests/data (see its README.md)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

# pinqpy.testing's hooks (seed, no_noise, engine) work only behind this switch; set it before
# pinqpy is first imported. Subprocesses started by tests inherit it.
os.environ.setdefault("PINQPY_TESTING", "1")
# The tests start hundreds of Python processes (the command line, servers, notebooks). Each
# would compile pinqpy from source where the environment forbids bytecode files, and build
# the SQL parser's tables: one bytecode cache in the checkout (ignored by git) and one parser
# cache for the run (pinqpy.core.grammar) save about a second of each.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault(
    "PINQPY_CACHE_DIR",
    os.path.join(tempfile.gettempdir(), f"pinqpy-test-cache-{getattr(os, 'getuid', int)()}"),
)

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"


def data_csv(name: str, **kwargs: object) -> pd.DataFrame:
    """Read a table of tests/data. The repository carries them, so in CI a missing one is a
    failure; locally (a copy without them, say) it is a skip."""
    path = DATA / name
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"test data file {path} is missing in CI (tests/data/README.md)")
        pytest.skip(f"test data file {path} is not available (tests/data/README.md)")
    return pd.read_csv(path, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """The command line keeps its ledger in the user's state directory: each test gets its
    own (subprocesses inherit it), so no test writes the real home or sees another's spend."""
    monkeypatch.setenv("PINQPY_STATE_DIR", str(tmp_path_factory.mktemp("state")))


@pytest.fixture(autouse=True)
def _fresh_noise_state():
    """Every test starts with the secure source and noise on, whatever a test did before."""
    import pinqpy as pq

    pq.testing.reset()
    yield
    pq.testing.reset()


def _postgres_missing() -> bool:
    from tests.postgres_server import binaries

    return importlib.util.find_spec("psycopg") is None or binaries() is None
# The suites that dominate the full run's time (on 2 cores about 17 minutes of pytest; README
# "Run the tests"): each marked ``slow``, so ``-m "not slow"`` is a quick subset. A module
# listed here is slow as a whole; any test run on Spark is slow too (a JVM and a job per read).
SLOW_SUITES = frozenset(
    {
        "tests/e2e/test_wheel.py",  # builds the wheel, pip into a fresh venv
        "tests/e2e/test_notebooks.py",  # runs every notebook in a kernel
        "tests/e2e/test_magic_nbclient.py",  # notebook kernels
        "tests/e2e/test_docs_build.py",  # mkdocs build of the whole site
        "tests/remote/test_server_limits.py",  # waits out real run-time limits
        "tests/unit/test_spark_executor.py",  # Spark only
    }
)


def _on_spark(item: pytest.Item) -> bool:
    """Whether ``item`` runs on Spark: an engine parameter ``spark``, a Spark fixture, or a
    test named for Spark (``test_spark_...``)."""
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    named = getattr(item, "originalname", item.name).startswith("test_spark")
    uses = "spark" in getattr(item, "fixturenames", ())
    return named or uses or any(isinstance(v, str) and v == "spark" for v in params)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.path)).resolve()
        where = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else ""
        if where in SLOW_SUITES or _on_spark(item):
            item.add_marker(pytest.mark.slow)


def _engine_params() -> list[object]:
    """pandas always; DuckDB, Spark, Polars and PostgreSQL where installed (with CI set, a
    missing one fails)."""
    out: list[object] = ["pandas"]
    engines = (("duckdb", "duckdb"), ("spark", "pyspark"), ("polars", "polars"))
    for name, module in (*engines, ("postgres", "psycopg")):
        missing = importlib.util.find_spec(module) is None or (
            name == "spark" and shutil.which("java") is None
        )
        if name == "postgres":
            missing = _postgres_missing()
        marks = []
        if missing and not os.environ.get("CI"):
            marks.append(pytest.mark.skip(reason=f"the {name} engine is not installed"))
        out.append(pytest.param(name, marks=marks, id=name))
    return out


# Suites too long to run on Spark by default (PINQPY_ALL_ENGINES=1 runs them too). None now:
# the SQL fixtures, SQL equivalence and k-means take about 2.5 minutes on Spark together.
_SPARK_HEAVY: tuple[str, ...] = ()


@pytest.fixture(scope="session")
def postgres_url():
    """The connection string of a real PostgreSQL server started for this test session
    (tests/postgres_server.py), stopped when the session ends."""
    from tests.postgres_server import running_server

    if _postgres_missing():
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL (initdb and psycopg) is missing in CI")
        pytest.skip("PostgreSQL is not installed")
    with running_server() as url:
        yield url


@pytest.fixture(params=_engine_params())
def engine(request: pytest.FixtureRequest):
    """Run the test with DataFrames wrapped on each engine in turn (pq.testing.engine; on
    postgres they are copied into the session's test server)."""
    import pinqpy as pq

    if request.param == "postgres":
        with pq.testing.engine("postgres", request.getfixturevalue("postgres_url")):
            yield request.param
        return

    if (
        request.param == "spark"
        and not os.environ.get("PINQPY_ALL_ENGINES")
        and any(h in request.node.nodeid for h in _SPARK_HEAVY)
    ):
        pytest.skip("long on Spark: run with PINQPY_ALL_ENGINES=1")
    with pq.testing.engine(request.param):
        yield request.param
