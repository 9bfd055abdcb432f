"""The checked server configuration's types: the frozen dataclasses that
:func:`pinqpy.remote.server.config.parse_config` builds (its module docstring shows the file
they come from), and the error a config that cannot be used raises.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pinqpy.accounting.budget import Budget
from pinqpy.errors import PinqError

__all__ = [
    "SOURCES",
    "STDERR",
    "AnalystSpec",
    "BudgetSpec",
    "ConfigError",
    "GroupSpec",
    "Limits",
    "ServerConfig",
    "TableSpec",
]

SOURCES = ("csv", "parquet", "duckdb", "spark", "postgres")
#: ``log`` for standard error.
STDERR = "-"


class ConfigError(PinqError):
    """A server config that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class Limits:
    """What one request may ask of the server, and how much work and how many connections
    it takes on at once (see :mod:`pinqpy.remote.server.config`)."""

    max_request_bytes: int = 1_000_000
    max_plan_nodes: int = 500
    max_plan_depth: int = 64
    max_keys: int = 100_000
    max_public_rows: int = 100_000
    max_sql_chars: int = 20_000
    query_timeout_s: float = 60.0
    max_requests: int = 64
    max_requests_per_analyst: int = 8
    max_running: int = field(default_factory=lambda: _cpus())
    header_timeout_s: float = 10.0
    max_connections: int = 256
    answers_in_memory: int = 1000
    partitions_in_memory: int = 1000
    partition_keys_in_memory: int = 100_000

    def as_dict(self) -> dict[str, int | float]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _cpus() -> int:
    """The default ``max_running``: the CPUs this process may use, at least 2."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        n = os.cpu_count() or 2
    return max(2, n)


@dataclass(frozen=True)
class BudgetSpec:
    """A budget's total and accounting model, as the config gives them (floats are read by
    their decimal spelling when the Budget is made)."""

    epsilon: int | float
    delta: int | float = 0
    accounting: str = "approx"

    def make(self, *, ledger: object = None, name: str | None = None) -> Budget:
        return Budget(
            self.epsilon, self.delta, accounting=self.accounting, ledger=ledger, name=name
        )


@dataclass(frozen=True)
class TableSpec:
    """One private table and its public facts."""

    name: str
    source: str
    path: Path | None = None
    engine: str = "pandas"
    database: Path | None = None
    table: str | None = None
    format: str | None = None
    privacy_unit: str | None = None
    max_rows: int | None = None
    bounds: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    keys: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    schema: Mapping[str, str] | None = None
    public_size: bool = False
    # A postgres source: the environment variable holding its connection string.
    connection_env: str | None = None


@dataclass(frozen=True)
class GroupSpec:
    name: str
    budget: BudgetSpec


@dataclass(frozen=True)
class AnalystSpec:
    """An analyst, the tables granted to them, and the budget they draw on: their own
    (``budget``) or their group's (``group``), exactly one of the two."""

    name: str
    tables: tuple[str, ...]
    budget: BudgetSpec | None = None
    group: str | None = None

    def ledger_name(self, table: str) -> str:
        """The ledger name of the budget this analyst draws on for ``table``."""
        if self.group is not None:
            return f"group:{self.group}/{table}"
        return f"analyst:{self.name}/{table}"


@dataclass(frozen=True)
class ServerConfig:
    """A checked server config. ``path`` is the file it was read from (None when built in
    memory); every other path is absolute."""

    path: Path | None
    host: str
    port: int
    ledger: Path
    tokens: Path
    tables: Mapping[str, TableSpec]
    analysts: Mapping[str, AnalystSpec]
    groups: Mapping[str, GroupSpec] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    tls_certfile: Path | None = None
    tls_keyfile: Path | None = None
    #: Where the request log goes: :data:`STDERR`, a file, or None (no log).
    log: Path | str | None = STDERR
    #: The SHA-256 (hex) of the curator's dashboard token; None: no dashboard.
    curator_token_sha256: str | None = None

    def budget_spec(self, analyst: AnalystSpec) -> BudgetSpec:
        """The budget size ``analyst`` draws on (per table)."""
        if analyst.group is not None:
            return self.groups[analyst.group].budget
        assert analyst.budget is not None
        return analyst.budget
