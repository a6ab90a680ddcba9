"""Build small, deterministic, valid images and push them over the registry HTTP API.

Everything goes through an :class:`httpx.Client` the caller owns, so the caller decides TLS
verification and auth. Uploads are monolithic (distribution-spec "Pushing a blob
monolithically": ``POST /v2/<name>/blobs/uploads/`` then ``PUT <location>?digest=``), and
manifests are ``PUT`` with their media type as ``Content-Type``. Distribution checks that
every blob and child manifest a manifest names is already in the repository, so children
go first.

The same inputs always give the same bytes, hence the same digests: a test may compare a
digest it reads back with the one :func:`push_image` returned.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from imagecheck.registry import Platform
from imagecheck.registry._mediatypes import (
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
    OCI_INDEX,
    OCI_MANIFEST,
)

__all__ = [
    "DOCKER_CONFIG",
    "DOCKER_LAYER",
    "OCI_CONFIG",
    "OCI_LAYER",
    "PushError",
    "PushedManifest",
    "SampleImages",
    "digest_of",
    "push_blob",
    "push_image",
    "push_index",
    "push_manifest",
    "seed_many",
    "seed_samples",
]

# Config and layer types: only what this pusher writes needs them (manifest types, which
# imagecheck reads, are in imagecheck.registry._mediatypes).
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"

LINUX_AMD64 = Platform("linux", "amd64")


class PushError(RuntimeError):
    """The registry refused a push; the message carries its status and body."""

    def __init__(self, response: httpx.Response) -> None:
        request = response.request
        super().__init__(
            f"{request.method} {request.url} -> {response.status_code}: {response.text[:500]}"
        )
        self.status_code = response.status_code


@dataclass(frozen=True)
class PushedManifest:
    """A manifest as stored: its digest, media type and size in bytes.

    ``platform`` is set on an image pushed for one platform; ``children`` lists the
    platform images of an index or manifest list, in the order the index names them.
    """

    digest: str
    media_type: str
    size: int
    platform: Platform | None = None
    children: tuple[PushedManifest, ...] = ()


@dataclass(frozen=True)
class SampleImages:
    """What :func:`seed_samples` pushed, keyed by ``repo:tag`` (e.g. ``sample/app:1.0.0``)."""

    manifests: dict[str, PushedManifest]

    def __getitem__(self, name: str) -> PushedManifest:
        return self.manifests[name]


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def push_blob(client: httpx.Client, base_url: str, repo: str, data: bytes) -> str:
    """Upload ``data`` as a blob in one ``PUT`` and return its digest."""
    digest = digest_of(data)
    started = client.post(f"{base_url}/v2/{repo}/blobs/uploads/")
    _expect(started, 202)
    # Location may be relative and already carries state in its query (Distribution's
    # `_state`); keep that and add `digest`.
    location = httpx.URL(base_url).join(started.headers["Location"])
    done = client.put(
        location.copy_merge_params({"digest": digest}),
        content=data,
        headers={"Content-Type": "application/octet-stream"},
    )
    _expect(done, 201)
    return digest


def push_manifest(
    client: httpx.Client, base_url: str, repo: str, reference: str, body: bytes, media_type: str
) -> str:
    """``PUT`` a manifest under a tag or digest and return its digest."""
    response = client.put(
        f"{base_url}/v2/{repo}/manifests/{reference}",
        content=body,
        headers={"Content-Type": media_type},
    )
    _expect(response, 201)
    digest = digest_of(body)
    served = response.headers.get("Docker-Content-Digest")
    if served is not None and served != digest:
        raise RuntimeError(f"registry stored {served} for a manifest whose digest is {digest}")
    return digest


def push_image(
    client: httpx.Client,
    base_url: str,
    repo: str,
    tag: str | None,
    *,
    platform: Platform = LINUX_AMD64,
    docker: bool = False,
    seed: str | None = None,
    annotations: dict[str, str] | None = None,
) -> PushedManifest:
    """Push a one-layer image (OCI, or Docker schema 2 with ``docker=True``).

    With ``tag=None`` the manifest is pushed by digest only (an index's child). ``seed``
    picks the layer's bytes; by default it is ``repo:tag``, so every sample has its own.
    """
    image = _ImageBlobs.build(seed or f"{repo}:{tag}", platform, docker=docker)
    for blob in (image.layer, image.config):
        push_blob(client, base_url, repo, blob)
    body = image.manifest(annotations)
    media_type = DOCKER_MANIFEST if docker else OCI_MANIFEST
    digest = push_manifest(client, base_url, repo, tag or digest_of(body), body, media_type)
    return PushedManifest(digest, media_type, len(body), platform=platform)


def push_index(
    client: httpx.Client,
    base_url: str,
    repo: str,
    tag: str,
    platforms: Iterable[Platform],
    *,
    docker: bool = False,
) -> PushedManifest:
    """Push one image per platform by digest, then an OCI index (or a Docker manifest list)."""
    children = tuple(
        push_image(client, base_url, repo, None, platform=p, docker=docker, seed=f"{repo}:{tag}")
        for p in platforms
    )
    media_type = DOCKER_MANIFEST_LIST if docker else OCI_INDEX
    body = _dumps(
        {
            "schemaVersion": 2,
            "mediaType": media_type,
            "manifests": [_index_entry(child) for child in children],
        }
    )
    digest = push_manifest(client, base_url, repo, tag, body, media_type)
    return PushedManifest(digest, media_type, len(body), children=children)


def seed_samples(client: httpx.Client, base_url: str) -> SampleImages:
    """Push the fixed set of sample images every integration test can rely on."""
    pushed = {
        "sample/app:1.0.0": push_image(client, base_url, "sample/app", "1.0.0"),
        "sample/app:docker": push_image(client, base_url, "sample/app", "docker", docker=True),
        "sample/app:multi": push_index(
            client,
            base_url,
            "sample/app",
            "multi",
            [Platform("linux", "amd64"), Platform("linux", "arm64")],
        ),
        "sample/app:list": push_index(
            client,
            base_url,
            "sample/app",
            "list",
            [Platform("linux", "amd64"), Platform("linux", "arm", "v7")],
            docker=True,
        ),
        "private/secret:1.0": push_image(client, base_url, "private/secret", "1.0"),
        "public/tool:2.1": push_image(client, base_url, "public/tool", "2.1", docker=True),
    }
    return SampleImages(pushed)


def seed_many(
    client: httpx.Client, base_url: str, repos: int, tags_per_repo: int, prefix: str = "bench"
) -> list[str]:
    """Push ``repos * tags_per_repo`` OCI images and return their ``repo:tag`` names.

    All share one layer and one config; each tag's manifest differs by an annotation, so
    each has its own digest. Cost: two blob uploads per repository plus one manifest per tag.
    """
    image = _ImageBlobs.build(f"{prefix}-shared", LINUX_AMD64, docker=False)
    names: list[str] = []
    for r in range(repos):
        repo = f"{prefix}/repo{r:04d}"
        for blob in (image.layer, image.config):
            push_blob(client, base_url, repo, blob)
        for t in range(tags_per_repo):
            tag = f"v{t}"
            body = image.manifest({"org.opencontainers.image.ref.name": tag})
            push_manifest(client, base_url, repo, tag, body, OCI_MANIFEST)
            names.append(f"{repo}:{tag}")
    return names


@dataclass(frozen=True)
class _ImageBlobs:
    """The layer and config of a one-layer image, and how to describe them in a manifest."""

    layer: bytes
    config: bytes
    docker: bool

    @classmethod
    def build(cls, seed: str, platform: Platform, *, docker: bool) -> _ImageBlobs:
        tar = _layer_tar(seed)
        config: dict[str, Any] = {
            "architecture": platform.architecture,
            "os": platform.os,
            "created": "2024-01-01T00:00:00Z",
            "config": {"Labels": {"org.example.seed": seed}},
            "rootfs": {"type": "layers", "diff_ids": [digest_of(tar)]},
            "history": [{"created": "2024-01-01T00:00:00Z", "created_by": "tests.support.images"}],
        }
        if platform.variant:
            config["variant"] = platform.variant
        return cls(layer=_gzip(tar), config=_dumps(config), docker=docker)

    def manifest(self, annotations: dict[str, str] | None = None) -> bytes:
        config_type, layer_type = (
            (DOCKER_CONFIG, DOCKER_LAYER) if self.docker else (OCI_CONFIG, OCI_LAYER)
        )
        document: dict[str, Any] = {
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST if self.docker else OCI_MANIFEST,
            "config": _descriptor(config_type, self.config),
            "layers": [_descriptor(layer_type, self.layer)],
        }
        if annotations:
            # Docker schema 2 has no annotations; the OCI manifest does.
            if self.docker:
                raise ValueError("Docker schema 2 manifests take no annotations")
            document["annotations"] = annotations
        return _dumps(document)


def _layer_tar(seed: str) -> bytes:
    """A tar with one small file whose bytes come from ``seed``; no timestamps, no owners."""
    content = b"".join(hashlib.sha256(f"{seed}/{i}".encode()).digest() for i in range(8))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        info = tarfile.TarInfo("imagecheck/seed.bin")
        info.size = len(content)
        info.mode = 0o644
        info.mtime = 0
        tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def _gzip(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as stream:
        stream.write(data)
    return buffer.getvalue()


def _descriptor(media_type: str, data: bytes) -> dict[str, Any]:
    return {"mediaType": media_type, "digest": digest_of(data), "size": len(data)}


def _index_entry(child: PushedManifest) -> dict[str, Any]:
    assert child.platform is not None
    platform = {"architecture": child.platform.architecture, "os": child.platform.os}
    if child.platform.variant:
        platform["variant"] = child.platform.variant
    return {
        "mediaType": child.media_type,
        "digest": child.digest,
        "size": child.size,
        "platform": platform,
    }


def _dumps(document: dict[str, Any]) -> bytes:
    return json.dumps(document, indent=2, sort_keys=False).encode()


def _expect(response: httpx.Response, status: int) -> None:
    if response.status_code != status:
        raise PushError(response)
