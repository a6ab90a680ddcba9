"""A one-line counter on stderr for long work (``scanned 120/3300 files``), for people only.

Drawn only when stderr is a terminal, and not in CI (``CI`` set, as GitHub Actions, GitLab
and most others set it; some attach a pseudo-terminal) or on a ``TERM=dumb`` one: a CI log
keeps every redraw. It is redrawn in place (``\\r``), at most every :data:`REDRAW_SECONDS`,
and erased as the count completes (or the work stops: :meth:`Counter.close`), so that what
follows (the results, JSON, a ``--wait`` line) starts on a clean line and never carries it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import TextIO

__all__ = ["MIN_FILES", "MIN_IMAGES", "Counter", "counter", "wanted"]

# Below these, the work is over before a counter would be read.
MIN_FILES = 200
MIN_IMAGES = 20
REDRAW_SECONDS = 0.1
_ERASE = "\r\x1b[K"


def wanted(stream: TextIO) -> bool:
    """Whether a person watches ``stream``: a terminal, outside CI."""
    if os.environ.get("CI") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except ValueError:  # closed
        return False


class Counter:
    """``imagecheck: <verb> <done>/<total> <what>``, redrawn as told, for more than
    ``minimum``; erased when ``done`` reaches ``total``, or by :meth:`close`."""

    def __init__(
        self,
        verb: str,
        what: str,
        minimum: int,
        stream: TextIO,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.verb, self.what, self.minimum = verb, what, minimum
        self.stream, self.clock = stream, clock
        self.drawn_at: float | None = None

    def __call__(self, done: int, total: int) -> None:
        if total <= self.minimum:
            return
        if done >= total:
            self.close()
            return
        now = self.clock()
        if self.drawn_at is not None and now - self.drawn_at < REDRAW_SECONDS:
            return
        self.drawn_at = now
        self.stream.write(f"{_ERASE}imagecheck: {self.verb} {done}/{total} {self.what}")
        self.stream.flush()

    def close(self) -> None:
        if self.drawn_at is not None:
            self.stream.write(_ERASE)
            self.stream.flush()
            self.drawn_at = None


def counter(verb: str, what: str, minimum: int) -> Counter | None:
    """A counter on stderr, or None when nobody watches it (see the module docstring)."""
    return Counter(verb, what, minimum, sys.stderr) if wanted(sys.stderr) else None
