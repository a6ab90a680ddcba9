"""httpx's exceptions, classified once into imagecheck's error tree (``errors.py``): what is
temporary (connection trouble, timeouts) and what is not (an untrusted certificate).

A library's exception text is never trusted in a message: h11 quotes the header value it
refuses (``Illegal header value b'Bearer <token>'``), and a server's bytes can reach others.
So a request that could not be *sent* says so without the text, and other texts are made
printable (``_text.printable``)."""

from __future__ import annotations

import ssl

import httpx

from imagecheck._text import printable
from imagecheck.errors import CertificateError, Hint, NotTLSError, ProtocolError, TransientError

# httpx's RemoteProtocolError for a Location header that is not a URL: the registry's fault,
# not the connection's, so not worth a retry.
_INVALID_LOCATION = "Invalid URL in location header"
# What OpenSSL says when the first bytes back are not a TLS record, e.g. "HTTP/1.1 400":
# the server speaks plain HTTP (1.1 and 3.0 say the first; 3.2 and later, the others).
_NOT_TLS_REASONS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG", "HTTP_REQUEST"}
)


class transport_errors:
    """Turns httpx transport exceptions into imagecheck's error tree."""

    def __init__(self, host: str) -> None:
        self.host = host

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        """Never suppresses: re-raises httpx errors as imagecheck's, leaves the rest alone."""
        if isinstance(exc, httpx.InvalidURL):
            # Not an HTTPError: httpx raises it building a redirect to a Location it cannot
            # parse as a URL it would follow (``data:text/plain,x``).
            raise ProtocolError(f"{self.host} redirected to an invalid URL") from None
        if exc is None or not isinstance(exc, httpx.HTTPError):
            return
        cert = _certificate_problem(exc)
        if cert is not None:
            raise CertificateError(
                f"TLS certificate of {self.host} is not trusted ({printable(cert)})",
                hint=Hint(ca_file=True),
            ) from None
        if _not_tls(exc):
            raise NotTLSError(f"{self.host} does not speak TLS (a plain-HTTP server?)") from None
        if isinstance(exc, httpx.TimeoutException):
            raise TransientError(f"timed out talking to {self.host}") from None
        if isinstance(exc, httpx.TooManyRedirects):
            raise ProtocolError(f"{self.host}: too many redirects") from None
        if isinstance(exc, httpx.LocalProtocolError):
            # Our side broke HTTP (a header h11 refuses): no retry mends it; never its text.
            raise ProtocolError(f"could not send a valid HTTP request to {self.host}") from None
        if isinstance(exc, httpx.UnsupportedProtocol):
            # A redirect to file:// or ftp:// (netguard refuses those first).
            raise ProtocolError(f"{self.host}: refusing a non-http(s) URL") from None
        if _INVALID_LOCATION in str(exc):
            raise ProtocolError(f"{self.host} redirected to an invalid URL") from None
        if isinstance(exc, httpx.TransportError):
            raise TransientError(f"cannot talk to {self.host}: {_describe(exc)}") from None
        raise ProtocolError(f"{self.host}: {_describe(exc)}") from None


def _certificate_problem(exc: BaseException) -> str | None:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return seen.verify_message or "verification failed"
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return text.split("CERTIFICATE_VERIFY_FAILED", 1)[1].strip(" ]:()") or "verify failed"
    return None


def _not_tls(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLError) and seen.reason in _NOT_TLS_REASONS:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return printable(text) if text else type(exc).__name__
