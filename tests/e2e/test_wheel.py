"""The built wheel works on its own, and every install line of the docs runs.

The wheel is built once, as docs/index.md says (``python -m build --wheel``, the ``build``
package of the test extra), and serves every test here:

* it is installed with its dependencies from the index into a brand-new virtual
  environment outside the checkout, where a SQL query runs from a directory outside the
  repository, so ``import pinqpy`` can only come from the wheel;
* every ``pip install`` line of README.md, docs/*.md and the notebooks' text (from a clone:
  ``.``, ``'.[EXTRA]'``, ``-e``; or the wheel: ``'dist/pinqpy-0.1.0-py3-none-any.whl[...]'``)
  is one this test knows how to run, names extras pyproject.toml has and the wheel's real
  file name, and is run by pip with ``--dry-run`` in the test environment (which holds every
  extra's packages, so nothing is downloaded but the build backend and nothing is changed).

Takes two to four minutes on a shared 2-core machine (mostly pip); the module is one
of the ``slow`` suites (tests/conftest.py).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.e2e.snippets import pages

REPO = Path(__file__).resolve().parents[2]
#: The wheel's file name as the docs spell it.
DOCS_WHEEL = "dist/pinqpy-0.1.0-py3-none-any.whl"

SCRIPT = textwrap.dedent(
    """
    import json
    from importlib import resources

    import pinqpy as pq
    from pinqpy.demo import PUMS_BOUNDS, PUMS_KEYS, load_pums

    files = resources.files("pinqpy")
    budget = pq.Budget(epsilon=2)
    session = pq.Session()
    session.register("pums", load_pums(), budget=budget, bounds=PUMS_BOUNDS, keys=PUMS_KEYS)
    query = "SELECT sex, COUNT(*) AS n FROM pums GROUP BY sex"
    with pq.testing.no_noise():
        exact = session.sql(query, epsilon=0.5)
    with pq.testing.seed(5):
        noisy = session.sql(query.replace("AS n", "AS m"), epsilon=1)
    plan = session.sql("EXPLAIN " + query, epsilon=0.5)
    print(json.dumps({
        "file": pq.__file__,
        "version": pq.__version__,
        "grammar": files.joinpath("grammar", "pinqpy.lark").is_file(),
        "data": files.joinpath("data", "PUMS.csv").is_file(),
        "exact": exact.to_dict(orient="list"),
        "noisy": noisy.to_dict(orient="list"),
        "plan": str(plan),
        "spent": float(budget.spent.epsilon),
    }))
    """
)


def _run(cmd: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONNOUSERSITE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, (
        f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once as docs/index.md says: ``python -m build --wheel``."""
    if importlib.util.find_spec("build") is None:
        message = "the wheel is built with the build package (pip install -e '.[test]')"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
         cwd=out, timeout=600)  # fmt: skip
    (built,) = out.glob("pinqpy-*.whl")
    assert built.name == Path(DOCS_WHEEL).name, "the docs name another wheel file"
    return built


def test_wheel_installs_and_answers_sql_in_a_fresh_venv(tmp_path: Path, wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "pinqpy/grammar/pinqpy.lark" in names
    assert "pinqpy/data/PUMS.csv" in names
    assert "pinqpy/data/server-demo.toml" in names  # the sample server config
    # Every module of every layer ships (a folder without __init__.py would be left out).
    modules = {p.relative_to(REPO).as_posix() for p in (REPO / "pinqpy").rglob("*.py")}
    assert modules <= set(names), sorted(modules - set(names))
    assert not any(n.startswith(("tests/", "grammar/")) for n in names)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path, timeout=120)
    python = venv / "bin" / "python"
    cfg = (venv / "pyvenv.cfg").read_text()
    assert "include-system-site-packages = false" in cfg
    # The wheel alone (its extras are resolved by the install-line test below, in this
    # environment, so the fresh one downloads only pinqpy's own dependencies).
    _run([str(python), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp_path, timeout=900)

    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    out = _run([str(python), "-c", SCRIPT], cwd=workdir, timeout=120).stdout
    report = json.loads(out.strip().splitlines()[-1])

    installed = Path(report["file"]).resolve()
    assert installed.is_relative_to(venv.resolve()), installed
    assert not installed.is_relative_to(REPO)
    assert report["grammar"] and report["data"]
    assert report["exact"] == {"sex": [0, 1], "n": [486.0, 514.0]}
    # Laplace scale 1 (epsilon 1, one aggregate): |noise| < 12 with probability 1 - e^-12.
    assert report["noisy"]["sex"] == [0, 1]
    assert all(abs(a - b) < 12 for a, b in zip(report["noisy"]["m"], [486, 514], strict=True))
    assert "GROUP BY sex (2 public keys)" in report["plan"]
    assert "Total charge to budget of pums (stability 1): Cost(epsilon=0.5)" in report["plan"]
    assert report["spent"] == 1.5

    # The console script works from the wheel too.
    demo = _run([str(venv / "bin" / "pinqpy"), "demo"], cwd=workdir, timeout=120).stdout
    assert "budget" in demo.lower()


# -- every install line of the docs -----------------------------------------------------------
_INSTALL = re.compile(r"\bpip install ([^`&|;#\n]+)")
_TARGET = re.compile(
    r"^(?P<path>\.|dist/pinqpy-[\w.]+-py3-none-any\.whl)(?:\[(?P<extras>[\w,-]+)\])?$"
)


def install_lines() -> list[tuple[str, list[str]]]:
    """Every ``pip install`` of the docs: ``(where, arguments)``."""
    texts = [(p.relative_to(REPO).as_posix(), p.read_text()) for p in pages()]
    texts.append(("notebooks/build.py", (REPO / "notebooks" / "build.py").read_text()))
    found = []
    for where, text in texts:
        for match in _INSTALL.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{where}:{line}", shlex.split(match.group(1))))
    return found


def _extras() -> set[str]:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return set(meta["optional-dependencies"])


def test_every_install_line_of_the_docs_runs(wheel: Path, tmp_path: Path) -> None:
    lines = install_lines()
    assert len(lines) >= 10, lines  # README, the install page, the server pages...
    known = _extras()
    clone, editable, wheels, tools = [], [], [], []
    for where, args in lines:
        flags = [a for a in args if a.startswith("-")]
        targets = [a for a in args if not a.startswith("-")]
        assert set(flags) <= {"-q", "-e"} and len(targets) == 1, f"{where}: pip install {args}"
        (target,) = targets
        if target == "build":  # the tool the wheel is built with
            tools.append(target)
            continue
        found = _TARGET.match(target)
        assert found, f"{where}: installs {target!r}, which is neither the clone nor the wheel"
        extras = set(filter(None, (found["extras"] or "").split(",")))
        assert extras <= known, f"{where}: no extra {sorted(extras - known)} in pyproject.toml"
        if found["path"] == ".":
            (editable if "-e" in flags else clone).append(target)
        else:
            assert found["path"] == DOCS_WHEEL, f"{where}: the wheel is {DOCS_WHEEL}"
            wheels.append(str(wheel) + target[len(found["path"]):])
    assert clone and wheels and tools, (clone, wheels, tools)
    for group in (sorted(set(clone)), [f"-e{t}" for t in sorted(set(editable))],
                  sorted(set(wheels)), tools[:1]):  # fmt: skip
        if group:
            _dry_run(group, tmp_path)


def _dry_run(requirements: list[str], tmp_path: Path) -> None:
    """``pip install --dry-run`` of ``requirements`` from the clone, in this environment: it
    resolves them as the reader's pip would and changes nothing here."""
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "-q", "--report", str(report),
         *requirements],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, f"pip install {requirements} failed:\n{proc.stdout}{proc.stderr}"
    assert "does not provide the extra" not in proc.stderr, proc.stderr
    planned = json.loads(report.read_text())["install"]
    names = {item["metadata"]["name"].lower() for item in planned}
    # pinqpy itself (from the clone or the wheel) is all there is to fetch: every extra the
    # docs install is already satisfied by the test extra, so pip downloaded nothing more.
    assert names <= {"pinqpy"}, f"pip install {requirements} would also fetch {sorted(names)}"
