"""A bounded mapping that forgets what was used least recently.

:class:`LRU` keeps entries up to a total *weight* (each entry's weight given by a function of
its value, 1 by default), dropping the least recently used ones beyond it; ``capacity=None``
keeps everything. Reading an entry (:meth:`LRU.get`) or writing it counts as a use. An entry
heavier than the whole capacity is still kept while it is the newest, alone, so the latest
entry is always there. It is safe to share between threads.

>>> cache = LRU(2)
>>> cache["a"] = 1; cache["b"] = 2
>>> cache.get("a")
1
>>> cache["c"] = 3   # "b" is now the least recently used
>>> sorted(cache.keys())
['a', 'c']
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["LRU"]


def _one(value: object) -> int:
    return 1


class LRU:
    """Entries by key, at most ``capacity`` in total weight (see the module docstring)."""

    def __init__(self, capacity: int | None = None, weight: Callable[[Any], int] = _one):
        if capacity is not None and capacity < 1:
            raise ValueError("an LRU's capacity is at least 1 (or None: unbounded)")
        self.capacity = capacity
        self._weight = weight
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        #: The entries' total weight.
        self.weight = 0

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value kept under ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            hit = self._entries.get(key)
            if hit is None:
                return default
            self._entries.move_to_end(key)
            return hit[0]

    def __setitem__(self, key: Hashable, value: Any) -> None:
        w = max(1, int(self._weight(value)))
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.weight -= old[1]
            self._entries[key] = (value, w)
            self.weight += w
            self._evict()

    def _evict(self) -> None:
        if self.capacity is None:
            return
        while self.weight > self.capacity and len(self._entries) > 1:
            _, (_, w) = self._entries.popitem(last=False)
            self.weight -= w

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.weight = 0

    def __repr__(self) -> str:
        cap = "unbounded" if self.capacity is None else f"capacity {self.capacity}"
        return f"LRU({len(self._entries)} entries, weight {self.weight}, {cap})"
