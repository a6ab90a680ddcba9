"""A ``hosts.toml`` host key or ``server`` value as containerd 1.6 reads it.

containerd (``remotes/docker/config/hosts.go``, ``parseHostConfig``) puts ``https://`` before a
value that does not start with ``http``, parses the result with Go's ``net/url`` and keeps the
scheme, the ``host[:port]`` and the path; the path gets ``/v2`` appended unless it already ends
so or ``override_path`` is set. Requests then go to ``path.Join("/", path, name, ...)``
(``remotes/docker/resolver.go``, ``request``), so the path kept here is that cleaned prefix:
``""`` for a registry answering at the root.

Go's parser is followed where it decides the outcome: a scheme is letters, digits, ``+-.``
before the first ``:``, lowercased; an authority follows ``//`` up to the next ``/``, userinfo
is dropped, a port is digits. What Go refuses (control characters, a bad port, characters a
host may not hold) is refused here. So are schemes other than http and https and a ``[host]``
key without a host, which Go accepts but no request can use.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from urllib.parse import unquote

from imagecheck.routes._types import Scheme

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_PORT = re.compile(r":[0-9]*")
# Characters Go's net/url leaves unescaped in a host (shouldEscape, encodeHost), and ``%``.
_HOST = re.compile(r"[A-Za-z0-9\-_.~!$&'()*+,;=:\[\]<>\"%]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SCHEMES: dict[str, Scheme] = {"https": "https", "http": "http"}


@dataclass(frozen=True, slots=True)
class HostURL:
    """Where requests go: ``scheme://host`` + ``path`` + ``/<name>/manifests/<ref>``. An empty
    ``host`` (a ``server`` with none) stands for the registry's default endpoint."""

    scheme: Scheme
    host: str
    path: str


class URLProblem(ValueError):
    """Why a value is not a host containerd could ask."""


def parse_host_url(value: str, *, override_path: bool) -> HostURL:
    """The endpoint ``value`` names, or :class:`URLProblem`."""
    text = value if value.startswith("http") else "https://" + value
    if _CONTROL.search(text):
        raise URLProblem("a control character in the URL")
    text = text.split("#", 1)[0].split("?", 1)[0]
    scheme, rest = _split_scheme(text)
    host, raw_path = "", ""
    if rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        host = _host(authority.rpartition("@")[2])
        raw_path = slash + tail
    elif not rest.startswith("/") and scheme:
        rest = ""  # Go: an opaque URL ("http:name"), no host and no path
    else:
        raw_path = rest
    known = _SCHEMES.get(scheme)
    if known is None:
        raise URLProblem(f"scheme {scheme or '(none)'!r} is not http or https")
    return HostURL(known, host, _api_root(unquote(raw_path), override_path=override_path))


def _split_scheme(text: str) -> tuple[str, str]:
    # Go's getScheme: a character that cannot be in a scheme before any ":" means no scheme.
    match = _SCHEME.match(text)
    if match is None:
        return "", text
    return match.group(1).lower(), text[match.end() :]


def _host(host: str) -> str:
    if host.startswith("["):
        end = host.find("]")
        if end < 0:
            raise URLProblem("missing ']' in host")
        port = host[end + 1 :]
    else:
        colon = host.rfind(":")
        port = host[colon:] if colon >= 0 else ""
    if not _PORT.fullmatch(port or ":"):
        raise URLProblem(f"invalid port {port!r}")
    if not _HOST.fullmatch(host):
        raise URLProblem(f"invalid character in host name {host!r}")
    return host


def _api_root(path: str, *, override_path: bool) -> str:
    if path:
        path = _clean(path)
        if not path.endswith("/v2") and not override_path:
            path += "/v2"
    elif not override_path:
        path = "/v2"
    # The prefix requests are joined to, cleaned as Go's path.Join cleans it.
    root = _clean("/" + path)
    return "" if root == "/" else root


def _clean(path: str) -> str:
    """Go's ``path.Clean``: POSIX's normpath but one leading slash, never two."""
    cleaned = posixpath.normpath(path)
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned
