"""A failing ``%%pinq`` cell stops a notebook run, as it stops "Run All".

A small notebook is built with nbformat and executed by nbclient (as ``jupyter nbconvert
--execute`` does) in a kernel of this interpreter: the cell before the failing one answers,
the failing one raises CellExecutionError (a UsageError in the kernel, shown as its message
alone, with no "UsageError:" in front), and the cell after it never runs.
"""

from __future__ import annotations

import pytest

SETUP = """\
%load_ext pinqpy
import pinqpy as pq
from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums

session = pq.Session()
session.register("people", load_pums(), budget=pq.Budget(epsilon=1.0),
                 bounds=PUMS_BOUNDS, keys=PUMS_KEYS)"""
GOOD = "%%pinq -e 0.2 -o answer\nSELECT sex, COUNT(*) AS n FROM people GROUP BY sex"
BAD = "%%pinq -e 0.2 -o answer\nSELECT COUNT(*) AS n FROM people WHERE agee > 30"
AFTER = 'print("the cell after the failing one ran")'


def test_a_failing_cell_stops_the_run(kernel_of_this_python: str, tmp_path) -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (SETUP, GOOD, BAD, AFTER)]
    client = NotebookClient(
        nb,
        timeout=120,
        kernel_name=kernel_of_this_python,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    with pytest.raises(CellExecutionError) as raised:
        client.execute()
    assert raised.value.ename == "RefusedCell"  # pinqpy's UsageError, shown as its message
    assert "unknown column 'agee'" in raised.value.evalue

    setup, good, bad, after = nb.cells
    assert not any(o.output_type == "error" for o in setup.outputs + good.outputs)
    shown = "".join(
        o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in good.outputs
    )
    assert "95% intervals" in shown  # the text repr; the HTML shows one table
    assert "charged epsilon 0.2 to people" in shown or "charged epsilon 0.2 on people" in shown
    kinds = [o.output_type for o in good.outputs]
    noted = [i for i, o in enumerate(good.outputs) if "charged" in o.get("text", "")]
    assert noted and noted[0] > kinds.index("execute_result")  # the note under the result

    # the error output is the message alone: its lines, no traceback, no "UsageError:"
    [error] = [o for o in bad.outputs if o.output_type == "error"]
    text = "\n".join(error.traceback)
    assert text.startswith("PinqSyntaxError: unknown column 'agee'")
    assert "^" in text and "Traceback" not in text and "UsageError" not in text

    assert after.execution_count is None and after.outputs == []


def test_a_cell_tagged_raises_exception_lets_the_run_go_on(
    kernel_of_this_python: str, tmp_path
) -> None:
    """The documented way to show an error in a tutorial notebook: tag the cell."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (SETUP, BAD, AFTER)]
    nb.cells[1].metadata["tags"] = ["raises-exception"]
    NotebookClient(
        nb,
        timeout=120,
        kernel_name=kernel_of_this_python,
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    after = nb.cells[2]
    assert after.execution_count is not None
    assert "the cell after the failing one ran" in after.outputs[0]["text"]


def test_a_running_query_shows_progress_that_clears(
    kernel_of_this_python: str, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With PINQPY_PROGRESS_AFTER=0 (a real cell waits about a second) the cell shows
    "running query…" while the statement runs; when the answer comes the line is cleared
    (its display updated to nothing), and the answer and the charge note follow."""
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("PINQPY_PROGRESS_AFTER", "0")  # the kernel inherits it
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (SETUP, GOOD)]
    seen: list[dict] = []
    client = NotebookClient(
        nb, timeout=120, kernel_name=kernel_of_this_python,
        resources={"metadata": {"path": str(tmp_path)}},
    )  # fmt: skip
    original = client.output

    def record(outs, msg, display_id, cell_index):  # type: ignore[no-untyped-def]
        if msg["msg_type"] in ("display_data", "update_display_data"):
            seen.append(msg["content"]["data"])
        return original(outs, msg, display_id, cell_index)

    client.output = record  # type: ignore[method-assign]
    client.execute()
    good = nb.cells[1]
    assert any("running query" in d.get("text/plain", "") for d in seen)  # it was shown ...
    [spinner] = [o for o in good.outputs if o.output_type == "display_data"]
    assert spinner["data"] == {"text/plain": "", "text/html": ""}  # ... and cleared
    kinds = [o.output_type for o in good.outputs]
    assert kinds.index("display_data") < kinds.index("execute_result")
