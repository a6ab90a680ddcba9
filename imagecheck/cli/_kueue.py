"""``imagecheck kueue-check``: the controller of Kueue AdmissionChecks that hold a Workload
until its images are found. Options -> one pass or the loop (``cluster/_kueue_*.py``) -> a
line per check set -> exit."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from imagecheck.cli._app import run_async
from imagecheck.cli._controller import (
    CHECK_DEADLINE,
    cluster_factory,
    controller_options,
    elected,
    lines_options,
)
from imagecheck.cli._credentials import read_credentials
from imagecheck.cli._help import exit_codes_help
from imagecheck.cli._options import registry_options
from imagecheck.cli._settings import CheckSettings, require_credentials_host, with_settings
from imagecheck.cli._types import Seconds, listen_address
from imagecheck.errors import UsageError
from imagecheck.exitcodes import ExitCode

if TYPE_CHECKING:  # the cluster modules load when the command runs, not for `check`
    from imagecheck.authn import Keychain
    from imagecheck.cluster._kueue_loop import KueueMetrics
    from imagecheck.cluster._kueue_pass import KueueChecker, KueueOptions, Outcome

KUEUE_HELP = exit_codes_help(
    {
        ExitCode.OK: "the pass ran (whatever it found: each check set is a line of output)",
        ExitCode.USAGE: "usage error (an option, a credential source)",
        ExitCode.ERROR: "the Kubernetes API refused (the message names the RBAC verb and "
        "resource) or failed",
    },
    codes=(ExitCode.OK, ExitCode.USAGE, ExitCode.ERROR, ExitCode.INTERRUPTED),
    precedence=False,
)
WAIT_RANGE = (0.0, 7 * 86400.0)


@click.command("kueue-check", epilog=KUEUE_HELP)
@click.option("--once", is_flag=True, help="One pass over the Workloads, then exit.")
@click.option(
    "--controller-name",
    default="imagecheck.io/images",
    show_default=True,
    help="The spec.controllerName of the AdmissionChecks to serve.",
)
@click.option(
    "--wait",
    type=Seconds(*WAIT_RANGE),
    default=600.0,
    show_default="10m",
    metavar="DURATION",
    help="How long a missing image is waited for (check state Retry, checked again on a "
    "backoff) before the Workload is Rejected; from the check's first look.",
)
@click.option(
    "--on-error",
    type=click.Choice(["pass", "fail"]),
    default="pass",
    show_default=True,
    help="A registry that denies or cannot be reached: pass (Ready: the kubelet tries) or "
    "fail (as missing: Retry, then Rejected).",
)
@controller_options("imagecheck-kueue", "Without --once: the time between full lists.")
@click.option("-n", "--namespace", metavar="NS", help="Only this namespace's Workloads.")
@lines_options("Say what would be set; write nothing.", "check judged")
@registry_options
@with_settings
def kueue_check(
    once: bool,
    controller_name: str,
    leader_elect: bool | None,
    lease_name: str,
    lease_namespace: str | None,
    metrics_listen: str | None,
    kubeconfig: str | None,
    context: str | None,
    resync: float,
    namespace: str | None,
    dry_run: bool,
    output: str,
    settings: CheckSettings,
) -> None:
    """Hold Kueue Workloads until their images are found in their registries.

    For each Workload whose status lists an AdmissionCheck of this controller (Pending or
    Retry), the images of every pod set are checked with the pods' pull secrets (else their
    ServiceAccount's) and this process's credentials. The check becomes Ready when all are
    found, Retry while one is missing within --wait, and Rejected after it (Kueue then
    deactivates the Workload: no pod is created). The AdmissionChecks are kept Active.
    """
    from imagecheck.cluster._kueue import OnError  # noqa: PLC0415
    from imagecheck.cluster._kueue_pass import KueueOptions  # noqa: PLC0415

    require_credentials_host(settings, "kueue-check")
    # --wait and --on-error are the run options' names, so they arrive in ``settings``.
    options = KueueOptions(
        controller_name=controller_name,
        wait=settings.wait if settings.wait is not None else 600.0,
        on_error=OnError(settings.on_error),
        dry_run=dry_run,
        namespace=namespace,
        deadline=CHECK_DEADLINE,
    )
    if once and (leader_elect or metrics_listen):
        raise UsageError("--leader-elect and --metrics-listen are for the loop, not --once")
    listen = listen_address(metrics_listen, "--metrics-listen") if metrics_listen else None
    lease = (lease_name, lease_namespace) if leader_elect is not False and not once else None
    factory = cluster_factory(kubeconfig, context, "kueue-check")
    echo = _echo_json if output == "json" else _echo_text
    run_async(_main(factory, options, settings, echo, None if once else (resync, lease, listen)))


async def _main(
    factory: Callable[[], Any],
    options: KueueOptions,
    settings: CheckSettings,
    echo: Callable[[Outcome], None],
    loop: tuple[float, tuple[str, str | None] | None, tuple[str, int] | None] | None,
) -> None:
    cluster = await factory()
    try:
        async with checker_for(cluster, options, settings) as judge:
            if loop is None:
                for outcome in await judge.run_once():
                    echo(outcome)
            else:
                await _controller(judge, echo, *loop)
    finally:
        await cluster.close()


@contextlib.asynccontextmanager
async def checker_for(
    cluster: Any, options: KueueOptions, settings: CheckSettings
) -> AsyncIterator[KueueChecker]:
    """A KueueChecker with the command's registry settings: the pod sets' pull secrets
    first, then what the command was given."""
    from imagecheck.cluster._kueue_pass import KueueChecker  # noqa: PLC0415
    from imagecheck.registry import ImageChecker  # noqa: PLC0415

    credentials = read_credentials(settings)

    def keychain_for(texts: Sequence[tuple[str, str]]) -> Keychain:
        return settings.keychain(credentials, texts)

    async with ImageChecker(settings.client_options(), settings.keychain(credentials)) as checker:
        yield KueueChecker(cluster, checker, options, keychain_for=keychain_for)


async def _controller(
    judge: KueueChecker,
    echo: Callable[[Outcome], None],
    resync: float,
    lease: tuple[str, str | None] | None,
    listen: tuple[str, int] | None,
) -> None:
    """The loop, behind leader election, with /metrics and /healthz when asked for."""
    from imagecheck.cluster._kueue_loop import KueueLoop, KueueMetrics  # noqa: PLC0415
    from imagecheck.cluster._reap_metrics import serve  # noqa: PLC0415

    metrics: KueueMetrics | None = None
    runner = None
    if listen is not None:
        metrics = KueueMetrics(stale_after=3 * resync + 30)
        try:
            runner = await serve(metrics, *listen)
        except OSError as exc:
            raise UsageError(f"cannot serve metrics on {listen[0]}:{listen[1]}: {exc}") from None
    try:

        async def work() -> None:
            await KueueLoop(judge, resync, echo, metrics=metrics).run()

        await elected(judge.cluster, lease, metrics, work)
    finally:
        if runner is not None:
            await runner.cleanup()


def _echo_text(outcome: Outcome) -> None:
    click.echo(outcome.text())


def _echo_json(outcome: Outcome) -> None:
    click.echo(json.dumps(outcome.to_dict(), sort_keys=True))
