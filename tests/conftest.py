"""What every test shares, whichever way the suite was started.

A run started in the background (``cmd &`` in a script, ``nohup``, ``setsid``: as CI may
start it) inherits SIGINT ignored, and ``exec`` keeps an ignored signal ignored, so every
process a test starts would ignore Ctrl-C, and the tests of what Ctrl-C does would fail
there alone. A handler is reset to the default by ``exec``: with Python's own Ctrl-C
handler here, as a run from a terminal has it, each child starts with SIGINT's default.
"""

from __future__ import annotations

import signal

import pytest

_SIGINT_AT_START = signal.getsignal(signal.SIGINT)


def pytest_configure(config: pytest.Config) -> None:
    if _SIGINT_AT_START is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SIGINT_AT_START is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
