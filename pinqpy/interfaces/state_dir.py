"""Where the command line keeps what must outlive one run: the user's state directory.

``pinqpy query`` and ``pinqpy shell`` keep their budgets and released answers in a ledger,
``ledger.db`` in this directory, unless ``--ledger PATH`` names another file or
``--no-ledger`` opts out. Forgetting would be a privacy failure, not a convenience: a budget
that starts afresh on every run lets the same query be asked again and again, and the average
of its independent noisy answers converges on the true value.

The directory is, in order:

1. ``$PINQPY_STATE_DIR`` when set (tests and unusual setups),
2. on Windows ``%LOCALAPPDATA%\\pinqpy`` (else ``~\\AppData\\Local\\pinqpy``),
3. on macOS ``~/Library/Application Support/pinqpy``,
4. elsewhere ``$XDG_STATE_HOME/pinqpy`` when that is an absolute path (the XDG base
   directory rules ignore a relative one), else ``~/.local/state/pinqpy``.

It is created readable by its owner only (mode 0700): the ledger holds a secret of its own
(see :mod:`pinqpy.accounting.ledger`) and the record of what was asked.

>>> state_dir({"PINQPY_STATE_DIR": "/srv/pinqpy"}, "linux").as_posix()
'/srv/pinqpy'
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["LEDGER_FILE", "STATE_ENV", "default_ledger_path", "ensure_dir", "state_dir"]

#: The environment variable that overrides the state directory.
STATE_ENV = "PINQPY_STATE_DIR"
#: The ledger's file name inside the state directory.
LEDGER_FILE = "ledger.db"


def state_dir(
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    home: Path | None = None,
) -> Path:
    """The user's pinqpy state directory (not created; see :func:`ensure_dir`).

    ``environ``, ``platform`` (a :data:`sys.platform` value) and ``home`` default to this
    process's own; an empty variable counts as unset.
    """
    env = os.environ if environ is None else environ
    plat = sys.platform if platform is None else platform

    def home_dir() -> Path:
        return Path.home() if home is None else home

    configured = env.get(STATE_ENV, "")
    if configured:
        return Path(configured).expanduser()
    if plat == "win32":
        local = env.get("LOCALAPPDATA", "")
        return (Path(local) if local else home_dir() / "AppData" / "Local") / "pinqpy"
    if plat == "darwin":
        return home_dir() / "Library" / "Application Support" / "pinqpy"
    xdg = env.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "pinqpy"
    return home_dir() / ".local" / "state" / "pinqpy"


def ensure_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) if absent; a new last folder gets mode 0700.

    An existing folder is left as it is: it may be one the user chose and shares on purpose.
    Raises :class:`OSError` when it cannot be created.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def default_ledger_path(
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    home: Path | None = None,
) -> Path:
    """``ledger.db`` in the state directory (the directory is not created here)."""
    return state_dir(environ, platform, home) / LEDGER_FILE
