"""What a route is: the hosts a node's runtime asks for one reference, in its order.

A container runtime does not always ask the registry a reference names. containerd reads a
``hosts.toml`` directory (mirrors, capabilities, TLS, ``override_path``), CRI-O and podman read
``registries.conf`` (mirrors, prefix rewrites, blocked registries, short-name aliases). Each
reader turns its file into a :class:`Router`; the checker asks a router for the :class:`Route`
of each reference and asks its endpoints in order. Pure values: reading a file is the reader's
business, asking a host the checker's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Literal, Protocol

from imagecheck.reference import Reference

Scheme = Literal["https", "http"]


@dataclass(frozen=True, slots=True)
class HostTLS:
    """TLS settings of one endpoint, on top of the checker's own trust (``--ca-file``, the
    system store): more CAs, client certificates, or no verification at all."""

    ca_files: tuple[Path, ...] = ()
    # (certificate, key) pairs; a key of None: the key is in the certificate's file.
    client_pairs: tuple[tuple[Path, Path | None], ...] = ()
    skip_verify: bool = False

    @property
    def default(self) -> bool:
        return not (self.ca_files or self.client_pairs or self.skip_verify)


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One host a runtime asks for a reference.

    ``scheme`` None means "as imagecheck decides for a host the user named" (HTTPS; plain HTTP
    only for loopback and insecure hosts, ``registry/_ping.py``); a configuration that names a
    scheme gets exactly that one. ``path`` is the API root the runtime puts before
    ``/<name>/manifests/<ref>`` (``/v2``, or what ``override_path`` says). ``repository`` is
    the name asked there (a ``registries.conf`` prefix rewrite changes it). ``tags`` and
    ``digests`` say which references the endpoint may answer (containerd's ``resolve``
    capability; ``mirror-by-digest-only`` and ``pull-from-mirror``). ``namespace`` is the
    ``ns`` query parameter containerd adds when a host is not the reference's own registry.
    ``origin`` names where the endpoint was configured, for messages.
    """

    host: str
    repository: str
    scheme: Scheme | None = None
    path: str = "/v2"
    tags: bool = True
    digests: bool = True
    tls: HostTLS = field(default_factory=HostTLS)
    headers: tuple[tuple[str, str], ...] = ()
    namespace: str | None = None
    # As a host named in --insecure-registry: plain HTTP allowed, TLS not verified.
    insecure: bool = False
    mirror: bool = False
    origin: str = ""

    def serves(self, ref: Reference) -> bool:
        """Whether this endpoint is asked for ``ref`` (by digest, or by tag)."""
        return self.digests if ref.digest else self.tags

    @property
    def name(self) -> str:
        """How messages name the endpoint: its URL when the configuration gave a scheme."""
        return f"{self.scheme}://{self.host}" if self.scheme else self.host


class Verdict(Enum):
    """How a route's answers combine when no endpoint has the image.

    ``FIRST_FAILURE``: containerd's resolver asks every host in order, skips a 404, keeps the
    first other failure and returns it when no host answers (``remotes/docker/resolver.go``,
    ``Resolve``); a 404 everywhere is "not found". ``LAST_HOST``: containers/image tries each
    pull source in order and reports the primary's (the last) error, the mirrors' listed
    after it (``docker/docker_image_src.go``, ``newImageSource``).
    """

    FIRST_FAILURE = "first-failure"
    LAST_HOST = "last-host"


@dataclass(frozen=True, slots=True)
class Route:
    """The endpoints asked for one reference, in order, and how their answers combine.

    ``blocked`` (a reason naming the file) means the runtime refuses the reference; the
    endpoints it still has (a blocked registry's mirrors, in containers/image) are asked
    first, and only a found image overrides the refusal. An empty ``endpoints`` with no
    ``blocked`` means no host may answer (e.g. every host lacks ``resolve`` for a tag): the
    runtime's "not found".
    """

    endpoints: tuple[Endpoint, ...]
    verdict: Verdict = Verdict.LAST_HOST
    blocked: str | None = None
    # Where the route came from ("hosts.toml in /etc/containerd/certs.d", ...), for messages.
    source: str = ""


class Router(Protocol):
    """Turns a reference into its route. ``text`` is the image as written (a short name such
    as ``busybox`` resolves through ``registries.conf`` aliases and search registries)."""

    def route(self, ref: Reference, text: str) -> Route: ...


def default_route(ref: Reference) -> Route:
    """The route with no runtime configuration: the reference's own registry, as imagecheck
    reaches a host the user named."""
    return Route((Endpoint(ref.api_host, ref.repository),))
