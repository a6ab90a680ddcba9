"""``imagecheck check``: the initContainer's command."""

from __future__ import annotations

from typing import Any

import click

from imagecheck.cli._app import (
    EXIT_CODES_HELP,
    EXIT_ERROR,
    cli,
    fail,
    run_async,
)
from imagecheck.cli._options import (
    CheckSettings,
    build_keychain,
    check_all,
    check_options,
    finish,
    parse_all,
    start_run,
    write_termination_log,
)
from imagecheck.errors import RegistryError, UsageError
from imagecheck.kube import InCluster, KubeClient
from imagecheck.result import Status


@cli.command(epilog=EXIT_CODES_HELP)
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
    settings, client_options, wait = start_run(options)
    pod_secrets: list[tuple[str, str]] = []
    if from_pod:
        pod_images, pod_secrets = read_pod(self_container, use_pod_pull_secrets, settings)
        images = (*images, *(i for i in pod_images if i not in images))
    elif use_pod_pull_secrets:
        fail("--use-pod-pull-secrets goes with --from-pod")
    if not images:
        fail("no IMAGE to check (name some, or use --from-pod)")
    parsed = parse_all(images)
    invalid = [r for r in parsed if r.status is Status.INVALID]
    if invalid:
        # Nothing is sent anywhere when any reference is invalid (exit 2).
        finish(invalid, output, settings)
    keychain = build_keychain(settings, pod_secrets)
    items = [(r.image, r.reference) for r in parsed if r.reference is not None]
    results = run_async(check_all(client_options, keychain, items, settings.deadline, wait))
    finish(results, output, settings)


def read_pod(
    self_container: str, with_secrets: bool, settings: CheckSettings
) -> tuple[list[str], list[tuple[str, str]]]:
    """The pod's other images and, if asked, its pull secrets' JSON, from the API."""
    try:
        cluster = InCluster.from_env()
        with KubeClient(cluster, timeout=settings.timeout) as kube:
            pod = kube.pod_images(self_container)
            secrets = [
                (kube.pull_secret_json(name), f"secret {cluster.namespace}/{name}")
                for name in (pod.pull_secret_names if with_secrets else [])
            ]
    except UsageError as exc:
        fail(str(exc))
    except RegistryError as exc:
        write_termination_log(settings.termination_log, f"imagecheck: {exc}")
        fail(str(exc), EXIT_ERROR)
    return pod.images, secrets
