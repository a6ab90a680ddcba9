"""The ``imagecheck`` command group, its exit codes, and running a coroutine so that Ctrl-C
and SIGTERM end it promptly. One exit-code map for every command."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import sys
from collections.abc import Coroutine, Sequence
from typing import Any, NoReturn, TypeVar

import click

from imagecheck import __version__
from imagecheck.bounded import printable
from imagecheck.errors import ImagecheckError, UsageError
from imagecheck.result import CheckResult, Status

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


class Terminated(Exception):
    """SIGTERM arrived while checking."""


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    # One line whatever the message carries (a file name with a newline, a registry's text).
    click.echo(f"imagecheck: error: {printable(message, 2000)}", err=True)
    sys.exit(code)


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="imagecheck")
def cli() -> None:
    """Does this container image exist in its registry, and can this node pull it?"""


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro``; Ctrl-C ends with 130 and SIGTERM with 143, promptly."""
    try:
        return asyncio.run(cancel_on_sigterm(coro))
    except KeyboardInterrupt:
        click.echo("imagecheck: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except Terminated:
        click.echo("imagecheck: terminated", err=True)
        sys.exit(EXIT_TERMINATED)
    except ImagecheckError as exc:
        fail(str(exc), EXIT_USAGE if isinstance(exc, UsageError) else EXIT_ERROR)


async def cancel_on_sigterm(coro: Coroutine[Any, Any, T]) -> T:
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
            raise Terminated from None
        raise


def setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("imagecheck: %(message)s"))
    logger = logging.getLogger("imagecheck")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False
