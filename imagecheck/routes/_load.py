"""The router a node's registry configuration makes: at most one runtime's, read once."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import cast

from imagecheck.errors import UsageError
from imagecheck.routes._types import Router

PathText = str | PathLike[str]


def load_router(
    *,
    hosts_dir: PathText | None = None,
    registries_conf: PathText | None = None,
    mirrors: bool = False,
) -> Router | None:
    """The router of containerd's ``hosts_dir`` or of ``registries_conf``, or None when
    neither is given. A node runs one runtime, so one of them; and mirrors given besides
    would be asked where the node would not ask them (containerd refuses its CRI
    ``mirrors`` beside ``config_path`` for the same reason). Raises
    :class:`~imagecheck.errors.UsageError` (a ``ConfigFileError`` for a bad file)."""
    if hosts_dir is not None and registries_conf is not None:
        raise UsageError(
            "a node runs one container runtime: give its hosts.toml directory (containerd) "
            "or its registries.conf (CRI-O), not both"
        )
    if (hosts_dir is not None or registries_conf is not None) and mirrors:
        raise UsageError(
            "mirrors cannot be given beside the node's registry configuration, which says "
            "which mirrors the node asks: add them to it"
        )
    if hosts_dir is not None:
        return _loader("_containerd", "load_hosts_dir")(Path(hosts_dir))
    if registries_conf is not None:
        return _loader("_registries", "load_registries_conf")(Path(registries_conf))
    return None


def _loader(module: str, name: str) -> Callable[[Path], Router]:
    """A reader, imported when a configuration is given: a command without one never pays
    for the TOML parser and the readers' tables (the start-up of every check)."""
    found = getattr(importlib.import_module(f"imagecheck.routes.{module}"), name)
    return cast(Callable[[Path], Router], found)
