"""What the webhook remembers between reviews: answers, each for as long as it stays true, and
the references its images parse to. Both are bounded: the process runs for weeks, and the
images come from whoever may create a pod.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace

from imagecheck.errors import InvalidReferenceError
from imagecheck.reference import Reference, parse_reference
from imagecheck.result import CheckResult, Status

__all__ = ["Key", "ParsedReferences", "ResultStore"]

# Kept per reference *and* credentials: a pod whose pull secrets open a private repository must
# not vouch for a pod without them (its kubelet could not pull). ``None`` stands for the
# webhook's own credentials.
Key = tuple[Reference, Hashable]


@dataclass(frozen=True, slots=True)
class _Entry:
    result: CheckResult
    expires_at: float


class ResultStore:
    """Answers by :data:`Key`: *found* by digest for good (a digest names one manifest forever),
    *found* by tag for ``tag_ttl`` (a tag can be moved or deleted), *missing* for
    ``missing_ttl`` (it may be pushed any moment); denials and errors not at all (the next
    review asks again). At most ``max_entries``, the least recently used dropped first."""

    def __init__(
        self, *, tag_ttl: float, missing_ttl: float, max_entries: int, clock: Callable[[], float]
    ) -> None:
        self._tag_ttl = tag_ttl
        self._missing_ttl = missing_ttl
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()

    def get(self, key: Key, image: str) -> CheckResult | None:
        """The answer kept for ``key``, as ``image`` names it; None if none is or it expired."""
        entry = self._entries.get(key)
        if entry is None or entry.expires_at <= self._clock():
            return None
        self._entries.move_to_end(key)
        result = entry.result  # stored with elapsed_ms 0: an answer from the cache took none
        return result if result.image == image else replace(result, image=image)

    def put(self, key: Key, result: CheckResult) -> None:
        ttl = self._ttl(key[0], result)
        if ttl <= 0:
            return
        self._entries[key] = _Entry(replace(result, elapsed_ms=0.0), self._clock() + ttl)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def _ttl(self, ref: Reference, result: CheckResult) -> float:
        if result.status is Status.FOUND:
            return float("inf") if ref.digest else self._tag_ttl
        if result.status is Status.MISSING:
            return self._missing_ttl
        return 0.0


class ParsedReferences:
    """Image text -> its reference (parsing is pure): a warm webhook sees the same few images in
    every review. Only valid ones are kept (the text of a valid reference is short), at most
    ``max_entries``, the oldest dropped first."""

    def __init__(self, max_entries: int) -> None:
        self._max = max_entries
        self._refs: dict[str, Reference] = {}

    def get(self, image: str) -> Reference | str:
        """``image`` parsed, or the reason it is not a reference."""
        ref = self._refs.get(image)
        if ref is not None:
            return ref
        try:
            ref = parse_reference(image)
        except InvalidReferenceError as exc:
            return exc.reason
        self._refs[image] = ref
        if len(self._refs) > self._max:
            del self._refs[next(iter(self._refs))]
        return ref
