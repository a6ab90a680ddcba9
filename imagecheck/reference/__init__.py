"""Image references: parsing and the distribution/reference rules. Pure: no I/O.

:func:`parse_reference` turns text into a frozen :class:`Reference`, normalized as the
Docker CLI and containerd normalize it (``busybox`` is ``docker.io/library/busybox:latest``),
or raises :class:`~imagecheck.errors.InvalidReferenceError` with a one-line reason.
"""

from __future__ import annotations

from imagecheck._lazy import lazy_face

TYPE_CHECKING = False  # typing's, without importing typing: checkers treat the name as true

_EXPORTS = {
    "DOCKER_HUB_ALIASES": "imagecheck.reference._reference",
    "DOCKER_HUB_INDEX": "imagecheck.reference._reference",
    "Reference": "imagecheck.reference._reference",
    "parse_reference": "imagecheck.reference._reference",
}

if TYPE_CHECKING:
    from imagecheck.reference._reference import (
        DOCKER_HUB_ALIASES,
        DOCKER_HUB_INDEX,
        Reference,
        parse_reference,
    )

if not TYPE_CHECKING:  # hidden from checkers, which would take any misspelt name for it
    __getattr__, __dir__ = lazy_face(__name__, _EXPORTS, globals())


__all__ = [
    "DOCKER_HUB_ALIASES",
    "DOCKER_HUB_INDEX",
    "Reference",
    "parse_reference",
]
