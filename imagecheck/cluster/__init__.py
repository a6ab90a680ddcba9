"""Cluster mode: ``imagecheck reap`` (fail Jobs whose pods wait on an image the registry says
is missing) and ``imagecheck audit`` (every workload's images, checked).

Installed with the ``cluster`` extra (``pip install 'imagecheck[cluster]'``), kept out of the
initContainer image. Names are imported on first use, so the defaults the command line shows
load no lightkube.
"""

from __future__ import annotations

from imagecheck._lazy import lazy_face

TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true

_EXPORTS = {
    "AuditReport": "imagecheck.cluster._audit",
    "Auditor": "imagecheck.cluster._serve",
    "Cluster": "imagecheck.cluster._model",
    "DEFAULT_INTERVAL": "imagecheck.cluster._limits",
    "DEFAULT_LISTEN": "imagecheck.cluster._limits",
    "DEFAULT_MAX_SERIES": "imagecheck.cluster._limits",
    "Elector": "imagecheck.cluster._lease",
    "Hooks": "imagecheck.cluster._reap_loop",
    "KubeCluster": "imagecheck.cluster._api",
    "LeaseConfig": "imagecheck.cluster._lease",
    "MAX_INTERVAL": "imagecheck.cluster._limits",
    "Outcome": "imagecheck.cluster._reap",
    "RENDERERS": "imagecheck.cluster._render",
    "ReapLoop": "imagecheck.cluster._reap_loop",
    "ReapMetrics": "imagecheck.cluster._reap_metrics",
    "ReapOptions": "imagecheck.cluster._reap_pass",
    "Reaper": "imagecheck.cluster._reap_pass",
    "Selector": "imagecheck.cluster._model",
    "audit": "imagecheck.cluster._audit",
    "identity": "imagecheck.cluster._lease",
    "own_namespace": "imagecheck.cluster._lease",
    "parse_kind": "imagecheck.cluster._audit",
}

if TYPE_CHECKING:
    from imagecheck.cluster._api import KubeCluster
    from imagecheck.cluster._audit import AuditReport, audit, parse_kind
    from imagecheck.cluster._lease import Elector, LeaseConfig, identity, own_namespace
    from imagecheck.cluster._limits import (
        DEFAULT_INTERVAL,
        DEFAULT_LISTEN,
        DEFAULT_MAX_SERIES,
        MAX_INTERVAL,
    )
    from imagecheck.cluster._model import Cluster, Selector
    from imagecheck.cluster._reap import Outcome
    from imagecheck.cluster._reap_loop import Hooks, ReapLoop
    from imagecheck.cluster._reap_metrics import ReapMetrics
    from imagecheck.cluster._reap_pass import Reaper, ReapOptions
    from imagecheck.cluster._render import RENDERERS
    from imagecheck.cluster._serve import Auditor

if not TYPE_CHECKING:  # hidden from checkers, which would take any misspelt name for it
    __getattr__, __dir__ = lazy_face(__name__, _EXPORTS, globals())


__all__ = [
    "DEFAULT_INTERVAL",
    "DEFAULT_LISTEN",
    "DEFAULT_MAX_SERIES",
    "MAX_INTERVAL",
    "RENDERERS",
    "AuditReport",
    "Auditor",
    "Cluster",
    "Elector",
    "Hooks",
    "KubeCluster",
    "LeaseConfig",
    "Outcome",
    "ReapLoop",
    "ReapMetrics",
    "ReapOptions",
    "Reaper",
    "Selector",
    "audit",
    "identity",
    "own_namespace",
    "parse_kind",
]
