"""What a hostile server saw: one :class:`Exchange` per request, and the status it sent."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Exchange:
    """One request as the server saw it, and what it did about it. ``status`` is the status
    sent to the client (``None`` when none was: hang, reset, client gone). A TLS ClientHello
    on a plain port is journalled as method ``"TLS"``, action ``"reject-tls"``."""

    method: str
    target: str
    at: float  # time.monotonic() when the request had been read
    action: str = ""
    status: int | None = None
    listener: str = "self"  # which of the server's listeners it came in on
    role: str = ""  # what a scripted server took the request for
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None


class Journal:
    """The exchanges in arrival order, safe to add to from every connection thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[Exchange] = []

    def add(self, exchange: Exchange) -> int:
        with self._lock:
            self._seen.append(exchange)
            return len(self._seen) - 1

    def answered(self, index: int, status: int | None) -> None:
        with self._lock:
            if index < len(self._seen):  # clear() may have run meanwhile
                self._seen[index] = replace(self._seen[index], status=status)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()

    def copy(self) -> list[Exchange]:
        with self._lock:
            return list(self._seen)
