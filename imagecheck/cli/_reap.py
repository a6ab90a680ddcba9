"""``imagecheck reap``: fail the Jobs whose pods wait on an image the registry says is missing.
Options -> one pass (``cluster/_reap_pass.py``) -> a line per stuck pod -> exit."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from imagecheck.cli._app import run_async
from imagecheck.cli._controller import (
    CHECK_DEADLINE,
    cluster_factory,
    controller_options,
    lines_options,
)
from imagecheck.cli._help import exit_codes_help
from imagecheck.cli._options import registry_options
from imagecheck.cli._reaper import reaper_for
from imagecheck.cli._settings import CheckSettings, require_credentials_host, with_settings
from imagecheck.cli._types import Seconds, listen_address
from imagecheck.errors import UsageError
from imagecheck.exitcodes import ExitCode
from imagecheck.result import Status

if TYPE_CHECKING:  # the cluster modules load when reap runs, not for `check`
    from imagecheck.cli import _reap_loop
    from imagecheck.cluster import Cluster, Outcome, ReapOptions

REAP_HELP = exit_codes_help(
    {
        ExitCode.OK: "the pass ran (whatever it found: each stuck pod is a line of output)",
        ExitCode.USAGE: "usage error (an option, a credential source)",
        ExitCode.ERROR: "the Kubernetes API refused (the message names the RBAC verb and "
        "resource) or failed;\nan Event that cannot be written is only a warning: the Job's "
        "imagecheck.io/reaped\nannotation, written by the patch that fails it, is the durable "
        "record",
    },
    codes=(ExitCode.OK, ExitCode.USAGE, ExitCode.ERROR, ExitCode.INTERRUPTED),
    precedence=False,
)

log = logging.getLogger("imagecheck")
VERDICTS = {s.value: s for s in (Status.MISSING, Status.INVALID, Status.DENIED, Status.ERROR)}
GRACE_RANGE = (0.0, 7 * 86400.0)


def act_on(text: str) -> frozenset[Status]:
    """``missing,denied`` as statuses; a :class:`UsageError` naming the choices otherwise."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in VERDICTS]
    if unknown or not names:
        raise UsageError(
            f"--act-on {text!r}: expected a comma-separated list of {', '.join(VERDICTS)}"
        )
    return frozenset(VERDICTS[n] for n in names)


@click.command(epilog=REAP_HELP)
@click.option(
    "--once",
    is_flag=True,
    help="One pass, then exit (for a CronJob). Without it: list, then watch the pods, "
    "acting on each as its grace ends, and list again every --resync (for a Deployment).",
)
@controller_options(
    "imagecheck-reap",
    "Without --once: the time between full lists (the watch carries changes between).",
)
@click.option("-n", "--namespace", metavar="NS", help="Only this namespace [default: all].")
@click.option("-l", "--selector", metavar="LABELS", help="Only pods with these labels (a=b,c=d).")
@click.option(
    "--grace",
    type=Seconds(*GRACE_RANGE),
    default=120.0,
    show_default="2m",
    metavar="DURATION",
    help="Leave pods stuck for less than this (from the pod's status.startTime): a "
    "tag being pushed right now gets time.",
)
@click.option(
    "--act-on",
    "act_on_text",
    default="missing,invalid",
    show_default=True,
    metavar="VERDICTS",
    help="Verdicts that fail a Job: missing, invalid, denied, error. denied and "
    "error may be imagecheck's lack of the node's credentials, or an outage.",
)
@click.option(
    "--include-pods",
    is_flag=True,
    help="Also delete stuck pods that no controller owns (bare pods).",
)
@lines_options("Say what would be done; write nothing.", "stuck pod")
@registry_options
@with_settings
def reap(
    once: bool,
    leader_elect: bool | None,
    lease_name: str,
    lease_namespace: str | None,
    metrics_listen: str | None,
    resync: float,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    selector: str | None,
    grace: float,
    act_on_text: str,
    include_pods: bool,
    dry_run: bool,
    output: str,
    settings: CheckSettings,
) -> None:
    """Fail the Jobs whose pods wait on an image the registry says does not exist.

    Pods waiting in ErrImagePull, ImagePullBackOff or InvalidImageName that belong to a Job
    (or a CronJob's Job) are checked against their registry, with their pull secrets when
    RBAC allows reading them; when the image is missing, the Job's activeDeadlineSeconds is
    set to its age, so the Job controller fails it (DeadlineExceeded) and deletes its pods.
    The reason goes on the Job (annotation imagecheck.io/reaped) and into Events
    (reason ImageMissing) on the Job and the pod. Pods of other owners are never touched.
    """
    from imagecheck.cluster import ReapOptions, Selector  # noqa: PLC0415

    require_credentials_host(settings, "reap")
    reap_options = ReapOptions(
        grace=grace,
        act_on=act_on(act_on_text),
        dry_run=dry_run,
        include_pods=include_pods,
        selector=Selector(namespace=namespace, labels=selector),
        deadline=CHECK_DEADLINE,
    )
    if once and (leader_elect or metrics_listen):
        raise UsageError("--leader-elect and --metrics-listen are for the loop, not --once")
    loop = None
    if not once:
        from imagecheck.cli import _reap_loop  # noqa: PLC0415

        listen = listen_address(metrics_listen, "--metrics-listen") if metrics_listen else None
        lease = (lease_name, lease_namespace) if leader_elect is not False else None
        loop = _reap_loop.LoopOptions(resync, lease, listen)
    factory = cluster_factory(kubeconfig, context, "reap")
    echo = _echo_json if output == "json" else _echo_text
    run_async(_main(factory, reap_options, settings, echo, loop))


async def _main(
    factory: Callable[[], Any],
    reap_options: ReapOptions,
    settings: CheckSettings,
    echo: Callable[[Outcome], None],
    loop: _reap_loop.LoopOptions | None,
) -> None:
    cluster = await factory()
    try:
        if loop is None:
            await reap_once(cluster, reap_options, settings, echo)
        else:
            from imagecheck.cli._reap_loop import controller  # noqa: PLC0415

            await controller(cluster, reap_options, settings, echo, loop)
    finally:
        await cluster.close()


async def reap_once(
    cluster: Cluster,
    reap_options: ReapOptions,
    settings: CheckSettings,
    echo: Callable[[Outcome], None],
) -> list[Outcome]:
    """One pass over ``cluster`` with the command's registry settings; each outcome echoed."""
    async with reaper_for(cluster, reap_options, settings) as reaper:
        outcomes = await reaper.run_once()
    for outcome in outcomes:
        echo(outcome)
    return outcomes


def _echo_text(outcome: Outcome) -> None:
    click.echo(outcome.text())


def _echo_json(outcome: Outcome) -> None:
    click.echo(json.dumps(outcome.to_dict(), sort_keys=True))
