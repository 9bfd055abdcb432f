"""How many requests the server takes on at once: per analyst, and in all.

A request is *in progress* from the moment its body has been read until its work has ended
(not merely until it was answered: a pandas request the server could not stop keeps its
place until its thread returns). At most ``max_requests_per_analyst`` of one analyst's and
``max_requests`` of all analysts' are in progress at once; one more is refused at once,
before anything is charged: 429 for the analyst's own cap, 503 for the server's. So no
queue grows without bound: every request waiting for its turn (for a run slot or its
analyst's worker, :mod:`pinqpy.remote.server.stopping`) is one of these.
"""

from __future__ import annotations

import threading

from pinqpy.errors import PinqError
from pinqpy.remote.server.config import Limits

__all__ = ["Admission", "Crowded"]


class Crowded(PinqError):
    """A request refused because too many are in progress; ``status`` is 429 or 503."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class Admission:
    """The count of requests in progress, per analyst and in all (thread-safe)."""

    def __init__(self, limits: Limits):
        self.per_analyst = limits.max_requests_per_analyst
        self.overall = limits.max_requests
        self._lock = threading.Lock()
        self._mine: dict[str, int] = {}
        self._all = 0

    def admit(self, analyst: str) -> None:
        """Count one more request of ``analyst``, or refuse it (:class:`Crowded`)."""
        with self._lock:
            if self._mine.get(analyst, 0) >= self.per_analyst:
                raise Crowded(
                    f"this analyst already has {self.per_analyst} requests in progress, the "
                    "most this server takes at once from one analyst; wait for an answer "
                    "before sending more (nothing was charged)",
                    429,
                )
            if self._all >= self.overall:
                raise Crowded(
                    f"the server is busy: {self.overall} requests are in progress, the most it "
                    "takes at once; try again shortly (nothing was charged)",
                    503,
                )
            self._mine[analyst] = self._mine.get(analyst, 0) + 1
            self._all += 1

    def release(self, analyst: str) -> None:
        """One request of ``analyst`` has ended."""
        with self._lock:
            left = self._mine.get(analyst, 0) - 1
            if left > 0:
                self._mine[analyst] = left
            else:
                self._mine.pop(analyst, None)
            self._all = max(0, self._all - 1)

    def in_progress(self, analyst: str | None = None) -> int:
        with self._lock:
            return self._all if analyst is None else self._mine.get(analyst, 0)
