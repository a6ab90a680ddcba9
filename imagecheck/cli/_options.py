"""The options commands share, as one value (:class:`CheckSettings`), and the steps around
the library call that only a command line has: credentials from standard input, the output,
the termination message, the exit."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click

from imagecheck._files import write_regular_file
from imagecheck.authn import Credentials
from imagecheck.cli._app import run_async
from imagecheck.cli._logs import setup_logging
from imagecheck.cli._progress import MIN_IMAGES, counter
from imagecheck.cli._types import Count, MirrorPair, PlatformChoice, RegistryHost, Seconds
from imagecheck.errors import InvalidReferencesError, UsageError
from imagecheck.exitcodes import ExitCode, OnError, exit_code
from imagecheck.registry import ClientOptions
from imagecheck.render import explained, shown, termination_summary
from imagecheck.result import CheckResult, Status
from imagecheck.run import (
    CONCURRENCY_RANGE,
    DEADLINE_RANGE,
    RETRIES_RANGE,
    TIMEOUT_RANGE,
    WAIT_RANGE,
    acheck,
    parse_all,
)

DEFAULTS = ClientOptions()
DEFAULT_TERMINATION_LOG = "/dev/termination-log"
# serve's cache lifetimes and reload interval: a week, far inside what timers can hold.
MAX_TTL = 7 * 86400
# --password-stdin: a password or token (a JWT is a few KiB) on one line.
MAX_PASSWORD = 64 * 1024
# Chunks of output written at once by echo_stream: about 128 results of JSON.
OUTPUT_BATCH = 256


def report_output(located: str, items: str) -> Callable[[Callable[..., None]], Any]:
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


def apply_options(command: Callable[..., None], options: list[Any]) -> Callable[..., None]:
    for option in reversed(options):
        command = option(command)
    return command


def registry_options(command: Callable[..., None]) -> Callable[..., None]:
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
        click.option("--mirror", "mirrors", type=MirrorPair(), multiple=True,
                     metavar="SOURCE=MIRROR",
                     help="Ask MIRROR first for SOURCE's images, then SOURCE itself, as "
                     "containerd's hosts.toml mirrors (repeatable, in order)."),
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
        click.option("-v", "--verbose", is_flag=True, help="Log each HTTP request to stderr."),
    ]  # fmt: skip
    return apply_options(command, options)


def run_options(command: Callable[..., None], *, wait: bool = True) -> Callable[..., None]:
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


def check_options(command: Callable[..., None]) -> Callable[..., None]:
    """Every option of a command that checks images once (check, scan)."""
    return run_options(registry_options(command))


@dataclass(frozen=True)
class CheckSettings:
    """What the check options say, as one value (parsed by the option types)."""

    concurrency: int
    timeout: float
    retries: int
    denied_as_missing: bool
    platform: str | None
    mirrors: tuple[tuple[str, str], ...]
    insecure: tuple[str, ...]
    ca_files: tuple[Path, ...]
    username: str | None
    password_stdin: bool
    docker_config: str | None
    pull_secrets: tuple[str, ...]
    verbose: bool
    credentials_for: tuple[str, ...] = ()
    # run options (check, scan); serve has its own notion of each
    deadline: float | None = None  # None: imagecheck.run.default_deadline
    wait: float | None = None
    on_error: OnError = "fail"
    termination_log: str = DEFAULT_TERMINATION_LOG

    def client_options(self) -> dict[str, Any]:
        """How to reach registries: ``imagecheck.run.client_options``' keywords."""
        return {
            "timeout": self.timeout,
            "retries": self.retries,
            "concurrency": self.concurrency,
            "platform": self.platform,
            "mirrors": self.mirrors,
            "insecure_registries": self.insecure,
            "ca_files": self.ca_files,
            "denied_as_missing": self.denied_as_missing,
        }

    def sources(
        self, credentials: Credentials | None, pod_pull_secrets: Sequence[tuple[str, str]] = ()
    ) -> dict[str, Any]:
        """The credential sources: ``imagecheck.run.keychain``'s keywords."""
        return {
            "credentials": credentials,
            "credentials_for": self.credentials_for,
            "docker_config": self.docker_config,
            "pull_secrets": self.pull_secrets,
            "pod_pull_secrets": pod_pull_secrets,
        }

    def run_options(
        self, credentials: Credentials | None, pod_pull_secrets: Sequence[tuple[str, str]] = ()
    ) -> dict[str, Any]:
        """Every keyword of ``imagecheck.acheck`` these options set."""
        return {
            "deadline": self.deadline,
            "wait": self.wait,
            "progress": lambda line: click.echo(f"imagecheck: {line}", err=True),
            **self.client_options(),
            **self.sources(credentials, pod_pull_secrets),
        }


def start_run(options: dict[str, Any]) -> CheckSettings:
    """The settings of a checking command, with logging set up."""
    settings = CheckSettings(**options)
    setup_logging(settings.verbose)
    return settings


def read_credentials(settings: CheckSettings) -> Credentials | None:
    """``--username`` with ``--password-stdin`` or ``IMAGECHECK_PASSWORD``, if given."""
    username = settings.username
    password = os.environ.get("IMAGECHECK_PASSWORD")
    if settings.password_stdin:
        if not username:
            raise UsageError("--password-stdin needs --username (or IMAGECHECK_USERNAME)")
        password = _password_from_stdin()
    if not username:
        return None
    if not password:
        raise UsageError("--username needs a password: --password-stdin or IMAGECHECK_PASSWORD")
    # A password with a newline (from IMAGECHECK_PASSWORD) is a CredentialsError naming it.
    return Credentials(username=username, password=password, source="--username")


def _password_from_stdin() -> str:
    line = sys.stdin.readline(MAX_PASSWORD + 1)
    if len(line) > MAX_PASSWORD:
        raise UsageError(
            f"--password-stdin: the password is longer than {MAX_PASSWORD // 1024} KiB"
        )
    password = line.rstrip("\r\n")
    if not password:
        raise UsageError("--password-stdin: nothing was read from standard input")
    return password


def require_credentials_host(settings: CheckSettings, command: str) -> None:
    """scan and serve take registry names from files and reviews that others write: flag
    credentials must say which registry they are for, or they would go to any host named."""
    if (
        settings.username or os.environ.get("IMAGECHECK_PASSWORD")
    ) and not settings.credentials_for:
        raise UsageError(
            f"{command} with --username needs --credentials-for HOST: the registries it "
            "contacts are named by the files it reads, so credentials must not go to any of them"
        )


def invalid_results(images: Iterable[str]) -> list[CheckResult]:
    """A result for each invalid reference among ``images``, in order (none: all valid)."""
    try:
        parse_all(images)
    except InvalidReferencesError as exc:
        return [CheckResult(e.reference, None, Status.INVALID, e.reason) for e in exc.invalid]
    return []


def conclude(
    results: Sequence[CheckResult], settings: CheckSettings, *, invalid_input: bool = False
) -> NoReturn:
    """After the output: warn of errors passed, write the termination message, and exit with
    the one exit code (``imagecheck.exitcodes``)."""
    code = exit_code(results, on_error=settings.on_error, invalid_input=invalid_input)
    warn_passed_errors(results, settings)
    if code != ExitCode.OK:
        write_termination_log(settings.termination_log, termination_summary(results))
    sys.exit(code)


def warn_passed_errors(results: Iterable[CheckResult], settings: CheckSettings) -> None:
    if settings.on_error != "pass":
        return
    for r in results:
        if r.status is Status.ERROR:
            click.echo(
                f"imagecheck: warning: could not check {shown(r)} ({r.message}); "
                "passing because of --on-error pass",
                err=True,
            )


def echo_stream(chunks: Iterable[str]) -> None:
    """``click.echo("".join(chunks))``, a batch of chunks at a time: the output of 100,000
    results is never one string (issue #14)."""
    batch: list[str] = []
    for chunk in chunks:
        batch.append(chunk)
        if len(batch) >= OUTPUT_BATCH:
            click.echo("".join(batch), nl=False)
            batch.clear()
    click.echo("".join(batch))


def write_termination_log(path: str, summary: str) -> None:
    """Only into a regular file that exists: Kubernetes mounts one at /dev/termination-log in
    the pod. A FIFO there would block the exit; it is refused with a warning instead."""
    target = Path(path)
    if not target.exists():
        return
    try:
        write_regular_file(
            target, (summary + "\n").encode(), what="--termination-log", error=UsageError
        )
    except UsageError as exc:
        click.echo(f"imagecheck: warning: {exc}", err=True)


def explain_all(results: Iterable[CheckResult]) -> list[CheckResult]:
    """Results with their hints worded as the command line words them."""
    return [explained(r) for r in results]


def check_valid(
    images: Sequence[str],
    settings: CheckSettings,
    *,
    pod_pull_secrets: Sequence[tuple[str, str]] = (),
) -> list[CheckResult]:
    """Check ``images`` (all valid references) as the options say: the credentials read
    first, the results explained. Many images show a counter on a terminal's stderr (not
    with --verbose, whose log lines would break it)."""
    credentials = read_credentials(settings)
    progress = None if settings.verbose else counter("checked", "images", MIN_IMAGES)
    options = settings.run_options(credentials, pod_pull_secrets)
    try:
        return explain_all(run_async(acheck(images, checked=progress, **options)))
    finally:
        if progress is not None:
            progress.close()
