"""Reading the API's objects: the fields the controllers rely on, each checked for the
shape the API documents (:class:`Malformed` when it is not: the object is skipped and
logged, never acted on), and the times they hold.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from imagecheck._text import printable


class Malformed(ValueError):
    """An object from the API that is not the shape the API documents: skipped, logged."""


@dataclass(frozen=True, slots=True)
class Owner:
    """The controller of an object (its ``ownerReferences`` entry with ``controller: true``)."""

    kind: str
    name: str
    uid: str


def controller(meta: Mapping[str, Any]) -> Owner | None:
    """The ``ownerReferences`` entry with ``controller: true``, if any (at most one is)."""
    refs = meta.get("ownerReferences") or []
    if not isinstance(refs, list):
        raise Malformed("metadata.ownerReferences is not a list")
    for ref in refs:
        if is_map(ref) and ref.get("controller") is True:
            return Owner(text(ref, "kind"), text(ref, "name"), str(ref.get("uid") or ""))
    return None


def parse_time(value: object) -> float:
    """An RFC 3339 time from the API (``2026-12-03T07:00:00Z``) as seconds since the epoch."""
    if not isinstance(value, str):
        raise Malformed(f"not a time: {printable(repr(value), 60)}")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Malformed(f"not a time: {printable(value, 60)}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def now() -> float:
    return time.time()


def mapping(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Malformed(f"{key} is not an object")
    return value


def text(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise Malformed(f"{key} is missing or not a string")
    return value


def is_map(value: object) -> bool:
    return isinstance(value, Mapping)


def object_name(obj: object) -> str:
    """``namespace/name`` of an object for a log line, whatever its shape."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return "(no metadata)"
    return f"{meta.get('namespace')}/{meta.get('name')}"
