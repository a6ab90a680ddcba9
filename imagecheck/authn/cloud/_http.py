"""One bounded request to a cloud's identity or token endpoint (STS, the ECR API, a metadata
server, Google STS, Azure AD, ACR's exchange).

These endpoints are fixed by the cloud keychain (its default, or the cloud's own standard
environment variable): nothing a registry sends can name one. So the request is held to what
such an endpoint does, and anything else is refused rather than followed:

* **no redirects**: a 3xx is an error (a token endpoint never redirects; a metadata server
  that did would be sending a credential somewhere else);
* **a capped answer**: at most :data:`MAX_CLOUD_ANSWER` bytes (every answer here is a small
  JSON or XML document), read through the one capped reader;
* **inside the deadline**: each call gets the smaller of its own timeout and what is left of
  the run's deadline, connection and TLS handshake included;
* **TLS as for registries**: the context comes from the caller (``--ca-file``, then
  ``SSL_CERT_FILE``/the system store), so a VPC endpoint behind a private CA works as a
  registry behind one does. Plain ``http`` is for the metadata servers and the EKS Pod
  Identity agent, which serve nothing else.

Failures are :class:`~imagecheck.errors.CloudAuthError`, temporary when a retry could help
(no connection, a timeout, 429 and 5xx answers); their messages name the endpoint and never
hold a header or a body beyond a short, printable reason.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx

from imagecheck._capped import read_capped
from imagecheck._deadline import Deadline
from imagecheck._text import printable
from imagecheck.authn._credentials import header_problem
from imagecheck.errors import CloudAuthError, DeadlineExceeded

# Every answer here is a small document: an STS answer with a session token is about 2 KiB,
# an Azure AD token about 3 KiB.
MAX_CLOUD_ANSWER = 64 * 1024
# One call's own limit: these endpoints answer in milliseconds when they answer at all.
DEFAULT_CALL_TIMEOUT = 10.0
_REASON_MAX = 200

TLSFactory = Callable[[], ssl.SSLContext]


@dataclass(frozen=True, slots=True)
class CloudAnswer:
    """What an endpoint answered: its status, headers and (capped) body."""

    status: int
    headers: httpx.Headers
    body: bytes = field(repr=False)


@dataclass(frozen=True)
class CloudHTTP:
    """Sends one request at a time to a cloud endpoint, bounded as the module says.

    A client is made per call: these calls are rare (a token lives for hours and is cached),
    and a client bound to no event loop may serve ``check()`` run after run.
    """

    tls: TLSFactory = ssl.create_default_context
    timeout: float = DEFAULT_CALL_TIMEOUT
    max_answer: int = MAX_CLOUD_ANSWER

    async def send(
        self,
        method: str,
        url: str,
        *,
        what: str,
        deadline: Deadline,
        headers: Mapping[str, str] | None = None,
        content: bytes | None = None,
    ) -> CloudAnswer:
        """``method url`` with ``headers`` and ``content``; ``what`` names the endpoint in
        messages ("AWS STS at https://sts.amazonaws.com")."""
        for name, value in (headers or {}).items():
            if header_problem(value) is not None:  # httpx would raise, naming nothing
                raise CloudAuthError(f"{what}: the {name} header {header_problem(value)}")
        budget = min(self.timeout, deadline.remaining())
        if budget <= 0:
            raise DeadlineExceeded(f"{what}: the deadline passed before it was asked")
        try:
            async with asyncio.timeout(budget):
                return await self._send(method, url, what, headers, content)
        except TimeoutError:
            if deadline.remaining() <= 0:
                raise DeadlineExceeded(f"{what} did not answer before the deadline") from None
            raise CloudAuthError(
                f"{what} did not answer within {budget:g}s", temporary=True
            ) from None

    async def _send(
        self,
        method: str,
        url: str,
        what: str,
        headers: Mapping[str, str] | None,
        content: bytes | None,
    ) -> CloudAnswer:
        verify: ssl.SSLContext | bool = self.tls() if url.startswith("https:") else False
        try:
            async with (
                httpx.AsyncClient(verify=verify, trust_env=False, follow_redirects=False) as client,
                client.stream(method, url, headers=headers, content=content) as response,
            ):
                if response.is_redirect:
                    raise CloudAuthError(
                        f"{what} answered a redirect (HTTP {response.status_code}), not followed"
                    )
                body = await read_capped(
                    response, self.max_answer, f"the answer of {what}", error=CloudAuthError
                )
                return CloudAnswer(response.status_code, response.headers, body)
        except httpx.InvalidURL as exc:
            raise CloudAuthError(f"{what}: invalid URL: {printable(str(exc))}") from None
        except httpx.TransportError as exc:
            reason = printable(str(exc), _REASON_MAX) or type(exc).__name__
            untrusted = _untrusted(exc)  # a certificate will not verify on a retry either
            raise CloudAuthError(
                f"cannot reach {what}: {reason}", temporary=not untrusted
            ) from None


def _untrusted(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):  # the cause chain httpx and httpcore build is a few links long
        if seen is None:
            return False
        if isinstance(seen, ssl.SSLCertVerificationError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def answer_reason(answer: CloudAnswer, detail: str = "") -> str:
    """``HTTP <status>`` and, when given, a short printable ``detail`` the endpoint sent (an
    error code and message it documents: never the body as it is)."""
    shown = printable(detail, _REASON_MAX) if detail else ""
    return f"HTTP {answer.status}" + (f": {shown}" if shown else "")


def temporary_status(status: int) -> bool:
    """Whether a retry could help an answer of ``status``: throttling and server errors."""
    return status in (408, 429) or status >= 500
