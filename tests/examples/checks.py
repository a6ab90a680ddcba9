"""Checks shared by the tests on examples/: a manifest against the Kubernetes schemas
(:func:`check_schema`), a Job that fails on a missing image (:func:`check_job`), the
hardened securityContext (:data:`HARDENED`), what the real CLI makes of a container's args
(:func:`cli_params`), and what a Role grants (:func:`granted`)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import click
import pytest

from imagecheck.cli import check as check_command
from tests.examples.manifests import Document, Json, optional_module

# The oldest Kubernetes the examples promise to work on; kubernetes-validate ships its schemas.
K8S_VERSION = "1.30"


HARDENED = {
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


kubernetes_validate = optional_module("kubernetes_validate")


def by_label(documents: list[Document]) -> list[Any]:
    return [pytest.param(d, id=d.label) for d in documents]


def check_schema(kv: ModuleType, body: Json) -> None:
    what = f"{body.get('kind')}/{(body.get('metadata') or {}).get('name')}"
    try:
        version = kv.validate(body, K8S_VERSION, strict=True)
    except kv.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path) or "(top level)"
        pytest.fail(f"{what}: {where}: {exc.message}", pytrace=False)
    except kv.SchemaNotFoundError as exc:  # an unknown kind or apiVersion
        pytest.fail(f"{what}: {exc.message}", pytrace=False)
    # Schemas of this very version, not of an older one kubernetes-validate fell back to.
    assert version == K8S_VERSION


def check_job(spec: Json) -> None:
    # One pod, one try: a missing image fails the Job instead of being retried, and the kubelet
    # does not restart the failed initContainer in place.
    assert spec.get("backoffLimit") == 0
    assert (dig(spec, "template", "spec") or {}).get("restartPolicy") == "Never"


def cli_params(args: list[str], command: click.Command = check_command) -> dict[str, Any]:
    """What the real ``imagecheck check`` (or ``command``) makes of the args (ENTRYPOINT is
    ``imagecheck``)."""
    name = command.name or ""
    assert args[:1] == [name], "args start with the subcommand"
    try:
        with command.make_context(name, list(args[1:])) as ctx:
            return dict(ctx.params)
    except click.ClickException as exc:
        pytest.fail(f"imagecheck rejects {args}: {exc.format_message()}", pytrace=False)


def granted(role: Json) -> dict[tuple[str, str], set[str]]:
    """(API group, resource) -> verbs, as a Role's or ClusterRole's rules grant them."""
    found: dict[tuple[str, str], set[str]] = {}
    for rule in role["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                found.setdefault((group, resource), set()).update(rule["verbs"])
    return found


def dig(node: Any, *keys: str) -> Any:
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node
