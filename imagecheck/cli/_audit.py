"""``imagecheck audit``: every workload's images in a cluster, checked."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

from imagecheck.cli._app import Terminated, run_async
from imagecheck.cli._credentials import read_credentials
from imagecheck.cli._help import exit_codes_help
from imagecheck.cli._logs import setup_json_logging
from imagecheck.cli._options import registry_options, report_output, run_options
from imagecheck.cli._run import conclude, explain_all
from imagecheck.cli._settings import CheckSettings, require_credentials_host, with_settings
from imagecheck.cli._types import Count, Seconds, listen_address
from imagecheck.cluster import (
    DEFAULT_INTERVAL,
    DEFAULT_LISTEN,
    DEFAULT_MAX_SERIES,
    MAX_INTERVAL,
    RENDERERS,
    AuditReport,
    Cluster,
    Selector,
    parse_kind,
)
from imagecheck.cluster import audit as run_audit
from imagecheck.errors import UsageError
from imagecheck.exitcodes import MEANINGS, ExitCode

AUDIT_EXIT_CODES_HELP = (
    exit_codes_help(
        {
            ExitCode.ERROR: f"{MEANINGS[ExitCode.ERROR]}; the Kubernetes API unreachable or "
            "refusing a list (403: the RBAC rule is named)"
        }
    )
    + "\nWith --serve: 0 stopped by SIGTERM/SIGINT; 2 usage error (options, kubeconfig, --listen)."
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
@report_output("namespace/kind/name", "container")
@click.option(
    "--serve",
    is_flag=True,
    help="Keep running: an audit every --interval (the first at once), the results served "
    "as Prometheus metrics on --listen (/metrics, /healthz, /readyz) in "
    "k8s-image-availability-exporter's names. Needs no --output.",
)
@click.option(
    "--interval",
    type=Seconds(1, MAX_INTERVAL),
    metavar="DURATION",
    help="With --serve: from one audit's start to the next [default: 5m].",
)
@click.option("--listen", metavar="HOST:PORT", help=f"With --serve: [default: {DEFAULT_LISTEN}].")
@click.option(
    "--max-series",
    type=Count(1, 10_000_000),
    help="With --serve: availability series exported at most (7 per workload container); "
    f"the found images are left out first, with a log line [default: {DEFAULT_MAX_SERIES}].",
)
@registry_options
@lambda command: run_options(command, wait=False)
@with_settings
def audit(
    namespace: str | None,
    labels: str | None,
    kinds: tuple[str, ...],
    kubeconfig: str | None,
    context: str | None,
    no_pull_secrets: bool,
    output: str,
    serve: bool,
    interval: float | None,
    listen: str | None,
    max_series: int | None,
    settings: CheckSettings,
) -> None:
    """Check the images of every workload in a cluster: Deployments, StatefulSets, DaemonSets,
    CronJobs, Jobs and ReplicaSets without a listed owner, bare Pods (and custom resources
    named with --kind). Each distinct image is checked once, offering the pull secrets of
    every workload that uses it, then the local credentials. Needs the cluster extra."""
    require_credentials_host(settings, "audit")
    selector = Selector(namespace=namespace, labels=labels)
    custom = [parse_kind(text) for text in kinds]
    how = Connection(selector, custom, not no_pull_secrets, kubeconfig, context)
    if serve:
        serve_audits(settings, how, interval, listen, max_series)
        return
    if any(value is not None for value in (interval, listen, max_series)):
        raise UsageError("--interval, --listen and --max-series go with --serve")
    report = run_async(audit_cluster(settings, how))
    results = dict(zip(report.results, explain_all(report.results.values()), strict=True))
    text = RENDERERS[output](report.uses, results)
    if text:
        click.echo(text)
    conclude(list(results.values()), settings)


@dataclass(frozen=True)
class Connection:
    """Which cluster, and what to audit in it."""

    selector: Selector
    kinds: Sequence[Any]
    secrets: bool
    kubeconfig: str | None
    context: str | None


def serve_audits(
    settings: CheckSettings,
    how: Connection,
    interval: float | None,
    listen: str | None,
    max_series: int | None,
) -> None:
    """``--serve``: audit every ``interval`` and serve the metrics, until SIGTERM (exit 0)."""
    try:  # the cluster extra: imported only here
        from imagecheck.cluster import _exporter as exporter  # noqa: PLC0415
        from imagecheck.cluster import _serve as serve  # noqa: PLC0415
        from imagecheck.webhook import JsonFormatter  # noqa: PLC0415
    except ImportError as exc:
        raise UsageError(
            f"audit --serve needs the cluster extra: pip install 'imagecheck[cluster]' ({exc.name})"
        ) from None
    host, port = listen_address(listen or DEFAULT_LISTEN)
    setup_json_logging(JsonFormatter(), settings.verbose)
    metrics = exporter.AuditMetrics(max_series or DEFAULT_MAX_SERIES)
    where = serve.ServeSettings(host, port, interval or DEFAULT_INTERVAL)
    try:
        run_async(_serve(settings, how, metrics, where))
    except (Terminated, KeyboardInterrupt):
        sys.exit(0)  # the way a Deployment's pod is stopped
    except OSError as exc:  # the address: the OS's words
        raise UsageError(f"cannot serve on {host}:{port}: {exc}") from None


async def _serve(settings: CheckSettings, how: Connection, metrics: Any, where: Any) -> None:
    from imagecheck.cluster import Auditor, KubeCluster  # noqa: PLC0415
    from imagecheck.cluster._serve import serve  # noqa: PLC0415

    cluster = await KubeCluster.connect(kubeconfig=how.kubeconfig, context=how.context)
    # Read once: --password-stdin cannot be read at every audit.
    base = settings.keychain(read_credentials(settings))
    options = settings.client_options()

    async def once() -> AuditReport:
        return await run_audit(cluster, how.selector, options, base, extra=how.kinds,
                               secrets=how.secrets, deadline=settings.deadline)  # fmt: skip

    try:
        await serve(where, Auditor(once, metrics))
    finally:
        await cluster.close()


async def audit_cluster(settings: CheckSettings, how: Connection) -> AuditReport:
    """Connect (the cluster extra's client, loaded only here), then one audit."""
    try:
        # Absent without the cluster extra (lightkube).
        from imagecheck.cluster import KubeCluster  # noqa: PLC0415
    except ImportError:
        raise UsageError(
            "audit needs the cluster extra: pip install 'imagecheck[cluster]'"
        ) from None
    cluster = await KubeCluster.connect(kubeconfig=how.kubeconfig, context=how.context)
    try:
        return await audit_with(cluster, settings, how)
    finally:
        await cluster.close()


async def audit_with(cluster: Cluster, settings: CheckSettings, how: Connection) -> AuditReport:
    """One audit of ``cluster`` with the command line's registry options and credentials."""
    base = settings.keychain(read_credentials(settings))
    return await run_audit(
        cluster,
        how.selector,
        settings.client_options(),
        base,
        extra=how.kinds,
        secrets=how.secrets,
        deadline=settings.deadline,
    )
