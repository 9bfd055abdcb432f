"""The ``pinqpy`` command.

- ``pinqpy demo``: a short private query session over the bundled PUMS sample;
- ``pinqpy shell NAME=PATH ... --epsilon EPS``: an interactive SQL shell over private files;
- ``pinqpy query NAME=PATH ... --epsilon EPS "SELECT ..."``: answer one query.

See :mod:`pinqpy.interfaces.cli` for the options and :mod:`pinqpy.interfaces.shell` for the shell.
"""

from __future__ import annotations

from collections.abc import Iterable

from pinqpy.interfaces.cli import USAGE
from pinqpy.interfaces.cli import main as _cli_main

__all__ = ["USAGE", "main"]


def main(argv: Iterable[str] | None = None) -> int:
    """Run the ``pinqpy`` command line; returns the exit status."""
    return _cli_main(argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
