"""The options commands share, their parsing, and the steps every checking command takes:
build the keychain, check, render, write the termination message, exit."""

from __future__ import annotations

import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import click

from imagecheck.cli._app import (
    EXIT_OK,
    exit_code,
    fail,
    setup_logging,
)
from imagecheck.client import ClientOptions, ImageChecker
from imagecheck.credentials import Credentials, Keychain
from imagecheck.errors import InvalidReferenceError, UsageError
from imagecheck.files import write_regular_file
from imagecheck.platform import parse_platform
from imagecheck.reference import DOCKER_HUB_ALIASES, Reference, parse_reference
from imagecheck.render import (
    explained,
    render_json,
    render_text,
    shown,
    termination_summary,
)
from imagecheck.result import CheckResult, Status
from imagecheck.retry import Deadline
from imagecheck.sources import default_keychain
from imagecheck.wait import wait_for_images

DEFAULT_TERMINATION_LOG = "/dev/termination-log"
# --wait: a week is longer than any pipeline waits for an image.
MAX_WAIT = 7 * 86400
# serve's cache lifetimes and reload interval: a week, far inside what timers can hold.
MAX_TTL = 7 * 86400
# --password-stdin: a password or token (a JWT is a few KiB) on one line.
MAX_PASSWORD = 64 * 1024
# A progress line on stderr (a terminal only) when a scan checks more images than this.
_PROGRESS_MIN = 20
_NUMBER_RE = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_INTEGER_RE = re.compile(r"[0-9]{1,9}")
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration(text: str) -> float:
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


class OneLineBadParameter(click.BadParameter):
    """A bad option value as one line, like every other usage error: ``imagecheck: error:
    --timeout: 'nan' is not a finite number of seconds`` (exit 2), without click's usage
    banner."""

    def format_message(self) -> str:
        name = self.param.opts[-1] if self.param is not None and self.param.opts else "value"
        return f"{name}: {self.message}"

    def show(self, file: Any = None) -> None:
        click.echo(f"imagecheck: error: {self.format_message()}", err=True)


# click.ParamType is generic only from click 8.4; subscripting it would break 8.1-8.3.
class _Bounded(click.ParamType):  # type: ignore[type-arg]
    def fail(
        self, message: str, param: click.Parameter | None = None, ctx: click.Context | None = None
    ) -> NoReturn:
        raise OneLineBadParameter(message, ctx=ctx, param=param)


class Seconds(_Bounded):
    """A duration in seconds: ``90``, ``1.5``, ``90s``, ``5m``, ``1h30m``, ``500ms``, within
    ``[minimum, maximum]``. Never ``nan`` or ``inf``, never negative, never so large that a
    timer built from it overflows (issue #10: ``--timeout nan`` crashed, ``--deadline nan``
    was taken)."""

    name = "seconds"

    def __init__(self, minimum: float, maximum: float) -> None:
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            # A default may already be a number; what people type is text.
            seconds = float(value) if isinstance(value, int | float) else duration(str(value))
        except click.BadParameter:
            self.fail(f"{str(value)[:40]!r} is not a number of seconds or a duration such as "
                      "90s, 5m or 1h30m", param, ctx)  # fmt: skip
        if not math.isfinite(seconds) or not self.minimum <= seconds <= self.maximum:
            self.fail(f"{str(value)[:40]!r} is not between {self.minimum:g}s and "
                      f"{self.maximum:g}s", param, ctx)  # fmt: skip
        return seconds


class Count(_Bounded):
    """A whole number within ``[minimum, maximum]``."""

    name = "integer"

    def __init__(self, minimum: int, maximum: int) -> None:
        self.minimum, self.maximum = minimum, maximum

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):
            number = value
        elif isinstance(value, str) and _INTEGER_RE.fullmatch(value.strip()):
            number = int(value.strip())
        else:
            self.fail(f"{str(value)[:40]!r} is not a whole number", param, ctx)
        if not self.minimum <= number <= self.maximum:
            self.fail(f"{number} is not between {self.minimum} and {self.maximum}", param, ctx)
        return number


def mirror_pair(text: str) -> tuple[str, str]:
    """``SOURCE=MIRROR`` as two normalized registry hosts."""
    source, sep, mirror = text.partition("=")
    if not sep:
        raise click.BadParameter(
            f"--mirror {text!r}: expected SOURCE=MIRROR, e.g. docker.io=mirror.example.com:5000"
        )
    return registry_host(source), registry_host(mirror)


def registry_host(text: str) -> str:
    try:
        ref = parse_reference(f"{text}/probe")
    except InvalidReferenceError as exc:
        raise click.BadParameter(f"{text!r} is not a registry host: {exc.reason}") from None
    if (
        not text
        or "/" in text
        or (ref.registry.lower() != text.lower() and text.lower() not in DOCKER_HUB_ALIASES)
    ):
        raise click.BadParameter(f"{text!r} is not a registry host (e.g. mirror.example.com:5000)")
    return ref.registry


def apply_options(command: Callable[..., None], options: list[Any]) -> Callable[..., None]:
    for option in reversed(options):
        command = option(command)
    return command


def registry_options(command: Callable[..., None]) -> Callable[..., None]:
    """How to reach registries and which credentials to offer: check, scan and serve."""
    options = [
        click.option("--concurrency", type=Count(1, 256), default=16, show_default=True,
                     help="Images checked at once."),
        click.option("--timeout", type=Seconds(0.1, 3600), default=10.0,
                     show_default=True,
                     help="Seconds allowed for one attempt (connect, auth, answer)."),
        click.option("--retries", type=Count(0, 20), default=3, show_default=True,
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
                     help="Allow plain HTTP and unverified TLS for this registry, or "
                     "credentials over plain HTTP to this token realm host (repeatable)."),
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
    return apply_options(command, options)


def run_options(command: Callable[..., None]) -> Callable[..., None]:
    """How a one-off run ends: its deadline, waiting, failure policy, termination message."""
    options = [
        click.option("--deadline", type=Seconds(0.1, 86400), default=60.0,
                     show_default=True,
                     help="Seconds allowed for the whole run, retries included."),
        click.option("--wait", "wait", type=Seconds(0, MAX_WAIT), metavar="DURATION",
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
    return apply_options(command, options)


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
    wait: float | None = None
    on_error: str = "fail"
    termination_log: str = DEFAULT_TERMINATION_LOG

    def client_options(self) -> ClientOptions:
        return ClientOptions(
            timeout=self.timeout,
            retries=self.retries,
            concurrency=self.concurrency,
            insecure_registries=frozenset(self.insecure),
            ca_files=self.ca_files,
            mirrors=tuple(mirror_pair(m) for m in self.mirrors),
            denied_as_missing=self.denied_as_missing,
            platform=parse_platform(self.platform) if self.platform else None,
        )


def start_run(options: dict[str, Any]) -> tuple[CheckSettings, ClientOptions, float | None]:
    """The settings of a checking command, logging set up, and its options parsed (a bad
    value is a one-line usage error)."""
    settings = CheckSettings(**options)
    setup_logging(settings.verbose)
    try:
        return settings, settings.client_options(), settings.wait
    except click.BadParameter as exc:
        fail(exc.message)
    except UsageError as exc:
        fail(str(exc))


def finish(results: Sequence[CheckResult], output: str, settings: CheckSettings) -> NoReturn:
    """Render, warn, write the termination message, and exit with the one exit code."""
    click.echo(render_json(results) if output == "json" else render_text(results))
    code = exit_code(results, errors_pass=settings.on_error == "pass")
    warn_passed_errors(results, settings)
    if code != EXIT_OK:
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


async def check_all(
    options: ClientOptions,
    keychain: Keychain,
    items: list[tuple[str, Reference]],
    deadline: float,
    wait: float | None,
) -> list[CheckResult]:
    async with ImageChecker(options, keychain) as checker:
        if wait is None:
            results = await checker.check_many(items, Deadline.after(deadline))
        else:
            # The last round starts when the wait ends, and still gets its own deadline.
            results = await wait_for_images(
                checker,
                items,
                until=Deadline.after(wait),
                round_seconds=deadline,
                progress=lambda line: click.echo(f"imagecheck: {line}", err=True),
            )
    return [explained(r) for r in results]


def parse_all(images: Sequence[str]) -> list[CheckResult]:
    parsed: list[CheckResult] = []
    for image in images:
        try:
            ref = parse_reference(image)
        except InvalidReferenceError as exc:
            parsed.append(CheckResult(image, None, Status.INVALID, message=exc.reason))
            continue
        parsed.append(CheckResult(image, ref, Status.FOUND))
    return parsed


def build_keychain(settings: CheckSettings, pod_secrets: Sequence[tuple[str, str]]) -> Keychain:
    username, password_stdin = settings.username, settings.password_stdin
    static: Credentials | None = None
    password = os.environ.get("IMAGECHECK_PASSWORD")
    if password_stdin:
        if not username:
            fail("--password-stdin needs --username (or IMAGECHECK_USERNAME)")
        line = sys.stdin.readline(MAX_PASSWORD + 1)
        if len(line) > MAX_PASSWORD:
            fail(f"--password-stdin: the password is longer than {MAX_PASSWORD // 1024} KiB")
        password = line.rstrip("\r\n")
        if not password:
            fail("--password-stdin: nothing was read from standard input")
    if username:
        if not password:
            fail("--username needs a password: --password-stdin or IMAGECHECK_PASSWORD")
        try:
            static = Credentials(username=username, password=password, source="--username")
        except UsageError as exc:  # a password with a newline from IMAGECHECK_PASSWORD
            fail(str(exc))
    try:
        chain = default_keychain(
            static=static,
            static_registries=[registry_host(h) for h in settings.credentials_for],
            docker_config=settings.docker_config,
            pull_secrets=settings.pull_secrets,
            pod_pull_secrets=pod_secrets,
        )
    except UsageError as exc:
        fail(str(exc))
    except click.BadParameter as exc:
        fail(f"--credentials-for: {exc.message}")
    return chain


def require_credentials_host(settings: CheckSettings, command: str) -> None:
    """scan and serve take registry names from files and reviews that others write: flag
    credentials must say which registry they are for, or they would go to any host named."""
    if (
        settings.username or os.environ.get("IMAGECHECK_PASSWORD")
    ) and not settings.credentials_for:
        fail(
            f"{command} with --username needs --credentials-for HOST: the registries it "
            "contacts are named by the files it reads, so credentials must not go to any of them"
        )
