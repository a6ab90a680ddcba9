"""An in-memory :class:`imagecheck.cluster._model.Cluster` for unit tests of cluster mode: objects
kept as JSON, every write recorded, RBAC refusals on demand. (The integration tests use the
real client, ``cluster/api.py``, against an HTTPS API stand-in instead.)"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from imagecheck.cluster import Selector
from imagecheck.cluster._model import JSON, AlreadyExists, Conflict, Forbidden, Gone, Kind
from tests.support import jsonpatch


@dataclass
class Write:
    """One write the fake was asked for."""

    verb: str  # "patch", "create", "update", "delete"
    kind: str  # the plural: "jobs"
    namespace: str
    name: str
    body: Mapping[str, Any] | None


@dataclass
class FakeCluster:
    """Objects by (plural, namespace, name). ``forbidden`` holds (verb, plural) pairs that
    answer 403; ``writes`` records every write, allowed or not."""

    objects: dict[tuple[str, str, str], JSON] = field(default_factory=dict)
    forbidden: set[tuple[str, str]] = field(default_factory=set)
    writes: list[Write] = field(default_factory=list)
    events: list[tuple[str, JSON]] = field(default_factory=list)  # for watch
    version: int = 1
    closed: bool = False

    def add(self, kind: Kind, obj: JSON) -> JSON:
        """Store ``obj`` (a deep copy, apiVersion/kind and a resourceVersion filled in)."""
        stored = copy.deepcopy(obj)
        stored.setdefault("apiVersion", kind.api_version)
        stored.setdefault("kind", kind.kind)
        meta = stored.setdefault("metadata", {})
        meta.setdefault("namespace", "default")
        self._bump(stored)
        self.objects[(kind.plural, meta["namespace"], meta["name"])] = stored
        self.events.append(("ADDED", copy.deepcopy(stored)))
        return stored

    def _bump(self, obj: JSON) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)

    def _check(self, verb: str, kind: Kind, namespace: str | None) -> None:
        if (verb, kind.plural) in self.forbidden:
            raise Forbidden(verb, kind, namespace)

    async def list(self, kind: Kind, selector: Selector = Selector()) -> AsyncIterator[JSON]:  # noqa: B008
        self._check("list", kind, selector.namespace)
        wanted = _labels(selector.labels)
        for (plural, namespace, _), obj in list(self.objects.items()):
            if plural != kind.plural:
                continue
            if selector.namespace is not None and namespace != selector.namespace:
                continue
            labels = obj["metadata"].get("labels") or {}
            if all(labels.get(k) == v for k, v in wanted.items()):
                yield copy.deepcopy(obj)

    def snapshot(self, kind: Kind, selector: Selector = Selector()) -> FakeListing:  # noqa: B008
        return FakeListing(self, kind, selector)

    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None:
        self._check("get", kind, namespace)
        obj = self.objects.get((kind.plural, namespace, name))
        if obj is None and (kind.plural, name) == ("serviceaccounts", "default"):
            # The ServiceAccount controller makes "default" in every namespace.
            obj = {"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": name, "namespace": namespace}}  # fmt: skip
        return copy.deepcopy(obj) if obj is not None else None

    async def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        status: bool = False,
    ) -> JSON:
        verb = "patch status" if status else "patch"
        self.writes.append(Write(verb, kind.plural, namespace, name, copy.deepcopy(patch)))
        if status:  # the status subresource: only the status (and the version checked) change
            patch = {k: v for k, v in patch.items() if k in ("metadata", "status")}
            patch = {**patch, "metadata": {"resourceVersion": _version_of(patch)}}
        self._check("patch", kind, namespace)
        key = (kind.plural, namespace, name)
        current = self.objects[key]
        wanted_version = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted_version is not None and wanted_version != current["metadata"]["resourceVersion"]:
            raise Conflict(f"{kind.plural} {name!r} changed since it was read")
        merged = merge_patch(current, patch)
        self._bump(merged)
        self.objects[key] = merged
        self.events.append(("MODIFIED", copy.deepcopy(merged)))
        return copy.deepcopy(merged)

    async def json_patch(
        self, kind: Kind, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]
    ) -> JSON:
        """RFC 6902; a failed ``test`` is a :class:`Conflict`, as ``cluster/api.py`` maps the
        API's 422."""
        self.writes.append(Write("json-patch", kind.plural, namespace, name, {"ops": list(ops)}))
        self._check("patch", kind, namespace)
        key = (kind.plural, namespace, name)
        try:
            patched = jsonpatch.apply_patch(self.objects[key], ops)
        except jsonpatch.PatchError as exc:
            raise Conflict(f"{kind.plural} {name!r}: {exc}") from None
        self._bump(patched)
        self.objects[key] = patched
        self.events.append(("MODIFIED", copy.deepcopy(patched)))
        return copy.deepcopy(patched)

    async def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> JSON:
        name = body["metadata"]["name"]
        self.writes.append(Write("create", kind.plural, namespace, name, copy.deepcopy(body)))
        self._check("create", kind, namespace)
        if (kind.plural, namespace, name) in self.objects:
            raise AlreadyExists(f"{kind.plural} {name!r} already exists")
        obj = copy.deepcopy(dict(body))
        obj.setdefault("metadata", {})["namespace"] = namespace
        return self.add(kind, obj)

    async def replace(self, kind: Kind, namespace: str, name: str, body: Mapping[str, Any]) -> JSON:
        self.writes.append(Write("update", kind.plural, namespace, name, copy.deepcopy(body)))
        self._check("update", kind, namespace)
        key = (kind.plural, namespace, name)
        current = self.objects[key]
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            raise Conflict(f"{kind.plural} {name!r} changed since it was read")
        obj = copy.deepcopy(dict(body))
        self._bump(obj)
        self.objects[key] = obj
        self.events.append(("MODIFIED", copy.deepcopy(obj)))
        return copy.deepcopy(obj)

    async def delete(self, kind: Kind, namespace: str, name: str) -> None:
        self.writes.append(Write("delete", kind.plural, namespace, name, None))
        self._check("delete", kind, namespace)
        obj = self.objects.pop((kind.plural, namespace, name), None)
        if obj is not None:
            self.events.append(("DELETED", copy.deepcopy(obj)))

    async def close(self) -> None:
        self.closed = True

    async def watch(
        self, kind: Kind, selector: Selector, resource_version: str
    ) -> AsyncIterator[tuple[str, JSON]]:
        """The recorded changes newer than ``resource_version``, then the end (a real watch
        would wait); :class:`Gone` when ``resource_version`` is "0" or below the first kept."""
        self._check("watch", kind, selector.namespace)
        since = int(resource_version)
        if since <= 0:
            raise Gone("too old resource version")
        for change, obj in list(self.events):
            meta = obj["metadata"]
            if obj.get("kind") != kind.kind or int(meta["resourceVersion"]) <= since:
                continue
            if selector.namespace is None or meta.get("namespace") == selector.namespace:
                yield change, copy.deepcopy(obj)


class FakeListing:
    """:meth:`FakeCluster.list`, with the version the list was read at (its first item's)."""

    def __init__(self, cluster: FakeCluster, kind: Kind, selector: Selector) -> None:
        self._cluster = cluster
        self._kind = kind
        self._selector = selector
        self.resource_version = ""

    async def __aiter__(self) -> AsyncIterator[JSON]:
        self.resource_version = str(self._cluster.version)
        async for obj in self._cluster.list(self._kind, self._selector):
            yield obj


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: objects merge key by key, ``null`` deletes, anything else
    replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _labels(selector: str | None) -> dict[str, str]:
    """Equality-based label selectors only (``a=b,c=d``)."""
    if not selector:
        return {}
    pairs = (part.split("=", 1) for part in selector.split(","))
    return {k.strip(): v.strip() for k, v in pairs}


def _version_of(patch: Mapping[str, Any]) -> Any:
    return (patch.get("metadata") or {}).get("resourceVersion")
