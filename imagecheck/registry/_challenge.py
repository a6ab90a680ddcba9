"""Parse ``WWW-Authenticate`` headers into :class:`Challenge` values. Pure: no I/O.

A registry answers an unauthenticated ``GET /v2/`` with 401 and one or more challenges
(RFC 9110 section 11.6.1), e.g.::

    Bearer realm="https://auth.docker.io/token",service="registry.docker.io"
    Basic realm="Registry Realm"

Parameter values may be quoted strings containing commas
(``scope="repository:a:pull,push"``) and backslash escapes, and several challenges may share
one header, so splitting on commas is wrong; this is a small tokenizer instead.

The header is the registry's text: it is never echoed in an error, and one longer than
:data:`MAX_CHALLENGE` is refused unread (real challenges are a few hundred bytes).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from imagecheck._text import printable
from imagecheck.errors import ProtocolError

# Docker Hub's challenge is under 200 bytes; 8 KiB leaves room for any honest one.
MAX_CHALLENGE = 8 * 1024

# RFC 9110 token characters; auth-scheme and auth-param names are tokens.
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"  # noqa: S105 (an RFC 9110 token, not a secret)
_SCHEME_RE = re.compile(rf"\s*({_TOKEN})")
_PARAM_RE = re.compile(rf"\s*({_TOKEN})\s*=\s*")
_TOKEN_VALUE_RE = re.compile(rf"({_TOKEN})")
_TOKEN68_RE = re.compile(r"\s*([A-Za-z0-9._~+/-]+=*)\s*(?:,|$)")


@dataclass(frozen=True, slots=True)
class Challenge:
    """One authentication challenge: a scheme (lower-cased) and its parameters.

    Parameter names are lower-cased (they are case-insensitive); values are kept as sent.
    """

    scheme: str
    params: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def realm(self) -> str | None:
        return self.params.get("realm")

    @property
    def service(self) -> str | None:
        return self.params.get("service")

    @property
    def scope(self) -> str | None:
        return self.params.get("scope")

    @property
    def error(self) -> str | None:
        return self.params.get("error")


def _quoted(text: str, pos: int) -> tuple[str, int]:
    """Read a quoted-string starting at ``text[pos] == '"'``; return (value, next position)."""
    out: list[str] = []
    i = pos + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        elif ch == '"':
            return "".join(out), i + 1
        else:
            out.append(ch)
            i += 1
    raise ProtocolError("unterminated quoted string in WWW-Authenticate header")


def _skip_comma(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t,":
        pos += 1
    return pos


def _parse_params(text: str, pos: int) -> tuple[dict[str, str], int]:
    """Read ``name=value`` pairs until the next challenge (a token not followed by '=')."""
    params: dict[str, str] = {}
    while True:
        pos = _skip_comma(text, pos)
        m = _PARAM_RE.match(text, pos)
        if m is None:
            return params, pos
        name = m.group(1).lower()
        pos = m.end()
        if pos < len(text) and text[pos] == '"':
            value, pos = _quoted(text, pos)
        else:
            vm = _TOKEN_VALUE_RE.match(text, pos)
            if vm is None:
                shown = printable(name, 40)
                raise ProtocolError(f"bad value for {shown!r} in WWW-Authenticate header")
            value, pos = vm.group(1), vm.end()
        params[name] = value


def parse_challenges(header: str) -> list[Challenge]:
    """Every challenge in one ``WWW-Authenticate`` header value, in order.

    Raises :class:`ProtocolError` for text that is not a challenge list, or is longer than
    :data:`MAX_CHALLENGE`.
    """
    if len(header) > MAX_CHALLENGE:
        raise ProtocolError(f"WWW-Authenticate header is longer than {MAX_CHALLENGE} characters")
    challenges: list[Challenge] = []
    pos = _skip_comma(header, 0)
    while pos < len(header):
        m = _SCHEME_RE.match(header, pos)
        if m is None:
            raise ProtocolError(f"malformed WWW-Authenticate header (at character {pos})")
        scheme, pos = m.group(1).lower(), m.end()
        params: dict[str, str] = {}
        token68 = _TOKEN68_RE.match(header, pos)
        if token68 is not None:
            # "Negotiate abc==" style: a bare token68, kept under an empty name.
            params[""] = token68.group(1)
            pos = token68.end()
        else:
            params, pos = _parse_params(header, pos)
        challenges.append(Challenge(scheme, MappingProxyType(params)))
        pos = _skip_comma(header, pos)
    return challenges


def pick_challenge(headers: list[str]) -> Challenge | None:
    """The challenge imagecheck will answer, from all ``WWW-Authenticate`` values of a response.

    Bearer is preferred over Basic (a registry offering both wants tokens); other schemes are
    ignored. ``None`` when no usable challenge was sent.
    """
    found: list[Challenge] = []
    for value in headers:
        found.extend(parse_challenges(value))
    for scheme in ("bearer", "basic"):
        for challenge in found:
            if challenge.scheme == scheme:
                return challenge
    return None
