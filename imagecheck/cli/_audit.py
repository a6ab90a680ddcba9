"""``imagecheck audit``: every workload's images in a cluster, checked (issue #15)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from imagecheck.cli._app import EXIT_CODES_HELP, run_async
from imagecheck.cli._options import (
    CheckSettings,
    conclude,
    explain_all,
    read_credentials,
    registry_options,
    require_credentials_host,
    run_options,
    start_run,
)
from imagecheck.cluster.audit import AuditReport, parse_kind
from imagecheck.cluster.audit import audit as run_audit
from imagecheck.cluster.model import Cluster, Selector
from imagecheck.cluster.render import RENDERERS
from imagecheck.errors import UsageError
from imagecheck.run import client_options, keychain

AUDIT_EXIT_CODES_HELP = EXIT_CODES_HELP.replace(
    "registry unreachable, failing after retries, or deadline exceeded",
    "registry unreachable, failing after retries, or deadline exceeded; the Kubernetes API "
    "unreachable or refusing a list (403: the RBAC rule is named)",
)


@click.command(epilog=AUDIT_EXIT_CODES_HELP)
@click.option("-n", "--namespace", help="Only this namespace [default: every namespace].")
@click.option(
    "-l",
    "--selector",
    "labels",
    metavar="LABELS",
    help="Only workloads with these labels (app=web,tier=front).",
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    metavar="PLURAL.GROUP/VERSION",
    help="Also list this custom resource (rayclusters.ray.io/v1); repeatable. Its "
    "pods are then left to it.",
)
@click.option(
    "--kubeconfig",
    metavar="PATH",
    help="kubeconfig file [default: in-cluster, then $KUBECONFIG, ~/.kube/config].",
)
@click.option("--context", help="kubeconfig context [default: its current-context].")
@click.option(
    "--no-pull-secrets",
    "no_pull_secrets",
    is_flag=True,
    help="Do not read the workloads' imagePullSecrets (no RBAC on secrets needed); "
    "check with the local credentials only.",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    help="text: grouped by status with namespace/kind/name; json: every container "
    "with its result; github: workflow commands.",
)
@registry_options
@lambda command: run_options(command, wait=False)
def audit(**options: Any) -> None:
    """Check the images of every workload in a cluster: Deployments, StatefulSets, DaemonSets,
    CronJobs, Jobs and ReplicaSets without a listed owner, bare Pods (and custom resources
    named with --kind). Each distinct image is checked once, offering the pull secrets of
    every workload that uses it, then the local credentials. Needs the cluster extra."""
    own = {k: options.pop(k) for k in ("namespace", "labels", "kinds", "kubeconfig", "context",
                                        "no_pull_secrets", "output")}  # fmt: skip
    settings = start_run(options)
    require_credentials_host(settings, "audit")
    selector = Selector(namespace=own["namespace"], labels=own["labels"])
    kinds = [parse_kind(text) for text in own["kinds"]]
    report = run_async(
        audit_cluster(settings, selector, kinds, not own["no_pull_secrets"],
                      own["kubeconfig"], own["context"])
    )  # fmt: skip
    results = dict(zip(report.results, explain_all(report.results.values()), strict=True))
    text = RENDERERS[own["output"]](report.uses, results)
    if text:
        click.echo(text)
    conclude(list(results.values()), settings)


async def audit_cluster(
    settings: CheckSettings,
    selector: Selector,
    kinds: Sequence[Any],
    secrets: bool,
    kubeconfig: str | None,
    context: str | None,
) -> AuditReport:
    """Connect (the cluster extra's client, loaded only here), then one audit."""
    try:
        # Absent without the cluster extra (lightkube).
        from imagecheck.cluster.api import KubeCluster  # noqa: PLC0415
    except ImportError:
        raise UsageError(
            "audit needs the cluster extra: pip install 'imagecheck[cluster]'"
        ) from None
    cluster = await KubeCluster.connect(kubeconfig=kubeconfig, context=context)
    try:
        return await audit_with(cluster, settings, selector, kinds, secrets)
    finally:
        await cluster.close()


async def audit_with(
    cluster: Cluster, settings: CheckSettings, selector: Selector, kinds: Sequence[Any],
    secrets: bool,
) -> AuditReport:  # fmt: skip
    """One audit of ``cluster`` with the command line's registry options and credentials."""
    base = keychain(**settings.sources(read_credentials(settings)))
    options = client_options(**settings.client_options())
    return await run_audit(
        cluster, selector, options, base, extra=kinds, secrets=secrets, deadline=settings.deadline
    )
