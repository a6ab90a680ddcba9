"""JSON Patch (RFC 6902) as the API server applies a mutating webhook's ``patch``: ``add``,
``remove``, ``replace`` and ``test`` over RFC 6901 pointers. What no webhook of ours sends
(``move``, ``copy``) is refused, as an operation the stand-in does not apply.

Written here rather than installed: the project has no JSON Patch dependency, and these four
operations are short enough to read against the RFC; ``tests/unit/test_jsonpatch.py`` holds
them to the RFC's own examples (Appendix A).
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """The patch is not a JSON Patch, or does not apply to the document (RFC 6902 §5: the
    whole patch then fails, the document is left as it was)."""


def apply_patch(document: Any, patch: Any) -> Any:
    """``document`` with every operation of ``patch`` applied in order, as a new value."""
    if not isinstance(patch, list):
        raise PatchError("a JSON Patch is an array of operations")
    result = copy.deepcopy(document)
    for operation in patch:
        result = _apply(result, operation)
    return result


def _apply(document: Any, operation: Any) -> Any:
    if not isinstance(operation, dict) or not isinstance(operation.get("path"), str):
        raise PatchError(f"not an operation with a path: {operation!r}")
    op, tokens = operation.get("op"), _pointer(operation["path"])
    if op in ("add", "replace", "test") and "value" not in operation:
        raise PatchError(f"{op} without a value")
    if op == "test":
        if _get(document, tokens) != operation["value"]:
            raise PatchError(f"test failed at {operation['path']}")
        return document
    if op not in ("add", "remove", "replace"):
        raise PatchError(f"operation {op!r} is not applied by the stand-in")
    if not tokens:  # the whole document (RFC 6902 §4.1: the target is the root)
        if op == "remove":
            raise PatchError("remove of the whole document")
        return copy.deepcopy(operation["value"])
    parent = _get(document, tokens[:-1])
    _change(parent, tokens[-1], op, copy.deepcopy(operation.get("value")))
    return document


def _change(parent: Any, key: str, op: str, value: Any) -> None:
    if isinstance(parent, dict):
        if op != "add" and key not in parent:
            raise PatchError(f"{op} of a member that does not exist: {key!r}")
        if op == "remove":
            del parent[key]
        else:
            parent[key] = value
        return
    if not isinstance(parent, list):
        raise PatchError(f"{key!r} is inside a value that is neither object nor array")
    if key == "-" and op == "add":  # §4.1: "-" appends
        parent.append(value)
        return
    index = _index(key, len(parent) + (1 if op == "add" else 0))
    if op == "add":
        parent.insert(index, value)
    elif op == "remove":
        del parent[index]
    else:
        parent[index] = value


def _get(document: Any, tokens: list[str]) -> Any:
    value = document
    for token in tokens:
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list):
            value = value[_index(token, len(value))]
        else:
            raise PatchError(f"path does not exist at {token!r}")
    return value


def _index(token: str, size: int) -> int:
    """An array index (RFC 6901 §4: digits, no leading zero) below ``size``."""
    if not token.isascii() or not token.isdigit() or (token != "0" and token[0] == "0"):
        raise PatchError(f"{token!r} is not an array index")
    if int(token) >= size:
        raise PatchError(f"array index {token} is out of bounds")
    return int(token)


def _pointer(path: str) -> list[str]:
    """The reference tokens of an RFC 6901 pointer (``~1`` is ``/``, ``~0`` is ``~``)."""
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"a pointer starts with '/': {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]
