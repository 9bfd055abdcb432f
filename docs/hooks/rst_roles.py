"""MkDocs hook: the docstrings' reStructuredText roles (``:class:`~pinqpy.Budget```) render
as plain code (``Budget``) in the API reference, rather than with the role's name in front."""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|meth|func|mod|attr|data|exc|obj):<code>(~?)([^<]*)</code>")


def _plain(match: re.Match[str]) -> str:
    name = match.group(2)
    if match.group(1):  # `~a.b.C` shows only its last part, as Sphinx does
        name = name.rsplit(".", 1)[-1]
    return f"<code>{name}</code>"


def on_page_content(html: str, **kwargs: Any) -> str:
    return _ROLE.sub(_plain, html)
