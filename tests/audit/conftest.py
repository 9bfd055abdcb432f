"""Audit fixtures: a log of every audit's bounds (printed after the run) and the slow switch.

The ``slow`` audits (10-20 million outputs per dataset, minutes) are skipped in a plain
``pytest`` run, which is what CI executes; the short versions of the same audits always run.
Run the long ones with ``pytest -m slow tests/audit`` (any ``-m`` expression is honoured as
given) or with ``PINQPY_SLOW_AUDITS=1``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .auditor import AuditResult

_HERE = Path(__file__).resolve().parent
_RESULTS: list[AuditResult] = []


@pytest.fixture
def audit_log() -> list[AuditResult]:
    """Append an :class:`AuditResult` here to have it listed in the terminal summary."""
    return _RESULTS


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("markexpr", "") or os.environ.get("PINQPY_SLOW_AUDITS"):
        return
    skip = pytest.mark.skip(
        reason="long statistical audit: run with -m slow (or PINQPY_SLOW_AUDITS=1)"
    )
    for item in items:
        if "slow" in item.keywords and _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _RESULTS:
        return
    terminalreporter.section("privacy audits (lower confidence bounds, confidence 1 - 1e-6)")
    for result in _RESULTS:
        terminalreporter.line(result.summary())
