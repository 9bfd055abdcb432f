"""The built wheel works on its own: grammar and sample data inside, SQL answers in a fresh venv.

Builds the wheel with ``pip wheel`` (no extra package needed), installs it with its
dependencies from the index into a brand-new virtual environment outside the checkout, and
runs a SQL query there from a directory outside the repository, so ``import pinqpy`` can only
come from the wheel. Takes about 30-60 s (mostly pip).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

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


def test_wheel_installs_and_answers_sql_in_a_fresh_venv(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(REPO)],
        cwd=tmp_path,
        timeout=300,
    )
    (wheel,) = wheels.glob("pinqpy-*.whl")
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
    _run([str(python), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp_path, timeout=600)

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
