"""A real PostgreSQL server for the tests: :func:`pinqpy.demo.postgres_server` (``initdb`` in a
temporary folder, listening on 127.0.0.1 on a free port, run as the ``postgres`` user under
root, stopped by its PID at the end), which the notebooks use too.

``binaries()`` is the folder of initdb and postgres, or None where PostgreSQL is not installed.
"""

from __future__ import annotations

from pinqpy.demo import postgres_binaries as binaries
from pinqpy.demo import postgres_server as running_server

__all__ = ["binaries", "running_server"]
