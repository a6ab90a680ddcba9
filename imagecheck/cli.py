"""The ``imagecheck`` command line: click only. Parse options, build the configuration,
call the library, render the results, and map outcomes to exit codes in one place."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from imagecheck import __version__
from imagecheck.client import ClientOptions, ImageChecker
from imagecheck.credentials import CachingKeychain, Credentials, Keychain
from imagecheck.errors import ImagecheckError, InvalidReferenceError, UsageError
from imagecheck.reference import Reference, parse_reference
from imagecheck.result import CheckResult, Status
from imagecheck.retry import Deadline
from imagecheck.sources import default_keychain

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

EXIT_CODES_HELP = """\b
Exit codes:
  0    every image was found
  1    at least one image is missing
  2    usage error or invalid reference (nothing was sent to any registry)
  3    access denied (repository does not exist or requires authorization)
  4    registry unreachable, failing after retries, or deadline exceeded
  130  interrupted (Ctrl-C); 143 terminated (SIGTERM)
When several apply: 2, then 1, then 3, then 4."""


def exit_code(results: Sequence[CheckResult]) -> int:
    statuses = {r.status for r in results}
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


@cli.command(epilog=EXIT_CODES_HELP)
@click.argument("images", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format (json: an array in input order, see README).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 256),
    default=16,
    show_default=True,
    help="Images checked at once.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 3600),
    default=10.0,
    show_default=True,
    help="Seconds allowed for one attempt (connect, auth, answer).",
)
@click.option(
    "--deadline",
    type=click.FloatRange(0.1, 86400),
    default=60.0,
    show_default=True,
    help="Seconds allowed for the whole run, retries included.",
)
@click.option(
    "--retries",
    type=click.IntRange(0, 20),
    default=3,
    show_default=True,
    help="Retries of a transient failure (connection errors, 408, 429, 5xx).",
)
@click.option(
    "--insecure-registry",
    "insecure",
    multiple=True,
    metavar="HOST[:PORT]",
    help="Allow plain HTTP and unverified TLS for this registry (repeatable).",
)
@click.option(
    "--ca-file",
    "ca_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Extra PEM CA certificate(s) to trust (repeatable). SSL_CERT_FILE is honoured too.",
)
@click.option(
    "-u",
    "--username",
    envvar="IMAGECHECK_USERNAME",
    help="Registry username [env: IMAGECHECK_USERNAME].",
)
@click.option(
    "--password-stdin",
    is_flag=True,
    help="Read the password (or token) from standard input [else env: IMAGECHECK_PASSWORD].",
)
@click.option(
    "--docker-config",
    metavar="PATH",
    help="Docker config.json, or the directory holding it "
    "[default: $DOCKER_CONFIG/config.json, then ~/.docker/config.json].",
)
@click.option(
    "--pull-secret",
    "pull_secrets",
    multiple=True,
    metavar="PATH",
    help="A mounted Kubernetes pull secret: a directory holding .dockerconfigjson or "
    ".dockercfg, or the file itself (repeatable) [env: IMAGECHECK_PULL_SECRETS].",
)
@click.option("-v", "--verbose", is_flag=True, help="Log each HTTP request to stderr.")
def check(
    images: tuple[str, ...],
    output: str,
    concurrency: int,
    timeout: float,
    deadline: float,
    retries: int,
    insecure: tuple[str, ...],
    ca_files: tuple[Path, ...],
    username: str | None,
    password_stdin: bool,
    docker_config: str | None,
    pull_secrets: tuple[str, ...],
    verbose: bool,
) -> None:
    """Check that each IMAGE exists in its registry.

    IMAGE is a reference such as busybox:1.36, ghcr.io/org/app:1.0.0 or
    registry.example.com:5000/team/app@sha256:<digest>.

    Credentials, first match wins: --username/--password-stdin, pull secrets,
    DOCKER_AUTH_CONFIG, Docker's config.json (with its credential helpers), podman's
    auth.json, anonymous.
    """
    run_deadline = Deadline.after(deadline)
    _setup_logging(verbose)
    parsed = _parse_all(images)
    invalid = [r for r in parsed if r.status is Status.INVALID]
    if invalid:
        # Nothing is sent anywhere when any reference is invalid (exit 2).
        _render(invalid, output)
        sys.exit(EXIT_USAGE)
    keychain = _keychain(username, password_stdin, docker_config, pull_secrets)
    options = ClientOptions(
        timeout=timeout,
        retries=retries,
        concurrency=concurrency,
        insecure_registries=frozenset(insecure),
        ca_files=ca_files,
    )
    items = [(r.image, r.reference) for r in parsed if r.reference is not None]
    _resolve_all(keychain, [ref for _, ref in items])
    results = _run(_check_all(options, keychain, items, run_deadline))
    _render(results, output)
    sys.exit(exit_code(results))


async def _check_all(
    options: ClientOptions,
    keychain: Keychain,
    items: list[tuple[str, Reference]],
    deadline: Deadline,
) -> list[CheckResult]:
    async with ImageChecker(options, keychain) as checker:
        return await checker.check_many(items, deadline)


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


def _keychain(
    username: str | None,
    password_stdin: bool,
    docker_config: str | None,
    pull_secrets: Sequence[str],
) -> Keychain:
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
            static=static, docker_config=docker_config, pull_secrets=pull_secrets
        )
    except UsageError as exc:
        fail(str(exc))
    return CachingKeychain(chain)


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


def _render(results: Sequence[CheckResult], output: str) -> None:
    if output == "json":
        click.echo(json.dumps([r.to_dict() for r in results], indent=2))
        return
    width = max((len(_shown(r)) for r in results), default=0)
    for r in results:
        detail = r.digest if r.status is Status.FOUND and r.digest else r.message
        click.echo(f"{r.status.value:<8} {_shown(r):<{width}}  {detail}".rstrip())


def _shown(result: CheckResult) -> str:
    return str(result.reference) if result.reference is not None else result.image


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
