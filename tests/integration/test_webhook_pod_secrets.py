"""``serve --use-pod-pull-secrets``: the webhook reads the pull secrets a reviewed pod names
through the Kubernetes API (a local HTTPS stand-in) and gets into a private repository with
them, as the kubelet would."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.admission import admission_review
from tests.support.clirun import clean_env
from tests.support.endpoint import RegistryEndpoint
from tests.support.incluster import (
    NAMESPACE,
    SECRET_PATH,
    FakeApiServer,
    api_server,
    in_cluster_env,
    secret_json,
)
from tests.support.net import free_port
from tests.support.pki import TLSMaterial
from tests.support.webhook import Webhook as RunningWebhook
from tests.support.webhook import wait_ready

PRIVATE = "private/secret:1.0"


def job(registry: RegistryEndpoint, secrets: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "train", "image": registry.ref(PRIVATE)}],
    }
    if secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in secrets]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": NAMESPACE},
        "spec": {"template": {"spec": spec}},
    }


@contextlib.contextmanager
def webhook(
    tmp_path: Path, tls: TLSMaterial, env: dict[str, str], *args: str
) -> Iterator[RunningWebhook]:
    port = free_port()
    log = tmp_path / f"serve-{port}.log"
    argv = [
        sys.executable, "-m", "imagecheck", "serve", "--listen", f"127.0.0.1:{port}",
        "--tls-cert", str(tls.server.cert), "--tls-key", str(tls.server.key),
        "--ca-file", str(tls.ca_file), "--on-error", "fail", *args,
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env={**clean_env(tmp_path), **env},
        )
    hook = RunningWebhook(process, port, log, trust=tls.ca_file)
    try:
        assert wait_ready(hook), log.read_text()
        yield hook
    finally:
        hook.close()


def allowed(hook: RunningWebhook, obj: dict[str, Any]) -> bool:
    body = admission_review(obj, namespace=NAMESPACE)
    answer = hook.post(json.dumps(body).encode())
    assert answer.status_code == 200, answer.text
    result: bool = answer.json()["response"]["allowed"]
    return result


def test_pod_pull_secrets_open_a_private_repository(
    tls_material: TLSMaterial, registry_token: RegistryEndpoint, tmp_path: Path
) -> None:
    api = FakeApiServer({SECRET_PATH: secret_json(registry_token)})
    with api_server(tls_material, api):
        env = in_cluster_env(tls_material, api, tmp_path)
        del env["POD_NAME"]  # the webhook is not asking about its own pod
        with webhook(tmp_path, tls_material, env, "--use-pod-pull-secrets") as hook:
            assert allowed(hook, job(registry_token, ["regcred"]))
            assert not allowed(hook, job(registry_token, []))  # no secret named: denied
            # A secret the API will not give (RBAC) is left out, logged, and the review goes on.
            api.forbidden.add(SECRET_PATH)
            assert not allowed(hook, job(registry_token, ["other"]))
            time.sleep(0.2)
            logs = [json.loads(line) for line in hook.stderr.read_text().splitlines()]
            assert any(e["msg"] == "pull secret not used" for e in logs)
    assert [path for path, _ in api.seen].count(SECRET_PATH) == 1  # kept for a minute


def test_without_the_flag_the_pod_secrets_are_not_read(
    tls_material: TLSMaterial, registry_token: RegistryEndpoint, tmp_path: Path
) -> None:
    api = FakeApiServer({SECRET_PATH: secret_json(registry_token)})
    with api_server(tls_material, api):
        env = in_cluster_env(tls_material, api, tmp_path)
        with webhook(tmp_path, tls_material, env) as hook:
            assert not allowed(hook, job(registry_token, ["regcred"]))
    assert api.seen == []


def test_use_pod_pull_secrets_outside_a_cluster_is_a_usage_error(
    tls_material: TLSMaterial, tmp_path: Path
) -> None:
    argv = [sys.executable, "-m", "imagecheck", "serve", "--insecure-http", "--listen",
            f"127.0.0.1:{free_port()}", "--use-pod-pull-secrets"]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, env=clean_env(tmp_path), timeout=30, check=False
    )
    assert done.returncode == 2
    assert "KUBERNETES_SERVICE_HOST" in done.stderr


def test_a_template_without_pull_secrets_uses_its_service_accounts(
    tls_material: TLSMaterial, registry_token: RegistryEndpoint, tmp_path: Path
) -> None:
    """The ServiceAccount admission plugin will give the Job's pods ``builder``'s pull
    secrets: the webhook checks with them, and reads the ServiceAccount once a minute."""
    builder = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/builder"
    account = {"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "builder", "namespace": NAMESPACE},
               "imagePullSecrets": [{"name": "absent"}, {"name": "regcred"}]}  # fmt: skip
    api = FakeApiServer({SECRET_PATH: secret_json(registry_token), builder: account})
    with api_server(tls_material, api):
        env = in_cluster_env(tls_material, api, tmp_path)
        del env["POD_NAME"]
        with webhook(tmp_path, tls_material, env, "--use-pod-pull-secrets") as hook:
            obj = job(registry_token, [])
            obj["spec"]["template"]["spec"]["serviceAccountName"] = "builder"
            assert allowed(hook, obj)
            assert allowed(hook, obj)
            obj["spec"]["template"]["spec"]["serviceAccountName"] = "nobody"  # 404: warned
            assert not allowed(hook, obj)
            api.forbidden.add(builder.replace("builder", "robot"))
            obj["spec"]["template"]["spec"]["serviceAccountName"] = "robot"
            assert not allowed(hook, obj)
            time.sleep(0.2)
            logs = [json.loads(line) for line in hook.stderr.read_text().splitlines()]
    paths = [path for path, _ in api.seen]
    assert paths.count(builder) == 1 and paths.count(SECRET_PATH) == 1
    warned = {e["serviceaccount"]: e["error"] for e in logs if "serviceaccount" in e}
    assert warned == {
        f"{NAMESPACE}/nobody": "the ServiceAccount does not exist",
        f"{NAMESPACE}/robot": f"forbidden: needs 'get serviceaccounts' in namespace {NAMESPACE} "
        "(RBAC)",
    }
    assert registry_token.password
    assert registry_token.password not in hook.stderr.read_text()
