"""Shared by the tests of ``imagecheck reap``'s pass: pods and Jobs as the API returns them
(times relative to :data:`NOW`), a faked registry, and a :class:`Setup` that runs one pass
over the in-memory cluster with the real :class:`~imagecheck.registry._client.ImageChecker`."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
import respx

from imagecheck.authn import Keychain, PullSecretKeychain
from imagecheck.cluster import Outcome, Reaper, ReapOptions
from imagecheck.registry import ClientOptions, ImageChecker
from tests.support.fakecluster import FakeCluster

NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC).timestamp()
REGISTRY = "https://registry.test"
MISSING = "registry.test/team/train:1.0.1"
FOUND = "registry.test/team/train:1.0.0"
DENIED = "registry.test/team/secret:1.0"
FLAKY = "registry.test/team/flaky:1.0"
PRIVATE = "registry.test/team/private:1.0"
DIGEST = "sha256:" + "a" * 64


def stamp(seconds_ago: float) -> str:
    return datetime.fromtimestamp(NOW - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(
    name: str,
    image: str = MISSING,
    *,
    owner: tuple[str, str, str] | None = ("Job", "train-1", "uid-train-1"),
    reason: str = "ImagePullBackOff",
    stuck_for: float = 600,
    init: bool = False,
    secrets: Sequence[str] = (),
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if owner:
        kind, owner_name, uid = owner
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": kind, "name": owner_name, "uid": uid, "controller": True}
        ]
    lists = (
        ("initContainers", "initContainerStatuses") if init else ("containers", "containerStatuses")
    )
    waiting = {"reason": reason, "message": f'Back-off pulling image "{image}"'}
    return {
        "metadata": meta,
        "spec": {
            lists[0]: [{"name": "train", "image": image}],
            **({"containers": [{"name": "main", "image": FOUND}]} if init else {}),
            "imagePullSecrets": [{"name": s} for s in secrets],
        },
        "status": {
            "phase": "Pending",
            "startTime": stamp(stuck_for),
            lists[1]: [{"name": "train", "image": image, "state": {"waiting": waiting}}],
        },
    }


def job(
    name: str = "train-1", *, age: float = 700, cron: str | None = "nightly", **extra: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml", "uid": f"uid-{name}"}
    if cron:
        meta["ownerReferences"] = [
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "name": cron,
                "uid": "c",
                "controller": True,
            }
        ]
    meta.update(extra.pop("metadata", {}))
    body = {"metadata": meta, "spec": {"backoffLimit": 0, **extra.pop("spec", {})}}
    body["status"] = {"startTime": stamp(age), "active": 1, **extra.pop("status", {})}
    return body


def registry(router: respx.Router) -> respx.Router:
    router.get(f"{REGISTRY}/v2/").respond(200)
    manifests = f"{REGISTRY}/v2/team"
    router.head(f"{manifests}/train/manifests/1.0.1").respond(404)
    router.head(f"{manifests}/train/manifests/1.0.0").respond(
        200,
        headers={
            "Docker-Content-Digest": DIGEST,
            "Content-Type": "application/vnd.oci.image.manifest.v1+json",
        },
    )
    router.head(f"{manifests}/secret/manifests/1.0").respond(403)
    router.head(f"{manifests}/flaky/manifests/1.0").respond(503)

    def private(request: httpx.Request) -> httpx.Response:
        # Anonymous: 401, as a private repository answers; with credentials: it is missing.
        if "Authorization" in request.headers:
            return httpx.Response(404)
        return httpx.Response(401, headers={"WWW-Authenticate": 'Basic realm="registry.test"'})

    router.head(f"{manifests}/private/manifests/1.0").mock(side_effect=private)
    return router


@dataclass
class Setup:
    cluster: FakeCluster = field(default_factory=FakeCluster)
    router: respx.Router = field(default_factory=lambda: registry(respx.Router()))

    def run(self, **options: Any) -> list[Outcome]:
        async def main() -> list[Outcome]:
            async with ImageChecker(
                ClientOptions(retries=0), transport=httpx.MockTransport(self.router.async_handler)
            ) as checker:
                reaper = Reaper(
                    self.cluster,
                    checker,
                    ReapOptions(**options),
                    keychain_for=_keychain,
                    clock=lambda: NOW,
                )
                return await reaper.run_once()

        return asyncio.run(main())

    def manifest_requests(self) -> list[str]:
        return [
            c.request.url.path for c in self.router.calls if "/manifests/" in c.request.url.path
        ]


def _keychain(texts: Sequence[tuple[str, str]]) -> Keychain:
    return PullSecretKeychain.from_paths([], texts)


def secret(user: str) -> dict[str, Any]:
    auth = base64.b64encode(f"{user}:pw".encode()).decode()
    config = json.dumps({"auths": {"registry.test": {"auth": auth}}})
    return {
        "metadata": {"name": "regcred", "namespace": "ml"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode()},
    }
