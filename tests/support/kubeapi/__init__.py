"""A Kubernetes API stand-in for the integration tests of cluster mode (issue #15): HTTPS on
127.0.0.1, real object shapes (``objects.py``), resourceVersions, watch and 410 Gone, merge
patch and conflicts, an RBAC table and a log of every write (``store.py``, ``server.py``),
mutating admission webhooks called on create (``admission.py``).

:class:`KubeAPI` is what a test holds (the ``kube_api`` fixture): the store to seed and
inspect, the server, and a kubeconfig that points at it (the test CA, a bearer token).
"""

from __future__ import annotations

import json
import secrets
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.kubeapi.admission import MutatingWebhook
from tests.support.kubeapi.server import KubeAPIServer
from tests.support.kubeapi.store import SERVICE_ACCOUNT, Store, Write

__all__ = ["SERVICE_ACCOUNT", "KubeAPI", "MutatingWebhook", "Write"]


@dataclass
class KubeAPI:
    server: KubeAPIServer
    kubeconfig: Path
    token: str = field(repr=False)

    @classmethod
    def start(cls, ssl_context: ssl.SSLContext, ca_file: Path, directory: Path) -> KubeAPI:
        token = secrets.token_urlsafe(24)
        server = KubeAPIServer(ssl_context, token, Store())
        server.start()
        kubeconfig = directory / "kubeconfig"
        kubeconfig.write_text(_kubeconfig(server.url, ca_file, token), encoding="utf-8")
        return cls(server, kubeconfig, token)

    def stop(self) -> None:
        self.server.stop()

    @property
    def store(self) -> Store:
        return self.server.store

    @property
    def writes(self) -> list[Write]:
        with self.store.lock:
            return list(self.store.writes)

    def reset(self) -> None:
        """A fresh store (no objects, everything allowed, no writes) and default behaviour."""
        self.server.store = Store()
        self.server.gone_as_status = False
        self.server.watch_timeout = 1.0
        self.server.watch_poll = 0.05
        self.server.requests = []
        self.server.mutating = []

    def add(self, *objects: dict[str, Any]) -> list[dict[str, Any]]:
        """Store objects (from ``objects.py``); returns them as stored."""
        return [self.store.add(obj) for obj in objects]

    def before(self, verb: str, plural: str, change: Callable[[Store], None]) -> None:
        """Run ``change`` on the store once, just before the next ``verb`` on ``plural`` is
        served (after its RBAC check): the object changes between a client's read and its
        write, as when a controller updates it meanwhile."""
        self.store.before[(verb, plural)] = change

    def register(self, *webhooks: MutatingWebhook) -> None:
        """Call these mutating webhooks, in order, on each create of their resources."""
        self.server.mutating.extend(webhooks)

    def allow(self, *rules: tuple[str, str]) -> None:
        """Only these (verb, plural) pairs; anything else answers 403."""
        self.store.allowed = set(rules)


def _kubeconfig(url: str, ca_file: Path, token: str) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "standin", "cluster": {"server": url, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": "imagecheck", "user": {"token": token}}],
        "contexts": [
            {
                "name": "standin",
                "context": {"cluster": "standin", "user": "imagecheck", "namespace": "default"},
            }
        ],
        "current-context": "standin",
    }
    # JSON is YAML: no YAML writer needed, and no quoting to get wrong.
    return json.dumps(config, indent=2)
