"""The deep check: after the manifest, the blobs a pull would fetch.

A manifest request proves the manifest is there, not that the image can be pulled: a
registry broken by a bad garbage collection, a failed cross-repository mount or a stale
pull-through cache answers the manifest while a layer blob is gone, and containerd's pull
then fails. With ``ClientOptions.deep``, after the manifest is found:

1. an index is resolved to one platform's manifest (the platform asked for, else this
   machine's, which in an initContainer is the node's, as the kubelet's pull chooses), and
   that manifest is fetched by its digest, which is verified;
2. its config blob and every layer blob are asked for with
   ``HEAD /v2/<name>/blobs/<digest>`` (distribution-spec "Checking if content exists in the
   registry"), a few at a time, through the same auth flow, redirects and network guard as
   the manifest; a registry that refuses a HEAD (400, 405, 501) is asked for one byte with a
   ranged ``GET`` instead, of which no more than an error prefix is ever read;
3. any blob answering 404 makes the image missing, naming the blob; 401/403 denied; the
   transient statuses raise for the retry policy; anything else is an error.

Blob requests are ``HEAD`` requests of content, which Docker Hub does not count as pulls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import httpx

from imagecheck._capped import MAX_ERROR_BODY, parse_json_object, read_prefix
from imagecheck._text import printable
from imagecheck.errors import ProtocolError
from imagecheck.reference import Reference
from imagecheck.registry._digest import answered_digest, registered_digest
from imagecheck.registry._mediatypes import INDEX_MEDIA_TYPES
from imagecheck.registry._platform import Platform, describe, index_entries
from imagecheck.registry._status import status_error
from imagecheck.result import CheckResult, Status


class Answer(Protocol):
    """A registry's answer as ``_manifest.Answer`` holds it (which imports this module)."""

    @property
    def response(self) -> httpx.Response: ...
    @property
    def body(self) -> bytes | None: ...
    @property
    def status(self) -> int: ...


# Reads what a request's answer carries (the caller's capped readers).
Read = Callable[[httpx.Response], Awaitable[bytes | None]]
# One request through the check's auth flow: method, path, headers, reader.
Send = Callable[[str, str, Mapping[str, str], Read], Awaitable[Answer]]

# Blob requests of one image in flight at once; the connection pool bounds all of them.
BLOBS_AT_ONCE = 4
# Registries that cannot HEAD a blob answer one of these; a one-byte GET then tells.
HEAD_UNSUPPORTED = frozenset({400, 405, 501})
ONE_BYTE = {"Range": "bytes=0-0"}
PRESENT = frozenset({200, 206})


@dataclass(frozen=True, slots=True)
class Blob:
    kind: str  # "config" or "layer"
    digest: str


@dataclass(frozen=True, slots=True)
class BlobCheck:
    """The blobs of one found image. ``platform`` chooses from an index; ``chosen`` says
    whether it was asked for (else it is this machine's)."""

    ref: Reference
    send: Send
    read_manifest: Read
    platform: Platform
    chosen: bool

    async def run(self, found: CheckResult, body: bytes) -> CheckResult:
        manifest, where = body, self._where()
        if found.media_type in INDEX_MEDIA_TYPES or b'"manifests"' in body:
            child = await self._platform_manifest(found, body)
            if isinstance(child, CheckResult):
                return child
            manifest = child
        blobs = blobs_of(manifest)
        statuses = [answer.status for answer in await self._ask_all(blobs)]
        for status in (404, 401, 403):
            hits = [blob for blob, got in zip(blobs, statuses, strict=True) if got == status]
            if hits:
                return self._refused(found, hits, status, where)
        layers = sum(blob.kind == "layer" for blob in blobs)
        config = "its config and " if any(blob.kind == "config" for blob in blobs) else ""
        message = f"{found.message}; {config}{layers} layer(s) present ({where})"
        return replace(found, message=message)

    def _where(self) -> str:
        return str(self.platform) if self.chosen else f"{self.platform}, this machine's"

    async def _platform_manifest(self, found: CheckResult, body: bytes) -> bytes | CheckResult:
        """The index's manifest for the platform, fetched by digest; a result when there is
        none to fetch."""
        matches = [d for p, d in index_entries(body) if self.platform.satisfied_by(p)]
        if not matches:
            offered = describe([p for p, _ in index_entries(body)])
            message = f"{self.ref} has no manifest for {self.platform}; it has: {offered}"
            return replace(found, status=Status.MISSING, message=message)
        digest = _url_digest(matches[0], self.ref, "index entry")
        child = replace(self.ref, digest=digest)
        path = f"/v2/{self.ref.repository}/manifests/{digest}"
        answer = await self.send("GET", path, {}, self.read_manifest)
        if answer.status in PRESENT:
            answered_digest(child, answer.response, answer.body)  # raises if it is not that
            return answer.body or b""
        what = Blob("manifest", digest)
        return self._refused(found, [what], answer.status, self._where(), answer)

    async def _ask_all(self, blobs: list[Blob]) -> list[Answer]:
        gate = asyncio.Semaphore(BLOBS_AT_ONCE)

        async def ask(blob: Blob) -> Answer:
            async with gate:
                return await self._ask(blob)

        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(ask(blob)) for blob in blobs]
        except ExceptionGroup as failed:
            # The first failure is the check's (the other requests are cancelled with it), and
            # it must arrive unwrapped: its type is what the retry policy and the result read.
            raise failed.exceptions[0] from None
        return [task.result() for task in tasks]

    async def _ask(self, blob: Blob) -> Answer:
        path = f"/v2/{self.ref.repository}/blobs/{blob.digest}"
        answer = await self.send("HEAD", path, {}, _read_blob)
        if answer.status in HEAD_UNSUPPORTED:
            answer = await self.send("GET", path, ONE_BYTE, _read_blob)
        if answer.status not in PRESENT | {401, 403, 404}:
            raise status_error(
                answer.response, self.ref.api_host, asked=f" for {blob.kind} {blob.digest}"
            )
        return answer

    def _refused(
        self,
        found: CheckResult,
        blobs: list[Blob],
        status: int,
        where: str,
        answer: Answer | None = None,
    ) -> CheckResult:
        if status not in (401, 403, 404):
            assert answer is not None  # only the platform's manifest gets here so
            raise status_error(answer.response, self.ref.api_host, asked=" for the manifest")
        first = blobs[0]
        more = f" (and {len(blobs) - 1} more)" if len(blobs) > 1 else ""
        if status == 404:
            message = f"{first.kind} {first.digest} of {where} not found in {self.ref.name}{more}"
            return replace(found, status=Status.MISSING, message=message)
        message = f"{first.kind} {first.digest} of {where}: HTTP {status} from {found.registry}"
        return replace(found, status=Status.DENIED, message=f"{message}{more}")


def blobs_of(body: bytes) -> list[Blob]:
    """The config and layers an image manifest names (Docker schema 1: its ``fsLayers``),
    each once, config first."""
    data = parse_json_object(body, "manifest")
    if data.get("schemaVersion") == 1:
        layers = [_digest_field(entry, "blobSum") for entry in _list(data, "fsLayers")]
        return _unique([Blob("layer", digest) for digest in layers])
    config = data.get("config")
    if not isinstance(config, dict):
        raise ProtocolError("manifest has no config descriptor")
    blobs = [Blob("config", _digest_field(config, "digest"))]
    blobs += [Blob("layer", _digest_field(layer, "digest")) for layer in _list(data, "layers")]
    return _unique(blobs)


def _list(data: dict[str, Any], name: str) -> list[Any]:
    value = data.get(name, [])
    if not isinstance(value, list):
        raise ProtocolError(f"manifest: {name!r} is not a list")
    return value


def _digest_field(entry: object, name: str) -> str:
    if not isinstance(entry, dict):
        raise ProtocolError("manifest: a descriptor is not an object")
    return _url_digest(entry.get(name), None, "descriptor")


def _url_digest(value: object, ref: Reference | None, what: str) -> str:
    """A digest that goes into a URL path: nothing but a registered algorithm:hex gets there."""
    if isinstance(value, str) and registered_digest(value):
        return value
    where = f"{ref.api_host} served a manifest whose" if ref else "a manifest's"
    shown = printable(str(value), 80)
    raise ProtocolError(f"{where} {what} digest is not a sha256 or sha512 digest ({shown!r})")


def _unique(blobs: list[Blob]) -> list[Blob]:
    return list(dict.fromkeys(blobs))


async def _read_blob(response: httpx.Response) -> bytes | None:
    """Never a blob: a HEAD's empty body read to its end (so the connection is reused), else
    at most an error's prefix (the rest of a ranged GET a registry answered whole is left)."""
    if response.request.method == "HEAD":
        await response.aread()
        return None
    return await read_prefix(response, MAX_ERROR_BODY)
