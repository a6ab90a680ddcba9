"""The ``imagecheck`` command group: where every command ends. An error that stops a command
is one line on stderr and the exit code ``imagecheck.exitcodes`` maps it to; a command that
gets results exits with the code they map to (``_run.conclude``). Ctrl-C and SIGTERM end
a run promptly, with 130 and 143. Bad option values are click's, with exit 2 (``_types``).
"""

from __future__ import annotations

import contextlib
import importlib
import signal
from collections.abc import Coroutine, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any, TypeVar

import click

from imagecheck import __version__

if TYPE_CHECKING:
    from imagecheck.exitcodes import ExitCode

T = TypeVar("T")

# Each command's module, imported only when that command runs (or --help lists it): `check`
# never loads serve's aiohttp or scan's PyYAML, and `--version` loads none.
COMMANDS = {
    "audit": "imagecheck.cli._audit",
    "check": "imagecheck.cli._check",
    "scan": "imagecheck.cli._scan",
    "serve": "imagecheck.cli._serve",
    "reap": "imagecheck.cli._reap",
    "kueue-check": "imagecheck.cli._kueue",
    "gate": "imagecheck.cli._gate",
}


class Terminated(Exception):
    """SIGTERM arrived while checking."""


class _LazyCommands(MutableMapping[str, click.Command]):
    """The group's commands by name; a command's module is imported when it is looked up."""

    def __init__(self, modules: dict[str, str]) -> None:
        self._modules = dict(modules)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module = importlib.import_module(self._modules[name])  # KeyError: no such command
            command = getattr(module, name.replace("-", "_"))  # kueue-check: kueue_check
            assert isinstance(command, click.Command)
            self._loaded[name] = command
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:  # add_command
        self._loaded[name] = command
        self._modules.setdefault(name, "")  # listed; loaded already, so never imported

    def __delitem__(self, name: str) -> None:
        del self._modules[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __len__(self) -> int:
        return len(self._modules)


class _Group(click.Group):
    """Runs a command, and ends it the one way for each way it can stop."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("imagecheck: interrupted", err=True)
            ctx.exit(_exit_codes().INTERRUPTED)
        except Terminated:
            click.echo("imagecheck: terminated", err=True)
            ctx.exit(_exit_codes().TERMINATED)
        except (click.ClickException, click.exceptions.Exit):
            raise  # click's own: a usage error, an exit
        except Exception as exc:
            # Imported here, not at the top: `--version` must not load them (render needs
            # httpx). A command that raised one of ours has loaded them already.
            from imagecheck.errors import ImagecheckError  # noqa: PLC0415
            from imagecheck.exitcodes import error_exit_code  # noqa: PLC0415
            from imagecheck.render import error_text  # noqa: PLC0415

            if not isinstance(exc, ImagecheckError):
                raise
            click.echo(f"imagecheck: error: {error_text(exc)}", err=True)
            ctx.exit(error_exit_code(exc))


def _exit_codes() -> type[ExitCode]:
    from imagecheck.exitcodes import ExitCode  # noqa: PLC0415 - see _Group.invoke

    return ExitCode


@click.group(
    cls=_Group,
    commands=_LazyCommands(COMMANDS),
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="imagecheck")
def cli() -> None:
    """Does this container image exist in its registry, and can this node pull it?"""


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` so that SIGTERM cancels it (``Terminated``), as Ctrl-C does."""
    import asyncio  # noqa: PLC0415 - some 50 ms: only the commands that run a loop pay it

    return asyncio.run(cancel_on_sigterm(coro))


async def cancel_on_sigterm(coro: Coroutine[Any, Any, T]) -> T:
    import asyncio  # noqa: PLC0415 - loaded by the running loop already

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
