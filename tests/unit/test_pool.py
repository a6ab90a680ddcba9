"""imagecheck.pool: httpx's pool with one probe per reuse instead of one per idle connection
per request (issue #14). A real socket server: what matters is what goes over connections."""

from __future__ import annotations

import asyncio

import httpx

from imagecheck import pool

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class Server:
    """Answers each request on a connection with 200, then, with ``close_after_one``, hangs up
    (keep-alive promised, then broken: the idle connection the client holds is dead)."""

    def __init__(self, *, close_after_one: bool) -> None:
        self.close_after_one = close_after_one
        self.accepted = 0
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/"

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(ANSWER)
                await writer.drain()
                if self.close_after_one:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def lean_client(**limits: int) -> httpx.AsyncClient:
    client = httpx.AsyncClient(trust_env=False, limits=httpx.Limits(**limits))
    assert pool.install(client), "the lean pool no longer fits this httpcore: see pool.py"
    return client


def test_connections_are_reused() -> None:
    server = Server(close_after_one=False)

    async def main() -> None:
        async with server as url, lean_client(max_connections=4) as client:
            for _ in range(3):
                await asyncio.gather(*(client.get(url) for _ in range(4)))

    asyncio.run(main())
    assert server.accepted == 4


def test_a_connection_the_server_closed_is_not_reused() -> None:
    server = Server(close_after_one=True)

    async def main() -> None:
        async with server as url, lean_client(max_connections=1) as client:
            for _ in range(3):
                response = await client.get(url)
                assert response.content == b"ok"
                await asyncio.sleep(0.05)  # the server's hang-up arrives

    asyncio.run(main())
    assert server.accepted == 3


def test_idle_connections_beyond_the_keepalive_limit_are_closed() -> None:
    server = Server(close_after_one=False)

    async def main() -> int:
        async with server as url, lean_client(max_connections=4, max_keepalive_connections=1) as c:
            await asyncio.gather(*(c.get(url) for _ in range(4)))
            await c.get(url)  # the pool is re-planned: idle connections beyond one are closed
            return len(c._transport._pool.connections)  # type: ignore[attr-defined]

    assert asyncio.run(main()) == 1


def test_an_injected_transport_is_left_alone() -> None:
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda _: httpx.Response(200)))
    assert not pool.install(client)
    asyncio.run(client.aclose())


def test_a_proxy_keeps_its_own_pool() -> None:
    client = httpx.AsyncClient(proxy="http://127.0.0.1:9")
    pool.install(client)
    [proxied] = client._mounts.values()
    assert type(getattr(proxied, "_pool", None)) is not pool.LeanConnectionPool
    asyncio.run(client.aclose())
