"""AWS Signature Version 4: sign one HTTP request with AWS credentials. Pure: no I/O, no clock.

The steps are AWS's, in its order
(https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html):

1. the *canonical request*: method, canonical URI, canonical query string, canonical headers,
   signed headers and the hex SHA-256 of the body, one a line;
2. the *string to sign*: ``AWS4-HMAC-SHA256``, the time, the credential scope
   ``YYYYMMDD/region/service/aws4_request`` and the hex SHA-256 of the canonical request;
3. the *signing key*: HMAC-SHA256 chained from ``"AWS4" + secret`` through the date, the
   region, the service and ``aws4_request``;
4. the *signature*, HMAC-SHA256 of the string to sign under that key, sent in
   ``Authorization: AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=...``.

:func:`sign` takes the request as it will go on the wire (the path and query already
percent-encoded, as an HTTP client sends them) and answers the headers to add. Every header it
is given is signed, so give it the ones the service must see unchanged (``Host`` at least, and
``Content-Type``); leave out those a proxy may rewrite. It is proven on AWS's own test suite
(``tests/data/sigv4``).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import SplitResult, quote, unquote_to_bytes, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"

# Collapsed to one space inside a header value: HTTP's own whitespace (RFC 9110 section 5.6.3).
_RUNS_OF_SPACE = re.compile(r"[ \t]+")
_DEFAULT_PORTS = {"http": ":80", "https": ":443"}


@dataclass(frozen=True, slots=True)
class AwsCredentials:
    """An AWS access key, long-lived or temporary (with a session token, as STS issues).
    The secrets never show in ``repr`` (and so in logs); a bad value is a ``ValueError``
    naming ``source``, never the value."""

    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str = field(default="", repr=False)
    source: str = ""  # where they came from, for messages: never secret

    def __post_init__(self) -> None:
        fields = (
            ("access key id", self.access_key_id, True),
            ("secret access key", self.secret_access_key, True),
            ("session token", self.session_token, False),
        )
        for name, value, required in fields:
            problem = _credential_problem(value, required=required)
            if problem:
                raise ValueError(f"{self.source or 'AWS credentials'}: the {name} {problem}")


def _credential_problem(value: str, *, required: bool) -> str | None:
    # Each goes into a header (the key id inside Authorization): no space, no control.
    if not value:
        return "is empty" if required else None
    if not all(ch.isprintable() and not ch.isspace() for ch in value):
        return "contains whitespace or a control character"
    return None


@dataclass(frozen=True, slots=True)
class Signed:
    """What signing made: the headers to add, and the steps on the way, which are what to
    compare when AWS answers ``SignatureDoesNotMatch`` (its message quotes the canonical
    request it expected). The session token is in the headers and the canonical request, and
    a signature is a credential for that one request: none of them shows in ``repr``."""

    headers: tuple[tuple[str, str], ...] = field(repr=False)
    canonical_request: str = field(repr=False)
    string_to_sign: str
    signature: str = field(repr=False)


def sign(
    credentials: AwsCredentials,
    *,
    method: str,
    url: str,
    region: str,
    service: str,
    when: datetime,
    headers: Sequence[tuple[str, str]] = (),
    body: bytes = b"",
    content_sha256_header: bool = False,
    normalize_path: bool | None = None,
) -> Signed:
    """Sign one request: ``headers`` are (name, value) pairs, a name may repeat; ``when`` is
    the time to sign at, an aware ``datetime`` (AWS refuses one far from its own clock).

    ``content_sha256_header`` adds and signs ``x-amz-content-sha256``, which S3 requires.
    ``normalize_path`` defaults to what the service wants: every service but S3 reads the path
    with dot segments removed and empty segments collapsed, and S3 reads it as sent (an object
    key may hold ``//`` or ``..``). Raises ``ValueError`` for a naive ``when`` or a header this
    function sets itself.
    """
    amz_date = _amz_date(when)
    parts = urlsplit(url)
    added = [("X-Amz-Date", amz_date)]
    if credentials.session_token:
        added.append(("X-Amz-Security-Token", credentials.session_token))
    payload_hash = hashlib.sha256(body).hexdigest()
    if content_sha256_header:
        added.append(("x-amz-content-sha256", payload_hash))
    _refuse_reserved(headers, added)
    to_sign = [*_with_host(headers, parts), *added]

    s3 = service == "s3"
    normalize = not s3 if normalize_path is None else normalize_path
    canonical_headers, signed_headers = canonicalize_headers(to_sign)
    canonical = "\n".join(
        (
            method.upper(),
            canonical_uri(parts.path, normalize=normalize, encode=not s3),
            canonical_query(parts.query),
            canonical_headers,
            signed_headers,
            payload_hash,
        )
    )
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    string_to_sign = "\n".join((ALGORITHM, amz_date, scope, _sha256(canonical)))
    key = signing_key(credentials.secret_access_key, amz_date[:8], region, service)
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    authorization = (
        f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
        f"SignedHeaders={signed_headers}, Signature={signature}"
    )
    return Signed(
        headers=(*added, ("Authorization", authorization)),
        canonical_request=canonical,
        string_to_sign=string_to_sign,
        signature=signature,
    )


def canonical_uri(path: str, *, normalize: bool, encode: bool) -> str:
    """The path as the service hashes it. ``path`` is the wire form, already percent-encoded
    once; every service but S3 encodes it once more, segment by segment (AWS's guide: "each
    path segment must be URI-encoded twice"), so ``%20`` on the wire is ``%2520`` here."""
    if normalize:
        path = remove_dot_segments(path)
    if encode:
        path = "/".join(uri_encode(segment) for segment in path.split("/"))
    return path or "/"


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4 (``.`` dropped, ``..`` drops the segment before it), with empty
    segments dropped too: AWS reads ``//`` as ``/``. Always absolute; a path whose last segment
    was empty, ``.`` or ``..`` keeps its trailing slash, as the RFC's does."""
    kept: list[str] = []
    segments = path.split("/")
    for segment in segments:
        if segment == "..":
            if kept:
                kept.pop()
        elif segment not in ("", "."):
            kept.append(segment)
    trailing = "/" if kept and segments[-1] in ("", ".", "..") else ""
    return "/" + "/".join(kept) + trailing


def canonical_query(query: str) -> str:
    """The query as the service hashes it: each name and value decoded from the wire and
    encoded AWS's way, sorted by name then value, ``name=value`` joined with ``&``; a name
    with no ``=`` has an empty value.

    A ``+`` is a plus here, as RFC 3986 reads it, and is signed as ``%2B``: a client that
    means a space must send ``%20``, as AWS's guide asks (an HTML form's ``+`` is not).
    """
    pairs = []
    for item in query.split("&"):
        if item:
            name, _, value = item.partition("=")
            pairs.append((_reencode(name), _reencode(value)))
    return "&".join(f"{name}={value}" for name, value in sorted(pairs))


def canonicalize_headers(headers: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """(canonical headers, signed headers): names lower-cased and sorted; each value trimmed,
    its runs of spaces made one; the values of a repeated name joined with commas, in the order
    given (their order is meaningful in HTTP, so it is signed)."""
    values: dict[str, list[str]] = {}
    for name, value in headers:
        values.setdefault(name.strip().lower(), []).append(_trim(value))
    names = sorted(values)
    lines = "".join(f"{name}:{','.join(values[name])}\n" for name in names)
    return lines, ";".join(names)


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """The key for one day, region and service: the secret itself never signs a request."""
    key = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def uri_encode(text: str | bytes) -> str:
    """AWS's UriEncode: RFC 3986's unreserved characters (``A-Z a-z 0-9 - . _ ~``) as they
    are, every other byte of the UTF-8 as ``%XX`` in upper case, ``/`` included."""
    return quote(text, safe="")


def _reencode(text: str) -> str:
    # Bytes, not str, between the two: a %XX that is not UTF-8 is signed as it was sent.
    return uri_encode(unquote_to_bytes(text))


def _trim(value: str) -> str:
    return _RUNS_OF_SPACE.sub(" ", value.strip(" \t"))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _amz_date(when: datetime) -> str:
    if when.tzinfo is None:
        raise ValueError("the signing time must be an aware datetime (in UTC)")
    return when.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def _with_host(headers: Sequence[tuple[str, str]], parts: SplitResult) -> list[tuple[str, str]]:
    """``headers``, with the ``Host`` an HTTP client derives from the URL (lower case, no
    default port, as httpx sends it) when they have none: every request signs its host."""
    if any(name.strip().lower() == "host" for name, _ in headers):
        return list(headers)
    host = parts.netloc.rpartition("@")[2].lower()
    default_port = _DEFAULT_PORTS.get(parts.scheme.lower())
    if default_port:
        host = host.removesuffix(default_port)
    return [*headers, ("Host", host)]


def _refuse_reserved(headers: Sequence[tuple[str, str]], added: list[tuple[str, str]]) -> None:
    """Refuse a header this signer sets (a second copy would be sent and signed beside it),
    and ``Authorization``."""
    reserved = {name.lower() for name, _ in added} | {"authorization"}
    for name, _ in headers:
        if name.strip().lower() in reserved:
            raise ValueError(f"the signer sets the {name} header itself: leave it out")
