"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.jupyter_kernel import kernel_spec_of_this_python


@pytest.fixture(scope="module")
def kernel_of_this_python(tmp_path_factory: Any) -> Iterator[str]:
    """A ``python3`` kernel spec that runs ``sys.executable``, first on JUPYTER_PATH."""
    yield from kernel_spec_of_this_python(tmp_path_factory)
