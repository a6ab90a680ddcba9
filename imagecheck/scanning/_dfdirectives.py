"""A Dockerfile's ``# syntax=`` parser directive: the frontend image BuildKit pulls before it
reads a single instruction, so an image as much as a ``FROM``.

As BuildKit finds it (frontend/dockerfile/parser/directives.go, ``DetectSyntax``): a first
line starting with ``#!`` is a shebang, skipped; then directives are the lines that start with
``#`` (in the first column), each ``name=value`` with a known name (``syntax``, ``escape``,
``check``, in any case), and the first line that is not one ends them (an empty line, another
comment, an instruction). A second directive of the same name is an error, and BuildKit keeps
those before it. When ``#`` finds no syntax, ``//`` is tried the same way. The image is the
value's first word: the rest are the frontend's arguments. ``# escape=`` and ``# check=`` name
no image.
"""

from __future__ import annotations

import re

__all__ = ["syntax_directive"]

_DIRECTIVE = re.compile(r"([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.+?)\s*", re.ASCII)
_KNOWN = frozenset({"syntax", "escape", "check"})
_SYNTAX = "syntax"


def syntax_directive(lines: list[str]) -> tuple[int, str] | None:
    """The line number and image of the ``syntax`` directive in a Dockerfile's ``lines``."""
    start = 1 if lines and lines[0].startswith("#!") else 0
    for prefix in ("#", "//"):
        found = _directive(lines, start, prefix)
        if found is not None:
            return found
    return None


def _directive(lines: list[str], start: int, prefix: str) -> tuple[int, str] | None:
    seen: set[str] = set()
    for index in range(start, len(lines)):
        line = lines[index]
        match = _DIRECTIVE.fullmatch(line[len(prefix) :].lstrip())
        if not line.startswith(prefix) or match is None:
            return None
        name = match.group(1).lower()
        if name not in _KNOWN or name in seen:
            return None
        seen.add(name)
        if name == _SYNTAX:
            return index + 1, match.group(2).split(" ", 1)[0]
    return None
