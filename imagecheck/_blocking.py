"""An async function as a blocking one (``imagecheck.check`` of ``acheck``)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


def blocking(function: Callable[P, Coroutine[Any, Any, T]], name: str) -> Callable[P, T]:
    """``function`` (``acheck``) as ``name`` (``check``): run to its end on an event loop of
    its own; a ``RuntimeError`` inside a running loop, which it would block."""

    @functools.wraps(function)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop running in this thread: the normal case
            return asyncio.run(function(*args, **kwargs))
        raise RuntimeError(
            f"imagecheck.{name}() cannot run inside a running event loop (it would block "
            f"it): use await imagecheck.{function.__name__}(...) there"
        )

    run.__name__ = run.__qualname__ = name
    run.__doc__ = (
        f"Check that each image exists in its registry: :func:`{function.__name__}`, with the "
        "same options, run to its end on an event loop of its own. Inside a running event "
        f"loop (a coroutine, Jupyter) ``await {function.__name__}(...)`` instead: ``{name}`` "
        "raises ``RuntimeError`` there rather than block the loop."
    )
    return run
