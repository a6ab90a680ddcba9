"""Manifest media types: what ``/v2/<name>/manifests/<reference>`` may answer, and the one
``Accept`` header that asks for every one of them.

A registry serves a manifest only in a type the client accepts: without the index types it
answers 404 (or an arbitrary single-platform image) for a multi-arch tag, and without the
schema 1 types old Docker registries have nothing to offer. OCI image-spec ``media-types.md``;
Docker's "Image Manifest V2, Schema 2" and "Schema 1".
"""

from __future__ import annotations

__all__ = [
    "DOCKER_MANIFEST",
    "DOCKER_MANIFEST_LIST",
    "DOCKER_SCHEMA1",
    "DOCKER_SCHEMA1_SIGNED",
    "INDEX_MEDIA_TYPES",
    "MANIFEST_ACCEPT",
    "OCI_INDEX",
    "OCI_MANIFEST",
]

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_SCHEMA1_SIGNED = "application/vnd.docker.distribution.manifest.v1+prettyjws"
DOCKER_SCHEMA1 = "application/vnd.docker.distribution.manifest.v1+json"

# The types that name other manifests, one per platform (an OCI image index, a Docker
# manifest list), rather than an image's config and layers.
INDEX_MEDIA_TYPES = frozenset({OCI_INDEX, DOCKER_MANIFEST_LIST})

MANIFEST_ACCEPT = ", ".join(
    (
        OCI_INDEX,
        OCI_MANIFEST,
        DOCKER_MANIFEST_LIST,
        DOCKER_MANIFEST,
        DOCKER_SCHEMA1_SIGNED,
        DOCKER_SCHEMA1,
    )
)
