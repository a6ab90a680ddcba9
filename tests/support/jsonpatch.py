"""RFC 6902 JSON patch, the ops the stand-ins need (``test``, ``remove``, ``add``,
``replace``), applied as kube-apiserver applies them: all or nothing, and a failed ``test``
or a path that is not there refuses the whole patch (:class:`PatchFailed`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any


class PatchFailed(ValueError):
    """The patch does not apply: the API answers 422 Invalid."""


def apply(target: Any, ops: Sequence[Mapping[str, Any]]) -> Any:
    """``target`` with ``ops`` applied (a copy; ``target`` is left as it was)."""
    doc = copy.deepcopy(target)
    for op in ops:
        doc = _one(doc, op)
    return doc


def _one(doc: Any, op: Mapping[str, Any]) -> Any:
    path = _pointer(str(op.get("path", "")))
    kind = op.get("op")
    if not path:  # the whole document
        if kind == "test" and doc != op.get("value"):
            raise PatchFailed("testing value / failed")
        return copy.deepcopy(op.get("value")) if kind in ("add", "replace") else doc
    parent = _walk(doc, path[:-1])
    key = path[-1]
    if kind == "test":
        if _get(parent, key) != op.get("value"):
            raise PatchFailed(f"testing value {op.get('path')} failed")
    elif kind == "remove":
        _get(parent, key)
        del parent[_index(parent, key)]
    elif kind == "replace":
        _get(parent, key)
        parent[_index(parent, key)] = copy.deepcopy(op.get("value"))
    elif kind == "add":
        value = copy.deepcopy(op.get("value"))
        if isinstance(parent, list):
            at = len(parent) if key == "-" else _index(parent, key, insert=True)
            parent.insert(at, value)
        else:
            parent[key] = value
    else:
        raise PatchFailed(f"unsupported op {kind!r}")
    return doc


def _pointer(text: str) -> list[str]:
    """RFC 6901: ``/spec/schedulingGates/0`` as its tokens, ``~1`` and ``~0`` unescaped."""
    if not text:
        return []
    if not text.startswith("/"):
        raise PatchFailed(f"not a JSON pointer: {text!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in text[1:].split("/")]


def _walk(doc: Any, tokens: list[str]) -> Any:
    for token in tokens:
        doc = _get(doc, token)
    if not isinstance(doc, dict | list):
        raise PatchFailed("the path's parent is not an object or a list")
    return doc


def _get(node: Any, token: str) -> Any:
    if isinstance(node, dict):
        if token not in node:
            raise PatchFailed(f"no such key {token!r}")
        return node[token]
    if isinstance(node, list):
        return node[_index(node, token)]
    raise PatchFailed(f"cannot walk into {type(node).__name__} at {token!r}")


def _index(node: Any, token: str, *, insert: bool = False) -> Any:
    if isinstance(node, dict):
        return token
    if not token.isdigit() or int(token) > len(node) - (0 if insert else 1):
        raise PatchFailed(f"index {token!r} out of range")
    return int(token)
