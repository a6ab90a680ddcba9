"""--from-pod against a local HTTPS stand-in for the Kubernetes API server (no kube-apiserver
runs here) serving real Pod and Secret JSON, and the real token-auth registry behind it."""

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

import pytest

from tests.integration.conftest import RegistryEndpoint
from tests.support.clirun import run_cli, tls_args
from tests.support.pki import TLSMaterial

TOKEN = "service-account-token-" + "s" * 20
NAMESPACE, POD = "team", "train-7f9c"


@dataclass
class FakeApiServer:
    objects: Mapping[str, dict[str, Any] | bytes]  # bytes: sent as they are
    forbidden: set[str] = field(default_factory=set)
    seen: list[tuple[str, str | None]] = field(default_factory=list)
    host: str = ""


def pod_json(registry: RegistryEndpoint, main: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": NAMESPACE},
        "spec": {
            "restartPolicy": "Never",
            "imagePullSecrets": [{"name": "regcred"}],
            "initContainers": [
                {"name": "imagecheck", "image": "ghcr.io/imagecheck/imagecheck:0.1.0"},
                {"name": "migrate", "image": registry.ref("public/tool:2.1")},
            ],
            "containers": [
                {"name": "train", "image": registry.ref(main)},
                {"name": "sidecar", "image": registry.ref("public/tool:2.1")},
            ],
        },
    }


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


@pytest.fixture
def api(tls_material: TLSMaterial, registry_token: RegistryEndpoint) -> Iterator[FakeApiServer]:
    objects = {
        POD_PATH: pod_json(registry_token, "private/secret:1.0"),
        SECRET_PATH: secret_json(registry_token),
    }
    with api_server(tls_material, FakeApiServer(objects)) as server:
        yield server


def test_from_pod_checks_the_other_containers_with_the_pod_pull_secrets(
    api: FakeApiServer, tls_material: TLSMaterial, registry_token: RegistryEndpoint, tmp_path: Path
) -> None:
    env = in_cluster_env(tls_material, api, tmp_path)
    args = [
        "check",
        "-o",
        "json",
        *tls_args(registry_token),
        "--from-pod",
        "--use-pod-pull-secrets",
    ]
    run = run_cli(args, tmp_path, env=env)
    assert run.code == 0, run.stdout + run.stderr
    assert [r["image"] for r in run.json()] == [
        registry_token.ref("public/tool:2.1"),
        registry_token.ref("private/secret:1.0"),
    ]
    assert [path for path, _ in api.seen] == [POD_PATH, SECRET_PATH]
    assert all(auth == f"Bearer {TOKEN}" for _, auth in api.seen)
    assert TOKEN not in run.stdout + run.stderr


def test_without_the_pod_pull_secrets_the_private_image_is_denied(
    api: FakeApiServer, tls_material: TLSMaterial, registry_token: RegistryEndpoint, tmp_path: Path
) -> None:
    env = in_cluster_env(tls_material, api, tmp_path)
    run = run_cli(["check", *tls_args(registry_token), "--from-pod"], tmp_path, env=env)
    assert run.code == 3
    assert [path for path, _ in api.seen] == [POD_PATH]


def test_from_pod_missing_main_image_fails_with_a_termination_message(
    tls_material: TLSMaterial, registry_token: RegistryEndpoint, tmp_path: Path
) -> None:
    objects = {
        POD_PATH: pod_json(registry_token, "sample/app:typo"),
        SECRET_PATH: secret_json(registry_token),
    }
    with api_server(tls_material, FakeApiServer(objects)) as api:
        env = in_cluster_env(tls_material, api, tmp_path)
        log = tmp_path / "termination-log"
        log.write_text("")
        args = ["check", *tls_args(registry_token), "--from-pod", "--termination-log", str(log)]
        run = run_cli(args, tmp_path, env=env)
    assert run.code == 1
    assert log.read_text().startswith(
        f"imagecheck: missing {registry_token.ref('sample/app:typo')}"
    )


@pytest.mark.parametrize("forbidden", [POD_PATH, SECRET_PATH], ids=["pods", "secrets"])
def test_missing_rbac_is_a_clear_error(
    api: FakeApiServer,
    tls_material: TLSMaterial,
    registry_token: RegistryEndpoint,
    tmp_path: Path,
    forbidden: str,
) -> None:
    api.forbidden.add(forbidden)
    env = in_cluster_env(tls_material, api, tmp_path)
    args = ["check", *tls_args(registry_token), "--from-pod", "--use-pod-pull-secrets"]
    run = run_cli(args, tmp_path, env=env)
    assert run.code == 4
    [line] = run.stderr.strip().splitlines()
    assert "refused" in line
    assert "needs a Role with 'get'" in line
    assert "examples/job-from-pod.yaml" in line


def test_from_pod_outside_a_cluster_is_a_usage_error(tmp_path: Path) -> None:
    run = run_cli(["check", "--from-pod"], tmp_path)
    assert run.code == 2
    assert "works inside a pod" in run.stderr


def test_no_images_at_all_is_a_usage_error(tmp_path: Path) -> None:
    run = run_cli(["check"], tmp_path)
    assert run.code == 2
    assert "no IMAGE to check" in run.stderr


# The API server is remote: what it answers is bounded, and another shape than the API's is
# a registry-like error (exit 4, one line), never a traceback (issue #10).
HOSTILE_OBJECTS: list[tuple[str, str, dict[str, Any] | bytes, str]] = [
    ("pod-60000-deep", POD_PATH, b"[" * 60_000 + b"]" * 60_000, "is nested too deeply"),
    ("pod-5000-digit-number", POD_PATH, b'{"spec": ' + b"1" * 5000 + b"}", "is not valid JSON"),
    ("pod-over-1-MiB", POD_PATH, b" " * (2 << 20) + b"{}", "is larger than 1048576 bytes"),
    ("spec-a-list", POD_PATH, {"kind": "Pod", "spec": []}, "spec is not an object"),
    ("containers-a-number", POD_PATH, {"kind": "Pod", "spec": {"containers": 5}},
     "spec.containers is not a list"),
    ("pull-secrets-a-string", POD_PATH, {"kind": "Pod", "spec": {"imagePullSecrets": "regcred"}},
     "spec.imagePullSecrets is not a list"),
    ("secret-60000-deep", SECRET_PATH, b"[" * 60_000 + b"]" * 60_000, "is nested too deeply"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("path", "body", "words"),
    [c[1:] for c in HOSTILE_OBJECTS],
    ids=[c[0] for c in HOSTILE_OBJECTS],
)
def test_hostile_api_answer_is_a_one_line_error(
    tls_material: TLSMaterial,
    registry_token: RegistryEndpoint,
    tmp_path: Path,
    path: str,
    body: dict[str, Any] | bytes,
    words: str,
) -> None:
    objects: dict[str, dict[str, Any] | bytes] = {
        POD_PATH: pod_json(registry_token, "private/secret:1.0"),
        SECRET_PATH: secret_json(registry_token),
        path: body,
    }
    with api_server(tls_material, FakeApiServer(objects)) as api:
        env = in_cluster_env(tls_material, api, tmp_path)
        args = ["check", *tls_args(registry_token), "--from-pod", "--use-pod-pull-secrets"]
        run = run_cli(args, tmp_path, env=env)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.code == 4, run.stdout + run.stderr
    assert run.stdout == ""
    [line] = run.stderr.splitlines()
    assert line.startswith("imagecheck: error: Kubernetes API"), line
    assert words in line, line
