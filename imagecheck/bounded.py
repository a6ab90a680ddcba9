"""Bounds on untrusted input, in one place: capped body reads, JSON that never raises past
the parser, and text that is safe to print.

Everything a registry, token service, credential helper, Kubernetes API server or admission
client sends is hostile until bounded (issue #10):

* **Bodies** are streamed, never read whole: :func:`read_capped` refuses a body over its
  limit (a manifest, a token answer), :func:`read_prefix` keeps only the start of one whose
  content does not matter beyond a reason (an error page, a ping answer) and stops reading.
* **JSON** goes through :func:`parse_json`: 60,000-deep nesting (``RecursionError``), a
  5,000-digit number (``ValueError`` from CPython's integer-string limit), invalid UTF-8 and
  bad syntax all become one typed error naming what was parsed, never a traceback.
  :func:`parse_json_object` also requires an object, the shape every protocol document has.
* **Text** shown to a person goes through :func:`printable`: control characters (newlines,
  ANSI escapes, ``\\r``) are replaced, so a registry cannot forge an output line, and its
  length is capped.
"""

from __future__ import annotations

import json
import unicodedata
import zlib
from typing import Any

import httpx

from imagecheck.errors import ImagecheckError, ProtocolError

# Enough of an error body or a ping answer to read a reason from; the rest is not worth holding.
MAX_ERROR_BODY = 16 * 1024
# Distribution refuses manifests over 4 MiB; nothing larger is a manifest (or an image config).
MAX_MANIFEST_SIZE = 4 * 1024 * 1024
# A token answer is a small JSON object; anything larger is not one.
MAX_TOKEN_RESPONSE = 64 * 1024
# Text from elsewhere that is shown to a person (a registry's error message, a helper's stderr).
MAX_SHOWN = 200


async def read_capped(
    response: httpx.Response,
    limit: int,
    what: str,
    *,
    error: type[ImagecheckError] = ProtocolError,
) -> bytes:
    """The whole body, refusing to hold more than ``limit`` bytes of it.

    A ``Content-Length`` over the limit is refused before a byte is read; a body that runs
    past it (chunked, or lying about its length) is refused as soon as it does.
    """
    length = response.headers.get("Content-Length", "")
    if length.isdigit() and int(length) > limit:
        raise error(f"{what} is larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        size += len(chunk)
        if size > limit:
            raise error(f"{what} is larger than {limit} bytes")
        chunks.append(chunk)
    return _decoded(response, b"".join(chunks), limit, what, error)


async def read_prefix(response: httpx.Response, limit: int = MAX_ERROR_BODY) -> bytes:
    """At most the first ``limit`` bytes of the body; the rest is never read.

    The caller closes the response; a body left unread closes its connection rather than
    returning it to the pool, which is the right price for a body nobody wants.
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        chunks.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    raw = b"".join(chunks)[:limit]
    try:
        return _decoded(response, raw, limit, "body", ProtocolError)[:limit]
    except ProtocolError:
        return b""  # a compressed prefix that does not decode alone: no reason to show


def _decoded(
    response: httpx.Response, raw: bytes, limit: int, what: str, error: type[ImagecheckError]
) -> bytes:
    """``raw`` with the response's ``Content-Encoding`` undone, still within ``limit``.

    Registries rarely compress, but a gzip bomb must not get past the cap: the decoder is fed
    the raw bytes and its output is capped too.
    """
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    if not raw or encoding in ("", "identity"):
        return raw
    decoder = _decoder(encoding)
    if decoder is None:
        raise error(f"{what} has an unsupported Content-Encoding {printable(encoding)!r}")
    try:
        out: bytes = decoder.decompress(raw, limit + 1)
    except zlib.error:
        raise error(f"{what} could not be decoded ({printable(encoding)})") from None
    if len(out) > limit:
        raise error(f"{what} is larger than {limit} bytes")
    return out


def _decoder(encoding: str) -> Any:
    """A capped decoder for the encodings a server may use unasked (we ask for identity)."""
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj()
    return None


def parse_json(
    data: bytes | str,
    what: str,
    *,
    error: type[ImagecheckError] = ProtocolError,
) -> Any:
    """``data`` as JSON, or ``error`` saying ``what`` is not valid JSON. Never raises anything
    else: not RecursionError (deep nesting), not ValueError (huge integers), not
    UnicodeDecodeError."""
    try:
        return json.loads(data)
    except RecursionError:
        raise error(f"{what} is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise error(f"{what} is not valid JSON (line {exc.lineno} column {exc.colno})") from None
    except (ValueError, UnicodeDecodeError, TypeError):
        # ValueError: "Exceeds the limit (4300 digits) for integer string conversion".
        raise error(f"{what} is not valid JSON") from None


def parse_json_object(
    data: bytes | str,
    what: str,
    *,
    error: type[ImagecheckError] = ProtocolError,
) -> dict[str, Any]:
    """Like :func:`parse_json`, and the document must be a JSON object."""
    value = parse_json(data, what, error=error)
    if not isinstance(value, dict):
        raise error(f"{what} is not a JSON object")
    return value


def printable(text: object, limit: int = MAX_SHOWN) -> str:
    """``text`` made safe for one line of output: control and format characters (newlines,
    ESC, ``\\r``, bidi overrides) become ``?``, and at most ``limit`` characters are kept."""
    shown = str(text)
    if len(shown) > limit:
        shown = shown[:limit] + "..."
    return "".join("?" if _unsafe(ch) else ch for ch in shown)


def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")
