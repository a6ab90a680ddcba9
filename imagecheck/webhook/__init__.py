"""``imagecheck serve``: a validating admission webhook that refuses workloads whose images do
not exist, before the scheduler allocates anything.

It needs the ``webhook`` extra (``pip install 'imagecheck[webhook]'``); the initContainer
image does not carry it. Names are imported on first use, so the defaults the command line
shows load no aiohttp.
"""

from __future__ import annotations

from imagecheck._lazy import lazy_face

TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true

_EXPORTS = {
    "JsonFormatter": "imagecheck.webhook._telemetry",
}

if TYPE_CHECKING:
    from imagecheck.webhook._telemetry import JsonFormatter

if not TYPE_CHECKING:  # hidden from checkers, which would take any misspelt name for it
    __getattr__, __dir__ = lazy_face(__name__, _EXPORTS, globals())


__all__ = [
    "JsonFormatter",
]
