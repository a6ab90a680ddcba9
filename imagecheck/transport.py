"""httpx's exceptions, classified once into imagecheck's error tree (``errors.py``): what is
temporary (connection trouble, timeouts) and what is not (an untrusted certificate)."""

from __future__ import annotations

import ssl

import httpx

from imagecheck.errors import CertificateError, ProtocolError, TransientError


class transport_errors:
    """Turns httpx transport exceptions into imagecheck's error tree."""

    def __init__(self, host: str) -> None:
        self.host = host

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        """Never suppresses: re-raises httpx errors as imagecheck's, leaves the rest alone."""
        if exc is None or not isinstance(exc, httpx.HTTPError):
            return
        cert = _certificate_problem(exc)
        if cert is not None:
            raise CertificateError(
                f"TLS certificate of {self.host} is not trusted ({cert}); "
                "pass --ca-file with the CA that signed it"
            ) from None
        if isinstance(exc, httpx.TimeoutException):
            raise TransientError(f"timed out talking to {self.host}") from None
        if isinstance(exc, httpx.TooManyRedirects):
            raise ProtocolError(f"{self.host}: too many redirects") from None
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


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__
