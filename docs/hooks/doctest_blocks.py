"""Griffe extension: ``>>>`` examples written in a docstring's prose become code blocks.

The docstrings are numpy style. The numpy parser renders the examples of an ``Examples``
section as code, but a ``>>>`` example in a description (most of pinqpy's docstrings show
one there, right after the text it illustrates) would be read as Markdown: its lines run
into one paragraph and ``COUNT(*) ... (*)`` turns into italics. This extension fences every
such block (from a ``>>>`` line to the next blank line, as doctest reads it) as ``pycon``
before the docstring is parsed; ``Examples`` sections and fenced blocks are left as they are.
Configured in mkdocs.yml (``extensions:`` of the Python handler).
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADER_RULE = re.compile(r"^\s*-{3,}\s*$")


def fence_doctests(text: str) -> str:
    """``text`` with each ``>>>`` block outside an Examples section and outside a fence
    wrapped in a ``pycon`` fence.

    >>> print(fence_doctests("Some text.\\n\\n>>> 1 + 1\\n2\\n\\nMore."))
    Some text.
    <BLANKLINE>
    ```pycon
    >>> 1 + 1
    2
    ```
    <BLANKLINE>
    More.
    """
    lines = text.split("\n")
    out: list[str] = []
    in_fence = in_examples = in_block = False
    for i, line in enumerate(lines):
        stripped = line.strip()
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if in_block and not stripped:
            out.append(_indent(out) + "```")
            in_block = False
        if not in_block and stripped.startswith("```"):
            in_fence = not in_fence
        elif not in_fence and not in_block and stripped and _HEADER_RULE.match(following):
            in_examples = stripped == "Examples"
        elif not (in_fence or in_examples or in_block) and re.match(r">>>( |$)", stripped):
            indent = line[: len(line) - len(line.lstrip())]
            if out and out[-1].strip():
                out.append("")
            out.append(indent + "```pycon")
            in_block = True
        out.append(line)
    if in_block:
        out.append(_indent(out) + "```")
    return "\n".join(out)


def _indent(out: list[str]) -> str:
    """The indentation of the block being closed (that of its opening fence)."""
    for line in reversed(out):
        if line.strip() == "```pycon":
            return line[: len(line) - len(line.lstrip())]
    return ""


class DoctestBlocks(griffe.Extension):
    """Fence the prose ``>>>`` examples of every docstring (see the module docstring)."""

    def on_object(self, *, obj: Any, **kwargs: Any) -> None:
        docstring = getattr(obj, "docstring", None)
        if docstring is not None and ">>>" in docstring.value:
            docstring.value = fence_doctests(docstring.value)
