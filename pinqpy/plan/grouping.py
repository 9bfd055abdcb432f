"""Public keys to group an aggregation by: the grouping every layer passes along with a plan."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

__all__ = ["Grouping"]


@dataclass(frozen=True)
class Grouping:
    """Public keys to group by: ``keys[i]`` is a scalar for one column, a tuple for several."""

    columns: tuple[str, ...]
    keys: tuple[Hashable, ...]
