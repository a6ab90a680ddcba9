"""``imagecheck check``: the initContainer's command."""

from __future__ import annotations

from typing import Any

import click

from imagecheck.cli._app import EXIT_CODES_HELP
from imagecheck.cli._options import (
    CheckSettings,
    check_options,
    check_valid,
    conclude,
    invalid_results,
    start_run,
    write_termination_log,
)
from imagecheck.errors import RegistryError, UsageError
from imagecheck.render import render_json, render_text


@click.command(epilog=EXIT_CODES_HELP)
@click.argument("images", nargs=-1)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format (json: an array in input order, see README).",
)
@click.option(
    "--from-pod",
    is_flag=True,
    help="Also check the images of this pod's other containers, read from the Kubernetes "
    "API (POD_NAME/POD_NAMESPACE from the Downward API; RBAC: get pods).",
)
@click.option(
    "--use-pod-pull-secrets",
    is_flag=True,
    help="With --from-pod: also use the pod's imagePullSecrets (RBAC: get those secrets).",
)
@click.option(
    "--self",
    "self_container",
    default="imagecheck",
    show_default=True,
    metavar="NAME",
    help="With --from-pod: the name of imagecheck's own container, which is skipped.",
)
@check_options
def check(
    images: tuple[str, ...],
    output: str,
    from_pod: bool,
    use_pod_pull_secrets: bool,
    self_container: str,
    **options: Any,
) -> None:
    """Check that each IMAGE exists in its registry.

    IMAGE is a reference such as busybox:1.36, ghcr.io/org/app:1.0.0 or
    registry.example.com:5000/team/app@sha256:<digest>.

    Credentials, first match wins: --username/--password-stdin, pull secrets,
    DOCKER_AUTH_CONFIG, Docker's config.json (with its credential helpers), podman's
    auth.json, anonymous.
    """
    settings = start_run(options)
    pod_secrets: list[tuple[str, str]] = []
    if from_pod:
        pod_images, pod_secrets = read_pod(self_container, use_pod_pull_secrets, settings)
        images = (*images, *(i for i in pod_images if i not in images))
    elif use_pod_pull_secrets:
        raise UsageError("--use-pod-pull-secrets goes with --from-pod")
    if not images:
        raise UsageError("no IMAGE to check (name some, or use --from-pod)")
    # Nothing is sent anywhere when any reference is invalid (exit 2); and nothing read, not
    # even the password on standard input.
    results = invalid_results(images)
    if not results:
        results = check_valid(images, settings, pod_pull_secrets=pod_secrets)
    click.echo(render_json(results) if output == "json" else render_text(results))
    conclude(results, settings)


def read_pod(
    self_container: str, with_secrets: bool, settings: CheckSettings
) -> tuple[list[str], list[tuple[str, str]]]:
    """The pod's other images and, if asked, its pull secrets' JSON, from the API."""
    from imagecheck.kube import InCluster, KubeClient  # noqa: PLC0415 - --from-pod only

    try:
        cluster = InCluster.from_env()
        with KubeClient(cluster, timeout=settings.timeout) as kube:
            pod = kube.pod_images(self_container)
            secrets = [
                (kube.pull_secret_json(name), f"secret {cluster.namespace}/{name}")
                for name in (pod.pull_secret_names if with_secrets else [])
            ]
    except RegistryError as exc:  # the API server's trouble, for the pod's status too
        write_termination_log(settings.termination_log, f"imagecheck: {exc}")
        raise
    return pod.images, secrets
