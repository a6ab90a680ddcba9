"""Where credentials come from: :class:`Credentials` values answered by *keychains*.

A keychain answers one question, "which credentials should be offered to this registry
for this repository?", with an ordered list of candidates (empty: go anonymous). Sources
compose through :class:`ChainKeychain`, whose order is the documented precedence.

Everything is read and validated when a keychain is built, so a broken file is a one-line
:class:`~imagecheck.errors.CredentialsError` before any request is sent. Credential helpers
are the exception: they are asked on first need, once per registry, inside the deadline
(:meth:`AsyncKeychain.aresolve`, see ``credhelper.py``). The config.json / auth.json keychain
is in ``authfiles.py``.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from imagecheck._deadline import Deadline
from imagecheck.errors import CredentialsError
from imagecheck.reference import DOCKER_HUB_ALIASES, Reference


@dataclass(frozen=True, slots=True)
class Credentials:
    """Secrets for one registry. Secret fields never show in ``repr`` (and so in logs).

    Every value must be sendable (:func:`secret_problem`, :func:`bearer_problem`): a
    :class:`CredentialsError` naming the source, never the value, otherwise.
    """

    username: str = ""
    password: str = field(default="", repr=False)
    identity_token: str = field(default="", repr=False)
    registry_token: str = field(default="", repr=False)
    source: str = ""  # where they came from, for messages: never secret

    def __post_init__(self) -> None:
        checks = (
            ("username", secret_problem(self.username)),
            ("password", secret_problem(self.password)),
            ("identitytoken", secret_problem(self.identity_token)),
            ("registrytoken", bearer_problem(self.registry_token) if self.registry_token else None),
        )
        for name, problem in checks:
            if problem is not None:
                raise CredentialsError(f"{self.source or 'credentials'}: the {name} {problem}")

    @property
    def has_basic(self) -> bool:
        return bool(self.username or self.password)

    def secrets(self) -> list[str]:
        """Every secret string this value holds (for redaction)."""
        return [s for s in (self.password, self.identity_token, self.registry_token) if s]


def secret_problem(value: str) -> str | None:
    """What makes ``value`` unusable as a secret, or ``None``: a control character (other than
    tab), as a trailing newline from ``echo`` or a NUL. HTTP cannot carry it in a header
    (h11 refuses it, quoting the value in its message), and no registry issued it."""
    if any(_control(ch) and ch != "\t" for ch in value):
        return "contains a control character (a trailing newline?)"
    return None


def bearer_problem(value: str) -> str | None:
    """What makes ``value`` unusable as a bearer token, which goes into the ``Authorization``
    header as it is (RFC 6750 section 2.1: no whitespace, no control characters), or ``None``."""
    if any(_control(ch) or ch.isspace() for ch in value):
        return "contains whitespace or a control character (a trailing newline?)"
    return None


def header_problem(value: str) -> str | None:
    """What makes ``value`` unusable as an HTTP header value as it is (an ``Authorization``
    token sent without encoding), or ``None``: anything but printable ASCII and tab/space
    inside (RFC 9110 section 5.5 allows obs-text, which no token service issues)."""
    if not value.isascii() or any(_control(ch) and ch != "\t" for ch in value):
        return "contains a character an HTTP header cannot carry (non-ASCII, or control)"
    return None


def _control(ch: str) -> bool:
    return unicodedata.category(ch) == "Cc"


class Keychain(Protocol):
    """Answers which credentials to offer for a reference, most preferred first."""

    def resolve(self, reference: Reference) -> Sequence[Credentials]: ...


@runtime_checkable
class AsyncKeychain(Keychain, Protocol):
    """A keychain that may have to run something to answer (a credential helper): the
    checker asks it with ``aresolve``, on the event loop and inside the check's deadline."""

    async def aresolve(self, reference: Reference, deadline: Deadline) -> Sequence[Credentials]: ...


async def resolve_credentials(
    keychain: Keychain, reference: Reference, deadline: Deadline
) -> Sequence[Credentials]:
    """``keychain``'s answer for ``reference``: asynchronously, within ``deadline``, when it
    may run a helper; at once otherwise. (An ``aresolve`` attribute tells, as the protocol's
    ``isinstance`` would, at a fraction of its cost per check.)"""
    aresolve = getattr(keychain, "aresolve", None)
    if aresolve is not None:
        answer: Sequence[Credentials] = await aresolve(reference, deadline)
        return answer
    return keychain.resolve(reference)


def unanswered(keychain: Keychain, reference: Reference) -> str | None:
    """Why ``keychain`` offered nothing for a registry that then refused anonymous access, when
    one of its sources knows (an optional ``unanswered`` method): "no AWS identity in this
    process", where the kubelet would have had the node's. None when nothing is known."""
    explain = getattr(keychain, "unanswered", None)
    if explain is None:
        return None
    reason: str | None = explain(reference)
    return reason


class AnonymousKeychain:
    """Offers nothing: every request goes anonymous."""

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        return ()


@dataclass(frozen=True)
class StaticKeychain:
    """The same credentials for every registry (``--username`` / ``--password-stdin``).

    ``registry`` limits them to one host, so they are not offered to another.
    """

    credentials: Credentials
    registry: str | None = None

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        if self.registry is not None and not registry_matches(self.registry, reference):
            return ()
        return (self.credentials,)


@dataclass(frozen=True)
class ChainKeychain:
    """The first keychain with an answer wins: order is precedence."""

    keychains: Sequence[Keychain]

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        for keychain in self.keychains:
            found = keychain.resolve(reference)
            if found:
                return found
        return ()

    async def aresolve(self, reference: Reference, deadline: Deadline) -> Sequence[Credentials]:
        for keychain in self.keychains:
            found = await resolve_credentials(keychain, reference, deadline)
            if found:
                return found
        return ()

    def unanswered(self, reference: Reference) -> str | None:
        for keychain in self.keychains:
            reason = unanswered(keychain, reference)
            if reason is not None:
                return reason
        return None


@dataclass(frozen=True, slots=True)
class RegistryKey:
    """A credentials key (``https://host:port/path``) reduced to what matching needs."""

    host: str  # lower-cased; in pull secrets it may hold globs
    port: str
    path: str  # "" or "/team/..."

    @property
    def text(self) -> str:
        return self.host + (f":{self.port}" if self.port else "") + self.path


def parse_registry_key(key: str) -> RegistryKey:
    """Drop the scheme, and a ``/v1/`` or ``/v2/`` path (Docker's own spellings of a bare
    host, e.g. ``https://index.docker.io/v1/``); keep any other path as a namespace."""
    text = key.strip()
    for scheme in ("https://", "http://"):
        if text.lower().startswith(scheme):
            text = text[len(scheme) :]
            break
    hostport, _, path = text.partition("/")
    path = "/" + path if path else ""
    if path.startswith(("/v1/", "/v2/")) or path in ("/v1", "/v2"):
        path = path[3:]
    path = path.rstrip("/")
    host, port = _split_port(hostport.lower())
    return RegistryKey(host, port, path)


def _split_port(hostport: str) -> tuple[str, str]:
    if hostport.startswith("["):  # [::1]:5000
        host, _, rest = hostport.partition("]")
        return host + "]", rest.lstrip(":")
    host, sep, port = hostport.rpartition(":")
    return (host, port) if sep and port.isdigit() else (hostport, "")


def config_key_host(key: str) -> str:
    """The ``host[:port]`` of a config.json ``auths`` key, which may be a URL or a bare host."""
    parsed = parse_registry_key(key)
    return parsed.host + (f":{parsed.port}" if parsed.port else "")


def registry_matches(key: str, reference: Reference) -> bool:
    """Whether a config key names the registry of ``reference`` (Docker Hub aliases included)."""
    host = config_key_host(key)
    if reference.is_docker_hub:
        return host in DOCKER_HUB_ALIASES
    return host == reference.registry.lower()


def namespace_match(key: str, reference: Reference) -> int:
    """How well a config/auth.json key fits: -1 not at all, else the length of its path.

    Podman's auth.json allows ``registry/namespace`` keys; the longest matching one wins
    (containers-auth.json(5)). The path must end at a ``/`` boundary of the repository.
    """
    if not registry_matches(key, reference):
        return -1
    path = parse_registry_key(key).path
    repo = "/" + reference.repository
    if not path or repo == path or repo.startswith(path + "/"):
        return len(path)
    return -1
