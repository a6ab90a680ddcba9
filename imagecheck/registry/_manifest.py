"""One check of one image at one registry: the manifest request and what its answer means
(go-containerregistry's ``remote.Head``/``remote.Get``).

1. ``HEAD /v2/<name>/manifests/<tag-or-digest>``, with every manifest media type in
   ``Accept`` (without the index types, registries answer 404 for multi-arch tags), through
   the registry's auth flow (``auth.RegistryAuth``).
2. ``GET`` instead where a HEAD cannot tell: the registry does not support it (400, 405,
   501), or a digest pin's answer carries no usable digest (the body's hash decides).
   A platform to match is in the body, so then there is only the ``GET``.
3. The answer: 200 is found (its digest verified, ``digest.py``), 404 missing, 401 and 403
   denied. 408, 429 and 5xx raise a TransientError, for the caller's retry policy; any other
   status is an error (``httperrors``).
4. With a platform: an index lists its platforms; a single manifest names its config blob,
   which says (one more ``GET``). Found, but not for that platform, is missing.
5. Deep (``ClientOptions.deep``): the body again, and then the blobs it names (``_blobs.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import httpx

from imagecheck._capped import MAX_ERROR_BODY, MAX_MANIFEST_SIZE, read_capped, read_prefix
from imagecheck._text import printable
from imagecheck.errors import Hint, ProtocolError
from imagecheck.reference import Reference
from imagecheck.registry._auth import RegistryAuth, scope_extension
from imagecheck.registry._blobs import BlobCheck, Read
from imagecheck.registry._digest import answered_digest, registered_digest
from imagecheck.registry._exceptions import transport_errors
from imagecheck.registry._mediatypes import INDEX_MEDIA_TYPES, MANIFEST_ACCEPT
from imagecheck.registry._netguard import named_host
from imagecheck.registry._ping import Registry
from imagecheck.registry._platform import (
    Platform,
    config_digest,
    config_platform,
    describe,
    host_platform,
    index_platforms,
    schema1_platform,
)
from imagecheck.registry._retry import TRANSIENT_STATUS_CODES
from imagecheck.registry._status import status_error
from imagecheck.result import CheckResult, Status
from imagecheck.routes import Endpoint

# Registries that cannot HEAD a manifest answer one of these; GET then tells.
HEAD_UNSUPPORTED = frozenset({400, 405, 501})


async def _read_body(response: httpx.Response) -> bytes | None:
    """A manifest body (at most 4 MiB), or the start of an error body (for its reason)."""
    if response.request.method == "HEAD":
        # Nothing to read, but h11 must see the end of the message, or httpcore closes the
        # connection instead of reusing it (a new TCP connection per image otherwise).
        await response.aread()
        return None
    if response.status_code == 200:
        return await read_capped(response, MAX_MANIFEST_SIZE, "manifest")
    return await read_prefix(response, MAX_ERROR_BODY)


@dataclass(frozen=True, slots=True)
class Answer:
    """A registry's answer to one request: the response (closed by now) and what was read of
    its body: None for a HEAD; for a GET the whole manifest, or the start of an error body."""

    response: httpx.Response
    body: bytes | None

    @property
    def status(self) -> int:
        return self.response.status_code


@dataclass(frozen=True, slots=True)
class ManifestCheck:
    """What every request of one check shares: the reference (and the text it was given
    as), the registry that serves it, the auth flow that answers its challenges (one for
    the check: it says which credentials were last offered), and the platform to match."""

    ref: Reference
    image: str
    registry: Registry
    auth: RegistryAuth
    platform: Platform | None = None
    # Also ask for the config and layer blobs (``_blobs.py``).
    deep: bool = False
    # The route's endpoint asked, when a runtime's configuration named it: its query
    # parameter and headers go on every request.
    endpoint: Endpoint | None = None

    async def run(self) -> CheckResult:
        """The check's result; TransientError (and other RegistryErrors) raise."""
        if self.platform is not None or self.deep:
            return await self._run_with_body()
        answer = await self._send("HEAD")
        if self._head_cannot_tell(answer):
            answer = await self._send("GET")
        return self._classify(answer)

    async def _run_with_body(self) -> CheckResult:
        """The platform to match and the blobs to ask for are named in the body: GET it."""
        answer = await self._send("GET")
        result = self._classify(answer)
        body = answer.body or b""
        if result.status is Status.FOUND and self.platform is not None:
            result = await self._match_platform(self.platform, result, body)
        if result.status is not Status.FOUND or not self.deep:
            return result
        blobs = BlobCheck(
            self.ref,
            self._send,
            _read_body,
            self.platform or host_platform(),
            chosen=self.platform is not None,
        )
        return await blobs.run(result, body)

    def _head_cannot_tell(self, answer: Answer) -> bool:
        """No HEAD support, or no usable digest to verify a pin against: GET and hash the body."""
        if answer.status in HEAD_UNSUPPORTED:
            return True
        digest = answer.response.headers.get("Docker-Content-Digest", "")
        return (
            answer.status == 200 and self.ref.digest is not None and not registered_digest(digest)
        )

    async def _send(
        self,
        method: str,
        path: str | None = None,
        headers: Mapping[str, str] | None = None,
        read: Read = _read_body,
    ) -> Answer:
        """One request (the manifest, unless ``path`` says otherwise; ``headers`` beside the
        manifest ``Accept``) through the auth flow; transient answers raise."""
        ref = self.ref
        base = self.registry.auth.base_url
        # A validated repository and tag or digest: no character to escape, and copy_with
        # skips the URL parsing that join would do again for every request.
        path = path or f"/v2/{ref.repository}/manifests/{ref.identifier}"
        url = base.copy_with(path=self.registry.api_path(path), query=self._query())
        client = self.registry.client
        request = client.build_request(
            method,
            url,
            headers={"Accept": MANIFEST_ACCEPT, **(headers or {})},
            extensions={**named_host(base.host), **scope_extension(ref.repository)},
        )
        if self.endpoint is not None:
            for name, value in self.endpoint.headers:
                request.headers[name] = value
        async with transport_errors(ref.api_host):
            response = await client.send(request, auth=self.auth, stream=True)
            try:
                answer = Answer(response, await read(response))
            finally:
                await response.aclose()
        if response.status_code in TRANSIENT_STATUS_CODES:
            raise status_error(response, ref.api_host, body=answer.body or b"")
        return answer

    def _query(self) -> bytes | None:
        """containerd's ``?ns=<registry>`` on a request to a host that is not the reference's
        own (``remotes/docker/resolver.go``, ``addNamespace``)."""
        namespace = self.endpoint.namespace if self.endpoint is not None else None
        return f"ns={namespace}".encode("ascii") if namespace else None

    def _classify(self, answer: Answer) -> CheckResult:
        ref, host, status = self.ref, self.ref.api_host, answer.status
        if status == 200:
            return CheckResult(
                self.image,
                ref,
                Status.FOUND,
                message=f"found in {host}",
                digest=answered_digest(ref, answer.response, answer.body),
                media_type=_media_type(answer.response),
                size=_content_length(answer),
                registry=host,
            )
        if status == 404:
            what = f"digest {ref.digest}" if ref.digest else f"tag {ref.tag!r}"
            message = f"{what} not found in {ref.name} (manifest unknown)"
            return CheckResult(self.image, ref, Status.MISSING, message=message, registry=host)
        if status in (401, 403):
            return CheckResult(
                self.image,
                ref,
                Status.DENIED,
                message=_denied_message(ref, self.auth, status),
                registry=host,
                # Credentials were kept back over plain HTTP: naming the host insecure sends them.
                hint=Hint(host) if self.auth.withheld else None,
            )
        raise status_error(
            answer.response, host, asked=" for the manifest", body=answer.body or b""
        )

    async def _match_platform(
        self, want: Platform, result: CheckResult, body: bytes
    ) -> CheckResult:
        """Found, but for this platform?"""
        offered = await self._platforms_of(result, body)
        if any(want.satisfied_by(p) for p in offered):
            return replace(result, message=f"{result.message}, with {want}")
        return replace(
            result,
            status=Status.MISSING,
            message=f"{self.ref} exists but not for {want}; it has: {describe(offered)}",
        )

    async def _platforms_of(self, result: CheckResult, body: bytes) -> list[Platform]:
        """An index lists its platforms; a single manifest names its config blob, which says."""
        if result.media_type in INDEX_MEDIA_TYPES or b'"manifests"' in body:
            return index_platforms(body)
        legacy = schema1_platform(body)
        if legacy is not None:
            return [legacy]
        digest = config_digest(body)
        if not registered_digest(digest):
            # It goes into a URL path: nothing but algorithm:hex gets there.
            raise ProtocolError(
                f"{self.ref.api_host} served a manifest whose config digest is not a sha256 or "
                f"sha512 digest ({printable(digest, 80)!r})"
            )
        answer = await self._send("GET", f"/v2/{self.ref.repository}/blobs/{digest}")
        if answer.status != 200:
            raise status_error(
                answer.response, self.ref.api_host, asked=" for the image config", body=answer.body
            )
        return [config_platform(answer.body or b"")]


def _media_type(response: httpx.Response) -> str | None:
    return response.headers.get("Content-Type", "").split(";")[0].strip() or None


def _content_length(answer: Answer) -> int | None:
    if answer.body is not None:
        return len(answer.body)
    length = answer.response.headers.get("Content-Length", "")
    return int(length) if length.isdigit() else None


def _denied_message(ref: Reference, auth: RegistryAuth, status: int) -> str:
    creds = auth.used
    if auth.withheld:
        how = "anonymously: credentials are not sent over plain HTTP"
    elif creds is None:
        how = "anonymously"
    else:
        how = f"with credentials from {creds.source}" if creds.source else "with credentials"
    return f"repository {ref.name} does not exist or requires authorization (HTTP {status} {how})"
