"""Cluster mode's examples (issue #15), checked offline: ``examples/audit-cronjob.yaml``
validates against the Kubernetes schemas (strict), its args are accepted by the real
``imagecheck audit``, and its ClusterRole grants what audit asks the API for and no more:
``list`` on each workload kind it lists, ``get`` on secrets (for imagePullSecrets)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import click
import pytest

from imagecheck.cli import cli
from imagecheck.cluster.audit import WORKLOAD_KINDS
from imagecheck.cluster.model import SECRET
from tests.examples.manifests import EXAMPLES, Json, optional_module, yaml
from tests.examples.test_examples import HARDENED, check_schema
from tests.tools import skip_or_fail

AUDIT = EXAMPLES / "audit-cronjob.yaml"


def objects() -> list[Json]:
    assert yaml is not None
    return [d for d in yaml.safe_load_all(AUDIT.read_text()) if d]


def by_kind(kind: str) -> Json:
    (found,) = [o for o in objects() if o["kind"] == kind]
    return found


def test_schema() -> None:
    validator: ModuleType | None = optional_module("kubernetes_validate")
    if validator is None:
        skip_or_fail(
            "kubernetes-validate is not installed: .venv/bin/pip install kubernetes-validate"
        )
    assert validator is not None
    for body in objects():
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
    command = cli.commands["audit"]
    args = container["args"]
    assert args[0] == "audit"
    try:
        command.make_context("audit", list(args[1:]))
    except click.ClickException as exc:
        pytest.fail(f"imagecheck audit rejects {args}: {exc.format_message()}")


def test_the_cluster_role_is_what_audit_asks_for() -> None:
    granted: set[tuple[str, str, str]] = set()
    for rule in by_kind("ClusterRole")["rules"]:
        granted |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"]
                    for v in rule["verbs"]}  # fmt: skip
    wanted: set[Any] = {(k.group, k.plural, "list") for k in WORKLOAD_KINDS}
    wanted.add((SECRET.group, SECRET.plural, "get"))
    assert granted == wanted
    binding = by_kind("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == by_kind("ClusterRole")["metadata"]["name"]
