"""The ``pinqpy`` command: ``pinqpy demo`` runs a short private query session."""

from __future__ import annotations

import sys

USAGE = "usage: pinqpy demo\n\n  demo    a short private query session over the bundled PUMS sample"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] == "demo":
        from .demo import main as demo

        return demo()
    print(f"pinqpy: unknown command {args[0]!r}\n\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
