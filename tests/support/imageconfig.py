"""An image's configuration as containerd holds it, and the command line the kubelet makes of
it and a container's ``command``/``args``.

Read from the content store (``ctr content get``): the image's target, the platform's manifest
when the target is an index, then the configuration blob. Each blob is parsed as hostile input
would be: its size capped, its shape checked.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

MAX_BLOB = 4 * 1024 * 1024
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)


class CtrRunner(Protocol):
    def ctr(self, *args: str) -> str: ...


def _blob(runner: CtrRunner, digest: str) -> dict[str, Any]:
    text = runner.ctr("content", "get", digest)
    if len(text) > MAX_BLOB:
        raise ValueError(f"blob {digest} is larger than {MAX_BLOB} bytes")
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"blob {digest} is not a JSON object")
    return value


def _target(runner: CtrRunner, image: str) -> str:
    for line in runner.ctr("images", "ls").splitlines()[1:]:
        fields = line.split()
        if fields and fields[0] == image:
            return fields[2]
    raise LookupError(f"image {image} is not in containerd")


def _host_platform() -> tuple[str, str]:
    return ("linux", "amd64")


def image_config(runner: CtrRunner, image: str, platform: str | None) -> dict[str, Any]:
    """The image configuration's ``config`` object (Entrypoint, Cmd, Env, User...) for
    ``platform`` (``os/arch``; the host's when ``None``)."""
    manifest = _blob(runner, _target(runner, image))
    if manifest.get("mediaType") in INDEX_TYPES or "manifests" in manifest:
        wanted = tuple(platform.split("/", 1)) if platform else _host_platform()
        children = [
            m
            for m in manifest["manifests"][:64]
            if (m.get("platform", {}).get("os"), m.get("platform", {}).get("architecture"))
            == wanted
        ]
        if not children:
            raise LookupError(f"image {image} has no manifest for {'/'.join(wanted)}")
        manifest = _blob(runner, children[0]["digest"])
    config = _blob(runner, manifest["config"]["digest"]).get("config") or {}
    if not isinstance(config, dict):
        raise ValueError(f"image {image}: its configuration's config is not an object")
    return config


def kubelet_argv(
    config: dict[str, Any], command: tuple[str, ...] | None, args: tuple[str, ...]
) -> list[str]:
    """The process's argv as Kubernetes makes it: ``command`` replaces the ENTRYPOINT (and
    drops the CMD), ``args`` replace the CMD."""
    entrypoint = list(command) if command is not None else list(config.get("Entrypoint") or [])
    if args:
        return [*entrypoint, *args]
    if command is not None:
        return entrypoint
    return [*entrypoint, *(config.get("Cmd") or [])]
