"""The ``imagecheck`` command line: click only. Parse options, build the configuration, call
the library, render the results, and map outcomes to exit codes in one place (``_app``).

- ``_app``: the group, exit codes, signal handling
- ``_options``: shared options and the steps of a checking run
- ``_check``, ``_scan``, ``_serve``: one command each
"""

from imagecheck.cli._app import EXIT_CODES_HELP, cli, exit_code
from imagecheck.cli._check import check
from imagecheck.cli._options import duration, mirror_pair
from imagecheck.cli._scan import scan
from imagecheck.cli._serve import serve

__all__ = [
    "EXIT_CODES_HELP",
    "check",
    "cli",
    "duration",
    "exit_code",
    "main",
    "mirror_pair",
    "scan",
    "serve",
]


def main() -> None:
    """Console entry point."""
    cli(prog_name="imagecheck")
