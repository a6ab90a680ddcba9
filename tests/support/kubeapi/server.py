"""An HTTPS Kubernetes API stand-in: aiohttp on 127.0.0.1 (a random port), in a thread of
its own, serving the objects of a :class:`Store` under the API's real paths:

    /api/v1/[namespaces/{ns}/]{plural}[/{name}]
    /apis/{group}/{version}/[namespaces/{ns}/]{plural}[/{name}]
    .../{plural}/{name}/status  (the kinds with a status subresource: ``subresources.py``)

list (labelSelector, limit/continue, the list's resourceVersion; items without
apiVersion/kind, as the API serves them), get, watch (``?watch=true``: JSON lines of the
history after ``resourceVersion``, then new changes until ``timeoutSeconds``; a version
older than the store's compaction answers as kube-apiserver does, a 200 whose one event is
an ERROR with a 410 Status, or with ``gone_as_status`` a plain 410), merge and JSON patch,
create, replace and delete. Every request needs the bearer token; every write is logged. A
create passes the registered mutating webhooks first (``admission.py``).
"""

from __future__ import annotations

import asyncio
import bisect
import json
import ssl
import threading
import time
from typing import Any

from aiohttp import web

from tests.support.kubeapi.admission import MutatingWebhook, mutate
from tests.support.kubeapi.store import RESOURCES, ApiError, Resource, Store, Write, matches

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class KubeAPIServer:
    """Start with :meth:`start`, stop with :meth:`stop`; ``url`` once started."""

    def __init__(self, ssl_context: ssl.SSLContext, token: str, store: Store) -> None:
        self.ssl_context = ssl_context
        self.token = token
        self.store = store
        self.gone_as_status = False
        self.watch_timeout = 1.0  # seconds a watch stays open when the client names none
        # Seconds between a watch's looks at the history: kube-apiserver sends a change at
        # once, so a latency benchmark sets it low; the tests need no more than this.
        self.watch_poll = 0.05
        self.url = ""
        self.requests: list[str] = []  # "GET /api/v1/pods?limit=500", in order
        self.mutating: list[MutatingWebhook] = []  # called on create, in order (admission.py)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=self.ssl_context)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"https://127.0.0.1:{port}"

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(f"{request.method} {request.path_qs}")
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _status(ApiError(401, "Unauthorized", "Unauthorized"))
        route = _route(request.path)
        if route is None:
            return _status(ApiError(404, "NotFound", "the server could not find the resource"))
        res, namespace, name, subresource = route
        body = None
        try:
            if request.method in ("PATCH", "POST", "PUT"):
                body = await _body(request)
            if request.method == "POST" and name is None and namespace and self.mutating:
                body = await self._admit(res, namespace, body)
            if (
                request.method == "GET"
                and name is None
                and request.query.get("watch") in ("1", "true")
            ):
                return await self._watch(request, res, namespace)
            answer = self._dispatch(request, res, namespace, name, body, subresource)
        except ApiError as exc:
            self._log_write(request, body, exc.status["code"])
            return _status(exc)
        self._log_write(request, body, 201 if request.method == "POST" else 200)
        return _json(answer, 201 if request.method == "POST" else 200)

    async def _admit(self, res: Resource, namespace: str, body: Any) -> Any:
        """A create's body as the mutating webhooks leave it (``admission.py``), after the
        RBAC check: the API server authorizes a request before admission sees it."""
        with self.store.lock:
            self.store.check("create", res, namespace)
        return await mutate(list(self.mutating), res, namespace, body)

    def _dispatch(
        self,
        request: web.Request,
        res: Resource,
        namespace: str | None,
        name: str | None,
        body: Any,
        subresource: str | None = None,
    ) -> Any:
        verb = _verb(request.method, name)
        with self.store.lock:
            self.store.check(verb, res, namespace, subresource)
            self.store.interject(verb, res)
            if verb == "list":
                return self._list(request, res, namespace)
            if not res.namespaced:
                namespace = ""  # a cluster-scoped object's path names no namespace
            if namespace is None:
                raise ApiError(405, "MethodNotAllowed", f"{verb} needs a namespace")
            if subresource is not None and verb not in ("get", "patch", "update"):
                raise ApiError(405, "MethodNotAllowed", f"{verb} on {subresource}")
            if verb == "create":
                return self.store.create(res, namespace, body)
            assert name is not None
            if verb == "get":
                return self.store.get(res, namespace, name)
            if verb == "patch":
                if request.content_type not in (MERGE_PATCH, JSON_PATCH):
                    raise ApiError(415, "UnsupportedMediaType", f"not {MERGE_PATCH}")
                json_patch = request.content_type == JSON_PATCH
                return self.store.patch(res, namespace, name, body, subresource, json_patch)
            if verb == "update":
                return self.store.replace(res, namespace, name, body, subresource)
            return self.store.delete(res, namespace, name)

    def _list(self, request: web.Request, res: Resource, namespace: str | None) -> Any:
        selector = request.query.get("labelSelector", "")
        items = [o for o in self.store.items(res, namespace) if matches(o, selector)]
        start = int(request.query.get("continue") or 0)
        limit = int(request.query.get("limit") or 0) or len(items)
        page = [_as_item(o) for o in items[start : start + limit]]
        meta: dict[str, Any] = {"resourceVersion": str(self.store.version)}
        if start + limit < len(items):
            meta.update(
                {"continue": str(start + limit), "remainingItemCount": len(items) - start - limit}
            )
        return {
            "kind": f"{res.kind}List",
            "apiVersion": res.api_version,
            "metadata": meta,
            "items": page,
        }

    async def _watch(
        self, request: web.Request, res: Resource, namespace: str | None
    ) -> web.StreamResponse:
        with self.store.lock:
            self.store.check("watch", res, namespace)
            since = int(request.query.get("resourceVersion") or self.store.version)
            too_old = since < self.store.compacted
        if too_old and self.gone_as_status:
            return _status(
                ApiError(
                    410, "Expired", f"too old resource version: {since} ({self.store.compacted})"
                )
            )
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        if too_old:
            gone = ApiError(
                410, "Expired", f"too old resource version: {since} ({self.store.compacted})"
            )
            await response.write(
                json.dumps({"type": "ERROR", "object": gone.status}).encode() + b"\n"
            )
            return response
        selector = request.query.get("labelSelector", "")
        deadline = time.monotonic() + float(
            request.query.get("timeoutSeconds") or self.watch_timeout
        )
        # A client that went away ends its watch, as the API server's does: else a long
        # timeoutSeconds holds the server's shutdown until it runs out.
        while time.monotonic() < deadline and not _gone(request):
            with self.store.lock:  # the history is in version order: no need to scan it all
                history = self.store.history
                changes = history[bisect.bisect_right(history, since, key=lambda c: c[0]) :]
            for version, change, obj in changes:
                since = version
                if (
                    obj.get("kind") == res.kind
                    and namespace in (None, obj["metadata"].get("namespace"))
                    and matches(obj, selector)
                ):
                    await response.write(
                        json.dumps({"type": change, "object": obj}).encode() + b"\n"
                    )
            await asyncio.sleep(self.watch_poll)
        return response

    def _log_write(self, request: web.Request, body: Any, status: int) -> None:
        if request.method in ("PATCH", "POST", "PUT", "DELETE"):
            with self.store.lock:
                self.store.writes.append(
                    Write(request.method, request.path, request.content_type, body, status)
                )


def _route(path: str) -> tuple[Resource, str | None, str | None, str | None] | None:
    """The resource, namespace, name and subresource a path names; None: not served."""
    parts = path.strip("/").split("/")
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif parts[0] == "apis" and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 2 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    subresource = rest.pop() if len(rest) == 3 else None
    if not 1 <= len(rest) <= 2:
        return None
    for res in RESOURCES:
        if (res.group, res.version, res.plural) == (group, version, rest[0]):
            if subresource is not None and not (subresource == "status" and res.status):
                return None
            if namespace is not None and not res.namespaced:
                return None
            return res, namespace, rest[1] if len(rest) == 2 else None, subresource
    return None


def _gone(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


def _verb(method: str, name: str | None) -> str:
    if method == "GET":
        return "get" if name else "list"
    return {"PATCH": "patch", "POST": "create", "PUT": "update", "DELETE": "delete"}[method]


async def _body(request: web.Request) -> Any:
    try:
        return json.loads(await request.read())
    except ValueError:
        raise ApiError(400, "BadRequest", "the body is not JSON") from None


def _as_item(obj: Any) -> Any:
    """A list's item: the API leaves apiVersion and kind to the list."""
    if not isinstance(obj, dict):
        return obj
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}


def _status(error: ApiError) -> web.Response:
    return _json(error.status, error.status["code"])


def _json(body: Any, status: int) -> web.Response:
    # "application/json", no charset: what kube-apiserver sends (aiohttp's json_response adds one).
    return web.Response(
        body=json.dumps(body).encode(), status=status, content_type="application/json"
    )
