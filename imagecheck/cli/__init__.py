"""The ``imagecheck`` command line: click only. Each command parses its options, calls the
library (``imagecheck.run``) once, renders the results, and exits with the code
``imagecheck.exitcodes`` maps them, or the error that stopped it, to.

- ``_app``: the group, where every command ends (errors, Ctrl-C, SIGTERM)
- ``_help``: the exit-code tables of ``--help``, from ``imagecheck.exitcodes``
- ``_types``: option values parsed and bounded as click reads them, listen addresses
- ``_logs``: where log lines go (``imagecheck: ...`` lines, or JSON for the servers)
- ``_options``: the shared options, as click declares them
- ``_settings``: what they say, as one typed value (``CheckSettings``), built once
- ``_credentials``: ``--username`` with ``--password-stdin`` or ``IMAGECHECK_PASSWORD``
- ``_run``: references parsed once, the library call, the output streamed, the exit
- ``_termination``: ``--termination-log``
- ``_reaper``: the Reaper both ``reap`` and its loop (``_reap_loop``) start from
- ``_audit``, ``_check``, ``_reap``, ``_scan``, ``_serve``: one command each
"""

from __future__ import annotations

import os
import sys

from imagecheck._lazy import load_export

# Nothing heavy at import: the console script imports this module before main() runs, and a
# Ctrl-C then would be Python's traceback. main() imports the command line inside its try, and
# the group imports a command's module only when that command runs.
TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true

if TYPE_CHECKING:
    from imagecheck.cli._app import cli
    from imagecheck.cli._audit import audit
    from imagecheck.cli._check import check
    from imagecheck.cli._help import EXIT_CODES_HELP
    from imagecheck.cli._reap import reap
    from imagecheck.cli._scan import scan
    from imagecheck.cli._serve import serve
    from imagecheck.cli._types import duration, listen_address, mirror_pair

_EXPORTS = {
    "EXIT_CODES_HELP": "imagecheck.cli._help",
    "audit": "imagecheck.cli._audit",
    "cli": "imagecheck.cli._app",
    "check": "imagecheck.cli._check",
    "reap": "imagecheck.cli._reap",
    "scan": "imagecheck.cli._scan",
    "serve": "imagecheck.cli._serve",
    "duration": "imagecheck.cli._types",
    "mirror_pair": "imagecheck.cli._types",
    "listen_address": "imagecheck.cli._types",
}

__all__ = [
    "EXIT_CODES_HELP",
    "audit",
    "check",
    "cli",
    "duration",
    "listen_address",
    "main",
    "mirror_pair",
    "reap",
    "scan",
    "serve",
]


if not TYPE_CHECKING:  # hidden from checkers, which would take any misspelt name for it

    def __getattr__(name: str) -> object:
        """The names above, imported on first use (PEP 562)."""
        return load_export(__name__, _EXPORTS, name, globals())


def main() -> None:
    """Console entry point.

    Once the command is done and its output flushed, the process ends with ``os._exit``:
    tearing the interpreter down (freeing every module httpx, asyncio and click loaded) costs
    about 45 ms, a tenth of a 100-image check, and nothing is left to clean up by then.
    """
    # httpx imports its own command line (click, pygments, rich) when they are installed, and
    # fails quietly when they are not; imagecheck never runs it. Marked absent, the import fails
    # at once instead of costing a check's start-up the import of pygments and rich.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    if sys.argv[1:] == ["--version"]:
        # What click's version option prints, without loading click (most of the start-up): the
        # one command a start-up probe or an install check runs. tests/unit/
        # test_lazy_imports.py holds the two answers equal.
        from imagecheck import __version__  # noqa: PLC0415

        print(f"imagecheck, version {__version__}")
        sys.stdout.flush()
        os._exit(0)
        return  # reached only where os._exit is replaced (the tests')
    try:
        # Inside the try: a Ctrl-C while click and the command's modules load is "interrupted".
        # Through this package's __getattr__, which loads and keeps it.
        from imagecheck.cli import cli  # noqa: PLC0415

        cli(prog_name="imagecheck")
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # outside a run (which handles it itself): still no traceback
        print("imagecheck: interrupted", file=sys.stderr)
        code = 130
    except Exception as exc:  # the last line of defence, see _internal_error
        code = _internal_error(exc)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    if "logging" in sys.modules:  # loaded by the commands that log; nothing to flush if not
        sys.modules["logging"].shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)


def _internal_error(exc: Exception) -> int:
    """A bug, not an answer: one line and exit 4, never Python's traceback and exit 1.

    Exit 1 means "missing", so an uncaught exception must not end the process the way Python
    ends it. Every failure imagecheck expects is a typed error handled by the command; this
    only catches what escaped. ``IMAGECHECK_DEBUG=1`` shows the traceback.
    """
    from imagecheck._text import printable  # noqa: PLC0415 - only on the way out
    from imagecheck.exitcodes import ExitCode  # noqa: PLC0415

    if os.environ.get("IMAGECHECK_DEBUG"):
        import traceback  # noqa: PLC0415 - only on the way out

        traceback.print_exc()
    print(
        f"imagecheck: internal error ({type(exc).__name__}: {printable(exc)}); "
        "this is a bug, please report it",
        file=sys.stderr,
    )
    return ExitCode.ERROR
