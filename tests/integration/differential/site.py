"""Where the differential scenarios run: the integration registries, a mirror registry, the
images this suite adds to them, and fault proxies made on demand.

The suite's own images live under ``diff/`` in the shared storage (the samples under
``sample/``, ``private/`` and ``public/`` are never touched); the mirror is a registry of its
own, with its own storage, holding ``mirror/*`` and a copy of ``sample/app:1.0.0``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from imagecheck.registry import Platform
from tests.integration.differential.oracle import Access, Mirror
from tests.support.endpoint import RegistryEndpoint
from tests.support.faultproxy import FaultProxy
from tests.support.images import PushedManifest, push_image, push_index
from tests.support.pki import TLSMaterial

# distribution/reference: a repository path of at most 255 characters (the domain apart).
LONG_REPOSITORY = "diff/" + "l" * 250
# ... and a tag of at most 128.
LONG_TAG = "T" + "t" * 127


@dataclass(frozen=True)
class Extra:
    """What :func:`seed_extra` pushed, by name."""

    manifests: dict[str, PushedManifest]

    def __getitem__(self, name: str) -> PushedManifest:
        return self.manifests[name]


def seed_extra(client: httpx.Client, base_url: str) -> Extra:
    """The images only this suite needs, pushed through the no-auth registry."""
    pushed = {
        # An index with no image for the node (linux/amd64): the kubelet's pull fails.
        "diff/foreign:1": push_index(
            client,
            base_url,
            "diff/foreign",
            "1",
            [Platform("linux", "arm64"), Platform("linux", "s390x")],
        ),
        # One manifest (no index) whose config says linux/arm64.
        "diff/arm-only:1": push_image(
            client, base_url, "diff/arm-only", "1", platform=Platform("linux", "arm64")
        ),
        # Every character a path component and a tag may hold.
        "diff/sep.a_b__c-d:V1.0_rc-1": push_image(
            client, base_url, "diff/sep.a_b__c-d", "V1.0_rc-1"
        ),
        f"{LONG_REPOSITORY}:1": push_image(client, base_url, LONG_REPOSITORY, "1"),
        f"diff/tags:{LONG_TAG}": push_image(client, base_url, "diff/tags", LONG_TAG),
        # A manifest whose layer blob is then deleted (a registry broken by a bad garbage
        # collection or a failed cross-repository mount).
        "diff/no-layer:1": push_image(client, base_url, "diff/no-layer", "1"),
    }
    _delete_layer(client, base_url, "diff/no-layer", "1")
    return Extra(pushed)


def _delete_layer(client: httpx.Client, base_url: str, repo: str, tag: str) -> None:
    manifest = client.get(
        f"{base_url}/v2/{repo}/manifests/{tag}",
        headers={"Accept": "application/vnd.oci.image.manifest.v1+json"},
    )
    manifest.raise_for_status()
    layer = manifest.json()["layers"][0]["digest"]
    deleted = client.delete(f"{base_url}/v2/{repo}/blobs/{layer}")
    if deleted.status_code != 202:
        raise RuntimeError(f"could not delete {repo}'s layer: {deleted.status_code}")


def seed_mirror(client: httpx.Client, base_url: str) -> dict[str, PushedManifest]:
    return {
        "mirror/only:1": push_image(client, base_url, "mirror/only", "1"),
        # The same bytes as the upstream's sample/app:1.0.0 (same seed, same platform).
        "sample/app:1.0.0": push_image(client, base_url, "sample/app", "1.0.0"),
    }


@dataclass
class Site:
    """Everything a scenario may use; :meth:`proxy` gives fault proxies closed at the end."""

    plain: RegistryEndpoint
    basic: RegistryEndpoint
    token: RegistryEndpoint
    mirror: RegistryEndpoint
    tls: TLSMaterial
    extra: Extra
    workdir: Path
    _proxies: list[FaultProxy] = field(default_factory=list)

    def access(
        self,
        endpoint: RegistryEndpoint,
        *,
        user: str | None = None,
        registry: str | None = None,
        mirrors: tuple[Mirror, ...] = (),
    ) -> Access:
        """``user``: ``"right"`` (the endpoint's own), ``"wrong"`` (its user, another
        password) or ``None`` (anonymous)."""
        credentials = None
        if user is not None:
            assert endpoint.username is not None and endpoint.password is not None
            password = endpoint.password if user == "right" else endpoint.password + "-wrong"
            credentials = (endpoint.username, password)
        return Access(
            registry=registry or endpoint.host,
            plain_http=endpoint.ca_file is None,
            ca_file=endpoint.ca_file,
            user=credentials,
            mirrors=mirrors,
        )

    @contextmanager
    def proxy(self, upstream: RegistryEndpoint, *, tls: bool = False) -> Iterator[FaultProxy]:
        """A fault proxy in front of a plain-HTTP ``upstream``, over TLS when ``tls``."""
        context = self.tls.server_context() if tls else None
        with FaultProxy(upstream.url, ssl_context=context) as proxy:
            yield proxy
