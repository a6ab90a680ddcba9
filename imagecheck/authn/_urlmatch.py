"""The kubelet's image matching, as ``URLsMatchStr`` and ``BasicDockerKeyring`` do it
(kubernetes/kubernetes ``pkg/credentialprovider/keyring.go``).

A pattern (a credential provider's ``matchImages`` entry, or a key of its answer's ``auth``
map) and an image are each read as a URL without a scheme (Go's ``url.Parse`` of
``"https://" + text``). They match when:

- the ports are equal (``net.SplitHostPort``; none is ``""``);
- the hosts have as many dot-separated labels, and each label of the pattern matches the
  image's as a ``filepath.Match`` glob (``*``, ``?``, ``[a-z]``, ``[^x]``, ``\\`` escapes), so
  ``*.dkr.ecr.*.amazonaws.com`` matches one label per ``*`` and never ``a.b.dkr.ecr...``;
- the pattern's path is a string prefix of the image's (``/team`` matches ``/teams/x`` too:
  the kubelet compares strings, not path segments).

Nothing is lower-cased: the kubelet compares as written. A malformed pattern matches nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeVar

T = TypeVar("T")

# Go's url.Parse refuses these in a host (net/url shouldEscape in encodeHost mode): anything
# ASCII that is not alphanumeric or one of these. Bytes >= 0x80 pass.
_HOST_PUNCT = frozenset("-._~!$&'()*+,;=:[]<>\"%")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


class BadURL(ValueError):
    """What Go's ``url.Parse`` would refuse, worded for a config error."""


@dataclass(frozen=True, slots=True)
class SchemelessURL:
    host: str  # host[:port], as url.URL.Host
    path: str  # unescaped, as url.URL.Path


def parse_schemeless_url(text: str) -> SchemelessURL:
    """``credentialprovider.ParseSchemelessURL``: ``text`` read as ``https://`` + it."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise BadURL("invalid control character in URL")
    rest = text.split("#", 1)[0].split("?", 1)[0]
    authority, slash, path = rest.partition("/")
    host = authority.rpartition("@")[2]
    _check_host(host)
    return SchemelessURL(host, _unescape(slash + path))


def _check_host(host: str) -> None:
    for ch in host:
        if ord(ch) < 0x80 and not ch.isalnum() and ch not in _HOST_PUNCT:
            raise BadURL(f"invalid character {ch!r} in host name")
    if host.startswith("["):
        close = host.find("]")
        if close < 0:
            raise BadURL("missing ']' in host")
        port = host[close + 1 :]
    else:
        colon = host.rfind(":")
        port = host[colon:] if colon >= 0 else ""
    if port and (port[0] != ":" or (not port[1:].isdigit() and port != ":")):
        raise BadURL(f"invalid port {port!r} after host")
    if "%" in host and _PERCENT.sub("", host).count("%"):
        raise BadURL("invalid URL escape in host")


def _unescape(path: str) -> str:
    if path.replace("%", "") != path and _PERCENT.sub("", path).count("%"):
        raise BadURL("invalid URL escape in path")
    return _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), path)


def split_host_port(host: str) -> tuple[str, str]:
    """``splitUrl``: ``net.SplitHostPort``, or the whole host and no port when it fails."""
    colon = host.rfind(":")
    if colon < 0:
        return host, ""
    if host.startswith("["):
        close = host.find("]")
        if close < 0 or close + 1 != colon:
            return host, ""
        name = host[1:close]
    else:
        name = host[:colon]
        if ":" in name:  # "too many colons"
            return host, ""
    if "[" in name or "]" in name:
        return host, ""
    return name, host[colon + 1 :]


def urls_match(pattern: str, image: str) -> bool:
    """``URLsMatchStr(pattern, image)``: see the module's docstring. An error is no match."""
    try:
        glob, target = parse_schemeless_url(pattern), parse_schemeless_url(image)
    except BadURL:
        return False
    glob_host, glob_port = split_host_port(glob.host)
    target_host, target_port = split_host_port(target.host)
    if glob_port != target_port:
        return False
    glob_labels, target_labels = glob_host.split("."), target_host.split(".")
    if len(glob_labels) != len(target_labels):
        return False
    if not target.path.startswith(glob.path):
        return False
    return all(
        label_matches(label, name) for label, name in zip(glob_labels, target_labels, strict=True)
    )


def label_matches(pattern: str, label: str) -> bool:
    """``filepath.Match(pattern, label)`` for one host label; a bad pattern matches nothing."""
    try:
        return _glob(pattern).fullmatch(label) is not None
    except BadURL:  # filepath.ErrBadPattern
        return False


def keyring_key(key: str) -> str:
    """Where ``BasicDockerKeyring.Add`` files an ``auth`` key: its host and path, a scheme
    dropped, a leading ``/v1`` or ``/v2`` dropped (Docker's spellings of a bare host)."""
    text = key if key.startswith(("https://", "http://")) else "https://" + key
    parsed = parse_schemeless_url(text.split("://", 1)[1])
    path = parsed.path[3:] if parsed.path.startswith(("/v2/", "/v1/")) else parsed.path
    return parsed.host + path if path not in ("", "/") else parsed.host


def keyring_lookup(entries: Iterable[tuple[str, T]], image: str) -> list[T]:
    """``BasicDockerKeyring.Lookup``: the values of every key that matches ``image``, keys
    in reverse lexical order (so ``quay.io/team`` comes before ``quay.io``), equal keys in the
    order given; else, for a Docker Hub image, the values under ``index.docker.io``. A key Go
    could not parse is left out, as ``Add`` leaves it out."""
    index: dict[str, list[T]] = {}
    for key, value in entries:
        try:
            index.setdefault(keyring_key(key), []).append(value)
        except BadURL:
            continue
    found = [v for k in sorted(index, reverse=True) if urls_match(k, image) for v in index[k]]
    if not found and is_default_registry_match(image):
        found = list(index.get("index.docker.io", ()))
    return found


def is_default_registry_match(image: str) -> bool:
    """``isDefaultRegistryMatch``: whether ``image`` is pulled from Docker Hub."""
    first, slash, _ = image.partition("/")
    if not first:
        return False
    if not slash or first in ("docker.io", "index.docker.io"):
        return True
    return not any(ch in first for ch in ".:")


@lru_cache(maxsize=1024)
def _glob(pattern: str) -> re.Pattern[str]:
    """Go's ``filepath.Match`` pattern as a regular expression (``/`` is the separator that
    ``*`` and ``?`` do not cross). Raises :class:`BadURL` where Go says ``ErrBadPattern``."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            text, i = _char_class(pattern, i + 1)
            out.append(text)
            continue
        else:
            if ch == "\\":
                i += 1
                if i == len(pattern):
                    raise BadURL("bad pattern")
            out.append(re.escape(pattern[i]))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def _char_class(pattern: str, i: int) -> tuple[str, int]:
    negate = i < len(pattern) and pattern[i] == "^"
    i += negate
    ranges: list[str] = []
    while True:
        if i < len(pattern) and pattern[i] == "]" and ranges:
            break
        lo, i = _class_char(pattern, i)
        hi = lo
        if i < len(pattern) and pattern[i] == "-":
            hi, i = _class_char(pattern, i + 1)
        # Go accepts lo > hi as a range that matches nothing; a regex would refuse it.
        ranges.append(f"{re.escape(lo)}-{re.escape(hi)}" if lo <= hi else "")
    body = "".join(ranges)
    if not body:
        return ("[^\\s\\S]" if not negate else "[\\s\\S]"), i + 1
    return f"[{'^' if negate else ''}{body}]", i + 1


def _class_char(pattern: str, i: int) -> tuple[str, int]:
    if i >= len(pattern) or pattern[i] in "-]":
        raise BadURL("bad pattern")
    if pattern[i] == "\\":
        i += 1
        if i >= len(pattern):
            raise BadURL("bad pattern")
    return pattern[i], i + 1
