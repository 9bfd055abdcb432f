"""The package's layers: declared in pyproject.toml, checked by import-linter.

A module may import only from its own layer or the layers below it, and no two modules (or
folders) may import each other, even through others or from inside a function. These tests
keep the declaration whole (every module sits in a layer) and show that the contract bites.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "pinqpy"
LINT = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed")


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def _layer_modules() -> list[str]:
    names = []
    for layer in _contracts()["layers"]["layers"]:
        names += [part.strip() for part in layer.replace("|", ":").split(":")]
    return names


def _lint(cwd: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    only = [arg for c in contracts for arg in ("--contract", c)]
    return subprocess.run(
        [str(LINT), "--no-cache", *only], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_every_module_sits_in_exactly_one_layer():
    declared = _layer_modules()
    assert len(declared) == len(set(declared))
    present = {
        f"pinqpy.{p.stem}"
        for p in PKG.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists())
        or (p.suffix == ".py" and p.stem not in {"__init__", "__main__"})
    }
    assert present == set(declared)


def test_the_package_keeps_its_contracts():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(PKG, tmp_path / "pinqpy", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_an_upward_import_inside_a_function_breaks_the_layers(tmp_path):
    work = _copy(tmp_path)
    with (work / "pinqpy" / "errors.py").open("a") as fh:
        fh.write("\n\ndef _late():\n    from pinqpy.api import frame\n\n    return frame\n")
    result = _lint(work)
    assert result.returncode != 0
    assert "pinqpy.errors is not allowed to import pinqpy.api" in result.stdout


def test_a_cycle_inside_one_folder_breaks_the_contract(tmp_path):
    work = _copy(tmp_path)
    core = work / "pinqpy" / "core"
    with (core / "exact.py").open("a") as fh:
        fh.write("\n\ndef _late():\n    from pinqpy.core import grammar\n\n    return grammar\n")
    with (core / "grammar.py").open("a") as fh:
        fh.write("\n\ndef _later():\n    from pinqpy.core import exact\n\n    return exact\n")
    result = _lint(work)
    assert result.returncode != 0
    assert "No cycles are allowed in pinqpy.core" in result.stdout


def test_the_results_contract_forbids_every_layer_above_results():
    layers = _layer_modules()
    above = layers[: layers.index("pinqpy.results")]
    contract = _contracts()["results"]
    assert contract["source_modules"] == ["pinqpy.results"]
    assert sorted(contract["forbidden_modules"]) == sorted(above)


def test_a_type_only_upward_import_in_results_breaks_its_contract(tmp_path):
    """Even an import that only annotations use (under ``if TYPE_CHECKING:``) is refused:
    the value layer must not know the classes above it."""
    work = _copy(tmp_path)
    with (work / "pinqpy" / "results" / "html.py").open("a") as fh:
        fh.write("\n\nif TYPE_CHECKING:\n    from pinqpy.api.frame import PrivateFrame\n")
    result = _lint(work, "results")
    assert result.returncode != 0
    assert "pinqpy.results is not allowed to import pinqpy.api" in result.stdout
    assert "pinqpy.results.html -> pinqpy.api.frame" in result.stdout
