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
host may not hold) is refused here. So are schemes other than http and https (``ftp://h``,
which Go would read as the host ``ftp:``) and a ``[host]`` key without a host, which Go accepts
but no request can use.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from imagecheck.authn._urlmatch import BadURL, parse_schemeless_url
from imagecheck.routes._types import Scheme

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):")
_OTHER_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
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
    other = _OTHER_SCHEME.match(value)
    if other is not None and not value.startswith("http"):
        # Go would read "ftp://h" (or "HTTP://h": containerd's prefix test is case-sensitive)
        # as the host "ftp:" after the "https://" containerd puts first.
        raise URLProblem(f"scheme {other.group(1)!r} is not http or https")
    text = value if value.startswith("http") else "https://" + value
    match = _SCHEME.match(text)
    scheme = _SCHEMES.get(match.group(1).lower()) if match else None
    if scheme is None:
        raise URLProblem(f"scheme {match.group(1) if match else '(none)'!r} is not http or https")
    rest = text[match.end() :] if match else text
    if not rest.startswith("//"):
        return HostURL(scheme, "", "/v2")  # Go: "http:name" has neither host nor path
    try:
        # The authority and path, as Go's url.Parse reads them (shared with the kubelet's
        # image matching, which parses the same way).
        parsed = parse_schemeless_url(rest[2:])
    except BadURL as exc:
        raise URLProblem(str(exc)) from None
    return HostURL(scheme, parsed.host, _api_root(parsed.path, override_path=override_path))


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
