"""The ``imagecheck`` command group: where every command ends. An error that stops a command
is one line on stderr and the exit code ``imagecheck.exitcodes`` maps it to; a command that
gets results exits with the code they map to (``_options.conclude``). Ctrl-C and SIGTERM end
a run promptly, with 130 and 143. Bad option values are click's, with exit 2 (``_types``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

import click

from imagecheck import __version__
from imagecheck.errors import ImagecheckError
from imagecheck.exitcodes import ExitCode, error_exit_code
from imagecheck.render import error_text

T = TypeVar("T")

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


class Terminated(Exception):
    """SIGTERM arrived while checking."""


class _Group(click.Group):
    """Runs a command, and ends it the one way for each way it can stop."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("imagecheck: interrupted", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
        except Terminated:
            click.echo("imagecheck: terminated", err=True)
            ctx.exit(ExitCode.TERMINATED)
        except ImagecheckError as exc:
            click.echo(f"imagecheck: error: {error_text(exc)}", err=True)
            ctx.exit(error_exit_code(exc))


@click.group(
    cls=_Group,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="imagecheck")
def cli() -> None:
    """Does this container image exist in its registry, and can this node pull it?"""


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` so that SIGTERM cancels it (``Terminated``), as Ctrl-C does."""
    return asyncio.run(cancel_on_sigterm(coro))


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
