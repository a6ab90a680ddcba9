"""Where credentials come from: :class:`Credentials` values answered by *keychains*.

A keychain answers one question, "which credentials should be offered to this registry
for this repository?", with an ordered list of candidates (empty: go anonymous). Sources
compose through :class:`ChainKeychain`, whose order is the documented precedence.

Everything is read and validated when a keychain is built, so a broken file is a one-line
:class:`~imagecheck.errors.CredentialsError` before any request is sent.
"""

from __future__ import annotations

import base64
import binascii
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from imagecheck import bounded
from imagecheck.credhelper import HelperAnswer, run_helper
from imagecheck.errors import CredentialsError
from imagecheck.reference import Reference

# Docker keeps Docker Hub credentials under this legacy v1 URL (docker/cli registry.IndexServer).
DOCKER_HUB_CONFIG_KEY = "https://index.docker.io/v1/"
_HUB_HOSTS = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})


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


def _control(ch: str) -> bool:
    return unicodedata.category(ch) == "Cc"


class Keychain(Protocol):
    """Answers which credentials to offer for a reference, most preferred first."""

    def resolve(self, reference: Reference) -> Sequence[Credentials]: ...


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


@dataclass(frozen=True)
class CachingKeychain:
    """Remembers each answer, so a credential helper runs once per registry and repository.

    The CLI resolves every reference through it *before* any request, so a broken helper or
    secret is a usage error (exit 2) and helpers never block the event loop later.
    """

    keychain: Keychain
    _seen: dict[tuple[str, str], Sequence[Credentials]] = field(default_factory=dict)

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        key = (reference.registry, reference.repository)
        if key not in self._seen:
            self._seen[key] = tuple(self.keychain.resolve(reference))
        return self._seen[key]


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
        return host in _HUB_HOSTS
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


def decode_auth_entry(entry: Any, *, where: str) -> Credentials:
    """One ``auths`` entry (``auth``, ``username``/``password``, ``identitytoken``,
    ``registrytoken``) as :class:`Credentials`. ``where`` names the file for errors."""
    if not isinstance(entry, dict):
        raise CredentialsError(f"{where}: expected an object with credentials")
    username = _str_field(entry, "username", where)
    password = _str_field(entry, "password", where)
    encoded = _str_field(entry, "auth", where)
    if encoded:
        try:
            decoded = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise CredentialsError(f"{where}: 'auth' is not valid base64") from None
        if ":" not in decoded:
            raise CredentialsError(f"{where}: 'auth' must encode 'username:password'")
        username, password = decoded.split(":", 1)
    return Credentials(
        username=username,
        password=password,
        identity_token=_str_field(entry, "identitytoken", where),
        registry_token=_str_field(entry, "registrytoken", where),
        source=where,
    )


def _str_field(entry: dict[str, Any], name: str, where: str) -> str:
    value = entry.get(name, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CredentialsError(f"{where}: '{name}' must be a string")
    return value


def load_json_file(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``, or a one-line :class:`CredentialsError` naming it."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CredentialsError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_json_object(raw, str(path))


def parse_json_object(text: str | bytes, where: str) -> dict[str, Any]:
    """A JSON object from ``text``, or a one-line :class:`CredentialsError` naming ``where``
    (also for 60,000-deep nesting or a 5,000-digit number: never a traceback)."""
    return bounded.parse_json_object(text, where, error=CredentialsError)


@dataclass(frozen=True)
class AuthsKeychain:
    """Credentials from a Docker ``config.json`` or podman ``auth.json``: its ``auths`` map,
    and its credential helpers (``credHelpers`` per registry, ``credsStore`` for all).

    As in docker/cli, a registry's helper comes first; when it has nothing for the registry,
    an inline ``auths`` entry still counts (Docker would stop there; users keep both).
    """

    entries: Sequence[tuple[str, Credentials]]
    creds_store: str = ""
    cred_helpers: Mapping[str, str] = field(default_factory=dict)
    where: str = ""

    def resolve(self, reference: Reference) -> Sequence[Credentials]:
        helper = self._helper_for(reference)
        if helper:
            server = DOCKER_HUB_CONFIG_KEY if reference.is_docker_hub else reference.registry
            answer = run_helper(helper, server)
            if answer is not None:
                return (_from_helper(answer),)
        best: tuple[int, Credentials] | None = None
        for key, creds in self.entries:
            fit = namespace_match(key, reference)
            if fit >= 0 and (best is None or fit > best[0]):
                best = (fit, creds)
        return (best[1],) if best else ()

    def _helper_for(self, reference: Reference) -> str:
        for key, helper in self.cred_helpers.items():
            if registry_matches(key, reference):
                return helper
        return self.creds_store

    @classmethod
    def from_auths(cls, auths: Any, *, where: str) -> AuthsKeychain:
        return cls.from_config({"auths": auths}, where=where)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, where: str) -> AuthsKeychain:
        auths = config.get("auths")
        if auths is None:
            auths = {}
        if not isinstance(auths, dict):
            raise CredentialsError(f"{where}: 'auths' must be an object")
        entries = [
            (key, decode_auth_entry(value, where=f"{where} (auths.{key})"))
            for key, value in auths.items()
        ]
        # An exact key wins over its URL spellings: sort bare hosts first, stably.
        entries.sort(key=lambda item: "://" in item[0])
        store = config.get("credsStore") or ""
        helpers = config.get("credHelpers") or {}
        if not isinstance(store, str):
            raise CredentialsError(f"{where}: 'credsStore' must be a string")
        if not isinstance(helpers, dict) or not all(isinstance(v, str) for v in helpers.values()):
            raise CredentialsError(f"{where}: 'credHelpers' must map registries to helper names")
        return cls(tuple(entries), store, dict(helpers), where)

    @classmethod
    def from_file(cls, path: Path) -> AuthsKeychain:
        return cls.from_config(load_json_file(path), where=str(path))

    @classmethod
    def from_json_text(cls, text: str, *, where: str) -> AuthsKeychain:
        return cls.from_config(parse_json_object(text, where), where=where)


def _from_helper(answer: HelperAnswer) -> Credentials:
    source = f"credential helper {answer.helper}"
    if answer.is_identity_token:
        return Credentials(identity_token=answer.secret, source=source)
    return Credentials(username=answer.username, password=answer.secret, source=source)
