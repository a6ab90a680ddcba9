"""Which digest a registry's answer names, and whether it is the one asked for.

A digest counts only in an algorithm the OCI image-spec registers (descriptor.md#registered-
algorithms), spelled as the spec says: ``sha256:`` or ``sha512:`` and lowercase hex of the
algorithm's length. Pure: the caller reads the answer.
"""

from __future__ import annotations

import hashlib
import re

import httpx

from imagecheck._text import printable
from imagecheck.errors import ProtocolError
from imagecheck.reference import Reference

# The registered algorithms, with the length of their lowercase-hex encoding.
_REGISTERED_DIGESTS = {"sha256": 64, "sha512": 128}
_LOWER_HEX = re.compile(r"[0-9a-f]+")


def registered_digest(text: str) -> bool:
    """Whether ``text`` is a digest in a registered algorithm, spelled as the spec says."""
    algorithm, _, encoded = text.partition(":")
    length = _REGISTERED_DIGESTS.get(algorithm)
    return length == len(encoded) and _LOWER_HEX.fullmatch(encoded) is not None


def answered_digest(ref: Reference, response: httpx.Response, body: bytes | None) -> str | None:
    """The manifest's digest. For a digest pin, every digest the answer carries (the header,
    the body's own hash) must be the pinned one; otherwise the header, else the body's hash.

    A ``Docker-Content-Digest`` counts only in a registered algorithm: as
    the kubelet's containerd does. Its resolver checks the header of a tag's answer with
    go-digest's ``Validate`` and fails the pull on an algorithm it does not know ("not a
    valid digest"), so for a tag such a header is a ProtocolError: never ``md5:...`` reported
    as the digest found, for a deployment to pin to. For a digest pin containerd does not
    read the header at all (the pin names the content, whose hash it checks on fetch): here
    such a header is set aside, and the body's own hash (``manifest.py`` GETs it) decides.
    """
    header = _header_digest(ref, response)
    computed = _digest_of(body, ref.digest or header or "sha256:") if body is not None else None
    if ref.digest is None:
        return header or computed
    if header is None and computed is None:
        raise ProtocolError(f"{ref.api_host} did not say which digest it served")
    for served in (computed, header):
        if served is not None and served != ref.digest:
            raise ProtocolError(
                f"{ref.api_host} served digest {served} when asked for {ref.digest}"
            )
    return ref.digest


def _header_digest(ref: Reference, response: httpx.Response) -> str | None:
    """``Docker-Content-Digest`` when it is registered; an unregistered one is an error for a
    tag and set aside for a digest pin (see ``answered_digest``)."""
    header: str | None = response.headers.get("Docker-Content-Digest")
    if header is None or registered_digest(header):
        return header
    if ref.digest is None:
        raise ProtocolError(
            f"{ref.api_host} sent an invalid Docker-Content-Digest "
            f"{printable(header, 80)!r}: not a sha256 or sha512 digest in lowercase hex"
        )
    return None


def _digest_of(body: bytes, like: str) -> str | None:
    algorithm = like.split(":", 1)[0]
    if algorithm not in _REGISTERED_DIGESTS:
        return None
    return f"{algorithm}:{hashlib.new(algorithm, body).hexdigest()}"
