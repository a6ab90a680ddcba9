"""What the cluster controllers (``reap``, ``gate``, ``kueue-check``) share on the command
line: how to reach the cluster, the loop's resync, leader election and where metrics are
served; and the run of a loop alone or behind leader election."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import click

from imagecheck.cli._options import Decorator, stacked
from imagecheck.cli._types import Seconds
from imagecheck.errors import UsageError

if TYPE_CHECKING:
    from imagecheck.cluster import Cluster, Elector
    from imagecheck.cluster._model import ClusterError

RESYNC_RANGE = (1.0, 86400.0)
CHECK_DEADLINE = 60.0  # seconds for one image's check, retries included
# Tests (and embedders) may hand the command a ready Cluster: ctx.obj = {CLUSTER: factory}.
CLUSTER = "imagecheck.cluster"


def lease_options(lease_name: str, acts: str = "act") -> list[Decorator]:
    """``--leader-elect`` (default None: on), ``--lease-name`` (default ``lease_name``),
    ``--lease-namespace``; ``acts``: what only the leader does."""
    return [
        click.option("--leader-elect/--no-leader-elect", default=None,
                     help=f"Without --once: {acts} only while holding a Lease, so that of "
                     "several replicas one acts [default: on]."),
        click.option("--lease-name", default=lease_name, show_default=True,
                     help="The Lease's name."),
        click.option("--lease-namespace", metavar="NS",
                     help="The Lease's namespace [default: the pod's: $POD_NAMESPACE, else "
                     "its service account's]."),
    ]  # fmt: skip


METRICS_LISTEN = click.option(
    "--metrics-listen",
    metavar="HOST:PORT",
    help="Without --once: serve /metrics (Prometheus) and /healthz here.",
)


def lines_options(dry_run_help: str, line: str) -> Decorator:
    """``--dry-run`` and ``-o/--output`` (text: a line per ``line``; json: an object per line)."""
    return stacked(
        click.option("--dry-run", is_flag=True, help=dry_run_help),
        click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text",
                     show_default=True, help=f"text: a line per {line}; json: an object per line."),
    )  # fmt: skip


def cluster_options(resync_help: str) -> list[Decorator]:
    """``--kubeconfig``, ``--context``, ``--resync``."""
    return [
        click.option("--kubeconfig", metavar="PATH",
                     help="kubeconfig file [default: in-cluster, else $KUBECONFIG, "
                     "~/.kube/config]."),
        click.option("--context", metavar="NAME",
                     help="kubeconfig context [default: its current one]."),
        click.option("--resync", type=Seconds(*RESYNC_RANGE), default=60.0,
                     show_default="1m", metavar="DURATION", help=resync_help),
    ]  # fmt: skip


def controller_options(lease_name: str, resync_help: str) -> Decorator:
    """:func:`lease_options`, ``--metrics-listen``, :func:`cluster_options`, in that order."""

    return stacked(*lease_options(lease_name), METRICS_LISTEN, *cluster_options(resync_help))


def cluster_factory(kubeconfig: str | None, context: str | None, command: str) -> Callable[[], Any]:
    """How to reach the cluster: what ``ctx.obj`` offers (tests), else the Kubernetes API
    through the ``cluster`` extra."""
    ctx = click.get_current_context()
    if isinstance(ctx.obj, Mapping) and CLUSTER in ctx.obj:
        return ctx.obj[CLUSTER]  # type: ignore[no-any-return]

    async def connect() -> Any:
        try:
            # Absent without the cluster extra (lightkube).
            from imagecheck.cluster import KubeCluster  # noqa: PLC0415
        except ImportError:
            raise UsageError(
                f"{command} needs the cluster extra: pip install 'imagecheck[cluster]'"
            ) from None
        return await KubeCluster.connect(kubeconfig=kubeconfig, context=context)

    return connect


class LeaderHooks(Protocol):
    """What a controller's metrics hear from leader election."""

    def leading(self, leading: bool) -> None: ...

    def beat(self) -> None: ...

    def api_error(self, error: Exception) -> None: ...


def elector_for(
    cluster: Cluster, lease: tuple[str, str | None] | None, hooks: LeaderHooks | None
) -> Elector | None:
    """The Lease's elector (name, namespace: the pod's when None); None without a lease."""
    from imagecheck.cluster import Elector, LeaseConfig, identity, own_namespace  # noqa: PLC0415

    if lease is None:
        return None
    config = LeaseConfig(lease[0], lease[1] or own_namespace(), identity())
    on_error: Callable[[ClusterError], None] | None = hooks.api_error if hooks else None
    return Elector(
        cluster,
        config,
        on_change=hooks.leading if hooks else None,
        on_round=hooks.beat if hooks else None,
        on_error=on_error,
    )


async def elected(
    cluster: Cluster,
    lease: tuple[str, str | None] | None,
    hooks: LeaderHooks | None,
    work: Callable[[], Coroutine[Any, Any, None]],
) -> None:
    """``work`` alone (``lease`` None), or while holding the Lease."""
    elector = elector_for(cluster, lease, hooks)
    await (elector.run(work) if elector is not None else work())
