"""Bounds on what the Kubernetes API sends cluster mode, applied before lightkube reads a
byte (a response hook on its httpx2 client; ``imagecheck._capped`` does the same for httpx's
types, which httpx2's are not). Responses are asked for unencoded (``Accept-Encoding:
identity``) and an encoded one is refused, so the caps count the bytes that get decoded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2

from imagecheck.cluster._model import Unreachable

# A page of 500 pods is 2-10 MiB of JSON; a response over this is not one we want.
MAX_RESPONSE = 16 * 1024 * 1024
# One watch event is one object; etcd refuses objects over 1.5 MiB (--max-request-bytes).
MAX_WATCH_EVENT = 4 * 1024 * 1024


async def bound_response(response: httpx2.Response) -> None:
    """Before lightkube reads a byte: refuse an encoded body, and cap the rest."""
    encoding = response.headers.get("Content-Encoding", "identity").lower()
    if encoding != "identity":
        raise Unreachable(f"Kubernetes API: a {encoding!r}-encoded answer, asked for none")
    # lightkube reads headers["Content-Type"] of any error: a missing one would be a KeyError.
    response.headers.setdefault("Content-Type", "application/octet-stream")
    watch = response.request.url.params.get("watch") == "true"
    limit = MAX_WATCH_EVENT if watch else MAX_RESPONSE
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > limit:
        raise Unreachable(f"Kubernetes API: an answer of {length} bytes, over {limit}")
    response.stream = _CappedStream(response.stream, limit, per_line=watch)


class _CappedStream(httpx2.AsyncByteStream):
    """A body refused past ``limit`` bytes: in all, or (a watch) since the last newline."""

    def __init__(self, inner: Any, limit: int, *, per_line: bool) -> None:
        self._inner = inner
        self._limit = limit
        self._per_line = per_line

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            newline = chunk.rfind(b"\n") if self._per_line else -1
            size = len(chunk) - newline - 1 if newline >= 0 else size + len(chunk)
            if size > self._limit:
                what = "watch event" if self._per_line else "answer"
                raise Unreachable(f"Kubernetes API: a {what} over {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
