"""Kubernetes image pull secrets, matched the way the kubelet matches them.

A pull secret mounted into the pod is a directory holding ``.dockerconfigjson``
(``{"auths": {KEY: ENTRY}}``) or the legacy ``.dockercfg`` (``{KEY: ENTRY}``), or that file
itself. Every secret's entries go into one keyring, as the kubelet's ``BasicDockerKeyring``
(pkg/credentialprovider/keyring.go) does:

- a key may carry a scheme (dropped), a path (``registry.example.com/team``; a leading
  ``/v1/`` or ``/v2/`` is dropped, as Docker does) and globs in host labels (``*.example.com``);
- keys are tried in reverse lexical order, so ``quay.io/team`` comes before ``quay.io``;
- a key matches an image when its port is equal, its host has as many labels as the image's,
  each label glob-matches, and its path is a prefix of the image's path;
- every matching entry is a candidate, and the kubelet tries each until a pull succeeds;
- a Docker Hub image with no match falls back to the ``index.docker.io`` entry.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from imagecheck.authn._configfiles import decode_auth_entry, load_json_file, parse_json_object
from imagecheck.authn._credentials import Credentials, RegistryKey, parse_registry_key
from imagecheck.authn._urlmatch import label_matches
from imagecheck.errors import CredentialsError
from imagecheck.reference import DOCKER_HUB_INDEX, Reference

DOCKERCONFIGJSON = ".dockerconfigjson"
DOCKERCFG = ".dockercfg"


def key_matches(key: RegistryKey, target: RegistryKey) -> bool:
    """The kubelet's ``URLsMatch``: equal port, same label count, globbing labels, path prefix."""
    if key.port != target.port:
        return False
    key_labels, target_labels = key.host.split("."), target.host.split(".")
    if len(key_labels) != len(target_labels):
        return False
    if not target.path.startswith(key.path):
        return False
    return all(label_matches(k, t) for k, t in zip(key_labels, target_labels, strict=True))


@dataclass(frozen=True)
class PullSecretKeychain:
    """All entries of every mounted pull secret, as one kubelet-style keyring."""

    entries: Sequence[tuple[RegistryKey, Credentials]]

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        target = parse_registry_key(reference.name)
        found = [creds for key, creds in self.entries if key_matches(key, target)]
        if not found and reference.is_docker_hub:
            found = [creds for key, creds in self.entries if key.text == DOCKER_HUB_INDEX]
        return tuple(found)

    @classmethod
    def from_paths(
        cls, paths: Iterable[str | Path], texts: Iterable[tuple[str, str]] = ()
    ) -> PullSecretKeychain:
        """Secrets mounted at ``paths``, then secrets given as ``(json text, where)``
        (read through the Kubernetes API), all in one keyring."""
        entries: list[tuple[RegistryKey, Credentials]] = []
        for path in paths:
            entries.extend(_read_secret(Path(path)))
        for text, where in texts:
            entries.extend(_entries(parse_json_object(text, where), where))
        # Reverse lexical order of the key text: more specific paths first; stable for ties
        # so that entries of the first secret named are tried first.
        entries.sort(key=lambda item: item[0].text, reverse=True)
        return cls(tuple(entries))


def _read_secret(path: Path) -> list[tuple[RegistryKey, Credentials]]:
    """A mounted secret: its directory (the usual ``..data`` symlinks are followed) or the
    file itself; a regular file of at most 1 MiB, never a FIFO or a device."""
    if path.is_dir():
        for name in (DOCKERCONFIGJSON, DOCKERCFG):
            if (path / name).exists():
                return _read_secret(path / name)
        raise CredentialsError(
            f"pull secret {path}: holds neither {DOCKERCONFIGJSON} nor {DOCKERCFG}"
        )
    return _entries(load_json_file(path, "pull secret"), f"pull secret {path}")


def _entries(data: dict[str, Any], where: str) -> list[tuple[RegistryKey, Credentials]]:
    # .dockerconfigjson wraps the entries in "auths"; the legacy .dockercfg does not.
    auths: Any = data.get("auths") if "auths" in data else data
    if not isinstance(auths, dict):
        raise CredentialsError(f"{where}: 'auths' must be an object")
    return [
        (parse_registry_key(key), decode_auth_entry(entry, where=f"{where} ({key})"))
        for key, entry in auths.items()
    ]


def pull_secret_paths(flags: Sequence[str], env: dict[str, str] | None = None) -> list[str]:
    """``--pull-secret`` values, then ``IMAGECHECK_PULL_SECRETS`` (``os.pathsep``- or
    comma-separated)."""
    env = dict(os.environ) if env is None else env
    paths = list(flags)
    raw = env.get("IMAGECHECK_PULL_SECRETS", "")
    paths.extend(p.strip() for p in raw.replace(",", os.pathsep).split(os.pathsep) if p.strip())
    return paths
