"""JSON with comments and trailing commas (``devcontainer.json``, VS Code's JSONC), as a node
tree that keeps lines.

Comments (``//``, ``/* */``) become spaces, newlines kept, and a comma before ``}`` or ``]``
is dropped: what is left is JSON with every value on its line, which the YAML reader
(:mod:`._yamltree`) composes into nodes, as ``_json`` does for manifests. One pass over the
text, no backtracking: linear in its length. No library does this without either losing
lines (``json5``, ``commentjson`` give values, not positions) or pulling in a parser
generator; the dialect is this small.
"""

from __future__ import annotations

import json

from imagecheck.scanning._model import FileProblem
from imagecheck.scanning._yamltree import Mapping, Node, Scalar, SyntaxProblem, documents

__all__ = ["document", "get", "strict_json", "text_of"]


def strict_json(text: str) -> str:
    """``text`` with comments blanked and trailing commas dropped; lines and columns kept."""
    out: list[str] = []
    comma = -1  # index in out of a comma not yet followed by a value
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            end = _string_end(text, i)
            out.append(text[i:end])
            comma, i = -1, end
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
        else:
            if c in "}]" and comma >= 0:
                out[comma] = " "
            if c == ",":
                comma = len(out)
            elif not c.isspace():
                comma = -1
            out.append(c)
            i += 1
    return "".join(out).replace("\t", " ")


def _string_end(text: str, start: int) -> int:
    """The index after the string that starts at ``start`` (or the end of its line)."""
    i = start + 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
        elif c in '"\n':
            return i + 1
        else:
            i += 1
    return len(text)


def document(text: str, file: str) -> Mapping | FileProblem | None:
    """The top-level object of a JSONC text; None when it is not an object."""
    clean = strict_json(text)
    try:
        json.loads(clean)
    except json.JSONDecodeError as exc:
        return FileProblem(file, exc.lineno, f"invalid JSON: {exc.msg}")
    except RecursionError:
        return FileProblem(file, None, "invalid JSON: nested too deeply")
    for root in documents(clean):
        if isinstance(root, SyntaxProblem):
            return FileProblem(file, root.line, root.message)
        return root if isinstance(root, Mapping) else None
    return None


def get(node: Node | None, key: str) -> Node | None:
    """``node[key]`` (the last one, as JSON parsers keep) for a mapping, else None."""
    found = None
    if isinstance(node, Mapping):
        for name, value in node.pairs:
            if isinstance(name, Scalar) and name.value == key:
                found = value
    return found


def text_of(node: Node | None) -> str | None:
    """A JSON string's text; None for anything else."""
    if isinstance(node, Scalar) and node.style == '"':
        return node.value
    return None
