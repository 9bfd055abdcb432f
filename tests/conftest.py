"""Shared fixtures: the real public microdata in ../shared/data and a bundled sample."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


def shared_csv(name: str, **kwargs: object) -> pd.DataFrame:
    """Read a file of ../shared/data; in CI its absence is a failure, locally a skip."""
    path = SHARED_DATA / name
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"real data file {path} is missing in CI")
        pytest.skip(f"real data file {path} is not available")
    return pd.read_csv(path, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _fresh_noise_state():
    """Every test starts with the secure source and noise on, whatever a test did before."""
    import pinqpy as pq

    pq.testing.reset()
    yield
    pq.testing.reset()
