"""The field rules of an image reference, each with its one-line message: which registry
hosts, ports, repository paths, tags and digests the kubelet and containerd accept (see
:mod:`imagecheck.reference._reference` for the grammar and the cases). Pure: no I/O.
"""

from __future__ import annotations

import ipaddress
import json
import re

_PATH_MAX = 255  # distribution's RepositoryNameTotalLengthMax: the path, not the domain
_TAG_MAX = 128

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_DOMAIN_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")  # also covers dotted IPv4
# distribution only allows hex digits and colons inside the brackets: no zone
# identifiers ("%eth0") and no embedded IPv4 ("::ffff:1.2.3.4").
_IPV6_CHARS = re.compile(r"[0-9A-Fa-f:]+")
_PORT = re.compile(r"[0-9]{1,5}")
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_ALGORITHM = re.compile(r"[a-z0-9]+(?:[+._-][a-z0-9]+)*")
_LOWER_HEX = re.compile(r"[0-9a-f]+")

# The algorithms go-digest v1.0.0 (vendored by the kubelet and containerd) knows, with the
# exact length of their lowercase-hex encoding (algorithm.go). Any other algorithm, blake3
# included, is "unsupported digest algorithm" there: the kubelet refuses the image name.
_SUPPORTED_DIGESTS = {"sha256": 64, "sha384": 96, "sha512": 128}


def field_problem(
    registry: str, repository: str, tag: str | None, digest: str | None
) -> str | None:
    """The first problem with a reference's fields, or None. The fields come one by one, not
    as a ``Reference``, so that the value type depends on its rules and not the other way."""
    if tag is None and digest is None:
        return "a reference needs a tag or a digest"
    return (
        _registry_problem(registry)
        or _repository_problem(repository)
        or _path_length_problem(registry, repository)
        or (None if tag is None else _tag_problem(tag))
        or (None if digest is None else _digest_problem(digest))
    )


def split_port(registry: str) -> tuple[str, str | None]:
    """Split ``host[:port]``; an IPv6 host keeps its brackets.

    Never fails: malformed input comes back in a shape the host check rejects.
    """
    if registry.startswith("["):
        end = registry.find("]")
        host, rest = registry[: end + 1], registry[end + 1 :]
        if end == -1 or not rest:
            return registry, None
        return (host, rest[1:]) if rest.startswith(":") else (registry, None)
    if registry.count(":") > 1:
        return registry, None  # an unbracketed IPv6 address
    host, colon, port = registry.partition(":")
    return host, (port if colon else None)


def _registry_problem(registry: str) -> str | None:
    host, port = split_port(registry)
    if port is not None and (not _PORT.fullmatch(port) or not 1 <= int(port) <= 65535):
        return f"invalid port {_quote(port)}: must be a number from 1 to 65535"
    if _path_host(registry):
        return None
    return _host_problem(host)


def _path_host(registry: str) -> bool:
    """distribution's quirk: in ``my_host.lan/app`` the first component is no domain for its
    grammar, but the whole name is a valid path, so the kubelet accepts it (with domain "",
    the path measured whole), and containerd asks its first component, ``my_host.lan``, as
    the host (``reference.Spec.Hostname``)."""
    return bool(_PATH_COMPONENT.fullmatch(registry)) and not _DOMAIN_NAME.fullmatch(registry)


def _host_problem(host: str) -> str | None:
    if host.startswith("["):
        return _ipv6_problem(host)
    if ":" in host:
        return (
            f"invalid registry host {_quote(host)}: more than one ':' "
            "(an IPv6 address must be in brackets, e.g. [::1]:5000)"
        )
    if not _DOMAIN_NAME.fullmatch(host):
        return (
            f"invalid registry host {_quote(host)}: use dot-separated labels of letters, "
            "digits and inner hyphens"
        )
    return None


def _ipv6_problem(host: str) -> str | None:
    inner = host[1:-1]
    if host.endswith("]") and _IPV6_CHARS.fullmatch(inner):
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            pass
        else:
            return None
    return (
        f"invalid IPv6 registry host {_quote(host)}: expected e.g. [::1] or [::1]:5000 "
        "(no zone IDs, no embedded IPv4)"
    )


def _path_length_problem(registry: str, repository: str) -> str | None:
    """The path alone (``library/`` included), not the registry, as distribution's ``Parse``
    measures it; with the registry when that is part of the path (``_path_host``)."""
    path = f"{registry}/{repository}" if _path_host(registry) else repository
    if len(path) > _PATH_MAX:
        return f"repository path is longer than {_PATH_MAX} characters"
    return None


def _repository_problem(repository: str) -> str | None:
    if not repository:
        return "missing repository name"
    if repository != repository.lower():
        return "uppercase letters are not allowed in repository names"
    for component in repository.split("/"):
        if not component:
            return "empty path component (two slashes in a row?)"
        if not _PATH_COMPONENT.fullmatch(component):
            return (
                f"invalid path component {_quote(component)}: use lowercase letters and "
                "digits, joined by single '.', '_' or '__', or by dashes"
            )
    return None


def _tag_problem(tag: str) -> str | None:
    if not tag:
        return "empty tag after ':'"
    if len(tag) > _TAG_MAX:
        return f"tag is longer than {_TAG_MAX} characters"
    if not _TAG.fullmatch(tag):
        if ":" in tag:
            return f"invalid tag {_quote(tag)}: a digest goes after '@', not ':'"
        return (
            f"invalid tag {_quote(tag)}: use letters, digits, '_', '.' and '-', "
            "not starting with '.' or '-'"
        )
    return None


def _digest_problem(digest: str) -> str | None:
    if not digest:
        return "empty digest after '@'"
    algorithm, colon, encoded = digest.partition(":")
    if not (algorithm and colon and encoded):
        return f"invalid digest {_quote(digest)}: expected algorithm:encoded, e.g. sha256:<hex>"
    if not _ALGORITHM.fullmatch(algorithm):
        return (
            f"invalid digest {_quote(digest)}: the algorithm must be lowercase letters and "
            "digits, joined by '+', '.', '_' or '-'"
        )
    length = _SUPPORTED_DIGESTS.get(algorithm)
    if length is None:
        return (
            f"unsupported digest algorithm {_quote(algorithm)}: the kubelet and containerd "
            "accept sha256, sha384 and sha512"
        )
    if len(encoded) != length or not _LOWER_HEX.fullmatch(encoded):
        return (
            f"invalid digest {_quote(digest)}: {algorithm} digests are {length} "
            "lowercase hex characters"
        )
    return None


def _quote(value: str, limit: int = 80) -> str:
    """Double-quote a value for a one-line message, shortening long ones."""
    if len(value) > limit:
        value = value[: limit - 3] + "..."
    return json.dumps(value, ensure_ascii=False)
