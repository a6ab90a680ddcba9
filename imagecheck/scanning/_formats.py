"""Formats known by their file's name, beyond YAML, JSON and Dockerfiles: dev environments
(``_devenv``) and the build tools that make images (``_bake``, ``_tilt``).

Each is read by a function of (text, file) that yields the file's results by position, as
the YAML reader does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import PurePath

from imagecheck.scanning._bake import images_in_bake
from imagecheck.scanning._devenv import images_in_devcontainer, images_in_quadlet
from imagecheck.scanning._manifests import Found
from imagecheck.scanning._tilt import images_in_tiltfile

__all__ = ["BUILD_FORMATS", "named_format"]

BUILD_FORMATS: dict[str, Callable[[str, str], Iterable[Found]]] = {
    "devcontainer": images_in_devcontainer,
    "quadlet": images_in_quadlet,
    "tiltfile": images_in_tiltfile,
    "bake": images_in_bake,
}
_DEVCONTAINER_NAMES = frozenset({"devcontainer.json", ".devcontainer.json"})
# Podman Quadlet units that pull an image (podman-systemd.unit(5), podman-image.unit(5)). A
# .build unit's ImageTag= is only ever referred to as NAME.build, which is skipped as such;
# a .volume's Image= (Driver=image) is rare and not read.
_QUADLET_SUFFIXES = (".container", ".image")


def named_format(file: str) -> str | None:
    """The format of ``file`` when its name says it is one of :data:`BUILD_FORMATS`."""
    name = PurePath(file).name
    lower = name.lower()
    if lower in _DEVCONTAINER_NAMES:
        return "devcontainer"
    if lower.endswith(_QUADLET_SUFFIXES):
        return "quadlet"
    if name == "Tiltfile":
        return "tiltfile"
    # docker-bake.hcl, docker-bake.override.json, ...; any *.hcl with bake in its name.
    if (lower.startswith("docker-bake") and lower.endswith(".json")) or (
        "bake" in lower and lower.endswith(".hcl")
    ):
        return "bake"
    return None
