"""Image references: parsed once, into an immutable value.

The grammar is the one Docker, containerd and the Distribution registry share
(https://github.com/distribution/reference/blob/main/reference.go)::

    reference  := name [ ":" tag ] [ "@" digest ]
    name       := [ domain "/" ] path-component [ "/" path-component ]*
    domain     := host [ ":" port ]          host: DNS labels, IPv4, or "[" IPv6 "]"
    path-component := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
    tag        := [A-Za-z0-9_] [A-Za-z0-9_.-]{0,127}

and the digest is one go-digest v1.0.0 knows
(https://github.com/opencontainers/go-digest/blob/v1.0.0/algorithm.go)::

    digest     := ( "sha256" | "sha384" | "sha512" ) ":" lowercase hex of 64 | 96 | 128

What is accepted, and how it is split, is what the kubelet and containerd decide:
``ParseNormalizedNamed`` of distribution/reference v0.6.0 (normalize.go, reference.go,
regexp.go), with go-digest v1.0.0 checking the digest. Case for case:

* the first component is a registry when it contains ``.`` or ``:``, is exactly
  ``localhost``, or has an uppercase letter (``Foo/bar`` is host ``Foo``, path ``bar``);
  otherwise the whole name is a Docker Hub repository (``splitDockerDomain``); a dotted
  first component that is no host name but a path component (``my_host.lan/app``) is a
  registry too (see ``_rules._path_host``);
* exactly ``docker.io`` and ``index.docker.io`` (no other spelling, not
  ``registry-1.docker.io``) are Docker Hub, named ``docker.io``; a one-component Hub
  repository is an official image under ``library/``; no tag and no digest means ``latest``;
* the 255-character limit is on the repository path alone (``library/`` included), not on
  the registry (``RepositoryNameTotalLengthMax``);
* a digest is ``sha256``, ``sha384`` or ``sha512`` (``blake3`` and the rest are
  "unsupported digest algorithm" there).

Deliberately stricter (the kubelet accepts these, and the pull then fails to connect): a
port outside 1-65535, and a bracketed IPv6 host that is not an IPv6 address (``[1:2:3]``).

``Reference.__post_init__`` validates every field, so a value changed with
``dataclasses.replace`` is checked exactly as a parsed one is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from imagecheck.errors import InvalidReferenceError
from imagecheck.reference._rules import field_problem, split_port

__all__ = [
    "DEFAULT_TAG",
    "DOCKER_HUB",
    "DOCKER_HUB_ALIASES",
    "DOCKER_HUB_API_HOST",
    "DOCKER_HUB_INDEX",
    "Reference",
    "parse_reference",
]

# Docker Hub's names, here and nowhere else.
DOCKER_HUB = "docker.io"
# docker.io is the name users see; the registry API itself answers on registry-1.
DOCKER_HUB_API_HOST = "registry-1.docker.io"
# distribution's legacyDefaultDomain: the only other spelling normalised to docker.io; also
# the host of the key Docker and the kubelet keep Hub credentials under.
DOCKER_HUB_INDEX = "index.docker.io"
# Every spelling of a Hub host whose credentials are the Hub's.
DOCKER_HUB_ALIASES = frozenset({DOCKER_HUB, DOCKER_HUB_INDEX, DOCKER_HUB_API_HOST})
DEFAULT_TAG = "latest"
# A bare image ID; Docker refuses it as a name because it is ambiguous.
_IMAGE_ID = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class Reference:
    """A validated image reference; build it with :func:`parse_reference`.

    Constructing one directly validates the fields but does not normalise them
    (no ``library/`` prefix, no Hub alias folding): that is the parser's job.
    """

    registry: str
    repository: str
    tag: str | None
    digest: str | None

    def __post_init__(self) -> None:
        reason = field_problem(self.registry, self.repository, self.tag, self.digest)
        if reason is not None:
            raise InvalidReferenceError(str(self), reason)

    @property
    def is_docker_hub(self) -> bool:
        """Whether Docker Hub's credentials apply (config.json's ``index.docker.io`` entry):
        any spelling of a Hub host."""
        return self.registry.lower() in DOCKER_HUB_ALIASES

    @property
    def api_host(self) -> str:
        """The ``host[:port]`` to send HTTP requests to: ``docker.io`` (exactly, as
        containerd's ``ConfigureHosts`` compares it, remotes/docker/config/hosts.go) is
        ``registry-1.docker.io``; every other registry is asked as written."""
        return DOCKER_HUB_API_HOST if self.registry == DOCKER_HUB else self.registry

    @property
    def hostname(self) -> str:
        """The registry host without port, IPv6 brackets removed."""
        host, _ = split_port(self.registry)
        return host[1:-1] if host.startswith("[") else host

    @property
    def port(self) -> int | None:
        _, port = split_port(self.registry)
        return None if port is None else int(port)

    @property
    def identifier(self) -> str:
        """What goes in ``/v2/<name>/manifests/<identifier>``: the digest wins over the tag."""
        # __post_init__ guarantees at least one of the two is set.
        return self.digest if self.digest is not None else str(self.tag)

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    def __str__(self) -> str:
        text = self.name
        if self.tag is not None:
            text += f":{self.tag}"
        if self.digest is not None:
            text += f"@{self.digest}"
        return text


def parse_reference(text: str) -> Reference:
    """Parse ``text`` into a normalised :class:`Reference`.

    Raises :class:`InvalidReferenceError` with a one-line reason for any input
    outside the grammar.
    """
    reason = _text_problem(text)
    if reason is not None:
        raise InvalidReferenceError(text, reason)
    rest, digest = _split_digest(text)
    name, tag = _split_tag(rest)
    reason = _name_shape_problem(name)
    if reason is not None:
        raise InvalidReferenceError(text, reason)
    registry, repository = _normalize(*_split_registry(name))
    if tag is None and digest is None:
        tag = DEFAULT_TAG
    try:
        return Reference(registry, repository, tag, digest)
    except InvalidReferenceError as exc:
        # Report the text the user gave, not the normalised form.
        raise InvalidReferenceError(text, exc.reason) from None


# --- splitting the text ------------------------------------------------------


def _text_problem(text: str) -> str | None:
    """Problems visible before splitting: the usual copy-and-paste mistakes."""
    if not text:
        return "empty reference"
    if any(char.isspace() for char in text):
        return "whitespace is not allowed (check for spaces or a newline pasted with it)"
    if "://" in text:
        return "a scheme such as https:// is not part of an image reference"
    if _IMAGE_ID.fullmatch(text):
        return "a 64-character hex string is an image ID, not a reference"
    if text.count("@") > 1:
        return "only one '@' is allowed, before the digest"
    return None


def _split_digest(text: str) -> tuple[str, str | None]:
    rest, at, digest = text.partition("@")
    return rest, (digest if at else None)


def _split_tag(rest: str) -> tuple[str, str | None]:
    """Split off ``:tag``; only a colon after the last slash starts a tag.

    A colon before it belongs to the registry port. Like Docker, a bare
    ``localhost:5000`` is therefore the Hub image ``localhost`` tagged ``5000``.
    """
    colon = rest.find(":", rest.rfind("/") + 1)
    if colon == -1:
        return rest, None
    return rest[:colon], rest[colon + 1 :]


def _name_shape_problem(name: str) -> str | None:
    if not name:
        return "missing repository name"
    if name.startswith("/"):
        return "repository name must not start with a slash"
    if name.endswith("/"):
        return "repository name must not end with a slash"
    if name.startswith("[") and "/" not in name:
        return "a registry must be followed by /repository, e.g. [::1]:5000/app"
    return None


def _split_registry(name: str) -> tuple[str | None, str]:
    """Split off the registry, if the first component is one: distribution's
    ``splitDockerDomain`` (normalize.go), case for case.

    It is a registry when it is exactly ``localhost``, has a "." or a ":", or has an
    uppercase letter (repository paths are lowercase, so ``Foo/bar`` names host ``Foo``);
    otherwise the whole name is a Docker Hub repository.
    """
    first, slash, remainder = name.partition("/")
    if slash and (first == "localhost" or "." in first or ":" in first or first != first.lower()):
        return first, remainder
    return None, name


def _normalize(registry: str | None, path: str) -> tuple[str, str]:
    """Docker Hub is ``docker.io`` or ``index.docker.io`` spelled exactly so; only there does a
    one-component path become an official image under ``library/``."""
    if registry is None or registry == DOCKER_HUB_INDEX:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    return registry, path
