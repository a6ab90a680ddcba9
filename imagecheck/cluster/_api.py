"""``Cluster`` over the Kubernetes API, through lightkube.

lightkube builds the paths, resolves kubeconfig and in-cluster credentials, pages lists
(``limit``/``continue``) and reads watch streams. Every kind is a lightkube *generic*
resource, so objects stay the API's JSON (plain dicts, decoded by msgspec) and any
group/version/plural can be named, custom resources too.

The API server is remote input, bounded here before lightkube reads a byte (a response
hook on its httpx2 client):

* a response body over ``MAX_RESPONSE`` (a page of :data:`PAGE_SIZE` objects) and a
  watch line (one event) over ``MAX_WATCH_EVENT`` are refused (``bounds.py``);
* what lightkube raises (httpx2 errors, its ``ApiError``, msgspec's decode errors) is
  mapped onto :mod:`imagecheck.cluster._model`'s errors (``_api_errors.py``); nothing else
  escapes.

Configuration is found as kubectl finds it: ``kubeconfig`` if given, else the first file
in ``KUBECONFIG``, else ``~/.kube/config``, else the pod's service account (in-cluster).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx2
from lightkube import AsyncClient, ConfigError, KubeConfig
from lightkube.config.kubeconfig import SingleConfig
from lightkube.core.exceptions import NotReadyError
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.types import CascadeType, PatchType

from imagecheck._text import printable
from imagecheck.cluster._api_errors import mapped as _mapped
from imagecheck.cluster._bounds import MAX_RESPONSE, MAX_WATCH_EVENT, bound_response
from imagecheck.cluster._model import (
    JSON,
    Kind,
    Selector,
    Unreachable,
)
from imagecheck.errors import UsageError

log = logging.getLogger(__name__)

# Objects per list request: the API's own default page for kubectl, and a bound on memory
# (a page is decoded whole) however many pods the cluster holds.
PAGE_SIZE = 500
# Requests other than a watch: the API answers in milliseconds, or it is in trouble.
TIMEOUT = 30.0


class KubeCluster:
    """The Kubernetes API, as :class:`imagecheck.cluster._model.Cluster`."""

    def __init__(self, client: AsyncClient, http: httpx2.AsyncClient) -> None:
        self._client = client
        self._http = http

    @classmethod
    async def connect(
        cls, kubeconfig: str | Path | None = None, context: str | None = None
    ) -> KubeCluster:
        """A client for the cluster kubectl would talk to (see the module docstring).
        :class:`~imagecheck.errors.UsageError` when there is no usable configuration."""
        config = _config(kubeconfig, context)
        try:
            client = AsyncClient(config, timeout=httpx2.Timeout(TIMEOUT), trust_env=False)
        except (ConfigError, OSError, ValueError) as exc:
            raise UsageError(f"cannot use the Kubernetes configuration: {printable(exc)}") from None
        # The one handle lightkube keeps on its httpx2 client (no public accessor).
        http: httpx2.AsyncClient = client._client._client
        http.headers["Accept-Encoding"] = "identity"
        http.event_hooks["response"].append(bound_response)
        return cls(client, http)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> KubeCluster:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def list(self, kind: Kind, selector: Selector = Selector()) -> AsyncGenerator[JSON]:  # noqa: B008
        """Objects page by page; an item that is not an object with a name is skipped."""
        async for obj in self.snapshot(kind, selector):
            yield obj

    def snapshot(self, kind: Kind, selector: Selector = Selector()) -> _Listing:  # noqa: B008
        """As :meth:`list`; ``resource_version`` once read, for a watch to start from."""
        labels = _labels(selector.labels)
        pages = self._client.list(
            _resource(kind), namespace=_scope(kind, selector), chunk_size=PAGE_SIZE, labels=labels
        )
        return _Listing(kind, selector, pages)

    async def get(self, kind: Kind, namespace: str, name: str) -> JSON | None:
        with _mapped("get", kind, namespace, missing_ok=True):
            return _checked(
                kind, await self._client.get(_resource(kind), name, namespace=namespace)
            )
        return None  # 404

    async def patch(self, kind: Kind, namespace: str, name: str, patch: Mapping[str, Any],
                    *, status: bool = False) -> JSON:  # fmt: skip
        res = _resource(kind).Status if status else _resource(kind)
        # RBAC names the subresource as a resource: a 403 names "workloads/status".
        named = dataclasses.replace(kind, plural=f"{kind.plural}/status") if status else kind
        with _mapped("patch", named, namespace):
            obj = await self._client.patch(
                res, name, dict(patch), namespace=namespace, patch_type=PatchType.MERGE
            )
            return _checked(kind, obj)

    async def json_patch(
        self, kind: Kind, namespace: str, name: str, ops: Sequence[Mapping[str, Any]]
    ) -> JSON:
        # A failed ``test`` is 422 Invalid (apiserver's handlers/patch.go): a Conflict here.
        with _mapped("patch", kind, namespace, invalid_is_conflict=True):
            body, res, how = [dict(op) for op in ops], _resource(kind), PatchType.JSON
            return _checked(kind, await self._client.patch(res, name, body, patch_type=how,
                                                           namespace=namespace))  # fmt: skip

    async def create(self, kind: Kind, namespace: str, body: Mapping[str, Any]) -> JSON:
        with _mapped("create", kind, namespace):
            obj = await self._client.create(_instance(kind, namespace, body))
            return _checked(kind, obj)

    async def replace(self, kind: Kind, namespace: str, name: str, body: Mapping[str, Any]) -> JSON:
        with _mapped("update", kind, namespace):
            obj = await self._client.replace(_instance(kind, namespace, body, name))
            return _checked(kind, obj)

    async def delete(self, kind: Kind, namespace: str, name: str) -> None:
        with _mapped("delete", kind, namespace, missing_ok=True):
            # Background, as kubectl deletes: a Job's own default would orphan its pods.
            await self._client.delete(
                _resource(kind), name, namespace=namespace, cascade=CascadeType.BACKGROUND
            )

    async def watch(
        self, kind: Kind, selector: Selector, resource_version: str
    ) -> AsyncGenerator[tuple[str, JSON]]:
        """Changes after ``resource_version``, until the caller stops. When the server ends
        a stream (its timeout), lightkube watches again from the last version seen; a
        broken one raises :class:`Unreachable`; :class:`Gone`: list again."""
        with _mapped("watch", kind, selector.namespace):
            events = self._client.watch(
                _resource(kind),
                namespace=_scope(kind, selector),
                labels=_labels(selector.labels),
                resource_version=resource_version,
            )
            async for change, item in events:
                obj = _object(kind, item)
                if obj is not None and change in ("ADDED", "MODIFIED", "DELETED"):
                    yield change, obj


class _Listing:
    """A list as :class:`~imagecheck.cluster._model.Listing`: lightkube's paging iterable
    keeps each page's ``metadata.resourceVersion`` (one snapshot's, whatever the page)."""

    def __init__(self, kind: Kind, selector: Selector, pages: Any) -> None:
        self._kind = kind
        self._selector = selector
        self._pages = pages
        self._version = ""

    @property
    def resource_version(self) -> str:
        return self._version

    async def __aiter__(self) -> AsyncIterator[JSON]:
        with _mapped("list", self._kind, self._selector.namespace):
            async for item in self._pages:
                self._version = _version(self._pages)
                obj = _object(self._kind, item)
                if obj is not None:
                    yield obj
            self._version = _version(self._pages)  # an empty list has a version too


def _version(pages: Any) -> str:
    """The list's resourceVersion as lightkube read it ("" before a page, or none sent)."""
    try:
        version = pages.resourceVersion
    except NotReadyError:
        return ""
    return version if isinstance(version, str) else ""


def _config(kubeconfig: str | Path | None, context: str | None) -> SingleConfig:
    """kubectl's order: the flag, ``KUBECONFIG`` (its first file: lightkube does not merge
    several), ``~/.kube/config``, then in-cluster."""
    path: str | Path | None = kubeconfig
    if path is None and os.environ.get("KUBECONFIG"):
        path = os.environ["KUBECONFIG"].split(os.pathsep)[0]
    if path is None and Path("~/.kube/config").expanduser().is_file():
        path = Path("~/.kube/config").expanduser()
    try:
        config = KubeConfig.from_file(path) if path else KubeConfig.from_service_account()
        single = config.get(context)  # an unknown context fails here, not at a request
    except (ConfigError, OSError, ValueError, KeyError, TypeError) as exc:
        where = f"kubeconfig {path}" if path else "in-cluster configuration"
        raise UsageError(f"cannot use the {where}: {printable(exc)}") from None
    if single is None:  # get() returns None only when given a default
        raise UsageError("no Kubernetes context to use")
    return single


@functools.cache
def _resource(kind: Kind) -> Any:
    """lightkube's generic resource class for ``kind``, made once. (lightkube's own look-up
    misses a core-group class, "/v1" against "v1", and a second one fails to register.)"""
    group, _, version = kind.api_version.rpartition("/")
    make = create_namespaced_resource if kind.namespaced else create_global_resource
    return make(group, version, kind.kind, kind.plural)


def _instance(kind: Kind, namespace: str, body: Mapping[str, Any], name: str | None = None) -> Any:
    """``body`` as lightkube sends it: it takes the path's namespace and name from metadata."""
    obj = dict(body)
    meta = dict(obj.get("metadata") or {})
    meta["namespace"] = namespace
    if name is not None:
        meta["name"] = name
    obj["metadata"] = meta
    obj.setdefault("apiVersion", kind.api_version)
    obj.setdefault("kind", kind.kind)
    return _resource(kind)(obj)


def _scope(kind: Kind, selector: Selector) -> str | None:
    """lightkube's namespace for a list or watch: "*" all; a cluster-scoped kind has none."""
    if not kind.namespaced:
        return None
    return selector.namespace if selector.namespace is not None else "*"


def _labels(selector: str | None) -> dict[str, Any] | None:
    """``a=b,c=d`` as lightkube takes it. Only equality: that is what reap and audit
    accept (``Selector.labels``); anything else is a UsageError, not a silent match-all."""
    if not selector:
        return None
    labels: dict[str, Any] = {}
    for term in selector.split(","):
        key, eq, value = term.partition("=")
        key, value = key.strip(), value.strip().removeprefix("=")
        if not eq or not key or "!" in key:
            raise UsageError(f"label selector {selector!r}: only key=value terms are supported")
        labels[key] = value
    return labels


def _object(kind: Kind, item: Any) -> JSON | None:
    """A list or watch item as the API's JSON, apiVersion/kind filled in (a list's items
    lack them); None, with a log line, for one without a name."""
    obj = dict(item) if isinstance(item, Mapping) else None
    meta = obj.get("metadata") if obj is not None else None
    if obj is None or not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
        log.warning("skipped a %s that is not an object with metadata.name", kind.kind)
        return None
    obj.setdefault("apiVersion", kind.api_version)
    obj.setdefault("kind", kind.kind)
    return obj


def _checked(kind: Kind, item: Any) -> JSON:
    obj = _object(kind, item)
    if obj is None:
        raise Unreachable(f"Kubernetes API: the {kind.kind} it answered is not an object")
    return obj


__all__ = ["MAX_RESPONSE", "MAX_WATCH_EVENT", "PAGE_SIZE", "KubeCluster"]
