"""``imagecheck.fastpath``'s switch, and what the registry client asks of it: the transport
(fast, stock, or httpx's own for a proxy) and no cookies over either."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest
from aiohttp import web

from imagecheck import fastpath
from imagecheck.fastpath import WireTransport
from imagecheck.registry._session import Session, new_session

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY")


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("value", "on"),
    [
        (None, True),
        ("1", True),
        ("on", True),
        ("", True),
        ("0", False),
        ("off", False),
        (" OFF ", False),
        ("false", False),
        ("no", False),
    ],
    ids=repr,
)
def test_the_switch_is_on_unless_turned_off(
    monkeypatch: pytest.MonkeyPatch, value: str | None, on: bool
) -> None:
    if value is None:
        monkeypatch.delenv(fastpath.ENVIRONMENT_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(fastpath.ENVIRONMENT_VARIABLE, value)
    assert fastpath.enabled() is on


@pytest.mark.parametrize(
    ("switch", "proxy", "fast"),
    [("1", None, True), ("0", None, False), ("1", "http://proxy:3128", False)],
    ids=["fast", "stock", "proxy-in-the-environment"],
)
def test_the_registry_transport_is_the_seam_s_choice(
    monkeypatch: pytest.MonkeyPatch, switch: str, proxy: str | None, fast: bool
) -> None:
    monkeypatch.setenv(fastpath.ENVIRONMENT_VARIABLE, switch)
    if proxy is not None:
        monkeypatch.setenv("https_proxy", proxy)
    transport = fastpath.registry_transport(ssl.create_default_context(), max_connections=2)
    # None: httpx builds its own, and it alone reads the proxy variables.
    assert isinstance(transport, WireTransport) if fast else transport is None


def plain_session() -> Session:
    """A registry client's session with no hooks, its transport the seam's choice."""
    return new_session(
        ssl.create_default_context(),
        timeout=5.0,
        pool_size=2,
        user_agent="test",
        on_request=[],
        on_response=[],
    )


async def _cookie_server(sent: list[str | None]) -> web.AppRunner:
    """Every answer sets a cookie; every request's ``Cookie`` header is noted in ``sent``."""

    async def answer(request: web.Request) -> web.StreamResponse:
        sent.append(request.headers.get("Cookie"))
        headers = {"Set-Cookie": f"session={request.path}; Path=/"}
        if request.path == "/v2/hop":
            raise web.HTTPFound("/v2/landed", headers=headers)
        return web.Response(text="{}", headers=headers)

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner


@pytest.mark.parametrize("switch", ["1", "0"], ids=["fast", "stock"])
def test_a_registry_s_cookies_are_never_sent_back(
    monkeypatch: pytest.MonkeyPatch, switch: str
) -> None:
    monkeypatch.setenv(fastpath.ENVIRONMENT_VARIABLE, switch)
    sent: list[str | None] = []

    async def main() -> None:
        runner = await _cookie_server(sent)
        port = runner.addresses[0][1]
        session = plain_session()
        try:
            for path in ("/v2/", "/v2/hop", "/v2/", "/v2/library/app/manifests/1"):
                response = await session.get(f"http://127.0.0.1:{port}{path}")
                assert response.status_code == 200
                assert "set-cookie" in response.headers  # offered, every time
            session.cookies.set("planted", "1")
            session.cookies = {"given": "1"}
            await session.get(f"http://127.0.0.1:{port}/v2/")
            assert not session.cookies
        finally:
            await session.aclose()
            await runner.cleanup()

    asyncio.run(main())
    assert sent == [None] * 6  # the redirect's hop included


def test_the_session_is_an_httpx_client_with_the_seam_s_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(fastpath.ENVIRONMENT_VARIABLE, "1")
    session = plain_session()
    assert isinstance(session, Session)
    assert isinstance(session, httpx.AsyncClient)
    asyncio.run(session.aclose())
