"""``imagecheck.fastpath._framing``: reviews that need no I/O answered in the turn their bytes
arrive, everything else by aiohttp, on one real listener over plain TCP (issue #14).

Each case runs the same requests against two servers in this process, the same but for the
inline path (a listener whose ``answer_now`` always declines is aiohttp's path alone), and
compares what a client reads, byte for byte but for the ``Date`` header. The registry is a
fake checker: images whose text has ``missing`` are missing, the rest found; each check
takes a turn of the loop, as a real one does.

Every case runs twice: with the fast path, and with it switched off (``IMAGECHECK_FASTPATH=0``:
no framer, every byte to aiohttp as it arrives). Cases about the inline path itself are
marked ``fast_path_only`` and run once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
import socket
import tracemalloc
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web

from imagecheck.cli._logs import setup_json_logging
from imagecheck.fastpath import ENVIRONMENT_VARIABLE, Listener, handler_options
from imagecheck.fastpath import _phases as phases_module
from imagecheck.webhook import JsonFormatter
from imagecheck.webhook._server import ServeSettings, Webhook
from imagecheck.webhook._telemetry import lean_records
from tests.support.net import free_port
from tests.support.webhookpair import FakeChecker, post, review


@pytest.fixture(autouse=True, params=["fast", "stock"])
def fastpath_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The switch, as an operator sets it; each listener reads it when it is built."""
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "1" if request.param == "fast" else "0")
    return str(request.param)


# A case about the inline path itself: with the framer off there is none to observe.
fast_path_only = pytest.mark.parametrize("fastpath_mode", ["fast"], indirect=True)


FOUND = ("registry.test/app:1", "registry.test/app:2", "registry.test/db:1")
MISSING = "registry.test/app:missing"


GET_HEALTHZ = b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"


@dataclass
class Served:
    port: int
    webhook: Webhook
    checker: FakeChecker
    listener: Listener


@asynccontextmanager
async def served(inline: bool) -> AsyncIterator[Served]:
    settings = ServeSettings(
        host="127.0.0.1", port=free_port(), tls_cert=None, tls_key=None, warn_only=False,
        errors_pass=False, review_deadline=5.0, tag_ttl=300.0, missing_ttl=300.0,
    )  # fmt: skip
    checker = FakeChecker()
    webhook = Webhook(settings, checker)  # type: ignore[arg-type]
    answer_now = webhook.answer_now if inline else (lambda body: None)
    listener = Listener(
        ssl_context=None, max_connections=10, read_timeout=2.0, answer_now=answer_now
    )
    runner = web.AppRunner(
        webhook.app([listener.middleware]), handle_signals=False, **handler_options()
    )
    await runner.setup()
    assert runner.server is not None
    await listener.start(runner.server, "127.0.0.1", settings.port)
    try:
        yield Served(settings.port, webhook, checker, listener)
    finally:
        await listener.stop()
        await runner.cleanup()
        listener.abort_all()


async def read_answer(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = re.search(rb"Content-Length: (\d+)", head, re.IGNORECASE)  # none on a 100
    return head + await reader.readexactly(int(length[1]) if length else 0)


def masked(answer: bytes) -> bytes:
    return re.sub(rb"Date: [^\r]+", b"Date: -", answer)


class TaskCount:
    """Tasks the loop creates while counting (the inline path creates none)."""

    def __init__(self) -> None:
        self.counting = False
        self.created = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        self.created += self.counting
        return asyncio.Task(coro, loop=loop, **kw)


async def exchange(
    port: int, pieces: list[bytes], answers: int, tasks: TaskCount | None = None
) -> list[bytes]:
    """Send ``pieces`` (each its own write, a turn apart), then read ``answers`` answers;
    ``tasks`` counts the tasks created once the connection is open."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await asyncio.sleep(0.01)  # the server's side of the connection is set up
    if tasks is not None:
        tasks.counting = True
    try:
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)
        return [masked(await read_answer(reader)) for _ in range(answers)]
    finally:
        if tasks is not None:
            tasks.counting = False
        writer.close()


def both(scenario: Callable[[Served], Any]) -> tuple[Any, Any]:
    """``scenario`` against the inline server and against aiohttp's path alone."""

    async def run(inline: bool) -> Any:
        async with served(inline) as server:
            return await scenario(server)

    return asyncio.run(run(True)), asyncio.run(run(False))


@fast_path_only
def test_a_cached_review_is_answered_with_no_task_and_the_bytes_of_aiohttp_s_path() -> None:
    tasks = TaskCount()

    async def scenario(server: Served) -> tuple[list[bytes], int]:
        asyncio.get_running_loop().set_task_factory(tasks)
        cold = await exchange(server.port, [post(review(*FOUND))], 1)  # fills the cache
        warm = await exchange(server.port, [post(review(*FOUND, uid="uid-2"))], 1, tasks)
        return cold + warm, tasks.created

    (inline, created), (slow, _) = both(scenario)
    assert created == 0
    assert inline == slow
    assert inline[1].startswith(b"HTTP/1.1 200 OK\r\nContent-Type: application/json; charset")
    assert json.loads(inline[1].partition(b"\r\n\r\n")[2])["response"] == {
        "uid": "uid-2",
        "allowed": True,
    }


@fast_path_only
def test_pipelined_inline_and_slow_answers_leave_in_the_order_of_the_requests() -> None:
    """One connection: seven requests in one write, then one more once they are answered,
    which is inline again (no task) now that aiohttp holds nothing of the connection."""
    tasks = TaskCount()
    pipelined = b"".join(
        [
            post(review(FOUND[0], uid="a")),  # cached: inline
            post(review(FOUND[1], uid="b")),  # a registry check: aiohttp
            post(review(FOUND[0], uid="c")),  # cached, but behind b: aiohttp too
            GET_HEALTHZ,
            post(review(MISSING, uid="d")),
            post(b"{", b"/"),  # not JSON
            post(review(FOUND[1], uid="e")),
        ]
    )

    async def scenario(server: Served) -> tuple[list[bytes], int]:
        asyncio.get_running_loop().set_task_factory(tasks)
        await exchange(server.port, [post(review(FOUND[0]))], 1)  # FOUND[0] cached
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(pipelined)
        answers = [masked(await read_answer(reader)) for _ in range(7)]
        tasks.counting = True
        writer.write(post(review(FOUND[1], uid="f")))
        answers.append(masked(await read_answer(reader)))
        tasks.counting = False
        writer.close()
        return answers, tasks.created

    (inline, created), (slow, _) = both(scenario)
    assert created == 0
    assert inline == slow
    uids = [re.search(rb'"uid": "(\w)"', a) for a in inline]
    assert [m[1] if m else None for m in uids] == [b"a", b"b", b"c", None, b"d", None, b"e", b"f"]
    assert inline[3].endswith(b"\r\n\r\nok\n")
    assert b'"allowed": false' in inline[4]
    assert inline[5].startswith(b"HTTP/1.1 400 Bad Request") and b"body is not JSON" in inline[5]


@fast_path_only
def test_a_review_arriving_in_pieces_is_answered_inline() -> None:
    tasks = TaskCount()
    request = post(review(*FOUND, uid="pieces"))
    cuts = [0, 5, 40, len(request) // 2, len(request) - 1, len(request)]
    pieces = [request[a:b] for a, b in itertools.pairwise(cuts)]

    async def scenario(server: Served) -> tuple[list[bytes], int]:
        asyncio.get_running_loop().set_task_factory(tasks)
        await exchange(server.port, [post(review(*FOUND))], 1)
        answers = await exchange(server.port, pieces, 1, tasks)
        return answers, tasks.created

    (inline, created), (slow, _) = both(scenario)
    assert created == 0
    assert inline == slow
    assert b'"uid": "pieces", "allowed": true' in inline[0]


CHUNKED = b"POST /validate HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize(
    ("request_", "answers"),
    [
        (post(b"not json"), 1),
        (post(b'{"kind": "Pod"}'), 1),
        (post(b"[" * 5000), 1),  # deeper than Python's parser: aiohttp's path prunes it
        (post(review(FOUND[0]), path=b"/nowhere"), 1),
        (b"GET /validate HTTP/1.1\r\nHost: t\r\n\r\n", 1),
        (b"POST /validate HTTP/1.1\r\nHost: t\r\nContent-Length: 9999999\r\n\r\n{", 1),
        (CHUNKED + b"%x\r\n" % len(review(FOUND[0])) + review(FOUND[0]) + b"\r\n0\r\n\r\n", 1),
        (post(review(FOUND[0]), extra=b"Expect: 100-continue\r\n"), 2),
        (post(review(FOUND[0])).replace(b"HTTP/1.1", b"HTTP/1.0", 1), 1),
        (post(review(FOUND[0]), extra=b"Content-Length: 3\r\n"), 1),
        (b"POST /validate HTTP/1.1\nHost: t\nContent-Length: 2\n\n{}", 1),
    ],
    ids=[
        "not-json", "not-a-review", "too-deep", "unknown-path", "wrong-method", "oversized",
        "chunked", "expect-continue", "http-1.0", "two-lengths", "bare-lf",
    ],
)  # fmt: skip
def test_hostile_and_unusual_requests_get_aiohttp_s_answer(request_: bytes, answers: int) -> None:
    async def scenario(server: Served) -> list[bytes]:
        await exchange(server.port, [post(review(FOUND[0]))], 1)  # FOUND[0] cached
        try:
            return await asyncio.wait_for(exchange(server.port, [request_], answers), 5)
        except asyncio.IncompleteReadError as exc:  # answered, then closed
            return [masked(exc.partial)]

    inline, slow = both(scenario)
    assert inline == slow
    assert inline[-1].startswith(b"HTTP/1."), inline


def test_inline_answers_are_counted_and_logged_as_aiohttp_s(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="imagecheck.webhook")

    async def scenario(server: Served) -> tuple[dict[str, float], list[dict[str, Any]]]:
        caplog.clear()
        await exchange(server.port, [post(review(*FOUND))], 1)
        await exchange(server.port, [post(review(*FOUND, MISSING, uid="u2")), post(b"{")], 2)
        await exchange(server.port, [post(review(FOUND[0], "Not A Ref", uid="u3"))], 1)
        metrics = server.webhook.metrics.registry
        samples = {
            f"{s.name}{sorted(s.labels.items())}": s.value
            for family in metrics.collect()
            for s in family.samples
            if s.name.endswith("_total") or s.name == "imagecheck_review_duration_seconds_count"
        }
        skip = set(logging.makeLogRecord({}).__dict__) | {"elapsed_ms", "message"}
        logs = [
            {k: v for k, v in r.__dict__.items() if k not in skip} | {"msg": r.getMessage()}
            for r in caplog.records
        ]
        return samples, logs

    inline, slow = both(scenario)
    assert inline == slow
    assert inline[0]["imagecheck_reviews_total[('result', 'allowed')]"] == 1
    assert inline[0]["imagecheck_reviews_total[('result', 'denied')]"] == 2
    assert inline[0]["imagecheck_reviews_total[('result', 'bad_request')]"] == 1


def test_a_client_that_does_not_read_its_answers_is_not_answered_into_memory() -> None:
    """Thousands of cached reviews pipelined by a client that reads nothing for a while (the
    kernel's buffers made small on both sides): the server stops answering and reading once
    its write buffer is full, and once the client reads, every answer comes, in order."""
    count = 4000
    requests = [post(review(FOUND[0], uid=f"{i:05d}")) for i in range(count)]

    async def scenario(server: Served) -> tuple[float, int, list[str]]:
        await exchange(server.port, [post(review(FOUND[0]))], 1)  # cached
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", server.port))
        reader, writer = await asyncio.open_connection(sock=sock)
        await asyncio.sleep(0.1)
        for conn in server.listener._open:
            assert conn.transport is not None
            conn.transport.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDBUF, 4096
            )
        reviews = server.webhook.metrics.reviews.labels("allowed")
        before = reviews._value.get()
        sending = asyncio.ensure_future(_send_all(writer, requests))
        await asyncio.sleep(1.0)
        answered = reviews._value.get() - before
        transports = [c.transport for c in server.listener._open if c.transport is not None]
        buffered = max(t.get_write_buffer_size() for t in transports)
        uids = []
        for _ in range(count):
            answer = await asyncio.wait_for(read_answer(reader), 10)
            uids.append(json.loads(answer.partition(b"\r\n\r\n")[2])["response"]["uid"])
        await sending
        writer.close()
        return answered, buffered, uids

    async def run() -> tuple[float, int, list[str]]:
        async with served(True) as server:
            return await scenario(server)

    answered, buffered, uids = asyncio.run(run())
    assert uids == [f"{i:05d}" for i in range(count)]
    assert answered < count / 4, answered  # about 64 KiB of answers, then a pause
    assert buffered < 256 * 1024, buffered


@fast_path_only
def test_a_client_that_pipelines_slow_reviews_unread_queues_one_request_not_all() -> None:
    """Reviews that each need a registry check (aiohttp's path), pipelined by a client that
    never reads its answers: aiohttp is handed one at a time and nothing more is read while
    it holds one, so what the server allocates stays far below what was sent (before, every
    request of each read was handed over, and aiohttp's parser kept the backlog)."""
    count = 6000
    payload = b"".join(post(review(f"registry.test/app:{i}", uid=f"{i:05d}")) for i in range(count))

    async def scenario(server: Served) -> tuple[int, int]:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(sock, ("127.0.0.1", server.port))
        await asyncio.sleep(0.1)
        for conn in server.listener._open:
            assert conn.transport is not None
            conn.transport.get_extra_info("socket").setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDBUF, 4096
            )
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            sending = asyncio.ensure_future(loop.sock_sendall(sock, payload))
            await asyncio.sleep(1.5)
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        sending.cancel()
        sock.close()
        return held, server.checker.calls

    async def run() -> tuple[int, int]:
        async with served(True) as server:
            return await scenario(server)

    held, checked = asyncio.run(run())
    assert len(payload) > 2 * 1024 * 1024
    assert checked < count / 10, checked  # the client stalled: the rest was never read
    assert held < 512 * 1024, held


async def _send_all(writer: asyncio.StreamWriter, requests: list[bytes]) -> None:
    for request in requests:
        writer.write(request)
        await writer.drain()


def test_idle_connections_are_closed_after_the_idle_timeout_and_busy_ones_never(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Answers by aiohttp and inline ones both count as activity: a connection that has one
    every 0.2 s outlives a 0.5 s idle timeout, then is closed 0.5 s after its last."""
    monkeypatch.setattr(phases_module, "IDLE_TIMEOUT", 0.5)

    async def scenario(server: Served) -> tuple[list[bytes], bool, bool]:
        await exchange(server.port, [post(review(FOUND[0]))], 1)  # cached
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        answers = []
        for request in [GET_HEALTHZ, *(post(review(FOUND[0], uid=f"u{i}")) for i in range(5))]:
            writer.write(request)
            answers.append(masked(await read_answer(reader)))
            await asyncio.sleep(0.2)
        open_after_busy = not reader.at_eof()
        closed = await asyncio.wait_for(reader.read(1), 2.0) == b""
        writer.close()
        return answers, open_after_busy, closed

    inline, slow = both(scenario)
    assert inline == slow
    answers, open_after_busy, closed = inline
    assert [b"ok" in answers[0]] + [f'"u{i}"'.encode() in a for i, a in enumerate(answers[1:])]
    assert open_after_busy and closed


@fast_path_only
def test_a_keep_alive_connection_answered_inline_sets_no_timer_per_request() -> None:
    """One review after another on one connection, each answered inline: the connection's
    idle and header deadlines move, its one timer stays (it made two a request before)."""

    async def scenario(server: Served) -> tuple[int, list[bytes]]:
        await exchange(server.port, [post(review(FOUND[0]))], 1)  # cached
        loop = asyncio.get_running_loop()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(GET_HEALTHZ)
        await read_answer(reader)
        timers = 0
        real = loop.call_at

        def counted(when: float, callback: Any, *args: Any, **kw: Any) -> asyncio.TimerHandle:
            nonlocal timers
            timers += 1
            return real(when, callback, *args, **kw)

        loop.call_at = counted  # type: ignore[method-assign,assignment]
        try:
            answers = []
            for i in range(300):
                writer.write(post(review(FOUND[0], uid=f"u{i}")))
                answers.append(await read_answer(reader))
        finally:
            loop.call_at = real  # type: ignore[method-assign]
        writer.close()
        return timers, answers

    async def run() -> tuple[int, list[bytes]]:
        async with served(True) as server:
            return await scenario(server)

    timers, answers = asyncio.run(run())
    assert all(b'"allowed": true' in answer for answer in answers)
    assert timers <= 3, timers


def test_lean_records_change_no_json_log_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` stops logging from finding callers, threads and processes: the JSON lines,
    which hold none of them, are unchanged (an exception's traceback included)."""
    formatter = JsonFormatter()
    logger = logging.getLogger("imagecheck.webhook.test")

    def lines() -> list[str]:
        handler = _Kept()
        logger.addHandler(handler)
        try:
            logger.warning("bad review", extra={"reason": "x", "status": 400})
            try:
                raise ValueError("boom")
            except ValueError:
                logger.exception("failed")
        finally:
            logger.removeHandler(handler)
        for record in handler.records:
            record.created, record.msecs = 0.0, 0.0
        return [formatter.format(record) for record in handler.records]

    before = lines()
    for name in ("_srcfile", "logThreads", "logProcesses", "logMultiprocessing"):
        monkeypatch.setattr(logging, name, getattr(logging, name))
    lean_records()
    assert lines() == before


def test_an_event_loop_error_is_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    """What asyncio logs of a protocol that failed (with its traceback) is one JSON line."""
    names = ("imagecheck", "aiohttp", "asyncio")
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate) for lg in map(logging.getLogger, names)]
    try:
        setup_json_logging(JsonFormatter(), verbose=False)
        loop = asyncio.new_event_loop()
        try:
            raise ValueError("boom\nsecond line")
        except ValueError as exc:
            loop.call_exception_handler(
                {"message": "Fatal error on SSL protocol", "exception": exc}
            )
        loop.close()
    finally:
        for logger, handlers, level, propagate in saved:
            logger.handlers[:], logger.propagate = handlers, propagate
            logger.setLevel(level)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    entry = json.loads(lines[0])
    assert (entry["logger"], entry["level"]) == ("asyncio", "error")
    assert entry["msg"].startswith("Fatal error on SSL protocol")
    assert "ValueError: boom" in entry["error"]


class _Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
