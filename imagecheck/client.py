"""The registry client: one shared ``httpx.AsyncClient``, one ping per registry, one ``HEAD``
per image.

``ImageChecker.check_many`` checks images concurrently (bounded), sharing connections, pings
and tokens. A check asks ``HEAD /v2/<name>/manifests/<tag-or-digest>`` with every manifest
media type in ``Accept`` (without the index types, registries answer 404 for multi-arch tags)
and turns the answer into a :class:`CheckResult`. Failures that may pass are retried by the
policy in ``retry.py``; the run's deadline bounds everything.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Self

import httpx

from imagecheck import __version__
from imagecheck.auth import (
    RegistryAuth,
    RegistryAuthState,
    TokenCache,
    TokenFetcher,
)
from imagecheck.bounded import (
    MAX_ERROR_BODY,
    MAX_MANIFEST_SIZE,
    authorization_secrets,
    bound_body,
    parse_json,
    printable,
    read_capped,
    read_prefix,
    redact,
)
from imagecheck.challenge import pick_challenge
from imagecheck.credentials import (
    AnonymousKeychain,
    Credentials,
    Keychain,
    resolve_credentials,
)
from imagecheck.errors import (
    AuthenticationError,
    CertificateError,
    Hint,
    NotTLSError,
    ProtocolError,
    RegistryError,
    TransientError,
)
from imagecheck.mediatypes import INDEX_MEDIA_TYPES, MANIFEST_ACCEPT
from imagecheck.netguard import check_destination, named_host
from imagecheck.platform import (
    Platform,
    config_digest,
    config_platform,
    describe,
    index_platforms,
    schema1_platform,
)
from imagecheck.reference import Reference
from imagecheck.result import CheckResult, Status
from imagecheck.retry import (
    TRANSIENT_STATUS_CODES,
    Deadline,
    RetryPolicy,
    parse_retry_after,
)
from imagecheck.tls import (
    insecure_ssl_context,
    is_loopback,
    load_system_trust,
    verifying_context,
)
from imagecheck.transport import transport_errors

log = logging.getLogger("imagecheck")

# Marks the HTTPS probe of a loopback/insecure registry's ping (request extensions).
_PROBE = "imagecheck.tls_probe"
# Registries that cannot HEAD a manifest answer one of these; GET then tells.
HEAD_UNSUPPORTED = frozenset({400, 405, 501})
# The digests a registry's answer may name (Docker-Content-Digest, a config descriptor), with
# the length of their lowercase-hex encoding: the OCI image-spec's registered algorithms
# (descriptor.md#registered-algorithms). See _answered_digest for why nothing else counts.
_REGISTERED_DIGESTS = {"sha256": 64, "sha512": 128}
_LOWER_HEX = re.compile(r"[0-9a-f]+")
# Errors remembered for checks in progress (one each): more than run at once, and bounded.
MAX_LAST_ERRORS = 4096
# Registry hosts remembered (scheme and challenge from the ping), least recently used first.
MAX_REGISTRIES = 1024


@dataclass(frozen=True)
class ClientOptions:
    """How to reach registries. Built once by the CLI (or a library user)."""

    timeout: float = 10.0
    retries: int = 3
    concurrency: int = 16
    insecure_registries: frozenset[str] = frozenset()
    ca_files: tuple[Path, ...] = ()
    user_agent: str = f"imagecheck/{__version__}"
    # (source registry, mirror host) pairs, in the order mirrors are tried.
    mirrors: tuple[tuple[str, str], ...] = ()
    # Count a 401/403 on the manifest (after a token was granted) as missing.
    denied_as_missing: bool = False
    # Found is not enough: the image must offer this platform.
    platform: Platform | None = None


@dataclass
class _Registry:
    """What we know of one registry host: how to reach it and how it wants auth."""

    host: str
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    auth: RegistryAuthState | None = None


class ImageChecker:
    """Checks image references against their registries. Use as an async context manager."""

    def __init__(
        self,
        options: ClientOptions | None = None,
        keychain: Keychain | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.options = options or ClientOptions()
        self.keychain: Keychain = keychain or AnonymousKeychain()
        self.retry = retry_policy or RetryPolicy(retries=self.options.retries)
        self.stats: Counter[str] = Counter()
        # Called with (request kind, HTTP status) for every registry answer (metrics).
        self.observers: list[Callable[[str, int], None]] = []
        # The --ca-file CAs now; the system store when the first HTTPS request needs it (a
        # plain-HTTP local registry never does). See _on_request and _ping.
        self._verify = verifying_context(self.options.ca_files)
        self._trust_loaded = False
        # Per registry host, least recently used first: a webhook meets hosts that any pod
        # spec names, so the memory of them is bounded (issue #10).
        self._registries: OrderedDict[str, _Registry] = OrderedDict()
        self._tokens = TokenCache()
        # The last error of each check in progress, for a check the deadline cuts short.
        self._last_error: OrderedDict[str, str] = OrderedDict()
        limits = httpx.Limits(max_connections=max(1, self.options.concurrency))
        common = {
            "timeout": httpx.Timeout(self.options.timeout),
            "limits": limits,
            # Asked for identity; a body compressed unasked is still decoded within its cap.
            "headers": {"User-Agent": self.options.user_agent, "Accept-Encoding": "identity"},
            "follow_redirects": True,
            "event_hooks": {
                "request": [self._on_request],
                "response": [self._on_response, _bound_body],
            },
        }
        self._client = httpx.AsyncClient(verify=self._verify, transport=transport, **common)  # type: ignore[arg-type]
        # Only when some registry is explicitly insecure: TLS without verification.
        self._insecure_client = (
            httpx.AsyncClient(verify=insecure_ssl_context(), transport=transport, **common)  # type: ignore[arg-type]
            if self.options.insecure_registries
            else self._client
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()
        if self._insecure_client is not self._client:
            await self._insecure_client.aclose()

    # -- public API ---------------------------------------------------------------------

    async def check_many(
        self, items: Sequence[tuple[str, Reference]], deadline: Deadline
    ) -> list[CheckResult]:
        """Check every ``(image text, reference)`` pair, at most ``concurrency`` at once.

        Results come back in input order. Checks still running at the deadline are cancelled
        and reported as errors; the finished ones keep their answers.
        """
        limit = asyncio.Semaphore(max(1, self.options.concurrency))
        unique: dict[Reference, asyncio.Task[CheckResult]] = {}

        async def bounded(image: str, ref: Reference) -> CheckResult:
            async with limit:
                return await self.check(ref, deadline, image=image)

        for image, ref in items:
            if ref not in unique:
                unique[ref] = asyncio.ensure_future(bounded(image, ref))
        tasks = list(unique.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=deadline.remaining())
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        results: list[CheckResult] = []
        for image, ref in items:
            task = unique[ref]
            if task.cancelled():
                last = self._last_error.get(image)
                message = "deadline exceeded before the registry answered"
                result = CheckResult(
                    image,
                    ref,
                    Status.ERROR,
                    message=f"{message} (last error: {last})" if last else message,
                    registry=ref.api_host,
                )
            else:
                result = task.result()
            results.append(result if result.image == image else replace(result, image=image))
        return results

    async def check(
        self,
        ref: Reference,
        deadline: Deadline,
        *,
        image: str | None = None,
        keychain: Keychain | None = None,
    ) -> CheckResult:
        """Check one reference; never raises for registry trouble (that is a result).

        With mirrors configured for its registry, they are asked first, in order, and the
        registry itself last, as containerd does with ``hosts.toml``: the first *found* wins,
        and only the last host's answer is final otherwise. ``keychain`` replaces the
        checker's own for this check (the webhook adds a pod's pull secrets).
        """
        image = str(ref) if image is None else image
        started = time.monotonic()
        endpoints = self._endpoints(ref)
        tried: list[str] = []
        for endpoint in endpoints:
            result = await self._check_endpoint(endpoint, image, deadline, keychain)
            if result.status is Status.FOUND or endpoint is endpoints[-1]:
                break
            tried.append(f"{endpoint.api_host}: {result.status.value}")
        self._last_error.pop(image, None)  # the result says it now
        if tried:
            result = replace(result, message=f"{result.message} (mirrors: {'; '.join(tried)})")
        elapsed = (time.monotonic() - started) * 1000
        return replace(result, reference=ref, elapsed_ms=elapsed)

    def _endpoints(self, ref: Reference) -> list[Reference]:
        mirrors = [m for source, m in self.options.mirrors if source == ref.registry]
        return [*(replace(ref, registry=m) for m in mirrors), ref]

    async def _check_endpoint(
        self, ref: Reference, image: str, deadline: Deadline, keychain: Keychain | None
    ) -> CheckResult:
        keys = keychain or self.keychain
        try:
            # Before any request to the registry, inside the deadline, outside the attempt's
            # timeout: a credential helper runs here, once per registry (issue #10).
            creds = await resolve_credentials(keys, ref, deadline)
            result = await self.retry.run(lambda: self._check_once(ref, image, creds), deadline)
        except RegistryError as exc:
            status = Status.DENIED if isinstance(exc, AuthenticationError) else Status.ERROR
            return CheckResult(
                image, ref, status, message=str(exc), registry=ref.api_host, hint=exc.hint
            )
        if result.status is Status.DENIED and self.options.denied_as_missing:
            # Docker Hub (for missing repositories) and Artifactory virtual repositories deny
            # what does not exist; the token exchange succeeded, so call it missing.
            message = f"{result.message}; counted as missing (--denied-as-missing)"
            return replace(result, status=Status.MISSING, message=message)
        return result

    # -- one attempt ----------------------------------------------------------------------

    async def _check_once(
        self, ref: Reference, image: str, candidates: Sequence[Credentials]
    ) -> CheckResult:
        try:
            async with asyncio.timeout(self.options.timeout):
                return await self._ask_manifest(ref, image, candidates)
        except TimeoutError:
            error = TransientError(
                f"{ref.api_host} did not answer within {self.options.timeout:g}s"
            )
            self._note_error(image, str(error))
            raise error from None
        except RegistryError as exc:
            # Kept so that a check the deadline cuts short can still say what went wrong.
            self._note_error(image, str(exc))
            raise

    def _note_error(self, image: str, message: str) -> None:
        """Bounded (issue #10): a finished check drops its entry (``check``); the entries of
        checks that never finish are dropped oldest first past MAX_LAST_ERRORS."""
        self._last_error[image] = message
        self._last_error.move_to_end(image)
        while len(self._last_error) > MAX_LAST_ERRORS:
            self._last_error.popitem(last=False)

    async def _ask_manifest(
        self, ref: Reference, image: str, candidates: Sequence[Credentials]
    ) -> CheckResult:
        registry = await self._registry(ref)
        if self.options.platform is not None:
            # The platform list is in the body: one GET instead of HEAD.
            response, auth, body = await self._send("GET", ref, registry, candidates)
            result = self._classify(ref, image, response, auth, body)
            if result.status is not Status.FOUND:
                return result
            return await self._match_platform(ref, registry, candidates, result, body)
        response, auth, _ = await self._send("HEAD", ref, registry, candidates)
        digest = response.headers.get("Docker-Content-Digest", "")
        if response.status_code in HEAD_UNSUPPORTED or (
            response.status_code == 200 and ref.digest and not registered_digest(digest)
        ):
            # No HEAD support, or no usable digest to verify a pin against: GET and hash the body.
            response, auth, body = await self._send("GET", ref, registry, candidates)
            return self._classify(ref, image, response, auth, body)
        return self._classify(ref, image, response, auth, None)

    async def _match_platform(
        self,
        ref: Reference,
        registry: _Registry,
        candidates: Sequence[Credentials],
        result: CheckResult,
        body: bytes,
    ) -> CheckResult:
        """Found, but for this platform? An index lists its platforms; a single manifest
        names its config blob, which says (one more GET)."""
        want = self.options.platform
        assert want is not None
        offered = await self._platforms_of(ref, registry, candidates, result, body)
        if any(want.satisfied_by(p) for p in offered):
            return replace(result, message=f"{result.message}, with {want}")
        return replace(
            result,
            status=Status.MISSING,
            message=f"{ref} exists but not for {want}; it has: {describe(offered)}",
        )

    async def _platforms_of(
        self,
        ref: Reference,
        registry: _Registry,
        candidates: Sequence[Credentials],
        result: CheckResult,
        body: bytes,
    ) -> list[Platform]:
        if result.media_type in INDEX_MEDIA_TYPES or b'"manifests"' in body:
            return index_platforms(body)
        legacy = schema1_platform(body)
        if legacy is not None:
            return [legacy]
        digest = config_digest(body)
        if not registered_digest(digest):
            # It goes into a URL path: nothing but algorithm:hex gets there.
            raise ProtocolError(
                f"{ref.api_host} served a manifest whose config digest is not a sha256 or "
                f"sha512 digest ({printable(digest, 80)!r})"
            )
        path = f"/v2/{ref.repository}/blobs/{digest}"
        response, _, config = await self._send("GET", ref, registry, candidates, path=path)
        if response.status_code != 200:
            raise ProtocolError(
                f"{ref.api_host} answered HTTP {response.status_code} for the image config",
                status_code=response.status_code,
            )
        return [config_platform(config)]

    async def _send(
        self,
        method: str,
        ref: Reference,
        registry: _Registry,
        candidates: Sequence[Credentials],
        *,
        path: str | None = None,
    ) -> tuple[httpx.Response, RegistryAuth, bytes]:
        """One request (the manifest, unless ``path`` says otherwise) through the auth flow;
        transient answers raise."""
        assert registry.auth is not None
        path = path or f"/v2/{ref.repository}/manifests/{ref.identifier}"
        url = registry.auth.base_url.join(path)
        client = self._client_for(ref)
        host = registry.auth.base_url.host
        fetcher = TokenFetcher(client, registry_host=host)
        auth = RegistryAuth(registry.auth, candidates, self._tokens, fetcher)
        request = client.build_request(
            method, url, headers={"Accept": MANIFEST_ACCEPT}, extensions=named_host(host)
        )
        async with transport_errors(ref.api_host):
            response = await client.send(request, auth=auth, stream=True)
            try:
                body = await _read_body(response)
            finally:
                await response.aclose()
        if response.status_code in TRANSIENT_STATUS_CODES:
            raise TransientError(
                f"{ref.api_host} answered HTTP {response.status_code} ({_reason(response, body)})",
                status_code=response.status_code,
                retry_after=parse_retry_after(response.headers.get("Retry-After")),
            )
        return response, auth, body

    def _classify(
        self,
        ref: Reference,
        image: str,
        response: httpx.Response,
        auth: RegistryAuth,
        body: bytes | None,
    ) -> CheckResult:
        status = response.status_code
        host = ref.api_host
        if status == 200:
            digest = _answered_digest(ref, response, body)
            media_type = response.headers.get("Content-Type", "").split(";")[0].strip() or None
            size = _content_length(response, body)
            return CheckResult(
                image,
                ref,
                Status.FOUND,
                message=f"found in {host}",
                digest=digest,
                media_type=media_type,
                size=size,
                registry=host,
            )
        if status == 404:
            what = f"digest {ref.digest}" if ref.digest else f"tag {ref.tag!r}"
            return CheckResult(
                image,
                ref,
                Status.MISSING,
                message=f"{what} not found in {ref.name} (manifest unknown)",
                registry=host,
            )
        if status in (401, 403):
            return CheckResult(
                image,
                ref,
                Status.DENIED,
                message=_denied_message(ref, auth, status),
                registry=host,
                # Credentials were kept back over plain HTTP: naming the host insecure sends them.
                hint=Hint(ref.api_host) if auth.withheld else None,
            )
        raise ProtocolError(
            f"{host} answered HTTP {status} for the manifest ({_reason(response, body or b'')})",
            status_code=status,
        )

    # -- registries -----------------------------------------------------------------------

    def _insecure(self, ref: Reference) -> bool:
        names = self.options.insecure_registries
        return ref.registry in names or ref.api_host in names or ref.hostname in names

    def _client_for(self, ref: Reference) -> httpx.AsyncClient:
        return self._insecure_client if self._insecure(ref) else self._client

    async def _registry(self, ref: Reference) -> _Registry:
        registry = self._registries.setdefault(ref.api_host, _Registry(ref.api_host))
        self._registries.move_to_end(ref.api_host)
        if len(self._registries) > MAX_REGISTRIES:
            self._forget_registries()
        async with registry.lock:
            if registry.auth is None:
                registry.auth = await self._ping(ref)
        return registry

    def _forget_registries(self) -> None:
        """Forget the least recently used hosts past MAX_REGISTRIES, except those being
        pinged now; a forgotten host is pinged again when it is next checked."""
        for host in list(self._registries):
            if len(self._registries) <= MAX_REGISTRIES:
                return
            if not self._registries[host].lock.locked():
                del self._registries[host]

    async def _ping(self, ref: Reference) -> RegistryAuthState:
        """``GET /v2/`` to learn the scheme and the challenge. HTTPS first; plain HTTP after
        it only for loopback (``tls.is_loopback``: exactly ``localhost``, as containerd
        decides) and ``--insecure-registry`` hosts."""
        insecure = self._insecure(ref)
        schemes = ["https", "http"] if insecure or is_loopback(ref.hostname) else ["https"]
        client = self._client_for(ref)
        last: Exception | None = None
        # Before HTTP, HTTPS is only a probe: does the port speak TLS? That needs no CA store
        # unless a TLS server answers with a certificate the --ca-file CAs do not vouch for.
        probe = {_PROBE: True} if len(schemes) > 1 else {}
        for scheme in schemes:
            url = httpx.URL(f"{scheme}://{ref.api_host}/v2/")
            try:
                response = await self._get(client, url, ref, probe if scheme == "https" else {})
            except CertificateError:
                if not probe or self._trust_loaded:
                    raise
                self._load_trust()
                response = await self._get(client, url, ref, {})
            except (TransientError, NotTLSError) as exc:
                if scheme == schemes[-1]:
                    if isinstance(exc, NotTLSError) and len(schemes) == 1:
                        raise _https_only(ref, exc) from None
                    raise
                last = exc
                log.debug("ping %s failed (%s); trying plain http", url, exc)
                continue
            return self._ping_answer(ref, url, response, insecure=insecure)
        raise last or TransientError(f"cannot reach {ref.api_host}")

    async def _get(
        self, client: httpx.AsyncClient, url: httpx.URL, ref: Reference, extensions: dict[str, Any]
    ) -> httpx.Response:
        """The ping's answer: its status and headers are all it tells. Its body is never read
        whole (a registry may send gigabytes): a prefix, so a short body leaves the
        connection reusable, and that is dropped."""
        request = client.build_request(
            "GET", url, extensions={**extensions, **named_host(url.host)}
        )
        async with transport_errors(ref.api_host):
            response = await client.send(request, stream=True)
            try:
                await read_prefix(response, MAX_ERROR_BODY)
            finally:
                await response.aclose()
        return response

    def _load_trust(self) -> None:
        if not self._trust_loaded:
            load_system_trust(self._verify)
            self._trust_loaded = True

    def _ping_answer(
        self, ref: Reference, url: httpx.URL, response: httpx.Response, *, insecure: bool
    ) -> RegistryAuthState:
        status = response.status_code
        base = url.copy_with(path="/")
        plain = url.scheme == "http"
        state = RegistryAuthState(
            base,
            None,
            allow_http_realm=insecure or plain,
            credentials_allowed=insecure or not plain,
            insecure_hosts=self.options.insecure_registries,
        )
        if status in TRANSIENT_STATUS_CODES:
            raise TransientError(
                f"{ref.api_host} answered HTTP {status} to the registry ping",
                status_code=status,
                retry_after=parse_retry_after(response.headers.get("Retry-After")),
            )
        if status == 401:
            state.challenge = pick_challenge(response.headers.get_list("WWW-Authenticate"))
            return state
        if status == 404:
            raise ProtocolError(
                f"{ref.api_host} does not serve the registry API (GET /v2/ answered 404)",
                status_code=404,
            )
        return state

    # -- logging and counting -------------------------------------------------------------

    async def _on_request(self, request: httpx.Request) -> None:
        # Every request and every redirect hop, before its connection or DNS lookup: httpx
        # runs this hook per hop. A hook rather than a transport wrapper, because httpx
        # ignores the proxy environment variables when it is given a transport.
        check_destination(request)
        if request.url.scheme == "https" and not request.extensions.get(_PROBE):
            self._load_trust()  # the first real HTTPS request: now the CA store is worth it
        self.stats[_request_kind(request)] += 1
        self.stats["requests"] += 1
        if not log.isEnabledFor(logging.DEBUG):
            return
        # Method, URL without its query, and the auth scheme: never a credential or a body.
        auth = request.headers.get("Authorization")
        shown = f" (Authorization: {auth.split(' ', 1)[0]} [redacted])" if auth else ""
        log.debug("> %s %s%s", request.method, request.url.copy_with(query=None), shown)

    async def _on_response(self, response: httpx.Response) -> None:
        for observe in self.observers:
            observe(_request_kind(response.request), response.status_code)
        if not log.isEnabledFor(logging.DEBUG):
            return
        log.debug(
            "< %s %s %s",
            response.status_code,
            response.request.method,
            response.request.url.copy_with(query=None),
        )


def _https_only(ref: Reference, exc: NotTLSError) -> NotTLSError:
    """A plain-HTTP registry that may not be asked over plain HTTP: as containerd, which tries
    HTTP only for ``localhost`` and loopback addresses (``tls.is_loopback``)."""
    return NotTLSError(
        f"{exc}; plain HTTP is tried only for localhost, 127.0.0.0/8 and ::1, as containerd does",
        hint=Hint(ref.api_host),
    )


def _request_kind(request: httpx.Request) -> str:
    path = request.url.path
    if path == "/v2/":
        return "ping"
    if "/manifests/" in path:
        return "manifest"
    return "blob" if "/blobs/" in path else "token"


async def _bound_body(response: httpx.Response) -> None:
    """A response hook. httpx reads two kinds of body whole, by itself: a redirect's, and that
    of a 401 the auth flow answers with a token. Nobody uses either: at most a prefix of them
    is read, and dropped. Every other body is read by a capped reader (``_read_body``, the
    token fetcher, the ping's prefix); this caps them once more, at the largest of those."""
    if response.status_code == 401 or response.has_redirect_location:
        bound_body(response, limit=MAX_ERROR_BODY, drop=True)
    else:
        bound_body(response, limit=MAX_MANIFEST_SIZE, drop=False)


async def _read_body(response: httpx.Response) -> bytes:
    """A manifest body (at most 4 MiB), or the start of an error body (for its reason)."""
    if response.request.method == "HEAD":
        # Nothing to read, but h11 must see the end of the message, or httpcore closes the
        # connection instead of reusing it (a new TCP connection per image otherwise).
        await response.aread()
        return b""
    if response.status_code == 200:
        return await read_capped(response, MAX_MANIFEST_SIZE, "manifest")
    return await read_prefix(response, MAX_ERROR_BODY)


def registered_digest(text: str) -> bool:
    """Whether ``text`` is a digest in a registered algorithm, spelled as the spec says."""
    algorithm, _, encoded = text.partition(":")
    length = _REGISTERED_DIGESTS.get(algorithm)
    return length == len(encoded) and _LOWER_HEX.fullmatch(encoded) is not None


def _answered_digest(ref: Reference, response: httpx.Response, body: bytes | None) -> str | None:
    """The manifest's digest. For a digest pin, every digest the answer carries (the header,
    the body's own hash) must be the pinned one; otherwise the header, else the body's hash.

    A ``Docker-Content-Digest`` counts only in a registered algorithm (issue #10, 7.4): as
    the kubelet's containerd does. Its resolver checks the header of a tag's answer with
    go-digest's ``Validate`` and fails the pull on an algorithm it does not know ("not a
    valid digest"), so for a tag such a header is a ProtocolError: never ``md5:...`` reported
    as the digest found, for a deployment to pin to. For a digest pin containerd does not
    read the header at all (the pin names the content, whose hash it checks on fetch): here
    such a header is set aside, and the body's own hash (``_ask_manifest`` GETs it) decides.
    """
    header = response.headers.get("Docker-Content-Digest")
    if header is not None and not registered_digest(header):
        if ref.digest is None:
            raise ProtocolError(
                f"{ref.api_host} sent an invalid Docker-Content-Digest "
                f"{printable(header, 80)!r}: not a sha256 or sha512 digest in lowercase hex"
            )
        header = None
    computed = _digest_of(body, ref.digest or header or "sha256:") if body is not None else None
    if ref.digest is None:
        return header or computed
    if header is None and computed is None:
        raise ProtocolError(f"{ref.api_host} did not say which digest it served")
    for served in (computed, header):
        if served is not None and served != ref.digest:
            raise ProtocolError(
                f"{ref.api_host} served digest {served} when asked for {ref.digest}"
            )
    return ref.digest


def _digest_of(body: bytes, like: str) -> str | None:
    algorithm = like.split(":", 1)[0]
    if algorithm not in ("sha256", "sha512"):
        return None
    return f"{algorithm}:{hashlib.new(algorithm, body).hexdigest()}"


def _content_length(response: httpx.Response, body: bytes | None) -> int | None:
    if body is not None:
        return len(body)
    length = response.headers.get("Content-Length", "")
    return int(length) if length.isdigit() else None


def _reason(response: httpx.Response, body: bytes) -> str:
    """A short reason from an OCI error body (``{"errors": [{"code", "message"}]}``), else
    the HTTP reason phrase. HTML pages and other bodies are not echoed; what is shown is
    one printable line."""
    try:
        data = parse_json(body, "error body") if body else None
    except ProtocolError:
        data = None  # not JSON, or hostile JSON: no reason in it
    errors = data.get("errors") if isinstance(data, dict) else None
    # A registry may echo what it was sent; never print the credentials back.
    sent = authorization_secrets(response.request.headers.get("Authorization"))
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        code, message = errors[0].get("code"), errors[0].get("message")
        words = [w for w in (code, message) if isinstance(w, str) and w]
        if words:
            return printable(redact(": ".join(words), sent))
    return printable(redact(response.reason_phrase, sent)) or "no reason given"


def _denied_message(ref: Reference, auth: RegistryAuth, status: int) -> str:
    creds = auth.used
    if auth.withheld:
        how = "anonymously: credentials are not sent over plain HTTP"
    elif creds is None:
        how = "anonymously"
    else:
        how = f"with credentials from {creds.source}" if creds.source else "with credentials"
    return f"repository {ref.name} does not exist or requires authorization (HTTP {status} {how})"
