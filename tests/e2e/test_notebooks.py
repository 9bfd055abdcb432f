"""The example notebooks run top to bottom without an error, and ship with real outputs.

Each ``notebooks/*.ipynb`` is executed in memory (the files are not rewritten) by nbclient, in
a kernel of the interpreter running the tests: a temporary ``python3`` kernel spec for
``sys.executable`` is put first on ``JUPYTER_PATH``, so a default kernel of another Python
(one without this pinqpy) is never picked up. Rebuild the saved outputs with
``python notebooks/build.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
NEEDED = ("nbformat", "nbclient", "ipykernel", "matplotlib")


def _require_tools() -> None:
    """The notebook tools are test dependencies: missing in CI is a failure, locally a skip."""
    missing = []
    for name in NEEDED:
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        message = f"notebook tests need {', '.join(missing)} (pip install -e '.[test]')"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def kernel_of_this_python(tmp_path_factory):
    """A ``python3`` kernel spec that runs ``sys.executable``, first on JUPYTER_PATH."""
    _require_tools()
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("jupyter")
    install(prefix=str(prefix), kernel_name="python3")
    share = prefix / "share" / "jupyter"
    spec = share / "kernels" / "python3" / "kernel.json"
    assert spec.exists(), f"kernel spec not written at {spec}"

    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(share) + (os.pathsep + old if old else "")
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        found = KernelSpecManager().get_kernel_spec("python3")
        assert found.argv[0] == sys.executable, found.argv
        yield "python3"
    finally:
        if old is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = old


def test_the_four_notebooks_are_there():
    names = [p.name for p in NOTEBOOKS]
    assert names == [
        "01_quickstart.ipynb",
        "02_sql_magic.ipynb",
        "03_pinq_classics.ipynb",
        "04_serving_analysts.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_saved_notebook_has_real_outputs(path):
    """Every code cell was run, in order, in one top-to-bottom run, and left an output."""
    _require_tools()
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
        kinds = {o.output_type for o in cell.outputs}
        assert "error" not in kinds, f"{path.name}: code cell {i} saved an error"
    if path.name.startswith("03"):
        images = [o for c in code for o in c.outputs if "image/png" in o.get("data", {})]
        assert len(images) >= 4, f"{path.name} should hold its four plots, has {len(images)}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path, kernel_of_this_python):
    """A fresh run of every cell, in order, raises nothing (CellExecutionError otherwise)."""
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
        assert not any(o.output_type == "error" for o in cell.outputs), f"cell {i} failed"
        assert cell.outputs, f"{path.name}: code cell {i} printed nothing this time"
