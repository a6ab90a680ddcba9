"""Async tests without an async pytest plugin: :func:`sync` runs one on a loop of its own."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any


def sync(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """An async test run on a loop of its own (the suite has no async plugin)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run
