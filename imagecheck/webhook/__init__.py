"""``imagecheck serve``: a validating admission webhook that refuses workloads whose images do
not exist, before the scheduler allocates anything.

A review's object is walked for its containers and pull secrets (:mod:`imagecheck.kube`), each
image is checked with the credentials its pod would pull with, and answers are shared across
reviews for as long as each stays true. What one review may cost is bounded (its images, the
time it waits, the connections and bytes a client may hold), since anyone who may create a pod
can send one. Logs are JSON lines (:class:`JsonFormatter`), and Prometheus metrics count what
was answered.

``imagecheck gate`` mounts ``POST /mutate`` (:class:`MutateEndpoint`, :func:`mutate_review`):
a mutating webhook that adds its scheduling gate to new pods, so that none is scheduled before
the gate controller has checked its images.

It needs the ``webhook`` extra (``pip install 'imagecheck[webhook]'``); the initContainer
image does not carry it. Names are imported on first use, so the defaults the command line
shows load no aiohttp.
"""

from __future__ import annotations

from imagecheck._lazy import lazy_face

TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true

_EXPORTS = {
    "JsonFormatter": "imagecheck.webhook._telemetry",
    "MUTATE_PATHS": "imagecheck.webhook._mutate_route",
    "MutateEndpoint": "imagecheck.webhook._mutate_route",
    "mutate_review": "imagecheck.webhook._mutate",
}

if TYPE_CHECKING:
    from imagecheck.webhook._mutate import mutate_review
    from imagecheck.webhook._mutate_route import MUTATE_PATHS, MutateEndpoint
    from imagecheck.webhook._telemetry import JsonFormatter

if not TYPE_CHECKING:  # hidden from checkers, which would take any misspelt name for it
    __getattr__, __dir__ = lazy_face(__name__, _EXPORTS, globals())


__all__ = [
    "MUTATE_PATHS",
    "JsonFormatter",
    "MutateEndpoint",
    "mutate_review",
]
