"""A bounded map whose values each expire: what a long-lived process keeps of answers it was
given for a while (pull secrets read through the API, a ServiceAccount's secret names, a
credential plugin's answer). At most ``max_entries``, the least recently used dropped first;
an expired value is dropped when it is next looked up."""

from __future__ import annotations

import enum
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, Literal, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Miss(enum.Enum):
    """Nothing kept for a key (values may be None themselves)."""

    MISS = 0


MISS: Literal[Miss.MISS] = Miss.MISS


def _monotonic() -> float:
    return time.monotonic()  # looked up each call, so that a patched clock is the clock


class Expiring(Generic[K, V]):
    def __init__(self, max_entries: int, clock: Callable[[], float] = _monotonic) -> None:
        self._max = max_entries
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | Literal[Miss.MISS]:
        """The value kept for ``key`` (now the most recently used), or :data:`MISS`."""
        entry = self._entries.get(key)
        if entry is None:
            return MISS
        if entry[0] <= self._clock():
            del self._entries[key]
            return MISS
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        """Keep ``value`` for ``ttl`` seconds."""
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)
