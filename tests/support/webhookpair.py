"""The webhook served twice in this process, for differential tests: once as it is deployed
(our ``Listener`` with the request framer in front of aiohttp, :func:`fast`) and once by
aiohttp alone on its own ``TCPSite`` with no framer at all (:func:`stock`, the oracle). Both
take their handler options from ``imagecheck.fastpath.handler_options``, so that whatever
options the server passes aiohttp reach both.

The registry is a fake checker: images whose text has ``missing`` are missing, the rest
found; each check takes a turn of the loop, as a real one does. :func:`outcomes` sends the
same bytes to each, after a review of :data:`CACHED` that fills each one's cache.
"""

from __future__ import annotations

import asyncio
import errno
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from aiohttp import web

from imagecheck._deadline import Deadline
from imagecheck.authn import Keychain
from imagecheck.fastpath import Listener, handler_options
from imagecheck.reference import Reference
from imagecheck.registry import ClientOptions
from imagecheck.result import CheckResult, Status
from imagecheck.webhook._server import ServeSettings, Webhook
from tests.support.net import free_port
from tests.support.rawhttp import Transcript, converse, transcript

CACHED = "registry.test/app:1"  # checked before each case: answered inline
UNCACHED = "registry.test/app:2"  # never checked before: a registry check, by aiohttp
MISSING = "registry.test/app:missing"

BIND_TRIES = 5

Serve = Callable[[Webhook], AbstractAsyncContextManager[int]]


class FakeChecker:
    """Images whose text has ``missing`` are missing, the rest found; a check takes a turn of
    the loop, as a real one does. ``calls`` counts them."""

    def __init__(self) -> None:
        self.options = ClientOptions()
        self.observers: list[Callable[[str, int], None]] = []
        self.calls = 0

    async def check(
        self, ref: Reference, deadline: Deadline, *, image: str, keychain: Keychain | None = None
    ) -> CheckResult:
        self.calls += 1
        await asyncio.sleep(0)
        status = Status.MISSING if "missing" in image else Status.FOUND
        return CheckResult(image, ref, status, message=status.value)


def review(*images: str, uid: str = "uid-1") -> bytes:
    containers = [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}
    obj["spec"] = {"containers": containers}
    request = {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"}, "object": obj}
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(body).encode()


def post(body: bytes, path: bytes = b"/validate", extra: bytes = b"") -> bytes:
    """A well-formed review request; ``extra`` header lines go before ``Content-Length``."""
    return (
        b"POST " + path + b" HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" + extra
        + b"Content-Length: %d\r\n\r\n" % len(body) + body
    )  # fmt: skip


def chunked(body: bytes) -> bytes:
    """A review request with a chunked body: the framer hands the connection to aiohttp."""
    head = b"POST /validate HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
    return head + b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def new_webhook() -> Webhook:
    settings = ServeSettings(
        host="127.0.0.1", port=0, tls_cert=None, tls_key=None, warn_only=False,
        errors_pass=False, review_deadline=5.0, tag_ttl=300.0, missing_ttl=300.0,
    )  # fmt: skip
    return Webhook(settings, FakeChecker())  # type: ignore[arg-type]


@asynccontextmanager
async def fast(webhook: Webhook) -> AsyncIterator[int]:
    """The webhook as deployed: our accept loop, the framer, aiohttp behind it."""
    listener = Listener(
        ssl_context=None,
        max_connections=10,
        read_timeout=2.0,
        answer_now=webhook.answer_now,
        framing=True,
    )
    runner = web.AppRunner(
        webhook.app([listener.middleware]), handle_signals=False, **handler_options()
    )
    await runner.setup()
    server = runner.server
    assert server is not None
    port = await _bound(lambda port: listener.start(server, "127.0.0.1", port))
    try:
        yield port
    finally:
        await listener.stop()
        await runner.cleanup()
        listener.abort_all()


@asynccontextmanager
async def stock(webhook: Webhook) -> AsyncIterator[int]:
    """The oracle: the same app on aiohttp's own server, no listener and no framer."""
    runner = web.AppRunner(webhook.app(), handle_signals=False, **handler_options())
    await runner.setup()
    port = await _bound(lambda port: web.TCPSite(runner, "127.0.0.1", port).start())
    try:
        yield port
    finally:
        await runner.cleanup()


async def _bound(start: Callable[[int], Awaitable[None]]) -> int:
    """``start`` on a free port, and that port; another one if it was taken meanwhile (the
    servers of a case start side by side)."""
    for _ in range(BIND_TRIES - 1):
        port = free_port()
        try:
            await start(port)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            continue
        return port
    port = free_port()
    await start(port)
    return port


async def outcome(serve: Serve, pieces: list[bytes], *, shut: bool = False) -> Transcript:
    """What one connection to a fresh server is answered for ``pieces`` (each its own
    write), once :data:`CACHED` is in that server's cache."""
    async with serve(new_webhook()) as port:
        await _warm(port)
        return transcript(*await converse(port, pieces, shut=shut))


async def _warm(port: int) -> None:
    """One review of :data:`CACHED`, its answer read by its length: no quiet period needed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(post(review(CACHED, uid="warm")))
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), head
        length = re.search(rb"\r\nContent-Length: (\d+)", head, re.IGNORECASE)
        assert length is not None, head
        await reader.readexactly(int(length[1]))
    finally:
        writer.close()


@dataclass(frozen=True)
class Outcomes:
    """What one connection was answered by each server. ``stock_by_request`` is aiohttp
    alone given each request in a write of its own (None when not asked for)."""

    fast: Transcript
    stock: Transcript
    stock_by_request: Transcript | None


def outcomes(
    pieces: list[bytes], *, requests: list[bytes] | None = None, shut: bool = False
) -> Outcomes:
    """The same bytes sent to the webhook as deployed and to aiohttp alone (and, given
    ``requests``, to aiohttp alone one request per write)."""

    async def run() -> Outcomes:
        # Side by side in one loop: each connection's quiet period is its own.
        runs = [outcome(fast, pieces, shut=shut), outcome(stock, pieces, shut=shut)]
        if requests is not None:
            runs.append(outcome(stock, requests, shut=shut))
        done = await asyncio.gather(*runs)
        return Outcomes(done[0], done[1], done[2] if requests is not None else None)

    return asyncio.run(run())
