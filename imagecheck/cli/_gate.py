"""``imagecheck gate``: the scheduling-gate controller and its mutating webhook. Options ->
one pass (``cluster/_gate_pass.py``, ``--once``) or the controller with ``POST /mutate``
(``cli/_gate_run.py``) -> a line per gated pod acted on."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from imagecheck.cli._app import run_async
from imagecheck.cli._controller import (
    CHECK_DEADLINE,
    METRICS_LISTEN,
    cluster_factory,
    cluster_options,
    lease_options,
    lines_options,
)
from imagecheck.cli._gatekeeper import gatekeeper_for
from imagecheck.cli._help import exit_codes_help
from imagecheck.cli._listen import listen_options, tls_pair
from imagecheck.cli._options import registry_options, stacked
from imagecheck.cli._settings import CheckSettings, require_credentials_host, with_settings
from imagecheck.cli._types import Seconds, listen_address
from imagecheck.exitcodes import ExitCode

if TYPE_CHECKING:  # the cluster modules load when gate runs, not for `check`
    from imagecheck.cluster._gate import GateOptions, GateOutcome

GATE_HELP = exit_codes_help(
    {
        ExitCode.OK: "the pass ran, or the controller stopped on SIGTERM/SIGINT",
        ExitCode.USAGE: "usage error (an option, a credential source, the address)",
        ExitCode.ERROR: "the Kubernetes API refused (the message names the RBAC verb and "
        "resource) or failed",
    },
    codes=(ExitCode.OK, ExitCode.USAGE, ExitCode.ERROR, ExitCode.INTERRUPTED),
    precedence=False,
)
DURATION_RANGE = (0.0, 7 * 86400.0)


@click.command(epilog=GATE_HELP)
@click.option(
    "--once",
    is_flag=True,
    help="One pass over the gated pods, then exit. Without it: serve POST /mutate "
    "(adds the gate to new pods) and run the controller that lifts it.",
)
@listen_options(
    "Without --once: where POST /mutate is served.",
    "Serve /mutate over plain HTTP (tests only: the API server calls webhooks over HTTPS).",
)
@stacked(
    METRICS_LISTEN,
    *lease_options("imagecheck-gate", acts="lift gates"),
    *cluster_options(
        "Without --once: the time between full lists (the watch carries changes between)."
    ),
)
@click.option(
    "-n",
    "--namespace",
    "namespaces",
    multiple=True,
    metavar="NS",
    help="Only pods in this namespace (repeatable) [default: all]: the webhook gates "
    "only these, the controller lifts only these.",
)
@click.option("-l", "--selector", metavar="LABELS", help="Only pods with these labels (a=b,c=d).")
@click.option(
    "--wait",
    "gate_wait",
    type=Seconds(*DURATION_RANGE),
    default=120.0,
    show_default="2m",
    metavar="DURATION",
    help="How long (from the pod's creation) a missing image is waited for (a tag "
    "being pushed) before its Job is failed.",
)
@click.option(
    "--on-error",
    "gate_on_error",
    type=click.Choice(["pass", "fail"]),
    default="pass",
    show_default=True,
    help="A denial or a failing registry: pass lifts the gate (the kubelet tries "
    "with its own credentials); fail keeps it.",
)
@click.option(
    "--max-gate-age",
    type=Seconds(1.0, 7 * 86400.0),
    default=900.0,
    show_default="15m",
    metavar="DURATION",
    help="A pod gated this long is released with a Warning Event, whatever the registry says.",
)
@lines_options("Say what would be done; write nothing.", "pod")
@registry_options
@with_settings
def gate(
    once: bool,
    listen: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    insecure_http: bool,
    metrics_listen: str | None,
    leader_elect: bool | None,
    lease_name: str,
    lease_namespace: str | None,
    kubeconfig: str | None,
    context: str | None,
    resync: float,
    namespaces: tuple[str, ...],
    selector: str | None,
    gate_wait: float,
    gate_on_error: Any,
    max_gate_age: float,
    dry_run: bool,
    output: str,
    settings: CheckSettings,
) -> None:
    """Keep pods from being scheduled until their images are proven to exist.

    A mutating webhook (POST /mutate) adds the scheduling gate imagecheck.io/images to new
    pods while this controller is ready; the controller checks each gated pod's images with
    its pull secrets and lifts only its own gate when they are all found. A missing image is
    waited for (--wait), then fails the pod's Job (the pod never ran, nothing was reserved);
    a pod of another owner stays gated, with a Warning Event, until the image appears.
    """
    from imagecheck.cluster import Selector  # noqa: PLC0415
    from imagecheck.cluster._gate import GateOptions  # noqa: PLC0415

    require_credentials_host(settings, "gate")
    wanted = frozenset(namespaces) or None
    options = GateOptions(
        wait=gate_wait,
        on_error=gate_on_error,
        max_gate_age=max_gate_age,
        dry_run=dry_run,
        selector=Selector(namespaces[0] if len(namespaces) == 1 else None, selector),
        namespaces=wanted,
        deadline=CHECK_DEADLINE,
    )
    factory = cluster_factory(kubeconfig, context, "gate")
    echo = _echo_json if output == "json" else _echo_text
    if once:
        run_async(_once(factory, options, settings, echo))
        return
    from imagecheck.cli._gate_run import RunOptions, main  # noqa: PLC0415

    tls = tls_pair("gate", tls_cert, tls_key, insecure_http)
    run = RunOptions(
        listen=listen_address(listen),
        tls=tls,
        metrics=listen_address(metrics_listen, "--metrics-listen") if metrics_listen else None,
        lease=(lease_name, lease_namespace) if leader_elect is not False else None,
        resync=resync,
    )
    run_async(main(factory, options, settings, echo, run))


async def _once(
    factory: Callable[[], Any],
    options: GateOptions,
    settings: CheckSettings,
    echo: Callable[[GateOutcome], None],
) -> None:
    cluster = await factory()
    try:
        async with gatekeeper_for(cluster, options, settings) as keeper:
            for outcome in await keeper.run_once():
                echo(outcome)
    finally:
        await cluster.close()


def _echo_text(outcome: GateOutcome) -> None:
    click.echo(outcome.text())


def _echo_json(outcome: GateOutcome) -> None:
    click.echo(json.dumps(outcome.to_dict(), sort_keys=True))
