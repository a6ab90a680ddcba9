"""What a check answers: a :class:`CheckResult` with a :class:`Status`.

*Missing* is an answer, so it is a result like *found*; exceptions are reserved for the
cases where no answer could be had (see ``errors.py``).
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass
from typing import Any

from imagecheck.errors import Hint
from imagecheck.reference import Reference

# Texts that many results of one run share (the media type, "found in HOST", the host) are
# kept once (``sys.intern``: dropped again when no result holds them), so that a run of many
# images does not hold the same few texts once per result. Longer texts (error
# messages, mostly one of a kind) are left as they are.
_SHARED_FIELDS = ("message", "media_type", "registry")
_SHARED_MAX = 128


class Status(enum.StrEnum):
    """The answer for one image. Exit codes are the CLI's business (``cli.py``)."""

    FOUND = "found"
    MISSING = "missing"
    DENIED = "denied"
    ERROR = "error"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The outcome of checking one image reference.

    ``image`` is the text as the user gave it; ``reference`` its parsed form (``None`` only
    when the text was not a valid reference). ``digest``, ``media_type`` and ``size`` describe
    the manifest the registry holds, when it was found. ``hint`` says what setting would let a
    refused step go ahead; front ends add it to the message in their own words
    (``render.explained``).
    """

    image: str
    reference: Reference | None
    status: Status
    message: str = ""
    digest: str | None = None
    media_type: str | None = None
    size: int | None = None
    registry: str | None = None
    elapsed_ms: float = 0.0
    hint: Hint | None = None

    def __post_init__(self) -> None:
        for name in _SHARED_FIELDS:
            text = getattr(self, name)
            if text is not None and len(text) <= _SHARED_MAX:
                object.__setattr__(self, name, sys.intern(text))

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape the CLI guide documents (stable field names)."""
        return {
            "image": self.image,
            "reference": str(self.reference) if self.reference else None,
            "status": self.status.value,
            "digest": self.digest,
            "media_type": self.media_type,
            "size": self.size,
            "registry": self.registry,
            "message": self.message,
            "elapsed_ms": round(self.elapsed_ms, 1),
        }
