"""The options commands share, as click declares them: how to reach registries and which
credentials to offer (:func:`registry_options`), how a one-off run ends (:func:`run_options`),
scan's and audit's ``--output``. What they say is one value: ``_settings.CheckSettings``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import click

from imagecheck.authn.cloud._keychain import CLOUD_AUTH_MODES
from imagecheck.cli._settings import DEFAULT_TERMINATION_LOG
from imagecheck.cli._types import Count, MirrorPair, PlatformChoice, RegistryHost, Seconds
from imagecheck.registry import ClientOptions
from imagecheck.run import (
    CONCURRENCY_RANGE,
    DEADLINE_RANGE,
    RETRIES_RANGE,
    TIMEOUT_RANGE,
    WAIT_RANGE,
)

# A command function, as click's decorators take and give it.
Command = Callable[..., None]
Decorator = Callable[[Command], Command]

DEFAULTS = ClientOptions()
# serve's cache lifetimes and reload interval: a week, far inside what timers can hold.
MAX_TTL = 7 * 86400


def report_output(located: str, items: str) -> Decorator:
    """``--output text|json|github`` of the commands that report images where they were found
    (scan, audit): ``located`` says where text output places them, ``items`` what JSON lists."""
    return click.option(
        "-o",
        "--output",
        type=click.Choice(["text", "json", "github"]),
        default="text",
        show_default=True,
        help=f"text: grouped by status with {located}; json: every {items} with its result; "
        "github: workflow commands that annotate a pull request or a job.",
    )


def apply_options(command: Command, options: Sequence[Decorator]) -> Command:
    for option in reversed(options):
        command = option(command)
    return command


def stacked(*options: Decorator) -> Decorator:
    """One decorator for ``options``, declared in the order ``--help`` lists them."""
    return lambda command: apply_options(command, options)


def registry_options(command: Command) -> Command:
    """How to reach registries and which credentials to offer: check, scan and serve."""
    options = [
        click.option("--concurrency", type=Count(*CONCURRENCY_RANGE),
                     default=DEFAULTS.concurrency, show_default=True,
                     help="Images checked at once."),
        click.option("--timeout", type=Seconds(*TIMEOUT_RANGE), default=DEFAULTS.timeout,
                     show_default=True,
                     help="Seconds allowed for one attempt (connect, auth, answer)."),
        click.option("--retries", type=Count(*RETRIES_RANGE), default=DEFAULTS.retries,
                     show_default=True,
                     help="Retries of a transient failure (connection errors, 408, 429, 5xx)."),
        click.option("--denied-as-missing", is_flag=True,
                     help="Count a denial after successful authentication as missing (exit 1): "
                     "for registries that deny what does not exist (Docker Hub, Artifactory)."),
        click.option("--platform", type=PlatformChoice(), metavar="OS/ARCH[/VARIANT]|auto",
                     help="Also require the image for this platform (an index must list it; a "
                     "single manifest's config must name it); auto: this machine's."),
        click.option("--deep", is_flag=True,
                     help="Also require the config and every layer blob of the platform's "
                     "manifest (--platform's, else this machine's): one HEAD per blob, so a "
                     "broken registry or a stale mirror is missing, the blob named."),
        click.option("--mirror", "mirrors", type=MirrorPair(), multiple=True,
                     metavar="SOURCE=MIRROR",
                     help="Ask MIRROR first for SOURCE's images, then SOURCE itself, as "
                     "containerd's hosts.toml mirrors (repeatable, in order)."),
        click.option("--hosts-dir", type=click.Path(file_okay=False, path_type=Path),
                     metavar="DIR",
                     help="The node's containerd registry configuration (its config_path, "
                     "e.g. /etc/containerd/certs.d): ask the hosts its hosts.toml files name, "
                     "in containerd's order, with their TLS settings, capabilities and paths."),
        click.option("--registries-conf", type=click.Path(dir_okay=False, path_type=Path),
                     metavar="FILE",
                     help="The node's registries.conf (CRI-O, podman): its mirrors, prefix "
                     "rewrites, blocked and insecure registries and short-name aliases, as "
                     "containers/image reads them."),
        click.option("--insecure-registry", "insecure", multiple=True, metavar="HOST[:PORT]",
                     help="Allow plain HTTP and unverified TLS for this registry, or "
                     "credentials over plain HTTP to this token realm host (repeatable)."),
        click.option("--ca-file", "ca_files", multiple=True,
                     type=click.Path(dir_okay=False, path_type=Path),
                     help="Extra PEM CA certificate(s) to trust (repeatable). "
                     "SSL_CERT_FILE is honoured too."),
        click.option("-u", "--username", envvar="IMAGECHECK_USERNAME",
                     help="Registry username [env: IMAGECHECK_USERNAME]."),
        click.option("--credentials-for", "credentials_for", type=RegistryHost(),
                     multiple=True, metavar="HOST",
                     help="Offer --username credentials only to this registry (repeatable). "
                     "check: default every registry it is asked about; scan and serve: "
                     "required, since files and reviews name the registries."),
        click.option("--password-stdin", is_flag=True,
                     help="Read the password (or token) from standard input "
                     "[else env: IMAGECHECK_PASSWORD]."),
        click.option("--docker-config", metavar="PATH",
                     help="Docker config.json, or the directory holding it "
                     "[default: $DOCKER_CONFIG/config.json, then ~/.docker/config.json]."),
        click.option("--pull-secret", "pull_secrets", multiple=True, metavar="PATH",
                     help="A mounted Kubernetes pull secret: a directory holding "
                     ".dockerconfigjson or .dockercfg, or the file itself (repeatable) "
                     "[env: IMAGECHECK_PULL_SECRETS]."),
        click.option("--image-credential-provider-config", metavar="PATH",
                     help="The kubelet's CredentialProviderConfig (a file, or a directory of "
                     "them): run its credential provider plugins as the kubelet does. Needs "
                     "--image-credential-provider-bin-dir."),
        click.option("--image-credential-provider-bin-dir", metavar="DIR",
                     help="Where the kubelet's credential provider plugins are (the kubelet's "
                     "flag of the same name)."),
        click.option("--cloud-auth", type=click.Choice(CLOUD_AUTH_MODES, case_sensitive=False),
                     default="auto",
                     envvar="IMAGECHECK_CLOUD_AUTH", show_default=True,
                     help="auto: for a registry of AWS ECR, Google Artifact/Container Registry "
                     "or Azure ACR, when no other credential matched, get one from this "
                     "process's cloud identity (EKS Pod Identity or IRSA, GKE Workload "
                     "Identity, AKS Workload Identity or a managed identity); off: never "
                     "[env: IMAGECHECK_CLOUD_AUTH]."),
        click.option("-v", "--verbose", is_flag=True, help="Log each HTTP request to stderr."),
    ]  # fmt: skip
    return apply_options(command, options)


def run_options(command: Command, *, wait: bool = True) -> Command:
    """How a one-off run ends: its deadline, waiting (not for ``audit``, whose images are
    what is deployed now), failure policy, termination message."""
    options = [
        click.option("--deadline", type=Seconds(*DEADLINE_RANGE), default=None,
                     show_default="60s + 50ms per image",
                     help="Seconds allowed for the whole run, retries included."),
        click.option("--wait", "wait", type=Seconds(*WAIT_RANGE), metavar="DURATION",
                     default=None,
                     help="Poll until missing images appear or DURATION (90s, 5m) passes; "
                     "progress on stderr."),
        click.option("--on-error", type=click.Choice(["fail", "pass"]), default="fail",
                     show_default=True,
                     help="pass: a registry that cannot be reached or keeps failing lets the "
                     "check pass with a warning (exit 0); missing images still fail."),
        click.option("--termination-log", metavar="PATH", default=DEFAULT_TERMINATION_LOG,
                     show_default=True,
                     help="On failure, write a one-line summary here when the file exists "
                     "(Kubernetes shows it as the pod's termination message)."),
    ]  # fmt: skip
    if not wait:
        del options[1]  # --wait
    return apply_options(command, options)


def check_options(command: Command) -> Command:
    """Every option of a command that checks images once (check, scan)."""
    return run_options(registry_options(command))
