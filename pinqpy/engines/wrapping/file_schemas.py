"""A file's schema as an engine reads it, kept while the file is unchanged (by path, size and
modification time), so that opening an unchanged file again reads no footer."""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["file_schema"]


def _file_stamp(path: str) -> tuple[str, int, int] | None:
    """(path, size, mtime) of a plain local file, else None (a glob, directory or URL)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not os.path.isfile(path):
        return None
    return (os.path.abspath(path), st.st_size, st.st_mtime_ns)


def file_schema(
    cache: weakref.WeakKeyDictionary[Any, dict[tuple[str, int, int], Any]],
    owner: Any,
    path: str,
    read: Callable[[], Any],
) -> Any:
    """``read()``, a file's schema as ``owner`` (a connection or session) reads it, kept
    while the file is unchanged (at most 64 files per owner)."""
    stamp = _file_stamp(path)
    known = cache.setdefault(owner, {})
    hit = known.get(stamp) if stamp is not None else None
    if hit is not None:
        return hit
    found = read()
    if stamp is not None:
        if len(known) >= 64:
            known.pop(next(iter(known)))
        known[stamp] = found
    return found
