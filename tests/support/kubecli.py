"""Running ``imagecheck reap`` and ``imagecheck audit`` through click against the Kubernetes
API stand-in (``kube_api``) and the real registries: the command connects with the stand-in's
kubeconfig, as it would to a cluster (issue #15)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner, Result

from imagecheck.cli import cli
from tests.support.kubeapi import KubeAPI


def ago(seconds: float) -> str:
    """An RFC 3339 time ``seconds`` before now, as the API writes ``status.startTime``: the
    commands read the real clock, so the objects' times are set from it."""
    return (datetime.now(UTC) - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def invoke(kube_api: KubeAPI, ca_file: Path, home: Path, args: list[str]) -> Result:
    """``imagecheck COMMAND --kubeconfig K --ca-file CA ARGS`` with no credential source
    but what the test gives (an empty docker config, no auth file)."""
    command, *rest = args
    empty = home / "empty"
    empty.mkdir(exist_ok=True)
    env: dict[str, str | None] = {
        "HOME": str(home),
        "DOCKER_CONFIG": str(empty),
        "XDG_RUNTIME_DIR": str(empty),
        "REGISTRY_AUTH_FILE": None,
        "DOCKER_AUTH_CONFIG": None,
        "KUBECONFIG": None,
        "IMAGECHECK_PULL_SECRETS": None,
        "IMAGECHECK_USERNAME": None,
        "IMAGECHECK_PASSWORD": None,
    }
    full = [command, "--kubeconfig", str(kube_api.kubeconfig), "--ca-file", str(ca_file), *rest]
    return CliRunner().invoke(cli, full, env=env)
