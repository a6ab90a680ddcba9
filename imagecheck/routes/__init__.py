"""Routes: which hosts a node's container runtime asks for a reference, in its order, with its
TLS settings, as its registry configuration says (containerd's ``hosts.toml`` directories,
``registries.conf`` of CRI-O and podman). Reading a configuration does no network I/O; the
checker (``imagecheck.registry``) asks the endpoints.
"""

from __future__ import annotations

from imagecheck._lazy import lazy_face

TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true

_EXPORTS = {
    "Endpoint": "imagecheck.routes._types",
    "HostTLS": "imagecheck.routes._types",
    "Route": "imagecheck.routes._types",
    "Router": "imagecheck.routes._types",
    "Verdict": "imagecheck.routes._types",
    "default_route": "imagecheck.routes._types",
    "load_hosts_dir": "imagecheck.routes._containerd",
    "load_registries_conf": "imagecheck.routes._registries",
    "load_router": "imagecheck.routes._load",
}

if TYPE_CHECKING:
    from imagecheck.routes._containerd import load_hosts_dir
    from imagecheck.routes._load import load_router
    from imagecheck.routes._registries import load_registries_conf
    from imagecheck.routes._types import (
        Endpoint,
        HostTLS,
        Route,
        Router,
        Verdict,
        default_route,
    )

if not TYPE_CHECKING:  # hidden from checkers, which would take any misspelt name for it
    __getattr__, __dir__ = lazy_face(__name__, _EXPORTS, globals())


__all__ = [
    "Endpoint",
    "HostTLS",
    "Route",
    "Router",
    "Verdict",
    "default_route",
    "load_hosts_dir",
    "load_registries_conf",
    "load_router",
]
