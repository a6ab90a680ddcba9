"""``POST /mutate`` served as ``imagecheck gate`` mounts it (the webhook's ``Listener`` over
TLS, the framer per ``IMAGECHECK_FASTPATH``, aiohttp behind it), in a thread with a loop of
its own, so that the Kubernetes API stand-in (another thread) can call it while a test waits
for the create."""

from __future__ import annotations

import asyncio
import ssl
import threading
from types import TracebackType

from aiohttp import web

from imagecheck.fastpath import Listener, handler_options
from imagecheck.webhook import MUTATE_PATHS, MutateEndpoint
from tests.support.net import free_port

GATE = "imagecheck.io/images"


class MutateServer:
    """``with MutateServer(ctx) as server``: ``server.url`` takes reviews; ``server.ready``
    is what the endpoint's ``ready()`` answers; ``server.outcomes`` what it answered."""

    def __init__(
        self, ssl_context: ssl.SSLContext, namespaces: frozenset[str] | None = None
    ) -> None:
        self.ready = True
        self.outcomes: list[str] = []
        self.endpoint = MutateEndpoint(
            gate=GATE, namespaces=namespaces, ready=lambda: self.ready, observe=self.outcomes.append
        )
        self._ssl = ssl_context
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.url = ""

    def __enter__(self) -> MutateServer:
        self._thread.start()
        port = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        self.url = f"https://127.0.0.1:{port}/mutate"
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _start(self) -> int:
        self._listener = Listener(
            ssl_context=self._ssl,
            max_connections=10,
            read_timeout=5.0,
            answer_now=self.endpoint.answer_now,
            review_paths=MUTATE_PATHS,
        )
        app = web.Application(middlewares=[self._listener.middleware])
        app.add_routes(self.endpoint.routes())
        self._runner = web.AppRunner(app, handle_signals=False, **handler_options())
        await self._runner.setup()
        assert self._runner.server is not None
        port = free_port()
        await self._listener.start(self._runner.server, "127.0.0.1", port)
        return port

    async def _shutdown(self) -> None:
        await self._listener.stop()
        await self._runner.cleanup()
        self._listener.abort_all()
