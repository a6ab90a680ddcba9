"""--from-pod against a local HTTPS stand-in for the Kubernetes API server (no kube-apiserver
runs here) serving real Pod and Secret JSON, and the real token-auth registry behind it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.clirun import run_cli, tls_args
from tests.support.endpoint import RegistryEndpoint
from tests.support.incluster import (
    NAMESPACE,
    POD,
    POD_PATH,
    SECRET_PATH,
    TOKEN,
    FakeApiServer,
    api_server,
    in_cluster_env,
    secret_json,
)
from tests.support.pki import TLSMaterial


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
