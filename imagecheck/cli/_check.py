"""``imagecheck check``: the initContainer's command."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import click

from imagecheck._files import read_regular_file, size_text
from imagecheck.cli._help import EXIT_CODES_HELP
from imagecheck.cli._options import check_options
from imagecheck.cli._run import check_images, conclude
from imagecheck.cli._settings import CheckSettings, with_settings
from imagecheck.cli._termination import write_termination_log
from imagecheck.errors import RegistryError, UsageError

# --from-file: a valid reference is at most ~520 characters (a 255-character name, a tag, a
# digest); scan allows 4096 as written (scanning.MAX_IMAGE_LENGTH), and so does this. A longer
# line is a mistake (a binary file, a pasted log), not an image.
MAX_IMAGE_LINE = 4096
# The whole file (it is read whole): 64 MiB is about 1.5 million references of 40 characters.
MAX_IMAGE_FILE = 64 * 1024 * 1024


@click.command(epilog=EXIT_CODES_HELP)
@click.argument("images", nargs=-1)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format (json: an array in input order, one object per image).",
)
@click.option(
    "--from-file",
    metavar="FILE",
    help="Also check the images listed in FILE (- for standard input): one per line; blank "
    "lines and lines starting with # are skipped.",
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
@with_settings
def check(
    images: tuple[str, ...],
    output: str,
    from_file: str | None,
    from_pod: bool,
    use_pod_pull_secrets: bool,
    self_container: str,
    settings: CheckSettings,
) -> None:
    """Check that each IMAGE exists in its registry.

    IMAGE is a reference such as busybox:1.36, ghcr.io/org/app:1.0.0 or
    registry.example.com:5000/team/app@sha256:<digest>.

    With --from-file, the images listed in FILE are checked too, after the IMAGE
    arguments.

    Credentials, first match wins: --username/--password-stdin, pull secrets,
    DOCKER_AUTH_CONFIG, Docker's config.json (with its credential helpers), podman's
    auth.json, anonymous.
    """
    if from_file is not None:
        if from_file == "-" and settings.password_stdin:
            raise UsageError("--from-file - and --password-stdin both read standard input")
        images = (*images, *read_image_file(from_file))
    pod_secrets: list[tuple[str, str]] = []
    if from_pod:
        pod_images, pod_secrets = read_pod(self_container, use_pod_pull_secrets, settings)
        images = (*images, *(i for i in pod_images if i not in images))
    elif use_pod_pull_secrets:
        raise UsageError("--use-pod-pull-secrets goes with --from-pod")
    if not images:
        raise UsageError("no IMAGE to check (name some, or use --from-file or --from-pod)")
    results = check_images(images, settings, pod_pull_secrets=pod_secrets)
    conclude(results, settings, output=output)


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


def read_image_file(name: str) -> list[str]:
    """The images listed in ``--from-file NAME`` (``-``: standard input), in order: one per
    line, surrounding whitespace dropped, blank lines and ``#`` comment lines skipped.

    A :class:`UsageError` (exit 2) when the file is missing, not a regular file (a FIFO would
    block on open: ``files.py`` refuses it), larger than ``MAX_IMAGE_FILE``, or has a line
    longer than ``MAX_IMAGE_LINE`` bytes or not in UTF-8."""
    if name == "-":
        if sys.stdin is None:  # started with standard input closed
            raise UsageError("cannot use --from-file -: there is no standard input")
        data = sys.stdin.buffer.read(MAX_IMAGE_FILE + 1)
        if len(data) > MAX_IMAGE_FILE:
            raise UsageError(f"cannot use --from-file -: larger than {size_text(MAX_IMAGE_FILE)}")
    else:
        data = read_regular_file(
            Path(name), limit=MAX_IMAGE_FILE, what="--from-file", error=UsageError
        )
    where = "standard input" if name == "-" else name
    images: list[str] = []
    for number, raw in enumerate(io.BytesIO(data), 1):  # a line at a time, split at b"\n"
        line = raw.strip()
        if len(line) > MAX_IMAGE_LINE:
            raise UsageError(
                f"--from-file {where}, line {number}: longer than {MAX_IMAGE_LINE} bytes, "
                "not an image reference"
            )
        if line and not line.startswith(b"#"):
            images.append(_decoded(line, where, number))
    return images


def _decoded(line: bytes, where: str, number: int) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--from-file {where}, line {number}: not UTF-8 text") from None
