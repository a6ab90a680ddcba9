"""Where the commands' log lines go: stderr, as ``imagecheck: ...`` lines for the commands a
person runs, as JSON lines for the servers (serve, ``audit --serve``) a cluster's log
collector reads. ``logging`` is imported on use: not for ``--version`` and ``--help``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import logging


def setup_logging(verbose: bool) -> None:
    """``imagecheck: <message>`` lines; with ``verbose``, each HTTP request too."""
    import logging  # noqa: PLC0415 - see the module docstring

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("imagecheck: %(message)s"))
    logger = logging.getLogger("imagecheck")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logger.propagate = False


def setup_json_logging(formatter: logging.Formatter, verbose: bool) -> None:
    """A server's log lines (imagecheck's, and aiohttp's and asyncio's warnings: a protocol's
    fatal error is one line with its traceback in a field, not lines of text) through
    ``formatter``."""
    import logging  # noqa: PLC0415 - see the module docstring

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    for name in ("imagecheck", "aiohttp", "asyncio"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(logging.DEBUG if verbose else logging.INFO)
        logger.propagate = False
    logging.getLogger("aiohttp").setLevel(logging.WARNING)
    logging.getLogger("asyncio").setLevel(logging.WARNING)
