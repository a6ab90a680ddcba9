"""One connection's reading, held by two owners: the framer (``_framing.py``) and aiohttp's
``RequestHandler`` behind it.

Both pause and resume the same socket: the framer while aiohttp holds a request of the
connection or the client leaves its answers unread, aiohttp while its queue or a body's buffer
is full. aiohttp resumes reading whenever a handler reads a body below its low-water mark,
whoever paused it; over the bare transport that would undo the framer's pause at every
request, and a client that pipelines without reading would be read into memory. So aiohttp is
given this transport instead: every call goes to the real one but pausing, which is counted
per owner, and the socket is read only while neither holds it.
"""

from __future__ import annotations

import asyncio
from typing import Any


class SharedReading(asyncio.Transport):
    """The transport aiohttp's handler sees; :meth:`hold` is the framer's own pause."""

    def __init__(self, transport: asyncio.Transport) -> None:
        super().__init__()
        self._transport = transport
        self._held = False  # by the framer
        self._paused = False  # by aiohttp

    def hold(self, held: bool) -> None:
        """The framer's pause (True) or its release (False)."""
        self._held = held
        self._apply()

    def _apply(self) -> None:
        if self._transport.is_closing():
            return
        if self._held or self._paused:
            self._transport.pause_reading()
        else:
            self._transport.resume_reading()

    # -- asyncio.ReadTransport, for aiohttp --------------------------------------------------

    def pause_reading(self) -> None:
        self._paused = True
        self._apply()

    def resume_reading(self) -> None:
        self._paused = False
        self._apply()

    def is_reading(self) -> bool:
        return not self._paused and self._transport.is_reading()

    # -- everything else is the real transport's ---------------------------------------------

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._transport.close()

    def abort(self) -> None:
        self._transport.abort()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self._transport.write(data)

    def writelines(self, list_of_data: Any) -> None:
        self._transport.writelines(list_of_data)

    def write_eof(self) -> None:
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)
