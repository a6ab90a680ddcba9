"""Tests for registry._exceptions: httpx's exceptions as imagecheck's errors, and no library
text that can carry a header value (h11 quotes the one it refuses) in any message."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from imagecheck.errors import ProtocolError, RegistryError, TransientError
from imagecheck.registry._exceptions import transport_errors


def raised(exc: Exception) -> RegistryError:
    async def main() -> None:
        async with transport_errors("registry.test"):
            raise exc

    with pytest.raises(RegistryError) as info:
        asyncio.run(main())
    return info.value


# (id, httpx exception, error type, exact message)
CASES: list[tuple[str, Exception, type[RegistryError], str]] = [
    ("illegal-header", httpx.LocalProtocolError("Illegal header value b'Bearer tok-SECRET\\n'"),
     ProtocolError, "could not send a valid HTTP request to registry.test"),
    ("unsupported-protocol", httpx.UnsupportedProtocol("Request URL has an unsupported protocol"),
     ProtocolError, "registry.test: refusing a non-http(s) URL"),
    ("invalid-location", httpx.RemoteProtocolError("Invalid URL in location header: x."),
     ProtocolError, "registry.test redirected to an invalid URL"),
    # raised building the redirect to "data:text/plain,hello": not an httpx.HTTPError
    ("unparsable-location",
     httpx.InvalidURL("For absolute URLs, path must be empty or begin with '/'"),
     ProtocolError, "registry.test redirected to an invalid URL"),
    ("connect-error-text-made-printable", httpx.ConnectError("refused\n\x1b[31mfound x"),
     TransientError, "cannot talk to registry.test: refused??[31mfound x"),
    ("server-disconnected", httpx.RemoteProtocolError("Server disconnected"),
     TransientError, "cannot talk to registry.test: Server disconnected"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("exc", "kind", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_httpx_errors_are_classified_without_their_secrets(
    exc: Exception, kind: type[RegistryError], message: str
) -> None:
    error = raised(exc)
    assert type(error) is kind
    assert str(error) == message


def test_a_redirect_to_a_data_url_is_a_protocol_error() -> None:
    """What the fuzz suite met: a ping answered 301 to ``data:text/plain,hello``."""

    def moved(request: httpx.Request) -> httpx.Response:
        return httpx.Response(301, headers={"Location": "data:text/plain,hello"})

    async def main() -> None:
        transport = httpx.MockTransport(moved)
        async with (
            httpx.AsyncClient(transport=transport, follow_redirects=True) as client,
            transport_errors("registry.test"),
        ):
            await client.get("http://registry.test/v2/")

    with pytest.raises(ProtocolError, match=r"registry\.test redirected to an invalid URL"):
        asyncio.run(main())
