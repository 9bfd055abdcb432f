"""The example notebooks run top to bottom without an error, and ship with real outputs.

Each ``notebooks/*.ipynb`` is executed in memory (the files are not rewritten) by nbclient, in
a kernel of the interpreter running the tests (:mod:`tests.e2e.jupyter_kernel`). Rebuild the
saved outputs with ``python notebooks/build.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.jupyter_kernel import require_tools

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
NEEDED = ("nbformat", "nbclient", "ipykernel", "matplotlib")


#: Notebooks that read a table of tests/data: in CI a missing one fails, locally it skips.
NEEDS_DATA = {"06_marginals.ipynb": REPO / "tests" / "data" / "eurostat_lfs_fr_4cols.csv"}


def test_the_notebooks_are_there():
    names = [p.name for p in NOTEBOOKS]
    assert names == [
        "01_quickstart.ipynb",
        "02_sql_magic.ipynb",
        "03_pinq_classics.ipynb",
        "04_serving_analysts.ipynb",
        "05_engines.ipynb",
        "06_marginals.ipynb",
    ]


def _require_data(path: Path) -> None:
    data = NEEDS_DATA.get(path.name)
    if data is not None and not data.exists():
        message = f"{path.name} needs {data} (tests/data/README.md), which is absent"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_saved_notebook_has_real_outputs(path):
    """Every code cell was run, in order, in one top-to-bottom run, and left an output."""
    require_tools(*NEEDED)
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, f"{path.name} has no code cells"
    counts = [c.execution_count for c in code]
    assert counts == list(range(1, len(code) + 1)), (
        f"{path.name} was not saved from one top-to-bottom run (execution counts {counts}); "
        "rebuild it with python notebooks/build.py"
    )
    for i, cell in enumerate(code, 1):
        assert cell.outputs, f"{path.name}: code cell {i} has no saved output:\n{cell.source}"
        _check_errors(path.name, i, cell)
    images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    if path.name.startswith("03"):
        assert len(images) >= 4, f"{path.name} should hold its four plots, has {len(images)}"
    if path.name.startswith("06"):
        assert len(images) >= 3, f"{path.name} should hold its three plots, has {len(images)}"
    if path.name.startswith("05"):
        _saved_with_every_engine(path.name, code)


ENGINES = ("pandas", "DuckDB", "Polars", "Spark", "PostgreSQL")


def _saved_with_every_engine(name: str, code: list) -> None:
    """05 is saved from a run on all five engines, which charged and answered alike."""
    streams = "".join(o.get("text", "") for c in code for o in c.outputs)
    assert "skipping" not in streams, f"{name} was saved with an engine skipped"
    tables = [o["data"]["text/plain"] for c in code for o in c.outputs if "data" in o]
    same = [t for t in tables if "the same on every engine" in t]
    assert len(same) == 2, f"{name} should show its charges and exact answers tables"
    for table in same:
        assert all(e in table for e in ENGINES), table
        assert "False" not in table, table


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path, kernel_of_this_python):
    """A fresh run of every cell, in order, raises nothing (CellExecutionError otherwise)."""
    require_tools(*NEEDED)
    _require_data(path)
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name=kernel_of_this_python,
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    client.execute()
    code = [c for c in nb.cells if c.cell_type == "code"]
    for i, cell in enumerate(code, 1):
        _check_errors(path.name, i, cell)
        assert cell.outputs, f"{path.name}: code cell {i} printed nothing this time"


def _check_errors(name: str, i: int, cell: object) -> None:
    """Only a cell tagged ``raises-exception`` (one that fails on purpose, to show a refusal)
    has an error, and it is a refused ``%%pinq`` statement shown as its message alone."""
    errors = [o for o in cell.outputs if o.output_type == "error"]  # type: ignore[attr-defined]
    if "raises-exception" not in cell.metadata.get("tags", []):  # type: ignore[attr-defined]
        assert not errors, f"{name}: code cell {i} failed"
        return
    assert len(errors) == 1, f"{name}: code cell {i} should show its refusal"
    [error] = errors
    assert error.ename == "RefusedCell", f"{name}: code cell {i}: {error.ename}"
    text = "\n".join(error.traceback)
    assert "Traceback" not in text and not text.startswith("UsageError"), text
