"""The documentation builds with ``mkdocs build --strict``, and the strict build can fail.

MkDocs and mkdocstrings are test dependencies (the ``docs`` extra, included in ``test``):
missing in CI is a failure, locally a skip. The second build runs on a copy of the docs with
one broken link added, and must fail naming it, so a passing first build means something.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _mkdocs() -> list[str]:
    """The mkdocs of this interpreter's environment (with mkdocstrings' Python handler)."""
    missing = [m for m in ("mkdocs", "mkdocstrings_handlers.python") if not _importable(m)]
    if missing:
        message = f"the docs build needs {', '.join(missing)} (pip install -e '.[docs]')"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return [sys.executable, "-m", "mkdocs"]


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*_mkdocs(), "build", "--strict", "--site-dir", str(site)],
        cwd=root, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_the_docs_build_strictly(tmp_path: Path) -> None:
    proc = _build(REPO, tmp_path / "site")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING" not in proc.stderr, proc.stderr
    reference = (tmp_path / "site" / "reference" / "index.html").read_text()
    assert "pinqpy.PrivateFrame" in reference and "bound_contributions" in reference
    _examples_are_code(reference)
    for page in ("concepts", "python", "sql", "server", "notebook", "shell", "accuracy"):
        assert (tmp_path / "site" / page / "index.html").exists(), page


def _examples_are_code(page: str) -> None:
    """Every ``>>>`` example of the API reference is inside a ``<pre>`` block (docstring
    prose examples are fenced by docs/hooks/doctest_blocks.py), and Markdown turned nothing
    of them into emphasis (``COUNT(*)`` twice on a line would be italics in a paragraph)."""
    prompts = page.count("&gt;&gt;&gt;")
    assert prompts >= 50, prompts  # the reference shows the docstrings' examples
    outside = re.sub(r"<pre.*?</pre>", "", page, flags=re.S)
    assert "&gt;&gt;&gt;" not in outside, outside[outside.find("&gt;&gt;&gt;") - 300 :][:600]
    assert not re.search(r"COUNT\(<em>", page)
    # one docstring example in prose, as rendered: its lines kept, in a code block
    assert re.search(
        r'<pre><code class="language-pycon">&gt;&gt;&gt; import pandas as pd, pinqpy as pq\n'
        r"&gt;&gt;&gt; f = pq.PrivateFrame\(pd.DataFrame\(\{&quot;g&quot;",
        page,
    )


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copytree(REPO / "docs", copy / "docs")
    (copy / "pinqpy").symlink_to(REPO / "pinqpy")  # the reference reads the package's source
    index = copy / "docs" / "index.md"
    index.write_text(index.read_text() + "\nSee [a page](no-such-page.md).\n")
    proc = _build(copy, tmp_path / "site")
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "no-such-page.md" in proc.stderr, proc.stderr
