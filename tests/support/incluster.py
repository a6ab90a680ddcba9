"""What a pod sees of its cluster, for the in-cluster code paths (``--from-pod``, the
webhook's pod pull secrets): a small HTTPS stand-in for the Kubernetes API server
(:func:`api_server`) that answers a service-account token, and the service-account directory
and environment the kubelet gives a pod (:func:`in_cluster_env`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.support.endpoint import RegistryEndpoint
from tests.support.pki import TLSMaterial

TOKEN = "service-account-token-" + "s" * 20
NAMESPACE, POD = "team", "train-7f9c"


@dataclass
class FakeApiServer:
    objects: Mapping[str, dict[str, Any] | bytes]  # bytes: sent as they are
    forbidden: set[str] = field(default_factory=set)
    seen: list[tuple[str, str | None]] = field(default_factory=list)
    host: str = ""


def secret_json(registry: RegistryEndpoint) -> dict[str, Any]:
    auth = base64.b64encode(f"{registry.username}:{registry.password}".encode()).decode()
    config = json.dumps({"auths": {registry.host: {"auth": auth}}}).encode()
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "regcred", "namespace": NAMESPACE},
        "data": {".dockerconfigjson": base64.b64encode(config).decode()},
    }


@contextlib.contextmanager
def api_server(tls: TLSMaterial, api: FakeApiServer) -> Iterator[FakeApiServer]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            api.seen.append((self.path, self.headers.get("Authorization")))
            body: dict[str, Any] | bytes
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                status, body = 401, {"kind": "Status", "code": 401}
            elif self.path in api.forbidden:
                status, body = 403, {"kind": "Status", "code": 403, "reason": "Forbidden"}
            elif self.path in api.objects:
                status, body = 200, api.objects[self.path]
            else:
                status, body = 404, {"kind": "Status", "code": 404}
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = tls.server_context().wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    api.host = f"127.0.0.1:{server.server_address[1]}"
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def in_cluster_env(tls: TLSMaterial, api: FakeApiServer, tmp_path: Path) -> dict[str, str]:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(TOKEN + "\n")
    (sa / "ca.crt").write_bytes(tls.ca_file.read_bytes())
    (sa / "namespace").write_text(NAMESPACE)
    host, port = api.host.split(":")
    return {
        "KUBERNETES_SERVICE_HOST": host,
        "KUBERNETES_SERVICE_PORT": port,
        "IMAGECHECK_SERVICEACCOUNT_DIR": str(sa),
        "POD_NAME": POD,
    }


POD_PATH = f"/api/v1/namespaces/{NAMESPACE}/pods/{POD}"
SECRET_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/regcred"
