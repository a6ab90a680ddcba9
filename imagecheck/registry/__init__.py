"""The registry client: what ``check`` asks a registry, and how.

:class:`ImageChecker` pings ``/v2/``, reads the challenge, answers it (Basic, or a Bearer
token from the realm the registry names), then asks for the manifest (``HEAD``, ``GET`` when
a platform has to be picked from an index) and turns each answer into a
:class:`~imagecheck.result.CheckResult`. HTTP status maps to one typed error that knows
whether it is temporary, and :class:`RetryPolicy` retries on that alone, within the run's
deadline. TLS trust and the network guard (which destinations a redirect or a realm may
name) live here too.
"""

from __future__ import annotations

from imagecheck._lazy import lazy_face

TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true

_EXPORTS = {
    "ClientOptions": "imagecheck.registry._client",
    "ImageChecker": "imagecheck.registry._client",
    "Platform": "imagecheck.registry._platform",
    "Progress": "imagecheck.registry._batch",
    "Sleep": "imagecheck.registry._retry",
    "parse_platform": "imagecheck.registry._platform",
}

if TYPE_CHECKING:
    from imagecheck.registry._batch import Progress
    from imagecheck.registry._client import ClientOptions, ImageChecker
    from imagecheck.registry._platform import Platform, parse_platform
    from imagecheck.registry._retry import Sleep

if not TYPE_CHECKING:  # hidden from checkers, which would take any misspelt name for it
    __getattr__, __dir__ = lazy_face(__name__, _EXPORTS, globals())


__all__ = [
    "ClientOptions",
    "ImageChecker",
    "Platform",
    "Progress",
    "Sleep",
    "parse_platform",
]
