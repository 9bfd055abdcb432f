"""Running notebooks in tests: the tools they need, and a kernel of this interpreter.

nbclient starts the kernel named ``python3``; a temporary kernel spec of that name that runs
``sys.executable`` is put first on ``JUPYTER_PATH``, so a default kernel of another Python (one
without this pinqpy) is never picked up, and the directory holding the pinqpy the tests import
is put first on the kernel's ``PYTHONPATH``, so the kernel runs the same code (a checkout other
than the one installed, say). The fixture is shared through ``tests/e2e/conftest.py``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

KERNEL_TOOLS = ("nbformat", "nbclient", "ipykernel")


def require_tools(*names: str) -> None:
    """The notebook tools are test dependencies: missing in CI is a failure, locally a skip."""
    missing = []
    for name in names:
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        message = f"notebook tests need {', '.join(missing)} (pip install -e '.[test]')"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def kernel_spec_of_this_python(tmp_path_factory: Any) -> Iterator[str]:
    """Install a ``python3`` kernel spec that runs ``sys.executable``, first on JUPYTER_PATH,
    for as long as the generator runs; yields the kernel's name."""
    require_tools(*KERNEL_TOOLS)
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("jupyter")
    install(prefix=str(prefix), kernel_name="python3")
    share = prefix / "share" / "jupyter"
    spec = share / "kernels" / "python3" / "kernel.json"
    assert spec.exists(), f"kernel spec not written at {spec}"

    import pinqpy

    source = str(Path(pinqpy.__file__).resolve().parents[1])
    saved = {name: os.environ.get(name) for name in ("JUPYTER_PATH", "PYTHONPATH")}
    for name, first in (("JUPYTER_PATH", str(share)), ("PYTHONPATH", source)):
        old = saved[name]
        os.environ[name] = first + (os.pathsep + old if old else "")
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        found = KernelSpecManager().get_kernel_spec("python3")
        assert found.argv[0] == sys.executable, found.argv
        yield "python3"
    finally:
        for name, old in saved.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
