"""``examples/job.yaml``'s initContainer as a :class:`~tests.support.runc.Container`: its
``args`` (the image it checks replaced by the test's), its memory limit, its user, its secret
volume. The harness implements exactly the example's securityContext; an example that asks for
something else is an error here, so that the tests follow the example instead of drifting."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tests.support.runc import TERMINATION_LOG, Container

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "examples" / "job.yaml"
UNITS = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}
# What the harness does (tests/support/runc.py), as a securityContext says it.
HARNESS_CONTEXT = {
    "runAsNonRoot": True,
    "readOnlyRootFilesystem": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def quantity(text: str) -> int:
    """A Kubernetes memory quantity in bytes (the binary suffixes the examples use)."""
    for suffix, factor in UNITS.items():
        if text.endswith(suffix):
            return int(text.removesuffix(suffix)) * factor
    return int(text)


def example_pod(path: Path = JOB) -> dict[str, Any]:
    spec: dict[str, Any] = yaml.safe_load(path.read_text())["spec"]["template"]["spec"]
    return spec


def init_container(
    image: str,
    reference: str,
    secret: Mapping[str, bytes],
    *,
    extra_args: tuple[str, ...] = (),
    volumes: Mapping[str, Path] | None = None,
) -> Container:
    """The example's initContainer, run from ``image``, checking ``reference`` (with
    ``extra_args`` before it) with ``secret`` as the pull secret's files."""
    [init] = example_pod()["initContainers"]
    context = init["securityContext"]
    unexpected = {k: v for k, v in HARNESS_CONTEXT.items() if context.get(k) != v}
    if unexpected or init["terminationMessagePath"] != TERMINATION_LOG:
        raise ValueError(f"{JOB}: the initContainer asks for what the harness does not do")
    *options, checked = init["args"]
    [main] = example_pod()["containers"]
    if checked != main["image"]:
        raise ValueError(f"{JOB}: the initContainer does not check the main container's image")
    [mount] = init["volumeMounts"]
    return Container(
        image,
        args=(*options, *extra_args, reference),
        secrets={mount["mountPath"]: secret},
        volumes=volumes or {},
        memory_limit=quantity(init["resources"]["limits"]["memory"]),
        user=(context["runAsUser"], context["runAsGroup"]),
    )
