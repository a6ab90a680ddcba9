"""Platforms (``os/arch[/variant]``): parsing, normalizing, and finding one in a manifest.

"The tag exists but not for arm64" is the failure the kubelet would hit on an arm64 node;
``--platform`` catches it first. An index (OCI image index, Docker manifest list) names its
platforms; a single manifest's platform is in its config blob. Pure: the caller fetches.

Normalization follows containerd's ``platforms.Normalize``: ``x86_64`` is ``amd64``,
``aarch64`` is ``arm64`` (whose ``v8`` variant is the default), ``armhf`` is ``arm/v7``.
"""

from __future__ import annotations

import platform as _host
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from imagecheck._capped import parse_json_object
from imagecheck.errors import ProtocolError, UsageError

_ARCH_ALIASES = {
    "x86_64": ("amd64", ""),
    "x86-64": ("amd64", ""),
    "aarch64": ("arm64", ""),
    "armhf": ("arm", "v7"),
    "armel": ("arm", "v6"),
    "armv7l": ("arm", "v7"),
    "armv6l": ("arm", "v6"),
    "i386": ("386", ""),
    "i686": ("386", ""),
}


@dataclass(frozen=True, slots=True)
class Platform:
    os: str
    architecture: str
    variant: str = ""

    def __str__(self) -> str:
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)

    def normalized(self) -> Platform:
        arch, variant = _ARCH_ALIASES.get(self.architecture.lower(), (self.architecture, ""))
        variant = (self.variant or variant).lower()
        if arch == "arm64" and variant == "v8":
            variant = ""  # arm64's only variant in practice; images rarely say it
        return Platform(self.os.lower(), arch.lower(), variant)

    def satisfied_by(self, offered: Platform) -> bool:
        """Whether an image built for ``offered`` runs here; no variant asked: any will do."""
        want, have = self.normalized(), offered.normalized()
        if (want.os, want.architecture) != (have.os, have.architecture):
            return False
        return not want.variant or want.variant == have.variant


def parse_platform(text: str) -> Platform:
    """``linux/arm64``, ``linux/arm/v7``, or ``auto`` (this machine: in an initContainer,
    the node the main container will run on)."""
    if text == "auto":
        return host_platform()
    parts = text.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise UsageError(
            f"platform {text!r}: expected OS/ARCH[/VARIANT], e.g. linux/arm64", setting="platform"
        )
    return Platform(*parts).normalized()


def host_platform() -> Platform:
    os_name = "linux" if sys.platform.startswith("linux") else sys.platform
    return Platform(os_name, _host.machine() or "unknown").normalized()


# Every document here comes from a registry: a shape other than the spec's is a
# ProtocolError (exit 4, or a pass with --on-error pass), never a TypeError.


def _load(body: bytes, what: str) -> dict[str, Any]:
    return parse_json_object(body, what)


def _field(data: dict[str, Any], name: str, what: str) -> str:
    """A string field that may be absent (then ``""``), never another type."""
    value = data.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ProtocolError(f"{what}: {name!r} is not a string")
    return value


def _platform_of(spec: dict[str, Any], what: str) -> Platform:
    return Platform(
        _field(spec, "os", what), _field(spec, "architecture", what), _field(spec, "variant", what)
    )


def index_platforms(body: bytes) -> list[Platform]:
    """The platforms an index offers, attestation entries (``unknown/unknown``) left out.
    An entry without ``platform`` offers none (the spec makes it optional)."""
    return [offered for offered, _ in index_entries(body)]


def index_entries(body: bytes) -> list[tuple[Platform, object]]:
    """Each platform an index offers with its entry's ``digest`` (unchecked: the caller
    validates what it puts in a URL), in the index's order."""
    manifests = _load(body, "index").get("manifests")
    if manifests is None:
        return []
    if not isinstance(manifests, list):
        raise ProtocolError("index: 'manifests' is not a list")
    found = []
    for entry in manifests:
        if not isinstance(entry, dict):
            raise ProtocolError("index: an entry of 'manifests' is not an object")
        spec = entry.get("platform")
        if spec is None:
            continue
        if not isinstance(spec, dict):
            raise ProtocolError("index: a 'platform' is not an object")
        offered = _platform_of(spec, "index platform")
        if offered.os and offered.os != "unknown":
            found.append((offered, entry.get("digest")))
    return found


def schema1_platform(body: bytes) -> Platform | None:
    """Docker schema 1 manifests carry ``architecture`` themselves (and are always Linux)."""
    data = _load(body, "manifest")
    if data.get("schemaVersion") != 1:
        return None
    return Platform("linux", _field(data, "architecture", "manifest"))


def config_digest(body: bytes) -> str:
    """The config blob a single image manifest points at."""
    config = _load(body, "manifest").get("config")
    digest = config.get("digest") if isinstance(config, dict) else None
    if not isinstance(digest, str):
        raise ProtocolError("manifest has no config descriptor")
    return digest


def config_platform(body: bytes) -> Platform:
    return _platform_of(_load(body, "image config"), "image config")


def describe(platforms: Sequence[Platform]) -> str:
    return ", ".join(sorted({str(p) for p in platforms})) or "none"
