"""The server's request log: one JSON line per request, for the curator.

``[server] log`` says where it goes: ``"-"`` standard error (the default), a file (appended,
created with mode 0600), or ``false`` for none. Each line is one JSON object (JSON lines,
so ``jq`` or ``pandas.read_json(path, lines=True)`` read it)::

    {"time": "2025-01-31T12:00:00.123+00:00", "analyst": "alice", "role": "analyst",
     "method": "POST", "endpoint": "/v1/sql", "status": 200, "ms": 12.5, "tables": ["pums"],
     "charges": [{"table": "pums", "budget": "analyst:alice/pums",
                  "epsilon": "1/10", "delta": "0"}]}

* ``analyst`` is who the token belonged to (``null`` without a valid one); ``role`` is
  ``"analyst"``, ``"curator"`` (the dashboard) or ``null``;
* ``endpoint`` is one of the server's own paths, or ``"other"`` for any other (a path the
  client made up is never written);
* ``tables`` names the granted tables whose budgets the request charged or that refused it
  (a 409: the budget did not cover it), sorted; ``[]`` when it reached no budget (a table
  not granted is never named: its name is the analyst's text);
* ``charges`` lists what the request charged, per budget: exact epsilon and delta, or rho
  for a ``zcdp`` budget. ``[]``: nothing was charged. ``null`` (and ``tables`` too): not
  known, when the work was stopped at the run-time limit (504; it may or may not have been
  charged) or a worker failed; the ledger has every charge.

What a line never holds: the request's body, so no query text, plan, literal or argument;
no answer, row count, error message or anything else computed from the data; no token. The
duration (``ms``) does depend on the data and on the machine: the log is the curator's own,
like the ledger, and must not be shown to analysts.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from pinqpy.errors import PinqError
from pinqpy.remote.server.config import STDERR

__all__ = ["RequestLog", "Seen"]


@dataclass
class Seen:
    """What the app learned of one request, for its line: who asked, in which role, the
    tables its work charged or was refused on, and what it charged (``[]`` nothing, ``None``
    not known)."""

    analyst: str | None = None
    role: str | None = None
    charges: list[dict[str, str]] | None = field(default_factory=list)
    tables: list[str] | None = field(default_factory=list)


class RequestLog:
    """Writes the request log's lines to ``stream`` (one flush per line)."""

    def __init__(self, stream: IO[str], *, owned: bool = False):
        self._stream = stream
        self._owned = owned
        self._lock = threading.Lock()

    @classmethod
    def open(cls, where: Path | str | None, stderr: IO[str] | None = None) -> RequestLog | None:
        """The log a config's ``log`` names (None: no log). A file is opened for appending
        and created readable by its owner only."""
        if where is None:
            return None
        if where == STDERR:
            return cls(stderr if stderr is not None else sys.stderr)
        try:
            fd = os.open(where, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as err:
            raise PinqError(
                f"cannot open the request log {str(where)!r} "
                f"({err.strerror or type(err).__name__}); fix [server] log in the config"
            ) from None
        return cls(os.fdopen(fd, "a", encoding="utf-8"), owned=True)

    def write(self, seen: Seen, *, method: str, endpoint: str, status: int, ms: float) -> None:
        """One request's line (see the module docstring)."""
        line = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "analyst": seen.analyst,
            "role": seen.role,
            "method": method,
            "endpoint": endpoint,
            "status": status,
            "ms": round(ms, 1),
            "tables": seen.tables,
            "charges": seen.charges,
        }
        text = json.dumps(line, separators=(", ", ": ")) + "\n"
        with self._lock:
            try:
                self._stream.write(text)
                self._stream.flush()
            except (OSError, ValueError):  # a full disk or a closed stream: answering goes on
                pass

    def close(self) -> None:
        if self._owned:
            with self._lock:
                self._stream.close()
