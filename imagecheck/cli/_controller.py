"""What the cluster controllers (``reap``, ``kueue-check``) share on the command line: how to
reach the cluster, the loop's resync, leader election and where metrics are served; and the
run of a loop alone or behind leader election."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

import click

from imagecheck.cli._options import Command, Decorator, apply_options
from imagecheck.cli._types import Seconds

if TYPE_CHECKING:
    from imagecheck.cluster import Cluster
    from imagecheck.cluster._model import ClusterError

RESYNC_RANGE = (1.0, 86400.0)


def controller_options(lease_name: str, resync_help: str) -> Decorator:
    """``--leader-elect``, ``--lease-name`` (default ``lease_name``), ``--lease-namespace``,
    ``--metrics-listen``, ``--kubeconfig``, ``--context``, ``--resync``."""

    def apply(command: Command) -> Command:
        return apply_options(command, [
            click.option("--leader-elect/--no-leader-elect", default=None,
                         help="Without --once: act only while holding a Lease, so that of "
                         "several replicas one acts [default: on]."),
            click.option("--lease-name", default=lease_name, show_default=True,
                         help="The Lease's name."),
            click.option("--lease-namespace", metavar="NS",
                         help="The Lease's namespace [default: the pod's: $POD_NAMESPACE, else "
                         "its service account's]."),
            click.option("--metrics-listen", metavar="HOST:PORT",
                         help="Without --once: serve /metrics (Prometheus) and /healthz here."),
            click.option("--kubeconfig", metavar="PATH",
                         help="kubeconfig file [default: in-cluster, else $KUBECONFIG, "
                         "~/.kube/config]."),
            click.option("--context", metavar="NAME",
                         help="kubeconfig context [default: its current one]."),
            click.option("--resync", type=Seconds(*RESYNC_RANGE), default=60.0,
                         show_default="1m", metavar="DURATION", help=resync_help),
        ])  # fmt: skip

    return apply


class LeaderHooks(Protocol):
    """What a controller's metrics hear from leader election."""

    def leading(self, leading: bool) -> None: ...

    def beat(self) -> None: ...

    def api_error(self, error: Exception) -> None: ...


async def elected(
    cluster: Cluster,
    lease: tuple[str, str | None] | None,
    hooks: LeaderHooks | None,
    work: Callable[[], Coroutine[Any, Any, None]],
) -> None:
    """``work`` alone (``lease`` None), or while holding the Lease (name, namespace: the
    pod's when None)."""
    from imagecheck.cluster import Elector, LeaseConfig, identity, own_namespace  # noqa: PLC0415

    if lease is None:
        await work()
        return
    config = LeaseConfig(lease[0], lease[1] or own_namespace(), identity())
    on_error: Callable[[ClusterError], None] | None = hooks.api_error if hooks else None
    elector = Elector(
        cluster,
        config,
        on_change=hooks.leading if hooks else None,
        on_round=hooks.beat if hooks else None,
        on_error=on_error,
    )
    await elector.run(work)
