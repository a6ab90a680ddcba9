"""The ``imagecheck`` command line: click only. Parse options, build the configuration,
call the library, render the results, and map outcomes to exit codes in one place."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import ssl
import sys
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from imagecheck import __version__
from imagecheck.client import ClientOptions, ImageChecker
from imagecheck.credentials import CachingKeychain, Credentials, Keychain
from imagecheck.errors import ImagecheckError, InvalidReferenceError, RegistryError, UsageError
from imagecheck.kube import InCluster, KubeClient
from imagecheck.platform import parse_platform
from imagecheck.reference import Reference, parse_reference
from imagecheck.render import (
    render_json,
    render_scan_github,
    render_scan_json,
    render_scan_text,
    render_text,
    shown,
    termination_summary,
)
from imagecheck.result import CheckResult, Status
from imagecheck.retry import Deadline
from imagecheck.sources import default_keychain
from imagecheck.wait import wait_for_images

T = TypeVar("T")

EXIT_OK = 0
EXIT_MISSING = 1
EXIT_USAGE = 2
EXIT_DENIED = 3
EXIT_ERROR = 4
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143

# When several apply, the first in this list wins (issue #2): a typo beats a missing image,
# a missing image beats a denial, a denial beats a flaky registry.
_EXIT_PRECEDENCE = (
    (Status.INVALID, EXIT_USAGE),
    (Status.MISSING, EXIT_MISSING),
    (Status.DENIED, EXIT_DENIED),
    (Status.ERROR, EXIT_ERROR),
)

DEFAULT_TERMINATION_LOG = "/dev/termination-log"
# A progress line on stderr (a terminal only) when a scan checks more images than this.
_PROGRESS_MIN = 20
_NUMBER_RE = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
_HUB_ALIASES = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})

EXIT_CODES_HELP = """\b
Exit codes:
  0    every image was found
  1    at least one image is missing
  2    usage error or invalid reference (nothing was sent to any registry)
  3    access denied (repository does not exist or requires authorization)
  4    registry unreachable, failing after retries, or deadline exceeded
  130  interrupted (Ctrl-C); 143 terminated (SIGTERM)
When several apply: 2, then 1, then 3, then 4."""


SCAN_EXIT_CODES_HELP = EXIT_CODES_HELP.replace(
    "usage error or invalid reference (nothing was sent to any registry)",
    "usage error, invalid reference, or a file that cannot be read (the rest is checked)",
)


def exit_code(results: Sequence[CheckResult], *, errors_pass: bool = False) -> int:
    """The one exit code for a run; with ``errors_pass``, registry errors do not fail it."""
    statuses = {r.status for r in results}
    if errors_pass:
        statuses.discard(Status.ERROR)
    for status, code in _EXIT_PRECEDENCE:
        if status in statuses:
            return code
    return EXIT_OK


class _Terminated(Exception):
    """SIGTERM arrived while checking."""


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"imagecheck: error: {message}", err=True)
    sys.exit(code)


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="imagecheck")
def cli() -> None:
    """Does this container image exist in its registry, and can this node pull it?"""


def _duration(text: str) -> float:
    """``90``, ``90s``, ``5m``, ``1h30m``, ``500ms`` as seconds."""
    text = text.strip()
    if _NUMBER_RE.fullmatch(text):
        return float(text)
    total, pos = 0.0, 0
    for part in _DURATION_PART_RE.finditer(text):
        if part.start() != pos:
            break
        total += float(part.group(1)) * _DURATION_UNITS[part.group(2)]
        pos = part.end()
    if pos == 0 or pos != len(text):
        raise click.BadParameter(f"{text!r} is not a duration such as 90s, 5m or 1h30m")
    return total


def _mirror(text: str) -> tuple[str, str]:
    """``SOURCE=MIRROR`` as two normalized registry hosts."""
    source, sep, mirror = text.partition("=")
    if not sep:
        raise click.BadParameter(
            f"--mirror {text!r}: expected SOURCE=MIRROR, e.g. docker.io=mirror.example.com:5000"
        )
    return _registry_host(source), _registry_host(mirror)


def _registry_host(text: str) -> str:
    try:
        ref = parse_reference(f"{text}/probe")
    except InvalidReferenceError as exc:
        raise click.BadParameter(f"{text!r} is not a registry host: {exc.reason}") from None
    if (
        not text
        or "/" in text
        or (ref.registry.lower() != text.lower() and text.lower() not in _HUB_ALIASES)
    ):
        raise click.BadParameter(f"{text!r} is not a registry host (e.g. mirror.example.com:5000)")
    return ref.registry


def _apply(command: Callable[..., None], options: list[Any]) -> Callable[..., None]:
    for option in reversed(options):
        command = option(command)
    return command


def registry_options(command: Callable[..., None]) -> Callable[..., None]:
    """How to reach registries and which credentials to offer: check, scan and serve."""
    options = [
        click.option("--concurrency", type=click.IntRange(1, 256), default=16, show_default=True,
                     help="Images checked at once."),
        click.option("--timeout", type=click.FloatRange(0.1, 3600), default=10.0,
                     show_default=True,
                     help="Seconds allowed for one attempt (connect, auth, answer)."),
        click.option("--retries", type=click.IntRange(0, 20), default=3, show_default=True,
                     help="Retries of a transient failure (connection errors, 408, 429, 5xx)."),
        click.option("--denied-as-missing", is_flag=True,
                     help="Count a denial after successful authentication as missing (exit 1): "
                     "for registries that deny what does not exist (Docker Hub, Artifactory)."),
        click.option("--platform", metavar="OS/ARCH[/VARIANT]|auto", default=None,
                     help="Also require the image for this platform (an index must list it; a "
                     "single manifest's config must name it); auto: this machine's."),
        click.option("--mirror", "mirrors", multiple=True, metavar="SOURCE=MIRROR",
                     help="Ask MIRROR first for SOURCE's images, then SOURCE itself, as "
                     "containerd's hosts.toml mirrors (repeatable, in order)."),
        click.option("--insecure-registry", "insecure", multiple=True, metavar="HOST[:PORT]",
                     help="Allow plain HTTP and unverified TLS for this registry (repeatable)."),
        click.option("--ca-file", "ca_files", multiple=True,
                     type=click.Path(dir_okay=False, path_type=Path),
                     help="Extra PEM CA certificate(s) to trust (repeatable). "
                     "SSL_CERT_FILE is honoured too."),
        click.option("-u", "--username", envvar="IMAGECHECK_USERNAME",
                     help="Registry username [env: IMAGECHECK_USERNAME]."),
        click.option("--credentials-for", "credentials_for", multiple=True, metavar="HOST",
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
        click.option("-v", "--verbose", is_flag=True, help="Log each HTTP request to stderr."),
    ]  # fmt: skip
    return _apply(command, options)


def run_options(command: Callable[..., None]) -> Callable[..., None]:
    """How a one-off run ends: its deadline, waiting, failure policy, termination message."""
    options = [
        click.option("--deadline", type=click.FloatRange(0.1, 86400), default=60.0,
                     show_default=True,
                     help="Seconds allowed for the whole run, retries included."),
        click.option("--wait", "wait", metavar="DURATION", default=None,
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
    return _apply(command, options)


def check_options(command: Callable[..., None]) -> Callable[..., None]:
    """Every option of a command that checks images once (check, scan)."""
    return run_options(registry_options(command))


@dataclass(frozen=True)
class CheckSettings:
    """What the check options say, as one value."""

    concurrency: int
    timeout: float
    retries: int
    denied_as_missing: bool
    platform: str | None
    mirrors: tuple[str, ...]
    insecure: tuple[str, ...]
    ca_files: tuple[Path, ...]
    username: str | None
    password_stdin: bool
    docker_config: str | None
    pull_secrets: tuple[str, ...]
    verbose: bool
    credentials_for: tuple[str, ...] = ()
    # run options (check, scan); serve has its own notion of each
    deadline: float = 60.0
    wait: str | None = None
    on_error: str = "fail"
    termination_log: str = DEFAULT_TERMINATION_LOG

    def client_options(self) -> ClientOptions:
        return ClientOptions(
            timeout=self.timeout,
            retries=self.retries,
            concurrency=self.concurrency,
            insecure_registries=frozenset(self.insecure),
            ca_files=self.ca_files,
            mirrors=tuple(_mirror(m) for m in self.mirrors),
            denied_as_missing=self.denied_as_missing,
            platform=parse_platform(self.platform) if self.platform else None,
        )

    @property
    def wait_seconds(self) -> float | None:
        return None if self.wait is None else _duration(self.wait)


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
    settings = CheckSettings(**options)
    _setup_logging(settings.verbose)
    try:
        client_options, wait = settings.client_options(), settings.wait_seconds
    except click.BadParameter as exc:
        fail(exc.message)
    except UsageError as exc:
        fail(str(exc))
    pod_secrets: list[tuple[str, str]] = []
    if from_pod:
        pod_images, pod_secrets = _read_pod(self_container, use_pod_pull_secrets, settings)
        images = (*images, *(i for i in pod_images if i not in images))
    elif use_pod_pull_secrets:
        fail("--use-pod-pull-secrets goes with --from-pod")
    if not images:
        fail("no IMAGE to check (name some, or use --from-pod)")
    parsed = _parse_all(images)
    invalid = [r for r in parsed if r.status is Status.INVALID]
    if invalid:
        # Nothing is sent anywhere when any reference is invalid (exit 2).
        _finish(invalid, output, settings)
    keychain = _keychain(settings, pod_secrets)
    items = [(r.image, r.reference) for r in parsed if r.reference is not None]
    _resolve_all(keychain, [ref for _, ref in items])
    results = _run(_check_all(client_options, keychain, items, settings.deadline, wait))
    _finish(results, output, settings)


@cli.command(epilog=SCAN_EXIT_CODES_HELP)
@click.argument("paths", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json", "github"]),
    default="text",
    show_default=True,
    help="text: grouped by status with file:line; json: every occurrence with its result; "
    "github: workflow commands that annotate a pull request.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="Template placeholders ({{ .Values.image }}, ${IMAGE}) count as invalid references "
    "instead of being skipped.",
)
@check_options
def scan(paths: tuple[str, ...], output: str, strict: bool, **options: Any) -> None:
    """Find every image in PATHS and check each distinct one once.

    PATHS are Kubernetes YAML files (every workload kind, List, custom resources with a pod
    template), Docker Compose files, Dockerfiles, directories (recursively), or - for stdin
    (helm template ... | imagecheck scan -). Invalid files are reported (exit 2) and the rest
    is still checked.
    """
    settings = CheckSettings(**options)
    _setup_logging(settings.verbose)
    try:
        client_options, wait = settings.client_options(), settings.wait_seconds
    except click.BadParameter as exc:
        fail(exc.message)
    except UsageError as exc:
        fail(str(exc))
    _require_credentials_host(settings, "scan")
    if settings.password_stdin and "-" in paths:
        fail("--password-stdin and - (manifests on stdin) cannot share standard input")
    from imagecheck.scanning import PLACEHOLDER, scan_paths  # noqa: PLC0415 - PyYAML, only here

    occurrences, problems = scan_paths(paths, stdin=sys.stdin)
    if strict:  # placeholders become references (invalid ones); compose builds stay skipped
        occurrences = [
            replace(o, skipped=None) if o.skipped and o.skipped.startswith(PLACEHOLDER) else o
            for o in occurrences
        ]
    distinct = list(dict.fromkeys(o.image for o in occurrences if not o.skipped))
    parsed = _parse_all(distinct)
    results = {r.image: r for r in parsed if r.status is Status.INVALID}
    items = [(r.image, r.reference) for r in parsed if r.reference is not None]
    if items:
        keychain = _keychain(settings, [])
        _resolve_all(keychain, [ref for _, ref in items])
        if len(items) > _PROGRESS_MIN and sys.stderr.isatty():
            click.echo(f"imagecheck: checking {len(items)} distinct images...", err=True)
        checked = _run(_check_all(client_options, keychain, items, settings.deadline, wait))
        results.update((r.image, r) for r in checked)
    renderer = {"text": render_scan_text, "json": render_scan_json, "github": render_scan_github}
    text = renderer[output](occurrences, results, problems)
    if text:
        click.echo(text)
    for problem in problems if output != "text" else []:
        click.echo(
            f"imagecheck: error: {problem.file}:{problem.line or 0}: {problem.message}", err=True
        )
    code = exit_code(list(results.values()), errors_pass=settings.on_error == "pass")
    _warn_passed_errors(results.values(), settings)
    code = EXIT_USAGE if problems else code
    if code != EXIT_OK:
        _write_termination_log(
            settings.termination_log, termination_summary(list(results.values()))
        )
    sys.exit(code)


SERVE_HELP = """\b
Endpoints: POST /validate (AdmissionReview admission.k8s.io/v1), GET /healthz, /readyz,
/metrics (Prometheus). Logs are JSON lines on stderr.
Exit codes: 0 stopped by SIGTERM/SIGINT; 2 usage error (bad option, certificate, config)."""


@cli.command(epilog=SERVE_HELP)
@click.option(
    "--listen",
    default="0.0.0.0:8443",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to serve on.",
)
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    help="PEM certificate (chain); reloaded when the file changes.",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    help="PEM private key; reloaded with the certificate.",
)
@click.option(
    "--insecure-http",
    is_flag=True,
    help="Serve plain HTTP without --tls-cert/--tls-key (tests only: the API "
    "server only calls webhooks over HTTPS).",
)
@click.option(
    "--mode",
    type=click.Choice(["deny", "warn"]),
    default="deny",
    show_default=True,
    help="deny: refuse objects with missing images; warn: allow them with warnings.",
)
@click.option(
    "--on-error",
    type=click.Choice(["fail", "pass"]),
    default="pass",
    show_default=True,
    help="What a denial or a failing registry does: pass (allow, with a warning) or "
    "fail (refuse). Missing images are always refused in deny mode.",
)
@click.option(
    "--review-deadline",
    type=click.FloatRange(0.5, 30),
    default=8.0,
    show_default=True,
    help="Seconds to answer a review; keep it below the webhook's timeoutSeconds.",
)
@click.option(
    "--cache-ttl",
    default="60s",
    show_default=True,
    metavar="DURATION",
    help="How long a tag found stays cached (found digests stay for good).",
)
@click.option(
    "--missing-ttl",
    default="10s",
    show_default=True,
    metavar="DURATION",
    help="How long a missing image stays cached.",
)
@click.option(
    "--use-pod-pull-secrets",
    is_flag=True,
    help="Also offer the pull secrets a reviewed pod names, read through the Kubernetes API "
    "(RBAC: get on those secrets in the pods' namespaces).",
)
@click.option(
    "--cert-reload-interval",
    default="10s",
    show_default=True,
    metavar="DURATION",
    help="How often to look for a rotated --tls-cert/--tls-key.",
)
@registry_options
def serve(
    listen: str,
    tls_cert: Path | None,
    tls_key: Path | None,
    insecure_http: bool,
    mode: str,
    on_error: str,
    review_deadline: float,
    cache_ttl: str,
    missing_ttl: str,
    cert_reload_interval: str,
    use_pod_pull_secrets: bool,
    **options: Any,
) -> None:
    """Run the validating admission webhook: refuse workloads whose images do not exist.

    Needs the webhook extra: pip install 'imagecheck[webhook]'.
    """
    try:  # the optional extra: imported only here
        from imagecheck.webhook import server  # noqa: PLC0415
    except ImportError as exc:
        fail(f"serve needs the webhook extra: pip install 'imagecheck[webhook]' ({exc.name})")
    settings = CheckSettings(**options)
    _require_credentials_host(settings, "serve")
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        fail(f"--listen {listen!r}: expected HOST:PORT, e.g. 0.0.0.0:8443")
    if (tls_cert is None) != (tls_key is None):
        fail("--tls-cert and --tls-key go together")
    if tls_cert is None and not insecure_http:
        fail("serve needs --tls-cert and --tls-key (or --insecure-http for tests)")
    try:
        client_options = settings.client_options()
        serve_settings = server.ServeSettings(
            host=host.strip("[]") or "0.0.0.0",  # noqa: S104 - a webhook listens for the API server
            port=int(port),
            tls_cert=tls_cert,
            tls_key=tls_key,
            warn_only=mode == "warn",
            errors_pass=on_error == "pass",
            review_deadline=review_deadline,
            tag_ttl=_duration(cache_ttl),
            missing_ttl=_duration(missing_ttl),
            reload_interval=max(0.1, _duration(cert_reload_interval)),
            pod_pull_secrets=use_pod_pull_secrets,
        )
    except click.BadParameter as exc:
        fail(exc.message)
    except UsageError as exc:
        fail(str(exc))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(server.JsonFormatter())
    for name in ("imagecheck", "aiohttp"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.DEBUG if settings.verbose else logging.INFO)
        logger.propagate = False
    logging.getLogger("aiohttp").setLevel(logging.WARNING)
    keychain = _keychain(settings, [])
    try:
        asyncio.run(server.serve(serve_settings, client_options, keychain))
    except UsageError as exc:
        fail(str(exc))
    except (OSError, ssl.SSLError) as exc:
        fail(f"cannot serve on {listen}: {exc}")


def _finish(results: Sequence[CheckResult], output: str, settings: CheckSettings) -> NoReturn:
    """Render, warn, write the termination message, and exit with the one exit code."""
    click.echo(render_json(results) if output == "json" else render_text(results))
    code = exit_code(results, errors_pass=settings.on_error == "pass")
    _warn_passed_errors(results, settings)
    if code != EXIT_OK:
        _write_termination_log(settings.termination_log, termination_summary(results))
    sys.exit(code)


def _warn_passed_errors(results: Iterable[CheckResult], settings: CheckSettings) -> None:
    if settings.on_error != "pass":
        return
    for r in results:
        if r.status is Status.ERROR:
            click.echo(
                f"imagecheck: warning: could not check {shown(r)} ({r.message}); "
                "passing because of --on-error pass",
                err=True,
            )


def _write_termination_log(path: str, summary: str) -> None:
    """Only into a file that exists: Kubernetes creates /dev/termination-log in the pod."""
    target = Path(path)
    if not target.exists():
        return
    try:
        target.write_text(summary + "\n", encoding="utf-8")
    except OSError as exc:
        click.echo(f"imagecheck: warning: cannot write {path}: {exc.strerror}", err=True)


async def _check_all(
    options: ClientOptions,
    keychain: Keychain,
    items: list[tuple[str, Reference]],
    deadline: float,
    wait: float | None,
) -> list[CheckResult]:
    async with ImageChecker(options, keychain) as checker:
        if wait is None:
            return await checker.check_many(items, Deadline.after(deadline))
        # The last round starts when the wait ends, and still gets its own deadline.
        return await wait_for_images(
            checker,
            items,
            until=Deadline.after(wait),
            round_seconds=deadline,
            progress=lambda line: click.echo(f"imagecheck: {line}", err=True),
        )


def _parse_all(images: Sequence[str]) -> list[CheckResult]:
    parsed: list[CheckResult] = []
    for image in images:
        try:
            ref = parse_reference(image)
        except InvalidReferenceError as exc:
            parsed.append(CheckResult(image, None, Status.INVALID, message=exc.reason))
            continue
        parsed.append(CheckResult(image, ref, Status.FOUND))
    return parsed


def _read_pod(
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
        _write_termination_log(settings.termination_log, f"imagecheck: {exc}")
        fail(str(exc), EXIT_ERROR)
    return pod.images, secrets


def _keychain(settings: CheckSettings, pod_secrets: Sequence[tuple[str, str]]) -> Keychain:
    username, password_stdin = settings.username, settings.password_stdin
    static: Credentials | None = None
    password = os.environ.get("IMAGECHECK_PASSWORD")
    if password_stdin:
        if not username:
            fail("--password-stdin needs --username (or IMAGECHECK_USERNAME)")
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            fail("--password-stdin: nothing was read from standard input")
    if username:
        if not password:
            fail("--username needs a password: --password-stdin or IMAGECHECK_PASSWORD")
        static = Credentials(username=username, password=password, source="--username")
    try:
        chain = default_keychain(
            static=static,
            static_registries=[_registry_host(h) for h in settings.credentials_for],
            docker_config=settings.docker_config,
            pull_secrets=settings.pull_secrets,
            pod_pull_secrets=pod_secrets,
        )
    except UsageError as exc:
        fail(str(exc))
    except click.BadParameter as exc:
        fail(f"--credentials-for: {exc.message}")
    return CachingKeychain(chain)


def _require_credentials_host(settings: CheckSettings, command: str) -> None:
    """scan and serve take registry names from files and reviews that others write: flag
    credentials must say which registry they are for, or they would go to any host named."""
    if (
        settings.username or os.environ.get("IMAGECHECK_PASSWORD")
    ) and not settings.credentials_for:
        fail(
            f"{command} with --username needs --credentials-for HOST: the registries it "
            "contacts are named by the files it reads, so credentials must not go to any of them"
        )


def _resolve_all(keychain: Keychain, refs: Sequence[Reference]) -> None:
    """Ask every credential source now (helpers run here, once per repository), so that a
    broken helper or secret is a usage error before any request is sent."""
    try:
        for ref in refs:
            keychain.resolve(ref)
    except UsageError as exc:
        fail(str(exc))


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro``; Ctrl-C ends with 130 and SIGTERM with 143, promptly."""
    try:
        return asyncio.run(_cancel_on_sigterm(coro))
    except KeyboardInterrupt:
        click.echo("imagecheck: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except _Terminated:
        click.echo("imagecheck: terminated", err=True)
        sys.exit(EXIT_TERMINATED)
    except ImagecheckError as exc:
        fail(str(exc), EXIT_USAGE if isinstance(exc, UsageError) else EXIT_ERROR)


async def _cancel_on_sigterm(coro: Coroutine[Any, Any, T]) -> T:
    task = asyncio.current_task()
    assert task is not None
    loop = asyncio.get_running_loop()
    terminated = False

    def on_sigterm() -> None:
        nonlocal terminated
        terminated = True
        task.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError):  # non-main thread, Windows
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        return await coro
    except asyncio.CancelledError:
        if terminated:
            raise _Terminated from None
        raise


def _setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("imagecheck: %(message)s"))
    logger = logging.getLogger("imagecheck")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False


def main() -> None:
    """Console entry point."""
    cli(prog_name="imagecheck")
