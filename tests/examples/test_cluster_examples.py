"""Cluster mode's examples (issue #15), checked offline: ``examples/audit-cronjob.yaml`` and
``examples/audit-deployment.yaml`` (``audit --serve``) validate against the Kubernetes schemas
(strict), their args are accepted by the real ``imagecheck audit``, their probes and Service
reach the port it listens on, and their ClusterRoles grant what audit asks the API for and no
more: ``list`` on each workload kind it lists, ``get`` on secrets (for imagePullSecrets)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import click
import pytest

from imagecheck.cli import cli, listen_address
from imagecheck.cluster._audit import WORKLOAD_KINDS
from imagecheck.cluster._model import SECRET, SERVICEACCOUNT
from tests.examples.checks import HARDENED, check_schema
from tests.examples.manifests import EXAMPLES, Json, optional_module, yaml
from tests.support.tools import skip_or_fail

AUDIT = EXAMPLES / "audit-cronjob.yaml"
SERVE = EXAMPLES / "audit-deployment.yaml"
BOTH = pytest.mark.parametrize("path", [AUDIT, SERVE], ids=["cronjob", "deployment"])


def objects(path: Path = AUDIT) -> list[Json]:
    assert yaml is not None
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def by_kind(kind: str, path: Path = AUDIT) -> Json:
    (found,) = [o for o in objects(path) if o["kind"] == kind]
    return found


@BOTH
def test_schema(path: Path) -> None:
    validator: ModuleType | None = optional_module("kubernetes_validate")
    if validator is None:
        skip_or_fail(
            "kubernetes-validate is not installed: .venv/bin/pip install kubernetes-validate"
        )
    assert validator is not None
    for body in objects(path):
        check_schema(validator, body)


def test_the_cronjob_runs_audit_as_the_cli_accepts_it() -> None:
    job = by_kind("CronJob")["spec"]["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["serviceAccountName"] == by_kind("ServiceAccount")["metadata"]["name"]
    (container,) = pod["containers"]
    hardening = container["securityContext"]
    assert all(hardening.get(key) == value for key, value in HARDENED.items())
    accepted(container["args"])


def accepted(args: list[str]) -> dict[str, Any]:
    """``args`` parsed by the real ``imagecheck audit``: its options."""
    assert args[0] == "audit"
    try:
        return cli.commands["audit"].make_context("audit", list(args[1:])).params
    except click.ClickException as exc:
        pytest.fail(f"imagecheck audit rejects {args}: {exc.format_message()}")


def test_the_deployment_serves_where_its_probes_and_service_look() -> None:
    pod = by_kind("Deployment", SERVE)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == by_kind("ServiceAccount", SERVE)["metadata"]["name"]
    (container,) = pod["containers"]
    assert all(container["securityContext"].get(k) == v for k, v in HARDENED.items())
    params = accepted(container["args"])
    assert params["serve"] is True
    (port,) = container["ports"]
    assert listen_address(params["listen"])[1] == port["containerPort"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    service = by_kind("Service", SERVE)["spec"]
    assert service["selector"] == pod_labels(SERVE)
    assert [p["targetPort"] for p in service["ports"]] == [port["name"]]


def pod_labels(path: Path) -> Any:
    return by_kind("Deployment", path)["spec"]["template"]["metadata"]["labels"]


@BOTH
def test_the_cluster_role_is_what_audit_asks_for(path: Path) -> None:
    granted: set[tuple[str, str, str]] = set()
    for rule in by_kind("ClusterRole", path)["rules"]:
        granted |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"]
                    for v in rule["verbs"]}  # fmt: skip
    wanted: set[Any] = {(k.group, k.plural, "list") for k in WORKLOAD_KINDS}
    wanted.add((SECRET.group, SECRET.plural, "get"))
    wanted.add((SERVICEACCOUNT.group, SERVICEACCOUNT.plural, "get"))
    assert granted == wanted
    binding = by_kind("ClusterRoleBinding", path)
    assert binding["roleRef"]["name"] == by_kind("ClusterRole", path)["metadata"]["name"]
