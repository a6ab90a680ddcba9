"""fastpath._client: the HTTP/1.1 transport under httpx, against a raw socket server
that answers each request with scripted bytes. What matters is what goes over connections, so
no HTTP library is on the server side: the bytes are exactly what a hostile or odd server
sends. (The real registries of the integration suite test the transport's ordinary use: plain
HTTP, TLS, Basic and token auth.)"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Sequence

import httpx
import pytest
import uvloop

from imagecheck.fastpath import WireTransport
from imagecheck.fastpath._response import MAX_HEAD_BYTES

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
# Answers per request on one connection: bytes to send, or None to hang up without answering.
Script = Callable[[int, bytes], bytes | None]


def always(answer: bytes) -> Script:
    return lambda _n, _head: answer


class Server:
    """Reads each request head on each connection and writes what ``script`` says; counts
    connections and requests. ``pause`` delays every answer (to fill a pool)."""

    def __init__(self, script: Script, *, pause: float = 0.0, close_after: int = 0) -> None:
        self.script = script
        self.pause = pause
        self.close_after = close_after
        self.accepted = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v2/"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head)
                served += 1
                answer = self.script(len(self.requests), head)
                if answer is None:
                    break
                await asyncio.sleep(self.pause)
                writer.write(answer)
                await writer.drain()
                if self.close_after and served >= self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # cancelled: the test's loop is ending
        writer.close()


def wire_client(max_connections: int = 4, **options: float) -> httpx.AsyncClient:
    timeout = options.pop("timeout", 5.0)
    transport = WireTransport(
        ssl.create_default_context(), max_connections=max_connections, **options
    )
    return httpx.AsyncClient(transport=transport, timeout=timeout)


def opened(client: httpx.AsyncClient) -> int:
    transport = client._transport
    assert isinstance(transport, WireTransport)
    return transport.opened


def run_requests(
    server: Server,
    rounds: Sequence[int],
    *,
    method: str = "GET",
    max_connections: int = 4,
    between: float = 0.0,
    **options: float,
) -> list[httpx.Response]:
    """``rounds[i]`` requests at once in round i; every response read whole."""

    async def main() -> list[httpx.Response]:
        answers = []
        async with server as url, wire_client(max_connections, **options) as client:
            for count in rounds:
                answers += await asyncio.gather(
                    *(client.request(method, url) for _ in range(count))
                )
                await asyncio.sleep(between)
        return answers

    return asyncio.run(main())


# -- keep-alive and the pool ---------------------------------------------------------------


def test_connections_are_reused_across_rounds() -> None:
    server = Server(always(OK))
    answers = run_requests(server, [4, 4, 4], max_connections=4)
    assert [a.content for a in answers] == [b"ok"] * 12
    assert server.accepted == 4


def test_never_more_connections_than_the_limit() -> None:
    server = Server(always(OK), pause=0.02)
    answers = run_requests(server, [12], max_connections=3)
    assert all(a.status_code == 200 for a in answers)
    assert server.accepted == 3


def test_a_connection_the_server_closed_is_not_reused() -> None:
    server = Server(always(OK), close_after=1)
    answers = run_requests(server, [1, 1, 1], max_connections=1, between=0.05)
    assert [a.content for a in answers] == [b"ok"] * 3
    assert server.accepted == 3


def test_a_reused_connection_closed_unanswered_is_retried_once_for_get() -> None:
    # The second request on the connection gets a hang-up: the server closed it as it was
    # picked. Sent again on a new connection, it is answered.
    server = Server(lambda n, _: None if n == 2 else OK)
    answers = run_requests(server, [1, 1], max_connections=1)
    assert [a.status_code for a in answers] == [200, 200]
    assert server.accepted == 2
    assert len(server.requests) == 3


def test_a_post_is_not_sent_twice() -> None:
    server = Server(lambda n, _: None if n == 2 else OK)
    with pytest.raises(httpx.RemoteProtocolError, match="disconnected without an answer"):
        run_requests(server, [1, 1], method="POST", max_connections=1)
    assert len(server.requests) == 2


def test_a_fresh_connection_closed_unanswered_is_an_error() -> None:
    server = Server(lambda _n, _h: None)
    with pytest.raises(httpx.RemoteProtocolError, match="disconnected without an answer"):
        run_requests(server, [1])
    assert len(server.requests) == 1


def test_an_idle_connection_expires() -> None:
    server = Server(always(OK))
    run_requests(server, [1, 1], max_connections=1, between=0.15, keepalive_expiry=0.05)
    assert server.accepted == 2


def test_a_full_pool_closes_another_origins_idle_connection() -> None:
    first, second = Server(always(OK)), Server(always(OK))

    async def main() -> int:
        async with first as a, second as b, wire_client(1) as client:
            for url in (a, b, a):
                assert (await client.get(url)).content == b"ok"
            return opened(client)

    assert asyncio.run(main()) == 3
    assert (first.accepted, second.accepted) == (2, 1)


def test_waiting_for_a_connection_times_out() -> None:
    server = Server(always(OK), pause=0.5)

    async def main() -> None:
        async with server as url, wire_client(1) as client:
            slow = asyncio.ensure_future(client.get(url))
            await asyncio.sleep(0.05)
            with pytest.raises(httpx.PoolTimeout):
                await client.get(url, timeout=httpx.Timeout(5.0, pool=0.05))
            assert (await slow).content == b"ok"

    asyncio.run(main())


def test_a_body_not_read_to_its_end_closes_its_connection() -> None:
    # Far more than is read ahead of the caller, so the rest is still on its way.
    size = 4 * 1024 * 1024
    big = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"x" * size

    async def main(server: Server) -> None:
        async with server as url, wire_client(1) as client:
            for _ in range(2):
                async with client.stream("GET", url) as response:
                    async for _chunk in response.aiter_raw():
                        break

    server = Server(always(big))
    asyncio.run(main(server))
    assert server.accepted == 2


# -- framing -------------------------------------------------------------------------------


def test_head_answer_has_no_body_whatever_its_length_and_keeps_the_connection() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nDocker-Content-Digest: sha256:ab\r\n\r\n"
    server = Server(always(answer))
    answers = run_requests(server, [1, 1, 1], method="HEAD", max_connections=1)
    assert [(a.status_code, a.content) for a in answers] == [(200, b"")] * 3
    assert answers[0].headers["docker-content-digest"] == "sha256:ab"
    assert server.accepted == 1


def test_chunked_body() -> None:
    answer = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"
    )
    server = Server(always(answer))
    answers = run_requests(server, [1, 1], max_connections=1)
    assert [a.content for a in answers] == [b"abcde"] * 2
    assert server.accepted == 1


def test_body_delimited_by_the_end_of_the_connection() -> None:
    server = Server(
        always(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end"), close_after=1
    )
    answers = run_requests(server, [1, 1], max_connections=1)
    assert [a.content for a in answers] == [b"until the end"] * 2
    assert server.accepted == 2


def test_204_and_304_have_no_body() -> None:
    answers = iter([b"HTTP/1.1 204 No Content\r\n\r\n", b"HTTP/1.1 304 Not Modified\r\n\r\n", OK])
    server = Server(lambda _n, _h: next(answers))
    got = run_requests(server, [1, 1, 1], max_connections=1)
    assert [(a.status_code, a.content) for a in got] == [(204, b""), (304, b""), (200, b"ok")]
    assert server.accepted == 1


def test_informational_answers_are_skipped() -> None:
    server = Server(always(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + OK))
    [answer] = run_requests(server, [1])
    assert (answer.status_code, answer.content, "link" in answer.headers) == (200, b"ok", False)


def test_http_1_0_without_keep_alive_is_not_reused() -> None:
    server = Server(always(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"))
    run_requests(server, [1, 1], max_connections=1)
    assert server.accepted == 2


def test_a_second_answer_to_one_request_stops_reuse() -> None:
    server = Server(always(OK + OK))
    answers = run_requests(server, [1, 1], max_connections=1, between=0.05)
    assert [a.content for a in answers] == [b"ok"] * 2
    assert server.accepted == 2


def test_a_large_body_streams_through_the_read_buffer() -> None:
    size = 3 * 1024 * 1024
    server = Server(always(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % size + b"y" * size))
    [answer] = run_requests(server, [1])
    assert len(answer.content) == size


# -- hostile answers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", id="two-lengths"
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            id="length-and-chunked",
        ),
        pytest.param(
            b"HTTP/1.1 200 OK\r\nA: b\r\n folded\r\nContent-Length: 0\r\n\r\n", id="folded"
        ),
        pytest.param(b"HTTP/1.1 2000 OK\r\n\r\n", id="status"),
        pytest.param(b"SSH-2.0-OpenSSH_9.6\r\n", id="not-http"),
        pytest.param(b"HTTP/1.1 200 OK\r\nBad\x00Name: x\r\n\r\n", id="nul-in-name"),
        pytest.param(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", id="upgrade"),
    ],
)
def test_malformed_answers_are_protocol_errors(answer: bytes) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        run_requests(Server(always(answer)), [1])


def test_an_oversized_head_is_refused() -> None:
    huge = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (MAX_HEAD_BYTES + 1) + b"\r\n\r\n"
    with pytest.raises(httpx.RemoteProtocolError, match="too large"):
        run_requests(Server(always(huge)), [1])


def test_too_many_headers_are_refused() -> None:
    many = b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(300)) + b"\r\n"
    with pytest.raises(httpx.RemoteProtocolError):
        run_requests(Server(always(many)), [1])


def test_a_body_cut_short_is_a_read_error() -> None:
    server = Server(always(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"), close_after=1)
    with pytest.raises(httpx.ReadError):
        run_requests(server, [1])


def test_silence_is_a_read_timeout() -> None:
    server = Server(always(OK), pause=2.0)
    with pytest.raises(httpx.ReadTimeout):
        run_requests(server, [1], timeout=0.1)


def test_a_closed_port_is_a_connect_error() -> None:
    async def main() -> None:
        async with wire_client() as client:
            await client.get("http://127.0.0.1:9/v2/")

    with pytest.raises(httpx.ConnectError):
        asyncio.run(main())


def test_a_header_with_a_line_break_is_never_sent() -> None:
    server = Server(always(OK))

    async def main() -> None:
        async with server as url, wire_client() as client:
            await client.get(url, headers={"Authorization": "Bearer a\r\nX-Injected: 1"})

    with pytest.raises(httpx.LocalProtocolError):
        asyncio.run(main())
    assert server.accepted == 0


def test_the_request_is_what_httpx_built() -> None:
    server = Server(always(OK))

    async def main() -> None:
        async with server as url, wire_client() as client:
            await client.head(url + "library/app/manifests/1.0?x=1", headers={"Accept": "a/b"})

    asyncio.run(main())
    [head] = server.requests
    lines = head.decode().split("\r\n")
    assert lines[0] == "HEAD /v2/library/app/manifests/1.0?x=1 HTTP/1.1"
    assert "Accept: a/b" in lines
    assert any(line.startswith("Host: 127.0.0.1:") for line in lines)


def test_non_http_schemes_are_refused() -> None:
    async def main() -> None:
        async with wire_client() as client:
            await client.get("ftp://127.0.0.1/")

    with pytest.raises(httpx.UnsupportedProtocol):
        asyncio.run(main())


def test_the_transport_runs_on_uvloop() -> None:
    """``serve`` runs on uvloop (cli/_serve.py), whose transports are not asyncio.Transport
    subclasses: reuse, HEAD, chunked bodies and the stale-connection retry, on its loop."""
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n"
    answers = {1: OK, 2: chunked, 3: head, 4: None, 5: OK}
    server = Server(lambda n, _: answers[n])

    async def main() -> list[bytes]:
        async with server as url, wire_client(1) as client:
            got = [(await client.get(url)).content, (await client.get(url)).content]
            got.append((await client.head(url)).content)
            got.append((await client.get(url)).content)  # hang-up, then sent again
            return got

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(main()) == [b"ok", b"ok", b"", b"ok"]
    assert server.accepted == 2
